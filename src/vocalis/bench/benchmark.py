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

``frames`` sets ``max_frames``: EOS is ignored and every text chunk has exactly that many
frames, so random-weight checkpoints (whose EOS fires at random) give comparable work.

``against="official"``: the official pocket-tts runs in a child process
(:mod:`vocalis.bench.official`) on the same checkpoint, texts (each once) and seeds, one
request at a time, after vocalis has finished, in two configurations: ``as-shipped`` (torch
left as ``import pocket_tts`` leaves it, one intra-op thread, its generation and decoding
threads side by side: the package as its users get it) and ``matched-threads`` (vocalis's
torch thread count T). When T is 1 the two coincide and it runs once (that run's
``matches_vocalis_threads`` is true). Both are in ``official_runs``; ``official`` is the
faster by mean per-request x real time (see :func:`faster_official`), and the ratios are
against it. Ratios (vocalis / official): ``x_real_time`` (mean per-request x-real-time: single-stream speed when
``concurrency`` is 1), ``ttfa`` (mean TTFA; lower is better), ``throughput`` (vocalis's
aggregate x-real-time at ``concurrency`` over the official single-stream aggregate),
``ms_per_frame`` (mean per-request wall / frames; lower is better).

Qwen3-TTS (``model`` a ``qwen3-tts/...`` id, Hub repo id or checkpoint folder): the mode
follows the checkpoint type (:mod:`vocalis.bench.qwen3`: CustomVoice ``speaker``,
VoiceDesign ``instruct``, Base ``voice`` = reference audio cloned x-vector only), sampling
options keep the official names, and ``frames`` F is ``max_frames=F`` here and
``max_new_tokens=F+1`` on the official side (both F frames unless EOS fires first: Qwen3
keeps EOS). The official ``qwen-tts`` runs in its own interpreter
(:mod:`vocalis.bench.official_qwen3`, ``VOCALIS_QWEN_PYTHON``), once, at vocalis's thread
count (``official_runs`` holds that one ``matched-threads`` run); its methods return the whole
waveform, so its TTFA is its wall time. ``ratios.frames`` lists the frames of each text on
both sides; ``frames_equal`` says whether they all agree.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vocalis.bench import memory, qwen3, report_meta
from vocalis.bench.batch import cosine, engine_status, load_session  # noqa: F401
from vocalis.bench.requests import check_options
from vocalis.bench.session import Job, _r, run_pass, summarize
from vocalis.engine.tuning import cpu_info
from vocalis.errors import HarnessError, InputError

log = logging.getLogger(__name__)

SCHEMA = "vocalis.bench"
SCHEMA_VERSION = 1
MIN_TEXTS = 2
MIN_TEXT_CHARS = 80
MAX_CONCURRENCY = 256
OFFICIAL_TIMEOUT_S = 3600
#: the official package as ``import pocket_tts`` leaves torch: one intra-op thread
AS_SHIPPED = "as-shipped"
#: the official package at vocalis's torch thread count
MATCHED_THREADS = "matched-threads"


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


def run_official_child(spec: dict, timeout_s: float = OFFICIAL_TIMEOUT_S) -> dict:
    """Run :mod:`vocalis.bench.official` in a child process; its result dict."""
    with tempfile.TemporaryDirectory(prefix="vocalis-bench-") as d:
        spec_path, out_path = Path(d) / "spec.json", Path(d) / "out.json"
        spec_path.write_text(json.dumps(spec))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        try:
            proc = subprocess.run([sys.executable, "-m", "vocalis.bench.official",
                                   str(spec_path), str(out_path)], check=False, capture_output=True,
                                  env=env, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"the official pocket-tts run took over {timeout_s:.0f} s") from None
        if proc.returncode != 0 or not out_path.exists():
            lines = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
            raise HarnessError("the official pocket-tts run failed: "
                               + (lines[-1] if lines else f"exit {proc.returncode}"))
        return json.loads(out_path.read_text())


def official_configs(torch_threads: int) -> list[dict]:
    """The official pocket-tts runs for a vocalis run at ``torch_threads`` threads.

    Each is ``{config, threads (for the child; None = as ``import pocket_tts`` leaves torch),
    matches_vocalis_threads}``: ``as-shipped`` always, then ``matched-threads`` when
    ``torch_threads`` > 1 (at 1 thread the as-shipped run is already matched: one run).

    Raises:
        InputError: ``torch_threads`` is not an integer >= 1.
    """
    if isinstance(torch_threads, bool) or not isinstance(torch_threads, int) or torch_threads < 1:
        raise InputError(f"torch_threads must be an integer >= 1, got {torch_threads!r}")
    runs = [{"config": AS_SHIPPED, "threads": None, "matches_vocalis_threads": torch_threads == 1}]
    if torch_threads > 1:
        runs.append({"config": MATCHED_THREADS, "threads": torch_threads,
                     "matches_vocalis_threads": True})
    return runs


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


def _quantize_mode(value):
    from vocalis.api import quantize_mode

    return quantize_mode(value)


def run_bench(model: str, texts: list[str], voice: str | None = None, *, device: str = "cpu",
              threads: int | None = None, concurrency: int = 1, frames: int | None = None,
              requests: int | None = None, seed: int = 0, against: str | None = None,
              official_quantize: bool = False, session_options: dict | None = None,
              sampling: dict | None = None, speaker: str | None = None,
              instruct: str | None = None, language: str | None = None) -> dict:
    """Benchmark; returns the report (schema ``vocalis.bench``; see the module doc).

    Report::

        schema, schema_version, created, host {platform, python, torch, cpu_count,
        cpu {model, isa, capability, logical_cpus}, loadavg_before}, tuning (Pocket: the
        speed choices, see vocalis.engine.tuning.Tuning.as_dict; else null), model, config, device, threads, torch_threads, voice, texts,
        text_chars, concurrency, requests, frames, seed, sampling, session_options, quantize,
        quantize_mode (null, "int8" or "int4"),
        family ("pocket-tts" | "qwen3-tts"), mode (Qwen3: {model_type, folder, speaker,
        instruct, language, ref_audio, xvector_only}; Pocket: null),
        vocalis: {load_ms, voice_ms, warmup: PASS, session: PASS, per_request: [...]}
        official_runs: [RUN, ...] or null: Pocket: the ``as-shipped`` run (1 thread, as
                  ``import pocket_tts`` leaves torch), then the ``matched-threads`` run
                  (torch_threads) when torch_threads > 1; Qwen3: one ``matched-threads`` run
        official: the RUN of official_runs with the larger session.request_x_real_time
                  (the ratios' denominator), or null
        ratios: {x_real_time, ttfa, throughput, ms_per_frame, frames_equal,
                 frames: [{text, vocalis, official}], concurrency} or null
    where RUN = {config ("as-shipped" | "matched-threads"), matches_vocalis_threads, version,
    load_kwargs, frames_method, quantize, torch_threads, load_ms, voice_ms, warmup: PASS,
    session: PASS, per_request: [...]} (Qwen3: {config, matches_vocalis_threads, version,
    device, method, kwargs, gen, frames, frames_method, torch_threads, load_ms, voice_ms,
    sample_rate, child_wall_s, warmup, session, per_request}; per request also wave_frames
    and samples)
    where PASS = {requests, ok, failed, wall_ms, audio_s, frames, x_real_time (aggregate
    throughput), rtf, ttfa_ms {mean,p50,p90,min,max}, request_x_real_time, request_rtf,
    ms_per_frame (mean per request), frames_per_s (aggregate), peak_rss_mb, rss_before_mb,
    rss_growth_mb}; per request: index, ok, error, ttfa_ms, wall_ms, audio_s, frames, rtf,
    x_real_time, ms_per_frame (and on the vocalis side audio_events, text_chunks, engine_*).

    ``speaker``, ``instruct``, ``language``: Qwen3-TTS only (see the module doc).

    Raises:
        InputError: bad texts, counts or options (or Qwen3 options for a Pocket model).
        VoiceError: no usable voice. ModelNotFound/CheckpointError: no such Qwen3 checkpoint.
        HarnessError: an official run failed.
    """
    texts = check_texts(texts)
    _check_int("concurrency", concurrency, 1, MAX_CONCURRENCY)
    _check_int("frames", frames, 1, 10_000)
    _check_int("requests", requests, 1, 100_000)
    _check_int("seed", seed, 0, 2**63 - 1)
    if against not in (None, "official"):
        raise InputError(f"--against {against!r}: only 'official' is supported")
    sampling = dict(sampling or {})
    if frames is not None:
        sampling["max_frames"] = frames
    from vocalis.api import is_qwen3

    q3 = qwen3.plan(model, voice, speaker, instruct, language, sampling) if is_qwen3(model) else None
    if q3 is not None and official_quantize:
        raise InputError("--official-quantize is a Pocket TTS option (the official pocket-tts int8 path)")
    if q3 is None:
        given = [n for n, x in (("speaker", speaker), ("instruct", instruct), ("language", language))
                 if x is not None]
        if given:
            raise InputError(f"{', '.join(given)}: Qwen3-TTS option(s), not for the Pocket TTS model {model}")
        check_options(sampling, "sampling options")
    n_req = requests if requests is not None else max(len(texts), concurrency)
    official_kwargs = official_voice = None
    import torch

    if against == "official" and q3 is not None:
        from vocalis.bench.official_qwen3 import official_python

        official_python()  # fail before anything runs when there is no official interpreter
    elif against == "official":  # fail on a model/voice the official package can't take first
        if voice is None:
            raise InputError("--against official needs --voice (an audio file, a .safetensors "
                             "voice state or a predefined voice name)")
        n_threads = torch.get_num_threads()
        try:  # importing pocket_tts calls torch.set_num_threads(1) for the whole process
            from vocalis.reference.export import _resolve_voice, resolve_official_model

            official_kwargs = resolve_official_model(model)
            v, _kind = _resolve_voice(voice)
            official_voice = str(v)
        finally:
            torch.set_num_threads(n_threads)

    engine_kw = dict(session_options or {})
    engine_kw.setdefault("max_batch", concurrency)
    engine_kw.setdefault("max_queue", max(256, n_req))
    t0 = time.perf_counter()
    tts = load_session(model, device, threads, **engine_kw)
    load_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    if q3 is not None:
        v, request_options = qwen3.voice(tts, q3)
    else:
        v, request_options = tts.voice(voice), {}
    voice_ms = (time.perf_counter() - t0) * 1000
    torch_threads = torch.get_num_threads()
    frame_samples = int(getattr(getattr(tts, "model", None), "frame_samples", 1920))
    jobs = [Job(i, texts[i % len(texts)], v, seed + i, {**sampling, **request_options})
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
                 "cpu": cpu_info(),
                 "loadavg_before": [round(x, 2) for x in loadavg] if loadavg else None},
        "tuning": tts.tuning.as_dict() if getattr(tts, "tuning", None) is not None else None,
        "model": model, "config": getattr(tts, "config_name", None), "device": device,
        "threads": threads, "torch_threads": torch_threads, "voice": voice,
        "texts": texts, "text_chars": [len(t) for t in texts], "concurrency": concurrency,
        "requests": n_req, "frames": frames, "seed": seed, "sampling": sampling,
        "session_options": engine_kw, "quantize": bool(engine_kw.get("quantize", False)),
        "quantize_mode": _quantize_mode(engine_kw.get("quantize", False)),
        "family": "qwen3-tts" if q3 is not None else "pocket-tts",
        "mode": qwen3.describe(q3) if q3 is not None else None,
        "vocalis": {"load_ms": _r(load_ms), "voice_ms": _r(voice_ms), "warmup": warm,
                    "session": sess, "per_request": [with_ms_per_frame(o.figures()) for o in outcomes],
                    "engine": engine_status(tts)},
        "official_runs": None, "official": None, "ratios": None,
        "provenance": report_meta.provenance(),  # commit, command, UTC date
    }
    # Free vocalis before the official run so that nothing of it runs or stays resident
    # beside the child beyond this process's idle memory.
    close = getattr(tts, "close", None)
    if callable(close):
        close()
    tts = v = jobs = outcomes = None  # drop the last references
    gc.collect()
    if against == "official":
        seeds = [seed + i for i in range(len(texts))]
        runs = []
        if q3 is not None:
            from vocalis.bench import official_qwen3

            log.info("official %s: warm-up pass and measured pass, %d request(s), one at a "
                     "time, %d thread(s)", report["family"], len(texts), torch_threads)
            off = official_qwen3.run(q3.folder, q3.model_type, qwen3.describe(q3), sampling, frames,
                                     texts, seeds, torch_threads, device, OFFICIAL_TIMEOUT_S,
                                     frame_samples)
            runs.append({"config": MATCHED_THREADS, "matches_vocalis_threads": True, **off})
        else:
            configs = official_configs(torch_threads)
            if len(configs) == 1:
                log.info("vocalis ran at 1 thread: the official package as shipped is already at "
                         "matched threads, so it runs once")
            for c in configs:
                log.info("official %s, %s (%s): warm-up pass and measured pass, %d request(s), "
                         "one at a time", report["family"], c["config"],
                         f"{c['threads']} thread(s)" if c["threads"] else "threads as import "
                         "pocket_tts leaves them", len(texts))
                off = run_official_child({"load_kwargs": official_kwargs, "voice": official_voice,
                                          "texts": texts, "seeds": seeds, "threads": c["threads"],
                                          "frames": frames, "quantize": official_quantize})
                runs.append({"config": c["config"],
                             "matches_vocalis_threads": c["matches_vocalis_threads"], **off})
        for off in runs:
            for key in ("warmup", "session"):
                if off.get(key) is not None:
                    add_frame_figures(off[key], off["per_request"] if key == "session" else None)
            off["per_request"] = [with_ms_per_frame(r) for r in off["per_request"]]
        off = faster_official(runs)
        if len(runs) > 1:
            log.info("ratios are against the faster official run: %s", off["config"])
        report["official_runs"] = runs
        report["official"] = off
        vs, os_ = report["vocalis"]["session"], off["session"]
        vf = {}  # frames per text on the vocalis side (first request of each text)
        for r in report["vocalis"]["per_request"]:
            vf.setdefault(r["index"] % len(texts), r["frames"])
        of = {r["index"]: r["frames"] for r in off["per_request"]}
        report["ratios"] = {
            "concurrency": concurrency,
            "x_real_time": _ratio(vs["request_x_real_time"], os_["request_x_real_time"]),
            "ttfa": _ratio((vs["ttfa_ms"] or {}).get("mean"), (os_["ttfa_ms"] or {}).get("mean")),
            "throughput": _ratio(vs["x_real_time"], os_["x_real_time"]),
            "ms_per_frame": _ratio(vs.get("ms_per_frame"), os_.get("ms_per_frame")),
            "frames_equal": vf == of,
            "frames": [{"text": i, "vocalis": vf.get(i), "official": of.get(i)}
                       for i in range(len(texts))],
        }
    return report


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
    from rich.table import Table

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
        ("TTFA mean (ms)" + (" (official: whole waveform)" if off and report.get("family") == "qwen3-tts"
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
    from rich.markup import escape

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
