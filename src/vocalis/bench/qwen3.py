"""Qwen3-TTS in ``vocalis bench``: which mode the checkpoint runs in, and its voice.

One mode per checkpoint type (``config.json`` ``tts_model_type``), kept simple:

* CustomVoice: a built-in speaker (``speaker``, or ``voice`` as a speaker name; default the
  model's first speaker, :attr:`vocalis.api_qwen3.Qwen3TTS.speakers`); ``instruct`` passed
  through (1.7B; 0.6B ignores it on both sides);
* VoiceDesign: ``instruct`` (default :data:`DEFAULT_INSTRUCT`);
* Base: ``voice`` = a reference audio file, cloned from its speaker embedding alone
  (x-vector only; no transcript needed).

``language`` (optional) goes to every mode; sampling options keep the official names
(:data:`vocalis.bench.official_qwen3.GEN_KEYS`) plus ``greedy`` and ``max_frames``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from vocalis.errors import InputError, VoiceError

DEFAULT_INSTRUCT = "A calm, clear adult voice, speaking at a moderate pace."
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3", ".m4a", ".aiff", ".aif")


@dataclass
class Qwen3Plan:
    """What the bench runs: the checkpoint folder and type, and the mode's inputs."""

    model: str
    folder: Path
    model_type: str  # custom_voice | voice_design | base
    voice: str | None = None
    speaker: str | None = None
    instruct: str | None = None
    language: str | None = None


def check_sampling(sampling: dict) -> dict:
    """Qwen3 sampling options by name and range; returns them unchanged.

    Raises:
        InputError: an unknown option (lists the known ones) or a value out of range.
    """
    from vocalis.api_qwen3 import OPTION_RANGES
    from vocalis.bench.official_qwen3 import GEN_KEYS
    from vocalis.engine.options import check_option

    known = (*GEN_KEYS, "greedy", "max_frames")
    unknown = sorted(set(sampling) - set(known))
    if unknown:
        raise InputError(f"sampling options: unknown option(s) {', '.join(map(repr, unknown))} for "
                         f"Qwen3-TTS; known: {', '.join(known)}")
    for k, v in sampling.items():
        if v is None:
            continue
        if k in OPTION_RANGES:
            check_option(OPTION_RANGES[k], v)
        elif not isinstance(v, bool):
            raise InputError(f"{k} must be true or false, got {v!r}")
    return sampling


def plan(model: str, voice: str | None, speaker: str | None, instruct: str | None,
         language: str | None, sampling: dict) -> Qwen3Plan:
    """Resolve the checkpoint and check the mode's inputs before anything loads.

    Raises:
        ModelNotFound / CheckpointError: from :func:`vocalis.models.qwen3.checkpoint.resolve_checkpoint`.
        InputError: an option the checkpoint type does not take, an empty string, bad sampling.
        VoiceError: Base without a reference audio file, or one that does not exist.
    """
    from vocalis.models.qwen3.checkpoint import resolve_checkpoint

    folder, _release = resolve_checkpoint(model)
    model_type = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))["tts_model_type"]
    check_sampling(sampling)
    for name, x in (("voice", voice), ("speaker", speaker), ("instruct", instruct), ("language", language)):
        if x is not None and (not isinstance(x, str) or not x.strip()):
            raise InputError(f"--{name} is empty: give a value or leave it out")
    p = Qwen3Plan(model, Path(folder), model_type, language=language)
    if model_type == "custom_voice":
        if speaker is not None and voice is not None and speaker.lower() != voice.lower():
            raise InputError("give the speaker once: --speaker and --voice differ")
        p.speaker = speaker if speaker is not None else voice
        p.instruct = instruct
    elif model_type == "voice_design":
        if voice is not None or speaker is not None:
            raise InputError(f"{model} is a VoiceDesign model: it has no voices or speakers; describe "
                             "the voice with --instruct")
        p.instruct = instruct if instruct is not None else DEFAULT_INSTRUCT
    else:
        if speaker is not None or instruct is not None:
            raise InputError(f"{model} is a Base model: it takes no --speaker or --instruct; give "
                             "--voice AUDIO_FILE (cloned x-vector only)")
        if voice is None:
            raise VoiceError(f"{model} is a Base model: give --voice AUDIO_FILE, a reference recording "
                             "to clone (x-vector only)")
        path = Path(voice).expanduser()
        if path.suffix.lower() not in AUDIO_SUFFIXES or not path.is_file():
            raise VoiceError(f"--voice {voice}: not an audio file ({', '.join(AUDIO_SUFFIXES)}); the Base "
                             "bench clones a reference recording (x-vector only)")
        p.voice = str(path.resolve())
    return p


def voice(tts, p: Qwen3Plan):
    """(Voice or None, request options) for every request of the bench; fills in the default
    CustomVoice speaker (the model's first). Raises VoiceError for an unknown speaker."""
    opts = {k: v for k, v in (("language", p.language), ("instruct", p.instruct)) if v is not None}
    if p.model_type == "custom_voice":
        if p.speaker is None:
            p.speaker = tts.speakers[0]
        v = tts.voice(p.speaker)
        p.speaker = v.state  # the lower-case name the model knows
        return v, opts
    if p.model_type == "voice_design":
        return None, opts
    return tts.voice(p.voice, xvector_only=True), opts


def describe(p: Qwen3Plan) -> dict:
    """The mode for the report: ``{model_type, folder, speaker, instruct, language, ref_audio,
    xvector_only}`` (the last two for Base only, else None / False)."""
    base = p.model_type == "base"
    return {"model_type": p.model_type, "folder": str(p.folder), "speaker": p.speaker,
            "instruct": p.instruct, "language": p.language, "ref_audio": p.voice if base else None,
            "xvector_only": base}
