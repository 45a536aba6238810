"""The OpenAI-compatible server, over real HTTP: uvicorn on 127.0.0.1 (a free port) in a
thread, a random-weight checkpoint, and the ``openai`` client or plain HTTP as clients."""

from __future__ import annotations

import base64
import http.client
import io
import json
import logging
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

openai = pytest.importorskip("openai")
av = pytest.importorskip("av")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

import soundfile as sf

import vocalis
from conftest import synthetic_voice
from vocalis.server import create_app

SMALL = "english_2m_2026-10"
RATE = 24000
TEXT = "Hello from the server, this is a streaming test."


# --------------------------------------------------------------------------- servers


class Server:
    """uvicorn serving ``app`` on 127.0.0.1:<free port> in a daemon thread."""

    def __init__(self, app):
        self.app = app
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]},
                                       daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)

    def client(self, **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=kw.pop("api_key", "none"),
                             max_retries=0, timeout=60, **kw)

    def request(self, method: str, path: str, body=None, headers=None, timeout=60):
        """(status, headers dict (lower-case), body bytes) over a fresh connection."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
                headers = {"Content-Type": "application/json", **(headers or {})}
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()

    def metrics(self) -> dict[str, float]:
        _, _, data = self.request("GET", "/metrics")
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out


@pytest.fixture(scope="module")
def ckpt(checkpoints) -> Path:
    return checkpoints.get(SMALL)


@pytest.fixture(scope="module")
def tts(ckpt):
    t = vocalis.load(str(ckpt), max_batch=16, max_queue=64)
    yield t
    t.close()


@pytest.fixture(scope="module")
def voices_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("server_voices")


@pytest.fixture(scope="module")
def server(tts, ckpt, voices_dir):
    s = Server(create_app(tts, voices_dir=voices_dir, default_voice=str(ckpt / "voice.wav")))
    yield s
    s.stop()


def speech(server, **body) -> tuple[int, dict, bytes]:
    payload = {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "pcm",
               "seed": 7}
    payload.update(body)
    return server.request("POST", "/v1/audio/speech", payload)


def pcm_of(data: bytes) -> np.ndarray:
    return np.frombuffer(data, "<i2").astype(np.float32) / 32767


def decode_av(data: bytes) -> tuple[np.ndarray, int]:
    with av.open(io.BytesIO(data)) as c:
        rate = c.streams.audio[0].rate
        frames = [f.to_ndarray().reshape(-1) for f in c.decode(audio=0)]
    x = np.concatenate(frames)
    if x.dtype == np.int16:  # FLAC decodes to the very integers that were sent
        return x.astype(np.float32) / 32767, rate
    return x.astype(np.float32), rate


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


def assert_envelope(status, data, want_status, param=None, code=None):
    assert status == want_status, data
    body = json.loads(data)
    assert set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"]
    if param is not None:
        assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code, err
    return err


# --------------------------------------------------------------------------- formats


@pytest.fixture(scope="module")
def reference_pcm(server) -> np.ndarray:
    status, headers, data = speech(server, response_format="pcm")
    assert status == 200, data
    assert headers["content-type"].startswith("audio/pcm")
    assert headers["x-vocalis-seed"] == "7" and headers["x-vocalis-sample-rate"] == "24000"
    assert len(data) > 0 and len(data) % 2 == 0
    return pcm_of(data)


def sse_events(resp) -> list[dict]:
    """The JSON payloads of a server-sent-event stream (``data:`` lines of each block), in
    order, read as the text arrives."""
    events, buf = [], ""
    for text in resp.iter_text():
        buf += text
        while "\n\n" in buf:
            block, buf = buf.split("\n\n", 1)
            data = "".join(line[5:].strip() for line in block.splitlines()
                           if line.startswith("data:"))
            if data:
                events.append(json.loads(data))
    return events


@pytest.mark.parametrize("fmt", ["wav", "pcm", "flac", "mp3", "opus", "aac"])
def test_openai_client_every_format(server, reference_pcm, fmt):
    client = server.client()
    with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice="alloy", input=TEXT, response_format=fmt,
            extra_body={"seed": 7}) as resp:
        assert resp.headers.get("transfer-encoding") == "chunked"
        data = b"".join(resp.iter_bytes())
    n = reference_pcm.shape[0]
    if fmt == "pcm":
        np.testing.assert_array_equal(pcm_of(data), reference_pcm)
    elif fmt == "wav":
        assert data[:4] == b"RIFF" and data[40:44] == b"\xff\xff\xff\xff"  # streaming header
        x, rate = sf.read(io.BytesIO(data), dtype="int16")
        assert rate == RATE
        np.testing.assert_array_equal(x.astype(np.float32) / 32767, reference_pcm)
    else:
        x, rate = decode_av(data)
        if fmt == "flac":
            assert rate == RATE and x.shape[0] == n
            np.testing.assert_array_equal(x, reference_pcm)  # lossless
        elif fmt == "opus":
            assert rate == 48000 and x.shape[0] == 2 * n  # Opus decodes at 48 kHz
        else:  # mp3, aac: encoder delay and padding, at most ~2 codec frames
            assert rate == RATE and n <= x.shape[0] <= n + 2400, (x.shape[0], n)


def test_soundfile_reads_mp3_and_opus(server, reference_pcm):
    for fmt, rate in (("mp3", RATE), ("opus", RATE)):  # libsndfile decodes Opus at the input rate
        status, _, data = speech(server, response_format=fmt)
        assert status == 200
        x, r = sf.read(io.BytesIO(data))
        assert r == rate and abs(x.shape[0] / r - reference_pcm.shape[0] / RATE) < 0.1


def test_audio_leaves_as_it_is_generated(server):
    """A long request: the first bytes arrive long before the last."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    body = {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "mp3",
            "seed": 1, "max_frames": 150}
    t0 = time.perf_counter()
    conn.request("POST", "/v1/audio/speech", json.dumps(body),
                 {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    first = resp.read1(65536)
    t_first = time.perf_counter() - t0
    rest = resp.read()
    t_all = time.perf_counter() - t0
    conn.close()
    assert first and len(rest) > 4 * len(first)
    assert t_first < t_all / 3, (t_first, t_all)


def test_sse_stream(server, reference_pcm):
    client = server.client()
    with client.audio.speech.with_streaming_response.create(
            model="gpt-4o-mini-tts", voice="alloy", input=TEXT, response_format="pcm",
            stream_format="sse", extra_body={"seed": 7}) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse_events(resp)
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1)
    assert len(events) > 2
    done = events[-1]
    assert done["type"] == "speech.audio.done"
    usage = done["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    np.testing.assert_array_equal(pcm_of(audio), reference_pcm)
    assert usage["output_tokens"] * 1920 == reference_pcm.shape[0]


def test_instructions_are_accepted_and_ignored(server, reference_pcm):
    status, headers, data = speech(server, instructions="Speak like a pirate.")
    assert status == 200
    assert headers["x-vocalis-instructions"].startswith("ignored")
    np.testing.assert_array_equal(pcm_of(data), reference_pcm)


def test_voice_object_and_default_alias_and_random_seed(server, reference_pcm):
    status, _, data = speech(server, voice={"id": "default"})
    assert status == 200
    np.testing.assert_array_equal(pcm_of(data), reference_pcm)
    status, headers, _ = speech(server, seed=None)
    assert status == 200 and headers["x-vocalis-seed"].isdigit()  # a seed is always reported


# --------------------------------------------------------------------------- concurrency


def _stream_pcm(server, text, seed, voice="alloy") -> np.ndarray:
    client = server.client()
    with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice=voice, input=text, response_format="pcm",
            extra_body={"seed": seed}) as resp:
        return pcm_of(b"".join(resp.iter_bytes()))


def test_16_concurrent_clients_equal_their_solo_renditions(server):
    """16 requests at once, of different lengths (a burst is admitted in groups, the
    shortest first, after the server's announced requests have arrived) and two voices:
    each equals its solo rendition."""
    buf = io.BytesIO()
    sf.write(buf, synthetic_voice(2.0, 24000, seed=5), 24000, format="WAV")
    status, _, data = _upload(server, "burst_voice", buf.getvalue())
    assert status == 201, data
    words = "and then a few more words about the weather by the sea".split()
    texts = [f"Client {i} says hello{'!' * (i % 3)} " + " ".join(words[:(5 * i) % 13])
             for i in range(16)]
    seeds = [100 + i for i in range(16)]
    voices = ["alloy" if i % 2 else "burst_voice" for i in range(16)]
    solo = [_stream_pcm(server, *tsv) for tsv in zip(texts, seeds, voices)]
    before = server.metrics()
    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(lambda tsv: _stream_pcm(server, *tsv),
                                 zip(texts, seeds, voices)))
    for i, (a, b) in enumerate(zip(solo, together)):
        assert a.shape == b.shape, (i, a.shape, b.shape)
        assert cosine(a, b) >= 0.9999, (i, cosine(a, b))
    after = server.metrics()
    done = ('vocalis_speech_requests_total{outcome="completed"}')
    assert after[done] - before[done] == 16
    assert after["vocalis_active_rows"] == 0 and after["vocalis_streams_in_flight"] == 0
    health = json.loads(server.request("GET", "/health")[2])
    assert health["engine"]["announced"] == 0
    assert server.request("DELETE", "/v1/audio/voices/burst_voice")[0] == 200


def _wait_for(pred, timeout=10.0, every=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(every)
    return False


def _open_stream(server, **extra):
    """Start a long streaming request and read its first bytes; returns (conn, resp)."""
    body = {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "pcm",
            "seed": 3, "max_frames": 5000}
    body.update(extra)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("POST", "/v1/audio/speech", json.dumps(body),
                 {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.read1(4096)
    return conn, resp


def test_disconnect_cancels_and_frees_the_row(server):
    before = server.metrics()
    conn, _ = _open_stream(server)
    assert server.metrics()["vocalis_active_rows"] >= 1
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    key = 'vocalis_speech_requests_total{outcome="cancelled"}'
    assert _wait_for(lambda: (m := server.metrics())["vocalis_active_rows"] == 0
                     and m[key] == before[key] + 1), server.metrics()
    assert server.metrics()["vocalis_streams_in_flight"] == 0


def test_slow_reader_does_not_slow_the_others(server):
    conn, _resp = _open_stream(server)  # reads nothing more: its TCP window fills up
    try:
        t0 = time.perf_counter()
        status, _, data = speech(server, seed=9)
        assert status == 200 and len(data) > 0
        assert time.perf_counter() - t0 < 10
    finally:
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
    assert _wait_for(lambda: server.metrics()["vocalis_active_rows"] == 0)


def test_full_queue_answers_429_and_a_queued_disconnect_leaves_the_queue(ckpt, tmp_path):
    small = vocalis.load(str(ckpt), max_batch=1, max_queue=1)
    s = Server(create_app(small, voices_dir=tmp_path, default_voice=str(ckpt / "voice.wav")))
    try:
        row_conn, _ = _open_stream(s)  # takes the only row
        body = json.dumps({"model": "tts-1", "input": TEXT, "voice": "alloy",
                           "response_format": "pcm", "max_frames": 3}).encode()
        waiting = socket.create_connection(("127.0.0.1", s.port), timeout=30)
        waiting.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Type: application/json\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        assert _wait_for(lambda: small.engine_status()["queued"] == 1)
        assert s.metrics()["vocalis_queue_depth"] == 1

        with pytest.raises(openai.RateLimitError) as exc:
            s.client().audio.speech.create(model="tts-1", voice="alloy", input=TEXT)
        assert exc.value.response.headers["retry-after"] == "1"
        err = exc.value.body
        assert err["type"] == "rate_limit_error" and err["code"] == "capacity_exceeded"
        assert s.metrics()['vocalis_speech_requests_total{outcome="rejected"}'] == 1

        waiting.close()  # gone while queued: its request leaves the queue
        key = 'vocalis_speech_requests_total{outcome="cancelled"}'
        assert _wait_for(lambda: s.metrics()[key] == 1)
        assert _wait_for(lambda: small.engine_status()["queued"] == 0), small.engine_status()
        row_conn.sock.shutdown(socket.SHUT_RDWR)
        row_conn.close()
        assert _wait_for(lambda: small.engine_status()["active_rows"] == 0)
        assert speech(s, max_frames=2)[0] == 200  # and the server goes on serving
    finally:
        s.stop()
        small.close()


# --------------------------------------------------------------------------- bad input


def test_bad_inputs_get_openai_envelopes(server):
    long_text = "word " * 1000
    cases = [
        (dict(input=""), 400, "input", "empty_input"),
        (dict(input="   \n"), 400, "input", "empty_input"),
        (dict(input=long_text), 400, "input", "string_above_max_length"),
        (dict(voice="nobody"), 400, "voice", "voice_not_found"),
        (dict(voice={"id": "../../etc/passwd"}), 400, "voice", "invalid_voice_name"),
        (dict(model="whisper-1"), 404, "model", "model_not_found"),
        (dict(speed=9), 400, "speed", None),
        (dict(response_format="ogg"), 400, "response_format", None),
        (dict(stream_format="ws"), 400, "stream_format", None),
        (dict(temperature=-1), 400, "temperature", None),
        (dict(seed="abc"), 400, "seed", None),
        (dict(colour="blue"), 400, "colour", "unknown_parameter"),
    ]
    for extra, status, param, code in cases:
        s, _, data = speech(server, **extra)
        assert_envelope(s, data, status, param, code)
    s, _, data = server.request("POST", "/v1/audio/speech", {"input": "hi", "voice": "alloy"})
    assert_envelope(s, data, 400, "model", "missing_required_parameter")
    s, _, data = server.request("POST", "/v1/audio/speech", b'{"model": "tts-1", "inp',
                                {"Content-Type": "application/json"})
    assert_envelope(s, data, 400, None, "invalid_json")
    s, _, data = server.request("POST", "/v1/audio/speech", [1, 2])
    assert_envelope(s, data, 400)
    s, _, data = server.request("POST", "/v1/audio/speech", b"x" * (2 * 1024 * 1024),
                                {"Content-Type": "application/json"})
    assert_envelope(s, data, 413, None, "request_too_large")
    # refused before routing, still counted under its route
    m = server.metrics()
    assert m['vocalis_http_requests_total{method="POST",route="/v1/audio/speech",status="413"}'] >= 1
    s, _, data = server.request("GET", "/v1/nothing-here")
    assert_envelope(s, data, 404, None, "not_found")
    assert server.metrics()[
        'vocalis_http_requests_total{method="GET",route="unmatched",status="404"}'] >= 1
    s, _, data = server.request("PUT", "/v1/audio/speech")
    assert_envelope(s, data, 405)


def test_openai_client_sees_typed_errors(server):
    client = server.client()
    with pytest.raises(openai.BadRequestError) as exc:
        client.audio.speech.create(model="tts-1", voice="nobody", input="Hi.")
    assert exc.value.body["param"] == "voice"
    with pytest.raises(openai.NotFoundError):
        client.audio.speech.create(model="whisper-1", voice="alloy", input="Hi.")


def test_api_key(ckpt, tts, tmp_path):
    s = Server(create_app(tts, voices_dir=tmp_path, default_voice=str(ckpt / "voice.wav"),
                          api_key="sekrit"))
    try:
        with pytest.raises(openai.AuthenticationError) as exc:
            s.client(api_key="wrong").audio.speech.create(model="tts-1", voice="alloy",
                                                          input="Hi.")
        assert exc.value.body["code"] == "invalid_api_key"
        st, _, data = s.request("GET", "/v1/audio/voices")  # no key at all
        assert_envelope(st, data, 401, None, "invalid_api_key")
        # malformed JSON without a key is still a 401 (auth comes first)
        st, _, data = s.request("POST", "/v1/audio/speech", b"{", {"Content-Type": "x"})
        assert_envelope(st, data, 401, None, "invalid_api_key")
        audio = s.client(api_key="sekrit").audio.speech.create(
            model="tts-1", voice="alloy", input="Hi.", response_format="pcm")
        assert len(audio.content) > 0
        # the page and health (liveness only) stay open; metrics need the key
        assert s.request("GET", "/health")[0] == 200
        assert s.request("GET", "/")[0] == 200
        assert s.request("GET", "/metrics")[0] == 401
        assert s.request("GET", "/metrics", headers={"Authorization": "Bearer sekrit"})[0] == 200
    finally:
        s.stop()


# --------------------------------------------------------------------------- voices


def _wav_bytes(ckpt) -> bytes:
    return (ckpt / "voice.wav").read_bytes()


def _upload(server, name, data, filename="sample.wav", api_key=None):
    boundary = "vocalisboundary7"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n{name}\r\n'.encode(),
        (f'--{boundary}\r\nContent-Disposition: form-data; name="audio_sample"; '
         f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n').encode()
        + data + b"\r\n",
        f"--{boundary}--\r\n".encode(),
    ]
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    return server.request("POST", "/v1/audio/voices", b"".join(parts), headers)


def test_voice_upload_use_conflict_delete(server, ckpt, tts, voices_dir):
    status, _, data = _upload(server, "narrator_1", _wav_bytes(ckpt))
    assert status == 201, data
    meta = json.loads(data)
    assert meta["id"] == "narrator_1" and meta["object"] == "audio.voice"
    assert (voices_dir / "narrator_1.safetensors").is_file()
    assert (voices_dir / "narrator_1.json").is_file()

    _, _, data = server.request("GET", "/v1/audio/voices")
    listed = json.loads(data)
    ids = [v["id"] for v in listed["voices"]]
    assert "narrator_1" in ids and "default" in ids and listed["data"] == listed["voices"]

    by_name = speech(server, voice="narrator_1")
    by_object = speech(server, voice={"id": "narrator_1"})
    assert by_name[0] == by_object[0] == 200 and by_name[2] == by_object[2]
    # the stored state is the one the engine computes from the same audio
    direct = tts.synthesize(TEXT, voice=str(ckpt / "voice.wav"), seed=7)
    assert cosine(pcm_of(by_name[2]), direct.samples) > 0.9999

    status, _, data = _upload(server, "narrator_1", _wav_bytes(ckpt))
    assert_envelope(status, data, 409, "name", "voice_exists")
    status, _, data = _upload(server, "alloy", _wav_bytes(ckpt))
    assert_envelope(status, data, 409, "name", "voice_exists")

    status, _, data = server.request("DELETE", "/v1/audio/voices/narrator_1")
    assert status == 200 and json.loads(data)["deleted"] is True
    assert not (voices_dir / "narrator_1.safetensors").exists()
    assert_envelope(*speech(server, voice="narrator_1")[::2], 400, "voice")
    status, _, data = server.request("DELETE", "/v1/audio/voices/narrator_1")
    assert_envelope(status, data, 404, None, "voice_not_found")
    status, _, data = server.request("DELETE", "/v1/audio/voices/default")
    assert_envelope(status, data, 400)


@pytest.mark.parametrize("name", ["../evil", "a/b", ".hidden", "", "x" * 65, "sp ace",
                                  "..", "nul\x00"])
def test_voice_names_are_validated(server, ckpt, voices_dir, name):
    status, _, data = _upload(server, name, _wav_bytes(ckpt))
    assert status in (400, 404), data  # 404: the path itself does not match a route
    if status == 400:
        assert_envelope(status, data, 400, "name")
    assert not any(p.name.startswith("evil") for p in voices_dir.parent.rglob("*"))


def test_corrupt_and_oversized_uploads(server, voices_dir):
    status, _, data = _upload(server, "broken", b"RIFF\x00\x00\x00\x00WAVEnot really audio")
    assert_envelope(status, data, 422, "audio_sample", "invalid_audio")
    status, _, data = _upload(server, "empty", b"")
    assert_envelope(status, data, 422, "audio_sample")
    silence = io.BytesIO()
    sf.write(silence, np.zeros(48000, dtype=np.float32), 24000, format="WAV")
    status, _, data = _upload(server, "quiet", silence.getvalue())  # decodes, but no speech
    assert_envelope(status, data, 422, "audio_sample", "invalid_audio")
    assert b"is silent" in data and not list(voices_dir.glob("quiet*"))
    status, _, data = _upload(server, "huge", b"\x00" * (10 * 1024 * 1024 + 1))
    assert_envelope(status, data, 413)
    status, _, data = server.request("POST", "/v1/audio/voices", b"name=x",
                                     {"Content-Type": "application/x-www-form-urlencoded"})
    assert_envelope(status, data, 400, "audio_sample", "missing_required_parameter")
    assert not list(voices_dir.glob("broken*")) and not list(voices_dir.glob("huge*"))


def test_voices_survive_a_restart(tts, ckpt, tmp_path):
    first = Server(create_app(tts, voices_dir=tmp_path))  # no default voice: custom only
    try:
        st, _, data = speech(first, voice="alloy")
        assert_envelope(st, data, 400, "voice", "voice_not_found")
        assert _upload(first, "keeper", _wav_bytes(ckpt))[0] == 201
        st, _, before = speech(first, voice="keeper")
        assert st == 200
    finally:
        first.stop()
    second = Server(create_app(tts, voices_dir=tmp_path))
    try:
        _, _, data = second.request("GET", "/v1/audio/voices")
        assert [v["id"] for v in json.loads(data)["voices"]] == ["keeper"]
        st, _, after = speech(second, voice="keeper")
        assert st == 200 and after == before
    finally:
        second.stop()


def test_server_side_failure_is_a_500_envelope(tts, ckpt, tmp_path):
    """The voices folder vanishes under a running server: storing a voice fails with a
    500 envelope, and speech goes on."""
    import shutil

    vdir = tmp_path / "gone"
    s = Server(create_app(tts, voices_dir=vdir, default_voice=str(ckpt / "voice.wav")))
    try:
        shutil.rmtree(vdir)
        status, _, data = _upload(s, "lost", _wav_bytes(ckpt))
        err = assert_envelope(status, data, 500, None, "internal_error")
        assert err["type"] == "server_error"
        assert speech(s, max_frames=2)[0] == 200
    finally:
        s.stop()


# --------------------------------------------------------------------------- models, health


def test_models_health_metrics(server):
    client = server.client()
    ids = [m.id for m in client.models.list().data]
    assert "tts-1" in ids and "pocket-tts" in ids
    status, _, data = server.request("GET", "/health")
    health = json.loads(data)
    assert status == 200 and health["status"] == "ok" and health["sample_rate"] == RATE
    assert health["engine"]["max_batch"] == 16
    m = server.metrics()
    for name in ("vocalis_active_rows", "vocalis_queue_depth", "vocalis_ttfa_seconds_count",
                 "vocalis_rtf_count", "vocalis_audio_seconds_total",
                 "vocalis_streams_in_flight"):
        assert name in m, name
    assert m["vocalis_ttfa_seconds_count"] > 0 and m["vocalis_audio_seconds_total"] > 0
    assert m['vocalis_http_requests_total{method="GET",route="/health",status="200"}'] >= 1


def test_web_page_and_static_files_are_served(server):
    status, headers, data = server.request("GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    page = data.decode()
    assert "/static/app.js" in page and "http://" not in page and "https://" not in page
    for path in ("/static/app.js", "/static/style.css"):
        status, _, data = server.request("GET", path)
        assert status == 200 and b"http://" not in data and b"https://" not in data


def test_a_voices_folder_with_stray_files_warns_and_keeps_their_names(tts, ckpt, tmp_path,
                                                                      caplog):
    """Files named like half of a stored voice (a crash, a copy by hand: a state without its
    metadata, metadata without its state or broken, a folder named like one) are named in a
    warning at start-up. An upload under such a name is a 409 that does not send the user to
    a DELETE that cannot find it, and it leaves nothing behind; other names upload."""
    folder = tmp_path / "voices"
    folder.mkdir()
    (folder / "junk.safetensors").write_bytes(b"not a voice state")
    (folder / "myvoice.json").mkdir()
    (folder / "bad.json").write_text("{not json", encoding="utf-8")
    (folder / "orphan.json").write_text("{}", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="vocalis"):
        s = Server(create_app(tts, voices_dir=folder))
    try:
        warned = " ".join(r.getMessage() for r in caplog.records)
        for name in ("junk.safetensors", "myvoice.json", "bad.json", "orphan.json"):
            assert name in warned, warned
        before = sorted(p.name for p in folder.iterdir())
        for name in ("myvoice", "junk", "orphan"):
            status, _, data = _upload(s, name, _wav_bytes(ckpt))
            assert_envelope(status, data, 409, "name", "voice_exists")
            message = json.loads(data)["error"]["message"]
            assert "DELETE" not in message and str(folder) not in message, message
            assert _delete_status(s, name) == 404
        assert sorted(p.name for p in folder.iterdir()) == before
        status, _, data = _upload(s, "fresh", _wav_bytes(ckpt))
        assert status == 201, data
        assert speech(s, voice="fresh")[0] == 200
    finally:
        s.stop()


def _delete_status(server, name) -> int:
    return server.request("DELETE", f"/v1/audio/voices/{name}")[0]
