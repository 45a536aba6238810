"""``WS /v1/audio/speech/stream`` (vLLM-Omni's streaming-text protocol) over a real uvicorn
server on loopback, driven by the ``websockets`` client library; random-weight checkpoint.
The audio of each sentence must equal the HTTP endpoint's for the same text and seed.

The server, model and checkpoint fixtures are test_server's (imported, not copied).
"""
# ruff: noqa: F811 (pytest passes the imported fixtures by their names)

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import wave

import pytest

websockets = pytest.importorskip("websockets")
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402

from tests.server.test_server import (  # noqa: E402,F401 (fixtures reused)
    Server, ckpt, cosine, pcm_of, server, speech, tts, voices_dir)
from vocalis.server import bridge, create_app, stream  # noqa: E402

CONFIG = {"type": "session.config", "model": "tts-1", "voice": "alloy", "response_format": "pcm",
          "stream_audio": True, "seed": 7, "split_granularity": "sentence"}
PIECES = ["Hello th", "ere. How are", " you today? I am", " fine"]


def ws_url(server) -> str:
    return server.url.replace("http://", "ws://") + stream.PATH


async def recv_until(ws, kind: str, events: list, audio: list | None = None) -> dict:
    """Receive messages until one of type ``kind``; JSON events go to ``events``, binary
    frames to ``audio`` (as (sentence key, bytes))."""
    while True:
        msg = await asyncio.wait_for(ws.recv(), 60)
        if isinstance(msg, bytes):
            assert audio is not None, "audio where none was expected"
            audio.append(msg)
            continue
        ev = json.loads(msg)
        events.append(ev)
        if ev["type"] == kind:
            return ev


def run(coro):
    return asyncio.run(coro)


def rows_free(tts, timeout=20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = tts.engine_status()
        if st["active_rows"] == 0 and st["queued"] == 0:
            return True
        time.sleep(0.05)
    return False


async def _sentences_until_done(ws) -> tuple[list[dict], dict[int, bytearray]]:
    """Events and each sentence's audio until session.done."""
    events: list[dict] = []
    per: dict[int, bytearray] = {}
    current = None
    while True:
        msg = await asyncio.wait_for(ws.recv(), 60)
        if isinstance(msg, bytes):
            per[current].extend(msg)
            continue
        ev = json.loads(msg)
        events.append(ev)
        if ev["type"] == "audio.start":
            current = ev["sentence_index"]
            per[current] = bytearray()
        if ev["type"] == "session.done":
            return events, per


@pytest.mark.parametrize("ahead", [1, 2])
def test_sentences_stream_as_they_complete_and_equal_http(server, tts, monkeypatch, ahead):
    """ahead 1: each sentence runs alone, as the HTTP request does: the very same bytes.
    ahead 2 (the default): the next sentence is generated beside the one being sent; a
    batch changes the last bits of float sums, as for concurrent HTTP requests (see
    test_16_concurrent_clients_equal_their_solo_renditions)."""
    monkeypatch.setattr(stream, "AHEAD", ahead)

    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps(CONFIG))
            for p in PIECES:
                await ws.send(json.dumps({"type": "input.text", "text": p}))
            await ws.send(json.dumps({"type": "input.done"}))
            return await _sentences_until_done(ws)

    events, per = run(go())
    starts = [e for e in events if e["type"] == "audio.start"]
    dones = [e for e in events if e["type"] == "audio.done"]
    whole = "".join(PIECES)
    assert [e["sentence_text"] for e in starts] == ["Hello there.", "How are you today?", "I am fine"]
    for e in starts:
        assert whole[e["text_start"]:e["text_end"]] == e["sentence_text"]
        assert e["format"] == "pcm" and e["sample_rate"] == 24000 and e["channels"] == 1
        assert e["utterance_index"] == 0
        assert e["seed"] == 7  # the session.config's seed, echoed
    for e in dones:
        assert e["error"] is False and e["cancelled"] is False
        assert e["total_bytes"] == len(per[e["sentence_index"]]) == 2 * e["samples"]
    end = events[-1]
    assert end == {"type": "session.done", "utterance_index": 0, "total_sentences": 3,
                   "samples": sum(d["samples"] for d in dones), "cancelled": False,
                   "text_spoken_end": len(whole), "text_heard_end": len(whole)}
    for e in starts:  # each sentence's audio is the HTTP endpoint's for that sentence and seed
        status, _, data = speech(server, input=e["sentence_text"], seed=7)
        assert status == 200
        got = bytes(per[e["sentence_index"]])
        if ahead == 1:
            assert got == data
        else:
            assert len(got) == len(data)
            assert cosine(pcm_of(got), pcm_of(data)) >= 0.9999
    assert rows_free(tts)


def test_each_audio_start_reports_the_seed_its_sentence_used(server, tts, monkeypatch):
    """Without a seed in the session.config, each sentence draws its own; its audio.start
    says which (vocalis extension, as x-vocalis-seed over HTTP): given back as the seed,
    over the WebSocket or POST /v1/audio/speech, it makes the very same audio again, and
    the given seed is the one reported. Old code: no seed, the audio could not be remade."""
    monkeypatch.setattr(stream, "AHEAD", 1)  # each sentence alone: the very same bytes
    unseeded = {k: v for k, v in CONFIG.items() if k != "seed"}
    texts = ["Hello there.", "How are you today?"]

    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps(unseeded))
            await ws.send(json.dumps({"type": "input.text", "text": " ".join(texts)}))
            await ws.send(json.dumps({"type": "input.done"}))
            drawn = await _sentences_until_done(ws)
            again = []
            for e in [e for e in drawn[0] if e["type"] == "audio.start"]:
                await ws.send(json.dumps({**unseeded, "seed": e["seed"]}))
                await ws.send(json.dumps({"type": "input.text", "text": e["sentence_text"]}))
                await ws.send(json.dumps({"type": "input.done"}))
                again.append(await _sentences_until_done(ws))
            return drawn, again

    (events, per), again = run(go())
    starts = [e for e in events if e["type"] == "audio.start"]
    assert [e["sentence_text"] for e in starts] == texts
    seeds = [e["seed"] for e in starts]
    assert all(type(s) is int and 0 <= s < 2**63 for s in seeds), seeds
    for e, (events2, per2) in zip(starts, again):
        start2 = [x for x in events2 if x["type"] == "audio.start"]
        assert [x["seed"] for x in start2] == [e["seed"]]  # the given seed, echoed
        got = bytes(per[e["sentence_index"]])
        assert len(got) > 0 and bytes(per2[0]) == got
        status, headers, data = speech(server, input=e["sentence_text"], seed=e["seed"])
        assert status == 200 and headers["x-vocalis-seed"] == str(e["seed"]) and data == got
    assert rows_free(tts)


def test_several_utterances_per_connection_and_whole_files(server, monkeypatch):
    monkeypatch.setattr(stream, "AHEAD", 1)  # one sentence at a time: bytes equal HTTP's

    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps({**CONFIG, "split_granularity": "none"}))
            events: list[dict] = []
            audio: list[bytes] = []
            await ws.send(json.dumps({"type": "input.text", "text": "One. Two."}))
            await ws.send(json.dumps({"type": "input.done"}))
            first = await recv_until(ws, "session.done", events, audio)
            pcm = b"".join(audio)
            # the config is sticky and may change between utterances: whole WAV files now
            await ws.send(json.dumps({**CONFIG, "response_format": "wav", "stream_audio": False}))
            audio2: list[bytes] = []
            for text in ("Short one. ", "And a second. "):
                await ws.send(json.dumps({"type": "input.text", "text": text}))
            await ws.send(json.dumps({"type": "input.done"}))
            second = await recv_until(ws, "session.done", events, audio2)
            await ws.send(json.dumps({"type": "input.done"}))  # no text: empty_input, 0 sentences
            third = await recv_until(ws, "session.done", events)
            empty = events[-2]
            await ws.send(json.dumps({"type": "session.close"}))
            try:  # text after session.close is never read: the server closes normally
                await ws.send(json.dumps({"type": "input.text", "text": "Too late."}))
            except ConnectionClosed:
                pass
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 30)
            assert ws.close_code == 1000
            return first, pcm, second, audio2, third, empty, events

    first, pcm, second, audio2, third, empty, events = run(go())
    assert first["utterance_index"] == 0 and first["total_sentences"] == 1
    _, _, http_pcm = speech(server, input="One. Two.", seed=7)
    assert pcm == http_pcm  # split_granularity none: the utterance is one request
    assert second["utterance_index"] == 1 and second["total_sentences"] == 2
    assert len(audio2) == 2  # one whole file per sentence
    for text, data in zip(("Short one.", "And a second."), audio2):
        status, _, want = speech(server, input=text, seed=7, response_format="wav", stream=False)
        assert status == 200 and data == want and data[:4] == b"RIFF"
    assert third["utterance_index"] == 2 and third["total_sentences"] == 0
    assert empty["type"] == "error" and empty["code"] == "empty_input", empty


def test_cancel_stops_frees_rows_and_reports_what_was_sent(server, tts):
    text = " ".join(f"This is sentence number {i} of a long reply." for i in range(12))

    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text", "text": text}))
            received = 0
            while True:  # wait for the first audio, then barge in
                msg = await asyncio.wait_for(ws.recv(), 60)
                if isinstance(msg, bytes):
                    received += len(msg)
                    break
            await ws.send(json.dumps({"type": "input.cancel"}))
            events: list[dict] = []
            audio: list[bytes] = []
            done = await recv_until(ws, "session.done", events, audio)
            received += sum(len(a) for a in audio)
            free = tts.engine_status()  # the rows are free when session.done is sent
            # the connection stays usable
            await ws.send(json.dumps({"type": "input.text", "text": "After."}))
            await ws.send(json.dumps({"type": "input.done"}))
            after = await recv_until(ws, "session.done", events, [])
            return done, received, free, events, after

    done, received, free, events, after = run(go())
    assert free["active_rows"] == 0 and free["queued"] == 0
    assert done["cancelled"] is True and done["utterance_index"] == 0
    assert done["samples"] * 2 == received
    assert 0 < done["text_heard_end"] <= len(text)
    assert done["text_spoken_end"] <= done["text_heard_end"]
    dones = [e for e in events if e["type"] == "audio.done" and e["utterance_index"] == 0]
    assert sum(d["samples"] for d in dones) == done["samples"]
    assert after["utterance_index"] == 1 and after["total_sentences"] == 1
    assert after["cancelled"] is False


def test_a_client_that_does_not_read_holds_at_most_ahead_rows(server, tts, monkeypatch):
    """While the client reads nothing, the connection never has more than AHEAD engine
    requests: counted at every submission, and the engine's rows watched for a while (an
    invariant, not a timing); then all the audio arrives."""
    in_flight = []
    submit = stream.StreamConnection._submit

    async def counted(self, item):
        in_flight.append(bridge.unsent(self.items))  # this one included
        return await submit(self, item)

    monkeypatch.setattr(stream.StreamConnection, "_submit", counted)
    text = " ".join(f"Line {i} of a reply nobody reads yet." for i in range(20))

    async def go():
        async with connect(ws_url(server), max_queue=1) as ws:
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text", "text": text}))
            await ws.send(json.dumps({"type": "input.done"}))
            most = 0
            for _ in range(40):
                most = max(most, tts.engine_status()["active_rows"])
                await asyncio.sleep(0.02)
            events: list[dict] = []
            await recv_until(ws, "session.done", events, [])
            return most, events

    most, events = run(go())
    assert most <= stream.AHEAD
    assert len(in_flight) == 20 and max(in_flight) <= stream.AHEAD
    assert events[-1]["total_sentences"] == 20 and events[-1]["cancelled"] is False
    assert rows_free(tts)


def test_the_next_sentence_is_generated_once_the_one_before_is(server, tts, monkeypatch):
    """One sentence of a connection is generated at a time (``GENERATING``): a second
    beside it would share the engine's step with it and slow it down, below real time when
    many connections speak. At each submission every earlier request of the connection has
    finished in the engine; all sentences are spoken, in order."""
    earlier = []
    seen = []
    submit = stream.StreamConnection._submit

    async def watched(self, item):
        seen.append([job.request.done.is_set() for job in earlier])
        job = await submit(self, item)
        earlier.append(job)
        return job

    monkeypatch.setattr(stream.StreamConnection, "_submit", watched)
    text = " ".join(f"Sentence {i} of a longer reply." for i in range(5))

    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text", "text": text}))
            await ws.send(json.dumps({"type": "input.done"}))
            events: list[dict] = []
            await recv_until(ws, "session.done", events, [])
            return events

    events = run(go())
    assert stream.GENERATING == 1
    assert seen == [[True] * i for i in range(5)]
    starts = [e["sentence_text"] for e in events if e["type"] == "audio.start"]
    assert starts == [f"Sentence {i} of a longer reply." for i in range(5)]
    assert rows_free(tts)


def test_client_vanishing_mid_utterance_frees_the_rows(server, tts):
    text = " ".join(f"Sentence {i} goes on and on." for i in range(10))

    async def go():
        ws = await connect(ws_url(server))
        await ws.send(json.dumps(CONFIG))
        await ws.send(json.dumps({"type": "input.text", "text": text}))
        while not isinstance(await asyncio.wait_for(ws.recv(), 60), bytes):
            pass
        ws.transport.abort()  # gone without a close frame

    run(go())
    assert rows_free(tts)
    status, _, _ = speech(server, input="Still here.")
    assert status == 200


def test_bad_messages_get_error_events_and_the_connection_goes_on(server, tts):
    async def go():
        out = {}
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps(CONFIG))
            for name, msg in [("binary", b"\x00\x01"), ("json", "{not json"),
                              ("array", "[1, 2]"), ("type", json.dumps({"type": "input.txt"})),
                              ("type_object", json.dumps({"type": {"x": 1}})),
                              ("no_type", json.dumps({"text": "a"})),
                              ("field", json.dumps({"type": "input.text", "text": "a", "x": 1})),
                              ("text_type", json.dumps({"type": "input.text", "text": 5})),
                              ("surrogate", '{"type": "input.text", "text": "a\\ud800"}'),
                              ("model", json.dumps({**CONFIG, "model": "\ud800"})),
                              ("option", json.dumps({**CONFIG, "temperatur": 0.5})),
                              ("config_field", json.dumps({**CONFIG,
                                                           "split_granulaity": "sentence"})),
                              ("format", json.dumps({**CONFIG, "response_format": "wav"})),
                              ("clause", json.dumps({**CONFIG, "split_granularity": "clause"})),
                              ("voice", json.dumps({**CONFIG, "voice": "nobody"})),
                              ("timestamps", json.dumps({**CONFIG, "word_timestamps": "yes"}))]:
                await ws.send(msg)
                out[name] = json.loads(await asyncio.wait_for(ws.recv(), 30))
            await ws.send(json.dumps({"type": "input.text", "text": "Still fine."}))
            await ws.send(json.dumps({"type": "input.done"}))
            out["done"] = await recv_until(ws, "session.done", [], [])
        return out

    out = run(go())
    want = {"binary": "binary_not_supported", "json": "invalid_json", "array": "invalid_message",
            "type": "unknown_message_type", "type_object": "unknown_message_type",
            "no_type": "unknown_message_type", "field": "unknown_parameter",
            "option": "unknown_parameter", "config_field": "unknown_parameter",
            "format": "invalid_value",
            "clause": "unsupported_value", "voice": "voice_not_found",
            "timestamps": "bool_type", "surrogate": "invalid_text",
            "model": "string_unicode"}
    for name, code in want.items():
        ev = out[name]
        assert ev["type"] == "error" and ev["code"] == code, (name, ev)
        assert "Traceback" not in ev["message"] and len(ev["message"]) > 20
    assert out["text_type"]["type"] == "error" and out["text_type"]["param"] == "text"
    assert "temperatur" in out["option"]["message"]
    # old code: "unknown message type no type"
    assert out["no_type"]["message"].startswith("a message without a type: use "), out["no_type"]
    assert out["type"]["message"].startswith('unknown message type "input.txt" (did you mean '
                                             'input.text?): use '), out
    # a misspelled field of session.config's own is named, not listed among model options
    assert out["config_field"]["message"] == ("unknown parameter 'split_granulaity' in "
                                              "session.config: did you mean "
                                              "'split_granularity'?"), out["config_field"]
    # /openapi.json describes no WebSocket message: the refusal names what this one takes
    assert out["field"]["message"] == ("unknown parameter 'x': input.text takes 'text' besides "
                                       "'type'; the message was dropped: send it again "
                                       "without that field")
    assert out["done"]["total_sentences"] == 1 and out["done"]["cancelled"] is False
    assert rows_free(tts)


def _closing(server, first: str | bytes) -> tuple[dict, int]:
    async def go():
        async with connect(ws_url(server), max_size=None) as ws:
            await ws.send(first)
            ev = json.loads(await asyncio.wait_for(ws.recv(), 30))
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 30)
            return ev, ws.close_code

    return run(go())


def test_fatal_inputs_close_cleanly(server):
    ev, code = _closing(server, json.dumps({"type": "input.text", "text": "no config"}))
    assert ev["code"] == "missing_session_config" and code == 1008
    ev, code = _closing(server, json.dumps({**CONFIG, "speed": 9}))
    assert ev["code"] == "less_than_equal" and ev["param"] == "speed" and code == 1008
    big = json.dumps({"type": "input.text", "text": "a" * (10 * 1024 * 1024)})
    ev, code = _closing(server, big)
    assert ev["code"] == "message_too_large" and code == 1009
    status, _, _ = speech(server, input="The server is unharmed.")
    assert status == 200


def _closed_with(server, first: str | bytes | None) -> tuple[dict, int, str]:
    """Send ``first`` (None: nothing) as the first message; the error event, then the
    close code and reason the client library read off the close frame."""
    async def go():
        async with connect(ws_url(server), max_size=None) as ws:
            if first is not None:
                await ws.send(first)
            ev = json.loads(await asyncio.wait_for(ws.recv(), 30))
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 30)
            return ev, ws.close_code, ws.close_reason

    return run(go())


def test_every_policy_close_carries_a_reason(server, tts, monkeypatch):
    """Each path that closes 1008 (and 1009) says why in the close frame, not only in the
    error event before it (old code: an empty reason): the event's message, cut to the
    123 bytes a close reason holds."""
    monkeypatch.setattr(stream, "CONFIG_TIMEOUT_S", 0.5)
    cases = {
        "missing_session_config": json.dumps({"type": "input.text", "text": "no config"}),
        "binary_not_supported": b"\x00\x01",
        "invalid_json": "{not json",
        "invalid_message": "[1, 2]",
        "less_than_equal": json.dumps({**CONFIG, "speed": 9}),
        "voice_not_found": json.dumps({**CONFIG, "voice": "nobody"}),
        "message_too_large": json.dumps({"type": "input.text", "text": "a" * (200 * 1024)}),
        "config_timeout": None,
    }
    for want, first in cases.items():
        ev, code, reason = _closed_with(server, first)
        assert ev["type"] == "error" and ev["code"] == want, (want, ev)
        assert code == (1009 if want == "message_too_large" else 1008), (want, code)
        assert reason and len(reason.encode()) <= 123, (want, reason)
        message = ev["message"]
        assert reason == message or (reason.endswith("...")
                                     and message.startswith(reason[:-3])), (want, reason)
    assert rows_free(tts)


def test_a_failure_of_the_stream_itself_closes_1011_with_a_reason(server, tts, monkeypatch):
    """The server's own failure (here forced in the sender, not the model) closes 1011
    saying so, not with an empty reason."""
    async def broken(self, item):
        raise ValueError("forced failure")

    monkeypatch.setattr(stream.StreamConnection, "_speak", broken)

    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text", "text": "Hello there."}))
            await ws.send(json.dumps({"type": "input.done"}))
            with pytest.raises(ConnectionClosed):
                while True:
                    await asyncio.wait_for(ws.recv(), 30)
            return ws.close_code, ws.close_reason

    code, reason = run(go())
    assert code == 1011 and reason.startswith("internal error: the speech stream failed")
    assert rows_free(tts)


def test_limits_on_pending_text_and_open_utterances(server, tts, monkeypatch):
    monkeypatch.setattr(stream, "AHEAD", 0)  # nothing is submitted: the limits are reached
    monkeypatch.setattr(stream, "MAX_OPEN_UTTERANCES", 2)
    monkeypatch.setattr(stream, "MAX_PENDING_CHARS", 40)

    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps(CONFIG))
            for _ in range(2):
                await ws.send(json.dumps({"type": "input.text", "text": "Hi there. "}))
                await ws.send(json.dumps({"type": "input.done"}))
            await ws.send(json.dumps({"type": "input.text", "text": "More. "}))
            await ws.send(json.dumps({"type": "input.done"}))
            too_many = json.loads(await asyncio.wait_for(ws.recv(), 30))
            await ws.send(json.dumps({"type": "input.text", "text": "x" * 40}))
            too_much = json.loads(await asyncio.wait_for(ws.recv(), 30))
            await ws.send(json.dumps({"type": "input.cancel"}))
            events: list[dict] = []
            await recv_until(ws, "session.done", events)
            await recv_until(ws, "session.done", events)
            last = await recv_until(ws, "session.done", events)
            return too_many, too_much, events, last

    too_many, too_much, events, last = run(go())
    assert too_many["code"] == "too_many_utterances"
    assert too_much["code"] == "text_buffer_full"
    assert [e["utterance_index"] for e in events] == [0, 1, 2]
    assert all(e["cancelled"] and e["total_sentences"] == 0 for e in events)
    assert rows_free(tts)


def test_api_key_applies_to_the_handshake(tts, ckpt, tmp_path):
    s = Server(create_app(tts, voices_dir=tmp_path, default_voice=str(ckpt / "voice.wav"),
                          api_key="sesame"))
    try:
        async def go():
            with pytest.raises(InvalidStatus) as e:
                async with connect(ws_url(s)):
                    pass
            assert e.value.response.status_code == 401
            assert json.loads(e.value.response.body)["error"]["code"] == "invalid_api_key"
            with pytest.raises(InvalidStatus):
                async with connect(ws_url(s), additional_headers={"Authorization": "Bearer nope"}):
                    pass
            async with connect(ws_url(s),
                               additional_headers={"Authorization": "Bearer sesame"}) as ws:
                await ws.send(json.dumps(CONFIG))
                await ws.send(json.dumps({"type": "input.done"}))
                return await recv_until(ws, "session.done", [])

        assert run(go())["total_sentences"] == 0
    finally:
        s.stop()


def test_a_websocket_to_a_path_without_one_is_a_404_and_http_to_one_says_so(server):
    """A WebSocket handshake to a path with no WebSocket route: HTTP 404 naming the routes
    (Starlette's default refusal reached clients as a 403); an HTTP request to a WebSocket
    route: 404 saying it is one."""
    import http.client

    async def go():
        with pytest.raises(InvalidStatus) as e:
            async with connect(server.url.replace("http://", "ws://")
                               + "/v1/text-to-speech/alloy/bogus"):
                pass
        return e.value.response

    resp = run(go())
    assert resp.status_code == 404
    err = json.loads(resp.body)["error"]
    assert err["code"] == "not_found"
    assert err["message"].startswith("no WebSocket route /v1/text-to-speech/alloy/bogus: ")
    assert stream.PATH in err["message"]
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", stream.PATH)
        got = conn.getresponse()
        err = json.loads(got.read())["error"]
    finally:
        conn.close()
    assert got.status == 404
    assert err["message"] == (f"{stream.PATH} is a WebSocket route: connect to it with a "
                              "WebSocket client (ws:// or wss://), not with GET")


def test_client_helper_and_say_command(server, tmp_path, monkeypatch, capsys):
    import io
    import wave

    from vocalis import cli
    from vocalis.client import SpeechStream, StreamError, speak

    monkeypatch.setattr(stream, "AHEAD", 1)  # sentence by sentence: bytes equal HTTP's
    want = b"".join(speech(server, input=t, seed=7)[2] for t in ("Hello there.", "Bye."))
    got = run(speak(ws_url(server), ["Hello th", "ere. By", "e."], voice="alloy", seed=7))
    assert got == want

    out = tmp_path / "said.wav"
    monkeypatch.setattr("sys.stdin", io.StringIO("Hello there.\nBye.\n"))
    assert cli.main(["say", "--url", ws_url(server), "--voice", "alloy", "--seed", "7",
                     "-o", str(out), "-q"]) == 0
    with wave.open(str(out)) as w:
        assert w.getframerate() == 24000 and w.readframes(w.getnframes()) == want

    # without --seed the seeds drawn are said (old code: not at all), and they remake the
    # audio: one sentence's with --seed, two sentences' each with its own
    def said(text, *extra):
        capsys.readouterr()
        assert cli.main(["say", "--url", ws_url(server), "--voice", "alloy", "--text", text,
                         "-o", str(out), *extra]) == 0
        with wave.open(str(out)) as w:
            return capsys.readouterr().err.strip().splitlines(), w.readframes(w.getnframes())

    (line,), audio = said("Hello there.")
    drawn = int(line.split("; seed ")[1].split()[0])
    assert line.endswith(f"; seed {drawn} (--seed {drawn} makes the same audio)"), line
    assert said("Hello there.", "--seed", str(drawn)) == ([line.split("; seed")[0]], audio)
    (line,), audio = said("Hello there. Bye.")
    seeds = [int(x) for x in line.split("; seeds by sentence ")[1].split(" (")[0].split(", ")]
    assert len(seeds) == 2 and line.endswith(" (a sentence said again with --seed and its "
                                             "seed sounds the same)"), line
    parts = [said(t, "--seed", str(n), "-q")[1] for t, n in zip(("Hello there.", "Bye."), seeds)]
    assert audio == b"".join(parts)
    # with -o - too, on stderr (a trial's finding: nothing was said there)
    p = subprocess.run([sys.executable, "-m", "vocalis.cli", "say", "--url", ws_url(server),
                        "--voice", "alloy", "--text", "Hello there.", "-o", "-"],
                       capture_output=True, timeout=120)
    line = p.stderr.decode().strip()
    assert p.returncode == 0 and line.startswith("vocalis: ") and " s of audio on stdout; " \
        "seed " in line and line.endswith(" makes the same audio)"), line
    drawn = int(line.split("; seed ")[1].split()[0])
    assert p.stdout == said("Hello there.", "--seed", str(drawn), "-q")[1]

    async def refused():
        async with SpeechStream(ws_url(server), voice="nobody") as s:
            await s.flush()
            await s.collect()

    with pytest.raises(StreamError) as e:
        run(refused())
    assert e.value.code == "voice_not_found"
    capsys.readouterr()
    dead = "ws://127.0.0.1:9/v1/audio/speech/stream"
    assert cli.main(["say", "--url", dead, "--text", "Hi.", "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot connect" in err[0] and "Traceback" not in err[0]
    # the HTTP route instead of the stream's: the message points at the right path
    wrong = ws_url(server).replace("/speech/stream", "/speech")
    assert cli.main(["say", "--url", wrong, "--text", "Hi.", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "/v1/audio/speech/stream" in err[0], err
    # an output folder that does not exist: refused before anything is spoken
    assert cli.main(["say", "--url", ws_url(server), "--text", "Hi.",
                     "-o", str(tmp_path / "nowhere" / "x.wav")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "folder does not exist" in err[0]
    # a sentence the model refuses (Pocket TTS has no letters for Chinese) is reported on
    # one line; the sentences around it are spoken and written
    mixed = tmp_path / "mixed.wav"
    assert cli.main(["say", "--url", ws_url(server), "--voice", "alloy", "--seed", "7",
                     "--text", "Hello there. 你好。 Bye.", "-o", str(mixed), "-q"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vocalis: not spoken:"), err
    with wave.open(str(mixed)) as w:
        assert w.readframes(w.getnframes()) == want
    # nothing speakable: no file claimed; the server's reason (the error event it sends,
    # as POST /v1/audio/speech's 400) is the one line, with its fix (was two lines, the
    # second saying that the server skips such text: it refuses it)
    none = tmp_path / "none.wav"
    for said in ("\U0001F642\U0001F642", "😀 ..."):
        assert cli.main(["say", "--url", ws_url(server), "--text", said, "-o", str(none)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and not none.exists(), err
        assert err[0].startswith("error: text has nothing the model can speak"), err
        assert "only emoji, symbols" in err[0] and "write the words out" in err[0], err
    # nothing at all on stdin: the server's empty_input, one line
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert cli.main(["say", "--url", ws_url(server), "-o", str(none)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and not none.exists(), err
    assert err[0].startswith("error: text is empty: ") and "(--text)" not in err[0], err


def test_say_at_another_route_says_to_pass_the_base_url(server, tmp_path, capsys):
    """``vocalis say --url`` at an ElevenLabs route: one line, exit 2, naming the server's
    base URL (old code: the HTTP route got a question; the WebSocket routes, which speak
    another protocol, exit 1 after 20 s: "closed the connection before session.done"). The
    base URL itself is taken: it speaks as the endpoint does."""
    from vocalis import cli

    base = server.url
    wsbase = base.replace("http://", "ws://")
    fix = f"pass the server's base URL, {{}} (or {{}}{stream.PATH})"
    out = tmp_path / "said.wav"
    for url in (f"{base}/v1/text-to-speech/alloy", f"{wsbase}/v1/text-to-speech/alloy",
                f"{wsbase}/v1/text-to-speech/alloy/stream-input",
                f"{base}/v1/text-to-speech/alloy/multi-stream-input"):
        capsys.readouterr()
        t0 = time.monotonic()
        rc = cli.main(["say", "--url", url, "--text", "Hello there.", "-o", str(out)])
        lines = capsys.readouterr().err.strip().splitlines()
        root = url.split("/v1/")[0]
        assert rc == 2 and len(lines) == 1, (url, rc, lines)
        assert lines[0].startswith("error: ") and f"{url!r} is not the server's streaming " \
            "endpoint" in lines[0] and lines[0].endswith(fix.format(root, root)), lines
        assert time.monotonic() - t0 < 10 and not out.exists()
    said = []
    for url in (ws_url(server), base, base + "/", base + "/v1", ws_url(server) + "/"):
        assert cli.main(["say", "--url", url, "--voice", "alloy", "--seed", "7", "--text",
                         "Hello there.", "-o", str(out), "-q"]) == 0
        with wave.open(str(out)) as w:
            said.append(w.readframes(w.getnframes()))
    assert said[0] and all(x == said[0] for x in said[1:])


def test_say_to_stdout_reports_seconds_of_audio(server, capsysbinary):
    """``vocalis say -o -``: 16-bit PCM on stdout and, on stderr, its length in seconds
    (samples over the server's rate; a trial found samples reported as seconds)."""
    from vocalis import cli

    assert cli.main(["say", "--url", server.url, "--voice", "alloy", "--seed", "7",
                     "--text", "Hello there.", "-o", "-"]) == 0
    out, err = capsysbinary.readouterr()
    seconds = len(out) / 2 / 24000
    assert out and err.decode().startswith(f"vocalis: {seconds:.2f} s of audio on stdout")


def test_a_sentence_refused_at_submission_is_reported_and_the_rest_is_spoken(server, tts,
                                                                            monkeypatch):
    """The engine's refusals (a full queue; here made on purpose for two sentences) are an
    error event in the sentence's place, its audio.done says error; the others are spoken."""
    from vocalis.errors import CapacityError
    from vocalis.server import speech as speech_module

    submit = speech_module.submit_speech

    def refusing(state, plan, text, seed, live=False, announced=None):
        if text == "Bad.":  # not text: the model refuses
            return submit(state, plan, text + "\ud800", seed, live)
        if text == "Worse.":
            raise CapacityError("the engine queue is full (test): retry later")
        return submit(state, plan, text, seed, live)

    monkeypatch.setattr(speech_module, "submit_speech", refusing)

    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text",
                                      "text": "Good one. Bad. Worse. Fine again."}))
            await ws.send(json.dumps({"type": "input.done"}))
            events: list[dict] = []
            await recv_until(ws, "session.done", events, [])
            return events

    events = run(go())
    kinds = [(e["type"], e.get("sentence_text") or e.get("code")) for e in events
             if e["type"] in ("audio.start", "error")]
    assert kinds[0] == ("audio.start", "Good one.")
    assert kinds[1] == ("audio.start", "Bad.") and kinds[2][0] == "error"
    assert [e for e in events if e["type"] == "error"][0]["param"] == "text"
    assert kinds[3:] == [("audio.start", "Worse."), ("error", "capacity_exceeded"),
                         ("audio.start", "Fine again.")]
    full = [e for e in events if e["type"] == "error"][1]
    assert full["param"] == "text" and "not spoken (send it again)" in full["message"]
    dones = [e for e in events if e["type"] == "audio.done"]
    assert [d["error"] for d in dones] == [False, True, True, False]
    # a refused sentence made no request: no seed (null); the others used the config's
    assert [e["seed"] for e in events if e["type"] == "audio.start"] == [7, None, None, 7]
    assert events[-1]["total_sentences"] == 4 and events[-1]["cancelled"] is False
    assert rows_free(tts)


def test_a_cancel_after_a_refused_piece_leaves_the_next_utterance_alone(server, tts):
    """A piece refused (too long) opens no utterance: the input.cancel that follows has
    nothing to stop, and the next text is spoken."""
    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps({**CONFIG, "split_granularity": "none"}))
            await ws.send(json.dumps({"type": "input.text", "text": "a" * 40000}))
            refused = json.loads(await asyncio.wait_for(ws.recv(), 30))
            await ws.send(json.dumps({"type": "input.cancel"}))
            await ws.send(json.dumps({"type": "input.text", "text": "Hello there."}))
            await ws.send(json.dumps({"type": "input.done"}))
            audio: list = []
            done = await recv_until(ws, "session.done", [], audio)
            return refused, done, audio

    refused, done, audio = run(go())
    assert refused["type"] == "error" and refused["code"] == "text_buffer_full"
    assert done["cancelled"] is False and done["total_sentences"] == 1 and done["samples"] > 0
    assert rows_free(tts)


WORDS_TEXT = "Hello there, how are you today? I am fine."


async def _ws_words(server, split: str) -> tuple[list[dict], list[dict], int]:
    """An utterance of WORDS_TEXT over the WebSocket with word timestamps: its audio.words
    entries, every event, and the samples sent."""
    async with connect(ws_url(server)) as ws:
        await ws.send(json.dumps({**CONFIG, "split_granularity": split,
                                  "word_timestamps": True}))
        await ws.send(json.dumps({"type": "input.text", "text": WORDS_TEXT}))
        await ws.send(json.dumps({"type": "input.done"}))
        events: list[dict] = []
        audio: list[bytes] = []
        end = await recv_until(ws, "session.done", events, audio)
    words = [w for e in events if e["type"] == "audio.words" for w in e["words"]]
    return words, events, end["samples"]


def test_word_timestamps_are_the_same_on_sse_a_whole_file_and_the_websocket(server, tts):
    """The same request (text, voice, seed) gives the same words and times on the three
    ways out; every word of the text once, in order, inside the audio."""
    status, _, data = speech(server, input=WORDS_TEXT, stream_format="sse",
                             word_timestamps=True)
    assert status == 200
    events = [json.loads(part[len("data: "):]) for part in data.decode().split("\n\n")
              if part.startswith("data: ")]
    sse_words = [w for e in events for w in e.get("words", [])]
    assert events[-1]["type"] == "speech.audio.done"
    status, headers, whole = speech(server, input=WORDS_TEXT, stream=False,
                                    word_timestamps=True)
    assert status == 200
    file_words = json.loads(headers["x-vocalis-word-timestamps"])
    ws_words, _, samples = run(_ws_words(server, "none"))
    assert sse_words == file_words == ws_words
    assert [w["word"] for w in sse_words] == WORDS_TEXT.split()
    for w in sse_words:
        assert WORDS_TEXT[w["text_start"]:w["text_end"]] == w["word"]
    duration = len(whole) / 2 / 24000
    assert samples == len(whole) // 2
    for a, b in zip(sse_words, sse_words[1:]):
        assert 0 <= a["start"] <= a["end"] <= b["start"]
    assert sse_words[-1]["end"] <= duration + 1e-4
    assert rows_free(tts)


def test_websocket_sentence_words_count_from_the_utterance_start(server, tts):
    words, events, samples = run(_ws_words(server, "sentence"))
    assert [w["word"] for w in words] == WORDS_TEXT.split()
    for w in words:  # offsets into the utterance's text, across sentences
        assert WORDS_TEXT[w["text_start"]:w["text_end"]] == w["word"]
    edges = [0]
    for e in events:
        if e["type"] == "audio.done":
            edges.append(edges[-1] + e["samples"])
    assert edges[-1] == samples
    by_sentence: dict[int, list[dict]] = {}
    for e in events:
        if e["type"] == "audio.words":
            by_sentence.setdefault(e["sentence_index"], []).extend(e["words"])
    assert sorted(by_sentence) == [0, 1]
    for i, ws in by_sentence.items():  # each sentence's words lie inside its own audio
        for w in ws:
            assert edges[i] / 24000 - 1e-4 <= w["start"] <= w["end"] <= edges[i + 1] / 24000 + 1e-4
    assert rows_free(tts)


def test_word_timestamps_need_a_way_out_that_can_carry_them(server):
    status, _, data = speech(server, input=WORDS_TEXT, stream=True, word_timestamps=True)
    body = json.loads(data)
    assert status == 400 and body["error"]["param"] == "word_timestamps"
    assert "stream_format 'sse'" in body["error"]["message"]
    status, _, data = speech(server, input=WORDS_TEXT, stream_format="sse",
                             word_timestamps="yes")
    assert status == 400


def _say(server, *args, **popen) -> subprocess.Popen:
    """``vocalis say`` against ``server``, run for real as a subprocess."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "vocalis.cli", "say", "--url", ws_url(server),
                             "--voice", "alloy", "--seed", "7", *args], env=env, **popen)


def say_until_audio(server, path, line: bytes) -> subprocess.Popen:
    """``vocalis say -o path`` given ``line`` on its stdin (left open), once ``path`` holds
    some audio."""
    p = _say(server, "-o", str(path), stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(line)
    p.stdin.flush()
    deadline = time.monotonic() + 60
    while not (path.exists() and path.stat().st_size > 1000):
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.05)
    return p


def test_say_ctrl_c_exits_130_with_one_line_and_a_closed_pipe_exits_141(server, tts,
                                                                         tmp_path):
    """docs/cli.md: Ctrl-C stops with one line saying what was left, exit 130 (at once, also
    while the server's audio waits unread); the reader of ``-o -`` going away ends it
    quietly with 141, as ``vocalis generate``."""
    # Ctrl-C while waiting for the next line of stdin, after some audio was written
    path = tmp_path / "said.wav"
    p = say_until_audio(server, path, b"Hello there.\n")
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    lines = err.decode().strip().splitlines()
    assert p.returncode == 130, err.decode()
    assert len(lines) == 1 and lines[0].startswith("error: interrupted: "), lines
    assert str(path) in lines[0] and "partial" in lines[0]
    seconds = float(lines[0].split("first ")[1].split(" s")[0])
    with wave.open(str(path)) as w:  # a whole WAV file: its header holds the true length
        assert w.getnframes() > 0 and abs(w.getnframes() / 24000 - seconds) < 0.01

    # Ctrl-C while the audio on stdout is not read (the pipe full, frames queued unread)
    p = _say(server, "-o", "-", "--text", "Hello there, this is a long one. " * 60,
             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert len(p.stdout.read(4)) == 4
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err.decode()
    assert time.monotonic() - t0 < 5  # no closing handshake waited out behind the audio
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "the audio on stdout is partial" in lines[0], lines

    # `vocalis say -o - | head -c 10`
    p = _say(server, "-q", "-o", "-", "--text", "Hello there. This is a test of a pipe. " * 10,
             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 141, err.decode()
    assert len(head) == 10 and err == b""
    assert rows_free(tts)


def test_a_speed_that_is_not_a_finite_number_is_named_in_plain_words(server):
    """``speed: NaN`` (JSON's NaN and Infinity, as Python's json writes them, or the
    strings) is refused saying what speed takes, on the HTTP route (400 envelope) and the
    WebSocket (error event); the range check alone would call NaN "greater than 4"."""
    want = "speed must be a finite number between 0.25 and 4.0"
    for bad in (float("nan"), float("inf"), float("-inf"), "NaN"):
        status, _, data = speech(server, input="Hi.", speed=bad)
        err = json.loads(data)["error"]
        assert status == 400 and err["param"] == "speed" and err["code"] == "finite_number"
        assert err["message"].startswith(want + " (got "), err
        ev, code = _closing(server, json.dumps({**CONFIG, "speed": bad}))
        assert ev["type"] == "error" and ev["param"] == "speed" and code == 1008
        assert ev["code"] == "finite_number" and want in ev["message"], ev
    assert speech(server, input="Still fine.", speed=1.0)[0] == 200
    status, _, data = server.request("GET", "/openapi.json")  # the range is still published
    prop = json.loads(data)["components"]["schemas"]["SpeechRequest"]["properties"]["speed"]
    assert status == 200 and (prop["minimum"], prop["maximum"]) == (0.25, 4.0), prop


def test_seed_minus_one_is_refused_alike_on_http_and_the_websocket(server):
    """vocalis has no "-1 = random" convention: a seed is an integer in [0, 2**63) and a
    random one is asked for by leaving it out (docs/server.md). HTTP and WebSocket answer
    ``seed: -1`` with the same message, naming the range and what to do."""
    want = "seed must be an integer in [0, 2**63), got -1; leave seed out for a random one"
    status, _, data = speech(server, input="Hi.", seed=-1)
    err = json.loads(data)["error"]
    assert status == 400 and err["param"] == "seed" and err["message"] == want, err

    # the first session.config: refused, and the connection closes (nothing to speak with)
    ev, code = _closing(server, json.dumps({**CONFIG, "seed": -1}))
    assert ev["type"] == "error" and ev["param"] == "seed" and ev["message"] == want, ev
    assert code == 1008

    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps({**CONFIG, "seed": None}))  # no seed: a random one
            await ws.send(json.dumps({**CONFIG, "seed": -1}))  # refused; the first one holds
            refused = json.loads(await asyncio.wait_for(ws.recv(), 30))
            await ws.send(json.dumps({"type": "input.text", "text": "Hello there."}))
            await ws.send(json.dumps({"type": "input.done"}))
            done = await recv_until(ws, "session.done", [], [])
            return refused, done

    refused, done = run(go())
    assert refused["type"] == "error" and refused["param"] == "seed"
    assert refused["message"] == want, refused
    assert done["total_sentences"] == 1 and done["samples"] > 0
    status, headers, _ = server.request("POST", "/v1/audio/speech",
                                        {"model": "tts-1", "input": "Hi.", "voice": "alloy",
                                         "response_format": "pcm"})
    assert status == 200 and int(headers["x-vocalis-seed"]) >= 0


def test_a_sentence_is_generated_before_its_end_is_sure_and_sent_once_it_is(server, tts,
                                                                             monkeypatch):
    """"Hello there." may still go on ("etc. and"): its end is known from the next
    character. It is generated at once and sent when that character confirms it, so its
    first audio does not wait for the character; the audio is the HTTP endpoint's."""
    monkeypatch.setattr(stream, "AHEAD", 1)  # each sentence alone: the very same bytes

    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps(CONFIG))
            before = tts.engine_status()["frames"]
            await ws.send(json.dumps({"type": "input.text", "text": "Hello there."}))
            deadline = time.monotonic() + 30
            while tts.engine_status()["frames"] == before and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            generated = tts.engine_status()["frames"] > before
            try:  # nothing is sent before the text says the sentence ended
                early = await asyncio.wait_for(ws.recv(), 0.5)
            except asyncio.TimeoutError:
                early = None
            await ws.send(json.dumps({"type": "input.text", "text": " How are you?"}))
            await ws.send(json.dumps({"type": "input.done"}))
            return generated, early, *await _sentences_until_done(ws)

    generated, early, events, per = run(go())
    assert generated and early is None
    starts = [e for e in events if e["type"] == "audio.start"]
    assert [e["sentence_text"] for e in starts] == ["Hello there.", "How are you?"]
    for e in starts:
        status, _, data = speech(server, input=e["sentence_text"], seed=7)
        assert status == 200 and bytes(per[e["sentence_index"]]) == data
    assert rows_free(tts)


@pytest.mark.parametrize("rest", [" and pears.", "!"])
def test_a_guess_the_text_does_not_confirm_is_never_sent(server, tts, monkeypatch, rest):
    monkeypatch.setattr(stream, "AHEAD", 1)
    first = "I like apples etc." if rest != "!" else "I like apples!"

    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps(CONFIG))
            before = tts.engine_status()["frames"]
            await ws.send(json.dumps({"type": "input.text", "text": first}))
            deadline = time.monotonic() + 30
            while tts.engine_status()["frames"] == before and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await ws.send(json.dumps({"type": "input.text", "text": rest}))
            await ws.send(json.dumps({"type": "input.done"}))
            return await _sentences_until_done(ws)

    events, per = run(go())
    starts = [e for e in events if e["type"] == "audio.start"]
    whole = first + rest
    assert [e["sentence_text"] for e in starts] == [whole]
    assert (starts[0]["text_start"], starts[0]["text_end"]) == (0, len(whole))
    status, _, data = speech(server, input=whole, seed=7)
    assert status == 200 and bytes(per[starts[0]["sentence_index"]]) == data
    assert events[-1]["type"] == "session.done" and events[-1]["total_sentences"] == 1
    assert rows_free(tts)


def test_a_guess_is_dropped_by_cancel_and_by_session_close(server, tts):
    async def go():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps(CONFIG))
            await ws.send(json.dumps({"type": "input.text", "text": "Hello there."}))
            await ws.send(json.dumps({"type": "input.cancel"}))
            done = await recv_until(ws, "session.done", [], [])
            await ws.send(json.dumps({"type": "input.text", "text": "Good night."}))
            await ws.send(json.dumps({"type": "session.close"}))
            rest = []
            try:
                while True:
                    rest.append(await asyncio.wait_for(ws.recv(), 30))
            except ConnectionClosed:
                pass
            return done, rest

    done, rest = run(go())
    assert done["cancelled"] is True and done["total_sentences"] == 0
    assert rest == []  # the unflushed "Good night." is dropped with session.close, unsent
    assert rows_free(tts)


def test_a_silent_or_idle_connection_is_closed_with_an_error_first(server, tts, monkeypatch):
    monkeypatch.setattr(stream, "CONFIG_TIMEOUT_S", 0.5)
    monkeypatch.setattr(stream, "IDLE_TIMEOUT_S", 1.0)

    async def silent():
        async with connect(ws_url(server)) as ws:
            ev = json.loads(await asyncio.wait_for(ws.recv(), 30))
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 30)
            return ev, ws.close_code

    async def idle():
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps(CONFIG))
            # an utterance spoken in full first: a connection speaking is never idle
            await ws.send(json.dumps({"type": "input.text", "text": "Hello there, how are "
                                      "you today? I am fine, thank you."}))
            await ws.send(json.dumps({"type": "input.done"}))
            done = await recv_until(ws, "session.done", [], [])
            ev = json.loads(await asyncio.wait_for(ws.recv(), 30))
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 30)
            return done, ev, ws.close_code

    ev, code = run(silent())
    assert ev["type"] == "error" and ev["code"] == "config_timeout" and code == 1008
    done, ev, code = run(idle())
    assert done["cancelled"] is False and done["total_sentences"] == 2
    assert ev["type"] == "error" and ev["code"] == "idle_timeout" and code == 1000
    assert rows_free(tts)
    status, _, data = server.request("GET", "/metrics")
    assert status == 200 and 'vocalis_websockets_open{protocol="vllm-omni"} 0.0' in data.decode()
