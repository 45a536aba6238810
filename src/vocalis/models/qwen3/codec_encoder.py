"""Qwen3-TTS-Tokenizer-12Hz encoder: 24 kHz waveform -> 16 codebooks x T frames (12.5 Hz).

Used only for the reference audio of Base in-context voice cloning. The official encoder is
transformers' ``MimiModel`` without its decoder half (``Qwen3TTSTokenizerV2Encoder``,
``qwen_tts/core/tokenizer_12hz/modeling_qwen3_tts_tokenizer_v2.py:899-908``, cited ``M:line``)
called as ``encoder.encode(wav[:, None])`` without a padding mask (M:981), keeping the first
``encoder_valid_num_quantizers`` (16) codebooks and ``ceil(valid_samples / 1920)`` frames per
item (M:983-984). The Mimi math follows transformers 4.57.3
``models/mimi/modeling_mimi.py`` (cited ``T:line``):

* SEANet encoder of causal convs (T:204-342, 402-486): left pad ``kernel - stride`` plus the
  right pad that completes the last stride, zeros (``replicate`` for the downsampler);
* a transformer with LayerNorm, RoPE, **full** causal attention (``create_causal_mask``
  ignores Mimi's ``sliding_window`` in 4.57.3), GELU MLP, layer scales, no final norm
  (T:826-1147);
* a stride-2 downsampler to 12.5 Hz, then split residual VQ by nearest centroid with
  ``torch.cdist`` (T:1183-1357).

Tensor names are those of the ``encoder.`` prefix of ``speech_tokenizer/model.safetensors``.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from vocalis.errors import InputError, ModelNotFound
from vocalis.models.qwen3.codec import _load_prefixed


def _cfg(d: dict, key: str, default):
    v = d.get(key, default)
    return default if v is None else v


class MimiConv(nn.Module):
    """Causal Conv1d with Mimi's padding (T:321-341): ``[B, C_in, L] -> [B, C_out, ceil(L/s)]``."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1, dilation: int = 1,
                 bias: bool = True, pad_mode: str = "constant"):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride, dilation=dilation, bias=bias)
        self.stride = stride
        self.pad_total = (kernel - 1) * dilation + 1 - stride
        self.pad_mode = pad_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-1]
        extra = -(-length // self.stride) * self.stride - length  # T:262-272, exact integers
        x = F.pad(x, (self.pad_total, extra), mode=self.pad_mode)
        return self.conv(x)


class ResnetBlock(nn.Module):
    """``x + conv1(elu(conv_k(elu(x))))``, hidden width ``dim // compress`` (T:402-441)."""

    def __init__(self, dim: int, kernel: int, dilation: int, compress: int, pad_mode: str):
        super().__init__()
        hidden = dim // compress
        self.block = nn.ModuleList([nn.ELU(), MimiConv(dim, hidden, kernel, dilation=dilation,
                                                       pad_mode=pad_mode),
                                    nn.ELU(), MimiConv(hidden, dim, 1, pad_mode=pad_mode)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for layer in self.block:
            h = layer(h)
        return x + h


class SEANetEncoder(nn.Module):
    """Waveform ``[B, 1, L]`` -> ``[B, hidden, ceil(L / hop)]``, hop = prod(ratios) (T:444-486)."""

    def __init__(self, c: dict):
        super().__init__()
        nf, pad = c["num_filters"], c["pad_mode"]
        layers: list[nn.Module] = [MimiConv(c["audio_channels"], nf, c["kernel_size"], pad_mode=pad)]
        scale = 1
        for ratio in reversed(c["upsampling_ratios"]):
            dim = scale * nf
            for j in range(c["num_residual_layers"]):
                layers.append(ResnetBlock(dim, c["residual_kernel_size"],
                                          c["dilation_growth_rate"] ** j, c["compress"], pad))
            layers += [nn.ELU(), MimiConv(dim, 2 * dim, 2 * ratio, ratio, pad_mode=pad)]
            scale *= 2
        layers += [nn.ELU(), MimiConv(scale * nf, c["hidden_size"], c["last_kernel_size"],
                                      pad_mode=pad)]
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class _Scale(nn.Module):
    def __init__(self, dim: int, init: float):
        super().__init__()
        self.scale = nn.Parameter(torch.full((dim,), init))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


class _Attention(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        h, hkv, d, dim = (c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"],
                          c["hidden_size"])
        bias = c["attention_bias"]
        self.heads, self.kv_heads, self.head_dim = h, hkv, d
        self.q_proj = nn.Linear(dim, h * d, bias=bias)
        self.k_proj = nn.Linear(dim, hkv * d, bias=bias)
        self.v_proj = nn.Linear(dim, hkv * d, bias=bias)
        self.o_proj = nn.Linear(h * d, dim, bias=bias)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Causal SDPA as ``MimiSdpaAttention`` without a mask (T:835-907)."""
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        half = self.head_dim // 2
        q = q * cos + torch.cat([-q[..., half:], q[..., :half]], dim=-1) * sin
        k = k * cos + torch.cat([-k[..., half:], k[..., :half]], dim=-1) * sin
        if self.heads != self.kv_heads:
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class _Mlp(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        if c["hidden_act"] != "gelu":
            raise NotImplementedError(f"Mimi hidden_act {c['hidden_act']!r}")
        self.fc1 = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.fc2 = nn.Linear(c["intermediate_size"], c["hidden_size"], bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class _Layer(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        dim, eps, ls = c["hidden_size"], c["norm_eps"], c["layer_scale_initial_scale"]
        self.self_attn = _Attention(c)
        self.mlp = _Mlp(c)
        self.input_layernorm = nn.LayerNorm(dim, eps=eps)
        self.post_attention_layernorm = nn.LayerNorm(dim, eps=eps)
        self.self_attn_layer_scale = _Scale(dim, ls)
        self.mlp_layer_scale = _Scale(dim, ls)

    def forward(self, x, cos, sin):
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), cos, sin))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class EncoderTransformer(nn.Module):
    """``[B, T, hidden] -> [B, T, hidden]``; positions 0..T-1 (T:997-1147)."""

    def __init__(self, c: dict):
        super().__init__()
        d = c["head_dim"]
        self.register_buffer("inv_freq", 1.0 / (c["rope_theta"] ** (
            torch.arange(0, d, 2, dtype=torch.int64).float() / d)), persistent=False)
        self.layers = nn.ModuleList(_Layer(c) for _ in range(c["num_hidden_layers"]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(x.shape[1], device=x.device).float()
        freqs = pos[:, None] * self.inv_freq.float()[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return x


class _Codebook(nn.Module):
    """Mimi codebook buffers ``initialized``, ``cluster_usage``, ``embed_sum`` (T:1183-1226)."""

    def __init__(self, size: int, dim: int):
        super().__init__()
        self.register_buffer("initialized", torch.tensor([True], dtype=torch.float32))
        self.register_buffer("cluster_usage", torch.ones(size))
        self.register_buffer("embed_sum", torch.zeros(size, dim))

    def embed(self) -> torch.Tensor:
        return self.embed_sum / self.cluster_usage.clamp(min=1e-5)[:, None]


class _VQLayer(nn.Module):
    def __init__(self, size: int, dim: int):
        super().__init__()
        self.codebook = _Codebook(size, dim)


class _RVQ(nn.Module):
    def __init__(self, c: dict, n: int):
        super().__init__()
        self.layers = nn.ModuleList(_VQLayer(c["codebook_size"], c["codebook_dim"])
                                    for _ in range(n))
        vq, hid = c["vector_quantization_hidden_dimension"], c["hidden_size"]
        self.input_proj = nn.Conv1d(hid, vq, 1, bias=False) if vq != hid else None
        self.output_proj = nn.Conv1d(vq, hid, 1, bias=False) if vq != hid else None

    def encode(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """``[B, hidden, T]`` -> codes ``[n, B, T]``: greedy residual nearest centroids
        (T:1269-1287; distances by ``torch.cdist`` in float32 as T:1205-1210)."""
        if self.input_proj is not None:
            x = self.input_proj(x)
        residual, out = x, []
        for layer in self.layers[:n]:
            h = residual.permute(0, 2, 1)
            flat = h.reshape(-1, h.shape[-1])
            table = layer.codebook.embed()
            idx = torch.cdist(flat[None].float(), table[None].float(), p=2)[0].argmin(dim=-1)
            idx = idx.view(*h.shape[:-1])
            residual = residual - F.embedding(idx, table).permute(0, 2, 1)
            out.append(idx)
        return torch.stack(out)


class _SplitRVQ(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        sem = c["num_semantic_quantizers"]
        self.semantic_residual_vector_quantizer = _RVQ(c, sem)
        self.acoustic_residual_vector_quantizer = _RVQ(c, c["num_quantizers"] - sem)

    def encode(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """``[B, hidden, T]`` -> ``[B, n, T]`` (T:1318-1345)."""
        sem = len(self.semantic_residual_vector_quantizer.layers)
        codes = self.semantic_residual_vector_quantizer.encode(x, sem)
        if n > sem:
            codes = torch.cat([codes, self.acoustic_residual_vector_quantizer.encode(x, n - sem)])
        return codes.transpose(0, 1)


_MIMI_DEFAULTS = dict(
    sampling_rate=24000, audio_channels=1, hidden_size=512, num_filters=64, num_residual_layers=1,
    upsampling_ratios=[8, 6, 5, 4], kernel_size=7, last_kernel_size=3, residual_kernel_size=3,
    dilation_growth_rate=2, use_causal_conv=True, pad_mode="constant", compress=2,
    trim_right_ratio=1.0, codebook_size=2048, codebook_dim=256, num_quantizers=32,
    use_conv_shortcut=False, vector_quantization_hidden_dimension=256, num_semantic_quantizers=1,
    num_hidden_layers=8, intermediate_size=2048, num_attention_heads=8, num_key_value_heads=8,
    head_dim=None, hidden_act="gelu", norm_eps=1e-5, rope_theta=10000.0,
    layer_scale_initial_scale=0.01, attention_bias=False)  # transformers MimiConfig defaults


class SpeechEncoder(nn.Module):
    """Mimi encoder half (``encoder``, ``encoder_transformer``, ``downsample``, ``quantizer``).

    Args:
        config: the ``encoder_config`` dict of ``speech_tokenizer/config.json`` (transformers
            ``MimiConfig`` fields; missing ones take MimiConfig's defaults).
        valid_quantizers: codebooks kept (``encoder_valid_num_quantizers``, 16).
        frame_samples: input samples per output frame (``encode_downsample_rate``, 1920).
    """

    def __init__(self, config: dict, valid_quantizers: int = 16, frame_samples: int = 1920):
        super().__init__()
        c = {**_MIMI_DEFAULTS, **{k: v for k, v in config.items() if v is not None}}
        c["head_dim"] = c["head_dim"] or c["hidden_size"] // c["num_attention_heads"]
        if not c["use_causal_conv"] or c["use_conv_shortcut"] or c["audio_channels"] != 1:
            raise NotImplementedError("only causal, mono Mimi encoders without conv shortcut")
        self.config = c
        self.valid_quantizers = valid_quantizers
        self.frame_samples = frame_samples
        self.encoder = SEANetEncoder(c)
        self.encoder_transformer = EncoderTransformer(c)
        hop = math.prod(c["upsampling_ratios"])
        ratio = int(math.ceil(c["sampling_rate"] / hop) / (c["sampling_rate"] / frame_samples))
        self.downsample = MimiConv(c["hidden_size"], c["hidden_size"], 2 * ratio, 2, bias=False,
                                   pad_mode="replicate")  # T:1404-1414
        self.quantizer = _SplitRVQ(c)

    @torch.no_grad()
    def encode(self, wavs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Encode 24 kHz mono waveforms as the official ``Qwen3TTSTokenizer.encode`` does
        after resampling: zero-pad the batch to the longest, encode, keep 16 codebooks and
        ``ceil(len_i / 1920)`` frames of item i.

        Args:
            wavs: float tensors ``[L_i]`` at 24 kHz (resampling is the caller's job; the
                official uses ``librosa.resample``).

        Returns:
            long tensors ``[T_i, 16]``, ``T_i = ceil(L_i / 1920)``.

        Raises:
            InputError: an empty list, an empty or non-1-D waveform.
        """
        if not wavs or any(w.dim() != 1 or w.numel() == 0 for w in wavs):
            raise InputError("encode needs a non-empty list of non-empty 1-D waveforms")
        p = next(self.parameters())
        longest = max(w.numel() for w in wavs)
        x = torch.stack([F.pad(w.to(p.device, p.dtype), (0, longest - w.numel())) for w in wavs])
        h = self.encoder(x[:, None])
        h = self.encoder_transformer(h.transpose(1, 2)).transpose(1, 2)
        codes = self.quantizer.encode(self.downsample(h), self.valid_quantizers)
        return [c[:, : -(-w.numel() // self.frame_samples)].transpose(0, 1)
                for c, w in zip(codes, wavs)]


def load_speech_encoder(directory, device: str | torch.device = "cpu") -> SpeechEncoder:
    """Build the encoder from a ``speech_tokenizer/`` folder (float32), strict names/shapes.

    Raises:
        vocalis.errors.ModelNotFound: a file is missing.
        vocalis.errors.CheckpointError: tensors missing, unexpected or of the wrong shape.
    """
    import json
    from pathlib import Path

    d = Path(directory)
    cfg = json.loads((d / "config.json").read_text()) if (d / "config.json").is_file() else None
    if cfg is None:
        raise ModelNotFound(f"{d / 'config.json'} is missing")
    model = SpeechEncoder(cfg.get("encoder_config") or {},
                          cfg.get("encoder_valid_num_quantizers", 16),
                          cfg.get("encode_downsample_rate", 1920))
    _load_prefixed(model, d / "model.safetensors", "encoder.")
    return model.to(device=device, dtype=torch.float32).eval()
