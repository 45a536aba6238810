"""Find a Qwen3-TTS checkpoint folder: a released model by id (Hub download at a pinned
commit, Hugging Face cache, offline mode) or a local folder in the official layout.

A checkpoint folder (the layout of the ``Qwen/Qwen3-TTS-12Hz-*`` repositories, which
``qwen-tts==0.1.1`` ``Qwen3TTSModel.from_pretrained`` reads) holds::

    config.json                    model_type "qwen3_tts" (vocalis.models.qwen3.config.load_config)
    model.safetensors              talker, code predictor (+ speaker encoder on Base), bf16
    vocab.json, merges.txt,        the Qwen2 byte-level BPE text tokenizer
    tokenizer_config.json
    speech_tokenizer/config.json   model_type "qwen3_tts_tokenizer_12hz" (load_codec_config)
    speech_tokenizer/model.safetensors   the 12 Hz codec, fp32

plus files vocalis does not read but keeps so the folder stays loadable by the official
package: ``generation_config.json``, ``preprocessor_config.json`` and
``speech_tokenizer/preprocessor_config.json``.

Model references accepted by :func:`resolve_checkpoint`, in this order:

1. an existing local directory (as ``transformers.from_pretrained`` does: a folder wins over
   an id of the same spelling; write ``./name`` to be explicit);
2. a vocalis id such as ``qwen3-tts/0.6b-customvoice`` or the Hub repo id
   ``Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice`` (both case-insensitive): the release's files at its
   pinned commit (``registry.RELEASES``), from the cache or downloaded
   (see :func:`vocalis.hub.resolve_snapshot` for ``HF_HOME``, ``HF_HUB_CACHE``,
   ``HF_HUB_OFFLINE``, ``HF_ENDPOINT``).

Sizes and parameter counts (:func:`parameter_counts`, :func:`checkpoint_size_bytes`) are
computed from the registry's configs by building vocalis's modules on the ``meta`` device;
they equal the counts of the official classes (914.6 M for 0.6B-Base, 905.8 M for
0.6B-CustomVoice, 1916.7 M for 1.7B-VoiceDesign, 170.6 M for the codec: measured with
``qwen-tts`` 0.1.1 on ``meta``, ``shared/reference/qwen3-tts.md`` §0) and with the Hub file
sizes (bf16 model, fp32 codec).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from vocalis import hub
from vocalis.errors import CheckpointError, ModelNotFound
from vocalis.models.qwen3 import registry
from vocalis.models.qwen3.config import load_codec_config, load_config
from vocalis.models.qwen3.registry import Release

__all__ = [
    "ALLOW_PATTERNS",
    "OPTIONAL_FILES",
    "REQUIRED_FILES",
    "cache_status",
    "check_checkpoint_dir",
    "checkpoint_size_bytes",
    "find_release",
    "is_qwen3",
    "parameter_counts",
    "resolve_checkpoint",
    "weight_bytes",
]

TOKENIZER_FILES: tuple[str, ...] = ("vocab.json", "merges.txt", "tokenizer_config.json")
CODEC_DIR = "speech_tokenizer"
#: Files vocalis reads; a checkpoint without one of them is refused.
REQUIRED_FILES: tuple[str, ...] = ("config.json", "model.safetensors", *TOKENIZER_FILES,
                                   f"{CODEC_DIR}/config.json", f"{CODEC_DIR}/model.safetensors")
#: Small files downloaded with them (official loader's generation defaults and processors).
OPTIONAL_FILES: tuple[str, ...] = ("generation_config.json", "preprocessor_config.json",
                                   f"{CODEC_DIR}/preprocessor_config.json")
#: What ``snapshot_download`` fetches: exactly these paths (README, .gitattributes are skipped).
ALLOW_PATTERNS: tuple[str, ...] = REQUIRED_FILES + OPTIONAL_FILES

# Bytes per stored value in the released files: model.safetensors is bf16, the codec fp32.
_MODEL_BYTES, _CODEC_BYTES = 2, 4
_ID_PREFIXES = ("qwen3-tts/", "qwen/qwen3-tts")


def find_release(model: str) -> Release | None:
    """The release named by a vocalis id or Hub repo id (case-insensitive), else None."""
    try:
        return registry.release(model.strip())
    except ModelNotFound:
        return None


def _known() -> str:
    return ", ".join(registry.model_ids())


def _download_hint(release: Release | None) -> str:
    target = release.model_id if release else "qwen3-tts/<size>-<type>"
    return f"re-download it (`vocalis models download {target}`) or write a test one (`vocalis models random --config {target} --out DIR`)"


def check_checkpoint_dir(path: str | os.PathLike[str], release: Release | None = None) -> Path:
    """Check that ``path`` is a complete Qwen3-TTS checkpoint folder and return it.

    Reads ``config.json`` and ``speech_tokenizer/config.json`` (their model types and the
    fields the model math needs); the weight and tokenizer files must exist (their contents are
    checked when they are loaded). ``release`` only words the advice in errors.

    Raises:
        ModelNotFound: ``path`` does not exist or is not a folder.
        CheckpointError: one line naming the first missing or invalid piece and the fix
            (``config.json`` absent or not Qwen3-TTS; ``model.safetensors`` absent; tokenizer
            files absent; no ``speech_tokenizer/`` folder, or one without its config or weights).
    """
    d = Path(os.path.expanduser(os.fspath(path)))
    if not d.exists():
        raise ModelNotFound(f"Qwen3-TTS checkpoint folder {d} does not exist; pass a checkpoint folder "
                            f"or a released model ({_known()})")
    if not d.is_dir():
        raise ModelNotFound(f"{d} is not a folder: pass the Qwen3-TTS checkpoint folder that holds config.json "
                            f"and speech_tokenizer/, or a released model ({_known()})")
    hint = _download_hint(release)
    if not (d / "config.json").is_file():
        raise CheckpointError(f"{d} has no config.json: not a Qwen3-TTS checkpoint folder; point to the folder "
                              f"that holds config.json, model.safetensors and speech_tokenizer/, or {hint}")
    load_config(d)
    if not (d / "model.safetensors").is_file():
        raise CheckpointError(f"{d / 'model.safetensors'} is missing (the talker weights); {hint}")
    missing = [n for n in TOKENIZER_FILES if not (d / n).is_file()]
    if missing:
        raise CheckpointError(f"{d} lacks the text tokenizer file{'s' if len(missing) > 1 else ''} "
                              f"{', '.join(missing)}; {hint}")
    codec = d / CODEC_DIR
    if not codec.is_dir():
        raise CheckpointError(f"{codec}/ is missing: a Qwen3-TTS checkpoint folder holds the speech tokenizer "
                              f"(config.json, model.safetensors) in speech_tokenizer/; {hint}")
    if not (codec / "config.json").is_file():
        raise CheckpointError(f"{codec / 'config.json'} is missing (the speech tokenizer config); {hint}")
    load_codec_config(d)
    if not (codec / "model.safetensors").is_file():
        raise CheckpointError(f"{codec / 'model.safetensors'} is missing (the speech tokenizer weights); {hint}")
    return d


def resolve_checkpoint(model: str | os.PathLike[str], *, download: bool = True) -> tuple[Path, Release | None]:
    """A local, checked Qwen3-TTS checkpoint folder for ``model``, and its release (None for a
    local folder).

    Args:
        model: a local checkpoint folder, a vocalis id (``qwen3-tts/0.6b-customvoice``) or a
            Hub repo id (``Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice``), ids case-insensitive.
        download: for ids: fetch missing files from the Hub (unless ``HF_HUB_OFFLINE`` is set);
            False: the Hugging Face cache only.

    Returns:
        ``(folder, release)``: for ids, the snapshot folder of the pinned commit inside the
        Hugging Face cache (``<cache>/models--Qwen--.../snapshots/<commit>``).

    Raises:
        ModelNotFound: unknown id or path (the message lists the released ids); not cached while
            offline, Hub unreachable, repository or revision gone (see :func:`vocalis.hub.resolve_snapshot`).
        GatedRepoError: the Hub refused access.
        CheckpointError: the folder is incomplete or its configs are not Qwen3-TTS 12 Hz
            (see :func:`check_checkpoint_dir`).
    """
    text = os.fspath(model)
    if not isinstance(text, str) or not text.strip():
        raise ModelNotFound(f"empty model: pass a Qwen3-TTS checkpoint folder or a released model ({_known()})")
    local = Path(os.path.expanduser(text))
    if local.is_dir():
        return check_checkpoint_dir(local), None
    rel = find_release(text)
    if rel is None:
        if text.strip().lower().startswith(_ID_PREFIXES):
            raise ModelNotFound(f"unknown Qwen3-TTS model {text!r}; known: {_known()}, or a checkpoint folder")
        if local.exists():
            return check_checkpoint_dir(local), None  # a file: the error says to pass the folder
        raise ModelNotFound(f"{text!r} is neither a released Qwen3-TTS model nor an existing folder; "
                            f"known: {_known()}, or a checkpoint folder")
    folder = hub.resolve_snapshot(rel.repo_id, rel.revision, allow_patterns=list(ALLOW_PATTERNS),
                                  required=list(REQUIRED_FILES), model_id=rel.model_id, download=download)
    return check_checkpoint_dir(folder, rel), rel


def is_qwen3(model: str | os.PathLike[str]) -> bool:
    """True for a Qwen3-TTS reference: a released id or Hub repo id, any ``qwen3-tts/...`` id
    (so that an unknown one reaches :func:`resolve_checkpoint` and its error), or a folder whose
    ``config.json`` has ``model_type`` ``qwen3_tts``. Cheap (reads one small JSON file at most)
    and never raises."""
    try:
        text = os.fspath(model)
        if not isinstance(text, str) or not text.strip():
            return False
        cfg = Path(os.path.expanduser(text)) / "config.json"
        if cfg.is_file():
            if cfg.stat().st_size > 1 << 20:  # a real one is under 10 kB
                return False
            data = json.loads(cfg.read_text(encoding="utf-8"))
            return isinstance(data, dict) and data.get("model_type") == "qwen3_tts"
        return text.strip().lower().startswith(_ID_PREFIXES) or find_release(text) is not None
    except (OSError, ValueError, TypeError):
        return False


def cache_status(release: Release) -> tuple[Path | None, list[str]]:
    """``(snapshot folder, required files missing from it)`` for the release's pinned commit in
    the Hugging Face cache; ``(folder, [])`` means cached and usable offline. No network."""
    return hub.snapshot_missing(release.repo_id, release.revision, REQUIRED_FILES)


def parameter_counts(model: str | os.PathLike[str], tiny: bool = False) -> dict[str, int]:
    """Stored values per component, computed from the configs on the ``meta`` device:
    ``talker`` (talker + code predictor), ``speaker_encoder`` (Base only, else 0) and
    ``speech_tokenizer`` (codec encoder + decoder); equal to the element counts of the tensors
    in ``model.safetensors`` and ``speech_tokenizer/model.safetensors``.

    Args:
        model: a released id or Hub repo id (the registry's configs; ``tiny`` for the test
            variant), or a checkpoint folder (its ``config.json`` and ``speech_tokenizer/config.json``).

    Raises:
        ModelNotFound: neither a release nor a folder. CheckpointError: a folder's configs are invalid.
    """
    rel = find_release(os.fspath(model))
    if rel is not None:
        return _count(registry.config_dict(rel.model_id, tiny), registry.codec_config_dict(tiny))
    folder = Path(os.path.expanduser(os.fspath(model)))
    if not folder.is_dir():
        raise ModelNotFound(f"{os.fspath(model)!r} is neither a released Qwen3-TTS model nor a folder; known: {_known()}")
    return _count(load_config(folder).raw, load_codec_config(folder).raw)


def _count(cfg: dict, codec_cfg: dict) -> dict[str, int]:
    # the model code (torch) is imported here: this module serves the torch-free front half
    # (vocalis.models.qwen3.front), which counts parameters only for `vocalis models show`
    import torch

    from vocalis.models.qwen3.codec import SpeechDecoder, SpeechTokenizerConfig
    from vocalis.models.qwen3.codec_encoder import SpeechEncoder
    from vocalis.models.qwen3.speaker import SpeakerEncoder, SpeakerEncoderConfig
    from vocalis.models.qwen3.talker import Talker, TalkerSpec

    def count(module: torch.nn.Module) -> int:
        return sum(t.numel() for t in module.state_dict().values())

    codec = SpeechTokenizerConfig.from_dict(codec_cfg)
    with torch.device("meta"):
        out = {"talker": count(Talker(TalkerSpec.from_config(cfg))), "speaker_encoder": 0,
               "speech_tokenizer": count(SpeechDecoder(codec.decoder)) + count(SpeechEncoder(codec.encoder))}
        if cfg.get("speaker_encoder_config"):
            out["speaker_encoder"] = count(SpeakerEncoder(SpeakerEncoderConfig.from_dict(cfg["speaker_encoder_config"])))
    return out


def weight_bytes(counts: dict[str, int]) -> tuple[int, int]:
    """``(model.safetensors, speech_tokenizer/model.safetensors)`` bytes of tensor data for
    :func:`parameter_counts` ``counts``, at the released dtypes (bf16 model, fp32 codec)."""
    return (counts["talker"] + counts["speaker_encoder"]) * _MODEL_BYTES, counts["speech_tokenizer"] * _CODEC_BYTES


def checkpoint_size_bytes(release: Release | str) -> int:
    """Bytes of the two weight files of a release as stored on the Hub: ``model.safetensors``
    (talker and speaker encoder, bf16) plus ``speech_tokenizer/model.safetensors`` (fp32),
    without the safetensors headers and the few MB of tokenizer and config files."""
    model_id = release.model_id if isinstance(release, Release) else release
    return sum(weight_bytes(parameter_counts(model_id)))
