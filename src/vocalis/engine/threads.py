"""How the engine's threads share the CPU (the thread policy, apart from scheduling).

The engine runs a model thread (prompt passes and steps) and a codec thread (decoding, with
a helper for the second codec stage). torch's intra-op thread count is per calling thread
once set there (OpenMP/MKL thread-local settings, set through
:func:`vocalis.engine.openmp.set_threads` so that it holds), so the two threads split the
budget instead of oversubscribing it. Roles:

* ``model``: the model thread's share (the family's :meth:`thread_split`);
* ``codec``: the codec thread's share;
* ``all``: every thread, for work while the other thread waits: requests arriving at an
  idle engine (their prompt pass and first step: time to first audio), a lone first frame's
  decode, the last frames of the engine's last request.

Lending: while the codec thread waits for frames, its core may help the model thread:
through the family's own kernels (``lend_codec_threads(on)``, e.g. Qwen3's int8/int4
kernels: a helper thread takes blocks of output channels), or, for a family whose products
run on PyTorch's threads (``lends_openmp_threads``), by giving a lone row's step every
thread. Families whose codec runs in two pipelined stages keep both cores busy and lend
nothing.
"""

from __future__ import annotations

from vocalis.engine.family import EngineFamily
from vocalis.engine.openmp import release_thread_pool, set_threads


class ThreadPolicy:
    """Thread counts per role and the lending state of one engine (``total`` threads)."""

    def __init__(self, family: EngineFamily, total: int):
        model, codec = family.thread_split(total)
        self.counts = {"model": model, "codec": codec, "all": total}
        self.pipeline = bool(family.codec_pipeline)
        lend = family.lend_codec_threads
        self._lend_kernels = lend if lend is not None and not self.pipeline else None
        self.lends_openmp = (bool(family.lends_openmp_threads) and not self.pipeline
                             and total > model)
        self.codec_waiting = False

    def use(self, role: str) -> None:
        """Set the calling thread's torch threads to ``role``'s count."""
        set_threads(self.counts[role])

    def count(self, role: str) -> int:
        return self.counts[role]

    def idle_model_thread(self) -> None:
        """The engine is idle: the model thread keeps its share and no pool beside the
        codec's (see :mod:`vocalis.engine.openmp`)."""
        if self.lends_openmp:
            self.use("model")
            release_thread_pool()

    def model_step(self, active_rows: int) -> None:
        """Before a model step or the work after it: a lone row gets every thread while the
        codec waits (its calls come every few frames; a frame of a lone stream is bound by
        one core's memory reads), else the model's share. Several rows keep the share: their
        codec is busy most of the time, and a step begun on every thread would hold the
        codec's core when it wakes."""
        if self.lends_openmp:
            self.use("all" if self.codec_waiting and active_rows == 1 else "model")

    def codec_lends(self, on: bool) -> None:
        """Called by the codec thread: ``on`` while it waits for frames, off before a codec
        call (the family's kernels may borrow its core meanwhile)."""
        self.codec_waiting = on
        if self._lend_kernels is not None:
            self._lend_kernels(on)


__all__ = ["ThreadPolicy"]
