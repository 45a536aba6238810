"""Scale out on Ray: a Ray Serve deployment of the server and a Ray Data batch pipeline.

Needs the optional extra ``pip install 'vocalis[ray]'`` (``ray[serve,data]``).

- :mod:`vocalis.ray.serve`: each replica loads the model(s) with their continuous-batching
  engine and serves the very app of ``vocalis serve`` (:func:`vocalis.server.create_app`)
  behind Serve's HTTP proxy (``vocalis serve --ray``, or ``serve run`` with a config file
  whose ``import_path`` is ``vocalis.ray.serve:build``).
- :mod:`vocalis.ray.data`: ``vocalis batch --ray``, a requests file as a Ray Dataset through
  an actor pool (one engine per actor), one audio file per request and a manifest,
  resumable.

This module only knows how to find Ray and a cluster; it imports Ray when asked to.
"""

from __future__ import annotations

import logging
import os
import socket
from urllib.parse import urlsplit

from vocalis import families
from vocalis.errors import InputError, VocalisError
from vocalis.family import ModelInfo

log = logging.getLogger("vocalis.ray")

#: what to install when Ray is missing
INSTALL_HINT = "pip install 'vocalis[ray]'"
#: Ray reads this at import: when it is 0, a node started here takes 127.0.0.1 as its address
#: (the name speaks of Windows and macOS; it works on Linux too)
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


class ClusterError(VocalisError):
    """A Ray cluster problem the user fixes: no cluster at the address, an application whose
    replicas cannot start (the model is missing on a node, a bad argument). The CLI exits 2."""

    code = "cluster_error"


def require_ray(what: str = "--ray"):
    """Import and return the ``ray`` module.

    Raises:
        InputError: Ray is not installed (the message names :data:`INSTALL_HINT`).
    """
    try:
        import ray  # the optional extra: imported only when a command asks for Ray
    except ImportError as e:
        missing = getattr(e, "name", None) or "ray"
        raise InputError(f"{what} needs Ray, which is not installed here (no module "
                         f"{missing!r}): {INSTALL_HINT}") from None
    return ray


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def check_address(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast (instead of Ray's minute of retries) when nothing listens at a
    ``HOST:PORT`` (or ``ray://HOST:PORT``) cluster address. ``auto`` and ``local`` are left
    to Ray.

    Raises:
        InputError: a malformed address, or no answer at it.
    """
    if address == "local":
        return
    shown = address
    if address == "auto":  # the cluster `ray start` left here: its recorded address
        address = _auto_address()
        shown = f"{address} (what auto finds: the cluster `ray start` recorded here)"
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise InputError(f"--ray-address {address!r} is not HOST:PORT (the head node's GCS "
                         "address, e.g. 10.0.0.5:6379), ray://HOST:PORT or auto")
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise InputError(f"no Ray cluster reachable at {shown} ({why}): start one with "
                         "`ray start --head` on that machine, or check the address "
                         "(`ray status` on the head prints it)") from None


def _auto_address() -> str:
    """What ``auto`` stands for: the address of the cluster ``ray start`` last started on
    this machine (Ray's record in its temp folder, or a running GCS).

    Raises:
        InputError: no cluster was started here.
    """
    try:  # Ray (optional, heavy) only once a cluster is asked for
        from ray._private.services import get_ray_address_from_environment

        found = get_ray_address_from_environment("auto", None)
    except ConnectionError:
        found = None
    except Exception:  # noqa: BLE001 - a private helper: leave "auto" to Ray
        return "auto"
    if not found or found == "auto":
        raise InputError("--ray-address auto: no Ray cluster was started on this machine "
                         "(`ray start --head` starts one), or give its HOST:PORT")
    return found


def _auth_hint() -> str:
    """A hint for a failed connection when this machine holds a Ray auth token (clusters
    that `ray start` starts since Ray 2.5x use token authentication)."""
    if os.environ.get("RAY_AUTH_MODE"):
        return ""
    if os.path.exists(os.path.expanduser("~/.ray/auth_token")) or os.environ.get("RAY_AUTH_TOKEN"):
        return (" (if the cluster uses token authentication, as `ray start` sets up, set "
                "RAY_AUTH_MODE=token with its token in ~/.ray/auth_token or $RAY_AUTH_TOKEN)")
    return ""


def connect(address: str | None = None, *, num_cpus: int | None = None,
            num_gpus: int | None = None):
    """Connect to the Ray cluster at ``address``, or start a private local instance.

    ``address``: ``None`` = ``$RAY_ADDRESS`` if set, else a new local instance whose every
    port listens on 127.0.0.1 only (no dashboard), even when a cluster started with ``ray
    start`` runs on this machine (Ray's own default would join that one: pass ``auto`` for
    it); ``local`` = the same private instance; ``auto`` = the cluster started on this
    machine with ``ray start --head``; ``HOST:PORT`` = that head node. A driver that is
    already connected (``ray.is_initialized()``) is kept as it is. ``num_cpus`` /
    ``num_gpus`` size a private instance (a cluster has its own).

    Returns (ray module, whether this call started a local instance).

    Raises:
        InputError: Ray missing, a bad address, nothing listening there, ``num_cpus`` < 1.
        ClusterError: Ray could not connect or start.
    """
    address = address or os.environ.get("RAY_ADDRESS") or None
    local = address in (None, "local")
    check_ray_cpus(num_cpus)
    if local:
        os.environ.setdefault(_LOOPBACK_ENV, "0")  # read by Ray at import, and by its processes
    else:
        check_address(address)
    ray = require_ray()
    if ray.is_initialized():
        return ray, False
    if local:
        from ray._private import ray_constants  # Ray is imported by now (require_ray)

        if os.environ.get(_LOOPBACK_ENV) == "0":  # imported before we could set it
            ray_constants.ENABLE_RAY_CLUSTER = False
    kwargs: dict = {"include_dashboard": False, "logging_level": logging.WARNING,
                    "log_to_driver": True}
    if local:
        others = _clusters_here()
        if others:
            log.info("a Ray cluster already runs on this machine (%s); starting a private "
                     "instance anyway (--ray-address auto joins that cluster)",
                     ", ".join(sorted(others)))
        # "local": a new instance even when `ray start` left one running here
        kwargs.update(_node_ip_address="127.0.0.1", num_cpus=num_cpus, num_gpus=num_gpus)
        address = "local"
    elif num_cpus is not None or num_gpus is not None:
        log.warning("--ray-cpus is for a local Ray instance; ignored for the cluster at %s",
                    address)
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as e:
        where = "start a local Ray instance" if local else f"connect to the Ray cluster at {address}"
        raise ClusterError(f"could not {where}: {' '.join(str(e).split())[:400]}"
                           + ("" if local else _auth_hint())) from None
    if local:
        log.info("started a local Ray instance on 127.0.0.1 (%s CPU)",
                 ray.cluster_resources().get("CPU", "?"))
    else:
        log.info("connected to the Ray cluster at %s", address)
    return ray, local


def check_ray_cpus(num_cpus: int | None) -> None:
    """Raises InputError unless ``num_cpus`` (``--ray-cpus``) is None or an integer >= 1."""
    if num_cpus is not None and (isinstance(num_cpus, bool) or num_cpus < 1):
        raise InputError(f"--ray-cpus must be an integer >= 1 (CPUs of the local Ray instance), "
                         f"got {num_cpus}")


def _clusters_here() -> set[str]:
    """GCS addresses of Ray clusters running on this machine (Ray's own process scan)."""
    try:  # Ray (optional, heavy) only once a cluster is asked for
        from ray._private.services import find_gcs_addresses

        return set(find_gcs_addresses())
    except Exception:  # noqa: BLE001 - a private helper: only used for a log line
        return set()


def check_resources(ray, what: str, count: int, cpus: float, gpus: float) -> None:
    """Refuse up front what the cluster can never place (Ray would wait for it forever):
    ``count`` actors (replicas, pool actors) of ``cpus`` CPUs and ``gpus`` GPUs each.

    Raises:
        ClusterError: no node has ``cpus``/``gpus`` free in total, or the cluster as a
        whole has fewer than ``count`` times them.
    """
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    if not nodes:
        return
    total_cpu = sum(n.get("CPU", 0.0) for n in nodes)
    total_gpu = sum(n.get("GPU", 0.0) for n in nodes)
    have = f"the cluster has {total_cpu:g} CPU and {total_gpu:g} GPU on {len(nodes)} node(s)"
    flag = "--replica" if what == "replica" else "--actor"
    if gpus > 0 and not any(n.get("GPU", 0.0) >= gpus for n in nodes):
        raise ClusterError(f"{flag}-gpus {gpus:g}: no node has {gpus:g} GPU ({have}); drop "
                           f"{flag}-gpus, or run on a cluster with GPU nodes")
    if not any(n.get("CPU", 0.0) >= cpus for n in nodes):
        raise ClusterError(f"{flag}-cpus {cpus:g}: no node has {cpus:g} CPU ({have}); ask "
                           f"for fewer {flag}-cpus")
    if count * cpus > total_cpu + 1e-9 or count * gpus > total_gpu + 1e-9:
        raise ClusterError(f"{count} {what}s of {cpus:g} CPU and {gpus:g} GPU do not fit: "
                           f"{have}; use fewer {what}s or fewer {flag}-cpus/-gpus each")


def check_model(model: str) -> ModelInfo:
    """Check on the driver, before any actor starts, that ``model`` names a model: a
    released id, or a checkpoint that exists here (paths must be the same on every node).
    Its family describes it from its config; weights are not read. Returns its
    :class:`~vocalis.family.ModelInfo`.

    Raises:
        ModelNotFound: unknown id or missing path (the message names the closest id).
        CheckpointError: a folder that is not a checkpoint.
    """
    return families.describe(model)


def last_error_line(message: str) -> str:
    """The exception line at the end of a traceback that Ray reports (``pkg.mod.Error:
    text`` becomes ``Error: text``), else the message's first line."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    for ln in reversed(lines):
        head, sep, rest = ln.partition(": ")
        if sep and head[:1].isalpha() and head.replace(".", "").replace("_", "").isalnum():
            return f"{head.rsplit('.', 1)[-1]}: {rest}"
    return lines[0] if lines else message


def absolute(path: str | os.PathLike[str] | None) -> str | None:
    """A local path made absolute (Ray's workers do not run in the caller's folder);
    anything else (a model id, ``hf://``, a predefined voice name) unchanged."""
    if path is None:
        return None
    text = os.fspath(path)
    if "://" in text:
        return text
    p = os.path.expanduser(text)
    return os.path.abspath(p) if os.path.exists(p) else text


__all__ = ["INSTALL_HINT", "ClusterError", "absolute", "check_address", "check_model",
           "check_ray_cpus", "check_resources", "connect", "last_error_line",
           "require_ray"]
