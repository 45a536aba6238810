"""A prompt pass also runs each row's first FlowLM step of the chunk (one weight read for
both), for one row or a group of rows of different lengths.

The reference is the separate 1-row step (``PocketBatch.step`` with the BOS input), the
path the official package takes and that ``test_parity`` checks against it; the fused
condition and cache must agree with it to float rounding. The whole-request check against
the official package is ``test_parity.test_every_config_matches_official`` (default load).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import vocalis
from vocalis.models.pocket.batch import PocketBatch
from tests.engine.test_engine import cosine

CONFIG = "english_2m_2026-10"
TEXT = "Hello there, how are you today?"


@pytest.fixture(scope="module")
def loaded(checkpoints):
    d = checkpoints.get(CONFIG)
    tts = vocalis.load(str(d), max_batch=4, tuning="fixed")
    voice = tts.voice(str(d / "voice.wav"))
    yield tts, voice
    tts.close()


def prompt(tts):
    """A fresh 4-row batch and the token ids of TEXT's first chunk."""
    return PocketBatch(tts.model, 4), tts.model.chunk_text(TEXT)[0][1]


def test_fused_first_step_equals_the_separate_step(loaded):
    tts, voice = loaded
    latent = tts.model.flow_lm.latent_dim
    with torch.inference_mode():
        fused, ids = prompt(tts)
        (end,) = fused.prefill([0], [voice.state], [ids], first_step=True)
        cond = fused.take_ready([0], [end])[0][None]
        sep, _ = prompt(tts)
        assert sep.prefill([0], [voice.state], [ids]) == [end]
        want = sep.step(1, torch.zeros(1, latent), torch.ones(1, dtype=torch.bool),
                        torch.tensor([end]), end)
    assert end == voice.state.length + len(ids)
    assert cond is not None and cond.shape == want.shape and want.abs().sum() > 0
    torch.testing.assert_close(cond, want, rtol=1e-5, atol=1e-5)
    for a, b in zip(fused.flow_kv, sep.flow_kv):  # the step's keys and values too
        torch.testing.assert_close(a[:, 0, :, :end + 1], b[:, 0, :, :end + 1], rtol=1e-5, atol=1e-5)
    assert fused.high[0] == sep.high[0] == end + 1
    assert not fused.ready  # used up


def test_a_ready_step_serves_only_its_row_and_position(loaded):
    tts, voice = loaded
    with torch.inference_mode():
        batch, ids = prompt(tts)
        (end,) = batch.prefill([1], [voice.state], [ids], first_step=True)
        assert batch.take_ready([1], [0, end + 1]) == {}  # another position
        assert not batch.ready  # and it is gone: the step recomputes the row
        batch.prefill([1], [voice.state], [ids], first_step=True)
        assert list(batch.take_ready([0, 1], [end, end])) == [1]  # row 0 was not prefilled
        batch.prefill([1], [voice.state], [ids], first_step=True)
        batch.prefill([1, 2], [voice.state] * 2, [ids, ids])  # a later shared pass
        assert batch.take_ready([1], [0, end]) == {}
        batch.prefill([1], [voice.state], [ids], first_step=True)
        batch.clear_row(1)  # a failed request
        assert batch.take_ready([1], [0, end]) == {}


def test_a_group_prompt_pass_gives_each_row_its_separate_first_step(loaded):
    """Rows of different lengths in one fused pass: each row's BOS right after its own
    tokens, as the separate step of that row alone computes it (condition and cache)."""
    tts, voice = loaded
    latent = tts.model.flow_lm.latent_dim
    chunks = [tts.model.chunk_text(t)[0][1] for t in (TEXT, "Hi.", "A somewhat longer "
                                                      "sentence than the first one, to pad.")]
    with torch.inference_mode():
        fused = PocketBatch(tts.model, 4)
        ends = fused.prefill([0, 2, 3], [voice.state] * 3, chunks, first_step=True)
        ready = fused.take_ready([0, 2, 3], {0: ends[0], 2: ends[1], 3: ends[2]})
        assert sorted(ready) == [0, 2, 3]
        for (row, end), ids in zip(zip((0, 2, 3), ends), chunks):
            sep = PocketBatch(tts.model, 4)
            assert sep.prefill([0], [voice.state], [ids]) == [end]
            want = sep.step(1, torch.zeros(1, latent), torch.ones(1, dtype=torch.bool),
                            torch.tensor([end]), end)
            torch.testing.assert_close(ready[row][None], want, rtol=1e-4, atol=1e-4)
            for a, b in zip(fused.flow_kv, sep.flow_kv):  # the BOS keys and values too
                torch.testing.assert_close(a[:, row, :, :end + 1], b[:, 0, :, :end + 1],
                                           rtol=1e-4, atol=1e-4)


def test_lone_requests_fuse_and_exact_models_do_not(checkpoints, loaded):
    """Through the engine: a request's prompt pass carries its first step unless the
    model is exact (bit-identical to the official package, which runs them apart); both
    speak the same to float rounding."""
    tts, voice = loaded
    d = checkpoints.get(CONFIG)
    exact = vocalis.load(str(d), max_batch=4, exact=True)
    try:
        out, seen = {}, {}
        for name, model in (("fused", tts), ("exact", exact)):
            batch = model.engine.batch
            calls = seen.setdefault(name, [])
            original = batch.prefill

            def record(*a, _orig=original, _calls=calls, **k):
                _calls.append(k.get("first_step", False))
                return _orig(*a, **k)

            batch.prefill = record
            try:
                out[name] = model.synthesize(TEXT + " And one more sentence after it.",
                                             voice=str(d / "voice.wav"), seed=4,
                                             max_frames=10).samples
            finally:
                del batch.prefill
        assert seen["fused"] and all(seen["fused"])
        assert seen["exact"] and not any(seen["exact"])
        assert out["fused"].shape == out["exact"].shape
        assert cosine(out["fused"], out["exact"]) > 0.99999
        assert np.isfinite(out["fused"]).all()
    finally:
        exact.close()


@pytest.mark.parametrize("keep", [[[3], [0]], [[5, 6], [1, 2]], [[], []]], ids=["one", "two", "none"])
def test_a_prompt_pass_that_keeps_some_steps_writes_the_same_cache(loaded, keep):
    """A prompt pass reads one step's output per row (its BOS step) or none: the last layer
    runs its attention and feed-forward for those steps only. Every layer's keys and values
    must be bit for bit those of the whole pass (exact models rely on it), and the kept
    outputs those of the whole pass at the same steps, to float rounding."""
    tts, _ = loaded
    tr = tts.model.flow_lm.transformer
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 7, tr.layers[0].norm1.normalized_shape[0], generator=g)
    pos = torch.tensor([4, 9])

    def run(k):
        caches = [torch.zeros(2, 2, a.self_attn.kv_heads, 16, a.self_attn.head_dim)
                  for a in tr.layers]
        with torch.inference_mode():
            out = tr.forward_linear_rows(x, caches, slice(0, 2), pos, 9, keep=k)
        return out, caches

    whole, want = run(None)
    idx = torch.tensor(keep, dtype=torch.long).reshape(2, -1)
    part, got = run(idx)
    assert part.shape == (2, idx.shape[1], x.shape[2])
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    expect = torch.stack([whole[r, idx[r]] for r in range(2)])
    torch.testing.assert_close(part, expect, rtol=1e-5, atol=1e-5)
