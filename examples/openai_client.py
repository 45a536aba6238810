"""vocalis serve through the official `openai` client: a streamed file and a whole file.

    vocalis serve --model pocket-tts                     # in another shell
    python examples/openai_client.py                     # writes hello-streamed.wav, hello.flac

`--base-url` points at another server, `--api-key` is its `--api-key` (any text without
one), `--voice` a voice of `GET /v1/audio/voices`.
"""

from __future__ import annotations

import argparse
import sys

from openai import APIConnectionError, OpenAI, OpenAIError


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--api-key", default="unused")
    ap.add_argument("--model", default="pocket-tts", help="a model id of GET /v1/models")
    ap.add_argument("--voice", default="alba")
    ap.add_argument("--text", default="Hello from vocalis, through the OpenAI client.")
    ap.add_argument("--prefix", default="hello", help="output files: PREFIX-streamed.wav, PREFIX.flac")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--max-frames", type=int, default=None,
                    help="vocalis extension: fixed frames per text chunk (random-weight models)")
    args = ap.parse_args()
    # fields beyond OpenAI's schema go in extra_body
    extra = {"seed": args.seed}
    if args.max_frames is not None:
        extra["max_frames"] = args.max_frames

    try:
        speak(args, extra)
    except APIConnectionError as e:  # nothing answers there
        sys.exit(f"error: {e} ({args.base_url}: is `vocalis serve` running there?)")
    except OpenAIError as e:  # a refused request: vocalis's message, in one line
        sys.exit(f"error: {' '.join(str(e).split())}")


def speak(args: argparse.Namespace, extra: dict) -> None:
    client = OpenAI(base_url=args.base_url, api_key=args.api_key)
    print("models:", [m.id for m in client.models.list()])

    # Streamed: the first bytes leave the server with the first audio. A streamed WAV
    # cannot know its length, so its header carries the "unknown length" sizes.
    with client.audio.speech.with_streaming_response.create(
            model=args.model, voice=args.voice, input=args.text, response_format="wav",
            extra_body=extra) as response:
        response.stream_to_file(f"{args.prefix}-streamed.wav")
    print(f"wrote {args.prefix}-streamed.wav")

    # Whole file: sent when generation ends, with exact lengths (FLAC with its sample count).
    audio = client.audio.speech.create(model=args.model, voice=args.voice, input=args.text,
                                       response_format="flac", extra_body=extra)
    audio.write_to_file(f"{args.prefix}.flac")
    print(f"wrote {args.prefix}.flac")


if __name__ == "__main__":
    main()
