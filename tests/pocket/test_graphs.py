"""The per-frame work as TorchScript graphs (vocalis.models.pocket.graphs) gives the eager
forward's results bit for bit: the same FlowLM step conditions, sampled latents, codec
states and audio, at every batch size and whatever shapes the graphs ran before.

The reference is the eager forward of the same model (the path ``test_parity`` checks
against the official package, and that exact models keep).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

import vocalis
from vocalis.models.pocket.batch import PocketBatch

CONFIG = "english_2m_2026-10"
TEXTS = ["Hello there, how are you today?", "A second row.",
         "The third row has a rather longer text than the other rows have."]


#: (quantize, tuning, id): the kernels a load may choose; the graphs record whichever
#: are in place
LOADS = [(False, "fixed", "float32-packed"),
         (False, "fixed,flow_linears=vocalis", "float32-own-kernel"),
         (False, "fixed,flow_linears=hybrid,codec_linears=default", "float32-hybrid"),
         (True, "fixed", "int8"),
         (True, "fixed,codec_linears=int8,codec_dtype=bfloat16", "int8-quantized-codec")]


@pytest.fixture(scope="module", params=LOADS, ids=[x[2] for x in LOADS])
def loaded(checkpoints, request):
    quantize, tuning, name = request.param
    if "vocalis" in tuning:  # our float32 kernel, built on purpose (skips where it cannot be)
        request.getfixturevalue("built_kernels")
    d = checkpoints.get(CONFIG)
    tts = vocalis.load(str(d), max_batch=8, tuning=tuning, quantize=quantize)
    voice = tts.voice(str(d / "voice.wav"))
    yield tts, voice
    tts.close()


@contextlib.contextmanager
def eager(model):
    """Run ``model`` without its graphs inside the block."""
    graphs, samplers = model.graphs, model.flow_lm.__dict__["_sample_graphs"]
    model.graphs, model.flow_lm.__dict__["_sample_graphs"] = {}, {}
    try:
        yield
    finally:
        model.graphs, model.flow_lm.__dict__["_sample_graphs"] = graphs, samplers


def test_a_loaded_model_has_its_graphs_and_an_exact_one_none(loaded, checkpoints):
    """Every load records the codec's graph and, but with the hybrid FlowLM kernel (which
    picks its kernel by the row count at each call), the FlowLM step's and the sampler's;
    an exact model records none."""
    tts, _ = loaded
    hybrid = tts.tuning.choices["flow_linears"] == "hybrid"
    assert set(tts.model.graphs) == ({"codec_head"} if hybrid else {"flow_step", "codec_head"})
    assert set(tts.model.flow_lm.__dict__["_sample_graphs"]) == (set() if hybrid else {1})
    exact = vocalis.load(str(checkpoints.get(CONFIG)), exact=True)
    try:
        assert exact.model.graphs == {}
        assert not exact.model.flow_lm.__dict__.get("_sample_graphs")
    finally:
        exact.close()


def test_tuning_and_quantizing_drop_the_graphs(checkpoints):
    """The graphs hold the kernels they were recorded with: choosing kernels again
    (``tune``) or quantizing drops them (the load records them again after its choices)."""
    from vocalis.models.pocket.tuning import tune

    tts = vocalis.load(str(checkpoints.get(CONFIG)), tuning="fixed,flow_linears=default")
    try:
        model = tts.model
        assert model.graphs
        model.quantize_int8()  # (of a FlowLM with PyTorch's linears: as a load does it)
        assert model.graphs == {} and model.flow_lm.__dict__["_sample_graphs"] == {}
    finally:
        tts.close()
    tts = vocalis.load(str(checkpoints.get(CONFIG)), tuning="fixed")
    try:
        with pytest.raises(ValueError, match="unpacked linears"):
            tune(tts.model, 2, 4, False, spec="fixed")  # packed already: refused, after
        assert tts.model.graphs == {}  # dropping the graphs recorded with those kernels
    finally:
        tts.close()


def test_steps_samples_and_codec_match_eager_at_every_batch_size(loaded):
    """Two batches given the same prompts and inputs, one through the graphs and one eager:
    every step's condition, every sampled latent and every codec output is equal, for
    batches of 3, 1 and 2 rows in turn (the graphs were recorded on 2 rows) and for the
    codec's row halves (rows [0, 1) and [1, 3), as the engine splits many rows)."""
    tts, voice = loaded
    model = tts.model
    ids = [model.chunk_text(t)[0][1] for t in TEXTS]
    batches = {"graph": PocketBatch(model, 8), "eager": PocketBatch(model, 8)}
    pos = {}
    for name, batch in batches.items():
        with contextlib.nullcontext() if name == "graph" else eager(model):
            pos[name] = batch.prefill([0, 1, 2], [voice.state] * 3, ids)
    assert pos["graph"] == pos["eager"]
    latent = model.flow_lm.latent_dim
    gen = torch.Generator().manual_seed(4)
    lat = torch.randn(3, latent, generator=gen)
    noise = torch.randn(3, latent, generator=gen)
    positions = list(pos["graph"])
    for k, n in enumerate([3, 1, 2, 3]):
        bos = torch.tensor([k == 0] * n)
        p = torch.tensor(positions[:n])
        out = {}
        for name, batch in batches.items():
            with contextlib.nullcontext() if name == "graph" else eager(model):
                cond = batch.step(n, lat[:n], bos, p, max(positions[:n]))
                sampled = model.flow_lm.sample(cond, noise[:n], 1)
                first = [k == 0] * n
                heads = [batch.decode_head(list(range(n)), sampled, first)] if n < 3 else [
                    batch.decode_head([0], sampled[:1], first[:1]),
                    batch.decode_head([1, 2], sampled[1:], first[1:])]
                pcm = batch.decode_tail(list(range(n)), torch.cat(heads), first)
            out[name] = (cond, sampled, heads, pcm)
        g, e = out["graph"], out["eager"]
        assert torch.equal(g[0], e[0]), f"step {k}: condition"
        assert torch.equal(g[1], e[1]), f"step {k}: sampled latents"
        assert all(torch.equal(a, b) for a, b in zip(g[2], e[2])), f"step {k}: codec head"
        assert torch.equal(g[3], e[3]), f"step {k}: audio"
        for i in range(n):
            positions[i] += 1
        lat = torch.cat([g[1], lat[n:]])
    for a, b in zip(batches["graph"].dec_kv + batches["graph"].flow_kv,
                    batches["eager"].dec_kv + batches["eager"].flow_kv):
        assert torch.equal(a, b)  # the caches the graphs wrote in place


def test_a_request_sounds_the_same_with_and_without_graphs(loaded):
    tts, voice = loaded
    want = None
    with eager(tts.model):
        want = tts.synthesize(TEXTS[2], voice=voice, seed=8, max_frames=12).samples
    got = tts.synthesize(TEXTS[2], voice=voice, seed=8, max_frames=12).samples
    assert got.shape == want.shape and np.array_equal(got, want)
