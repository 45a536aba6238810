"""A step's attention over a row's text keys, read beside the model step for word
timestamps (:mod:`vocalis.timing`), shared by the families' transformers.

For each probed row and each chosen head ``h`` of a layer, the step's query ``q_h`` (the
row's last query, RoPE applied) is scored against the keys of the row's text tokens
``k_t`` (RoPE applied, read from the KV cache) and normalized over those keys only:
``p_h = softmax_t(q_h . k_t / sqrt(D))``. The row's scores are the mean of ``p_h`` over
every chosen head of every layer, float32 ``[tokens]`` (summing to 1). The step's own
attention output is untouched (this reads its inputs). Method: attention-based alignment
as in Whisper's word timestamps and Kyutai's pocket-tts PR #280 (heads that follow the word
being spoken), here with a softmax over the text keys only.
"""

from __future__ import annotations

import math

import numpy as np
import torch


class TextAttention:
    """Collects the scores of several rows during one step.

    Args:
        spans: per row index *within the step's batch*, the key slots of its text tokens,
            a ``(start, end)`` range or a long tensor of slots (text tokens fed along the
            generation).
        heads: per layer index, the query heads to read; layers not listed are skipped.
            None: every head of every layer.
    """

    def __init__(self, spans: dict[int, tuple[int, int] | torch.Tensor],
                 heads: dict[int, tuple[int, ...]] | None):
        self.spans = spans
        self.heads = heads
        self._sum: dict[int, torch.Tensor] = {}
        self._count: dict[int, int] = {}

    def capture(self, layer: int, q: torch.Tensor, keys: torch.Tensor, kv_repeat: int) -> None:
        """Read one layer.

        Args:
            q: the step's queries ``[B, H, T, D]`` (the last of T is the step's).
            keys: the cache's keys of the same rows ``[B, S, Hkv, D]`` (slot-indexed).
            kv_repeat: query heads per KV head (grouped-query attention).
        """
        if self.heads is None:
            hs = list(range(q.shape[1]))
        else:
            hs = list(self.heads.get(layer, ()))
            if not hs:
                return
        d = q.shape[-1]
        h_idx = torch.tensor(hs, dtype=torch.long, device=q.device)
        kv_idx = torch.div(h_idx, kv_repeat, rounding_mode="floor")
        for b, span in self.spans.items():
            k = keys[b, span[0]:span[1]] if isinstance(span, tuple) else keys[b, span]
            if not k.shape[0]:
                continue
            k = k.index_select(1, kv_idx).float()  # [tokens, heads, D]
            qq = q[b, :, -1].index_select(0, h_idx).float()  # [heads, D]
            logits = torch.einsum("thd,hd->ht", k, qq) / math.sqrt(d)
            p = torch.softmax(logits, dim=-1).sum(0)
            self._sum[b] = p if b not in self._sum else self._sum[b] + p
            self._count[b] = self._count.get(b, 0) + len(hs)

    def scores(self, b: int) -> np.ndarray | None:
        """Row ``b``'s mean attention over its text tokens, float32 ``[tokens]``, or None
        when nothing was read for it."""
        if b not in self._sum:
            return None
        return (self._sum[b] / self._count[b]).detach().cpu().numpy().astype(np.float32)


__all__ = ["TextAttention"]
