"""Our float32 step kernel (``kernels/csrc/f32.cpp``, Qwen3 ``model_linears=vocalis``) and
the codec's core lent to it (``kernels/csrc/lend.h``).

Checked against references independent of the kernel: float64 products within the
float32 dot-product error bound (Higham, *Accuracy and Stability of Numerical Algorithms*,
2nd ed., eq. 3.5: ``|fl(x.w) - x.w| <= gamma_K sum_k |x_k w_k|``, ``gamma_K = K u / (1 - K u)``,
``u = 2^-24``, for any order of summation), PyTorch's own ``F.linear`` for prompt passes,
and the kernel's results on other row groupings, thread counts and with or without the
lent core, bit for bit.
"""

from __future__ import annotations

import pytest
import torch

from tests.qwen3.test_qwen3_quantize import lent_outputs
from vocalis.kernels.f32 import F32Linear

pytestmark = pytest.mark.usefixtures("built_kernels")  # skips where they cannot be built


def bound(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    k = x.shape[-1]
    u = 2.0 ** -24
    gamma = k * u / (1 - k * u)
    # the float64 reference and the final add of the bias round too: a float32 ulp of |y|
    return gamma * (x.double().abs() @ w.double().abs().t())


def bf16_linear(k: int, n: int) -> torch.nn.Linear:
    """A float32 linear whose weights are bfloat16 values, as a float32 model loaded from
    the official (bfloat16) checkpoints has."""
    lin = torch.nn.Linear(k, n)
    with torch.no_grad():
        lin.weight.copy_(lin.weight.to(torch.bfloat16).float())
    return lin


@pytest.mark.parametrize("held", ["float32", "bfloat16"])
@pytest.mark.parametrize("k,n", [(1000, 4100), (1024, 64), (13, 7), (3072, 1027)])
def test_products_stay_within_the_float32_dot_product_bound(k, n, held):
    torch.manual_seed(k + n)
    lin = bf16_linear(k, n) if held == "bfloat16" else torch.nn.Linear(k, n)
    f = F32Linear(lin)
    assert (f.weight is None) == (held == "bfloat16")
    for shape in [(1, k), (3, k), (13, k), (2, 1, k), (4, 1, k), (2, 7, k)]:
        x = torch.randn(shape)
        y = f(x)
        exact = x.double() @ lin.weight.double().t() + lin.bias.double()
        slack = bound(x, lin.weight) + exact.abs() * 2.0 ** -23
        assert y.shape == (*shape[:-1], n)
        assert ((y.double() - exact).abs() <= slack).all(), shape


def test_prompt_passes_run_pytorchs_linear():
    """Calls of several positions per row are PyTorch's own product, bit for bit, when the
    layer holds float32 weights."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 300)
    x = torch.randn(2, 7, 256)
    assert torch.equal(F32Linear(lin)(x), lin(x))


@pytest.mark.parametrize("k,n", [(1000, 4100), (1027, 1030), (13, 7)])
def test_bfloat16_values_are_held_in_half_the_bytes_and_give_the_float32_results(k, n):
    """Weights that are all bfloat16 values are kept as bfloat16 and widened exactly: every
    call, steps and prompt passes alike, equals the kernel's product with the float32
    weights bit for bit (also past the last multiple of 8 of K and of 4 of N). One weight
    off the bfloat16 grid keeps the float32 weights."""
    torch.manual_seed(k)
    lin = bf16_linear(k, n)
    f = F32Linear(lin)
    assert f.weight is None
    held = f.weight_tiles.untyped_storage().nbytes() + f.weight_tail.untyped_storage().nbytes()
    assert held == 2 * k * (-(-n // 4) * 4)  # 2 bytes a weight (a last tile filled up)
    op = torch.ops.vocalis_f32
    for shape in [(1, k), (5, k), (3, 1, k), (2, 9, k)]:
        x = torch.randn(shape)
        assert torch.equal(f(x), op.linear(x, lin.weight.detach()) + lin.bias), shape
    with torch.no_grad():
        lin.weight[n // 2, k // 2] = 1.0 + 2.0 ** -12  # needs 13 bits of mantissa; bfloat16 has 8
    g = F32Linear(lin)
    assert g.weight is lin.weight and g.weight_tiles is None


@pytest.mark.parametrize("held", ["float32", "bfloat16"])
def test_a_row_alone_equals_it_in_any_batch_on_any_thread_count_lent_or_not(held):
    torch.manual_seed(1)
    # K not a multiple of 16, a partial last tile
    lin = bf16_linear(1000, 4100) if held == "bfloat16" else torch.nn.Linear(1000, 4100)
    f = F32Linear(lin)
    x = torch.randn(13, 1000)
    op = torch.ops.vocalis_f32
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = torch.cat([f(x[i:i + 1]) for i in range(13)])
        outs = [f(x), f(x[:5]), f(x[5:])]
        lent, blocks = lent_outputs(op, lambda: f(x))  # one-thread callers share with it
        assert blocks > 0
        torch.set_num_threads(2)
        two = f(x)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(outs[0], alone)
    assert torch.equal(torch.cat(outs[1:]), alone)
    assert all(torch.equal(y, alone) for y in lent)
    assert torch.equal(two, alone)


def test_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match="float32 CPU linear"):
        F32Linear(torch.nn.Linear(8, 8).to(torch.bfloat16))
