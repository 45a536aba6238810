"""Qwen3-TTS in ``vocalis bench``: the requests it runs, and the official ``qwen-tts==0.1.1``
as the other side of ``--against official``.

What the bench runs (:func:`bench_request`), one mode per checkpoint type, kept simple:

* CustomVoice: a built-in speaker (``speaker``, or ``voice`` as a speaker name; default the
  model's first speaker); ``instruct`` passed through (1.7B; 0.6B ignores it on both sides);
* VoiceDesign: ``instruct`` (default :data:`DEFAULT_INSTRUCT`);
* Base: ``voice`` (or ``ref_audio``) = reference audio, cloned from its speaker embedding
  alone (x-vector only) unless ``ref_text`` is given (in-context cloning).

The official package pins ``transformers==4.57.3``, which cannot share vocalis's
environment, so it runs in an interpreter of its own: ``VOCALIS_QWEN_PYTHON`` (the ``python``
of a virtual environment holding ``qwen-tts``; ``scripts/qwen_official_venv.sh`` builds
one). The script it runs, :mod:`vocalis.models.qwen3.official_runner`, ships with vocalis
and imports nothing of it.

What maps to what (vocalis request options -> official keywords):

* mode: CustomVoice ``generate_custom_voice(speaker=, language=, instruct=)``, VoiceDesign
  ``generate_voice_design(instruct=, language=)``, Base ``generate_voice_clone`` with a
  prompt of the same reference audio (``create_voice_clone_prompt(ref_audio, ref_text,
  x_vector_only_mode)``, built once, outside the timed requests);
* sampling options keep their names (``do_sample``, ``top_k``, ``top_p``, ``temperature``,
  ``repetition_penalty``, ``subtalker_*``, ``max_new_tokens``, and the prompt layout
  ``non_streaming_mode``); ``greedy=True`` becomes
  ``do_sample=False, subtalker_dosample=False``;
* ``max_frames`` F (``--frames F``): official ``max_new_tokens=F+1`` (HF generate stops
  with the last sampled token's frame dropped, so ``max_new_tokens - 1`` frames when no EOS
  fires: ``modeling_qwen3_tts.py:2280-2289``, see /work/shared/reference/qwen3-tts.md
  §frames). EOS still ends a request early on either side; the report says whether the
  frame counts agree per request.

It runs once, at vocalis's thread count (a ``matched-threads`` run); its methods return the
whole waveform, so its time to first audio is its wall time (``whole_waveform``).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from vocalis.bench.official import MATCHED_THREADS, pass_summary, run_child
from vocalis.bench.session import _r, add_frame_figures
from vocalis.errors import InputError, VoiceError
from vocalis.family import ModelInfo, OfficialBench, Voice
from vocalis.models.qwen3.checkpoint import resolve_checkpoint
from vocalis.models.qwen3.options import is_audio_array

log = logging.getLogger(__name__)

DEFAULT_INSTRUCT = "A calm, clear adult voice, speaking at a moderate pace."
ENV_VAR = "VOCALIS_QWEN_PYTHON"
RUNNER = Path(__file__).resolve().parent / "official_runner.py"
GEN_KEYS = ("do_sample", "top_k", "top_p", "temperature", "repetition_penalty", "subtalker_dosample",
            "subtalker_top_k", "subtalker_top_p", "subtalker_temperature", "max_new_tokens",
            "non_streaming_mode")
METHODS = {"custom_voice": "custom_voice", "voice_design": "voice_design", "base": "voice_clone"}


def _is_saved_prompt(src) -> bool:
    return isinstance(src, Voice) or (isinstance(src, (str, Path))
                                      and Path(str(src)).suffix.lower() == ".safetensors")


def bench_request(info: ModelInfo, voice, options: dict) -> tuple[object, dict]:
    """The voice and options of every request of ``vocalis bench`` (see the module doc):
    CustomVoice: the speaker as the voice (canonical name; default the model's first);
    VoiceDesign: ``instruct`` defaults to :data:`DEFAULT_INSTRUCT`; Base: ``ref_audio`` as
    the voice, cloned x-vector only without ``ref_text``. What contradicts itself (a speaker
    and another voice, ``ref_audio`` and a voice) is left for the family's check to refuse."""
    opts = dict(options)
    if info.kind == "custom_voice":
        speaker = opts.pop("speaker", None)
        if speaker is not None and voice is not None:
            return voice, {**opts, "speaker": speaker}
        src = speaker if speaker is not None else voice
        if src is None:
            src = info.default_voice
        return (info.canonical_voice(src) if isinstance(src, str) else src), opts
    if info.kind == "voice_design":
        opts.setdefault("instruct", DEFAULT_INSTRUCT)
        return voice, opts
    ref = opts.pop("ref_audio", None)
    if ref is not None and voice is not None:
        return voice, {**opts, "ref_audio": ref}
    src = ref if ref is not None else voice
    if src is None or _is_saved_prompt(src):
        return src, opts
    if opts.get("ref_text") is None and not opts.get("xvector_only"):
        opts["xvector_only"] = True
    if isinstance(src, (str, Path)) and "://" not in str(src) and Path(src).expanduser().is_file():
        src = str(Path(src).expanduser().resolve())
    return src, opts


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


def official_gen(options: dict, frames: int | None) -> dict:
    """The official generation keywords for vocalis's request options (see the module doc).

    ``options`` may hold the official names, ``greedy`` and ``max_frames`` (dropped: ``frames``
    gives the official ``max_new_tokens``); the mode's options are not generation keywords."""
    gen = {k: options[k] for k in GEN_KEYS if options.get(k) is not None}
    if options.get("greedy"):
        gen["do_sample"] = False
        gen["subtalker_dosample"] = False
    if frames is not None:
        gen["max_new_tokens"] = frames + 1
    return gen


def run_official_qwen3(spec: dict, timeout_s: float) -> dict:
    """Run the official side (spec: see :mod:`vocalis.models.qwen3.official_runner`); its raw
    result dict.

    Raises:
        InputError: no official interpreter. HarnessError: the run failed or took too long
        (the last line of its stderr in the message).
    """
    py = official_python()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    return run_child([py, "-I", str(RUNNER)], spec, what="the official qwen-tts run",
                     timeout_s=timeout_s, env=env)


def _per_request(r: dict, rate: int, frame_samples: int) -> dict:
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
    rate = int(raw.get("sample_rate") or 24000)

    def one_pass(p: dict | None) -> tuple[dict | None, list]:
        if p is None:
            return None, []
        per = [_per_request(r, rate, frame_samples) for r in p["per_request"]]
        s = pass_summary(per, p["wall_ms"])
        add_frame_figures(s, per)
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


class Qwen3OfficialBench(OfficialBench):
    """The official qwen-tts in its own interpreter (see the module doc)."""

    name = "qwen-tts 0.1.1"

    def check(self, info: ModelInfo, voice, options: dict, quantize: bool) -> None:
        if quantize:
            raise InputError("--official-quantize: the official qwen-tts has no int8 path (it is "
                             "the official pocket-tts's)", param="official_quantize")
        official_python()  # fail before anything runs when there is no official interpreter
        recording = not (voice is None or _is_saved_prompt(voice) or is_audio_array(voice)) \
            and Path(str(voice)).expanduser().is_file()
        if info.kind == "base" and not recording:
            raise VoiceError(f"--against official with {info.name} (Base) clones a reference "
                             "recording on both sides: give --voice AUDIO_FILE (a saved "
                             "voice-clone prompt is vocalis's own)", param="voice")

    def runs(self, info: ModelInfo, voice, options: dict, *, texts: list[str],
             seeds: list[int], frames: int | None, threads: int, device: str,
             quantize: bool, frame_samples: int, timeout_s: float) -> list[dict]:
        folder, _ = resolve_checkpoint(info.model_id, download=False)
        frames = options.get("max_frames", frames)
        method = METHODS[info.kind]
        kwargs = {k: options[k] for k in ("language", "instruct") if options.get(k) is not None}
        spec = {"dir": str(folder), "method": method, "texts": texts, "seeds": seeds,
                "threads": threads, "device": device, "warmup": True,
                "gen": official_gen(options, frames)}
        if info.kind == "custom_voice":
            kwargs = {"speaker": voice.state if isinstance(voice, Voice) else voice, **kwargs}
        elif info.kind == "base":
            spec.update(ref_audio=str(voice), ref_text=options.get("ref_text"),
                        xvector_only=bool(options.get("xvector_only")))
        spec["kwargs"] = kwargs
        log.info("official %s: warm-up pass and measured pass, %d request(s), one at a time, %d "
                 "thread(s)", self.name, len(texts), threads)
        t0 = time.perf_counter()
        raw = run_official_qwen3(spec, timeout_s)
        out = summarize_official(raw, frame_samples)
        out.update(method=f"generate_{method}", kwargs=kwargs, gen=spec["gen"], frames=frames,
                   child_wall_s=round(time.perf_counter() - t0, 2), whole_waveform=True,
                   frames_method=(f"max_new_tokens={frames + 1} (HF generate drops the last "
                                  "token's frame)" if frames is not None else "model EOS"))
        if method == "voice_clone":
            how = "x_vector_only_mode=True" if spec["xvector_only"] else "ref_text"
            out["prompt"] = f"create_voice_clone_prompt({how}), once, outside the requests"
        return [{"config": MATCHED_THREADS, "matches_vocalis_threads": True, **out}]


__all__ = ["DEFAULT_INSTRUCT", "ENV_VAR", "GEN_KEYS", "METHODS", "Qwen3OfficialBench",
           "bench_request", "official_gen", "official_python", "run_official_qwen3",
           "summarize_official"]
