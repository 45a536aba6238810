"""vocalis.audio against independent references: the official pocket_tts reader and
resampler, soundfile, Python's wave module and torch's int16 conversion."""

from __future__ import annotations

import io
import os
import struct
import wave

import numpy as np
import pytest
import soundfile as sf

from vocalis.audio import (
    STREAMING_SIZE,
    WavStreamWriter,
    float_to_int16,
    read_audio,
    to_mono_24k,
    wav_header,
    write_wav,
)
from vocalis.errors import InputError, VoiceError

torch = pytest.importorskip("torch")
official_audio = pytest.importorskip("pocket_tts.data.audio")
official_utils = pytest.importorskip("pocket_tts.data.audio_utils")

RATES = (8000, 16000, 22050, 44100, 48000)
CHANNELS = (1, 2, 6)


def _signal(sr: int, channels: int, seconds: float = 0.2, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(sr * seconds)) / sr
    cols = [0.4 * np.sin(2 * np.pi * (220 + 110 * c) * t) + 0.05 * rng.standard_normal(t.size) for c in range(channels)]
    return np.clip(np.stack(cols, axis=1), -1, 1)


def _official_read(path) -> tuple[np.ndarray, int]:
    wav, sr = official_audio.audio_read(path)
    assert wav.dtype == torch.float32 and wav.shape[0] == 1
    return wav[0].numpy(), sr


# (container format, subtype, extension, supported rates or None for all, max channels)
FORMATS = [
    ("WAV", "PCM_16", "wav", None, 6),
    ("WAV", "PCM_U8", "wav", None, 6),
    ("WAV", "PCM_24", "wav", None, 6),
    ("WAV", "PCM_32", "wav", None, 6),
    ("FLAC", "PCM_16", "flac", None, 6),
    ("FLAC", "PCM_24", "flac", None, 6),
    ("OGG", "VORBIS", "ogg", None, 6),
    ("OGG", "OPUS", "opus", (8000, 16000, 48000), 2),
    ("MP3", "MPEG_LAYER_III", "mp3", None, 2),
]


@pytest.mark.parametrize("fmt,subtype,ext,rates,max_ch", FORMATS, ids=[f"{f[0]}-{f[1]}" for f in FORMATS])
def test_read_audio_matches_official_bit_for_bit(tmp_path, fmt, subtype, ext, rates, max_ch):
    checked = 0
    for sr in rates or RATES:
        for ch in CHANNELS:
            if ch > max_ch:
                continue
            path = tmp_path / f"a_{sr}_{ch}.{ext}"
            sf.write(path, _signal(sr, ch, seed=sr + ch), sr, format=fmt, subtype=subtype)
            ours, our_sr = read_audio(path)
            ref, ref_sr = _official_read(path)
            assert our_sr == ref_sr == sr
            assert ours.dtype == np.float32 and ours.ndim == 1 and ours.flags.c_contiguous
            assert ours.shape == ref.shape
            assert np.array_equal(ours, ref), (path.name, np.abs(ours - ref).max())
            checked += 1
    assert checked >= 6


def test_read_audio_16bit_wav_uses_same_values_as_wave_module(tmp_path):
    # The official 16-bit WAV path is `wave` + int16/32768: check the values, not only equality.
    pcm = np.array([[-32768, 32767], [0, -1], [12345, -23456]], dtype=np.int16)
    path = tmp_path / "pcm.WAV"  # upper-case suffix also goes through `wave` officially
    sf.write(path, pcm, 16000, subtype="PCM_16")
    ours, _ = read_audio(path)
    expected = (pcm.astype(np.float32) / 32768.0).mean(axis=1)
    assert np.array_equal(ours, expected)
    assert np.array_equal(ours, _official_read(path)[0])


@pytest.mark.parametrize("subtype", ["FLOAT", "DOUBLE"])
def test_read_audio_float_wav_which_official_cannot_read(tmp_path, subtype):
    path = tmp_path / "f.wav"
    x = _signal(16000, 2)
    sf.write(path, x, 16000, subtype=subtype)
    with pytest.raises(wave.Error):  # official: wave.open rejects format 3 (IEEE float)
        official_audio.audio_read(path)
    ours, sr = read_audio(path)
    assert sr == 16000
    assert np.array_equal(ours, sf.read(path, dtype="float32")[0].mean(axis=1))


def test_read_audio_wavex_which_official_cannot_read(tmp_path):
    path = tmp_path / "x.wav"
    x = _signal(48000, 2)
    sf.write(path, x, 48000, format="WAVEX", subtype="PCM_16")
    try:
        ref = _official_read(path)[0]  # Python >= 3.12's wave reads WAVE_FORMAT_EXTENSIBLE
    except wave.Error:
        ref = None  # Python 3.11's wave does not
    ours, sr = read_audio(path)
    assert sr == 48000
    assert np.array_equal(ours, sf.read(path, dtype="float32")[0].mean(axis=1))
    if ref is not None:
        assert np.array_equal(ours, ref)


def test_read_audio_file_object(tmp_path):
    path = tmp_path / "a.flac"
    sf.write(path, _signal(22050, 2), 22050)
    with open(path, "rb") as f:
        ours, sr = read_audio(f)
    assert sr == 22050 and np.array_equal(ours, _official_read(path)[0])


@pytest.mark.parametrize("sr", [8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000])
def test_to_mono_24k_matches_official_convert_audio(sr):
    x = _signal(sr, 1, seconds=0.3, seed=sr)[:, 0].astype(np.float32)
    ours = to_mono_24k(x, sr)
    ref = official_utils.convert_audio(torch.from_numpy(x)[None], sr, 24000, 1)[0].numpy()
    assert ours.dtype == np.float32 and ours.shape == ref.shape
    assert np.array_equal(ours, ref)
    if sr == 24000:
        assert ours is x


def test_read_and_resample_pipeline_matches_official(tmp_path):
    path = tmp_path / "v.mp3"
    sf.write(path, _signal(44100, 2, seconds=0.5), 44100, format="MP3")
    ours = to_mono_24k(*read_audio(path))
    wav, sr = official_audio.audio_read(path)
    ref = official_utils.convert_audio(wav, sr, 24000, 1)[0].numpy()
    assert np.array_equal(ours, ref)


def test_to_mono_24k_channels_last_and_errors():
    x = _signal(16000, 2).astype(np.float32)
    assert np.array_equal(to_mono_24k(x, 16000), to_mono_24k(x.mean(axis=1), 16000))
    with pytest.raises(InputError, match="C, T"):
        to_mono_24k(x.T, 16000)
    with pytest.raises(InputError):
        to_mono_24k(x[:, 0], 0)
    with pytest.raises(InputError):
        to_mono_24k(x[:, 0], 22050.5)
    assert to_mono_24k(x[:, 0], 22050.0).shape == to_mono_24k(x[:, 0], 22050).shape
    assert to_mono_24k(np.zeros(0, np.float32), 16000).shape == (0,)


# ---------------------------------------------------------------- bad input


def _assert_voice_error(path, *needles):
    with pytest.raises(VoiceError) as info:
        read_audio(path)
    message = str(info.value)
    assert "\n" not in message
    assert os.fspath(path) in message
    for needle in needles:
        assert needle in message
    return message


def test_read_audio_missing_file(tmp_path):
    _assert_voice_error(tmp_path / "nope.wav", "not found")


def test_read_audio_directory(tmp_path):
    _assert_voice_error(tmp_path, "not a regular file")


def test_read_audio_zero_bytes(tmp_path):
    path = tmp_path / "empty.mp3"
    path.write_bytes(b"")
    _assert_voice_error(path, "empty")


def test_read_audio_zero_samples(tmp_path):
    path = tmp_path / "silent.wav"
    path.write_bytes(wav_header(24000, 0))
    _assert_voice_error(path, "no samples")


def test_read_audio_text_named_wav(tmp_path):
    path = tmp_path / "notes.wav"
    path.write_text("this is not audio, just some text\n" * 10)
    _assert_voice_error(path, "not a readable audio file", "ffmpeg")


@pytest.mark.parametrize("ext,fmt", [("flac", "FLAC"), ("wav", "WAV")])
def test_read_audio_truncated_header(tmp_path, ext, fmt):
    full = tmp_path / f"full.{ext}"
    sf.write(full, _signal(16000, 1), 16000, format=fmt)
    cut = tmp_path / f"cut.{ext}"
    cut.write_bytes(full.read_bytes()[:20])
    _assert_voice_error(cut)


def test_read_audio_truncated_flac_stream(tmp_path):
    full = tmp_path / "full.flac"
    sf.write(full, _signal(16000, 1, seconds=1.0), 16000)
    cut = tmp_path / "cut.flac"
    data = full.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    _assert_voice_error(cut, "truncated or corrupt")


def test_read_audio_truncated_wav_data_is_read_like_the_official(tmp_path):
    # A WAV cut inside its data chunk keeps the complete frames (official and libsndfile agree).
    full = tmp_path / "full.wav"
    sf.write(full, _signal(16000, 2), 16000, subtype="PCM_16")
    cut = tmp_path / "cut.wav"
    data = full.read_bytes()
    cut.write_bytes(data[: 44 + 4 * 1000])
    ours, _ = read_audio(cut)
    assert ours.shape == (1000,)
    assert np.array_equal(ours, _official_read(cut)[0])


# ---------------------------------------------------------------- writing


def test_float_to_int16_matches_torch_formula():
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.uniform(-1.5, 1.5, 100_000),
            [0.0, -0.0, 1.0, -1.0, 0.99999, -0.99999, 1e-9, -1e-9, 2.0, -2.0, 1 / 32767, -1 / 32767, np.inf, -np.inf],
        ]
    ).astype(np.float32)
    ours = float_to_int16(x)
    ref = (torch.from_numpy(x).clamp(-1, 1) * 32767).short().numpy()
    assert ours.dtype == np.int16 and np.array_equal(ours, ref)
    assert float_to_int16(np.array([np.nan], np.float32))[0] == 0
    assert list(float_to_int16(np.array([1.0, -1.0, 0.99999]))) == [32767, -32767, 32766]


def test_wav_header_layout():
    h = wav_header(24000, 10)
    assert len(h) == 44
    riff, size, wave_id, fmt, fmt_size, tag, ch, sr, byte_rate, align, bits, data, data_size = struct.unpack(
        "<4sI4s4sIHHIIHH4sI", h
    )
    assert (riff, wave_id, fmt, data) == (b"RIFF", b"WAVE", b"fmt ", b"data")
    assert (fmt_size, tag, ch, sr, byte_rate, align, bits) == (16, 1, 1, 24000, 48000, 2, 16)
    assert (size, data_size) == (36 + 20, 20)
    s = wav_header(24000, None)
    assert struct.unpack("<I", s[4:8])[0] == STREAMING_SIZE == struct.unpack("<I", s[40:44])[0]
    with pytest.raises(InputError):
        wav_header(0, 10)
    with pytest.raises(InputError):
        wav_header(24000, -1)
    with pytest.raises(InputError):
        wav_header(24000, 2**31)


def _check_with_wave_and_soundfile(source, expected_int16, sr):
    raw = source.read_bytes() if hasattr(source, "read_bytes") else source
    with wave.open(io.BytesIO(raw)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, sr)
        assert w.getnframes() == expected_int16.size
        assert np.array_equal(np.frombuffer(w.readframes(-1), "<i2"), expected_int16)
    data, got_sr = sf.read(io.BytesIO(raw), dtype="int16")
    assert got_sr == sr and np.array_equal(data, expected_int16)


def test_write_wav_path_and_file_object(tmp_path):
    x = _signal(24000, 1)[:, 0].astype(np.float32) * 2.5  # includes clipping
    path = tmp_path / "out.wav"
    write_wav(path, x, 24000)
    _check_with_wave_and_soundfile(path, float_to_int16(x), 24000)
    buf = io.BytesIO()
    write_wav(buf, x, 24000)
    assert buf.getvalue() == path.read_bytes()
    assert len(buf.getvalue()) == 44 + 2 * x.size
    pcm = float_to_int16(x)
    buf2 = io.BytesIO()
    write_wav(buf2, pcm, 24000)  # int16 input is written as is
    assert buf2.getvalue() == buf.getvalue()
    with pytest.raises(InputError):
        write_wav(io.BytesIO(), np.zeros((2, 10), np.float32), 24000)


def _chunks(x, sizes=(1, 7, 480, 1920, 5000)):
    out, i, k = [], 0, 0
    while i < x.size:
        n = sizes[k % len(sizes)]
        out.append(x[i : i + n])
        i, k = i + n, k + 1
    return out


def test_stream_writer_seekable_file_patches_sizes(tmp_path):
    x = _signal(24000, 1, seconds=0.5)[:, 0].astype(np.float32)
    path = tmp_path / "stream.wav"
    with WavStreamWriter(path, 24000) as w:
        for chunk in _chunks(x):
            w.write(chunk)
    assert w.closed and w.num_samples == x.size
    _check_with_wave_and_soundfile(path, float_to_int16(x), 24000)
    one_shot = io.BytesIO()
    write_wav(one_shot, x, 24000)
    assert path.read_bytes() == one_shot.getvalue()


def test_stream_writer_matches_official_writer_bytes():
    # The official StreamingWAVWriter (wave module) on a seekable target appends 0.2 s of
    # silence at finalize; with the same silence our bytes are identical.
    x = _signal(24000, 1, seconds=0.3)[:, 0].astype(np.float32)
    ref = io.BytesIO()
    writer = official_audio.StreamingWAVWriter(ref, 24000)
    writer.write_header(24000)
    for chunk in _chunks(x):
        writer.write_pcm_data(torch.from_numpy(chunk))
    writer.finalize()
    ours = io.BytesIO()
    with WavStreamWriter(ours, 24000) as w:
        for chunk in _chunks(x):
            w.write(chunk)
        w.write(np.zeros(int(24000 * 0.2), np.float32))
    assert ours.getvalue() == ref.getvalue()


class _Pipe(io.RawIOBase):
    """A write-only, non-seekable sink (like stdout piped to another program)."""

    def __init__(self):
        self.data = bytearray()

    def writable(self):
        return True

    def seekable(self):
        return False

    def write(self, b):
        self.data += bytes(b)
        return len(b)


def test_stream_writer_unseekable_keeps_streaming_header():
    x = _signal(24000, 1, seconds=0.25)[:, 0].astype(np.float32)
    pipe = _Pipe()
    with WavStreamWriter(pipe, 24000) as w:
        assert not w.seekable
        for chunk in _chunks(x):
            w.write(chunk)
    raw = bytes(pipe.data)
    assert raw[:44] == wav_header(24000, None)
    assert raw[44:] == float_to_int16(x).tobytes()
    data, sr = sf.read(io.BytesIO(raw), dtype="int16")  # libsndfile reads up to the end of the stream
    assert sr == 24000 and np.array_equal(data, float_to_int16(x))
    with wave.open(io.BytesIO(raw)) as wf:
        assert np.array_equal(np.frombuffer(wf.readframes(-1), "<i2"), float_to_int16(x))


def test_stream_writer_real_pipe():
    r, wfd = os.pipe()
    x = _signal(8000, 1, seconds=0.1)[:, 0].astype(np.float32)
    with os.fdopen(wfd, "wb", buffering=0) as sink:
        with WavStreamWriter(sink, 8000) as w:
            assert not w.seekable
            w.write(x)
    with os.fdopen(r, "rb") as source:
        raw = source.read()
    assert raw[:44] == wav_header(8000, None) and len(raw) == 44 + 2 * x.size


def test_stream_writer_at_offset_and_errors():
    buf = io.BytesIO()
    buf.write(b"prefix")
    x = np.linspace(-1, 1, 101, dtype=np.float32)
    w = WavStreamWriter(buf, 16000)
    w.write(x)
    w.close()
    w.close()  # idempotent
    assert not buf.closed  # not ours to close
    raw = buf.getvalue()
    assert raw[:6] == b"prefix"
    _check_with_wave_and_soundfile(raw[6:], float_to_int16(x), 16000)
    with pytest.raises(ValueError):
        w.write(x)
    with pytest.raises(InputError):
        WavStreamWriter(io.BytesIO(), 0)
