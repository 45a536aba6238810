"""Reading user-given text files with one clear error per problem."""

from __future__ import annotations

from pathlib import Path

from vocalis.errors import InputError


def read_utf8(path: str | Path, what: str = "text file") -> str:
    """The content of a UTF-8 text file.

    Raises:
        InputError: missing file, a directory, unreadable, or not UTF-8 (names ``what``).
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"{what} {'is a directory' if p.is_dir() else 'not found'}: {p}")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{what} {p} is not UTF-8 (byte 0x{e.object[e.start]:02X} at offset "
                         f"{e.start}): save it as UTF-8 (e.g. `iconv -f LATIN1 -t UTF-8`)") from None
    except OSError as e:
        raise InputError(f"cannot read {what} {p}: {e.strerror or e}") from None
