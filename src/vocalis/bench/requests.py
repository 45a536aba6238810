"""The batch runner's requests file: read and check it before anything runs.

Format: a JSON array of objects ::

    [{"text": "Hello there.", "voice": "alba", "options": {"seed": 42, "temperature": 0.5}},
     {"text": "Another one.", "voice": "prompts/me.wav"}]

``text`` (required): a non-empty string. ``voice`` (optional): a built-in voice name, an
audio file or a saved ``.safetensors`` voice; relative paths are taken relative to the
requests file's folder when they exist there, else to the working directory; missing = the
model's default voice. ``options`` (optional): ``seed`` (an integer in [0, 2**63)) and the
request options of the model's family (``vocalis.load(model).family.options``, the keywords
of :meth:`vocalis.api.TTS.synthesize`: Pocket TTS ``temperature``, ``max_frames``...;
Qwen3-TTS ``speaker``, ``language``, ``instruct``, ``ref_audio``, ``ref_text``...); an option
that names a file (``Option.path``, e.g. ``ref_audio``) is resolved like ``voice``. Nothing
else. ::

    [{"text": "Hi.", "voice": "ryan", "options": {"language": "english", "seed": 1}},
     {"text": "Hi.", "options": {"ref_audio": "me.wav", "ref_text": "What I say.", "seed": 2}}]

Every request is checked in full by the model's family before any model is loaded: the
options by its schema, then :meth:`vocalis.family.ModelInfo.check_request` (the text, the
voice, which options go together), the same checks as every other front end's. Every
problem raises :class:`~vocalis.errors.InputError` (or :class:`~vocalis.errors.VoiceError`)
whose message names the request (its 0-based index in the array): every problem found, one
per line (the first 20, then how many more; see :func:`problems_error`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from vocalis import families
from vocalis.errors import InputError, VocalisError
from vocalis.family import ModelInfo
from vocalis.options import check_seed
from vocalis.text.files import read_utf8

FIELDS = ("text", "voice", "options")
MAX_LISTED = 20  # problems listed one by one; the rest are counted
FORMATS = ('accepted formats: a JSON array of request objects like [{"text": ...}] (any '
           "other extension than those below); with --ray also JSON Lines (.jsonl, .ndjson: "
           "one object per line) and Parquet (.parquet)")


@dataclass
class BatchRequest:
    """One checked request; ``sampling`` = its options without the seed (the family's
    request options, session defaults included)."""

    index: int
    text: str
    voice: str | None = None
    seed: int | None = None
    sampling: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        out = {"text": self.text, "voice": self.voice, "options": dict(self.sampling)}
        if self.seed is not None:
            out["options"]["seed"] = self.seed
        return out


def default_info() -> ModelInfo:
    """The model used when none is named (what a requests file is checked against by
    default)."""
    return families.describe(families.default_model_id())


def _type_name(v) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def anchor(path: str, base: Path | None) -> str:
    """``path`` relative to ``base`` when it exists there, else unchanged."""
    if base is not None and "://" not in path and not Path(path).is_absolute():
        candidate = base / path
        if candidate.exists():
            return str(candidate)
    return path


def _where(where: str, e: VocalisError) -> VocalisError:
    """``e`` with ``where: `` in front of its message, same type (and the same ``problems``
    lines, :func:`problems_error`), no ``param``: the field at fault is one of the requests
    file's, which the message names (not a command line flag, which a CLI would add)."""
    out = type(e)(f"{where}: {e}")
    if getattr(e, "problems", None):  # several (problems_error): the lines go along
        out.problems = e.problems
    return out


def check_options(options: dict, info: ModelInfo, where: str,
                  base: Path | None = None) -> dict:
    """A request's options (without ``seed``) checked by the model's family schema, ``None``
    values dropped; options naming a file (``Option.path``) anchored at ``base``.

    Raises:
        InputError: ``where: ...`` naming the unknown or invalid option.
    """
    schema = info.family.options
    out = {}
    for name, value in options.items():
        if name not in schema:
            raise _where(where, schema.unknown(name, info.name))
        if schema[name].path and value is not None:
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"{where}: {name} must be a file path (a non-empty string), "
                                 f"got {_type_name(value)}", param=name)
            value = anchor(value, base)
        out[name] = value
    try:
        return schema.check(out, info.name)
    except InputError as e:
        raise _where(where, e) from None


def check_one(i: int, item, base: Path | None, info: ModelInfo | None = None,
              defaults: dict | None = None) -> BatchRequest:
    """Check request ``i`` (an object of the file) for the model ``info`` (default: the
    default model); ``base`` anchors relative paths; ``defaults``: request options under the
    request's own (``--session-options``).

    Raises:
        InputError/VoiceError: ``request i: ...`` naming the problem.
    """
    info = info or default_info()
    where = f"request {i}"
    if not isinstance(item, dict):
        raise InputError(f"{where}: must be an object like {{\"text\": ...}}, got {_type_name(item)}")
    unknown = sorted(set(item) - set(FIELDS))
    if unknown:
        raise InputError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}; allowed: "
                         + ", ".join(FIELDS))
    if "text" not in item:
        raise InputError(f"{where}: missing field 'text'")
    text = item["text"]
    if not isinstance(text, str):
        raise InputError(f"{where}: 'text' must be a string, got {_type_name(text)}")
    if not text.strip():
        raise InputError(f"{where}: 'text' is empty: give some words to speak")
    voice = item.get("voice")
    if voice is not None:
        if not isinstance(voice, str):
            raise InputError(f"{where}: 'voice' must be a string (a voice name or file), got "
                             f"{_type_name(voice)}")
        if not voice.strip():
            raise InputError(f"{where}: 'voice' is empty: give a voice name or file, or leave "
                             "it out for the model's default voice")
        voice = anchor(voice, base)
    options = item.get("options", {})
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise InputError(f"{where}: 'options' must be an object like {{\"seed\": 42}}, got "
                         f"{_type_name(options)}")
    options = dict(options)
    try:
        seed = check_seed(options.pop("seed", None))
    except InputError as e:
        raise _where(where, e) from None
    merged = {**(defaults or {}), **check_options(options, info, where, base)}
    try:
        text, seed, _, merged = info.check_request(text, voice, seed, 1.0, merged)
    except VocalisError as e:
        raise _where(where, e) from None
    return BatchRequest(i, text, voice, seed, merged)


def parse_requests(data, base: Path | None = None, info: ModelInfo | None = None,
                   defaults: dict | None = None) -> list[BatchRequest]:
    """Check already-decoded JSON ``data`` for the model ``info`` (default: the default
    model); ``base`` anchors relative voice (and other file) paths; ``defaults``: request
    options under each request's own.

    Raises:
        InputError/VoiceError: the first problem (naming its request) and how many more
        there are.
    """
    if not isinstance(data, list):
        raise InputError(f"requests must be a JSON array of objects like [{{\"text\": ...}}], "
                         f"got {_type_name(data)}")
    if not data:
        raise InputError("requests array is empty: give at least one request")
    info = info or default_info()
    out, problems = [], []
    for i, item in enumerate(data):
        try:
            out.append(check_one(i, item, base, info, defaults))
        except VocalisError as e:
            problems.append(e)
    if problems:
        raise problems_error(problems)
    return out


def problems_error(problems: list[VocalisError], where: str | None = None) -> VocalisError:
    """One error for the ``problems`` of a requests file (each message names its request;
    ``where``, e.g. ``requests file F``, goes in front). One problem: its own message. More:
    ``N requests have problems (nothing was run):`` and one line per problem, the first
    :data:`MAX_LISTED` and then ``and N more``; those lines are also the error's
    ``problems`` attribute, which the CLI prints one per line. The type is the problems'
    own when they share one, else :class:`~vocalis.errors.InputError`; no ``param``: the
    fields at fault are the file's, which the messages name, not a command line flag."""
    prefix = f"{where}: " if where else ""
    kinds = {type(p) for p in problems}
    cls = kinds.pop() if len(kinds) == 1 else InputError
    if len(problems) == 1:
        return cls(f"{prefix}{problems[0]}")
    lines = [" ".join(str(p).split()) for p in problems[:MAX_LISTED]]
    if len(problems) > MAX_LISTED:
        lines.append(f"and {len(problems) - MAX_LISTED} more")
    err = cls(f"{prefix}{len(problems)} requests have problems (nothing was run):\n"
              + "\n".join(lines))
    err.problems = lines
    return err


def read_requests(path: str | Path, info: ModelInfo | None = None,
                  defaults: dict | None = None) -> list[BatchRequest]:
    """Read and check a requests file (see the module doc) for the model ``info``.

    Raises:
        InputError: missing/unreadable file, not UTF-8, not JSON, a JSON Lines or Parquet
        file (those are ``--ray``'s), or a bad request (VoiceError for a bad voice).
    """
    p = Path(path).expanduser()
    if p.suffix.lower() in (".jsonl", ".ndjson", ".parquet"):
        raise InputError(f"requests file {p}: {p.suffix} files are read by `vocalis batch --ray` "
                         "(Ray Data, resumable); without --ray give a .json file holding an "
                         'array like [{"text": ...}], or add --ray')
    raw = read_utf8(p, "requests file")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise InputError(f"requests file {p} is not valid JSON: {e.msg} at line {e.lineno} "
                         f"column {e.colno}; {FORMATS}{not_read(p)}") from None
    try:
        return parse_requests(data, p.resolve().parent, info, defaults)
    except VocalisError as e:
        raise _where(f"requests file {p}", e) from None


def not_read(path: Path) -> str:
    """``; .csv files are not read: ...`` for a requests file whose extension says it is
    another format (CSV, TSV, a spreadsheet), else nothing."""
    suffix = path.suffix.lower()
    if suffix in ("", ".json", ".jsonl", ".ndjson", ".parquet", ".pq", ".txt"):
        return ""
    return f"; {suffix} files are not read: write the requests in one of these"


__all__ = ["FIELDS", "FORMATS", "BatchRequest", "anchor", "check_one", "check_options",
           "default_info", "parse_requests", "problems_error", "read_requests"]
