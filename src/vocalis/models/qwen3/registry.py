"""The released Qwen3-TTS 12 Hz checkpoints, by vocalis model id, with pinned Hub revisions.

Each entry gives the Hub repo, the commit it is pinned to, and the real ``config.json`` /
``speech_tokenizer/config.json`` contents (architecture facts of the release, used by
``vocalis models list/show`` and to write random-weight checkpoints at real shapes). Every
entry also has a ``tiny`` variant for tests: the same structure at toy sizes, keeping each
structural feature of its release (GQA, q/k norm, ``q_proj`` wider than the hidden size,
text hidden size != talker hidden size on 0.6B, ``small_to_mtp_projection`` on 1.7B, the
speaker encoder on Base, speaker ids and dialects on CustomVoice, the full text vocabulary
and special-token ids, 16 codebooks of 2048 codes, 1920 samples per frame).

Sources: revisions as cited publicly for the five repos (``/tree/<commit>`` links); config
values from public copies of the released ``config.json`` files and the official class
definitions in ``qwen-tts==0.1.1`` (see ``shared/reference/qwen3-tts.md`` sections 1-3).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from vocalis.errors import ModelNotFound
from vocalis.models.qwen3.config import CodecConfig, Qwen3TTSConfig

PREFIX = "qwen3-tts/"


@dataclass(frozen=True)
class Release:
    model_id: str  # vocalis id, e.g. "qwen3-tts/0.6b-customvoice"
    repo_id: str  # Hugging Face repo
    revision: str  # pinned commit
    size: str  # "0b6" | "1b7"
    tts_model_type: str  # "base" | "custom_voice" | "voice_design"
    description: str


RELEASES: dict[str, Release] = {r.model_id: r for r in (
    Release("qwen3-tts/0.6b-base", "Qwen/Qwen3-TTS-12Hz-0.6B-Base",
            "5d83992436eae1d760afd27aff78a71d676296fc", "0b6", "base",
            "0.6B, voice cloning from reference audio"),
    Release("qwen3-tts/0.6b-customvoice", "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
            "85e237c12c027371202489a0ec509ded67b5e4b5", "0b6", "custom_voice",
            "0.6B, 9 built-in speakers"),
    Release("qwen3-tts/1.7b-base", "Qwen/Qwen3-TTS-12Hz-1.7B-Base",
            "fd4b254389122332181a7c3db7f27e918eec64e3", "1b7", "base",
            "1.7B, voice cloning from reference audio"),
    Release("qwen3-tts/1.7b-customvoice", "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
            "0c0e3051f131929182e2c023b9537f8b1c68adfe", "1b7", "custom_voice",
            "1.7B, 9 built-in speakers, instruct"),
    Release("qwen3-tts/1.7b-voicedesign", "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign",
            "5ecdb67327fd37bb2e042aab12ff7391903235d3", "1b7", "voice_design",
            "1.7B, voice from a text description (instruct)"),
)}

LANGUAGES = {"english": 2050, "german": 2053, "spanish": 2054, "chinese": 2055, "japanese": 2058,
             "french": 2061, "korean": 2064, "russian": 2069, "italian": 2070, "portuguese": 2071}
DIALECTS = {"sichuan_dialect": 2062, "beijing_dialect": 2074}
SPEAKERS = {"vivian": 3065, "serena": 3066, "uncle_fu": 3010, "ryan": 3061, "aiden": 2861,
            "ono_anna": 2873, "sohee": 2864, "eric": 2875, "dylan": 2878}
SPEAKER_DIALECTS = {"eric": "sichuan_dialect", "dylan": "beijing_dialect"}

# Checkpoint generation_config.json (245 B in every release).
GENERATION_CONFIG = {"do_sample": True, "repetition_penalty": 1.05, "temperature": 0.9, "top_p": 1.0,
                     "top_k": 50, "subtalker_dosample": True, "subtalker_temperature": 0.9,
                     "subtalker_top_k": 50, "subtalker_top_p": 1.0, "max_new_tokens": 8192}

# transformers writes its version into config.json; 4.57.3 is in the window where the official
# processor (fix_mistral_regex=True) swaps the pre-tokenizer regex (see vocalis.models.qwen3.text).
TRANSFORMERS_VERSION = "4.57.3"

# (hidden, intermediate, layers, heads, kv heads, head_dim, text_hidden, mrope sections)
_TALKER = {"0b6": (1024, 3072, 28, 16, 8, 128, 2048, [24, 20, 20]),
           "1b7": (2048, 6144, 28, 16, 8, 128, 2048, [24, 20, 20])}
# Tiny talkers keep the released ratios: on 0.6B q_proj and the text hidden size are twice
# the hidden size; on 1.7B both equal it (and the predictor is narrower: small_to_mtp).
_TALKER_TINY = {"0b6": (32, 64, 2, 4, 2, 16, 64, [4, 2, 2]),
                "1b7": (64, 128, 2, 4, 2, 16, 64, [4, 2, 2])}
_PREDICTOR = (1024, 3072, 5, 16, 8, 128)
_PREDICTOR_TINY = (32, 64, 2, 4, 2, 16)


def _layers(hidden, inter, layers, heads, kv, head_dim) -> dict[str, Any]:
    return {"hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": head_dim,
            "hidden_act": "silu", "rms_norm_eps": 1e-6, "attention_bias": False, "attention_dropout": 0.0,
            "initializer_range": 0.02, "use_cache": True, "use_sliding_window": False}


def _talker_config(rel: Release, tiny: bool) -> dict[str, Any]:
    hidden, inter, layers, heads, kv, head_dim, text_hidden, mrope = (_TALKER_TINY if tiny else _TALKER)[rel.size]
    predictor = {**_layers(*(_PREDICTOR_TINY if tiny else _PREDICTOR)), "model_type": "qwen3_tts_talker_code_predictor",
                 "vocab_size": 2048, "num_code_groups": 16, "rope_theta": 1000000, "rope_scaling": None,
                 "max_position_embeddings": 65536, "layer_types": ["full_attention"] * (_PREDICTOR_TINY if tiny else _PREDICTOR)[2],
                 "max_window_layers": 28, "sliding_window": None}
    langs = dict(LANGUAGES)
    spk, dialect = {}, {}
    if rel.tts_model_type == "custom_voice":
        langs.update(DIALECTS)
        spk = dict(SPEAKERS)
        dialect = {name: SPEAKER_DIALECTS.get(name, False) for name in SPEAKERS}
    return {**_layers(hidden, inter, layers, heads, kv, head_dim), "model_type": "qwen3_tts_talker",
            "vocab_size": 3072, "text_vocab_size": 151936, "text_hidden_size": text_hidden,
            "num_code_groups": 16, "position_id_per_seconds": 13, "max_position_embeddings": 32768,
            "rope_theta": 1000000, "rope_scaling": {"interleaved": True, "mrope_section": mrope, "rope_type": "default"},
            "sliding_window": None, "code_predictor_config": predictor,
            "codec_eos_token_id": 2150, "codec_pad_id": 2148, "codec_bos_id": 2149, "codec_think_id": 2154,
            "codec_nothink_id": 2155, "codec_think_bos_id": 2156, "codec_think_eos_id": 2157,
            "codec_language_id": langs, "spk_id": spk, "spk_is_dialect": dialect}


def _speaker_encoder_config(enc_dim: int, tiny: bool) -> dict[str, Any]:
    if not tiny:
        return {"enc_dim": enc_dim, "sample_rate": 24000}
    return {"enc_dim": enc_dim, "sample_rate": 24000, "mel_dim": 128, "enc_channels": [32, 32, 32, 32, 96],
            "enc_kernel_sizes": [5, 3, 3, 3, 1], "enc_dilations": [1, 2, 3, 4, 1],
            "enc_attention_channels": 16, "enc_res2net_scale": 8, "enc_se_channels": 16}


def config_dict(model_id: str, tiny: bool = False) -> dict[str, Any]:
    """The root ``config.json`` of release ``model_id`` (real shapes, or the tiny variant)."""
    rel = release(model_id)
    talker = _talker_config(rel, tiny)
    cfg = {"architectures": ["Qwen3TTSForConditionalGeneration"], "model_type": "qwen3_tts",
           "tokenizer_type": "qwen3_tts_tokenizer_12hz", "tts_model_size": rel.size,
           "tts_model_type": rel.tts_model_type, "im_start_token_id": 151644, "im_end_token_id": 151645,
           "assistant_token_id": 77091, "tts_pad_token_id": 151671, "tts_bos_token_id": 151672,
           "tts_eos_token_id": 151673, "talker_config": talker,
           "torch_dtype": "bfloat16", "transformers_version": TRANSFORMERS_VERSION}
    if rel.tts_model_type == "base":
        cfg["speaker_encoder_config"] = _speaker_encoder_config(talker["hidden_size"], tiny)
    return cfg


def codec_config_dict(tiny: bool = False) -> dict[str, Any]:
    """``speech_tokenizer/config.json`` (the same codec ships with every release)."""
    if tiny:
        dec = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
               "num_key_value_heads": 2, "head_dim": 16, "latent_dim": 32, "codebook_dim": 16, "decoder_dim": 32,
               "vector_quantization_hidden_dimension": 16}
        enc = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
               "num_key_value_heads": 2, "head_dim": 16, "num_filters": 2, "upsample_groups": 32,
               "codebook_dim": 16, "vector_quantization_hidden_dimension": 16}
    else:
        dec = {"hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16,
               "num_key_value_heads": 16, "head_dim": 64, "latent_dim": 1024, "codebook_dim": 512,
               "decoder_dim": 1536, "vector_quantization_hidden_dimension": 512}
        enc = {"hidden_size": 512, "intermediate_size": 2048, "num_hidden_layers": 8, "num_attention_heads": 8,
               "num_key_value_heads": 8, "head_dim": 64, "num_filters": 64, "upsample_groups": 512,
               "codebook_dim": 256, "vector_quantization_hidden_dimension": 256}
    dec.update({"attention_bias": False, "attention_dropout": 0.0, "codebook_size": 2048, "hidden_act": "silu",
                "layer_scale_initial_scale": 0.01, "max_position_embeddings": 8000, "num_quantizers": 16,
                "num_semantic_quantizers": 1, "rms_norm_eps": 1e-5, "rope_theta": 10000,
                "semantic_codebook_size": 4096, "sliding_window": 72, "upsample_rates": [8, 5, 4, 3],
                "upsampling_ratios": [2, 2]})
    enc.update({"model_type": "mimi", "audio_channels": 1, "sampling_rate": 24000, "frame_rate": 12.5,
                "_frame_rate": 12.5, "kernel_size": 7, "residual_kernel_size": 3, "last_kernel_size": 3,
                "num_residual_layers": 1, "dilation_growth_rate": 2, "compress": 2, "use_causal_conv": True,
                "pad_mode": "constant", "trim_right_ratio": 1.0, "use_conv_shortcut": False,
                "upsampling_ratios": [8, 6, 5, 4], "hidden_act": "gelu", "norm_eps": 1e-5,
                "layer_scale_initial_scale": 0.01, "rope_theta": 10000.0, "max_position_embeddings": 8000,
                "sliding_window": 250, "num_quantizers": 32, "num_semantic_quantizers": 1,
                "codebook_size": 2048, "attention_bias": False, "attention_dropout": 0.0,
                "initializer_range": 0.02, "use_cache": False})
    return {"architectures": ["Qwen3TTSTokenizerV2Model"], "model_type": "qwen3_tts_tokenizer_12hz",
            "encoder_valid_num_quantizers": 16, "input_sample_rate": 24000, "output_sample_rate": 24000,
            "decode_upsample_rate": 1920, "encode_downsample_rate": 1920,
            "encoder_config": enc, "decoder_config": dec,
            "transformers_version": TRANSFORMERS_VERSION}


def model_ids() -> list[str]:
    return list(RELEASES)


def is_model_id(name: str) -> bool:
    return name.lower() in RELEASES


def release(model_id: str) -> Release:
    """The release for a vocalis id (case-insensitive) or its Hub repo id. Raises ModelNotFound."""
    key = model_id.lower()
    if key in RELEASES:
        return RELEASES[key]
    for rel in RELEASES.values():
        if rel.repo_id.lower() == key:
            return rel
    raise ModelNotFound(f"unknown Qwen3-TTS model {model_id!r}; known: {', '.join(RELEASES)}")


def config(model_id: str, tiny: bool = False) -> Qwen3TTSConfig:
    """Typed root config of a release (``tiny`` for the test variant)."""
    return Qwen3TTSConfig.from_dict(copy.deepcopy(config_dict(model_id, tiny)))


def codec_config(tiny: bool = False) -> CodecConfig:
    return CodecConfig.from_dict(codec_config_dict(tiny))
