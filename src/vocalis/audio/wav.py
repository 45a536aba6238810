"""16-bit PCM mono WAV output: one-shot files and streams.

Conversion follows the official Pocket TTS writer: ``(clamp(x, -1, 1) * 32767)``
in float32, truncated toward zero to int16 (so ``1.0 → 32767``,
``-1.0 → -32767``, ``0.99999 → 32766``). soundfile is not used for writing:
libsndfile scales by 32768 and rounds, which gives different samples.

Streaming: :class:`WavStreamWriter` writes a header with "unknown length"
sizes first (``0xFFFFFFFF`` in both the RIFF and the data size fields: the
largest values the 32-bit fields hold, which ffmpeg, libsndfile, Python's
``wave``, browsers and most players read as "until the end of the stream"),
then the samples as they come. At :meth:`WavStreamWriter.close` the real sizes
are written back when the target can seek (a file); on a pipe or socket the
streaming header stays.
"""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

from vocalis.errors import InputError

__all__ = [
    "HEADER_BYTES",
    "STREAMING_SIZE",
    "WavStreamWriter",
    "float_to_int16",
    "wav_bytes",
    "wav_header",
    "write_wav",
]

HEADER_BYTES = 44
STREAMING_SIZE = 0xFFFFFFFF
_MAX_DATA_BYTES = 0xFFFFFFFF - (HEADER_BYTES - 8)  # the RIFF size (36 + data) must fit in 32 bits


def float_to_int16(x: np.ndarray) -> np.ndarray:
    """Float samples to int16 the way the official writer does.

    ``clip(x, -1, 1) * 32767`` computed in float32, then truncated toward zero.
    NaN becomes 0. Any shape; returns a new int16 array of the same shape.
    """
    y = np.clip(np.asarray(x, dtype=np.float32), np.float32(-1.0), np.float32(1.0)) * np.float32(32767.0)
    np.nan_to_num(y, copy=False, nan=0.0)
    return y.astype(np.int16)


def wav_header(sample_rate: int, num_samples: int | None) -> bytes:
    """The 44-byte header of a 16-bit PCM mono WAV file.

    Args:
        sample_rate: in Hz, positive.
        num_samples: number of samples that follow, or ``None`` for a stream of
            unknown length: then the RIFF and data sizes are both ``0xFFFFFFFF``.

    Raises:
        InputError: bad rate, negative count, or more data than a WAV file can
            describe (about 2**31 samples; stream it instead).
    """
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, np.integer)) or not 0 < sample_rate < 2**31:
        raise InputError(f"sample_rate must be a positive integer in Hz, got {sample_rate!r}")
    if num_samples is None:
        riff_size = data_size = STREAMING_SIZE
    else:
        if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) or num_samples < 0:
            raise InputError(f"num_samples must be a non-negative integer or None, got {num_samples!r}")
        data_size = 2 * int(num_samples)
        if data_size > _MAX_DATA_BYTES:
            raise InputError(
                f"{num_samples} samples do not fit in a WAV file (max {_MAX_DATA_BYTES // 2}); write a stream instead"
            )
        riff_size = HEADER_BYTES - 8 + data_size
    sample_rate = int(sample_rate)
    return (
        b"RIFF"
        + struct.pack("<I", riff_size)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", data_size)
    )


def _pcm_bytes(samples: np.ndarray) -> bytes:
    """Mono samples (float in [-1, 1], or int16 as is) as little-endian int16 bytes."""
    x = np.asarray(samples)
    if x.ndim != 1:
        raise InputError(f"expected mono samples of shape [T], got shape {x.shape}")
    pcm = x if x.dtype == np.int16 else float_to_int16(x)
    return pcm.astype("<i2", copy=False).tobytes()


def write_wav(target: str | os.PathLike[str] | BinaryIO, samples: np.ndarray, sample_rate: int) -> None:
    """Write a complete 16-bit PCM mono WAV file.

    Args:
        target: a path (created or replaced) or a binary file object (written
            at its current position, left open).
        samples: ``[T]`` float samples in ``[-1, 1]`` (converted with
            :func:`float_to_int16`), or int16 samples written as they are.
        sample_rate: in Hz.

    Raises:
        InputError: samples not 1-D, bad rate, too many samples for a WAV file.
    """
    data = _pcm_bytes(samples)
    header = wav_header(sample_rate, len(data) // 2)
    if isinstance(target, (str, os.PathLike)):
        with open(target, "wb") as f:
            f.write(header)
            f.write(data)
    else:
        target.write(header)
        target.write(data)


def _is_seekable(f: object) -> bool:
    seekable = getattr(f, "seekable", None)
    if seekable is not None:
        try:
            return bool(seekable())
        except (OSError, ValueError):
            return False
    return hasattr(f, "seek") and hasattr(f, "tell")


class WavStreamWriter:
    """Write a 16-bit PCM mono WAV progressively.

    The header is written when the writer is created (streaming sizes, see the
    module doc), each :meth:`write` appends samples, :meth:`close` patches the
    sizes when the target is seekable and closes the file if the writer opened it.
    Use as a context manager::

        with WavStreamWriter("out.wav", 24000) as w:
            for chunk in chunks:
                w.write(chunk)

    Args:
        target: a path (opened for writing, closed at :meth:`close`) or a binary
            file object such as ``sys.stdout.buffer``, a socket file or a
            ``BytesIO`` (written from its current position, left open).
        sample_rate: in Hz.
    """

    def __init__(self, target: str | os.PathLike[str] | BinaryIO, sample_rate: int):
        header = wav_header(sample_rate, None)  # validates the rate before opening anything
        self.sample_rate = int(sample_rate)
        self.num_samples = 0
        self._owns = isinstance(target, (str, os.PathLike))
        self._file: BinaryIO = open(target, "wb") if self._owns else target  # noqa: SIM115
        self.seekable = _is_seekable(self._file)
        self._start = 0
        if self.seekable:
            try:
                self._start = self._file.tell()
            except (OSError, ValueError):
                self.seekable = False
        self._closed = False
        self._file.write(header)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def path(self) -> Path | None:
        """The file path when the writer was given one, else ``None``."""
        return Path(self._file.name) if self._owns else None

    def write(self, samples: np.ndarray) -> int:
        """Append ``[T]`` samples (float in ``[-1, 1]`` or int16); returns ``T``.

        Raises:
            InputError: samples not 1-D.
            ValueError: the writer is closed.
        """
        if self._closed:
            raise ValueError("write() on a closed WavStreamWriter")
        data = _pcm_bytes(samples)
        self._file.write(data)
        n = len(data) // 2
        self.num_samples += n
        return n

    def close(self) -> None:
        """Finish the file: patch the sizes if seekable, flush, close what the writer opened.

        Idempotent. With more data than 32-bit sizes describe, the streaming sizes stay.
        """
        if self._closed:
            return
        self._closed = True
        try:
            data_size = 2 * self.num_samples
            if self.seekable and data_size <= _MAX_DATA_BYTES:
                end = self._file.tell()
                self._file.seek(self._start + 4)
                self._file.write(struct.pack("<I", HEADER_BYTES - 8 + data_size))
                self._file.seek(self._start + HEADER_BYTES - 4)
                self._file.write(struct.pack("<I", data_size))
                self._file.seek(end)
            flush = getattr(self._file, "flush", None)
            if flush is not None:
                try:
                    flush()
                except (OSError, ValueError):
                    pass
        finally:
            if self._owns:
                self._file.close()

    def __enter__(self) -> WavStreamWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort for forgotten writers
        if getattr(self, "_owns", False) and not getattr(self, "_closed", True):
            try:
                self.close()
            except Exception:
                pass


def wav_bytes(samples: np.ndarray, sample_rate: int) -> bytes:
    """A complete WAV file in memory (see :func:`write_wav`)."""
    buf = io.BytesIO()
    write_wav(buf, samples, sample_rate)
    return buf.getvalue()
