"""Request and event types of the engine (what callers see of a request).

A request is submitted with its text, voice and sampling parameters and returns a
:class:`Request` handle whose :meth:`Request.events` yields, in order:

* :class:`AudioChunk` events as soon as frames are decoded (float32 PCM at the model
  rate; 1920 samples per 80 ms frame),
* then exactly one :class:`Finished` (with :class:`RequestStats`) or :class:`Failed`.

:meth:`Request.cancel` stops the request within one engine step and frees its row;
its event stream then ends with ``Finished(stats.cancelled=True)``.

Each event is handed out once: a second :meth:`Request.events` after the last event was
read, or while another reader is reading, raises
:class:`~vocalis.errors.EventsAlreadyRead` instead of waiting for events that will never
come (``Request.stats`` keeps the figures).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Union

import numpy as np

from vocalis.errors import EventsAlreadyRead


@dataclass
class AudioChunk:
    """Decoded audio: ``samples`` float32 ``[n]``; ``chunk`` = text chunk index; ``frame`` =
    frame index within that chunk; ``scores``: for a request that asked for word timestamps,
    the attention of the frame's step over its chunk's text tokens (float32 ``[tokens]``,
    see :mod:`vocalis.timing`), else None."""

    samples: np.ndarray
    chunk: int
    frame: int
    scores: np.ndarray | None = None
    #: with word timestamps (:meth:`vocalis.api.TTS.submit` ``word_timestamps``): the words
    #: that ended by this chunk (:class:`vocalis.timing.Word`), else None
    words: list | None = None


@dataclass
class RequestStats:
    """Figures of one request. Times are wall-clock milliseconds from submission."""

    request_id: int
    # the seed of its random draws: the one given, or the one drawn for a request without
    # one (submit it again with this seed for the same audio); None: not known (made outside
    # make_job)
    seed: int | None = None
    queued_ms: float = 0.0  # submission -> admitted into a row
    ttfa_ms: float | None = None  # submission -> first AudioChunk ready for the caller
    wall_ms: float = 0.0  # submission -> last event
    frames: int = 0
    audio_s: float = 0.0
    chunks: list[dict] = field(default_factory=list)  # per text chunk: text, token_ids, frames, eos_step
    cancelled: bool = False
    held_steps: int = 0  # engine steps it sat out while a burst's later groups started
    # which of the engine's admissions (counted from 1 since it started) gave it a row: a
    # burst admitted in groups, shortest prompts first, has several
    admission: int = 0

    @property
    def rtf(self) -> float:
        """Real-time factor: wall seconds / audio seconds (lower is better)."""
        return (self.wall_ms / 1000) / self.audio_s if self.audio_s else float("inf")

    def as_dict(self) -> dict:
        return {
            "request_id": self.request_id, "seed": self.seed, "queued_ms": self.queued_ms,
            "ttfa_ms": self.ttfa_ms,
            "wall_ms": self.wall_ms, "frames": self.frames, "audio_s": self.audio_s,
            "rtf": self.rtf if self.audio_s else None,
            "x_real_time": (1 / self.rtf) if self.audio_s and self.wall_ms else None,
            "cancelled": self.cancelled, "held_steps": self.held_steps,
            "admission": self.admission, "chunks": self.chunks,
        }


@dataclass
class Finished:
    """The request is over. ``words``: with word timestamps, the words not given with an
    earlier :class:`AudioChunk` (the last ones)."""

    stats: RequestStats
    words: list | None = None


@dataclass
class Failed:
    error: BaseException
    stats: RequestStats


Event = Union[AudioChunk, Finished, Failed]


class Request:
    """Handle of a submitted request. Thread-safe; its events are read once, by one reader
    at a time (:meth:`events`)."""

    _ids = iter(range(1, 1 << 62))
    _ids_lock = threading.Lock()

    def __init__(self) -> None:
        with Request._ids_lock:
            self.id = next(Request._ids)
        self.t_submit = time.perf_counter()
        self.stats = RequestStats(self.id)
        self._events: queue.Queue = queue.Queue()
        self._cancel = threading.Event()
        self.done = threading.Event()
        self._read_lock = threading.Lock()
        self._reading = False  # a reader is iterating events()
        self._read_all = False  # the last event (Finished or Failed) was handed out
        # the first audio is in its reader's hands (or the request ended): see handed_over
        self._handed = threading.Event()
        self._relayed = False  # the reader passes audio on (relay_audio)

    # called by the engine
    def _put(self, ev: Event) -> None:
        if isinstance(ev, AudioChunk) and self.stats.ttfa_ms is None:
            self.stats.ttfa_ms = self._ms()
        if isinstance(ev, (Finished, Failed)):
            self.stats.wall_ms = self._ms()
            self.done.set()
        self._events.put(ev)

    def _ms(self) -> float:
        return (time.perf_counter() - self.t_submit) * 1000

    def relay_audio(self) -> None:
        """Say that the reader of :meth:`events` passes the audio on to another thread (the
        server's event loop), which calls :meth:`audio_taken` when it has the first chunk;
        otherwise reading the first event counts."""
        self._relayed = True

    def audio_taken(self) -> None:
        """The first audio is in the hands of the thread it was relayed to."""
        self._handed.set()

    def handed_over(self, timeout: float) -> bool:
        """Wait until the first audio is in its reader's hands, at most ``timeout`` seconds
        (the engine's model thread after a lone request's first frame: see
        :meth:`vocalis.engine.scheduler.Engine._hand_over`)."""
        return self._handed.wait(timeout)

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Ask the engine to stop this request; it frees the row within one step."""
        self._cancel.set()

    def events(self, timeout: float | None = None):
        """Yield events until (and including) :class:`Finished` or :class:`Failed`.

        ``timeout``: seconds to wait for each event (None = forever); raises ``TimeoutError``
        (a later call goes on from the next event). Each event is handed out once: a reader
        that stops early (a ``break``, a timeout) leaves the rest to the next call.

        Raises:
            EventsAlreadyRead: the events were read to their end already (keep them as they
            come, or read :attr:`stats`), raised at this call; or another reader is reading
            them now (at the first event asked for): read them in one place.
        """
        with self._read_lock:
            if self._read_all:
                raise self._already_read()
        return self._read(timeout)

    def _already_read(self) -> EventsAlreadyRead:
        return EventsAlreadyRead(
            f"the events of request {self.id} were already read to their end (each event is "
            "handed out once): keep them as they come, or read req.stats for its figures")

    def _read(self, timeout: float | None):
        with self._read_lock:
            if self._read_all:
                raise self._already_read()
            if self._reading:
                raise EventsAlreadyRead(
                    f"the events of request {self.id} are being read by another reader (each "
                    "event is handed out once): read them in one place and pass them on")
            self._reading = True
        try:
            while True:
                try:
                    ev = self._events.get(timeout=timeout)
                except queue.Empty:
                    raise TimeoutError(f"request {self.id}: no event within {timeout} s") from None
                end = isinstance(ev, (Finished, Failed))
                if end or not self._relayed:
                    self._handed.set()
                if end:
                    with self._read_lock:
                        self._read_all = True
                yield ev
                if end:
                    return
        finally:
            with self._read_lock:
                self._reading = False
