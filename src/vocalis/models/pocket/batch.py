"""Pocket TTS over a batch of rows: the model side of continuous batching.

Each row holds one request at its own position. The FlowLM keeps a linear KV cache
per layer ``[2, rows, Hkv, capacity, D]`` (a head's slots contiguous:
:meth:`~vocalis.models.pocket.layers.Attention.forward_rows`; zero-filled at allocation;
the voice prefix is copied in at each text chunk), and every step advances all rows by one
frame in one forward pass with per-row RoPE positions and causal masks. The Mimi decoder
keeps per-row streaming state (conv tails ``[rows, C, k]`` and a ring KV cache
``[2, rows, H, slots, D]`` covering its attention context) and decodes the new frames of
any subset of rows in one call.

The engine (``vocalis.engine``) owns requests, rows, random generators and EOS
bookkeeping; this class owns the tensors and the math.
"""

from __future__ import annotations

import torch

from vocalis.engine.family import KEEP_CACHE_POSITIONS, EngineBatch
from vocalis.models.pocket.layers import StreamingConv1d, StreamingConvTranspose1d
from vocalis.models.pocket.model import FADE_IN_SAMPLES, PocketTTSModel
from vocalis.models.pocket.voice import VoiceState


def _grow(t: torch.Tensor, dim_sizes: dict[int, int]) -> torch.Tensor:
    """Zero tensor with some dims enlarged, holding ``t`` in its leading corner."""
    shape = list(t.shape)
    for d, n in dim_sizes.items():
        shape[d] = max(shape[d], n)
    if shape == list(t.shape):
        return t
    out = t.new_zeros(shape)
    out[tuple(slice(0, n) for n in t.shape)] = t
    return out


class PocketBatch(EngineBatch):
    """Batched state of one :class:`PocketTTSModel` (rows grow on demand up to ``max_rows``)."""

    def __init__(self, model: PocketTTSModel, max_rows: int):
        self.model = model
        self.max_rows = max_rows
        fm, mimi = model.flow_lm, model.mimi
        dev = model.device
        t = fm.config.transformer
        self.rows = 0
        self.capacity = 0
        self.high: list[int] = []  # per row: one past the highest FlowLM position written
        # per row: (position, condition [cond]) of a first step computed in its prompt pass
        self.ready: dict[int, tuple[int, torch.Tensor]] = {}
        self.flow_kv = [torch.zeros(2, 0, t.kv_heads, 0, t.head_dim, device=dev)
                        for _ in range(t.num_layers)]
        dt = mimi.config.dec_transformer
        ring = dt.context + mimi.upsample_stride  # a frame's steps plus the attention context
        self.dec_kv = [torch.zeros(2, 0, dt.num_heads, ring, dt.d_model // dt.num_heads,
                                   device=dev) for _ in range(dt.num_layers)]
        self.dec_pos = torch.zeros(0, dtype=torch.long, device=dev)
        self.convs = [m for m in mimi.modules()
                      if isinstance(m, (StreamingConv1d, StreamingConvTranspose1d))
                      and m is not mimi.downsample.conv and not _in_encoder(mimi, m)]
        self.conv_state = {m: m.new_state(0)[0] for m in self.convs}
        self.fade = torch.linspace(0, 1, FADE_IN_SAMPLES, device=dev)

    # ---------------------------------------------------------------- memory

    def ensure(self, rows: int, capacity: int) -> None:
        """Grow to at least ``rows`` rows and ``capacity`` FlowLM positions (copies)."""
        if rows > self.max_rows:
            raise ValueError(f"{rows} rows exceed the batch capacity {self.max_rows}")
        if rows <= self.rows and capacity <= self.capacity:
            return
        rows = max(rows, min(self.max_rows, 2 * self.rows), self.rows)
        capacity = max(capacity, self.capacity)
        if capacity > self.capacity:
            capacity = max(capacity, int(self.capacity * 1.5), 256)
        self.flow_kv = [_grow(d, {1: rows, 3: capacity}) for d in self.flow_kv]
        self.dec_kv = [_grow(d, {1: rows}) for d in self.dec_kv]
        self.dec_pos = _grow(self.dec_pos, {0: rows})
        self.conv_state = {m: _grow(s, {0: rows}) for m, s in self.conv_state.items()}
        self.high += [0] * (rows - len(self.high))
        self.rows, self.capacity = rows, capacity

    # ---------------------------------------------------------------- FlowLM

    @torch.no_grad()
    def prefill(self, rows: list[int], voices: list[VoiceState], token_ids: list[list[int]],
                first_step: bool = False) -> list[int]:
        """Put each row's voice then its text chunk into the cache; returns each row's next
        position.

        ``first_step``: also run each row's first FlowLM step of the chunk (the BOS latent
        at the position after its last token) as one more position of the same pass, so
        that the weights are read once for both; :meth:`take_ready` then hands its
        condition to the step. A shorter row's BOS follows its own last token, its padding
        after the BOS. The official package runs it as a separate 1-row pass: the condition
        agrees to float rounding (the products are summed in another order), not bit for
        bit, so exact models do not use it.

        One forward pass over all rows' chunk tokens (the official prompt pass, batched):
        shorter chunks are padded at the end with token 0, whose keys land after the row's
        last real position where the row's own steps overwrite them before reading them
        (causal masks keep them out of every real token's attention). A single row runs
        unpadded, as the official pass.

        Args:
            rows: cache rows; voices: their voice states (KV ``[2, 1, P, Hkv, D]`` per layer);
            token_ids: their chunks' token ids (non-empty).
        """
        fm = self.model.flow_lm
        dev = self.model.device
        lengths = [len(ids) for ids in token_ids]
        t = max(lengths)
        starts = [v.length for v in voices]
        extra = int(first_step)
        self.ensure(max(rows) + 1, max(starts) + t + extra)
        for row, voice in zip(rows, voices):
            self.ready.pop(row, None)
            for d, kv in zip(self.flow_kv, voice.kv):  # [2, 1, P, Hkv, D], head-major here
                d[:, row:row + 1, :, :voice.length] = kv.transpose(2, 3)
            self.high[row] = max(self.high[row], voice.length + t + extra)
        tokens = torch.tensor([ids + [0] * (t - len(ids)) for ids in token_ids],
                              dtype=torch.long, device=dev)
        pos = torch.tensor(starts, dtype=torch.long, device=dev)
        where = slice(rows[0], rows[0] + 1) if len(rows) == 1 else torch.tensor(rows, device=dev)
        x = fm.conditioner(tokens)
        if first_step:  # the step's input, as in step(): BOS through the input projection
            bos = fm.input_linear(fm.bos_emb[None, None, :].to(x.dtype))[0]  # [1, d]
            x = torch.cat([x, x.new_zeros(x.shape[0], 1, x.shape[2])], dim=1)
            for i, n in enumerate(lengths):  # right after the row's own tokens
                x[i, n + 1:] = x[i, n:-1].clone()  # its padding moves one on
                x[i, n] = bos[0]
        # the pass reads one output per row (its BOS step's) or none: the last layer runs
        # past its keys and values for that step only
        keep = torch.tensor([[n] for n in lengths] if first_step else [[]] * len(rows),
                            dtype=torch.long, device=dev)
        h = fm.transformer.forward_linear_rows(x, self.flow_kv, where, pos, max(starts),
                                               keep=keep)
        if first_step:
            for i, (row, n) in enumerate(zip(rows, lengths)):
                self.ready[row] = (starts[i] + n, fm.condition(h[i:i + 1])[0])
        return [p + n for p, n in zip(starts, lengths)]

    def take_ready(self, rows: list[int], pos: list[int]) -> dict[int, torch.Tensor]:
        """The conditions ``[cond]`` that the prompt passes of ``rows`` computed for a step
        at these positions (``pos[r]``), by row; the step computes the others. Every entry
        of ``rows`` is used up either way."""
        got = {r: self.ready.pop(r, None) for r in rows}
        return {r: g[1] for r, g in got.items() if g is not None and g[0] == pos[r]}

    def oversized(self) -> bool:
        """More than KEEP_CACHE_POSITIONS positions per row: give it back when idle."""
        return self.capacity > KEEP_CACHE_POSITIONS

    def release_memory(self) -> None:
        """Drop the FlowLM cache (its size follows the longest request seen) while no row is
        active; :meth:`ensure` allocates it again on demand. Decoder state is kept."""
        self.flow_kv = [d.new_zeros(2, self.rows, d.shape[2], 0, d.shape[4])
                        for d in self.flow_kv]
        self.capacity = 0
        self.high = [0] * self.rows
        self.ready.clear()

    def cache_bytes(self) -> int:
        """Bytes held by the FlowLM cache."""
        return sum(d.numel() * d.element_size() for d in self.flow_kv)

    def clear_row(self, row: int) -> None:
        """Zero everything ``row`` wrote to the FlowLM cache (after a failed request, whose
        values may be NaN or inf: masked keys get zero weight, but 0 * NaN is NaN)."""
        self.ready.pop(row, None)
        if row < self.rows:
            for d in self.flow_kv:
                d[:, row, :, :self.high[row]] = 0
            self.high[row] = 0

    @torch.no_grad()
    def step(self, n: int, latents: torch.Tensor, bos: torch.Tensor, pos: torch.Tensor,
             pos_max: int, probe=None) -> torch.Tensor:
        """One FlowLM step for rows ``[0, n)``.

        Args:
            latents: previous normalized latents ``[n, 32]`` (ignored where ``bos``).
            bos: bool ``[n]``, rows at the first frame of a chunk (input is ``bos_emb``).
            pos: long ``[n]`` positions of the new step; ``pos_max`` = ``max(pos)``.
            probe: reads the step's attention over rows' text tokens (word timestamps,
                :class:`vocalis.models.text_attention.TextAttention`), or None.
        Returns:
            condition ``[n, cond]`` float32, input of the EOS and sampler heads.
        """
        return self.step_rows(list(range(n)), latents, bos, pos, pos_max, probe)

    def step_rows(self, rows: list[int], latents: torch.Tensor, bos: torch.Tensor,
                  pos: torch.Tensor, pos_max: int, probe=None) -> torch.Tensor:
        """:meth:`step` for the rows ``rows`` only (inputs ``[len(rows), ...]`` in that
        order); every other row's cache is left untouched. Returns ``[len(rows), cond]``."""
        fm = self.model.flow_lm
        for r in rows:
            self.high[r] = max(self.high[r], pos_max + 1)
        first = rows == list(range(len(rows)))
        graph = self.model.graphs.get("flow_step")
        if graph is not None and first and probe is None:  # rows [0, n): views of the caches
            n = len(rows)
            return graph(latents, bos, pos, torch.arange(pos_max + 1, device=latents.device),
                         [d[:, :n] for d in self.flow_kv])
        where = slice(0, len(rows)) if first else \
            torch.tensor(rows, dtype=torch.long, device=latents.device)
        x = torch.where(bos[:, None], fm.bos_emb[None, :], latents)[:, None, :]
        h = fm.transformer.forward_linear_rows(fm.input_linear(x), self.flow_kv, where,
                                               pos, pos_max, probe)
        return fm.condition(h)

    # ---------------------------------------------------------------- Mimi

    def _rows(self, rows: list[int]) -> torch.Tensor:
        return torch.tensor(rows, dtype=torch.long, device=self.dec_pos.device)

    @torch.no_grad()
    def decode_head(self, rows: list[int], latents: torch.Tensor, first: list[bool]) -> torch.Tensor:
        """First codec stage for one normalized latent per row: ``[n, 32]`` ->
        ``[n, C, 16]`` (latent projection, upsampling to 200 Hz, decoder transformer).

        Rows flagged ``first`` start from a fresh state (a new text chunk).
        """
        mimi = self.model.mimi
        idx = self._rows(rows)
        up = mimi.upsample.convtr
        if any(first):
            fresh = idx[torch.tensor(first, device=idx.device)]
            self.dec_pos[fresh] = 0
            self.conv_state[up][fresh] = 0
            for d in self.dec_kv:  # stale slots are masked, but 0 * NaN would still be NaN
                d[:, fresh] = 0
        where = _as_slice(rows)
        graph = self.model.graphs.get("codec_head")
        if graph is not None and where is not None:  # consecutive rows: views of the caches
            x, state = graph(latents, self.conv_state[up][idx], self.dec_pos[idx],
                             [d[:, where] for d in self.dec_kv])
            self.conv_state[up][idx] = state
        else:
            state = [self.conv_state[up][idx]]
            x = codec_head(self.model, latents, state, self.dec_kv, where or idx,
                           self.dec_pos[idx])
            self.conv_state[up][idx] = state[0]
        self.dec_pos[idx] += mimi.upsample_stride
        return x

    @torch.no_grad()
    def decode_tail(self, rows: list[int], x: torch.Tensor, first: list[bool]) -> torch.Tensor:
        """Second codec stage: ``[n, C, 16]`` -> PCM ``[n, 1920]`` (SEANet decoder), with
        the 5 ms fade-in on rows flagged ``first``. Its state is disjoint from the first
        stage's, so the two stages may run on two threads for consecutive frames."""
        mimi = self.model.mimi
        idx = self._rows(rows)
        tail = [m for m in self.convs if m is not mimi.upsample.convtr]
        if any(first):
            fresh = idx[torch.tensor(first, device=idx.device)]
            for m in tail:
                self.conv_state[m][fresh] = 0
        sub = {m: [self.conv_state[m][idx], False] for m in tail}
        x = mimi.decoder(x.to(mimi.decoder_dtype()), sub)
        for m in tail:
            self.conv_state[m][idx] = sub[m][0]
        pcm = x[:, 0].float()
        if any(first):
            f = torch.tensor(first, device=pcm.device)
            n = min(FADE_IN_SAMPLES, pcm.shape[-1])
            pcm[f, :n] = pcm[f, :n] * self.fade[:n]
        return pcm

    def decode(self, rows: list[int], latents: torch.Tensor, first: list[bool]) -> torch.Tensor:
        """Both codec stages: one normalized latent per row ``[n, 32]`` -> PCM ``[n, 1920]``;
        rows flagged ``first`` start a new text chunk (fresh state, fade-in)."""
        return self.decode_tail(rows, self.decode_head(rows, latents, first), first)


def codec_head(model: PocketTTSModel, latents: torch.Tensor, up_state: list,
               dec_kv: list[torch.Tensor], rows: slice | torch.Tensor,
               pos: torch.Tensor) -> torch.Tensor:
    """The first codec stage's math: normalized latents ``[n, 32]`` -> ``[n, C, 16]``
    (denormalize, latent projection, upsampling to the encoder rate, decoder transformer
    over the ring caches ``dec_kv`` of ``rows`` at positions ``pos [n]``); ``up_state``:
    ``[state]`` of the upsampler (``[n, C, tail]``), replaced by its next state."""
    mimi, fm = model.mimi, model.flow_lm
    x = (latents * fm.emb_std + fm.emb_mean)[:, :, None]  # [n, 32, 1]
    x = mimi.quantizer.output_proj(x)
    x = mimi.upsample.convtr(x, up_state)
    return mimi.decoder_transformer.transformer.forward_ring_rows(
        x.transpose(1, 2), dec_kv, rows, pos).transpose(1, 2)


def _as_slice(rows: list[int]) -> slice | None:
    """``rows`` as a slice when they are consecutive and increasing (the usual case), so
    that the decoder reads its ring caches as views instead of gathering copies."""
    if rows and rows == list(range(rows[0], rows[0] + len(rows))):
        return slice(rows[0], rows[0] + len(rows))
    return None


def _in_encoder(mimi, module) -> bool:
    return any(module is m for m in mimi.encoder.modules())
