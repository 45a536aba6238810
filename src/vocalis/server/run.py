"""Load a model and serve it with uvicorn (the ``vocalis serve`` command)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import vocalis
from vocalis.errors import InputError
from vocalis.server.app import MODEL_NAME_GRAMMAR, MODEL_NAME_RE, create_app, served_ids
from vocalis.server.voices import shown

log = logging.getLogger("vocalis.server")


def default_voices_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "vocalis" / "voices"


def voices_folder(voices_dir: str | os.PathLike[str] | None) -> Path:
    """The custom voices' folder (``--voices-dir``, else :func:`default_voices_dir`),
    created if missing: checked before any model loads.

    Raises: InputError (a file in its place, no permission...)."""
    vdir = Path(voices_dir).expanduser() if voices_dir else default_voices_dir()
    if vdir.exists() and not vdir.is_dir():
        raise InputError(f"--voices-dir {vdir} is a file, not a folder: give a folder (it is "
                         "created if missing)")
    try:
        vdir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create --voices-dir {vdir}: {e.strerror or e}") from None
    return vdir


def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise InputError(f"cannot resolve host {host!r}: {e.strerror or e}") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as e:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e} (is another "
                         "server running there? pick another --port)") from None
    sock.set_inheritable(True)
    return sock


def _same_model_twice(models: list[str], names: list) -> None:
    """Refuse, before anything loads, two ``--model`` naming the same checkpoint without
    a ``--model-name`` each (other clashes of served ids: :func:`served_ids`)."""
    def key(m: str) -> str:
        p = Path(str(m).strip()).expanduser()
        return "path:" + str(p.resolve()) if p.exists() else "id:" + str(m).strip()

    # a named model's served id is its name, checked with the others' (served_ids)
    keys = [key(m) if i >= len(names) or names[i] is None else None
            for i, m in enumerate(models)]
    for i, k in enumerate(keys):
        if k is not None and keys.count(k) > 1:
            raise InputError(f"--model {shown(models[i], 300)} is given twice: serve it once, "
                             "or give each its own --model-name (in the order of --model)")


def run(model: str | list[str], *, host: str = "127.0.0.1", port: int = 8000,
        voices_dir: str | os.PathLike[str] | None = None, api_key: str | None = None,
        max_batch: int = 16, max_queue: int = 256, device: str = "cpu",
        threads: int | None = None, voice: str | None = None, max_input_chars: int = 4096,
        shutdown_timeout: float = 10.0, quiet: bool = False,
        model_name: str | list[str] | None = None,
        on_ready: Callable[[str, list[str]], None] | None = None, normalize: bool = True,
        quantize: bool | str = False, load_options: list[dict] | None = None,
        warmup: int = 0) -> None:
    """Serve ``model`` (one id or path, or several: each request's ``model`` field picks one,
    the first is the default) until SIGINT/SIGTERM.

    The port is bound before the model loads (a busy port fails fast); ``port=0`` picks a
    free one. ``on_ready(url, served_ids)`` is called once the server accepts connections.
    ``model_name``: the id clients see, one per model in order (default: the released
    model's id, or the checkpoint folder's name for a local model; see
    :func:`vocalis.server.app.served_model_name`). ``normalize``: the requests' default for
    text normalization (see :func:`vocalis.server.app.create_app`). Every model gets its own engine with
    ``max_batch``, ``max_queue`` and ``threads``; they share the machine's cores.
    ``quantize``: as :func:`vocalis.load`, for every model; ``load_options``: the family load
    options of each model, in order (:func:`vocalis.load`). ``warmup``: before accepting
    connections, each model runs two bursts of this many short requests
    (:meth:`vocalis.api.TTS.warm_up`) with its default voice; 0: none.

    Raises:
        InputError: bad limits, a busy port, an invalid ``model_name``, ``warmup`` outside
        0..max_batch or the first model without a default voice to warm up with.
    """
    import uvicorn

    from vocalis.api import check_load

    if max_input_chars < 1:
        raise InputError(f"--max-input-chars must be >= 1, got {max_input_chars}")
    if not 0 <= shutdown_timeout <= 24 * 3600:  # NaN fails both
        raise InputError(f"--shutdown-timeout must be a number of seconds in [0, 86400], got "
                         f"{shutdown_timeout}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup <= max_batch:
        raise InputError(f"--warmup must be a number of rows in 0..{max_batch} (--max-batch), "
                         f"got {warmup!r}")
    models = [model] if isinstance(model, str) else list(model)
    names = [model_name] if isinstance(model_name, str) or model_name is None else list(model_name)
    if not models:
        raise InputError("no model to serve: give --model")
    if len(names) > len(models):
        raise InputError(f"{len(names)} --model-name for {len(models)} --model: give at most "
                         "one name per model, in the same order")
    for name in names:
        if name is not None and not MODEL_NAME_RE.fullmatch(name):
            raise InputError(f"--model-name {shown(name)} is not a valid name: use "
                             f"{MODEL_NAME_GRAMMAR}")
    _same_model_twice(models, names)
    per_model = list(load_options or [])
    per_model += [{}] * (len(models) - len(per_model))
    # every model described (its config: no weights) and its served id known before the
    # first one loads: two models under one id are refused now, not after both loaded
    infos = [check_load(m, device=device, threads=threads, max_batch=max_batch,
                       max_queue=max_queue, quantize=quantize, **opts)[0]
             for m, opts in zip(models, per_model)]
    served_ids(infos, names)
    vdir = voices_folder(voices_dir)
    sock = _bind(host, port)
    loaded = []
    try:
        for m, opts in zip(models, per_model):
            loaded.append(vocalis.load(m, device=device, threads=threads, max_batch=max_batch,
                                       max_queue=max_queue, quantize=quantize, **opts))
        app = create_app(loaded, voices_dir=vdir, default_voice=voice, api_key=api_key,
                         max_input_chars=max_input_chars, close_engine=True,
                         model_name=names, normalize=normalize)
        state = app.state.vocalis
        if warmup:
            _warm_up(state, warmup)
        loaded = []  # the app closes them now
        bound = sock.getsockname()
        shown_host = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        url = f"http://{shown_host}:{bound[1]}"

        class _Server(uvicorn.Server):
            def handle_exit(self, sig, frame):  # first signal: drain; second: force
                state.shutting_down = True
                if not self.should_exit:
                    log.info("shutting down: in-flight streams get %.0f s to finish",
                             shutdown_timeout)
                super().handle_exit(sig, frame)

            async def shutdown(self, sockets=None):
                if state.streams and not self.force_exit:
                    # streaming WebSocket connections first: uvicorn would close them at
                    # once (1012); they speak what they have received within the timeout
                    start = time.monotonic()
                    for server in self.servers:
                        server.close()  # no new connections meanwhile
                    left = await state.drain_streams(shutdown_timeout, lambda: self.force_exit)
                    if left:  # (closed by uvicorn next, 1012)
                        why = ("stopped at once by a second signal" if self.force_exit else
                               f"still speaking after the {shutdown_timeout:g} s shutdown "
                               "timeout")
                        log.warning("%d WebSocket connection%s cut off at shutdown (%s)", left,
                                    "" if left == 1 else "s", why)
                    self.config.timeout_graceful_shutdown = max(
                        0.0, shutdown_timeout - (time.monotonic() - start))
                await super().shutdown(sockets=sockets)
                await _end_cut_off(self, quiet_cuts, shutdown_timeout)
                # uvicorn re-raises the captured signal after a clean shutdown (exit 143):
                # a drained server exits 0 instead.
                if hasattr(self, "_captured_signals"):
                    self._captured_signals.clear()

            async def startup(self, sockets=None):
                await super().startup(sockets=sockets)
                if self.started:
                    served = ", ".join(h.model_id for h in state.models)
                    log.info("web page %s/, API %s/v1, models %s, voices in %s, max batch %d, "
                             "max queue %d", url, url, served, vdir, max_batch, max_queue)
                    if on_ready is not None:
                        on_ready(url, [h.model_id for h in state.models])

        config = uvicorn.Config(app, log_level="warning" if quiet else "info",
                                timeout_graceful_shutdown=shutdown_timeout, access_log=not quiet,
                                lifespan="on")
        quiet_cuts = _QuietCutOffs(state)
        uvicorn_log = logging.getLogger("uvicorn.error")
        uvicorn_log.addFilter(quiet_cuts)
        try:
            _Server(config).run(sockets=[sock])
        finally:
            uvicorn_log.removeFilter(quiet_cuts)
    finally:
        sock.close()
        for t in loaded:  # loaded, but the app was never made
            t.close()


class _QuietCutOffs(logging.Filter):
    """On uvicorn's ``uvicorn.error`` logger: drops its entries for what the shutdown cut
    off (an "Exception in ASGI application" traceback per request cancelled, those the
    app noted with :meth:`~vocalis.server.app.ServerState.cut_at_shutdown`, and its
    "Cancel N running task(s)" line, whose N it keeps): :func:`_end_cut_off` says it in
    one line instead. After a second signal (``forced``), also the traceback of the app's
    lifespan task cancelled as the process ends (uvicorn skips the lifespan's shutdown
    then). Every other entry, any other exception's included, passes."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.cancelled = 0  # tasks uvicorn cancelled at its graceful-shutdown timeout
        self.forced = False

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("Cancel %s running task(s)") and record.args:
            self.cancelled = int(record.args[0])
            return False
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, asyncio.CancelledError) and error in self.state.cut_off_errors:
            return False
        if self.forced and isinstance(record.msg, str) and record.msg.startswith("Traceback"):
            last = record.msg.rstrip().rsplit("\n", 1)[-1]  # lifespan.shutdown.failed's text
            return not last.startswith(("asyncio.exceptions.CancelledError", "CancelledError"))
        return True


async def _end_cut_off(server, quiet: _QuietCutOffs, timeout: float) -> None:
    """After uvicorn's shutdown: let the requests it cancelled end (a second signal skips
    its timeout and cancels nothing, so they are cancelled here), then say in one warning
    how many were cut off, if any (their clients get a cut response)."""
    tasks = list(server.server_state.tasks)
    if server.force_exit:
        quiet.forced = True
        for t in tasks:
            t.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=2)
    cut = quiet.state.cut_off
    streams = cut["stream"]
    requests = max(cut["request"], quiet.cancelled - streams)
    if not streams and not requests:
        return
    parts = [f"{n} {kind}{'' if n == 1 else 's'}"
             for n, kind in ((streams, "stream"), (requests, "request")) if n]
    why = ("stopped at once by a second signal" if server.force_exit else
           f"still running after the {timeout:g} s shutdown timeout")
    log.warning("%s cut off at shutdown (%s)", " and ".join(parts), why)


def _warm_up(state, rows: int) -> None:
    """Warm each served model up (:meth:`vocalis.api.TTS.warm_up`) with its default voice.
    Raises InputError: the first model has none (``--voice`` gives it one); a later model
    without one is skipped with a warning (``--voice`` cannot give it one)."""
    from vocalis.server.voices import DEFAULT_ID

    for i, h in enumerate(state.models):
        if not h.voices.voiceless and h.voices.default_source is None:
            why = f"model {h.model_id} has no default voice to warm up with"
            if i == 0:
                raise InputError(f"--warmup: {why}: give --voice, or drop --warmup")
            log.warning("--warmup: %s (--voice is the first model's): not warmed up", why)
            continue
        seconds = h.tts.warm_up(rows, h.voices.resolve(DEFAULT_ID))
        log.info("warmed up %s: 2 bursts of %d requests in %.2f s", h.model_id, rows, seconds)
