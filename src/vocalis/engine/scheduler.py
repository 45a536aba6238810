"""Continuous-batching engine (any model family: :mod:`vocalis.engine.family`).

Requests wait in a bounded queue and are admitted into free rows of a batch between
steps. Every step advances all active rows by one frame in one model pass; the new frames
are decoded by the family's codec on a second thread (all rows at once, each with its own
streaming state), so decoding overlaps the next model step. A family whose codec decodes
several frames per call more cheaply (``codec_frames`` > 1) has the codec thread gather
that many steps of the same rows into one call after each row's first frame
(:meth:`Engine._gather`). Rows retire at the end of their text; cancelled requests leave
within one step.

The engine owns requests, rows, admission, cancellation, frame budgets, failures and
streaming (this module) and how its threads share the CPU (:mod:`vocalis.engine.threads`);
the family owns the math, the random draws and the end-of-chunk rule. A seeded request
gives the same frames whatever runs beside it (each request has its own generator); only
the float rounding of batched products can differ.
"""

from __future__ import annotations

import collections
import logging
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from vocalis.engine.family import EngineFamily
from vocalis.engine.openmp import release_thread_pool, set_threads
from vocalis.engine.threads import ThreadPolicy
from vocalis.engine.types import AudioChunk, Failed, Finished, Request
from vocalis.errors import CapacityError, GenerationError

log = logging.getLogger(__name__)

# While every active row waits for its streamed text, the engine looks at cancellations this
# often (s); text arriving wakes it at once (Engine.wake).
WAIT_POLL_S = 0.01
#: admissions a queued request may see go to later arrivals with shorter prompts before it
#: goes first (Engine._take_admissions)
MAX_PASSED_OVER = 16
#: longest wait (s) of an idle engine, before a burst's first admission, for submissions a
#: front end announced (Engine.expect): a burst that reaches the engine over a few
#: milliseconds (a server reading and checking its requests) is then admitted shortest first
#: as a whole, not its first few arrivals first
GATHER_S = 0.03


@dataclass
class Job:
    """A request inside the engine. ``state``: the family's per-request state."""

    req: Request
    voice: Any
    chunks: list[tuple[str, list[int], int]]  # prepared text, token ids, family extra
    params: Any
    rng: torch.Generator
    state: Any
    row: int = -1
    chunk: int = -1
    step: int = 0  # frame index within the chunk
    budget: int = 0  # frames the chunk may have (runaway guard)
    frames: int = 0
    failed: bool = False
    pending: bool = False  # its next text chunk awaits the prompt pass
    asked_budget: bool = False  # the chunk's budget is a length the request asked for
    chunk_info: list[dict] = field(default_factory=list)
    # word timestamps asked for: the family puts each frame's text attention in
    # RowOut.scores; they travel to the frame's AudioChunk through ``scores``
    timestamps: bool = False
    scores: dict = field(default_factory=dict)  # (chunk, frame) -> float32 [tokens]
    # played as it comes (a voice agent's WebSocket): never held back for a burst's later
    # groups, whose first frames would otherwise come first (a gap in what it plays)
    live: bool = False
    passed_over: int = 0  # admissions that took a later arrival (a shorter prompt) first


class _Turn:
    """The codec thread's state lent to the model thread (:meth:`Engine._decode_here`):
    ``granted`` once the codec thread has handed out every frame queued before, ``back``
    once the model thread is done with it."""

    def __init__(self) -> None:
        self.granted = threading.Event()
        self.back = threading.Event()


class Expectation:
    """A submission on its way to an engine (:meth:`Engine.expect`). :meth:`done` once it
    is submitted or given up (idempotent; also on leaving a ``with`` block)."""

    def __init__(self, engine: "Engine"):
        self._engine = engine
        self._open = True

    def done(self) -> None:
        engine = self._engine
        with engine._cond:
            if self._open:
                self._open = False
                engine._expected -= 1
                engine._cond.notify_all()

    def __enter__(self) -> "Expectation":
        return self

    def __exit__(self, *exc) -> None:
        self.done()


def prompt_tokens(job: Job) -> int:
    """Tokens of ``job``'s first text chunk (0 while it has none yet): the size of its prompt
    pass, by which a burst is admitted shortest first."""
    return len(job.chunks[0][1]) if job.chunks else 0


def hand_over_s() -> float:
    """How long the model thread waits for a lone request's reader to take its first audio
    (:meth:`Engine._hand_over`): the interpreter's switch interval (5 ms by default), the
    longest the reader would otherwise wait for the GIL, and 10 ms at most (a reader that
    does not read at once never stalls the engine longer, whatever the interval)."""
    return min(sys.getswitchinterval(), 0.01)


class Engine:
    """Runs :class:`Job` s of one model family; thread-safe ``submit``."""

    def __init__(self, family: EngineFamily, max_batch: int = 16, max_queue: int = 256,
                 threads: int | None = None):
        self.family = family
        # threads per role (model, codec, all) and lending: vocalis.engine.threads
        self.threads = ThreadPolicy(family, threads or torch.get_num_threads())
        # few frames per step: the codec's two stages on two threads (pipelined), or both
        # on the codec thread (fewer threads than cores oversubscribe less); the family
        # decides (measured at load)
        self.pipeline = self.threads.pipeline
        # frames per codec call of each row after its first (families whose codec decodes
        # several frames in one call more cheaply per frame; see _gather)
        self.codec_frames = max(1, int(family.codec_frames))
        # requests admitted per step at most (0: every free row): a burst is admitted in
        # groups, the first group's audio not waiting for the others' prompt passes
        self.admit_group = max(0, int(family.admit_group))
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.batch = family.new_batch(max_batch)
        self._queue: collections.deque[Job] = collections.deque()
        self._cond = threading.Condition()
        self._active: dict[int, Job] = {}  # row -> job
        self._closing = False
        self._decode_q: queue.Queue = queue.Queue(maxsize=max(4, self.codec_frames))
        self._held: collections.deque = collections.deque()  # taken from _decode_q, not decoded
        self._decoding = False  # frames are queued or being decoded
        # messages the model thread has queued for the codec thread (_send), those the codec
        # thread is done with, and second stages it queued on the helper that are not yet
        # handed out: when it is done with every message and none is out, the model thread
        # may decode without a turn (_borrow_idle_codec). The last two are guarded by
        # _codec_lock.
        self._sent = 0
        self._codec_lock = threading.Lock()
        self._handled = 0
        self._tails_out = 0
        self._expected = 0  # announced submissions not yet made (expect)
        self.steps = 0
        self.frames = 0
        self.admissions = 0  # steps that gave queued requests rows
        self.prompt_passes = 0  # batched prompt passes (one serves every row starting a chunk)
        self.prompt_rows: collections.deque[int] = collections.deque(maxlen=64)  # rows per pass
        self._scheduler = threading.Thread(target=self._run, name="vocalis-engine", daemon=True)
        self._decoder = threading.Thread(target=self._decode_loop, name="vocalis-decoder",
                                         daemon=True)
        self._helper_in: queue.Queue = queue.Queue()
        self._helper_out: queue.Queue = queue.Queue()
        self._helper = threading.Thread(target=self._helper_loop, name="vocalis-decoder-2",
                                        daemon=True)
        self._scheduler.start()
        self._decoder.start()
        self._helper.start()

    # ---------------------------------------------------------------- public

    def submit(self, job: Job) -> Request:
        """Queue a job; raises :class:`CapacityError` when the queue is full."""
        with self._cond:
            if self._closing:
                raise CapacityError("the engine is shutting down")
            # free rows take requests at the next step: they do not count against the queue
            free = max(0, self.max_batch - len(self._active))
            if len(self._queue) >= self.max_queue + free:
                n = self.max_queue
                raise CapacityError(
                    f"queue full ({n} request{'s' if n != 1 else ''} waiting, max_queue={n}): "
                    "retry later, or let more wait with vocalis.load(..., max_queue=N) "
                    "(vocalis serve --max-queue N)")
            self._queue.append(job)
            self._cond.notify_all()
        return job.req

    def expect(self) -> Expectation:
        """Announce a submission on its way (a server that has read a request and is
        checking it): an idle engine about to admit a burst in groups waits for announced
        submissions, :data:`GATHER_S` at most, so that the whole burst is admitted shortest
        first. Call ``done()`` on the result once the job is submitted or given up."""
        with self._cond:
            self._expected += 1
        return Expectation(self)

    @staticmethod
    def idle_status(max_batch: int, max_queue: int) -> dict:
        """:meth:`status` of an engine that has not started (nothing run, nothing held)."""
        return {"active_rows": 0, "queued": 0, "max_batch": max_batch, "max_queue": max_queue,
                "steps": 0, "frames": 0, "prompt_passes": 0, "announced": 0, "cache_mb": 0.0}

    def status(self) -> dict:
        """Rows in use, queue depth, limits, counters and the KV cache's size (MiB)."""
        with self._cond:
            return {**self.idle_status(self.max_batch, self.max_queue),
                    "active_rows": len(self._active), "queued": len(self._queue),
                    "steps": self.steps, "frames": self.frames,
                    "prompt_passes": self.prompt_passes, "announced": self._expected,
                    "cache_mb": round(self.batch.cache_bytes() / 2**20, 1)}

    def close(self, cancel: bool = True, timeout: float | None = 30.0) -> None:
        """Stop accepting work; cancel (or finish) what is queued and running, then stop.
        Idempotent; safe from any thread but the engine's own."""
        if threading.current_thread() in (self._scheduler, self._decoder, self._helper):
            return
        with self._cond:
            self._closing = True
            if cancel:
                for job in list(self._queue) + list(self._active.values()):
                    job.req.cancel()
            self._cond.notify_all()
        self._scheduler.join(timeout)
        self._decoder.join(timeout)
        self._helper_in.put(None)
        self._helper.join(timeout)

    # ---------------------------------------------------------------- scheduler

    def _run(self) -> None:
        self.threads.use("model")
        with torch.inference_mode():
            while True:
                with self._cond:
                    if not self._queue and not self._active and self.batch.oversized():
                        self.batch.release_memory()  # idle after a long request: give it back
                    if not self._queue and not self._active:
                        self.threads.idle_model_thread()
                    while not self._queue and not self._active and not self._closing:
                        self._cond.wait()
                    if self._closing and not self._queue and not self._active:
                        break
                    if not self._queue and not self._closing and not self._has_work():
                        # every row waits for its streamed text: until text comes (wake),
                        # a request, or the next look at cancellations
                        self._cond.wait(timeout=WAIT_POLL_S)
                        if not self._queue and not self._has_work():
                            continue
                    self._gather_burst()
                    admitted = self._take_admissions()
                decode_items: list = []
                finishes: list = []
                # Requests arriving at an idle engine get every thread for their prompt pass
                # and first step (time to first audio): the codec has nothing to do meanwhile.
                # A codec still on its last frames of requests that have ended (a caller
                # that submits the next request as soon as the last one's audio is out
                # comes before the codec thread has looked at its queue) is waited for: a
                # frame, while the prompt pass beside it would share the cores.
                burst = bool(admitted) and len(admitted) == len(self._active)
                if burst and self._decoding:
                    if self._decode_q.empty() and not self._held:
                        self._take_turn().back.set()  # its frames are out: go on
                    else:
                        burst = False
                if burst:
                    self.threads.use("all")
                for job in admitted:
                    job.req.stats.queued_ms = job.req._ms()
                    self._end_chunk(job, finishes)  # set up its first chunk
                self._retire_cancelled(finishes)
                self._prefill(finishes)
                stepped = False
                # A burst (more requests than one group arriving together) is admitted a
                # group per step, and each step serves only the group just admitted (its
                # first frames), holding back the rows that are still at their first frame
                # (the burst's earlier groups) until the last group has its first frame
                # (families whose step can leave rows untouched). Rows further on are never
                # held: a busy engine admitting from a backlog holds nobody back; nor are
                # live rows (Job.live): with one among them, nobody is held.
                only = None
                if admitted and self.admit_group and self.family.holds_rows:
                    rows = {j.row for j in admitted}
                    if all(j.frames <= 1 and not j.live
                           for r, j in self._active.items() if r not in rows):
                        only = rows
                        for r, j in self._active.items():
                            if r not in rows:
                                j.req.stats.held_steps += 1
                if self._active:
                    if not burst:
                        self.threads.model_step(len(self._active))
                    try:
                        self._step(decode_items, finishes, only)
                        stepped = True
                    except Exception as e:  # a failure of the whole step: fail its rows
                        self._fail_active(e, finishes)
                here = False
                if decode_items or finishes:
                    self._decoding = True
                    # requests still queued behind those admitted now (a burst admitted
                    # in groups): their first frames go out before the next group's prompt
                    # pass competes with their decoding
                    backlog = only is not None or (bool(admitted) and bool(self._queue)
                                                   and self.admit_group > 0)
                    here = (burst and len(admitted) == 1) or backlog
                    if here:  # a lone first frame, or a group's: this thread decodes them
                        self._decode_here(decode_items, finishes, burst)
                    else:
                        self._send((decode_items, finishes, None))
                if stepped:
                    if burst and not here and decode_items:  # the codec decodes beside it
                        self.threads.use("model")
                    if not burst:
                        self.threads.model_step(len(self._active))
                    self._finish_step()  # after a lone first frame: on every thread
                if burst:
                    self.threads.use("model")
        self._decode_q.put(None)

    def _take_turn(self) -> _Turn:
        """The codec thread's state, once it has handed out every frame queued before (see
        :class:`_Turn`); the caller gives it back with ``turn.back.set()``."""
        turn = _Turn()
        self._send(([], [], turn))
        turn.granted.wait()
        return turn

    def _decode_here(self, items: list, finishes: list, burst: bool) -> None:
        """Decode frames this thread would otherwise wait for (a lone request's first frame:
        time to first audio; a burst group's first frames) here, on every thread, once the
        codec thread has decoded every frame queued before them (their order holds); the
        codec thread waits meanwhile (:class:`_Turn`).

        Here rather than on the codec thread: this thread's OpenMP pool is warm from the
        prompt pass, its worker on the other core. The codec thread had to build a pool of
        every thread for it after this thread freed its own, and the new worker starts on
        its creator's core while the other core may not be free yet: until the kernel's
        load balancer moves it, the two share a core, each barrier spinning through the
        other's time slice (on a 2-core AMD EPYC Zen 4, a first frame's first codec stage
        took 6-25 ms instead of 3, time to first audio 50-100 ms instead of 50)."""
        turn = None if self._borrow_idle_codec() else self._take_turn()
        try:
            # the codec's core is this thread's now: no kernel borrows it (lent again when
            # the codec thread waits for frames again)
            self.threads.codec_lends(False)
            self.threads.use("all")
            self._decode_group([(items, finishes, None)])
            self._hand_over(items)  # (before the codec thread wakes for its turn back)
        finally:
            if not burst:  # (a burst's admission gives this thread its share at its end)
                self.threads.use("model")
            if turn is not None:
                turn.back.set()
            else:  # the codec thread still waits, nothing queued: as it was
                self._decoding = False
                self.threads.codec_lends(True)

    def _hand_over(self, items: list) -> None:
        """After a lone request's first frame (no other request active): wait until its
        reader has the audio, at most the interpreter's switch interval (5 ms by default).
        Its reader's thread, woken by the audio, needs the GIL, which this thread would hold
        between the next step's operations; CPython takes it from this thread only when the
        reader has waited a switch interval. Measured on a 2-core AMD EPYC Zen 4: 0.1-5.5 ms
        from the audio's hand-out to the reader (about 3 ms on average), 0.1-0.3 ms with
        this wait in three requests of four (the wait itself is that long); in the fourth
        the reader still waits for a core, the other one held by this thread's OpenMP
        worker, which spins a while after the frame."""
        if len(items) != 1 or len(self._active) > 1:
            return
        job, _, chunk, frame, _ = items[0]
        if chunk == 0 and frame == 0:
            job.req.handed_over(hand_over_s())

    def _borrow_idle_codec(self) -> bool:
        """Whether this thread may decode with the codec thread's state without a turn:
        the codec thread is done with every message this thread queued (the only thread
        that queues any) and no second stage is out on the helper, so it waits for the
        next message and touches nothing until this thread queues one. Asking it for a
        turn instead wakes it: with both cores busy (the step's OpenMP worker spinning on
        one) it took 0.2-4 ms to hand the turn over, added to a lone request's time to
        first audio (2-core AMD EPYC Zen 4)."""
        with self._codec_lock:
            return self._handled == self._sent and not self._tails_out

    def _send(self, msg: tuple) -> None:
        """Queue ``msg`` for the codec thread (this thread only: see _borrow_idle_codec)."""
        self._sent += 1
        self._decode_q.put(msg)

    def _finish_step(self) -> None:
        """The family's work that follows a step without its frames needing it (its
        ``finish_step``, e.g. a model step preparing the next frame), run once the frames
        have gone to the codec. A failure fails the rows of the engine, as a failed step
        does."""
        try:
            self.family.finish_step(self.batch)
        except Exception as e:
            finishes: list = []
            self._fail_active(e, finishes)
            if finishes:
                self._decoding = True
                self._send(([], finishes, None))

    def _fail_active(self, error: BaseException, finishes: list) -> None:
        """A failure of a whole step: every active row fails with ``error``."""
        log.exception("engine step failed")
        for job in list(self._active.values()):
            self._release(job, failed=True)
            finishes.append((job, error))

    def _has_work(self) -> bool:
        """Some active row can step now, or awaits its prompt pass or its retirement (a
        row waiting for streamed text (``EngineFamily.row_ready``) cannot step)."""
        return any(j.pending or j.req.cancelled or self.family.row_ready(j)
                   for j in self._active.values())

    def wake(self) -> None:
        """Tell the engine that a waiting row may be ready (its streamed text grew)."""
        with self._cond:
            self._cond.notify_all()

    def _gather_burst(self) -> None:
        """With ``_cond`` held, before an idle engine's first admission: while submissions
        announced by :meth:`expect` are on their way, wait for them (until the queue fills
        every row, :data:`GATHER_S` at most), so that a burst is sorted as a whole. Only an
        engine with a group limit that is idle waits; never for a live request."""
        deadline = None
        while (self.admit_group and self._expected and self._queue and not self._active
               and not self._decoding and not self._closing
               and len(self._queue) < self.max_batch and not any(j.live for j in self._queue)):
            if deadline is None:
                deadline = time.monotonic() + GATHER_S
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._cond.wait(left)

    def _take_admissions(self) -> list[Job]:
        """The queued jobs that get a row now: live ones (:attr:`Job.live`) all that fit, in
        one prompt pass, so that none of them speaks before the others' prompt passes are
        done (a gap in its audio); then at most ``admit_group`` others (0: no limit).

        With a group limit and more jobs waiting than one group, the shortest prompts
        (:func:`prompt_tokens`) go first, arrival order breaking ties: the median request of
        a burst then waits for the short half of the prompt passes only, and a group's rows
        have similar lengths, so that its batched pass pads little. A job passed over for
        later arrivals :data:`MAX_PASSED_OVER` times goes before every shorter one, so that
        a stream of short requests cannot hold a long one back for ever."""
        free = [r for r in range(self.max_batch) if r not in self._active]
        if not free:
            return []
        queued = list(self._queue)
        chosen = [j for j in queued if j.live]
        plain = [j for j in queued if not j.live]
        if self.admit_group and len(plain) > self.admit_group:
            overdue = [j for j in plain if j.passed_over >= MAX_PASSED_OVER]
            plain = overdue + sorted((j for j in plain if j.passed_over < MAX_PASSED_OVER),
                                     key=prompt_tokens)
            plain = plain[:self.admit_group]
        chosen = (chosen + plain)[:len(free)]
        taken = {id(j) for j in chosen}
        last = max((i for i, j in enumerate(queued) if id(j) in taken), default=-1)
        for i, job in enumerate(queued):
            if id(job) in taken:
                self._queue.remove(job)
            elif i < last:  # a later arrival went first
                job.passed_over += 1
        if chosen:
            self.admissions += 1
        for job in chosen:
            job.row = free.pop(0)
            job.req.stats.admission = self.admissions
            self._active[job.row] = job
        return chosen

    def _idle(self) -> bool:
        """No request is active or queued: the model thread is waiting for work."""
        with self._cond:
            return not self._active and not self._queue

    def _release(self, job: Job, failed: bool = False) -> None:
        """Free the job's row; after a failure, also wipe what it wrote (may be NaN)."""
        if failed or job.failed:
            self.batch.clear_row(job.row)
        with self._cond:
            self._active.pop(job.row, None)

    def _retire_cancelled(self, finishes: list) -> None:
        for job in list(self._active.values()):
            if job.req.cancelled:
                job.req.stats.cancelled = True
                self._release(job)
                finishes.append((job, None))
        with self._cond:  # queued requests cancelled before admission
            for job in [j for j in self._queue if j.req.cancelled]:
                self._queue.remove(job)
                job.req.stats.cancelled = True
                finishes.append((job, None))

    def _next_chunk(self, job: Job) -> bool:
        """Set up the job's next text chunk (its prompt pass runs in :meth:`_prefill`);
        False when no chunk is left."""
        job.chunk += 1
        if job.chunk >= len(job.chunks):
            return False
        text, ids, _ = job.chunks[job.chunk]
        job.asked_budget = False
        job.budget = self.family.start_chunk(job)  # sets asked_budget for a length asked for
        job.step = 0
        job.pending = True
        job.chunk_info.append({"text": text, "token_ids": list(ids), "frames": 0,
                               "eos_step": None})
        return True

    def _prefill_rows(self, finishes: list) -> None:
        """Prompt passes of every row starting a text chunk, in one batched forward (so
        requests that arrive together start together). If the batched pass fails, each
        row is retried alone so that only a failing request fails."""
        jobs = [j for j in self._active.values() if j.pending]
        if not jobs:
            return
        try:
            self._prefill_group(jobs)
            return
        except Exception as e:
            if len(jobs) == 1:
                self._fail(jobs[0], e, finishes)
                return
            log.exception("batched prompt pass failed; retrying its %d rows one by one",
                          len(jobs))
        for job in jobs:
            try:
                self._prefill_group([job])
            except Exception as e:
                self._fail(job, e, finishes)

    def _prefill(self, finishes: list) -> None:
        """:meth:`_prefill_rows` on every thread (a prompt pass is a large matrix product;
        the codec has at most the previous step's frames to decode meanwhile), then back to
        the thread count of the step."""
        if any(j.pending for j in self._active.values()):
            if self.codec_frames > 1:  # the codec decodes what it holds meanwhile (_gather)
                self._decoding = True
                self._send(([], [], None))
            before = torch.get_num_threads()
            self.threads.use("all")
            try:
                self._prefill_rows(finishes)
            finally:
                set_threads(before)

    def _fail(self, job: Job, error: BaseException, finishes: list) -> None:
        self._release(job, failed=True)
        finishes.append((job, error))

    def _prefill_group(self, jobs: list[Job]) -> None:
        self.family.prefill(self.batch, jobs)
        for job in jobs:
            job.pending = False
        self.prompt_passes += 1
        self.prompt_rows.append(len(jobs))

    def _step(self, decode_items: list, finishes: list, only: set[int] | None = None) -> None:
        """One model step of the active rows (of the rows ``only``, if given)."""
        n = max(self._active) + 1 if only is None else max(only) + 1
        jobs = [self._active.get(r) for r in range(n)]
        jobs = [j if j is not None and not j.pending and (only is None or j.row in only)
                and self.family.row_ready(j) else None for j in jobs]
        outs = self.family.step(self.batch, jobs)
        self.steps += 1
        for job, out in zip(jobs, outs):
            if job is None or out is None:
                continue
            if out.error is not None:
                self._fail(job, out.error, finishes)
                continue
            if out.end:
                self._end_chunk(job, finishes)
                continue
            g = job.step
            first = (out.start if out.start is not None else True) if g == 0 else False
            decode_items.append((job, out.frame, job.chunk, g, first))
            if out.scores is not None:
                job.scores[(job.chunk, g)] = out.scores
            job.step += 1
            job.frames += 1
            job.chunk_info[-1]["frames"] += 1
            self.frames += 1
            if job.step >= job.budget:
                if not job.asked_budget:  # a runaway guard or a default length stopped it
                    sr, fs = self.family.sample_rate, self.family.frame_samples
                    log.warning("request %d: speech did not end by itself within %.1f s (the "
                                "length limit of its text chunk %d of %d); its audio is cut "
                                "there", job.req.id, job.budget * fs / sr, job.chunk + 1,
                                len(job.chunks))
                self._end_chunk(job, finishes)

    def _end_chunk(self, job: Job, finishes: list) -> None:
        """The job's chunk is done (or it was just admitted): set up the next chunk, or
        retire the job."""
        if job.req.cancelled:
            job.req.stats.cancelled = True
            self._release(job)
            finishes.append((job, None))
            return
        try:
            more = self._next_chunk(job)
        except Exception as e:
            self._release(job)
            finishes.append((job, e))
            return
        if not more:
            self._release(job)
            finishes.append((job, None))

    # ---------------------------------------------------------------- codec threads

    # Two codec threads. A few frames per step (the common case at low concurrency) go
    # through a two-stage pipeline: the decoder thread runs the family's first codec stage
    # (decode_head) and the helper thread the second (decode_tail), each on its own state,
    # so consecutive frames overlap. Many frames per step are split by rows instead, each
    # half through both stages on one thread. Either way the codec gets the core the model
    # thread leaves idle. The helper handles its jobs in order, so events leave in order in
    # both modes. Before the decoder thread runs the second stage itself (split mode) it
    # waits until the helper has finished every second stage queued before: a row's codec
    # state must hold its previous frame, and that frame's audio must leave first. Families without a
    # pipeline (codec_pipeline False) run the whole codec on the decoder thread, gathering
    # up to codec_frames steps per call (_gather); many rows are still split by rows. A
    # lone request's first frame at an idle engine (the model thread waits for it: time to
    # first audio) and a burst group's first frames are decoded by the model thread itself,
    # on every thread, while this thread waits (_decode_here, _Turn).

    @staticmethod
    def _args(items: list) -> tuple[list[int], torch.Tensor, list]:
        return ([job.row for job, *_ in items], torch.stack([it[1] for it in items]),
                [it[4] for it in items])

    def _decode_full(self, items: list) -> np.ndarray:
        return self.batch.decode(*self._args(items)).float().cpu().numpy()

    def _decode_frames(self, steps: list[list]) -> np.ndarray:
        """The frames of consecutive steps of the same rows (``steps[k]``: the items of step
        k; only the first step may start a row) in one codec call: ``frames [n, T, ...]``.
        Returns PCM ``[n, T * frame_samples]``."""
        if len(steps) == 1:
            return self._decode_full(steps[0])
        rows, _, first = self._args(steps[0])
        frames = torch.stack([torch.stack([it[1] for it in col]) for col in zip(*steps)])
        return self.batch.decode(rows, frames, first).float().cpu().numpy()

    @staticmethod
    def _open(msg: tuple) -> bool:
        """Whether the steps after ``msg`` may join its codec call: it has frames, none
        starts a chunk (a first frame leaves at once: time to first audio), no request
        finishes with it and nobody waits on it."""
        items, finishes, done = msg
        return bool(items) and not finishes and done is None and not any(it[4] for it in items)

    @staticmethod
    def _joins(prev: tuple, msg: tuple) -> bool:
        """Whether step ``msg`` can follow ``prev`` in one codec call: the same jobs in the
        same rows, none starting a chunk."""
        a, b = prev[0], msg[0]
        return (msg[2] is None and len(a) == len(b)
                and all(x[0] is y[0] and not y[4] for x, y in zip(a, b)))

    def _next_msg(self):
        return self._held.popleft() if self._held else self._decode_q.get()

    def _gather(self, msg: tuple) -> list[tuple]:
        """``msg`` and the steps after it that share its codec call: up to ``codec_frames``
        steps of the same rows (decoding several frames per call costs less per frame: the
        codec's weights are read once, its matrix products are larger). A row's first frame
        (time to first audio), a change of rows, a finished request or a prompt pass end
        the group, so a lone request's groups do not depend on timing (its samples are the
        same run to run); HOLD_S only guards against a stalled model thread."""
        group = [msg]
        while len(group) < self.codec_frames and self._open(group[-1]):
            try:
                nxt = self._held.popleft() if self._held else self._decode_q.get(
                    timeout=self.HOLD_S)
            except queue.Empty:
                break
            if nxt is None or not self._joins(group[-1], nxt):
                self._held.appendleft(nxt)
                break
            group.append(nxt)
        return group

    #: longest wait (s) of the codec thread for the next step of a group (see _gather)
    HOLD_S = 30.0

    def _helper_loop(self) -> None:
        self.threads.use("codec")
        with torch.inference_mode():
            while (job := self._helper_in.get()) is not None:
                kind, payload = job
                if kind == "sync":  # every earlier job is done
                    payload.set()
                    continue
                if kind == "full":
                    try:
                        self._helper_out.put(self._decode_frames(payload))
                    except Exception as e:  # re-raised by the decoder thread
                        self._helper_out.put(e)
                    continue
                items, x, finishes, error = payload
                pcm = None
                if error is None and items:
                    rows, _, first = self._args(items)
                    try:
                        pcm = self.batch.decode_tail(rows, x, first).float().cpu().numpy()
                    except Exception as e:
                        error = e
                self._emit(items, pcm, error, finishes)
                with self._codec_lock:
                    self._tails_out -= 1

    def _emit(self, items: list, pcm, error, finishes: list) -> None:
        """Hand decoded frames, then finished requests, to their callers (in order)."""
        sr = self.family.sample_rate
        if error is not None:
            log.error("decoding failed: %s", error)
            for job, *_ in items:
                if not job.failed:
                    job.failed = True
                    job.req.cancel()
                    job.req._put(Failed(error, job.req.stats))
        elif pcm is not None:
            finite = np.isfinite(pcm).all(axis=1)
            for (job, _, chunk, frame, _), samples, ok in zip(items, pcm, finite):
                if job.failed or job.req.cancelled:
                    continue
                if not ok:  # fail this request alone; the scheduler frees its row
                    job.failed = True
                    job.req.cancel()
                    job.req._put(Failed(non_finite(job, "decoder", frame), job.req.stats))
                    continue
                job.req._put(AudioChunk(np.array(samples), chunk, frame,
                                        job.scores.pop((chunk, frame), None)))
        for job, err in finishes:
            if job.failed:
                continue
            st = job.req.stats
            st.frames = job.frames
            st.audio_s = job.frames * self.family.frame_samples / sr
            st.chunks = job.chunk_info
            if err is None:
                job.req._put(Finished(st))
            else:
                job.failed = True
                job.req._put(Failed(err, st))

    def _decode_split(self, steps: list[list]) -> np.ndarray:
        """:meth:`_decode_frames` of many rows, split by rows: the first half on this thread,
        the second on the helper (each through the whole codec)."""
        half = len(steps[0]) // 2
        self._helper_in.put(("full", [step[half:] for step in steps]))
        error, first = None, None
        try:
            first = self._decode_frames([step[:half] for step in steps])
        except Exception as e:
            error = e
        second = self._helper_out.get()
        if isinstance(second, BaseException):
            error = error or second
        if error is not None:
            raise error
        return np.concatenate([first, second])

    def _decode_group(self, group: list[tuple]) -> None:
        """Both codec stages of the steps of ``group`` (see :meth:`_gather`) in one call,
        split by rows with the helper thread for 4 rows or more, then their audio handed
        out in order."""
        steps = [m[0] for m in group]
        items = steps[0]
        pcm, error = None, None
        if items:
            try:
                pcm = self._decode_split(steps) if len(items) >= 4 \
                    else self._decode_frames(steps)
            except Exception as e:
                error = e
        fs = self.family.frame_samples
        for k, (items_k, finishes_k, _) in enumerate(group):
            part = None if pcm is None else pcm[:, k * fs:(k + 1) * fs]
            self._emit(items_k, part, error, finishes_k)

    def _wait_for_helper(self) -> None:
        """Block until the helper thread has finished every job queued before this call."""
        synced = threading.Event()
        self._helper_in.put(("sync", synced))
        synced.wait()

    def _decode_loop(self) -> None:
        self.threads.use("codec")
        tails_queued = False  # the helper may still be running second stages
        with torch.inference_mode():
            self.threads.codec_lends(True)
            while (msg := self._next_msg()) is not None:
                items, finishes, done = msg
                taken = 1  # messages this pass is done with
                if isinstance(done, _Turn):  # the model thread decodes: every frame before
                    if tails_queued:         # its frames is out; wait until it is done
                        self._wait_for_helper()
                        tails_queued = False
                    done.granted.set()  # (the taker stops the lending: _decode_here)
                    done.back.wait()
                    self.threads.codec_lends(True)
                # both stages on this thread: many rows or no pipeline
                elif len(items) >= 4 or not self.pipeline:
                    if tails_queued:
                        self._wait_for_helper()
                        tails_queued = False
                    group = self._gather(msg)
                    taken = len(group)
                    self.threads.codec_lends(False)  # the codec's threads are busy from here
                    # every thread for the last frames of the engine's last request (the
                    # model thread has no work left)
                    alone = bool(group[-1][1]) and self._idle()
                    if alone:
                        self.threads.use("all")
                    self._decode_group(group)
                    if alone:  # back to this thread's share, without a pool beside the
                        self.threads.use("codec")  # model thread's
                        release_thread_pool()
                    self.threads.codec_lends(True)
                else:  # pipeline: first stage here, second stage on the helper
                    x, error = None, None
                    if items:
                        try:
                            x = self.batch.decode_head(*self._args(items))
                        except Exception as e:
                            error = e
                    with self._codec_lock:
                        self._tails_out += 1
                    self._helper_in.put(("tail", (items, x, finishes, error)))
                    tails_queued = True
                if self._decode_q.empty() and not self._held:
                    self._decoding = False
                with self._codec_lock:
                    self._handled += taken
            self.threads.codec_lends(False)


def non_finite(job: Job, stage: str, frame: int) -> GenerationError:
    return GenerationError(
        f"request {job.req.id} stopped: the {stage} produced NaN or inf at text chunk "
        f"{job.chunk}, frame {frame} (a broken voice state or weights file?); other "
        "requests are unaffected")


def make_job(family, voice, chunks, params, seed: int, live: bool = False) -> Job:
    """A job for ``family`` with its own generator seeded with ``seed``; ``live``: see
    :attr:`Job.live`."""
    rng = torch.Generator()
    rng.manual_seed(seed)
    req = Request()
    req.stats.seed = seed
    req.n_chunks = len(chunks)
    return Job(req, voice, chunks, params, rng, family.new_state(params), live=live)


__all__ = ["Engine", "Expectation", "Job", "make_job"]
