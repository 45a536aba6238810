"""Offline batch runner: many requests through one engine session, with a JSON report.

Order of work (``vocalis batch``):

1. Check everything before loading anything heavy or running anything: the batch size,
   mode and session options, then every request of the file in full by the model's family
   (:mod:`vocalis.bench.requests`: its option schema, then
   :meth:`vocalis.family.ModelInfo.check_request`), so bad requests stop the run with one
   ``request N: ...`` line each before any model is loaded or anything is written.
2. Load the model; make every distinct voice once (:class:`vocalis.bench.session.VoiceCache`;
   an unusable voice names each request using it) and check every request against the
   loaded model (:meth:`vocalis.family.LoadedModel.prepare`: tokens, voice), in file order.
3. Warm-up pass over all requests (excluded from the figures and from the WAV files).
4. Measured pass with the same grouping: at most ``batch_size`` requests in the engine at
   once, submitted in file order as earlier ones finish (``sequential`` = one at a time).
5. Outside timing: one 16-bit mono WAV per successful measured request (``DIR/NNNN.wav``,
   NNNN = request index, at the model's sample rate) and, for families whose engine reports
   the generated codes (Qwen3-TTS), those codes (``DIR/NNNN.npy``, int64 ``[frames,
   codebooks]``, the codec's input), and with ``mode="streaming"`` the check that each
   request's audio events concatenate exactly to the WAV read back from disk.
6. One ordinary request (:meth:`vocalis.api.TTS.synthesize` of the first seeded request)
   through the same session, to show the engine is reusable afterwards.
7. ``DIR/report.json`` (schema ``vocalis.batch``, see :func:`run_batch`).

A request that fails at run time is reported with its error; the others complete.
"""

from __future__ import annotations

import json
import logging
import math
import platform
import time
import wave
from pathlib import Path

import numpy as np

from vocalis import families
from vocalis.audio import float_to_int16, write_wav
from vocalis.bench import memory, report_meta
from vocalis.bench.requests import (
    BatchRequest,
    check_options,
    problems_error,
    read_requests,
)
from vocalis.bench.session import (
    Job,
    Outcome,
    VoiceCache,
    _r,
    frame_samples,
    run_pass,
    summarize,
)
from vocalis.errors import InputError, VocalisError, VoiceError
from vocalis.family import ModelInfo
from vocalis.options import did_you_mean, quantize_mode

log = logging.getLogger(__name__)

SCHEMA = "vocalis.batch"
SCHEMA_VERSION = 2  # 2: "family" and "in_flight"; every measured entry has "options" and "codes"
REPORT_NAME = "report.json"
MODES = ("oneshot", "streaming")
DEFAULT_BATCH_SIZE = 16
MAX_BATCH_SIZE = 256
#: session options given to :func:`vocalis.load` (besides the family's own load options,
#: ``ModelFamily.load_options``); every other key must be a request option of the model's
#: family, used as the default of every request (a request's own options win)
LOAD_KEYS = ("max_batch", "max_queue", "quantize", "tuning")


def check_batch_size(batch_size: int | None, sequential: bool) -> int:
    """Requests in flight at once. Raises InputError for 0, negatives, absurd sizes or both
    flags."""
    if sequential and batch_size is not None:
        raise InputError("give either --batch-size N or --sequential, not both")
    if sequential:
        return 1
    if batch_size is None:
        return DEFAULT_BATCH_SIZE
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not (
            1 <= batch_size <= MAX_BATCH_SIZE):
        raise InputError(f"batch size must be an integer from 1 to {MAX_BATCH_SIZE} (requests "
                         f"in flight at once), got {batch_size!r}")
    return batch_size


def parse_session_options(text: str | dict | None, info: ModelInfo) -> tuple[dict, dict]:
    """``--session-options`` JSON -> (load keywords, default request options) for the model
    ``info``.

    Load keywords: ``max_batch``, ``max_queue`` (engine limits), ``quantize`` (true, false or
    a mode the model's family offers), ``tuning``, and the family's load options
    (``ModelFamily.load_options``, e.g. Qwen3-TTS ``dtype``). Every other key is a request
    option of the family (its schema checks it).

    Raises:
        InputError: not a JSON object, unknown key, or an invalid value.
    """
    if text is None:
        return {}, {}
    if isinstance(text, str):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"--session-options is not valid JSON: {e.msg} at column "
                             f"{e.colno}") from None
    else:
        data = text
    if not isinstance(data, dict):
        raise InputError('--session-options must be a JSON object like {"max_batch": 8, '
                         '"temperature": 0.5}')
    family = info.family
    load_names = (*LOAD_KEYS, *family.load_options.names)
    known = (*load_names, *family.options.names)
    unknown = [k for k in data if k not in known]
    if unknown:
        raise InputError(f"--session-options: unknown key {unknown[0]!r}"
                         f"{did_you_mean(str(unknown[0]), known)} for {info.title} model "
                         f"{info.name}; known: {', '.join(known)}")
    load_kw = {k: data[k] for k in data if k in load_names}
    for k in ("max_batch", "max_queue"):
        v = load_kw.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InputError(f"--session-options: {k} must be an integer >= 1, got {v!r}")
    if "quantize" in load_kw:
        try:
            mode = quantize_mode(load_kw["quantize"])
        except InputError as e:
            raise InputError(f"--session-options: {e}") from None
        if mode is not None and mode not in family.quantize_modes:
            raise InputError(f"--session-options: quantize {mode}: {family.title} quantizes to "
                             f"{', '.join(family.quantize_modes) or 'nothing'}")
    own = {k: v for k, v in load_kw.items() if k in family.load_options}
    try:
        load_kw.update(family.load_options.check(own, info.name))
    except InputError as e:
        raise InputError(f"--session-options: {e}") from None
    defaults = check_options({k: v for k, v in data.items() if k not in load_names}, info,
                             "--session-options")
    return load_kw, defaults


def load_session(model: str, device: str, threads: int | None, **load_kw):
    """:func:`vocalis.api.load` with the load keywords (``max_batch``, ``max_queue``,
    ``quantize``, ``tuning``, the family's load options)."""
    from vocalis import api  # with torch: not before the request file has been checked

    return api.load(model, device=device, threads=threads, **load_kw)


def engine_status(tts) -> dict | None:
    fn = getattr(tts, "engine_status", None)
    if fn is None:
        return None
    try:
        return dict(fn())
    except Exception as e:  # noqa: BLE001 - report, don't fail the run over it
        return {"error": str(e)}


def prepare_jobs(tts, requests: list[BatchRequest], voices: VoiceCache) -> list[Job]:
    """The engine jobs of checked ``requests``, in file order: each request as the family
    runs it in a benchmark (:meth:`vocalis.family.ModelFamily.bench_request`, e.g. a
    reference-audio option as the voice), its voice made once per distinct voice
    (``voices``), and everything the loaded model checks (:meth:`LoadedModel.prepare
    <vocalis.family.LoadedModel.prepare>`: the text's tokens, the voice against the model).

    Raises:
        VoiceError/InputError/ModelNotFound: ``request N: ...``, every bad request
        (:func:`vocalis.bench.requests.problems_error`).
    """
    info, family = tts.info, tts.family
    jobs, problems = [], []
    for r in requests:
        where = f"request {r.index}"
        try:
            voice, opts = family.bench_request(info, r.voice, dict(r.sampling))
            try:
                voice, opts = voices.get(voice, opts)
            except VocalisError:
                raise
            except Exception as e:  # noqa: BLE001 - an unreadable file the audio reader did not classify
                raise VoiceError(f"cannot load voice {r.voice!r}: {e}") from None
            text, seed, _, checked = info.check_request(r.text, voice, r.seed, 1.0, opts)
            tts.loaded.prepare(text, voice, checked, seed)
        except VocalisError as e:
            # no param: the field at fault is the request's, not a command line flag (--text)
            problems.append(type(e)(f"{where}: {e}"))
            continue
        jobs.append(Job(r.index, r.text, voice, r.seed, opts))
    if problems:
        raise problems_error(problems)
    return jobs


def _wav_name(index: int, n: int) -> str:
    return f"{index:0{max(4, len(str(n - 1)))}d}.wav"


def read_wav_int16(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            raise InputError(f"{path} is not 16-bit mono")
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")


def cosine(a: np.ndarray, b: np.ndarray) -> float | None:
    if a.shape != b.shape or a.size == 0:
        return None
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(np.dot(a.astype(np.float64), b.astype(np.float64)) / (na * nb))


def _stream_check(o: Outcome, wav_path: Path | None, per_frame: int) -> dict:
    """Do the request's audio events concatenate exactly to its WAV file?"""
    samples = o.samples if o.samples is not None else np.zeros(0, np.float32)
    out = {"audio_events": o.events, "in_order": o.in_order,
           "event_samples": int(sum(o.sizes or [])), "wav_samples": None, "equal": False,
           "whole_frames": samples.shape[0] % per_frame == 0}
    engine_frames = (o.engine or {}).get("frames")
    if engine_frames is not None:
        out["engine_frames"] = engine_frames
        out["frames_match"] = engine_frames * per_frame == samples.shape[0]
    arrivals = o.arrivals_ms or []
    if arrivals:
        gaps = np.diff(arrivals) if len(arrivals) > 1 else np.zeros(0)
        out["first_event_ms"] = _r(arrivals[0])
        out["max_gap_ms"] = _r(float(gaps.max())) if gaps.size else None
        out["mean_gap_ms"] = _r(float(gaps.mean())) if gaps.size else None
    if wav_path is not None and wav_path.exists():
        disk = read_wav_int16(wav_path)
        out["wav_samples"] = int(disk.shape[0])
        out["equal"] = bool(out["event_samples"] == samples.shape[0]
                            and np.array_equal(disk, float_to_int16(samples))
                            and out["in_order"] and out.get("frames_match", True))
    return out


def _repeat_check(warm: list[Outcome], meas: list[Outcome], jobs: list[Job]) -> dict:
    """Seeded requests: does the measured pass repeat the warm-up's audio?"""
    cos, frames_equal, bit_equal, n = [], True, 0, 0
    for w, m, j in zip(warm, meas, jobs):
        if j.seed is None or not (w.ok and m.ok):
            continue
        n += 1
        if w.samples.shape != m.samples.shape:
            frames_equal = False
            continue
        bit_equal += bool(np.array_equal(w.samples, m.samples))
        c = cosine(w.samples, m.samples)
        if c is not None:
            cos.append(c)
    return {"seeded_requests": n, "frames_equal": frames_equal if n else None,
            "bit_equal": bit_equal, "min_cosine": _r(min(cos), 6) if cos else None}


def _after_request(tts, jobs: list[Job], measured: list[Outcome]) -> dict:
    """One ordinary synthesize() through the same session after the measured pass."""
    pick = next((j for j, o in zip(jobs, measured) if j.seed is not None and o.ok), jobs[0])
    ref = measured[pick.index]
    out: dict = {"index": pick.index, "api": "synthesize", "ok": False, "error": None}
    t0 = time.perf_counter()
    try:
        audio = tts.synthesize(pick.text, voice=pick.voice, seed=pick.seed, **pick.sampling)
    except Exception as e:  # noqa: BLE001 - reported in the report
        out["error"] = f"{type(e).__name__}: {' '.join(str(e).split())}"
        out["wall_ms"] = _r((time.perf_counter() - t0) * 1000)
        return out
    wall_ms = (time.perf_counter() - t0) * 1000
    samples = np.asarray(audio.samples, dtype=np.float32)
    audio_s = samples.shape[0] / tts.sample_rate
    out.update(ok=True, ttfa_ms=_r(audio.ttfa_ms), wall_ms=_r(wall_ms), audio_s=_r(audio_s, 4),
               rtf=_r(wall_ms / 1000 / audio_s, 4) if audio_s else None)
    if pick.seed is not None and ref.ok:
        out["same_frames_as_measured"] = samples.shape == ref.samples.shape
        out["cosine_to_measured"] = _r(cosine(samples, ref.samples), 6)
    return out


def run_batch(model: str, requests_file: str | Path, out_dir: str | Path, *,
              batch_size: int | None = None, sequential: bool = False, mode: str = "oneshot",
              threads: int | None = None, device: str = "cpu",
              session_options: str | dict | None = None, tts=None,
              normalize: bool = False) -> tuple[dict, int]:
    """Run a requests file; write WAVs and ``report.json`` into ``out_dir``.

    ``model``: a model id or checkpoint (any family's); ``tts``: an already loaded session
    to use instead of loading ``model`` (tests, API use). ``normalize``: each text goes
    through :mod:`vocalis.text.normalize` first (in the request's language).

    Returns (report, exit status): 0 when every measured request, the streaming checks and
    the after-run request succeeded, else 1 (the report says what failed).

    Report (``DIR/report.json``)::

        schema, schema_version, created, host, model, config, family, device, threads,
        torch_threads, mode, batch_size (the requested requests in flight), in_flight (the
        most requests in flight at once: batch_size or fewer when the file holds fewer),
        sequential, session_options, requests_file, sample_rate, load_ms, voices_ms,
        rss_after_load_mb,
        passes: {warmup, measured}: requests, ok, failed, wall_ms, audio_s, frames,
            x_real_time (pass audio / pass wall), rtf, ttfa_ms {mean,p50,p90,min,max},
            request_x_real_time, request_rtf (per-request means), peak_rss_mb
        session: the measured pass's wall_ms, audio_s, x_real_time, rtf, peak_rss_mb,
            process_peak_rss_mb, ok, failed
        requests: one entry per request and pass: index, pass ("warmup" | "measured"), ok,
            error, ttfa_ms, wall_ms, audio_s, frames, rtf, x_real_time, audio_events,
            text_chunks, engine_queued_ms, engine_ttfa_ms, voice, seed;
            measured ones also wav (file name or null), codes (``NNNN.npy`` for families
            whose engine reports codes, else null), options (the request's options as
            checked, session defaults included, without the seed), and in streaming mode,
            streaming {audio_events, in_order, event_samples, wav_samples, whole_frames,
            engine_frames, frames_match, first_event_ms, max_gap_ms, mean_gap_ms, equal}
        streaming: {checked, equal, all_equal} (streaming mode) or null
        repeat: seeded requests, warm-up vs measured: {seeded_requests, frames_equal,
            bit_equal, min_cosine}
        after: {index, api, ok, error, ttfa_ms, wall_ms, audio_s, rtf,
            same_frames_as_measured, cosine_to_measured}
        engine: {before, after}: engine_status() (null without an engine)
        failures: [{index, error}] of the measured pass

    Raises:
        InputError, VoiceError, ModelNotFound: a bad argument or request (``request N:
        ...``), before anything is written.
    """
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}: use {' or '.join(MODES)}")
    in_flight = check_batch_size(batch_size, sequential)
    info = tts.info if tts is not None else families.describe(model)
    load_kw, default_options = parse_session_options(session_options, info)
    requests = read_requests(requests_file, info, default_options)
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise InputError(f"--out-dir {out} exists and is not a folder")

    t0 = time.perf_counter()
    owned = tts is None
    if owned:
        load_kw.setdefault("max_batch", min(in_flight, len(requests)))
        load_kw.setdefault("max_queue", max(256, in_flight))
        tts = load_session(info.model_id, device, threads, **load_kw)
    try:
        if normalize:  # `vocalis batch --normalize`
            problems = []
            for r in requests:
                try:
                    r.text = tts.normalized_text(r.text, True, r.sampling)
                except InputError as e:
                    problems.append(InputError(f"request {r.index}: {e}"))
            if problems:
                raise problems_error(problems)
        return _run(tts, model, requests, requests_file, out, in_flight, sequential, mode,
                    threads, device, load_kw, default_options, t0)
    finally:
        if owned:
            tts.close()


def _run(tts, model, requests, requests_file, out, in_flight, sequential, mode, threads,
         device, load_kw, default_options, t0) -> tuple[dict, int]:
    load_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    jobs = prepare_jobs(tts, requests, VoiceCache(tts))
    voices_ms = (time.perf_counter() - t0) * 1000
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create --out-dir {out}: {e.strerror or e}") from None

    record = mode == "streaming"
    # run_pass never has more requests in flight than there are
    at_once = max(1, min(in_flight, len(jobs)))
    status_before = engine_status(tts)
    if status_before and "max_batch" in status_before and "max_queue" in status_before:
        room = status_before["max_batch"] + status_before["max_queue"]
        if at_once > room:
            log.warning("%d requests in flight but the engine holds %d (max_batch %d + "
                        "max_queue %d): expect CapacityError for some", at_once, room,
                        status_before["max_batch"], status_before["max_queue"])
    rss_loaded = memory.rss_mb()

    log.info("warm-up pass: %d request(s), up to %d in flight", len(jobs), at_once)
    memory.reset_peak()
    warm, warm_ms = run_pass(tts, jobs, at_once, record)
    warm_peak = memory.peak_rss_mb()
    log.info("measured pass: %d request(s), up to %d in flight", len(jobs), at_once)
    memory.reset_peak()
    meas, meas_ms = run_pass(tts, jobs, at_once, record)
    meas_peak = memory.peak_rss_mb()

    # ---- outside timing: files, checks, the after-run request
    per_frame = frame_samples(tts)
    wavs: dict[int, str | None] = {}
    codes: dict[int, str | None] = {}
    for o in meas:
        path = out / _wav_name(o.index, len(jobs))
        npy = path.with_suffix(".npy")
        if o.ok:
            write_wav(path, o.samples, tts.sample_rate)
            wavs[o.index] = path.name
        else:
            path.unlink(missing_ok=True)  # no stale file from an earlier run
            wavs[o.index] = None
        if o.ok and o.codes is not None:
            np.save(npy, o.codes)
            codes[o.index] = npy.name
        else:
            npy.unlink(missing_ok=True)
            codes[o.index] = None
    streaming = None
    checks: dict[int, dict] = {}
    if record:
        for o in meas:
            if o.ok:
                checks[o.index] = _stream_check(o, out / wavs[o.index], per_frame)
        streaming = {"checked": len(checks), "equal": sum(c["equal"] for c in checks.values()),
                     "all_equal": bool(checks) and all(c["equal"] for c in checks.values())}
    repeat = _repeat_check(warm, meas, jobs)
    after = _after_request(tts, jobs, meas)
    status_after = engine_status(tts)

    entries = []
    for name, outcomes in (("warmup", warm), ("measured", meas)):
        for o, r in zip(outcomes, requests):
            # the seed used: the request's, or the one drawn for it (each pass its own)
            used = r.seed if r.seed is not None else (o.engine or {}).get("seed")
            e = {"index": o.index, "pass": name, **{k: v for k, v in o.figures().items()
                                                     if k != "index"},
                 "voice": r.voice, "seed": used, "random_seed": r.seed is None}
            if name == "measured":
                e.update(wav=wavs[o.index], codes=codes[o.index], options=dict(r.sampling))
                if record:
                    e["streaming"] = checks.get(o.index)
            entries.append(e)
    passes = {"warmup": {**summarize(warm, warm_ms), "peak_rss_mb": _r(warm_peak, 1)},
              "measured": {**summarize(meas, meas_ms), "peak_rss_mb": _r(meas_peak, 1)}}
    m = passes["measured"]
    session = {"wall_ms": m["wall_ms"], "audio_s": m["audio_s"], "x_real_time": m["x_real_time"],
               "rtf": m["rtf"], "ttfa_ms": m["ttfa_ms"], "peak_rss_mb": m["peak_rss_mb"],
               "process_peak_rss_mb": _r(max(warm_peak, meas_peak), 1),
               "ok": m["ok"], "failed": m["failed"]}
    failures = [{"index": o.index, "error": o.error} for o in meas if not o.ok]
    import torch  # loaded with the model by now

    report = {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {"platform": platform.platform(), "python": platform.python_version(),
                 "torch": torch.__version__, "gpu": report_meta.gpu_name(device)},
        "model": model, "config": tts.info.name, "family": tts.family.name, "device": device,
        "threads": threads, "torch_threads": torch.get_num_threads(), "mode": mode,
        "batch_size": in_flight, "in_flight": at_once, "sequential": sequential,
        "session_options": {**load_kw, **default_options},
        "requests_file": str(Path(requests_file).expanduser().resolve()),
        "sample_rate": tts.sample_rate, "load_ms": _r(load_ms), "voices_ms": _r(voices_ms),
        "rss_after_load_mb": _r(rss_loaded, 1),
        "passes": passes, "session": session, "requests": entries, "streaming": streaming,
        "repeat": repeat, "after": after,
        "engine": {"before": status_before, "after": status_after},
        "failures": failures,
    }
    (out / REPORT_NAME).write_text(json.dumps(report, indent=2, default=_json_default) + "\n")
    ok = (not failures and after["ok"] and (streaming is None or streaming["all_equal"]))
    return report, 0 if ok else 1


def _json_default(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return str(x)
