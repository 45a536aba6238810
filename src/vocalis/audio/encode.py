"""Incremental audio encoders (wav, pcm, mp3, opus, flac, aac): PCM chunks in, bytes out.

Every format leaves as it is generated:

* ``wav``: 16-bit PCM with the streaming header (RIFF and data sizes ``0xFFFFFFFF``),
  the same integer conversion as :func:`vocalis.audio.float_to_int16`.
* ``pcm``: raw signed 16-bit little-endian, mono, at the model rate (OpenAI's ``pcm``).
* ``mp3`` (LAME, 64 kbit/s), ``opus`` (libopus in Ogg, one page per 20 ms packet),
  ``flac`` (1920-sample blocks: one frame per 80 ms of audio), ``aac`` (ADTS, 64 kbit/s)
  through PyAV, written to an in-memory sink that is drained after every chunk.

A stream cannot go back to patch a header: the FLAC STREAMINFO says "total samples
unknown" (ffmpeg, browsers and ``flac`` read it; libsndfile cannot), MP3 has no Xing/LAME
tag, so decoders keep the encoder delay (about 1100 samples). AAC (ADTS) starts with its
priming samples in either mode: ADTS has no place to say so.

Whole files (``make_encoder(..., whole=True)``, or ``target=`` a seekable file) carry
exact lengths: the WAV RIFF/data sizes are the true ones, the FLAC STREAMINFO holds the
total sample count (libsndfile reads it), and MP3 starts with a Xing/LAME tag giving the
frame count, encoder delay and padding (ffmpeg/PyAV, mpg123 and libsndfile trim them:
gapless). For that the muxer writes into a seekable file and patches its header at the
end, so nothing leaves before :meth:`Encoder.end`.
"""

from __future__ import annotations

import io
import threading
from typing import BinaryIO

import numpy as np

from vocalis.audio.wav import WavStreamWriter, float_to_int16, wav_header

MEDIA_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "flac": "audio/flac",
    "aac": "audio/aac",
}

FORMATS = tuple(MEDIA_TYPES)

# format -> (PyAV container format, codec, container options, codec options, bit rate)
_AV = {
    "mp3": ("mp3", "libmp3lame", {"write_xing": "0", "id3v2_version": "0"}, {}, 64_000),
    "opus": ("ogg", "libopus", {"page_duration": "20000"}, {"application": "audio"}, 48_000),
    "flac": ("flac", "flac", {"metadata_header_padding": "0"}, {"frame_size": "1920"}, None),
    "aac": ("adts", "aac", {}, {}, 64_000),
}


class Encoder:
    """``begin()`` -> header bytes, ``write(samples)`` -> bytes, ``end()`` -> trailing bytes.

    ``samples``: float32 ``[n]`` in [-1, 1] at the model rate. An encoder given a ``target``
    file writes into it instead and returns ``b""`` everywhere."""

    media_type = "application/octet-stream"

    def begin(self) -> bytes:
        return b""

    def write(self, samples: np.ndarray) -> bytes:  # pragma: no cover - interface
        raise NotImplementedError

    def end(self) -> bytes:
        return b""

    def close(self) -> None:
        """Release resources without finishing the stream (cancelled requests)."""


class PCMEncoder(Encoder):
    media_type = MEDIA_TYPES["pcm"]

    def __init__(self, target: BinaryIO | None = None):
        self._target = target

    def write(self, samples: np.ndarray) -> bytes:
        data = float_to_int16(samples).astype("<i2", copy=False).tobytes()
        if self._target is None:
            return data
        self._target.write(data)
        return b""


class WAVEncoder(Encoder):
    """The streaming header up front, or into ``target`` a :class:`WavStreamWriter` (true
    sizes patched at :meth:`end` when the target can seek)."""

    media_type = MEDIA_TYPES["wav"]

    def __init__(self, sample_rate: int, target: BinaryIO | None = None):
        self.sample_rate = sample_rate
        self._writer = WavStreamWriter(target, sample_rate) if target is not None else None

    def begin(self) -> bytes:
        return wav_header(self.sample_rate, None) if self._writer is None else b""

    def write(self, samples: np.ndarray) -> bytes:
        if self._writer is None:
            return float_to_int16(samples).astype("<i2", copy=False).tobytes()
        self._writer.write(samples)
        return b""

    def end(self) -> bytes:
        if self._writer is not None:
            self._writer.close()
        return b""


class WholeFile(Encoder):
    """Any format as one complete file with exact lengths: everything is encoded into
    memory and returned by :meth:`end` (``begin``/``write`` return ``b""``)."""

    def __init__(self, fmt: str, sample_rate: int):
        self._buf = io.BytesIO()
        self._inner = make_encoder(fmt, sample_rate, target=self._buf)
        self.media_type = self._inner.media_type

    def write(self, samples: np.ndarray) -> bytes:
        self._inner.write(samples)
        return b""

    def end(self) -> bytes:
        self._inner.end()
        return self._buf.getvalue()

    def close(self) -> None:
        self._inner.close()


class _Sink:
    """A write-only file object PyAV muxes into; drained after every chunk."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        out = b"".join(self.parts)
        self.parts.clear()
        return out


class AVEncoder(Encoder):
    """A PyAV (ffmpeg) encoder and muxer writing to memory, one per request."""

    def __init__(self, fmt: str, sample_rate: int, target: BinaryIO | None = None):
        import av

        self.media_type = MEDIA_TYPES[fmt]
        container_fmt, codec, options, codec_options, bit_rate = _AV[fmt]
        self._av = av
        self._sink = _Sink() if target is None else None
        if target is not None:  # seekable: let the muxer write its Xing/STREAMINFO lengths
            options = {k: v for k, v in options.items() if k != "write_xing"}
        self._container = av.open(self._sink or target, mode="w", format=container_fmt,
                                  options=options)
        stream = self._container.add_stream(codec, rate=sample_rate, layout="mono")
        if bit_rate:
            stream.bit_rate = bit_rate
        if codec_options:
            stream.options = dict(codec_options)
        self._stream = stream
        self._rate = sample_rate
        self._pts = 0
        self._closed = False
        self._lock = threading.Lock()

    def _frame(self, samples: np.ndarray):
        pcm = float_to_int16(samples)
        frame = self._av.AudioFrame.from_ndarray(pcm[None, :], format="s16", layout="mono")
        frame.sample_rate = self._rate
        frame.pts = self._pts
        self._pts += pcm.shape[0]
        return frame

    def write(self, samples: np.ndarray) -> bytes:
        with self._lock:
            if self._closed or samples.size == 0:
                return b""
            for packet in self._stream.encode(self._frame(samples)):
                self._container.mux(packet)
            return self._take()

    def end(self) -> bytes:
        with self._lock:
            if self._closed:
                return b""
            self._closed = True
            for packet in self._stream.encode(None):
                self._container.mux(packet)
            self._container.close()
            return self._take()

    def _take(self) -> bytes:
        return self._sink.take() if self._sink is not None else b""

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._container.close()
            except Exception:
                pass


def make_encoder(fmt: str, sample_rate: int, *, whole: bool = False,
                 target: BinaryIO | None = None) -> Encoder:
    """An encoder for ``fmt`` (one of :data:`FORMATS`) at ``sample_rate`` Hz.

    Default: a stream (bytes out of every call, lengths unknown in the headers).
    ``whole``: one complete file with exact lengths, all of it from ``end()``.
    ``target``: write into this binary file instead (a seekable one gets exact lengths
    at ``end()``; the caller closes it). Raises ValueError for an unknown format.
    """
    if fmt not in MEDIA_TYPES:
        raise ValueError(f"unknown response format {fmt!r}; known: {', '.join(FORMATS)}")
    if whole:
        return WholeFile(fmt, sample_rate)
    if fmt == "pcm":
        return PCMEncoder(target)
    if fmt == "wav":
        return WAVEncoder(sample_rate, target)
    return AVEncoder(fmt, sample_rate, target)


# file name suffix -> format (``vocalis generate -o``)
SUFFIXES = {".wav": "wav", ".pcm": "pcm", ".raw": "pcm", ".mp3": "mp3", ".opus": "opus",
            ".ogg": "opus", ".flac": "flac", ".aac": "aac"}
