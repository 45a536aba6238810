"""Qwen3-TTS Base voice-clone prompts: reference audio -> x-vector (+ reference codes).

Follows ``Qwen3TTSModel.create_voice_clone_prompt`` of ``qwen-tts`` 0.1.1
(``qwen_tts/inference/qwen3_tts_model.py``, cited ``W:line``):

* the reference audio is mixed to mono by averaging the channels in float32 (W:218-221,
  ``librosa.load(mono=True)`` for a path; W:259-262 for arrays);
* the speaker embedding is ``extract_speaker_embedding`` (``modeling_qwen3_tts.py:1940-1954``)
  of the audio resampled to 24 kHz with ``librosa.resample`` (W:440-447);
* the reference codes are ``speech_tokenizer.encode(wav, sr)`` (W:426-432), which resamples to
  24 kHz with ``librosa.resample`` as well (``qwen3_tts_tokenizer.py:201-205``); they are kept
  only in ICL mode (``x_vector_only_mode=False``, W:449-456), which needs ``ref_text`` (W:436-438).

``librosa.resample``'s default is ``soxr.resample(..., quality="soxr_hq")`` then
``fix_length`` to ``ceil(len * target / orig)`` samples (librosa 0.11 ``core/audio.py``). When
the ``soxr`` package is importable it is used the same way here, so audio at any rate gives the
official prompt; without it, :func:`vocalis.audio.to_mono_24k` (``scipy.signal.resample_poly``)
is used and a non-24 kHz reference gives a slightly different embedding and possibly different
codes (24 kHz references are not resampled and are unaffected).

A :class:`ClonePrompt` is saved as a ``.safetensors`` file (tensors ``xvector`` and, in ICL
mode, ``ref_codes``; string metadata naming the format and the model it was made for).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vocalis.audio import read_audio, to_mono_24k
from vocalis.audio.io import _rate
from vocalis.errors import CheckpointError, InputError, ModelNotFound, VoiceError
from vocalis.models.qwen3.config import load_config
from vocalis.models.qwen3.speaker import (
    SAMPLE_RATE,
    SpeakerEncoder,
    SpeakerEncoderConfig,
)
from vocalis.outputs import save_safetensors

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_SECONDS",
    "MIN_SECONDS",
    "RECOMMENDED_SECONDS",
    "SILENCE_DBFS",
    "ClonePrompt",
    "clone_prompt_from_file",
    "create_clone_prompt",
    "load_speaker_encoder",
    "resample_to_24k",
]

logger = logging.getLogger(__name__)

FORMAT = "vocalis.qwen3.clone_prompt"
FORMAT_VERSION = 1
MIN_SECONDS = 1.0
MAX_SECONDS = 60.0
RECOMMENDED_SECONDS = (3.0, 20.0)
SILENCE_DBFS = -60.0
MODEL_SIZES = ("0b6", "1b7")
_ADVICE = "3-20 s of clear speech is recommended"


# ----------------------------------------------------------------------------- speaker encoder

def _fingerprint(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 (first 16 hex digits) over the sorted names, shapes and float32 bytes."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.float32).contiguous().cpu()
        h.update(f"{name}:{tuple(t.shape)};".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]


def load_speaker_encoder(checkpoint_dir: str | os.PathLike[str],
                         device: str | torch.device = "cpu") -> SpeakerEncoder:
    """Build the ECAPA-TDNN speaker encoder of a Base checkpoint folder (float32, eval mode).

    Reads ``speaker_encoder_config`` of ``config.json`` and the ``speaker_encoder.*`` tensors of
    ``model.safetensors`` with strict name and shape checks. The returned module carries
    ``fingerprint`` (str: sha256 prefix of its weights), ``model_size`` (``"0b6"``/``"1b7"``)
    and ``hidden_size`` (talker width, the x-vector length).

    Raises:
        InputError: the checkpoint is not a Base one (only Base checkpoints clone voices).
        CheckpointError: config.json missing/unreadable/not Qwen3-TTS, or the speaker-encoder
            tensors missing, unexpected or of the wrong shape.
        ModelNotFound: model.safetensors is missing.
    """
    from safetensors import SafetensorError, safe_open

    d = Path(checkpoint_dir)
    cfg = load_config(d)
    if cfg.tts_model_type != "base":
        raise InputError(f"{d} is a {cfg.tts_model_type} checkpoint: only Base checkpoints clone "
                         "voices; use qwen3-tts/0.6b-base or qwen3-tts/1.7b-base")
    spk_cfg = SpeakerEncoderConfig.from_dict(cfg.speaker_encoder_config.to_dict())
    if spk_cfg.enc_dim != cfg.talker_config.hidden_size:
        raise CheckpointError(f"{d}/config.json: speaker_encoder_config.enc_dim {spk_cfg.enc_dim} differs "
                              f"from the talker hidden_size {cfg.talker_config.hidden_size}")
    path = d / "model.safetensors"
    if not path.is_file():
        raise ModelNotFound(f"{path} is missing: a Qwen3-TTS checkpoint folder holds config.json and "
                            "model.safetensors; re-download it")
    model = SpeakerEncoder(spk_cfg)
    prefix = "speaker_encoder."
    try:
        with safe_open(str(path), framework="pt") as f:
            names = [k for k in f.keys() if k.startswith(prefix)]  # noqa: SIM118 (safe_open is not iterable)
            got = {k[len(prefix):]: f.get_tensor(k) for k in names}
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path} is not a readable safetensors file ({e}); re-download it") from None
    want = model.state_dict()
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    bad = sorted(k for k in set(want) & set(got) if want[k].shape != got[k].shape)
    if missing or extra or bad:
        raise CheckpointError(f"{path} does not fit its config.json ({prefix}*): missing {missing[:3]}, "
                              f"unexpected {extra[:3]}, wrong shape {bad[:3]}; re-download the checkpoint")
    model.load_state_dict(got, strict=True)
    model = model.to(device=device, dtype=torch.float32).eval()
    model.fingerprint = _fingerprint(got)
    model.model_size = cfg.tts_model_size
    model.hidden_size = cfg.talker_config.hidden_size
    return model


# ----------------------------------------------------------------------------- the prompt

@dataclass
class ClonePrompt:
    """A Base model's voice-clone prompt (the official ``VoiceClonePromptItem``, W:40-51).

    Attributes:
        xvector: float32 ``[H]`` speaker embedding, ``H`` = the talker hidden size.
        ref_codes: long ``[T, 16]`` codes of the reference audio (12.5 frames/s), ICL mode only.
        ref_text: transcript of the reference audio (ICL mode), else None.
        xvector_only: True when only the x-vector conditions the voice (no ICL).
        hidden_size: talker hidden size of the model the prompt was made with.
        model_size: ``"0b6"`` or ``"1b7"``.
        encoder_fingerprint: :func:`load_speaker_encoder`'s ``fingerprint``, or None (unknown,
            e.g. a prompt made by the official package).
    """

    xvector: torch.Tensor
    ref_codes: torch.Tensor | None
    ref_text: str | None
    xvector_only: bool
    hidden_size: int
    model_size: str
    encoder_fingerprint: str | None = None

    def __post_init__(self) -> None:
        self.xvector = torch.as_tensor(self.xvector).detach().to(torch.float32).reshape(-1).cpu()
        if self.ref_codes is not None:
            self.ref_codes = torch.as_tensor(self.ref_codes).detach().to(torch.long).cpu()
        if self.xvector.numel() != self.hidden_size:
            raise VoiceError(f"clone prompt x-vector has {self.xvector.numel()} values but its model's "
                             f"hidden size is {self.hidden_size}; recreate the prompt")
        if self.xvector_only:
            self.ref_codes = None
        elif self.ref_codes is None or self.ref_codes.dim() != 2 or self.ref_codes.shape[0] == 0:
            raise VoiceError("an ICL clone prompt needs reference codes [T, 16]; recreate it with "
                             "--ref-text, or use --xvector-only")
        elif not self.ref_text or not self.ref_text.strip():
            raise VoiceError("an ICL clone prompt needs its reference text; recreate it with --ref-text")

    @property
    def icl(self) -> bool:
        """In-context mode: the reference codes and text are part of the prompt."""
        return not self.xvector_only

    # -- files

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the prompt as a ``.safetensors`` file (tensors ``xvector`` float32 ``[H]`` and,
        in ICL mode, ``ref_codes`` int64 ``[T, 16]``; string metadata ``format``, ``version``,
        ``model_size``, ``hidden_size``, ``xvector_only``, ``ref_text``, ``encoder_fingerprint``).
        Returns the path. Raises VoiceError when the file cannot be written."""
        p = Path(path)
        tensors = {"xvector": self.xvector.contiguous()}
        if self.ref_codes is not None:
            tensors["ref_codes"] = self.ref_codes.contiguous()
        meta = {"format": FORMAT, "version": str(FORMAT_VERSION), "model_size": self.model_size,
                "hidden_size": str(self.hidden_size), "xvector_only": json.dumps(self.xvector_only),
                "ref_text": json.dumps(self.ref_text), "encoder_fingerprint": json.dumps(self.encoder_fingerprint)}
        try:
            save_safetensors(tensors, p, metadata=meta)
        except OSError as e:
            raise VoiceError(f"cannot write the clone prompt to {p} ({e.strerror or e}); "
                             "choose a writable path") from None
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ClonePrompt:
        """Read a file written by :meth:`save`.

        Raises:
            VoiceError: missing file, not a safetensors file (corrupt/truncated), a safetensors
                file of another kind (no vocalis clone-prompt metadata), a newer format version,
                or inconsistent contents.
        """
        from safetensors import SafetensorError, safe_open

        p = Path(path)
        if not p.is_file():
            raise VoiceError(f"clone prompt file not found: {p}; create one with `vocalis voices export AUDIO OUT.safetensors --model MODEL --ref-text TEXT` (or --xvector-only)")
        try:
            with safe_open(str(p), framework="pt") as f:
                meta = f.metadata() or {}
                names = list(f.keys())
                tensors = {k: f.get_tensor(k) for k in names}
        except (SafetensorError, OSError, ValueError) as e:
            raise VoiceError(f"{p} is not a readable clone prompt ({type(e).__name__}: {e}); "
                             "recreate it from the reference audio") from None
        if meta.get("format") != FORMAT:
            raise VoiceError(f"{p} is not a Qwen3-TTS voice-clone prompt (a voice of another kind "
                             "of model?): make one from the reference audio with `vocalis voices "
                             "export AUDIO OUT.safetensors --model MODEL --ref-text TEXT` (or "
                             "--xvector-only)", param="voice")
        try:
            version = int(meta["version"])
            if version > FORMAT_VERSION:
                raise VoiceError(f"{p} is clone-prompt format version {version}, newer than this vocalis "
                                 f"reads ({FORMAT_VERSION}); upgrade vocalis")
            return cls(xvector=tensors["xvector"], ref_codes=tensors.get("ref_codes"),
                       ref_text=json.loads(meta["ref_text"]), xvector_only=bool(json.loads(meta["xvector_only"])),
                       hidden_size=int(meta["hidden_size"]), model_size=meta["model_size"],
                       encoder_fingerprint=json.loads(meta.get("encoder_fingerprint", "null")))
        except VoiceError:
            raise
        except (KeyError, ValueError, TypeError) as e:
            raise VoiceError(f"{p} is a damaged clone prompt (bad or missing {e}); recreate it from the "
                             "reference audio") from None

    # -- compatibility

    def check_fits(self, hidden_size: int, model_size: str, model_type: str = "base",
                   encoder_fingerprint: str | None = None) -> None:
        """Refuse a prompt made for another model.

        Raises:
            VoiceError: the model is not Base, or its size / hidden size differ from the
                prompt's (e.g. a 1.7B prompt on a 0.6B model). A differing speaker-encoder
                fingerprint (same size, other weights) only logs a warning.
        """
        if model_type != "base":
            raise VoiceError(f"a {model_type} model cannot use a voice-clone prompt: only Base models "
                             "clone voices; load qwen3-tts/0.6b-base or qwen3-tts/1.7b-base")
        if hidden_size != self.hidden_size or model_size != self.model_size:
            raise VoiceError(f"this clone prompt was made with a {_size_name(self.model_size)} Base model "
                             f"(hidden size {self.hidden_size}), not this {_size_name(model_size)} one "
                             f"(hidden size {hidden_size}); recreate it from the reference audio with this model")
        if encoder_fingerprint and self.encoder_fingerprint and encoder_fingerprint != self.encoder_fingerprint:
            logger.warning("this clone prompt was made with other speaker-encoder weights (%s, the model has %s); "
                           "recreate it with this model for the closest voice", self.encoder_fingerprint,
                           encoder_fingerprint)

    # -- the official form

    @classmethod
    def from_official_item(cls, item: Any, *, model_size: str,
                           hidden_size: int | None = None) -> ClonePrompt:
        """Convert an official ``VoiceClonePromptItem`` (W:40-51), or a dict with its fields
        (``ref_code`` ``[T, 16]`` or None, ``ref_spk_embedding`` ``[H]``, ``x_vector_only_mode``,
        ``icl_mode``, ``ref_text``), e.g. one ``torch.load``-ed from a file the official package
        saved. ``hidden_size`` defaults to the embedding length.

        Raises:
            VoiceError: missing fields, an embedding that is not ``[H]``, ICL without codes or text.
        """
        get = item.get if isinstance(item, dict) else (lambda k, d=None: getattr(item, k, d))
        emb = get("ref_spk_embedding")
        if emb is None:
            raise VoiceError("the official prompt item has no ref_spk_embedding; recreate it with "
                             "create_voice_clone_prompt")
        emb = torch.as_tensor(emb).detach().float().cpu()
        if emb.dim() != 1:
            raise VoiceError(f"the official prompt's ref_spk_embedding has shape {tuple(emb.shape)}, "
                             "expected [hidden]; pass one item, not a batch")
        xvec_only = bool(get("x_vector_only_mode", False))
        if not xvec_only and not bool(get("icl_mode", True)):
            xvec_only = True
        codes = get("ref_code")
        if model_size not in MODEL_SIZES:
            raise VoiceError(f"model_size must be one of {', '.join(MODEL_SIZES)}, got {model_size!r}")
        return cls(xvector=emb, ref_codes=None if (xvec_only or codes is None) else torch.as_tensor(codes),
                   ref_text=get("ref_text"), xvector_only=xvec_only,
                   hidden_size=int(hidden_size if hidden_size is not None else emb.numel()),
                   model_size=model_size)

    @classmethod
    def from_official_file(cls, path: str | os.PathLike[str], *, model_size: str, index: int = 0,
                           hidden_size: int | None = None) -> ClonePrompt:
        """Read a prompt the official package made and ``torch.save``-d: one item as a dict
        (``dataclasses.asdict(item)``), a list of such dicts, or the batched dict of lists of
        ``Qwen3TTSModel._prompt_items_to_voice_clone_prompt`` (W:461-467; it lacks ``ref_text``,
        so only x-vector-only items load from it). ``index`` picks an item of a list/batch.
        Loaded with ``torch.load(weights_only=True)``: no code from the file runs.

        Raises:
            VoiceError: missing or unreadable file, a pickled ``VoiceClonePromptItem`` object
                (save ``dataclasses.asdict(item)`` instead), an unknown layout, a bad index.
        """
        import pickle

        p = Path(path)
        if not p.is_file():
            raise VoiceError(f"official clone prompt file not found: {p}; check the path")
        try:
            obj = torch.load(str(p), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as e:
            if "Unsupported global" in str(e):  # a pickled class such as VoiceClonePromptItem
                raise VoiceError(f"{p} holds a pickled object (not loaded: it could run code); in the official "
                                 "package save `dataclasses.asdict(item)` instead of the item") from None
            raise VoiceError(f"{p} is not a readable torch.save file (corrupt or another format); "
                             "save the prompt again") from None
        except (RuntimeError, OSError, EOFError, ValueError) as e:
            raise VoiceError(f"{p} is not a readable torch.save file ({e}); save the prompt again") from None
        if isinstance(obj, dict) and isinstance(obj.get("ref_spk_embedding"), (list, tuple)):
            n = len(obj["ref_spk_embedding"])
            if not -n <= index < n:
                raise VoiceError(f"{p} holds {n} prompt item(s); index {index} is out of range")
            obj = {k: (v[index] if isinstance(v, (list, tuple)) else v) for k, v in obj.items()}
        elif isinstance(obj, (list, tuple)):
            if not -len(obj) <= index < len(obj):
                raise VoiceError(f"{p} holds {len(obj)} prompt item(s); index {index} is out of range")
            obj = obj[index]
        if not isinstance(obj, dict) or "ref_spk_embedding" not in obj:
            raise VoiceError(f"{p} is not an official voice-clone prompt (no ref_spk_embedding); save "
                             "`dataclasses.asdict(item)` of a create_voice_clone_prompt item")
        return cls.from_official_item(obj, model_size=model_size, hidden_size=hidden_size)

    def to_official_dict(self) -> dict[str, Any]:
        """The fields of an official ``VoiceClonePromptItem`` (W:40-51)."""
        return {"ref_code": self.ref_codes, "ref_spk_embedding": self.xvector,
                "x_vector_only_mode": self.xvector_only, "icl_mode": not self.xvector_only,
                "ref_text": self.ref_text}


def _size_name(size: str) -> str:
    return {"0b6": "0.6B", "1b7": "1.7B"}.get(size, repr(size))


# ----------------------------------------------------------------------------- audio

def resample_to_24k(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mono float32 ``[L]`` at ``sample_rate`` Hz -> float32 ``[ceil(L * 24000 / sample_rate)]``.

    As ``librosa.resample(y, orig_sr, target_sr=24000)`` (default ``res_type="soxr_hq"``):
    ``soxr.resample(y, orig, 24000, quality="soxr_hq")`` then zero-pad or trim to
    ``ceil(L * ratio)`` with ``ratio = 24000.0 / orig`` in floating point (so an exact length
    can round up by one sample, as in librosa), when ``soxr`` is installed; otherwise
    :func:`vocalis.audio.to_mono_24k` (``scipy.signal.resample_poly``) fitted to the same
    length, which is close to but not identical with the official resampling (a different
    anti-aliasing filter). 24 kHz input is returned unchanged.
    """
    x = np.ascontiguousarray(samples, dtype=np.float32)
    sr = int(sample_rate)
    if sr == SAMPLE_RATE:
        return x
    n = math.ceil(x.shape[0] * (float(SAMPLE_RATE) / sr))  # librosa's float ratio first (may round up)
    try:
        import soxr
    except ImportError:
        y = to_mono_24k(x, sr, SAMPLE_RATE)
    else:
        y = np.asarray(soxr.resample(x, sr, SAMPLE_RATE, quality="soxr_hq"), dtype=np.float32)
    if y.shape[0] < n:
        y = np.pad(y, (0, n - y.shape[0]))
    return np.ascontiguousarray(y[:n], dtype=np.float32)


def _mono(samples: np.ndarray) -> np.ndarray:
    x = np.asarray(samples)
    if x.ndim == 2:
        if x.shape[0] < x.shape[1] and x.shape[0] <= 8:
            raise InputError(f"reference audio has shape {x.shape} (looks like [channels, samples]); "
                             "pass [samples] or [samples, channels]", param="voice")
        x = np.mean(x.astype(np.float32), axis=-1)  # W:259-262 (float32 mean over channels)
    elif x.ndim != 1:
        raise InputError(f"reference audio must be [samples] or [samples, channels], got shape "
                         f"{x.shape}", param="voice")
    return x.astype(np.float32)


def _check_reference(x: np.ndarray, sample_rate: int, name: str) -> None:
    """One-line VoiceErrors for audio that cannot make a good prompt (see create_clone_prompt)."""
    bad = int(np.count_nonzero(~np.isfinite(x)))
    if bad:
        raise VoiceError(f"reference audio {name} holds {bad} NaN or infinite sample(s); re-export it "
                         "(e.g. `ffmpeg -i INPUT -ac 1 ref.wav`)")
    seconds = x.shape[0] / sample_rate
    if seconds < MIN_SECONDS:
        raise VoiceError(f"reference audio {name} is too short ({seconds:.2f} s, at least {MIN_SECONDS:g} s "
                         f"needed); {_ADVICE}")
    if seconds > MAX_SECONDS:
        raise VoiceError(f"reference audio {name} is too long ({seconds:.1f} s, at most {MAX_SECONDS:g} s); "
                         f"trim it to one clean passage ({_ADVICE}), e.g. `ffmpeg -i INPUT -t 15 ref.wav`")
    peak = float(np.max(np.abs(x)))
    dbfs = 20 * math.log10(peak) if peak > 0 else -math.inf
    if dbfs < SILENCE_DBFS:
        level = "digital silence" if peak == 0 else f"peak {dbfs:.0f} dBFS"
        raise VoiceError(f"reference audio {name} is silent ({level}, below {SILENCE_DBFS:g} dBFS); "
                         "record or choose audio with audible speech")
    if seconds < RECOMMENDED_SECONDS[0]:
        logger.warning("reference audio %s is short (%.1f s): the cloned voice may be less similar; %s",
                       name, seconds, _ADVICE)


@torch.no_grad()
def create_clone_prompt(samples: np.ndarray, sample_rate: int, *, speaker_encoder: SpeakerEncoder,
                        speech_encoder=None, ref_text: str | None = None, xvector_only: bool = False,
                        hidden_size: int | None = None, model_size: str | None = None,
                        name: str = "<array>") -> ClonePrompt:
    """Build a voice-clone prompt from reference audio, as the official
    ``create_voice_clone_prompt`` (W:356-459) for one item.

    Args:
        samples: float ``[L]`` or ``[L, C]`` (channels averaged) at ``sample_rate`` Hz, nominally
            in [-1, 1].
        sample_rate: Hz (positive integer).
        speaker_encoder: from :func:`load_speaker_encoder`.
        speech_encoder: ``codec_encoder.SpeechEncoder`` (``load_speech_encoder``); needed in ICL
            mode only.
        ref_text: transcript of the reference audio; required unless ``xvector_only``.
        xvector_only: clone from the speaker embedding alone (no ICL; ``ref_text`` ignored).
        hidden_size, model_size: the model the prompt is for; default to the encoder's
            attributes set by :func:`load_speaker_encoder`.
        name: how messages name the audio (a file path).

    Returns:
        ClonePrompt with ``xvector`` float32 ``[H]`` and, in ICL mode, ``ref_codes`` long
        ``[ceil(L24 / 1920), 16]`` (``L24`` = samples after resampling to 24 kHz).

    Raises:
        InputError: ``ref_text`` missing (without ``xvector_only``) or blank; no speech encoder
            in ICL mode; a bad sample rate or array shape.
        VoiceError: NaN/inf samples, silent audio (peak below -60 dBFS), shorter than 1 s or
            longer than 60 s. Audio under 3 s logs a warning.
    """
    sr = _rate(sample_rate, "sample_rate")
    if not xvector_only:
        if ref_text is None:
            raise InputError("voice cloning needs the transcript of the reference audio: pass --ref-text, "
                             "or --xvector-only to clone from the speaker embedding alone")
        if not ref_text.strip():
            raise InputError("--ref-text is empty: give the transcript of the reference audio, "
                             "or use --xvector-only")
        if speech_encoder is None:
            raise InputError("ICL voice cloning needs the speech encoder (load_speech_encoder); "
                             "pass speech_encoder or use --xvector-only")
    x = _mono(samples)
    _check_reference(x, sr, name)
    hidden_size = hidden_size if hidden_size is not None else getattr(speaker_encoder, "hidden_size", None)
    model_size = model_size if model_size is not None else getattr(speaker_encoder, "model_size", None)
    if hidden_size is None or model_size not in MODEL_SIZES:
        raise InputError(f"create_clone_prompt needs hidden_size and model_size ({'/'.join(MODEL_SIZES)}) "
                         f"of the model; got {hidden_size!r}, {model_size!r}")
    wav = torch.from_numpy(resample_to_24k(x, sr))
    xvec = speaker_encoder.embed(wav).float().cpu()  # W:440-447, modeling_qwen3_tts.py:1940-1954
    codes = None
    if not xvector_only:
        codes = speech_encoder.encode([wav])[0].cpu()  # W:426-432
    return ClonePrompt(xvector=xvec, ref_codes=codes, ref_text=None if xvector_only else ref_text,
                       xvector_only=bool(xvector_only), hidden_size=int(hidden_size), model_size=model_size,
                       encoder_fingerprint=getattr(speaker_encoder, "fingerprint", None))


def clone_prompt_from_file(path: str | os.PathLike[str], **kwargs) -> ClonePrompt:
    """:func:`create_clone_prompt` on an audio file read with :func:`vocalis.audio.read_audio`
    (any libsndfile format; channels averaged in float32, as ``librosa.load(mono=True)``).

    Raises:
        VoiceError: unreadable, missing, empty or corrupt file, plus create_clone_prompt's errors.
        InputError: as create_clone_prompt.
    """
    samples, sr = read_audio(path)
    return create_clone_prompt(samples, sr, name=os.fspath(path), **kwargs)
