"""Files and folders vocalis writes for its users: with the usual permissions (``0666`` /
``0777`` less the umask, e.g. 0644 / 0755, as ``open()`` and ``mkdir`` give; safetensors
itself creates its files ``0600``), and checkpoint folders put in place whole."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from vocalis.errors import InputError


def umask() -> int:
    """The process umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def usual_permissions(path: str | Path) -> None:
    """Give ``path`` (a file, or a folder and everything in it) the usual permissions."""
    mask = umask()
    p = Path(path)
    for q in [p, *(p.rglob("*") if p.is_dir() else [])]:
        q.chmod((0o777 if q.is_dir() else 0o666) & ~mask)


def save_safetensors(tensors: dict, path: str | Path, metadata: dict | None = None) -> None:
    """``safetensors.torch.save_file`` with the usual permissions. Raises OSError."""
    from safetensors.torch import save_file

    save_file(tensors, str(path), metadata=metadata)
    usual_permissions(path)


def place_folder(out: Path, write: Callable[[Path], None], force: bool,
                 ours: Callable[[Path], bool], what: str = "checkpoint") -> None:
    """Run ``write(tmp)`` into a temporary folder next to ``out``, then move it to ``out``,
    so that an error or an interrupt leaves nothing half-written.

    ``out`` must not exist or be empty; with ``force`` it may hold a folder that ``ours``
    recognizes (written by vocalis), which is then replaced with everything in it.

    Raises:
        InputError: ``out`` is a file, a non-empty folder (without ``force``) or a folder
        ``ours`` does not recognize.
    """
    out = Path(out).expanduser().absolute()
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} exists and is not a folder: choose a folder to write into")
    taken = out.is_dir() and any(out.iterdir())
    if taken and not ours(out):
        raise InputError(f"{out} is not empty and holds no random {what}: choose a new or "
                         f"empty folder (force only replaces a {what} written by vocalis)")
    if taken and not force:
        raise InputError(f"{out} already holds a {what}: choose another folder, or replace "
                         "it with force (`--force`)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        write(tmp)
        usual_permissions(tmp)
        if taken:
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.replace(out, old / "ckpt")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)  # replaces an empty folder too
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
