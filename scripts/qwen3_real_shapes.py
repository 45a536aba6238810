"""One generation per Qwen3-TTS variant at real shapes (random weights): load time, wall time.

    for m in 0.6b-customvoice 0.6b-base 1.7b-customvoice 1.7b-voicedesign 1.7b-base; do
        vocalis models random --config qwen3-tts/$m --out ROOT/$m; done
    python scripts/qwen3_real_shapes.py ROOT [FRAMES]

Prints one JSON line per variant (fp32, 2 threads, after a 3-frame warm-up) and writes
ROOT/real_shapes.json. Random weights rarely emit EOS, so each run has FRAMES frames.
"""
import json, sys, time
import numpy as np, soundfile as sf
import vocalis
t = np.arange(24000 * 4) / 24000
ref = (0.3 * np.sin(2 * np.pi * 150 * t) * (1 + np.sin(2 * np.pi * 3 * t)) + 0.01 * np.random.default_rng(0).standard_normal(t.shape)).astype(np.float32)
ROOT = sys.argv[1]
REF = f"{ROOT}/ref4s.wav"
sf.write(REF, ref, 24000)
TEXT = "The quick brown fox jumps over the lazy dog."
F = int(sys.argv[2]) if len(sys.argv) > 2 else 6
runs = [(f"{ROOT}/0.6b-customvoice", dict(speaker="ryan", language="english")),
        (f"{ROOT}/0.6b-base", dict(ref_audio=REF, ref_text="A reference sentence.", language="english")),
        (f"{ROOT}/1.7b-customvoice", dict(speaker="vivian", language="english", instruct="Speak slowly.")),
        (f"{ROOT}/1.7b-voicedesign", dict(instruct="A calm low voice.", language="english")),
        (f"{ROOT}/1.7b-base", dict(ref_audio=REF, xvector_only=True, language="english"))]
out = []
for d, kw in runs:
    t0 = time.perf_counter()
    tts = vocalis.load(d, threads=2)
    load_s = time.perf_counter() - t0
    tts.synthesize("Warm up.", max_new_tokens=3, seed=0, **kw)
    t0 = time.perf_counter()
    a = tts.synthesize(TEXT, max_new_tokens=F + 1, seed=1, **kw)
    wall = time.perf_counter() - t0
    n = len(a.chunks[0]["codes"])
    r = dict(model=d, mode=kw, load_s=round(load_s, 1), frames=n, wall_s=round(wall, 2),
             ms_per_frame=round(wall / n * 1000), ttfa_ms=round(a.ttfa_ms), x_real_time=round(n * 0.08 / wall, 3),
             finite=bool(np.isfinite(a.samples).all()))
    print(json.dumps(r), flush=True)
    out.append(r)
    tts.close(); del tts
json.dump(out, open(f"{ROOT}/real_shapes.json", "w"), indent=1)
