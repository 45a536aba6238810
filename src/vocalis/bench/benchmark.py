"""``vocalis bench``: time vocalis (and optionally the official package) on fixed texts.

What is measured (after the model and the voice are loaded, both excluded):

* one excluded pass, then one measured pass of ``requests`` requests (default: as many as
  the larger of the number of texts and ``concurrency``; request ``i`` speaks text
  ``i % len(texts)`` with seed ``seed + i``), at most ``concurrency`` in flight at once;
* per request, timed by the caller (:mod:`vocalis.bench.session`): ``ttfa_ms`` (first
  audio chunk in the caller's hands, from just before submit), ``wall_ms``, ``audio_s``,
  ``rtf`` = wall / audio and ``x_real_time`` = its inverse;
* per pass: ``wall_ms``, total ``audio_s``, aggregate throughput ``x_real_time`` = total
  audio / pass wall (seconds of speech per second at this concurrency), peak RSS (reset at
  the start of the pass) and its growth over the RSS before the pass.

Every model family runs the same way. The requests carry the family's request options
(``options``: the same names as :meth:`vocalis.api.TTS.synthesize`, checked by the family's
schema and :meth:`vocalis.family.ModelInfo.check_request` before anything loads); the
family may complete them for a benchmark (:meth:`vocalis.family.ModelFamily.bench_request`:
e.g. Qwen3-TTS gives VoiceDesign a default description and clones a Base reference from its
x-vector alone); what ran is the report's ``mode``.

``frames`` sets the request option ``max_frames``: EOS is ignored and every text chunk has
exactly that many frames where the family stops at it (Pocket TTS), or at most that many
(Qwen3-TTS keeps EOS), so random-weight checkpoints (whose EOS fires at random) give
comparable work.

``against="official"``: the family's official implementation
(:meth:`vocalis.family.ModelFamily.official_bench`: Pocket TTS in
:mod:`vocalis.models.pocket.official`, Qwen3-TTS in :mod:`vocalis.models.qwen3.official`)
runs after vocalis has finished, in a process of its own, on the same checkpoint, texts
(each once), seeds and options, one request at a time, in one or more configurations
(``official_runs``: e.g. ``as-shipped`` and ``matched-threads`` for pocket-tts, the
``matched-threads`` run alone for qwen-tts). ``official`` is the faster by mean per-request
x real time (see :func:`faster_official`), and the ratios are against it. Ratios (vocalis /
official): ``x_real_time`` (mean per-request x-real-time: single-stream speed when
``concurrency`` is 1), ``ttfa`` (mean TTFA; lower is better), ``throughput`` (vocalis's
aggregate x-real-time at ``concurrency`` over the official single-stream aggregate),
``ms_per_frame`` (mean per-request wall / frames; lower is better); ``frames`` lists the
frames of each text on both sides and ``frames_equal`` says whether they all agree.
"""

from __future__ import annotations

import gc
import logging
import os
import platform
import time

from rich.markup import escape
from rich.table import Table

from vocalis import families
from vocalis.bench import memory, report_meta
from vocalis.bench.batch import engine_status, load_session
from vocalis.bench.official import AS_SHIPPED, MATCHED_THREADS, OFFICIAL_TIMEOUT_S
from vocalis.bench.session import (
    Job,
    VoiceCache,
    _r,
    add_frame_figures,
    frame_samples,
    run_pass,
    summarize,
    with_ms_per_frame,
)
from vocalis.engine.tuning import cpu_info
from vocalis.errors import InputError
from vocalis.options import check_seed, quantize_mode

log = logging.getLogger(__name__)

SCHEMA = "vocalis.bench"
#: 2: ``family`` is the family's name (any family), ``options`` (the request options, was
#: ``sampling``), ``load_options``, ``mode`` = ``{kind, voice, options}`` for every family
SCHEMA_VERSION = 2
MIN_TEXTS = 2
MIN_TEXT_CHARS = 80
MAX_CONCURRENCY = 256
MAX_FRAMES = 10_000


def check_texts(texts: list[str]) -> list[str]:
    """At least two distinct texts of 80+ characters. Raises InputError naming the bad one."""
    texts = list(texts or [])
    if len(texts) < MIN_TEXTS:
        raise InputError(f"give at least {MIN_TEXTS} distinct --text of {MIN_TEXT_CHARS}+ "
                         f"characters each, got {len(texts)}")
    seen: dict[str, int] = {}
    for i, t in enumerate(texts):
        if not isinstance(t, str) or len(t.strip()) < MIN_TEXT_CHARS:
            n = len(t.strip()) if isinstance(t, str) else 0
            raise InputError(f"--text {i + 1} has {n} characters; benchmark texts need "
                             f"{MIN_TEXT_CHARS}+ so that they are more than a few frames")
        key = " ".join(t.split())
        if key in seen:
            raise InputError(f"--text {i + 1} repeats --text {seen[key] + 1}: give distinct texts")
        seen[key] = i
    return texts


def _check_int(name: str, v, lo: int, hi: int | None = None) -> None:
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        rng = f"from {lo} to {hi}" if hi is not None else f">= {lo}"
        raise InputError(f"{name} must be an integer {rng}, got {v!r}")


def faster_official(runs: list[dict]) -> dict:
    """The official run with the larger mean per-request x real time
    (``session.request_x_real_time``); one without a figure counts as slowest, and on a tie
    the earlier run wins.

    Raises:
        ValueError: ``runs`` is empty.
    """
    if not runs:
        raise ValueError("no official runs to choose from")

    def speed(r: dict) -> float:
        x = (r.get("session") or {}).get("request_x_real_time")
        return float("-inf") if x is None else x

    best = runs[0]
    for r in runs[1:]:
        if speed(r) > speed(best):
            best = r
    return best


def _ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def _plain(x):
    """A voice or option value as the report shows it (paths as strings)."""
    return x if x is None or isinstance(x, (str, int, float, bool)) else str(x)


def run_bench(model: str, texts: list[str], voice=None, *, device: str = "cpu",
              threads: int | None = None, concurrency: int = 1, frames: int | None = None,
              requests: int | None = None, seed: int = 0, against: str | None = None,
              official_quantize: bool = False, session_options: dict | None = None,
              options: dict | None = None, load_options: dict | None = None) -> dict:
    """Benchmark ``model`` (any family's); returns the report (schema ``vocalis.bench``; see
    the module doc).

    ``voice``: what :meth:`vocalis.api.TTS.voice` takes (default: the model's default);
    ``options``: the family's request options for every request (``frames`` adds
    ``max_frames``); ``load_options``: the family's load options (:func:`vocalis.load`);
    ``session_options``: ``max_batch``, ``max_queue``, ``quantize``, ``tuning``.

    Report::

        schema, schema_version, created, host {platform, python, torch, cpu_count,
        cpu {model, isa, capability, logical_cpus}, loadavg_before}, tuning (the speed
        choices, see vocalis.engine.tuning.Tuning.as_dict; or null), model, config, family,
        device, threads, torch_threads, voice, texts, text_chars, concurrency, requests,
        frames, seed, options, load_options, session_options, quantize, quantize_mode (null,
        "int8" or "int4"), mode {kind (the model's kind, e.g. "custom_voice", or null), voice,
        options: what every request ran with, after the family's bench_request},
        vocalis: {load_ms, voice_ms, warmup: PASS, session: PASS, per_request: [...], engine}
        official_runs: [RUN, ...] or null (the family's official runs, see the module doc)
        official: the RUN of official_runs with the larger session.request_x_real_time
                  (the ratios' denominator), or null
        ratios: {x_real_time, ttfa, throughput, ms_per_frame, frames_equal,
                 frames: [{text, vocalis, official}], concurrency} or null
    where RUN = {config ("as-shipped" | "matched-threads"), matches_vocalis_threads, version,
    frames, frames_method, torch_threads, load_ms, voice_ms, warmup: PASS, session: PASS,
    per_request: [...], and the family's own facts (pocket-tts: load_kwargs,
    generate_kwargs, quantize; qwen-tts: device, method, kwargs, gen, sample_rate,
    child_wall_s, whole_waveform; per request also wave_frames and samples)}
    where PASS = {requests, ok, failed, wall_ms, audio_s, frames, x_real_time (aggregate
    throughput), rtf, ttfa_ms {mean,p50,p90,min,max}, request_x_real_time, request_rtf,
    ms_per_frame (mean per request), frames_per_s (aggregate), peak_rss_mb, rss_before_mb,
    rss_growth_mb}; per request: index, ok, error, ttfa_ms, wall_ms, audio_s, frames, rtf,
    x_real_time, ms_per_frame (and on the vocalis side audio_events, text_chunks, engine_*).

    Raises:
        InputError: bad texts, counts or options (an option the model's family does not
        take). VoiceError: no usable voice. ModelNotFound/CheckpointError: no such model.
        HarnessError: the official side cannot run, or a run failed.
    """
    texts = check_texts(texts)
    _check_int("concurrency", concurrency, 1, MAX_CONCURRENCY)
    _check_int("frames", frames, 1, MAX_FRAMES)
    _check_int("requests", requests, 1, 100_000)
    if against not in (None, "official"):
        raise InputError(f"--against {against!r}: only 'official' is supported")
    if official_quantize and against is None:
        raise InputError("--official-quantize is for the official side: add --against official")
    n_req = requests if requests is not None else max(len(texts), concurrency)
    check_seed(seed)
    check_seed(seed + n_req - 1)  # request i has seed + i
    info = families.describe(model)
    family = info.family
    # Every check that needs no weights, before anything is loaded: the options by the
    # family's schema, the requests as the family completes them for a benchmark, each
    # text, the load options, and what the official side can run.
    options = family.options.check(dict(options or {}), info.name)
    if frames is not None:
        if "max_frames" not in family.options:
            raise InputError(f"--frames: {info.title} model {info.name} takes no max_frames",
                             param="max_frames")
        if options.get("max_frames", frames) != frames:
            raise InputError(f"--frames {frames} and max_frames {options['max_frames']} "
                             "differ: give one of them", param="max_frames")
        options["max_frames"] = frames
    frames = options.get("max_frames")
    run_voice, run_options = family.bench_request(info, voice, dict(options))
    for text in texts:
        _, _, _, checked = info.check_request(text, run_voice, seed, 1.0, run_options)
    run_options = checked
    load_options = family.load_options.check(dict(load_options or {}), info.name)
    engine_kw = dict(session_options or {})
    mode = quantize_mode(engine_kw.get("quantize", False))
    official = None
    if against == "official":
        official = family.official_bench()
        if official is None:
            raise InputError(f"--against official: {family.title} has no official "
                             "implementation to run against", param="against")
        official.check(info, run_voice, run_options, official_quantize)

    engine_kw.setdefault("max_batch", concurrency)
    engine_kw.setdefault("max_queue", max(256, n_req))
    t0 = time.perf_counter()
    tts = load_session(info.model_id, device, threads, **engine_kw, **load_options)
    load_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    v, request_options = VoiceCache(tts).get(run_voice, run_options)
    voice_ms = (time.perf_counter() - t0) * 1000
    import torch  # loaded with the model (not before the arguments are checked)

    torch_threads = torch.get_num_threads()
    per_frame = frame_samples(tts)
    jobs = [Job(i, texts[i % len(texts)], v, seed + i, dict(request_options))
            for i in range(n_req)]

    def measured_pass(label: str) -> tuple[dict, list]:
        rss_before = memory.rss_mb()
        memory.reset_peak()
        outcomes, wall_ms = run_pass(tts, jobs, concurrency)
        peak = memory.peak_rss_mb()
        s = summarize(outcomes, wall_ms)
        add_frame_figures(s, [o.figures() for o in outcomes])
        s.update(peak_rss_mb=_r(peak, 1), rss_before_mb=_r(rss_before, 1),
                 rss_growth_mb=_r(max(0.0, peak - rss_before), 1) if rss_before is not None else None)
        failed = [o for o in outcomes if not o.ok]
        if failed:
            log.error("%s pass: request %d failed: %s", label, failed[0].index, failed[0].error)
        return s, outcomes

    loadavg = os.getloadavg() if hasattr(os, "getloadavg") else None
    log.info("vocalis: warm-up pass, %d request(s), %d in flight", n_req, concurrency)
    warm, _ = measured_pass("warm-up")
    log.info("vocalis: measured pass")
    sess, outcomes = measured_pass("measured")
    report = {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {"platform": platform.platform(), "python": platform.python_version(),
                 "torch": torch.__version__, "cpu_count": os.cpu_count(),
                 "cpu": cpu_info(), "gpu": report_meta.gpu_name(device),
                 "loadavg_before": [round(x, 2) for x in loadavg] if loadavg else None},
        "tuning": tts.tuning.as_dict() if tts.tuning is not None else None,
        "model": model, "config": info.name, "family": family.name, "device": device,
        "threads": threads, "torch_threads": torch_threads, "voice": _plain(voice),
        "texts": texts, "text_chars": [len(t) for t in texts], "concurrency": concurrency,
        "requests": n_req, "frames": frames, "seed": seed, "options": options,
        "load_options": load_options, "session_options": engine_kw,
        "quantize": mode is not None, "quantize_mode": mode,
        "mode": {"kind": info.kind, "voice": _plain(run_voice),
                 "options": {k: _plain(x) for k, x in run_options.items()}},
        "vocalis": {"load_ms": _r(load_ms), "voice_ms": _r(voice_ms), "warmup": warm,
                    "session": sess, "per_request": [with_ms_per_frame(o.figures()) for o in outcomes],
                    "engine": engine_status(tts)},
        "official_runs": None, "official": None, "ratios": None,
        "provenance": report_meta.provenance(),  # commit, command, UTC date
    }
    # Free vocalis before the official run so that nothing of it runs or stays resident
    # beside the child beyond this process's idle memory.
    tts.close()
    tts = v = jobs = outcomes = None  # drop the last references
    gc.collect()
    if official is not None:
        runs = official.runs(info, run_voice, run_options, texts=texts,
                             seeds=[seed + i for i in range(len(texts))], frames=frames,
                             threads=torch_threads, device=device, quantize=official_quantize,
                             frame_samples=per_frame, timeout_s=OFFICIAL_TIMEOUT_S)
        report.update(_against(report, runs, texts, concurrency))
    return report


def _against(report: dict, runs: list[dict], texts: list[str], concurrency: int) -> dict:
    """``official_runs``, ``official`` and ``ratios`` of the report."""
    for off in runs:
        for key in ("warmup", "session"):
            if off.get(key) is not None:
                add_frame_figures(off[key], off["per_request"] if key == "session" else None)
        off["per_request"] = [with_ms_per_frame(r) for r in off["per_request"]]
    off = faster_official(runs)
    if len(runs) > 1:
        log.info("ratios are against the faster official run: %s", off["config"])
    vs, os_ = report["vocalis"]["session"], off["session"]
    vf = {}  # frames per text on the vocalis side (first request of each text)
    for r in report["vocalis"]["per_request"]:
        vf.setdefault(r["index"] % len(texts), r["frames"])
    of = {r["index"]: r["frames"] for r in off["per_request"]}
    ratios = {
        "concurrency": concurrency,
        "x_real_time": _ratio(vs["request_x_real_time"], os_["request_x_real_time"]),
        "ttfa": _ratio((vs["ttfa_ms"] or {}).get("mean"), (os_["ttfa_ms"] or {}).get("mean")),
        "throughput": _ratio(vs["x_real_time"], os_["x_real_time"]),
        "ms_per_frame": _ratio(vs.get("ms_per_frame"), os_.get("ms_per_frame")),
        "frames_equal": vf == of,
        "frames": [{"text": i, "vocalis": vf.get(i), "official": of.get(i)}
                   for i in range(len(texts))],
    }
    return {"official_runs": runs, "official": off, "ratios": ratios}


# --------------------------------------------------------------------------- output


def official_label(run: dict, one_at_a_time: bool = True) -> str:
    """How the table names an official run: its configuration, thread count and (unless
    ``one_at_a_time`` is false) ``1 at a time``, e.g. ``as-shipped, 1 thread, 1 at a time``
    (a run that is both as shipped and at vocalis's thread count says ``as-shipped =
    matched-threads``). Reports written before ``config`` existed give ``1 at a time``."""
    parts = []
    config = run.get("config")
    if config:
        parts.append(f"{config} = {MATCHED_THREADS}" if config == AS_SHIPPED
                     and run.get("matches_vocalis_threads") else config)
    n = run.get("torch_threads")
    if n is not None:
        parts.append(f"{n} thread" + ("" if n == 1 else "s"))
    if one_at_a_time or not parts:
        parts.append("1 at a time")
    return ", ".join(parts)


def render_table(report: dict):
    """A rich table of the report's main figures (vocalis, the official run the ratios use,
    ratio), then one row per other official run: its per-request x real time (``request
    xRT``, the figure the faster run is chosen by) and its TTFA mean."""
    off = report.get("official")
    c = report["concurrency"]
    t = Table(title=f"vocalis bench: {report['config']} on {report['device']}, "
                    f"{report['torch_threads']} thread(s), concurrency {c}, "
                    f"{report['requests']} request(s)"
                    + (f", {report['frames']} frames/chunk" if report["frames"] else ""))
    t.add_column("metric")
    mode = report.get("quantize_mode") or ("int8" if report.get("quantize") else None)
    t.add_column("vocalis" + (f" {mode}" if mode else ""), justify="right")
    if off:
        t.add_column("official" + (" int8" if off.get("quantize") else "")
                     + f" ({official_label(off)})", justify="right")
        t.add_column("ratio", justify="right")
    v, o = report["vocalis"]["session"], (off or {}).get("session", {})
    ratios = report.get("ratios") or {}

    def fmt(x, spec="{:.2f}"):
        return "-" if x is None else spec.format(x)

    rows = [
        ("requests", v["requests"], o.get("requests"), None, "{}"),
        ("audio (s)", v["audio_s"], o.get("audio_s"), None, "{:.2f}"),
        ("frames", v["frames"], o.get("frames"), None, "{}"),
        ("session wall (ms)", v["wall_ms"], o.get("wall_ms"), None, "{:.0f}"),
        ("TTFA mean (ms)" + (" (official: whole waveform)" if off and off.get("whole_waveform")
                             else ""), (v["ttfa_ms"] or {}).get("mean"), (o.get("ttfa_ms") or {}).get("mean"),
         ratios.get("ttfa"), "{:.1f}"),
        ("TTFA p90 (ms)", (v["ttfa_ms"] or {}).get("p90"), (o.get("ttfa_ms") or {}).get("p90"),
         None, "{:.1f}"),
        ("per-request x real time", v["request_x_real_time"], o.get("request_x_real_time"),
         ratios.get("x_real_time"), "{:.2f}"),
        ("per-request RTF", v["request_rtf"], o.get("request_rtf"), None, "{:.3f}"),
        ("ms per frame (mean per request)", v.get("ms_per_frame"), o.get("ms_per_frame"),
         ratios.get("ms_per_frame"), "{:.2f}"),
        (f"frames per s (c={c})", v.get("frames_per_s"), o.get("frames_per_s"), None, "{:.1f}"),
        (f"throughput x real time (c={c})", v["x_real_time"], o.get("x_real_time"),
         ratios.get("throughput"), "{:.2f}"),
        ("peak RSS (MB)", v["peak_rss_mb"], o.get("peak_rss_mb"), None, "{:.0f}"),
        ("RSS growth in pass (MB)", v["rss_growth_mb"], o.get("rss_growth_mb"), None, "{:.0f}"),
    ]
    for name, a, b, r, spec in rows:
        cells = [name, fmt(a, spec)]
        if off:
            cells += [fmt(b, spec), fmt(r, "{:.2f}x")]
        t.add_row(*cells)
    others = [r for r in report.get("official_runs") or [] if off and r.get("config") != off.get("config")]
    if others:
        t.add_section()
    for other in others:
        s = other.get("session") or {}
        t.add_row("other official: request xRT / TTFA mean (ms)", "",
                  f"{official_label(other, one_at_a_time=False)}: "
                  f"{fmt(s.get('request_x_real_time'))} / "
                  f"{fmt((s.get('ttfa_ms') or {}).get('mean'), '{:.1f}')}", "")
    t.caption = escape(machine_line(report))
    return t


def machine_line(report: dict) -> str:
    """``CPU model (ISA: flags; torch capability), N thread(s); choices: ...``."""
    cpu = (report.get("host") or {}).get("cpu") or {}
    line = (f"{cpu.get('model', '?')} (ISA: {' '.join(cpu.get('isa') or []) or '?'}; torch "
            f"{cpu.get('capability', '?')}), {report.get('torch_threads')} thread(s)")
    tun = report.get("tuning")
    if tun:
        line += "; choices: " + ", ".join(f"{k}={v} ({tun['sources'].get(k, '?')})"
                                          for k, v in tun["choices"].items())
    return line
