"""Pocket TTS request options: names, types, ranges and help, in one schema.

Names and defaults are the official ``pocket-tts`` 4.0.1 ones (``TTSModel.generate_audio``
keywords and config defaults), plus ``max_frames`` (a fixed length per text chunk, for
benchmarks on random weights).

Why the ranges: latents are normalized to unit variance and the noise is N(0,
temperature) in float32. The widest norms (LayerNorm, RMSNorm) square and sum at most 4096
features, so every activation must stay below sqrt(FLT_MAX / 4096) ~ 2.9e17. With
temperature <= 1e6 the noise std is <= 1e3 and its draws stay below ~1e4 (9 sigma), which
leaves a gain headroom of ~1e13 for the layers in between; past that the audio is clipped
noise anyway. A value the noise cannot represent (1e300 -> inf) would poison the batch.
EOS and clamp thresholds are compared with float32 values, so any float32-representable
number is meaningful. Step counts bound the work of one frame (each sampler step is a
flow-net pass for its rows; 64 is ~30x a FlowLM step).
"""

from __future__ import annotations

from vocalis.options import FLT_MAX, Option, OptionRange, OptionSchema

MAX_FRAMES = 10_000  # frames of one text chunk (800 s): a bound for fixed-length requests

OPTIONS = OptionSchema("Pocket TTS", (
    Option("temperature", float, "Noise variance of the flow sampler (official default 0.3; "
           "0 = no noise).", OptionRange("temperature", 0.0, 1e6,
                                          why="std <= 1e3 keeps every activation in float32")),
    Option("eos_threshold", float, "End of speech when the EOS logit is above this (default: "
           "the config's).", OptionRange("eos_threshold", -FLT_MAX, FLT_MAX,
                                          why="compared with a float32 logit")),
    Option("frames_after_eos", int, "Frames kept after end of speech (default: from the text "
           "length).", OptionRange("frames_after_eos", 0, MAX_FRAMES, integer=True,
                                   why="10000 frames = 800 s")),
    Option("noise_clamp", float, "Clamp the sampling noise to +-this (default: no clamp).",
           OptionRange("noise_clamp", 0.0, FLT_MAX, lo_open=True, why="a float32 bound")),
    Option("sampler_decode_steps", int, "Flow sampler steps per frame (default 1).",
           OptionRange("sampler_decode_steps", 1, 64, integer=True,
                       why="64 steps cost ~30 FlowLM steps")),
    Option("max_tokens", int, "Most tokens per text chunk (default 50).",
           OptionRange("max_tokens", 1, 1000, integer=True, why="chunk size in tokens")),
    Option("max_frames", int, "Ignore end of speech: exactly this many 80 ms frames per text "
           "chunk (benchmarks).", OptionRange("max_frames", 1, MAX_FRAMES, integer=True,
                                              why="10000 frames = 800 s")),
))

__all__ = ["MAX_FRAMES", "OPTIONS"]
