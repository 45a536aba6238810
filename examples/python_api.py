"""vocalis from Python: one whole utterance, then the same text streamed chunk by chunk.

    python examples/python_api.py                                 # released Pocket TTS, voice alba
    python examples/python_api.py --model ckpt --voice ckpt/voice.wav   # a local checkpoint

A random-weight checkpoint (`vocalis models random --config english_2m_2026-10 --out ckpt`)
runs it offline; it speaks noise, not words. Whatever vocalis refuses (a model not in the
cache while offline, an unknown voice, a bad option) is a `vocalis.VocalisError` whose
message says what to do: printed as one line, exit code 1.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import vocalis
from vocalis.audio import write_wav


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="pocket-tts", help="model id, checkpoint folder or YAML")
    ap.add_argument("--voice", default="alba", help="predefined voice, audio file or .safetensors")
    ap.add_argument("--text", default="Hello from vocalis.")
    ap.add_argument("--out", default="hello.wav", help="WAV file for the whole utterance")
    ap.add_argument("--max-frames", type=int, default=None,
                    help="fixed frames per text chunk (random weights may never stop)")
    args = ap.parse_args()
    try:
        speak(args)
    except vocalis.VocalisError as e:                    # the base class of vocalis's errors
        sys.exit(f"error: {e}")                          # one line on stderr, exit code 1


def speak(args: argparse.Namespace) -> None:
    options = {} if args.max_frames is None else {"max_frames": args.max_frames}
    with vocalis.load(args.model) as tts:                # stops the engine's threads at the end
        voice = tts.voice(args.voice)                    # cloned or loaded once, reused below

        audio = tts.synthesize(args.text, voice=voice, seed=42, **options)
        write_wav(args.out, audio.samples, audio.sample_rate)
        print(f"{args.out}: {len(audio.samples) / audio.sample_rate:.2f} s of audio, "
              f"first audio after {audio.ttfa_ms:.0f} ms")

        # the same request streamed: float32 chunks of 1920 samples (80 ms) as they are made
        chunks = list(tts.stream(args.text, voice=voice, seed=42, **options))
        streamed = np.concatenate(chunks)
        print(f"streamed {len(chunks)} chunks, {len(streamed)} samples")

        try:
            tts.synthesize("", voice=voice)
        except vocalis.InputError as e:                  # a VocalisError, as every refusal
            print(f"refused as expected: {e}")


if __name__ == "__main__":
    main()
