"""``vocalis serve`` stopped while a stream still runs: a stream still running after
``--shutdown-timeout`` is cut (the client gets a short WAV) and the log says so in one
line, without uvicorn's "Exception in ASGI application ... CancelledError" traceback; any
other exception is still logged as before. A streaming WebSocket connection speaks the
sentences it has received, then is closed 1001 with a reason."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import weakref
from types import SimpleNamespace

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from tests.server.test_server_cli import SMALL, Proc
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402


def test_ctrl_c_cuts_a_long_stream_with_one_line_and_no_traceback(checkpoints, tmp_path):
    ckpt = checkpoints.get(SMALL)
    proc = Proc(["--model", str(ckpt), "--voice", str(ckpt / "voice.wav"), "--port", "0",
                 "--voices-dir", str(tmp_path / "voices"), "--shutdown-timeout", "1",
                 "--max-batch", "2"]).wait_ready()
    try:
        body = {"model": "tts-1", "input": "A long story about streaming audio, told slowly.",
                "voice": "alloy", "response_format": "wav", "seed": 1,
                "max_frames": 5000}  # ~400 s of audio: still running when the timeout ends
        got = b""
        with httpx.stream("POST", f"{proc.url}/v1/audio/speech", json=body,
                          timeout=30) as resp:
            assert resp.status_code == 200
            chunks = resp.iter_raw()
            got += next(chunks)
            assert got[:4] == b"RIFF"
            proc.p.send_signal(signal.SIGINT)
            with pytest.raises(httpx.HTTPError):  # cut, not a silently short file
                for chunk in chunks:
                    got += chunk
        code = proc.p.wait(30)
    finally:
        proc.stop()
    log = proc.log()
    assert code == 0, log
    assert "Traceback" not in log and "CancelledError" not in log, log
    assert "Exception in ASGI application" not in log, log
    assert "Cancel 1 running task(s)" not in log, log  # said by the one line instead
    lines = [ln for ln in log.splitlines() if "cut off at shutdown" in ln]
    want = ("warning: 1 stream cut off at shutdown (still running after the 1 s shutdown "
            "timeout)")
    assert lines == [want], log


def serving(checkpoints, tmp_path) -> Proc:
    """``vocalis serve`` of the small checkpoint with a 60 s shutdown timeout, ready."""
    ckpt = checkpoints.get(SMALL)
    return Proc(["--model", str(ckpt), "--voice", str(ckpt / "voice.wav"), "--port", "0",
                 "--voices-dir", str(tmp_path / "voices"), "--shutdown-timeout", "60",
                 "--max-batch", "2"]).wait_ready()


def test_ctrl_c_lets_a_websocket_stream_speak_what_it_received_then_closes_1001(
        checkpoints, tmp_path):
    """Ctrl-C while a streaming WebSocket connection speaks the first of two sentences it
    has received, its utterance still open (no input.done; the second sentence's end not
    yet sure): an error message says the server shuts down, the utterance is ended as
    input.done ends it, both sentences' audio comes whole (not cancelled), then its
    session.done, and the connection is closed 1001 with a reason (uvicorn alone closed it
    1012 at once, without one); the server exits 0."""
    proc = serving(checkpoints, tmp_path)
    frames = 150

    async def go():
        url = proc.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
        events, audio = [], bytearray()
        async with connect(url) as ws:
            await ws.send(json.dumps({
                "type": "session.config", "model": "tts-1", "voice": "alloy",
                "response_format": "pcm", "stream_audio": True, "seed": 3,
                "split_granularity": "sentence", "max_frames": frames}))
            await ws.send(json.dumps({"type": "input.text",
                                      "text": "The first sentence is here. The second one "
                                              "follows it."}))
            while not audio:
                msg = await asyncio.wait_for(ws.recv(), 60)
                if isinstance(msg, bytes):
                    audio += msg
                else:
                    events.append(json.loads(msg))
            proc.p.send_signal(signal.SIGINT)
            try:
                while True:
                    msg = await asyncio.wait_for(ws.recv(), 60)
                    if isinstance(msg, bytes):
                        audio += msg
                    else:
                        events.append(json.loads(msg))
            except ConnectionClosed as e:
                return events, audio, e.rcvd

    try:
        events, audio, close = asyncio.run(go())
        code = proc.p.wait(60)
    finally:
        proc.stop()
    log = proc.log()
    kinds = [e["type"] for e in events]
    errors = [e for e in events if e["type"] == "error"]
    assert [e["code"] for e in errors] == ["server_shutting_down"], events
    dones = [e for e in events if e["type"] == "audio.done"]
    assert [d["cancelled"] for d in dones] == [False, False], events
    assert [d["samples"] for d in dones] == [frames * 1920] * 2
    assert len(audio) == 2 * 2 * frames * 1920  # 16-bit PCM, every sample sent
    assert kinds[-1] == "session.done" and events[-1]["cancelled"] is False
    assert close is not None and close.code == 1001, close
    assert "shutting down" in close.reason and "reconnect" in close.reason
    assert code == 0, log
    assert "Traceback" not in log, log


def test_ctrl_c_lets_an_elevenlabs_stream_speak_what_it_received_then_closes_1001(
        checkpoints, tmp_path):
    """The same on the ElevenLabs stream-input route, the text not flushed (its last
    sentence unfinished): an error message ``server_shutting_down``, the text flushed and
    spoken, ``isFinal``, then close 1001 with a reason; the audio equals the same text's
    when the input ends normally and the server is not stopped."""
    import base64

    proc = serving(checkpoints, tmp_path)
    text = ("The first sentence is here, and it goes on for a while before it ends. The "
            "second one follows it, and it is about as long as the first one")

    async def go(stop: bool):
        url = (proc.url.replace("http://", "ws://")
               + "/v1/text-to-speech/alloy/stream-input?output_format=pcm_24000")
        msgs, audio = [], bytearray()
        async with connect(url) as ws:
            await ws.send(json.dumps({"text": " ", "seed": 5}))
            await ws.send(json.dumps({"text": text}))
            if not stop:  # the end of input: spoken, then isFinal
                await ws.send(json.dumps({"text": ""}))
            try:
                while True:
                    m = json.loads(await asyncio.wait_for(ws.recv(), 60))
                    msgs.append(m)
                    if m.get("audio"):
                        if stop and not audio:
                            proc.p.send_signal(signal.SIGINT)
                        audio += base64.b64decode(m["audio"])
                    if m.get("isFinal") and not stop:
                        return msgs, audio, None
            except ConnectionClosed as e:
                return msgs, audio, e.rcvd

    try:
        _, whole, _ = asyncio.run(go(stop=False))
        msgs, audio, close = asyncio.run(go(stop=True))
        code = proc.p.wait(60)
    finally:
        proc.stop()
    log = proc.log()
    errors = [m for m in msgs if "error" in m]
    assert [m["error"] for m in errors] == ["server_shutting_down"], msgs
    assert msgs[-1] == {"isFinal": True}, msgs
    assert len(whole) > 0 and audio == whole
    assert close is not None and close.code == 1001, close
    assert "shutting down" in close.reason and "reconnect" in close.reason
    assert code == 0, log
    assert "Traceback" not in log, log


def test_say_while_the_server_shuts_down_keeps_the_audio_and_exits_1(checkpoints, tmp_path):
    """``vocalis say`` reading stdin while the server is stopped: the server speaks what it
    has received; ``say`` keeps that audio in its WAV file, says in one line that the
    server shut down before the text ended, and exits 1 (the server's side, not a mistake:
    2 is for those). A second Ctrl-C during a drain is logged as such."""
    import wave

    from tests.server.test_stream import say_until_audio

    proc = serving(checkpoints, tmp_path)
    path = tmp_path / "said.wav"
    try:
        say = say_until_audio(proc, path, b"Hello there. And more\n")
        proc.p.send_signal(signal.SIGINT)
        say.wait(60)  # its stdin still open: the text has not ended
        err = say.stderr.read()
        say.stdin.close()
        code = proc.p.wait(60)
    finally:
        proc.stop()
    lines = err.decode().strip().splitlines()
    assert say.returncode == 1, err.decode()
    assert len(lines) == 1 and lines[0].startswith("error: the server shut down before the "
                                                    "text ended"), lines
    seconds = float(lines[0].split("received (")[1].split(" s")[0])
    with wave.open(str(path)) as w:  # "Hello there." and "And more", both spoken
        assert w.getnframes() > 0 and abs(w.getnframes() / 24000 - seconds) < 0.01
    assert code == 0, proc.log()


def test_a_second_ctrl_c_cuts_a_draining_websocket_and_says_so(checkpoints, tmp_path):
    proc = serving(checkpoints, tmp_path)

    async def go():
        url = proc.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
        async with connect(url) as ws:
            await ws.send(json.dumps({
                "type": "session.config", "voice": "alloy", "response_format": "pcm",
                "stream_audio": True, "split_granularity": "none", "max_frames": 5000}))
            await ws.send(json.dumps({"type": "input.text", "text": "A long one."}))
            await ws.send(json.dumps({"type": "input.done"}))
            while not isinstance(await asyncio.wait_for(ws.recv(), 60), bytes):
                pass
            proc.p.send_signal(signal.SIGINT)
            await asyncio.sleep(1.0)
            proc.p.send_signal(signal.SIGINT)
            try:
                while True:
                    await asyncio.wait_for(ws.recv(), 30)
            except ConnectionClosed as e:
                return e.rcvd

    try:
        close = asyncio.run(go())
        code = proc.p.wait(60)
    finally:
        proc.stop()
    log = proc.log()
    assert close is not None and close.code == 1012, close  # uvicorn's, at once
    lines = [ln for ln in log.splitlines() if "cut off at shutdown" in ln]
    assert lines == ["warning: 1 WebSocket connection cut off at shutdown (stopped at once by "
                     "a second signal)"], log
    assert code == 0, log


def _record(msg: str, error: BaseException | None = None, *args) -> logging.LogRecord:
    exc_info = (type(error), error, None) if error is not None else None
    return logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, msg, args, exc_info)


def test_only_shutdown_cut_offs_leave_uvicorn_log_unsaid():
    """The filter drops a traceback only for a cancellation the app noted at shutdown;
    other exceptions, and a cancellation it did not note, are logged as before."""
    from vocalis.server.run import _QuietCutOffs

    noted = asyncio.CancelledError("Task cancelled, timeout graceful shutdown exceeded")
    state = SimpleNamespace(cut_off_errors=weakref.WeakSet([noted]))
    quiet = _QuietCutOffs(state)
    assert not quiet.filter(_record("Exception in ASGI application\n", noted))
    assert not quiet.filter(_record("Cancel %s running task(s), timeout graceful shutdown "
                                    "exceeded", None, 3))
    assert quiet.cancelled == 3
    assert quiet.filter(_record("Exception in ASGI application\n", RuntimeError("boom")))
    assert quiet.filter(_record("Exception in ASGI application\n", asyncio.CancelledError()))
    lifespan = "Traceback (most recent call last):\n  ...\nasyncio.exceptions.CancelledError\n"
    assert quiet.filter(_record(lifespan))  # only after a second signal
    quiet.forced = True
    assert not quiet.filter(_record(lifespan))
    assert quiet.filter(_record("Traceback (most recent call last):\n  ...\nValueError: x\n"))
    assert quiet.filter(_record("Started server process [%d]", None, 1))

