"""Offline batch runner: many requests through one engine session, with a JSON report.

Order of work (``vocalis batch``):

1. Check everything before loading anything heavy or running anything: the requests file
   (:mod:`vocalis.bench.requests`), batch size, mode, session options; then load the model
   and every distinct voice (an unknown voice names the first request using it). Qwen3-TTS
   models: the requests file is checked for the Qwen3 option names, then every request in
   full through the loaded model (:func:`prepare_qwen3`), so a bad request N stops the run
   with ``request N: ...`` before anything is generated or written.
2. Warm-up pass over all requests (excluded from the figures and from the WAV files).
3. Measured pass with the same grouping: at most ``batch_size`` requests in the engine at
   once, submitted in file order as earlier ones finish (``sequential`` = one at a time).
4. Outside timing: one 16-bit 24 kHz mono WAV per successful measured request
   (``DIR/NNNN.wav``, NNNN = request index) and, for Qwen3-TTS, its generated codes
   (``DIR/NNNN.npy``, int64 ``[frames, 16]``, the codec's input), and with ``mode="streaming"`` the check that
   each request's audio events concatenate exactly to the WAV read back from disk.
5. One ordinary request (:meth:`vocalis.api.TTS.synthesize` of the first seeded request)
   through the same session, to show the engine is reusable afterwards.
6. ``DIR/report.json`` (schema ``vocalis.batch``, see :func:`run_batch`).

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

from vocalis.bench import memory
from vocalis.bench.requests import (
    BatchRequest,
    check_options,
    option_names,
    read_requests,
)
from vocalis.bench.session import Job, Outcome, _r, run_pass, summarize
from vocalis.errors import InputError, VocalisError, VoiceError

log = logging.getLogger(__name__)

SCHEMA = "vocalis.batch"
SCHEMA_VERSION = 1
REPORT_NAME = "report.json"
MODES = ("oneshot", "streaming")
DEFAULT_BATCH_SIZE = 16
MAX_BATCH_SIZE = 256
#: session options given to :func:`vocalis.load`; every other key must be a sampling
#: option, used as the default of every request (a request's own options win)
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


def model_family(model: str, tts=None) -> str:
    """``qwen3`` for a Qwen3-TTS model (the loaded ``tts`` when given, else the ``--model``
    reference, see :func:`vocalis.api.is_qwen3`), else ``pocket``."""
    if tts is not None:
        return "qwen3" if getattr(tts, "family_name", None) == "qwen3-tts" else "pocket"
    from vocalis.api import is_qwen3

    return "qwen3" if is_qwen3(model) else "pocket"


def parse_session_options(text: str | dict | None,
                          family: str = "pocket") -> tuple[dict, dict]:
    """``--session-options`` JSON -> (load keywords, default request options).

    Load keywords: ``max_batch``, ``max_queue`` (engine limits), ``quantize`` (true or ``"int8"``; ``"int4"`` for Qwen3-TTS).

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
    load_kw = {k: data[k] for k in LOAD_KEYS if k in data}
    sampling = {k: v for k, v in data.items() if k not in LOAD_KEYS}
    unknown = sorted(set(sampling) - set(option_names(family)))
    if unknown:
        raise InputError(f"--session-options: unknown key(s) {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(LOAD_KEYS + option_names(family))}")
    for k, v in load_kw.items():
        if k == "quantize":
            from vocalis.api import QUANTIZE_MODES

            if not (isinstance(v, bool) or (isinstance(v, str) and v.strip().lower() in QUANTIZE_MODES)):
                raise InputError("--session-options: quantize must be true, false, \"int8\" or "
                                 f"\"int4\", got {v!r}")
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"--session-options: {k} must be an integer >= 1, got {v!r}")
    check_options(sampling, "--session-options", family)
    return load_kw, sampling


def load_session(model: str, device: str, threads: int | None, **engine_kw):
    """:func:`vocalis.api.load` with the engine keywords (``max_batch``, ``max_queue``)."""
    from vocalis import api

    return api.load(model, device=device, threads=threads, **engine_kw)


def engine_status(tts) -> dict | None:
    fn = getattr(tts, "engine_status", None)
    if fn is None:
        return None
    try:
        return dict(fn())
    except Exception as e:  # noqa: BLE001 - report, don't fail the run over it
        return {"error": str(e)}


def resolve_voices(tts, requests: list[BatchRequest]) -> dict:
    """Load every distinct voice once: {voice string or None: Voice}.

    Raises:
        VoiceError/InputError/ModelNotFound: naming the first request that uses the voice.
    """
    voices: dict = {}
    for r in requests:
        if r.voice in voices:
            continue
        try:
            voices[r.voice] = tts.voice(r.voice)
        except VocalisError as e:
            raise type(e)(f"request {r.index}: {e}") from None
        except Exception as e:  # noqa: BLE001 - an unreadable file the audio reader did not classify
            raise VoiceError(f"request {r.index}: cannot load voice {r.voice!r}: {e}") from None
    return voices


#: Qwen3 options that describe the cloned voice (folded into one Voice per distinct set)
CLONE_KEYS = ("ref_audio", "ref_text", "xvector_only")


def prepare_qwen3(tts, requests: list[BatchRequest]) -> dict[int, tuple]:
    """Qwen3-TTS: check every request in full, in file order, with the loaded model's
    :meth:`~vocalis.api_qwen3.Qwen3TTS._prepare` (options, speaker, language, instruct,
    reference audio, text length), and load each distinct cloned voice once.

    Base models: a request's ``voice`` or ``ref_audio`` (with ``ref_text`` /
    ``xvector_only``) becomes one :class:`vocalis.api.Voice` per distinct
    (audio, ref_text, xvector_only), submitted instead of those options (the same prompt
    ``submit`` would build). Other models: the voice string is passed as given.

    Returns {request index: (voice for submit, options for submit)}.

    Raises:
        InputError/VoiceError: ``request N: ...`` for the first bad request.
    """
    base = getattr(tts.model, "model_type", None) == "base"
    clones: dict = {}
    out: dict[int, tuple] = {}
    for r in requests:
        voice, opts = r.voice, dict(r.sampling)
        try:
            if base and (voice is not None or opts.get("ref_audio") is not None):
                src = opts.get("ref_audio") if opts.get("ref_audio") is not None else voice
                if voice is not None and opts.get("ref_audio") is not None:
                    raise InputError("give the reference once: voice and ref_audio are both set")
                key = (src, opts.get("ref_text"), opts.get("xvector_only"))
                if key not in clones:
                    xv = opts.get("xvector_only")
                    if xv is not None and not isinstance(xv, bool):
                        raise InputError(f"xvector_only must be true or false, got {xv!r}")
                    if opts.get("ref_text") is not None and not isinstance(opts["ref_text"], str):
                        raise InputError("ref_text must be a string, got "
                                         f"{type(opts['ref_text']).__name__}")
                    clones[key] = tts.voice(src, ref_text=opts.get("ref_text"),
                                            xvector_only=bool(xv))
                voice = clones[key]
                opts = {k: v for k, v in opts.items() if k not in CLONE_KEYS}
            tts._prepare(r.text, voice, r.seed, dict(opts))
        except VocalisError as e:
            raise type(e)(f"request {r.index}: {e}") from None
        except Exception as e:  # noqa: BLE001 - an unreadable file the audio reader did not classify
            raise VoiceError(f"request {r.index}: cannot load voice "
                             f"{opts.get('ref_audio') or r.voice!r}: {e}") from None
        out[r.index] = (voice, opts)
    return out


def check_texts(tts, requests: list[BatchRequest]) -> None:
    """Prepare and chunk every text as ``submit`` will (cheap: tokenization only), so a text
    the model cannot speak stops the run before anything runs, naming its request."""
    chunk_text = getattr(getattr(tts, "model", None), "chunk_text", None)
    if chunk_text is None:
        return
    for r in requests:
        try:
            chunk_text(r.text, r.sampling.get("max_tokens", 50))
        except InputError as e:
            raise InputError(f"request {r.index}: {e}") from None


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


def _stream_check(o: Outcome, wav_path: Path | None, frame_samples: int) -> dict:
    """Do the request's audio events concatenate exactly to its WAV file?"""
    from vocalis.audio import float_to_int16

    samples = o.samples if o.samples is not None else np.zeros(0, np.float32)
    out = {"audio_events": o.events, "in_order": o.in_order,
           "event_samples": int(sum(o.sizes or [])), "wav_samples": None, "equal": False,
           "whole_frames": samples.shape[0] % frame_samples == 0}
    engine_frames = (o.engine or {}).get("frames")
    if engine_frames is not None:
        out["engine_frames"] = engine_frames
        out["frames_match"] = engine_frames * frame_samples == samples.shape[0]
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

    ``tts``: an already loaded session to use instead of loading ``model`` (tests, API use).
    ``normalize``: each text goes through :mod:`vocalis.text.normalize` first (in the
    model's language, Qwen3: the request's ``language``).

    Returns (report, exit status): 0 when every measured request, the streaming checks and
    the after-run request succeeded, else 1 (the report says what failed).

    Report (``DIR/report.json``)::

        schema, schema_version, created, model, config, device, threads, torch_threads,
        mode, batch_size (requests in flight), sequential, session_options, requests_file,
        sample_rate, load_ms, voices_ms, rss_after_load_mb,
        passes: {warmup, measured}: requests, ok, failed, wall_ms, audio_s, frames,
            x_real_time (pass audio / pass wall), rtf, ttfa_ms {mean,p50,p90,min,max},
            request_x_real_time, request_rtf (per-request means), peak_rss_mb
        session: the measured pass's wall_ms, audio_s, x_real_time, rtf, peak_rss_mb,
            process_peak_rss_mb, ok, failed
        requests: one entry per request and pass: index, pass ("warmup" | "measured"), ok,
            error, ttfa_ms, wall_ms, audio_s, frames, rtf, x_real_time, audio_events,
            text_chunks, engine_queued_ms, engine_ttfa_ms, voice, seed;
            measured ones also wav (file name or null), for Qwen3-TTS codes (``NNNN.npy``
            or null) and options (speaker, language, instruct, ref_audio, ref_text,
            xvector_only as given), and in streaming mode, streaming
            {audio_events, in_order, event_samples, wav_samples, whole_frames,
             engine_frames, frames_match, first_event_ms, max_gap_ms, mean_gap_ms, equal}
        streaming: {checked, equal, all_equal} (streaming mode) or null
        repeat: seeded requests, warm-up vs measured: {seeded_requests, frames_equal,
            bit_equal, min_cosine}
        after: {index, api, ok, error, ttfa_ms, wall_ms, audio_s, rtf,
            same_frames_as_measured, cosine_to_measured}
        engine: {before, after}: engine_status() (null without an engine)
        failures: [{index, error}] of the measured pass
    """
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}: use {' or '.join(MODES)}")
    in_flight = check_batch_size(batch_size, sequential)
    family = model_family(model, tts)
    load_kw, default_sampling = parse_session_options(session_options, family)
    requests = read_requests(requests_file, family)
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise InputError(f"--out-dir {out} exists and is not a folder")
    for r in requests:  # session defaults under each request's own options
        merged = {**default_sampling, **r.sampling}
        check_options({**merged, "seed": r.seed} if r.seed is not None else merged,
                      f"request {r.index}", family)
        r.sampling = merged

    t0 = time.perf_counter()
    owned = tts is None
    if owned:
        load_kw.setdefault("max_batch", min(in_flight, len(requests)))
        load_kw.setdefault("max_queue", max(256, in_flight))
        tts = load_session(model, device, threads, **load_kw)
    try:
        if normalize:  # `vocalis batch --normalize`
            for r in requests:
                try:
                    r.text = tts.normalized_text(r.text, True, r.sampling)
                except InputError as e:
                    raise InputError(f"request {r.index}: {e}") from None
        return _run(tts, model, requests, requests_file, out, in_flight, sequential, mode,
                    threads, device, load_kw, default_sampling, t0)
    finally:
        if owned:
            close = getattr(tts, "close", None)
            if callable(close):
                close()


def _run(tts, model, requests, requests_file, out, in_flight, sequential, mode, threads,
         device, load_kw, default_sampling, t0) -> tuple[dict, int]:
    import torch

    load_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    qwen3 = model_family(model, tts) == "qwen3"
    if qwen3:
        prepared = prepare_qwen3(tts, requests)
    else:
        voices = resolve_voices(tts, requests)
    voices_ms = (time.perf_counter() - t0) * 1000
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create --out-dir {out}: {e.strerror or e}") from None

    if qwen3:
        jobs = [Job(r.index, r.text, prepared[r.index][0], r.seed, dict(prepared[r.index][1]))
                for r in requests]
    else:
        check_texts(tts, requests)
        jobs = [Job(r.index, r.text, voices[r.voice], r.seed, dict(r.sampling))
                for r in requests]
    record = mode == "streaming"
    status_before = engine_status(tts)
    if status_before and "max_batch" in status_before and "max_queue" in status_before:
        room = status_before["max_batch"] + status_before["max_queue"]
        if in_flight > room:
            log.warning("%d requests in flight but the engine holds %d (max_batch %d + "
                        "max_queue %d): expect CapacityError for some", in_flight, room,
                        status_before["max_batch"], status_before["max_queue"])
    rss_loaded = memory.rss_mb()

    log.info("warm-up pass: %d request(s), up to %d in flight", len(jobs), min(in_flight, len(jobs)))
    memory.reset_peak()
    warm, warm_ms = run_pass(tts, jobs, in_flight, record)
    warm_peak = memory.peak_rss_mb()
    log.info("measured pass: %d request(s), up to %d in flight", len(jobs), min(in_flight, len(jobs)))
    memory.reset_peak()
    meas, meas_ms = run_pass(tts, jobs, in_flight, record)
    meas_peak = memory.peak_rss_mb()

    # ---- outside timing: files, checks, the after-run request
    from vocalis.audio import write_wav

    frame_samples = int(getattr(getattr(tts, "model", None), "frame_samples", 1920))
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
        if qwen3 and o.ok and o.codes is not None:
            np.save(npy, o.codes)
            codes[o.index] = npy.name
        elif qwen3:
            npy.unlink(missing_ok=True)
            codes[o.index] = None
    streaming = None
    checks: dict[int, dict] = {}
    if record:
        for o in meas:
            if o.ok:
                checks[o.index] = _stream_check(o, out / wavs[o.index], frame_samples)
        streaming = {"checked": len(checks), "equal": sum(c["equal"] for c in checks.values()),
                     "all_equal": bool(checks) and all(c["equal"] for c in checks.values())}
    repeat = _repeat_check(warm, meas, jobs)
    after = _after_request(tts, jobs, meas)
    status_after = engine_status(tts)

    entries = []
    for name, outcomes in (("warmup", warm), ("measured", meas)):
        for o, r in zip(outcomes, requests):
            e = {"index": o.index, "pass": name, **{k: v for k, v in o.figures().items()
                                                     if k != "index"},
                 "voice": r.voice, "seed": r.seed}
            if name == "measured":
                e["wav"] = wavs[o.index]
                if qwen3:
                    e["codes"] = codes[o.index]
                    e["options"] = {k: v for k, v in r.sampling.items()
                                    if k in ("speaker", "language", "instruct", "ref_audio",
                                             "ref_text", "xvector_only")}
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
    report = {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {"platform": platform.platform(), "python": platform.python_version(),
                 "torch": torch.__version__},
        "model": model, "config": getattr(tts, "config_name", None), "device": device,
        "threads": threads, "torch_threads": torch.get_num_threads(), "mode": mode,
        "batch_size": in_flight, "sequential": sequential,
        "session_options": {**load_kw, **default_sampling},
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
