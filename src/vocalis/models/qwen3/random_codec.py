"""Random-weight ``speech_tokenizer/`` folders in the official Qwen3-TTS-Tokenizer-12Hz layout.

:func:`write_random_speech_tokenizer` writes ``config.json``, ``preprocessor_config.json``
(what ``AutoFeatureExtractor`` needs: an ``EncodecFeatureExtractor`` at 24 kHz) and
``model.safetensors`` (float32, as released) whose tensor names and shapes come from
vocalis's own modules: ``decoder.*`` from :class:`~vocalis.models.qwen3.codec.SpeechDecoder`
and ``encoder.*`` from :class:`~vocalis.models.qwen3.codec_encoder.SpeechEncoder`. The
official ``Qwen3TTSTokenizer.from_pretrained`` loads such a folder with no missing or
unexpected keys, so both packages can be run on identical weights.

Values are drawn from a seeded generator and scaled so that the decoded waveform is finite
and neither silent nor clipped everywhere (weights ~ N(0, 1/fan_in), norms near 1, layer
scales 0.1, the last conv calibrated to an output std of about 0.2 before the clamp); a few
codebook entries have ``cluster_usage`` below the 1e-5 clamp so that the clamp matters.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from vocalis.models.qwen3.codec import (
    Codebook,
    ConvNeXtBlock,
    LayerScale,
    ResidualUnit,
    RMSNorm,
    SnakeBeta,
    SpeechDecoder,
    SpeechTokenizerConfig,
)
from vocalis.models.qwen3.codec_encoder import SpeechEncoder
from vocalis.models.qwen3.codec_encoder import _Codebook as _MimiCodebook
from vocalis.models.qwen3.speaker import SpeakerEncoder, SpeakerEncoderConfig

_TOP = {
    "architectures": ["Qwen3TTSTokenizerV2Model"],
    "model_type": "qwen3_tts_tokenizer_12hz",
    "encoder_valid_num_quantizers": 16,
    "input_sample_rate": 24000,
    "output_sample_rate": 24000,
    "decode_upsample_rate": 1920,
    "encode_downsample_rate": 1920,
}

#: ``config.json`` of the released Qwen3-TTS-Tokenizer-12Hz (decoder values from public copies;
#: the encoder is transformers' ``MimiConfig`` at its defaults, 32 quantizers of which 16 are used).
REAL_CONFIG: dict = {
    **_TOP,
    "decoder_config": {
        "attention_bias": False, "attention_dropout": 0.0, "latent_dim": 1024,
        "codebook_dim": 512, "codebook_size": 2048, "decoder_dim": 1536, "hidden_act": "silu",
        "hidden_size": 512, "intermediate_size": 1024, "layer_scale_initial_scale": 0.01,
        "max_position_embeddings": 8000, "head_dim": 64, "num_attention_heads": 16,
        "num_hidden_layers": 8, "num_key_value_heads": 16, "num_quantizers": 16,
        "num_semantic_quantizers": 1, "rms_norm_eps": 1e-5, "rope_theta": 10000,
        "semantic_codebook_size": 4096, "sliding_window": 72, "upsample_rates": [8, 5, 4, 3],
        "upsampling_ratios": [2, 2], "vector_quantization_hidden_dimension": 512,
    },
    "encoder_config": {
        "_frame_rate": 12.5, "audio_channels": 1, "codebook_dim": 256, "codebook_size": 2048,
        "compress": 2, "dilation_growth_rate": 2, "dtype": "float32", "head_dim": 64,
        "hidden_act": "gelu", "hidden_size": 512, "intermediate_size": 2048, "kernel_size": 7,
        "last_kernel_size": 3, "layer_scale_initial_scale": 0.01, "max_position_embeddings": 8000,
        "model_type": "mimi", "norm_eps": 1e-5, "num_attention_heads": 8, "num_filters": 64,
        "num_hidden_layers": 8, "num_key_value_heads": 8, "num_quantizers": 32,
        "num_residual_layers": 1, "num_semantic_quantizers": 1, "pad_mode": "constant",
        "residual_kernel_size": 3, "rope_theta": 10000.0, "sampling_rate": 24000,
        "sliding_window": 250, "trim_right_ratio": 1.0, "upsample_groups": 512,
        "upsampling_ratios": [8, 6, 5, 4], "use_causal_conv": True, "use_conv_shortcut": False,
        "vector_quantization_hidden_dimension": 256,
    },
}


def tiny_config() -> dict:
    """Same structure and rates as :data:`REAL_CONFIG` (1920 samples per frame, 16 codebooks
    of 2048, window 72) with small widths and 2 layers: decodes in milliseconds per frame.
    The tiny decoder uses 4 query / 2 KV heads so that the grouped-KV path is exercised."""
    c = copy.deepcopy(REAL_CONFIG)
    c["decoder_config"].update(
        latent_dim=64, codebook_dim=64, decoder_dim=32, hidden_size=32, intermediate_size=64,
        head_dim=8, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
        vector_quantization_hidden_dimension=64)
    c["encoder_config"].update(
        hidden_size=32, num_filters=4, intermediate_size=64, head_dim=8, num_attention_heads=4,
        num_key_value_heads=4, num_hidden_layers=2, codebook_dim=16,
        vector_quantization_hidden_dimension=16, upsample_groups=32)
    return c


PREPROCESSOR_CONFIG = {
    "chunk_length_s": None,
    "feature_extractor_type": "EncodecFeatureExtractor",
    "feature_size": 1,
    "overlap": None,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "sampling_rate": 24000,
}


def _normal(shape, std: float, g: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=g) * std


@torch.no_grad()
def randomize(module: nn.Module, g: torch.Generator) -> None:
    """Fill every parameter of ``module`` (decoder or encoder) with scaled random values."""
    for m in module.modules():
        if isinstance(m, (nn.Conv1d, nn.Linear)):
            fan_in = m.weight[0].numel()
            m.weight.copy_(_normal(m.weight.shape, 1 / math.sqrt(fan_in), g))
        elif isinstance(m, nn.ConvTranspose1d):
            fan_in = m.weight.shape[0] * m.weight.shape[2] / m.stride[0]
            m.weight.copy_(_normal(m.weight.shape, 1 / math.sqrt(fan_in), g))
        elif isinstance(m, (RMSNorm, nn.LayerNorm)):
            m.weight.copy_(1 + _normal(m.weight.shape, 0.1, g))
        elif isinstance(m, SnakeBeta):
            m.alpha.copy_(_normal(m.alpha.shape, 0.1, g))
            m.beta.copy_(0.5 + _normal(m.beta.shape, 0.1, g))
        elif isinstance(m, LayerScale):
            m.scale.copy_(0.1 + _normal(m.scale.shape, 0.02, g))
        elif isinstance(m, ConvNeXtBlock):
            m.gamma.copy_(0.1 + _normal(m.gamma.shape, 0.02, g))
        elif isinstance(m, Codebook):
            n = m.cluster_usage.shape[0]
            usage = 0.5 + 1.5 * torch.rand(n, generator=g)
            tiny = torch.rand(n, generator=g) < 0.01  # below the 1e-5 clamp
            usage[tiny] = 1e-7
            scale = torch.where(tiny, torch.full_like(usage, 1e-5), usage)
            m.cluster_usage.copy_(usage)
            m.embedding_sum.copy_(_normal(m.embedding_sum.shape, 0.25, g) * scale[:, None])
        elif isinstance(m, _MimiCodebook):
            n = m.cluster_usage.shape[0]
            usage = 0.5 + 1.5 * torch.rand(n, generator=g)
            m.cluster_usage.copy_(usage)
            m.embed_sum.copy_(_normal(m.embed_sum.shape, 1.0, g) * usage[:, None])
        bias = getattr(m, "bias", None)
        if isinstance(bias, nn.Parameter) and not isinstance(m, (RMSNorm,)):
            bias.copy_(_normal(bias.shape, 0.02, g))
    for m in module.modules():  # residual branches at half gain keep the stack bounded
        if isinstance(m, ResidualUnit):
            m.conv2.conv.weight.mul_(0.5)


@torch.no_grad()
def _calibrate(decoder: SpeechDecoder, g: torch.Generator) -> None:
    """Scale the last conv so that its output (before the clamp) has std 0.2 on random codes."""
    last = decoder.decoder[-1].conv
    seen = []
    hook = last.register_forward_hook(lambda _m, _i, out: seen.append(out))
    codes = torch.randint(0, decoder.config.codebook_size,
                          (1, decoder.config.num_quantizers, 8), generator=g)
    decoder.decode(codes, full_state=True)
    hook.remove()
    std = float(seen[0].std())
    if math.isfinite(std) and std > 0:
        last.weight.mul_(0.2 / std)
        last.bias.mul_(0.2 / std)


def _config_dict(config) -> dict:
    if isinstance(config, SpeechTokenizerConfig):
        return {**_TOP, "decoder_config": config.decoder.to_dict(),
                "encoder_config": dict(config.encoder),
                **{k: getattr(config, k) for k in _TOP if hasattr(config, k)}}
    return copy.deepcopy(dict(config))


def write_random_speech_tokenizer(out_dir: Path, config: SpeechTokenizerConfig | dict | None = None,
                                  seed: int = 0) -> None:
    """Write a random ``speech_tokenizer/`` folder.

    Args:
        out_dir: folder to create or overwrite (``config.json``, ``preprocessor_config.json``,
            ``model.safetensors``).
        config: a ``config.json`` dict (:data:`REAL_CONFIG`, :func:`tiny_config`, or one read
            from a checkpoint) or a :class:`SpeechTokenizerConfig`; default: the real sizes.
        seed: values are a function of (config, seed) only.
    """
    cfg = _config_dict(REAL_CONFIG if config is None else config)
    parsed = SpeechTokenizerConfig.from_dict(cfg)
    g = torch.Generator().manual_seed(seed)
    decoder = SpeechDecoder(parsed.decoder)
    randomize(decoder, g)
    _calibrate(decoder, g)
    encoder = SpeechEncoder(parsed.encoder)
    randomize(encoder, g)
    tensors = {f"decoder.{k}": v for k, v in decoder.state_dict().items()}
    tensors.update({f"encoder.{k}": v for k, v in encoder.state_dict().items()})
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous().float() for k, v in tensors.items()},
              str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (out / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR_CONFIG, indent=2) + "\n")


#: ``speaker_encoder_config`` of a tiny Base checkpoint (mel_dim stays 128: the official
#: front-end always computes 128 mels); ``enc_dim`` must equal the talker's hidden size.
TINY_SPEAKER_CONFIG = {"enc_dim": 64, "enc_channels": [32, 32, 32, 32, 96],
                       "enc_kernel_sizes": [5, 3, 3, 3, 1], "enc_dilations": [1, 2, 3, 4, 1],
                       "enc_attention_channels": 16, "enc_res2net_scale": 8,
                       "enc_se_channels": 16, "sample_rate": 24000}


def random_speaker_encoder_tensors(config: dict, seed: int = 0,
                                   prefix: str = "speaker_encoder.") -> dict[str, torch.Tensor]:
    """Random float32 weights of the ECAPA-TDNN speaker encoder for a Base checkpoint's
    ``model.safetensors`` (names under ``prefix``, shapes from
    :class:`~vocalis.models.qwen3.speaker.SpeakerEncoder`), for the talker writer to include.

    Args:
        config: the ``speaker_encoder_config`` dict (e.g. ``{"enc_dim": 1024,
            "sample_rate": 24000}`` at real 0.6B size, or :data:`TINY_SPEAKER_CONFIG`).
        seed: values are a function of (config, seed) only.
    """
    model = SpeakerEncoder(SpeakerEncoderConfig.from_dict(config))
    randomize(model, torch.Generator().manual_seed(seed))
    return {prefix + k: v.contiguous().float() for k, v in model.state_dict().items()}
