"""Speed choices made by measurement on the machine at hand, and cached.

Which CPU kernels are fastest depends on the processor: oneDNN's packed float32 linears
beat PyTorch's default (MKL) path on one CPU and lose to it on another of the same core
count (docs/speed-choices.md), and the best split of the threads between the model and the
codec differs too. So a family does not hard-code these choices: it lists the candidates,
and :func:`resolve` decides each one by timing the candidates on the running machine
(a short calibration the first time a model is loaded), caches the outcome, and reuses it.

The cache is one JSON file, ``<vocalis cache>/tuning.json`` (``$VOCALIS_CACHE``, else
``$XDG_CACHE_HOME/vocalis``, else ``~/.cache/vocalis``), one entry per key: the CPU model
and its ISA flags, the torch thread count, the torch version, the family's model
fingerprint (config, dimensions, quantization, batch size) and the calibration method's
version. A key that differs in any of these is measured again.

A measurement taken while other work loads the machine can be many times off (a new
user's first load beside another process cached timings 30-70x off). So :func:`resolve`
checks that each measured choice settled (:func:`unsettled`: every contender's best round
reproduced, the machine not busier than the calibration allows, :func:`other_cpus`),
measures up to :data:`EXTRA_ROUNDS` more rounds when it did not, and when the scores are
still unsettled uses the choice for this run without caching it (one warning line): it is
measured again at the next load.

Choices can be forced, for experiments or to pin a deployment: ``tuning=`` in
:func:`vocalis.load` (a dict or a ``"name=value,name=value"`` string), else the
``VOCALIS_TUNING`` environment variable in the same syntax. ``"fixed"`` skips measurement
and uses the family's built-in defaults; ``"auto"`` (the default) uses the cache or
measures. Forced values win over the cache and are not written to it.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from vocalis.engine.openmp import release_thread_pool, set_threads
from vocalis.errors import InputError
from vocalis.hub import vocalis_cache_dir

log = logging.getLogger("vocalis.tuning")
#: said (INFO) before the first speed choice of a load is measured
MEASURING = ("measuring speed choices for this CPU (once; cached): up to a minute, longer "
             "while other work loads the machine...")

#: ISA features that decide which kernels are fast (x86 and ARM names from /proc/cpuinfo)
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
             "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16",
             "amx_int8", "asimd", "asimddp", "sve", "sve2", "bf16", "i8mm")

ENV = "VOCALIS_TUNING"
CACHE_FILE = "tuning.json"

#: a contender's rounds are settled when its second-shortest score is at most this many
#: times its shortest: its best was reproduced. On a quiet 2-core machine the rounds of a
#: candidate agreed within 15% (8 rounds each, 4 loads of the tiny Pocket model); beside a
#: competing process a disturbed round ran 2-8x the others (177 against 1384 ms), and the
#: report that prompted this rule had timings 30-70x off. 1.5 leaves three times the quiet
#: noise before a choice counts as unsettled, and flags every disturbance of more than
#: 1.5x that does not hit all the rounds of a contender alike (one that does is what
#: :data:`BUSY_CPUS` is for).
SETTLED_SPREAD = 1.5
#: at most this many rounds are measured beyond a choice's own while it is unsettled
#: (each round times every contender once; the order keeps alternating)
EXTRA_ROUNDS = 2
#: a round counts as measured on a busy machine when other processes (or other virtual
#: machines: steal time) kept more than this many CPUs busy on average beyond those the
#: calibration's threads leave free: half a CPU that the measurement needed was taken
BUSY_CPUS = 0.5
#: spans shorter than this are not judged by :func:`other_cpus` (the kernel counts CPU time
#: in ticks of 10 ms or so: a short span's share would be noise)
MIN_SPAN_S = 0.25


def cpu_info() -> dict:
    """``{"model": str, "isa": [flags], "capability": str, "logical_cpus": int}``.

    ``model`` is the processor name from ``/proc/cpuinfo`` (else ``platform.processor()``);
    ``isa`` the flags of :data:`ISA_FLAGS` the CPU has; ``capability`` what PyTorch's CPU
    dispatch detected (``torch.backends.cpu.get_cpu_capability()``, e.g. ``AVX512``)."""
    import torch

    name, flags = "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key in ("model name", "cpu model", "hardware") and not name:
                    name = value.strip()
                elif key in ("flags", "features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - older torch or an unusual build
        capability = "unknown"
    return {"model": name or platform.processor() or platform.machine(),
            "isa": [f for f in ISA_FLAGS if f in flags], "capability": capability,
            "logical_cpus": os.cpu_count()}


@dataclass
class Tuning:
    """The choices a loaded model runs with, and where each came from.

    ``choices``: name -> value; ``sources``: name -> ``"measured"``, ``"cache"``,
    ``"forced"`` or ``"fixed"`` (built-in default: ``tuning="fixed"``, an exact model, or a
    choice that does not apply); ``timings``: name -> candidate -> score (lower is faster;
    for measured choices the median milliseconds of the calibration runs, summed over the
    batch sizes tried; a candidate's shortest round: the cache's format); ``key``: what the
    cache entry is keyed by; ``calibration_ms``: time spent measuring at this load (0 when
    nothing was measured); ``rounds``: for the choices measured at this load, name ->
    candidate -> every round's score, in the order measured; ``uncached``: the measured
    choices whose scores did not settle, name -> why (they run with the measured value at
    this load, their source stays ``"measured"``, and they are not written to the cache)."""

    choices: dict[str, str]
    sources: dict[str, str]
    key: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    calibration_ms: float = 0.0
    rounds: dict = field(default_factory=dict)
    uncached: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"choices": dict(self.choices), "sources": dict(self.sources),
                "key": dict(self.key), "timings": self.timings,
                "calibration_ms": round(self.calibration_ms, 1),
                "rounds": self.rounds, "uncached": dict(self.uncached)}

    def describe(self) -> str:
        """One line: ``name=value (source), ...``; a measured choice left out of the cache
        reads ``(measured, not cached: busy)``."""
        return ", ".join(f"{k}={v} ({self.sources.get(k, '?')}"
                         f"{', not cached: busy' if k in self.uncached else ''})"
                         for k, v in self.choices.items())


def parse_spec(spec, candidates: dict[str, tuple[str, ...]], origin: str = "tuning",
               notes: dict[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """``spec`` (None, ``"auto"``, ``"fixed"``, ``"a=x,b=y"``, ``"fixed,a=x"`` or a dict)
    -> (mode, forced).

    ``mode`` is ``"auto"`` or ``"fixed"``; ``forced`` maps choice names to values, checked
    against ``candidates`` (name -> allowed values); ``notes`` (name -> why its candidates
    are what they are) complete the error message.

    Raises:
        InputError: an unknown choice name or value (the message lists the allowed ones).
    """
    if spec is None or (isinstance(spec, str) and spec.strip() in ("", "auto")):
        return "auto", {}
    if isinstance(spec, str) and spec.strip() == "fixed":
        return "fixed", {}
    mode = "auto"
    if isinstance(spec, str):
        pairs = {}
        for part in spec.split(","):
            if not part.strip():
                continue
            if part.strip() in ("auto", "fixed"):  # e.g. "fixed,codec_dtype=bfloat16"
                if {w.strip() for w in spec.split(",")} >= {"auto", "fixed"}:
                    raise InputError(f"{origin}: give one of 'auto' or 'fixed', not both")
                mode = part.strip()
                continue
            name, eq, value = part.partition("=")
            if not eq:
                raise InputError(f"{origin}: {part.strip()!r} is not name=value; use e.g. "
                                 f"{_example(candidates)}, 'auto' or 'fixed'")
            if name.strip() in pairs:
                raise InputError(f"{origin}: {name.strip()} is given twice; give it once")
            pairs[name.strip()] = value.strip()
    elif isinstance(spec, dict):
        pairs = {str(k): str(v) for k, v in spec.items()}
    else:
        raise InputError(f"{origin} must be 'auto', 'fixed', a 'name=value,...' string or a "
                         f"dict, got {type(spec).__name__}")
    for name, value in pairs.items():
        if name not in candidates:
            raise InputError(f"{origin}: unknown choice {name!r}; this model has: "
                             f"{', '.join(candidates) or 'none'}")
        if value not in candidates[name]:
            why = f" ({notes[name]})" if notes and name in notes else ""
            raise InputError(f"{origin}: {name}={value!r} is not allowed here{why}; use "
                             f"one of {', '.join(candidates[name])}")
    return mode, pairs


def _example(candidates: dict[str, tuple[str, ...]]) -> str:
    items = [f"{k}={v[0]}" for k, v in candidates.items() if v]
    return "'" + ",".join(items[:2]) + "'" if items else "'auto'"


def cache_path() -> Path:
    return vocalis_cache_dir() / CACHE_FILE


def _key_id(key: dict) -> str:
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


def read_cache(key: dict) -> dict | None:
    """The cache entry for ``key``: ``{"choices": {name: value}, "timings": {name: {candidate:
    score}}}`` (malformed parts dropped: a choice that is not a string, timings that are not
    a mapping), or None."""
    path = cache_path()
    try:
        entries = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("ignoring the unreadable tuning cache %s (%s); measuring again", path, e)
        return None
    if not isinstance(entries, dict):
        log.warning("ignoring the tuning cache %s (not a JSON object); measuring again", path)
        return None
    entry = entries.get(_key_id(key))
    if not isinstance(entry, dict) or not isinstance(entry.get("choices"), dict):
        return None
    timings = entry.get("timings")
    return {"choices": {k: v for k, v in entry["choices"].items() if isinstance(v, str)},
            "timings": {k: v for k, v in timings.items() if isinstance(v, dict)}
            if isinstance(timings, dict) else {}}


def write_cache(key: dict, choices: dict[str, str], timings: dict) -> bool:
    """Add or replace the entry for ``key`` (atomic rename); returns whether it was written
    (a failure is logged, not raised: the model still runs with the measured choices)."""
    path = cache_path()
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            entries = json.loads(path.read_text())
            if not isinstance(entries, dict):
                entries = {}
        except (OSError, ValueError):
            entries = {}
        entries[_key_id(key)] = {"key": key, "choices": choices, "timings": timings,
                                 "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        fd, tmp = tempfile.mkstemp(prefix=".tuning-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(entries, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
        return True
    except OSError as e:
        log.warning("could not write the tuning cache %s: %s", path, e)
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        return False


def median_ms(fn: Callable[[], object], repeats: int = 5, warmup: int = 2) -> float:
    """Median wall time of ``fn()`` in milliseconds over ``repeats`` runs after ``warmup``."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def machine_key(threads: int, model: dict) -> dict:
    """A cache key: this CPU (model name, ISA flags, PyTorch's dispatch level), the thread
    count, the torch version and the family's ``model`` fingerprint."""
    import torch

    cpu = cpu_info()
    return {"cpu": cpu["model"], "isa": cpu["isa"], "capability": cpu["capability"],
            "threads": int(threads), "torch": torch.__version__, "model": model}


def timed_ms(fn: Callable[[], object], threads: int, repeats: int = 5,
             warmup: int = 2) -> float:
    """:func:`median_ms` of ``fn`` under inference mode with ``threads`` torch threads
    (the caller's thread count is restored, and its OpenMP worker pool freed, so that
    timings taken after this one on other threads are not slowed by it:
    :mod:`vocalis.engine.openmp`)."""
    import torch

    before = torch.get_num_threads()
    set_threads(threads)
    try:
        with torch.inference_mode():
            return median_ms(fn, repeats, warmup)
    finally:
        set_threads(before)
        release_thread_pool()


def concurrent_ms(tasks: list[tuple[int, Callable[[], object]]], repeats: int = 2) -> float:
    """Shortest wall time (ms) over ``repeats`` runs (after one warm-up) of running every
    ``(threads, fn)`` at once, each on its own Python thread with its own torch intra-op
    thread count (as the engine's model and codec threads run). The caller's OpenMP worker
    pool is freed first (:mod:`vocalis.engine.openmp`): as in the engine, only these
    threads own one."""
    import torch

    release_thread_pool()

    def once() -> float:
        barrier = threading.Barrier(len(tasks) + 1)
        errors: list[BaseException] = []

        def run(n: int, fn: Callable[[], object]) -> None:
            set_threads(n)
            with torch.inference_mode():
                barrier.wait()
                try:
                    fn()
                except BaseException as e:  # noqa: BLE001 - re-raised below
                    errors.append(e)

        workers = [threading.Thread(target=run, args=t, daemon=True) for t in tasks]
        for w in workers:
            w.start()
        barrier.wait()
        t0 = time.perf_counter()
        for w in workers:
            w.join()
        if errors:
            raise errors[0]
        return (time.perf_counter() - t0) * 1000

    once()  # warm-up
    return min(once() for _ in range(repeats))


def repeat(fn: Callable[[], object], n: int) -> Callable[[], None]:
    """``fn`` called ``n`` times in a row."""
    def run() -> None:
        for _ in range(n):
            fn()
    return run


def default_split(total: int) -> tuple[int, int]:
    """The built-in (model threads, codec threads) split of ``total`` threads: about a
    third for the codec, the rest for the model (where it was chosen, Pocket's best split,
    and within noise of the others for Qwen3: docs/speed-choices.md). Used with ``fixed``
    and for ``exact`` models; otherwise every machine measures its own."""
    codec = max(1, total // 3)
    return max(1, total - codec), codec


def split_candidates(total: int) -> tuple[str, ...]:
    """Thread splits ``"model:codec"`` allowed for ``total`` threads, the built-in one
    first: the splits of the budget (:func:`measured_splits`, the ones measured) and, for
    experiments, splits that give the two threads more than the budget together."""
    f0, c0 = default_split(total)
    models = {total, f0}
    codecs = {1, c0, max(1, total // 2)} | ({total} if total <= 4 else set())
    pairs = {(f, c) for f in models for c in codecs}
    pairs |= {parse_split(s) for s in measured_splits(total)}
    rest = sorted(pairs - {(f0, c0)})
    return tuple(f"{f}:{c}" for f, c in [(f0, c0)] + rest)


def measured_splits(total: int) -> tuple[str, ...]:
    """The splits a calibration measures: the built-in one, then every ``model:codec`` with
    ``model + codec == total``. Splits that oversubscribe the budget are not measured: once
    each thread's count held (:mod:`vocalis.engine.openmp`), they only came out ahead by the
    noise of a short timing, and then ran slower than the split they beat
    (docs/speed-choices.md)."""
    f0, c0 = default_split(total)
    rest = [(total - c, c) for c in range(1, total) if (total - c, c) != (f0, c0)]
    return tuple(f"{f}:{c}" for f, c in [(f0, c0)] + rest)


def parse_split(value: str) -> tuple[int, int]:
    """``"model:codec"`` -> (model threads, codec threads)."""
    f, c = value.split(":")
    return int(f), int(c)


def release_memory() -> None:
    """Give the memory freed after a calibration (scratch caches, the discarded copy of
    each weight) back to the OS where the C library allows it (glibc ``malloc_trim``): free
    memory that glibc would otherwise keep in the process (docs/speed-choices.md has what
    it gave back once). A no-op elsewhere."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "malloc_trim"):
            libc.malloc_trim(0)
    except OSError:
        pass


Measure = Callable[[str, str], float]
"""``measure(choice name, candidate) -> score`` (lower is faster), e.g. milliseconds."""


def cpu_sample() -> tuple[float, float, float] | None:
    """``(wall s, CPU s the whole machine has run, CPU s this process has run)`` now, for
    :func:`other_cpus`; None where the machine's count is unknown (no ``/proc/stat``: not
    Linux). The machine's count is user, nice, system, irq, softirq and steal time (time a
    hypervisor gave to other virtual machines: a noisy neighbour slows a measurement too)."""
    try:
        with open("/proc/stat", encoding="ascii", errors="replace") as f:
            fields = f.readline().split()
        ticks = os.sysconf("SC_CLK_TCK")
        # cpu user nice system idle iowait irq softirq steal ...
        busy = sum(int(fields[i]) for i in (1, 2, 3, 6, 7, 8))
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    if fields[0] != "cpu" or ticks <= 0:
        return None
    return time.perf_counter(), busy / ticks, time.process_time()


def other_cpus(before: tuple | None, after: tuple | None) -> float | None:
    """How many CPUs other work (other processes, other virtual machines) kept busy on
    average between two :func:`cpu_sample` s: the machine's CPU time less this process's
    (all its threads), over the wall time. None when unknown: no samples, or a span under
    :data:`MIN_SPAN_S`."""
    if before is None or after is None or after[0] - before[0] < MIN_SPAN_S:
        return None
    wall = after[0] - before[0]
    return max(0.0, ((after[1] - before[1]) - (after[2] - before[2])) / wall)


def busy_limit(threads) -> float:
    """Other work may keep this many CPUs busy before a round counts as measured on a busy
    machine: the CPUs that ``threads`` calibration threads leave free, plus
    :data:`BUSY_CPUS`."""
    cpus = os.cpu_count() or 1
    used = threads if isinstance(threads, int) and threads > 0 else cpus
    return max(0, cpus - used) + BUSY_CPUS


def _ms(score: float) -> str:
    return f"{score:.1f}" if score >= 1 else f"{score:.3g}"


def unsettled(rounds: dict[str, list[float]]) -> str | None:
    """The contender whose best score is least reproduced, when one's second-shortest round
    is more than :data:`SETTLED_SPREAD` times its shortest; else None (a contender with one
    round has nothing to disagree with). ``rounds``: contender -> its scores.

    A slow spell only lengthens a timing, so a contender's shortest score is its best
    estimate; it is trusted when another round came close to it."""
    worst, spread = None, SETTLED_SPREAD
    for option, scores in rounds.items():
        if len(scores) < 2:
            continue
        first, second = sorted(scores)[:2]
        ratio = second / first if first > 0 else (float("inf") if second > 0 else 1.0)
        if ratio > spread:
            worst, spread = option, ratio
    return worst


def _new_contenders(cached: dict | None, name: str, options: tuple[str, ...]) -> bool:
    """Whether ``options`` holds a candidate that the cached measurement of ``name`` did not
    time (offered since: e.g. our kernels built after that load), so that the choice is
    measured again. An entry without timings for ``name`` counts as having timed them all."""
    timed = ((cached or {}).get("timings") or {}).get(name)
    return isinstance(timed, dict) and any(o not in timed for o in options)


def resolve(key: dict, candidates: dict[str, tuple[str, ...]], defaults: dict[str, str],
            spec, measure: Measure, apply: Callable[[str, str], None],
            measurable: tuple[str, ...] | None = None,
            notes: dict[str, str] | None = None,
            contenders: dict[str, tuple[str, ...]] | None = None,
            rounds: dict[str, int] | None = None) -> Tuning:
    """Decide every choice in ``candidates`` (in order) and ``apply`` each decision.

    ``spec``: as in :func:`parse_spec`, or None to read ``$VOCALIS_TUNING``.
    ``contenders``: per choice, the candidates that are measured (default: all of them);
    the others may be forced, never chosen. For each choice: a forced value wins; else
    with ``"fixed"`` (or a choice outside ``measurable``) the default; else with a single
    contender that one, unmeasured; else the cached value for ``key`` (when it is still a
    contender, and every contender was timed then: a candidate offered since, e.g. a kernel
    built after that load, has the choice measured again); else every contender is measured
    with ``measure`` (the candidates of later
    choices are measured with earlier decisions applied) and the fastest kept. With
    ``rounds[name]`` > 1 the contenders are measured that many times, in turn (forward,
    then backward, ...), and each keeps its shortest score: a slow spell of the machine
    (another process, a frequency change) then has to hit every round of one contender to
    mislead. A choice is then checked for a busy machine: while a contender's rounds are
    unsettled (:func:`unsettled`: its second-shortest score more than
    :data:`SETTLED_SPREAD` times its shortest) or other work kept the machine busy during
    the latest round (:func:`other_cpus` above :func:`busy_limit`; a choice of one round
    has no second score to compare, so this is what gives it more), up to
    :data:`EXTRA_ROUNDS` more rounds are measured. A choice still unsettled after them is
    applied for this load but not cached (``Tuning.uncached``, one warning line naming it
    and the contender's range): it is measured again at the next load. Newly
    measured, settled choices are written to the cache together with the cached ones. When a
    measurable choice is forced, the measurements depend on it: they are cached under
    ``key`` plus the forced choices (read first by a load forcing the same ones, which
    otherwise reads the entry of ``key`` alone), so that a server started with the same
    forced choice does not measure again.

    Raises:
        InputError: a malformed spec (see :func:`parse_spec`).
    """
    origin = "tuning"
    if spec is None and os.environ.get(ENV, "").strip():
        spec, origin = os.environ[ENV], f"${ENV}"
    mode, forced = parse_spec(spec, candidates, origin, notes)
    measurable = tuple(candidates) if measurable is None else measurable
    pinned = {n: v for n, v in sorted(forced.items()) if n in measurable}
    entry_key = dict(key, forced=pinned) if pinned else key
    cached = None
    if mode == "auto":
        cached = (read_cache(entry_key) if pinned else None) or read_cache(key)
    cached_choices = (cached or {}).get("choices", {})
    tuning = Tuning({}, {}, key=key)
    measured_any = False
    limit = busy_limit(key.get("threads"))
    t_start = time.perf_counter()
    for name, options in candidates.items():
        options = (contenders or {}).get(name, options)
        if name in forced:
            value, source = forced[name], "forced"
        elif mode == "fixed" or name not in measurable or not options:
            value, source = defaults[name], "fixed"
        elif len(options) == 1:
            value, source = options[0], "fixed"
        elif cached_choices.get(name) in options and not _new_contenders(cached, name, options):
            value, source = cached_choices[name], "cache"
            if name in cached["timings"]:
                tuning.timings[name] = cached["timings"][name]
        else:
            if not measured_any:  # a first load can take a minute: say why before it does
                log.info(MEASURING)
            taken: dict[str, list[float]] = {o: [] for o in options}
            own = max(1, (rounds or {}).get(name, 1))
            r, busy = 0, None
            while True:
                before = cpu_sample()
                for option in (options if r % 2 == 0 else options[::-1]):
                    apply(name, option)
                    taken[option].append(round(float(measure(name, option)), 3))
                busy = other_cpus(before, cpu_sample())
                r += 1
                if r < own:
                    continue
                doubt = unsettled(taken) is not None or (busy is not None and busy > limit)
                if not doubt or r >= own + EXTRA_ROUNDS:
                    break
            scores = {o: min(taken[o]) for o in options}
            value, source = min(scores, key=lambda o: scores[o]), "measured"
            tuning.timings[name], tuning.rounds[name] = scores, taken
            worst = unsettled(taken)
            if worst is not None:
                why = (f"rounds of {worst!r} ranged {_ms(min(taken[worst]))}-"
                       f"{_ms(max(taken[worst]))} ms"
                       + (f"; other work kept {busy:.1f} CPUs busy" if busy is not None
                          and busy > limit else ""))
                tuning.uncached[name] = why
                log.warning("tuning: %s measured on a busy machine (%s); used for this run, "
                            "not cached: it is measured again at the next load", name, why)
            measured_any = True
        apply(name, value)
        tuning.choices[name], tuning.sources[name] = value, source
    if measured_any:
        tuning.calibration_ms = (time.perf_counter() - t_start) * 1000
    if measured_any:  # timings taken beside forced choices are kept under them
        keep = {n: v for n, v in tuning.choices.items()
                if tuning.sources[n] in ("measured", "cache") and n not in tuning.uncached}
        where = (f"cached in {cache_path()}" if write_cache(
            entry_key, keep, {n: tuning.timings[n] for n in keep if n in tuning.timings})
            else "not cached")
        if tuning.uncached:
            where += "; not cached: " + ", ".join(tuning.uncached)
        if pinned:
            where += ", for loads that force " + ",".join(f"{n}={v}" for n, v in pinned.items())
        log.info("tuning measured in %.1f s: %s (%s)", tuning.calibration_ms / 1000,
                 tuning.describe(), where)
    return tuning


__all__ = ["BUSY_CPUS", "ENV", "EXTRA_ROUNDS", "ISA_FLAGS", "SETTLED_SPREAD", "Tuning",
           "busy_limit", "cache_path", "concurrent_ms", "cpu_info", "cpu_sample",
           "default_split", "machine_key", "measured_splits", "median_ms", "other_cpus",
           "parse_spec", "parse_split", "read_cache", "release_memory", "repeat", "resolve",
           "split_candidates", "timed_ms", "unsettled", "write_cache"]
