"""Our GELU kernel (tanh approximation; ``torch.ops.vocalis_f32.gelu_tanh``, the Pocket speed
choice ``gelu=vocalis``) against independent references: the formula in float64
(tests/families/formulas.py, with its error bound), PyTorch's ``F.gelu(approximate="tanh")``,
and the official package (tests/pocket/test_parity.py::test_own_float32_kernels_match_official);
the choice itself: tests/families/test_tuning.py (test_the_gelu_kernel_...).
"""

from __future__ import annotations

import math

import pytest
import torch

from tests.families.formulas import gelu_tanh_bound
from vocalis.models.pocket.layers import gelu_tanh, vocalis_gelu_tanh

pytestmark = pytest.mark.usefixtures("built_kernels")  # skips where they cannot be built

EPS = torch.finfo(torch.float32).eps  # 2^-23


def near_pytorch(got: torch.Tensor, x: torch.Tensor) -> bool:
    """Within 2 float32 roundings of ``|x|`` of PyTorch's GELU: its ``x (1 + tanh(u)) / 2``
    has an absolute error of about ``eps |x|`` (``1 + tanh(u)`` cancels where tanh(u) is near
    -1), ours a relative one."""
    return bool(((got - gelu_tanh(x)).abs() <= 2 * EPS * x.abs() + 1e-37).all())


def test_vocalis_gelu_is_gelu_tanh():
    """Within its bound of the float64 formula everywhere (the transformers' range and far
    beyond, the exp clamps, signed zeros, subnormals, the largest floats, the infinities; NaN
    stays NaN), within 2 float32 roundings of |x| of PyTorch's GELU, at the layers' shapes,
    for strided inputs; bfloat16 goes to PyTorch's GELU (the kernel is float32)."""
    torch.manual_seed(0)
    x = torch.cat([torch.randn(200_000) * 3, torch.linspace(-40, 40, 80_001),
                   torch.tensor([0.0, -0.0, 1e-30, -1e-30, -1e-41, 1e-41, -10.05, -10.06, 10.4,
                                 -87.0, 88.0, 3.4e38, -3.4e38, float("inf"), float("-inf"),
                                 float("nan")])])
    got = vocalis_gelu_tanh(x)
    ref, bound = gelu_tanh_bound(x)
    num = ~torch.isnan(x)
    assert ((got.double() == ref) | ((got.double() - ref).abs() <= bound))[num].all()
    assert torch.isnan(got[-1]) and got[x == float("inf")].item() == math.inf
    assert (got[x < -10.06] == 0).all() and (torch.signbit(got[x < -10.06])).all()
    assert (got[x > 10.4] == x[x > 10.4]).all()  # x itself once exp(z) is below half an ulp
    small = num & (x.abs() < 1e30)
    assert near_pytorch(got[small], x[small])
    for shape in ((1, 42, 4096), (16, 1, 4096), (16, 16, 2048), (3, 5)):
        y = torch.randn(shape) * 2
        out = vocalis_gelu_tanh(y)
        assert out.shape == y.shape and out.dtype == torch.float32 and out.is_contiguous()
        assert near_pytorch(out, y)
    y = torch.randn(4, 64, 30).transpose(1, 2)  # a strided view
    assert near_pytorch(vocalis_gelu_tanh(y), y)
    b = torch.randn(2, 64, 100).bfloat16()
    assert vocalis_gelu_tanh(b).dtype == torch.bfloat16
    assert torch.equal(vocalis_gelu_tanh(b), gelu_tanh(b))
