"""The FastAPI application: OpenAI speech API, voices, models, health, metrics, web page.

Routes (``/v1/*`` and ``/metrics`` need ``Authorization: Bearer KEY`` when the server has an
API key; ``/health`` then answers liveness only to a caller without the key)::

    POST   /v1/audio/speech          speech, streamed as it is generated (audio or SSE), or
                                     one whole file with exact lengths (see _whole_file)
    GET    /v1/audio/voices          default, predefined and custom voices
    POST   /v1/audio/voices          multipart name + audio_sample (<= 10 MiB = 10485760 bytes)
    DELETE /v1/audio/voices/{id}     delete a custom voice
    GET    /v1/models[/{id}]         the model (and the OpenAI names it answers to)
    GET    /health                   {"status": "ok", model, engine...}; 503 while shutting down
    GET    /metrics                  Prometheus text format
    GET    /                         the web page (static files under /static, no CDN)
    WS     /v1/audio/speech/stream   text in, audio out (vLLM-Omni's protocol: stream.py)
    WS     /v1/text-to-speech/{voice_id}/stream-input, .../multi-stream-input
                                     ElevenLabs' text-streaming protocol (elevenlabs.py; the
                                     key may also come as xi-api-key)

Every error is OpenAI's envelope (see :mod:`vocalis.server.errors`).

Nothing private leaves the server: a local checkpoint is served under a name (its folder's
name or ``model_name``), and error messages have the model, voices and home folders replaced
by ``<model-dir>``, ``<voices-dir>`` and ``~`` (the server's own log keeps the paths). Nothing a
user sent goes into a header or a log line unencoded.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import os
import re
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from urllib.parse import quote, urlsplit

from fastapi import FastAPI, File, Form, Request, UploadFile, WebSocket
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from vocalis.errors import InputError
from vocalis.options import new_seed
from vocalis.text.normalize import warm as warm_normalization
from vocalis.server import elevenlabs, errors, stream
from vocalis.server.speech import (
    authorized,
    check_input,
    header,
    plan_speech,
    settle,
    submit_async,
)
from vocalis.server.bridge import Piece, SpeechJob
from vocalis.audio.encode import make_encoder
from vocalis.server.errors import APIError
from vocalis.server.metrics import CONTENT_TYPE_LATEST, Metrics
from vocalis.server.schemas import OPENAI_MAX_INPUT_CHARS, SpeechRequest
from vocalis.server.voices import DEFAULT_ID, MAX_UPLOAD_BYTES, VoiceStore, shown, too_large

log = logging.getLogger("vocalis.server")

STATIC_DIR = Path(__file__).parent / "static"
OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
JSON_BODY_LIMIT = 1024 * 1024
UPLOAD_BODY_LIMIT = MAX_UPLOAD_BYTES + 256 * 1024  # multipart overhead and the name field
MODEL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")  # used with fullmatch
MODEL_NAME_GRAMMAR = "1-128 characters from A-Z a-z 0-9 . _ : / -, starting with a letter or digit"
ON_EXIT = "vocalis.on_exit"  # scope key: callbacks the Gate runs when the exchange ends


class BodyTooLarge(StarletteHTTPException):
    def __init__(self, message: str):
        super().__init__(413, message)


def _too_large_message(path: str, size: str, limit: int) -> str:
    if path == "/v1/audio/voices":
        return too_large(f"request body is {size} bytes").message
    return f"request body is {size} bytes; the limit here is {limit} bytes"


class ClientGone(Exception):
    pass


class Hosted:
    """One served model: its loaded TTS, its voice store and the id clients use for it
    (``names``: that id, then its family name when no other hosted model shares it)."""

    def __init__(self, tts, voices: VoiceStore, model_id: str):
        self.tts = tts
        self.voices = voices
        self.model_id = model_id
        self.family = tts.family.name
        self.names = [model_id]
        # the model's info under the id clients use: the server checks requests with it, so
        # that every message names the model so (not a folder or a config's path)
        self.info = dataclasses.replace(tts.info, name=model_id)
        voices.info = self.info

    def describe(self) -> str:
        """What this model accepts, for error messages: its id, family and voices."""
        info = self.tts.info
        if self.voices.voiceless:
            voices = "no voices (describe one in instructions)"
        elif self.voices.predefined:
            shown_voices = ", ".join(self.voices.predefined[:12])
            more = len(self.voices.predefined) - 12
            voices = f"voices {shown_voices}" + (f" and {more} more" if more > 0 else "")
        else:
            voices = "custom voices"
        langs = f"; languages {', '.join(info.languages)}" if info.languages else ""
        return f"{self.model_id!r} ({self.family}: {voices}{langs})"


class ServerState:
    """Everything the routes share: the hosted models (the first is the default, behind
    OpenAI's model names), the API key, the input limit and the metrics."""

    def __init__(self, hosted: list[Hosted], api_key: str | None, max_input_chars: int,
                 close_engine: bool):
        self.models = hosted
        self.default = hosted[0]
        self.api_key = api_key
        self.max_input_chars = max_input_chars
        self.close_engine = close_engine
        families = [h.family for h in hosted]
        taken = {h.model_id for h in hosted}
        for h in hosted:
            if families.count(h.family) == 1 and h.family not in taken:
                h.names.append(h.family)
        self.model_ids = [n for h in hosted for n in h.names]
        self.model_ids += [m for m in OPENAI_MODELS if m not in self.model_ids]
        for i, h in enumerate(hosted[1:], 2):
            if _openai_name(h.model_id):  # an explicit served id wins over the alias (pick)
                first = self.default.model_id
                log.warning("model %d is served as %r, one of OpenAI's model names: requests "
                            "for it go to model %d, not to the first model %r, which loses "
                            "that alias (it keeps OpenAI's others); give model %d another "
                            "--model-name to keep the alias on %r", i, h.model_id, i, first,
                            i, first)
        self.metrics = Metrics(self.engine_status)
        self.admitted: set = set()  # engine requests whose end is not yet counted
        self.shutting_down = False
        # what the shutdown cut off (still running after the graceful-shutdown timeout):
        # counts by kind, and their CancelledErrors (see cut_at_shutdown)
        self.cut_off = {"stream": 0, "request": 0}
        self.cut_off_errors: weakref.WeakSet = weakref.WeakSet()
        # open streaming WebSocket connections (vocalis.server.stream): drained at shutdown
        self.streams: set = set()
        self.started = time.time()
        # a local model named by its config's path is called by its served id instead, then
        # the folders are hidden
        self._named = [p for h in hosted for p in _name_path(h)]
        self._private = _hiding(pl for h in hosted for pl in _private_paths(h.tts, h.voices))
        # served ids with a "/" (acme/tts), kept whole: a folder named like their first part
        # would otherwise be hidden in them
        ids = sorted({n for h in hosted for n in h.names if "/" in n}, key=lambda n: -len(n))
        self._ids = re.compile("(" + "|".join(
            rf"(?<![\w.~/-]){re.escape(n)}(?![\w/-])(?!\.[\w.~-])" for n in ids) + ")") \
            if ids else None

    # the default model, for code that serves one
    @property
    def tts(self):
        return self.default.tts

    @property
    def voices(self) -> VoiceStore:
        return self.default.voices

    @property
    def model_id(self) -> str:
        return self.default.model_id

    def cut_at_shutdown(self, error: BaseException, streaming: bool) -> None:
        """Note an HTTP exchange that the server's shutdown cancelled (uvicorn cancels what
        still runs after its graceful-shutdown timeout; ``vocalis serve`` too at a second
        signal): counted under ``stream`` (its response had started) or ``request``, and
        ``error`` remembered so that ``vocalis serve`` drops uvicorn's traceback of it and
        says it in one line (:mod:`vocalis.server.run`). A cancellation while the server is
        not shutting down is left alone."""
        if self.shutting_down:
            self.cut_off["stream" if streaming else "request"] += 1
            self.cut_off_errors.add(error)

    async def drain_streams(self, timeout: float, stop=lambda: False) -> int:
        """At shutdown, before the web server closes the WebSocket connections: each open
        streaming connection speaks all the text it has received, then closes (1001, with a
        reason; :meth:`vocalis.server.stream.StreamConnection.drain`,
        :meth:`vocalis.server.elevenlabs.Connection.drain`). Waits until they
        have closed, ``timeout`` seconds at most or until ``stop()`` (a second signal).
        Returns how many were still open then."""
        conns = list(self.streams)
        for conn in conns:
            conn.drain()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not stop():
            if not any(c in self.streams for c in conns):
                break
            await asyncio.sleep(0.05)
        return sum(c in self.streams for c in conns)

    def engine_status(self) -> dict:
        """The engines' numbers summed over the hosted models (for the metrics)."""
        total: dict = {}
        for h in self.models:
            for k, v in h.tts.engine_status().items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    total[k] = total.get(k, 0) + v
        return total

    def redact(self, text: str) -> str:
        """``text`` with a local model's config path replaced by its served id
        (:func:`_name_path`), then the model, voices and home folders replaced by labels, in
        any spelling of them (:func:`_private_paths`), outside served ids."""
        for pattern, label in self._named:
            text = pattern.sub(lambda _: label, text)
        # the pieces between served ids (odd indices of the split: the ids themselves)
        pieces = self._ids.split(text) if self._ids is not None else [text]
        for i in range(0, len(pieces), 2):
            for pattern, label in self._private:
                pieces[i] = pattern.sub(lambda _: label, pieces[i])
        return "".join(pieces)

    def pick(self, model: str, param: str = "model") -> Hosted:
        """The hosted model a request names: a served id or alias; OpenAI's model names
        (``tts-1*``, ``gpt-4o-mini-tts*``) mean the default model, unless a model is served
        under that very name: a served id is explicit and wins over the alias, so that a
        client fixed on ``tts-1`` can be pointed at any model (the server warns at start,
        naming the model that lost the alias).

        Raises APIError 404 ``model_not_found`` naming the served models."""
        m = model.strip()
        for h in self.models:
            if m in h.names:
                return h
        if _openai_name(m):
            return self.default
        if len(self.models) == 1:
            hint = (f"use {self.model_id!r} (or any of {', '.join(self.model_ids[1:])})")
        else:
            hint = ("use one of " + "; ".join(h.describe() for h in self.models)
                    + f"; OpenAI's model names mean {self.model_id!r}")
        raise APIError(404, f"model {shown(model)} is not served here; {hint}: GET /v1/models",
                       param=param, code="model_not_found")


def _openai_name(model: str) -> bool:
    """``model`` is one of OpenAI's model names (``tts-1*``, ``gpt-4o-mini-tts*``), which
    mean the default model unless a hosted model is served under it (:meth:`ServerState.pick`)."""
    return model in OPENAI_MODELS or model.startswith(("tts-1", "gpt-4o-mini-tts"))


def served_model_name(tts, model_name: str | None = None) -> str:
    """The model id the server answers to: ``model_name`` if given (checked against
    :data:`MODEL_NAME_RE`), ``pocket-tts/<config>`` for a released model, else the name of the
    folder holding the local (or ``hf://``/URL) config, never a filesystem path.

    Raises:
        InputError: ``model_name`` outside the grammar.
    """
    if model_name is not None:
        if not MODEL_NAME_RE.fullmatch(model_name):
            raise InputError(f"invalid model name {shown(model_name)}: use {MODEL_NAME_GRAMMAR}")
        return model_name
    if tts.served_name:
        return tts.served_name
    ref = str(tts.model_id)
    if "://" in ref:
        path = PurePosixPath(urlsplit(ref).path)
    else:
        path = Path(ref).expanduser().resolve()
    folder = path.parent if path.suffix in (".yaml", ".yml") else path
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.name).strip("-._")[:128]
    return name or "local-model"


def served_ids(models, names) -> list[str]:
    """The id each of ``models`` is served under (:func:`served_model_name`); ``models``:
    loaded models or, before any loads, their :class:`~vocalis.family.ModelInfo`
    (:func:`vocalis.families.describe`: the ids follow from the configs, no weights read);
    ``names``: each one's ``model_name`` (None: its own id), in order; fewer names than
    models leave the rest their own ids.

    Raises:
        InputError: a name outside the grammar, or two models that would be served under
            one id (naming both models and the fix: give one its own ``--model-name``).
    """
    names = list(names) + [None] * (len(models) - len(names))
    ids: list[str] = []
    for i, (m, name) in enumerate(zip(models, names)):
        mid = served_model_name(m, name)
        if mid in ids:
            j = ids.index(mid)
            if name is not None and names[j] is not None:
                both = (f"--model {shown(models[j].model_id, 200)} and --model "
                        f"{shown(m.model_id, 200)}")
                raise InputError(f"two models would be served as {mid!r}: {both} are both given "
                                 "that --model-name; give each its own --model-name (in the "
                                 "order of --model)")

            def source(k: int) -> str:  # where model k's id comes from
                return (f"--model {shown(models[k].model_id, 200)} ("
                        + ("its --model-name" if names[k] is not None
                           else "its released model's id" if models[k].served_name
                           else "its folder's name, as for every local checkpoint") + ")")

            raise InputError(f"two models would be served as {mid!r}: {source(j)} and "
                             f"{source(i)}; give one its own --model-name (once per --model, "
                             "in their order)")
        ids.append(mid)
    return ids


#: characters that continue a path component: a folder's spelling is hidden only where it
#: stands as a whole path (not inside a longer name or path)
_PATH_CHAR = r"[\w.~/-]"
_PATH_END = r"(?![\w~-])(?!\.[\w.~-])"  # the spelling ends there (a "/" may follow)


def _spellings(folder: Path) -> set[str]:
    """Every way a message may spell ``folder`` (as given: relative, with ``~``; absolute;
    resolved through symlinks; under the home folder as ``~/...``; relative to the working
    folder)."""
    out = {str(folder)}
    given = folder.expanduser()
    absolute = given.absolute()
    out |= {str(given), str(absolute)}
    try:
        resolved = absolute.resolve()
    except (OSError, RuntimeError):
        resolved = absolute
    out.add(str(resolved))
    home = Path.home()
    for p in (absolute, resolved):
        try:
            out.add(os.path.relpath(p))
        except ValueError:  # another drive (Windows)
            pass
        if p != home and p.is_relative_to(home) and len(home.parts) > 1:
            out.add(f"~/{p.relative_to(home).as_posix()}")
    return {sp for sp in out if sp and not set(sp) <= {".", "/", "~"}}


def _folder_pattern(spelling: str) -> str:
    """A regex for ``spelling`` of a folder where it stands as a whole path, with any
    ``./`` before it. A bare folder name (``ckpt``, which may also be the model's served
    name or a word) counts as a path only with ``./`` before it or ``/`` after it."""
    esc = re.escape(spelling)
    head = f"(?<!{_PATH_CHAR})"
    if spelling.startswith("/"):  # ("file:///home/..." holds it too)
        return f"(?<![\\w.~-]){esc}{_PATH_END}"
    if len(Path(spelling).parts) > 1 or spelling.startswith("~"):
        return f"{head}(?:\\./)*{esc}{_PATH_END}"
    return f"{head}(?:(?:\\./)+{esc}{_PATH_END}|{esc}(?=/))"


def _private_paths(tts, voices: VoiceStore) -> set[tuple[str, str]]:
    """(spelling, label) pairs to hide in answers (:func:`_hiding`): the model's
    folder (``<model-dir>``) and the voices folder (``<voices-dir>``) in every spelling
    (:func:`_spellings`), then the home folder (``~``)."""
    folders: list[tuple[Path, str]] = []
    info = tts.info
    ref = str(tts.model_id)
    if not tts.released:
        if ref and "://" not in ref:
            p = Path(ref)
            folders.append((p.parent if p.suffix in (".yaml", ".yml") else p, "<model-dir>"))
        if info.local_path is not None:
            folders.append((Path(info.local_path), "<model-dir>"))
        name = Path(str(info.name))
        if name.suffix in (".yaml", ".yml") and len(name.parts) > 1:  # a config's path
            folders.append((name.parent, "<model-dir>"))
    folders.append((voices.root, "<voices-dir>"))
    pairs = {(sp, label) for folder, label in folders for sp in _spellings(folder)}
    home = str(Path.home())
    if len(Path(home).parts) > 1:
        pairs.add((home, "~"))
    return pairs


def _name_path(hosted: Hosted) -> list[tuple[re.Pattern, str]]:
    """(pattern, served id) for a local model whose messages name it by a path (a Pocket TTS
    checkpoint: its ``config.yaml``), in every spelling of that path (:func:`_spellings`),
    where it stands whole (no ``/`` after it): clients know the model by its served id, and
    the path would read ``<model-dir>/config.yaml``. Other names are left as they are."""
    tts = hosted.tts
    name = Path(str(tts.info.name))
    if tts.released or (len(name.parts) < 2 and name.suffix not in (".yaml", ".yml")):
        return []
    end = r"(?![\w~/-])(?!\.[\w.~-])"  # _PATH_END, and no "/" after it
    out = []
    for sp in sorted(_spellings(name), key=lambda sp: (-len(sp), sp)):
        head = r"(?<![\w.~-])" if sp.startswith("/") else rf"(?<!{_PATH_CHAR})(?:\./)*"
        out.append((re.compile(head + re.escape(sp) + end), hosted.model_id))
    return out


def _hiding(pairs) -> list[tuple[re.Pattern, str]]:
    """(pattern, label) for :meth:`ServerState.redact` from (spelling, label) pairs, the
    longest spelling first (a folder inside another, or under home, is hidden whole)."""
    return [(re.compile(_folder_pattern(sp)), label)
            for sp, label in sorted(set(pairs), key=lambda pl: (-len(pl[0]), pl[0]))]


class Gate:
    """Pure ASGI middleware (keeps disconnect detection intact): request-body limits,
    API-key check on ``/v1/*`` and ``/metrics``, HTTP metrics by route template and status,
    and the :data:`ON_EXIT` callbacks a route registers (``fn(failed: bool)``), run once the
    exchange is over whatever happened (``failed``: an exception or a 5xx, not a client
    that went away). An exchange cancelled by the server's shutdown is noted
    (:meth:`ServerState.cut_at_shutdown`) and the cancellation goes on (the client sees a
    cut response)."""

    def __init__(self, app, state: ServerState):
        self.app = app
        self.state = state
        self._plain: set[str] | None = None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        method = scope.get("method", "GET")
        status_box = {"status": 500, "started": False}

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status_box["status"] = message["status"]
                status_box["started"] = True
            await send(message)

        async def reply(resp):
            await resp(scope, receive, send_wrapper)

        failed = True
        try:
            if (path.startswith("/v1/") or path == "/metrics") \
                    and not authorized(scope, self.state.api_key):
                await reply(errors.error_response(
                    401, "missing or wrong API key: send the header Authorization: Bearer KEY",
                    code="invalid_api_key"))
                failed = False
                return
            limit = UPLOAD_BODY_LIMIT if path == "/v1/audio/voices" else JSON_BODY_LIMIT
            length = header(scope, b"content-length")
            if length is not None and length.isdigit() and int(length) > limit:
                await reply(errors.error_response(
                    413, _too_large_message(path, length, limit), code="request_too_large"))
                failed = False
                return
            await self.app(scope, _limited(receive, limit, path), send_wrapper)
            failed = status_box["status"] >= 500
        except (ClientDisconnect, OSError, asyncio.CancelledError) as e:
            failed = False  # the client went away (or the server is stopping): cancelled
            if isinstance(e, asyncio.CancelledError):
                self.state.cut_at_shutdown(e, streaming=status_box["started"])
            raise
        finally:
            for fn in scope.get(ON_EXIT, ()):
                fn(failed)
            self.state.metrics.http.labels(self._template(scope, path), method,
                                           str(status_box["status"])).inc()

    def _template(self, scope, path: str) -> str:
        """The route template of a request for the metrics; a request refused here before
        routing (401, 413) is counted under its route when the path is one (no parameters)."""
        route = getattr(scope.get("route"), "path", None)
        if route:
            return route
        if path.startswith("/static/"):
            return "static"
        if self._plain is None:  # once: the router's paths without parameters
            inner = self.app  # down the middleware stack to the router
            while inner is not None and not hasattr(inner, "routes"):
                inner = getattr(inner, "app", None)
            self._plain = {p for p in (getattr(r, "path", None) for r in getattr(inner, "routes", ()))
                           if p and "{" not in p}
        return path if path in self._plain else "unmatched"


def _limited(receive, limit: int, path: str):
    seen = 0

    async def wrapped():
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(_too_large_message(path, f"over {limit}", limit))
        return message

    return wrapped


def create_app(tts, *, voices_dir: str | Path, default_voice: str | None = None,
               api_key: str | None = None, max_input_chars: int = OPENAI_MAX_INPUT_CHARS,
               close_engine: bool = False, model_name: str | list[str | None] | None = None,
               normalize: bool = True) -> FastAPI:
    """The server for one loaded model (:func:`vocalis.load`) or several.

    Args:
        tts: a loaded model, or a list of them: each request's ``model`` field chooses one;
            the first is the default (OpenAI's model names such as ``tts-1`` mean it).
        voices_dir: where custom voices are stored (created if missing); shared by the
            models, each offering the voices made for it.
        default_voice: the first model's voice behind ``default`` and OpenAI's voice names
            (a predefined name, an audio file or a .safetensors file); default: each model's
            default predefined voice or speaker, else none.
        api_key: require ``Authorization: Bearer <api_key>`` on ``/v1/*`` and ``/metrics``;
            ``/health`` then says only ``{"status": ...}`` to callers without it.
        max_input_chars: longest ``input`` accepted (OpenAI: 4096).
        close_engine: stop the engines when the app shuts down (the CLI server owns them).
        model_name: the id the model is served under (``/v1/models``, ``/health``), or one
            per model (None keeps a model's own); default: ``pocket-tts/<config>`` or
            ``qwen3-tts/<variant>`` for a released model, else the checkpoint folder's name.
            A later model named as one of OpenAI's models (``tts-1``, ``tts-1-hd``...) takes
            that name over from the first model, which keeps OpenAI's other names; a
            warning names the model that lost it.
        normalize: read numbers, dates, money, units and abbreviations as words
            (:mod:`vocalis.text.normalize`) for requests without a ``normalize`` field, in
            the languages it covers (others, and exact models, are left as written); a
            request's ``normalize`` field overrides it.

    Raises:
        InputError: a ``model_name`` outside its grammar (:data:`MODEL_NAME_RE`), names not
            one per model, two models served under the same id.
    """
    models = list(tts) if isinstance(tts, (list, tuple)) else [tts]
    if not models:
        raise InputError("no model to serve")
    names = list(model_name) if isinstance(model_name, (list, tuple)) else [model_name]
    if len(names) > len(models):
        raise InputError(f"{len(names)} model names for {len(models)} model(s): give at most "
                         "one --model-name per --model, in the same order")
    hosted = []
    for i, (t, mid) in enumerate(zip(models, served_ids(models, names))):
        voices = VoiceStore(t, voices_dir, default_voice if i == 0 else None)
        voices.first = i == 0
        hosted.append(Hosted(t, voices, mid))
    state = ServerState(hosted, api_key or None, max_input_chars, close_engine)
    state.normalize = bool(normalize)
    if state.normalize:  # build the rules now, not on the first request
        warm_normalization()
    for h in hosted:
        if len(hosted) > 1:
            h.voices.served_as = h.model_id
        tuning = getattr(h.tts, "tuning", None)
        log.info("serving %s as model %r%s", h.tts.model_id, h.model_id,
                 f"; speed choices: {tuning.describe()}" if tuning is not None else "")

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        loop = asyncio.get_running_loop()
        executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix="vocalis-io")
        loop.set_default_executor(executor)
        yield
        state.shutting_down = True
        for req in list(state.admitted):
            req.cancel()
        if state.close_engine:
            for h in hosted:
                if hasattr(h.tts, "close"):
                    await asyncio.to_thread(h.tts.close)

    app = FastAPI(title="vocalis", version=_version(), lifespan=lifespan,
                  docs_url=None, redoc_url=None,
                  description="OpenAI-compatible streaming text-to-speech (Pocket TTS, "
                              "Qwen3-TTS).")
    app.state.vocalis = state
    errors.install(app, state.redact)
    app.add_middleware(Gate, state=state)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    # ------------------------------------------------------------------ web page, health

    @app.get("/", include_in_schema=False)
    async def index():
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    @app.get("/health")
    async def health(request: Request):
        body = {"status": "shutting_down" if state.shutting_down else "ok"}
        if authorized(request.scope, state.api_key):  # without the key: liveness only
            d = state.default
            body.update(model=d.model_id, sample_rate=d.tts.sample_rate,
                        auth=state.api_key is not None, max_input_chars=state.max_input_chars,
                        engine=d.tts.engine_status(),
                        uptime_s=round(time.time() - state.started, 1),
                        **_capabilities(d), **d.tts.loaded.describe_weights(),
                        models=[{"id": h.model_id, "aliases": h.names[1:],
                                 "sample_rate": h.tts.sample_rate, "engine": h.tts.engine_status(),
                                 **_capabilities(h), **h.tts.loaded.describe_weights()}
                                for h in state.models])
        return JSONResponse(body, status_code=503 if state.shutting_down else 200)

    @app.get("/metrics", include_in_schema=False)
    async def metrics():
        return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    # ------------------------------------------------------------------ models

    def model_obj(mid: str) -> dict:
        h = state.pick(mid)
        return {"id": mid, "object": "model", "created": int(state.started),
                "owned_by": "vocalis", "family": h.family, **h.tts.loaded.describe_weights()}

    @app.get("/v1/models")
    async def list_models():
        return {"object": "list", "data": [model_obj(m) for m in state.model_ids]}

    @app.get("/v1/models/{model_id:path}")
    async def get_model(model_id: str):
        return model_obj(model_id)

    # ------------------------------------------------------------------ voices

    def tagged(h: Hosted) -> list[dict]:
        return [{**v, "model": h.model_id} for v in h.voices.list()]

    @app.get("/v1/audio/voices")
    async def list_voices(model: str | None = None):
        """Every hosted model's voices (each item names its ``model``), or one model's."""
        chosen = state.models if model is None else [state.pick(model)]
        items = [v for h in chosen for v in tagged(h)]
        return {"object": "list", "data": items, "voices": items}

    @app.post("/v1/audio/voices")
    async def create_voice(name: str = Form(...), audio_sample: UploadFile = File(...),
                           consent: str | None = Form(None), ref_text: str | None = Form(None),
                           model: str | None = Form(None)):
        h = state.pick(model) if model is not None else _cloner(state)
        if audio_sample.size is not None and audio_sample.size > MAX_UPLOAD_BYTES:
            raise too_large(f"audio_sample is {audio_sample.size} bytes")
        data = await audio_sample.read(MAX_UPLOAD_BYTES + 1)
        meta = await asyncio.to_thread(h.voices.create, name, data, audio_sample.filename, ref_text)
        return JSONResponse({**meta, "model": h.model_id}, status_code=201)

    @app.delete("/v1/audio/voices/{voice_id}")
    async def delete_voice(voice_id: str, model: str | None = None):
        chosen = [state.pick(model)] if model is not None else state.models
        holder = next((h for h in chosen if h.voices.holds(voice_id)), chosen[0])
        return await asyncio.to_thread(holder.voices.delete, voice_id)

    # ------------------------------------------------------------------ speech

    @app.websocket(stream.PATH)
    async def speech_stream(websocket: WebSocket):
        """Text in as it is written, audio out as it is generated (vLLM-Omni's protocol;
        see :mod:`vocalis.server.stream`)."""
        await stream.serve(websocket, state)

    @app.websocket(elevenlabs.STREAM_PATH)
    async def elevenlabs_stream_input(websocket: WebSocket, voice_id: str):
        """ElevenLabs-compatible text-streaming WebSocket (see
        :mod:`vocalis.server.elevenlabs`)."""
        await elevenlabs.serve(websocket, state, voice_id, multi=False)

    @app.websocket(elevenlabs.MULTI_PATH)
    async def elevenlabs_multi_stream_input(websocket: WebSocket, voice_id: str):
        """ElevenLabs-compatible multi-context WebSocket (see
        :mod:`vocalis.server.elevenlabs`)."""
        await elevenlabs.serve(websocket, state, voice_id, multi=True)

    @app.post("/v1/audio/speech")
    async def speech(body: SpeechRequest, request: Request):
        if state.shutting_down:
            raise APIError(503, "the server is shutting down; retry on another instance",
                           code="unavailable")
        hosted = state.pick(body.model)
        tts = hosted.tts
        text = body.input
        check_input(state, text)
        whole = _whole_file(body, request)
        if body.word_timestamps and not whole and body.stream_format != "sse":
            raise APIError(400, "word_timestamps needs somewhere to put the times: use "
                                "stream_format 'sse' (they ride on the events), \"stream\": "
                                "false (a whole file, times in the x-vocalis-word-timestamps "
                                "header) or the WebSocket /v1/audio/speech/stream",
                           param="word_timestamps", code="invalid_value")
        # requests arriving together reach the engine over a few ms: it waits for those
        # announced here before a burst's first admission, and admits it shortest first
        announced = tts.expect()
        try:
            plan = await asyncio.to_thread(plan_speech, state, hosted, body)
            seed = plan.seed if plan.seed is not None else new_seed()
            req = await submit_async(state, plan, text, seed, announced=announced)
        finally:
            announced.done()
        instructions_note = plan.instructions_note
        _admit(state, request, req)  # from here on, any way out cancels and counts it
        job = SpeechJob(req, make_encoder(body.response_format, tts.sample_rate, whole=whole),
                        asyncio.get_running_loop()).start()
        try:
            first = await _first_piece(job, request)
        except (ClientGone, asyncio.CancelledError) as e:
            settle(state, req, "cancelled")
            if isinstance(e, ClientGone):
                return Response(status_code=499)  # nobody reads it: the client went away
            raise
        if first.kind == "failed":
            settle(state, req, "failed")
            err = errors.from_exception(first.error)
            if err.status >= 500:
                log.error("speech request %s failed", req.id, exc_info=first.error)
            raise err
        headers = {
            "Cache-Control": "no-store",
            "x-vocalis-request-id": str(req.id),
            "x-vocalis-seed": str(seed),
            # user data: percent-encoded
            "x-vocalis-voice": quote(body.voice_id() or DEFAULT_ID, safe=""),
            "x-vocalis-sample-rate": str(tts.sample_rate),
        }
        if req.stats.ttfa_ms is not None:
            headers["x-vocalis-ttfa-ms"] = f"{req.stats.ttfa_ms:.1f}"
        if instructions_note:
            headers["x-vocalis-instructions"] = instructions_note
        sse = body.stream_format == "sse"
        if whole:
            words: list | None = [] if body.word_timestamps else None
            content = await _whole_body(state, job, first, request, tts.sample_rate, words)
            if content is None:
                return Response(status_code=499)  # nobody reads it: the client went away
            if words is not None:
                headers["x-vocalis-word-timestamps"] = json.dumps(
                    [w.as_dict() for w in words], separators=(",", ":"))
            return Response(content, media_type=job.encoder.media_type, headers=headers)
        if sse:
            headers["X-Accel-Buffering"] = "no"
        media = "text/event-stream" if sse else job.encoder.media_type
        return StreamingResponse(_body(state, job, first, sse, tts.sample_rate), media_type=media,
                                 headers=headers)

    @app.websocket("/{path:path}", name=errors.NO_WEBSOCKET_ROUTE)
    async def no_websocket_route(websocket: WebSocket, path: str):
        """A WebSocket to a path that has none: HTTP 404 naming the WebSocket routes (clients
        reported the handshake Starlette refuses by default as a 403)."""
        await websocket.send_denial_response(errors.error_response(
            404, f"no WebSocket route /{path}: the WebSocket routes are {stream.PATH}, "
                 f"{elevenlabs.STREAM_PATH} and {elevenlabs.MULTI_PATH}", code="not_found"))

    return app


def _cloner(state: ServerState) -> Hosted:
    """The model an upload without ``model`` is for: the default model if it clones voices,
    else the first hosted model that does (else the default, whose store says why not)."""
    if state.default.voices.clones:
        return state.default
    return next((h for h in state.models if h.voices.clones), state.default)


def _capabilities(hosted: Hosted) -> dict:
    """What a request to this model may carry (for the web page and clients):
    :meth:`vocalis.family.ModelInfo.capabilities`, with the voices this server offers:
    ``default_voice`` is the voice id that speaks with this server's default voice (a
    predefined voice's name, or ``default`` for one from a file: ``--voice``), None when
    the server has none (``needs_voice`` true: each request names a voice)."""
    caps = hosted.tts.info.capabilities()
    caps["cloning"] = hosted.voices.clones
    caps["default_voice"] = _default_voice_id(hosted.voices)
    return caps


def _default_voice_id(voices: VoiceStore) -> str | None:
    """The id under which ``voices`` lists its default voice (GET /v1/audio/voices): a
    predefined voice by its name, any other (an audio or .safetensors file) as
    ``default``; None without one (or for a model without voices)."""
    source = voices.default_source
    if source is None or voices.voiceless:
        return None
    name = str(source)
    return name if name in voices.predefined else DEFAULT_ID


def _admit(state: ServerState, request: Request, req) -> None:
    """Track an admitted engine request until :func:`settle`; the Gate settles it when the
    HTTP exchange ends if nothing else did (a failure before or while the response is sent,
    a response whose body never started)."""
    state.admitted.add(req)
    request.scope.setdefault(ON_EXIT, []).append(
        lambda failed: settle(state, req, "failed" if failed else "cancelled"))


def _whole_file(body: SpeechRequest, request: Request) -> bool:
    """Whether to answer one complete file (exact lengths, Content-Length) or a stream.

    ``stream`` in the body decides when given. Otherwise the ``openai`` SDKs get a whole
    file from ``audio.speech.create`` (they read the whole body before returning) and a
    stream from ``with_streaming_response`` (they send ``X-Stainless-Raw-Response:
    stream``); any other client gets a stream, as OpenAI's API streams by default. SSE is
    always a stream.
    """
    if body.stream is not None:
        if not body.stream and body.stream_format == "sse":
            raise APIError(400, "stream_format 'sse' is a stream: drop \"stream\": false or use "
                                "stream_format 'audio'", param="stream", code="invalid_value")
        return not body.stream
    if body.stream_format == "sse":
        return False
    headers = request.headers
    return ("x-stainless-lang" in headers
            and headers.get("x-stainless-raw-response", "").lower() != "stream")


async def _whole_body(state: ServerState, job: SpeechJob, first: Piece,
                      request: Request, rate: int, words: list | None = None) -> bytes | None:
    """Every byte of a whole-file response; None when the client went away meanwhile (the
    request is cancelled and counted so). A failure raises its OpenAI error. ``words``:
    receives the word timestamps, if asked for."""

    async def collect() -> bytes:
        return b"".join([data async for data in _body(state, job, first, False, rate,
                                                      words)])

    try:
        return await _unless_gone(collect(), request)
    except ClientGone:
        return None
    except StreamFailed as e:
        raise e.error from None


async def _first_piece(job: SpeechJob, request: Request) -> Piece:
    """The first piece of a request, watching for the client going away meanwhile (a
    queued request waits here)."""
    return await _unless_gone(job.next(), request)


async def _unless_gone(awaitable, request: Request):
    """Await ``awaitable`` while watching the client; raises :class:`ClientGone` (and cancels
    the work) when it goes away first."""
    task = asyncio.ensure_future(awaitable)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.1)
            if done:
                return task.result()
            if await request.is_disconnected():
                raise ClientGone()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def _usage(stats) -> dict:
    inp = sum(len(c.get("token_ids", ())) for c in (stats.chunks or [])) if stats else 0
    out = stats.frames if stats else 0
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


def _sse(obj: dict) -> bytes:
    return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n".encode()


class StreamFailed(RuntimeError):
    """Raised inside a streaming body to abort the connection: the client sees a truncated
    chunked response instead of a silently short file. ``error``: the OpenAI error."""

    def __init__(self, error: APIError):
        super().__init__(error.message)
        self.error = error


def _words(piece: Piece) -> dict:
    """A piece's word timestamps as an SSE event's ``words`` field (nothing without any)."""
    return {"words": [w.as_dict() for w in piece.words]} if piece.words else {}


async def _body(state: ServerState, job: SpeechJob, first: Piece, sse: bool, rate: int,
                words: list | None = None):
    """The response's bytes (SSE events when ``sse``; their ``words`` carry the word
    timestamps that ended by each; ``words``, given for a whole file, collects them)."""
    m = state.metrics
    m.streams.inc()
    outcome = "cancelled"
    piece = first
    try:
        while True:
            if words is not None and piece.words:
                words.extend(piece.words)
            if piece.kind == "audio":
                if piece.samples:
                    m.audio_seconds.inc(piece.samples / rate)
                if piece.data:
                    if sse:
                        yield _sse({"type": "speech.audio.delta",
                                    "audio": base64.b64encode(piece.data).decode("ascii"),
                                    **_words(piece)})
                    else:
                        yield piece.data
                elif sse and piece.words:
                    yield _sse({"type": "speech.audio.delta", "audio": "", **_words(piece)})
            elif piece.kind == "done":
                stats = piece.stats
                if stats is not None and stats.cancelled:
                    break
                outcome = "completed"
                if stats is not None:
                    if stats.ttfa_ms is not None:
                        m.ttfa.observe(stats.ttfa_ms / 1000)
                    if stats.audio_s:
                        m.rtf.observe(stats.rtf)
                if sse:
                    yield _sse({"type": "speech.audio.done", "usage": _usage(stats),
                                **_words(piece)})
                break
            elif piece.kind == "failed":
                outcome = "failed"
                err = errors.from_exception(piece.error)
                log.error("speech request %s failed mid-stream: %s",
                          getattr(job.request, "id", "?"), shown(piece.error, 500))
                if sse:
                    yield _sse({"type": "speech.audio.error",
                                "error": errors.envelope(err.status, state.redact(err.message),
                                                         code=err.code)["error"]})
                    break
                raise StreamFailed(err)
            piece = await job.next()
    finally:
        m.streams.dec()
        settle(state, job.request, outcome)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vocalis")
    except PackageNotFoundError:  # pragma: no cover
        return "0"
