"""A burst of N requests submitted at the same moment against a lone request, through the
Python API: first-audio (TTFA) p50/p95 as multiples of the lone request's, the first
request's TTFA, and the aggregate x real time, for each admission group size (0: every
request that fits, in one prompt pass; the engine's choice is restored at the end).

    python scripts/burst_ttfa.py CKPT GROUPS [N] [REPS]
    python scripts/burst_ttfa.py ckpt 3,0 16 2

CKPT: a Pocket TTS checkpoint folder with a voice.wav (random weights: the requests have
fixed lengths, 30 to 30 + 3 (N - 1) frames); two voices (the file and its first two thirds),
five texts, seeds 100 + i."""
import os
import statistics
import sys
import tempfile
import threading
import time

import numpy as np
import soundfile as sf

import vocalis

ckpt, groups = sys.argv[1], [int(g) for g in sys.argv[2].split(",")]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 16
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 2
tts = vocalis.load(ckpt, max_batch=N)
wav, sr = sf.read(f"{ckpt}/voice.wav", dtype="float32")
voice2 = os.path.join(tempfile.mkdtemp(), "voice2.wav")
sf.write(voice2, wav[: len(wav) * 2 // 3], sr)
voices = [tts.voice(f"{ckpt}/voice.wav"), tts.voice(voice2)]
TEXTS = ["Hello there, how are you doing today?", "The quick brown fox jumps over the lazy dog.",
         "One more sentence for the test.", "Short.", "A longer sentence that goes on for a while."]

def run(reqs):
    def drain(r):
        for _ in r.events():
            pass
    ts = [threading.Thread(target=drain, args=(r,)) for r in reqs]
    for t in ts: t.start()
    for t in ts: t.join()

def lone():
    r = tts.submit(TEXTS[0], voices[0], 1, max_frames=30)
    run([r]); return r.stats.ttfa_ms

for _ in range(3): lone()
lone_ttfa = statistics.median([lone() for _ in range(5)])
print(f"lone TTFA {lone_ttfa:.1f} ms")
own = tts.engine.admit_group
for g in groups:
    tts.engine.admit_group = g
    for rep in range(reps):
        t0 = time.perf_counter()
        reqs = [tts.submit(TEXTS[i % 5], voices[i % 2], 100 + i, max_frames=30 + 3 * i) for i in range(N)]
        run(reqs)
        wall = time.perf_counter() - t0
        tt = sorted(r.stats.ttfa_ms for r in reqs)
        audio = sum(r.stats.audio_s for r in reqs)
        p50, p95 = np.percentile(tt, 50), np.percentile(tt, 95)
        print(f"group {g:2d}: p50 {p50:6.0f} ms ({p50/lone_ttfa:4.1f}x) p95 {p95:6.0f} ms ({p95/lone_ttfa:4.1f}x) "
              f"first {tt[0]:5.0f} aggregate {audio/wall:5.2f}x RT wall {wall:.2f}s", flush=True)
tts.engine.admit_group = own
tts.close()
