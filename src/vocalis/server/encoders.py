"""Incremental audio encoders: each chunk of PCM in, the bytes ready to send out.

Every format leaves as it is generated:

* ``wav``: 16-bit PCM with the streaming header (RIFF and data sizes ``0xFFFFFFFF``),
  the same integer conversion as :func:`vocalis.audio.float_to_int16`.
* ``pcm``: raw signed 16-bit little-endian, mono, at the model rate (OpenAI's ``pcm``).
* ``mp3`` (LAME, 64 kbit/s), ``opus`` (libopus in Ogg, one page per 20 ms packet),
  ``flac`` (1920-sample blocks: one frame per 80 ms of audio), ``aac`` (ADTS, 64 kbit/s)
  through PyAV, written to an in-memory sink that is drained after every chunk.

Compressed streams cannot go back to patch a header: the FLAC STREAMINFO says "total
samples unknown" (ffmpeg, browsers and ``flac`` read it; libsndfile cannot), MP3 has no
Xing/LAME tag, so decoders keep the encoder delay (about 1100 samples). AAC likewise
starts with its priming samples.
"""

from __future__ import annotations

import threading

import numpy as np

from vocalis.audio import float_to_int16, wav_header

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
    """``begin()`` -> header bytes, ``write(samples)`` -> bytes, ``end()`` -> trailing bytes."""

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

    def write(self, samples: np.ndarray) -> bytes:
        return float_to_int16(samples).astype("<i2", copy=False).tobytes()


class WAVEncoder(PCMEncoder):
    media_type = MEDIA_TYPES["wav"]

    def __init__(self, sample_rate: int):
        self.sample_rate = sample_rate

    def begin(self) -> bytes:
        return wav_header(self.sample_rate, None)


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

    def __init__(self, fmt: str, sample_rate: int):
        import av

        self.media_type = MEDIA_TYPES[fmt]
        container_fmt, codec, options, codec_options, bit_rate = _AV[fmt]
        self._av = av
        self._sink = _Sink()
        self._container = av.open(self._sink, mode="w", format=container_fmt, options=options)
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
            return self._sink.take()

    def end(self) -> bytes:
        with self._lock:
            if self._closed:
                return b""
            self._closed = True
            for packet in self._stream.encode(None):
                self._container.mux(packet)
            self._container.close()
            return self._sink.take()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._container.close()
            except Exception:
                pass


def make_encoder(fmt: str, sample_rate: int) -> Encoder:
    if fmt == "pcm":
        return PCMEncoder()
    if fmt == "wav":
        return WAVEncoder(sample_rate)
    if fmt in _AV:
        return AVEncoder(fmt, sample_rate)
    raise ValueError(f"unknown response format {fmt!r}; known: {', '.join(FORMATS)}")
