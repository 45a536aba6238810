"""The boundary between the engine and a model family.

The engine (:mod:`vocalis.engine.scheduler`) owns requests, rows, the queue, admission,
cancellation, frame budgets, failures and streaming; a family owns the math. A family
gives the engine:

* :class:`Family` (one per loaded model): ``new_batch``, ``start_chunk`` (per-chunk
  bookkeeping such as the frame budget), ``prefill`` (the prompt pass of every row that
  starts a text chunk, batched), ``step`` (one frame for every active row, with the
  family's end-of-chunk rule and a finite check per row);
* a batch object (the rows' tensors) with the codec stages ``decode_head`` /
  ``decode_tail`` (two stages so that the engine can pipeline them on two threads) and
  ``decode``, and memory hooks ``ensure``, ``clear_row``, ``release_memory``,
  ``cache_bytes``.

A job's family-specific state lives in ``job.state`` (the family creates it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

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
    engine hands it to the decode stages in place of ``True`` in ``first``."""

    frame: torch.Tensor | None = None
    end: bool = False
    error: BaseException | None = None
    start: Any = None


class FamilyBatch(Protocol):
    rows: int
    capacity: int

    def clear_row(self, row: int) -> None: ...
    def oversized(self) -> bool:
        """Whether an idle engine should call :meth:`release_memory` (more cache than an
        ordinary request needs, e.g. more than KEEP_CACHE_POSITIONS per row)."""
    def release_memory(self) -> None: ...
    def cache_bytes(self) -> int: ...
    # ``first[i]``: falsy, or True / the family's ``RowOut.start`` at a chunk's first frame
    def decode_head(self, rows: list[int], frames: torch.Tensor, first: list) -> Any: ...
    def decode_tail(self, rows: list[int], x: Any, first: list) -> torch.Tensor: ...
    def decode(self, rows: list[int], frames: torch.Tensor, first: list) -> torch.Tensor: ...


class Family(Protocol):
    sample_rate: int  # Hz
    frame_samples: int  # PCM samples per frame

    def new_batch(self, max_rows: int) -> FamilyBatch: ...

    def thread_split(self, total: int) -> tuple[int, int]:
        """(model threads, codec threads) out of ``total`` for the engine's two threads."""

    def start_chunk(self, job) -> int:
        """Prepare ``job.state`` for text chunk ``job.chunk``; returns its frame budget."""

    def prefill(self, batch: FamilyBatch, jobs: list) -> None:
        """Prompt passes of ``jobs`` (each at its current chunk), in one batched pass."""

    def step(self, batch: FamilyBatch, jobs: list) -> list[RowOut | None]:
        """One frame for each job (``jobs[r]`` in row r, or None); ``job.step`` is the frame
        index within the chunk. Raises only for a failure of the whole step."""

    # Optional: ``finish_step(batch) -> None``, work that follows a step but that its frames
    # do not need (Qwen3: the talker step preparing the next frame). The engine calls it
    # once after each step, once that step's frames have gone to the codec; it raises only
    # for a failure of the whole step.


__all__ = ["KEEP_CACHE_POSITIONS", "Family", "FamilyBatch", "RowOut"]
