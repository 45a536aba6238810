"""Time the OFFICIAL pocket-tts package on the benchmark's texts, in a child process.

``vocalis bench --against official`` runs this module as ``python -m
vocalis.bench.official SPEC.json OUT.json`` so that the official model has a process of its
own: its memory figures are its own, and nothing of vocalis (model, engine threads) is
resident or running beside it. It is the same invocation, the same checkpoint, texts and
seeds; requests run one after the other, as the official package serves them
(``generate_audio_stream`` is not thread-safe).

Threads: ``threads=None`` leaves torch as ``import pocket_tts`` leaves it (one intra-op
thread, the package as its users get it; its generation and decoding threads still run side
by side); an integer sets that many intra-op threads after the import (e.g. vocalis's own
count). The result's ``torch_threads`` is the count the child actually ran with.

Timing is the same as vocalis's: ``ttfa_ms`` from just before ``generate_audio_stream`` is
called to the first audio chunk in the caller's hands (the official per-chunk deep copy of
the voice state, tokenization, cache allocation and thread start-up included, model and
voice loading excluded); ``wall_ms`` until the generator is exhausted.

Fixed length (``frames``): the official package has no such option. The child loads the
model with ``eos_threshold=1e9`` (the EOS logit never exceeds it, so EOS never fires) and
replaces the loaded instance's ``_estimate_max_gen_len`` by ``lambda tokens: frames``, the
one place the official generation loop takes its frame budget (and the size of its
caches) from; every text chunk then runs exactly ``frames`` steps, as vocalis's
``max_frames`` does. Without ``frames`` both sides use the model's EOS settings.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

#: the EOS threshold that disables EOS (the logit is compared with ``>``)
NO_EOS_THRESHOLD = 1e9


def run_official(load_kwargs: dict, voice, texts: list[str], seeds: list[int],
                 threads: int | None, frames: int | None = None, quantize: bool = False,
                 warmup: bool = True) -> dict:
    """Load the official model, one excluded pass over ``texts`` then one measured pass.

    ``threads``: torch intra-op threads, or None to keep what ``import pocket_tts`` sets
    (one). Raises ValueError for any other value.
    """
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise ValueError(f"threads must be None (as pocket-tts ships) or an integer >= 1, "
                         f"got {threads!r}")
    import torch
    from pocket_tts import TTSModel  # sets torch.set_num_threads(1) on import

    from vocalis.bench import memory
    from vocalis.bench.session import _r, distribution

    if threads is not None:
        torch.set_num_threads(threads)
    logging.getLogger("pocket_tts").setLevel(logging.ERROR)
    kwargs = dict(load_kwargs)
    if frames is not None:
        kwargs["eos_threshold"] = NO_EOS_THRESHOLD
    if quantize:
        kwargs["quantize"] = True
    t0 = time.perf_counter()
    model = TTSModel.load_model(**kwargs)
    if frames is not None:
        model._estimate_max_gen_len = lambda token_count: frames
    load_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    state = model.get_state_for_audio_prompt(Path(voice) if Path(voice).exists() else voice)
    voice_ms = (time.perf_counter() - t0) * 1000
    rate = model.sample_rate
    frame_samples = int(rate / model.config.mimi.frame_rate)

    def one(i: int) -> dict:
        torch.manual_seed(seeds[i])
        n, ttfa = 0, None
        t0 = time.perf_counter()
        for chunk in model.generate_audio_stream(state, texts[i]):
            if ttfa is None:
                ttfa = (time.perf_counter() - t0) * 1000
            n += int(chunk.shape[-1])
        wall = (time.perf_counter() - t0) * 1000
        audio_s = n / rate
        return {"index": i, "ok": True, "error": None, "ttfa_ms": _r(ttfa), "wall_ms": _r(wall),
                "audio_s": _r(audio_s, 4), "frames": n // frame_samples,
                "rtf": _r(wall / 1000 / audio_s, 4) if n else None,
                "x_real_time": _r(audio_s / (wall / 1000), 3) if n else None}

    def run_pass() -> tuple[list[dict], float]:
        t0 = time.perf_counter()
        out = [one(i) for i in range(len(texts))]
        return out, (time.perf_counter() - t0) * 1000

    warm_summary = None
    if warmup:
        memory.reset_peak()
        w, w_ms = run_pass()
        warm_summary = _summary(w, w_ms, distribution)
        warm_summary["peak_rss_mb"] = _r(memory.peak_rss_mb(), 1)
    rss_before = memory.rss_mb()
    memory.reset_peak()
    meas, meas_ms = run_pass()
    peak = memory.peak_rss_mb()
    session = _summary(meas, meas_ms, distribution)
    session.update(peak_rss_mb=_r(peak, 1), rss_before_mb=_r(rss_before, 1),
                   rss_growth_mb=_r(max(0.0, peak - rss_before), 1) if rss_before is not None else None)
    from importlib.metadata import version

    return {"version": version("pocket-tts"), "load_kwargs": {k: str(v) for k, v in kwargs.items()},
            "frames": frames, "quantize": quantize, "torch_threads": torch.get_num_threads(),
            "sample_rate": rate, "load_ms": _r(load_ms), "voice_ms": _r(voice_ms),
            "warmup": warm_summary, "session": session, "per_request": meas,
            "frames_method": (f"eos_threshold={NO_EOS_THRESHOLD:g} and _estimate_max_gen_len "
                              f"-> {frames} on the loaded instance") if frames else "model EOS"}


def _summary(results: list[dict], wall_ms: float, distribution) -> dict:
    import statistics

    audio_s = sum(r["audio_s"] for r in results)
    xs = [r["x_real_time"] for r in results if r["x_real_time"]]
    rtfs = [r["rtf"] for r in results if r["rtf"]]
    wall_s = wall_ms / 1000
    return {"requests": len(results), "ok": len(results), "failed": 0,
            "wall_ms": round(wall_ms, 2), "audio_s": round(audio_s, 4),
            "frames": sum(r["frames"] for r in results),
            "x_real_time": round(audio_s / wall_s, 3) if audio_s and wall_s else None,
            "rtf": round(wall_s / audio_s, 4) if audio_s else None,
            "ttfa_ms": distribution([r["ttfa_ms"] for r in results]),
            "request_x_real_time": round(statistics.fmean(xs), 3) if xs else None,
            "request_rtf": round(statistics.fmean(rtfs), 4) if rtfs else None}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m vocalis.bench.official SPEC.json OUT.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    result = run_official(**spec)
    Path(argv[1]).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
