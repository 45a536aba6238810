"""Public Python API: :func:`load` a model of any family, then speak with :class:`TTS`.

    >>> import vocalis
    >>> tts = vocalis.load("pocket-tts")                 # or "qwen3-tts/0.6b-customvoice", a path
    >>> voice = tts.voice("alba")                        # name, audio file, or .safetensors
    >>> audio = tts.synthesize("Hello there.", voice=voice, seed=42)
    >>> audio.samples, audio.sample_rate                 # float32 [T] mono, 24000 Hz
    >>> for chunk in tts.stream("Hello there.", voice=voice, seed=42): ...

A model id belongs to a model family (:mod:`vocalis.families`: Pocket TTS, Qwen3-TTS, or a
registered plug-in); ``vocalis models list`` lists the released ids. Each family declares
its request options (``tts.family.options``); :class:`TTS` checks every request against
them, and against the family's rules, before any model work.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from vocalis import families
from vocalis.audio.stretch import Stretcher
from vocalis.engine.openmp import frees_thread_pool, set_threads
from vocalis.engine.scheduler import Engine, make_job
from vocalis.engine.types import AudioChunk, Failed, Finished, Request, RequestStats
from vocalis.errors import InputError, ModelNotFound, VocalisError
from vocalis.family import LoadedModel, LoadSettings, ModelFamily, ModelInfo, Voice
from vocalis.options import (
    QUANTIZE_MODES,
    OptionSchema,
    UnknownOption,
    check_threads,
    check_unicode,
    did_you_mean,
    new_seed,
    quantize_mode,
)
from vocalis.text.normalize import normalize as normalize_text
from vocalis.text.normalize import supports
from vocalis.timing import Word, WordTimer


@dataclass
class Audio:
    """Result of :meth:`TTS.synthesize`.

    ``samples``: float32 mono ``[T]`` in [-1, 1] (not clipped); ``sample_rate`` in Hz;
    ``ttfa_ms``: time from the call to the first decoded audio; ``wall_ms``: total time;
    ``chunks``: per text chunk, its prepared text, token ids, frames and EOS step;
    ``words``: with ``word_timestamps=True``, every word of the text with its start and end
    in ``samples`` (:class:`vocalis.timing.Word`, seconds), else None; ``seed``: the seed
    it was made with, the one drawn when none was given (the same seed gives the same audio
    again).
    """

    samples: np.ndarray
    sample_rate: int
    ttfa_ms: float = 0.0
    wall_ms: float = 0.0
    chunks: list[dict] = field(default_factory=list)
    words: list[Word] | None = None
    seed: int | None = None

    @property
    def duration_s(self) -> float:
        return self.samples.shape[0] / self.sample_rate


def check_device(device: str) -> torch.device:
    """``device`` as a ``torch.device`` (``cpu``, ``cuda``, ``cuda:N``).

    Raises InputError: unknown, or CUDA without a CUDA build and device."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InputError(f"unknown device {device!r}: use cpu, cuda or cuda:N",
                         param="device") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} requested but CUDA is not available: use --device cpu",
                         param="device")
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"device {device!r} is not supported: use cpu or cuda", param="device")
    return dev


class _Stretched:
    """A request whose audio goes through a :class:`Stretcher` as it streams (``speed``).
    Everything but :meth:`events` is the engine request's; at the end ``stats.audio_s``
    becomes the stretched duration."""

    def __init__(self, request: Request, stretcher: Stretcher):
        self._request = request
        self._stretcher = stretcher

    def __getattr__(self, name):
        return getattr(self._request, name)

    def events(self, timeout: float | None = None):
        last = 0
        words: list | None = None  # word timestamps not handed on yet (no audio left)
        for ev in self._request.events(timeout):
            if isinstance(ev, AudioChunk):
                last = ev.chunk
                if ev.words is not None:
                    words = (words or []) + ev.words
                y = self._stretcher.process(ev.samples)
                if y.shape[0]:
                    yield AudioChunk(y, ev.chunk, ev.frame, words=words)
                    words = None
                continue
            if isinstance(ev, Finished) and not ev.stats.cancelled:
                y = self._stretcher.finish()
                if y.shape[0]:
                    yield AudioChunk(y, last, -1, words=words)
                    words = None
                ev.stats.audio_s = self._stretcher.n_out / self._stretcher.sample_rate
            if isinstance(ev, Finished) and (words or ev.words):
                ev.words = (words or []) + (ev.words or [])
            yield ev


class _Timed:
    """A request whose audio events carry word timestamps (``word_timestamps=True``): each
    :class:`AudioChunk` the words that ended by then, ``Finished`` the rest
    (:class:`vocalis.timing.WordTimer`). Everything but :meth:`events` is the engine
    request's."""

    def __init__(self, request: Request, timer: WordTimer):
        self._request = request
        self._timer = timer

    def __getattr__(self, name):
        return getattr(self._request, name)

    def events(self, timeout: float | None = None):
        for ev in self._request.events(timeout):
            if isinstance(ev, AudioChunk):
                ev.words = self._timer.push(ev.samples, ev.chunk, ev.scores)
            elif isinstance(ev, Finished):
                ev.words = self._timer.finish(cut=ev.stats.cancelled)
            yield ev


class _FedTimed:
    """Word timestamps of a streamed-text request (:class:`TextRequest`): its words are
    known once its text is complete, so its frames are kept until then and timed at once
    (the words then come with the next event); from there on as :class:`_Timed`."""

    def __init__(self, request: Request, text: "TextRequest", decoder, speed: float):
        self._request, self._text, self._decoder, self._speed = request, text, decoder, speed

    def __getattr__(self, name):
        return getattr(self._request, name)

    def _timer(self) -> WordTimer:
        tts = self._text._tts
        text = self._text.text
        return WordTimer(text, tts.loaded.fed_word_chunks(text), self._decoder,
                         tts.sample_rate, self._speed)

    def events(self, timeout: float | None = None):
        held: list = []
        timer: WordTimer | None = None
        for ev in self._request.events(timeout):
            words: list = []
            if timer is None and (self._text.closed or isinstance(ev, (Finished, Failed))):
                timer = self._timer()
                for samples, chunk, scores in held:
                    words += timer.push(samples, chunk, scores)
                held = []
            if isinstance(ev, AudioChunk):
                if timer is None:
                    held.append((ev.samples, ev.chunk, ev.scores))
                else:
                    words += timer.push(ev.samples, ev.chunk, ev.scores)
                ev.words = words
            elif isinstance(ev, Finished):
                ev.words = words + timer.finish(cut=ev.stats.cancelled)
            yield ev


def _check_text_type(text) -> None:
    """Raises InputError: ``text`` is not a ``str`` (None included: the families' checks take
    None for a text still to be streamed in, and would call it empty)."""
    if not isinstance(text, str):
        raise InputError(f"text must be a string, got {type(text).__name__}", param="input")


def _check_live(live) -> None:
    """Raises InputError: ``live`` is not a bool."""
    if not isinstance(live, bool):
        raise InputError(f"live must be true or false, got {live!r}", param="live")


class TextRequest:
    """A request whose text arrives in pieces (:meth:`TTS.open_text`), e.g. the tokens of a
    language model as it writes them.

    :meth:`push` adds text, :meth:`close` ends it; :meth:`events` yields the engine's events
    (:class:`~vocalis.engine.types.AudioChunk`, then ``Finished`` or ``Failed``) once the
    request has started, which is as soon as its first part of text is final (for Qwen3-TTS,
    the first token that no later text can change: after the first word and the white
    space that follows it). The model waits for text it has not got, so the audio is that
    of the whole text given at once with the same seed. :meth:`cancel` stops it within one
    engine step. ``push`` and ``close`` may be called from any one thread; ``events`` from
    another."""

    def __init__(self, tts: "TTS", feed, seed: int, stretcher: Stretcher | None,
                 decoder=None, live: bool = False):
        self._tts, self._feed, self._seed, self._stretcher = tts, feed, seed, stretcher
        self._live = live  # TTS.submit's live
        self._decoder = decoder  # word timestamps asked for: the tokenizer's decoder
        self.closed = False  # the whole text has come (close() succeeded)
        self._lock = threading.Lock()
        self._started = threading.Event()  # set once started (or cancelled before)
        self._req = None
        self._cancelled = False
        self._error: VocalisError | None = None  # what ended it, if anything did

    @property
    def text(self) -> str:
        """The text pushed so far."""
        return self._feed.text

    @property
    def request(self):
        """The engine request (:class:`~vocalis.engine.types.Request`), None before start."""
        return self._req

    @frees_thread_pool  # its projection ran here: no second pool spinning beside the engine
    def push(self, text: str) -> None:
        """Add ``text`` (any piece: a token, a word, half a word).

        Raises InputError: ``text`` is not a string or not valid Unicode (the piece is
        refused, the request goes on); after :meth:`close`, or after an error that ended
        the request; past the model's most text (this ends the request: its row is freed
        and its events end, cancelled). CapacityError: the engine's queue is full when the
        request starts (it ends too)."""
        if not isinstance(text, str):
            raise InputError(f"text must be a string, got {type(text).__name__}", param="input")
        check_unicode(text, "text", "send the text as valid UTF-8", "input")
        with self._lock:
            if self._cancelled:
                return
            self._check_open()
            try:
                self._begin(self._feed.push(text))
            except VocalisError as e:  # too much text, a full queue: it ends here
                self._end(e)
                raise

    @frees_thread_pool
    def close(self) -> None:
        """The text is complete (the model may now end the speech).

        Raises InputError when the whole text has nothing to speak (the request ends: its
        events end, cancelled), or after an error that ended it."""
        with self._lock:
            if self._cancelled:
                return
            self._check_open()
            try:
                self._begin(self._feed.close())
            except VocalisError as e:
                self._end(e)
                raise
            self.closed = True

    def _check_open(self) -> None:
        if self._error is not None:
            raise InputError(f"this streamed request has ended ({self._error}): open another",
                             param="input")

    def _end(self, error: VocalisError) -> None:
        """An error ended the request: free its row, let :meth:`events` end."""
        self._error = error
        if self._req is not None:
            self._req.cancel()
            self._tts.engine.wake()
        self._started.set()

    def _begin(self, prepared) -> None:
        tts = self._tts
        if prepared is None:
            if self._req is not None:
                tts.engine.wake()  # a row may be waiting for this text
            return
        if tts._closed:
            raise InputError("this model was closed (TTS.close()): load it again", param="model")
        job = make_job(tts.engine_family, prepared.state, prepared.chunks, prepared.params,
                       self._seed, self._live)
        job.timestamps = self._decoder is not None
        req = tts.engine.submit(job)
        if self._decoder is not None:
            speed = 1.0 if self._stretcher is None else self._stretcher.speed
            req = _FedTimed(req, self, self._decoder, speed)
        self._req = req if self._stretcher is None else _Stretched(req, self._stretcher)
        self._started.set()

    def events(self, timeout: float | None = None):
        """Yield the request's events (as :meth:`~vocalis.engine.types.Request.events`),
        ending with ``Finished`` or ``Failed``; only a cancelled ``Finished`` when it was
        cancelled (or ended by an error) before it started. Read them once. ``timeout``:
        seconds to wait for the start and for each event (None = forever); raises
        ``TimeoutError``. Raises EventsAlreadyRead when they were read to their end (as
        :meth:`~vocalis.engine.types.Request.events`)."""
        if not self._started.wait(timeout):
            raise TimeoutError("the streamed text has not started a request yet")
        if self._req is None:
            yield Finished(RequestStats(request_id=-1, seed=self._seed, cancelled=True))
            return
        yield from self._req.events(timeout)  # (once: a second pass raises EventsAlreadyRead)

    def cancel(self) -> None:
        """Stop: no more text is taken, and a started request frees its row within one
        engine step (a waiting row within ``WAIT_POLL_S``)."""
        with self._lock:
            self._cancelled = True
            if self._req is not None:
                self._req.cancel()
                self._tts.engine.wake()
            self._started.set()


class TTS:
    """A loaded model of any family. Thread-safe: concurrent requests share one batch in
    the engine.

    ``family``: its :class:`~vocalis.family.ModelFamily` (``family.options``: the request
    options it takes); ``info``: what the model is and takes
    (:class:`~vocalis.family.ModelInfo`); ``model``: the family's model object;
    ``tuning``: the measured speed choices (:class:`vocalis.engine.tuning.Tuning`).
    """

    def __init__(self, loaded: LoadedModel, max_batch: int = 16, max_queue: int = 256,
                 threads: int | None = None):
        self.loaded = loaded
        self.threads = threads
        self.max_batch = max_batch
        self.max_queue = max_queue
        self._lock = threading.Lock()
        self._engine: Engine | None = None
        self._closed = False

    # ---------------------------------------------------------------- facts

    @property
    def family(self) -> ModelFamily:
        return self.loaded.family

    @property
    def info(self) -> ModelInfo:
        return self.loaded.info

    @property
    def model(self):
        """The family's model object (weights and math)."""
        return self.loaded.model

    @property
    def engine_family(self):
        """What the engine runs (:class:`vocalis.engine.family.EngineFamily`)."""
        return self.loaded.engine_family

    @property
    def tuning(self):
        return self.loaded.tuning

    @property
    def exact(self) -> bool:
        return self.loaded.exact

    @property
    def quantize(self) -> str | None:
        return self.loaded.quantize

    @property
    def sample_rate(self) -> int:
        return self.info.sample_rate

    @property
    def model_id(self) -> str:
        return self.info.model_id

    @property
    def released(self) -> bool:
        return self.info.released

    @property
    def config_name(self) -> str:
        """How messages name the model: a config name, a release id or a local path."""
        return self.info.name

    @property
    def served_name(self) -> str | None:
        """The model id of a released model (``pocket-tts/<config>``...), else None."""
        return self.info.served_name

    @property
    def speakers(self) -> list[str]:
        """The model's built-in voices (predefined voices, CustomVoice speakers)."""
        return list(self.info.voices)

    # ---------------------------------------------------------------- voices

    @frees_thread_pool
    def voice(self, src=None, **voice_options) -> Voice:
        """A voice of this model (see the family's ``voice``): a built-in voice name, an
        audio file to clone, ``(samples, sample_rate)``, a saved ``.safetensors`` voice, or
        a :class:`Voice`. ``voice_options``: the family's voice options (Qwen3-TTS Base:
        ``ref_text``, ``xvector_only``).

        Raises:
            VoiceError: unknown name, unreadable or unusable audio, a voice of another model.
            InputError: a voice option the family does not take or that does not apply.
            ModelNotFound: a predefined voice not cached while offline.
        """
        schema = self.family.options
        voice_schema = OptionSchema(schema.owner, [o for o in schema if o.voice])
        opts = voice_schema.check(voice_options, self.info.name)
        return self.loaded.voice(src, **opts)

    # ---------------------------------------------------------------- generation

    @property
    def engine(self) -> Engine:
        """The continuous-batching engine (started on first use)."""
        with self._lock:
            if self._closed:
                raise InputError("this model was closed (its with block ended, or close() "
                                 "was called): load it again with vocalis.load")
            if self._engine is None:
                self._engine = Engine(self.engine_family, self.max_batch, self.max_queue,
                                      self.threads)
                # The engine's threads hold the engine, not this object: when this object is
                # collected (or the interpreter exits), stop them so that the model is freed
                # and no thread runs torch code during interpreter teardown.
                weakref.finalize(self, self._engine.close)
            return self._engine

    def expect(self):
        """Announce a :meth:`submit` on its way (a server that has read a request and is
        still checking it), so that an idle engine about to admit a burst waits for it a
        moment (``vocalis.engine.scheduler.GATHER_S`` at most) and admits the burst's
        shortest texts first as a whole. Returns an object whose ``done()`` (or the end of
        its ``with`` block) says the submission was made or given up; audio is unchanged."""
        return self.engine.expect()

    @frees_thread_pool
    def submit(self, text: str, voice=None, seed: int | None = None, speed: float = 1.0,
               normalize: bool = False, word_timestamps: bool = False, live: bool = False,
               **options):
        """Queue a request; returns its handle (:class:`vocalis.engine.types.Request`) whose
        ``events()`` yield :class:`~vocalis.engine.types.AudioChunk` as audio is decoded,
        then ``Finished`` or ``Failed``; ``cancel()`` stops it within one engine step.

        Everything is checked here, in the caller's thread, before anything is queued:
        ``speed``, ``seed``, the ``options`` against the family's schema
        (``tts.family.options``), the text, the family's rules and the voice.

        Args: as :meth:`synthesize`, and ``live``: the audio is played as it comes (a
        voice agent's connection): the engine never holds this request back for a step
        while a burst of later arrivals gets its first frames (which lowers the burst's
        time to first audio but leaves a gap in what a listener hears). Audio unchanged.

        Raises:
            InputError (a ``text`` that is not a ``str`` names the type given), VoiceError,
            ModelNotFound (see :meth:`voice`); CapacityError when ``max_queue`` requests are
            already waiting.
        """
        _check_text_type(text)
        text, seed, speed, options = self.info.check_request(text, voice, seed, speed, options)
        decoder = self.word_decoder(word_timestamps)
        _check_live(live)
        stretcher = Stretcher(speed, self.sample_rate) if speed != 1.0 else None
        said = text
        text = self.normalized_text(text, normalize, options)
        prepared = self.loaded.prepare(text, voice, options, seed)
        job = make_job(self.engine_family, prepared.state, prepared.chunks, prepared.params,
                       seed if seed is not None else new_seed(), live)
        job.timestamps = decoder is not None
        req = self.engine.submit(job)
        if decoder is not None:
            chunks = [(c[0], self.loaded.word_tokens(c[1])) for c in prepared.chunks]
            req = _Timed(req, WordTimer(said, chunks, decoder, self.sample_rate, speed))
        return req if stretcher is None else _Stretched(req, stretcher)

    def word_decoder(self, word_timestamps: bool = True):
        """The tokenizer's decoder for :class:`vocalis.timing.WordTimer` when word timestamps
        are asked for (None if not).

        Raises InputError: not a bool, or a model that cannot align words."""
        if not isinstance(word_timestamps, bool):
            raise InputError(f"word_timestamps must be true or false, got {word_timestamps!r}",
                             param="word_timestamps")
        if not word_timestamps:
            return None
        decoder = self.loaded.word_decoder()
        if decoder is None:
            raise InputError(f"model {self.info.name} gives no word timestamps: drop "
                             "word_timestamps", param="word_timestamps")
        return decoder

    @frees_thread_pool
    def open_text(self, voice=None, seed: int | None = None, speed: float = 1.0,
                  word_timestamps: bool = False, live: bool = False,
                  **options) -> TextRequest:
        """A request whose text will be pushed in pieces as it is written
        (:class:`TextRequest`: ``push``, ``close``, ``events``, ``cancel``).

        Same checks as :meth:`submit` (``speed``, ``seed``, the ``options``, the voice)
        before any text; no normalization (a number may arrive in pieces). Qwen3-TTS takes
        the text token by token in its streaming-text layout (``non_streaming_mode``
        false; Base models with ``xvector_only``); with the same seed the audio equals
        :meth:`synthesize` of the whole text with ``non_streaming_mode=False``.
        ``word_timestamps``: its events carry word timestamps as :meth:`submit`'s do; the
        words are known once the text is closed, so the first come with the first event
        after :meth:`close`. ``live``: as :meth:`submit`'s.

        Raises:
            InputError: a model that takes whole texts only (Pocket TTS: send sentences),
            options the streamed layout cannot take, or any :meth:`submit` error.
        """
        if self._closed:
            raise InputError("this model was closed (TTS.close()): load it again", param="model")
        _, seed, speed, options = self.info.check_request(None, voice, seed, speed, options)
        decoder = self.word_decoder(word_timestamps)
        _check_live(live)
        feed = self.loaded.open_text(voice, options, seed)
        stretcher = Stretcher(speed, self.sample_rate) if speed != 1.0 else None
        return TextRequest(self, feed, seed if seed is not None else new_seed(), stretcher,
                           decoder, live)

    def warm_up(self, rows: int, voice=None, rounds: int = 2) -> float:
        """Run the engine through the batch shapes it will meet before real requests do:
        ``rounds`` bursts of ``rows`` short requests at once (the family's
        :meth:`~vocalis.family.LoadedModel.warmup_request`, a few frames each), waited
        for. A server's first burst otherwise grows its rows and meets each batch size
        for the first time while its listeners wait (gaps in their audio). Returns the
        seconds it took.

        Raises:
            InputError: ``rows`` outside 1..max_batch or ``rounds`` below 1, a model whose
            family gives no warm-up request; VoiceError/InputError from :meth:`submit` (a
            model that needs a voice and was given none); the error of a request that
            failed.
        """
        import time

        top = self.engine.max_batch
        if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= top:
            raise InputError(f"warm-up rows must be a whole number in 1..{top} (max_batch), "
                             f"got {rows!r}", param="warmup")
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise InputError(f"warm-up rounds must be a whole number >= 1, got {rounds!r}",
                             param="warmup")
        request = self.loaded.warmup_request()
        if request is None:
            raise InputError(f"model {self.info.name} cannot be warmed up (its family gives "
                             "no warm-up request)", param="warmup")
        text, options = request
        t0 = time.perf_counter()
        for _ in range(rounds):
            reqs = [self.submit(text, voice, i, **options) for i in range(rows)]
            for req in reqs:
                for ev in req.events():
                    if isinstance(ev, Failed):
                        raise ev.error
        return time.perf_counter() - t0

    def stream(self, text: str, voice=None, seed: int | None = None, speed: float = 1.0,
               normalize: bool = False, **options) -> Iterator[np.ndarray]:
        """Yield float32 PCM chunks ``[n]`` as frames are decoded (n = the family's samples
        per frame, e.g. 1920 at 24 kHz).

        Same arguments as :meth:`synthesize`; the concatenated chunks equal its samples.
        Closing the generator early cancels the request.

        Raises:
            as :meth:`submit`, plus the request's own error if it fails while running.
        """
        req = self.submit(text, voice, seed, speed, normalize, **options)
        try:
            for ev in req.events():
                if isinstance(ev, AudioChunk):
                    yield ev.samples
                elif isinstance(ev, Failed):
                    raise ev.error
        finally:
            if not req.done.is_set():
                req.cancel()

    def synthesize(self, text: str, voice=None, seed: int | None = None, speed: float = 1.0,
                   normalize: bool = False, word_timestamps: bool = False,
                   **options) -> Audio:
        """Speech for ``text``.

        Args:
            text: any length (the family splits it into chunks where it needs to).
            voice: a built-in voice name, an audio file, a ``.safetensors`` voice or a
                :class:`Voice` (default: the model's default voice, where it has one).
            seed: integer in [0, 2**63); same seed, same audio as the official package
                after ``torch.manual_seed(seed)``. None = random.
            speed: 0.25-4.0; pitch-preserving time-stretch (Rubber Band): ``n`` samples at
                1.0 become ``round(n / speed)``. 1.0 (default) = the model's own audio.
            normalize: read numbers, dates, money, units and abbreviations as words first
                (:mod:`vocalis.text.normalize`, in the request's language); refused with
                ``exact`` models, whose text must stay the official package's.
            word_timestamps: also time every word (``Audio.words``; events carry them as
                they come): from the model's own attention over the text
                (:mod:`vocalis.timing`); the audio is the same either way.
            options: the family's request options (``tts.family.options``: Pocket TTS
                ``temperature``, ``eos_threshold``...; Qwen3-TTS ``speaker``, ``language``,
                ``instruct``, ``ref_audio``...), with the official names and defaults.

        Raises:
            InputError, VoiceError, ModelNotFound (see :meth:`voice`), CapacityError.
        """
        req = self.submit(text, voice, seed, speed, normalize, word_timestamps, **options)
        pieces: list[np.ndarray] = []
        words: list[Word] | None = [] if word_timestamps else None
        for ev in req.events():
            if isinstance(ev, AudioChunk):
                pieces.append(ev.samples)
            elif isinstance(ev, Failed):
                raise ev.error
            if words is not None and getattr(ev, "words", None):
                words += ev.words
        st = req.stats
        samples = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        return Audio(samples, self.sample_rate, st.ttfa_ms or 0.0, st.wall_ms, st.chunks,
                     words, st.seed)

    # ---------------------------------------------------------------- text normalization

    def text_language(self, options: dict | None = None) -> str:
        """The language a request's text is in (its language option, else the model's)."""
        return self.loaded.text_language(options or {})

    def normalizes(self, options: dict | None = None) -> bool:
        """Whether normalization applies to a request with ``options``: a language it covers
        (:func:`vocalis.text.normalize.supports`) and a model that is not exact."""
        return not self.exact and supports(self.text_language(options))

    def normalized_text(self, text, normalize: bool = True, options: dict | None = None):
        """``text`` through :func:`vocalis.text.normalize.normalize` when ``normalize`` is True,
        in :meth:`text_language` of ``options``; unchanged when False.

        Raises:
            InputError: ``normalize`` not a bool, an exact-mode model, or a language
            normalization does not cover.
        """
        if normalize is False or normalize is None:
            return text
        if not isinstance(normalize, bool):
            raise InputError(f"normalize must be true or false, got {normalize!r}", param="normalize")
        if self.exact:
            raise InputError("normalize with an exact model: normalization changes the text; exact "
                             "mode is for parity with the official package: drop one of them",
                             param="normalize")
        return normalize_text(text, self.text_language(options or {}))

    def engine_status(self) -> dict:
        """Rows in use, queue depth and limits of the engine."""
        if self._engine is None:
            return Engine.idle_status(self.max_batch, self.max_queue)
        return self._engine.status()

    def close(self) -> None:
        """Cancel running requests and stop the engine threads (also done when this object
        is garbage-collected or the interpreter exits). Idempotent. Afterwards no request
        is taken (InputError)."""
        with self._lock:
            self._closed = True
        if self._engine is not None:
            self._engine.close()

    def __enter__(self) -> "TTS":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: exact runs PyTorch's own float32 kernels: quantized weights would not be the official
#: package's arithmetic (nothing is quantized silently instead)
EXACT_AND_QUANTIZE = ("exact and quantize together: exact runs the official package's float32 "
                      "arithmetic, quantize changes it; give one of them")


#: the keywords of :func:`load` itself (beside them it takes the family's load options): an
#: unknown keyword is compared with them all for a "did you mean"
LOAD_KEYWORDS = ("model_id", "device", "threads", "max_batch", "max_queue", "quantize", "exact",
                 "tuning")


def _model_id_text(model_id) -> str:
    """``model_id`` of :func:`load` as a ``str`` (a path object as its path; None: the
    default model). Raises InputError: any other type."""
    if model_id is None:
        return families.default_model_id()
    if isinstance(model_id, os.PathLike):
        model_id = os.fspath(model_id)
    if not isinstance(model_id, str):
        raise InputError(f"model_id must be a model id or a path (a str or os.PathLike), got "
                         f"{type(model_id).__name__}", param="model")
    return model_id


def unknown_load_keyword(name: str, info: ModelInfo | None = None) -> UnknownOption:
    """The error for a keyword of :func:`load` that neither it nor the model's family takes
    (``info`` None: no registered family takes it). It names :func:`load`'s own keywords and
    the families' load options, and the closest of them."""
    fams = [info.family] if info is not None else families.all_families()
    near = [*LOAD_KEYWORDS, *(n for f in fams for n in f.load_options.names)]
    if info is not None:
        where = f" with {info.family.title} model {info.name}"
        own = ", ".join(near[len(LOAD_KEYWORDS):]) or "none"
        theirs = f"{info.family.title}'s load options: {own}"
    else:
        where = ""
        theirs = "a family's load options (" + "; ".join(
            f"{f.title}: {', '.join(f.load_options.names)}"
            for f in fams if len(f.load_options)) + ")"
    return UnknownOption(f"unknown keyword {name} for vocalis.load{where}"
                         f"{did_you_mean(name, near)}; it takes {', '.join(LOAD_KEYWORDS)}, "
                         f"and {theirs}", param=name)


def check_load(model_id: str | os.PathLike | None = None, device: str = "cpu",
               threads: int | None = None, max_batch: int = 16, max_queue: int = 256,
               quantize: bool | str = False,
               **load_options) -> tuple[ModelInfo, LoadSettings, dict]:
    """The checks of :func:`load` that need no weights: the model id (its family and
    config), the device, engine sizes, the quantize mode and the family's load options.
    Returns ``(info, settings, load_options)``; ``settings.exact``/``tuning`` are left at
    their defaults for :func:`load` to fill.

    Raises ModelNotFound or InputError (see :func:`load`)."""
    model_id = _model_id_text(model_id)
    for name in load_options:  # a misspelled keyword, before the model it may not concern
        if not any(name in f.load_options for f in families.all_families()):
            raise unknown_load_keyword(name)
    dev = check_device(device)
    mode = quantize_mode(quantize)
    for name, value, top in (("max_batch", max_batch, 1024), ("max_queue", max_queue, 1 << 20)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise InputError(f"{name} must be an integer in [1, {top}], got {value!r}", param=name)
    check_threads(threads)
    info = families.describe(model_id)
    family = info.family
    for name in load_options:
        if name not in family.load_options:
            raise unknown_load_keyword(name, info)
    if mode is not None and mode not in family.quantize_modes:
        raise InputError(f"{info.name}: {family.title} does not quantize to {mode}; it takes "
                         f"{', '.join(family.quantize_modes) or 'none'}", param="quantize")
    opts = family.load_options.check(load_options, info.name)
    return info, LoadSettings(dev, threads, max_batch, mode), opts


@frees_thread_pool
def load(model_id: str | os.PathLike | None = None, device: str = "cpu", threads: int | None = None,
         max_batch: int = 16, max_queue: int = 256, quantize: bool | str = False,
         exact: bool = False, tuning: str | dict | None = None, **load_options) -> TTS:
    """Load a model (config, weights, tokenizer) onto ``device``.

    ``model_id`` (a ``str`` or a path object; the first argument): a released id
    (``vocalis models list``; default: the first family's default, ``pocket-tts``), a Hub
    repo id, or a local checkpoint (its family finds it: :mod:`vocalis.families`). Weights
    come from the hub at pinned revisions (cached; with ``HF_HUB_OFFLINE=1`` only the cache)
    or from local files.

    ``quantize`` (``True`` = ``"int8"``): int8 linears where the family offers them (Pocket
    TTS FlowLM, Qwen3-TTS talker and code predictor; CPU, float32; faster, not
    bit-identical), ``"int4"`` (Qwen3-TTS). ``max_batch``: rows run together; ``max_queue``:
    requests waiting beyond them before ``CapacityError``. ``exact``: PyTorch's default CPU
    kernels and no measured speed choices, so that a request alone is bit-identical to the
    official package. ``tuning``: the speed choices (``"auto"``: measured on this machine at
    the first load and cached; ``"fixed"``: built-in; or forced ones such as
    ``"threads=1:1,codec_linears=default"`` or a dict; default ``$VOCALIS_TUNING``, else
    ``"auto"``); the result is ``TTS.tuning``. ``load_options``: the family's own
    (``tts.family.load_options``; Qwen3-TTS: ``dtype`` float32/bfloat16 for the talker,
    ``full_state_decode``).

    Raises:
        ModelNotFound: unknown id, or weights not available (offline and not cached: the
        message says how to get them). CheckpointError: weights do not match the config.
        InputError: a ``model_id`` that is no ``str`` or path; bad device, thread count,
        quantize mode (one the family does not offer, or whose kernel is not built:
        ``vocalis kernels build``; or with ``exact``), load option, or tuning;
        UnknownOption (an InputError): a keyword neither :func:`load` nor the model's family
        takes (with the closest of :data:`LOAD_KEYWORDS` and the load options).
    """
    info, settings, opts = check_load(model_id, device, threads, max_batch, max_queue, quantize,
                                      **load_options)
    if exact and settings.quantize is not None:
        raise InputError(EXACT_AND_QUANTIZE, param="quantize")
    if threads is not None:
        set_threads(threads)
    settings = LoadSettings(settings.device, threads, max_batch, settings.quantize, exact, tuning)
    loaded = info.family.load(info, settings, **opts)
    return TTS(loaded, max_batch, max_queue, threads)


__all__ = ["LOAD_KEYWORDS", "Audio", "ModelNotFound", "QUANTIZE_MODES", "TTS", "TextRequest",
           "Voice", "check_device", "check_load", "load", "quantize_mode"]
