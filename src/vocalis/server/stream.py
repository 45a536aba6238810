"""``WS /v1/audio/speech/stream``: text in as it is written, audio out as it is generated.

The protocol is vLLM-Omni's streaming-text speech endpoint, unchanged (its
``serving_speech_stream.py`` and ``docs/serving/speech_api.md``), so its clients work here.

Client -> server (JSON text messages)::

    {"type": "session.config", ...}       first message; may be sent again between utterances
    {"type": "input.text", "text": "..."} more text of the current utterance
    {"type": "input.done"}                the utterance is complete: speak the rest, keep
                                          the connection open for the next one
    {"type": "session.close"}             finish the sentences already queued, then close
                                          (an unflushed rest is dropped, without session.done)
    {"type": "input.cancel"}              vocalis extension: stop now (barge-in), see below

Server -> client, for every sentence (one engine request) in order::

    {"type": "audio.start", "utterance_index", "sentence_index", "sentence_text", "format",
     "sample_rate", "channels", "seed", "text_start", "text_end"}
    binary frames: the audio (``stream_audio`` true: 16-bit PCM chunks as they are decoded;
                   false: one frame holding the sentence's whole file in ``format``)
    {"type": "audio.words", "utterance_index", "sentence_index", "words"}   with
                   ``word_timestamps`` true (vocalis extension): after the audio they cover
    {"type": "audio.done", "utterance_index", "sentence_index", "total_bytes", "error",
     "samples", "cancelled", "text_start", "text_end"}

and once per utterance, after its last sentence::

    {"type": "session.done", "utterance_index", "total_sentences", "samples", "cancelled",
     "text_spoken_end", "text_heard_end"}
    {"type": "error", "message", "code", "param"}     a problem; the connection goes on
                                                      unless the message says it closes
                                                      (an utterance with no text, or with
                                                      nothing to speak, only emoji or
                                                      symbols, gets the error POST
                                                      /v1/audio/speech gives its text:
                                                      empty_input, nothing_to_speak; param
                                                      "text", before its session.done)

The fields in the first two lines of each message are vLLM-Omni's; the others are vocalis
extensions (clients that do not know them ignore them): ``sample_rate`` (Hz),
``channels`` and ``seed`` on every ``audio.start`` (``seed``: the seed of the sentence's
engine request, the ``session.config``'s or, without one, one drawn for each sentence:
that sentence's text with that seed gives the same audio again, as ``x-vocalis-seed`` on
``POST /v1/audio/speech``; null for a sentence refused at submission, which made no
request); ``samples`` (audio samples sent, at ``sample_rate``);
``text_start``/``text_end`` (the sentence's place in the utterance's text: character
offsets into the concatenation of its ``input.text`` pieces, end exclusive);
``cancelled``; on ``session.done``, ``text_spoken_end`` (the text whose audio was sent
completely ends there) and ``text_heard_end`` (the text whose audio was at least begun
ends there); on ``error``, ``code`` and ``param``.

Sentences: with ``split_granularity`` ``sentence`` each sentence (the rules of
:mod:`vocalis.text.sentences`, the same as Wyoming's) is submitted to the engine as soon as
its end has arrived and the sentence before it has been generated (``GENERATING``: one
at a time, since generation outruns playback and a second beside it would slow the one
being heard), while earlier audio may still be being sent (at most ``AHEAD`` engine
requests per connection unsent); their audio leaves in order. A text that stops at ``.``, ``!``, ``?`` or ``…`` may be a sentence's end
or not (``etc. and``, ``Wow!!``), which only the next character tells: it is generated at
once as a guess, and its audio is sent when that character confirms it (the sentence then
comes out as the rules give it); otherwise the guess is dropped unsent and its row freed. ``none`` (vLLM-Omni's default) speaks the whole utterance as one request
at ``input.done``. ``clause`` is refused (use ``sentence``). ``token`` (vocalis extension,
models that take streamed text: Qwen3-TTS) makes each utterance one request that takes
every ``input.text`` as it comes (:meth:`vocalis.api.TTS.open_text`): speech starts after
the first word, the model waits for text it has not got, and the audio is that of the whole
utterance given at once with the same seed (not normalized: numbers may arrive in pieces);
``input.done`` ends its text. Its
``audio.start`` comes with the first text (``sentence_text`` empty, ``text_start`` and
``text_end`` 0; ``seed`` the utterance's); its ``audio.done`` carries the whole
utterance's text span.

Interruption (vocalis extension): ``input.cancel`` stops every utterance not yet finished:
the sentence being sent stops within one engine step (its ``audio.done`` says
``cancelled``, with the samples sent), the sentences generated ahead are cancelled and
their rows freed, text not yet spoken is dropped; then each utterance stopped gets its
``session.done`` with ``cancelled: true``; the rows are free by then. A closed socket does
the same without the messages.

Shutdown: when the server stops (``vocalis serve``'s first signal), each connection gets
an ``error`` ``server_shutting_down``, reads no more messages, speaks all the text it has
received (an open utterance is ended as ``input.done`` ends it), then is closed with 1001
and a reason (:meth:`StreamConnection.drain`, called by
:meth:`vocalis.server.app.ServerState.drain_streams` within the shutdown timeout).

Timeouts: the ``session.config`` must come within ``CONFIG_TIMEOUT_S`` of connecting
(else an ``error`` ``config_timeout`` and close 1008); a connection with no message for
``IDLE_TIMEOUT_S`` and nothing being generated or sent gets an ``error`` ``idle_timeout``
and is closed (1000). Every close but the one after ``session.close`` carries a reason:
the error's message (cut to a close reason's 123 bytes), or for 1011 that the server failed.

Limits (per connection): a message over ``MAX_MESSAGE_BYTES`` (``session.config``: larger,
as reference audio may ride in it) gets an ``error`` and the connection is closed (code
1009); text not yet given to the engine is at most ``MAX_PENDING_CHARS`` characters (more
gets an error ``text_buffer_full`` and is dropped); at most ``MAX_OPEN_UTTERANCES``
utterances may be flushed and unfinished (``input.done`` beyond gets
``too_many_utterances``). A client that does not read its audio stops the connection's
generation after the sentences in flight: audio is sent with the transport's flow
control, and no sentence is submitted while ``AHEAD`` wait to be sent.

Auth: with ``--api-key`` the handshake must carry ``Authorization: Bearer KEY`` (or
``x-api-key``), as every ``/v1`` route; otherwise it is refused with HTTP 401 and OpenAI's
error envelope.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from dataclasses import dataclass, field

from fastapi import WebSocket
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect, WebSocketState

from vocalis.audio.encode import make_encoder
from vocalis.errors import InputError
from vocalis.options import did_you_mean, new_seed
from vocalis.server import errors
from vocalis.server.bridge import DRAIN, SpeechJob, notify_soon, receive_unless, submit_turn
from vocalis.server.errors import APIError
from vocalis.server import speech
from vocalis.server.schemas import (
    InputCancel,
    InputDone,
    InputText,
    SessionClose,
    SpeechRequest,
    StreamSessionConfig,
)
from vocalis.text.sentences import Sentence, SentenceBuffer

log = logging.getLogger("vocalis.server")

PATH = "/v1/audio/speech/stream"
AHEAD = 2                            # engine requests per connection not yet sent
GENERATING = 1                       # ... of which being generated
MAX_MESSAGE_BYTES = 128 * 1024       # input.text and the other small messages
MAX_CONFIG_BYTES = 4 * 1024 * 1024   # session.config (may carry reference audio)
MAX_PENDING_CHARS = 32 * 1024        # text received and not yet given to the engine
MAX_OPEN_UTTERANCES = 8              # utterances flushed and not yet finished
CLOSE_TOO_BIG = 1009
CLOSE_POLICY = 1008
CONFIG_TIMEOUT_S = 30.0              # the first message (session.config) comes within this
IDLE_TIMEOUT_S = 300.0               # no message and nothing to speak for this long: closed

_MESSAGES = {"input.text": InputText, "input.done": InputDone, "session.close": SessionClose,
             "input.cancel": InputCancel}


class StreamError(Exception):
    """Answered as an ``error`` event; ``close``: then the connection is closed (with
    ``close`` as the WebSocket close code)."""

    def __init__(self, message: str, code: str, param: str | None = None,
                 close: int | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.param = param
        self.close = close


SHUTTING_DOWN = StreamError("the server is shutting down: the text received is spoken, then "
                            "the connection closes; reconnect to go on",
                            "server_shutting_down", close=1001)


def _empty() -> APIError:
    """The error of an utterance without text (HTTP's 400 ``empty_input`` for a blank
    ``input``)."""
    return APIError(400, "text is empty: send input.text with some words before input.done",
                    param="text", code="empty_input")


@dataclass
class _Utterance:
    """One ``input.done`` cycle: its text, its sentences' progress and how much was sent."""

    index: int
    config: "_Config"           # the session.config in force when it began
    text: SentenceBuffer
    sentences: int = 0          # sentences announced (audio.start sent)
    samples: int = 0
    spoken_end: int = 0         # text whose audio was sent completely ends here
    heard_end: int = 0          # text whose audio was at least begun ends here
    cancelled: bool = False
    started: bool = False       # some text arrived
    fed: "_Item | None" = None  # split_granularity token: the one request, text fed to it
    guess: "_Item | None" = None  # sentence mode: a sentence spoken before its end is sure
    worded: bool = False        # a sentence with words was queued
    wordless: str = ""          # sentences skipped as without words (while none had any)


@dataclass
class _Item:
    """What the speaker does next: speak a sentence, or end an utterance."""

    utt: _Utterance
    sentence: Sentence | None = None   # None: the utterance's end (session.done)
    job: SpeechJob | None = None
    error: APIError | None = None      # refused; at the end: an utterance with nothing to say
    submitting: bool = False
    waiting: bool = False              # counted in the connection's pending characters
    submitted: asyncio.Event = field(default_factory=asyncio.Event)
    # a guess (SentenceBuffer.tentative): generated at once, sent once the text confirms it
    # (sure is set); dropped (never sent, its row freed) when the text goes on otherwise
    sure: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: bool = False
    guess: bool = False
    seed: int | None = None            # its engine request's (given or drawn): audio.start's

    def __post_init__(self) -> None:
        if not self.guess:
            self.sure.set()

    @property
    def cancelled(self) -> bool:
        return self.utt.cancelled or self.dropped


class _Config:
    """A checked ``session.config``: the plan every sentence is submitted with."""

    def __init__(self, msg: StreamSessionConfig, plan, hosted):
        self.msg = msg
        self.plan = plan
        self.hosted = hosted
        self.rate = hosted.tts.sample_rate


#: session.config's own fields, for a misspelled one (``type`` is the message's kind)
_CONFIG_FIELDS = [f for f in StreamSessionConfig.model_fields if f != "type"]


def _validation_message(e: ValidationError, body, model=None) -> APIError:
    """The refusal of a message the schema ``model`` refused (an unknown field names the
    fields the message takes: ``/openapi.json`` describes no WebSocket message)."""
    takes = None
    if model is not None:
        kind = model.model_fields["type"].annotation.__args__[0]
        fields = [f for f in model.model_fields if f != "type"]
        takes = ((f"{kind} takes {', '.join(map(repr, fields))} besides 'type'" if fields
                  else f"{kind} takes only 'type'")
                 + "; the message was dropped: send it again without that field")
    return errors._validation_error(RequestValidationError(e.errors(), body=body),
                                    takes=takes)


class StreamConnection:
    """One WebSocket connection: the reader (this task) parses messages and cuts text into
    sentences; a submitter task gives sentences to the engine (one generated at a time); a
    speaker task sends their audio in order."""

    def __init__(self, ws: WebSocket, state):
        self.ws = ws
        self.state = state
        self.config: _Config | None = None
        self.items: deque[_Item] = deque()
        self.changed = asyncio.Condition()
        self.utt: _Utterance | None = None
        self.next_index = 0
        self.open_utterances = 0
        self.send_lock = asyncio.Lock()
        self.waiting_chars = 0  # characters of sentences queued and not yet submitted
        self.closing = False
        self.tasks: list[asyncio.Task] = []
        self.draining = asyncio.Event()  # the server shuts down (drain)

    # ------------------------------------------------------------------ sending

    async def send_json(self, obj: dict) -> None:
        async with self.send_lock:
            # ASCII JSON: a lone surrogate a client sent cannot break the UTF-8 frame
            await self.ws.send_text(json.dumps(obj, separators=(",", ":")))

    async def send_bytes(self, data: bytes) -> None:
        async with self.send_lock:
            await self.ws.send_bytes(data)

    async def send_error(self, e: StreamError | APIError) -> None:
        message = self.state.redact(e.message)
        await self.send_json({"type": "error", "message": message,
                              "code": e.code, "param": e.param})

    async def _close(self, e: StreamError) -> None:
        """Close with ``e.close`` and, as the reason, what went wrong (``e``'s message,
        cut to a close reason's 123 bytes)."""
        await self.ws.close(e.close, errors.close_reason(self.state.redact(e.message)))

    # ------------------------------------------------------------------ main loop

    def drain(self) -> None:
        """The server shuts down: take no more text, speak all the text received (an open
        utterance is ended as ``input.done`` ends it), then close with 1001 and a reason, as
        after a ``session.close`` (an ``error`` message ``server_shutting_down`` says so
        first)."""
        self.draining.set()

    async def run(self) -> None:
        self.tasks = [asyncio.create_task(self._submitter(), name="vocalis-ws-submit"),
                      asyncio.create_task(self._speaker(), name="vocalis-ws-speak")]
        draining = False
        try:
            while True:
                try:
                    message = await self._receive()
                except StreamError as e:  # timed out
                    await self.send_error(e)
                    await self._close(e)
                    return
                if message["type"] == "websocket.disconnect":
                    return
                if message is DRAIN:
                    draining = True
                    await self.send_error(SHUTTING_DOWN)
                    if self.utt is not None and self.utt.started:
                        try:  # the open utterance ends where its text got to (input.done)
                            await self._done()
                        except (StreamError, APIError) as e:
                            await self.send_error(e)
                    break
                try:
                    if await self._handle(message):
                        break
                except StreamError as e:
                    await self.send_error(e)
                    if e.close is not None:
                        await self._close(e)
                        return
                except APIError as e:
                    await self.send_error(e)
            # session.close: let the speaker finish what was flushed, then close (a guess at
            # the unflushed rest is dropped with it)
            if self.utt is not None and self.utt.guess is not None:
                self._drop(self.utt.guess)
                self.utt.guess = None
            self.closing = True
            async with self.changed:
                self.changed.notify_all()
            await self.tasks[1]
            if draining:
                await self._close(SHUTTING_DOWN)
            else:
                await self.ws.close()
        except (WebSocketDisconnect, ConnectionError, OSError, RuntimeError):
            pass  # the client went away (or closed while we sent)
        finally:
            self._cancel_all()
            for t in self.tasks:
                t.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            self._release_all()

    async def _receive(self) -> dict:
        """The next message. Raises StreamError when no ``session.config`` came within
        ``CONFIG_TIMEOUT_S``, or no message within ``IDLE_TIMEOUT_S`` while nothing is being
        generated or sent (a connection speaking its audio is never idle)."""
        while True:
            limit = CONFIG_TIMEOUT_S if self.config is None else IDLE_TIMEOUT_S
            try:
                return await receive_unless(self.ws, self.draining, limit)
            except asyncio.TimeoutError:
                if self.config is None:
                    raise StreamError(f"no session.config within {CONFIG_TIMEOUT_S:g} s of "
                                      "connecting: send it first; closing", "config_timeout",
                                      param="type", close=CLOSE_POLICY) from None
                if self.items:
                    continue
                dropped = " (its unflushed text is dropped)" if self.utt and self.utt.started \
                    else ""
                raise StreamError(f"no message for {IDLE_TIMEOUT_S:g} s and nothing to speak: "
                                  f"closing the idle connection{dropped}; reconnect to go on",
                                  "idle_timeout", close=1000) from None

    async def _handle(self, message: dict) -> bool:
        """One client message; True when the connection should close (session.close)."""
        raw = message.get("text")
        if raw is None:
            if message.get("bytes") is not None:
                raise StreamError("binary frame where a JSON text message was expected: send "
                                  "the messages as text frames (audio is only sent by the "
                                  "server)", "binary_not_supported",
                                  close=None if self.config else CLOSE_POLICY)
            return False
        size = len(raw.encode("utf-8", "surrogatepass"))
        config = '"session.config"' in raw[:4096]
        limit = MAX_CONFIG_BYTES if config else MAX_MESSAGE_BYTES
        if size > limit:
            fix = ("upload reference audio once (POST /v1/audio/voices) and name it as the "
                   "voice" if config else "send the text in smaller input.text pieces")
            raise StreamError(f"message is {size} bytes; the limit is {limit} bytes: {fix}; "
                              "closing the connection", "message_too_large",
                              close=CLOSE_TOO_BIG)
        try:
            msg = json.loads(raw)
        except (json.JSONDecodeError, RecursionError) as e:
            detail = e.msg if isinstance(e, json.JSONDecodeError) else "nested too deep"
            raise StreamError(f"message is not valid JSON ({detail}): send one JSON object "
                              'per text frame, e.g. {"type": "input.text", "text": "Hi."}',
                              "invalid_json", close=None if self.config else CLOSE_POLICY)
        if not isinstance(msg, dict):
            raise StreamError("message must be a JSON object with a \"type\" field",
                              "invalid_message", close=None if self.config else CLOSE_POLICY)
        kind = msg.get("type")
        if kind == "session.config":
            await self._configure(msg)
            return False
        if self.config is None:
            got = "a message without a type" if kind is None else _shown(kind)
            raise StreamError(f"expected session.config first, got {got}: send "
                              '{"type": "session.config", "voice": ...} first; closing',
                              "missing_session_config", param="type", close=CLOSE_POLICY)
        model = _MESSAGES.get(kind) if isinstance(kind, str) else None
        if model is None:
            what = ("a message without a type" if kind is None
                    else f"unknown message type {_shown(kind)}"
                    + (did_you_mean(kind, ["session.config", *_MESSAGES]) if isinstance(
                        kind, str) else ""))
            raise StreamError(f"{what}: use session.config, input.text, input.done, "
                              "input.cancel or session.close (in its \"type\")",
                              "unknown_message_type", param="type")
        try:
            parsed = model.model_validate(msg)
        except ValidationError as e:
            raise _validation_message(e, msg, model) from None
        if isinstance(parsed, InputText):
            await self._text(parsed.text)
        elif isinstance(parsed, InputDone):
            await self._done()
        elif isinstance(parsed, InputCancel):
            await self._cancel()
        elif isinstance(parsed, SessionClose):
            return True
        return False

    # ------------------------------------------------------------------ messages

    async def _configure(self, msg: dict) -> None:
        if self.utt is not None and self.utt.started:
            raise StreamError("session.config while an utterance is open: send input.done "
                              "(or input.cancel) first", "utterance_in_progress",
                              param="type")
        try:
            cfg = StreamSessionConfig.model_validate(msg)
        except ValidationError as e:
            err = _validation_message(e, msg)
            raise StreamError(f"invalid session.config: {err.message}", err.code, err.param,
                              close=None if self.config else CLOSE_POLICY) from None
        try:
            self.config = await asyncio.to_thread(self._check_config, cfg)
            if self.utt is not None:  # made, no text yet: the next text takes the new config
                self.utt = None
        except APIError as e:
            raise StreamError(e.message, e.code or "invalid_value", e.param,
                              close=None if self.config else CLOSE_POLICY) from None
        except ValidationError as e:
            err = _validation_message(e, msg)
            raise StreamError(f"invalid session.config: {err.message}", err.code, err.param,
                              close=None if self.config else CLOSE_POLICY) from None

    def _check_config(self, cfg: StreamSessionConfig) -> _Config:
        """Everything a sentence will be checked against, checked now (blocking: a voice
        may load). Raises APIError naming the field."""
        if cfg.split_granularity == "clause":
            raise APIError(400, "split_granularity 'clause' is not supported: use 'sentence' "
                                "(each sentence is spoken as soon as it is complete) or 'none'",
                           param="split_granularity", code="unsupported_value")
        if cfg.stream_audio and cfg.response_format != "pcm":
            raise APIError(400, "stream_audio true sends raw PCM chunks: set response_format "
                                f"'pcm' (got {cfg.response_format!r}), or stream_audio false "
                                "for one whole file per sentence", param="response_format",
                           code="invalid_value")
        state = self.state
        hosted = state.pick(cfg.model) if cfg.model is not None else state.default
        info = hosted.info
        if cfg.task_type is not None:
            kind = (info.kind or "").replace("_", "").lower()
            if cfg.task_type.lower() != kind:
                raise APIError(400, f"task_type {cfg.task_type!r} does not match the model: "
                                    f"{hosted.model_id!r} is {info.title} "
                                    f"({info.kind_title or 'one kind'}); drop task_type or "
                                    "choose a model of that kind", param="task_type",
                               code="invalid_value")
        options = cfg.options()
        for name in ("input", "stream", "stream_format"):
            if name in options:
                raise APIError(400, f"unknown parameter {name!r} in session.config: the text "
                                    "comes in input.text messages and the audio is always "
                                    "streamed", param=name, code="unknown_parameter")
        # a misspelled field of session.config's own (split_granulaity)
        speech.check_field_names(hosted.tts, options, _CONFIG_FIELDS, " in session.config")
        if cfg.language is not None:
            options.update(speech.language_option(info, cfg.language))
        # no voice: the server's default, or the error POST /v1/audio/speech gives
        body = SpeechRequest(model=hosted.model_id, input=".", voice=cfg.voice,
                             instructions=cfg.instructions, response_format=cfg.response_format,
                             speed=cfg.speed if cfg.speed is not None else 1.0, seed=cfg.seed,
                             normalize=cfg.normalize, word_timestamps=cfg.word_timestamps,
                             **options)
        plan = speech.plan_speech(state, hosted, body)
        speech.check_plan(plan)
        if cfg.split_granularity == "token":  # (the server's --normalize does not apply)
            if cfg.normalize:
                raise APIError(400, "normalize cannot read numbers that arrive in pieces: drop "
                                    "normalize, or use split_granularity 'sentence'",
                               param="normalize", code="unsupported_value")
            _open_text(plan, 0)  # refused here when the model takes whole texts only
        return _Config(cfg, plan, hosted)

    def _pending_chars(self) -> int:
        return (len(self.utt.text) if self.utt is not None else 0) + self.waiting_chars

    def _unwait(self, item: _Item) -> None:
        if item.waiting:
            item.waiting = False
            self.waiting_chars -= len(item.sentence.text)

    def _open(self) -> _Utterance:
        if self.utt is None:
            granularity = self.config.msg.split_granularity
            max_chars = self.state.max_input_chars if granularity == "sentence" else 1 << 62
            self.utt = _Utterance(self.next_index, self.config, SentenceBuffer(max_chars))
        return self.utt

    async def _text(self, text: str) -> None:
        if not text:
            return
        if "\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            raise StreamError("input.text holds characters that are not text (NUL or a lone "
                              "surrogate): send valid UTF-8 text", "invalid_text", param="text")
        utt = self._open()
        granularity = utt.config.msg.split_granularity
        if granularity == "none" and len(utt.text) + len(text) > self.state.max_input_chars:
            raise StreamError(f"the utterance would be {len(utt.text) + len(text)} characters; "
                              f"the limit is {self.state.max_input_chars}: this piece was "
                              "dropped; send input.done sooner (with split_granularity 'none' "
                              "an utterance is one request of at most --max-input-chars "
                              "characters), or use split_granularity 'sentence'",
                              "text_buffer_full", param="text")
        pending = self._pending_chars()
        if pending + len(text) > MAX_PENDING_CHARS:
            raise StreamError(f"text not yet spoken would be {pending + len(text)} characters; "
                              f"the limit is {MAX_PENDING_CHARS} per connection: this piece "
                              "was dropped; wait for audio before sending more text",
                              "text_buffer_full", param="text")
        utt.started = True
        if granularity == "none":
            utt.text.pending += text
            return
        if granularity == "token":
            await self._feed(utt, text)
            return
        await self._queue(utt, utt.text.feed(text), guess=True)

    async def _feed(self, utt: _Utterance, text: str) -> None:
        """split_granularity token: the utterance's request takes ``text`` now (opened
        with the first text; its audio then goes out like a sentence's)."""
        if utt.fed is None:
            cfg = utt.config
            seed = cfg.plan.seed if cfg.plan.seed is not None else new_seed()
            req = await asyncio.to_thread(_open_text, cfg.plan, seed)
            self.state.admitted.add(req)  # settled like a sentence's request
            encoder = make_encoder(cfg.msg.response_format, cfg.rate,
                                   whole=not cfg.msg.stream_audio)
            item = _Item(utt, Sentence("", 0, 0), seed=seed)
            item.job = SpeechJob(req, encoder, asyncio.get_running_loop()).start()
            item.submitted.set()
            utt.fed = item
            async with self.changed:
                self.items.append(item)
                self.changed.notify_all()
        utt.text.pending += text
        try:
            await asyncio.to_thread(utt.fed.job.request.push, text)
        except InputError as e:
            raise StreamError(f"{e} (the text before this piece is spoken; send input.done)",
                              e.code or "invalid_value", param="text") from None

    async def _queue(self, utt: _Utterance, sentences: list[Sentence], end: bool = False,
                     guess: bool = False, refused: APIError | None = None) -> None:
        """Queue ``sentences`` (and the utterance's end, with ``refused``: the error its text
        got, sent before its session.done). Sentence mode: a guess made earlier
        is confirmed by its own sentence coming (it is not queued again) or dropped; with
        ``guess``, a rest that ends like a sentence (``Hello there.``, its end known only
        from the next character) is generated now and sent once confirmed, so that its
        first audio does not wait for that character (SentenceBuffer.tentative)."""
        async with self.changed:
            sentences = self._settle_guess(utt, sentences)
            for s in sentences:
                if speech.has_words(s.text):  # else nothing to speak ("...", an emoji)
                    self.items.append(_Item(utt, s, waiting=True))
                    self.waiting_chars += len(s.text)
                    utt.worded = True
                elif not utt.worded and len(utt.wordless) < self.state.max_input_chars:
                    utt.wordless = f"{utt.wordless} {s.text}".strip()  # (for _wordless)
            if guess and utt.guess is None and not utt.cancelled:
                s = utt.text.tentative()
                if s is not None and speech.has_words(s.text):
                    # (its text stays in the buffer, counted there, until confirmed)
                    utt.guess = _Item(utt, s, guess=True)
                    self.items.append(utt.guess)
                    utt.worded = True
            if end:
                self.items.append(_Item(utt, error=refused))
            self.changed.notify_all()

    def _settle_guess(self, utt: _Utterance, sentences: list[Sentence]) -> list[Sentence]:
        """Confirm or drop the utterance's guess against the sentences now complete; returns
        those still to queue."""
        item, utt.guess = utt.guess, None
        if item is None:
            return sentences
        if sentences and sentences[0] == item.sentence:
            item.sure.set()
            return sentences[1:]
        self._drop(item)
        return sentences

    def _drop(self, item: _Item) -> None:
        """A guess the text did not confirm: never sent; its request (if any) cancelled."""
        item.dropped = True
        if item.job is not None:
            item.job.cancel()
        elif not item.submitting:
            self._unwait(item)
            item.submitted.set()
        item.sure.set()

    async def _done(self) -> None:
        if self.open_utterances >= MAX_OPEN_UTTERANCES:
            raise StreamError(f"{self.open_utterances} utterances are still being spoken; the "
                              f"limit is {MAX_OPEN_UTTERANCES} per connection: wait for a "
                              "session.done before the next input.done", "too_many_utterances")
        utt = self._open()
        refused = None
        if utt.fed is not None:  # split_granularity token: end the request's text
            item, utt.fed = utt.fed, None
            item.sentence = Sentence(utt.text.pending, 0, len(utt.text.pending))
            try:
                if not utt.text.pending.strip():
                    raise _empty()
                await asyncio.to_thread(item.job.request.close)
            except (InputError, APIError) as e:
                item.job.cancel()
                await self.send_error(StreamError(getattr(e, "message", str(e)),
                                                  e.code or "invalid_value", "text"))
            sentences = []
        else:
            if utt.config.msg.split_granularity == "token":
                sentences = []  # no text came
            elif utt.config.msg.split_granularity == "none":
                text = utt.text.pending
                utt.text.pending = ""
                a, b = len(text) - len(text.lstrip()), len(text.rstrip())
                sentences = [Sentence(text[a:b], a, b)] if a < b else []
            else:
                sentences = utt.text.flush()
            refused = await self._refusal(utt, sentences)
        self.utt = None
        self.next_index += 1
        self.open_utterances += 1
        await self._queue(utt, sentences, end=True, refused=refused)

    async def _refusal(self, utt: _Utterance, sentences: list[Sentence]) -> APIError | None:
        """The error ``POST /v1/audio/speech`` answers for an utterance's text when it would
        refuse it, sent before its session.done instead of a silent end: no text at all (or
        only white space: ``empty_input``), or nothing to speak (only emoji, symbols,
        punctuation: ``nothing_to_speak``); None when it has words."""
        if not (utt.worded or utt.wordless or any(s.text.strip() for s in sentences)):
            return _empty()
        return await speech.wordless_error(utt.config.plan, utt.worded, utt.wordless, sentences)

    async def _cancel(self) -> None:
        """Stop every unfinished utterance (the open one too): cancel their engine requests,
        drop their text; the speaker then reports them."""
        if self.utt is not None and self.utt.started:
            utt = self.utt
            self.utt = None
            self.next_index += 1
            self.open_utterances += 1
            await self._queue(utt, [], end=True)
        self._cancel_all()
        async with self.changed:
            self.changed.notify_all()

    def _cancel_all(self) -> None:
        for item in list(self.items):
            item.sure.set()
            item.utt.cancelled = True
            if item.job is not None:
                item.job.cancel()
            elif not item.submitting:
                self._unwait(item)
                item.submitted.set()  # never to be submitted: the speaker skips it
        if self.utt is not None:
            if self.utt.started:
                self.utt.cancelled = True
            else:  # opened by a piece that was refused: nothing of it to stop
                self.utt = None

    def _release_all(self) -> None:
        """On the way out: every engine request of the connection cancelled and counted."""
        for item in self.items:
            if item.job is not None:
                speech.settle(self.state, item.job.request, "cancelled")
        self.items.clear()

    # ------------------------------------------------------------------ engine

    def _next_to_submit(self) -> _Item | None:
        for item in self.items:
            if item.sentence is not None and item.job is None and not item.submitting \
                    and not item.submitted.is_set():
                return item
        return None

    async def _submitter(self) -> None:
        """Give sentences to the engine in order: the next once the one before has been
        generated (``GENERATING``) and fewer than ``AHEAD`` wait to be sent."""
        while True:
            async with self.changed:
                await self.changed.wait_for(
                    lambda: self._next_to_submit() is not None
                    and submit_turn(self.items, AHEAD, GENERATING))
                item = self._next_to_submit()
                item.submitting = True
                self._unwait(item)
            try:
                if not item.cancelled:
                    item.job = await self._submit(item)
            except Exception as e:  # refused (APIError), or failed: told in its place
                item.error = errors.from_exception(e)
                if item.error.param in ("input", None):  # the HTTP field's name: here the text
                    item.error.param = "text"
                if item.error.status == 429:  # the queue was full: say what became of it
                    item.error.message += "; this sentence was not spoken (send it again)"
                if item.error.status >= 500:
                    log.error("stream sentence could not be submitted", exc_info=e)
            finally:
                item.submitting = False
                item.submitted.set()
                async with self.changed:
                    self.changed.notify_all()

    async def _submit(self, item: _Item) -> SpeechJob:
        """One engine request for ``item``'s sentence; a cancellation meanwhile (the client
        left) cancels the request once it exists. Raises APIError (queue full, a text the
        model refuses)."""
        cfg = item.utt.config
        req = await speech.submit_text(self.state, cfg.plan, item.sentence.text,
                                       lambda: item.cancelled)
        item.seed = req.stats.seed  # the plan's, or the one drawn for this sentence
        whole = not cfg.msg.stream_audio
        encoder = make_encoder(cfg.msg.response_format, cfg.rate, whole=whole)
        return SpeechJob(req, encoder, asyncio.get_running_loop(),
                         on_generated=lambda: notify_soon(self.changed)).start()

    # ------------------------------------------------------------------ audio out

    async def _speaker(self) -> None:
        """Send the items' audio in order: each sentence's audio.start, audio, audio.done;
        each utterance's session.done. A failure of its own closes the connection (1011)."""
        try:
            await self._speak_all()
        except (WebSocketDisconnect, ConnectionError, OSError, asyncio.CancelledError):
            raise
        except Exception as e:
            self._cancel_all()
            if isinstance(e, RuntimeError) and not self._connected():
                return  # sent as the client went away: the reader sees the disconnect
            log.error("speech stream failed", exc_info=e)
            try:
                await self.ws.close(1011, "internal error: the speech stream failed (see the "
                                          "server log); reconnect to go on")
            except (RuntimeError, OSError):
                pass

    def _connected(self) -> bool:
        return (self.ws.client_state == WebSocketState.CONNECTED
                and self.ws.application_state == WebSocketState.CONNECTED)

    async def _speak_all(self) -> None:
        while True:
            async with self.changed:
                await self.changed.wait_for(lambda: bool(self.items) or self.closing)
                if not self.items:
                    return  # session.close: everything before it was sent
                item = self.items[0]
            if item.sentence is None:
                if item.error is not None and not item.utt.cancelled:
                    await self.send_error(item.error)
                await self._end(item.utt)
            else:
                await item.sure.wait()  # a guess: until the text confirms (or drops) it
                await item.submitted.wait()
                await self._speak(item)
            async with self.changed:
                self.items.popleft()
                self.changed.notify_all()

    async def _end(self, utt: _Utterance) -> None:
        self.open_utterances -= 1
        msg = {"type": "session.done", "utterance_index": utt.index,
               "total_sentences": utt.sentences, "samples": utt.samples,
               "cancelled": utt.cancelled, "text_spoken_end": utt.spoken_end,
               "text_heard_end": utt.heard_end}
        await self.send_json(msg)

    async def _speak(self, item: _Item) -> None:
        utt, s = item.utt, item.sentence
        cfg = utt.config
        job = item.job
        if item.cancelled and job is None:
            return
        if item.cancelled:  # never announced: wait for its row to be freed, send nothing
            while (await job.next()).kind not in ("done", "failed"):
                pass
            speech.settle(self.state, job.request, "cancelled")
            return
        index = utt.sentences
        utt.sentences += 1
        base = {"utterance_index": utt.index, "sentence_index": index}
        span = {"text_start": s.start, "text_end": s.end}
        await self.send_json({"type": "audio.start", **base, "sentence_text": s.text,
                              "format": cfg.msg.response_format, "sample_rate": cfg.rate,
                              "channels": 1, "seed": item.seed, **span})
        total_bytes = samples = 0  # sent to the client
        made = 0                   # samples of a whole file not yet sent
        failed = cancelled = False
        outcome = "cancelled"
        # word times from the utterance's first sample, offsets into its text
        words = _WordsOut(self, base, utt.samples / cfg.rate, s.start)
        if job is None:  # refused at submission
            failed = True
            await self.send_error(item.error)
        else:
            whole: list[bytes] = []
            try:
                while True:
                    piece = await job.next()
                    if piece.kind == "audio" and not cfg.msg.stream_audio:
                        made += piece.samples
                        whole.append(piece.data)
                        words.keep(piece.words)
                    elif piece.kind == "audio":
                        if piece.data:
                            await self.send_bytes(piece.data)
                            total_bytes += len(piece.data)
                        if piece.samples:
                            utt.heard_end = s.end
                            samples += piece.samples
                            utt.samples += piece.samples
                            self.state.metrics.audio_seconds.inc(piece.samples / cfg.rate)
                        words.keep(piece.words)
                        await words.send()
                    elif piece.kind == "done":
                        cancelled = piece.stats is not None and piece.stats.cancelled
                        outcome = "cancelled" if cancelled else "completed"
                        words.keep(piece.words)
                        break
                    else:
                        failed = True
                        outcome = "failed"
                        err = errors.from_exception(piece.error)
                        if err.status >= 500:
                            log.error("stream sentence failed: %s", type(piece.error).__name__)
                        await self.send_error(err)
                        break
                if whole and not cancelled and not failed:
                    data = b"".join(whole)
                    await self.send_bytes(data)
                    total_bytes, samples = len(data), made
                    utt.samples += made
                    self.state.metrics.audio_seconds.inc(made / cfg.rate)
                    utt.heard_end = s.end
                if not failed and (cfg.msg.stream_audio or not cancelled):
                    await words.send()
            finally:
                speech.settle(self.state, job.request, outcome)
        s = item.sentence  # (split_granularity token: the whole text, known by now)
        span = {"text_start": s.start, "text_end": s.end}
        if not (failed or cancelled):
            utt.spoken_end = s.end
            utt.heard_end = s.end
        await self.send_json({"type": "audio.done", **base, "total_bytes": total_bytes,
                              "error": failed, "samples": samples, "cancelled": cancelled,
                              **span})


class _WordsOut:
    """A sentence's word timestamps on their way out as ``audio.words`` messages (vocalis
    extension): ``{"type": "audio.words", "utterance_index", "sentence_index", "words":
    [{"word", "start", "end", "text_start", "text_end"}]}``, sent after the audio they
    cover, times in seconds from the utterance's first sample, offsets into its text."""

    def __init__(self, session, base: dict, t0: float, c0: int):
        self.session, self.base, self.t0, self.c0 = session, base, t0, c0
        self.pending: list = []

    def keep(self, words) -> None:
        for w in words or ():
            d = w.as_dict()
            d["start"] = round(d["start"] + self.t0, 4)
            d["end"] = round(d["end"] + self.t0, 4)
            if d["text_start"] is not None:
                d["text_start"] += self.c0
                d["text_end"] += self.c0
            self.pending.append(d)

    async def send(self) -> None:
        if self.pending:
            words, self.pending = self.pending, []
            await self.session.send_json({"type": "audio.words", **self.base, "words": words})


def _open_text(plan, seed: int):
    """A request of ``plan``'s model whose text is pushed as it comes
    (:meth:`vocalis.api.TTS.open_text`). Raises APIError 400 when the model or the options
    take whole texts only."""
    options = {k: v for k, v in plan.options.items() if k != "normalize"}
    try:
        return plan.hosted.tts.open_text(plan.voice, seed, plan.speed,
                                         word_timestamps=plan.word_timestamps, live=True,
                                         **options)
    except InputError as e:
        if e.param == "input":  # the model takes whole texts
            raise APIError(400, f"{e}; here: split_granularity 'sentence'",
                           param="split_granularity", code="unsupported_value") from None
        raise APIError(400, str(e), param=e.param, code=e.code) from None


def _shown(value) -> str:
    return json.dumps(value)[:40]


async def serve(ws: WebSocket, state) -> None:
    """Handle one connection to :data:`PATH` (the route calls this)."""
    if not speech.authorized(ws.scope, state.api_key):
        await ws.send_denial_response(errors.error_response(
            401, "missing or wrong API key: send the header Authorization: Bearer KEY",
            code="invalid_api_key"))
        return
    if state.shutting_down:
        await ws.send_denial_response(errors.error_response(
            503, "the server is shutting down; retry on another instance", code="unavailable"))
        return
    await ws.accept()
    conn = StreamConnection(ws, state)
    gauge = state.metrics.websockets.labels("vllm-omni")
    gauge.inc()
    state.streams.add(conn)
    try:
        await conn.run()
    finally:
        state.streams.discard(conn)
        gauge.dec()
        if ws.application_state == WebSocketState.CONNECTED \
                and ws.client_state == WebSocketState.CONNECTED:
            try:
                await ws.close()
            except (RuntimeError, OSError, WebSocketDisconnect):
                pass
