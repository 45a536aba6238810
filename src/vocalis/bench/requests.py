"""The batch runner's requests file: read and check it before anything runs.

Format: a JSON array of objects ::

    [{"text": "Hello there.", "voice": "alba", "options": {"seed": 42, "temperature": 0.5}},
     {"text": "Another one.", "voice": "prompts/me.wav"}]

``text`` (required): a non-empty string. ``voice`` (optional): a predefined voice name, an
audio file or a ``.safetensors`` voice state; relative paths are taken relative to the
requests file's folder when they exist there, else to the working directory; missing =
the model's default voice (released models only). ``options`` (optional): ``seed``
(integer) and the sampling options of :meth:`vocalis.api.TTS.synthesize`. Nothing else.

Every problem raises :class:`~vocalis.errors.InputError` whose message names the request
(its 0-based index in the array) — the first problem found, and how many more there are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from vocalis.errors import InputError
from vocalis.text.files import read_utf8

FIELDS = ("text", "voice", "options")


def option_names() -> tuple[str, ...]:
    """Options a request may carry: ``seed`` and every sampling option."""
    from vocalis.models.pocket.model import SamplingParams

    return tuple(SamplingParams.__dataclass_fields__)


def check_options(options: dict, where: str) -> dict:
    """Validate ``options`` (seed + sampling); returns them unchanged.

    Raises:
        InputError: ``where: ...`` naming the unknown or invalid option.
    """
    from vocalis.models.pocket.model import SamplingParams

    known = option_names()
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise InputError(f"{where}: unknown option(s) {', '.join(map(repr, unknown))}; known: "
                         + ", ".join(known))
    try:
        SamplingParams(**options).validated()
    except InputError as e:
        raise InputError(f"{where}: {e}") from None
    return options


@dataclass
class BatchRequest:
    """One checked request; ``sampling`` = its options without the seed."""

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


def _type_name(v) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _check_one(i: int, item, base: Path | None) -> BatchRequest:
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
        if base is not None and "://" not in voice and not Path(voice).is_absolute():
            candidate = base / voice
            if candidate.exists():
                voice = str(candidate)
    options = item.get("options", {})
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise InputError(f"{where}: 'options' must be an object like {{\"seed\": 42}}, got "
                         f"{_type_name(options)}")
    check_options(options, where)
    sampling = {k: v for k, v in options.items() if k != "seed"}
    return BatchRequest(i, text, voice, options.get("seed"), sampling)


def parse_requests(data, base: Path | None = None) -> list[BatchRequest]:
    """Check already-decoded JSON ``data``; ``base`` anchors relative voice paths.

    Raises:
        InputError: the first problem (naming its request) and how many more there are.
    """
    if not isinstance(data, list):
        raise InputError(f"requests must be a JSON array of objects like [{{\"text\": ...}}], "
                         f"got {_type_name(data)}")
    if not data:
        raise InputError("requests array is empty: give at least one request")
    out, problems = [], []
    for i, item in enumerate(data):
        try:
            out.append(_check_one(i, item, base))
        except InputError as e:
            problems.append(str(e))
    if problems:
        more = (f" (and {len(problems) - 1} more problem(s) in other requests)"
                if len(problems) > 1 else "")
        raise InputError(problems[0] + more)
    return out


def read_requests(path: str | Path) -> list[BatchRequest]:
    """Read and check a requests file (see the module doc).

    Raises:
        InputError: missing/unreadable file, not UTF-8, not JSON, or a bad request.
    """
    p = Path(path).expanduser()
    raw = read_utf8(p, "requests file")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise InputError(f"requests file {p} is not valid JSON: {e.msg} at line {e.lineno} "
                         f"column {e.colno}") from None
    try:
        return parse_requests(data, p.resolve().parent)
    except InputError as e:
        raise InputError(f"requests file {p}: {e}") from None
