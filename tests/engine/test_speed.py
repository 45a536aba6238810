"""``speed``: pitch-preserving time-stretching, streamed chunk by chunk without seams.

Checked against formulas: the output length is ``round(n / speed)``, a sine keeps its
frequency (a resampler would shift it by ``speed``), and stretching a stream chunk by
chunk gives the very samples of stretching the whole signal at once (no seam can exist
at chunk boundaries). ``speed=1`` never touches the audio.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pylibrb")

import vocalis
from vocalis.audio.stretch import Stretcher, stretch
from vocalis.engine.types import Request
from vocalis.errors import InputError

RATE = 24000
SPEEDS = [0.25, 0.5, 1.5, 2.0, 4.0]


def sine(freq=220.0, seconds=2.0) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def peak_hz(x: np.ndarray) -> float:
    x = x[len(x) // 4: 3 * len(x) // 4]  # away from the edges
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x)), n=1 << 20))
    return float(np.argmax(spec) * RATE / (1 << 20))


def stretch_in_pieces(x: np.ndarray, speed: float, sizes) -> list[np.ndarray]:
    s = Stretcher(speed, RATE)
    out, i, k = [], 0, 0
    while i < len(x):
        n = sizes[k % len(sizes)]
        out.append(s.process(x[i:i + n]))
        i, k = i + n, k + 1
    out.append(s.finish())
    return out


@pytest.mark.parametrize("speed", SPEEDS)
def test_stretch_keeps_pitch_and_scales_duration(speed):
    x = sine()
    y = stretch(x, RATE, speed)
    assert y.dtype == np.float32 and y.shape[0] == round(len(x) / speed)
    assert abs(peak_hz(y) - 220.0) < 1.0, peak_hz(y)  # pitch kept (a resample: 220 * speed)
    assert np.isfinite(y).all() and 0.3 < np.abs(y).max() < 1.0


@pytest.mark.parametrize("speed", SPEEDS)
def test_chunked_stream_equals_one_shot(speed):
    x = sine(seconds=1.5)
    whole = stretch(x, RATE, speed)
    for sizes in ([1920], [1], [777, 5000, 13]):
        pieces = stretch_in_pieces(x, speed, sizes)
        np.testing.assert_array_equal(np.concatenate(pieces), whole)


def test_bad_speed_is_refused():
    for bad in (0.2, 4.01, 0, -1, True, "2"):
        with pytest.raises(InputError, match=r"speed must be a number in \[0.25, 4.0\]"):
            Stretcher(bad, RATE)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(InputError, match="speed must be a finite number between 0.25 and 4.0"):
            Stretcher(bad, RATE)


@pytest.fixture(scope="module")
def small(checkpoints):
    d = checkpoints.get("english_2m_2026-10")
    tts = vocalis.load(str(d))
    yield d, tts
    tts.close()


TEXT = "Hello there, this is a test of speed."


def test_api_speed_streams_the_stretch_of_the_model_audio(small):
    d, tts = small
    voice = tts.voice(str(d / "voice.wav"))
    base = tts.synthesize(TEXT, voice=voice, seed=3).samples
    for speed in (0.5, 2.0):
        chunks = list(tts.stream(TEXT, voice=voice, seed=3, speed=speed))
        streamed = np.concatenate(chunks)
        assert len(chunks) > 1  # it streams
        np.testing.assert_array_equal(streamed, stretch(base, RATE, speed))
        assert streamed.shape[0] == round(base.shape[0] / speed)
        audio = tts.synthesize(TEXT, voice=voice, seed=3, speed=speed)
        np.testing.assert_array_equal(audio.samples, streamed)


def test_speed_one_is_untouched(small):
    d, tts = small
    voice = tts.voice(str(d / "voice.wav"))
    req = tts.submit(TEXT, voice, 3, speed=1.0)
    assert type(req) is Request  # the engine's own request: no stretcher in the path
    list(req.events())
    a = tts.synthesize(TEXT, voice=voice, seed=3, speed=1).samples
    b = tts.synthesize(TEXT, voice=voice, seed=3).samples
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("speed", [0.1, 5, float("nan")])
def test_api_bad_speed_raises_before_queueing(small, speed):
    d, tts = small
    before = tts.engine_status()
    with pytest.raises(InputError, match="speed"):
        tts.submit(TEXT, str(d / "voice.wav"), 1, speed=speed)
    assert tts.engine_status()["queued"] == before["queued"]


def test_server_speed_through_the_openai_client(small, tmp_path):
    pytest.importorskip("openai")
    pytest.importorskip("uvicorn")
    from tests.server.test_server import Server, assert_envelope

    from vocalis.audio import float_to_int16
    from vocalis.server import create_app

    d, tts = small
    server = Server(create_app(tts, voices_dir=tmp_path, default_voice=str(d / "voice.wav")))
    try:
        client = server.client()
        base = tts.synthesize(TEXT, voice=str(d / "voice.wav"), seed=3).samples
        for speed in (0.5, 2.0):
            data = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT,
                                              response_format="pcm", speed=speed,
                                              extra_body={"seed": 3}).content
            want = float_to_int16(stretch(base, RATE, speed))
            np.testing.assert_array_equal(np.frombuffer(data, "<i2"), want)
        for bad in (0.1, 4.5):
            status, _, body = server.request("POST", "/v1/audio/speech", {
                "model": "tts-1", "input": TEXT, "voice": "alloy", "speed": bad})
            assert_envelope(status, body, 400, "speed")
    finally:
        server.stop()


def test_stats_report_the_stretched_duration(small):
    d, tts = small
    req = tts.submit(TEXT, str(d / "voice.wav"), 3, speed=2.0)
    n = sum(ev.samples.shape[0] for ev in req.events() if hasattr(ev, "samples"))
    assert req.stats.audio_s == n / RATE
