"""FlowLM: the autoregressive transformer of Pocket TTS and its per-frame sampler head.

One step maps the previous (normalized) 32-d latent to the next one: a causal
transformer over ``[voice prompt | text tokens | latents]`` gives a condition
vector, an EOS logit is read from it, and a small MLP "flow head" turns Gaussian
noise into the latent in one step.

Sources: Kyutai, "Pocket TTS" (pocket-tts 4.0.1 ``models/flow_lm.py``,
``modules/mlp.py``); LSD decoding from Boffi et al., "Lagrangian Self-Distillation"
(arXiv:2505.18825); the AdaLN MLP head from Li et al., MAR (arXiv:2406.11838).
Tensor names follow the official checkpoint so it loads without mapping.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from vocalis.models.pocket.config import FlowLM as FlowLMConfig
from vocalis.models.pocket.layers import KVCache, Transformer


def _modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale) + shift


class _RMSNorm(nn.Module):
    """``x * alpha / sqrt(eps + var_unbiased(x))`` — note: unbiased variance, no centering."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.alpha = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = self.eps + x.var(dim=-1, keepdim=True)
        return (x * (self.alpha.to(var) * torch.rsqrt(var))).to(x.dtype)


class _LayerNorm(nn.Module):
    """``(x - mean) / sqrt(var_biased + eps)`` (optionally affine), eps 1e-6."""

    def __init__(self, dim: int, affine: bool = True, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = nn.Parameter(torch.ones(dim))
            self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, unbiased=False, keepdim=True)
        x = (x - mean) / torch.sqrt(var + self.eps)
        return x * self.weight + self.bias if self.affine else x


class _TimeEmbedding(nn.Module):
    """Scalar time -> ``[cos(t f), sin(t f)]`` (256) -> Linear, SiLU, Linear, RMSNorm.

    ``freqs`` is a checkpoint buffer (``exp(-ln(10000) * arange(128) / 128)`` at init).
    """

    def __init__(self, dim: int, freq_dim: int = 256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim),
                                 _RMSNorm(dim))
        half = freq_dim // 2
        self.register_buffer("freqs", torch.exp(-math.log(10000) * torch.arange(half) / half))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        args = t * self.freqs.to(t.dtype)
        return self.mlp(torch.cat([torch.cos(args), torch.sin(args)], dim=-1))


class _ResBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.in_ln = _LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 3 * dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        shift, scale, gate = self.adaLN_modulation(y).chunk(3, dim=-1)
        return x + gate * self.mlp(_modulate(self.in_ln(x), shift, scale))


class _FinalLayer(nn.Module):
    def __init__(self, dim: int, out_dim: int):
        super().__init__()
        self.norm_final = _LayerNorm(dim, affine=False)
        self.linear = nn.Linear(dim, out_dim)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        shift, scale = self.adaLN_modulation(y).chunk(2, dim=-1)
        return self.linear(_modulate(self.norm_final(x), shift, scale))


class FlowHead(nn.Module):
    """AdaLN MLP ``v(c, *times, x)``: condition ``c [B, cond]``, input ``x [B, 32]`` -> ``[B, 32]``.

    The time embeddings are averaged: ``y = cond_embed(c) + sum_i emb_i(t_i) / n``.
    """

    def __init__(self, latent_dim: int, dim: int, cond_dim: int, depth: int, time_conds: int):
        super().__init__()
        self.time_conds = time_conds
        self.time_embed = nn.ModuleList(_TimeEmbedding(dim) for _ in range(time_conds))
        self.cond_embed = nn.Linear(cond_dim, dim)
        self.input_proj = nn.Linear(latent_dim, dim)
        self.res_blocks = nn.ModuleList(_ResBlock(dim) for _ in range(depth))
        self.final_layer = _FinalLayer(dim, latent_dim)

    def forward(self, c: torch.Tensor, *args: torch.Tensor) -> torch.Tensor:
        times, x = args[:-1], args[-1]
        x = self.input_proj(x)
        y = self.cond_embed(c)
        if self.time_conds:
            # Python's sum() starts from int 0; keep the same op sequence.
            y = y + sum(emb(t) for emb, t in zip(self.time_embed, times)) / self.time_conds
        for block in self.res_blocks:
            x = block(x, y)
        return self.final_layer(x, y)


class TextEmbedding(nn.Module):
    """Token lookup table (``n_bins + 1`` rows), optionally low-rank with a projection."""

    def __init__(self, n_bins: int, dim: int, rank: int | None):
        super().__init__()
        self.embed = nn.Embedding(n_bins + 1, rank or dim)
        self.proj = None if rank is None else nn.Linear(rank, dim, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        return x if self.proj is None else self.proj(x)


_TIME_CONDS = {"lsd": 2, "flow_matching": 1, "drifting": 0, "pointwise": 0}


class FlowLM(nn.Module):
    """Backbone + heads. Checkpoint prefix ``flow_lm.``.

    Buffers/params: ``emb_std``, ``emb_mean`` ``[32]`` (latent normalization, applied only
    before the codec), ``bos_emb [32]`` (input at the first step), ``bos_before_voice
    [1, 1, d]`` (optional), ``speaker_proj_weight [d, latent_dim_of_encoder]``.
    """

    def __init__(self, c: FlowLMConfig, latent_dim: int, speaker_dim: int):
        super().__init__()
        t = c.transformer
        d = t.d_model
        self.config = c
        self.d_model = d
        self.latent_dim = latent_dim
        self.head_type = c.flow.type
        self.conditioner = TextEmbedding(c.lookup_table.n_bins, c.lookup_table.dim,
                                         c.lookup_table.rank)
        self.register_buffer("emb_std", torch.ones(latent_dim))
        self.register_buffer("emb_mean", torch.zeros(latent_dim))
        self.bos_emb = nn.Parameter(torch.zeros(latent_dim))
        self.insert_bos_before_voice = c.insert_bos_before_voice
        if c.insert_bos_before_voice:
            self.bos_before_voice = nn.Parameter(torch.zeros(1, 1, d))
        self.speaker_proj_weight = nn.Parameter(torch.zeros(d, speaker_dim))
        self.input_linear = nn.Linear(latent_dim, d, bias=False)
        self.transformer = Transformer(d, t.num_heads, t.num_layers, t.ffn_dim,
                                       float(t.max_period), q_dim=t.attn_dim,
                                       kv_heads=t.num_kv_heads)
        self.out_norm = nn.LayerNorm(d, eps=1e-5)
        self.z_proj = None if c.z_dim is None else nn.Linear(d, c.z_dim, bias=False)
        cond = c.z_dim or d
        self.out_eos = nn.Linear(cond, 1)
        self.flow_net = FlowHead(latent_dim, c.flow.dim, cond, c.flow.depth,
                                 _TIME_CONDS[c.flow.type])

    def new_caches(self, batch: int, capacity: int) -> list[KVCache]:
        return self.transformer.new_caches(batch, capacity)

    # ---------------------------------------------------------------- heads

    def condition(self, h: torch.Tensor) -> torch.Tensor:
        """Transformer output ``[n, T, d]`` -> the condition of its last position ``[n, cond]``
        float32 (output norm, then ``z_proj`` where the config has one): the input of the
        EOS and sampler heads."""
        h = self.out_norm(h)
        if self.z_proj is not None:
            h = self.z_proj(h)
        return h.float()[:, -1]

    def sample(self, cond: torch.Tensor, noise: torch.Tensor, steps: int) -> torch.Tensor:
        """Turn noise ``[B, 32]`` into a latent with the configured head.

        ``lsd``: ``x += v(c, s=i/N, t=(i+1)/N, x) / N`` for i < N (N = ``steps``);
        ``flow_matching``: Euler ``x += v(c, t=i/N, x) / N``; ``drifting``: ``x = v(c, x)``;
        ``pointwise``: ``x = x + v(c, x)``.

        Runs the TorchScript graph recorded for ``steps`` where there is one
        (:mod:`vocalis.models.pocket.graphs`: the same ops, the same results bit for bit;
        none with ``flow_linears=hybrid``).
        """
        graph = self.__dict__.get("_sample_graphs", {}).get(steps)
        if graph is not None and not torch.jit.is_tracing():
            return graph(cond, noise)
        head = self.flow_net
        if self.head_type == "lsd":
            x = noise
            for i in range(steps):
                s = i / steps
                t = (i + 1) / steps
                one = torch.ones_like(noise[..., :1])
                x = x + head(cond, s * one, t * one, x) / steps
            return x
        if self.head_type == "flow_matching":
            x = noise
            for i in range(steps):
                x = x + head(cond, (i / steps) * torch.ones_like(noise[..., :1]), x) / steps
            return x
        if self.head_type == "drifting":
            return head(cond, noise)
        return noise + head(cond, noise)
