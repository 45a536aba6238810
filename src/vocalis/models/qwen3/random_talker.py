"""Random-weight Qwen3-TTS talker checkpoints in the official layout: ``config.json``,
``generation_config.json`` and a bf16 ``model.safetensors`` whose tensor names are the
state dict of :class:`vocalis.models.qwen3.talker.Talker` prefixed with ``talker.`` (the
official names). Tokenizer files and ``speech_tokenizer/`` are written by other tools;
Base checkpoints also need ``speaker_encoder.*`` tensors, passed in ``extra_tensors``.

Configs: :func:`talker_config` gives the real shapes (values of the released
``config.json`` files, see ``shared/reference/qwen3-tts.md`` §1-§3) and a tiny variant for
tests, for each released variant.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from vocalis.models.qwen3.talker import Talker, TalkerSpec

VARIANTS = ("0.6b-base", "0.6b-customvoice", "1.7b-base", "1.7b-customvoice", "1.7b-voicedesign")

LANGUAGES = {"chinese": 2055, "english": 2050, "german": 2053, "italian": 2070, "portuguese": 2071,
             "spanish": 2054, "japanese": 2058, "korean": 2064, "french": 2061, "russian": 2069}
DIALECTS = {"beijing_dialect": 2074, "sichuan_dialect": 2062}
SPEAKERS = {"serena": 3066, "vivian": 3065, "uncle_fu": 3010, "ryan": 3061, "aiden": 2861,
            "ono_anna": 2873, "sohee": 2864, "eric": 2875, "dylan": 2878}
SPEAKER_DIALECTS = {"serena": False, "vivian": False, "uncle_fu": False, "ryan": False, "aiden": False,
                    "ono_anna": False, "sohee": False, "eric": "sichuan_dialect", "dylan": "beijing_dialect"}

# Text special ids: real (Qwen2 vocabulary) and tiny (a 512-entry test vocabulary whose
# tokenizer must put these strings at these ids).
REAL_TEXT_IDS = {"<|im_start|>": 151644, "<|im_end|>": 151645, "<tts_pad>": 151671,
                 "<tts_text_bos>": 151672, "<tts_text_eod>": 151673}
TINY_TEXT_IDS = {"<|im_start|>": 500, "<|im_end|>": 501, "<tts_pad>": 502, "<tts_text_bos>": 503,
                 "<tts_text_eod>": 504}
TINY_TEXT_VOCAB = 512

GENERATION_CONFIG = {"do_sample": True, "repetition_penalty": 1.05, "temperature": 0.9, "top_p": 1.0,
                     "top_k": 50, "subtalker_dosample": True, "subtalker_temperature": 0.9,
                     "subtalker_top_p": 1.0, "subtalker_top_k": 50, "max_new_tokens": 8192}


def _decoder(hidden, layers, heads, kv, head_dim, inter, max_pos):
    return dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
                head_dim=head_dim, intermediate_size=inter, hidden_act="silu", max_position_embeddings=max_pos,
                rms_norm_eps=1e-6, rope_theta=1000000, attention_bias=False, attention_dropout=0.0,
                use_sliding_window=False, num_code_groups=16)


def talker_config(variant: str, tiny: bool = False) -> dict:
    """The top-level ``config.json`` dict of ``variant`` (one of :data:`VARIANTS`).

    Real: talker 0.6B H=1024/I=3072, 1.7B H=2048/I=6144, 28 layers, 16/8 heads × 128;
    predictor H=1024, 5 layers. Tiny: 2-layer talker (H 32 on 0.6B, 64 on 1.7B) and a
    2-layer predictor of H 32 (so 1.7B keeps its ``small_to_mtp_projection``), text
    hidden 48 over a 512-entry vocabulary."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown Qwen3-TTS variant {variant!r}; choose from {', '.join(VARIANTS)}")
    size, kind = variant.split("-")
    kind = {"base": "base", "customvoice": "custom_voice", "voicedesign": "voice_design"}[kind]
    big = size == "1.7b"
    if tiny:
        talker = _decoder(64 if big else 32, 2, 4, 2, 16, 96, 32768)
        pred = _decoder(32, 2, 4, 2, 16, 64, 65536)
        text_vocab, text_hidden, text_ids = TINY_TEXT_VOCAB, 48, TINY_TEXT_IDS
    else:
        talker = _decoder(2048 if big else 1024, 28, 16, 8, 128, 6144 if big else 3072, 32768)
        pred = _decoder(1024, 5, 16, 8, 128, 3072, 65536)
        text_vocab, text_hidden, text_ids = 151936, 2048, REAL_TEXT_IDS
    pred.update(vocab_size=2048, layer_types=["full_attention"] * pred["num_hidden_layers"])
    custom = kind == "custom_voice"
    talker.update(
        vocab_size=3072, text_vocab_size=text_vocab, text_hidden_size=text_hidden, position_id_per_seconds=13,
        rope_scaling={"interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"},
        codec_eos_token_id=2150, codec_pad_id=2148, codec_bos_id=2149, codec_think_id=2154,
        codec_nothink_id=2155, codec_think_bos_id=2156, codec_think_eos_id=2157,
        codec_language_id={**LANGUAGES, **(DIALECTS if custom else {})},
        spk_id=dict(SPEAKERS) if custom else {}, spk_is_dialect=dict(SPEAKER_DIALECTS) if custom else {},
        code_predictor_config=pred)
    cfg = dict(architectures=["Qwen3TTSForConditionalGeneration"], model_type="qwen3_tts",
               tokenizer_type="qwen3_tts_tokenizer_12hz", tts_model_size="1b7" if big else "0b6",
               tts_model_type=kind, im_start_token_id=text_ids["<|im_start|>"],
               im_end_token_id=text_ids["<|im_end|>"],
               tts_pad_token_id=text_ids["<tts_pad>"], tts_bos_token_id=text_ids["<tts_text_bos>"],
               tts_eos_token_id=text_ids["<tts_text_eod>"], talker_config=talker)
    if not tiny:
        cfg["assistant_token_id"] = 77091
    if kind == "base":
        cfg["speaker_encoder_config"] = {"enc_dim": talker["hidden_size"], "sample_rate": 24000}
    return cfg


@torch.no_grad()
def random_talker_state(config: dict, seed: int, eos_scale: float = 1.0) -> dict[str, torch.Tensor]:
    """Random bf16 tensors ``{official name: tensor}`` for the talker of ``config``.

    Linear weights ~ N(0, 1/fan_in), embeddings ~ N(0, 1), biases ~ N(0, 0.02²) and norm
    weights ~ 1 + N(0, 0.1²): activations of order 1, so logits are well separated and a
    parity test is not at the mercy of near-ties. Random weights rarely pick EOS;
    ``eos_scale`` (e.g. 3) multiplies the codec head's EOS row so runs end within tens of
    frames."""
    spec = TalkerSpec.from_config(config)
    g = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in Talker(spec).state_dict().items()}
    out = {}
    for name, shape in sorted(shapes.items()):
        x = torch.randn(shape, generator=g)
        if name.endswith("norm.weight"):
            x = 1 + 0.1 * x
        elif name.endswith("bias"):
            x = 0.02 * x
        elif "embedding" not in name:
            x = x / shape[-1] ** 0.5
        if name == "codec_head.weight":
            x[spec.codec_eos_id] *= eos_scale
        out["talker." + name] = x.to(torch.bfloat16).contiguous()
    return out


MARK = "vocalis.random_checkpoint"  # metadata key of the talker weights written here


def is_random_talker(folder: Path) -> bool:
    """``folder`` holds talker weights written by :func:`write_random_talker`."""
    from safetensors import safe_open

    try:
        with safe_open(str(Path(folder) / "model.safetensors"), framework="pt") as f:
            return MARK in (f.metadata() or {})
    except Exception:  # noqa: BLE001 - missing or not safetensors: not ours
        return False


def write_random_talker(out_dir: Path | str, config: dict, seed: int,
                        extra_tensors: dict[str, torch.Tensor] | None = None, eos_scale: float = 1.0) -> None:
    """Write ``config.json``, ``generation_config.json`` and ``model.safetensors`` (bf16)
    of a random talker for ``config`` (a dict as from :func:`talker_config`) into
    ``out_dir``. ``extra_tensors`` (e.g. ``speaker_encoder.*`` for Base) are saved with it;
    ``eos_scale`` as in :func:`random_talker_state`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state = random_talker_state(config, seed, eos_scale)
    state.update(extra_tensors or {})
    save_file(state, out / "model.safetensors", metadata={"format": "pt", MARK: "qwen3-tts"})
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG, indent=2) + "\n")
