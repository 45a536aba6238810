"""The official Qwen3-TTS package (``qwen-tts==0.1.1``) as the other side of ``vocalis bench``.

It pins ``transformers==4.57.3``, which cannot share vocalis's environment, so it runs in an
interpreter of its own: ``VOCALIS_QWEN_PYTHON`` (the ``python`` of a virtual environment
holding ``qwen-tts``; ``scripts/qwen_official_venv.sh`` builds one). The script it runs,
:mod:`vocalis.bench.qwen3_official_runner`, ships with vocalis and imports nothing of it.

What maps to what (vocalis request options -> official keywords):

* mode: CustomVoice ``generate_custom_voice(speaker=, language=, instruct=)``, VoiceDesign
  ``generate_voice_design(instruct=, language=)``, Base ``generate_voice_clone`` with an
  x-vector-only prompt of the same reference audio (``create_voice_clone_prompt(ref_audio,
  x_vector_only_mode=True)``, built once, outside the timed requests);
* sampling options keep their names (``do_sample``, ``top_k``, ``top_p``, ``temperature``,
  ``repetition_penalty``, ``subtalker_*``, ``max_new_tokens``, and the prompt layout
  ``non_streaming_mode``); ``greedy=True`` becomes
  ``do_sample=False, subtalker_dosample=False``;
* ``frames`` F: vocalis ``max_frames=F``, official ``max_new_tokens=F+1`` (HF generate stops
  with the last sampled token's frame dropped, so ``max_new_tokens - 1`` frames when no EOS
  fires: ``modeling_qwen3_tts.py:2280-2289``, see /work/shared/reference/qwen3-tts.md §frames).
  EOS still ends a request early on either side; the report says whether the frame counts
  agree per request.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from vocalis.errors import HarnessError, InputError

ENV_VAR = "VOCALIS_QWEN_PYTHON"
RUNNER = Path(__file__).resolve().parent / "qwen3_official_runner.py"
GEN_KEYS = ("do_sample", "top_k", "top_p", "temperature", "repetition_penalty", "subtalker_dosample",
            "subtalker_top_k", "subtalker_top_p", "subtalker_temperature", "max_new_tokens",
            "non_streaming_mode")
METHODS = {"custom_voice": "custom_voice", "voice_design": "voice_design", "base": "voice_clone"}


def official_python() -> str:
    """The interpreter named by ``VOCALIS_QWEN_PYTHON``.

    Raises:
        InputError: unset, or not an executable file (the message says how to build one).
    """
    path = os.environ.get(ENV_VAR, "").strip()
    hint = (f"set {ENV_VAR} to the python of a virtual environment holding qwen-tts==0.1.1 "
            "(bash scripts/qwen_official_venv.sh .venv-qwen builds one)")
    if not path:
        raise InputError(f"--against official for Qwen3-TTS runs the official qwen-tts in its own "
                         f"interpreter: {hint}")
    p = Path(path).expanduser()
    if not (p.is_file() and os.access(p, os.X_OK)):
        raise InputError(f"{ENV_VAR}={path} is not an executable file: {hint}")
    return str(p)


def official_gen(sampling: dict, frames: int | None) -> dict:
    """The official generation keywords for vocalis's sampling options (see the module doc).

    ``sampling`` may hold the official names, ``greedy`` and ``max_frames`` (dropped: ``frames``
    gives the official ``max_new_tokens``)."""
    gen = {k: sampling[k] for k in GEN_KEYS if sampling.get(k) is not None}
    if sampling.get("greedy"):
        gen["do_sample"] = False
        gen["subtalker_dosample"] = False
    if frames is not None:
        gen["max_new_tokens"] = frames + 1
    return gen


def run_official_qwen3(spec: dict, timeout_s: float) -> dict:
    """Run the official side (spec: see :mod:`vocalis.bench.qwen3_official_runner`); its raw
    result dict.

    Raises:
        InputError: no official interpreter. HarnessError: the run failed or took too long
        (the last line of its stderr in the message).
    """
    py = official_python()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    with tempfile.TemporaryDirectory(prefix="vocalis-bench-qwen3-") as d:
        spec_path, out_path = Path(d) / "spec.json", Path(d) / "out.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        try:
            proc = subprocess.run([py, "-I", str(RUNNER), str(spec_path), str(out_path)], check=False,
                                  capture_output=True, env=env, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"the official qwen-tts run took over {timeout_s:.0f} s") from None
        if proc.returncode != 0 or not out_path.exists():
            lines = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
            raise HarnessError("the official qwen-tts run failed: "
                               + (lines[-1] if lines else f"exit {proc.returncode}"))
        return json.loads(out_path.read_text(encoding="utf-8"))


def _per_request(r: dict, rate: int, frame_samples: int) -> dict:
    from vocalis.bench.session import _r

    wall, n = r["wall_ms"], r["samples"]
    audio_s = n / rate
    ok = bool(n)
    return {"index": r["index"], "ok": ok, "error": None if ok else "no audio",
            # the official method returns the whole waveform: first audio = all of it
            "ttfa_ms": _r(wall), "wall_ms": _r(wall), "audio_s": _r(audio_s, 4),
            "frames": r["frames"], "wave_frames": n // frame_samples, "samples": n,
            "rtf": _r(wall / 1000 / audio_s, 4) if ok else None,
            "x_real_time": _r(audio_s / (wall / 1000), 3) if ok and wall > 0 else None,
            "ms_per_frame": _r(wall / r["frames"], 3) if r["frames"] else None}


def summarize_official(raw: dict, frame_samples: int) -> dict:
    """The official result in the bench's schema: ``{version, device, torch_threads, load_ms,
    voice_ms, sample_rate, warmup: PASS, session: PASS, per_request: [...]}`` (PASS as in
    :func:`vocalis.bench.benchmark.run_bench`)."""
    from vocalis.bench.benchmark import add_frame_figures
    from vocalis.bench.official import _summary
    from vocalis.bench.session import distribution

    rate = int(raw.get("sample_rate") or 24000)

    def one_pass(p: dict | None) -> tuple[dict | None, list]:
        if p is None:
            return None, []
        per = [_per_request(r, rate, frame_samples) for r in p["per_request"]]
        s = _summary([{**r, "frames": r["frames"] or 0} for r in per], p["wall_ms"], distribution)
        add_frame_figures(s, per)
        s["ok"] = sum(r["ok"] for r in per)
        s["failed"] = len(per) - s["ok"]
        before = p.get("rss_before_mb")
        s.update(peak_rss_mb=p.get("peak_rss_mb"), rss_before_mb=before,
                 rss_growth_mb=(round(max(0.0, p["peak_rss_mb"] - before), 1)
                                if before is not None and p.get("peak_rss_mb") is not None else None))
        return s, per

    warm, _ = one_pass(raw.get("warmup"))
    session, per = one_pass(raw["session"])
    return {"version": raw.get("version"), "device": raw.get("device"), "torch_threads": raw.get("torch_threads"),
            "load_ms": raw.get("load_ms"), "voice_ms": raw.get("voice_ms"), "sample_rate": rate,
            "warmup": warm, "session": session, "per_request": per}


def run(folder: Path, model_type: str, mode: dict, sampling: dict, frames: int | None, texts: list[str],
        seeds: list[int], threads: int, device: str, timeout_s: float, frame_samples: int) -> dict:
    """Build the spec, run the official side and return its report part (see
    :func:`summarize_official`) plus ``method``, ``kwargs``, ``gen`` and ``frames_method``."""
    method = METHODS[model_type]
    kwargs = {k: mode[k] for k in ("speaker", "language", "instruct") if mode.get(k) is not None}
    gen = official_gen(sampling, frames)
    spec = {"dir": str(folder), "method": method, "kwargs": kwargs, "gen": gen,
            "ref_audio": mode.get("ref_audio"), "texts": texts, "seeds": seeds, "threads": threads,
            "device": device, "warmup": True}
    t0 = time.perf_counter()
    raw = run_official_qwen3(spec, timeout_s)
    out = summarize_official(raw, frame_samples)
    out.update(method=f"generate_{method}", kwargs=kwargs, gen=gen, frames=frames,
               child_wall_s=round(time.perf_counter() - t0, 2),
               frames_method=(f"max_new_tokens={frames + 1} (HF generate drops the last token's frame)"
                              if frames is not None else "model EOS"))
    if method == "voice_clone":
        out["prompt"] = "create_voice_clone_prompt(x_vector_only_mode=True), once, outside the requests"
    return out
