"""A Wyoming protocol server (Home Assistant's local speech protocol) for one loaded model.

``vocalis wyoming --uri tcp://127.0.0.1:10200 --model M`` serves the model to Home
Assistant (Settings -> Devices & services -> Add integration -> Wyoming Protocol). Built on
the PyPI ``wyoming`` library (1.10.2): its ``AsyncServer`` / ``AsyncEventHandler`` and event
classes. Events answered:

* ``describe`` -> ``info``: one TTS program (the model) and its voices (``default``,
  Pocket TTS predefined voices of released models, Qwen3-TTS CustomVoice speakers, custom
  voices of the voices folder) with their languages (ISO 639-1 codes such as ``en``);
  ``supports_synthesize_streaming`` is true.
* ``synthesize`` -> ``audio-start``, ``audio-chunk``... (16-bit mono PCM at the model's
  sample rate, 24 kHz, one chunk per block the engine decodes), ``audio-stop``.
* ``synthesize-start``, ``synthesize-chunk``..., ``synthesize-stop`` (streaming text): text
  is buffered and every complete sentence is submitted to the engine once it has arrived
  and the sentence before it has been generated (one at a time: generation outruns
  playback, so the next is ready before the previous has played); audio starts before the
  text is complete and leaves in order; one
  ``audio-start`` / ``audio-stop`` per stream, then
  ``synthesize-stopped``. The plain ``synthesize`` a client sends inside a stream (for
  backwards compatibility, as the protocol asks) is ignored. A full stop ends a sentence
  only once the next character has arrived and does not continue it (see
  :func:`vocalis.text.sentences.split_sentences`: ``Dr. Smith``, ``e.g. bread``, ``am 3. Mai`` stay whole).
* ``ping`` -> ``pong``.

The ``voice`` of ``synthesize`` and ``synthesize-start``: ``name`` (a voice of ``info``),
``speaker`` (a Qwen3-TTS CustomVoice speaker) and ``language`` (an ISO code such as ``de`` or
``en-US``, or a language name: for Qwen3-TTS the language spoken and the language the text is
normalized in; for Pocket TTS it must be the model's). All three are honoured together. Note
that the ``wyoming`` library (1.10.2) keeps ``language`` only without ``name``:
``SynthesizeVoice(name="ryan", language="de").to_dict()`` is ``{"name": "ryan"}`` (the
language is never sent), and ``SynthesizeVoice.from_dict`` drops a ``language`` sent beside a
``name``. So a client built on the library's classes cannot send both (Home Assistant sends a
``name``, or a ``language`` alone); this server reads the event's own ``voice`` object, so a
client that writes ``{"name": "ryan", "language": "de"}`` itself gets German.

Text normalization (:mod:`vocalis.text.normalize`) is on by default, as in ``vocalis
serve``: each request (each sentence of a stream, once complete) is read in the voice's
language (Qwen3-TTS: the request's language, ``auto`` when none; Pocket TTS: its config's),
where that language is covered and the model is not exact; other text is left as written.
``normalize=False`` (``vocalis wyoming --no-normalize``) turns it off.

Every connection submits its requests to the model's one engine, so concurrent clients
share its batch. A client that disconnects mid-utterance has its engine request cancelled
(its row is freed within one engine step). Bad input (a malformed event, text over
``max_input_chars``, an unknown voice or language, a full queue) is answered with an
``error`` event (``text`` one line, ``code``) and the connection stays usable. That
includes events the library's reader would stop at (this server reads them itself,
:meth:`Handler._read_event`): a header line that is not UTF-8, not JSON or not an object
(``["synthesize"]``), or has no type, and data that is not a JSON object
(``invalid-event``). Where the framing is lost the error is sent and then the connection
closed: a header line over 64 KiB, a ``data_length``/``payload_length`` that is not a byte
count or over 1 MiB (``event-too-large``), data or payload that does not follow its header
(the client closed, or :data:`BODY_TIMEOUT_S` passed: ``incomplete-event``). A client's
mistake, or its connection reset, is one ``info`` log line, never a traceback. The server
never crashes on client input.

Seeds: ``seed=None`` (default) draws a random seed per engine request; with ``seed=N``
every engine request (a ``synthesize``, or one sentence of a stream) uses seed ``N``, so a
``synthesize`` gives the same audio as ``tts.synthesize(text, voice=..., seed=N)``.

Zeroconf announcement is not implemented (Home Assistant is given the host and port).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import threading
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.ping import Ping, Pong
from wyoming.server import AsyncEventHandler, AsyncServer
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

import vocalis
from vocalis import __version__
from vocalis.audio.wav import float_to_int16
from vocalis.engine import types as ev_types
from vocalis.errors import InputError, VocalisError
from vocalis.options import check_seed
from vocalis.server.app import served_model_name
from vocalis.server.errors import APIError
from vocalis.server.run import voices_folder
from vocalis.server.voices import VoiceStore
from vocalis.text.normalize import warm as warm_normalization
from vocalis.text.sentences import SentenceBuffer, split_sentences

log = logging.getLogger("vocalis.wyoming")

DEFAULT_URI = "tcp://127.0.0.1:10200"
DEFAULT_MAX_INPUT_CHARS = 4096
MAX_PENDING_EVENTS = 1024  # events a connection may queue while its audio is produced
MAX_EVENT_BYTES = 1 << 20  # data + payload of one event: clients send text, never audio
BODY_TIMEOUT_S = 10.0  # the data and payload a header announces must follow within this
SAMPLE_WIDTH = 2  # bytes: 16-bit PCM
CHANNELS = 1

# Language names (Pocket TTS config prefixes, Qwen3-TTS language keys) -> ISO 639-1 codes.
LANGUAGE_CODES = {
    "english": "en", "french": "fr", "german": "de", "italian": "it", "portuguese": "pt",
    "spanish": "es", "dutch": "nl", "chinese": "zh", "japanese": "ja", "korean": "ko",
    "russian": "ru",
}

class WyomingError(Exception):
    """Answered as an ``error`` event (``text``, ``code``); the connection goes on."""

    def __init__(self, text: str, code: str):
        super().__init__(text)
        self.text = " ".join(str(text).split())
        self.code = code


class _BadEvent(Exception):
    """An event that cannot be read, but whose bytes were all consumed: answered with an
    ``error`` event, the connection goes on."""

    def __init__(self, text: str, code: str = "invalid-event"):
        super().__init__(text)
        self.error = WyomingError(text, code)


class _Unframed(_BadEvent):
    """The stream cannot be read on (where the next event starts is unknown, or the bytes
    announced never came): answered with an ``error`` event, then the connection closes."""


def _language_code(name: str) -> str:
    return LANGUAGE_CODES.get(name.lower(), name.lower())


@dataclass
class _Choice:
    """What a request speaks with: the resolved voice, the engine options and whether its
    text is normalized."""

    voice: object
    options: dict = field(default_factory=dict)
    normalize: bool = False


class WyomingTTS:
    """The shared state of a Wyoming server: the model, its voices, seed and limits.

    Args:
        tts: a loaded model (:func:`vocalis.load`); its engine is shared by all clients.
        voices_dir: folder of custom voices (:class:`vocalis.server.voices.VoiceStore`).
        default_voice: the voice ``default`` speaks with (name, speaker, audio file or
            ``.safetensors``); default: the model's default voice or first speaker.
        seed: every engine request's seed (reproducible output); None = random per request.
        max_input_chars: longest ``synthesize`` text and ``synthesize-chunk`` accepted; a
            streamed sentence longer than this is cut at a space.
        options: engine options added to every request (e.g. ``max_frames``,
            ``max_new_tokens``; see ``tts.submit``).
        normalize: read numbers, dates, money, units and abbreviations as words
            (:mod:`vocalis.text.normalize`) in the request's language where it is covered
            and the model is not exact (as ``vocalis serve`` does by default); False leaves
            every text as written.

    Raises:
        InputError: a Qwen3-TTS VoiceDesign model (needs instructions, which the protocol
            cannot carry), a model with no voice to speak with, bad limits.
        VoiceError: ``default_voice`` unusable.
    """

    def __init__(self, tts, voices_dir: str | Path, default_voice: str | None = None,
                 seed: int | None = None, max_input_chars: int = DEFAULT_MAX_INPUT_CHARS,
                 options: dict | None = None, normalize: bool = True):
        if isinstance(max_input_chars, bool) or not isinstance(max_input_chars, int) \
                or max_input_chars < 1:
            raise InputError(f"max_input_chars must be an integer >= 1, got {max_input_chars!r}")
        seed = check_seed(seed)
        if not isinstance(normalize, bool):
            raise InputError(f"normalize must be true or false, got {normalize!r}")
        self.tts = tts
        self.seed = seed
        self.max_input_chars = max_input_chars
        self.options = tts.family.options.check(dict(options or {}), tts.info.name)
        self.normalize = normalize
        if normalize:  # build the rules now, not on the first request
            warm_normalization()
        info = tts.info
        if not info.needs_voice:
            raise InputError(f"{info.name} is a {info.title} model: it needs a voice description "
                             "(instructions), which the Wyoming protocol cannot carry; serve a "
                             "model with voices")
        try:
            self.voices = VoiceStore(tts, voices_dir, default_voice)
        except APIError as e:  # pragma: no cover - the store raises VocalisError at start-up
            raise InputError(e.message) from None
        if not self.voice_ids():
            raise InputError(f"{self.model_name} has no voice to speak with: give --voice (an audio "
                             "file or a .safetensors voice) or add custom voices to --voices-dir")

    # ------------------------------------------------------------------ description

    @property
    def model_name(self) -> str:
        """The released model's id, else its folder's name (never a path)."""
        return served_model_name(self.tts)

    def _language_names(self) -> list[str]:
        """The model's language names: those a request may choose, else its one language."""
        info = self.tts.info
        names = [n for n in info.languages if n != "auto"]
        return names or [info.language]

    def languages(self) -> list[str]:
        """ISO 639-1 codes of the model's languages."""
        return [_language_code(n) for n in self._language_names()]

    def voice_ids(self) -> list[str]:
        return [v["id"] for v in self.voices.list()]

    def info(self) -> Info:
        """The ``info`` event: one TTS program, the model, with its voices."""
        langs = self.languages()
        family = self.tts.family
        attribution = Attribution(name=f"{family.author} ({family.title})", url=family.url)
        voices = []
        for v in self.voices.list():
            kind = v.get("type", "custom")
            desc = {"default": "the server's default voice",
                    "predefined": "built-in voice"}.get(kind, "custom voice")
            voices.append(TtsVoice(name=v["id"], attribution=attribution, installed=True,
                                   description=f"{v['id']} ({desc})", version=None,
                                   languages=list(langs)))

        program = TtsProgram(name=self.model_name, attribution=attribution, installed=True,
                             description=f"vocalis {family.title} {self.model_name}",
                             version=__version__, voices=voices,
                             supports_synthesize_streaming=True)
        return Info(tts=[program])

    # ------------------------------------------------------------------ requests

    def choose(self, sel: SynthesizeVoice | None) -> _Choice:
        """The voice and options of a request's ``voice`` field (blocking: may load a voice).

        ``name``: a voice id of ``info``; ``speaker``: one of the model's built-in voices
        (e.g. a Qwen3-TTS CustomVoice speaker; used instead of ``name``); ``language``: an ISO code (``en``, ``en-US``) or a language name,
        with or without ``name`` (see the module docstring: the ``wyoming`` library's
        ``SynthesizeVoice`` does not carry it beside a name; :func:`_parse` restores it from
        the event).

        Raises:
            WyomingError: unknown voice, speaker or language.
        """
        name = sel.name if sel is not None else None
        speaker = sel.speaker if sel is not None else None
        language = sel.language if sel is not None else None
        for what, value in (("name", name), ("speaker", speaker), ("language", language)):
            if value is not None and not isinstance(value, str):
                raise WyomingError(f"voice {what} must be a string", "invalid-event")
        options = dict(self.options)
        info = self.tts.info
        if speaker is not None:
            if not (info.voices and info.voices_case_insensitive):
                raise WyomingError(f"{self.model_name} has no speakers: choose a voice by name "
                                   f"({', '.join(self.voice_ids()[:12])})", "voice-not-found")
            name = speaker
        known = self.voice_ids()
        # no voice named: the default voice, or the first voice when there is none
        vid = name if name is not None else "default" if "default" in known else known[0]
        key = info.canonical_voice(vid)
        if key not in known:
            shown = ", ".join(known[:12]) + (f" and {len(known) - 12} more" if len(known) > 12 else "")
            raise WyomingError(f"unknown voice {vid[:64]!r}: {self.model_name} has {shown}",
                               "voice-not-found")
        if language is not None:
            options.update(self._language_option(language))
        try:
            voice = self.voices.resolve(key)
        except APIError as e:
            raise WyomingError(e.message, "voice-not-found") from None
        except VocalisError as e:
            raise WyomingError(str(e), "voice-error") from None
        return _Choice(voice, options, self.normalizes(options))

    def normalizes(self, options: dict) -> bool:
        """Whether a request with these engine options is normalized (see ``normalize``)."""
        return self.normalize and self.tts.normalizes(options)

    def _language_option(self, language: str) -> dict:
        """The request option that makes the model speak ``language`` (an ISO code or a
        language name): the family's language option, or nothing for a model with one
        language (when it is that one)."""
        info = self.tts.info
        code = language.strip().lower().replace("_", "-").split("-")[0]
        langs = self.languages()
        if code in langs:
            if info.language_option is None:
                return {}
            names = {_language_code(n): n for n in self._language_names()}
            return {info.language_option: names[code]}
        by_name = LANGUAGE_CODES.get(code)
        if by_name in langs:
            return self._language_option(by_name)
        if code == "auto" and "auto" in info.languages:
            return {}
        raise WyomingError(f"unsupported language {language[:32]!r}: {self.model_name} speaks "
                           f"{', '.join(langs)}", "language-not-supported")

    def check_text(self, text) -> str:
        if not isinstance(text, str):
            raise WyomingError("text must be a string", "invalid-event")
        if len(text) > self.max_input_chars:
            raise WyomingError(f"text is {len(text)} characters; this server takes at most "
                               f"{self.max_input_chars} per event: split it", "text-too-long")
        return text

    # ------------------------------------------------------------------ serving

    def handler(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Handler:
        return Handler(self, reader, writer)

    async def start(self, uri: str) -> AsyncServer:
        """Start serving ``uri`` (``tcp://HOST:PORT``, ``unix://PATH``) without blocking.

        Raises:
            InputError: a bad URI or an address that cannot be listened on.
        """
        server = server_from_uri(uri)
        try:
            await server.start(self.handler)
        except OSError as e:
            raise _cannot_listen(uri, e) from None
        return server


def _cannot_listen(uri: str, e: OSError) -> InputError:
    why = e.strerror or (os.strerror(e.errno) if e.errno else str(e))
    return InputError(f"cannot listen on {uri}: {why} (is another server running there? pick "
                      "another port)")


def check_listenable(uri: str) -> None:
    """Bind (and release) ``uri``'s TCP address once, so that a busy port fails before the
    model loads, in one line. A Unix socket path is left to :meth:`WyomingTTS.start`.

    Raises: InputError (a bad URI, an unknown host, an address in use or not allowed)."""
    server = server_from_uri(uri)
    host, port = getattr(server, "host", None), getattr(server, "port", None)
    if host is None or not port:
        return
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise InputError(f"cannot listen on {uri}: unknown host {host!r} ({e.strerror})") from None
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server does
        try:
            sock.bind(addr)
        except OSError as e:
            raise _cannot_listen(uri, e) from None


def server_from_uri(uri: str) -> AsyncServer:
    """The library's server for ``uri``; raises InputError for a bad one."""
    bad = InputError(f"bad --uri {uri[:100]!r}: use tcp://HOST:PORT or unix://PATH "
                     f"(e.g. {DEFAULT_URI})")
    try:
        server = AsyncServer.from_uri(uri)
    except ValueError:
        raise bad from None
    if not hasattr(server, "host") and not hasattr(server, "socket_path"):
        raise bad  # stdio:// serves one client: not for a shared server
    return server


def bound_port(server: AsyncServer) -> int | None:
    """The TCP port a started server listens on (useful with port 0)."""
    inner = getattr(server, "_server", None)
    if inner is None or not inner.sockets:
        return None
    return inner.sockets[0].getsockname()[1]


class _Stream:
    """A streaming synthesis: the text not yet a sentence, and the sentences whose audio is
    still to send (``pending``, in order: engine requests, or texts the forwarder submits
    once the request before has been generated; ``None`` ends it)."""

    def __init__(self, choice: _Choice, max_chars: int):
        self.choice = choice
        self.text = SentenceBuffer(max_chars)  # the text not yet a sentence
        self.failed = False
        self.pending: asyncio.Queue = asyncio.Queue()
        self.forwarder: asyncio.Task | None = None
        self.requests: list = []  # every engine request of the stream (to cancel on exit)
        # (sentence, request): a rest that may end a sentence, generated before the next
        # chunk tells (SentenceBuffer.tentative); sent when confirmed, else cancelled
        self.guess: tuple | None = None

    def cancel(self) -> None:
        if self.forwarder is not None and not self.forwarder.done():
            self.forwarder.cancel()
        for req in self.requests:
            req.cancel()


class Handler(AsyncEventHandler):
    """One client connection. Events are queued and handled in order by a worker task, so
    that the library's read loop sees the client leave at once (then the worker and its
    engine request are cancelled)."""

    def __init__(self, state: WyomingTTS, reader, writer):
        super().__init__(reader, writer)
        self.state = state
        self.rate = state.tts.sample_rate
        self._inbox: asyncio.Queue[Event | WyomingError] = asyncio.Queue()
        self._worker: asyncio.Task | None = None
        self._stream: _Stream | None = None
        self._audio_started = False

    async def run(self) -> None:
        """The library's read loop (``AsyncEventHandler.run``) with our reader
        (:meth:`_read_event`): an event that cannot be read is answered with an ``error``
        event in its turn and the connection goes on, unless the framing is lost (then the
        error is sent and the connection closed); a client's mistake or its connection
        reset is one log line, never a traceback."""
        self._is_running = True
        peer = _peer(self.writer)
        try:
            while self._is_running:
                try:
                    event = await self._read_event()
                except _Unframed as e:
                    if self._is_running:  # not the server's own stop() cutting a read short
                        log.info("wyoming: client %s: %s; closing its connection", peer,
                                 e.error.text)
                        await self._error(e.error)
                    break
                except _BadEvent as e:
                    log.info("wyoming: client %s: %s", peer, e.error.text)
                    if not await self.handle_event(e.error):
                        break
                    continue
                except (ConnectionError, OSError) as e:
                    log.info("wyoming: client %s left: %s", peer,
                             e.strerror or type(e).__name__)
                    break
                if event is None or not await self.handle_event(event):
                    break
        except Exception as e:  # a bug of ours: logged once, the server goes on
            log.error("wyoming: connection of client %s failed", peer, exc_info=e)
        finally:
            await self.disconnect()
            self.writer.close()

    async def _read_event(self) -> Event | None:
        """The next event (None at the end of the stream), as the library's reader reads it
        (a JSON header line; ``data_length`` bytes of JSON data merged into its ``data``;
        ``payload_length`` bytes of payload), checked.

        Raises:
            _BadEvent: a line that is not UTF-8, not JSON, not an object, or has no type; data
                that is not a JSON object (the connection goes on).
            _Unframed: a line over the reader's limit, a length that is not a count or is
                over :data:`MAX_EVENT_BYTES`, data or payload that does not arrive (the
                client closed, or :data:`BODY_TIMEOUT_S` passed).
            ConnectionError: the client reset the connection.
        """
        while True:
            try:
                line = await self.reader.readline()
            except ValueError:  # asyncio's LimitOverrunError, as readline raises it
                raise _Unframed("an event header line is longer than 64 KiB",
                                "event-too-large") from None
            if not line:
                return None
            if not line.endswith(b"\n"):
                raise _Unframed("the connection ended in the middle of an event header line",
                                "incomplete-event")
            if line.strip():
                break  # an empty line: nothing to answer
        try:
            header = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise _BadEvent("an event header line is not valid UTF-8") from None
        except json.JSONDecodeError as e:
            raise _BadEvent(f"an event header line is not JSON ({e.msg} at column "
                            f"{e.colno})") from None
        if not isinstance(header, dict):
            raise _BadEvent('an event header must be a JSON object like {"type": "synthesize", '
                            f'...}}, got {_json_kind(header)}')
        sizes = []
        for name in ("data_length", "payload_length"):
            n = header.get(name)
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
                raise _Unframed(f"{name} must be a byte count (an integer >= 0), got "
                                f"{_json_kind(n)}: where the next event starts is unknown")
            sizes.append(n or 0)
        kind = header.get("type")
        what = f"{kind[:40]!r} event" if isinstance(kind, str) else "event"
        if sum(sizes) > MAX_EVENT_BYTES:
            raise _Unframed(f"the {what} announces {sum(sizes)} bytes of data and payload; this "
                            f"server takes at most {MAX_EVENT_BYTES}", "event-too-large")
        data_bytes = await self._read_body(sizes[0], f"data of the {what}")
        payload = await self._read_body(sizes[1], f"payload of the {what}")
        if not isinstance(kind, str) or not kind:
            raise _BadEvent("an event header has no 'type' (a string such as \"synthesize\")")
        data = header.get("data") or {}
        if not isinstance(data, dict):
            raise _BadEvent(f"malformed {what}: its data is {_json_kind(data)}, not an object")
        if data_bytes:
            try:
                extra = json.loads(data_bytes.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise _BadEvent(f"malformed {what}: its {sizes[0]} bytes of data are not UTF-8 "
                                "JSON") from None
            if not isinstance(extra, dict):
                raise _BadEvent(f"malformed {what}: its data is {_json_kind(extra)}, not an "
                                "object")
            data = {**data, **extra}
        return Event(type=kind, data=data, payload=payload or None)

    async def _read_body(self, size: int, what: str) -> bytes:
        """``size`` bytes that a header announced, within :data:`BODY_TIMEOUT_S`.

        Raises _Unframed when they do not come (the client closed, or took too long)."""
        if not size:
            return b""
        try:
            return await asyncio.wait_for(self.reader.readexactly(size), BODY_TIMEOUT_S)
        except asyncio.IncompleteReadError as e:
            raise _Unframed(f"the connection ended after {len(e.partial)} of the {size} bytes "
                            f"of {what}", "incomplete-event") from None
        except asyncio.TimeoutError:
            raise _Unframed(f"the {size} bytes of {what} did not arrive within "
                            f"{BODY_TIMEOUT_S:g} s", "incomplete-event") from None

    async def handle_event(self, event: Event | WyomingError) -> bool:
        """Queue ``event`` (or the error that answers an unreadable one) for the worker,
        which handles them in order."""
        if self._inbox.qsize() >= MAX_PENDING_EVENTS:
            await self._error(WyomingError(f"more than {MAX_PENDING_EVENTS} events waiting: "
                                           "closing the connection", "too-many-events"))
            return False
        self._inbox.put_nowait(event)
        if self._worker is None:
            self._worker = asyncio.create_task(self._work(), name="vocalis wyoming worker")
        return True

    async def disconnect(self) -> None:
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        if self._stream is not None:
            self._stream.cancel()

    async def _work(self) -> None:
        while True:
            event = await self._inbox.get()
            if isinstance(event, WyomingError):  # an event that could not be read: in turn
                await self._error(event)
                continue
            try:
                await self._dispatch(event)
            except WyomingError as e:
                await self._error(e)
            except (ConnectionError, OSError):
                return  # the client is gone; disconnect() cancels the rest
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.error("wyoming: %s event failed", event.type[:40], exc_info=e)
                await self._error(WyomingError(f"internal error: {type(e).__name__}",
                                               "internal-error"))

    async def _error(self, e: WyomingError) -> None:
        try:
            await self.write_event(Error(text=e.text, code=e.code).event())
        except (ConnectionError, OSError):
            pass

    async def _dispatch(self, event: Event) -> None:
        st = self.state
        if Describe.is_type(event.type):
            info = await asyncio.to_thread(st.info)
            await self.write_event(info.event())
        elif Ping.is_type(event.type):
            await self.write_event(Pong(text=_parse(Ping, event).text).event())
        elif Synthesize.is_type(event.type):
            if self._stream is not None:
                return  # sent inside a stream for backwards compatibility: ignored
            syn = _parse(Synthesize, event)
            text = st.check_text(syn.text)
            choice = await asyncio.to_thread(st.choose, syn.voice)
            try:
                await self._speak(text, choice)
            except WyomingError:
                self._audio_started = False
                raise
            await self._stop_audio()
        elif SynthesizeStart.is_type(event.type):
            start = _parse(SynthesizeStart, event)
            if self._stream is not None:  # a new stream replaces an unfinished one
                self._stream.cancel()
            self._stream = None
            self._audio_started = False
            choice = await asyncio.to_thread(st.choose, start.voice)
            self._stream = _Stream(choice, st.max_input_chars)
        elif SynthesizeChunk.is_type(event.type):
            stream = self._stream
            if stream is None or stream.failed:
                if stream is None:
                    raise WyomingError("synthesize-chunk outside a stream: send synthesize-start "
                                       "first", "no-stream")
                return
            try:
                text = st.check_text(_parse(SynthesizeChunk, event).text)
                await self._speak_stream(stream.text.feed(text), stream)
                await self._guess(stream)
            except WyomingError:
                stream.failed = True
                stream.cancel()
                self._audio_started = False
                raise
        elif SynthesizeStop.is_type(event.type):
            stream, self._stream = self._stream, None
            if stream is None:
                raise WyomingError("synthesize-stop outside a stream: send synthesize-start "
                                   "first", "no-stream")
            if stream.failed:
                return
            try:
                await self._speak_stream(stream.text.flush(), stream)
                stream.pending.put_nowait(None)
                if stream.forwarder is not None:
                    await stream.forwarder
            except WyomingError:
                stream.cancel()
                self._audio_started = False
                raise
            if stream.failed:  # the forwarder sent the error event
                return
            await self._stop_audio(force=True)
            await self.write_event(SynthesizeStopped().event())
        # other event types are not for a TTS server: ignored, as other Wyoming servers do

    async def _speak_stream(self, sentences: list, stream: _Stream) -> None:
        """Queue each complete sentence; the stream's forwarder submits it once the one
        before has been generated (one generated at a time, as the WebSocket endpoint
        does: a second beside it would slow it down) and sends their audio in order. A
        guess (:meth:`_guess`) is confirmed by its own sentence coming first (its request
        then takes that sentence's place) or cancelled."""
        guess, stream.guess = stream.guess, None
        for i, sentence in enumerate(sentences):
            if guess is not None and i == 0 and sentence == guess[0]:
                self._send_in_turn(guess[1], stream)
                guess = None
            elif any(c.isalnum() for c in sentence.text):  # else nothing to speak ("...")
                self._send_in_turn(sentence.text, stream)
        if guess is not None:  # the text went on otherwise ("etc. and"): never sent
            guess[1].cancel()

    def _send_in_turn(self, req, stream: _Stream) -> None:
        """Queue ``req`` (an engine request, or a sentence's text) for the forwarder."""
        stream.pending.put_nowait(req)
        if stream.forwarder is None:
            stream.forwarder = asyncio.create_task(self._forward_stream(stream))

    async def _guess(self, stream: _Stream) -> None:
        """Generate the text that stops at ``.``/``!``/``?`` as a sentence now, before the
        next chunk confirms its end (its first audio then does not wait for that chunk)."""
        s = stream.text.tentative()
        if s is not None and any(c.isalnum() for c in s.text):
            req = await self._submit(s.text, stream.choice)
            stream.requests.append(req)
            stream.guess = (s, req)

    async def _forward_stream(self, stream: _Stream) -> None:
        """Send the audio of the stream's requests in order. A failure is sent as an error
        event and ends the stream; any way out but the end cancels the requests left."""
        done = False
        try:
            while (req := await stream.pending.get()) is not None:
                if isinstance(req, str):  # the request before it is generated: its turn
                    req = await self._submit(req, stream.choice)
                    stream.requests.append(req)
                await self._forward(req)
            done = True
        except WyomingError as e:
            stream.failed = True
            self._audio_started = False
            await self._error(e)
        except (ConnectionError, OSError):
            stream.failed = True
        finally:
            if not done:
                for req in stream.requests:
                    req.cancel()

    async def _stop_audio(self, force: bool = False) -> None:
        if force and not self._audio_started:
            await self._start_audio()
        if self._audio_started:
            self._audio_started = False
            await self.write_event(AudioStop().event())

    async def _start_audio(self) -> None:
        if not self._audio_started:
            self._audio_started = True
            await self.write_event(AudioStart(rate=self.rate, width=SAMPLE_WIDTH,
                                              channels=CHANNELS).event())

    async def _speak(self, text: str, choice: _Choice) -> None:
        """Submit one engine request and send its audio as it is decoded."""
        await self._forward(await self._submit(text, choice))

    async def _submit(self, text: str, choice: _Choice):
        """One engine request (submitted off the event loop); a client leaving meanwhile
        cancels it once submitted.

        Raises:
            WyomingError: the engine refused it (``busy``: queue full; ``bad-request``)."""
        st = self.state
        loop = asyncio.get_running_loop()
        kw = {"normalize": True, **choice.options} if choice.normalize else choice.options
        # live: a satellite plays the audio as it comes (never held back for a burst)
        fut = loop.run_in_executor(None, partial(st.tts.submit, text, choice.voice, st.seed,
                                                 live=True, **kw))
        try:
            req = await asyncio.shield(fut)
        except asyncio.CancelledError:  # the client left while we submitted: free the row
            fut.add_done_callback(lambda f: f.cancelled() or f.exception() is not None
                                  or f.result().cancel())
            raise
        except VocalisError as e:
            code = "busy" if e.code == "capacity_exceeded" else "bad-request"
            raise WyomingError(str(e), code) from None
        return req

    async def _forward(self, req) -> None:
        """Send ``req``'s audio as it is decoded (after ``audio-start`` if not yet sent);
        cancels it unless it finished.

        Raises:
            WyomingError: the request failed (``synthesis-failed``)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        finished = False
        threading.Thread(target=_pump, args=(req, loop, queue), daemon=True,
                         name=f"vocalis-wyoming-{getattr(req, 'id', '?')}").start()
        try:
            await self._start_audio()
            while True:
                kind, value = await queue.get()
                if kind == "audio":
                    await self.write_event(AudioChunk(rate=self.rate, width=SAMPLE_WIDTH,
                                                      channels=CHANNELS, audio=value).event())
                elif kind == "done":
                    finished = True
                    return
                else:
                    finished = True
                    raise WyomingError(f"synthesis failed: {value}", "synthesis-failed")
        finally:
            if not finished:
                req.cancel()


def _pump(req, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue) -> None:
    """Engine events -> (kind, value) on the event loop: ("audio", int16 bytes),
    ("done", None), ("failed", message)."""

    def put(item) -> bool:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
            return True
        except RuntimeError:  # the loop is closed: the server is gone
            req.cancel()
            return False

    try:
        for ev in req.events():
            if isinstance(ev, ev_types.AudioChunk):
                data = float_to_int16(np.asarray(ev.samples)).astype("<i2", copy=False).tobytes()
                if data and not put(("audio", data)):
                    return
            elif isinstance(ev, ev_types.Finished):
                put(("done", None))
                return
            elif isinstance(ev, ev_types.Failed):
                put(("failed", str(ev.error) or type(ev.error).__name__))
                return
    except BaseException as e:  # noqa: BLE001 - report, never hang the connection
        req.cancel()
        put(("failed", type(e).__name__))


def _peer(writer) -> str:
    """The client's address for log lines (``host:port``, or ``unix`` for a Unix socket)."""
    try:
        peer = writer.get_extra_info("peername")
    except Exception:  # noqa: BLE001 - only for a log line
        peer = None
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return "unix" if peer is not None else "?"


def _json_kind(value) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(value), "a value")


def _parse(cls, event: Event):
    data = event.data
    if not isinstance(data, dict):
        raise WyomingError(f"malformed {event.type[:40]} event: data is not an object",
                           "invalid-event")
    if data.get("voice") is not None and not isinstance(data["voice"], dict):
        raise WyomingError(f"malformed {event.type[:40]} event: voice must be an object "
                           "(name, language, speaker)", "invalid-event")
    if data.get("text_format") not in (None, "text"):
        raise WyomingError(f"text_format {str(data['text_format'])[:16]!r} is not supported: "
                           "send plain text", "unsupported-format")
    try:
        parsed = cls.from_event(event)
    except KeyError as e:  # a required field is absent (synthesize without "text")
        raise WyomingError(f"malformed {event.type[:40]} event: it has no {e.args[0]!r} field"
                           [:300], "invalid-event") from None
    except (TypeError, AttributeError, ValueError) as e:
        raise WyomingError(f"malformed {event.type[:40]} event: {type(e).__name__} {e}"[:300],
                           "invalid-event") from None
    # wyoming 1.10.2: SynthesizeVoice.from_dict reads "language" only when there is no "name";
    # a client that sent both gets both (choose() checks its type)
    voice = data.get("voice")
    if isinstance(voice, dict) and voice.get("name") is not None and voice.get("language") is not None \
            and getattr(parsed, "voice", None) is not None:
        parsed.voice.language = voice["language"]
    return parsed


def run(model: str, uri: str = DEFAULT_URI, *, voice: str | None = None,
        voices_dir: str | Path | None = None, max_batch: int = 16, threads: int | None = None,
        seed: int | None = None, device: str = "cpu",
        max_input_chars: int = DEFAULT_MAX_INPUT_CHARS, on_ready=None, normalize: bool = True,
        load_options: dict | None = None) -> None:
    """Load ``model`` and serve it over the Wyoming protocol at ``uri`` until interrupted;
    ``normalize``: see :class:`WyomingTTS`; ``load_options``: the family's load options
    (:func:`vocalis.load`).

    Raises:
        InputError: a bad URI, seed or limit, or an address that cannot be listened on;
        the errors of :func:`vocalis.load` and :class:`WyomingTTS`.
    """
    check_listenable(uri)  # a bad URI or a busy port fails before the model loads
    seed = check_seed(seed)
    vdir = voices_folder(voices_dir)
    tts = vocalis.load(model, device=device, threads=threads, max_batch=max_batch,
                       **(load_options or {}))
    try:
        state = WyomingTTS(tts, vdir, default_voice=voice, seed=seed,
                           max_input_chars=max_input_chars, normalize=normalize)

        async def main() -> None:
            server = await state.start(uri)
            port = bound_port(server)
            log.info("wyoming: serving %s at %s%s, voices in %s, max batch %d, text normalization %s",
                     state.model_name, uri, f" (port {port})" if port is not None else "", vdir, max_batch,
                     "on" if normalize else "off")
            if on_ready is not None:
                on_ready(uri)
            stopping = asyncio.Event()
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows
                asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
            try:
                await stopping.wait()
                log.info("wyoming: stopping (SIGTERM)")
            finally:
                await server.stop()

        try:
            asyncio.run(main())
        except KeyboardInterrupt:
            pass
    finally:
        tts.close()


__all__ = ["Handler", "WyomingTTS", "bound_port", "run", "server_from_uri", "split_sentences"]
