"""Rotary position embedding: our factors computed once per pass (``rope_tables``) and the
four-operation rotation (``rotate``) against the official package's ``apply_rope``
(``pocket_tts.modules.rope``), bit for bit, for every dtype the models run in, positions
far into a stream, and rows at positions of their own (the official function takes one
offset for all rows, so each row is compared with its own call)."""

from __future__ import annotations

import pytest
import torch

from vocalis.models.pocket.layers import Attention, apply_rope, rope_tables, rotate

official_rope = pytest.importorskip("pocket_tts.modules.rope")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("t,offset", [(1, 0), (42, 137), (5, 3999), (300, 12)])
def test_rotation_matches_official_bit_for_bit(dtype, t, offset):
    g = torch.Generator().manual_seed(t + offset)
    q = (torch.randn(2, t, 16, 64, generator=g) * 3).to(dtype)
    k = (torch.randn(2, t, 8, 64, generator=g) * 3).to(dtype)
    want_q, want_k = official_rope.apply_rope(q, k, offset, 10_000)
    got_q, got_k = apply_rope(q, k, offset, 10_000)
    assert got_q.dtype == dtype and torch.equal(got_q, want_q)
    assert torch.equal(got_k, want_k)
    # the factors for a whole pass, used by every layer
    cos2, sin2 = rope_tables(torch.arange(t)[None] + offset, 64, 10_000)
    assert torch.equal(rotate(q, cos2, sin2), want_q)


def test_rows_at_their_own_positions_match_official_row_by_row():
    g = torch.Generator().manual_seed(7)
    starts = torch.tensor([0, 250, 1234])
    q = torch.randn(3, 4, 16, 32, generator=g)
    k = torch.randn(3, 4, 16, 32, generator=g)
    got_q, got_k = apply_rope(q, k, starts, 10_000)
    for r, s in enumerate(starts.tolist()):
        want_q, want_k = official_rope.apply_rope(q[r:r + 1], k[r:r + 1], s, 10_000)
        assert torch.equal(got_q[r:r + 1], want_q) and torch.equal(got_k[r:r + 1], want_k)


def test_projection_rotated_once_for_queries_and_keys_matches_the_separate_path():
    """``Attention._qkv`` with the pass's factors (queries and keys rotated together) gives
    what the per-layer path gives (the official op order), for grouped-query heads."""
    torch.manual_seed(3)
    attn = Attention(64, heads=4, max_period=10_000, kv_heads=2)
    x = torch.randn(2, 6, 64)
    pos = torch.tensor([10, 77])
    steps = pos[:, None] + torch.arange(6)
    with torch.no_grad():
        ref = attn._qkv(x, pos)
        got = attn._qkv(x, pos, rope_tables(steps, attn.head_dim, attn.max_period))
    for a, b in zip(ref, got):
        assert a.shape == b.shape and torch.equal(a, b)
