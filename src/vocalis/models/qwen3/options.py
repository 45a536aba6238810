"""Qwen3-TTS request options: names, types, ranges and help, in one schema.

Names and defaults are the official ``qwen-tts`` 0.1.1 ones (the keywords of
``Qwen3TTSModel.generate_custom_voice`` / ``generate_voice_design`` /
``generate_voice_clone`` and the checkpoint's ``generation_config.json``), plus
``greedy`` (argmax on both samplers) and ``max_frames`` (an explicit frame limit). The
official package checks none of these ranges; the bounds come from the model: the talker
vocabulary (3072), the codebook size (2048), the talker positions (32768).
"""

from __future__ import annotations

import numbers

import numpy as np

from vocalis.options import Option, OptionRange, OptionSchema

MAX_TEXT_TOKENS = 4096  # one prompt; the talker's positions (32768) bound prompt + frames
SAMPLER = ("temperature", "top_k", "top_p", "do_sample", "subtalker_temperature",
           "subtalker_top_k", "subtalker_top_p", "subtalker_dosample", "repetition_penalty",
           "max_new_tokens")  # the official generation keywords (GenerationParams.resolve)


def _r(name, lo, hi, **kw) -> OptionRange:
    return OptionRange(name, lo, hi, **kw)


OPTIONS = OptionSchema("Qwen3-TTS", (
    Option("speaker", str, "CustomVoice: built-in speaker (e.g. ryan, vivian; case-insensitive). "
           "Default: the model's first.", max_length=64, openai="voice"),
    Option("language", str, "Language of the text (english, chinese, ...; auto = detect). "
           "Default: auto.", max_length=64),
    Option("instruct", str, "VoiceDesign (required) and 1.7B CustomVoice: the voice or the way "
           "to speak, in words.", max_length=4096, openai="instructions"),
    Option("ref_audio", object, "Base: reference audio of the voice to clone (any format).",
           path=True, openai="voice"),
    Option("ref_text", str, "Base: transcript of the reference audio (in-context cloning).",
           max_length=4096, voice=True),
    Option("xvector_only", bool, "Base: clone from the speaker embedding only (no transcript).",
           flag="--xvector-only", voice=True),
    Option("non_streaming_mode", bool, "--whole-text puts all the text in the prompt first; "
           "--streaming-text feeds it along the frames (a shorter prompt pass, earlier audio). "
           "Default: the official method's.", flag="--whole-text/--streaming-text"),
    Option("greedy", bool, "Argmax instead of sampling, for the talker and the code predictor.",
           flag="--greedy"),
    Option("temperature", float, "Sampling temperature of the talker (default: the "
           "checkpoint's, 0.9).", _r("temperature", 0.0, 1e6, lo_open=True,
                                      why="> 0 (greedy is do_sample=False)")),
    Option("top_k", int, "Top-k of the talker, 0 = off (default: the checkpoint's, 50).",
           _r("top_k", 0, 3072, integer=True, why="0 = off; the talker vocabulary is 3072")),
    Option("top_p", float, "Top-p of the talker (default: the checkpoint's, 1.0).",
           _r("top_p", 0.0, 1.0, lo_open=True, why="nucleus mass")),
    Option("do_sample", bool, "Sample the talker (false: argmax). Default: the checkpoint's.",
           flag="--do-sample/--no-do-sample"),
    Option("repetition_penalty", float, "Repetition penalty over generated codebook-0 tokens "
           "(default 1.05).", _r("repetition_penalty", 0.0, 1e6, lo_open=True, why="> 0 (1 = off)")),
    Option("subtalker_temperature", float, "Sampling temperature of the code predictor.",
           _r("subtalker_temperature", 0.0, 1e6, lo_open=True, why="> 0")),
    Option("subtalker_top_k", int, "Top-k of the code predictor, 0 = off.",
           _r("subtalker_top_k", 0, 2048, integer=True, why="0 = off; 2048 codes per codebook")),
    Option("subtalker_top_p", float, "Top-p of the code predictor.",
           _r("subtalker_top_p", 0.0, 1.0, lo_open=True, why="nucleus mass")),
    Option("subtalker_dosample", bool, "Sample the code predictor (false: argmax).",
           flag="--subtalker-dosample/--no-subtalker-dosample"),
    Option("max_new_tokens", int, "The official length limit in tokens (frames = tokens - 1; "
           "default: the checkpoint's).", _r("max_new_tokens", 1, 32768, integer=True,
                                why="talker positions (32768)")),
    Option("max_frames", int, "Stop after at most this many 80 ms frames (replaces the "
           "runaway guard).", _r("max_frames", 1, 32767, integer=True, why="frames (80 ms each)")),
))

LOAD_OPTIONS = OptionSchema("Qwen3-TTS", (
    Option("dtype", str, "Compute dtype of the talker (the codec stays float32).",
           choices=("float32", "bfloat16"), default="float32"),
    Option("full_state_decode", bool, "Decode long utterances in one causal pass instead of "
           "the official 300/25-frame chunks.", flag="--full-state-decode"),
))

RANDOM_OPTIONS = OptionSchema("Qwen3-TTS", (
    Option("tiny", bool, "Toy sizes with the same structure (for tests).", flag="--tiny"),
))

def is_audio_array(src) -> bool:
    """``(samples, sample_rate)``, as the official package accepts reference audio
    (``ref_audio``) besides a file."""
    return (isinstance(src, tuple) and len(src) == 2 and isinstance(src[0], np.ndarray)
            and isinstance(src[1], numbers.Integral) and not isinstance(src[1], bool))


__all__ = ["LOAD_OPTIONS", "MAX_TEXT_TOKENS", "OPTIONS", "RANDOM_OPTIONS", "SAMPLER",
           "is_audio_array"]
