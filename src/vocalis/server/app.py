"""The FastAPI application: OpenAI speech API, voices, models, health, metrics, web page.

Routes (``/v1/*`` need ``Authorization: Bearer KEY`` when the server has an API key)::

    POST   /v1/audio/speech          speech, streamed as it is generated (audio or SSE), or
                                     one whole file with exact lengths (see _whole_file)
    GET    /v1/audio/voices          default, predefined and custom voices
    POST   /v1/audio/voices          multipart name + audio_sample (<= 10 MiB): a custom voice
    DELETE /v1/audio/voices/{id}     delete a custom voice
    GET    /v1/models[/{id}]         the model (and the OpenAI names it answers to)
    GET    /health                   {"status": "ok", ...}; 503 while shutting down
    GET    /metrics                  Prometheus text format
    GET    /                         the web page (static files under /static, no CDN)

Every error is OpenAI's envelope (see :mod:`vocalis.server.errors`).
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import logging
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from vocalis.errors import CapacityError
from vocalis.server import errors
from vocalis.server.bridge import Piece, SpeechJob
from vocalis.server.encoders import make_encoder
from vocalis.server.errors import APIError
from vocalis.server.metrics import CONTENT_TYPE_LATEST, Metrics
from vocalis.server.schemas import OPENAI_MAX_INPUT_CHARS, SpeechRequest
from vocalis.server.voices import MAX_UPLOAD_BYTES, VoiceStore

log = logging.getLogger("vocalis.server")

STATIC_DIR = Path(__file__).parent / "static"
OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
JSON_BODY_LIMIT = 1024 * 1024
UPLOAD_BODY_LIMIT = MAX_UPLOAD_BYTES + 256 * 1024  # multipart overhead and the name field
INSTRUCTIONS_NOTE = "ignored: Pocket TTS has no instruction or style control"


class BodyTooLarge(StarletteHTTPException):
    def __init__(self, limit: int):
        super().__init__(413, f"request body larger than {limit} bytes")


class ClientGone(Exception):
    pass


class ServerState:
    def __init__(self, tts, voices: VoiceStore, api_key: str | None, max_input_chars: int,
                 close_engine: bool):
        self.tts = tts
        self.voices = voices
        self.api_key = api_key
        self.max_input_chars = max_input_chars
        self.close_engine = close_engine
        self.metrics = Metrics(tts.engine_status)
        self.jobs: set[SpeechJob] = set()
        self.shutting_down = False
        self.started = time.time()
        released = getattr(tts, "released", False)
        self.model_id = f"pocket-tts/{tts.config_name}" if released else str(tts.model_id)
        self.model_ids = [self.model_id, *(m for m in ("pocket-tts", *OPENAI_MODELS)
                                           if m != self.model_id)]

    def check_model(self, model: str) -> None:
        m = model.strip()
        if m in self.model_ids or m.startswith(("tts-1", "gpt-4o-mini-tts")):
            return
        raise APIError(404, f"model {model!r} is not served here; use {self.model_id!r} (or "
                            f"any of {', '.join(self.model_ids[1:])}): GET /v1/models",
                       param="model", code="model_not_found")


class Gate:
    """Pure ASGI middleware (keeps disconnect detection intact): request-body limits,
    API-key check on ``/v1/*``, and HTTP metrics by route template and status."""

    def __init__(self, app, state: ServerState):
        self.app = app
        self.state = state

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        method = scope.get("method", "GET")
        status_box = {"status": 500}

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status_box["status"] = message["status"]
            await send(message)

        async def reply(resp):
            await resp(scope, receive, send_wrapper)

        try:
            if path.startswith("/v1/") and self.state.api_key is not None \
                    and not self._authorized(scope):
                await reply(errors.error_response(
                    401, "missing or wrong API key: send the header Authorization: Bearer KEY",
                    code="invalid_api_key"))
                return
            limit = UPLOAD_BODY_LIMIT if path == "/v1/audio/voices" else JSON_BODY_LIMIT
            length = _header(scope, b"content-length")
            if length is not None and length.isdigit() and int(length) > limit:
                await reply(errors.error_response(
                    413, f"request body is {length} bytes; the limit here is {limit}",
                    code="request_too_large"))
                return
            await self.app(scope, _limited(receive, limit), send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or ("static" if path.startswith("/static/")
                                                        else "unmatched")
            self.state.metrics.http.labels(template, method, str(status_box["status"])).inc()

    def _authorized(self, scope) -> bool:
        key = self.state.api_key.encode()
        auth = _header(scope, b"authorization") or ""
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else _header(scope, b"x-api-key")
        return bool(token) and hmac.compare_digest(token.encode(), key)


def _header(scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return v.decode("latin-1")
    return None


def _limited(receive, limit: int):
    seen = 0

    async def wrapped():
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(limit)
        return message

    return wrapped


def create_app(tts, *, voices_dir: str | Path, default_voice: str | None = None,
               api_key: str | None = None, max_input_chars: int = OPENAI_MAX_INPUT_CHARS,
               close_engine: bool = False) -> FastAPI:
    """The server for one loaded model (:func:`vocalis.load`).

    Args:
        voices_dir: where custom voices are stored (created if missing).
        default_voice: the voice behind ``default`` and OpenAI's voice names (a predefined
            name, an audio file or a .safetensors file); default: the model's default
            predefined voice (released models), else none.
        api_key: require ``Authorization: Bearer <api_key>`` on ``/v1/*``.
        max_input_chars: longest ``input`` accepted (OpenAI: 4096).
        close_engine: stop the engine when the app shuts down (the CLI server owns it).
    """
    voices = VoiceStore(tts, voices_dir, default_voice)
    state = ServerState(tts, voices, api_key or None, max_input_chars, close_engine)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        loop = asyncio.get_running_loop()
        executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix="vocalis-io")
        loop.set_default_executor(executor)
        yield
        state.shutting_down = True
        for job in list(state.jobs):
            job.cancel()
        if state.close_engine and hasattr(tts, "close"):
            await asyncio.to_thread(tts.close)

    app = FastAPI(title="vocalis", version=_version(), lifespan=lifespan,
                  docs_url=None, redoc_url=None,
                  description="OpenAI-compatible streaming text-to-speech (Pocket TTS).")
    app.state.vocalis = state
    errors.install(app)
    app.add_middleware(Gate, state=state)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    # ------------------------------------------------------------------ web page, health

    @app.get("/", include_in_schema=False)
    async def index():
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    @app.get("/health")
    async def health():
        body = {"status": "shutting_down" if state.shutting_down else "ok",
                "model": state.model_id, "sample_rate": tts.sample_rate,
                "auth": state.api_key is not None, "max_input_chars": state.max_input_chars,
                "engine": tts.engine_status(), "uptime_s": round(time.time() - state.started, 1)}
        return JSONResponse(body, status_code=503 if state.shutting_down else 200)

    @app.get("/metrics", include_in_schema=False)
    async def metrics():
        return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    # ------------------------------------------------------------------ models

    def model_obj(mid: str) -> dict:
        return {"id": mid, "object": "model", "created": int(state.started),
                "owned_by": "vocalis"}

    @app.get("/v1/models")
    async def list_models():
        return {"object": "list", "data": [model_obj(m) for m in state.model_ids]}

    @app.get("/v1/models/{model_id:path}")
    async def get_model(model_id: str):
        state.check_model(model_id)
        return model_obj(model_id)

    # ------------------------------------------------------------------ voices

    @app.get("/v1/audio/voices")
    async def list_voices():
        items = voices.list()
        return {"object": "list", "data": items, "voices": items}

    @app.post("/v1/audio/voices")
    async def create_voice(name: str = Form(...), audio_sample: UploadFile = File(...),
                           consent: str | None = Form(None)):
        if audio_sample.size is not None and audio_sample.size > MAX_UPLOAD_BYTES:
            raise APIError(413, f"audio_sample is {audio_sample.size} bytes; the limit is "
                                f"{MAX_UPLOAD_BYTES} (10 MiB)", param="audio_sample",
                           code="file_too_large")
        data = await audio_sample.read(MAX_UPLOAD_BYTES + 1)
        meta = await asyncio.to_thread(voices.create, name, data, audio_sample.filename)
        return JSONResponse(meta, status_code=201)

    @app.delete("/v1/audio/voices/{voice_id}")
    async def delete_voice(voice_id: str):
        return await asyncio.to_thread(voices.delete, voice_id)

    # ------------------------------------------------------------------ speech

    @app.post("/v1/audio/speech")
    async def speech(body: SpeechRequest, request: Request):
        if state.shutting_down:
            raise APIError(503, "the server is shutting down; retry on another instance",
                           code="unavailable")
        state.check_model(body.model)
        text = body.input
        if not text.strip():
            raise APIError(400, "input is empty: give some words to speak", param="input",
                           code="empty_input")
        if len(text) > state.max_input_chars:
            raise APIError(400, f"input is {len(text)} characters; the limit is "
                                f"{state.max_input_chars} (start the server with "
                                "--max-input-chars to change it)", param="input",
                           code="string_above_max_length")
        whole = _whole_file(body, request)
        voice = await asyncio.to_thread(voices.resolve, body.voice_id())
        seed = body.seed if body.seed is not None else secrets.randbits(31)
        try:
            req = await asyncio.to_thread(tts.submit, text, voice, seed, body.speed,
                                          **body.sampling())
        except CapacityError as e:
            state.metrics.speech.labels("rejected").inc()
            raise APIError(429, str(e), code=e.code) from None
        job = SpeechJob(req, make_encoder(body.response_format, tts.sample_rate, whole=whole),
                        asyncio.get_running_loop()).start()
        state.jobs.add(job)
        try:
            first = await _first_piece(job, request)
        except (ClientGone, asyncio.CancelledError) as e:
            job.cancel()
            state.jobs.discard(job)
            state.metrics.speech.labels("cancelled").inc()
            if isinstance(e, ClientGone):
                return Response(status_code=499)  # nobody reads it: the client went away
            raise
        if first.kind == "failed":
            state.jobs.discard(job)
            state.metrics.speech.labels("failed").inc()
            err = errors.from_exception(first.error)
            if err.status >= 500:
                log.error("speech request %s failed", req.id, exc_info=first.error)
            raise err
        headers = {
            "Cache-Control": "no-store",
            "x-vocalis-request-id": str(req.id),
            "x-vocalis-seed": str(seed),
            "x-vocalis-voice": body.voice_id(),
            "x-vocalis-sample-rate": str(tts.sample_rate),
        }
        if req.stats.ttfa_ms is not None:
            headers["x-vocalis-ttfa-ms"] = f"{req.stats.ttfa_ms:.1f}"
        if body.instructions:
            headers["x-vocalis-instructions"] = INSTRUCTIONS_NOTE
        sse = body.stream_format == "sse"
        if whole:
            content = await _whole_body(state, job, first, request)
            if content is None:
                return Response(status_code=499)  # nobody reads it: the client went away
            return Response(content, media_type=job.encoder.media_type, headers=headers)
        if sse:
            headers["X-Accel-Buffering"] = "no"
        media = "text/event-stream" if sse else job.encoder.media_type
        return StreamingResponse(_body(state, job, first, sse), media_type=media,
                                 headers=headers)

    return app


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
                      request: Request) -> bytes | None:
    """Every byte of a whole-file response; None when the client went away meanwhile (the
    request is cancelled and counted so). A failure raises its OpenAI error."""

    async def collect() -> bytes:
        return b"".join([data async for data in _body(state, job, first, False)])

    task = asyncio.ensure_future(collect())
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.1)
            if done:
                return task.result()
            if await request.is_disconnected():
                return None
    except StreamFailed as e:
        raise e.error from None
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _first_piece(job: SpeechJob, request: Request) -> Piece:
    """The first piece of a request, watching for the client going away meanwhile (a
    queued request waits here)."""
    task = asyncio.ensure_future(job.next())
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


async def _body(state: ServerState, job: SpeechJob, first: Piece, sse: bool):
    m = state.metrics
    rate = state.tts.sample_rate
    m.streams.inc()
    outcome = "cancelled"
    piece = first
    try:
        while True:
            if piece.kind == "audio":
                if piece.samples:
                    m.audio_seconds.inc(piece.samples / rate)
                if piece.data:
                    if sse:
                        yield _sse({"type": "speech.audio.delta",
                                    "audio": base64.b64encode(piece.data).decode("ascii")})
                    else:
                        yield piece.data
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
                    yield _sse({"type": "speech.audio.done", "usage": _usage(stats)})
                break
            elif piece.kind == "failed":
                outcome = "failed"
                err = errors.from_exception(piece.error)
                log.error("speech request %s failed mid-stream: %s",
                          getattr(job.request, "id", "?"), piece.error)
                if sse:
                    yield _sse({"type": "speech.audio.error",
                                "error": errors.envelope(err.status, err.message,
                                                         code=err.code)["error"]})
                    break
                raise StreamFailed(err)
            piece = await job.next()
    finally:
        if not job.finished:
            job.cancel()
        state.jobs.discard(job)
        m.streams.dec()
        m.speech.labels(outcome).inc()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vocalis")
    except PackageNotFoundError:  # pragma: no cover
        return "0"
