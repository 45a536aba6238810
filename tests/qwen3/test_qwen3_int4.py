"""Opt-in 4-bit Qwen3-TTS weights (``vocalis.load(dir, quantize="int4")``,
``vocalis.kernels.int4``: a C++ kernel of ours, built once by ``vocalis kernels build``).

What is checked, against something independent of the code under test:

* the packed weights, unpacked here from the documented byte layout, equal the block
  formula ``clamp(round(w / d), -8, 7)`` with ``d = max|w| / 7`` per 32 inputs;
* one product equals the block formula computed here in float64 (the activations' blocks
  quantized here with ``d = max|x| / 127``), and stays within the bound of the two
  roundings against the float32 ``nn.Linear``;
* a row gives the same bits alone, inside a batch, through the several-row path and at
  another thread count; calls of several positions per row use the int8 copy, bit for bit;
* loading and generating through the API and the CLI; a batch of three gives each
  request's codes alone; the traced steps equal eager bit for bit; teacher-forced logits
  stay near float32 (agreement of greedy codes printed);
* clear errors: an unknown mode, int4 for Pocket TTS (int4 without a built kernel:
  ``tests/families/test_kernels.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import vocalis
from tests.qwen3.test_qwen3_api import codes_alone_and_together
from tests.qwen3.test_qwen3_quantize import lent_outputs
from vocalis.errors import InputError
from vocalis.kernels import int4
from vocalis.kernels.int8 import Int8Linear
from vocalis.models.qwen3.generate import generate_codes
from vocalis.models.qwen3.model import load_model
from vocalis.models.qwen3.prompt import custom_voice_prompt
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint
from vocalis.models.qwen3.sampling import GenerationParams

pytestmark = pytest.mark.usefixtures("built_kernels")  # skips where they cannot be built

TEXT = "Hello world, this is a test of the four-bit talker."
N = 21  # max_new_tokens: up to 20 frames


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return write_random_checkpoint("qwen3-tts/0.6b-customvoice",
                                   tmp_path_factory.mktemp("qwen3-int4") / "cv", seed=4, tiny=True)


def _padded(t: torch.Tensor, k: int) -> torch.Tensor:
    kp = -(-k // 256) * 256
    return torch.nn.functional.pad(t, (0, kp - k))


def _weight_blocks(w: torch.Tensor):
    """(q [N, B, 32] int, d [N, B] float32) of the formula, K padded to 256 with zeros."""
    wb = _padded(w.float(), w.shape[1]).reshape(w.shape[0], -1, 32)
    d = wb.abs().amax(-1) / 7
    q = torch.where(d[..., None] > 0, torch.round(wb * (7 / wb.abs().amax(-1, keepdim=True))),
                    torch.zeros_like(wb)).clamp(-8, 7)
    return q, d


def _unpack(packed: torch.Tensor) -> torch.Tensor:
    """[N, Kp/2] bytes → [N, Kp/32, 32] values: byte j of a block holds element j in its low
    nibble and element j + 16 in its high one, each stored plus 8."""
    b = packed.reshape(packed.shape[0], -1, 16).long()
    return torch.cat([(b & 15) - 8, (b >> 4) - 8], dim=-1)


def _act_blocks(x: torch.Tensor, k: int):
    xb = _padded(x.float(), k).reshape(*x.shape[:-1], -1, 32)
    amax = xb.abs().amax(-1, keepdim=True)
    inv = torch.where(amax > 0, torch.tensor(127.0) / amax, torch.zeros_like(amax))
    return torch.round(xb * inv), (amax / 127)[..., 0]


def _formula(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """y = sum_b d_w d_x (q_w . q_x) in float64, from the module docstring's formula."""
    qw, dw = _weight_blocks(w)
    qx, dx = _act_blocks(x, w.shape[1])
    dots = torch.einsum("mbi,nbi->mnb", qx.double(), qw.double())
    return (dots * dx.double()[:, None, :] * dw.double()[None]).sum(-1)


@pytest.mark.parametrize("shape", [(48, 64), (300, 1024), (96, 700)])
def test_packing_and_product_follow_the_block_formula(ckpt, shape):
    torch.manual_seed(0)
    n, k = shape
    lin = torch.nn.Linear(k, n, bias=False)
    packed, scales = int4.pack(lin.weight)
    qw, dw = _weight_blocks(lin.weight.detach())
    assert torch.equal(_unpack(packed), qw.long())
    assert torch.equal(scales, dw)
    x = torch.randn(5, k) * torch.linspace(0.1, 3, k)
    y = torch.ops.vocalis_q4.linear(x, packed, scales)
    ref = _formula(x, lin.weight.detach())
    # float32 scaling and summation of exact block sums: relative 1e-5 of the terms' sum
    qx, dx = _act_blocks(x, k)
    scale = torch.einsum("mbi,nbi->mn", qx.abs().double(), qw.abs().double()) * dx.double().max() \
        * dw.double().max()
    assert ((y.double() - ref).abs() <= 1e-5 * scale + 1e-30).all()


@pytest.mark.parametrize("bias", [False, True])
def test_error_stays_within_the_rounding_bound_and_rows_are_independent(ckpt, bias):
    """|x.w - x^.w^| <= |x|.|w - w^| + |x - x^|.|w^| <= sum_b (d_w/2 ||x_b||_1 + d_x/2 ||w^_b||_1)
    (each operand rounded to half its block's step), plus float32 rounding."""
    torch.manual_seed(1)
    k, n = 1024, 640
    lin = torch.nn.Linear(k, n, bias=bias)
    m = int4.Int4Linear(lin)
    x = torch.randn(7, k)
    with torch.no_grad():
        y, ref = m(x), lin(x)
    qw, dw = _weight_blocks(lin.weight.detach())
    xb = _padded(x, k).reshape(7, -1, 32).double()
    _, dx = _act_blocks(x, k)
    bound = (dw.double()[None] / 2 * xb.abs().sum(-1)[:, None, :]).sum(-1) \
        + (dx.double()[:, None, :] / 2 * (qw.abs() * dw[..., None]).sum(-1).double()[None]).sum(-1)
    err = (y - ref).abs().double()
    assert (err <= bound * (1 + 1e-4) + 1e-5).all() and err.max() > 0
    rel = float((y - ref).norm() / ref.norm())
    print(f"int4 relative error on gaussian weights: {rel:.4f}")
    # a row alone (one-row path) equals it inside the batch (several-row path), at 1 or 2 threads
    alone = torch.cat([m(x[i:i + 1]) for i in range(7)])
    assert torch.equal(alone, y)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1 if before > 1 else 2)
        assert torch.equal(m(x), y)
    finally:
        torch.set_num_threads(before)


def test_prompt_passes_use_the_int8_copy(ckpt):
    torch.manual_seed(2)
    lin = torch.nn.Linear(256, 96)
    i8 = Int8Linear(lin)
    m = int4.Int4Linear(lin, prompt=i8)
    several = torch.randn(2, 5, 256)
    one = torch.randn(3, 1, 256)
    assert torch.equal(m(several), i8(several))
    assert torch.equal(m(one), int4.Int4Linear(lin)(one))
    assert not torch.equal(m(one), i8(one))


def test_teacher_forced_logits_stay_near_float32(ckpt):
    """Each 4-bit linear is off by about 10% of its norm on gaussian weights (half a step of
    max/7 per block, printed above), about 5x int8. Through the tiny random model that stays
    under 0.5 relative L2 error of the logits (printed); a wrong layout, scale or offset gives
    errors near or above 1."""
    fp, q4 = load_model(ckpt), load_model(ckpt)
    q4.quantize("int4")
    prompt = custom_voice_prompt(fp.talker, fp.text_ids(TEXT), "ryan", "english")
    params = GenerationParams.resolve(fp.generation_config, max_new_tokens=N).greedy()
    codes = generate_codes(fp.talker, prompt, params)
    errs = []
    with torch.no_grad():
        for m in (fp, q4):
            cache = m.talker.new_cache(1)
            logits, hidden = m.talker.prefill(prompt.prefill, cache)
            lt = logits[:, -1] if logits.dim() == 3 else logits
            pc = m.talker.code_predictor.new_cache(1)
            c0 = m.talker.codec_embed(codes[:1, :1])
            pl = [m.talker.code_predictor.prefill(torch.cat((hidden[:, -1:], c0), 1), pc)]
            for j in range(2, 16):
                pl.append(m.talker.code_predictor.step(codes[:1, j - 1:j], j, pc))
            errs.append((lt, torch.stack(pl)))
    (ft, fpl), (qt, qpl) = errs
    et, ep = float((qt - ft).norm() / ft.norm()), float((qpl - fpl).norm() / fpl.norm())
    print(f"int4 relative logit error: talker {et:.4f}, predictor {ep:.4f}")
    assert et < 0.5 and ep < 0.5
    q_codes = generate_codes(q4.talker, custom_voice_prompt(q4.talker, q4.text_ids(TEXT), "ryan",
                                                            "english"), params)
    n = min(len(codes), len(q_codes))
    agree = float((q_codes[:n] == codes[:n]).float().mean())
    print(f"greedy code agreement int4 vs fp32 (tiny random weights, {n} frames): {agree:.3f}")


def test_api_cli_batch_and_traced_steps(ckpt, tmp_path):
    import soundfile as sf

    from tests.qwen3.test_qwen3_talker import assert_traced_equals_eager
    from vocalis import cli

    with vocalis.load(str(ckpt), quantize="int4", max_batch=4) as tts:
        t = tts.model.talker
        assert tts.model.quantized == "int4"
        assert isinstance(t.codec_head, int4.Int4Linear) and t.codec_head.prompt is not None
        pred = t.code_predictor
        assert all(isinstance(h, int4.Int4Linear) and h.prompt is None for h in pred.lm_head)
        assert isinstance(pred.model.layers[0].mlp.down_proj, int4.Int4Linear)
        a = tts.synthesize(TEXT, speaker="ryan", max_new_tokens=9, seed=2)
        codes = np.array(a.chunks[0]["codes"])
        assert a.samples.shape == (1920 * codes.shape[0],) and np.isfinite(a.samples).all()
        streamed = np.concatenate(list(tts.stream(TEXT, speaker="ryan", max_new_tokens=9, seed=2)))
        assert np.array_equal(streamed, a.samples)
        reqs = [("Hi.", {"speaker": "ryan", "seed": 1, "greedy": True}),
                (TEXT, {"speaker": "serena", "seed": 2, "temperature": 1.3}),
                ("A longer sentence, spoken by another speaker.", {"speaker": "vivian", "seed": 3})]
        alone, together = codes_alone_and_together(tts, reqs, N)
        assert alone == together
        with pytest.raises(InputError, match="already quantized to int4"):
            tts.model.quantize("int8")
    m = load_model(ckpt)
    m.quantize("int4")
    for batch in (1, 3):
        assert_traced_equals_eager(m.talker, batch)
    out = tmp_path / "q4.wav"
    args = ["generate", "--model", str(ckpt), "--text", TEXT, "--speaker", "ryan", "--seed", "2",
            "--max-new-tokens", "9", "--quantize-mode", "int4", "-o", str(out)]
    assert cli.main(args) == 0
    wav, sr = sf.read(out, dtype="float32")
    assert sr == 24000 and wav.shape == (1920 * codes.shape[0],)


def test_bad_quantize_values_get_clear_errors(ckpt, checkpoints, capsys):
    from vocalis import cli

    with pytest.raises(InputError, match="unknown quantize 'int3'.*'int8' or 'int4'"):
        vocalis.load(str(ckpt), quantize="int3")
    with pytest.raises(InputError, match="Pocket TTS does not quantize to int4; it takes int8"):
        vocalis.load(str(checkpoints.get("english_2m_2026-10")), quantize="int4")
    args = ["generate", "--model", str(ckpt), "--text", TEXT, "--speaker", "ryan",
            "--quantize-mode", "int2", "-o", "-"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--quantize-mode must be int8 or int4, got 'int2'" in err[0]
    bench = ["bench", "--model", str(ckpt), "--speaker", "ryan", "--frames", "2",
             "--text", TEXT * 2, "--text", TEXT * 3, "--quantize-mode", "int4",
             "--session-options", '{"quantize": "int8"}']
    assert cli.main(bench) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "contradicts" in err[0]


@pytest.mark.parametrize("rows", [1, 5])
def test_a_lent_core_computes_the_same_4bit_products_bit_for_bit(rows):
    """As for int8 (``test_qwen3_quantize``): blocks of channels computed on the codec's
    lent core (``kernels/csrc/lend.h``; the one-row and the several-row paths) equal the
    caller's own, bit for bit, and the lent core took some."""
    int4.load_kernel()
    op = torch.ops.vocalis_q4
    torch.manual_seed(rows)
    q = int4.Int4Linear(torch.nn.Linear(1024, 4100))
    x = torch.randn(rows, 1024)
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the helper serves one-thread callers (the engine's model thread)
    try:
        ref = q(x)
        outs, blocks = lent_outputs(op, lambda: q(x))
        outs.append(q(x))  # taken back: the caller alone again
    finally:
        torch.set_num_threads(before)
    assert blocks > 0
    for y in outs:
        assert torch.equal(y, ref)
