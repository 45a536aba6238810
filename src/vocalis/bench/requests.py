"""The batch runner's requests file: read and check it before anything runs.

Format: a JSON array of objects ::

    [{"text": "Hello there.", "voice": "alba", "options": {"seed": 42, "temperature": 0.5}},
     {"text": "Another one.", "voice": "prompts/me.wav"}]

``text`` (required): a non-empty string. ``voice`` (optional): a predefined voice name, an
audio file or a ``.safetensors`` voice state; relative paths are taken relative to the
requests file's folder when they exist there, else to the working directory; missing =
the model's default voice (released models only). ``options`` (optional): ``seed``
(integer) and the sampling options of :meth:`vocalis.api.TTS.synthesize`. Nothing else.

Qwen3-TTS models (``family="qwen3"``): ``options`` take ``seed`` and the request options of
:class:`vocalis.api_qwen3.Qwen3TTS` (``api_qwen3.KNOWN``: ``speaker``, ``language``,
``instruct``, ``ref_audio``, ``ref_text``, ``xvector_only``, the official sampling names,
``greedy``, ``max_frames``, ...); a relative ``ref_audio`` is resolved like ``voice``. Here
only the names are checked; the batch runner checks each request in full with the loaded
model before anything runs. ::

    [{"text": "Hi.", "voice": "ryan", "options": {"language": "english", "seed": 1}},
     {"text": "Hi.", "options": {"ref_audio": "me.wav", "ref_text": "What I say.", "seed": 2}}]

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
FAMILIES = ("pocket", "qwen3")
#: Qwen3 options that name a file, resolved like ``voice``
PATH_OPTIONS = ("ref_audio",)


def option_names(family: str = "pocket") -> tuple[str, ...]:
    """Options a request may carry: ``seed`` and every sampling option (Pocket), or
    ``seed`` and :data:`vocalis.api_qwen3.KNOWN` (``family="qwen3"``)."""
    if family == "qwen3":
        from vocalis.api_qwen3 import KNOWN

        return ("seed", *KNOWN)
    from vocalis.models.pocket.model import SamplingParams

    return tuple(SamplingParams.__dataclass_fields__)


def check_options(options: dict, where: str, family: str = "pocket") -> dict:
    """Validate ``options`` (seed + sampling); returns them unchanged. For ``qwen3`` only the
    names and the seed are checked here (values: the loaded model's ``_prepare``).

    Raises:
        InputError: ``where: ...`` naming the unknown or invalid option.
    """
    known = option_names(family)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise InputError(f"{where}: unknown option(s) {', '.join(map(repr, unknown))}; known: "
                         + ", ".join(known))
    if family == "qwen3":
        seed = options.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                                 or not 0 <= seed < 2**63):
            raise InputError(f"{where}: seed must be an integer in [0, 2**63), got {seed!r}")
        return options
    from vocalis.models.pocket.model import SamplingParams

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


def _anchor(path: str, base: Path | None) -> str:
    """``path`` relative to ``base`` when it exists there, else unchanged."""
    if base is not None and "://" not in path and not Path(path).is_absolute():
        candidate = base / path
        if candidate.exists():
            return str(candidate)
    return path


def check_one(i: int, item, base: Path | None, family: str = "pocket") -> BatchRequest:
    """Check request ``i`` (an object of the file); ``base`` anchors relative paths.

    Raises:
        InputError: ``request i: ...`` naming the problem.
    """
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
        voice = _anchor(voice, base)
    options = item.get("options", {})
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise InputError(f"{where}: 'options' must be an object like {{\"seed\": 42}}, got "
                         f"{_type_name(options)}")
    check_options(options, where, family)
    sampling = {k: v for k, v in options.items() if k != "seed"}
    for k in PATH_OPTIONS:
        if family == "qwen3" and isinstance(sampling.get(k), str) and sampling[k].strip():
            sampling[k] = _anchor(sampling[k], base)
    return BatchRequest(i, text, voice, options.get("seed"), sampling)


def parse_requests(data, base: Path | None = None, family: str = "pocket") -> list[BatchRequest]:
    """Check already-decoded JSON ``data``; ``base`` anchors relative voice (and Qwen3
    ``ref_audio``) paths; ``family``: ``pocket`` or ``qwen3`` (which options are allowed).

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
            out.append(check_one(i, item, base, family))
        except InputError as e:
            problems.append(str(e))
    if problems:
        more = (f" (and {len(problems) - 1} more problem(s) in other requests)"
                if len(problems) > 1 else "")
        raise InputError(problems[0] + more)
    return out


def read_requests(path: str | Path, family: str = "pocket") -> list[BatchRequest]:
    """Read and check a requests file (see the module doc) for a model of ``family``.

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
        return parse_requests(data, p.resolve().parent, family)
    except InputError as e:
        raise InputError(f"requests file {p}: {e}") from None
