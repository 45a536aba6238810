"""``vocalis serve`` as a process: start-up line, graceful shutdown on SIGTERM (streams
that end in time finish, longer ones are cut, exit 0), voices surviving a restart."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("av")

SMALL = "english_2m_2026-10"


class Proc:
    def __init__(self, args: list[str]):
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        self.p = subprocess.Popen([sys.executable, "-m", "vocalis", "serve", *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=env)
        self.lines: list[str] = []
        self.url: str | None = None
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip())
            m = re.search(r"serving .* at (http://[\d.]+:(\d+))", line)
            if m:
                self.url, self.port = m.group(1), int(m.group(2))
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout=90):
        if not self._ready.wait(timeout) or not self.url:
            self.p.kill()
            self.p.wait(10)
            pytest.fail("server did not start:\n" + self.log())
        return self

    def log(self) -> str:
        return "\n".join(self.lines)

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            if isinstance(body, dict):
                body = json.dumps(body).encode()
                headers = {"Content-Type": "application/json"}
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def open_stream(self, max_frames: int, seed: int = 1):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request("POST", "/v1/audio/speech", json.dumps(
            {"model": "tts-1", "input": "A long story about streaming audio.", "voice": "alloy",
             "response_format": "pcm", "seed": seed, "max_frames": max_frames}),
            {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        first = resp.read1(4096)
        assert first
        return conn, resp, first

    def stop(self, sig=signal.SIGTERM, timeout=30) -> int:
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise


def _upload(proc: Proc, name: str, data: bytes):
    b = "vocalisboundary9"
    body = (f'--{b}\r\nContent-Disposition: form-data; name="name"\r\n\r\n{name}\r\n'
            f'--{b}\r\nContent-Disposition: form-data; name="audio_sample"; '
            f'filename="v.wav"\r\n\r\n').encode() + data + f"\r\n--{b}--\r\n".encode()
    return proc.request("POST", "/v1/audio/voices", body,
                        {"Content-Type": f"multipart/form-data; boundary={b}"})


def test_serve_graceful_shutdown_and_restart(checkpoints, tmp_path):
    ckpt = checkpoints.get(SMALL)
    voices = tmp_path / "voices"
    args = ["--model", str(ckpt), "--voice", str(ckpt / "voice.wav"), "--port", "0",
            "--voices-dir", str(voices), "--shutdown-timeout", "6", "--max-batch", "4", "-q"]
    proc = Proc(args).wait_ready()
    try:
        status, data = _upload(proc, "persisted", (ckpt / "voice.wav").read_bytes())
        assert status == 201, data
        status, spoken = proc.request("POST", "/v1/audio/speech", {
            "model": "tts-1", "input": "Remember me.", "voice": "persisted",
            "response_format": "pcm", "seed": 5})
        assert status == 200 and spoken

        long_conn, long_resp, _ = proc.open_stream(max_frames=5000, seed=1)  # ~400 s of audio
        mid_frames = 120
        mid_conn, mid_resp, mid_first = proc.open_stream(max_frames=mid_frames, seed=2)
        t0 = time.monotonic()
        proc.p.send_signal(signal.SIGTERM)
        mid_body = mid_first + mid_resp.read()  # finishes within the grace period
        assert len(mid_body) == mid_frames * 1920 * 2
        with pytest.raises((http.client.IncompleteRead, ConnectionError, OSError)):
            while long_resp.read(65536):  # cut when the grace period ends
                pass
        code = proc.p.wait(30)
        took = time.monotonic() - t0
        assert code == 0, proc.log()
        assert 5 < took < 25, took
        for c in (long_conn, mid_conn):
            c.close()
    finally:
        proc.stop()

    again = Proc(args).wait_ready()
    try:
        status, data = again.request("GET", "/v1/audio/voices")
        assert "persisted" in [v["id"] for v in json.loads(data)["voices"]]
        status, spoken_again = again.request("POST", "/v1/audio/speech", {
            "model": "tts-1", "input": "Remember me.", "voice": "persisted",
            "response_format": "pcm", "seed": 5})
        assert status == 200 and spoken_again == spoken
        assert again.stop(signal.SIGINT) == 0, again.log()
    finally:
        again.stop()


def test_serve_busy_port_is_a_one_line_error(checkpoints):
    ckpt = checkpoints.get(SMALL)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "vocalis", "serve", "--model", str(ckpt),
                            "--port", str(port)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith("error: cannot listen on 127.0.0.1:")


def test_serve_quantize_mode_int4_serves_the_quantized_model(tmp_path, built_kernels):
    """``vocalis serve --quantize-mode int4``: the served audio is the 4-bit model's (the same
    seeded request through ``vocalis.load(quantize="int4")``), not the float32 model's (the
    kernels built for the session, in the cache the server sees too)."""
    import numpy as np

    import vocalis
    from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

    ckpt = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "cv", seed=4, tiny=True)
    req = {"model": "cv", "input": "Served in four bits.", "voice": "ryan",
           "response_format": "pcm", "seed": 3, "max_new_tokens": 8}
    proc = Proc(["--model", str(ckpt), "--port", "0", "--quantize-mode", "int4",
                 "--voices-dir", str(tmp_path / "voices"), "-q"]).wait_ready(180)
    try:
        status, pcm = proc.request("POST", "/v1/audio/speech", req)
        assert status == 200, pcm
        assert f"vocalis: serving cv at {proc.url}" in proc.log()  # the id, not the path
        status, card = proc.request("GET", "/v1/models/cv")
        assert status == 200 and json.loads(card)["quantize"] == "int4", card
    finally:
        assert proc.stop() == 0, proc.log()
    got = np.frombuffer(pcm, "<i2").astype(np.float64) / 32767
    opts = dict(speaker="ryan", seed=3, max_new_tokens=8)
    with vocalis.load(str(ckpt), quantize="int4") as tts:
        q4 = tts.synthesize(req["input"], **opts).samples
    with vocalis.load(str(ckpt)) as tts:
        fp = tts.synthesize(req["input"], **opts).samples

    def cos(a, b):
        n = min(len(a), len(b))
        return float(np.dot(a[:n], b[:n]) / (np.linalg.norm(a[:n]) * np.linalg.norm(b[:n])))

    assert got.shape == q4.shape and np.abs(got - q4).max() < 2 / 32767  # 16-bit rounding
    assert cos(got, fp) < 0.99  # not the float32 model's audio


def test_serve_warmup_runs_before_the_server_accepts_and_refuses_bad_counts(checkpoints):
    """``--warmup N``: two bursts of N short requests per model before the server says it
    is serving (its log line comes first); a count outside 0..--max-batch, with --ray, or
    a model without a voice to warm up with, is one line and exit 2."""
    ckpt = str(checkpoints.get(SMALL))
    voice = str(checkpoints.get(SMALL) / "voice.wav")
    proc = Proc(["--model", ckpt, "--voice", voice, "--port", "0", "--warmup", "3",
                 "--max-batch", "4"])
    proc.wait_ready()
    try:
        status, body = proc.request("GET", "/health")
        assert status == 200
        engine = json.loads(body)["engine"]
        # 2 bursts x 3 requests x 3 frames (Pocket's warm-up asks for exactly 3 frames)
        assert engine["frames"] == 18 and engine["active_rows"] == 0
        lines = proc.log().splitlines()
        warmed = [i for i, line in enumerate(lines) if "warmed up" in line]
        ready = [i for i, line in enumerate(lines) if "serving" in line and " at http" in line]
        assert warmed and ready and warmed[0] < ready[0], proc.log()
    finally:
        assert proc.stop() == 0
    for args, why in ((["--warmup", "5", "--max-batch", "4"], "--warmup must be a number of "
                       "rows in 0..4"), (["--warmup", "1", "--ray"], "--warmup is not available "
                                         "with --ray"),
                      (["--warmup", "1"], "has no default voice to warm up with: give --voice")):
        r = subprocess.run([sys.executable, "-m", "vocalis", "serve", "--model", ckpt,
                            "--port", "0", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip().splitlines()[-1].startswith("error: ") and why in r.stderr
        assert "Traceback" not in r.stderr
