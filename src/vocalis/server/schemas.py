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
    is checked in the route), ``voice``, ``instructions`` (used by models that take a voice
    description or style instruction, e.g. Qwen3-TTS VoiceDesign and 1.7B CustomVoice;
    other models ignore it and the response says so in ``x-vocalis-instructions``),
    ``response_format``, ``speed`` (0.25-4.0: pitch-preserving time-stretch with Rubber
    Band, streamed chunk by chunk; 1.0 leaves the audio untouched), ``stream_format``.
    ``stream`` (sent by several OpenAI-style clients): ``true`` streams the audio as it is
    generated (headers with unknown lengths), ``false`` answers one whole file with exact
    lengths; absent: see :func:`vocalis.server.app._whole_file`.

    Extensions (vocalis): ``seed``; ``normalize`` (read numbers, dates, money, units and
    abbreviations as words; default: the server's setting); and the request options of the
    model's family, with their official names (``GET /health``: ``models[].options``;
    Pocket TTS ``temperature``, ``eos_threshold``...; Qwen3-TTS ``language``, ``top_k``,
    ``non_streaming_mode``...). The family's schema checks them (400 naming the field); a
    field no schema declares is refused (400 ``unknown_parameter``), so typos do not pass
    silently.
    """

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=512)
    input: str
    voice: str | VoiceRef
    instructions: str | None = Field(default=None, max_length=OPENAI_MAX_INPUT_CHARS)
    response_format: ResponseFormat = "mp3"
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    stream_format: Literal["audio", "sse"] = "audio"
    stream: bool | None = None
    # the range is checked once for every front end (vocalis.options.check_seed)
    seed: int | None = None
    # absent = the server's default (on unless `vocalis serve --no-normalize`)
    normalize: StrictBool | None = None

    def voice_id(self) -> str:
        return self.voice.id if isinstance(self.voice, VoiceRef) else self.voice

    def options(self) -> dict:
        """The model-family options the request carries (every field beyond OpenAI's and
        vocalis's own), for the family's schema to check."""
        return {k: v for k, v in (self.model_extra or {}).items() if v is not None}
