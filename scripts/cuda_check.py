"""Check the CUDA path against the CPU path, and time it, on random-weight checkpoints.

Usage::

    python scripts/cuda_check.py --model CKPT [--model CKPT ...] [--device cuda] [--json OUT]

For each checkpoint (a Pocket TTS or Qwen3-TTS folder, e.g. from ``vocalis models random``):

* **deterministic parity**: the same request with no sampling noise (Pocket ``temperature=0``,
  Qwen3 ``greedy``), a fixed number of frames, on the CPU and on ``--device``: equal length
  and the waveform cosine between them;
* **seeded repeat**: the same seeded (sampled) request twice on the device: identical or not;
* **batch against solo**: 8 seeded requests submitted together on the device, each against
  its own solo run (cosine), which proves that rows of a batch do not leak into each other;
* **timing**: TTFA and x real time of one request, and aggregate x real time of the batch.

Nothing here is a pass/fail gate by itself: it prints one JSON line per check (and writes them
all with ``--json``), so that a run on a lent GPU reports what the CUDA path does. The family
of each checkpoint is found the way every front end finds it (``vocalis.load``); the request
options used for "no noise" are the families' own documented options.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

import vocalis

TEXTS = ["The quick brown fox jumps over the lazy dog near the river bank.",
         "A second sentence, a little longer than the first one, to vary the length."]
FRAMES = 30

# the family's options that turn sampling off and fix the length (its documented names)
NO_NOISE = {"pocket-tts": {"temperature": 0.0, "max_frames": FRAMES},
            "qwen3-tts": {"greedy": True, "max_frames": FRAMES}}
FIXED = {"pocket-tts": {"max_frames": FRAMES}, "qwen3-tts": {"max_frames": FRAMES}}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    n = min(len(a), len(b))
    a, b = a[:n].astype(np.float64), b[:n].astype(np.float64)
    den = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / den) if den > 0 else float("nan")


def emit(rows: list, **row) -> None:
    rows.append(row)
    print(json.dumps(row), flush=True)


def check_model(path: str, device: str, rows: list) -> None:
    t0 = time.perf_counter()
    gpu = vocalis.load(path, device=device, max_batch=8)
    load_s = time.perf_counter() - t0
    fam = gpu.family.name
    emit(rows, model=path, check="load", device=device, family=fam, load_s=round(load_s, 2))
    # a random-weight checkpoint has no predefined voices: the voice file written beside it
    voice = Path(path) / "voice.wav"
    voice = {"voice": str(voice)} if voice.is_file() and fam == "pocket-tts" else {}
    no_noise, fixed = {**NO_NOISE[fam], **voice}, {**FIXED[fam], **voice}
    rate = gpu.sample_rate

    # warm-up (first CUDA kernels, cuDNN choices)
    gpu.synthesize(TEXTS[0], seed=1, **fixed)

    cpu = vocalis.load(path, device="cpu")
    for i, text in enumerate(TEXTS):
        a = cpu.synthesize(text, seed=7, **no_noise).samples
        b = gpu.synthesize(text, seed=7, **no_noise).samples
        emit(rows, model=path, check="deterministic_parity", text=i, cpu_samples=len(a),
             device_samples=len(b), cosine=cosine(a, b),
             max_abs=float(np.abs(a[:len(b)] - b[:len(a)]).max()) if len(a) and len(b) else None)
        a2 = cpu.synthesize(text, seed=11, **fixed).samples
        b2 = gpu.synthesize(text, seed=11, **fixed).samples
        emit(rows, model=path, check="seeded_cpu_vs_device", text=i, cosine=cosine(a2, b2),
             note="sampling noise is drawn on the CPU generator only if the family does so")
    # word timestamps (the attention read beside the step): the same audio with or without
    # them on the device, and the device's words against the CPU's
    for layout in ([{}] if fam == "pocket-tts" else
                   [{"non_streaming_mode": True}, {"non_streaming_mode": False}]):
        plain = gpu.synthesize(TEXTS[0], seed=7, **no_noise, **layout)
        timed = gpu.synthesize(TEXTS[0], seed=7, word_timestamps=True, **no_noise, **layout)
        ref = cpu.synthesize(TEXTS[0], seed=7, word_timestamps=True, **no_noise, **layout)
        same_words = [w.word for w in timed.words] == [w.word for w in ref.words]
        emit(rows, model=path, check="word_timestamps", layout=layout,
             audio_unchanged=bool(np.array_equal(plain.samples, timed.samples)),
             words=len(timed.words), same_words_as_cpu=same_words,
             max_abs_time_diff_s=max((abs(a.start - b.start) + abs(a.end - b.end)
                                      for a, b in zip(timed.words, ref.words)), default=None)
             if same_words else None)
    cpu.close()

    x1 = gpu.synthesize(TEXTS[0], seed=3, **fixed)
    x2 = gpu.synthesize(TEXTS[0], seed=3, **fixed)
    emit(rows, model=path, check="seeded_repeat", identical=bool(np.array_equal(x1.samples, x2.samples)),
         cosine=cosine(x1.samples, x2.samples))
    emit(rows, model=path, check="single_timing", ttfa_ms=round(x2.ttfa_ms, 1),
         wall_ms=round(x2.wall_ms, 1), audio_s=round(x2.duration_s, 3),
         x_real_time=round(x2.duration_s / (x2.wall_ms / 1000), 2))

    seeds = list(range(100, 108))
    solo = [gpu.synthesize(TEXTS[i % 2], seed=s, **fixed).samples for i, s in enumerate(seeds)]
    t0 = time.perf_counter()
    reqs = [gpu.submit(TEXTS[i % 2], seed=s, **fixed) for i, s in enumerate(seeds)]
    outs = []
    ttfas = []
    for r in reqs:
        pieces = [ev.samples for ev in r.events() if hasattr(ev, "samples")]
        outs.append(np.concatenate(pieces) if pieces else np.zeros(0, np.float32))
        ttfas.append(r.stats.ttfa_ms or 0.0)
    wall = time.perf_counter() - t0
    cos = [cosine(a, b) for a, b in zip(solo, outs)]
    emit(rows, model=path, check="batch8_vs_solo", min_cosine=min(cos),
         equal_lengths=all(len(a) == len(b) for a, b in zip(solo, outs)),
         aggregate_x_real_time=round(sum(len(o) for o in outs) / rate / wall, 2),
         median_ttfa_ms=round(float(np.median(ttfas)), 1))
    gpu.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows: list = []
    env = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available(),
           "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
           "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
           "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32}
    emit(rows, check="environment", **env)
    failed = 0
    for path in args.model:
        try:
            check_model(path, args.device, rows)
        except Exception as e:  # report and go on with the next checkpoint
            failed += 1
            emit(rows, model=path, check="error", error=f"{type(e).__name__}: {e}",
                 traceback=traceback.format_exc()[-3000:])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
