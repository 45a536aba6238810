"""Every output format opens in the tools people use, whole and streamed.

A real uvicorn server on loopback; the responses are read by independent readers:
``soundfile`` (libsndfile), Python's ``wave``, PyAV (ffmpeg's libraries), the ``ffmpeg`` /
``ffprobe`` / ``soxi`` programs. Whole files (``"stream": false``, or the ``openai``
client's ``audio.speech.create``) must give the true sample count; streams must stay
readable and chunked.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tempfile
import wave
from pathlib import Path

import numpy as np
import pytest

av = pytest.importorskip("av")
pytest.importorskip("openai")
pytest.importorskip("uvicorn")

import soundfile as sf
from tests.server.test_server import Server, assert_envelope, pcm_of

import vocalis
from vocalis.server import create_app

SMALL = "english_2m_2026-10"
RATE = 24000
FRAME = 1920  # one model frame (80 ms): the tolerance of container-level durations
TEXT = "Every format should open in every tool."
FORMATS = ["wav", "pcm", "mp3", "opus", "flac", "aac"]
SUFFIX = {"opus": "ogg"}


@pytest.fixture(scope="module")
def ckpt(checkpoints) -> Path:
    return checkpoints.get(SMALL)


@pytest.fixture(scope="module")
def server(ckpt, tmp_path_factory):
    tts = vocalis.load(str(ckpt))
    s = Server(create_app(tts, voices_dir=tmp_path_factory.mktemp("voices"),
                          default_voice=str(ckpt / "voice.wav")))
    yield s
    s.stop()
    tts.close()


def speech(server, **body):
    payload = {"model": "tts-1", "input": TEXT, "voice": "alloy", "seed": 11}
    payload.update(body)
    return server.request("POST", "/v1/audio/speech", payload)


@pytest.fixture(scope="module")
def reference(server) -> np.ndarray:
    status, headers, data = speech(server, response_format="pcm", stream=False)
    assert status == 200, data
    return pcm_of(data)


def ffprobe_seconds(path: Path) -> float:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration",
                          "-of", "csv=p=0", str(path)], capture_output=True, text=True,
                         check=True).stdout.strip()
    return float(out)


def ffmpeg_samples(path: Path) -> int:
    out = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "s16le", "-ac", "1",
                          "-ar", str(RATE), "pipe:1"], capture_output=True, check=True).stdout
    return len(out) // 2


def av_decode(data: bytes) -> tuple[int, int]:
    """(decoded sample count, rate) through PyAV, which applies ffmpeg's skip samples."""
    with av.open(io.BytesIO(data)) as c:
        rate = c.streams.audio[0].rate
        return sum(f.samples for f in c.decode(audio=0)), rate


def write_tmp(data: bytes, fmt: str) -> Path:
    p = Path(tempfile.mkdtemp()) / f"out.{SUFFIX.get(fmt, fmt)}"
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("fmt", FORMATS)
def test_whole_file_has_exact_lengths(server, reference, fmt):
    status, headers, data = speech(server, response_format=fmt, stream=False)
    assert status == 200, data
    assert headers.get("transfer-encoding") != "chunked"
    assert int(headers["content-length"]) == len(data)
    n = reference.shape[0]
    if fmt == "pcm":
        np.testing.assert_array_equal(pcm_of(data), reference)
        return
    path = write_tmp(data, fmt)
    if fmt in ("wav", "flac"):  # lossless, with their lengths in the header
        x, rate = sf.read(io.BytesIO(data), dtype="int16")
        assert rate == RATE
        np.testing.assert_array_equal(x.astype(np.float32) / 32767, reference)
        assert sf.info(io.BytesIO(data)).frames == n
        if shutil.which("soxi"):
            assert int(subprocess.run(["soxi", "-s", str(path)], capture_output=True, text=True,
                                      check=True).stdout) == n
    if fmt == "wav":
        with wave.open(io.BytesIO(data)) as w:
            assert w.getnframes() == n and w.getframerate() == RATE
    if fmt == "mp3":  # Xing/LAME tag: decoders drop the encoder delay and padding
        assert b"Xing" in data[:1024] or b"Info" in data[:1024]
        assert av_decode(data) == (n, RATE)
        assert ffmpeg_samples(path) == n
        assert sf.info(io.BytesIO(data)).frames == n  # libsndfile (mpg123) is gapless too
    if fmt == "opus":
        assert av_decode(data) == (2 * n, 48000)  # Ogg pre-skip and end granule: exact
        assert sf.info(io.BytesIO(data)).frames == n
    if fmt == "aac":  # ADTS has no place for its 1024 priming samples
        got, rate = av_decode(data)
        assert rate == RATE and n <= got <= n + 2048
    assert abs(ffprobe_seconds(path) - n / RATE) <= FRAME / RATE


@pytest.mark.parametrize("fmt", FORMATS)
def test_stream_stays_a_stream_and_decodes(server, reference, fmt):
    status, headers, data = speech(server, response_format=fmt, stream=True)
    assert status == 200, data
    assert headers.get("transfer-encoding") == "chunked" and "content-length" not in headers
    n = reference.shape[0]
    if fmt == "pcm":
        np.testing.assert_array_equal(pcm_of(data), reference)
        return
    got, rate = av_decode(data)
    if fmt == "wav":
        assert data[40:44] == b"\xff\xff\xff\xff"  # the streaming header, as before
        assert sf.read(io.BytesIO(data))[0].shape[0] == n
    elif fmt in ("flac",):
        assert (got, rate) == (n, RATE)
    elif fmt == "opus":
        assert (got, rate) == (2 * n, 48000)
    else:  # mp3 and aac keep their encoder delay in a stream
        assert rate == RATE and n <= got <= n + 2400


def test_openai_client_create_gets_whole_files(server, reference):
    """``audio.speech.create`` reads the whole body: it gets exact lengths; the streaming
    variant still gets a chunked stream."""
    client = server.client()
    n = reference.shape[0]
    wav = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT,
                                     response_format="wav", extra_body={"seed": 11}).content
    with wave.open(io.BytesIO(wav)) as w:
        assert w.getnframes() == n
    flac = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT,
                                      response_format="flac", extra_body={"seed": 11}).content
    assert sf.info(io.BytesIO(flac)).frames == n
    with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice="alloy", input=TEXT, response_format="wav",
            extra_body={"seed": 11}) as resp:
        assert resp.headers.get("transfer-encoding") == "chunked"
        assert b"".join(resp.iter_bytes())[40:44] == b"\xff\xff\xff\xff"


def test_own_flac_output_is_accepted_as_a_voice(server):
    status, _, flac = speech(server, response_format="flac", stream=False)
    assert status == 200
    from tests.server.test_server import _upload

    status, _, body = _upload(server, "from_flac", flac, filename="voice.flac")
    assert status == 201, body
    status, _, data = speech(server, voice="from_flac", response_format="pcm")
    assert status == 200 and len(data) > 0


def test_stream_false_with_sse_is_refused(server):
    status, _, data = speech(server, response_format="pcm", stream=False, stream_format="sse")
    assert_envelope(status, data, 400, "stream", "invalid_value")
    status, _, data = speech(server, response_format="pcm", stream="maybe")
    assert_envelope(status, data, 400, "stream")


def test_sse_still_streams_for_the_openai_client(server):
    status, headers, data = server.request(
        "POST", "/v1/audio/speech",
        {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "pcm",
         "stream_format": "sse", "seed": 11},
        headers={"X-Stainless-Lang": "python"})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in data.decode().splitlines()
              if line.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done"


def test_whole_file_client_leaving_cancels_the_request(server):
    """A whole-file request sends nothing until the end: a client that leaves meanwhile
    still cancels it and frees its row."""
    import http.client
    import socket

    from tests.server.test_server import _wait_for

    before = server.metrics()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("POST", "/v1/audio/speech", json.dumps(
        {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "flac",
         "stream": False, "seed": 3, "max_frames": 5000}), {"Content-Type": "application/json"})
    assert _wait_for(lambda: server.metrics()["vocalis_active_rows"] >= 1)
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    key = 'vocalis_speech_requests_total{outcome="cancelled"}'
    assert _wait_for(lambda: (m := server.metrics())["vocalis_active_rows"] == 0
                     and m[key] == before.get(key, 0) + 1), server.metrics()
