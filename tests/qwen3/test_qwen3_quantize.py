"""Opt-in int8 Qwen3-TTS (``vocalis.load(dir, quantize=True)``, ``Qwen3Model.quantize_int8``).

What is checked, against something independent of the code under test:

* one :class:`Int8Linear` against the float32 ``nn.Linear`` it replaces, within an error
  bound computed here from the quantization step sizes (weights: ``max|w_n| / 127`` per
  output channel; activations: ``max|x| / 63`` per row); and a row's result alone equals it
  inside a batch, bit for bit, on 1 and 2 threads;
* the talker and code-predictor logits of a teacher-forced pass stay close to float32
  (tolerance below); greedy codes are compared and their agreement ratio printed (random
  tiny weights give flat logits, so agreement is not asserted beyond frame 0's first code);
* loading and generating through the API (CustomVoice 0.6B, VoiceDesign 1.7B) and the CLI;
* a batch of 3 quantized requests gives each request's codes alone;
* clear errors: non-CPU device, bfloat16, quantizing twice.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import vocalis
from tests.qwen3.test_qwen3_api import codes_alone_and_together
from vocalis.errors import InputError
from vocalis.models.qwen3.generate import generate_codes
from vocalis.kernels.int8 import Int8Linear
from vocalis.models.qwen3.model import load_model
from vocalis.models.qwen3.prompt import custom_voice_prompt
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint
from vocalis.models.qwen3.sampling import GenerationParams

pytestmark = pytest.mark.usefixtures("built_kernels")  # skips where they cannot be built

TEXT = "Hello world, this is a test of the int8 talker."
N = 21  # max_new_tokens: up to 20 frames


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3-int8")
    return {k: write_random_checkpoint(f"qwen3-tts/{k}", root / k, seed=4, tiny=True)
            for k in ("0.6b-customvoice", "1.7b-voicedesign")}


def _bound(lin: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """Worst-case |int8 - fp32| per output, from the step sizes alone.

    x̂ = x / m (m = max|x| of the row) is rounded to a grid of step s_a = 1/63, so
    |x̂_k - x̃_k| <= s_a/2; w_nk to a grid of step s_n = max|w_n|/127, so |w_nk - w̃_nk| <= s_n/2.
    Then |Σ x̂w - Σ x̃w̃| <= s_a/2 Σ|w_n| + s_n/2 Σ|x̃| with |x̃_k| <= |x̂_k| + s_a/2; times m.
    A relative 1e-5 of m Σ|x̂||w| covers float32 rounding of both sides."""
    w = lin.weight.detach().double()
    xd = x.double()
    m = xd.abs().amax(-1, keepdim=True)
    xh = xd / m
    sa = 1.0 / 63
    sn = w.abs().amax(1) / 127
    k = w.shape[1]
    b = sa / 2 * w.abs().sum(1) + sn / 2 * (xh.abs().sum(-1, keepdim=True) + k * sa / 2)
    return m * (b + 1e-5 * (xh.abs() @ w.abs().t()))


@pytest.mark.parametrize("shape", [(96, 40), (100, 42), (1024, 8)])
@pytest.mark.parametrize("bias", [False, True])
def test_int8_linear_stays_within_the_step_size_bound_and_rows_are_independent(bias, shape):
    """Sizes that fill the kernel's tiles (K multiple of 32, N of 4) and sizes that need
    padding; 13 rows, so that rows run in groups of 4 and a remainder; a zero row."""
    k, n = shape
    g = torch.Generator().manual_seed(3)
    lin = torch.nn.Linear(k, n, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(n, k, generator=g) * torch.rand(n, 1, generator=g))
    q = Int8Linear(lin)
    scales = torch.tensor([1.0, 30.0, 1e-3, 0.5, 2.0])[:, None, None]
    x = torch.randn(5, 3, k, generator=g) * scales  # rows of very different ranges
    x[0, 0, 5] = 40.0  # an outlier in one row must not coarsen the others
    x[4, 0] = 0.0  # row 12 below
    x = x.reshape(15, k)[:13]
    threads = torch.get_num_threads()
    try:
        with torch.no_grad():
            torch.set_num_threads(2)
            y, ref = q(x), lin(x)
            err = (y - ref).abs().double()
            assert (err <= _bound(lin, x).nan_to_num(0.0)).all()
            assert err.max() > 0  # it is quantized
            assert torch.equal(y[12], ref[12])  # the zero row: exactly the bias (or 0)
            torch.set_num_threads(1)
            alone = torch.cat([q(x[i:i + 1]) for i in range(13)])
            assert torch.equal(q(x[None, :, None]).view_as(y), y)  # [1, 13, 1, K]: shape only
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(alone, y)


def test_fused_qkv_and_gate_up_stay_within_each_linears_bound(dirs):
    """quantize_int8 runs q/k/v (and gate/up) as one int8 linear of their stacked weights:
    each part must stay within the step-size bound of its own float32 linear (the bound
    depends only on that linear's rows, so stacking must not coarsen it), and rows stay
    independent."""
    d = dirs["0.6b-customvoice"]
    ref, q = load_model(d), load_model(d)
    q.quantize_int8()
    g = torch.Generator().manual_seed(5)
    for dec_ref, dec_q in ((ref.talker.model, q.talker.model),
                           (ref.talker.code_predictor.model, q.talker.code_predictor.model)):
        att_r, att_q = dec_ref.layers[0].self_attn, dec_q.layers[0].self_attn
        mlp_r, mlp_q = dec_ref.layers[0].mlp, dec_q.layers[0].mlp
        assert att_q.q_proj is None and mlp_q.gate_proj is None  # replaced, not kept twice
        x = torch.randn(3, 2, att_r.q_proj.in_features, generator=g) \
            * torch.tensor([1.0, 20.0, 0.01])[:, None, None]
        with torch.no_grad():
            parts = att_q.qkv(x).split(att_q.qkv_sizes, dim=-1)
            parts += mlp_q.gate_up(x).chunk(2, dim=-1)
            lins = (att_r.q_proj, att_r.k_proj, att_r.v_proj, mlp_r.gate_proj, mlp_r.up_proj)
            for y, lin in zip(parts, lins):
                err = (y - lin(x)).abs().double()
                assert (err <= _bound(lin, x)).all() and err.max() > 0
            alone = torch.cat([att_q.qkv(x[i:i + 1]) for i in range(3)])
        assert torch.equal(alone, att_q.qkv(x))


def test_teacher_forced_logits_stay_close_and_greedy_codes_mostly_agree(dirs):
    """Tolerance: each int8 linear's output is off by about 1% of its norm (8-bit steps on
    both operands, see the bound above); through the tiny model's residual stack this stays
    a few percent. Relative L2 error < 0.1 per frame leaves about 3x margin over what this
    checkpoint gives (printed), and is far below what a wrong layer or scale would give
    (relative error ~1)."""
    d = dirs["0.6b-customvoice"]
    fp, q8 = load_model(d), load_model(d)
    q8.quantize_int8()
    prompt = custom_voice_prompt(fp.talker, fp.text_ids(TEXT), "ryan", "english")
    params = GenerationParams.resolve(fp.generation_config, max_new_tokens=N).greedy()
    codes = generate_codes(fp.talker, prompt, params)  # fp32 greedy frames [T, 16]
    assert codes.shape[0] >= 10
    errs_t, errs_p = [], []
    with torch.no_grad():
        caches = {}
        for name, m in (("fp", fp), ("q8", q8)):
            cache = m.talker.new_cache(1)
            caches[name] = (m, cache, m.talker.prefill(prompt.prefill, cache))
        pos = prompt.prefill.shape[1]
        for t in range(codes.shape[0]):
            out = {}
            for name, (m, cache, (logits, hidden)) in caches.items():
                tal = m.talker
                lt = logits[:, -1] if logits.dim() == 3 else logits
                # predictor, teacher-forced on the fp32 codes of this frame
                pc = tal.code_predictor.new_cache(1)
                c0 = tal.codec_embed(codes[t:t + 1, :1])
                pl = [tal.code_predictor.prefill(torch.cat((hidden[:, -1:], c0), 1), pc)]
                for j in range(2, 16):
                    pl.append(tal.code_predictor.step(codes[t:t + 1, j - 1:j], j, pc))
                out[name] = (lt, torch.stack(pl))
                # next talker input: the frame's 16 embeddings plus the text feed, as generate does
                emb = tal.frame_embed(codes[None, t:t + 1])
                trail = prompt.trailing[:, t:t + 1] if t < prompt.trailing.shape[1] else prompt.tts_pad
                caches[name] = (m, cache, tal.decode(emb + trail, cache, pos))
            pos += 1
            (ft, fpl), (qt, qpl) = out["fp"], out["q8"]
            errs_t.append(float((qt - ft).norm() / ft.norm()))
            errs_p.append(float((qpl - fpl).norm() / fpl.norm()))
    print(f"relative logit error: talker max {max(errs_t):.4f}, predictor max {max(errs_p):.4f}")
    assert max(errs_t) < 0.1 and max(errs_p) < 0.1
    q_codes = generate_codes(q8.talker, custom_voice_prompt(q8.talker, q8.text_ids(TEXT), "ryan", "english"),
                             params)
    n = min(len(codes), len(q_codes))
    agree = float((q_codes[:n] == codes[:n]).float().mean())
    print(f"greedy code agreement int8 vs fp32 (tiny random weights, {n} frames): {agree:.3f}")
    assert q_codes[0, 0] == codes[0, 0]


def test_api_and_cli_generate_quantized(dirs, tmp_path):
    import soundfile as sf

    from vocalis import cli
    from vocalis.models.qwen3.model import Qwen3Model

    with vocalis.load(str(dirs["0.6b-customvoice"]), quantize=True) as tts:
        m: Qwen3Model = tts.model
        assert m.quantized and isinstance(m.talker.codec_head, Int8Linear)
        assert all(isinstance(h, Int8Linear) for h in m.talker.code_predictor.lm_head)
        assert isinstance(m.talker.model.layers[0].mlp.down_proj, Int8Linear)
        a = tts.synthesize(TEXT, speaker="ryan", max_new_tokens=9, seed=2)
        codes = np.array(a.chunks[0]["codes"])
        assert codes.shape[1] == 16 and a.samples.shape == (1920 * codes.shape[0],)
        assert np.isfinite(a.samples).all()
        with pytest.raises(InputError, match="already quantized"):
            m.quantize_int8()
    with vocalis.load(str(dirs["1.7b-voicedesign"]), quantize=True) as tts:
        a = tts.synthesize(TEXT, instruct="A calm low voice.", language="english", max_new_tokens=9, seed=2)
        assert a.samples.shape[0] > 0 and np.isfinite(a.samples).all()
    out = tmp_path / "q.wav"
    args = ["generate", "--model", str(dirs["0.6b-customvoice"]), "--text", TEXT, "--speaker", "ryan",
            "--seed", "2", "--max-new-tokens", "9", "--quantize", "-o", str(out)]
    assert cli.main(args) == 0
    wav, sr = sf.read(out, dtype="float32")
    assert sr == 24000 and wav.shape == (1920 * codes.shape[0],)


def test_quantize_refuses_other_devices_dtypes_and_a_second_call(dirs):
    d = dirs["0.6b-customvoice"]
    with pytest.raises(InputError, match="starts from float32"):
        vocalis.load(str(d), quantize=True, dtype="bfloat16")
    meta = load_model(d, device="meta")
    with pytest.raises(InputError, match="CPU only"):
        meta.quantize_int8()
    bf = load_model(d, dtype="bfloat16")
    with pytest.raises(InputError, match="starts from float32"):
        bf.quantize_int8()


def test_a_quantized_batch_of_three_gives_each_request_its_codes_alone(dirs):
    with vocalis.load(str(dirs["0.6b-customvoice"]), quantize=True, max_batch=4) as tts:
        reqs = [("Hi.", {"speaker": "ryan", "seed": 1, "greedy": True}),
                (TEXT, {"speaker": "serena", "seed": 2, "temperature": 1.3}),
                ("A longer sentence, spoken by another speaker.", {"speaker": "vivian", "seed": 3})]
        alone, together = codes_alone_and_together(tts, reqs, N)
    for a, b in zip(alone, together):
        assert a == b


@pytest.mark.parametrize("batch", [1, 3])
def test_traced_int8_steps_equal_eager_bit_for_bit(dirs, batch):
    """The TorchScript graphs (``Talker.trace``, what ``vocalis.load`` uses) keep the int8
    kernels and give the eager int8 results bit for bit; quantizing drops stale graphs."""
    from tests.qwen3.test_qwen3_talker import assert_traced_equals_eager

    m = load_model(dirs["0.6b-customvoice"])
    m.talker.trace()  # graphs of the float linears ...
    m.quantize_int8()  # ... are dropped here: the int8 model runs eager until traced again
    assert not m.talker.traced and not m.talker.code_predictor.model.traced
    assert_traced_equals_eager(m.talker, batch)


def lent_outputs(op, fn, calls: int = 8):
    """``calls`` results of ``fn()`` with the codec's core lent to the kernel library ``op``
    (``torch.ops.vocalis_q8``, ``_q4``, ``_f32``), calling again (up to 10 s) until the
    lent core has taken part; returns (outputs, blocks the lent core computed)."""
    before = op.lent_blocks()
    op.lend(True)
    try:
        outs = [fn() for _ in range(calls)]
        deadline = time.monotonic() + 10
        while op.lent_blocks() == before and time.monotonic() < deadline:
            outs.append(fn())
    finally:
        op.lend(False)
    return outs, op.lent_blocks() - before


@pytest.mark.parametrize("rows", [1, 3, 13])
def test_a_lent_core_computes_the_same_products_bit_for_bit(rows):
    """The codec's idle core (``kernels/csrc/lend.h``) takes blocks of output channels of a
    one-thread caller's products: the results equal the caller's own, bit for bit, and the
    lent core did take blocks (counted by the kernel)."""
    torch.manual_seed(rows)
    lin = torch.nn.Linear(1000, 4100)  # padded K, a partial last tile, many blocks
    q = Int8Linear(lin)
    x = torch.randn(rows, 1000)
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the helper serves one-thread callers (the engine's model thread)
    try:
        ref = q(x)
        outs, blocks = lent_outputs(torch.ops.vocalis_q8, lambda: q(x))
        after = q(x)  # taken back: the caller alone again
    finally:
        torch.set_num_threads(before)
    assert blocks > 0
    for y in outs + [after]:
        assert torch.equal(y, ref)


def test_lending_the_codec_core_keeps_every_code(dirs):
    """Seeded requests, alone and in a batch, give the same codes whether the codec thread
    lends its core to the model thread's int8 products or not (forced by the tuning
    choice ``lend``), and the lent core took part in the engine's products."""
    reqs = [("Hi.", {"speaker": "ryan", "seed": 1, "greedy": True}),
            (TEXT, {"speaker": "serena", "seed": 2, "temperature": 1.3}),
            ("A longer sentence, spoken by another speaker.", {"speaker": "vivian", "seed": 3})]
    got = {}
    for lend in ("off", "on"):
        with vocalis.load(str(dirs["0.6b-customvoice"]), quantize=True, max_batch=4,
                          threads=2, tuning=f"lend={lend}") as tts:
            assert tts.tuning.choices["lend"] == lend
            before = torch.ops.vocalis_q8.lent_blocks()
            got[lend] = codes_alone_and_together(tts, reqs, N)
            taken = torch.ops.vocalis_q8.lent_blocks() - before
        assert (taken > 0) == (lend == "on"), (lend, taken)
    assert got["on"] == got["off"]
