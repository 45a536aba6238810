"""The SEANet decoder's blocks by one kernel each (``codec_seanet=vocalis``:
``torch.ops.vocalis_f32.seanet_block``, ``vocalis.models.pocket.mimi.fused_block``).

The reference is the decoder's own modules run in float64 (PyTorch's convolutions, not our
code); the kernel's float32 error against it must be of the size of the float32 modules'
own. The official package's audio with the kernel in place: tests/pocket/test_parity.py
(``test_own_float32_kernels_match_official``); other instruction sets (NEON, portable C++):
tests/families/test_kernels_arm.py.
"""

from __future__ import annotations

import copy
import re

import pytest
import torch

import vocalis
from vocalis.models.pocket.layers import StreamingConv1d, StreamingConvTranspose1d
from vocalis.models.pocket.mimi import (
    DecoderState,
    fused_block,
    seanet_fusable,
    set_seanet,
)

CONFIG = "english_2m_2026-10"


@pytest.fixture(scope="module")
def model(checkpoints, built_kernels):
    tts = vocalis.load(str(checkpoints.get(CONFIG)), threads=2, tuning="fixed")
    yield tts.model
    tts.close()


def features(decoder, rows: int, frames: int, seed: int) -> list[torch.Tensor]:
    """Random inputs of ``decoder``, one frame (16 steps) per call."""
    g = torch.Generator().manual_seed(seed)
    c = decoder.model[0].conv.in_channels
    return [torch.randn(rows, c, 16, generator=g) for _ in range(frames)]


def decode(decoder, xs: list[torch.Tensor], dtype=torch.float32) -> torch.Tensor:
    """``xs`` through ``decoder`` call by call from a fresh state (its convolutions' own, in
    their weights' dtype): ``[rows, 1, samples]``."""
    state = {m: m.new_state(xs[0].shape[0]) for m in decoder.modules()
             if isinstance(m, (StreamingConv1d, StreamingConvTranspose1d))}
    with torch.inference_mode():
        return torch.cat([decoder(x.to(dtype), state) for x in xs], dim=-1)


def test_the_released_layout_is_fusable_and_the_kernel_decodes_as_the_modules(model):
    """Every block by the kernel: within float32 rounding of the modules run in float64, as
    close as the float32 modules themselves; the audio is not silence."""
    dec = model.mimi.decoder
    assert seanet_fusable(dec)
    xs = features(dec, 3, 5, seed=1)
    exact = decode(copy.deepcopy(dec).double(), xs, torch.float64)
    set_seanet(dec, "default")
    modules = decode(dec, xs)
    set_seanet(dec, "vocalis")
    try:
        fused = decode(dec, xs)
    finally:
        set_seanet(dec, "default")
    assert fused.shape == exact.shape == (3, 1, 5 * 1920)
    scale = exact.abs().max().item()
    assert scale > 1e-3  # not silence
    err_fused = (fused.double() - exact).abs().max().item()
    err_modules = (modules.double() - exact).abs().max().item()
    assert err_fused < 1e-5 * scale and err_fused < 4 * err_modules + 1e-7 * scale
    assert not torch.equal(fused, modules)  # the kernel did run


def block_inputs(dec, rows: int, seed: int):
    """Each upsampling block's first layer, its frames per call and an input of two calls'
    frames for ``rows`` rows (past the first convolution, which is PyTorch's)."""
    g = torch.Generator().manual_seed(seed)
    for i in range(1, len(dec.model) - 2, 3):
        c_in = dec.model[i + 1].convtr.in_channels
        steps = {1: 16, 4: 96, 7: 480}.get(i, 16)
        yield i, steps, torch.randn(rows, c_in, 2 * steps, generator=g)


def in_two_calls(dec, i: int, x: torch.Tensor, steps: int, state: dict) -> torch.Tensor:
    with torch.inference_mode():
        return torch.cat([fused_block(dec, i, x[..., :steps], state),
                          fused_block(dec, i, x[..., steps:], state)], dim=-1)


def test_a_block_gives_the_same_bits_whatever_its_calls_and_rows(model):
    """Each block alone: two frames in one call equal the same frames in two calls (the
    states carry the exact partial sums and left contexts), and a row decoded alone equals
    it decoded among others (the products of many rows share their weights, each row's
    sums keep their order)."""
    dec = model.mimi.decoder
    set_seanet(dec, "vocalis")
    try:
        for i, steps, x in block_inputs(dec, 4, seed=2):
            whole_state = DecoderState(model.mimi, 4, 8).convs
            split_state = DecoderState(model.mimi, 4, 8).convs
            alone_state = DecoderState(model.mimi, 1, 8).convs
            with torch.inference_mode():
                whole = fused_block(dec, i, x, whole_state)
            split = in_two_calls(dec, i, x, steps, split_state)
            alone = in_two_calls(dec, i, x[2:3], steps, alone_state)
            assert torch.equal(whole, split), i
            assert torch.equal(whole[2:3], alone), i
            for m, s in whole_state.items():
                assert torch.equal(s[0], split_state[m][0]), (i, m)
                assert torch.equal(s[0][2:3], alone_state[m][0]), (i, m)
    finally:
        set_seanet(dec, "default")


def test_a_lone_row_shared_by_threads_gives_the_bits_of_one_thread(model):
    """A lone row (a stream's first frame) is computed by every thread of the caller, each
    stage's channels (the output convolution's time steps) split among them: for one, two
    and three threads, two calls of each block give the bits of the same row decoded among
    others (whose rows are computed one per thread, whole), states included."""
    dec = model.mimi.decoder
    set_seanet(dec, "vocalis")
    before = torch.get_num_threads()
    try:
        for i, steps, x in block_inputs(dec, 3, seed=3):
            among_state = DecoderState(model.mimi, 3, 8).convs
            torch.set_num_threads(1)
            among = in_two_calls(dec, i, x, steps, among_state)
            for threads in (1, 2, 3):
                torch.set_num_threads(threads)
                alone_state = DecoderState(model.mimi, 1, 8).convs
                alone = in_two_calls(dec, i, x[1:2], steps, alone_state)
                assert torch.equal(among[1:2], alone), (i, threads)
                for m, s in among_state.items():
                    assert torch.equal(s[0][1:2], alone_state[m][0]), (i, m, threads)
    finally:
        torch.set_num_threads(before)
        set_seanet(dec, "default")


def test_the_choice_refuses_what_it_cannot_compute(model):
    dec = model.mimi.decoder
    with pytest.raises(ValueError, match="unknown SEANet kind 'fast'"):
        set_seanet(dec, "fast")
    odd = copy.deepcopy(dec)
    odd.model[-3].block[3].conv = torch.nn.Conv1d(32, 64, 3)  # a residual block's 1x1 made 3
    assert not seanet_fusable(odd)
    with pytest.raises(ValueError, match="not the ones codec_seanet=vocalis computes"):
        set_seanet(odd, "vocalis")
    ops = torch.ops.vocalis_f32
    w0p, w1p, w2p = ops.pack_seanet(torch.randn(8, 4, 8), torch.randn(4, 4, 3),
                                    torch.randn(4, 4, 1))
    b = torch.zeros(4)
    with pytest.raises(RuntimeError, match=re.escape("seanet_block: the states must be")):
        ops.seanet_block(torch.randn(2, 8, 5), torch.zeros(2, 4, 3), w0p, b, 4,
                         torch.zeros(2, 4, 2), w1p, b, w2p, b, 1, None, None, None)
    with pytest.raises(RuntimeError, match="seanet_block: the weights do not match"):
        ops.seanet_block(torch.randn(2, 6, 5), torch.zeros(2, 4, 4), w0p, b, 4,
                         torch.zeros(2, 4, 2), w1p, b, w2p, b, 1, None, None, None)
    with pytest.raises(RuntimeError, match="pack_seanet: w0"):
        ops.pack_seanet(torch.randn(8, 6, 8), torch.randn(4, 6, 3), torch.randn(6, 4, 1))
