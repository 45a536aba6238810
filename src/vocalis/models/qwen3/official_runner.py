"""Official side of ``vocalis bench --against official`` for Qwen3-TTS (a standalone script).

Runs with the interpreter of the environment holding the official ``qwen-tts==0.1.1``
(``VOCALIS_QWEN_PYTHON``), not vocalis's: it imports nothing of vocalis. Invoked by
:mod:`vocalis.models.qwen3.official` as ``PYTHON -I official_runner.py SPEC.json OUT.json``.

SPEC.json: ``{"dir": checkpoint folder, "method": "custom_voice" | "voice_design" |
"voice_clone", "kwargs": mode keywords of that method (speaker, language, instruct),
"gen": generation keywords (do_sample, top_k, ..., max_new_tokens), "ref_audio": the
reference audio's path (voice_clone) or null, "ref_text": its transcript (in-context cloning)
or null, "xvector_only": clone from the x-vector alone, "texts": [...], "seeds": [...],
"threads": torch threads, "device": "cpu" | "cuda[:N]", "warmup": bool}``.

Per text ``i`` (one request at a time, as the official method serves one): ``torch.manual_seed
(seeds[i])`` then ``Qwen3TTSModel.generate_<method>(text, **kwargs, **gen)`` timed from just
before the call to its return (``wall_ms``; the official method returns the whole waveform,
so its time to first audio is the same). ``frames`` = rows of the codes the talker's
``generate`` returned (captured by wrapping ``model.generate``, as tests/qwen3/qwen_official/
engine_run.py does); ``samples`` = waveform length at 24 kHz. A voice-clone prompt is built
once (``create_voice_clone_prompt(ref_audio, ref_text, x_vector_only_mode)``, ``voice_ms``)
and passed as ``voice_clone_prompt`` to every request, so that no request re-extracts it.

OUT.json: ``{"version", "torch_threads", "device", "load_ms", "voice_ms", "sample_rate",
"warmup": PASS | null, "session": PASS}`` with PASS = ``{"wall_ms", "peak_rss_mb",
"rss_before_mb", "per_request": [{"index", "wall_ms", "frames", "samples"}]}``.

``qwen_tts`` imports ``torchaudio.compliance.kaldi`` at module level for its 25 Hz tokenizer
only; when torchaudio is missing or broken a stand-in whose ``fbank`` raises takes its place
(as tests/qwen3/qwen_official/_official.py does). No 12 Hz checkpoint calls it.
"""

from __future__ import annotations

import json
import logging
import resource
import runpy
import sys
import time
import warnings
from importlib.metadata import version
from pathlib import Path

# Run by path, this script's folder would come first on sys.path, and its neighbours
# (config.py, codec.py, ...) would shadow modules of the same name (the caller also passes -I).
if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)


def _torchaudio_stand_in() -> None:
    """The torchaudio stand-in of ``vocalis/models/qwen3/official_env.py``, run by path (this script
    runs under the official interpreter, without vocalis)."""
    runpy.run_path(str(Path(__file__).resolve().parent / "official_env.py"))["install_torchaudio_stand_in"]()


_STATUS = Path("/proc/self/status")


def _status_mb(field: str) -> float | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return round(float(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _peak_mb() -> float | None:
    peak = _status_mb("VmHWM")
    if peak is None:
        ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak = round(ru / (1024 * 1024) if sys.platform == "darwin" else ru / 1024, 1)
    return peak


def _reset_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def run(spec: dict) -> dict:
    _torchaudio_stand_in()
    # torch and the official package: after the stand-in (qwen_tts imports torchaudio on import)
    import torch

    warnings.filterwarnings("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    from qwen_tts import Qwen3TTSModel

    torch.set_num_threads(int(spec["threads"]))
    device = spec.get("device") or "cpu"
    load_kw = {"dtype": torch.float32}
    if device != "cpu":
        load_kw["device_map"] = device
    t0 = time.perf_counter()
    tts = Qwen3TTSModel.from_pretrained(spec["dir"], **load_kw)
    load_ms = (time.perf_counter() - t0) * 1000
    method = spec["method"]
    kwargs = dict(spec.get("kwargs") or {})
    gen = dict(spec.get("gen") or {})
    voice_ms = None
    if method == "voice_clone":
        t0 = time.perf_counter()
        kwargs["voice_clone_prompt"] = tts.create_voice_clone_prompt(
            ref_audio=spec["ref_audio"], ref_text=spec.get("ref_text"),
            x_vector_only_mode=bool(spec.get("xvector_only", True)))
        voice_ms = (time.perf_counter() - t0) * 1000
    fn = getattr(tts, f"generate_{method}")
    captured: list[int] = []
    generate = tts.model.generate

    def capture(*a, **k):
        codes, hidden = generate(*a, **k)
        captured.append(int(codes[0].shape[0]))
        return codes, hidden

    tts.model.generate = capture
    texts, seeds = spec["texts"], spec["seeds"]
    rate = None

    def one(i: int) -> dict:
        nonlocal rate
        captured.clear()
        torch.manual_seed(int(seeds[i]))
        t0 = time.perf_counter()
        wavs, sr = fn(text=texts[i], **kwargs, **gen)
        wall = (time.perf_counter() - t0) * 1000
        rate = sr
        return {"index": i, "wall_ms": round(wall, 2), "frames": captured[0] if captured else None,
                "samples": len(wavs[0])}

    def one_pass() -> dict:
        before = _status_mb("VmRSS")
        _reset_peak()
        t0 = time.perf_counter()
        per = [one(i) for i in range(len(texts))]
        wall = (time.perf_counter() - t0) * 1000
        return {"wall_ms": round(wall, 2), "peak_rss_mb": _peak_mb(), "rss_before_mb": before,
                "per_request": per}

    warm = one_pass() if spec.get("warmup", True) else None
    session = one_pass()
    return {"version": version("qwen-tts"), "torch_threads": torch.get_num_threads(), "device": device,
            "load_ms": round(load_ms, 2), "voice_ms": None if voice_ms is None else round(voice_ms, 2),
            "sample_rate": rate, "warmup": warm, "session": session}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: official_runner.py SPEC.json OUT.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    result = run(spec)
    Path(argv[1]).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
