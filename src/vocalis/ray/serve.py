"""The server on Ray Serve: N replicas, each one loaded model and its engine.

Every replica builds the app of ``vocalis serve`` with the same factory
(:func:`vocalis.server.create_app`): the routes, streaming (chunked audio and SSE), voices,
models, health, metrics and errors are those of the single-process server, and Serve's HTTP
proxy passes the ASGI exchange through (streams stream, a client that goes away cancels the
request on its replica, which frees its engine row). A replica adds two things:

- the header ``x-vocalis-replica: ID`` on every response (Serve's replica id), and
- the metric ``vocalis_replica_info{replica, node, pid} 1`` in its ``/metrics``,

so a client can tell which replica answered and read each replica's own counters.

Routing: Serve sends each request to one replica (power of two choices over queue
lengths). A replica takes at most ``max_ongoing_requests`` at once, by default the
engine's ``max_batch + max_queue`` (rows plus its queue), so an engine never refuses
work that Serve routed to it; beyond that, requests wait in Serve.

Custom voices live in one directory that every replica reads and writes
(``voices_dir``): on one machine any folder, on a cluster a shared filesystem mounted at
the same path on every node (NFS, a cloud file share). The stores re-read the directory, so
a voice uploaded through one replica is used by every other.

A replica that dies (its process killed, its node lost) is replaced by Serve's controller.
Requests that were on it fail: the proxy answers 500 for those that had not started their
response, and cuts the streams that had. Serve does not send a request again; clients
retry (the ``openai`` SDKs do it by themselves for a 500: ``max_retries``, 2 by default).

Two ways to run it (docs/batch-and-ray.md, "Scale out on Ray")::

    vocalis serve --ray --replicas 2 --model pocket-tts --voices-dir /shared/voices
    serve run examples/ray-serve.yaml      # import_path: vocalis.ray.serve:build
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

# Ray (an optional extra) at the top: this module is Ray Serve's side, imported only for
# `vocalis serve --ray` and Serve config files
import ray
from prometheus_client.core import GaugeMetricFamily
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from ray import serve

import vocalis
from vocalis import families
from vocalis.errors import InputError
from vocalis.ray import (
    ClusterError,
    absolute,
    check_model,
    check_resources,
    connect,
    last_error_line,
)
from vocalis.server import create_app
from vocalis.server.app import served_ids
from vocalis.server.run import _bind, default_voices_dir

log = logging.getLogger("vocalis.ray")

APP_NAME = "vocalis"
DEPLOYMENT_NAME = "vocalis"
REPLICA_HEADER = "x-vocalis-replica"


class ServeArgs(BaseModel):
    """What a replica loads and serves: the arguments of ``vocalis serve`` that are not
    about Ray (``args:`` of an application in a Serve config file)."""

    model_config = ConfigDict(extra="forbid")

    model: str | list[str] = Field(default_factory=families.default_model_id)
    model_name: str | list[str] | None = None
    voices_dir: str | None = Field(None, description="shared by every replica; default: "
                                                     "$XDG_DATA_HOME/vocalis/voices")
    voice: str | None = None
    api_key: str | None = Field(None, description="default: $VOCALIS_API_KEY on the replica")
    max_batch: int = Field(16, ge=1, le=1024)
    max_queue: int = Field(256, ge=1, le=1 << 20)
    max_input_chars: int = Field(4096, ge=1)
    normalize: bool = True
    device: str = "cpu"
    threads: int | None = Field(None, ge=1)
    tuning: str | None = None
    quantize: bool | Literal["int8", "int4"] = False
    load_options: dict | list[dict] | None = Field(
        None, description="the model family's load options (e.g. dtype): one object for "
                          "every model, or a list of one per model")

    @field_validator("model")
    @classmethod
    def _some_model(cls, v):
        if isinstance(v, list) and not v:
            raise ValueError("give at least one model")
        return v

    def models(self) -> list[str]:
        return [self.model] if isinstance(self.model, str) else list(self.model)

    def names(self) -> list[str | None]:
        if self.model_name is None:
            return [None]
        return [self.model_name] if isinstance(self.model_name, str) else list(self.model_name)

    def model_load_options(self) -> list[dict]:
        """The load options of each model, in the order of :meth:`models`."""
        opts = self.load_options
        if isinstance(opts, list):
            return [dict(o) for o in opts]
        return [dict(opts or {}) for _ in self.models()]


def parse_args(args: dict | ServeArgs | None) -> ServeArgs:
    """``args`` checked. Raises InputError naming the bad field."""
    if isinstance(args, ServeArgs):
        return args
    try:
        parsed = ServeArgs.model_validate(args or {})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "args"
        raise InputError(f"vocalis Serve application args: {where}: {first.get('msg')} "
                         f"({len(e.errors())} problem(s))") from None
    if isinstance(parsed.load_options, list) and len(parsed.load_options) != len(parsed.models()):
        raise InputError(f"vocalis Serve application args: load_options: {len(parsed.load_options)} "
                         f"object(s) for {len(parsed.models())} model(s): give one per model, "
                         "or one object for all")
    return parsed


def check_load_options(args: ServeArgs) -> None:
    """Each model's load options checked by its family (on the driver, before any replica
    starts; the model ids are described from their configs, no weights read).

    Raises:
        ModelNotFound: an unknown model. InputError: a load option its family does not take
        or a bad value (naming the model), two models that would be served under one id."""
    infos = []
    for m, opts in zip(args.models(), args.model_load_options()):
        info = check_model(m)
        info.family.load_options.check(opts, info.name)
        infos.append(info)
    served_ids(infos, args.names())


def engine_options(args: ServeArgs) -> dict:
    """Serve deployment options that follow from the engine: ``max_ongoing_requests`` =
    ``max_batch + max_queue`` (what one engine holds)."""
    return {"max_ongoing_requests": args.max_batch + args.max_queue}


class _ReplicaHeader:
    """Pure ASGI middleware: ``x-vocalis-replica`` on every response."""

    def __init__(self, app, replica: str):
        self.app = app
        self.value = replica.encode("latin-1", "replace")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def tagged(message):
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", ()),
                                      (REPLICA_HEADER.encode(), self.value)]
            await send(message)

        await self.app(scope, receive, tagged)


class _ReplicaInfo:
    """Prometheus collector: ``vocalis_replica_info{replica, node, pid} 1``."""

    def __init__(self, replica: str, node: str, pid: int):
        self.labels = (replica, node, str(pid))

    def collect(self):
        g = GaugeMetricFamily("vocalis_replica_info", "This Ray Serve replica: its id, node "
                              "address and process id.", labels=["replica", "node", "pid"])
        g.add_metric(list(self.labels), 1.0)
        yield g


def _replica_identity() -> tuple[str, str]:
    try:
        replica = serve.get_replica_context().replica_id.unique_id
    except Exception:  # noqa: BLE001 - outside a replica (tests of the class itself)
        replica = f"local-{os.getpid()}"
    try:
        node = ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001
        node = "?"
    return replica, node


@serve.deployment(name=DEPLOYMENT_NAME, max_ongoing_requests=16 + 256,
                  graceful_shutdown_timeout_s=10.0)
@serve.ingress()
class VocalisServer:
    """One replica: loads the model(s) at start, then serves :func:`create_app`'s app."""

    def __init__(self, args: dict):
        self.args = parse_args(args)
        self.replica, self.node = _replica_identity()
        a = self.args
        logging.getLogger("vocalis").setLevel(logging.INFO)
        self.tts = []
        try:
            for m, opts in zip(a.models(), a.model_load_options()):
                kw = {"tuning": a.tuning} if a.tuning is not None else {}
                self.tts.append(vocalis.load(m, device=a.device, threads=a.threads,
                                             max_batch=a.max_batch, max_queue=a.max_queue,
                                             quantize=a.quantize, **kw, **opts))
        except BaseException:
            for t in self.tts:
                t.close()
            raise
        self.voices_dir = os.path.expanduser(a.voices_dir) if a.voices_dir else str(default_voices_dir())
        os.makedirs(self.voices_dir, exist_ok=True)
        log.info("replica %s on %s (pid %d): %s loaded, max batch %d, max queue %d, voices in "
                 "%s", self.replica, self.node, os.getpid(), ", ".join(a.models()), a.max_batch,
                 a.max_queue, self.voices_dir)

    def __serve_build_asgi_app__(self):
        a = self.args
        app = create_app(self.tts, voices_dir=self.voices_dir, default_voice=a.voice,
                         api_key=a.api_key or os.environ.get("VOCALIS_API_KEY") or None,
                         max_input_chars=a.max_input_chars, close_engine=True,
                         model_name=a.names(), normalize=a.normalize)
        app.state.vocalis.metrics.registry.register(
            _ReplicaInfo(self.replica, self.node, os.getpid()))
        app.add_middleware(_ReplicaHeader, replica=self.replica)
        return app

    def check_health(self) -> None:
        """Serve's periodic health check: every engine answers."""
        for t in self.tts:
            t.engine_status()


def build(args: dict) -> Any:
    """The Serve application (``import_path: vocalis.ray.serve:build`` in a config file):
    one deployment whose ``max_ongoing_requests`` follows the engine (``max_batch +
    max_queue``); replicas, autoscaling and resources come from the config's
    ``deployments:`` section (or :func:`application`)."""
    a = parse_args(args)
    return VocalisServer.options(**engine_options(a)).bind(a.model_dump())


def application(args: dict | ServeArgs, *, replicas: int | None = 1,
                autoscaling: dict | None = None, num_cpus: float | None = 1.0,
                num_gpus: float | None = None, shutdown_timeout: float = 10.0,
                **deployment_options) -> Any:
    """The application with its deployment options: ``replicas`` (fixed) or
    ``autoscaling`` (Serve's autoscaling config: ``min_replicas``, ``max_replicas``,
    ``target_ongoing_requests``...), ``num_cpus`` / ``num_gpus`` per replica,
    ``shutdown_timeout`` (seconds in-flight requests get when a replica stops); other
    keywords are Serve deployment options as they are."""
    a = parse_args(args)
    opts: dict = {**engine_options(a), "graceful_shutdown_timeout_s": shutdown_timeout}
    if autoscaling is not None:
        if replicas is not None:
            raise InputError("give either a fixed number of replicas or autoscaling, not both")
        opts["autoscaling_config"] = dict(autoscaling)
    else:
        opts["num_replicas"] = replicas
    actor: dict = {}
    if num_cpus is not None:
        actor["num_cpus"] = num_cpus
    if num_gpus:
        actor["num_gpus"] = num_gpus
    if actor:
        opts["ray_actor_options"] = actor
    opts.update(deployment_options)
    return VocalisServer.options(**opts).bind(a.model_dump())


def parse_autoscale(text: str) -> dict:
    """``MIN-MAX`` (or ``MIN-MAX:TARGET``, ongoing requests per replica to aim at) ->
    Serve's autoscaling config.

    Raises InputError for anything else."""
    spec, _, target = text.partition(":")
    lo, _, hi = spec.partition("-")
    try:
        mn, mx = int(lo), int(hi)
        tgt = float(target) if target else None
    except ValueError:
        mn = mx = -1
        tgt = None
    if mn < 0 or mx < max(1, mn) or (tgt is not None and tgt <= 0):
        raise InputError(f"--autoscale {text!r}: use MIN-MAX replicas (0 <= MIN <= MAX, MAX >= "
                         "1), optionally :TARGET ongoing requests per replica, e.g. 1-4 or 1-4:8")
    out: dict = {"min_replicas": mn, "max_replicas": mx}
    if tgt is not None:
        out["target_ongoing_requests"] = tgt
    return out


def deployment_failure(app_name: str = APP_NAME) -> str | None:
    """Why the application failed to deploy, in one line (the replica's own exception when
    Serve reports one), or None when it did not fail."""
    try:
        st = serve.status().applications.get(app_name)
    except Exception:  # noqa: BLE001
        return None
    if st is None or str(getattr(st.status, "value", st.status)) != "DEPLOY_FAILED":
        return None
    for d in st.deployments.values():
        if str(getattr(d.status, "value", d.status)) in ("DEPLOY_FAILED", "UNHEALTHY") \
                and d.message:
            return last_error_line(d.message)
    return last_error_line(st.message or "deploy failed")


def deploy(app, *, name: str = APP_NAME, route_prefix: str = "/",
           timeout_s: float | None = None) -> None:
    """``serve.run`` without blocking; a deployment that fails (a replica cannot load the
    model: Serve retries its constructor a few times, then gives up) raises ClusterError
    with the replica's error instead of Serve's generic message.

    ``timeout_s``: give up waiting (and delete the application) after this long."""
    result: dict = {}

    def run() -> None:
        try:
            serve.run(app, name=name, route_prefix=route_prefix, blocking=False)
        except BaseException as e:  # noqa: BLE001 - reported below
            result["error"] = e

    worker = threading.Thread(target=run, name="vocalis-serve-run", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        serve.delete(name, _blocking=False)
        raise ClusterError(f"the Serve application {name!r} did not start within "
                           f"{timeout_s:.0f} s (replicas waiting for resources? `ray status` "
                           "shows what the cluster has)")
    err = result.get("error")
    if err is None:
        return
    why = deployment_failure(name)
    if why is None:
        why = " ".join(str(err).split())[:500]
    try:  # no failed application left behind on the cluster
        serve.delete(name, _blocking=False)
    except Exception as e:  # noqa: BLE001 - the error to report is the deployment's
        log.debug("deleting the failed application %r: %s", name, e)
    raise ClusterError(f"Ray Serve could not start the replicas of {name!r}: {why}") from None


def run(models: str | list[str], *, address: str | None = None, host: str = "127.0.0.1",
        port: int = 8000, replicas: int | None = 1, autoscale: str | None = None,
        replica_cpus: float = 1.0, replica_gpus: float = 0.0, ray_cpus: int | None = None,
        voices_dir: str | None = None, voice: str | None = None, api_key: str | None = None,
        max_batch: int = 16, max_queue: int = 256, max_input_chars: int = 4096,
        device: str = "cpu", threads: int | None = None, model_name: list[str] | None = None,
        normalize: bool = True, shutdown_timeout: float = 10.0,
        on_ready: Callable[[str], None] | None = None,
        stop: threading.Event | None = None, quantize: bool | str = False,
        load_options: list[dict] | None = None) -> None:
    """``vocalis serve --ray``: deploy the application on a Ray cluster (``address``; None
    starts a local instance on 127.0.0.1), serve it at ``host:port`` through Serve's HTTP
    proxy until SIGINT/SIGTERM (or ``stop`` is set), then delete it (in-flight requests get
    ``shutdown_timeout`` seconds) and, for a local instance, stop Ray.

    ``load_options``: the family's load options of each model (one dict per model, in the
    order of ``models``; :func:`vocalis.load` keywords such as ``dtype``), checked here by
    each model's family before any replica starts.

    Raises:
        InputError: bad options, an unreachable cluster, a busy local port.
        ClusterError: the replicas could not start (their error, in one line).
    """
    if not 1 <= port <= 65535:
        raise InputError(f"--port must be in 1..65535 with --ray (Serve's proxy listens on a "
                         f"fixed port), got {port}")
    if shutdown_timeout < 0:
        raise InputError(f"--shutdown-timeout must be >= 0, got {shutdown_timeout}")
    autoscaling = parse_autoscale(autoscale) if autoscale is not None else None
    if autoscaling is None and (replicas is None or replicas < 1):
        raise InputError(f"--replicas must be >= 1, got {replicas}")
    if replica_cpus < 0 or replica_gpus < 0:
        raise InputError("--replica-cpus and --replica-gpus must be >= 0")
    model_list = [models] if isinstance(models, str) else list(models)
    args = parse_args({
        "model": [absolute(m) for m in model_list], "model_name": model_name or None,
        "voices_dir": absolute(voices_dir) if voices_dir else None,
        "voice": absolute(voice), "api_key": api_key, "max_batch": max_batch,
        "max_queue": max_queue, "max_input_chars": max_input_chars, "normalize": normalize,
        "device": device, "threads": threads, "quantize": quantize,
        "load_options": list(load_options) if load_options is not None else None})
    check_load_options(args)  # here, not as replicas that fail one after another
    if args.voices_dir is None:
        args.voices_dir = str(default_voices_dir())
    if address in (None, "local") and not os.environ.get("RAY_ADDRESS"):
        _bind(host, port).close()  # a busy port fails now, not inside Serve's proxy
    stop = stop or threading.Event()
    ray, started = connect(address, num_cpus=ray_cpus)
    try:
        with _Signals(stop):  # after ray.init, which installs its own SIGTERM handler
            _run(ray, args, host, port, replicas, autoscaling, replica_cpus, replica_gpus,
                 shutdown_timeout, on_ready, stop, started)
    finally:
        if started:  # stops Serve's controller, proxy and replicas with the instance
            if _local_instance_gone():
                # its GCS is gone: ray.shutdown would wait seconds for it; end what is left
                _kill_local_instance()
            ray.shutdown()


def _start_serve(ray, host: str, port: int, port_checked: bool) -> None:
    """Start Serve (its controller and HTTP proxies) with its proxy at ``host:port``, or
    join the Serve instance that already runs on the cluster, which keeps its own address.
    ``port_checked``: :func:`run` already found the port free here (a local instance).

    Raises:
        InputError: the port is taken on this machine, where a proxy would listen.
        ClusterError: Serve already listens on another port, or its proxy cannot start.
    """
    try:
        # Ray's private accessor, where it is (a moved one: serve.start decides)
        from ray.serve.context import _get_global_client

        client = _get_global_client(raise_if_no_controller_running=False)
    except Exception:  # noqa: BLE001 - a private accessor: then serve.start decides
        client = None
    if client is not None:
        have_host, have_port = _proxy_address(host, port)
        if have_port != port:
            raise ClusterError(f"Ray Serve already runs on this cluster with its HTTP proxy on "
                               f"port {have_port}, and keeps it: run with --port {have_port}, "
                               "or stop that Serve instance first (`serve shutdown`)")
        if have_host != host:
            log.warning("Ray Serve already runs on this cluster, its proxy listening on %s "
                        "(not --host %s)", have_host, host)
        states = _proxy_states(timeout_s=15.0)
        if states and "HEALTHY" not in states:
            raise ClusterError(f"Ray Serve already runs on this cluster, but its HTTP proxy on "
                               f"port {have_port} is {'/'.join(sorted(set(states)))} (a port "
                               "taken on a node?): stop that Serve instance (`serve shutdown`, "
                               "or `ray stop` on a cluster of its own) and try again")
        return
    if not port_checked and _on_a_node(ray):  # a proxy on every node, this one's included
        _bind(host, port).close()
    try:
        serve.start(http_options={"host": host, "port": port})
    except Exception as e:  # noqa: BLE001 - Ray wraps the proxy's error in its own types
        why = last_error_line(str(e))
        # a controller left behind would restart the failing proxy for ever
        _bounded(serve.shutdown, 30, "stopping Serve after its failed start")
        raise ClusterError(f"Ray Serve's HTTP proxy could not start on {host}:{port}: {why} "
                           "(a port taken on a node of the cluster? pick another --port)") from None


def _proxy_states(timeout_s: float) -> list[str]:
    """The states of Serve's HTTP proxies (``HEALTHY``, ``STARTING``, ``UNHEALTHY``...),
    waiting up to ``timeout_s`` for one to become healthy; empty when Serve does not say."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            states = [str(getattr(v, "value", v)) for v in serve.status().proxies.values()]
        except Exception:  # noqa: BLE001 - no answer: let the deployment speak
            return []
        if "HEALTHY" in states or time.monotonic() > deadline:
            return states
        time.sleep(0.5)


def _on_a_node(ray) -> bool:
    """Whether this machine is a node of the connected cluster."""
    try:
        here = ray.util.get_node_ip_address()
        return any(n.get("Alive") and n.get("NodeManagerAddress") == here for n in ray.nodes())
    except Exception:  # noqa: BLE001
        return False


def _run(ray, args: ServeArgs, host, port, replicas, autoscaling, replica_cpus, replica_gpus,
         shutdown_timeout, on_ready, stop: threading.Event, started: bool) -> None:
    check_resources(ray, "replica", autoscaling["min_replicas"] if autoscaling else replicas,
                    replica_cpus, replica_gpus)
    _start_serve(ray, host, port, port_checked=started)
    existing = serve.status().applications.get(APP_NAME)
    if existing is not None:
        raise ClusterError(f"a Serve application named {APP_NAME!r} already runs on this "
                           f"cluster ({getattr(existing.status, 'value', existing.status)}): "
                           "stop it first (Ctrl-C on its `vocalis serve --ray`, or `serve "
                           f"delete {APP_NAME}`), or deploy another with a config file")
    app = application(args, replicas=None if autoscaling else replicas,
                      autoscaling=autoscaling, num_cpus=replica_cpus,
                      num_gpus=replica_gpus or None, shutdown_timeout=shutdown_timeout)
    t0 = time.perf_counter()
    deploy(app)
    host, port = _proxy_address(host, port)
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{port}"
    log.info("Ray Serve: %s at %s (%s), ready in %.1f s; voices in %s", APP_NAME, url,
             f"autoscaling {autoscaling}" if autoscaling else f"{replicas} replica(s)",
             time.perf_counter() - t0, args.voices_dir)
    if on_ready is not None and not stop.is_set():
        on_ready(url)
    while not stop.wait(0.5):
        pass
    log.info("shutting down: in-flight requests get %.0f s to finish", shutdown_timeout)
    _bounded(lambda: serve.delete(APP_NAME), shutdown_timeout + 30,
             f"deleting the Serve application {APP_NAME!r}",
             gone=_local_instance_gone if started else None)


def _local_instance_gone() -> bool:
    """Whether the Ray instance this process started has lost a process (a signal sent to
    the whole process group, as a terminal's Ctrl-C or a service manager's stop does, also
    reaches its GCS server and raylet): then nothing on it answers any more."""
    try:
        node = ray._private.worker._global_node
        return node is not None and not node.remaining_processes_alive()
    except Exception:  # noqa: BLE001 - a private accessor: assume it lives
        return False


def _kill_local_instance() -> None:
    """Kill at once what is left of the Ray instance this process started."""
    try:
        node = ray._private.worker._global_node
        if node is not None:
            node.kill_all_processes(check_alive=False, allow_graceful=False)
    except Exception as e:  # noqa: BLE001 - a private accessor: ray.shutdown still runs
        log.debug("killing the local Ray instance: %s", e)


def _bounded(fn: Callable[[], None], timeout_s: float, what: str,
             gone: Callable[[], bool] | None = None) -> None:
    """``fn()`` in a thread, waiting at most ``timeout_s`` (a cluster whose processes
    were killed under it never answers), or until ``gone()`` says that the cluster is."""
    errors: list[BaseException] = []

    def call() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=call, name="vocalis-ray-teardown", daemon=True)
    t.start()
    deadline = time.monotonic() + timeout_s
    while t.is_alive() and time.monotonic() < deadline:
        t.join(0.2)
        if gone is not None and t.is_alive() and gone():
            log.info("%s: the local Ray instance has stopped (the signal reached it too); "
                     "nothing left to drain", what)
            return
    if t.is_alive():
        log.warning("%s: no answer from the cluster within %.0f s; giving up", what, timeout_s)
    elif errors:
        log.warning("%s failed: %s", what, " ".join(str(errors[0]).split())[:300])


def _proxy_address(host: str, port: int) -> tuple[str, int]:
    """Where Serve's proxies really listen: a cluster whose Serve was started before keeps
    its own HTTP options (Serve warns that ours are ignored)."""
    try:
        # Ray's private accessor, where it is (a moved one: keep our address)
        from ray.serve.context import _get_global_client

        cfg = _get_global_client().http_config
        return str(cfg.host), int(cfg.port)
    except Exception:  # noqa: BLE001 - a private accessor: keep ours when it moves
        return host, port


class _Signals:
    """SIGINT/SIGTERM (in the main thread) set ``event``: the first stops the server once it
    has started (a start-up in progress finishes, then everything is torn down); the second
    interrupts at once (KeyboardInterrupt)."""

    def __init__(self, event: threading.Event):
        self.event = event
        self.previous: dict = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.event.is_set():
            raise KeyboardInterrupt
        self.event.set()
        log.info("stopping (again to interrupt at once)")

    def __exit__(self, *exc):
        for sig, h in self.previous.items():
            signal.signal(sig, h)
