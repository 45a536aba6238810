"""Server hardening (issue 7, items 2, 5 and 8), over real HTTP: uvicorn on loopback, the
``openai`` client and raw ``httpx`` as clients, a random-weight checkpoint.

* user strings never break the protocol: one voice-name grammar everywhere, nothing a user
  sent reaches a header or a log line unencoded;
* any failure between admission and the end of a response cancels the request, frees its
  row and is counted;
* nothing private (filesystem paths, engine details without the key) leaves the server;
* the server's messages for an empty body, non-finite options and the upload limit.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
import subprocess
import sys
import threading
import time
import wave
from types import SimpleNamespace

import numpy as np
import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("av")

import vocalis
from conftest import synthetic_voice
from tests.server.test_server import TEXT, Server, _upload, _wait_for, assert_envelope
from vocalis.errors import InputError
from vocalis.server import create_app, speech

SMALL = "english_2m_2026-10"
GRAMMAR = "1-64 characters from A-Z a-z 0-9 _ -"
ODD_NAMES = ["alloy ", " abc ", "abc\n", "alloy\r\n", "\talloy", "caf\u00e9", "\u8a9e\u97f3",
             "a\x00b", "a\x1bb", "x" * 65, "y" * 100_000]
SPEECH_KEYS = [f'vocalis_speech_requests_total{{outcome="{o}"}}'
               for o in ("completed", "cancelled", "failed", "rejected")]


@pytest.fixture(scope="module")
def ckpt(checkpoints):
    return checkpoints.get(SMALL)


@pytest.fixture(scope="module")
def tts(ckpt):
    t = vocalis.load(str(ckpt), max_batch=4, max_queue=16)
    yield t
    t.close()


@pytest.fixture(scope="module")
def voices_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("hardening_voices")


@pytest.fixture(scope="module")
def server(tts, ckpt, voices_dir):
    s = Server(create_app(tts, voices_dir=voices_dir, default_voice=str(ckpt / "voice.wav")))
    yield s
    s.stop()


def _health(server, **headers) -> dict:
    return httpx.get(server.url + "/health", headers=headers, timeout=30).json()


def _idle(server) -> bool:
    engine = _health(server)["engine"]
    return engine["active_rows"] == 0 and engine["queued"] == 0


# --------------------------------------------------------------------------- item 2: names


@pytest.mark.parametrize("name", ODD_NAMES, ids=repr)
def test_odd_voice_names_are_a_clear_400_and_start_no_work(server, name):
    """Old code: ``"alloy "`` and ``"abc\\n"`` passed the lookup (stripped), then broke the
    ``x-vocalis-voice`` header: no response at all and a row generating for nobody."""
    before = server.metrics()
    client = server.client()
    with pytest.raises(openai.BadRequestError) as exc:
        client.audio.speech.create(model="tts-1", voice=name, input="Hi.",
                                   response_format="pcm")
    err = exc.value.body
    assert err["param"] == "voice" and err["code"] == "invalid_voice_name", err
    assert GRAMMAR in err["message"] and len(err["message"]) < 400
    for voice in (name, {"id": name}):  # the same rule through raw HTTP and the object form
        r = httpx.post(server.url + "/v1/audio/speech", timeout=30,
                       json={"model": "tts-1", "input": "Hi.", "voice": voice})
        assert_envelope(r.status_code, r.content, 400, "voice")
    after = server.metrics()
    assert [after[k] for k in SPEECH_KEYS] == [before[k] for k in SPEECH_KEYS]
    assert _idle(server)


def test_requests_refused_after_their_announcement_leave_none_behind(server):
    """The speech endpoint announces each request to the engine while it resolves it
    (``TTS.expect``: a burst is then admitted as a whole, shortest first); a request refused
    on the way (an unknown voice, found only by looking it up) withdraws its announcement,
    as a served one does, so that no later burst waits for a request that never comes."""
    for voice in ("no_such_voice", "alloy"):
        r = httpx.post(server.url + "/v1/audio/speech", timeout=60,
                       json={"model": "tts-1", "input": "Hi.", "voice": voice, "max_frames": 3})
        if voice == "alloy":
            assert r.status_code == 200
        else:
            assert_envelope(r.status_code, r.content, 400, "voice")
        assert _health(server)["engine"]["announced"] == 0
    assert _idle(server)


def test_a_request_whose_handler_is_cancelled_while_it_is_submitted_is_cancelled(tts, ckpt,
                                                                                monkeypatch):
    """The endpoints submit in a worker thread (the engine's checks may load a voice); when
    the awaiting task is cancelled meanwhile (the client gone, the server stopping), the
    request the worker then makes is cancelled, not left generating for nobody. The engine's
    own ``submit`` runs; the test only holds it back until the task is cancelled."""
    entered, gate, made = threading.Event(), threading.Event(), []
    real_submit = tts.submit

    def held_submit(*args, **kwargs):
        entered.set()
        gate.wait(30)
        req = real_submit(*args, **kwargs)
        made.append(req)
        return req

    monkeypatch.setattr(tts, "submit", held_submit)
    plan = speech.SpeechPlan(SimpleNamespace(tts=tts, info=tts.info), str(ckpt / "voice.wav"),
                             5, 1.0, {"max_frames": 40})

    async def go():
        task = asyncio.create_task(speech.submit_async(None, plan, TEXT, 5))
        deadline = time.monotonic() + 60
        while not entered.is_set():
            assert time.monotonic() < deadline and not task.done(), task
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.set()
        deadline = time.monotonic() + 60
        while not (made and made[0].cancelled) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    asyncio.run(go())
    assert len(made) == 1 and made[0].cancelled
    events = list(made[0].events(timeout=60))
    assert events[-1].stats.cancelled


@pytest.mark.parametrize("name", ["abc\n", "abc ", " abc", "caf\u00e9", "a\tb"], ids=repr)
def test_upload_refuses_names_outside_the_grammar(server, ckpt, voices_dir, name):
    """Old code stored ``"abc\\n"`` (``$`` matches before a final newline): listed, never usable."""
    wav = (ckpt / "voice.wav").read_bytes()
    r = httpx.post(server.url + "/v1/audio/voices", data={"name": name}, timeout=60,
                   files={"audio_sample": ("v.wav", wav, "audio/wav")})
    err = assert_envelope(r.status_code, r.content, 400, "name", "invalid_voice_name")
    assert GRAMMAR in err["message"]
    listed = httpx.get(server.url + "/v1/audio/voices", timeout=30).json()["voices"]
    assert all(v["id"].strip() == v["id"] and "abc" not in v["id"] for v in listed)
    assert not [p for p in voices_dir.iterdir() if p.name.startswith(("abc", " abc", "caf"))]


def test_delete_and_lookup_use_the_same_grammar(server):
    for raw in ("abc%0A", "%20abc", "abc%20", "caf%C3%A9"):
        r = httpx.delete(f"{server.url}/v1/audio/voices/{raw}", timeout=30)
        assert_envelope(r.status_code, r.content, 400, "voice_id", "invalid_voice_name")
    r = httpx.delete(f"{server.url}/v1/audio/voices/no_such_voice", timeout=30)
    assert_envelope(r.status_code, r.content, 404, "voice_id", "voice_not_found")


def test_voice_header_is_the_id_and_uploads_log_encoded(server, ckpt):
    """A valid custom name round-trips into ``x-vocalis-voice``; a file name with control
    characters (a terminal escape, VT, DEL) reaches the log escaped."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("vocalis.server")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        status, _, data = _upload(server, "Mixed_Case-9", (ckpt / "voice.wav").read_bytes(),
                                  filename="take\x1b[2J\x0bINJECTED\x7fno.wav")  # sent raw
        assert status == 201, data
        r = httpx.post(server.url + "/v1/audio/speech", timeout=60, json={
            "model": "tts-1", "input": "Hi.", "voice": "Mixed_Case-9",
            "response_format": "pcm", "max_frames": 2})
        assert r.status_code == 200 and r.headers["x-vocalis-voice"] == "Mixed_Case-9"
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        httpx.delete(server.url + "/v1/audio/voices/Mixed_Case-9", timeout=30)
    lines = [rec.getMessage() for rec in records]
    assert any("INJECTED" in line for line in lines), lines
    assert all(line.isprintable() for line in lines), lines


# --------------------------------------------------------------------------- item 2: cleanup


def _bad_header_outside(app):
    """The app behind a layer that adds a header the HTTP library refuses (a trailing
    newline) to speech responses of requests marked ``x-test-bad-header``: uvicorn/h11 raise
    when the response starts, as they did for ``x-vocalis-voice: "alloy "``."""

    async def wrapped(scope, receive, send):
        marked = scope["type"] == "http" and any(k == b"x-test-bad-header"
                                                 for k, _ in scope["headers"])

        async def send_bad(message):
            if marked and message["type"] == "http.response.start":
                message = {**message, "headers": [*message["headers"], (b"x-note", b"bad\n")]}
            await send(message)

        await app(scope, receive, send_bad if marked else send)

    return wrapped


def test_failed_response_and_early_disconnect_free_the_row_and_count(ckpt, tmp_path):
    small = vocalis.load(str(ckpt), max_batch=1, max_queue=4)
    s = Server(_bad_header_outside(create_app(small, voices_dir=tmp_path,
                                              default_voice=str(ckpt / "voice.wav"))))
    body = {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "pcm",
            "seed": 1, "max_frames": 5000}  # ~400 s of audio if nobody stops it
    try:
        # 1. the response fails when it starts (after admission, before the first byte)
        with pytest.raises(httpx.HTTPError):
            httpx.post(s.url + "/v1/audio/speech", json=body, timeout=60,
                       headers={"x-test-bad-header": "1"})
        failed = 'vocalis_speech_requests_total{outcome="failed"}'
        assert _wait_for(lambda: s.metrics()[failed] == 1), s.metrics()
        assert _wait_for(lambda: _idle(s)), _health(s)

        # 2. a queued request whose client leaves before its first byte
        with httpx.Client(timeout=60) as holder:
            with holder.stream("POST", s.url + "/v1/audio/speech", json=body) as held:
                chunks = held.iter_bytes()  # kept: dropping it would close the stream
                assert held.status_code == 200 and next(chunks)
                waiting = socket.create_connection(("127.0.0.1", s.port), timeout=30)
                data = json.dumps({**body, "max_frames": 3}).encode()
                waiting.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                b"application/json\r\n" + f"Content-Length: {len(data)}\r\n\r\n"
                                .encode() + data)
                assert _wait_for(lambda: _health(s)["engine"]["queued"] == 1), _health(s)
                waiting.close()
                cancelled = 'vocalis_speech_requests_total{outcome="cancelled"}'
                assert _wait_for(lambda: s.metrics()[cancelled] == 1), s.metrics()
                engine = _health(s)["engine"]
                assert engine["queued"] == 0 and engine["active_rows"] == 1, engine
        assert _wait_for(lambda: _idle(s)), _health(s)
        m = s.metrics()
        assert m[cancelled] == 2 and m[failed] == 1 and m["vocalis_streams_in_flight"] == 0
        r = httpx.post(s.url + "/v1/audio/speech", json={**body, "max_frames": 2}, timeout=60)
        assert r.status_code == 200 and len(r.content) == 2 * 1920 * 2  # still serving
    finally:
        s.stop()
        small.close()


# --------------------------------------------------------------------------- item 8


def _no_paths(text: str, *paths) -> None:
    for p in paths:
        assert str(p) not in text, text


def test_local_model_is_served_under_its_folder_name(server, ckpt, voices_dir):
    client = server.client()
    ids = [m.id for m in client.models.list().data]
    assert ids[0] == ckpt.name and "tts-1" in ids
    assert _health(server)["model"] == ckpt.name
    audio = client.audio.speech.create(model=ckpt.name, voice="alloy", input="Hi.",
                                       response_format="pcm", extra_body={"max_frames": 2})
    assert len(audio.content) == 2 * 1920 * 2
    with pytest.raises(openai.NotFoundError) as exc:  # the message names the served id
        client.audio.speech.create(model="whisper-1", voice="alloy", input="Hi.")
    assert ckpt.name in exc.value.body["message"]
    seen = [httpx.get(server.url + p, timeout=30).text
            for p in ("/v1/models", "/health", "/v1/audio/voices", "/", "/static/app.js")]
    seen.append(exc.value.body["message"])
    _no_paths("\n".join(seen), ckpt, ckpt.parent, voices_dir)


def test_model_name_option_and_its_grammar(tts, ckpt, tmp_path):
    s = Server(create_app(tts, voices_dir=tmp_path, model_name="studio/narrator-v2"))
    try:
        client = s.client()
        assert [m.id for m in client.models.list().data][0] == "studio/narrator-v2"
        assert client.models.retrieve("studio/narrator-v2").id == "studio/narrator-v2"
        assert _health(s)["model"] == "studio/narrator-v2"
    finally:
        s.stop()
    for bad in ("", " x", "x\n", "/abs/path", "a b", "x" * 129):
        with pytest.raises(InputError, match="invalid model name"):
            create_app(tts, voices_dir=tmp_path, model_name=bad)


def test_error_messages_hide_server_folders(tts, ckpt, tmp_path):
    """A custom voice file that cannot be read: the error names it without the server's
    voices folder (old code: ``cannot read voice state /tmp/.../broken.safetensors``)."""
    vdir = tmp_path / "private" / "voices"
    vdir.mkdir(parents=True)
    (vdir / "broken.safetensors").write_bytes(b"not a safetensors file")
    (vdir / "broken.json").write_text(json.dumps({"id": "broken", "name": "broken"}))
    s = Server(create_app(tts, voices_dir=vdir, default_voice=str(ckpt / "voice.wav")))
    try:
        r = httpx.post(s.url + "/v1/audio/speech", timeout=30,
                       json={"model": "tts-1", "input": "Hi.", "voice": "broken"})
        err = assert_envelope(r.status_code, r.content, 400, None, "invalid_voice")
        assert "<voices-dir>/broken.safetensors" in err["message"], err
        _no_paths(err["message"], tmp_path)
    finally:
        s.stop()


def test_with_a_key_open_endpoints_reveal_liveness_only(tts, ckpt, tmp_path):
    s = Server(create_app(tts, voices_dir=tmp_path, default_voice=str(ckpt / "voice.wav"),
                          api_key="sekrit"))
    key = {"Authorization": "Bearer sekrit"}
    try:
        r = httpx.get(s.url + "/health", timeout=30)
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        r = httpx.get(s.url + "/health", headers={"Authorization": "Bearer wrong"}, timeout=30)
        assert r.json() == {"status": "ok"}
        full = httpx.get(s.url + "/health", headers=key, timeout=30).json()
        assert full["model"] == ckpt.name and full["engine"]["max_batch"] == 4
        r = httpx.get(s.url + "/metrics", timeout=30)
        assert_envelope(r.status_code, r.content, 401, None, "invalid_api_key")
        r = httpx.get(s.url + "/metrics", headers=key, timeout=30)
        assert r.status_code == 200 and "vocalis_active_rows" in r.text
        page = httpx.get(s.url + "/", timeout=30)
        assert page.status_code == 200 and ckpt.name not in page.text
        _no_paths(page.text, ckpt)
    finally:
        s.stop()


def test_web_page_title_shows_the_name_and_only_with_the_key(tts, ckpt, tmp_path):
    """The page in headless Chromium: without the key it knows nothing (title ``vocalis``,
    the key box open); with it, the served name, never the checkpoint path."""
    from tests.server.test_server_web import ARGS, CHROMIUM, sync_api

    s = Server(create_app(tts, voices_dir=tmp_path, default_voice=str(ckpt / "voice.wav"),
                          api_key="sekrit"))
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page()
            page.goto(s.url + "/")
            page.wait_for_function("document.getElementById('auth').open")
            assert page.title() == "vocalis" and page.inner_text("#model") == ""
            page.fill("#api-key", "sekrit")
            page.dispatch_event("#api-key", "change")
            page.wait_for_function("document.title !== 'vocalis'")
            assert page.title() == f"vocalis \u00b7 {ckpt.name}"
            assert page.inner_text("#model") == ckpt.name
            _no_paths(page.content(), ckpt)
            browser.close()
    finally:
        s.stop()


@pytest.mark.slow
def test_serve_model_name_flag(ckpt, tmp_path):
    from tests.server.test_server_cli import Proc

    bad = subprocess.run([sys.executable, "-m", "vocalis", "serve", "--model", str(ckpt),
                          "--model-name", "has space"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip().splitlines()[-1]]
    assert bad.stderr.startswith("error: --model-name 'has space' is not a valid name")

    proc = Proc(["--model", str(ckpt), "--model-name", "house-voice", "--port", "0",
                 "--voices-dir", str(tmp_path / "v"), "--api-key", "k"]).wait_ready()
    try:
        status, data = proc.request("GET", "/health")
        assert status == 200 and json.loads(data) == {"status": "ok"}
        conn_models = httpx.get(f"{proc.url}/v1/models", headers={"Authorization": "Bearer k"},
                                timeout=30).json()
        assert conn_models["data"][0]["id"] == "house-voice"
        assert str(ckpt) not in json.dumps(conn_models)
    finally:
        proc.stop()
    assert str(ckpt) in proc.log()  # the path stays in the server's own log


# --------------------------------------------------------------------------- item 5 messages


def test_post_without_a_body_says_so(server):
    for kw in ({}, {"content": b"", "headers": {"Content-Type": "application/json"}}):
        r = httpx.post(server.url + "/v1/audio/speech", timeout=30, **kw)
        err = assert_envelope(r.status_code, r.content, 400, None, "missing_body")
        assert "None" not in err["message"] and "request body is missing" in err["message"]


@pytest.mark.parametrize("field,literal", [("temperature", "Infinity"), ("temperature", "1e999"),
                                           ("eos_threshold", "NaN"), ("noise_clamp", "Infinity"),
                                           ("eos_threshold", "-Infinity")])
def test_non_finite_options_name_their_field(server, field, literal):
    raw = ('{"model": "tts-1", "input": "Hi.", "voice": "alloy", "%s": %s}'
           % (field, literal)).encode()
    r = httpx.post(server.url + "/v1/audio/speech", content=raw, timeout=30,
                   headers={"Content-Type": "application/json"})
    assert_envelope(r.status_code, r.content, 400, field)


@pytest.mark.parametrize("raw", [b'{"model": "tts-1", "input": "Hi \xff", "voice": "alloy"}',
                                 b"[" * 100_000 + b"]" * 100_000],
                         ids=["not-utf8", "nested-100000-deep"])
def test_a_body_that_is_no_json_text_is_named(server, raw):
    # json.loads fails with UnicodeDecodeError / RecursionError here, not a JSON syntax error
    r = httpx.post(server.url + "/v1/audio/speech", content=raw, timeout=30,
                   headers={"Content-Type": "application/json"})
    err = assert_envelope(r.status_code, r.content, 400, None, "invalid_json")
    assert "UTF-8" in err["message"]


def test_a_misspelled_required_field_is_pointed_at(server):
    r = httpx.post(server.url + "/v1/audio/speech", timeout=30,
                   json={"model": "tts-1", "input": "Hi.", "vocie": "alloy"})
    # voice may be left out (the default voice): the misspelling is what is refused
    err = assert_envelope(r.status_code, r.content, 400, "vocie", "unknown_parameter")
    assert "'vocie': did you mean 'voice'?" in err["message"]
    r = httpx.post(server.url + "/v1/audio/speech", timeout=30,
                   json={"mdoel": "tts-1", "input": "Hi.", "voice": "alloy"})
    err = assert_envelope(r.status_code, r.content, 400, "model", "missing_required_parameter")
    assert "the request has 'mdoel': did you mean 'model'?" in err["message"]


def test_every_problem_of_a_request_is_named(server):
    """The first problem in full, the others by field (the message said only "and 1 more
    problem(s)")."""
    r = httpx.post(server.url + "/v1/audio/speech", timeout=30,
                   json={"input": "Hi.", "voice": "alloy", "speed": "fast",
                         "response_format": "ogg"})
    err = assert_envelope(r.status_code, r.content, 400, "model", "missing_required_parameter")
    assert err["message"].startswith("missing required parameter 'model' (also: ")
    assert "'speed' invalid" in err["message"]
    assert "'response_format' invalid" in err["message"]


def test_nothing_speakable_names_the_input(server):
    r = httpx.post(server.url + "/v1/audio/speech", timeout=30,
                   json={"model": "tts-1", "input": "\U0001f642\U0001f642", "voice": "alloy"})
    err = assert_envelope(r.status_code, r.content, 400, "input")
    assert "nothing the model can speak" in err["message"]


def _wav_of_exactly(n_bytes: int, rate: int = 384_000) -> bytes:
    """A valid 16-bit stereo WAV of exactly ``n_bytes`` (a high rate keeps the voice short:
    10 MiB are 6.8 s)."""
    n = (n_bytes - 44) // 4
    x = np.resize(synthetic_voice(2.0, rate, channels=2), (n, 2))
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((x * 32767).astype("<i2").tobytes())
    data = buf.getvalue()
    assert len(data) == n_bytes
    return data


def test_upload_limit_is_exactly_10_mib_of_audio_and_says_so(server, voices_dir):
    limit = 10 * 1024 * 1024
    status, _, data = _upload(server, "exactly_10mib", _wav_of_exactly(limit))
    assert status == 201, data
    httpx.delete(server.url + "/v1/audio/voices/exactly_10mib", timeout=30)
    for size in (limit + 1, limit + 200_000, 11 * 1024 * 1024):  # route check and body limit
        status, _, data = _upload(server, "too_big", b"\x00" * size)
        err = assert_envelope(status, data, 413)
        assert "10485760 bytes (10 MiB)" in err["message"], err
        assert "10747904" not in err["message"]
    assert not list(voices_dir.glob("too_big*"))
