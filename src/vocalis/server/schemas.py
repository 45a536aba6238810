"""Request bodies: OpenAI's ``CreateSpeechRequest`` plus vocalis sampling extensions."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import (AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool,
                      ValidationInfo)
from pydantic_core import PydanticCustomError

from vocalis.audio.stretch import SPEED_RANGE
from vocalis.options import not_finite_message

OPENAI_MAX_INPUT_CHARS = 4096

ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]


def _no_bool(integer: bool):
    """A validator refusing JSON ``true``/``false`` where a number belongs, naming the field
    (pydantic would read them as 1 and 0); an integer stays a valid float."""

    def check(value, info: ValidationInfo):
        if isinstance(value, bool):
            raise PydanticCustomError("int_type" if integer else "float_type",
                                      f"{info.field_name} must be "
                                      f"{'an integer' if integer else 'a number'}, "
                                      "not true or false")
        return value

    return check


_not_bool_int = _no_bool(integer=True)
_not_bool_float = _no_bool(integer=False)


def _seed_integer(value, info: ValidationInfo):
    """A JSON integer only, as the Python API takes (``vocalis.options.check_seed``): not
    ``true``/``false``, not a string of digits (``"7"``), not a number with a fraction or an
    exponent (``7.0``, ``1e3``), which pydantic would otherwise turn into ints."""
    _not_bool_int(value, info)
    if isinstance(value, str | float):
        got = "a string" if isinstance(value, str) else "a number with a fraction or an exponent"
        raise PydanticCustomError("int_type", f"{info.field_name} must be an integer, not "
                                              f"{got}; leave it out for a random one")
    return value


#: ``seed`` of every request body: JSON integers only (the range is checked once for every
#: front end: vocalis.options.check_seed)
Seed = Annotated[int | None, BeforeValidator(_seed_integer)]


def _finite_speed(value, info: ValidationInfo):
    """NaN and infinities (JSON ``NaN``, ``Infinity``, or the strings) are refused in plain
    words, before the range check would call them "greater than 4"; so are booleans."""
    _not_bool_float(value, info)
    if isinstance(value, (float, str)):
        try:
            finite = math.isfinite(float(value))
        except ValueError:
            return value  # not a number at all: the float type says so
        if not finite:
            raise PydanticCustomError("finite_number", not_finite_message(SPEED_RANGE))
    return value


#: ``speed`` of every request body: OpenAI's range (vocalis.audio.stretch.SPEED_RANGE)
#: (the validator wraps the float with its bounds: it runs first, the schema keeps the range)
Speed = Annotated[float, Field(ge=SPEED_RANGE.lo, le=SPEED_RANGE.hi),
                  BeforeValidator(_finite_speed)]


class VoiceRef(BaseModel):
    """A voice given as an object, as OpenAI's custom voices are: ``{"id": "my_voice"}``."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=256)


class SpeechRequest(BaseModel):
    """``POST /v1/audio/speech``.

    OpenAI fields: ``model``, ``input`` (the server's ``--max-input-chars``, 4096 by default,
    is checked in the route), ``voice`` (absent: the server's default voice; OpenAI requires
    it), ``instructions`` (used by models that take a voice
    description or style instruction, e.g. Qwen3-TTS VoiceDesign and 1.7B CustomVoice;
    other models ignore it and the response says so in ``x-vocalis-instructions``),
    ``response_format``, ``speed`` (0.25-4.0: pitch-preserving time-stretch with Rubber
    Band, streamed chunk by chunk; 1.0 leaves the audio untouched), ``stream_format``.
    ``stream`` (sent by several OpenAI-style clients): ``true`` streams the audio as it is
    generated (headers with unknown lengths), ``false`` answers one whole file with exact
    lengths; absent: see :func:`vocalis.server.app._whole_file`.

    Extensions (vocalis): ``seed``; ``normalize`` (read numbers, dates, money, units and
    abbreviations as words; default: the server's setting); ``word_timestamps`` (each
    word's start and end: on the SSE events, or in the ``x-vocalis-word-timestamps`` header
    of a whole file; a raw audio stream cannot carry them); and the request options of the
    model's family, with their official names (``GET /health``: ``models[].options``;
    Pocket TTS ``temperature``, ``eos_threshold``...; Qwen3-TTS ``language``, ``top_k``,
    ``non_streaming_mode``...). The family's schema checks them (400 naming the field); a
    field no schema declares is refused (400 ``unknown_parameter``), so typos do not pass
    silently.
    """

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=512)
    input: str
    # absent: the server's default voice (/health: default_voice), as on the WebSocket
    voice: str | VoiceRef | None = None
    instructions: str | None = Field(default=None, max_length=OPENAI_MAX_INPUT_CHARS)
    response_format: ResponseFormat = "mp3"
    speed: Speed = 1.0
    stream_format: Literal["audio", "sse"] = "audio"
    stream: bool | None = None
    # the range is checked once for every front end (vocalis.options.check_seed)
    seed: Seed = None
    # absent = the server's default (on unless `vocalis serve --no-normalize`)
    normalize: StrictBool | None = None
    # word start/end times (vocalis.timing): SSE events, or a whole file's header
    word_timestamps: StrictBool = False

    def voice_id(self) -> str | None:
        """The voice's id; None when the request names none (the server's default)."""
        return self.voice.id if isinstance(self.voice, VoiceRef) else self.voice

    def options(self) -> dict:
        """The model-family options the request carries (every field beyond OpenAI's and
        vocalis's own), for the family's schema to check."""
        return {k: v for k, v in (self.model_extra or {}).items() if v is not None}


# ---------------------------------------------------------------------- WebSocket messages
# /v1/audio/speech/stream speaks vLLM-Omni's streaming-text protocol (see
# vocalis.server.stream): these are its client messages, as vLLM-Omni names them.


class StreamSessionConfig(BaseModel):
    """``{"type": "session.config", ...}``: how the utterances that follow are spoken.

    vLLM-Omni's fields: ``model`` (default: the server's first model), ``voice`` (or
    ``speaker``), ``task_type`` (checked against the served model), ``language``,
    ``instructions``, ``response_format`` (default ``wav``), ``speed``, ``stream_audio``
    (PCM chunks as they are decoded; needs ``response_format`` ``pcm``), ``seed`` (every
    sentence uses it), ``split_granularity`` (``none``: one request per ``input.done``;
    ``sentence``: one per sentence as soon as it is complete; ``token``, a vocalis
    extension: one request per utterance that takes the text as it comes, on models that
    take streamed text), ``word_timestamps`` (each sentence's words with their times, in
    ``audio.words`` messages), ``initial_codec_chunk_frames`` (accepted; vocalis always decodes each
    frame as soon as it exists). Extensions as in :class:`SpeechRequest`: ``normalize`` and
    the request options of the model's family (checked by its schema; a field nobody
    declares is refused)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    type: Literal["session.config"]
    model: str | None = Field(default=None, min_length=1, max_length=512)
    voice: str | VoiceRef | None = Field(default=None,
                                         validation_alias=AliasChoices("voice", "speaker"))
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = None
    language: str | None = Field(default=None, max_length=64)
    instructions: str | None = Field(default=None, max_length=OPENAI_MAX_INPUT_CHARS)
    response_format: ResponseFormat = "wav"
    speed: Speed | None = 1.0
    stream_audio: StrictBool = False
    word_timestamps: StrictBool = False
    seed: Seed = None
    split_granularity: Literal["none", "sentence", "clause", "token"] = "none"
    initial_codec_chunk_frames: Annotated[int | None, Field(ge=0),
                                          BeforeValidator(_not_bool_int)] = None
    normalize: StrictBool | None = None

    def options(self) -> dict:
        """The model-family options the message carries (every field beyond the protocol's
        and vocalis's own), for the family's schema to check."""
        return {k: v for k, v in (self.model_extra or {}).items() if v is not None}


class InputText(BaseModel):
    """``{"type": "input.text", "text": "..."}``: more text of the current utterance."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["input.text"]
    text: str


class InputDone(BaseModel):
    """``{"type": "input.done"}``: the utterance's text is complete (speak the rest); the
    connection stays open for the next one."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["input.done"]


class SessionClose(BaseModel):
    """``{"type": "session.close"}``: finish the flushed utterances, then close."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["session.close"]


class InputCancel(BaseModel):
    """``{"type": "input.cancel"}`` (vocalis extension): stop speaking now (barge-in)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["input.cancel"]
