"""Qwen3-TTS talker and code predictor ("sub-talker"), written for exact parity with the
official ``qwen-tts==0.1.1`` (``qwen_tts/core/models/modeling_qwen3_tts.py``, cited below
as ``modeling:LINE``).

Both are Qwen3-style pre-norm decoders (GQA, per-head RMSNorm on q and k, RoPE, SwiGLU)
over static, zeroed KV caches ``[B, S, Hkv, D]``; prefill and one-step decode are separate
calls (gpt-fast style). Compute runs in ``dtype`` (float32 by default, bfloat16 allowed);
weights load from the official bf16 ``model.safetensors`` with the official tensor names:
this module's ``state_dict()`` with the prefix ``talker.`` is exactly the official key set
(no mapping needed).

The talker's M-RoPE (``rope_scaling.mrope_section`` [24, 20, 20], interleaved) gets the
same position on its three axes (``modeling:1794-1797`` ``get_rope_index``), so
``apply_multimodal_rotary_pos_emb`` (``modeling:660-724``) picks every frequency from
identical tables: it is plain 1-D ``rotate_half`` RoPE, which is what this module applies
(checked against the official logits in ``tests/qwen3/test_qwen3_talker.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

from vocalis.errors import CheckpointError
from vocalis.models.tracing import trace_module

NUM_CODE_GROUPS = 16


@dataclass(frozen=True)
class DecoderSpec:
    """Shape of one Qwen3 decoder stack (talker or code predictor)."""

    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    rope_theta: float

    @classmethod
    def from_config(cls, cfg: dict) -> "DecoderSpec":
        return cls(cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"],
                   cfg["num_key_value_heads"],
                   cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"]),
                   cfg["intermediate_size"], cfg.get("rms_norm_eps", 1e-6), cfg.get("rope_theta", 10000.0))


@dataclass(frozen=True)
class TalkerSpec:
    """What the talker, prompt builder and sampler read from an official ``config.json``.

    Codec-track ids, languages and speakers come from ``talker_config``; the text special
    ids from the top level (``configuration_qwen3_tts.py:465-499``). The class defaults there
    (e.g. ``codec_eos_token_id`` 4198) are not the shipped values, so everything is read
    from the JSON.
    """

    talker: DecoderSpec
    predictor: DecoderSpec
    vocab_size: int  # codec vocabulary of the talker (3072)
    predictor_vocab_size: int  # 2048
    num_code_groups: int
    text_vocab_size: int
    text_hidden_size: int
    codec_eos_id: int
    codec_pad_id: int
    codec_bos_id: int
    codec_think_id: int
    codec_nothink_id: int
    codec_think_bos_id: int
    codec_think_eos_id: int
    languages: dict[str, int]
    speakers: dict[str, int]
    speaker_dialects: dict[str, str | bool]
    tts_bos_id: int
    tts_eos_id: int
    tts_pad_id: int
    model_size: str  # "0b6" / "1b7"
    model_type: str  # "base" / "custom_voice" / "voice_design"

    @classmethod
    def from_config(cls, cfg: dict) -> "TalkerSpec":
        t = cfg["talker_config"]
        p = t["code_predictor_config"]
        if t["num_code_groups"] != NUM_CODE_GROUPS or p["num_code_groups"] != NUM_CODE_GROUPS:
            raise CheckpointError(f"num_code_groups must be {NUM_CODE_GROUPS}, the config has "
                                  f"{t['num_code_groups']}; use an official Qwen3-TTS 12 Hz config.json")
        return cls(
            DecoderSpec.from_config(t), DecoderSpec.from_config(p), t["vocab_size"], p["vocab_size"],
            t["num_code_groups"], t["text_vocab_size"], t["text_hidden_size"],
            t["codec_eos_token_id"], t["codec_pad_id"], t["codec_bos_id"], t["codec_think_id"],
            t["codec_nothink_id"], t["codec_think_bos_id"], t["codec_think_eos_id"],
            dict(t.get("codec_language_id") or {}), dict(t.get("spk_id") or {}),
            dict(t.get("spk_is_dialect") or {}),
            cfg.get("tts_bos_token_id", 151672), cfg.get("tts_eos_token_id", 151673),
            cfg.get("tts_pad_token_id", 151671), cfg["tts_model_size"], cfg["tts_model_type"])


class RMSNorm(nn.Module):
    """``weight * (x / sqrt(mean(x²) + eps))``, normalised in fp32 then cast back to the
    input dtype before the weight (``modeling:596-610``)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32 and self.weight.dtype == torch.float32:
            # one kernel, the same float32 arithmetic (bit-equal: tests/qwen3/test_qwen3_talker.py)
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rope_tables(theta: float, head_dim: int, positions: torch.Tensor, dtype: torch.dtype):
    """cos, sin ``[T, head_dim]`` for integer ``positions [T]``.

    ``inv_freq = 1 / theta^(arange(0, D, 2) / D)`` (transformers ``_compute_default_rope_parameters``),
    ``freqs = inv_freq ⊗ pos`` in fp32, duplicated to D, then cast to the activation dtype
    (``modeling:546-558`` and ``581-593``: bf16 models use bf16 cos/sin)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64,
                                        device=positions.device).float() / head_dim))
    freqs = (inv[:, None] @ positions.to(torch.float32)[None, :]).transpose(0, 1)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _signed_sin(sin: torch.Tensor) -> torch.Tensor:
    """``sin`` with its first half negated: ``rotate_half(x) * sin == x.roll(D/2, -1) *
    _signed_sin(sin)`` exactly (the same products, the sign moved from x to sin), one
    kernel instead of four."""
    h = sin.shape[-1] // 2
    return torch.cat((-sin[..., :h], sin[..., h:]), dim=-1)


def _rope_apply(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """``x * cos + rotate_half(x) * sin`` (``modeling:660-724``) over the last axis."""
    return x * cos + x.roll(x.shape[-1] // 2, -1) * sin_signed


class KVCache:
    """Static zeroed key/value cache: ``k, v [layers, B, S, Hkv, D]``.

    ``ensure(n)`` regrows the capacity (copying) in steps of ``grow`` slots, or of a quarter
    of the capacity once that is more (so the copies of a long request stay linear in its
    length), when a request runs past it: a long default ``max_new_tokens`` does not
    allocate its worst case up front."""

    def __init__(self, spec: DecoderSpec, batch: int, slots: int, dtype: torch.dtype,
                 device: torch.device | str = "cpu", grow: int = 256):
        shape = (spec.num_layers, batch, slots, spec.num_kv_heads, spec.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.grow = grow

    @property
    def slots(self) -> int:
        return self.k.shape[2]

    def ensure(self, n: int) -> None:
        if n <= self.slots:
            return
        step = max(self.grow, self.slots // 4 // self.grow * self.grow)
        extra = -(-(n - self.slots) // step) * step
        pad = list(self.k.shape)
        pad[2] = extra
        self.k = torch.cat([self.k, self.k.new_zeros(pad)], dim=2)
        self.v = torch.cat([self.v, self.v.new_zeros(pad)], dim=2)


class Attention(nn.Module):
    """GQA self-attention with q/k RMSNorm over head_dim, RoPE, scale ``head_dim**-0.5``,
    no biases (``modeling:727-805`` talker, ``885-958`` predictor; identical math).

    ``probe`` (set for one call by :meth:`Talker.decode`): a
    :class:`vocalis.models.text_attention.TextAttention` that reads this layer's (``index``)
    queries and cached keys, for word timestamps; eager calls only."""

    probe = None
    index = 0

    def __init__(self, s: DecoderSpec):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = s.num_heads, s.num_kv_heads, s.head_dim
        self.q_proj = nn.Linear(s.hidden_size, s.num_heads * s.head_dim, bias=False)
        self.k_proj = nn.Linear(s.hidden_size, s.num_kv_heads * s.head_dim, bias=False)
        self.v_proj = nn.Linear(s.hidden_size, s.num_kv_heads * s.head_dim, bias=False)
        self.o_proj = nn.Linear(s.num_heads * s.head_dim, s.hidden_size, bias=False)
        self.q_norm = RMSNorm(s.head_dim, s.rms_norm_eps)
        self.k_norm = RMSNorm(s.head_dim, s.rms_norm_eps)
        #: int8 models: q, k and v as one linear (one activation quantization, one kernel
        #: call); the sizes of its three outputs
        self.qkv: nn.Module | None = None
        self.qkv_sizes = (s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim,
                          s.num_kv_heads * s.head_dim)

    def forward(self, x, cos, sin, k_cache, v_cache, start):
        """``cos``, ``sin``: rope tables with ``sin`` as :func:`_signed_sin` gives it.
        ``start``: int (every row at the same position); or, for one-position calls of
        rows at different positions, long ``[B]`` with the keys masked per row; or, for the
        traced talker step (:meth:`Talker.trace`), ``(slot, read)``: long ``[1]`` cache
        slot to write and long ``[n]`` slots ``0..n-1`` to attend to (gathered: the same
        keys as the int form, so the same result, with the position an input of the graph)."""
        b, t, _ = x.shape
        if self.qkv is not None:
            q, k, v = self.qkv(x).split(self.qkv_sizes, dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = self.q_norm(q.reshape(b, t, -1, self.head_dim)).transpose(1, 2)
        k = self.k_norm(k.reshape(b, t, -1, self.head_dim)).transpose(1, 2)
        v = v.reshape(b, t, -1, self.head_dim).transpose(1, 2)
        q = _rope_apply(q, cos, sin)
        k = _rope_apply(k, cos, sin)
        mask = None
        if isinstance(start, tuple):  # traced step: every row at one position (t == 1)
            slot, read = start
            k_cache.index_copy_(1, slot, k.transpose(1, 2))
            v_cache.index_copy_(1, slot, v.transpose(1, 2))
            keys = k_cache.index_select(1, read).transpose(1, 2)
            values = v_cache.index_select(1, read).transpose(1, 2)
            out = F.scaled_dot_product_attention(q, keys, values, scale=self.head_dim ** -0.5,
                                                 enable_gqa=self.heads != self.kv_heads)
            return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))
        if isinstance(start, torch.Tensor):  # rows at their own positions (t == 1)
            rows = torch.arange(b, device=x.device)
            k_cache[rows, start] = k[:, :, 0]
            v_cache[rows, start] = v[:, :, 0]
            n = int(start.max()) + 1
            mask = (torch.arange(n, device=x.device)[None, :] <= start[:, None])[:, None, None, :]
        else:
            k_cache[:, start:start + t] = k.transpose(1, 2)
            v_cache[:, start:start + t] = v.transpose(1, 2)
            n = start + t
        if self.probe is not None:
            self.probe.capture(self.index, q, k_cache[:, :n], self.heads // self.kv_heads)
        keys = k_cache[:, :n].transpose(1, 2)
        values = v_cache[:, :n].transpose(1, 2)
        # Causal only within a prefill from position 0 (decode: one query sees every key).
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask,
                                             is_causal=mask is None and int(t) > 1,
                                             scale=self.head_dim ** -0.5,
                                             enable_gqa=self.heads != self.kv_heads)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    """SwiGLU ``down(silu(gate(x)) * up(x))`` (``modeling:842-855``)."""

    def __init__(self, s: DecoderSpec):
        super().__init__()
        self.gate_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.up_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.down_proj = nn.Linear(s.intermediate_size, s.hidden_size, bias=False)
        #: int8 models: gate and up as one linear (outputs ``[..., 2 * intermediate]``)
        self.gate_up: nn.Module | None = None

    def forward(self, x):
        if self.gate_up is not None:
            gate, up = self.gate_up(x).chunk(2, dim=-1)
            return self.down_proj(F.silu(gate) * up)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """Pre-norm block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))`` (``modeling:1348-1424``)."""

    def __init__(self, s: DecoderSpec):
        super().__init__()
        self.self_attn = Attention(s)
        self.mlp = MLP(s)
        self.input_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)

    def forward(self, x, cos, sin, k_cache, v_cache, start):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, k_cache, v_cache, start)
        return x + self.mlp(self.post_attention_layernorm(x))


#: rope tables of positions below this are computed once per decoder (the predictor's 16)
_ROPE_KEPT = 16


class Decoder(nn.Module):
    """Layer stack plus final RMSNorm; positions are ``start .. start+T-1``.

    Prefill must start at 0 (the causal mask is the square one). Returns the final-normed
    hidden states ``[B, T, H]`` (``modeling:1535-1561``)."""

    def __init__(self, s: DecoderSpec):
        super().__init__()
        self.spec = s
        self.layers = nn.ModuleList(DecoderLayer(s) for _ in range(s.num_layers))
        for i, layer in enumerate(self.layers):
            layer.self_attn.index = i
        self.norm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self._rope_kept: dict = {}  # (start, t, dtype, device) -> (cos, sin), see _rope

    def run(self, x: torch.Tensor, cache: KVCache, start: int) -> torch.Tensor:
        t = int(x.shape[1])  # a constant of a traced graph (CodePredictor.trace)
        if t > 1 and start != 0:
            raise ValueError("a multi-position call must start at position 0")
        cache.ensure(start + t)
        cos, sin = self._rope(start, t, x)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, cache.k[i], cache.v[i], start)
        return self.norm(x)

    def _rope(self, start: int, t: int, x: torch.Tensor):
        """cos, sin of positions ``start .. start+t-1``; those of the first
        :data:`_ROPE_KEPT` positions are kept (the code predictor runs positions 0-15 for
        every frame). Returns cos and :func:`_signed_sin` of sin, see :func:`rope_tables`."""
        if start + t > _ROPE_KEPT:
            return self._tables(torch.arange(start, start + t, device=x.device), x.dtype)
        key = (start, t, x.dtype, x.device)
        if key not in self._rope_kept:
            self._rope_kept[key] = self._tables(torch.arange(start, start + t, device=x.device),
                                                x.dtype)
        return self._rope_kept[key]

    def _tables(self, positions: torch.Tensor, dtype: torch.dtype):
        cos, sin = rope_tables(self.spec.rope_theta, self.spec.head_dim, positions, dtype)
        return cos, _signed_sin(sin)

    def run_rows(self, x: torch.Tensor, cache: KVCache, pos: torch.Tensor) -> torch.Tensor:
        """One position per row at the rows' own positions: ``x [B, 1, H]``, ``pos`` long
        ``[B]`` (row b attends to its cache slots ``0..pos[b]``; later slots are masked, so
        they may hold anything finite). Same math as :meth:`run` per row."""
        cache.ensure(int(pos.max()) + 1)
        cos, sin = self._tables(pos, x.dtype)
        cos, sin = cos[:, None, None, :], sin[:, None, None, :]  # [B, 1 (heads), 1 (t), D]
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, cache.k[i], cache.v[i], pos)
        return self.norm(x)

    def step(self, x: torch.Tensor, cache: KVCache, pos: int) -> torch.Tensor:
        """One position ``pos`` for every row, ``x [B, 1, H]`` → final-normed ``[B, 1, H]``:
        :meth:`run`, through the TorchScript graph of :meth:`trace_step` when there is one."""
        graph = self.__dict__.get("_step_graph")
        if graph is None:
            return self.run(x, cache, pos)
        cache.ensure(pos + 1)
        cos, sin = self._rope(pos, 1, x)
        return graph(x, cache.k, cache.v, cos, sin, torch.tensor([pos], device=x.device),
                     torch.arange(pos + 1, device=x.device))

    def trace_step(self) -> None:
        """Record :meth:`step` as a TorchScript graph (``torch.jit.trace`` of
        :class:`_DecoderStep`): the same ATen ops on the same values, so the same results
        bit for bit, without the Python interpreter between the ops. The position enters
        the graph as tensors (rope tables, the slot to write, the slots to read: the keys
        the eager slice gives), so one graph serves every position, batch size and cache
        size. Replace no linear afterwards (:meth:`untrace_step` first)."""
        p = self.norm.weight

        def example():
            cache = KVCache(self.spec, 1, 8, p.dtype, p.device)
            cos, sin = self._tables(torch.arange(3, 4, device=p.device), p.dtype)
            return (torch.zeros(1, 1, self.spec.hidden_size, dtype=p.dtype, device=p.device),
                    cache.k, cache.v, cos, sin, torch.tensor([3], device=p.device),
                    torch.arange(4, device=p.device))
        self.__dict__["_step_graph"] = trace_module(_DecoderStep(self), example)

    def untrace_step(self) -> None:
        self.__dict__["_step_graph"] = None

    @property
    def traced(self) -> bool:
        return self.__dict__.get("_step_graph") is not None


class _DecoderStep(nn.Module):
    """``forward(x [B, 1, H], k, v [L, B, S, H_kv, D], cos, sin [1, D], slot [1], read [n])``
    → final-normed ``[B, 1, H]``; see :meth:`Attention.forward` for ``(slot, read)``."""

    def __init__(self, decoder: Decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, x, k, v, cos, sin, slot, read):
        for i, layer in enumerate(self.decoder.layers):
            x = layer(x, cos, sin, k[i], v[i], (slot, read))
        return self.decoder.norm(x)


class TalkerModel(Decoder):
    """``talker.model``: decoder plus the codec (3072 × H) and text (V_text × 2048) tables."""

    def __init__(self, spec: TalkerSpec):
        super().__init__(spec.talker)
        self.codec_embedding = nn.Embedding(spec.vocab_size, spec.talker.hidden_size)
        self.text_embedding = nn.Embedding(spec.text_vocab_size, spec.text_hidden_size)


class PredictorModel(Decoder):
    """``talker.code_predictor.model``: decoder plus 15 codebook tables of width
    **talker** hidden (``modeling:1019-1032``)."""

    def __init__(self, spec: TalkerSpec):
        super().__init__(spec.predictor)
        self.codec_embedding = nn.ModuleList(
            nn.Embedding(spec.predictor_vocab_size, spec.talker.hidden_size)
            for _ in range(spec.num_code_groups - 1))


class TextProjection(nn.Module):
    """``linear_fc2(silu(linear_fc1(x)))`` with biases, text_hidden → text_hidden → H
    (``modeling:808-817``, built at ``modeling:1575-1577``)."""

    def __init__(self, spec: TalkerSpec):
        super().__init__()
        self.linear_fc1 = nn.Linear(spec.text_hidden_size, spec.text_hidden_size)
        self.linear_fc2 = nn.Linear(spec.text_hidden_size, spec.talker.hidden_size)

    def forward(self, x):
        return self.linear_fc2(F.silu(self.linear_fc1(x)))


class CodePredictor(nn.Module):
    """The sub-talker: given the talker's final-normed hidden state and codebook 0 of a
    frame, predicts codebooks 1..15 with a fixed 15-step loop over a 16-slot cache.

    Official flow (``modeling:1250-1312`` under HF ``generate``, called at ``modeling:1669-1679``):
    prefill ``[past_hidden, E(c0)]`` (positions 0-1) → ``lm_head[0]`` at the last position
    gives c1; step j = 2..15 feeds ``codec_embedding[j-2](c_{j-1})`` → ``lm_head[j-1]`` gives
    c_j. ``small_to_mtp_projection`` (1.7B: Linear H→1024 with bias; 0.6B: identity,
    ``modeling:1170-1173``) is applied to every input.
    """

    def __init__(self, spec: TalkerSpec):
        super().__init__()
        self.spec = spec
        self.model = PredictorModel(spec)
        self.lm_head = nn.ModuleList(
            nn.Linear(spec.predictor.hidden_size, spec.predictor_vocab_size, bias=False)
            for _ in range(spec.num_code_groups - 1))
        if spec.predictor.hidden_size != spec.talker.hidden_size:
            self.small_to_mtp_projection = nn.Linear(spec.talker.hidden_size, spec.predictor.hidden_size)
        else:
            self.small_to_mtp_projection = nn.Identity()

    def new_cache(self, batch: int = 1) -> KVCache:
        # dtype/device from an embedding table: the linears may be int8 modules (no .weight).
        p = self.model.codec_embedding[0].weight
        return KVCache(self.spec.predictor, batch, self.spec.num_code_groups, p.dtype, p.device)

    def prefill(self, x: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """``x [B, 2, H_talker]`` → codebook-1 logits ``[B, 2048]`` (fp32)."""
        graph = self.__dict__.get("_prefill_graph")
        return (graph or _PredictorPrefill(self))(x, cache.k, cache.v)

    def step(self, code: torch.Tensor, j: int, cache: KVCache) -> torch.Tensor:
        """Feed ``code [B, 1]`` = c_{j-1} at position j → codebook-j logits ``[B, 2048]``."""
        x = self.small_to_mtp_projection(self.model.codec_embedding[j - 2](code))
        return self.lm_head[j - 1](self.model.step(x, cache, j))[:, -1].float()

    def predict(self, past_hidden: torch.Tensor, c0_embed: torch.Tensor, choose) -> torch.Tensor:
        """Codebooks 1..15 ``[B, 15]`` of one frame. ``choose(logits [B, 2048]) -> [B]`` picks
        each token (greedy or sampled, see ``sampling.py``) in the official draw order."""
        cache = self.new_cache(past_hidden.shape[0])
        codes = [choose(self.prefill(torch.cat((past_hidden, c0_embed), dim=1), cache))]
        for j in range(2, self.spec.num_code_groups):
            codes.append(choose(self.step(codes[-1][:, None], j, cache)))
        return torch.stack(codes, dim=1)

    def trace(self) -> None:
        """Record the prefill (positions 0-1, :class:`_PredictorPrefill`) and the decoder's
        one-position step (:meth:`Decoder.trace_step`, positions 2-15) as TorchScript
        graphs; the 15 small steps of a frame then run without the Python interpreter
        between their ops, whose overhead is a large share of such small steps (figures:
        docs/performance.md). Bit-identical to eager (``tests/qwen3/test_qwen3_talker.py``)."""
        p = self.model.codec_embedding[0].weight

        def example():
            cache = self.new_cache(1)
            return (torch.zeros(1, 2, self.spec.talker.hidden_size, dtype=p.dtype, device=p.device),
                    cache.k, cache.v)
        self.__dict__["_prefill_graph"] = trace_module(_PredictorPrefill(self), example)
        self.model.trace_step()

    def untrace(self) -> None:
        """Drop the graphs of :meth:`trace` (eager calls again)."""
        self.__dict__["_prefill_graph"] = None
        self.model.untrace_step()


class _Views:
    """A KV cache made of given ``k``, ``v`` tensors (written in place)."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor):
        self.k, self.v = k, v

    def ensure(self, n: int) -> None:
        if n > self.k.shape[2]:
            raise RuntimeError("the code predictor's cache holds 16 positions")


class _PredictorPrefill(nn.Module):
    """The code predictor's prefill as one call: ``forward(x [B, 2, H_talker], k, v)``
    (``[past_hidden, E(c0)]`` at positions 0-1) → codebook-1 logits ``[B, 2048]`` (fp32),
    the cache ``k, v [layers, B, 16, H_kv, D]`` written in place."""

    def __init__(self, predictor: CodePredictor):
        super().__init__()
        self.predictor = predictor

    def forward(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        cp = self.predictor
        h = cp.model.run(cp.small_to_mtp_projection(x), _Views(k, v), 0)
        return cp.lm_head[0](h)[:, -1].float()


class Talker(nn.Module):
    """``talker.*`` of the official checkpoint: decoder, text projection, codec head and
    the code predictor. All public methods take/return ``[B, T, H]`` tensors in the module
    dtype; logits come back as fp32 (HF casts before the processors)."""

    def __init__(self, spec: TalkerSpec):
        super().__init__()
        self.spec = spec
        self.model = TalkerModel(spec)
        self.text_projection = TextProjection(spec)
        self.codec_head = nn.Linear(spec.talker.hidden_size, spec.vocab_size, bias=False)
        self.code_predictor = CodePredictor(spec)

    @property
    def dtype(self) -> torch.dtype:
        """Compute dtype, read from the codec embedding table (the linears may be int8
        modules without ``.weight``, see ``Qwen3Model.quantize_int8``)."""
        return self.model.codec_embedding.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.model.codec_embedding.weight.device

    def text_embed(self, ids: torch.Tensor) -> torch.Tensor:
        """``T(x) = text_projection(text_embedding(ids))``: ``[B, T]`` → ``[B, T, H]``."""
        return self.text_projection(self.model.text_embedding(ids))

    #: The fewest rows :meth:`text_rows` projects at once (1: as the official, any count).
    #: A product of few rows runs other kernels than one of many, whose float rounding
    #: differs: here (PyTorch 2.13, x86) one and two rows differ from many, while from 4
    #: rows on every row gets the same bits whatever the others. The loader sets 8 unless the
    #: model is ``exact``, so that a text streamed in pieces (projected a few tokens at a time)
    #: gets the bits of the whole text's (``tests/qwen3/test_qwen3_text_feed.py``).
    min_text_rows: int = 1

    def text_rows(self, ids: list[int]) -> torch.Tensor:
        """``T(x)`` of the text-track tokens ``ids`` → ``[1, len(ids), H]``, projected in one
        product of at least :attr:`min_text_rows` rows (padded with copies of the last)."""
        padded = list(ids) + list(ids[-1:]) * max(0, self.min_text_rows - len(ids))
        out = self.text_embed(torch.tensor([padded], dtype=torch.long, device=self.device))
        return out[:, :len(ids)]

    def codec_embed(self, ids: torch.Tensor) -> torch.Tensor:
        """``E(x) = talker.model.codec_embedding(ids)``."""
        return self.model.codec_embedding(ids)

    def frame_embed(self, codes: torch.Tensor) -> torch.Tensor:
        """Sum of the 16 codebook embeddings of frames ``codes [B, T, 16]`` → ``[B, T, H]``:
        codebook 0 through ``E``, codebook i through ``code_predictor.codec_embedding[i-1]``,
        no projection, summed over a stacked axis as ``modeling:1681-1686`` and ``1986-1992``."""
        tables = [self.model.codec_embedding, *self.code_predictor.model.codec_embedding]
        return torch.stack([tab(codes[..., i]) for i, tab in enumerate(tables)], dim=-2).sum(-2)

    def new_cache(self, batch: int = 1, slots: int = 256, grow: int = 256) -> KVCache:
        """A zeroed talker cache of ``batch`` rows and ``slots`` positions, regrown in steps
        of ``grow`` positions."""
        return KVCache(self.spec.talker, batch, slots, self.dtype, self.device, grow)

    def prefill(self, embeds: torch.Tensor, cache: KVCache) -> tuple[torch.Tensor, torch.Tensor]:
        """Run ``embeds [B, L, H]`` from position 0. Returns (fp32 logits ``[B, L, 3072]``,
        final-normed hidden ``[B, L, H]``)."""
        h = self.model.run(embeds, cache, 0)
        return self.codec_head(h).float(), h

    def decode(self, embed: torch.Tensor, cache: KVCache, pos, probe=None,
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """One position ``embed [B, 1, H]`` at ``pos`` (int, or long ``[B]``: each row at its
        own position, see :meth:`Decoder.run_rows`). Returns (logits ``[B, 3072]`` fp32,
        hidden ``[B, 1, H]``). ``probe``: reads every layer's attention (word timestamps,
        :class:`vocalis.models.text_attention.TextAttention`); the call then runs eagerly,
        which gives the traced step's results bit for bit."""
        if probe is not None:
            for layer in self.model.layers:
                layer.self_attn.probe = probe
            try:
                h = (self.model.run_rows(embed, cache, pos) if isinstance(pos, torch.Tensor)
                     else self.model.run(embed, cache, pos))
            finally:
                for layer in self.model.layers:
                    layer.self_attn.probe = None
            return self.codec_head(h)[:, -1].float(), h
        if isinstance(pos, torch.Tensor):
            h = self.model.run_rows(embed, cache, pos)
        elif embed.shape[1] == 1:
            h = self.model.step(embed, cache, pos)
        else:
            h = self.model.run(embed, cache, pos)
        return self.codec_head(h)[:, -1].float(), h

    def trace(self) -> None:
        """Record the talker's one-position step (:meth:`Decoder.trace_step`) and the code
        predictor's prefill and step (:meth:`CodePredictor.trace`) as TorchScript graphs,
        used from then on by :meth:`decode` (one position, every row at it) and
        :meth:`CodePredictor.predict`. Same ATen ops on the same values, so the same
        results bit for bit (checked in ``tests/qwen3/test_qwen3_talker.py``), without the Python
        interpreter between the ops (a 28-layer step is ~1,000 small ops). About 3 s for
        0.6B on 2 cores.
        Replace no linear afterwards (:meth:`untrace` first)."""
        self.model.trace_step()
        self.code_predictor.trace()

    def untrace(self) -> None:
        """Drop the graphs of :meth:`trace` (eager calls again)."""
        self.model.untrace_step()
        self.code_predictor.untrace()

    @property
    def traced(self) -> bool:
        return self.model.traced


def load_talker(checkpoint: Path | str, dtype: torch.dtype = torch.float32,
                device: torch.device | str = "cpu") -> Talker:
    """Build the talker from ``checkpoint/config.json`` and load ``talker.*`` from its
    ``model.safetensors`` (bf16 in the official files), cast to ``dtype``.

    Raises :class:`CheckpointError` if a talker tensor is missing, unexpected or misshapen
    (other prefixes, e.g. ``speaker_encoder.*``, are ignored)."""
    d = Path(checkpoint)
    spec = TalkerSpec.from_config(json.loads((d / "config.json").read_text()))
    with torch.device("meta"):
        talker = Talker(spec)
    state = {k[len("talker."):]: v for k, v in load_file(d / "model.safetensors").items()
             if k.startswith("talker.")}
    want = talker.state_dict()
    missing, extra = sorted(set(want) - set(state)), sorted(set(state) - set(want))
    bad = [k for k in want if k in state and tuple(state[k].shape) != tuple(want[k].shape)]
    if missing or extra or bad:
        raise CheckpointError(f"{d / 'model.safetensors'} does not match its config.json: "
                              f"missing {missing[:3]}, unexpected {extra[:3]}, wrong shape {bad[:3]}; "
                              "re-download the checkpoint")
    talker.load_state_dict({k: v.to(dtype) for k, v in state.items()}, assign=True)
    return talker.to(device).eval()
