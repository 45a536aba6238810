"""Request and event types of the engine (what callers see of a request).

A request is submitted with its text, voice and sampling parameters and returns a
:class:`Request` handle whose :meth:`Request.events` yields, in order:

* :class:`AudioChunk` events as soon as frames are decoded (float32 PCM at the model
  rate; 1920 samples per 80 ms frame),
* then exactly one :class:`Finished` (with :class:`RequestStats`) or :class:`Failed`.

:meth:`Request.cancel` stops the request within one engine step and frees its row;
its event stream then ends with ``Finished(stats.cancelled=True)``.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Union

import numpy as np


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
            "request_id": self.request_id, "queued_ms": self.queued_ms, "ttfa_ms": self.ttfa_ms,
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
    """Handle of a submitted request. Thread-safe; events are consumed once."""

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

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Ask the engine to stop this request; it frees the row within one step."""
        self._cancel.set()

    def events(self, timeout: float | None = None):
        """Yield events until (and including) :class:`Finished` or :class:`Failed`.

        ``timeout``: seconds to wait for each event (None = forever); raises ``TimeoutError``.
        """
        while True:
            try:
                ev = self._events.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"request {self.id}: no event within {timeout} s") from None
            yield ev
            if isinstance(ev, (Finished, Failed)):
                return
