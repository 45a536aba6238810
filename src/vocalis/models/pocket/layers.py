"""Pocket TTS's building blocks: RoPE, attention over a KV cache, transformer layers, and
causal streaming convolutions (the FlowLM and the Mimi codec).

Module attribute names follow the official checkpoints' tensor names so that a
checkpoint's state dict loads with ``strict=True`` and no key mapping.

Numerics: where the official Pocket TTS code fixes an op order (fp32 RoPE with
interleaved pairs, boolean masks from absolute positions, SDPA with its
default scale), the same op order is used here so that batch-1 results are
bit-identical, not merely close.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


def rope_tables(positions: torch.Tensor, head_dim: int, max_period: float
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotary position embedding's factors for :func:`rotate`, computed once for every
    layer of a pass: ``cos2``, ``sin2`` float32 ``[B, T, 1, head_dim]``.

    ``positions``: ``[B, T]``, the absolute position of each row's steps (long, or float32
    holding whole numbers). Pair ``i`` of a step at position ``p`` turns by the angle
    ``p * max_period^(-2i/D)`` (float32, as pocket-tts ``modules/rope.py``; Su et al. 2021,
    arXiv:2104.09864); ``cos2`` holds its cosine in both lanes of the pair, ``sin2`` minus
    its sine in the first and its sine in the second.
    """
    d = int(head_dim)  # a Python int: in a traced graph (vocalis.models.pocket.graphs) a
    # size read from a tensor would be a tensor, and the exponent below float32 tensor
    # arithmetic instead of eager's double-precision Python arithmetic
    freqs = torch.exp(torch.arange(d // 2, device=positions.device, dtype=torch.float32)
                      * (-math.log(max_period) * 2 / d))
    angle = positions.to(torch.float32)[:, :, None, None] * freqs  # [B, T, 1, D/2]
    cos, sin = torch.cos(angle), torch.sin(angle)
    cos2 = torch.stack([cos, cos], dim=-1).flatten(-2)
    sin2 = torch.stack([-sin, sin], dim=-1).flatten(-2)
    return cos2, sin2


def rotate(x: torch.Tensor, cos2: torch.Tensor, sin2: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding with interleaved pairs (GPT-J layout): ``x`` ``[B, T, H,
    D]`` with the factors of :func:`rope_tables` for its steps; same shape and dtype.

    Pair ``(a, b) = (x[..., 2i], x[..., 2i+1])`` becomes ``(a cos - b sin, b cos + a sin)``
    computed in float32, as ``x * cos2 + swapped(x) * sin2``: the same float32 products
    and sums as pocket-tts ``modules/rope.py`` (``a cos - b sin`` as ``a cos + b (-sin)``,
    ``a sin + b cos`` as ``b cos + a sin``: IEEE arithmetic gives the same bits), so the
    same results bit for bit, in four tensor operations instead of some twenty.
    """
    xf = x.float()
    swapped = xf.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)
    return (xf * cos2 + swapped * sin2).to(x.dtype)


def apply_rope(
    q: torch.Tensor, k: torch.Tensor, offset: int | torch.Tensor, max_period: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary position embedding (:func:`rotate`) of queries ``[B, T, H, D]`` and keys
    ``[B, T, Hkv, D]`` whose first step sits at ``offset``: an int for all rows, or a long
    tensor ``[B]`` (one position per row)."""
    t = q.shape[1]
    steps = torch.arange(t, device=q.device)
    if isinstance(offset, torch.Tensor) and offset.dim() == 1:
        positions = offset[:, None] + steps
    else:
        positions = (steps + offset)[None, :]
    cos2, sin2 = rope_tables(positions, q.shape[3], max_period)
    return rotate(q, cos2, sin2), rotate(k, cos2, sin2)


def causal_mask(q_start: int, t: int, k_start: int, s: int, context: int | None,
                device: torch.device) -> torch.Tensor:
    """Boolean attention mask ``[1, 1, t, s]`` from absolute positions.

    Query i sits at ``q_start + i``, key j at ``k_start + j``; a key is visible when
    ``0 <= q - k`` (and ``q - k < context`` for a finite context).
    """
    pos_q = torch.arange(t, device=device, dtype=torch.long).view(1, -1) + q_start
    pos_k = torch.arange(s, device=device, dtype=torch.long).view(1, -1) + k_start
    delta = pos_q[:, :, None] - pos_k[:, None, :]
    mask = (pos_k[:, None, :] >= 0) & (delta >= 0)
    if context is not None:
        mask = mask & (delta < context)
    return mask[:, None]


@dataclass
class KVCache:
    """Static KV cache of one attention layer.

    ``data``: ``[2, B, capacity, Hkv, D]`` (keys then values; keys carry RoPE), zero-filled
    at allocation; ``offset``: number of positions written (the next write position, and
    the RoPE position of the next query). Only ``[:offset]`` is ever read.
    """

    data: torch.Tensor
    offset: int = 0

    @classmethod
    def empty(cls, batch: int, capacity: int, heads: int, head_dim: int,
              device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> "KVCache":
        return cls(torch.zeros(2, batch, capacity, heads, head_dim, device=device, dtype=dtype))

    @property
    def capacity(self) -> int:
        return self.data.shape[2]


class Attention(nn.Module):
    """Multi-head (grouped-query) self-attention over a :class:`KVCache`.

    ``in_proj``: ``[q_dim + 2*kv_dim, d_model]`` with columns q, k, v; ``out_proj``:
    ``[d_model, q_dim]``. GQA repeats each KV head ``heads // kv_heads`` times.
    """

    def __init__(self, d_model: int, heads: int, max_period: float, context: int | None = None,
                 q_dim: int | None = None, kv_heads: int | None = None):
        super().__init__()
        self.heads = heads
        self.kv_heads = kv_heads or heads
        self.q_dim = q_dim or d_model
        self.head_dim = self.q_dim // heads
        self.max_period = max_period
        self.context = context
        kv_dim = self.kv_heads * self.head_dim
        self.in_proj = nn.Linear(d_model, self.q_dim + 2 * kv_dim, bias=False)
        self.out_proj = nn.Linear(self.q_dim, d_model, bias=False)

    def _qkv(self, x: torch.Tensor, pos: int | torch.Tensor,
             rope: tuple[torch.Tensor, torch.Tensor] | None = None):
        """Project and rotate: q ``[B, H, T, D]``, k and v ``[B, T, Hkv, D]``. ``rope``: the
        factors of :func:`rope_tables` for the steps (computed once for every layer of a
        pass), else computed here from ``pos`` (the first step's position, an int or long
        ``[B]``)."""
        b, t, _ = x.shape
        proj = self.in_proj(x)
        if rope is None:
            q = proj[..., : self.q_dim].view(b, t, self.heads, self.head_dim)
            kv = proj[..., self.q_dim:].view(b, t, 2, self.kv_heads, self.head_dim)
            k, v = torch.unbind(kv, dim=2)
            q, k = apply_rope(q, k, pos, self.max_period)
            return q.transpose(1, 2), k, v
        # queries and keys side by side in the projection: one rotation for both
        kv_dim = self.kv_heads * self.head_dim
        qk = rotate(proj[..., :self.q_dim + kv_dim].view(b, t, -1, self.head_dim), *rope)
        q = qk[:, :, :self.heads].contiguous()
        k = qk[:, :, self.heads:]
        v = proj[..., self.q_dim + kv_dim:].view(b, t, self.kv_heads, self.head_dim)
        return q.transpose(1, 2), k, v

    def _attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        """q ``[B, H, T, D]``; keys/values ``[B, Hkv, S, D]`` (any strides); ->
        ``[B, T, d_model]``."""
        if self.kv_heads != self.heads:
            rep = self.heads // self.kv_heads
            keys = keys.repeat_interleave(rep, dim=1)
            values = values.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, keys, values, mask, dropout_p=0.0)
        b, _, t, _ = q.shape
        return self.out_proj(y.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))

    def forward(self, x: torch.Tensor, cache: KVCache | None, mask: torch.Tensor) -> torch.Tensor:
        """x: ``[B, T, d_model]``; ``mask``: boolean ``[B|1, 1, T, S]`` for the keys read.

        With a cache, the T new keys/values are written at ``cache.offset`` and attention
        reads keys ``[k_start, offset + T)`` where ``S = offset + T - k_start`` (``k_start``
        is inferred from the mask width). Without a cache, keys are the T inputs themselves.
        The caller advances ``cache.offset``.
        """
        offset = 0 if cache is None else cache.offset
        q, k, v = self._qkv(x, offset)
        if cache is None:
            return self._attend(q, k.transpose(1, 2), v.transpose(1, 2), mask)
        end = offset + x.shape[1]
        cache.data[0, :, offset:end] = k
        cache.data[1, :, offset:end] = v
        valid = cache.data[:, :, end - mask.shape[-1]:end]
        return self._attend(q, valid[0].transpose(1, 2), valid[1].transpose(1, 2), mask)

    def forward_rows(self, x: torch.Tensor, data: torch.Tensor, rows: slice | torch.Tensor,
                     pos: torch.Tensor, slots: torch.Tensor, mask: torch.Tensor,
                     probe=None, layer: int = 0, keep: torch.Tensor | None = None,
                     rope: tuple[torch.Tensor, torch.Tensor] | None = None
                     ) -> torch.Tensor:
        """Attention for B rows of a batched cache, each at its own position.

        The batched cache holds each head's slots together (``[..., Hkv, S_cap, D]``): a
        step reads every row's keys head by head, faster when a head's slots are contiguous
        (300 positions, 6 layers of Pocket's FlowLM, one thread of a 2-core AMD EPYC Zen 3:
        one row 0.86 against 1.74 ms, 16 rows 24.5 against 33.7 ms), with the same results
        bit for bit (PyTorch's attention reads the same values).

        Args:
            x: ``[B, T, d_model]``, the T new steps of each row.
            data: cache ``[2, R, Hkv, S_cap, D]`` (R >= B rows).
            rows: the cache rows of the B inputs (a slice reads them as a view).
            pos: long ``[B]``, absolute position of each row's first new step (RoPE).
            slots: long ``[B, T]``, the cache slots the new keys/values go to (the
                positions themselves for a linear cache).
            mask: bool ``[B, 1, T, S]``; attention reads slots ``[0, S)`` of those rows.
            probe: a :class:`vocalis.models.text_attention.TextAttention` that reads this
                layer's (index ``layer``) queries and keys (word timestamps), or None.
            keep: long ``[B, n]``, the steps (indices into T) whose outputs are returned,
                ``[B, n, d_model]``; every step's keys and values are written all the same.
                None: all T.
            rope: the steps' factors of :func:`rope_tables`, else computed from ``pos``.
        """
        b, t, _ = x.shape
        q, k, v = self._qkv(x, pos, rope)
        row_idx = torch.arange(rows.start, rows.stop, device=x.device) if isinstance(
            rows, slice) else rows
        r = row_idx[:, None].expand(b, t)
        data[0, r, :, slots] = k  # [B, T, Hkv, D] at [rows, :, slots]
        data[1, r, :, slots] = v
        valid = data[:, rows, :, :mask.shape[-1]]  # [2, B, Hkv, S, D]
        if probe is not None:
            probe.capture(layer, q, valid[0].transpose(1, 2), self.heads // self.kv_heads)
        if keep is not None:
            n = keep.shape[1]
            q = q.gather(2, keep[:, None, :, None].expand(b, q.shape[1], n, q.shape[3]))
            mask = mask.expand(b, -1, -1, -1).gather(
                2, keep[:, None, :, None].expand(b, mask.shape[1], n, mask.shape[3]))
        return self._attend(q, valid[0], valid[1], mask)


class LayerScale(nn.Module):
    def __init__(self, channels: int, init: float):
        super().__init__()
        self.scale = nn.Parameter(torch.full((channels,), init))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU with the tanh approximation by PyTorch (``F.gelu(x, approximate="tanh")``), as
    the official package computes it: the ``gelu=default`` speed choice, and exact models'."""
    return F.gelu(x, approximate="tanh")


def vocalis_gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """The same function by our float32 kernel (``torch.ops.vocalis_f32.gelu_tanh``,
    ``csrc/f32_core.h``: ``x / (1 + exp(z))``, ``z = -2 sqrt(2/pi) (x + 0.044715 x^3)``, with
    the ELU kernel's exp; about 5 times faster than PyTorch's on an AVX2 CPU, the same bits on
    every instruction set). It differs from :func:`gelu_tanh` by float rounding (within
    ``(4 + 3|z|)`` float32 roundings of the float64 formula, tested; PyTorch's own
    ``1 + tanh(u)`` loses more where ``tanh(u)`` is near -1). The Pocket speed choice
    ``gelu=vocalis``, offered where the kernel is built (``vocalis kernels build``); tensors
    other than float32 on the CPU go to :func:`gelu_tanh`.

    Shape: any; returns a new contiguous tensor of the input's shape and dtype."""
    if x.dtype != torch.float32 or x.device.type != "cpu":
        return gelu_tanh(x)
    return torch.ops.vocalis_f32.gelu_tanh(x)


#: the GELU functions of the ``gelu`` speed choice
GELU_KINDS = {"default": gelu_tanh, "vocalis": vocalis_gelu_tanh}


def set_gelu(module: nn.Module, kind: str) -> None:
    """Put the GELU of ``kind`` (:data:`GELU_KINDS`) in every :class:`TransformerLayer` of
    ``module`` (no weights change).

    Raises:
        ValueError: an unknown ``kind``.
    """
    if kind not in GELU_KINDS:
        raise ValueError(f"unknown GELU kind {kind!r}: use one of {', '.join(GELU_KINDS)}")
    for m in module.modules():
        if isinstance(m, TransformerLayer):
            m.gelu = GELU_KINDS[kind]


class TransformerLayer(nn.Module):
    """Pre-norm layer: ``x += ls1(attn(norm1(x)))``; ``x += ls2(W2 gelu_tanh(W1 norm2(x)))``.

    GELU uses the tanh approximation (pocket-tts >= 4.0, PR #278): ``self.gelu``, PyTorch's
    unless the ``gelu`` speed choice put ours (:func:`set_gelu`). LayerNorm eps 1e-5.
    """

    def __init__(self, d_model: int, heads: int, ffn_dim: int, max_period: float,
                 context: int | None = None, layer_scale: float | None = None,
                 q_dim: int | None = None, kv_heads: int | None = None):
        super().__init__()
        self.self_attn = Attention(d_model, heads, max_period, context, q_dim, kv_heads)
        self.norm1 = nn.LayerNorm(d_model, eps=1e-5)
        self.norm2 = nn.LayerNorm(d_model, eps=1e-5)
        self.linear1 = nn.Linear(d_model, ffn_dim, bias=False)
        self.linear2 = nn.Linear(ffn_dim, d_model, bias=False)
        if layer_scale is None:
            self.layer_scale_1: nn.Module = nn.Identity()
            self.layer_scale_2: nn.Module = nn.Identity()
        else:
            self.layer_scale_1 = LayerScale(d_model, layer_scale)
            self.layer_scale_2 = LayerScale(d_model, layer_scale)
        self.gelu = gelu_tanh

    def forward(self, x: torch.Tensor, cache: KVCache | None, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.layer_scale_1(self.self_attn(self.norm1(x), cache, mask))
        h = self.linear2(self.gelu(self.linear1(self.norm2(x))))
        return x + self.layer_scale_2(h)


def _layer_rows(layer: "TransformerLayer", x, data, rows, pos, slots, mask, probe=None,
                index: int = 0, keep: torch.Tensor | None = None, rope=None):
    """One layer over B rows (see :meth:`Attention.forward_rows`); with ``keep`` (long
    ``[B, n]``) only those steps go on past the attention: ``[B, n, d]``."""
    a = layer.self_attn.forward_rows(layer.norm1(x), data, rows, pos, slots, mask, probe,
                                     index, keep, rope)
    if keep is not None:
        x = x.gather(1, keep[:, :, None].expand(-1, -1, x.shape[2]))
    x = x + layer.layer_scale_1(a)
    h = layer.linear2(layer.gelu(layer.linear1(layer.norm2(x))))
    return x + layer.layer_scale_2(h)


class Transformer(nn.Module):
    """A stack of :class:`TransformerLayer` sharing one RoPE period and context."""

    def __init__(self, d_model: int, heads: int, layers: int, ffn_dim: int, max_period: float,
                 context: int | None = None, layer_scale: float | None = None,
                 q_dim: int | None = None, kv_heads: int | None = None):
        super().__init__()
        self.context = context
        self.layers = nn.ModuleList(
            TransformerLayer(d_model, heads, ffn_dim, max_period, context, layer_scale, q_dim,
                             kv_heads)
            for _ in range(layers)
        )

    def new_caches(self, batch: int, capacity: int, device=None, dtype=torch.float32) -> list[KVCache]:
        device = device or self.layers[0].norm1.weight.device
        return [
            KVCache.empty(batch, capacity, layer.self_attn.kv_heads, layer.self_attn.head_dim,
                          device, dtype)
            for layer in self.layers
        ]

    def forward(self, x: torch.Tensor, caches: list[KVCache] | None) -> torch.Tensor:
        """x: ``[B, T, d_model]``. With caches, writes T positions and advances offsets;
        keys older than ``context`` are not read. Without, full causal attention over x."""
        t = x.shape[1]
        if caches is None:
            mask = causal_mask(0, t, 0, t, self.context, x.device)
        else:
            offset = caches[0].offset
            k_start = 0 if self.context is None else max(0, offset - self.context + 1)
            mask = causal_mask(offset, t, k_start, offset + t - k_start, self.context, x.device)
        for i, layer in enumerate(self.layers):
            x = layer(x, None if caches is None else caches[i], mask)
        if caches is not None:
            for c in caches:
                c.offset += t
        return x


    def forward_linear_rows(self, x: torch.Tensor, data: list[torch.Tensor],
                            rows: slice | torch.Tensor, pos: torch.Tensor, pos_max: int,
                            probe=None, keep: torch.Tensor | None = None) -> torch.Tensor:
        """B rows at their own positions over linear caches (slot = position).

        x: ``[B, T, d]``; ``pos``: long ``[B]``; ``pos_max``: ``max(pos)`` as an int.
        Keys ``[0, pos_max + T)`` are read; each row sees its own past only (requires
        ``context is None``). Positions are not advanced (the caller owns them).
        ``probe``: reads every layer's step attention (word timestamps; see
        :meth:`Attention.forward_rows`). ``keep``: long ``[B, n]``, the steps whose outputs
        the caller reads (returns ``[B, n, d]``): the last layer runs its attention and
        feed-forward for those only, after writing every step's keys and values (a prompt
        pass reads one step's output, or none). None: all T.
        """
        return self.linear_rows(x, data, rows, pos,
                                torch.arange(pos_max + x.shape[1], device=x.device), probe,
                                keep)

    def linear_rows(self, x: torch.Tensor, data: list[torch.Tensor],
                    rows: slice | torch.Tensor, pos: torch.Tensor, pos_k: torch.Tensor,
                    probe=None, keep: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`forward_linear_rows` with the keys read given as a tensor: ``pos_k`` long
        ``[S]`` = ``arange(pos_max + T)`` (so that a traced graph, where Python ints are
        fixed, reads as many keys as the step needs)."""
        t = x.shape[1]
        ar = torch.arange(t, device=x.device)
        pos_q = pos[:, None] + ar  # [B, T]
        delta = pos_q[:, :, None] - pos_k[None, None, :]
        mask = ((pos_k[None, None, :] >= 0) & (delta >= 0))[:, None]
        rope = self._rope(pos_q)
        last = len(self.layers) - 1
        for i, (layer, d) in enumerate(zip(self.layers, data)):
            x = _layer_rows(layer, x, d, rows, pos, pos_q, mask, probe, i,
                            keep if i == last else None, rope)
        return x

    def _rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`rope_tables` of steps at ``positions`` ``[B, T]``, for every layer (they
        share one head size and period)."""
        attn = self.layers[0].self_attn
        return rope_tables(positions, attn.head_dim, attn.max_period)

    def forward_ring_rows(self, x: torch.Tensor, data: list[torch.Tensor],
                          rows: slice | torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """B rows at their own positions over ring caches ``[2, R, Hkv, S_cap, D]`` of
        ``S_cap >= context + T - 1`` slots.

        Position p lives in slot ``p % S_cap``; a slot is visible to query q when it holds a
        position p with ``0 <= q - p < context`` written by this row. x: ``[B, T, d]``.
        """
        t = x.shape[1]
        cap = data[0].shape[3]
        ar = torch.arange(t, device=x.device)
        pos_q = pos[:, None] + ar  # [B, T]
        end = pos[:, None] + t  # [B, 1], one past the last written position
        slot = torch.arange(cap, device=x.device)[None, :]
        slot_pos = end - 1 - torch.remainder(end - 1 - slot, cap)  # [B, S_cap]
        delta = pos_q[:, :, None] - slot_pos[:, None, :]
        mask = (slot_pos[:, None, :] >= 0) & (delta >= 0)
        if self.context is not None:
            mask = mask & (delta < self.context)
        slots = torch.remainder(pos_q, cap)
        rope = self._rope(pos_q)
        for layer, d in zip(self.layers, data):
            x = _layer_rows(layer, x, d, rows, pos, slots, mask[:, None], rope=rope)
        return x


# ---------------------------------------------------------------- streaming convolutions


class StreamingConv1d(nn.Module):
    """Causal Conv1d (``conv``: ``nn.Conv1d``) with left context carried across calls.

    State: ``[B, C_in, K_eff - stride]`` of previous input samples; zeros at start
    (``pad_mode='constant'``) or the first input sample repeated (``'replicate'``).
    Input length must be a multiple of the stride.

    ``by_matmul`` (False unless a speed choice sets it: the Pocket ``codec_out_conv``):
    compute the convolution as one matrix product of every tap and a shifted sum
    (:meth:`matmul_conv`) instead of ``nn.Conv1d``; stride 1 and one group only.
    """

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1, dilation: int = 1,
                 groups: int = 1, bias: bool = True, pad_mode: str = "constant"):
        super().__init__()
        self.pad_mode = pad_mode
        self.conv = nn.Conv1d(c_in, c_out, kernel, stride, dilation=dilation, groups=groups,
                              bias=bias)
        self.context = (kernel - 1) * dilation + 1 - stride
        self.by_matmul = False

    def matmul_conv(self, x: torch.Tensor) -> torch.Tensor:
        """The convolution (stride 1, one group, no padding) of ``x [B, C_in, T + context]``
        -> ``[B, C_out, T]`` as ``P = W' x`` (``W' [K * C_out, C_in]``: the K taps' weights
        stacked; one matrix product) then ``y[:, o, t] = b[o] + sum_j P[:, j, o, t + j d]``
        (K shifted sums; d the dilation): the definition of the convolution, summed in
        another order, so it agrees with ``nn.Conv1d`` to float rounding. For convolutions
        with few output channels (the SEANet decoder's last, 64 -> 1), where PyTorch's CPU
        convolution takes a slow generic path (2.85 against 0.47 ms for 16 frames on one
        AMD EPYC Zen 4 thread; docs/speed-choices.md).

        Raises:
            ValueError: a strided or grouped convolution.
        """
        conv = self.conv
        if conv.stride[0] != 1 or conv.groups != 1:
            raise ValueError("matmul_conv takes a convolution of stride 1 and one group")
        k, d = conv.kernel_size[0], conv.dilation[0]
        w = conv.weight  # [C_out, C_in, K]
        c_out, c_in = w.shape[0], w.shape[1]
        b, _, n = x.shape
        t = n - (k - 1) * d
        # contiguous: a transposed view of W' sends matmul down a slower path (a copy of
        # K * C_out * C_in values per call: meant for few output channels)
        taps = w.permute(2, 0, 1).reshape(k * c_out, c_in).contiguous()
        p = torch.matmul(taps, x).view(b, k, c_out, n)
        y = p[:, 0, :, :t].clone()
        for j in range(1, k):
            y += p[:, j, :, j * d:j * d + t]
        if conv.bias is not None:
            y += conv.bias[:, None]
        return y

    def new_state(self, batch: int) -> list:
        w = self.conv.weight  # the state takes the weights' device and dtype
        return [torch.zeros(batch, self.conv.in_channels, self.context, device=w.device,
                            dtype=w.dtype), True]

    def forward(self, x: torch.Tensor, state: list | None) -> torch.Tensor:
        conv = self.matmul_conv if self.by_matmul else self.conv
        if self.context == 0:
            return conv(x)
        if state is None:
            state = self.new_state(x.shape[0])
        if state[1] and self.pad_mode == "replicate":
            state[0] = x[..., :1].expand(-1, -1, self.context).clone()
        x = torch.cat([state[0], x], dim=-1)
        y = conv(x)
        state[0] = x[..., -self.context:].clone()
        state[1] = False
        return y


class StreamingConvTranspose1d(nn.Module):
    """Causal ConvTranspose1d (``convtr``) with overlap-add carried across calls.

    State: ``[B, C_out, K - stride]``, the tail of the previous output **without bias**,
    added to the head of the next output (pocket-tts ``modules/conv.py`` semantics).
    """

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, groups: int = 1,
                 bias: bool = True):
        super().__init__()
        self.convtr = nn.ConvTranspose1d(c_in, c_out, kernel, stride, groups=groups, bias=bias)
        self.tail = kernel - stride

    def new_state(self, batch: int) -> list:
        w = self.convtr.weight
        return [torch.zeros(batch, self.convtr.out_channels, self.tail, device=w.device,
                            dtype=w.dtype)]

    def _depthwise(self, x: torch.Tensor) -> torch.Tensor:
        """Depthwise transposed conv with ``kernel == 2 * stride`` as products and one
        overlap-add (PyTorch's grouped transposed conv is a slow generic path on CPU).
        With one input step per call every output is a single product, as in the conv."""
        b, c, n = x.shape
        s = self.convtr.stride[0]
        w = self.convtr.weight[:, 0, :]  # [C, 2s]
        prod = x[..., None] * w[None, :, None, :]  # [B, C, n, 2s]
        y = x.new_zeros(b, c, (n + 1) * s)
        y[..., : n * s] = prod[..., :s].reshape(b, c, n * s)
        y[..., s:] += prod[..., s:].reshape(b, c, n * s)
        if self.convtr.bias is not None:
            y = y + self.convtr.bias[:, None]
        return y

    def forward(self, x: torch.Tensor, state: list) -> torch.Tensor:
        ct = self.convtr
        if (ct.groups == ct.in_channels == ct.out_channels and ct.kernel_size[0] == 2 * ct.stride[0]
                and ct.padding[0] == 0 and ct.output_padding[0] == 0 and ct.dilation[0] == 1):
            y = self._depthwise(x)
        else:
            y = ct(x)
        n = self.tail
        if n > 0:
            y[..., :n] += state[0]
            rest = y[..., -n:]
            if self.convtr.bias is not None:
                rest = rest - self.convtr.bias[:, None]
            state[0] = rest.clone()
            y = y[..., :-n]
        return y
