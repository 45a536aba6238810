"""Scale out on Ray: the Serve deployment and the Ray Data batch pipeline, on one local Ray
instance (127.0.0.1, 2 CPUs, no dashboard) shared by the module, with the small random
checkpoint.

The Serve application is started the documented way, ``vocalis serve --ray --replicas 2``,
as a subprocess connected to the module's instance (``--ray-address``); the example config
file is deployed with ``serve run``. Every wait is a deadline on a condition, never a sleep.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import wave
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import yaml

pytestmark = pytest.mark.slow

pytest.importorskip("ray.serve")
pytest.importorskip("ray.data")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

import vocalis
from vocalis import cli
from tests.server.test_server import sse_events  # noqa: E402

SMALL = "english_2m_2026-10"
TEXT = "Hello from the cluster, this is a streaming test."
REPO = Path(__file__).resolve().parents[2]
MAX_BATCH = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(condition, timeout: float, what: str, every: float = 0.1):
    """``condition()``'s first truthy value, polled until ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def env() -> dict:
    e = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    src = str(REPO / "src")  # the package under test, also when another checkout is installed
    e["PYTHONPATH"] = src + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def ckpt(checkpoints) -> Path:
    return checkpoints.get(SMALL)


@pytest.fixture(scope="module")
def cluster():
    """The module's Ray instance and Serve, its proxy on 127.0.0.1:<free port>."""
    from ray import serve

    from vocalis.ray import connect

    os.environ.pop("RAY_ADDRESS", None)  # a private instance, whatever the environment says
    ray, started = connect(None, num_cpus=2)
    assert started, "another Ray instance was already connected in this process"
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    info = {"address": ray.get_runtime_context().gcs_address, "port": port,
            "url": f"http://127.0.0.1:{port}"}
    assert info["address"].startswith("127.0.0.1:")
    yield info
    serve.shutdown()
    ray.shutdown()


class Proc:
    """A CLI subprocess whose stderr is collected in a thread."""

    def __init__(self, args: list[str]):
        self.p = subprocess.Popen([sys.executable, "-m", "vocalis.cli", *args], env=env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.err: list[str] = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.p.stderr:
            self.err.append(line.decode("utf-8", "replace"))

    def log(self) -> str:
        return "".join(self.err)


@pytest.fixture(scope="module")
def app(cluster, ckpt, tmp_path_factory):
    """``vocalis serve --ray --replicas 2`` on the module's cluster."""
    voices = tmp_path_factory.mktemp("ray_voices")
    proc = Proc(["serve", "--ray", "--ray-address", cluster["address"], "--replicas", "2",
                 "--replica-cpus", "0.25", "--port", str(cluster["port"]), "--model", str(ckpt),
                 "--voice", str(ckpt / "voice.wav"), "--voices-dir", str(voices),
                 "--threads", "1", "--max-batch", str(MAX_BATCH), "--max-queue", "16",
                 "--dtype", "float32"])  # a family load option, through to every replica's load
    until(lambda: "vocalis: serving" in proc.log() or proc.p.poll() is not None, 180,
          "the Serve app to start")
    assert proc.p.poll() is None, proc.log()
    assert f"at http://127.0.0.1:{cluster['port']}" in proc.log()
    yield {"url": cluster["url"], "port": cluster["port"], "proc": proc, "voices": voices}
    if proc.p.poll() is None:
        proc.p.send_signal(signal.SIGTERM)
        proc.p.wait(90)


def request(port: int, method: str, path: str, body=None, headers=None, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        if isinstance(body, dict):
            body = json.dumps(body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def parse_metrics(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def replica_metrics(port: int, want: set[str] | None = None, n: int = 2,
                    timeout: float = 60) -> dict[str, dict]:
    """{replica id: its /metrics}, polling through the proxy (which picks the replica) until
    ``n`` replicas (or every one of ``want``) answered."""
    seen: dict[str, dict] = {}

    def poll():
        status, headers, data = request(port, "GET", "/metrics")
        if status == 200:
            seen[headers["x-vocalis-replica"]] = parse_metrics(data.decode())
        return (want <= set(seen)) if want else len(seen) >= n

    until(poll, timeout, f"metrics from {want or n} replica(s) (seen {sorted(seen)})")
    return seen


def info_of(metrics: dict) -> dict:
    """The labels of vocalis_replica_info."""
    key = next(k for k in metrics if k.startswith("vocalis_replica_info{"))
    labels = dict(part.split("=", 1) for part in key[len("vocalis_replica_info{"):-1].split(","))
    return {k: v.strip('"') for k, v in labels.items()}


def client(url: str, **kw):
    kw.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=url + "/v1", api_key="none", timeout=120, **kw)


def wav_samples(data: bytes) -> np.ndarray:
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24000)
        return np.frombuffer(w.readframes(w.getnframes()), "<i2")


# --------------------------------------------------------------------------- Serve


def test_openai_speech_and_streams_through_two_replicas(app):
    c = client(app["url"])
    body = {"seed": 7, "max_frames": 6}
    # a whole file, as audio.speech.create asks for it
    wav = c.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="wav",
                                extra_body=body)
    whole = wav_samples(wav.content)
    assert whole.shape[0] > 0 and whole.shape[0] % 1920 == 0
    # chunked streaming through Serve's proxy: several pieces, the same audio
    with c.audio.speech.with_streaming_response.create(
            model="tts-1", voice="alloy", input=TEXT, response_format="pcm",
            extra_body=body) as resp:
        assert resp.headers["x-vocalis-replica"]
        pieces = list(resp.iter_bytes(1920 * 2))
    assert len(pieces) > 1
    assert np.array_equal(np.frombuffer(b"".join(pieces), "<i2"), whole)
    # SSE
    with c.audio.speech.with_streaming_response.create(
            model="gpt-4o-mini-tts", voice="alloy", input=TEXT, response_format="pcm",
            stream_format="sse", extra_body=body) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse_events(resp)
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1)
    assert events[-1]["type"] == "speech.audio.done" and len(events) > 2
    sse_pcm = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert np.array_equal(np.frombuffer(sse_pcm, "<i2"), whole)
    # models, voices, health come from a replica too
    assert "tts-1" in [m.id for m in c.models.list().data]
    status, headers, data = request(app["port"], "GET", "/health")
    assert status == 200 and json.loads(data)["engine"]["max_batch"] == MAX_BATCH
    assert headers["x-vocalis-replica"]

    # a load of concurrent requests spreads over both replicas
    def one(i):
        r = c.audio.speech.with_raw_response.create(
            model="tts-1", voice="alloy", input=TEXT, response_format="pcm",
            extra_body={"seed": i, "max_frames": 10})
        assert r.http_response.status_code == 200 and len(r.content) == 10 * 1920 * 2
        return r.headers["x-vocalis-replica"]

    with ThreadPoolExecutor(8) as pool:
        answered = set(pool.map(one, range(16)))
    # each replica's own metrics (the proxy picks one per request): both served speech
    metrics = replica_metrics(app["port"], n=2)
    assert len(metrics) == 2 and answered <= set(metrics)
    for rid, m in metrics.items():
        assert m['vocalis_speech_requests_total{outcome="completed"}'] > 0, rid
        assert m["vocalis_max_batch"] == MAX_BATCH
        assert info_of(m)["replica"] == rid and info_of(m)["node"] == "127.0.0.1"
    assert len({info_of(m)["pid"] for m in metrics.values()}) == 2


def _upload(port: int, name: str, data: bytes):
    boundary = "vocalisboundary7"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n{name}\r\n'.encode(),
        (f'--{boundary}\r\nContent-Disposition: form-data; name="audio_sample"; '
         f'filename="me.wav"\r\nContent-Type: application/octet-stream\r\n\r\n').encode()
        + data + b"\r\n",
        f"--{boundary}--\r\n".encode(),
    ]
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    return request(port, "POST", "/v1/audio/voices", b"".join(parts), headers)


def test_voice_uploaded_through_one_replica_speaks_on_every_replica(app, ckpt):
    status, _, data = _upload(app["port"], "shared_1", (ckpt / "voice.wav").read_bytes())
    assert status == 201, data
    assert (app["voices"] / "shared_1.safetensors").is_file()
    body = {"model": "tts-1", "input": "Hi.", "voice": "shared_1", "response_format": "pcm",
            "seed": 1, "max_frames": 2}
    spoke: set[str] = set()

    def both_speak():
        status, headers, data = request(app["port"], "POST", "/v1/audio/speech", body)
        assert status == 200, data
        spoke.add(headers["x-vocalis-replica"])
        return len(spoke) == 2

    until(both_speak, 60, "the uploaded voice on both replicas")
    listed = json.loads(request(app["port"], "GET", "/v1/audio/voices")[2])["data"]
    assert "shared_1" in [v["id"] for v in listed]
    status, _, data = request(app["port"], "DELETE", "/v1/audio/voices/shared_1")
    assert status == 200, data
    refused: set[str] = set()

    def both_forget():
        status, headers, data = request(app["port"], "POST", "/v1/audio/speech", body)
        if status == 400 and json.loads(data)["error"]["code"] == "voice_not_found":
            refused.add(headers["x-vocalis-replica"])
        return len(refused) == 2

    until(both_forget, 60, "both replicas to forget the deleted voice")


def test_seeded_request_through_ray_equals_vocalis_serve(app, ckpt, tmp_path):
    """The same request (seed, voice, options), alone, through a replica and through the
    app of ``vocalis serve`` (uvicorn, same factory, same engine settings): the same audio."""
    import uvicorn

    from vocalis.server import create_app

    body = {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "pcm",
            "seed": 1234, "max_frames": 12}
    status, _, via_ray = request(app["port"], "POST", "/v1/audio/speech", body)
    assert status == 200
    tts = vocalis.load(str(ckpt), threads=1, max_batch=MAX_BATCH, max_queue=16)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(
        create_app(tts, voices_dir=tmp_path, default_voice=str(ckpt / "voice.wav"),
                   close_engine=True), log_level="warning", lifespan="on"))
    t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    try:
        until(lambda: server.started, 30, "uvicorn")
        status, _, via_serve = request(port, "POST", "/v1/audio/speech", body)
        assert status == 200
    finally:
        server.should_exit = True
        t.join(30)
    assert len(via_ray) == 12 * 1920 * 2
    assert via_ray == via_serve


def test_client_disconnect_cancels_the_request_on_its_replica(app):
    """A client that goes away mid-stream: Serve's proxy cancels the request on its replica,
    whose engine frees the row (the replica's own metrics say so)."""
    conn = http.client.HTTPConnection("127.0.0.1", app["port"], timeout=60)
    body = {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "pcm",
            "seed": 5, "max_frames": 5000}
    conn.request("POST", "/v1/audio/speech", json.dumps(body),
                 {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    rid = resp.getheader("x-vocalis-replica")
    assert resp.read1(4096)
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()

    def cancelled():
        m = replica_metrics(app["port"], want={rid})[rid]
        return (m['vocalis_speech_requests_total{outcome="cancelled"}'] >= 1
                and m["vocalis_active_rows"] == 0 and m["vocalis_streams_in_flight"] == 0)

    until(cancelled, 60, "the replica to cancel the request", every=0.5)


def test_killed_replica_loses_no_unstarted_request_and_recovers(app):
    """SIGKILL one replica's process under load: every request that had not started
    streaming succeeds (the proxy answers 500 for those that were on the dead replica and
    the openai client retries them: max_retries), a stream that had started is cut, and
    Serve brings the deployment back to 2 replicas."""
    from ray import serve

    before = replica_metrics(app["port"], n=2)
    pids = {rid: int(info_of(m)["pid"]) for rid, m in before.items()}
    # a long stream (the longest a request may ask for) pins work on one replica: the victim
    conn = http.client.HTTPConnection("127.0.0.1", app["port"], timeout=120)
    conn.request("POST", "/v1/audio/speech",
                 json.dumps({"model": "tts-1", "input": TEXT, "voice": "alloy",
                             "response_format": "pcm", "seed": 9, "max_frames": 10000}),
                 {"Content-Type": "application/json"})
    stream = conn.getresponse()
    assert stream.status == 200 and stream.read1(4096)
    victim = stream.getheader("x-vocalis-replica")

    errors_5xx = []

    def hook(response):
        if response.status_code >= 500:
            errors_5xx.append(response.status_code)

    c = client(app["url"], max_retries=5,
               http_client=httpx.Client(event_hooks={"response": [hook]}, timeout=120))

    def one(i):
        r = c.audio.speech.create(model="tts-1", voice="alloy", input=TEXT,
                                  response_format="pcm",
                                  extra_body={"seed": 100 + i, "max_frames": 60})
        return len(r.content)

    pool = ThreadPoolExecutor(8)
    futures = [pool.submit(one, i) for i in range(16)]

    def victim_busy():  # the stream and at least one of the load's requests
        m = replica_metrics(app["port"], want={victim})[victim]
        return m["vocalis_active_rows"] + m["vocalis_queue_depth"] >= 2

    until(victim_busy, 60, "load on the victim replica", every=0.05)
    os.kill(pids[victim], signal.SIGKILL)
    with pytest.raises((http.client.IncompleteRead, ConnectionError, OSError)):
        while stream.read(65536):  # a stream that had started is cut, never completed
            pass
    conn.close()
    sizes = [f.result(timeout=300) for f in futures]
    pool.shutdown()
    assert sizes == [60 * 1920 * 2] * 16  # none lost
    assert errors_5xx, "the kill interrupted no request: nothing was retried"

    def recovered():
        st = serve.status().applications["vocalis"]
        d = st.deployments["vocalis"]
        return (str(st.status.value) == "RUNNING"
                and d.replica_states.get("RUNNING", 0) == 2 and sum(d.replica_states.values()) == 2)

    until(recovered, 180, "the deployment back at 2 replicas", every=0.5)
    after = replica_metrics(app["port"], n=2, timeout=90)
    assert victim not in after and len(after) == 2


def test_second_app_of_the_same_name_is_refused(app, cluster, ckpt):
    proc = subprocess.run([sys.executable, "-m", "vocalis.cli", "serve", "--ray",
                           "--ray-address", cluster["address"], "--port", str(cluster["port"]),
                           "--model", str(ckpt)], env=env(), capture_output=True, timeout=120, check=False)
    lines = [ln for ln in proc.stderr.decode().splitlines() if ln.startswith("error:")]
    assert proc.returncode == 2, proc.stderr.decode()[-2000:]
    assert len(lines) == 1 and "already runs on this cluster" in lines[0]
    assert request(app["port"], "GET", "/health")[0] == 200  # the running app is untouched


def test_cli_stops_the_app_on_sigterm(app):
    from ray import serve

    proc = app["proc"]
    proc.p.send_signal(signal.SIGTERM)
    assert proc.p.wait(90) == 0, proc.log()[-3000:]
    assert "vocalis" not in serve.status().applications


def test_example_config_deploys_with_serve_run(cluster, ckpt, tmp_path):
    from ray.serve.schema import ServeDeploySchema

    config = yaml.safe_load((REPO / "examples" / "ray-serve.yaml").read_text())
    ServeDeploySchema.model_validate(config)  # the file as shipped
    app_cfg = config["applications"][0]
    assert app_cfg["import_path"] == "vocalis.ray.serve:build"
    app_cfg.update(name="vocalis-config", route_prefix="/config")
    app_cfg["args"].update(model=str(ckpt), voices_dir=str(tmp_path / "voices"),
                           voice=str(ckpt / "voice.wav"), max_batch=2, max_queue=4, threads=1)
    dep = app_cfg["deployments"][0]
    dep.update(num_replicas=1, ray_actor_options={"num_cpus": 0.25})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run([sys.executable, "-c", "from ray.serve.scripts import cli; cli()",
                           "run", str(path), "--non-blocking", "--address", cluster["address"]],
                          env=env(), capture_output=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    try:
        until(lambda: request(cluster["port"], "GET", "/config/health")[0] == 200, 120,
              "the config's application")
        status, _, data = request(cluster["port"], "POST", "/config/v1/audio/speech",
                                        {"model": "tts-1", "input": "Hi.", "voice": "alloy",
                                         "response_format": "pcm", "max_frames": 3, "seed": 1})
        assert status == 200 and len(data) == 3 * 1920 * 2
        health = json.loads(request(cluster["port"], "GET", "/config/health")[2])
        assert health["engine"]["max_batch"] == 2 and health["engine"]["max_queue"] == 4
    finally:
        from ray import serve

        serve.delete("vocalis-config")


def test_replica_that_cannot_load_the_model_is_reported(cluster, tmp_path):
    from vocalis.ray import ClusterError
    from vocalis.ray.serve import application, deploy

    t0 = time.monotonic()
    app = application({"model": str(tmp_path / "no-such-model")}, replicas=1, num_cpus=0.1,
                      max_constructor_retry_count=1)
    with pytest.raises(ClusterError) as e:
        deploy(app, name="vocalis-broken", route_prefix="/broken", timeout_s=150)
    assert time.monotonic() - t0 < 150
    msg = str(e.value)
    assert "could not start the replicas" in msg and "ModelNotFound" in msg
    assert "no-such-model" in msg and "\n" not in msg
    from ray import serve

    serve.delete("vocalis-broken")


# --------------------------------------------------------------------------- bad input


def _main(capsys, *argv) -> tuple[int, list[str]]:
    rc = cli.main(list(argv))
    err = capsys.readouterr().err
    return rc, [ln for ln in err.splitlines() if ln.startswith("error:")]


def test_ray_not_installed_is_one_line(monkeypatch, capsys, ckpt, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    for argv in (["serve", "--ray", "--model", str(ckpt)],
                 ["batch", "--ray", "--model", str(ckpt), "--requests", str(tmp_path / "r.json"),
                  "--out-dir", str(tmp_path / "out")]):
        rc, lines = _main(capsys, *argv)
        assert rc == 2 and len(lines) == 1, lines
        assert "pip install 'vocalis[ray]'" in lines[0]


def test_unreachable_cluster_and_misused_options(capsys, ckpt, tmp_path):
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    rc, lines = _main(capsys, "serve", "--ray", "--ray-address", f"127.0.0.1:{port}",
                      "--model", str(ckpt))
    assert rc == 2 and len(lines) == 1 and f"no Ray cluster reachable at 127.0.0.1:{port}" in lines[0]
    assert time.monotonic() - t0 < 30
    reqs = tmp_path / "r.json"
    reqs.write_text(json.dumps([{"text": "Hi."}]))
    rc, lines = _main(capsys, "batch", "--ray", "--ray-address", "nowhere", "--model", str(ckpt),
                      "--requests", str(reqs), "--out-dir", str(tmp_path / "o"))
    assert rc == 2 and "is not HOST:PORT" in lines[0]
    rc, lines = _main(capsys, "serve", "--replicas", "2", "--model", str(ckpt))
    assert rc == 2 and "--replicas: option(s) of --ray" in lines[0]
    rc, lines = _main(capsys, "batch", "--actors", "2", "--model", str(ckpt),
                      "--requests", str(reqs), "--out-dir", str(tmp_path / "o"))
    assert rc == 2 and "--actors: option(s) of --ray" in lines[0]
    rc, lines = _main(capsys, "batch", "--ray", "--mode", "streaming", "--model", str(ckpt),
                      "--requests", str(reqs), "--out-dir", str(tmp_path / "o"))
    assert rc == 2 and "not available with --ray" in lines[0]
    rc, lines = _main(capsys, "serve", "--ray", "--replicas", "2", "--autoscale", "1-3",
                      "--model", str(ckpt))
    assert rc == 2 and "not both" in lines[0]
    rc, lines = _main(capsys, "serve", "--ray", "--autoscale", "3-1", "--model", str(ckpt))
    assert rc == 2 and "--autoscale '3-1'" in lines[0]


def test_auto_address_of_a_gone_cluster_fails_fast(monkeypatch, capsys, ckpt, tmp_path):
    """``auto`` is the address `ray start` recorded on this machine; a record left by a
    cluster that is gone must fail like any address where nothing answers (not Ray's minute
    of retries). The record is what Ray's own lookup returns."""
    import ray._private.services as services

    dead = f"127.0.0.1:{free_port()}"
    monkeypatch.setattr(services, "find_bootstrap_address", lambda temp_dir: dead)
    monkeypatch.setattr(services, "find_gcs_addresses", lambda: frozenset())
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    reqs = tmp_path / "r.json"
    reqs.write_text(json.dumps([{"text": "Hi."}]))
    t0 = time.monotonic()
    for argv in (["serve", "--ray", "--ray-address", "auto", "--model", str(ckpt)],
                 ["batch", "--ray", "--ray-address", "auto", "--model", str(ckpt), "--requests",
                  str(reqs), "--out-dir", str(tmp_path / "o")]):
        rc, lines = _main(capsys, *argv)
        assert rc == 2 and len(lines) == 1 and f"no Ray cluster reachable at {dead}" in lines[0], lines
    assert time.monotonic() - t0 < 30
    assert not (tmp_path / "o").exists()  # checked before the output folder is made
    rc, lines = _main(capsys, "batch", "--ray", "--ray-cpus", "0", "--model", str(ckpt),
                      "--requests", str(reqs), "--out-dir", str(tmp_path / "o"))
    assert rc == 2 and "--ray-cpus must be an integer >= 1" in lines[0]
    assert not (tmp_path / "o").exists()


def test_autoscale_and_deployment_options():
    from vocalis.ray.serve import application, parse_autoscale

    assert parse_autoscale("1-4:8") == {"min_replicas": 1, "max_replicas": 4,
                                        "target_ongoing_requests": 8.0}
    app = application({"model": "m", "max_batch": 8, "max_queue": 32},
                      replicas=None, autoscaling=parse_autoscale("0-2"), num_cpus=2,
                      num_gpus=1)
    d = app._bound_deployment
    assert d.max_ongoing_requests == 8 + 32
    assert d._deployment_config.autoscaling_config.max_replicas == 2
    assert d.ray_actor_options == {"num_cpus": 2, "num_gpus": 1}


# --------------------------------------------------------------------------- Ray Data


def test_requests_files_in_every_format_read_alike(tmp_path):
    """JSON array, JSON Lines and Parquet (options as a struct, a JSON string or a map)
    give the same checked requests and resume keys; bad rows are reported by row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vocalis.ray.data import read_rows

    items = [{"id": "a", "text": "One.", "voice": "alba", "options": {"seed": 1}},
             {"text": "Two.", "options": {"temperature": 0.5, "max_frames": 3}},
             {"text": "Three."}]
    (tmp_path / "r.json").write_text(json.dumps(items))
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(i) for i in items) + "\n\n")
    pq.write_table(pa.Table.from_pylist(items), str(tmp_path / "struct.parquet"))
    pq.write_table(pa.Table.from_pylist([{**i, "options": json.dumps(i.get("options", {}))}
                                         for i in items]), str(tmp_path / "string.parquet"))
    map_type = pa.map_(pa.string(), pa.float64())  # one value type: floats only here
    pq.write_table(pa.table({"text": ["One.", "Two."],
                             "options": pa.array([[("temperature", 0.5)], None], map_type)}),
                   str(tmp_path / "map.parquet"))
    want = [(r.index, r.id, r.request, r.key) for r in read_rows(tmp_path / "r.json", model="m")]
    assert [w[1] for w in want] == ["a", "row-1", "row-2"]
    assert want[0][2] == {"text": "One.", "voice": "alba", "seed": 1, "sampling": {}}
    assert want[1][2]["sampling"] == {"temperature": 0.5, "max_frames": 3}
    for name in ("r.jsonl", "struct.parquet", "string.parquet"):
        got = [(r.index, r.id, r.request, r.key) for r in read_rows(tmp_path / name, model="m")]
        assert got == want, name
    by_map = read_rows(tmp_path / "map.parquet", model="m")  # no id, no voice column
    assert [r.request for r in by_map] == [
        {"text": "One.", "voice": None, "seed": None, "sampling": {"temperature": 0.5}},
        {"text": "Two.", "voice": None, "seed": None, "sampling": {}}]
    assert read_rows(tmp_path / "r.json", model="other")[0].key != want[0][3]

    (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\n[1]\n{"text": "x", "nope": 1}\n'
                                        '{"text": "y", "id": true}\n{"text": "z", "options": 3}\n')
    rows = read_rows(tmp_path / "bad.jsonl")
    assert rows[0].error is None
    assert [r.error.split(":")[0] for r in rows[1:]] == [f"request {i}" for i in range(1, 5)]
    assert "must be an object" in rows[1].error and "unknown field" in rows[2].error
    assert "'id'" in rows[3].error and "'options'" in rows[4].error
    for bad, why in (("[]", "empty"), ("{}", "JSON array"), ("[1", "not valid JSON")):
        (tmp_path / "x.json").write_text(bad)
        with pytest.raises(vocalis.InputError, match=why):
            read_rows(tmp_path / "x.json")


def test_ids_are_unique_and_keep_their_type(tmp_path, ckpt):
    """A row without an id is row-N, which no explicit id can take (7 and "7" are one id;
    row-N only on row N); a bad line or an unusable id gets its row-N too, so the manifest
    holds one record per id; an integer id stays an integer (JSON Lines, and Parquet when
    every id is one)."""
    import pyarrow.parquet as pq

    from vocalis.ray.data import _write_manifest, read_rows, run_batch_ray

    lines = ['{"text": "No id."}',                                   # 0: row-0
             '{"id": 1, "text": "An integer id."}',                 # 1: 1
             '{"id": 0, "text": "Zero, not row 0."}',               # 2: 0
             '{"text": "cut',                                       # 3: not JSON: row-3
             '{"id": "row-3", "text": "Takes row 3 id."}',          # 4: refused: row-4
             '{"id": "1", "text": "The same id as request 1."}',    # 5: refused: row-5
             '{"id": "x", "text": "   "}',                          # 6: bad text, id x taken
             '{"id": "x", "text": "Reuses x."}',                    # 7: refused: row-7
             '{"id": "row-8", "text": "Its own row-N."}',           # 8: row-8
             '{"id": 2.5, "text": "A float id."}']                  # 9: refused: row-9
    reqs = tmp_path / "r.jsonl"
    reqs.write_text("\n".join(lines) + "\n")
    rows = read_rows(reqs, model="m")
    assert [r.id for r in rows] == ["row-0", 1, 0, "row-3", "row-4", "row-5", "x", "row-7",
                                    "row-8", "row-9"]
    assert [r.index for r in rows if r.error is None] == [0, 1, 2, 8]
    assert "request 3: line 4: not valid JSON" in rows[3].error
    assert "'row-3' has the form row-N" in rows[4].error
    assert "id '1' is already used by request 1" in rows[5].error
    assert "'text' is empty" in rows[6].error
    assert "id 'x' is already used by request 6" in rows[7].error
    assert "64-bit integer, got 2.5" in rows[9].error

    records = [{"id": r.id, "index": r.index, "path": None, "seconds": None,
                "sample_rate": None, "status": "failed", "error": r.error, "seed": None,
                "key": r.key} for r in rows]
    _write_manifest(tmp_path, records, "jsonl")
    back = [json.loads(ln) for ln in (tmp_path / "manifest.jsonl").read_text().splitlines()]
    assert [b["id"] for b in back] == [r.id for r in rows]  # 1 and 0 are numbers
    _write_manifest(tmp_path, records, "parquet")  # mixed: a string column
    assert pq.read_table(str(tmp_path / "manifest.parquet")).column("id").to_pylist() == \
        [str(r.id) for r in rows]
    _write_manifest(tmp_path, records[1:3], "parquet")  # every id an integer: int64
    assert pq.read_table(str(tmp_path / "manifest.parquet")).column("id").to_pylist() == [1, 0]

    # a job whose every row is bad runs no actor: its manifest, one record per id
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "cut\n{"id": "row-0", "text": "Not row 0."}\n'
                   '{"id": "x", "text": " "}\n{"id": "x", "text": "Again x."}\n'
                   '{"id": 7, "text": ""}\n')
    summary, rc = run_batch_ray(str(ckpt), bad, tmp_path / "out", progress=False)
    assert rc == 1 and (summary["written"], summary["failed"]) == (0, 5)
    ids = [json.loads(ln)["id"] for ln in (tmp_path / "out" / "manifest.jsonl").read_text()
           .splitlines()]
    assert ids == ["row-0", "row-1", "x", "row-3", 7]


def test_resume_key_follows_file_contents_not_names(tmp_path, ckpt, monkeypatch):
    """A row's resume key depends on its voice file's bytes (and those of an option naming
    a file, Qwen3-TTS ref_audio), not on the file's name or time; each distinct file is
    read once however many rows use it."""
    import shutil

    from vocalis import families
    from vocalis.ray import data

    voice = tmp_path / "voice.wav"
    shutil.copy(ckpt / "voice.wav", voice)
    reqs = tmp_path / "r.json"
    reqs.write_text(json.dumps([{"text": f"Row {i}.", "voice": "voice.wav"} for i in range(50)]))
    opened = []
    real_open = open
    monkeypatch.setattr(data, "open", lambda f, *a, **k: opened.append(f) or real_open(f, *a, **k),
                        raising=False)
    first = [r.key for r in data.read_rows(reqs, model="m")]
    assert len(set(first)) == 50 and opened == [str(voice)]  # 50 rows, one read
    assert [r.key for r in data.read_rows(reqs, model="m")] == first and len(opened) == 1

    os.utime(voice, ns=(1, 1))  # touched, same bytes: same key (read again: its time moved)
    assert [r.key for r in data.read_rows(reqs, model="m")] == first
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.copy(voice, moved / "voice.wav")  # the same recording in another folder
    (moved / "r.json").write_text(reqs.read_text())
    assert [r.key for r in data.read_rows(moved / "r.json", model="m")] == first

    pcm = wav_samples(voice.read_bytes())  # another recording under the same name
    with wave.open(str(voice), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(24000)
        w.writeframes((pcm[::-1] // 2).astype("<i2").tobytes())
    replaced = [r.key for r in data.read_rows(reqs, model="m")]
    assert not set(replaced) & set(first)

    qwen = families.describe("qwen3-tts/0.6b-base")  # ref_audio: a file option, by content
    item = {"text": "Hi.", "options": {"ref_audio": "voice.wav", "ref_text": "Hello.", "seed": 1}}
    reqs.write_text(json.dumps([item]))
    before = data.read_rows(reqs, info=qwen, model="m")[0].key
    shutil.copy(ckpt / "voice.wav", voice)
    assert data.read_rows(reqs, info=qwen, model="m")[0].key != before


def test_model_identity_of_a_checkpoint_follows_its_files(tmp_path, ckpt):
    """A local checkpoint's identity: its files (small ones by content, weights by size and
    time) and the files its config names elsewhere, not its folder's path; a released
    model's: its id and pinned revisions."""
    import shutil

    from vocalis import families
    from vocalis.ray.data import model_identity

    def ident(path, **kw):
        return model_identity(families.describe(str(path)), str(path), **kw)

    ext = tmp_path / "ext"  # the config names these by absolute path
    shutil.copytree(ckpt, ext)
    folder = tmp_path / "ck"
    shutil.copytree(ckpt, folder)  # copy2: times kept
    cfg = folder / "config.yaml"
    cfg.write_text((ckpt / "config.yaml").read_text().replace(str(ckpt), str(ext)))
    (folder / "model.safetensors").unlink()
    first = ident(folder)
    assert first == ident(folder)
    (folder / "out").mkdir()
    (folder / "out" / "0000.wav").write_bytes(b"RIFF")  # an output folder inside: skipped
    assert ident(folder, skip=folder / "out") == first
    assert ident(folder) != first
    shutil.rmtree(folder / "out")
    os.utime(cfg, ns=(1, 1))  # a small file counts by content
    assert ident(folder) == first
    assert ident(cfg) != first  # the config file given, not its folder
    moved = tmp_path / "moved"
    folder.rename(moved)
    assert ident(moved) == first
    weights = ext / "model.safetensors"
    size = weights.stat().st_size
    with open(weights, "r+b") as f:  # new weights, same size, where the config points
        f.seek(size - 4)
        f.write(b"\x01\x02\x03\x04")
    assert ident(moved) != first

    released = model_identity(families.describe("pocket-tts/english"), "pocket-tts/english")
    assert "pocket-tts/english" in released and re.search(r"[0-9a-f]{40}", released)
    assert released != model_identity(families.describe("pocket-tts/french"), "pocket-tts/french")


GOOD = [
    {"text": "Hello there, this is the first request.", "options": {"seed": 1, "max_frames": 6}},
    {"text": "A second one. It has two sentences, so maybe two chunks.",
     "options": {"seed": 2, "max_frames": 4, "max_tokens": 8}},
    {"text": "Third, a little warmer.", "options": {"seed": 3, "max_frames": 5,
                                                     "temperature": 0.5}},
    {"text": "Fourth and last of the good ones.", "options": {"seed": 4, "max_frames": 7}},
]


def test_ray_data_batch_writes_resumes_and_equals_vocalis_batch(cluster, ckpt, tmp_path):
    """The Ray Data job: one WAV per good request and a manifest; bad rows recorded by row
    while the rest run; a second run (the same requests as Parquet, through the CLI against
    the cluster's address) skips the done ones; the files equal those of ``vocalis batch``
    for the same seeds."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vocalis.bench.batch import run_batch
    from vocalis.ray.data import run_batch_ray

    voice = str(ckpt / "voice.wav")
    good = [{**r, "voice": voice} for r in GOOD]
    rows = [{**r, "id": f"req-{i}"} for i, r in enumerate(good)] + [
        {"id": "bad-voice", "text": "Nobody speaks with this voice.", "voice": "missing.wav",
         "options": {"seed": 5, "max_frames": 3}},
        {"id": "bad-option", "text": "An absurd temperature.", "voice": voice,
         "options": {"temperature": -1}},
        {"id": "req-0", "text": "A reused id.", "voice": voice},
    ]
    lines = [json.dumps(r) for r in rows]
    lines.insert(5, '{"text": "not JSON at all"')  # request 5 (line 6)
    jsonl = tmp_path / "requests.jsonl"
    jsonl.write_text("\n".join(lines) + "\n")
    out = tmp_path / "ray_out"

    summary, rc = run_batch_ray(str(ckpt), jsonl, out, actors=1, actor_cpus=0.5, batch_size=4,
                                threads=1, progress=False)
    assert rc == 1
    assert (summary["requests"], summary["written"], summary["skipped"], summary["failed"]) \
        == (8, 4, 0, 4)
    manifest = [json.loads(ln) for ln in (out / "manifest.jsonl").read_text().splitlines()]
    assert [m["index"] for m in manifest] == list(range(8))
    by_index = {m["index"]: m for m in manifest}
    for i in range(4):
        m = by_index[i]
        assert (m["id"], m["status"], m["path"], m["sample_rate"], m["error"]) == \
            (f"req-{i}", "ok", f"{i:04d}.wav", 24000, None)
        assert m["seconds"] == pytest.approx(wav_samples((out / m["path"]).read_bytes()).shape[0]
                                             / 24000)
    errors = {i: by_index[i]["error"] for i in range(4, 8)}
    assert all(by_index[i]["status"] == "failed" and by_index[i]["path"] is None
               for i in range(4, 8))
    assert errors[4].startswith("request 4: ") and "missing.wav" in errors[4]
    assert errors[5].startswith("request 5: line 6: not valid JSON")
    assert errors[6].startswith("request 6: ") and "temperature" in errors[6]
    assert errors[7].startswith("request 7: ") and "already used by request 0" in errors[7]
    assert [by_index[i]["id"] for i in range(4, 8)] == ["bad-voice", "row-5", "bad-option",
                                                        "row-7"]  # one record per id
    assert sorted(p.name for p in out.iterdir()) == \
        ["0000.wav", "0001.wav", "0002.wav", "0003.wav", "manifest.jsonl"]
    mtimes = {p.name: p.stat().st_mtime_ns for p in out.glob("*.wav")}

    # second run: the same requests as Parquet (options as a struct: a field absent from a
    # row is null there), through the CLI against the cluster's address
    table = pa.Table.from_pylist(rows[:5])
    assert pa.types.is_struct(table.schema.field("options").type)
    parquet = tmp_path / "requests.parquet"
    pq.write_table(table, str(parquet))
    proc = subprocess.run([sys.executable, "-m", "vocalis.cli", "batch", "--ray",
                           "--ray-address", cluster["address"], "--model", str(ckpt),
                           "--requests", str(parquet), "--out-dir", str(out), "--batch-size",
                           "4", "--threads", "1", "--actor-cpus", "0.5", "--manifest",
                           "parquet"], env=env(), capture_output=True, timeout=300,
                          check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err[-3000:]  # the bad voice fails again
    assert proc.stdout.decode().strip() == str(out / "manifest.parquet")
    assert "5 request(s): 0 written, 4 skipped (done before), 1 failed" in err
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.wav")} == mtimes
    second = pq.read_table(str(out / "manifest.parquet")).to_pylist()
    assert [(m["id"], m["status"], m["path"]) for m in second] == \
        [(f"req-{i}", "ok", f"{i:04d}.wav") for i in range(4)] + [("bad-voice", "failed", None)]
    assert not (out / "manifest.jsonl").exists()

    # vocalis batch on the good requests (a JSON array: the same indices, the same seeds)
    array = tmp_path / "requests.json"
    array.write_text(json.dumps(good))
    tts = vocalis.load(str(ckpt), threads=1, max_batch=4, max_queue=16)
    try:
        report, batch_rc = run_batch(str(ckpt), array, tmp_path / "batch_out", batch_size=4,
                                     tts=tts)
    finally:
        tts.close()
    assert batch_rc == 0, report["failures"]
    # the engine's batched-equals-alone criterion: rows batched differently (Ray Data hands
    # the actor its own batches) round differently, within it
    for i in range(4):
        ours = wav_samples((out / f"{i:04d}.wav").read_bytes()).astype(np.float64)
        theirs = wav_samples((tmp_path / "batch_out" / f"{i:04d}.wav").read_bytes())
        assert ours.shape == theirs.shape, i
        assert np.abs(ours - theirs).max() <= 0.01 * 32767, i
        cos = ours @ theirs / (np.linalg.norm(ours) * np.linalg.norm(theirs))
        assert cos >= 0.9999, (i, cos)


def test_ray_data_resume_runs_again_when_the_voice_file_is_replaced(cluster, ckpt, tmp_path):
    """The trial's case: voice.wav replaced by another recording under the same name, the
    same command again: every request is made again with the new voice (not "done by an
    earlier run"); run once more unchanged, all are skipped. A manifest of an earlier
    version (keys of the voice's path) is not trusted, and the log says why."""
    import logging
    import shutil

    from vocalis.ray.data import read_rows, run_batch_ray

    voice = tmp_path / "voice.wav"
    shutil.copy(ckpt / "voice.wav", voice)
    reqs = tmp_path / "requests.jsonl"
    reqs.write_text("".join(json.dumps({"text": r["text"], "voice": "voice.wav",
                                        "options": r["options"]}) + "\n" for r in GOOD[:2]))
    out = tmp_path / "out"
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("vocalis.ray")
    logger.addHandler(handler)
    try:
        def run():
            lines.clear()
            summary, rc = run_batch_ray(str(ckpt), reqs, out, actors=1, actor_cpus=0.5,
                                        batch_size=2, threads=1, progress=False)
            assert rc == 0, summary["failures"]
            return summary["written"], summary["skipped"]

        assert run() == (2, 0)
        old = {p.name: p.read_bytes() for p in out.glob("*.wav")}
        pcm = wav_samples(voice.read_bytes())  # another recording, the same name
        with wave.open(str(voice), "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(24000)
            w.writeframes((pcm[::-1] // 2).astype("<i2").tobytes())
        assert run() == (2, 0)
        new = {p.name: p.read_bytes() for p in out.glob("*.wav")}
        assert sorted(new) == sorted(old) and all(new[n] != old[n] for n in new)
        assert run() == (0, 2)

        # a manifest as the previous version wrote it: keys of the voice's path
        manifest = [json.loads(ln) for ln in (out / "manifest.jsonl").read_text().splitlines()]
        legacy = read_rows(reqs, model="x", legacy_model=str(ckpt))
        for rec, row in zip(manifest, legacy):
            rec["key"] = row.legacy_key
        (out / "manifest.jsonl").write_text("".join(json.dumps(m) + "\n" for m in manifest))
        assert run() == (2, 0)
        assert any("2 request(s) done by an earlier vocalis version run again" in ln
                   for ln in lines), lines
    finally:
        logger.removeHandler(handler)


def test_ray_data_actor_that_cannot_load_the_model_fails_the_job_in_one_line(cluster, ckpt,
                                                                            tmp_path):
    """A model that passes the driver's check (its config is there) but whose weights the
    actors cannot read: one ClusterError with the actor's own error, no traceback."""
    import shutil

    from vocalis.ray import ClusterError
    from vocalis.ray.data import PARTIAL_NAME, run_batch_ray

    broken = tmp_path / "broken-model"
    shutil.copytree(ckpt, broken)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    cfg = broken / "config.yaml"  # its paths may be absolute: point them at the copy
    cfg.write_text(cfg.read_text().replace(str(ckpt), str(broken)))
    reqs = tmp_path / "r.json"
    reqs.write_text(json.dumps([{"text": "Hi.", "voice": str(ckpt / "voice.wav")}]))
    with pytest.raises(ClusterError) as e:
        run_batch_ray(str(broken), reqs, tmp_path / "o", actor_cpus=0.5, progress=False)
    msg = str(e.value)
    assert "\n" not in msg and "run again to resume" in msg
    assert "CheckpointError" in msg or "safetensors" in msg, msg
    assert not (tmp_path / "o" / PARTIAL_NAME).exists()  # nothing done: no empty journal


def test_unknown_model_is_refused_before_any_actor_or_replica_starts(capsys, tmp_path):
    reqs = tmp_path / "r.json"
    reqs.write_text(json.dumps([{"text": "Hi."}]))
    t0 = time.monotonic()
    rc, lines = _main(capsys, "batch", "--ray", "--model", "nosuch", "--requests", str(reqs),
                      "--out-dir", str(tmp_path / "o"))
    assert rc == 2 and len(lines) == 1 and "unknown model 'nosuch'" in lines[0], lines
    assert not (tmp_path / "o").exists()
    rc, lines = _main(capsys, "serve", "--ray", "--model", str(tmp_path / "no-model"))
    assert rc == 2 and len(lines) == 1 and "no-model" in lines[0], lines
    assert time.monotonic() - t0 < 20  # no Ray instance was started for them


def test_what_the_cluster_cannot_place_is_refused_up_front(cluster, ckpt, capsys, tmp_path):
    """Ray waits for ever for resources no node has: refused at once, naming what the
    cluster has (the module's instance: 2 CPU, no GPU)."""
    addr = ["--ray-address", cluster["address"]]
    reqs = tmp_path / "r.json"
    reqs.write_text(json.dumps([{"text": "Hi.", "voice": str(ckpt / "voice.wav")}]))
    batch = ["batch", "--ray", *addr, "--model", str(ckpt), "--requests", str(reqs),
             "--out-dir", str(tmp_path / "o")]
    cases = [
        (["serve", "--ray", *addr, "--model", str(ckpt), "--replica-gpus", "1"],
         "--replica-gpus 1: no node has 1 GPU (the cluster has 2 CPU and 0 GPU"),
        ([*batch, "--actor-gpus", "1"], "--actor-gpus 1: no node has 1 GPU"),
        ([*batch, "--actor-cpus", "4"], "--actor-cpus 4: no node has 4 CPU"),
        (["serve", "--ray", *addr, "--model", str(ckpt), "--replicas", "3"],
         "3 replicas of 1 CPU and 0 GPU do not fit"),
        (["serve", "--ray", "--ray-cpus", "0", "--model", str(ckpt)],
         "--ray-cpus must be an integer >= 1"),
    ]
    for argv, expected in cases:
        t0 = time.monotonic()
        rc, lines = _main(capsys, *argv)
        assert rc == 2 and len(lines) == 1 and expected in lines[0], (argv, lines)
        assert time.monotonic() - t0 < 30, argv
    assert not list((tmp_path / "o").glob("*.wav"))


def test_a_running_serve_keeps_its_port_and_says_so(cluster, ckpt, capsys):
    """Serve on a cluster keeps the HTTP options it was started with: another --port is an
    error naming the port it listens on (not a server silently elsewhere)."""
    other = free_port()
    rc, lines = _main(capsys, "serve", "--ray", "--ray-address", cluster["address"],
                      "--port", str(other), "--model", str(ckpt), "--replica-cpus", "0.1")
    assert rc == 2 and len(lines) == 1, lines
    assert f"HTTP proxy on port {cluster['port']}" in lines[0]
    assert f"--port {cluster['port']}" in lines[0]


def test_a_cluster_started_with_ray_start_is_left_alone(ckpt, tmp_path):
    """With `ray start --head` running on this machine: no --ray-address still means a
    private instance (--ray-cpus applies, the job runs); `--ray-address auto` joins that
    cluster, where a taken HTTP port is refused at once instead of Serve's proxy retrying
    for ever."""
    gcs_port = free_port()
    head = subprocess.Popen(
        [sys.executable, "-c", "from ray.scripts.scripts import main; main()", "start",
         "--head", "--block", "--port", str(gcs_port), "--num-cpus", "1",
         "--include-dashboard=false", "--disable-usage-stats"],
        env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        until(lambda: _listening(gcs_port) or head.poll() is not None, 60, "ray start")
        assert head.poll() is None, head.stderr.read().decode()[-2000:]
        reqs = tmp_path / "r.json"
        reqs.write_text(json.dumps([{"text": "Hi.", "voice": str(ckpt / "voice.wav"),
                                     "options": {"seed": 1, "max_frames": 3}}]))
        run_env = {k: v for k, v in env().items() if k != "RAY_ADDRESS"}
        proc = subprocess.run([sys.executable, "-m", "vocalis.cli", "batch", "--ray",
                               "--ray-cpus", "1", "--model", str(ckpt), "--requests", str(reqs),
                               "--out-dir", str(tmp_path / "o"), "--quiet"],
                              env=run_env, capture_output=True, timeout=240, check=False)
        assert proc.returncode == 0, proc.stderr.decode()[-3000:]
        assert (tmp_path / "o" / "0000.wav").exists()
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            t0 = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "vocalis.cli", "serve", "--ray",
                                   "--ray-address", f"127.0.0.1:{gcs_port}", "--port", str(port),
                                   "--model", str(ckpt)],
                                  env=run_env, capture_output=True, timeout=120, check=False)
        lines = [ln for ln in proc.stderr.decode().splitlines() if ln.startswith("error:")]
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr.decode()[-3000:]
        assert f"cannot listen on 127.0.0.1:{port}" in lines[0]
        assert time.monotonic() - t0 < 60
    finally:
        head.terminate()  # --block: stopping it stops the cluster's processes
        head.wait(60)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_sigterm_to_the_process_group_stops_a_local_instance_quickly(ckpt, tmp_path):
    """A service manager or a terminal signals the whole process group, so the local Ray
    instance's own processes die with the CLI: it must not then wait for them to answer."""
    port = free_port()
    run_env = {k: v for k, v in env().items() if k != "RAY_ADDRESS"}
    p = subprocess.Popen([sys.executable, "-m", "vocalis.cli", "serve", "--ray", "--ray-cpus",
                          "1", "--replica-cpus", "0.5", "--port", str(port), "--model", str(ckpt),
                          "--voices-dir", str(tmp_path / "voices")],
                         env=run_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(
        ln.decode("utf-8", "replace") for ln in p.stderr), daemon=True)
    reader.start()
    try:
        until(lambda: "vocalis: serving" in "".join(err) or p.poll() is not None, 180,
              "the local Serve app")
        assert p.poll() is None, "".join(err)[-3000:]
        t0 = time.monotonic()
        os.killpg(p.pid, signal.SIGTERM)
        rc = p.wait(60)
        took = time.monotonic() - t0
        assert rc == 0, "".join(err)[-3000:]
        assert took < 25, f"stopping took {took:.1f} s"
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)


def test_serve_args_take_the_quantize_modes_of_load():
    """A Serve application's ``quantize`` arg takes what ``vocalis.load`` takes (pydantic
    checks it before any replica starts; a bad one names the field)."""
    from vocalis.ray.serve import parse_args

    for good in (False, True, "int8", "int4"):
        assert parse_args({"model": "m", "quantize": good}).quantize == good
    with pytest.raises(vocalis.InputError, match="quantize"):
        parse_args({"model": "m", "quantize": "int3"})


def test_two_models_under_one_served_id_are_refused_before_ray_starts(ckpt, capsys, tmp_path):
    """Two config files in one folder would both be served under the folder's name: the
    driver refuses it in one line naming both, before Ray or a replica starts."""
    folder = tmp_path / "configs"
    folder.mkdir()
    for name in ("a.yaml", "b.yaml"):
        (folder / name).write_text((ckpt / "config.yaml").read_text())
    a, b = str(folder / "a.yaml"), str(folder / "b.yaml")
    t0 = time.monotonic()
    rc, lines = _main(capsys, "serve", "--ray", "--model", a, "--model", b)
    assert rc == 2 and lines == [
        f"error: two models would be served as 'configs': --model {a!r} (its folder's "
        f"name, as for every local checkpoint) and --model {b!r} (its folder's name, as for "
        "every local checkpoint); give one its own --model-name (once per --model, in their "
        "order)"], lines
    assert time.monotonic() - t0 < 20  # no Ray instance was started for it


def test_serve_args_take_load_options_per_model(ckpt, capsys):
    """``serve --ray`` gives each model its family's load options (one dict per model, as
    ``vocalis serve`` passes them) to ``vocalis.load``; a load option or value the model's
    family does not take is refused on the driver, before Ray starts."""
    from vocalis.ray.serve import check_load_options, parse_args

    two = parse_args({"model": [str(ckpt), "qwen3-tts/0.6b-base"],
                      "load_options": [{"dtype": "float32"},
                                       {"dtype": "bfloat16", "full_state_decode": True}]})
    assert two.model_load_options() == [{"dtype": "float32"},
                                        {"dtype": "bfloat16", "full_state_decode": True}]
    check_load_options(two)  # each family takes its own
    assert parse_args({"model": ["a", "b"], "load_options": {"dtype": "float32"}}) \
        .model_load_options() == [{"dtype": "float32"}] * 2
    assert parse_args({"model": "a"}).model_load_options() == [{}]
    with pytest.raises(vocalis.InputError, match="load_options: 1 object"):
        parse_args({"model": ["a", "b"], "load_options": [{}]})
    for bad, why in (({"dtype": "bfloat16"}, "unknown dtype 'bfloat16'"),
                     ({"full_state_decode": True}, "unknown option full_state_decode")):
        with pytest.raises(vocalis.InputError, match=why):
            check_load_options(parse_args({"model": str(ckpt), "load_options": [bad]}))
    t0 = time.monotonic()
    rc, lines = _main(capsys, "serve", "--ray", "--model", str(ckpt), "--dtype", "bfloat16")
    assert rc == 2 and len(lines) == 1 and "unknown dtype 'bfloat16'" in lines[0], lines
    assert time.monotonic() - t0 < 20  # no Ray instance was started for it
