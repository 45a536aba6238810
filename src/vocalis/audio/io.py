"""Reading audio files and converting them to the model's rate.

Both functions reproduce the official Pocket TTS voice-prompt path sample for
sample (``pocket_tts.data.audio.audio_read`` then
``pocket_tts.data.audio_utils.convert_audio``):

* the official reader decodes 16-bit ``.wav`` files with the ``wave`` module
  (``int16 / 32768``, then the mean over channels in float32) and everything
  else with soundfile (float32, then ``mean(axis=1)``). libsndfile's float
  conversion of 16-bit PCM is the same ``x / 32768``, so :func:`read_audio`
  uses soundfile for every file and gets identical samples;
* resampling is ``scipy.signal.resample_poly`` with ``up/down`` reduced by
  their gcd, on float32 input, cast back to float32.

:func:`read_audio` also reads files the official reader rejects (float WAV,
WAVE_FORMAT_EXTENSIBLE WAV) and turns every failure into one
:class:`~vocalis.errors.VoiceError` line.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import BinaryIO

import numpy as np

from vocalis.errors import InputError, VoiceError

__all__ = ["MODEL_SAMPLE_RATE", "read_audio", "to_mono_24k"]

logger = logging.getLogger(__name__)

MODEL_SAMPLE_RATE = 24000

_FIX = "re-export it as WAV, FLAC, OGG or MP3 (e.g. `ffmpeg -i INPUT -ac 1 voice.wav`)"


def _name(source: str | os.PathLike[str] | BinaryIO) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return str(getattr(source, "name", "<audio stream>"))


def read_audio(source: str | os.PathLike[str] | BinaryIO) -> tuple[np.ndarray, int]:
    """Read an audio file as mono float32 samples.

    Any format the installed libsndfile decodes: WAV (8/16/24/32-bit integer,
    32/64-bit float, WAVE_FORMAT_EXTENSIBLE), FLAC, OGG Vorbis/Opus, MP3, AIFF...
    Multi-channel audio is mixed down by averaging the channels in float32.

    Args:
        source: a path, or a binary file object positioned at the start of the audio.

    Returns:
        ``(samples, sample_rate_hz)``: ``samples`` is a C-contiguous float32
        array of shape ``[T]`` (``T > 0``), nominally in ``[-1, 1]``;
        ``sample_rate_hz`` is the file's rate (not resampled, see :func:`to_mono_24k`).

    Raises:
        VoiceError: file missing, not a regular file, empty (0 bytes or 0 samples),
            not audio, truncated/corrupt beyond decoding, or holding NaN/inf samples. The message names the
            file and says what to do.
    """
    import soundfile as sf

    name = _name(source)
    if isinstance(source, (str, os.PathLike)):
        _check_path(Path(source), name)
        target: str | BinaryIO = str(source)
    else:
        target = source
    try:
        data, sample_rate = sf.read(target, dtype="float32", always_2d=False)
    except sf.LibsndfileError as exc:
        raise VoiceError(_libsndfile_message(name, exc)) from exc
    except (sf.SoundFileError, RuntimeError, ValueError, TypeError, EOFError, OSError) as exc:
        raise VoiceError(f"cannot decode audio file {name}: {exc}; {_FIX}") from exc
    if data.ndim == 2:
        data = data.mean(axis=1)
    if data.size == 0:
        raise VoiceError(f"audio file has no samples: {name}; record or export a few seconds of speech")
    bad = int(np.count_nonzero(~np.isfinite(data)))
    if bad:
        raise VoiceError(f"audio file holds {bad} NaN or infinite sample(s): {name} is corrupt; {_FIX}")
    return np.ascontiguousarray(data, dtype=np.float32), int(sample_rate)


def _check_path(path: Path, name: str) -> None:
    if not path.exists():
        raise VoiceError(f"audio file not found: {name}; check the path (or use a predefined voice name)",
                         param="voice")
    if not path.is_file():
        raise VoiceError(f"not a regular file: {name}; pass the path of an audio file", param="voice")
    if path.stat().st_size == 0:
        raise VoiceError(f"audio file is empty (0 bytes): {name}; it was probably not fully written or "
                         "downloaded", param="voice")


def check_audio_file(path: str | os.PathLike[str]) -> None:
    """Whether ``path`` is an audio file :func:`read_audio` can open, from its header only
    (cheap: requests check their voice file this way before a model is loaded).

    Raises VoiceError as :func:`read_audio` does for a missing, empty or non-audio file."""
    import soundfile as sf

    name = os.fspath(path)
    _check_path(Path(path), name)
    try:
        sf.info(name)
    except sf.LibsndfileError as exc:
        raise VoiceError(_libsndfile_message(name, exc), param="voice") from exc
    except (sf.SoundFileError, RuntimeError, ValueError, TypeError, EOFError, OSError) as exc:
        raise VoiceError(f"cannot decode audio file {name}: {exc}; {_FIX}", param="voice") from exc


def _libsndfile_message(name: str, exc: Exception) -> str:
    detail = " ".join(str(getattr(exc, "error_string", "") or exc).split())
    lowered = detail.lower()
    if "format not recognised" in lowered or "unimplemented format" in lowered:
        return f"not a readable audio file: {name} ({detail}); {_FIX}"
    return f"cannot decode audio file {name} (truncated or corrupt: {detail}); {_FIX}"


def to_mono_24k(samples: np.ndarray, sr: int, target_sr: int = MODEL_SAMPLE_RATE) -> np.ndarray:
    """Resample mono audio to ``target_sr`` (24 kHz, the model rate, by default).

    Bit-identical to the official ``convert_audio``: the input is taken as
    float32, ``up = target_sr / g`` and ``down = sr / g`` with ``g = gcd(sr,
    target_sr)``, ``scipy.signal.resample_poly(x, up, down)`` (its default Kaiser
    window), result cast to float32. When the rates match, the float32 input is
    returned as is (no copy when it already is float32).

    Args:
        samples: ``[T]`` mono samples, or ``[T, C]`` (channels last, soundfile's
            layout), mixed down by averaging the channels in float32 first.
        sr: the samples' rate in Hz (a positive integer).
        target_sr: the wanted rate in Hz (a positive integer).

    Returns:
        float32 array ``[T']`` with ``T' = ceil(T * up / down)``.

    Raises:
        InputError: non-integer or non-positive rates, or an array that is not
            ``[T]`` or ``[T, C]`` (``[C, T]`` input with ``C < T`` is rejected).
    """
    sr_i = _rate(sr, "sr")
    target_i = _rate(target_sr, "target_sr")
    x = np.asarray(samples, dtype=np.float32)
    if x.ndim == 2:
        if x.shape[0] < x.shape[1]:
            raise InputError(
                f"to_mono_24k expects [T] or [T, C] samples, got shape {x.shape} (looks like [C, T]); "
                f"pass samples.T or mix the channels first"
            )
        x = x.mean(axis=1)
    elif x.ndim != 1:
        raise InputError(f"to_mono_24k expects [T] or [T, C] samples, got shape {x.shape}")
    if sr_i == target_i:
        return x
    if x.size == 0:
        return np.zeros(0, dtype=np.float32)
    from scipy.signal import resample_poly

    g = math.gcd(sr_i, target_i)
    up, down = target_i // g, sr_i // g
    # [1, T] along the last axis, exactly as the official code calls it.
    return resample_poly(x[None, :], up, down, axis=-1)[0].astype(np.float32, copy=False)


def _rate(value: int | float, what: str) -> int:
    if isinstance(value, bool):
        raise InputError(f"{what} must be a positive integer sample rate in Hz, got {value!r}")
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a positive integer sample rate in Hz, got {value!r}") from None
    if not math.isfinite(as_float) or as_float <= 0 or as_float != int(as_float):
        raise InputError(f"{what} must be a positive integer sample rate in Hz, got {value!r}")
    return int(as_float)
