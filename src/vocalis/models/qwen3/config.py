"""Typed configs read from an official Qwen3-TTS checkpoint folder.

Two files describe a checkpoint (``qwen-tts==0.1.1`` layout):

* ``config.json`` (``model_type`` ``qwen3_tts``): the talker, its code predictor, the
  speaker encoder (Base only) and the special text/codec token ids, read by
  :class:`Qwen3TTSConfig` (official class: ``core/models/configuration_qwen3_tts.py``).
* ``speech_tokenizer/config.json`` (``model_type`` ``qwen3_tts_tokenizer_12hz``): the codec,
  read by :class:`CodecConfig` (``core/tokenizer_12hz/configuration_qwen3_tts_tokenizer_v2.py``).

The class defaults of the official configs (``codec_eos_token_id`` 4198, ``num_code_groups`` 32...)
are not the shipped values, so every field the model math needs is required here: a file
that lacks one is refused with :class:`~vocalis.errors.CheckpointError`. Each config keeps the
dict it was read from (``raw``), so ``to_dict()`` writes back exactly what was read plus the
typed fields.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vocalis.errors import CheckpointError

ModelType = Literal["base", "custom_voice", "voice_design"]
MODEL_TYPES: tuple[str, ...] = ("base", "custom_voice", "voice_design")
TOKENIZER_12HZ = "qwen3_tts_tokenizer_12hz"


def _build(cls, data: dict[str, Any], where: str, **nested):
    """Instantiate dataclass ``cls`` from ``data``: required fields must be present."""
    kwargs: dict[str, Any] = {}
    missing = []
    for f in dataclasses.fields(cls):
        if f.name == "raw":
            continue
        if f.name in nested:
            kwargs[f.name] = nested[f.name]
        elif f.name in data:
            kwargs[f.name] = data[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            missing.append(f.name)
    if missing:
        raise CheckpointError(f"{where} lacks {', '.join(missing)}: not a Qwen3-TTS 12 Hz config "
                              "(re-download the checkpoint or write one with `vocalis models random`)")
    return cls(**kwargs, raw=dict(data))


def _dump(obj) -> dict[str, Any]:
    out = dict(obj.raw)
    for f in dataclasses.fields(obj):
        if f.name == "raw":
            continue
        v = getattr(obj, f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if f.name not in obj.raw and v == default:
            continue  # a default the file did not spell out stays implicit
        out[f.name] = v.to_dict() if hasattr(v, "to_dict") else v
    return out


@dataclass
class CodePredictorConfig:
    """The sub-talker that predicts codebooks 1..G-1 of a frame (``talker_config.code_predictor_config``).

    Its codec embeddings have the *talker's* hidden size; when ``hidden_size`` differs from the
    talker's, a ``small_to_mtp_projection`` Linear(talker_hidden -> hidden_size, bias) maps
    every input (official ``modeling_qwen3_tts.py:1171``).
    """

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int  # codes per codebook (2048)
    num_code_groups: int  # codebooks per frame, codebook 0 included (16)
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int = 65536
    hidden_act: str = "silu"
    attention_bias: bool = False
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CodePredictorConfig":
        return _build(cls, data, "talker_config.code_predictor_config")

    def to_dict(self) -> dict[str, Any]:
        return _dump(self)


@dataclass
class TalkerConfig:
    """The talker: a Qwen3 decoder over the sum of a text track and a codec track
    (``talker_config``). ``vocab_size`` is the codebook-0 vocabulary (3072: codes 0..2047 and
    control ids 2048..3071); ``text_vocab_size`` x ``text_hidden_size`` is the text embedding."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    text_vocab_size: int
    text_hidden_size: int
    num_code_groups: int
    rms_norm_eps: float
    rope_theta: float
    codec_eos_token_id: int
    codec_pad_id: int
    codec_bos_id: int
    codec_think_id: int
    codec_nothink_id: int
    codec_think_bos_id: int
    codec_think_eos_id: int
    code_predictor_config: CodePredictorConfig
    codec_language_id: dict[str, int] = field(default_factory=dict)
    spk_id: dict[str, int] = field(default_factory=dict)
    spk_is_dialect: dict[str, Any] = field(default_factory=dict)  # speaker -> False | dialect name
    rope_scaling: dict[str, Any] | None = None
    max_position_embeddings: int = 32768
    hidden_act: str = "silu"
    attention_bias: bool = False
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TalkerConfig":
        if "code_predictor_config" not in data:
            raise CheckpointError("talker_config lacks code_predictor_config: not a Qwen3-TTS config")
        cp = CodePredictorConfig.from_dict(data["code_predictor_config"])
        cfg = _build(cls, data, "talker_config", code_predictor_config=cp)
        for name in ("codec_language_id", "spk_id", "spk_is_dialect"):
            if getattr(cfg, name) is None:
                setattr(cfg, name, {})
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return _dump(self)

    @property
    def has_small_to_mtp_projection(self) -> bool:
        return self.code_predictor_config.hidden_size != self.hidden_size

    @property
    def languages(self) -> list[str]:
        """Language names a request may pass (``auto`` plus every non-dialect key), as the
        official ``get_supported_languages``."""
        return ["auto"] + sorted(k for k in self.codec_language_id if "dialect" not in k)

    @property
    def speakers(self) -> list[str]:
        return sorted(self.spk_id)


@dataclass
class SpeakerEncoderConfig:
    """ECAPA-TDNN speaker encoder of Base checkpoints (``speaker_encoder_config``); ``enc_dim``
    equals the talker hidden size (the x-vector is one codec-track position)."""

    enc_dim: int
    sample_rate: int = 24000
    mel_dim: int = 128
    enc_channels: list[int] = field(default_factory=lambda: [512, 512, 512, 512, 1536])
    enc_kernel_sizes: list[int] = field(default_factory=lambda: [5, 3, 3, 3, 1])
    enc_dilations: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 1])
    enc_attention_channels: int = 128
    enc_res2net_scale: int = 8
    enc_se_channels: int = 128
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SpeakerEncoderConfig":
        return _build(cls, data, "speaker_encoder_config")

    def to_dict(self) -> dict[str, Any]:
        return _dump(self)


@dataclass
class Qwen3TTSConfig:
    """The root ``config.json``. ``tts_model_size`` is ``"0b6"`` or ``"1b7"``; the official
    wrapper drops ``instruct`` when the size is ``"0b6"``."""

    tts_model_type: str
    tts_model_size: str
    tokenizer_type: str
    talker_config: TalkerConfig
    speaker_encoder_config: SpeakerEncoderConfig | None = None
    im_start_token_id: int = 151644
    im_end_token_id: int = 151645
    assistant_token_id: int = 77091
    tts_pad_token_id: int = 151671
    tts_bos_token_id: int = 151672
    tts_eos_token_id: int = 151673
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Qwen3TTSConfig":
        if data.get("model_type") != "qwen3_tts" or "talker_config" not in data:
            raise CheckpointError(f"config.json has model_type {data.get('model_type')!r}, not 'qwen3_tts': "
                                  "point to a Qwen3-TTS checkpoint folder")
        talker = TalkerConfig.from_dict(data["talker_config"])
        spk = data.get("speaker_encoder_config")
        cfg = _build(cls, data, "config.json", talker_config=talker,
                     speaker_encoder_config=SpeakerEncoderConfig.from_dict(spk) if spk else None)
        if cfg.tts_model_type not in MODEL_TYPES:
            raise CheckpointError(f"config.json has tts_model_type {cfg.tts_model_type!r}; "
                                  f"expected one of {', '.join(MODEL_TYPES)}")
        if cfg.tokenizer_type != TOKENIZER_12HZ:
            raise CheckpointError(f"config.json has tokenizer_type {cfg.tokenizer_type!r}; vocalis runs "
                                  f"only the 12 Hz checkpoints ({TOKENIZER_12HZ})")
        if cfg.tts_model_type == "base" and cfg.speaker_encoder_config is None:
            raise CheckpointError("config.json of a Base checkpoint lacks speaker_encoder_config")
        return cfg

    def to_dict(self) -> dict[str, Any]:
        out = _dump(self)
        if self.speaker_encoder_config is None:
            out.pop("speaker_encoder_config", None)
        return out


@dataclass
class CodecDecoderConfig:
    """Speech-tokenizer decoder (``decoder_config``): RVQ dequant, pre-transformer with a
    ``sliding_window``-frame window, upsampling by prod(upsampling_ratios + upsample_rates)."""

    codebook_size: int
    codebook_dim: int
    latent_dim: int
    decoder_dim: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    num_quantizers: int
    upsample_rates: list[int]
    upsampling_ratios: list[int]
    sliding_window: int
    rms_norm_eps: float
    rope_theta: float
    layer_scale_initial_scale: float
    head_dim: int | None = None  # official default: hidden_size // num_attention_heads
    max_position_embeddings: int = 8000
    hidden_act: str = "silu"
    attention_bias: bool = False
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CodecDecoderConfig":
        cfg = _build(cls, data, "speech_tokenizer/config.json decoder_config")
        if cfg.head_dim is None:
            cfg.head_dim = cfg.hidden_size // cfg.num_attention_heads
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return _dump(self)


@dataclass
class CodecConfig:
    """``speech_tokenizer/config.json``. ``encoder_config`` is a transformers ``MimiConfig``
    dict, kept as read (its fields are Mimi's); the decoder is typed."""

    encoder_config: dict[str, Any]
    decoder_config: CodecDecoderConfig
    encoder_valid_num_quantizers: int
    input_sample_rate: int
    output_sample_rate: int
    decode_upsample_rate: int  # samples per frame (1920 at 24 kHz: 12.5 Hz)
    encode_downsample_rate: int
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CodecConfig":
        if data.get("model_type") != TOKENIZER_12HZ:
            raise CheckpointError(f"speech_tokenizer/config.json has model_type {data.get('model_type')!r}, "
                                  f"not {TOKENIZER_12HZ!r}")
        dec = CodecDecoderConfig.from_dict(data.get("decoder_config") or {})
        return _build(cls, data, "speech_tokenizer/config.json", decoder_config=dec)

    def to_dict(self) -> dict[str, Any]:
        return _dump(self)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"{path} is missing: a Qwen3-TTS checkpoint folder holds config.json and "
                              "speech_tokenizer/config.json")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path} is not readable JSON ({e}); re-download the checkpoint") from None


def load_config(checkpoint_dir: str | Path) -> Qwen3TTSConfig:
    """Read ``<checkpoint_dir>/config.json``. Raises CheckpointError (missing, unreadable, not Qwen3-TTS)."""
    return Qwen3TTSConfig.from_dict(_read_json(Path(checkpoint_dir) / "config.json"))


def load_codec_config(checkpoint_dir: str | Path) -> CodecConfig:
    """Read ``<checkpoint_dir>/speech_tokenizer/config.json``. Raises CheckpointError."""
    return CodecConfig.from_dict(_read_json(Path(checkpoint_dir) / "speech_tokenizer" / "config.json"))
