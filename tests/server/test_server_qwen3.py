"""The OpenAI-compatible server hosting Qwen3-TTS models, over real HTTP (uvicorn on
loopback, the ``openai`` client): built-in speakers as voices, ``instructions`` as instruct,
``language``, streaming equal to the API's audio, clear errors for what a model does not take.
Tiny random checkpoints written by vocalis's own writers in the official layout."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import soundfile as sf

import vocalis
from tests.server.test_server import Server
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint
from vocalis.server import create_app

openai = pytest.importorskip("openai")

TEXT = "Hello from the Qwen server."
OPTS = dict(max_new_tokens=9, seed=5)  # 8 frames


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3-server")
    out = {}
    for mid in ("qwen3-tts/0.6b-customvoice", "qwen3-tts/1.7b-voicedesign"):
        d = write_random_checkpoint(mid, root / mid.split("/")[1], seed=4, tiny=True)
        tts = vocalis.load(str(d), max_batch=4)
        server = Server(create_app(tts, voices_dir=root / f"voices-{mid.split('/')[1]}"))
        out[mid.split("/")[1]] = (tts, server)
    yield out
    for tts, server in out.values():
        server.stop()
        tts.close()


def test_speakers_are_the_voices_and_audio_equals_the_api(served):
    tts, server = served["0.6b-customvoice"]
    status, _, body = server.request("GET", "/v1/audio/voices")
    import json

    ids = [v["id"] for v in json.loads(body)["data"]]
    assert status == 200 and "ryan" in ids and "vivian" in ids and ids[0] == "default"
    client = server.client()
    models = [m.id for m in client.models.list().data]
    model = models[0]
    assert "qwen3-tts" in models and "pocket-tts" not in models
    resp = client.audio.speech.create(model=model, input=TEXT, voice="ryan", response_format="wav",
                                      extra_body=dict(language="english", **OPTS))
    wav, sr = sf.read(io.BytesIO(resp.content), dtype="float32")
    ref = tts.synthesize(TEXT, speaker="ryan", language="english", **OPTS).samples
    assert sr == 24000 and wav.shape == ref.shape == (8 * 1920,)
    assert np.abs(wav - ref).max() < 1e-4
    # streamed PCM is the same audio
    with client.audio.speech.with_streaming_response.create(
            model=model, input=TEXT, voice="ryan", response_format="pcm",
            extra_body=dict(language="english", stream=True, **OPTS)) as r:
        pcm = np.frombuffer(b"".join(r.iter_bytes()), dtype="<i2").astype(np.float32) / 32767
    assert pcm.shape == ref.shape and np.abs(pcm - ref).max() < 1e-4
    # an OpenAI voice name speaks with the default speaker (the first one)
    alloy = client.audio.speech.create(model=model, input=TEXT, voice="alloy", response_format="wav",
                                       extra_body=OPTS)
    assert alloy.content and len(alloy.content) > 8 * 1920 * 2


def test_non_streaming_mode_reaches_the_model(served):
    """``non_streaming_mode`` false (text fed along the frames, the low-latency prompt) gives
    the API's audio for that mode, not the default's."""
    tts, server = served["0.6b-customvoice"]
    client = server.client()
    wavs = {}
    for nsm in (False, None):
        extra = dict(language="english", **OPTS) | ({} if nsm is None else {"non_streaming_mode": nsm})
        resp = client.audio.speech.create(model="qwen3-tts", input=TEXT, voice="ryan",
                                          response_format="wav", extra_body=extra)
        wavs[nsm] = sf.read(io.BytesIO(resp.content), dtype="float32")[0]
    ref = tts.synthesize(TEXT, speaker="ryan", language="english", non_streaming_mode=False,
                         **OPTS).samples
    assert wavs[False].shape == ref.shape and np.abs(wavs[False] - ref).max() < 1e-4
    assert np.abs(wavs[False] - wavs[None]).max() > 1e-2
    status, _, body = server.request("POST", "/v1/audio/speech", {
        "model": "qwen3-tts", "input": TEXT, "voice": "ryan", "non_streaming_mode": "no"})
    assert status == 400 and b"non_streaming_mode" in body


def test_instructions_map_to_instruct_or_are_reported_ignored(served):
    tts, server = served["1.7b-voicedesign"]
    body = {"model": "x", "input": TEXT, "voice": "alloy", "response_format": "wav",
            "instructions": "A calm, low voice.", **OPTS}
    body["model"] = server.client().models.list().data[0].id
    status, headers, data = server.request("POST", "/v1/audio/speech", body)
    assert status == 200 and "x-vocalis-instructions" not in headers
    wav, _ = sf.read(io.BytesIO(data), dtype="float32")
    ref = tts.synthesize(TEXT, instruct="A calm, low voice.", **OPTS).samples
    assert np.abs(wav - ref).max() < 1e-4
    status, _, data = server.request("POST", "/v1/audio/speech", {**body, "instructions": None})
    assert status == 400 and b"needs instruct (`instructions` in the OpenAI API)" in data and b'"param":"instructions"' in data
    status, _, data = server.request("POST", "/v1/audio/speech", {**body, "voice": "ryan"})
    assert status == 400 and b"has no voices" in data
    # 0.6B CustomVoice ignores instructions: said in a header
    cv_tts, cv = served["0.6b-customvoice"]
    cv_model = cv.client().models.list().data[0].id
    status, headers, _ = cv.request("POST", "/v1/audio/speech", {**body, "model": cv_model, "voice": "ryan"})
    assert status == 200 and headers["x-vocalis-instructions"].startswith("ignored:")
    assert "(Qwen3-TTS 0.6B CustomVoice) has no instruction control" in headers["x-vocalis-instructions"]
    # the family's own name for the field (instruct) is the same field: noted, not dropped silently
    status, headers, _ = cv.request("POST", "/v1/audio/speech", {
        **body, "model": cv_model, "voice": "ryan", "instructions": None, "instruct": "Whisper."})
    assert status == 200 and headers["x-vocalis-instructions"].startswith("ignored:")
    # both names, differing: which one was meant is not guessed
    status, _, data = server.request("POST", "/v1/audio/speech", {**body, "instruct": "Shout."})
    assert status == 400 and b"instructions and instruct differ" in data
    assert json.loads(data)["error"]["param"] == "instruct"
    status, _, data = server.request("POST", "/v1/audio/speech", {
        **body, "instructions": None, "instruct": "A calm, low voice."})
    assert status == 200
    got, _ = sf.read(io.BytesIO(data), dtype="float32")
    assert np.abs(got - ref).max() < 1e-4


def test_bad_requests_name_what_the_model_takes(served):
    tts, server = served["0.6b-customvoice"]
    model = server.client().models.list().data[0].id
    cases = [({"voice": "nobody"}, "unknown voice 'nobody'"),
             ({"voice": "ryan", "language": "klingon"}, "unknown language 'klingon'"),
             ({"voice": "ryan", "eos_threshold": 1.0}, "unknown"),
             ({"voice": "ryan", "top_k": -3}, "top_k must be"),
             ({"voice": "ryan", "greedy": "yes"}, "greedy"),
             ({"voice": "ryan", "input": "Hi \ud800"}, "input is not valid Unicode (a lone "
                                                         "surrogate U+D800 at character 3)"),
             ({"voice": "nobody", "model": "x"}, "is not served here; use '0.6b-customvoice'")]
    for extra, msg in cases:
        status, _, data = server.request("POST", "/v1/audio/speech",
                                         {"model": model, "input": TEXT, **extra, **OPTS})
        if extra.get("model") == "x":
            assert status == 404 and msg.encode() in data, data
            continue
        assert status == 400 and msg.encode() in data, (extra, data)
        if "eos_threshold" in extra:  # the field it does not take is named in param
            assert b'"param":"eos_threshold"' in data, data
        if "input" in extra:
            assert b'"param":"input"' in data, data
    files = {"audio_sample": ("a.wav", b"RIFF0000", "audio/wav")}
    import httpx

    r = httpx.post(server.url + "/v1/audio/voices", data={"name": "mine"}, files=files)
    assert r.status_code == 400 and "does not clone voices (Qwen3-TTS 0.6B CustomVoice)" in \
        r.json()["error"]["message"]
    status, _, data = server.request("POST", "/v1/audio/speech", {"model": model, "input": TEXT, "voice": "RYAN",
                                                                  "response_format": "wav", **OPTS})
    assert status == 200  # speaker names are case-insensitive, as in the CLI and API
    assert tts.engine_status()["active_rows"] == 0


def test_base_model_clones_uploaded_voices(tmp_path):
    """A Qwen3 Base server: an upload with its transcript becomes an in-context voice (one
    without, an x-vector voice); speech with it equals the API with the same reference; an
    upload that is not speech audio is a 422; speakers are not voices here."""
    import httpx

    from tests.qwen3.test_qwen3_api import reference_audio

    d = write_random_checkpoint("qwen3-tts/0.6b-base", tmp_path / "base", seed=9, tiny=True)
    wav, _ = reference_audio(tmp_path / "ref")
    tts = vocalis.load(str(d), max_batch=2)
    server = Server(create_app(tts, voices_dir=tmp_path / "voices"))
    try:
        data = wav.read_bytes()
        r = httpx.post(server.url + "/v1/audio/voices", data={"name": "me", "ref_text": "Some words."},
                       files={"audio_sample": ("ref.wav", data, "audio/wav")}, timeout=60)
        assert r.status_code == 201 and r.json()["mode"] == "in-context"
        r = httpx.post(server.url + "/v1/audio/voices", data={"name": "me_x"},
                       files={"audio_sample": ("ref.wav", data, "audio/wav")}, timeout=60)
        assert r.status_code == 201 and r.json()["mode"] == "x-vector"
        r = httpx.post(server.url + "/v1/audio/voices", data={"name": "noise"},
                       files={"audio_sample": ("x.wav", b"RIFF\x10\x00\x00\x00WAVEjunk", "audio/wav")})
        assert r.status_code == 422
        model = server.client().models.list().data[0].id
        for vid, kw in (("me", dict(ref_text="Some words.")), ("me_x", dict(xvector_only=True))):
            status, _, body = server.request("POST", "/v1/audio/speech", {
                "model": model, "input": TEXT, "voice": vid, "response_format": "wav", **OPTS})
            assert status == 200, body
            got, _ = sf.read(io.BytesIO(body), dtype="float32")
            ref = tts.synthesize(TEXT, ref_audio=str(wav), **kw, **OPTS).samples
            assert got.shape == ref.shape and np.abs(got - ref).max() < 1e-4
        status, _, body = server.request("POST", "/v1/audio/speech", {
            "model": model, "input": TEXT, "voice": "ryan", **OPTS})
        assert status == 400 and b"unknown voice 'ryan'" in body
    finally:
        server.stop()
        tts.close()


@pytest.mark.parametrize("fmt", ["pcm", "wav", "flac", "mp3", "opus", "aac"])
def test_every_format_streams_the_api_audio(served, fmt):
    """Qwen3 speech through the ``openai`` client's streaming response in each format: the
    lossless ones equal the API's audio (after 16-bit rounding), the lossy ones hold its
    length (Opus at 48 kHz; MP3/AAC plus at most their encoder delay and padding)."""
    from tests.server.test_server import decode_av

    tts, server = served["0.6b-customvoice"]
    ref = tts.synthesize(TEXT, speaker="serena", **OPTS).samples
    ref16 = np.round(np.clip(ref, -1, 1) * 32767) / 32767
    client = server.client()
    with client.audio.speech.with_streaming_response.create(
            model="qwen3-tts", voice="serena", input=TEXT, response_format=fmt,
            extra_body=OPTS) as resp:
        assert resp.headers.get("transfer-encoding") == "chunked"
        data = b"".join(resp.iter_bytes())
    n = ref.shape[0]
    if fmt == "pcm":
        got = np.frombuffer(data, "<i2").astype(np.float32) / 32767
    elif fmt == "wav":
        got = sf.read(io.BytesIO(data), dtype="int16")[0].astype(np.float32) / 32767
    else:
        got, rate = decode_av(data)
        if fmt == "opus":
            assert rate == 48000 and got.shape[0] == 2 * n
            return
        if fmt in ("mp3", "aac"):
            assert rate == 24000 and n <= got.shape[0] <= n + 2400, (got.shape[0], n)
            return
        assert rate == 24000
    assert got.shape == ref.shape and np.abs(got - ref16).max() < 1e-4


def test_sse_deltas_concatenate_to_the_api_audio(served):
    import base64
    import json

    tts, server = served["0.6b-customvoice"]
    ref = tts.synthesize(TEXT, speaker="ryan", **OPTS).samples
    status, headers, data = server.request("POST", "/v1/audio/speech", {
        "model": "qwen3-tts", "input": TEXT, "voice": "ryan", "response_format": "pcm",
        "stream_format": "sse", **OPTS})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = [json.loads(block[5:]) for block in data.decode().split("\n\n") if block.startswith("data:")]
    assert [e["type"] for e in events] == ["speech.audio.delta"] * (len(events) - 1) + ["speech.audio.done"]
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    got = np.frombuffer(pcm, "<i2").astype(np.float32) / 32767
    assert got.shape == ref.shape and np.abs(got - ref).max() < 1e-4
    assert events[-1]["usage"]["output_tokens"] == 8


def test_sixteen_clients_that_leave_mid_stream_free_every_row(served):
    """16 long streams (4 generating, 12 queued) whose clients read a little and hang up:
    every row and queue place is freed and the server still answers."""
    import http.client
    import json
    import socket
    import time

    tts, server = served["0.6b-customvoice"]
    body = json.dumps({"model": "qwen3-tts", "input": TEXT, "voice": "ryan", "response_format": "pcm",
                       "max_new_tokens": 4000, "seed": 1})
    key = 'vocalis_speech_requests_total{outcome="cancelled"}'
    cancelled = server.metrics()[key]
    conns = []
    for _ in range(16):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("POST", "/v1/audio/speech", body, {"Content-Type": "application/json"})
        conns.append(conn)
    deadline = time.monotonic() + 60  # four generating (streaming), twelve waiting
    while time.monotonic() < deadline and (tts.engine_status()["active_rows"] < 4
                                           or tts.engine_status()["queued"] < 12):
        time.sleep(0.05)
    assert tts.engine_status()["active_rows"] == 4 and tts.engine_status()["queued"] == 12
    time.sleep(0.5)
    for conn in conns:
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st = tts.engine_status()
        if st["active_rows"] == 0 and st["queued"] == 0:
            break
        time.sleep(0.1)
    assert tts.engine_status()["active_rows"] == 0 and tts.engine_status()["queued"] == 0
    assert server.metrics()[key] == cancelled + 16  # none ran to its end
    ref = tts.synthesize(TEXT, speaker="ryan", **OPTS).samples
    status, _, data = server.request("POST", "/v1/audio/speech", {
        "model": "qwen3-tts", "input": TEXT, "voice": "ryan", "response_format": "pcm", **OPTS})
    assert status == 200
    assert np.abs(np.frombuffer(data, "<i2").astype(np.float32) / 32767 - ref).max() < 1e-4


def test_grouped_codec_calls_stream_the_api_audio_and_the_log_names_the_choices(tmp_path, caplog):
    """A model loaded with ``codec_frames=4`` (audio in bursts of 4 frames after the first):
    the server's startup log names its speed choices, and its streamed PCM equals the API's
    audio."""
    import logging

    d = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "cv", seed=4, tiny=True)
    with vocalis.load(str(d), max_batch=4, tuning="fixed,codec_frames=4") as tts:
        with caplog.at_level(logging.INFO, logger="vocalis.server"):
            app = create_app(tts, voices_dir=tmp_path / "voices")
        line = next(r.getMessage() for r in caplog.records if "serving" in r.getMessage())
        assert "speed choices:" in line and "codec_frames=4 (forced)" in line
        server = Server(app)
        try:
            client = server.client()
            with client.audio.speech.with_streaming_response.create(
                    model="qwen3-tts", input=TEXT, voice="ryan", response_format="pcm",
                    extra_body=dict(language="english", stream=True, **OPTS)) as r:
                pcm = np.frombuffer(b"".join(r.iter_bytes()), dtype="<i2").astype(np.float32) / 32767
        finally:
            server.stop()
        ref = tts.synthesize(TEXT, speaker="ryan", language="english", **OPTS).samples
    assert pcm.shape == ref.shape == (8 * 1920,) and np.abs(pcm - ref).max() < 1e-4


async def _recv_until(ws, kinds) -> tuple[bytes, list[dict]]:
    """The audio bytes and the events of a WebSocket stream up to an event of ``kinds``."""
    import asyncio

    audio, events = bytearray(), []
    while True:
        msg = await asyncio.wait_for(ws.recv(), 60)
        if isinstance(msg, bytes):
            audio.extend(msg)
            continue
        events.append(json.loads(msg))
        if events[-1]["type"] in kinds:
            return bytes(audio), events


def test_websocket_stream_takes_the_family_options(served):
    """WS /v1/audio/speech/stream with vLLM-Omni's Qwen3 fields (voice, language, task_type,
    instructions, max_new_tokens): the family's schema and rules check them, as over HTTP,
    and the audio is the HTTP endpoint's."""
    import asyncio

    from websockets.asyncio.client import connect

    from vocalis.server import stream

    def url(server):
        return server.url.replace("http://", "ws://") + stream.PATH

    async def session(server, config, text):
        async with connect(url(server)) as ws:
            await ws.send(json.dumps({"type": "session.config", "response_format": "pcm",
                                      "stream_audio": True, **config}))
            await ws.send(json.dumps({"type": "input.text", "text": text}))
            await ws.send(json.dumps({"type": "input.done"}))
            return await _recv_until(ws, ("session.done", "error"))

    _, cv = served["0.6b-customvoice"]
    audio, events = asyncio.run(session(cv, {"voice": "ryan", "language": "English",
                                             "task_type": "CustomVoice", **OPTS}, TEXT))
    assert events[-1]["type"] == "session.done" and events[-1]["total_sentences"] == 1
    status, _, want = cv.request("POST", "/v1/audio/speech", {
        "model": "qwen3-tts", "input": TEXT, "voice": "ryan", "response_format": "pcm",
        "language": "english", **OPTS})
    assert status == 200 and audio == want
    for config, param in [({"voice": "ryan", "task_type": "VoiceDesign"}, "task_type"),
                          ({"voice": "ryan", "language": "Klingon"}, "language"),
                          ({"voice": "ryan", "top_kk": 3}, "top_kk")]:
        _, events = asyncio.run(session(cv, config, TEXT))
        assert events[-1]["type"] == "error" and events[-1]["param"] == param, events

    _, vd = served["1.7b-voicedesign"]
    audio, events = asyncio.run(session(vd, {"instructions": "A calm, low voice.", **OPTS}, TEXT))
    assert events[-1]["type"] == "session.done" and len(audio) == 8 * 1920 * 2
    _, events = asyncio.run(session(vd, OPTS, TEXT))  # VoiceDesign needs instructions
    assert events[-1]["type"] == "error" and events[-1]["param"] == "instructions"


def test_websocket_token_granularity_speaks_the_whole_texts_audio(served):
    """split_granularity "token" (vocalis extension): an utterance's input.text pieces go to
    one request as they come (TTS.open_text), cut mid-word; its PCM equals the HTTP
    endpoint's for the whole text in the streaming-text layout with the same seed. A cancel
    mid-utterance frees the row; a model-less option (normalize) and Pocket-style refusals
    are errors naming split_granularity or the field."""
    import asyncio

    from websockets.asyncio.client import connect

    from vocalis.server import stream

    tts, cv = served["0.6b-customvoice"]
    url = cv.url.replace("http://", "ws://") + stream.PATH
    text = "Hello from the Qwen server, streamed a few characters at a time."
    opts = dict(max_new_tokens=25, seed=5)

    async def session():
        async with connect(url) as ws:
            await ws.send(json.dumps({"type": "session.config", "response_format": "pcm",
                                      "stream_audio": True, "voice": "ryan",
                                      "split_granularity": "token", **opts}))
            for i in range(0, len(text), 7):
                await ws.send(json.dumps({"type": "input.text", "text": text[i:i + 7]}))
            await ws.send(json.dumps({"type": "input.done"}))
            first = await _recv_until(ws, ("session.done", "error"))
            # a second utterance, cancelled after its first audio
            await ws.send(json.dumps({"type": "input.text", "text": "Another reply that "}))
            while not isinstance(await asyncio.wait_for(ws.recv(), 60), bytes):
                pass
            await ws.send(json.dumps({"type": "input.cancel"}))
            second = await _recv_until(ws, ("session.done", "error"))
            return first, second

    (audio, events), (_, cancelled) = asyncio.run(session())
    assert [e["type"] for e in events] == ["audio.start", "audio.done", "session.done"], events
    assert events[1]["text_end"] == len(text) and events[2]["samples"] == len(audio) // 2
    assert events[0]["seed"] == opts["seed"]  # the session.config's seed, echoed
    status, _, want = cv.request("POST", "/v1/audio/speech", {
        "model": "qwen3-tts", "input": text, "voice": "ryan", "response_format": "pcm",
        "non_streaming_mode": False, **opts})
    assert status == 200 and audio == want
    assert cancelled[-1]["type"] == "session.done" and cancelled[-1]["cancelled"] is True
    assert tts.engine.status()["active_rows"] == 0

    async def refused(config):
        async with connect(url) as ws:
            await ws.send(json.dumps({"type": "session.config", "voice": "ryan",
                                      "split_granularity": "token", **config}))
            return (await _recv_until(ws, ("error",)))[1][-1]

    assert asyncio.run(refused({"normalize": True}))["param"] == "normalize"
    assert asyncio.run(refused({"non_streaming_mode": True}))["param"] == "non_streaming_mode"


def test_websocket_token_mode_reports_the_seed_it_drew(served):
    """split_granularity "token" without a seed: the utterance's one request draws one, and
    its audio.start says which; given back as the seed (WebSocket or HTTP), it makes the
    very same audio. Old code: no seed in audio.start."""
    import asyncio

    from websockets.asyncio.client import connect

    from vocalis.server import stream

    tts, cv = served["0.6b-customvoice"]
    url = cv.url.replace("http://", "ws://") + stream.PATH
    text = "Hello from the Qwen server, token by token."
    config = {"type": "session.config", "response_format": "pcm", "stream_audio": True,
              "voice": "ryan", "split_granularity": "token", "max_new_tokens": 12}

    async def utterance(ws, seed=None):
        await ws.send(json.dumps(config if seed is None else {**config, "seed": seed}))
        for i in range(0, len(text), 6):
            await ws.send(json.dumps({"type": "input.text", "text": text[i:i + 6]}))
        await ws.send(json.dumps({"type": "input.done"}))
        return await _recv_until(ws, ("session.done", "error"))

    async def session():
        async with connect(url) as ws:
            audio, events = await utterance(ws)
            seed = events[0]["seed"]
            again, events2 = await utterance(ws, seed)
            return audio, events, again, events2

    audio, events, again, events2 = asyncio.run(session())
    assert [e["type"] for e in events] == ["audio.start", "audio.done", "session.done"], events
    seed = events[0]["seed"]
    assert type(seed) is int and 0 <= seed < 2**63, events[0]
    assert events2[0]["type"] == "audio.start" and events2[0]["seed"] == seed
    assert len(audio) > 0 and again == audio
    status, headers, want = cv.request("POST", "/v1/audio/speech", {
        "model": "qwen3-tts", "input": text, "voice": "ryan", "response_format": "pcm",
        "non_streaming_mode": False, "max_new_tokens": 12, "seed": seed})
    assert status == 200 and headers["x-vocalis-seed"] == str(seed) and want == audio
    assert tts.engine.status()["active_rows"] == 0


def test_websocket_token_mode_refuses_an_utterance_as_http_refuses_its_text(served):
    """split_granularity "token": an utterance with no text, only white space or only
    symbols gets the error (code, param "text") that POST /v1/audio/speech gives its text,
    then its session.done; the connection goes on. Old code: no text ended silently, white
    space was called "nothing to speak"."""
    import asyncio

    from websockets.asyncio.client import connect

    from vocalis.server import stream

    tts, cv = served["0.6b-customvoice"]
    url = cv.url.replace("http://", "ws://") + stream.PATH
    cases = [([], "empty_input"), ([" ", "\n "], "empty_input"),
             (["...", " \U0001F642"], "nothing_to_speak")]
    for pieces, code in cases:
        status, _, data = cv.request("POST", "/v1/audio/speech", {
            "model": "qwen3-tts", "input": "".join(pieces), "voice": "ryan", **OPTS})
        assert status == 400 and json.loads(data)["error"]["code"] == code, data

    async def session():
        async with connect(url) as ws:
            await ws.send(json.dumps({"type": "session.config", "response_format": "pcm",
                                      "stream_audio": True, "voice": "ryan",
                                      "split_granularity": "token", **OPTS}))
            out = []
            for pieces in [c[0] for c in cases] + [["Hi", " there."]]:
                for p in pieces:
                    await ws.send(json.dumps({"type": "input.text", "text": p}))
                await ws.send(json.dumps({"type": "input.done"}))
                out.append(await _recv_until(ws, ("session.done",)))
            return out

    *refused, (audio, spoken) = asyncio.run(session())
    for (pieces, code), (_, events) in zip(cases, refused):
        errors = [e for e in events if e["type"] == "error"]
        assert [(e["code"], e["param"]) for e in errors] == [(code, "text")], events
        assert events[-1]["type"] == "session.done", events
    assert not [e for e in spoken if e["type"] == "error"] and len(audio) > 0, spoken
    assert tts.engine.status()["active_rows"] == 0


def test_websocket_token_mode_words_equal_the_http_sse_words(served):
    """Word timestamps of a text streamed in token by token come once it is complete, and
    are those of the whole text over HTTP SSE (same seed, streaming-text layout)."""
    import asyncio

    from websockets.asyncio.client import connect

    from vocalis.server import stream

    tts, cv = served["0.6b-customvoice"]
    url = cv.url.replace("http://", "ws://") + stream.PATH
    text = "Timed words, streamed a few characters at a time."
    opts = dict(max_new_tokens=25, seed=5)

    async def session():
        async with connect(url) as ws:
            await ws.send(json.dumps({"type": "session.config", "response_format": "pcm",
                                      "stream_audio": True, "voice": "ryan",
                                      "split_granularity": "token", "word_timestamps": True,
                                      **opts}))
            for i in range(0, len(text), 5):
                await ws.send(json.dumps({"type": "input.text", "text": text[i:i + 5]}))
            await ws.send(json.dumps({"type": "input.done"}))
            return await _recv_until(ws, ("session.done", "error"))

    _, events = asyncio.run(session())
    ws_words = [w for e in events if e["type"] == "audio.words" for w in e["words"]]
    status, _, data = cv.request("POST", "/v1/audio/speech", {
        "model": "qwen3-tts", "input": text, "voice": "ryan", "response_format": "pcm",
        "non_streaming_mode": False, "stream_format": "sse", "word_timestamps": True, **opts})
    assert status == 200
    sse = [json.loads(p[len("data: "):]) for p in data.decode().split("\n\n")
           if p.startswith("data: ")]
    sse_words = [w for e in sse for w in e.get("words", [])]
    assert ws_words == sse_words
    assert [w["word"] for w in ws_words] == text.split()
