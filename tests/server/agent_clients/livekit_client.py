"""LiveKit Agents' ElevenLabs plugin (``livekit-plugins-elevenlabs``), unchanged, pointed at
a vocalis server: it streams the text pieces given, reads the audio frames and the timed
words (its aligned transcript), and prints one JSON line.

    python livekit_client.py BASE_URL VOICE [--interrupt-after N] PIECE...

``--interrupt-after N``: close the stream after N audio frames (a barge-in).
"""

from __future__ import annotations

import argparse
import asyncio
import json

import aiohttp
from livekit.plugins import elevenlabs


async def main(args) -> dict:
    async with aiohttp.ClientSession() as session:
        tts = elevenlabs.TTS(voice_id=args.voice, api_key="unused", base_url=args.base_url,
                             encoding="pcm_24000", http_session=session)
        stream = tts.stream()
        for piece in args.pieces:
            stream.push_text(piece)
        stream.flush()
        stream.end_input()
        out = {"samples": 0, "sample_rate": None, "frames": 0, "words": [],
               "interrupted": False}
        async for ev in stream:
            frame = ev.frame
            out["samples"] += frame.samples_per_channel
            out["sample_rate"] = frame.sample_rate
            out["frames"] += 1
            for word in frame.userdata.get("lk.timed_transcripts", []) or []:
                out["words"].append([str(word), word.start_time, word.end_time])
            if args.interrupt_after and out["frames"] >= args.interrupt_after:
                out["interrupted"] = True
                break
        await stream.aclose()
        await tts.aclose()
        return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("base_url")
    ap.add_argument("voice")
    ap.add_argument("--interrupt-after", type=int, default=0)
    ap.add_argument("pieces", nargs="+")
    print(json.dumps(asyncio.run(main(ap.parse_args()))))
