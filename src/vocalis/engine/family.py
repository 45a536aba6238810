"""The contract between the engine and a model family's math (its back half).

The engine (:mod:`vocalis.engine.scheduler`) owns requests, rows, the queue, admission,
cancellation, frame budgets, failures, threads and streaming; a family owns the math. A
family gives the engine one :class:`EngineFamily` per loaded model, which makes
:class:`EngineBatch` objects (the rows' tensors and the codec's streaming state). Every
hook the engine calls is declared here; the optional ones have defaults.

A job's family-specific state lives in ``job.state`` (made by :meth:`EngineFamily.new_state`);
its parameters in ``job.params`` (made by the family's front half) and its input (a voice
state, a prompt) in ``job.voice``. A step gives each row a :class:`RowOut`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# An idle engine keeps a cache of up to this many positions per row (ordinary requests need
# a few hundred: voice + text + frame budget); a larger one, grown by a long request, is
# released so that one request's memory does not stay with the process.
KEEP_CACHE_POSITIONS = 1024


@dataclass
class RowOut:
    """What one step gave one row: a ``frame`` to decode (the family's frame: a latent, a
    set of codes), or ``end`` (its text chunk is over; no frame), or an ``error`` that fails
    this request alone (for example non-finite values). ``start``: with the first frame of a
    chunk, what the codec needs to begin the row (e.g. reference codes to feed first); the
    engine hands it to the decode stages in place of ``True`` in ``first``. ``scores``: for
    a job with ``timestamps``, the step's attention over the chunk's text tokens (numpy
    float32 ``[tokens]``, see :mod:`vocalis.timing`), or None where the family has none
    for this frame."""

    frame: torch.Tensor | None = None
    end: bool = False
    error: BaseException | None = None
    start: Any = None
    scores: Any = None


class EngineBatch(ABC):
    """The tensors of up to ``rows`` rows: the model's KV caches and the codec's streaming
    state. ``first[i]`` in the decode calls: falsy, or True / the family's ``RowOut.start``
    at a chunk's first frame (the codec resets that row first)."""

    rows: int

    @abstractmethod
    def clear_row(self, row: int) -> None:
        """Wipe what a failed row wrote (it may hold NaN) so that no later row reads it."""

    def oversized(self) -> bool:
        """Whether an idle engine should call :meth:`release_memory` (more cache than an
        ordinary request needs, e.g. more than KEEP_CACHE_POSITIONS per row)."""
        return False

    def release_memory(self) -> None:
        """Give back memory a long request grew (called when the engine is idle)."""

    def cache_bytes(self) -> int:
        """Bytes held by the caches (``/metrics``)."""
        return 0

    @abstractmethod
    def decode(self, rows: list[int], frames: torch.Tensor, first: list) -> torch.Tensor:
        """PCM ``[n, samples]`` (float) for ``frames [n, ...]`` of ``rows`` (one frame per row,
        or ``[n, T, ...]``: T consecutive frames per row when ``codec_frames`` > 1)."""

    def decode_head(self, rows: list[int], frames: torch.Tensor, first: list) -> Any:
        """First codec stage (families with ``codec_pipeline``: the engine runs the two
        stages of consecutive frames on two threads). Default: the whole decode."""
        return self.decode(rows, frames, first)

    def decode_tail(self, rows: list[int], x: Any, first: list) -> torch.Tensor:
        """Second codec stage: PCM ``[n, samples]`` from :meth:`decode_head`'s result."""
        return x


class EngineFamily(ABC):
    """One loaded model's math, as the engine runs it.

    Attributes the engine reads (with their defaults): ``sample_rate`` (Hz) and
    ``frame_samples`` (PCM samples per frame); ``codec_pipeline``: run the codec's two
    stages on two threads at few rows (else both on one thread); ``codec_frames``: frames
    per codec call of a row after its first (a codec that decodes several frames more
    cheaply per frame; its audio then leaves in groups of that many frames);
    ``admit_group``: at most this many queued requests join the batch per step (0: all that
    fit; live ones, ``Job.live``, are not limited), so that of many arriving at once the first get their audio before everyone's
    prompt pass and first frame are done; ``holds_rows``: :meth:`step` given None for an
    active row leaves it untouched (its caches, positions and draws), so the engine may
    hold running rows back for one step while a burst's later groups get their first frame;
    ``lends_openmp_threads``: a lone row's model step may use every thread while the codec
    waits (products on PyTorch's threads). :meth:`lend_codec_threads` is None or a callable
    ``(on: bool)`` telling the family's own kernels that the codec's core is free (on) or
    taken back (off).
    """

    sample_rate: int
    frame_samples: int
    codec_pipeline: bool = True
    codec_frames: int = 1
    admit_group: int = 0
    holds_rows: bool = False
    lends_openmp_threads: bool = False
    lend_codec_threads: Callable[[bool], None] | None = None

    def row_ready(self, job) -> bool:
        """Whether ``job``'s row can take a step now. False: it waits (for streamed text,
        say), untouched, while the other rows step; the engine sleeps when no row is
        ready and wakes on :meth:`Engine.wake <vocalis.engine.scheduler.Engine.wake>`.
        Default: always ready."""
        return True

    @abstractmethod
    def new_batch(self, max_rows: int) -> EngineBatch:
        """An empty batch of up to ``max_rows`` rows."""

    @abstractmethod
    def new_state(self, params) -> Any:
        """A request's per-row state (``job.state``) from its parameters."""

    @abstractmethod
    def thread_split(self, total: int) -> tuple[int, int]:
        """(model threads, codec threads) out of ``total`` for the engine's two threads."""

    @abstractmethod
    def start_chunk(self, job) -> int:
        """Prepare ``job.state`` for text chunk ``job.chunk``; returns its frame budget (a
        runaway guard, or the length the request asked for: then it sets
        ``job.asked_budget``)."""

    @abstractmethod
    def prefill(self, batch: EngineBatch, jobs: list) -> None:
        """Prompt passes of ``jobs`` (each at its current chunk), batched where it can.
        Raises for a failure (the engine then retries the rows one by one)."""

    @abstractmethod
    def step(self, batch: EngineBatch, jobs: list) -> list[RowOut | None]:
        """One frame for each job (``jobs[r]`` in row r, or None); ``job.step`` is the frame
        index within the chunk. Raises only for a failure of the whole step."""

    def finish_step(self, batch: EngineBatch) -> None:
        """Work that follows a step but that its frames do not need (e.g. the model step
        preparing the next frame), run once the step's frames have gone to the codec.
        Raises only for a failure of the whole step. Default: nothing."""


__all__ = ["KEEP_CACHE_POSITIONS", "EngineBatch", "EngineFamily", "RowOut"]
