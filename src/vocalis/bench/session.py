"""Drive requests through a loaded model's engine and time them from the caller's side.

A *pass* runs a list of :class:`Job` with at most ``in_flight`` requests submitted to the
engine at once (one consumer thread per request in flight; ``in_flight=1`` is strictly
sequential). Each request is timed here, where its audio arrives, not inside the engine:
``ttfa_ms`` is the time from just before ``submit`` to the first audio chunk in the
caller's hands; ``wall_ms`` to its final event. A request that fails (a synchronous error
from ``submit``, a ``Failed`` event, a timeout) is recorded as failed; the others go on.

Also here, for every front end that runs many requests (``vocalis bench``, ``vocalis
batch``, Ray Data): :class:`VoiceCache` (each distinct voice made once, outside the timed
requests) and the per-frame figures of a pass (:func:`add_frame_figures`).
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vocalis.engine.types import AudioChunk, Failed, Finished

log = logging.getLogger(__name__)

#: seconds to wait for any one event of a request before giving up on it (never hang)
EVENT_TIMEOUT_S = 600.0


@dataclass
class Job:
    """One request: ``voice`` is a loaded :class:`vocalis.api.Voice` (or what ``submit``
    accepts); ``sampling`` the family's request options besides the seed."""

    index: int
    text: str
    voice: Any = None
    seed: int | None = None
    sampling: dict = field(default_factory=dict)


@dataclass
class Outcome:
    """What one request did, timed by the caller."""

    index: int
    ok: bool = False
    error: str | None = None
    samples: np.ndarray | None = None
    ttfa_ms: float | None = None
    wall_ms: float = 0.0
    audio_s: float = 0.0
    frames: int = 0
    events: int = 0  # audio chunk events received
    text_chunks: int = 0
    in_order: bool = True  # (chunk, frame) indices arrived in order, without gaps
    engine: dict | None = None  # the engine's own RequestStats (as_dict, without chunks)
    arrivals_ms: list[float] | None = None  # per audio event, from submit (when recorded)
    sizes: list[int] | None = None  # samples per audio event (when recorded)
    codes: np.ndarray | None = None  # generated codes [frames, codebooks] (families that report them)

    @property
    def rtf(self) -> float | None:
        return (self.wall_ms / 1000) / self.audio_s if self.audio_s > 0 else None

    @property
    def x_real_time(self) -> float | None:
        return self.audio_s / (self.wall_ms / 1000) if self.audio_s > 0 and self.wall_ms > 0 else None

    def figures(self) -> dict:
        """Per-request figures for a JSON report (no samples)."""
        out = {"index": self.index, "ok": self.ok, "error": self.error,
               "ttfa_ms": _r(self.ttfa_ms), "wall_ms": _r(self.wall_ms),
               "audio_s": _r(self.audio_s, 4), "frames": self.frames, "rtf": _r(self.rtf, 4),
               "x_real_time": _r(self.x_real_time, 3), "audio_events": self.events,
               "text_chunks": self.text_chunks}
        if self.engine is not None:
            out["engine_queued_ms"] = _r(self.engine.get("queued_ms"))
            out["engine_ttfa_ms"] = _r(self.engine.get("ttfa_ms"))
        return out


def _r(x, nd: int = 2):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else round(x, nd)


def _describe(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def frame_samples(tts) -> int:
    """Samples per frame of a loaded model (its engine family's)."""
    return int(tts.engine_family.frame_samples)


class VoiceCache:
    """Each distinct voice of a run made once (a voice file read, a reference cloned), before
    any request is timed. :meth:`get` splits a request's options into the voice's (the
    schema's options marked ``voice``) and the rest."""

    def __init__(self, tts):
        self.tts = tts
        self.voices: dict = {}

    def get(self, voice, options: dict) -> tuple[Any, dict]:
        """``(voice for submit, options for submit)``: a loaded voice (the model's default
        voice when ``voice`` is None and it has one) and the options without the voice's;
        ``voice`` unchanged when it is None and the model has no default (the request
        describes its voice otherwise, e.g. in words).

        Raises what ``tts.voice`` raises (VoiceError, InputError, ModelNotFound)."""
        info, schema = self.tts.info, self.tts.family.options
        if voice is None and info.default_voice is None:
            return None, dict(options)
        own = {k: v for k, v in options.items() if k in schema and schema[k].voice}
        rest = {k: v for k, v in options.items() if k not in own}
        key = (voice, tuple(sorted(own.items())))
        if key not in self.voices:
            self.voices[key] = self.tts.voice(voice, **own)
        return self.voices[key], rest


def run_one(tts, job: Job, record: bool = False,
            timeout_s: float = EVENT_TIMEOUT_S) -> Outcome:
    """Submit one request and consume its events (see the module doc for the timing)."""
    out = Outcome(job.index)
    per_frame = frame_samples(tts)
    rate = tts.sample_rate
    pieces: list[np.ndarray] = []
    if record:
        out.arrivals_ms, out.sizes = [], []
    t0 = time.perf_counter()
    try:
        req = tts.submit(job.text, voice=job.voice, seed=job.seed, **job.sampling)
    except Exception as e:  # noqa: BLE001 - InputError/VoiceError/CapacityError, or a bug: this request only
        out.wall_ms = (time.perf_counter() - t0) * 1000
        out.error = _describe(e)
        return out
    expect = (0, 0)
    chunks_seen = set()
    try:
        for ev in req.events(timeout=timeout_s):
            now = time.perf_counter()
            if isinstance(ev, AudioChunk):
                if out.ttfa_ms is None:
                    out.ttfa_ms = (now - t0) * 1000
                samples = np.asarray(ev.samples, dtype=np.float32)
                pieces.append(samples)
                out.events += 1
                # next event: the following frame of the same text chunk, or frame 0 of a
                # later chunk
                if (ev.chunk, ev.frame) != expect and not (ev.chunk > expect[0] and ev.frame == 0):
                    out.in_order = False
                expect = (ev.chunk, ev.frame + max(1, samples.shape[0] // per_frame))
                chunks_seen.add(ev.chunk)
                if record:
                    out.arrivals_ms.append((now - t0) * 1000)
                    out.sizes.append(int(samples.shape[0]))
            elif isinstance(ev, Finished):
                stats = ev.stats
                out.engine = {k: v for k, v in stats.as_dict().items() if k != "chunks"}
                out.text_chunks = len(stats.chunks) or len(chunks_seen)
                codes = [c for ch in stats.chunks for c in ch.get("codes", ())]
                if codes:
                    out.codes = np.asarray(codes, dtype=np.int64)
                if stats.cancelled:
                    out.error = "cancelled"
                else:
                    out.ok = True
            elif isinstance(ev, Failed):
                out.engine = {k: v for k, v in ev.stats.as_dict().items() if k != "chunks"}
                out.error = _describe(ev.error)
    except TimeoutError:
        req.cancel()
        out.error = f"TimeoutError: no event within {timeout_s:.0f} s (request cancelled)"
    except Exception as e:  # noqa: BLE001 - a bug in the engine's event stream
        req.cancel()
        out.error = _describe(e)
    out.wall_ms = (time.perf_counter() - t0) * 1000
    out.samples = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    out.audio_s = out.samples.shape[0] / rate
    out.frames = out.samples.shape[0] // per_frame
    if not out.text_chunks:
        out.text_chunks = len(chunks_seen)
    return out


def run_pass(tts, jobs: list[Job], in_flight: int, record: bool = False,
             timeout_s: float = EVENT_TIMEOUT_S) -> tuple[list[Outcome], float]:
    """Run ``jobs`` with at most ``in_flight`` requests in the engine at once, submitted in
    order as earlier ones finish. Returns (outcomes in job order, pass wall ms)."""
    in_flight = max(1, min(in_flight, len(jobs) or 1))
    t0 = time.perf_counter()
    if in_flight == 1:
        outcomes = [run_one(tts, j, record, timeout_s) for j in jobs]
    else:
        with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="vocalis-bench") as pool:
            outcomes = list(pool.map(lambda j: run_one(tts, j, record, timeout_s), jobs))
    return outcomes, (time.perf_counter() - t0) * 1000


def distribution(values: list[float]) -> dict | None:
    """mean / p50 / p90 / min / max of some figures (None when there are none)."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None

    def pct(p: float) -> float:
        k = (len(v) - 1) * p
        lo, hi = math.floor(k), math.ceil(k)
        return v[lo] + (v[hi] - v[lo]) * (k - lo)

    return {"mean": _r(statistics.fmean(v)), "p50": _r(pct(0.5)), "p90": _r(pct(0.9)),
            "min": _r(v[0]), "max": _r(v[-1])}


def summarize(outcomes: list[Outcome], wall_ms: float) -> dict:
    """Figures of one pass: counts, audio, aggregate speed, TTFA and per-request speed."""
    ok = [o for o in outcomes if o.ok]
    audio_s = sum(o.audio_s for o in ok)
    wall_s = wall_ms / 1000
    xs = [o.x_real_time for o in ok if o.x_real_time is not None]
    rtfs = [o.rtf for o in ok if o.rtf is not None]
    return {
        "requests": len(outcomes), "ok": len(ok), "failed": len(outcomes) - len(ok),
        "wall_ms": _r(wall_ms), "audio_s": _r(audio_s, 4),
        "frames": sum(o.frames for o in ok),
        # aggregate: all audio of the pass over the pass's wall time
        "x_real_time": _r(audio_s / wall_s, 3) if wall_s > 0 and audio_s > 0 else None,
        "rtf": _r(wall_s / audio_s, 4) if audio_s > 0 else None,
        "ttfa_ms": distribution([o.ttfa_ms for o in ok]),
        # per request (each request's audio over its own wall time), averaged
        "request_x_real_time": _r(statistics.fmean(xs), 3) if xs else None,
        "request_rtf": _r(statistics.fmean(rtfs), 4) if rtfs else None,
    }


def with_ms_per_frame(r: dict) -> dict:
    """A per-request dict with ``ms_per_frame`` = wall_ms / frames (None without frames)."""
    if "ms_per_frame" not in r:
        r = {**r, "ms_per_frame": _r(r["wall_ms"] / r["frames"], 3)
             if r.get("ok") and r.get("frames") and r.get("wall_ms") is not None else None}
    return r


def add_frame_figures(summary: dict, per_request: list[dict] | None) -> dict:
    """Add to a pass summary ``ms_per_frame`` (mean over ok requests of wall_ms / frames: the
    single-stream cost of a frame, TTFA included) and ``frames_per_s`` (all frames of the
    pass over its wall time: aggregate). ``per_request`` None: ``ms_per_frame`` is kept if
    present, else None."""
    if per_request is not None:
        ms = [with_ms_per_frame(r)["ms_per_frame"] for r in per_request]
        ms = [x for x in ms if x is not None]
        summary["ms_per_frame"] = _r(sum(ms) / len(ms), 3) if ms else None
    else:
        summary.setdefault("ms_per_frame", None)
    wall, n = summary.get("wall_ms"), summary.get("frames")
    summary["frames_per_s"] = _r(n / (wall / 1000), 2) if wall and n else None
    return summary
