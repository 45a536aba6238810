"""The ElevenLabs-compatible WebSockets (``/v1/text-to-speech/{voice_id}/stream-input`` and
``multi-stream-input``) over a real uvicorn server on loopback; random-weight checkpoint.

stream-input is driven by the real ``elevenlabs`` SDK (``convert_realtime``) where it is
installed, and by a client written against the public protocol with ``websockets`` for what
the SDK does not expose (the alignment, multi-context, a seed, bad messages). The audio must
equal ``POST /v1/audio/speech`` for the same sentence, voice and seed.
"""
# ruff: noqa: F811 (pytest passes the imported fixtures by their names)

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest

websockets = pytest.importorskip("websockets")
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from tests.server.test_server import (  # noqa: E402,F401 (fixtures reused)
    Server, ckpt, cosine, pcm_of, server, speech, tts, voices_dir)
from tests.server.test_stream import rows_free  # noqa: E402
from vocalis.server import create_app, elevenlabs  # noqa: E402

S1 = "Hello there."
S2 = "How are you today?"


def url(server, voice="alloy", multi=False, **query) -> str:
    query.setdefault("output_format", "pcm_24000")
    path = (elevenlabs.MULTI_PATH if multi else elevenlabs.STREAM_PATH).format(voice_id=voice)
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    return server.url.replace("http://", "ws://") + path + "?" + qs


def http_pcm(server, text: str) -> bytes:
    st, _, data = speech(server, input=text)
    assert st == 200
    return data


async def recv_json(ws, timeout=60) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def collect(ws, until_final=True) -> list[dict]:
    """Messages until ``isFinal`` (stream-input: then the close)."""
    out = []
    while True:
        msg = await recv_json(ws)
        out.append(msg)
        if until_final and msg.get("isFinal"):
            return out


def audio_of(msgs) -> bytes:
    return b"".join(base64.b64decode(m["audio"]) for m in msgs if m.get("audio"))


def by_sentence(msgs) -> list[tuple[int, bytes]]:
    """(seed, audio) of each sentence: the first message of each carries its ``seed``."""
    out: list[tuple[int, bytearray]] = []
    for m in msgs:
        if "seed" in m:
            out.append((m["seed"], bytearray()))
        if m.get("audio"):
            assert out, f"audio before any seed: {m}"
            out[-1][1].extend(base64.b64decode(m["audio"]))
    return [(seed, bytes(audio)) for seed, audio in out]


def first_message(server, msg: dict, voice: str = "alloy", **query) -> tuple[dict, int]:
    """(the error, the close code) for ``msg`` sent as the first message of a connection
    (to ``voice``, with ``query``) that the server then closes."""
    async def go():
        async with connect(url(server, voice, **query)) as ws:
            try:  # a bad query is refused before the first message
                await ws.send(json.dumps(msg))
            except ConnectionClosed:
                pass
            err = await recv_json(ws)
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            return err, ws.close_code

    return asyncio.run(go())


def check_alignment(msgs, text_parts: list[str], rate=24000) -> None:
    """Characters spell the text; times, made absolute with each message's audio offset,
    never go back."""
    chars, times, offset_ms = [], [], 0.0
    for m in msgs:
        al = m.get("alignment")
        if al:
            assert len(al["chars"]) == len(al["charStartTimesMs"]) == len(al["charDurationsMs"])
            assert m["normalizedAlignment"] == al
            chars += al["chars"]
            times += [offset_ms + t for t in al["charStartTimesMs"]]
            assert all(d >= 0 for d in al["charDurationsMs"])
        if m.get("audio"):
            offset_ms += len(base64.b64decode(m["audio"])) / 2 / rate * 1000
    assert "".join(chars) == "".join(text_parts)
    assert all(b >= a - 1 for a, b in zip(times, times[1:])), times
    assert times[0] >= -1 and times[-1] <= offset_ms + 1


def test_stream_input_with_the_elevenlabs_sdk(server):
    sdk = pytest.importorskip("elevenlabs.client")
    client = sdk.ElevenLabs(api_key="unused", base_url=server.url)
    # the SDK forces wss:// on its WebSocket base; the server here is plain ws://
    client.text_to_speech._ws_base_url = server.url
    audio = b"".join(client.text_to_speech.convert_realtime(
        voice_id="alloy", text=iter(["Hello th", "ere. How are", " you?"]),
        output_format="pcm_24000"))
    assert len(audio) > 2400 and len(audio) % 2 == 0
    mp3 = b"".join(client.text_to_speech.convert_realtime(voice_id="alloy", text=iter([S1])))
    assert mp3[:3] == b"ID3" or mp3[0] == 0xFF  # the SDK's default: mp3_44100_128
    from elevenlabs.core.api_error import ApiError
    with pytest.raises(ApiError) as exc:  # the error message (or the close reason) surfaces
        b"".join(client.text_to_speech.convert_realtime(voice_id="nobody", text=iter([S1])))
    assert exc.value.status_code == 1008 and "nobody" in str(exc.value.body)


def test_stream_input_equals_http_with_alignment(server, tts, monkeypatch):
    monkeypatch.setattr(elevenlabs, "AHEAD", 1)  # each sentence alone: the very same bytes

    async def go():
        async with connect(url(server)) as ws:
            await ws.send(json.dumps({"text": " ", "seed": 7,
                                      "generation_config": {"chunk_length_schedule": [50]}}))
            for p in ["Hello th", "ere. How are", " you today?"]:
                await ws.send(json.dumps({"text": p, "try_trigger_generation": True}))
            await ws.send(json.dumps({"text": ""}))
            msgs = await collect(ws)
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            return msgs, ws.close_code

    msgs, code = asyncio.run(go())
    assert code == 1000
    assert msgs[-1] == {"isFinal": True}
    assert all(m["isFinal"] is None for m in msgs[:-1])
    assert audio_of(msgs) == http_pcm(server, S1) + http_pcm(server, S2)
    # the first message of each sentence echoes the seed it was made with
    assert by_sentence(msgs) == [(7, http_pcm(server, S1)), (7, http_pcm(server, S2))]
    check_alignment(msgs, [S1, S2])


def test_each_sentence_reports_the_seed_it_drew_and_it_remakes_the_audio(server, tts,
                                                                          monkeypatch):
    """Without a seed each sentence draws one; its first audio message says which (vocalis
    extension ``seed``): that sentence sent again with that seed, here or to
    POST /v1/audio/speech, gives the very same audio, and the given seed is echoed. Old
    code: no seed in any message."""
    monkeypatch.setattr(elevenlabs, "AHEAD", 1)  # each sentence alone: the very same bytes

    async def once(text, seed=None):
        async with connect(url(server)) as ws:
            await ws.send(json.dumps({"text": " "} | ({} if seed is None else {"seed": seed})))
            await ws.send(json.dumps({"text": text}))
            await ws.send(json.dumps({"text": ""}))
            return await collect(ws)

    msgs = asyncio.run(once(f"{S1} {S2}"))
    drawn = by_sentence(msgs)
    assert len(drawn) == 2 and sum(len(a) for _, a in drawn) == len(audio_of(msgs))
    for text, (seed, audio) in zip([S1, S2], drawn):
        assert type(seed) is int and 0 <= seed < 2**63 and len(audio) > 0, seed
        assert by_sentence(asyncio.run(once(text, seed))) == [(seed, audio)]
        st, headers, data = speech(server, input=text, seed=seed)
        assert st == 200 and headers["x-vocalis-seed"] == str(seed) and data == audio
    assert rows_free(tts)
    assert rows_free(tts)



def test_a_seed_in_the_query_is_the_integer_it_spells(server, tts, monkeypatch):
    """``?seed=7`` (the docs: the seed "in the first message or the query") is seed 7: the
    same audio as POST /v1/audio/speech with seed 7, and echoed as 7; a first message's
    seed wins over the query's. A query seed that is no integer (``7.0``, ``abc``) or out
    of range (``-1``) closes the socket with a message naming it. A new user's finding:
    the query's string was refused as "not a string" whatever it spelled."""
    monkeypatch.setattr(elevenlabs, "AHEAD", 1)

    async def once(first=None, **query):
        async with connect(url(server, **query)) as ws:
            await ws.send(json.dumps({"text": " "} | (first or {})))
            await ws.send(json.dumps({"text": S1}))
            await ws.send(json.dumps({"text": ""}))
            return await collect(ws)

    st, _, want = speech(server, input=S1, seed=7)
    assert st == 200
    assert by_sentence(asyncio.run(once(seed=7))) == [(7, want)]
    assert by_sentence(asyncio.run(once({"seed": 7}, seed=8))) == [(7, want)]

    async def refused(value):
        async with connect(url(server, seed=value)) as ws:
            await ws.send(json.dumps({"text": " "}))
            err = await recv_json(ws)
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            return err, ws.close_code

    for value in ("7.0", "abc", "1e3"):
        err, code = asyncio.run(refused(value))
        assert code == 1008 and err["message"] == (
            f"the query's seed must be an integer such as 7, got {value!r}; leave it out for "
            "a random one"), err
    err, code = asyncio.run(refused("-1"))
    assert code == 1008 and "seed" in err["message"] and "leave seed out" in err["message"], err
    assert rows_free(tts)
@pytest.mark.parametrize("fmt", ["pcm_16000", "mp3_44100_128"])
def test_output_formats(server, fmt):
    async def go():
        async with connect(url(server, output_format=fmt)) as ws:
            await ws.send(json.dumps({"text": " ", "seed": 7}))
            await ws.send(json.dumps({"text": S1 + " ", "flush": True}))
            await ws.send(json.dumps({"text": ""}))
            return await collect(ws)

    data = audio_of(asyncio.run(go()))
    ref = http_pcm(server, S1)
    if fmt.startswith("pcm"):
        assert abs(len(data) / len(ref) - 16000 / 24000) < 0.01
    else:
        assert data[:3] == b"ID3" or data[0] == 0xFF


def test_multi_context_interleaved_and_close(server, tts):
    async def go():
        async with connect(url(server, multi=True)) as ws:
            await ws.send(json.dumps({"text": " ", "context_id": "a", "seed": 7}))
            await ws.send(json.dumps({"text": " ", "context_id": "b"}))
            await ws.send(json.dumps({"text": "Hello th", "context_id": "a"}))
            await ws.send(json.dumps({"text": "How are ", "context_id": "b"}))
            await ws.send(json.dumps({"text": "ere. ", "context_id": "a", "flush": True}))
            await ws.send(json.dumps({"text": "you today? ", "context_id": "b"}))
            await ws.send(json.dumps({"text": "", "context_id": "b", "flush": True}))
            for c in "ab":  # flushed, then closed: still spoken, then isFinal
                await ws.send(json.dumps({"context_id": c, "close_context": True}))
            got: dict[str, list] = {"a": [], "b": []}
            finals = set()
            while finals != {"a", "b"}:
                m = await recv_json(ws)
                assert "error" not in m, m
                got[m["contextId"]].append(m)
                if m.get("isFinal"):
                    finals.add(m["contextId"])
            await ws.send(json.dumps({"close_socket": True}))
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            return got, ws.close_code

    got, code = asyncio.run(go())
    assert code == 1000
    for cid, text in (("a", S1), ("b", S2)):
        assert got[cid][-1] == {"isFinal": True, "contextId": cid}
        # the two contexts ran side by side: a batch changes the last bits of float sums
        assert cosine(pcm_of(audio_of(got[cid])), pcm_of(http_pcm(server, text))) > 0.9999
        check_alignment(got[cid], [text])
    assert rows_free(tts)


def test_a_context_opened_with_its_own_settings_speaks_with_them(server, tts, monkeypatch):
    """multi-stream-input: the message that opens a context may carry its own ``seed`` and
    ``voice_settings.speed`` (ElevenLabs' context initialisation); what it leaves out is the
    connection's. A trial's finding: they were ignored (the connection's seed and speed
    played). A bad value refuses that message, naming the context; the connection goes on.
    """
    monkeypatch.setattr(elevenlabs, "AHEAD", 1)  # sentence by sentence: HTTP's very bytes

    async def go():
        async with connect(url(server, multi=True)) as ws:
            await ws.send(json.dumps({"text": " ", "context_id": "a", "seed": 11}))
            await ws.send(json.dumps({"text": " ", "context_id": "b", "seed": 7,
                                      "voice_settings": {"speed": 1.5}}))
            await ws.send(json.dumps({"text": " ", "context_id": "c",
                                      "voice_settings": {"speed": 1.25}}))
            await ws.send(json.dumps({"text": " ", "context_id": "d", "seed": -1}))
            refused = await recv_json(ws)
            got: dict[str, list] = {"a": [], "b": [], "c": []}
            for c in "abc":
                await ws.send(json.dumps({"text": S1, "context_id": c, "flush": True}))
                await ws.send(json.dumps({"context_id": c, "close_context": True}))
                while True:
                    m = await recv_json(ws)
                    assert "error" not in m, m
                    got[m["contextId"]].append(m)
                    if m.get("isFinal"):
                        break
            await ws.send(json.dumps({"close_socket": True}))
            return refused, got

    refused, got = asyncio.run(go())
    assert refused["contextId"] == "d" and refused["error"] == "invalid_request", refused
    assert "seed" in refused["message"] and "code" not in refused, refused
    for cid, seed, speed in (("a", 11, 1.0), ("b", 7, 1.5), ("c", 11, 1.25)):
        st, _, want = speech(server, input=S1, seed=seed, speed=speed)
        assert st == 200 and by_sentence(got[cid]) == [(seed, want)], cid
    assert rows_free(tts)


def test_close_context_cancels_and_frees_rows(server, tts):
    long = " ".join(f"This is sentence number {i} of a long answer." for i in range(12))

    async def go():
        async with connect(url(server, multi=True)) as ws:
            await ws.send(json.dumps({"text": " ", "context_id": "x", "seed": 7}))
            await ws.send(json.dumps({"text": long + " ", "context_id": "x"}))  # not flushed
            first = await recv_json(ws)
            assert first["contextId"] == "x" and first["audio"]
            await ws.send(json.dumps({"context_id": "x", "close_context": True}))
            while not (m := await recv_json(ws)).get("isFinal"):
                assert m["contextId"] == "x"
            assert m == {"isFinal": True, "contextId": "x"}
            assert await asyncio.to_thread(rows_free, tts)
            # the connection goes on: a new context, and "immediate" on a flushed one
            await ws.send(json.dumps({"text": long + " ", "context_id": "y", "flush": True}))
            await recv_json(ws)
            await ws.send(json.dumps({"context_id": "y", "close_context": True,
                                      "immediate": True}))
            while not (m := await recv_json(ws)).get("isFinal"):
                pass
            assert await asyncio.to_thread(rows_free, tts)
            # text after close, and an unknown context, get errors
            await ws.send(json.dumps({"context_id": "nope", "close_context": True}))
            err = await recv_json(ws)
            assert err["error"] == "context_not_found" and err["contextId"] == "nope"

    asyncio.run(go())


@pytest.mark.parametrize("ended", [False, True])
def test_client_that_vanishes_frees_rows(server, tts, ended):
    """ended: the input was over (the server only sends) when the client left."""
    long = " ".join(f"Here is sentence {i} of a story." for i in range(12))

    async def go():
        ws = await connect(url(server))
        await ws.send(json.dumps({"text": " "}))
        await ws.send(json.dumps({"text": long + " ", "flush": True}))
        if ended:
            await ws.send(json.dumps({"text": ""}))
        await recv_json(ws)
        ws.transport.abort()  # no close handshake

    asyncio.run(go())
    assert rows_free(tts)


def test_bad_messages_get_errors(server):
    async def go():
        async with connect(url(server)) as ws:
            await ws.send(json.dumps({"text": " "}))
            await ws.send("{not json")
            e1 = await recv_json(ws)
            await ws.send(b"\x00\x01")
            e2 = await recv_json(ws)
            await ws.send(json.dumps({"flush": False}))
            e3 = await recv_json(ws)
            await ws.send(json.dumps({"text": S1, "flush": True}))  # still usable
            await ws.send(json.dumps({"text": ""}))
            await ws.send(json.dumps({"text": "Too late. "}))
            msgs = await collect(ws)
            return e1, e2, e3, msgs

    e1, e2, e3, msgs = asyncio.run(go())
    late = [m for m in msgs if "error" in m]
    assert [m["error"] for m in late] == ["context_closed"]
    msgs = [m for m in msgs if "error" not in m]
    assert msgs[-1] == {"isFinal": True}
    for e in (e1, e2, e3):
        assert e["error"] == "invalid_input_message" and e["message"]
    assert audio_of(msgs)

    err, code = first_message(server, {"text": " "}, voice="nobody")
    assert code == 1008 and "nobody" in err["message"] and err["code"] == 1008
    # a bad output_format is refused before the first message
    err, code = first_message(server, {"text": " "}, output_format="ulaw_8000")
    assert code == 1008 and err["error"] == "invalid_output_format"
    assert "pcm_16000" in err["message"] and "mp3_44100_128" in err["message"]


@pytest.mark.parametrize("multi", [False, True])
def test_inactivity_timeout_closes_a_silent_connection(server, multi):
    """``inactivity_timeout`` (ElevenLabs': seconds, 1-180, default 20): a connection with
    no message for that long and nothing to speak gets input_timeout_exceeded and a close
    with 1008; a single space now and then keeps it open, and what it asked for is
    spoken first. Values outside 1-180 are refused at once."""
    assert elevenlabs.INACTIVITY_TIMEOUT_S == 20

    async def go():
        async with connect(url(server, multi=multi, inactivity_timeout=1)) as ws:
            t0 = time.monotonic()
            await ws.send(json.dumps({"text": " "}))
            for _ in range(4):  # 2 s alive, more than the timeout, by keep-alive spaces
                await asyncio.sleep(0.5)
                await ws.send(json.dumps({"text": " "}))
            await ws.send(json.dumps({"text": S1 + " ", "flush": True}))
            msgs = []
            while True:
                try:
                    msgs.append(await recv_json(ws, 30))
                except ConnectionClosed:
                    break
            return msgs, ws.close_code, time.monotonic() - t0

    msgs, code, took = asyncio.run(go())
    assert audio_of(msgs)  # spoken before the connection went idle
    assert msgs[-1]["error"] == "input_timeout_exceeded" and msgs[-1]["code"] == 1008
    assert "inactivity_timeout" in msgs[-1]["message"]
    assert code == 1008 and took >= 3.0  # 2 s of keep-alives, then at least 1 s idle

    async def refused(value):
        async with connect(url(server, inactivity_timeout=value)) as ws:
            err = await recv_json(ws)
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            return err, ws.close_code

    for value in ("0", "181", "soon", "nan"):
        err, code = asyncio.run(refused(value))
        assert code == 1008 and err["error"] == "invalid_inactivity_timeout", err
        assert "1..180" in err["message"]


def test_api_key(ckpt, tts, tmp_path):
    s = Server(create_app(tts, voices_dir=tmp_path, default_voice=str(ckpt / "voice.wav"),
                          api_key="sekrit"))

    async def one(headers=None, first=None):
        async with connect(url(s), additional_headers=headers or {}) as ws:
            await ws.send(json.dumps({"text": " ", **(first or {})}))
            await ws.send(json.dumps({"text": "Hi. "}))
            await ws.send(json.dumps({"text": ""}))
            try:
                return await collect(ws), ws
            except ConnectionClosed:
                return None, ws

    try:
        msgs, ws = asyncio.run(one())
        assert ws.close_code == 1008
        msgs, ws = asyncio.run(one(first={"xi_api_key": "wrong"}))
        assert ws.close_code == 1008
        for headers, first in (({"xi-api-key": "sekrit"}, None),
                               ({"Authorization": "Bearer sekrit"}, None),
                               (None, {"xi_api_key": "sekrit"}),
                               (None, {"xi-api-key": "sekrit"})):
            msgs, ws = asyncio.run(one(headers, first))
            assert msgs and msgs[-1] == {"isFinal": True} and audio_of(msgs)
        sdk = pytest.importorskip("elevenlabs.client")
        client = sdk.ElevenLabs(api_key="sekrit", base_url=s.url)
        client.text_to_speech._ws_base_url = s.url
        audio = b"".join(client.text_to_speech.convert_realtime(
            voice_id="alloy", text=iter(["Hi."]), output_format="pcm_24000"))
        assert audio
    finally:
        s.stop()


def test_a_bad_first_message_is_refused_as_http_refuses_it_and_closes(server):
    """The first message's seed and voice_settings.speed follow POST /v1/audio/speech's
    rules and words (a fractional seed is not cut to an integer), and a first message
    whose text is not a string closes the socket, as the docs say of the first message."""
    err, code = first_message(server, {"text": " ", "seed": 1.5})
    assert code == 1008 and err["code"] == 1008 and err["error"] == "int_type"
    assert err["message"] == ("seed must be an integer, not a number with a fraction or an "
                              "exponent; leave it out for a random one (got 1.5)")
    st, _, body = speech(server, seed=1.5)
    assert st == 400 and json.loads(body)["error"]["message"] == err["message"]
    err, code = first_message(server, {"text": " ", "voice_settings": {"speed": 10}})
    assert code == 1008 and err["message"] == (
        "voice_settings.speed: Input should be less than or equal to 4 (got 10)")
    err, code = first_message(server, {"text": " ", "voice_settings": {"speed": "fast"}})
    assert code == 1008 and err["message"].startswith("voice_settings.speed: Input should be "
                                                      "a valid number")
    err, code = first_message(server, {"text": 5})
    assert code == 1008 and err["error"] == "invalid_input_message"
    assert err["message"] == '"text" must be a string'


def test_a_misspelled_field_is_refused_and_other_services_fields_are_ignored(
        server, tts, monkeypatch):
    """Old code: ``"seeed": 7`` in the first message played with a random seed and
    ``"flsh": true`` left the text unspoken, in silence. A field close to one vocalis reads
    is refused naming it (first message: the connection closes; later: that message is
    dropped and the connection goes on); ElevenLabs' own fields that vocalis ignores, and
    other services' fields, still play."""
    err, code = first_message(server, {"text": " ", "seeed": 7})
    assert code == 1008 and err["error"] == "invalid_input_message", err
    assert err["message"] == ('unknown field "seeed": did you mean "seed"? The connection '
                              "is closed")
    err, code = first_message(server, {"text": " ", "sede": 7})  # two letters swapped
    assert code == 1008 and 'did you mean "seed"?' in err["message"], err
    err, code = first_message(server, {"text": " ", "voice_settings": {"sped": 1.2}})
    assert code == 1008 and err["message"].startswith(
        'unknown field "voice_settings.sped": did you mean "speed"?'), err
    err, code = first_message(server, {"text": " ", "voice_settings": {"seed": 7}})
    assert code == 1008 and 'did you mean "seed" (beside voice_settings' in err["message"], err
    err, code = first_message(server, {"text": " ", "speed": 1.2})
    assert code == 1008 and 'did you mean "speed" in voice_settings?' in err["message"], err
    err, code = first_message(server, {"text": " "}, seeed=7)  # the query's too
    assert code == 1008 and err["error"] == "invalid_query_parameter", err
    assert err["message"] == ('unknown query parameter "seeed": did you mean "seed"? The '
                              "connection is closed")

    monkeypatch.setattr(elevenlabs, "AHEAD", 1)  # the very same bytes as HTTP

    async def later():
        async with connect(url(server)) as ws:
            await ws.send(json.dumps({
                "text": " ", "seed": 7, "generation_config": {"chunk_length_schedule": [50]},
                "pronunciation_dictionary_locators": [], "voice_id": "x", "next_text": "y",
                "voice_settings": {"stability": 0.5, "similarity_boost": 0.8, "speed": 1.0,
                                   "pitch": 0, "tempo": 1}}))
            await ws.send(json.dumps({"text": S1, "flsh": True}))
            err = await recv_json(ws)
            await ws.send(json.dumps({"text": S1, "flush": True, "try_trigger_generation": True,
                                      "model_id": "eleven_flash_v2_5"}))
            await ws.send(json.dumps({"text": ""}))
            return err, await collect(ws)

    err, msgs = asyncio.run(later())
    assert err == {"message": 'unknown field "flsh": did you mean "flush"? The message was '
                              "dropped", "error": "invalid_input_message"}, err
    assert msgs[-1] == {"isFinal": True} and not [m for m in msgs if "error" in m], msgs
    # S1 once (the dropped message's text is not spoken), as HTTP gives it with seed 7
    st, _, want = speech(server, input=S1, seed=7)
    assert st == 200 and by_sentence(msgs) == [(7, want)]
    assert rows_free(tts)
