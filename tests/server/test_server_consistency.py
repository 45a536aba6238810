"""What a new user found the server saying inconsistently, over real HTTP and WebSockets
(uvicorn on loopback, a random-weight checkpoint, ``httpx``/``http.client``/``websockets``
as clients):

* ``/health`` names the default voice that ``GET /v1/audio/voices`` lists (``--voice FILE``);
* a body sent without ``Content-Type: application/json`` is told so, not "must be a JSON
  object";
* a model loaded from a relative path leaves no part of its folder in messages;
* ``true``/``false`` where a number belongs is refused, naming the field;
* every text error has a code (a lone surrogate: ``invalid_text``);
* text with nothing to speak gets the same error on the WebSockets as on HTTP.
"""
# ruff: noqa: F811 (pytest passes the imported fixtures by their names)

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

httpx = pytest.importorskip("httpx")
websockets = pytest.importorskip("websockets")
pytest.importorskip("uvicorn")
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

import vocalis  # noqa: E402
from tests.server.test_server import Server, assert_envelope  # noqa: E402
from tests.server.test_stream import rows_free  # noqa: E402
from vocalis.server import create_app, elevenlabs, stream  # noqa: E402

SMALL = "english_2m_2026-10"
FRAMES = 3  # max_frames: enough audio to prove a request was spoken


@pytest.fixture(scope="module")
def ckpt(checkpoints):
    return checkpoints.get(SMALL)


@pytest.fixture(scope="module")
def tts(ckpt):
    t = vocalis.load(str(ckpt), max_batch=4, max_queue=16)
    yield t
    t.close()


@pytest.fixture(scope="module")
def server(tts, ckpt, tmp_path_factory):
    s = Server(create_app(tts, voices_dir=tmp_path_factory.mktemp("consistency_voices"),
                          default_voice=str(ckpt / "voice.wav")))
    yield s
    s.stop()


def _post(server, body, **kw) -> httpx.Response:
    return httpx.post(server.url + "/v1/audio/speech", json=body, timeout=60, **kw)


def _ws(server, path: str) -> str:
    return server.url.replace("http://", "ws://") + path


async def _until(ws, done) -> list:
    """JSON messages until ``done(message)`` (binary audio frames are counted as bytes)."""
    out = []
    while True:
        msg = await asyncio.wait_for(ws.recv(), 60)
        if isinstance(msg, bytes):
            out.append(len(msg))
            continue
        out.append(json.loads(msg))
        if done(out[-1]):
            return out


# --------------------------------------------------------------------------- item 1


def test_health_names_the_default_voice_that_the_voice_list_offers(server, tts, tmp_path):
    """Old code: with ``--voice voice.wav``, /health said ``default_voice: null`` (the
    model's own default) while /v1/audio/voices listed ``default`` and it spoke."""
    health = httpx.get(server.url + "/health", timeout=30).json()
    listed = httpx.get(server.url + "/v1/audio/voices", timeout=30).json()["data"]
    assert [v["id"] for v in listed if v["type"] == "default"] == ["default"]
    assert health["default_voice"] == "default", health
    assert health["models"][0]["default_voice"] == "default"
    assert health["needs_voice"] is True  # the model speaks with a voice (not a description)
    r = _post(server, {"model": health["model"], "input": "Hi.",
                       "voice": health["default_voice"], "max_frames": FRAMES,
                       "response_format": "pcm", "stream": False})
    assert r.status_code == 200 and r.content, r.text

    # without --voice, a random checkpoint has no default voice: both say so
    bare = Server(create_app(tts, voices_dir=tmp_path))
    try:
        health = httpx.get(bare.url + "/health", timeout=30).json()
        listed = httpx.get(bare.url + "/v1/audio/voices", timeout=30).json()["data"]
        assert health["default_voice"] is None and listed == []
        r = _post(bare, {"model": "tts-1", "input": "Hi.", "voice": "alloy"})
        assert_envelope(r.status_code, r.content, 400, "voice", "voice_not_found")
    finally:
        bare.stop()


def test_a_request_without_voice_speaks_with_the_default_voice(server, tts, tmp_path):
    """Old code: POST /v1/audio/speech without ``voice`` was a 400, though /health names a
    default voice and the WebSocket speaks with it when its session.config names none."""
    health = httpx.get(server.url + "/health", timeout=30).json()
    body = {"model": "tts-1", "input": "Hi there.", "response_format": "pcm", "seed": 7,
            "max_frames": FRAMES, "stream": False}
    r = _post(server, body)
    assert r.status_code == 200 and r.content, r.text
    named = _post(server, {**body, "voice": health["default_voice"]})
    assert named.status_code == 200 and r.content == named.content
    assert r.headers["x-vocalis-voice"] == health["default_voice"]
    assert json.loads(r.headers["x-vocalis-seed"]) == 7

    # without a default voice: a 400 naming the missing field and the two ways to give one
    bare = Server(create_app(tts, voices_dir=tmp_path))
    try:
        assert httpx.get(bare.url + "/health", timeout=30).json()["default_voice"] is None
        r = _post(bare, body)
        err = assert_envelope(r.status_code, r.content, 400, "voice",
                              "missing_required_parameter")
        assert "'voice'" in err["message"] and "GET /v1/audio/voices" in err["message"]
        assert "--voice" in err["message"], err
        # a misspelled voice field is named as such, not as a missing voice
        r = _post(bare, {**body, "vocie": "alloy"})
        assert "did you mean 'voice'" in assert_envelope(
            r.status_code, r.content, 400, "vocie", "unknown_parameter")["message"]

        async def config_without_voice():  # the WebSocket gives the same error as HTTP
            async with connect(_ws(bare, stream.PATH)) as ws:
                await ws.send(json.dumps({"type": "session.config", "response_format": "pcm"}))
                return json.loads(await asyncio.wait_for(ws.recv(), 30))

        assert asyncio.run(config_without_voice()) == {
            "type": "error", "message": err["message"], "code": "missing_required_parameter",
            "param": "voice"}
    finally:
        bare.stop()


# --------------------------------------------------------------------------- item 2


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          None])
def test_a_json_body_without_the_json_content_type_is_told_so(server, content_type):
    """Old code: "request body must be a JSON object", though the body was one."""
    body = json.dumps({"model": "tts-1", "input": "hi", "voice": "alloy"}).encode()
    headers = {"Content-Type": content_type} if content_type else {}
    status, _, data = server.request("POST", "/v1/audio/speech", body=body, headers=headers)
    err = assert_envelope(status, data, 400, code="invalid_request_body")
    assert err["param"] is None
    msg = err["message"]
    assert "must be a JSON object" not in msg
    assert "Content-Type: application/json" in msg, msg
    assert (repr(content_type) if content_type else "missing") in msg, msg


def test_a_json_body_that_is_not_an_object_is_still_named_so(server):
    status, _, data = server.request("POST", "/v1/audio/speech", body=[1, 2])
    err = assert_envelope(status, data, 400, code="invalid_request_body")
    assert err["message"] == "request body must be a JSON object"


# --------------------------------------------------------------------------- item 3


@pytest.mark.parametrize("spelling", ["relmodel-x7", "./relmodel-x7/", "relmodel-x7/config.yaml"])
def test_a_model_loaded_from_a_relative_path_leaves_no_part_of_it_in_messages(
        ckpt, tmp_path, monkeypatch, spelling):
    """Old code: ``--model ckpt`` (relative) answered "... for Pocket TTS model
    ckpt/config.yaml" on HTTP and on the WebSocket; later "<model-dir>/config.yaml", and the
    x-vocalis-instructions note named the config's path. Now every one names the model by
    the id clients use for it."""
    shutil.copytree(ckpt, tmp_path / "relmodel-x7")
    monkeypatch.chdir(tmp_path)
    tts = vocalis.load(spelling, max_batch=1)
    s = Server(create_app(tts, voices_dir=tmp_path / "voices",
                          default_voice=str(ckpt / "voice.wav")))
    try:
        r = _post(s, {"model": "tts-1", "input": "Hi.", "voice": "alloy", "foo": 1})
        err = assert_envelope(r.status_code, r.content, 400, "foo", "unknown_parameter")

        async def ws_error():
            async with connect(_ws(s, stream.PATH)) as ws:
                await ws.send(json.dumps({"type": "session.config", "voice": "alloy",
                                          "foo": 1}))
                return json.loads(await asyncio.wait_for(ws.recv(), 60))

        event = asyncio.run(ws_error())
        assert event["type"] == "error" and event["param"] == "foo", event
        r = _post(s, {"model": "tts-1", "input": "Hi.", "voice": "alloy", "max_frames": 1,
                      "instructions": "Calmly."})
        assert r.status_code == 200, r.text
        note = r.headers["x-vocalis-instructions"]
        assert note == "ignored: relmodel-x7 (Pocket TTS) has no instruction control", note
        for message in (err["message"], event["message"]):
            assert "unknown option foo for Pocket TTS model relmodel-x7;" in message, message
            for part in ("config.yaml", "<model-dir>", "./", str(tmp_path), str(ckpt)):
                assert part not in message, (part, message)
        # the served name (the folder's name, public by design)
        models = httpx.get(s.url + "/v1/models", timeout=30).json()["data"]
        assert models[0]["id"] == "relmodel-x7"
        r = _post(s, {"model": "nope", "input": "Hi.", "voice": "alloy"})
        assert "'relmodel-x7'" in assert_envelope(r.status_code, r.content, 404)["message"]
    finally:
        s.stop()
        tts.close()


def test_a_local_model_served_under_another_name_is_called_by_it(ckpt, tmp_path):
    """``--model-name``: messages about the model name the id clients send, not its path."""
    tts = vocalis.load(str(ckpt / "config.yaml"), max_batch=1)
    s = Server(create_app(tts, voices_dir=tmp_path / "voices", model_name="small",
                          default_voice=str(ckpt / "voice.wav")))
    try:
        r = _post(s, {"model": "small", "input": "Hi.", "temprature": 0.5})
        err = assert_envelope(r.status_code, r.content, 400, "temprature", "unknown_parameter")
        assert err["message"].startswith(
            "unknown option temprature for Pocket TTS model small (did you mean temperature?)")
        # a file in the model's folder is still hidden as a folder
        assert str(ckpt) not in s.app.state.vocalis.redact(f"{ckpt}/voice.wav")
        assert s.app.state.vocalis.redact(f"{ckpt}/voice.wav") == "<model-dir>/voice.wav"
        assert s.app.state.vocalis.redact(f"model {ckpt}/config.yaml; x") == "model small; x"
    finally:
        s.stop()
        tts.close()


def test_a_served_id_with_a_slash_is_left_whole(ckpt, tmp_path, monkeypatch):
    """A new user's finding: ``--model-name ckpt/v2`` for a model in the folder ``ckpt``
    read ``<model-dir>/v2`` in messages (the folder's name followed by a ``/`` was taken for
    a path), on HTTP and the WebSocket."""
    shutil.copytree(ckpt, tmp_path / "ckpt")
    monkeypatch.chdir(tmp_path)
    tts = vocalis.load("ckpt", max_batch=1)
    s = Server(create_app(tts, voices_dir=tmp_path / "voices", model_name="ckpt/v2",
                          default_voice=str(ckpt / "voice.wav")))
    try:
        r = _post(s, {"model": "ckpt/v2", "input": "Hi.", "top_k": 1})
        err = assert_envelope(r.status_code, r.content, 400, "top_k", "unknown_parameter")
        assert "for Pocket TTS model ckpt/v2;" in err["message"], err
        r = _post(s, {"model": "nope", "input": "Hi."})
        assert "'ckpt/v2'" in assert_envelope(r.status_code, r.content, 404)["message"]

        async def ws_error():
            async with connect(_ws(s, stream.PATH)) as ws:
                await ws.send(json.dumps({"type": "session.config", "top_k": 1}))
                return json.loads(await asyncio.wait_for(ws.recv(), 60))

        assert "for Pocket TTS model ckpt/v2;" in asyncio.run(ws_error())["message"]
        # the folder itself is still hidden where it stands as a path
        assert s.app.state.vocalis.redact("ckpt/voice.wav and ./ckpt") == \
            "<model-dir>/voice.wav and <model-dir>"
    finally:
        s.stop()
        tts.close()


# --------------------------------------------------------------------------- item 4


@pytest.mark.parametrize("field", ["speed", "seed", "temperature", "eos_threshold",
                                   "max_frames"])
@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_refused_where_a_number_belongs(server, field, value):
    """Old code: ``"speed": true`` was read as 1.0 (and ``"seed": true`` as 1): a 200."""
    body = {"model": "tts-1", "input": "Hi.", "voice": "alloy", "max_frames": FRAMES,
            field: value}
    r = _post(server, body)
    err = assert_envelope(r.status_code, r.content, 400, field)
    assert field in err["message"] and json.dumps(value) in err["message"].lower(), err


@pytest.mark.parametrize("body", [{"speed": 1}, {"seed": 1}, {"temperature": 1},
                                  {"speed": 2, "temperature": 0}])
def test_integers_are_still_numbers(server, body):
    r = _post(server, {"model": "tts-1", "input": "Hi.", "voice": "alloy",
                       "max_frames": FRAMES, "response_format": "pcm", "stream": False, **body})
    assert r.status_code == 200 and r.content, r.text


def test_booleans_are_refused_on_the_websockets_too(server):
    async def vllm(field):
        async with connect(_ws(server, stream.PATH)) as ws:
            await ws.send(json.dumps({"type": "session.config", "voice": "alloy",
                                      field: True}))
            return json.loads(await asyncio.wait_for(ws.recv(), 60))

    for field in ("speed", "seed", "initial_codec_chunk_frames", "temperature"):
        event = asyncio.run(vllm(field))
        assert event["type"] == "error" and event["param"] == field, event

    async def eleven(first):
        url = _ws(server, elevenlabs.STREAM_PATH.format(voice_id="alloy")) \
            + "?output_format=pcm_24000"
        async with connect(url) as ws:
            await ws.send(json.dumps({"text": " ", **first}))
            msg = json.loads(await asyncio.wait_for(ws.recv(), 60))
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            return msg

    for field, first in (("speed", {"voice_settings": {"speed": True}}), ("seed", {"seed": True})):
        msg = asyncio.run(eleven(first))
        r = _post(server, {"model": "tts-1", "input": "Hi.", "voice": "alloy", field: True})
        err = assert_envelope(r.status_code, r.content, 400, field)
        assert msg["error"] == err["code"] and "true" in msg["message"], (msg, err)


@pytest.mark.parametrize("raw", ['"7"', "7.0", "1e3"])
def test_a_seed_is_a_json_integer_on_every_front_end(server, tts, raw):
    """A new user's finding: the Python API refused ``seed="7"`` while HTTP and the vLLM
    WebSocket took ``"7"``, ``7.0`` and ``1e3`` as 7 and 1000 (pydantic's lax reading). Now
    each front end refuses them (sent here as raw JSON text), with the same words and code
    on HTTP and on both WebSockets."""
    body = '{"model": "tts-1", "input": "Hi.", "voice": "alloy", "seed": %s}' % raw
    r = httpx.post(server.url + "/v1/audio/speech", content=body, timeout=60,
                   headers={"Content-Type": "application/json"})
    err = assert_envelope(r.status_code, r.content, 400, "seed", "int_type")
    assert err["message"].startswith("seed must be an integer, not "), err

    async def vllm():
        async with connect(_ws(server, stream.PATH)) as ws:
            await ws.send('{"type": "session.config", "voice": "alloy", "seed": %s}' % raw)
            return json.loads(await asyncio.wait_for(ws.recv(), 60))

    async def eleven():
        url = _ws(server, elevenlabs.STREAM_PATH.format(voice_id="alloy")) \
            + "?output_format=pcm_24000"
        async with connect(url) as ws:
            await ws.send('{"text": " ", "seed": %s}' % raw)
            msg = json.loads(await asyncio.wait_for(ws.recv(), 60))
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            return msg

    event = asyncio.run(vllm())
    assert event["type"] == "error" and event["param"] == "seed", event
    assert event["code"] == err["code"], event  # the message names the message refused
    assert event["message"] == "invalid session.config: " + err["message"], event
    msg = asyncio.run(eleven())
    assert (msg["error"], msg["message"]) == (err["code"], err["message"]), msg
    with pytest.raises(vocalis.InputError, match="seed must be an integer"):
        tts.submit("Hi.", seed=json.loads(raw))
    # a JSON integer is still a seed: the same request with 7 is spoken
    ok = httpx.post(server.url + "/v1/audio/speech", timeout=60, json={
        "model": "tts-1", "input": "Hi.", "voice": "alloy", "seed": 7, "max_frames": FRAMES,
        "response_format": "pcm"})
    assert ok.status_code == 200 and ok.content and ok.headers["x-vocalis-seed"] == "7"


# --------------------------------------------------------------------------- item 5


def test_a_lone_surrogate_has_a_code(server):
    """Old code: ``"code": null``; the WebSockets call the same problem ``invalid_text``."""
    raw = b'{"model": "tts-1", "input": "a\\ud800b", "voice": "alloy"}'
    status, _, data = server.request("POST", "/v1/audio/speech", body=raw,
                                     headers={"Content-Type": "application/json"})
    err = assert_envelope(status, data, 400, "input", "invalid_text")
    assert "surrogate" in err["message"]

    async def ws_code():
        async with connect(_ws(server, stream.PATH)) as ws:
            await ws.send(json.dumps({"type": "session.config", "voice": "alloy"}))
            await ws.send('{"type": "input.text", "text": "a\\ud800b"}')
            return json.loads(await asyncio.wait_for(ws.recv(), 60))

    event = asyncio.run(ws_code())
    assert event["type"] == "error" and event["code"] == err["code"], event


# --------------------------------------------------------------------------- item 6


EMOJI = "\U0001F642\U0001F642"


def _utterances(server, split: str, utterances: list[list[str]]) -> list[list]:
    """On one connection to the OpenAI-style WebSocket (``split_granularity`` ``split``),
    each utterance's pieces as ``input.text`` messages, then ``input.done``; per utterance,
    the messages up to its ``session.done``."""
    config = {"type": "session.config", "voice": "alloy", "response_format": "pcm",
              "stream_audio": True, "split_granularity": split, "max_frames": FRAMES}

    async def go():
        async with connect(_ws(server, stream.PATH)) as ws:
            await ws.send(json.dumps(config))
            out = []
            for pieces in utterances:
                for text in pieces:
                    await ws.send(json.dumps({"type": "input.text", "text": text}))
                await ws.send(json.dumps({"type": "input.done"}))
                out.append(await _until(ws, lambda m: m["type"] == "session.done"))
            return out

    return asyncio.run(go())


@pytest.fixture(scope="module")
def http_refusal(server) -> dict:
    r = _post(server, {"model": "tts-1", "input": EMOJI, "voice": "alloy"})
    # its own code (was the generic invalid_request), which the WebSockets repeat
    return assert_envelope(r.status_code, r.content, 400, "input", "nothing_to_speak")


@pytest.mark.parametrize("split", ["none", "sentence"])
def test_text_with_nothing_to_speak_gets_the_http_error_on_the_websocket(
        server, tts, http_refusal, split):
    """Old code: the WebSocket answered only ``session.done`` with ``total_sentences`` 0,
    where HTTP answers a 400 for the same text."""
    # then words with an emoji: spoken
    refused, spoken = _utterances(server, split, [[EMOJI], ["Hi. " + EMOJI]])
    assert refused[0] == {"type": "error", "message": http_refusal["message"],
                          "code": http_refusal["code"], "param": "text"}, refused
    assert len(refused) == 2 and refused[1]["total_sentences"] == 0
    assert not [m for m in spoken if isinstance(m, dict) and m["type"] == "error"], spoken
    assert spoken[-1]["total_sentences"] == 1 and spoken[-1]["samples"] > 0
    assert rows_free(tts)


@pytest.mark.parametrize("split", ["none", "sentence"])
def test_an_utterance_without_text_gets_the_http_error_on_the_websocket(server, tts, split):
    """Old code: an ``input.done`` with no text before it (or only white space) ended with
    a plain ``session.done``, where HTTP answers a 400 ``empty_input`` for an empty input."""
    r = _post(server, {"model": "tts-1", "input": "  ", "voice": "alloy"})
    assert_envelope(r.status_code, r.content, 400, "input", "empty_input")
    # the connection goes on after each
    *empty, spoken = _utterances(server, split, [[], [" ", "\n "], ["Hi."]])
    for i, msgs in enumerate(empty):
        assert len(msgs) == 2 and msgs[0]["type"] == "error", msgs
        assert msgs[0]["code"] == "empty_input" and msgs[0]["param"] == "text", msgs
        assert "input.text" in msgs[0]["message"]
        assert msgs[1]["type"] == "session.done" and msgs[1]["utterance_index"] == i
        assert msgs[1]["total_sentences"] == 0
    assert not [m for m in spoken if isinstance(m, dict) and m["type"] == "error"], spoken
    assert spoken[-1]["total_sentences"] == 1 and spoken[-1]["samples"] > 0
    assert rows_free(tts)


def test_text_with_nothing_to_speak_gets_the_http_error_on_the_elevenlabs_websocket(
        server, tts, http_refusal):
    async def go(pieces):
        url = _ws(server, elevenlabs.STREAM_PATH.format(voice_id="alloy")) \
            + "?output_format=pcm_24000"
        async with connect(url) as ws:
            await ws.send(json.dumps({"text": " "}))
            for p in pieces:
                await ws.send(json.dumps({"text": p}))
            await ws.send(json.dumps({"text": ""}))
            return await _until(ws, lambda m: m.get("isFinal") is True)

    msgs = asyncio.run(go([EMOJI]))
    assert msgs == [{"message": http_refusal["message"], "error": http_refusal["code"]},
                    {"isFinal": True}], msgs
    msgs = asyncio.run(go([EMOJI + " ", "- \u2026 ", "\U0001F600!", "  "]))
    assert [m for m in msgs if "error" in m] == [
        {"message": msgs[0]["message"], "error": http_refusal["code"]}]
    assert "nothing the model can speak" in msgs[0]["message"]
    msgs = asyncio.run(go(["Hi. ", EMOJI, " "]))  # words with an emoji: spoken, no error
    assert not [m for m in msgs if "error" in m] and msgs[-1] == {"isFinal": True}
    assert any(m.get("audio") for m in msgs[:-1])
    assert rows_free(tts)


def test_language_and_speaker_on_http_as_on_the_websocket(server):
    """A trial's finding: ``language`` was taken by the WebSocket's session.config for Pocket
    TTS (its one language by name) but refused on HTTP as an unknown option; ``speaker`` (the
    WebSocket's alias of voice) was told "did you mean 'speed'?" on HTTP."""
    body = {"model": "tts-1", "input": "Hi.", "voice": "alloy", "max_frames": 2,
            "response_format": "pcm", "seed": 3}
    r = _post(server, {**body, "language": "English"})
    assert r.status_code == 200 and r.content == _post(server, body).content
    r = _post(server, {**body, "language": "french"})
    err = assert_envelope(r.status_code, r.content, 400, "language", "invalid_value")

    async def ws_error():
        async with connect(_ws(server, stream.PATH)) as ws:
            await ws.send(json.dumps({"type": "session.config", "voice": "alloy",
                                      "language": "french"}))
            return json.loads(await asyncio.wait_for(ws.recv(), 60))

    assert asyncio.run(ws_error())["message"] == err["message"]
    assert "use one of english" in err["message"], err
    r = _post(server, {**body, "language": 5})
    assert_envelope(r.status_code, r.content, 400, "language", "invalid_type")
    r = _post(server, {k: v for k, v in body.items() if k != "voice"} | {"speaker": "alloy"})
    err = assert_envelope(r.status_code, r.content, 400, "speaker", "unknown_parameter")
    assert "did you mean 'voice'?" in err["message"], err
