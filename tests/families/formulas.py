"""Float64 references of the activation kernels' formulas, shared by the kernel tests."""

from __future__ import annotations

import math

import torch

U = 2.0 ** -24  # float32 unit roundoff


def gelu_tanh_bound(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """GELU with the tanh approximation (Hendrycks and Gimpel 2016, PyTorch's
    ``F.gelu(approximate="tanh")``) of float32 ``x`` in float64, and the bound our float32
    kernel must stay within.

    The reference is ``x (1 + tanh(u)) / 2 = x / (1 + exp(z))`` with
    ``u = sqrt(2/pi) (x + 0.044715 x^3)`` and ``z = -2u`` (the same function; the quotient
    keeps its relative accuracy where ``tanh(u)`` is near -1); ``-0`` at ``x = -inf`` (the
    limit), NaN for NaN. The bound: forming ``z`` from ``x`` rounds three times (``x^2``, a fused
    multiply-add, a product), a relative error of up to ``3u`` in ``z`` that ``exp`` turns into
    ``3u |z|`` relative; ``exp`` itself, the ``1 +`` and the division add about ``4u``. So
    ``|y - ref| <= (4 + 3 |z|) u |ref|``, plus ``2^-123`` for the kernel's cut to -0 above
    ``z = 88`` (where ``|ref| < |x| e^-88 < 2^-123``); ``|z|`` counts up to 88 (below
    ``z = -87`` the quotient is ``x`` to float32).
    Returns ``(ref, bound)``, float64, of ``x``'s shape."""
    x64 = x.double()
    z = -2 * math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)
    ref = x64 / (1 + torch.exp(z))
    ref = torch.where(x64 == -math.inf, torch.zeros_like(ref).neg(), ref)
    # below z = -87 the quotient is x itself to float32 (exp(z) < u): |z| counts up to 88
    bound = (4 + 3 * torch.nan_to_num(z, nan=0.0).abs().clamp(max=88)) * U * ref.abs() + 2.0 ** -123
    return ref, torch.nan_to_num(bound, nan=0.0)
