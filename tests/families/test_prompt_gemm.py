"""The prompt passes' GEMM (``torch.ops.vocalis_f32.bf16_gemm``, ``csrc/f32_core.h``) and when
:class:`~vocalis.kernels.f32.F32Linear` runs it (Pocket TTS ``flow_linears=vocalis``).

References independent of the kernel: the float64 product within the float32 error bound of
any summation order (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., eq.
3.5), the step kernel and PyTorch's ``F.linear`` for the calls that must not run it, the
same model with PyTorch's kernels for the audio. Its sum written out with ``std::fma`` is
checked bit for bit on every instruction set by ``tests/families/test_kernels_arm.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import vocalis
from tests.engine.test_engine import cosine
from tests.qwen3.test_qwen3_f32 import bf16_linear, bound
from tests.qwen3.test_qwen3_quantize import lent_outputs
from vocalis.kernels.f32 import GEMM_ROWS, F32Linear

pytestmark = pytest.mark.usefixtures("built_kernels")  # skips where they cannot be built


@pytest.mark.parametrize("k,n", [(1024, 4096), (1027, 37), (13, 7), (520, 16)])
@pytest.mark.parametrize("rows", [16, 41, 100])
def test_gemm_products_stay_within_the_float32_bound(k, n, rows):
    """Every K past the panel blocks of 512 and the blocks of 8, N past panels of 16 and
    tiles of 4, rows past blocks of 6."""
    torch.manual_seed(k + n + rows)
    lin = bf16_linear(k, n)
    op = torch.ops.vocalis_f32
    x = torch.randn(rows, k) * 3
    y = op.bf16_gemm(x, *op.pack_bf16(lin.weight.detach().bfloat16()), n)
    exact = x.double() @ lin.weight.double().t()
    assert y.shape == (rows, n)
    assert ((y.double() - exact).abs() <= bound(x, lin.weight) + 1e-30).all()


def test_a_row_gets_the_same_gemm_result_in_any_batch_on_any_thread_count():
    torch.manual_seed(2)
    lin = bf16_linear(1000, 4100)  # K past 512 and not a multiple of 16; a partial panel
    op = torch.ops.vocalis_f32
    tiles, tail = op.pack_bf16(lin.weight.detach().bfloat16())
    x = torch.randn(41, 1000)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = torch.cat([op.bf16_gemm(x[i:i + 1], tiles, tail, 4100) for i in range(41)])
        parts = torch.cat([op.bf16_gemm(x[:17], tiles, tail, 4100),
                           op.bf16_gemm(x[17:], tiles, tail, 4100)])
        lent, blocks = lent_outputs(op, lambda: op.bf16_gemm(x, tiles, tail, 4100))
        assert blocks > 0  # the codec's idle core took panels
        torch.set_num_threads(2)
        two = op.bf16_gemm(x, tiles, tail, 4100)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(parts, alone)
    assert all(torch.equal(y, alone) for y in lent)
    assert torch.equal(two, alone)


def test_only_prompt_passes_of_enough_rows_run_the_gemm():
    """With ``gemm_rows``: several positions per row and at least that many rows in all run
    the GEMM; steps (one position per row, any number of rows) and small prompt passes run
    the step kernel; float32-held weights keep PyTorch's product for prompt passes. Without
    ``gemm_rows`` (Qwen3-TTS), never."""
    torch.manual_seed(3)
    lin = bf16_linear(256, 300)
    op = torch.ops.vocalis_f32
    tiles, tail = op.pack_bf16(lin.weight.detach().bfloat16())
    f = F32Linear(lin, gemm_rows=GEMM_ROWS)
    plain = F32Linear(lin)
    b = lin.bias.detach()

    def gemm(x):
        return op.bf16_gemm(x, tiles, tail, 300) + b

    def step(x):
        return op.bf16_linear(x, tiles, tail, 300) + b

    many = torch.randn(2, 9, 256)  # 18 rows, 9 positions each
    assert torch.equal(f(many), gemm(many))
    assert not torch.equal(gemm(many), step(many))  # the two orders of summing do differ
    assert torch.equal(plain(many), step(many))
    for shape in [(1, 9, 256), (3, 5, 256), (32, 1, 256), (40, 256)]:  # few rows; steps
        x = torch.randn(shape)
        assert torch.equal(f(x), step(x)), shape
    edge, below = torch.randn(1, GEMM_ROWS, 256), torch.randn(1, GEMM_ROWS - 1, 256)
    assert torch.equal(f(edge), gemm(edge))
    assert torch.equal(f(below), step(below))


def test_float32_weights_keep_pytorchs_product_in_prompt_passes():
    torch.manual_seed(4)
    lin = torch.nn.Linear(256, 300)  # weights off the bfloat16 grid: held as float32
    f = F32Linear(lin, gemm_rows=GEMM_ROWS)
    assert f.weight is lin.weight
    x = torch.randn(2, 9, 256)
    assert torch.equal(f(x), lin(x))


def test_pocket_prompt_passes_run_the_gemm_and_speak_as_pytorchs_kernels(checkpoints):
    """A Pocket TTS load with ``flow_linears=vocalis``: a text of more than ``GEMM_ROWS``
    tokens has its prompt pass through the FlowLM's transformer by the GEMM (seen at the
    layers' calls), and its audio is that of the same model on PyTorch's kernels (the same
    length, cosine >= 0.9999: the sums differ by float rounding only)."""
    d = checkpoints.get("english_2m_2026-10")
    text = ("This request has a long text with many words in it, so that its prompt pass "
            "has more rows than the kernel needs.")
    audio, calls = {}, []
    for kernels in ("vocalis", "default"):
        with vocalis.load(str(d), max_batch=4, tuning=f"fixed,flow_linears={kernels}") as tts:
            voice = tts.voice(str(d / "voice.wav"))
            hooks = [m.register_forward_pre_hook(lambda m, a: calls.append(m._gemm(a[0])))
                     for m in tts.model.flow_lm.transformer.modules()
                     if isinstance(m, F32Linear)]
            assert bool(hooks) == (kernels == "vocalis")
            audio[kernels] = tts.synthesize(text, voice, seed=5).samples
            for h in hooks:
                h.remove()
    assert any(calls) and not all(calls)  # the prompt pass by the GEMM, the steps not
    assert audio["vocalis"].shape == audio["default"].shape
    assert np.isfinite(audio["vocalis"]).all()
    assert cosine(audio["default"], audio["vocalis"]) >= 0.9999


def test_pocket_codec_frames_run_the_gemm_and_speak_as_pytorchs_kernels(checkpoints):
    """``codec_linears=vocalis``: the Mimi decoder transformer's linears (16 positions per row
    at every codec frame) are our kernel, bfloat16-held, and every frame's products run its
    GEMM (the per-frame graph records it; eagerly, at each layer's call); the encoder
    transformer, which makes voice states from audio, keeps PyTorch's linears; the audio is
    that of the same model on PyTorch's kernels (same length, cosine >= 0.9999)."""
    d = checkpoints.get("english_2m_2026-10")
    text = "Every codec frame has sixteen positions per row."
    audio, calls = {}, []
    for kernels in ("vocalis", "default"):
        with vocalis.load(str(d), max_batch=4, tuning=f"fixed,codec_linears={kernels}") as tts:
            mimi = tts.model.mimi
            own = [m for m in mimi.decoder_transformer.modules() if isinstance(m, F32Linear)]
            assert bool(own) == (kernels == "vocalis")
            assert all(m.weight is None and m.gemm_rows == GEMM_ROWS for m in own)
            assert not any(isinstance(m, F32Linear) for m in mimi.encoder_transformer.modules())
            graph = tts.model.graphs.get("codec_head")
            if graph is not None:  # the per-frame graph holds what it recorded
                code = str(graph.graph.inlined_graph)
                assert ("vocalis_f32::bf16_gemm" in code) == (kernels == "vocalis")
                assert "vocalis_f32::bf16_linear" not in code
            hooks = [m.register_forward_pre_hook(lambda m, a: calls.append(m._gemm(a[0])))
                     for m in own]
            voice = tts.voice(str(d / "voice.wav"))
            audio[kernels] = tts.synthesize(text, voice, seed=5, max_frames=12).samples
            for h in hooks:
                h.remove()
    assert all(calls)  # eager calls (no graph), if any: every one by the GEMM
    assert audio["vocalis"].shape == audio["default"].shape
    assert np.isfinite(audio["vocalis"]).all()
    assert cosine(audio["default"], audio["vocalis"]) >= 0.9999
