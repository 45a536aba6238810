"""Qwen3-TTS-Tokenizer-12Hz decoder: 16 codebooks x T frames -> 24 kHz waveform.

Two ways to run it, same weights, same math:

* :meth:`SpeechDecoder.decode`: one shot, equal to the official ``decode`` of
  ``qwen-tts`` 0.1.1 (its 300-frame chunks with 25 frames of left context for inputs
  over 300 frames), or ``full_state=True`` for a single causal pass.
* :meth:`SpeechDecoder.stream`: an exact stateful streaming decoder. A
  :class:`DecoderState` holds, per row, the left context of every causal convolution
  and the keys/values of the last ``sliding_window - 1`` frames of the transformer, so
  frames can be fed any number at a time and rows at different positions decode in one
  call. Each frame gives ``upsample`` (1920) samples. ``chunked=True`` states replay the
  official 300/25 chunking so that streamed audio equals the default one-shot decode.

Official source, cited as ``M:line``: ``qwen_tts/core/tokenizer_12hz/
modeling_qwen3_tts_tokenizer_v2.py`` of ``qwen-tts`` 0.1.1 (identical to
QwenLM/Qwen3-TTS ``022e286``), and ``configuration_qwen3_tts_tokenizer_v2.py`` (``C:line``).
Tensor layout: ``[B, C, T]`` inside convolutions, ``[B, T, D]`` in the transformer; codes
``[B, Q, T]`` long (Q = 16 codebooks); PCM float32 in [-1, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import torch
from torch import nn
from torch.nn import functional as F

from vocalis.errors import CheckpointError, InputError, ModelNotFound
from vocalis.models.packed import (
    can_pack_linears,
    conv_taps_weight,
    pack_linears,
    packed_matmul,
    packed_weight,
    unfolded_conv,
    unpack_linears,
)

CHUNK_FRAMES = 300  # M:886 chunked_decode(chunk_size=300, ...)
CHUNK_CONTEXT = 25  # M:886 left_context_size=25
SHORT_CONV = 2048  # outputs up to which a conv runs as per-tap matmuls (see CausalConv)


@dataclass(frozen=True)
class DecoderConfig:
    """``decoder_config`` of ``speech_tokenizer/config.json``. Defaults are the official
    class's (C:72-94), so a key missing from a config.json means what it means there;
    ``head_dim`` and ``codebook_dim`` come only from config.json officially (``head_dim``
    falls back to ``hidden_size // num_attention_heads``, M:289; ``codebook_dim`` has no
    fallback, 512 here). The released tokenizer sets hidden_size 512, intermediate_size
    1024, head_dim 64 (``random_codec.REAL_CONFIG``). Keys the decoder does not read
    (``semantic_codebook_size``, ...) are ignored."""

    codebook_size: int = 2048
    codebook_dim: int = 512
    latent_dim: int = 1024
    decoder_dim: int = 1536
    hidden_size: int = 1024
    intermediate_size: int = 3072
    head_dim: int | None = None
    num_attention_heads: int = 16
    num_key_value_heads: int = 16
    num_hidden_layers: int = 8
    num_quantizers: int = 16
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    sliding_window: int = 72
    layer_scale_initial_scale: float = 0.01
    max_position_embeddings: int = 8000
    attention_bias: bool = False
    hidden_act: str = "silu"
    upsample_rates: tuple[int, ...] = (8, 5, 4, 3)
    upsampling_ratios: tuple[int, ...] = (2, 2)

    @classmethod
    def from_dict(cls, d: dict) -> "DecoderConfig":
        known = {f.name for f in fields(cls)}
        kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items() if k in known}
        return cls(**kw)

    def to_dict(self) -> dict:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in fields(self)}

    @property
    def attn_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def upsample(self) -> int:
        """Samples per frame: product of all up-sampling factors (M:827)."""
        return math.prod(self.upsample_rates) * math.prod(self.upsampling_ratios)


@dataclass(frozen=True)
class SpeechTokenizerConfig:
    """Top level of ``speech_tokenizer/config.json`` (C:143-169)."""

    decoder: DecoderConfig = field(default_factory=DecoderConfig)
    encoder: dict = field(default_factory=dict)  # transformers MimiConfig fields
    encoder_valid_num_quantizers: int = 16
    input_sample_rate: int = 24000
    output_sample_rate: int = 24000
    decode_upsample_rate: int = 1920
    encode_downsample_rate: int = 1920

    @classmethod
    def from_dict(cls, d: dict) -> "SpeechTokenizerConfig":
        top = {f.name for f in fields(cls)} - {"decoder", "encoder"}
        return cls(decoder=DecoderConfig.from_dict(d.get("decoder_config") or {}),
                   encoder=dict(d.get("encoder_config") or {}),
                   **{k: v for k, v in d.items() if k in top})


# ---------------------------------------------------------------- streaming state


@dataclass
class DecoderState:
    """Streaming state of R rows (row r is one utterance).

    * ``convs``: one tensor ``[R, C, H]`` per causal convolution, in call order: its last
      H input samples (H = dilation * (kernel - 1); 1 frame for the up-sampling transposed
      convs). Zeros at start = the official zero left padding (M:191).
    * ``kv``: ``[L, 2, R, H_kv, W - 1, D]`` rotated keys and values of the last
      ``W - 1`` frames (W = ``sliding_window``); slots of frames before the row's start
      are masked.
    * ``pos``: long ``[R]``, RoPE position of the next frame (frames since the last
      transformer restart).
    * ``frames``: long ``[R]``, frames decoded since the start of the utterance.
    * ``chunked``: replay the official 300/25 chunking (M:886-896); then ``shadow`` is a
      second state of R rows that starts fresh 25 frames before each chunk boundary and
      replaces the row's state at the boundary.
    """

    convs: list[torch.Tensor]
    kv: torch.Tensor
    pos: torch.Tensor
    frames: torch.Tensor
    chunked: bool = False
    shadow: "DecoderState | None" = None

    @property
    def rows(self) -> int:
        return self.pos.shape[0]

    def take(self, idx: torch.Tensor) -> "DecoderState":
        """Copy of rows ``idx`` (long ``[B]``) as a state of B rows."""
        return DecoderState([c.index_select(0, idx) for c in self.convs],
                            self.kv.index_select(2, idx), self.pos[idx], self.frames[idx],
                            self.chunked, None if self.shadow is None else self.shadow.take(idx))

    def put(self, idx: torch.Tensor, sub: "DecoderState") -> None:
        """Write the B rows of ``sub`` back to rows ``idx``."""
        for c, s in zip(self.convs, sub.convs):
            c.index_copy_(0, idx, s)
        self.kv.index_copy_(2, idx, sub.kv)
        self.pos.index_copy_(0, idx, sub.pos)
        self.frames.index_copy_(0, idx, sub.frames)
        if self.shadow is not None:
            self.shadow.put(idx, sub.shadow)

    def reset(self, idx: torch.Tensor) -> None:
        """Start rows ``idx`` afresh (a new utterance in those rows)."""
        for c in self.convs:
            c.index_fill_(0, idx, 0.0)
        self.kv.index_fill_(2, idx, 0.0)
        self.pos.index_fill_(0, idx, 0)
        self.frames.index_fill_(0, idx, 0)
        if self.shadow is not None:
            self.shadow.reset(idx)


class _ConvStates:
    """The conv histories of one forward: read in call order, replaced by the new tails."""

    def __init__(self, old: list[torch.Tensor]):
        self.old, self.new = old, []

    def extend(self, x: torch.Tensor, keep: int) -> torch.Tensor:
        prev = self.old[len(self.new)]
        if prev.shape[1] != x.shape[1] or prev.shape[2] != keep:
            raise RuntimeError("decoder state does not fit this decoder")
        full = torch.cat([prev, x], dim=-1)
        self.new.append(full[..., full.shape[-1] - keep:].clone())  # not a view of full
        return full


# ---------------------------------------------------------------- building blocks


class CausalConv(nn.Module):
    """Stride-1 causal Conv1d, left-padded with ``dilation * (kernel - 1)`` zeros (M:159-192;
    with stride 1 the official ``extra_padding`` is 0). ``[B, C_in, n] -> [B, C_out, n]``."""

    def __init__(self, c_in: int, c_out: int, kernel: int, dilation: int = 1, groups: int = 1):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel, dilation=dilation, groups=groups)
        self.history = dilation * (kernel - 1)
        self.packed: torch.Tensor | None = None  # see pack()

    def pack(self, on: bool) -> None:
        """Short inputs as one oneDNN matmul over the unfolded input (``on``), with the
        weight packed once as ``[C_out, K * C_in]`` (column ``k * C_in + c`` is tap k of
        input channel c), or as per-tap matmuls (off). Same products, float rounding apart."""
        self.packed = conv_taps_weight(self.conv) if on and self.conv.groups == 1 else None

    def forward(self, x: torch.Tensor, st: _ConvStates) -> torch.Tensor:
        if self.history:
            x = st.extend(x, self.history)
        n = x.shape[-1] - self.history
        if n > SHORT_CONV or self.conv.groups != 1:
            return self.conv(x)
        if self.packed is not None:
            return unfolded_conv(x, n, self.conv, self.packed)
        # short inputs (streaming): one matmul per tap; PyTorch's CPU conv re-lays the weight
        # out on every call, which dominates when only a few outputs are computed
        w, d = self._taps(), self.conv.dilation[0]
        y = self.conv.bias[:, None] + torch.matmul(w[0], x[..., :n])
        for k in range(1, w.shape[0]):
            y = y + torch.matmul(w[k], x[..., k * d: k * d + n])
        return y

    def _taps(self) -> torch.Tensor:
        """The weight as ``[K, C_out, C_in]`` contiguous, cached until it changes."""
        w = self.conv.weight
        key = (w.data_ptr(), w._version, w.dtype, w.device)
        if getattr(self, "_tap_cache", None) is None or self._tap_cache[0] != key:
            self._tap_cache = (key, w.permute(2, 0, 1).contiguous())
        return self._tap_cache[1]


class CausalTransConv(nn.Module):
    """ConvTranspose1d(kernel K, stride s) trimmed of its last ``K - s`` samples (v0.1.0+
    trimming, M:195-208). ``[B, C_in, n] -> [B, C_out, n * s]``.

    Computed as one matmul ``x^T @ W`` (input frame i -> K output samples) and an overlap-add,
    the same products and sums as the col2im transposed conv, without PyTorch's CPU fallback
    that re-lays the weight out on every call (1.2 s per call at real size for short inputs).
    With ``K = 2s`` output frame i is the first half of input i plus the second half of input
    i - 1: the state keeps the last input frame. With ``K = s`` there is no state.
    """

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int):
        super().__init__()
        if kernel not in (stride, 2 * stride):
            raise NotImplementedError("CausalTransConv supports kernel == stride or 2 * stride")
        self.conv = nn.ConvTranspose1d(c_in, c_out, kernel, stride=stride)
        self.stride = stride
        self.history = (kernel - stride) // stride
        self.packed: torch.Tensor | None = None  # see pack()

    def pack(self, on: bool) -> None:
        """The matmul through a oneDNN-packed ``[C_out * K, C_in]`` weight (``on``)."""
        w = self.conv.weight
        self.packed = packed_weight(w.reshape(w.shape[0], -1).T) if on else None

    def forward(self, x: torch.Tensor, st: _ConvStates) -> torch.Tensor:
        if self.history:
            x = st.extend(x, 1)
        w, s = self.conv.weight, self.stride
        b, c_in, m = x.shape
        c_out = w.shape[1]
        if self.packed is not None:
            p = packed_matmul(x.transpose(1, 2).reshape(b * m, c_in), self.packed, None)
        else:
            p = torch.matmul(x.transpose(1, 2), w.reshape(c_in, -1))  # [B, m, C_out * K]
        p = p.view(b, m, c_out, self.history + 1, s)
        y = p[:, 1:, :, 0] + p[:, :-1, :, 1] if self.history else p[:, :, :, 0]
        y = y + self.conv.bias[:, None]
        return y.permute(0, 2, 1, 3).reshape(b, c_out, -1)


class SnakeBeta(nn.Module):
    """``x + 1 / (exp(beta) + 1e-9) * sin(x * exp(alpha))^2`` per channel, computed in
    float32 whatever the model dtype (M:578-616; bf16 gives NaN/silence)."""

    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        alpha = torch.exp(self.alpha.float()[None, :, None])
        beta = torch.exp(self.beta.float()[None, :, None])
        h = h + (1.0 / (beta + 1e-9)) * torch.pow(torch.sin(h * alpha), 2)
        return h.to(x.dtype)


class ConvNeXtBlock(nn.Module):
    """Causal depthwise conv k7 -> LayerNorm(1e-6) -> Linear(4x) -> GELU(exact) -> Linear
    -> ``gamma *`` -> residual (M:211-243)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = CausalConv(dim, dim, 7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6))

    def forward(self, x: torch.Tensor, st: _ConvStates) -> torch.Tensor:
        h = self.dwconv(x, st).permute(0, 2, 1)
        h = self.pwconv2(F.gelu(self.pwconv1(self.norm(h))))
        return x + (self.gamma * h).permute(0, 2, 1)


class ResidualUnit(nn.Module):
    """``x + conv1x1(snake(conv7_dilated(snake(x))))`` (M:619-635)."""

    def __init__(self, dim: int, dilation: int):
        super().__init__()
        self.act1 = SnakeBeta(dim)
        self.conv1 = CausalConv(dim, dim, 7, dilation=dilation)
        self.act2 = SnakeBeta(dim)
        self.conv2 = CausalConv(dim, dim, 1)

    def forward(self, x: torch.Tensor, st: _ConvStates) -> torch.Tensor:
        return self.conv2(self.act2(self.conv1(self.act1(x), st)), st) + x


class DecoderBlock(nn.Module):
    """SnakeBeta -> CausalTransConv(2r, r) -> residual units with dilation 1, 3, 9 (M:638-658)."""

    def __init__(self, c_in: int, c_out: int, rate: int):
        super().__init__()
        self.block = nn.ModuleList([SnakeBeta(c_in), CausalTransConv(c_in, c_out, 2 * rate, rate)]
                                   + [ResidualUnit(c_out, d) for d in (1, 3, 9)])

    def forward(self, x: torch.Tensor, st: _ConvStates) -> torch.Tensor:
        x = self.block[1](self.block[0](x), st)
        for unit in self.block[2:]:
            x = unit(x, st)
        return x


class RMSNorm(nn.Module):
    """``weight * (x * rsqrt(mean(x^2) + eps))`` in float32 (M:373-388)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class LayerScale(nn.Module):
    def __init__(self, dim: int, init: float):
        super().__init__()
        self.scale = nn.Parameter(torch.full((dim,), init))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x * cos + rotate_half(x) * sin`` (halves layout, M:75-106)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


_ACTS = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu}


class Attention(nn.Module):
    """Sliding-window causal self-attention, no q/k norm, RoPE (M:282-354)."""

    def __init__(self, c: DecoderConfig):
        super().__init__()
        h, hkv, d = c.num_attention_heads, c.num_key_value_heads, c.attn_head_dim
        self.heads, self.kv_heads, self.head_dim = h, hkv, d
        self.q_proj = nn.Linear(c.hidden_size, h * d, bias=c.attention_bias)
        self.k_proj = nn.Linear(c.hidden_size, hkv * d, bias=c.attention_bias)
        self.v_proj = nn.Linear(c.hidden_size, hkv * d, bias=c.attention_bias)
        self.o_proj = nn.Linear(h * d, c.hidden_size, bias=c.attention_bias)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                kv: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x ``[B, n, hidden]``; cos/sin ``[B, 1, n, D]``; kv ``[2, B, H_kv, W-1, D]``
        (past window); mask bool ``[B, 1, n, W-1+n]`` -> (``[B, n, hidden]``, new kv)."""
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        keys = torch.cat([kv[0], k], dim=2)
        values = torch.cat([kv[1], v], dim=2)
        rep = self.heads // self.kv_heads
        kr = keys.repeat_interleave(rep, dim=1) if rep > 1 else keys
        vr = values.repeat_interleave(rep, dim=1) if rep > 1 else values
        y = F.scaled_dot_product_attention(q, kr, vr, attn_mask=mask,
                                           scale=self.head_dim ** -0.5)
        y = self.o_proj(y.transpose(1, 2).reshape(b, n, -1))
        w = kv.shape[3]
        return y, torch.stack([keys[:, :, keys.shape[2] - w:], values[:, :, values.shape[2] - w:]])


class Mlp(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        if c.hidden_act not in _ACTS:
            raise NotImplementedError(f"hidden_act {c.hidden_act!r}")
        self.act = _ACTS[c.hidden_act]
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class TransformerLayer(nn.Module):
    """Pre-norm: ``x += ls(attn(norm(x)))``; ``x += ls(mlp(norm(x)))`` (M:409-472)."""

    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = Mlp(c)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn_layer_scale = LayerScale(c.hidden_size, c.layer_scale_initial_scale)
        self.mlp_layer_scale = LayerScale(c.hidden_size, c.layer_scale_initial_scale)

    def forward(self, x, cos, sin, kv, mask):
        h, kv = self.self_attn(self.input_layernorm(x), cos, sin, kv, mask)
        x = x + self.self_attn_layer_scale(h)
        x = x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))
        return x, kv


class PreTransformer(nn.Module):
    """input_proj -> layers -> RMSNorm -> output_proj (M:476-575). RoPE positions continue
    from the state (the official forward starts at 0 on every call, M:525-532)."""

    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.window = c.sliding_window
        d = c.attn_head_dim
        # transformers' default RoPE init: 1 / theta^(arange(0, d, 2) / d) in float32
        self.register_buffer("inv_freq", 1.0 / (c.rope_theta ** (
            torch.arange(0, d, 2, dtype=torch.int64).float() / d)), persistent=False)
        self.layers = nn.ModuleList(TransformerLayer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.input_proj = nn.Linear(c.latent_dim, c.hidden_size)
        self.output_proj = nn.Linear(c.hidden_size, c.latent_dim)

    def forward(self, x: torch.Tensor, kv: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x ``[B, n, latent]``; kv ``[L, 2, B, H_kv, W-1, D]`` (updated in place); pos
        long ``[B]`` -> ``[B, n, latent]``."""
        b, n, _ = x.shape
        x = self.input_proj(x)
        p = pos[:, None] + torch.arange(n, device=x.device)  # [B, n]
        freqs = p[:, :, None].float() * self.inv_freq[None, None, :].float()
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().to(x.dtype)[:, None], emb.sin().to(x.dtype)[:, None]
        # key slot j of [past W-1 | new n] holds frame pos - (W-1) + j; query i (frame pos + i)
        # sees slots j with i <= j <= i + W - 1 (M:551: k > q - W) holding a frame >= 0.
        w = self.window - 1
        j = torch.arange(w + n, device=x.device)
        i = torch.arange(n, device=x.device)[:, None]
        band = (j[None, :] >= i) & (j[None, :] <= i + w)  # [n, W-1+n]
        real = (pos[:, None] - w + j[None, :]) >= 0  # [B, W-1+n]
        mask = (band[None] & real[:, None, :])[:, None]
        for li, layer in enumerate(self.layers):
            x, kv[li] = layer(x, cos, sin, kv[li], mask)
        return self.output_proj(self.norm(x))


class Codebook(nn.Module):
    """EMA codebook: vectors ``embedding_sum / clamp(cluster_usage, 1e-5)`` (M:661-679)."""

    def __init__(self, dim: int, size: int):
        super().__init__()
        self.cluster_usage = nn.Parameter(torch.ones(size))
        self.embedding_sum = nn.Parameter(torch.zeros(size, dim))
        self._table: tuple | None = None

    def table(self) -> torch.Tensor:
        """``[size, dim]``, cached until either parameter changes (in place or replaced)."""
        u, e = self.cluster_usage, self.embedding_sum
        key = (u.data_ptr(), u._version, e.data_ptr(), e._version, e.dtype, e.device)
        if self._table is None or self._table[0] != key:
            self._table = (key, e / u.clamp(min=1e-5)[:, None])
        return self._table[1]


class _VQ(nn.Module):
    def __init__(self, dim: int, size: int):
        super().__init__()
        self._codebook = Codebook(dim, size)


class _RVQLayers(nn.Module):
    def __init__(self, n: int, dim: int, size: int):
        super().__init__()
        self.layers = nn.ModuleList(_VQ(dim, size) for _ in range(n))


class ResidualVQ(nn.Module):
    """Sum of n codebook lookups, then ``output_proj`` (Conv1d k1, no bias) (M:714-777).
    ``input_proj`` is only used by the encoder; kept for the checkpoint layout."""

    def __init__(self, n: int, dim: int, io_dim: int, size: int):
        super().__init__()
        self.vq = _RVQLayers(n, dim, size)
        self.input_proj = nn.Conv1d(io_dim, dim, 1, bias=False)
        self.output_proj = nn.Conv1d(dim, io_dim, 1, bias=False)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes ``[B, n, T]`` -> ``[B, io_dim, T]``."""
        q = torch.zeros([1], device=codes.device)[0]
        for layer, c in zip(self.vq.layers, codes.unbind(1)):
            q = q + F.embedding(c, layer._codebook.table()).transpose(1, 2)
        return self.output_proj(q)


class SplitRVQ(nn.Module):
    """Codebook 0 (``rvq_first``) and codebooks 1..Q-1 (``rvq_rest``), summed (M:780-821)."""

    def __init__(self, c: DecoderConfig):
        super().__init__()
        dim = c.codebook_dim // 2
        self.rvq_first = ResidualVQ(1, dim, c.codebook_dim, c.codebook_size)
        self.rvq_rest = ResidualVQ(c.num_quantizers - 1, dim, c.codebook_dim, c.codebook_size)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self.rvq_first.decode(codes[:, :1]) + self.rvq_rest.decode(codes[:, 1:])


# ---------------------------------------------------------------- the decoder


class SpeechDecoder(nn.Module):
    """The 12 Hz speech-tokenizer decoder (``Qwen3TTSTokenizerV2Decoder``, M:824-896).

    Parameter names are the official ones under the ``decoder.`` prefix of
    ``speech_tokenizer/model.safetensors``. Computation is float32 by default.
    """

    def __init__(self, config: DecoderConfig):
        super().__init__()
        c = self.config = config
        self.frame_samples = c.upsample
        self.quantizer = SplitRVQ(c)
        self.pre_conv = CausalConv(c.codebook_dim, c.latent_dim, 3)
        self.pre_transformer = PreTransformer(c)
        self.upsample = nn.ModuleList(
            nn.ModuleList([CausalTransConv(c.latent_dim, c.latent_dim, f, f),
                           ConvNeXtBlock(c.latent_dim)]) for f in c.upsampling_ratios)
        dims = [c.decoder_dim // 2 ** i for i in range(len(c.upsample_rates) + 1)]
        self.decoder = nn.ModuleList(
            [CausalConv(c.latent_dim, c.decoder_dim, 7)]
            + [DecoderBlock(dims[i], dims[i + 1], r) for i, r in enumerate(c.upsample_rates)]
            + [SnakeBeta(dims[-1]), CausalConv(dims[-1], 1, 7)])
        self._packed_linears: list | None = None

    # -- kernels

    @property
    def packed(self) -> bool:
        """Streaming runs its matmuls through oneDNN-packed weights (:meth:`pack`)."""
        return self._packed_linears is not None

    @property
    def can_pack(self) -> bool:
        """:meth:`pack` is possible: float32 weights on a CPU build with oneDNN."""
        w = self.pre_conv.conv.weight
        return w.dtype == torch.float32 and can_pack_linears(w.device)

    def pack(self, on: bool = True) -> None:
        """Run the streaming decoder's matmuls (short convolutions as one matmul over the
        unfolded input, transposed convolutions, the transformer's and ConvNeXt blocks'
        linears) through float32 weights reordered once for oneDNN (``on``), or through
        PyTorch's default kernels (off, as loaded). Both compute the same products and
        agree to float rounding; which is faster depends on the CPU (PyTorch's default
        matmul of a few rows by a large weight can use one thread and stream its weight
        slower than oneDNN's; figures: docs/speed-choices.md), so the engine measures it
        (:mod:`vocalis.models.qwen3.tuning`). The packed weights are a second copy of the
        convolution and linear weights, kept for :meth:`pack` ``(False)`` and for inputs of
        over ``SHORT_CONV`` samples (about 420 MB more at real size: 59 M convolution and
        47 M linear parameters). One-shot :meth:`decode` of short inputs takes the same
        path.

        Raises:
            ValueError: ``on`` for weights oneDNN cannot pack (not float32 on a CPU build
                with oneDNN).
        """
        if on == self.packed:
            return
        if on and not self.can_pack:
            w = self.pre_conv.conv.weight
            raise ValueError(f"oneDNN packs float32 CPU weights, not {w.dtype} on {w.device}")
        for m in self.modules():
            if isinstance(m, (CausalConv, CausalTransConv)):
                m.pack(on)
        if on:
            self._packed_linears = pack_linears(self.pre_transformer) + pack_linears(self.upsample)
        else:
            unpack_linears(self._packed_linears)
            self._packed_linears = None

    # -- state

    def _conv_shapes(self) -> list[tuple[int, int]]:
        """(channels, history) of each stateful conv, in call order."""
        out = [(self.pre_conv.conv.in_channels, self.pre_conv.history)]
        convs = [blk[1].dwconv for blk in self.upsample] + [self.decoder[0]]
        for block in self.decoder[1:-2]:
            convs += [block.block[1]] + [u.conv1 for u in block.block[2:]]
        convs.append(self.decoder[-1])
        for m in convs:
            if m.history:
                out.append((m.conv.in_channels, m.history))
        return out

    def new_state(self, rows: int, chunked: bool = True) -> DecoderState:
        """A fresh streaming state for ``rows`` utterances.

        ``chunked=True`` (default) reproduces the official one-shot decode exactly,
        300/25 chunks included; ``chunked=False`` keeps full state (one causal pass over
        the whole utterance; differs from the official output after frame 300).
        Memory per row: about ``8 * 2 * 71 * 1024 * 4`` bytes of KV (4.7 MB) at real size.
        """
        p = self.pre_conv.conv.weight
        convs = [torch.zeros(rows, ch, h, device=p.device, dtype=p.dtype)
                 for ch, h in self._conv_shapes()]
        c = self.config
        kv = torch.zeros(c.num_hidden_layers, 2, rows, c.num_key_value_heads,
                         c.sliding_window - 1, c.attn_head_dim, device=p.device, dtype=p.dtype)
        zeros = torch.zeros(rows, dtype=torch.long, device=p.device)
        state = DecoderState(convs, kv, zeros, zeros.clone(), chunked)
        if chunked:
            state.shadow = self.new_state(rows, chunked=False)
        return state

    # -- math

    def _forward(self, codes: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """codes ``[B, Q, n]`` over a state of B rows (advanced in place) -> ``[B, n * 1920]``."""
        st = _ConvStates(state.convs)
        x = self.pre_conv(self.quantizer.decode(codes), st).transpose(1, 2)
        x = self.pre_transformer(x, state.kv, state.pos).permute(0, 2, 1)
        for trans, block in self.upsample:
            x = block(trans(x, st), st)
        for m in self.decoder:
            x = m(x, st) if not isinstance(m, SnakeBeta) else m(x)
        state.convs = st.new
        state.pos += codes.shape[-1]
        state.frames += codes.shape[-1]
        return x.clamp(min=-1, max=1)[:, 0]

    def _check(self, codes: torch.Tensor) -> torch.Tensor:
        q = self.config.num_quantizers
        if codes.dim() != 3 or codes.shape[1] != q:
            raise InputError(f"codes must be [batch, {q}, frames], got {tuple(codes.shape)}")
        if codes.dtype not in (torch.int64, torch.int32):
            raise InputError(f"codes must be integers, got {codes.dtype}")
        if codes.numel() and int(codes.max()) >= self.config.codebook_size:
            raise InputError(f"codes must be < {self.config.codebook_size} "
                             "(codebook-0 specials such as EOS are not audio)")
        return codes.long().clamp(min=0)  # M:1014: padding (-1) decodes as code 0

    @torch.no_grad()
    def decode(self, codes: torch.Tensor, full_state: bool = False) -> torch.Tensor:
        """One-shot decode, as the official ``Qwen3TTSTokenizerV2Model.decode`` (M:993-1024).

        Args:
            codes: long ``[B, Q, T]``; negative values are padding and decode as code 0
                (the decoder is causal, so a row's samples before its padding are exact).
            full_state: one causal pass over all T frames instead of the official 300-frame
                chunks with 25 frames of left context (M:886-896); equal up to T = 300.

        Returns:
            float32 ``[B, T * 1920]`` in [-1, 1] at 24 kHz; cut row b to
            ``1920 * (number of its non-padding frames)`` samples as the official does.

        Raises:
            InputError: wrong shape or dtype, or a code >= ``codebook_size``.
        """
        codes = self._check(codes)
        b, _, t = codes.shape
        if t == 0:
            return torch.zeros(b, 0, device=codes.device)
        if full_state or t <= CHUNK_FRAMES:
            return self._forward(codes, self.new_state(b, chunked=False))
        out, start = [], 0
        while start < t:  # M:886-896
            end = min(start + CHUNK_FRAMES, t)
            ctx = CHUNK_CONTEXT if start - CHUNK_CONTEXT > 0 else start
            wav = self._forward(codes[..., start - ctx:end], self.new_state(b, chunked=False))
            out.append(wav[:, ctx * self.frame_samples:])
            start = end
        return torch.cat(out, dim=-1)

    @torch.no_grad()
    def stream(self, state: DecoderState, codes: torch.Tensor,
               rows: torch.Tensor | None = None) -> torch.Tensor:
        """Decode the next n frames of B rows, continuing their state.

        Args:
            state: from :meth:`new_state` (R rows).
            codes: long ``[B, Q, n]``, n >= 1 new frames for each of the B rows (the same n
                for all of them; call once per n otherwise).
            rows: long ``[B]``, which state rows these are, distinct (default: all, B == R).

        Returns:
            float32 ``[B, n * 1920]``: exactly the samples of those frames in the one-shot
            decode (``decode(all_codes, full_state=not state.chunked)``), up to float
            rounding of different sequence lengths and batch shapes.

        Raises:
            InputError: bad codes (see :meth:`decode`) or rows.
        """
        codes = self._check(codes)
        if rows is None:
            if codes.shape[0] != state.rows:
                raise InputError(f"codes have {codes.shape[0]} rows, the state {state.rows}")
            sub = state
        else:
            rows = torch.as_tensor(rows, dtype=torch.long, device=state.pos.device)
            if (rows.dim() != 1 or rows.numel() != codes.shape[0] or rows.unique().numel()
                    != rows.numel() or rows.min() < 0 or rows.max() >= state.rows):
                raise InputError(f"rows must be {codes.shape[0]} distinct state rows in "
                                 f"[0, {state.rows}), got {rows.tolist()}")
            sub = state.take(rows)
        out = self._stream_chunked(codes, sub) if state.chunked else self._forward(codes, sub)
        if rows is not None:
            state.put(rows, sub)
        return out

    def _stream_chunked(self, codes: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Replay the official chunking: a shadow state starts fresh at frame s - 25 for each
        chunk start s = 300k and replaces the row's state at frame s (M:886-896)."""
        n, done, outs = codes.shape[-1], 0, []
        while done < n:
            f = state.frames  # [B]
            phase = torch.remainder(f, CHUNK_FRAMES)
            # frames until this row's next event (shadow start at phase 275, swap at phase 0)
            to_start = torch.remainder(CHUNK_FRAMES - CHUNK_CONTEXT - phase, CHUNK_FRAMES)
            to_swap = torch.remainder(-phase, CHUNK_FRAMES)
            nxt = torch.where(to_start == 0, CHUNK_FRAMES, to_start)
            nxt = torch.minimum(nxt, torch.where(to_swap == 0, CHUNK_FRAMES, to_swap))
            step = min(n - done, int(nxt.min()))
            start_rows = torch.nonzero((to_start == 0) & (f > 0)).flatten()
            swap_rows = torch.nonzero((to_swap == 0) & (f > 0)).flatten()
            shadow = state.shadow
            if len(start_rows):
                shadow.reset(start_rows)
            if len(swap_rows):  # the shadow, 25 frames in, becomes the row's state
                for c, s in zip(state.convs, shadow.convs):
                    c.index_copy_(0, swap_rows, s[swap_rows])
                state.kv.index_copy_(2, swap_rows, shadow.kv[:, :, swap_rows])
                state.pos.index_copy_(0, swap_rows, shadow.pos[swap_rows])
            part = codes[..., done:done + step]
            active = torch.nonzero(phase >= CHUNK_FRAMES - CHUNK_CONTEXT).flatten()
            if len(active):  # the shadow sees the 25 context frames of the next chunk
                sub = shadow.take(active)
                self._forward(part[active], sub)
                shadow.put(active, sub)
            outs.append(self._forward(part, state))
            done += step
        return torch.cat(outs, dim=-1)


def icl_cut_samples(ref_frames: int, total_frames: int, wav_samples: int) -> int:
    """Samples the official ICL path drops from the front of ``decode(cat(ref, generated))``:
    ``int(ref_frames / max(total_frames, 1) * wav_samples)`` in float64
    (``qwen_tts/inference/qwen3_tts_model.py:624-628``). Not always ``1920 * ref_frames``:
    for 15 reference frames of 22 it is 28799, one sample of the reference kept."""
    return int(ref_frames / max(total_frames, 1) * wav_samples)


# ---------------------------------------------------------------- loading


def _load_prefixed(model: nn.Module, path, prefix: str) -> None:
    """Load the tensors named ``prefix + name`` of a safetensors file into ``model`` (strict).

    Raises:
        vocalis.errors.ModelNotFound: the file is missing.
        vocalis.errors.CheckpointError: tensors missing, unexpected or of the wrong shape.
    """
    from pathlib import Path

    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise ModelNotFound(f"{path} is missing: a speech_tokenizer folder needs "
                            "config.json and model.safetensors")
    want = model.state_dict()
    got = {}
    with safe_open(str(path), framework="pt") as f:
        for key in f.keys():
            if key.startswith(prefix):
                got[key[len(prefix):]] = f.get_tensor(key)
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    bad = sorted(k for k in set(want) & set(got) if want[k].shape != got[k].shape)
    if missing or extra or bad:
        raise CheckpointError(
            f"{path} does not fit its config.json ({prefix}*): missing {missing[:3]}, "
            f"unexpected {extra[:3]}, wrong shape {bad[:3]}")
    model.load_state_dict(got, strict=True)


def load_speech_decoder(directory, device: str | torch.device = "cpu",
                        dtype: torch.dtype = torch.float32) -> SpeechDecoder:
    """Build the decoder from a ``speech_tokenizer/`` folder (``config.json`` +
    ``model.safetensors``, official layout) with strict tensor-name and shape checks.

    Raises:
        vocalis.errors.ModelNotFound: a file is missing.
        vocalis.errors.CheckpointError: tensors missing, unexpected or of the wrong shape.
    """
    import json
    from pathlib import Path

    d = Path(directory)
    if not (d / "config.json").is_file():
        raise ModelNotFound(f"{d / 'config.json'} is missing: a speech_tokenizer folder needs "
                            "config.json and model.safetensors")
    cfg = SpeechTokenizerConfig.from_dict(json.loads((d / "config.json").read_text()))
    model = SpeechDecoder(cfg.decoder)
    _load_prefixed(model, d / "model.safetensors", "decoder.")
    return model.to(device=device, dtype=dtype).eval()
