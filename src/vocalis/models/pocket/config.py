"""Pocket TTS model configuration, read from YAML in the official pocket-tts format.

The schema is the official one (pocket-tts 4.0.1 ``config/*.yaml``) so that any
file the official ``--config`` accepts loads here, and files we write (random
checkpoints) load there. Unknown keys are rejected, as the official loader does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, PositiveFloat, PositiveInt, ValidationError

from vocalis.errors import InputError, ModelNotFound


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FlowHead(_Strict):
    """The per-frame sampler head (``flow_lm.flow``)."""

    dim: PositiveInt
    depth: PositiveInt
    type: Literal["lsd", "flow_matching", "drifting", "pointwise"] = "lsd"


class FlowTransformer(_Strict):
    hidden_scale: PositiveInt
    max_period: PositiveInt
    d_model: PositiveInt
    num_heads: PositiveInt
    num_layers: PositiveInt
    attn_dim: PositiveInt | None = None
    num_kv_heads: PositiveInt | None = None
    dim_feedforward: PositiveInt | None = None

    @property
    def ffn_dim(self) -> int:
        return self.dim_feedforward or int(self.d_model * self.hidden_scale)

    @property
    def query_dim(self) -> int:
        return self.attn_dim or self.d_model

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    @property
    def head_dim(self) -> int:
        return self.query_dim // self.num_heads


class LookupTable(_Strict):
    dim: PositiveInt
    n_bins: PositiveInt
    tokenizer: str
    tokenizer_path: str
    rank: PositiveInt | None = None


class FlowLM(_Strict):
    dtype: str
    flow: FlowHead
    transformer: FlowTransformer
    z_dim: int | None = None
    lookup_table: LookupTable
    weights_path: str | None = None
    insert_bos_before_voice: bool = False


class SEANet(_Strict):
    dimension: PositiveInt
    channels: PositiveInt
    n_filters: PositiveInt
    n_residual_layers: int
    ratios: list[PositiveInt]
    kernel_size: PositiveInt
    residual_kernel_size: PositiveInt
    last_kernel_size: PositiveInt
    dilation_base: PositiveInt
    pad_mode: str
    compress: PositiveInt


class CodecTransformer(_Strict):
    d_model: PositiveInt
    input_dimension: PositiveInt
    output_dimensions: tuple[PositiveInt, ...]
    num_heads: PositiveInt
    num_layers: PositiveInt
    layer_scale: float
    context: PositiveInt
    max_period: PositiveFloat = 10000.0
    dim_feedforward: PositiveInt


class Quantizer(_Strict):
    dimension: PositiveInt
    output_dimension: PositiveInt


class Mimi(_Strict):
    dtype: str
    sample_rate: PositiveInt
    channels: PositiveInt
    frame_rate: PositiveFloat
    seanet: SEANet
    transformer: CodecTransformer
    quantizer: Quantizer
    weights_path: str | None = None
    inner_dim: int | None = None
    outer_dim: int | None = None
    decoder_seanet: SEANet | None = None
    decoder_transformer: CodecTransformer | None = None

    @property
    def dec_seanet(self) -> SEANet:
        return self.decoder_seanet or self.seanet

    @property
    def dec_transformer(self) -> CodecTransformer:
        return self.decoder_transformer or self.transformer

    @property
    def frame_samples(self) -> int:
        """Samples per latent frame (1920 at 24 kHz / 12.5 Hz)."""
        return int(self.sample_rate / self.frame_rate)

    @property
    def hop(self) -> int:
        """Samples per encoder step (product of SEANet ratios; 120)."""
        n = 1
        for r in self.seanet.ratios:
            n *= r
        return n

    @property
    def latent_dim(self) -> int:
        """Width of the encoder's downsampled output (32, or 512 for english_2026-01)."""
        return self.inner_dim or self.seanet.dimension


class PocketConfig(_Strict):
    """Root of a Pocket TTS YAML file."""

    flow_lm: FlowLM
    mimi: Mimi
    weights_path: str | None = None
    weights_path_without_voice_cloning: str | None = None
    pad_with_spaces_for_short_inputs: bool = False
    remove_semicolons: bool = False
    append_terminal_punctuation: bool = True
    capitalize_first_letter: bool = True
    replace_characters: dict[str, str] = {}
    model_recommended_frames_after_eos: int | None = None
    default_temperature: float = 0.3
    default_eos_threshold: float = -4.0


def parse_config(data: dict, source: str = "<dict>") -> PocketConfig:
    """Validate a config mapping.

    Raises:
        InputError: the mapping does not follow the official schema (names the field).
    """
    try:
        return PocketConfig(**data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(
            f"config {source} is not a valid Pocket TTS config: {where}: {first['msg']} "
            "(compare with `vocalis models show pocket-tts`)"
        ) from None
    except TypeError as e:
        raise InputError(f"config {source} is not a mapping of fields: {e}") from None


def load_config_file(path: Path) -> PocketConfig:
    """Read and validate a YAML config file.

    Raises:
        ModelNotFound: the file does not exist.
        InputError: not YAML or not the official schema.
    """
    if not path.is_file():
        raise ModelNotFound(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"config {path} is not valid YAML: {e}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise InputError(f"config {path} must be a YAML mapping, got {type(data).__name__}")
    return parse_config(data, str(path))


def dump_config(cfg: PocketConfig) -> str:
    """The config as YAML text in the official layout (loadable by pocket-tts)."""
    data = cfg.model_dump(mode="json", exclude_none=False)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
