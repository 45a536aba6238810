"""``vocalis serve`` stopped while a stream still runs: a stream still running after
``--shutdown-timeout`` is cut (the client gets a short WAV) and the log says so in one
line, without uvicorn's "Exception in ASGI application ... CancelledError" traceback; any
other exception is still logged as before."""

from __future__ import annotations

import asyncio
import logging
import signal
import weakref
from types import SimpleNamespace

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from tests.server.test_server_cli import SMALL, Proc


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

