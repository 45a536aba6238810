"""ElevenLabs-compatible text-streaming WebSockets, so that clients of ElevenLabs' realtime
text-to-speech (its Python SDK's ``convert_realtime``, the LiveKit and Pipecat ElevenLabs
plugins) can be pointed at a vocalis server.

Two routes, ``{voice_id}`` naming a vocalis voice (as ``voice`` on ``POST /v1/audio/speech``):

``/v1/text-to-speech/{voice_id}/stream-input``: one text stream per connection.
``/v1/text-to-speech/{voice_id}/multi-stream-input``: several independent streams
("contexts", named by the client) on one connection.

Query parameters: ``model_id`` (a served model's id picks it; anything else, ElevenLabs'
own ids such as ``eleven_flash_v2_5`` included, means the server's default model),
``output_format`` (``pcm_<rate>``: raw 16-bit little-endian mono at one of
:data:`PCM_RATES`; ``mp3_<rate>_<kbps>`` at one of :data:`MP3_RATES`, the bit rate being
the encoder's own), ``inactivity_timeout`` (seconds, 1-180, default 20, as ElevenLabs':
a connection that sends no message for that long while nothing is being generated or
sent gets ``{"error": "input_timeout_exceeded", "code": 1008}`` and is closed with 1008;
a single-space text keeps it open) and the vocalis extension ``seed``.
``sync_alignment``, ``auto_mode``, ``language_code``, ``enable_logging``,
``enable_ssml_parsing``, ``apply_text_normalization`` and the rest are accepted and
ignored.

Client messages (JSON text frames):

* the first one opens the connection: ``text`` is a single space, with optional
  ``voice_settings`` (its ``speed`` is used; the others are ignored), ``generation_config``
  (ignored: a sentence is spoken as soon as it is complete), and the API key as
  ``xi_api_key`` / ``xi-api-key`` (or ``authorization: Bearer KEY``) when the handshake
  did not carry it; vocalis also reads ``seed`` here.
* ``{"text": "some words "}`` adds text; ``"flush": true`` speaks what is buffered even
  without a sentence end; ``try_trigger_generation`` is ignored.
* stream-input: ``{"text": ""}`` ends the input: the rest is spoken, then the server sends
  ``{"isFinal": true}`` and closes the socket.
* multi-stream-input: every message may carry ``context_id`` (absent: the context opened
  by the first message, else ``"default"``); text for a new id opens a context, with the
  message's own ``seed`` and ``voice_settings.speed`` where it gives them (ElevenLabs'
  context initialisation; what it leaves out is the connection's; a bad value refuses that
  message, naming the context, and the context is not opened);
  ``{"context_id": ..., "close_context": true}`` closes one: text flushed before it is
  still spoken (as ElevenLabs does: clients flush, then close, then wait for
  ``isFinal``), everything else of it is cancelled at once and its engine rows freed;
  vocalis also takes ``"immediate": true`` there to cancel the flushed text too.
  ``{"close_socket": true}`` closes every context the same way and then the connection.
  ``{"text": "", "context_id": ...}`` without flush only keeps a context alive.

Fields that ElevenLabs' messages carry and vocalis does not use are ignored, as are fields
of later ElevenLabs versions and of other services; a field that is not ElevenLabs' but close
to one vocalis reads (``seeed``, ``sede``, ``flsh``, ``contextId``, ``voice_settings.sped``)
is refused naming the one it resembles (the message is dropped; on the first message the
connection is closed), and so is such a query parameter (``?seeed=5``), so that a
misspelling does not go unheard.

Server messages: ``{"audio": base64, "isFinal": null, "alignment": {...},
"normalizedAlignment": {...}}`` (multi-stream-input adds ``contextId``) for every piece of
audio as it is generated, then ``{"isFinal": true}`` (with ``contextId``) when a stream is
over. Each sentence (the text up to a sentence end or a flush) is one engine request; the
first audio message of each carries the vocalis extension ``seed`` (an integer, ignored by
ElevenLabs' clients): the seed that request used, the connection's ``seed`` or, without
one, the one drawn for that sentence, so that its text with that seed (here, or as
``seed`` on ``POST /v1/audio/speech``) gives the same audio again. ``alignment`` lists
``chars``, ``charStartTimesMs`` and ``charDurationsMs``; times are relative to the start of
that message's audio, as ElevenLabs gives them, and come from the engine's word
timestamps: each word's time is spread evenly over its characters, the text between two
words over the gap between them. A word's time is known once it has been spoken, so it
rides on the message whose audio ends it: a word that began in an earlier message has a
negative start. ``normalizedAlignment`` repeats ``alignment``. Problems are
``{"message": ..., "error": code}`` as ElevenLabs words them (with ``contextId`` where one
is concerned); a problem with the connection itself (auth, voice, format) adds ``"code":
1008`` and closes it with that code and the message as the close reason. Text flushed with
nothing to speak since the last flush (only emoji, symbols or punctuation) gets the error
``POST /v1/audio/speech`` gives it (its message, ``"error"`` its code ``nothing_to_speak``),
before ``isFinal``. When the server shuts down, a connection gets ``{"message": ...,
"error": "server_shutting_down"}``, speaks all the text it has received (each context
flushed), sends each context's ``isFinal`` and is closed with 1001 and a reason
(:meth:`Connection.drain`).
"""

from __future__ import annotations

import asyncio
import base64
import difflib
import hmac
import json
import logging
import re
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import parse_qs

import numpy as np
from fastapi import WebSocket
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect, WebSocketState

from vocalis.audio.encode import Encoder, make_encoder
from vocalis.server import errors, speech
from vocalis.server.bridge import DRAIN, SpeechJob, notify_soon, receive_unless, submit_turn
from vocalis.server.errors import APIError
from vocalis.options import seed_from_text
from vocalis.server.schemas import SpeechRequest
from vocalis.text.sentences import SentenceBuffer

log = logging.getLogger("vocalis.server")

STREAM_PATH = "/v1/text-to-speech/{voice_id}/stream-input"
MULTI_PATH = "/v1/text-to-speech/{voice_id}/multi-stream-input"
PCM_RATES = (8000, 16000, 22050, 24000, 44100, 48000)
MP3_RATES = (22050, 24000, 44100)
AHEAD = 2                       # engine requests per context not yet sent
GENERATING = 1                  # ... of which being generated
MAX_MESSAGE_BYTES = 128 * 1024
MAX_PENDING_CHARS = 32 * 1024   # text of a context not yet given to the engine
MAX_CONTEXTS = 5                # ElevenLabs' limit per connection
INACTIVITY_TIMEOUT_S = 20       # ElevenLabs' default; its query parameter takes 1..180
DEFAULT_CONTEXT = "default"
CLOSE_POLICY = 1008
_FORMAT_RE = re.compile(r"(pcm)_(\d+)|(mp3)_(\d+)_(\d+)")
#: the fields of ElevenLabs' client messages (the first one's included) and vocalis's seed
#: and immediate; READ: those vocalis acts on, with what a near miss is told to write
FIELDS = frozenset({"text", "flush", "try_trigger_generation", "voice_settings",
                    "generation_config", "pronunciation_dictionary_locators", "xi_api_key",
                    "xi-api-key", "authorization", "context_id", "close_context",
                    "close_socket", "seed", "immediate"})
READ = {**{f: f'"{f}"' for f in ("text", "flush", "voice_settings", "xi_api_key",
                                  "xi-api-key", "authorization", "context_id",
                                  "close_context", "close_socket", "seed", "immediate")},
        "speed": '"speed" in voice_settings'}
VOICE_SETTINGS = frozenset({"stability", "similarity_boost", "style", "use_speaker_boost",
                            "speed"})
READ_IN_SETTINGS = {"speed": '"speed"', "seed": '"seed" (beside voice_settings, not in it)'}
#: ElevenLabs' query parameters and vocalis's seed; READ_QUERY: those vocalis acts on
QUERY = frozenset({"model_id", "output_format", "inactivity_timeout", "seed", "language_code",
                   "enable_logging", "enable_ssml_parsing", "sync_alignment", "auto_mode",
                   "apply_text_normalization", "optimize_streaming_latency"})
READ_QUERY = {f: f'"{f}"' for f in ("model_id", "output_format", "inactivity_timeout", "seed")}


SHUTTING_DOWN = ("the server is shutting down: the text received is spoken, then the "
                 "connection closes; reconnect to go on")


class ELError(Exception):
    """Sent as ``{"message", "error"}``; ``close``: then the connection is closed."""

    def __init__(self, message: str, code: str, close: int | None = None,
                 context: str | None = None):
        super().__init__(message)
        self.message, self.code, self.close, self.context = message, code, close, context


def parse_format(value: str) -> tuple[str, int]:
    """``output_format`` -> (vocalis format, sample rate). Raises ELError naming the
    accepted ones."""
    m = _FORMAT_RE.fullmatch(value or "")
    if m and m.group(1) and int(m.group(2)) in PCM_RATES:
        return "pcm", int(m.group(2))
    if m and m.group(3) and int(m.group(4)) in MP3_RATES:
        return "mp3", int(m.group(4))
    accepted = ", ".join([f"pcm_{r}" for r in PCM_RATES] + [f"mp3_{r}_128" for r in MP3_RATES])
    raise ELError(f"output_format {json.dumps(value)[:40]} is not supported here: use one of "
                  f"{accepted} (mp3: any bit rate)", "invalid_output_format", CLOSE_POLICY)


def parse_inactivity(value: str | None) -> float:
    """``inactivity_timeout`` -> seconds. Raises ELError: not a number of seconds in
    1..180."""
    if value is None:
        return float(INACTIVITY_TIMEOUT_S)
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 1 <= seconds <= 180:  # NaN fails too
        raise ELError(f"inactivity_timeout {json.dumps(value)[:40]} is not a number of seconds "
                      "in 1..180", "invalid_inactivity_timeout", CLOSE_POLICY)
    return seconds


class Resampled(Encoder):
    """``inner`` fed at ``rate_out`` from samples at ``rate_in`` (soxr, streaming)."""

    def __init__(self, inner: Encoder, rate_in: int, rate_out: int):
        import soxr
        self.inner = inner
        self.media_type = inner.media_type
        self.rs = soxr.ResampleStream(rate_in, rate_out, 1, dtype="float32")

    def begin(self) -> bytes:
        return self.inner.begin()

    def write(self, samples: np.ndarray) -> bytes:
        return self.inner.write(self.rs.resample_chunk(np.asarray(samples, np.float32)))

    def end(self) -> bytes:
        return self.inner.write(self.rs.resample_chunk(np.zeros(0, np.float32), last=True)) \
            + self.inner.end()

    def close(self) -> None:
        self.inner.close()


class Aligner:
    """One sentence's word timestamps as ElevenLabs character alignments."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0          # characters of ``text`` given out
        self.t = 0.0          # where they end in time (s)
        self.rewritten = False

    def take(self, words, t0: float, final: bool = False) -> dict | None:
        chars: list[str] = []
        starts: list[int] = []
        durs: list[int] = []

        def add(s: str, a: float, b: float) -> None:
            step = max(b - a, 0.0) / len(s) if s else 0.0
            for i, c in enumerate(s):
                chars.append(c)
                starts.append(round((a + i * step - t0) * 1000))
                durs.append(round(step * 1000))

        for w in words or ():
            if w.text_start is None or w.text_start < self.pos:  # text rewritten
                self.rewritten = True
                add((" " if self.pos or chars else "") + w.word, self.t, w.end)
            else:
                add(self.text[self.pos:w.text_start], self.t, max(w.start, self.t))
                add(self.text[w.text_start:w.text_end], max(w.start, self.t), w.end)
                self.pos = w.text_end
            self.t = max(self.t, w.end)
        if final and not self.rewritten and self.pos < len(self.text):
            add(self.text[self.pos:], self.t, self.t)
            self.pos = len(self.text)
        if not chars:
            return None
        return {"chars": chars, "charStartTimesMs": starts, "charDurationsMs": durs}


def _query_seed(value: str | None) -> int | None:
    """The query's ``seed`` (a string, as every query value is) as the integer it spells:
    digits, with a sign (a negative one is refused by the range check, in its words).

    Raises ELError (close 1008) for anything else (``7.0``, ``1e3``, ``abc``)."""
    if value is None:
        return None
    seed = seed_from_text(value)
    if seed is not None:
        return seed
    raise ELError(f"the query's seed must be an integer such as 7, got {value!r}; leave it "
                  "out for a random one", "int_type", CLOSE_POLICY)


@dataclass
class _Item:
    text: str
    flushed: bool = False
    cancelled: bool = False
    job: SpeechJob | None = None
    error: APIError | None = None
    submitting: bool = False
    submitted: asyncio.Event = field(default_factory=asyncio.Event)


class _Context:
    def __init__(self, conn: "Connection", cid: str | None, plan=None):
        self.conn = conn
        self.id = cid
        self.plan = plan or conn.plan  # its own from the message that opened it, if any
        self.buf = SentenceBuffer(conn.state.max_input_chars)
        self.items: deque[_Item] = deque()
        self.cond = asyncio.Condition()
        self.closing = False
        self.done = asyncio.Event()
        self.worded = False   # since the last flush: a sentence with words was queued
        self.wordless = ""    # ... else the sentences skipped as without words
        self.tasks = [asyncio.create_task(conn._submitter(self)),
                      asyncio.create_task(conn._speaker(self))]

    def waiting_chars(self) -> int:
        return len(self.buf) + sum(len(i.text) for i in self.items if i.job is None)


class Connection:
    def __init__(self, ws: WebSocket, state, voice_id: str, multi: bool, query: dict,
                 key_ok: bool):
        self.ws, self.state, self.voice_id, self.multi = ws, state, voice_id, multi
        self.query = query
        self.key_ok = key_ok
        self.plan = None
        self.seed = self.speed = None  # the first message's (or the query's seed)
        self.contexts: dict[str, _Context] = {}
        self.first_context: str | None = None
        self.send_lock = asyncio.Lock()
        check_query_names(query)
        self.fmt, self.out_rate = parse_format(query.get("output_format", "mp3_44100_128"))
        self.inactivity_s = parse_inactivity(query.get("inactivity_timeout"))
        model_id = query.get("model_id")
        try:
            self.hosted = state.pick(model_id) if model_id else state.default
        except APIError:  # ElevenLabs' model ids: the default model
            self.hosted = state.default
        self.rate = self.hosted.tts.sample_rate
        self.draining = asyncio.Event()  # the server shuts down (drain)

    def drain(self) -> None:
        """The server shuts down: take no more text, speak all the text received (each
        context flushed), send each context's ``isFinal``, then close with 1001 and a
        reason; an error message ``server_shutting_down`` says so first."""
        self.draining.set()

    # ------------------------------------------------------------------ sending

    async def send_json(self, obj: dict) -> None:
        async with self.send_lock:
            await self.ws.send_text(json.dumps(obj, separators=(",", ":")))

    async def send_error(self, e: ELError | APIError, context: str | None = None) -> None:
        msg = {"message": self.state.redact(e.message), "error": e.code or "invalid_request"}
        if getattr(e, "close", None) is not None:
            msg["code"] = e.close
        cid = getattr(e, "context", None) or context
        if self.multi and cid is not None:
            msg["contextId"] = cid
        await self.send_json(msg)

    # ------------------------------------------------------------------ main loop

    async def run(self) -> None:
        draining = False
        try:
            while True:
                try:
                    message = await self._receive()
                    if message["type"] == "websocket.disconnect":
                        return
                    if message is DRAIN:
                        draining = True
                        await self._stop_input()
                        break
                    if await self._handle(message):
                        break
                except ELError as e:
                    await self.send_error(e)
                    if e.close is not None:
                        await self.ws.close(e.close,
                                            errors.close_reason(self.state.redact(e.message)))
                        return
                except APIError as e:
                    await self.send_error(e)
            if await self._drain():
                if draining:
                    await self.ws.close(1001, errors.close_reason(SHUTTING_DOWN))
                else:
                    await self.ws.close(1000)
        except (WebSocketDisconnect, ConnectionError, OSError, RuntimeError):
            pass  # the client went away
        finally:
            await self._release_all()

    async def _receive(self) -> dict:
        """The next message. Raises ELError (closing 1008) when none came within
        ``inactivity_timeout`` seconds while nothing was being generated or sent."""
        while True:
            try:
                return await receive_unless(self.ws, self.draining, self.inactivity_s)
            except asyncio.TimeoutError:
                if any(c.items for c in self.contexts.values()):
                    continue  # still speaking: not inactive
                raise ELError(f"no message for {self.inactivity_s:g} s and nothing to speak: "
                              "closing the inactive connection (send a single space as text "
                              "to keep it open, or raise the inactivity_timeout query "
                              "parameter, at most 180)", "input_timeout_exceeded",
                              CLOSE_POLICY) from None

    async def _stop_input(self) -> None:
        """The server shuts down (:meth:`drain`): every context's text flushed (spoken, as
        the end of input speaks it) and the contexts closing."""
        await self.send_json({"message": SHUTTING_DOWN, "error": "server_shutting_down"})
        for ctx in list(self.contexts.values()):
            if not ctx.closing:
                await self._queue(ctx, ctx.buf.flush(), flushed=True)
            ctx.closing = True
            async with ctx.cond:
                ctx.cond.notify_all()

    async def _drain(self) -> bool:
        """The input is over: wait until every context has sent its audio and ``isFinal``,
        still reading the socket (a client that leaves meanwhile cancels the rest; text
        now gets an error). False when the client left."""
        finished = asyncio.ensure_future(
            asyncio.gather(*(c.done.wait() for c in list(self.contexts.values()))))
        try:
            while not finished.done():
                recv = asyncio.ensure_future(self.ws.receive())
                await asyncio.wait({finished, recv}, return_when=asyncio.FIRST_COMPLETED)
                if not recv.done():
                    recv.cancel()
                    await asyncio.gather(recv, return_exceptions=True)
                    break
                if recv.result()["type"] == "websocket.disconnect":
                    return False
                if self.draining.is_set():
                    await self.send_error(ELError("message while the server shuts down: it was "
                                                  "ignored; reconnect to go on",
                                                  "server_shutting_down"))
                    continue
                await self.send_error(ELError("message after the end of input (the empty "
                                              "text or close_socket): it was ignored",
                                              "context_closed"))
            return True
        finally:
            finished.cancel()

    async def _handle(self, message: dict) -> bool:
        """One client message; True when the input is over (stream-input's empty text,
        close_socket)."""
        first = self.plan is None
        raw = message.get("text")
        if raw is None:
            if message.get("bytes") is not None:
                raise ELError("binary frame where a JSON text message was expected: send "
                              'messages such as {"text": "Hello "} as text frames',
                              "invalid_input_message", None if not first else CLOSE_POLICY)
            return False
        if len(raw) > MAX_MESSAGE_BYTES:
            raise ELError(f"message is {len(raw)} characters; the limit is "
                          f"{MAX_MESSAGE_BYTES}: send the text in smaller pieces",
                          "message_too_large", 1009)
        try:
            msg = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            msg = None
        if not isinstance(msg, dict):
            raise ELError('message is not a JSON object: send e.g. {"text": "Hello "}',
                          "invalid_input_message", None if not first else CLOSE_POLICY)
        if first:
            await self._open(msg)
        else:
            _check_field_names(msg, False)
        cid = None
        if self.multi:
            cid = msg.get("context_id")
            if cid is not None and not isinstance(cid, str):
                raise ELError("context_id must be a string", "invalid_input_message")
            if msg.get("close_socket") is True:
                for ctx in list(self.contexts.values()):
                    await self._close_context(ctx, bool(msg.get("immediate")))
                return True
            cid = cid or self.first_context or DEFAULT_CONTEXT
            if first:
                self.first_context = cid
            if msg.get("close_context") is True:
                ctx = self.contexts.get(cid)
                if ctx is None or ctx.closing:
                    raise ELError(f"context {json.dumps(cid)[:80]} is not open: nothing to "
                                  "close", "context_not_found", context=cid)
                await self._close_context(ctx, bool(msg.get("immediate")))
                return False
        text = msg.get("text")
        flush = msg.get("flush") is True
        if text is None and not flush:
            if first:
                return False
            raise ELError('message has no "text": send {"text": "some words "} (or '
                          'close_context / close_socket on multi-stream-input)',
                          "invalid_input_message", context=cid)
        if text is not None and not isinstance(text, str):
            raise ELError('"text" must be a string', "invalid_input_message",
                          None if not first else CLOSE_POLICY, context=cid)
        text = text or ""
        if "\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            raise ELError("text holds characters that are not text (NUL or a lone "
                          "surrogate): send valid UTF-8 text", "invalid_text", context=cid)
        ctx = self.contexts.get(cid if self.multi else DEFAULT_CONTEXT)
        if ctx is not None and ctx.closing:
            raise ELError("text after the context was closed: open a new context_id"
                          if self.multi else "text after the end of input", "context_closed",
                          context=cid)
        if ctx is None:
            if self.multi and text == "" and not first:
                raise ELError(f"context {json.dumps(cid)[:80]} is not open: send text to "
                              "open it", "context_not_found", context=cid)
            if len(self.contexts) >= MAX_CONTEXTS:
                raise ELError(f"{len(self.contexts)} contexts are open; the limit is "
                              f"{MAX_CONTEXTS} per connection: close one first",
                              "too_many_contexts", context=cid)
            plan = None
            if self.multi and not first and ("seed" in msg or "voice_settings" in msg):
                # ElevenLabs' context initialisation: this context's own settings
                plan = await self._context_plan(msg, cid)
            ctx = self.contexts[cid if self.multi else DEFAULT_CONTEXT] = _Context(self, cid,
                                                                                    plan)
        if not self.multi and text == "" and not first:
            await self._queue(ctx, ctx.buf.flush(), flushed=True)
            ctx.closing = True
            async with ctx.cond:
                ctx.cond.notify_all()
            return True
        if ctx.waiting_chars() + len(text) > MAX_PENDING_CHARS:
            raise ELError(f"text not yet spoken would be {ctx.waiting_chars() + len(text)} "
                          f"characters; the limit is {MAX_PENDING_CHARS}: this piece was "
                          "dropped; wait for audio before sending more", "text_buffer_full",
                          context=cid)
        sentences = ctx.buf.feed(text) if text else []
        if flush:
            sentences += ctx.buf.flush()
        await self._queue(ctx, sentences, flushed=flush)
        return False

    async def _open(self, msg: dict) -> None:
        """The first message: the key (unless the handshake had it), the voice and
        options, checked once for the whole connection."""
        if not self.key_ok:
            key = msg.get("xi_api_key") or msg.get("xi-api-key")
            auth = msg.get("authorization")
            if not key and isinstance(auth, str) and auth[:7].lower() == "bearer ":
                key = auth[7:].strip()
            if not (isinstance(key, str) and key
                    and hmac.compare_digest(key.encode(), self.state.api_key.encode())):
                raise ELError("missing or wrong API key: send the header xi-api-key (or "
                              "Authorization: Bearer KEY), or xi_api_key in the first message",
                              "invalid_api_key", CLOSE_POLICY)
            self.key_ok = True
        _check_field_names(msg, True)
        self.seed = msg["seed"] if "seed" in msg else _query_seed(self.query.get("seed"))
        self.speed = _speed_of(msg)
        try:
            self.plan = await asyncio.to_thread(self._plan, self.seed, self.speed)
        except APIError as e:
            raise ELError(e.message, e.code or "invalid_request", CLOSE_POLICY) from None

    async def _context_plan(self, msg: dict, cid: str):
        """The plan of a context opened (multi-stream-input, after the first message) by
        ``msg`` with a ``seed`` or ``voice_settings`` of its own; what it leaves out is the
        connection's. Raises ELError (the message is dropped, the context not opened)."""
        seed = msg["seed"] if "seed" in msg else self.seed
        speed = _speed_of(msg)
        try:
            return await asyncio.to_thread(self._plan, seed,
                                           self.speed if speed is None else speed)
        except APIError as e:
            raise ELError(e.message, e.code or "invalid_request", context=cid) from None

    def _plan(self, seed, speed):
        """The speech plan of the connection; ``seed`` and ``speed`` are checked by the
        rules of ``POST /v1/audio/speech`` (its schema) and named as this protocol names
        them. Raises APIError."""
        try:
            body = SpeechRequest(model=self.hosted.model_id, input=".", voice=self.voice_id,
                                 response_format="pcm", seed=seed, word_timestamps=True,
                                 speed=1.0 if speed is None else speed)
        except ValidationError as e:
            err = errors._validation_error(
                RequestValidationError(e.errors(), body={"seed": seed, "speed": speed}), "")
            message = err.message
            if err.param == "speed":  # voice_settings.speed here
                message = "voice_settings." + message
            raise APIError(400, message, param=err.param, code=err.code) from None
        plan = speech.plan_speech(self.state, self.hosted, body)
        try:
            speech.check_plan(plan)
        except APIError:
            plan.word_timestamps = False  # a model without word timestamps: no alignment
            speech.check_plan(plan)
        return plan

    async def _queue(self, ctx: _Context, sentences, flushed: bool) -> None:
        """Queue the sentences with words (the others, "..." or an emoji, are skipped); at a
        flush, text since the last one that had nothing to speak gets the error
        ``POST /v1/audio/speech`` answers for it (:meth:`_wordless`), in its place."""
        refused = await self._wordless(ctx, sentences) if flushed else None
        async with ctx.cond:
            if flushed:
                for item in ctx.items:
                    item.flushed = True
            for s in sentences:
                if speech.has_words(s.text):
                    ctx.items.append(_Item(s.text, flushed=flushed))
                    ctx.worded = True
                elif not ctx.worded and len(ctx.wordless) < self.state.max_input_chars:
                    ctx.wordless = f"{ctx.wordless} {s.text}".strip()
            if refused is not None:
                item = _Item("", flushed=True, error=refused)
                item.submitted.set()  # nothing to submit: the speaker sends the error
                ctx.items.append(item)
            if flushed:
                ctx.worded, ctx.wordless = False, ""
            ctx.cond.notify_all()

    async def _wordless(self, ctx: _Context, sentences) -> APIError | None:
        """The error for text flushed with nothing to speak since the last flush (only
        emoji, symbols, punctuation), as ``POST /v1/audio/speech`` gives it; None when it
        had words (or was only white space)."""
        return await speech.wordless_error(ctx.plan, ctx.worded, ctx.wordless, sentences)

    async def _close_context(self, ctx: _Context, immediate: bool) -> None:
        """Text not flushed is dropped and its requests cancelled (rows freed); flushed
        text is still spoken unless ``immediate``; then isFinal."""
        ctx.buf = SentenceBuffer(ctx.buf.max_chars)
        ctx.closing = True
        async with ctx.cond:
            for item in ctx.items:
                if immediate or not item.flushed:
                    self._cancel(item)
            ctx.cond.notify_all()

    @staticmethod
    def _cancel(item: _Item) -> None:
        item.cancelled = True
        if item.job is not None:
            item.job.cancel()
        elif not item.submitting:
            item.submitted.set()  # never to be submitted: the speaker skips it

    async def _release_all(self) -> None:
        for ctx in self.contexts.values():
            for item in ctx.items:
                self._cancel(item)
            for t in ctx.tasks:
                t.cancel()
        await asyncio.gather(*(t for c in self.contexts.values() for t in c.tasks),
                             return_exceptions=True)
        for ctx in self.contexts.values():
            for item in ctx.items:
                if item.job is not None:
                    speech.settle(self.state, item.job.request, "cancelled")
            ctx.items.clear()

    # ------------------------------------------------------------------ engine

    async def _submitter(self, ctx: _Context) -> None:
        def next_item():
            for i in ctx.items:
                if i.job is None and not i.submitting and not i.submitted.is_set():
                    return i
            return None

        while True:  # the next once the one before is generated, fewer than AHEAD unsent
            async with ctx.cond:
                await ctx.cond.wait_for(lambda: next_item() is not None
                                        and submit_turn(ctx.items, AHEAD, GENERATING))
                item = next_item()
                item.submitting = True
            try:
                if not item.cancelled:
                    item.job = await self._submit(ctx, item)
            except Exception as e:
                item.error = errors.from_exception(e)
                if item.error.status >= 500:
                    log.error("elevenlabs sentence could not be submitted", exc_info=e)
            finally:
                item.submitting = False
                item.submitted.set()
                async with ctx.cond:
                    ctx.cond.notify_all()

    async def _submit(self, ctx: _Context, item: _Item) -> SpeechJob:
        req = await speech.submit_text(self.state, ctx.plan, item.text, lambda: item.cancelled)
        encoder = make_encoder(self.fmt, self.out_rate)
        if self.out_rate != self.rate:
            encoder = Resampled(encoder, self.rate, self.out_rate)
        return SpeechJob(req, encoder, asyncio.get_running_loop(),
                         on_generated=lambda: notify_soon(ctx.cond)).start()

    # ------------------------------------------------------------------ audio out

    async def _speaker(self, ctx: _Context) -> None:
        try:
            while True:
                async with ctx.cond:
                    await ctx.cond.wait_for(lambda: bool(ctx.items) or ctx.closing)
                    if not ctx.items:
                        break
                    item = ctx.items[0]
                await item.submitted.wait()
                await self._speak(ctx, item)
                async with ctx.cond:
                    ctx.items.popleft()
                    ctx.cond.notify_all()
            final = {"isFinal": True}
            if self.multi:
                final["contextId"] = ctx.id
                if self.contexts.get(ctx.id) is ctx:
                    del self.contexts[ctx.id]
            await self.send_json(final)
        except (WebSocketDisconnect, ConnectionError, OSError, RuntimeError):
            pass  # the reader sees the disconnect
        finally:
            ctx.done.set()

    async def _speak(self, ctx: _Context, item: _Item) -> None:
        job = item.job
        if job is None:
            if item.error is not None and not item.cancelled:
                await self.send_error(item.error, ctx.id)
            return
        outcome = "cancelled"
        sent = 0  # model-rate samples of this sentence so far
        aligner = Aligner(item.text) if ctx.plan.word_timestamps else None
        seed = job.request.stats.seed  # rides on the sentence's first message, then None
        try:
            while True:
                piece = await job.next()
                if piece.kind == "audio":
                    t0 = sent / self.rate
                    sent += piece.samples
                    al = aligner.take(piece.words, t0) if aligner else None
                    if (piece.data or al) and not item.cancelled:
                        await self._send_audio(ctx, piece.data, al, seed)
                        seed = None
                elif piece.kind == "done":
                    cancelled = piece.stats is not None and piece.stats.cancelled
                    outcome = "cancelled" if cancelled else "completed"
                    al = aligner.take(piece.words, sent / self.rate, final=True) \
                        if aligner and not cancelled else None
                    if al and not item.cancelled:
                        await self._send_audio(ctx, b"", al, seed)
                    break
                else:
                    outcome = "failed"
                    if not item.cancelled:
                        await self.send_error(errors.from_exception(piece.error), ctx.id)
                    break
        finally:
            speech.settle(self.state, job.request, outcome)

    async def _send_audio(self, ctx: _Context, data: bytes, alignment: dict | None,
                          seed: int | None = None) -> None:
        """One audio message; ``seed`` (the sentence's first message): its request's."""
        msg = {"audio": base64.b64encode(data).decode("ascii"), "isFinal": None,
               "normalizedAlignment": alignment, "alignment": alignment}
        if seed is not None:
            msg["seed"] = seed
        if self.multi:
            msg["contextId"] = ctx.id
        await self.send_json(msg)


def _near(name: str, read: dict) -> str | None:
    """What ``name`` was probably meant to be among ``read``'s keys (its value), or None: a
    difflib ratio of at least 0.8, case aside (``seeed``, ``flsh``, ``contextId``), or two
    neighbouring letters swapped (``sede``): strict enough that other services' fields
    (``next_text``, ``voice_id``, ``pitch``) are not taken for one."""
    low = name.lower()
    for key in read:
        if len(low) == len(key) and any(low[:i] + low[i + 1] + low[i] + low[i + 2:] == key
                                        for i in range(len(low) - 1)):
            return read[key]
    near = difflib.get_close_matches(low, list(read), n=1, cutoff=0.8)
    return read[near[0]] if near else None


def _speed_of(msg: dict):
    """``voice_settings.speed`` of ``msg`` (checked later, by the plan), or None."""
    settings = msg.get("voice_settings") or {}
    return settings.get("speed") if isinstance(settings, dict) else None


def _check_field_names(msg: dict, first: bool) -> None:
    """Refuse a field of ``msg`` (or of its ``voice_settings``) that is not ElevenLabs' but
    close to one vocalis reads (:data:`READ`, :data:`READ_IN_SETTINGS`; :func:`_near`).

    Raises ELError ``invalid_input_message`` (closing the connection when ``first``)."""
    settings = msg.get("voice_settings")
    names = [(str(n), str(n), READ) for n in msg if n not in FIELDS]
    if isinstance(settings, dict):
        names += [(f"voice_settings.{n}", str(n), READ_IN_SETTINGS) for n in settings
                  if n not in VOICE_SETTINGS]
    for shown_name, name, read in names:
        near = _near(name, read)
        if near is not None:
            raise ELError(f"unknown field {json.dumps(shown_name)[:80]}: did you mean {near}? "
                          + ("The connection is closed" if first else "The message was dropped"),
                          "invalid_input_message", CLOSE_POLICY if first else None)


def check_query_names(query: dict) -> None:
    """Refuse a query parameter that is not ElevenLabs' but close to one vocalis reads
    (:data:`READ_QUERY`: ``?seeed=5``, ``?output_fromat=...``), before the first message.

    Raises ELError ``invalid_query_parameter`` (closing the connection)."""
    for name in query:
        near = None if name in QUERY else _near(str(name), READ_QUERY)
        if near is not None:
            raise ELError(f"unknown query parameter {json.dumps(str(name))[:80]}: did you mean "
                          f"{near}? The connection is closed", "invalid_query_parameter",
                          CLOSE_POLICY)


def _query(scope) -> dict:
    qs = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return {k: v[-1] for k, v in qs.items()}


def _header_key_ok(scope, api_key: str | None) -> bool:
    if speech.authorized(scope, api_key):
        return True
    key = speech.header(scope, b"xi-api-key")
    return bool(key) and hmac.compare_digest(key.encode(), api_key.encode())


async def serve(ws: WebSocket, state, voice_id: str, multi: bool) -> None:
    """Handle one connection to :data:`STREAM_PATH` (``multi`` False) or
    :data:`MULTI_PATH` (the routes call this)."""
    if state.shutting_down:
        await ws.send_denial_response(errors.error_response(
            503, "the server is shutting down; retry on another instance", code="unavailable"))
        return
    await ws.accept()
    gauge = state.metrics.websockets.labels("elevenlabs")
    gauge.inc()
    conn = None
    try:
        try:
            conn = Connection(ws, state, voice_id, multi, _query(ws.scope),
                              _header_key_ok(ws.scope, state.api_key))
        except ELError as e:
            await ws.send_text(json.dumps({"message": e.message, "error": e.code,
                                           "code": e.close}))
            await ws.close(e.close, errors.close_reason(e.message))
            return
        state.streams.add(conn)
        await conn.run()
    except (WebSocketDisconnect, ConnectionError, OSError, RuntimeError):
        pass
    finally:
        if conn is not None:
            state.streams.discard(conn)
        gauge.dec()
        if ws.application_state == WebSocketState.CONNECTED \
                and ws.client_state == WebSocketState.CONNECTED:
            try:
                await ws.close()
            except (RuntimeError, OSError, WebSocketDisconnect):
                pass
