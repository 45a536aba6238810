"""Request bodies: OpenAI's ``CreateSpeechRequest`` plus vocalis sampling extensions."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

OPENAI_MAX_INPUT_CHARS = 4096

ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]


class VoiceRef(BaseModel):
    """A voice given as an object, as OpenAI's custom voices are: ``{"id": "my_voice"}``."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=256)


class SpeechRequest(BaseModel):
    """``POST /v1/audio/speech``.

    OpenAI fields: ``model``, ``input`` (the server's ``--max-input-chars``, 4096 by default,
    is checked in the route), ``voice``, ``instructions`` (Qwen3-TTS VoiceDesign and 1.7B
    CustomVoice: the ``instruct`` text; other models ignore it and the response says so in
    ``x-vocalis-instructions``),
    ``response_format``, ``speed`` (0.25-4.0: pitch-preserving time-stretch with Rubber
    Band, streamed chunk by chunk; 1.0 leaves the audio untouched), ``stream_format``.
    ``stream`` (sent by several OpenAI-style clients): ``true`` streams the audio as it is
    generated (headers with unknown lengths), ``false`` answers one whole file with exact
    lengths; absent: see :func:`vocalis.server.app._whole_file`.

    Extensions (vocalis): ``seed`` and the sampling options of :func:`vocalis.load`'s
    ``submit``; ``max_frames`` fixes the length of each text chunk (Pocket, benchmarks) or
    caps it (Qwen3); Qwen3-TTS: ``language`` (default ``auto``), ``top_k``, ``top_p``,
    ``repetition_penalty``, ``max_new_tokens``, ``greedy``, ``non_streaming_mode`` (false:
    the text is fed along the frames, a shorter prompt pass and an earlier first chunk; true:
    the whole text in the prompt; default: the official method's). ``normalize``: read numbers,
    dates, money, units and abbreviations as words (default: the server's setting).
    Unknown fields are refused (400), as OpenAI does, so typos do not pass silently.
    """

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, max_length=512)
    input: str
    voice: str | VoiceRef
    instructions: str | None = Field(default=None, max_length=OPENAI_MAX_INPUT_CHARS)
    response_format: ResponseFormat = "mp3"
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    stream_format: Literal["audio", "sse"] = "audio"
    stream: bool | None = None

    # Types only: the ranges are checked by the engine's one table (vocalis.engine.options,
    # README "Valid ranges"), which answers 400 naming the option, as for API and CLI.
    seed: int | None = None
    temperature: float | None = None
    eos_threshold: float | None = None
    frames_after_eos: int | None = None
    noise_clamp: float | None = None
    sampler_decode_steps: int | None = None
    max_tokens: int | None = None
    max_frames: int | None = None
    # Qwen3-TTS (a Pocket model answers 400 naming the option)
    language: str | None = Field(default=None, max_length=64)
    top_k: int | None = None
    top_p: float | None = None
    repetition_penalty: float | None = None
    max_new_tokens: int | None = None
    greedy: StrictBool | None = None
    non_streaming_mode: StrictBool | None = None
    # Text normalization (vocalis.text.normalize): absent = the server's default (on unless
    # `vocalis serve --no-normalize`)
    normalize: StrictBool | None = None

    def voice_id(self) -> str:
        return self.voice.id if isinstance(self.voice, VoiceRef) else self.voice

    def sampling(self) -> dict:
        """The sampling options that were given (``seed`` excluded)."""
        names = ("temperature", "eos_threshold", "frames_after_eos", "noise_clamp",
                 "sampler_decode_steps", "max_tokens", "max_frames", "language", "top_k", "top_p",
                 "repetition_penalty", "max_new_tokens", "greedy", "non_streaming_mode")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}
