"""First audio of a text streamed in as a language model writes it (``TTS.open_text``).

Usage::

    python scripts/text_feed_ttfa.py --model CKPT [--quantize int8] [--rate 30] [--runs 5]

Pushes a reply word by word at ``--rate`` tokens per second (a word with its trailing space
counts as one token here) and reports, per run: the time from the first push to the first
audio chunk (ms), whether the audio ever fell behind real time after it started (underrun
count: an audio chunk that came later than the audio before it had taken to play), and
the real-time factor. The same reply given whole (``synthesize(non_streaming_mode=False)``)
is timed in the same run for comparison, and its codes are compared with the streamed ones.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import vocalis
from vocalis.engine.types import AudioChunk

REPLY = ("Sure, I can help with that. The train to the airport leaves every twenty minutes "
         "from platform four, and the ride takes about half an hour.")


def run_once(tts, rate: float, seed: int, opts: dict) -> dict:
    words = [w + " " for w in REPLY.split(" ")]
    words[-1] = words[-1].rstrip()
    req = tts.open_text(seed=seed, **opts)
    first_audio: list[float] = []
    arrivals: list[tuple[float, int]] = []
    started = threading.Event()

    def reader():
        started.wait()
        for ev in req.events(timeout=120):
            if isinstance(ev, AudioChunk):
                now = time.perf_counter()
                if not first_audio:
                    first_audio.append(now)
                arrivals.append((now, ev.samples.shape[0]))

    t = threading.Thread(target=reader)
    t.start()
    t0 = time.perf_counter()
    for i, w in enumerate(words):
        req.push(w)
        if req.request is not None:
            started.set()
        time.sleep(max(0.0, t0 + (i + 1) / rate - time.perf_counter()))
    req.close()
    started.set()
    t.join()
    # underruns: a chunk that arrives after the audio before it has finished playing
    sr = tts.sample_rate
    play_end, underruns = None, 0
    for when, n in arrivals:
        if play_end is not None and when > play_end:
            underruns += 1
            play_end = when
        play_end = (when if play_end is None else play_end) + n / sr
    audio_s = sum(n for _, n in arrivals) / sr
    return {"ttfa_ms": (first_audio[0] - t0) * 1000, "underruns": underruns,
            "audio_s": audio_s, "codes": req.request.stats.chunks[0]["codes"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--quantize", default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rate", type=float, default=30.0, help="words per second pushed")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--speaker", default="ryan")
    ap.add_argument("--max-frames", type=int, default=None)
    args = ap.parse_args()
    tts = vocalis.load(args.model, quantize=args.quantize, threads=args.threads)
    opts = {"speaker": args.speaker}
    if args.max_frames:
        opts["max_frames"] = args.max_frames
    run_once(tts, args.rate, 0, opts)  # warm-up
    rows = [run_once(tts, args.rate, 1, opts) for _ in range(args.runs)]
    whole = tts.synthesize(REPLY, seed=1, non_streaming_mode=False, **opts)
    same = all(r["codes"] == whole.chunks[0]["codes"] for r in rows)
    ttfa = [r["ttfa_ms"] for r in rows]
    print(f"streamed text, {args.rate:g} words/s: first audio {statistics.median(ttfa):.0f} ms "
          f"median ({min(ttfa):.0f}-{max(ttfa):.0f}) after the first word; underruns "
          f"{[r['underruns'] for r in rows]}; audio {rows[0]['audio_s']:.2f} s")
    print(f"whole text at once: first audio {whole.ttfa_ms:.0f} ms; codes equal to the "
          f"streamed runs: {same}")
    tts.close()


if __name__ == "__main__":
    main()
