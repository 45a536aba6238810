"""Voice-agent load on a running ``vocalis serve``: N WebSocket connections at once, each
sending a reply word by word as a language model would, over ``/v1/audio/speech/stream``.

Usage::

    vocalis serve --model MODEL ... &
    python scripts/ws_agents.py --url ws://127.0.0.1:8000/v1/audio/speech/stream \\
        --clients 8 --rate 30 --granularity sentence [--voice V] [--cancel-after 1.0]

Per connection it reports: the first audio after the first text (ms) and, in ``sentence``
mode, after the first sentence's end (the text that completes it); underruns (audio that
came after the audio before it had finished playing, counted from the first audio on:
0 means the listener never heard a gap), their total length and where they came (``at_s``:
seconds of audio already received), and the underruns of a player
that keeps a playout buffer of ``--buffer-ms`` (100 ms by default: it starts that long
after the first audio); and with ``--cancel-after S``, the time from
``input.cancel`` (sent S seconds after the first audio) to its ``session.done``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

REPLY = ("Sure, I can help with that. The train to the airport leaves every twenty minutes "
         "from platform four. The ride takes about half an hour, and tickets are sold on "
         "board. Do you want me to check the next departure for you?")


async def agent(args, index: int) -> dict:
    from websockets.asyncio.client import connect

    config = {"type": "session.config", "response_format": "pcm", "stream_audio": True,
              "split_granularity": args.granularity, "seed": index}
    if args.voice:
        config["voice"] = args.voice
    if args.max_frames:  # random weights end early: a fixed length per sentence (Pocket)
        config["max_frames"] = args.max_frames
    words = [w + " " for w in REPLY.split(" ")]
    rate_hz = None
    out = {"first_audio_ms": None, "after_sentence_ms": None, "underruns": 0,
           "underruns_buffered": 0, "gap_ms": 0.0, "cancel_ms": None, "audio_s": 0.0,
           "at_s": []}
    buffered_end = None  # the same playback started args.buffer_ms after the first audio
    async with connect(args.url, max_size=None) as ws:
        await ws.send(json.dumps(config))
        t0 = time.perf_counter()
        sentence_end_t = None

        async def send():
            nonlocal sentence_end_t
            for i, w in enumerate(words):
                await ws.send(json.dumps({"type": "input.text", "text": w}))
                if sentence_end_t is None and w.rstrip().endswith("."):
                    sentence_end_t = time.perf_counter()
                await asyncio.sleep(max(0.0, t0 + (i + 1) / args.rate - time.perf_counter()))
            await ws.send(json.dumps({"type": "input.done"}))

        sender = asyncio.create_task(send())
        play_end = None
        cancel_sent = None
        while True:
            msg = await asyncio.wait_for(ws.recv(), 300)
            now = time.perf_counter()
            if isinstance(msg, bytes):
                n = len(msg) // 2
                if out["first_audio_ms"] is None:
                    out["first_audio_ms"] = (now - t0) * 1000
                    if sentence_end_t is not None:
                        out["after_sentence_ms"] = (now - sentence_end_t) * 1000
                if play_end is not None and now > play_end:
                    out["underruns"] += 1
                    out["gap_ms"] += (now - play_end) * 1000
                    out["at_s"].append(round(out["audio_s"], 2))
                    play_end = now
                play_end = (now if play_end is None else play_end) + n / (rate_hz or 24000)
                if buffered_end is not None and now > buffered_end:
                    out["underruns_buffered"] += 1
                    buffered_end = now
                buffered_end = (now + args.buffer_ms / 1000 if buffered_end is None
                                else buffered_end) + n / (rate_hz or 24000)
                out["audio_s"] += n / (rate_hz or 24000)
                if args.cancel_after and cancel_sent is None and \
                        now - t0 - out["first_audio_ms"] / 1000 >= args.cancel_after:
                    sender.cancel()
                    await ws.send(json.dumps({"type": "input.cancel"}))
                    cancel_sent = time.perf_counter()
                continue
            ev = json.loads(msg)
            if ev["type"] == "audio.start":
                rate_hz = ev.get("sample_rate") or rate_hz
            elif ev["type"] == "error":
                out["error"] = ev["message"]
            elif ev["type"] == "session.done":
                if cancel_sent is not None:
                    out["cancel_ms"] = (time.perf_counter() - cancel_sent) * 1000
                if ev.get("cancelled") or sender.done():
                    break
        sender.cancel()
    return out


async def main_async(args) -> list[dict]:
    return await asyncio.gather(*(agent(args, i) for i in range(args.clients)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="ws://127.0.0.1:8000/v1/audio/speech/stream")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--rate", type=float, default=30.0, help="words per second per client")
    ap.add_argument("--granularity", default="sentence", choices=("sentence", "token", "none"))
    ap.add_argument("--voice", default=None)
    ap.add_argument("--cancel-after", type=float, default=None, metavar="S")
    ap.add_argument("--buffer-ms", type=float, default=100.0, metavar="MS",
                    help="also count underruns of a player that starts MS after the first "
                         "audio (a playout buffer, as WebRTC and browser players keep)")
    ap.add_argument("--max-frames", type=int, default=None, metavar="N",
                    help="the model's max_frames option: N frames per sentence (random weights)")
    args = ap.parse_args()
    rows = asyncio.run(main_async(args))
    for i, r in enumerate(rows):
        print(i, {k: (round(v, 1) if isinstance(v, float) else v) for k, v in r.items()})
    first = [r["first_audio_ms"] for r in rows if r["first_audio_ms"] is not None]
    print(f"{args.clients} client(s), {args.granularity}, {args.rate:g} words/s: first audio "
          f"median {statistics.median(first):.0f} ms after the first text"
          + (f", {statistics.median([r['after_sentence_ms'] for r in rows if r['after_sentence_ms'] is not None]):.0f} ms after the first sentence's end"
             if any(r["after_sentence_ms"] is not None for r in rows) else "")
          + f"; underruns {[r['underruns'] for r in rows]} (gaps "
            f"{[round(r['gap_ms']) for r in rows]} ms), with a {args.buffer_ms:g} ms playout "
            f"buffer {[r['underruns_buffered'] for r in rows]}"
          + (f"; cancel to session.done {[round(r['cancel_ms']) for r in rows if r['cancel_ms']]} ms"
             if args.cancel_after else ""))


if __name__ == "__main__":
    main()
