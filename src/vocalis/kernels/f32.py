"""Our float32 linear (``csrc/f32.cpp``, ``torch.ops.vocalis_f32``) for the steps of a
float32 model: Qwen3-TTS ``model_linears=vocalis`` and Pocket TTS ``flow_linears=vocalis``."""

from __future__ import annotations

import logging

import torch
from torch import nn
from torch.nn import functional as F

log = logging.getLogger(__name__)


class F32Linear(nn.Module):
    """A float32 ``nn.Linear`` computed by our AVX2 kernel ``torch.ops.vocalis_f32``
    (``kernels/csrc/f32.cpp``, built at first use: tuning choices Qwen3
    ``model_linears=vocalis`` and Pocket ``flow_linears=vocalis``).
    The kernel sums each row in a fixed order, so a row's result does not depend on the other
    rows of the call or on the thread count.

    Weights: the official checkpoints of both families hold these weights in bfloat16, so a
    float32 model's weights are bfloat16 values widened. When every weight of the linear is
    such a value (checked exactly at construction), the layer keeps them as bfloat16 (half
    the bytes to read per step), packed in tiles of 4 channels read as one stream
    (``torch.ops.vocalis_f32.pack_bf16``), and the kernel widens them exactly as it reads
    them: the products, sums and results are bit for bit those of the float32 weights.
    Every call then runs the kernel: on a 2-core AMD EPYC (2 threads) 60-row prompt passes
    ran 1.2-1.4x faster than PyTorch's ``F.linear`` on the float32 weights, 200 rows 1.2x
    slower. Otherwise the layer shares the linear's float32 weight (no copy); one-position
    calls (the model's steps, ``x [..., 1, K]`` or ``[M, K]``) run the kernel and calls of several positions per row (prompt passes) run PyTorch's
    ``F.linear``. Which runs depends on the weights and the call's shape per row.

    Why: a lone stream's step is bound by reading the weights. While a Qwen3 engine's codec
    thread waits, its core takes blocks of these products (``kernels/lend.h``, tuning choice
    ``lend``). On a 2-core AMD EPYC, 315 MB of the predictor's float32 products at one row ran
    at 15 GB/s on one thread (as PyTorch's) and 26 GB/s lent; 3 rows at 12 GB/s against
    PyTorch's 5.8. Held as bfloat16 tiles, the same products (157 MB) took 13 ms at one row
    on one thread (float32 held: 29-30 ms; PyTorch: 23 ms) and 9 ms lent (float32 held:
    15-19 ms).

    Input ``[..., K]`` float32, output ``[..., N]`` float32.
    """

    def __init__(self, linear: nn.Linear):
        super().__init__()
        from vocalis.kernels.native import load_kernel

        load_kernel("vocalis_f32")
        if linear.weight.dtype != torch.float32 or linear.weight.device.type != "cpu":
            raise ValueError("F32Linear takes a float32 CPU linear")
        self.out_features, self.in_features = linear.out_features, linear.in_features
        self.bias = linear.bias
        w = linear.weight.detach()
        narrow = w.to(torch.bfloat16)
        if torch.equal(narrow.float(), w):  # bfloat16 values: held exactly in half the bytes
            self.weight = None
            tiles, tail = torch.ops.vocalis_f32.pack_bf16(narrow)
            self.register_buffer("weight_tiles", tiles, persistent=False)
            self.register_buffer("weight_tail", tail, persistent=False)
        else:
            self.weight = linear.weight
            self.weight_tiles = self.weight_tail = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight is None:
            y = torch.ops.vocalis_f32.bf16_linear(x, self.weight_tiles, self.weight_tail,
                                                  self.out_features)
        elif x.dim() >= 3 and x.shape[-2] > 1:
            return F.linear(x, self.weight, self.bias)
        else:
            y = torch.ops.vocalis_f32.linear(x, self.weight.contiguous())
        return y if self.bias is None else y.add_(self.bias)

    def extra_repr(self) -> str:
        held = "float32" if self.weight is not None else "bfloat16-exact"
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"vocalis f32, weights {held}")


def f32_kernel_available(choice: str) -> bool:
    """Whether our float32 kernel (:class:`F32Linear`) is built and loaded here; a machine
    that cannot build it (not x86 with AVX2, no compiler) just lacks the tuning choice
    ``choice`` (named in the log line).
    """
    from vocalis.errors import InputError
    from vocalis.kernels.native import kernel_available, load_kernel

    why = kernel_available()
    if why is not None:
        log.debug("%s is not offered: %s", choice, why)
        return False
    try:
        load_kernel("vocalis_f32")
    except InputError:  # a compiler that failed: worth a line, float32 runs on regardless
        log.warning("%s is not offered: our float32 kernel did not build here (check the C++ "
                    "compiler, g++); PyTorch's kernels run instead", choice)
        return False
    return True


__all__ = ["F32Linear", "f32_kernel_available"]
