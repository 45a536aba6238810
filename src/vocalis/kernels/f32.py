"""Our float32 linear (``csrc/f32.cpp``, ``torch.ops.vocalis_f32``) for the steps of a
float32 model: Qwen3-TTS ``model_linears=vocalis`` and Pocket TTS ``flow_linears=vocalis``,
tuning candidates offered where the kernel is built (``vocalis kernels build``)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from vocalis.kernels import native


#: Rows from which a prompt pass of :class:`F32Linear` with ``gemm_rows`` runs the GEMM kernel
#: (2026-12-05, AMD EPYC Zen 3, one thread, ``[M, 1024] x [1024, 4096]``: 12 rows 68 against
#: the step kernel's 71 GFLOP/s, 16 rows 67 against 67, 24 rows 80 against 69, 41 rows 84
#: against 71)
GEMM_ROWS = 16


class F32Linear(nn.Module):
    """A float32 ``nn.Linear`` computed by our kernel ``torch.ops.vocalis_f32`` (x86 AVX2 or
    AVX-512, ARM NEON: ``csrc/f32.cpp`` over ``csrc/f32_core.h``; tuning choices Qwen3 ``model_linears=vocalis`` and Pocket
    ``flow_linears=vocalis``, offered where the kernel is built: :func:`f32_kernel_available`).
    The kernel sums each row in a fixed order, so a row's result does not depend on the other
    rows of the call or on the thread count.

    Weights: the official checkpoints of both families hold these weights in bfloat16, so a
    float32 model's weights are bfloat16 values widened. When every weight of the linear is
    such a value (checked exactly at construction), the layer keeps them as bfloat16 (half
    the bytes to read per step), packed in tiles of 4 channels read as one stream
    (``torch.ops.vocalis_f32.pack_bf16``), and the kernel widens them exactly as it reads
    them: the products, sums and results are bit for bit those of the float32 weights.
    Every call then runs the kernel (prompt passes measured faster than PyTorch's
    ``F.linear`` too, larger batches slower). Otherwise the layer shares the linear's
    float32 weight (no copy); one-position calls (the model's steps, ``x [..., 1, K]`` or
    ``[M, K]``) run the kernel and calls of several positions per row (prompt passes) run
    PyTorch's ``F.linear``. Which runs depends on the weights and the call's shape per row.

    ``gemm_rows``: with bfloat16-held weights, calls of several positions per row and at
    least this many rows in all (``x [..., T, K]``, ``T > 1``: prompt passes) run the
    prompt-pass kernel ``torch.ops.vocalis_f32.bf16_gemm`` instead (the weights of 16
    channels widened once per block into a float32 panel that stays in the L1 cache, 6 rows
    at a time as outer products over it: 84 against 70 GFLOP/s on one AMD EPYC Zen 3 thread
    for 41 rows, slower below about 16 rows, where the widening is shared by too few). Its
    sums run in another order (one fused multiply-add per k, in order), so such a call
    differs from the step kernel's by float rounding; a row's result still does not depend
    on the other rows or the thread count within either kernel. ``None`` (the default):
    never. Pocket TTS's FlowLM sets it (:data:`GEMM_ROWS`).

    Why: a lone stream's step is bound by reading the weights. One thread of this kernel
    reads them as fast as PyTorch's, and while a Qwen3 engine's codec thread waits its core
    takes blocks of these products (``csrc/lend.h``, tuning choice ``lend``); held as
    bfloat16 tiles there are half the bytes to read. Tuning measures it against PyTorch's
    kernels on the machine that runs it (docs/speed-choices.md; figures in
    docs/performance.md).

    Input ``[..., K]`` float32, output ``[..., N]`` float32.

    Raises (at construction): ValueError for a linear that is not float32 on the CPU;
    InputError when the kernel is not built here (``vocalis kernels build``) or this CPU
    cannot run it.
    """

    def __init__(self, linear: nn.Linear, gemm_rows: int | None = None):
        super().__init__()
        self.gemm_rows = gemm_rows
        if linear.weight.dtype != torch.float32 or linear.weight.device.type != "cpu":
            raise ValueError("F32Linear takes a float32 CPU linear")
        native.require("vocalis_f32", "F32Linear", instead="keep PyTorch's nn.Linear",
                       param=None)
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
        if self.weight is None and self._gemm(x):
            y = torch.ops.vocalis_f32.bf16_gemm(x, self.weight_tiles, self.weight_tail,
                                                self.out_features)
        elif self.weight is None:
            y = torch.ops.vocalis_f32.bf16_linear(x, self.weight_tiles, self.weight_tail,
                                                  self.out_features)
        elif x.dim() >= 3 and x.shape[-2] > 1:
            return F.linear(x, self.weight, self.bias)
        else:
            y = torch.ops.vocalis_f32.linear(x, self.weight.contiguous())
        return y if self.bias is None else y.add_(self.bias)

    def _gemm(self, x: torch.Tensor) -> bool:
        return (self.gemm_rows is not None and x.dim() >= 3 and x.shape[-2] > 1
                and x.numel() >= self.gemm_rows * self.in_features)

    def extra_repr(self) -> str:
        held = "float32" if self.weight is not None else "bfloat16-exact"
        gemm = ("" if self.gemm_rows is None
                else f", prompt passes of >= {self.gemm_rows} rows by GEMM")
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"vocalis f32, weights {held}{gemm}")


def f32_kernel_available(choice: str) -> bool:
    """Whether the tuning choice ``choice`` (which runs :class:`F32Linear`) may be offered:
    True when our float32 kernel is loaded, or loads now from its build. Never compiles: a
    machine where it is not built just lacks the choice (:func:`f32_kernel_hint` says so).
    """
    return native.offer("vocalis_f32", choice)


def f32_kernel_hint(choice: str) -> None:
    """After a tuning decision that left ``choice`` out for want of our float32 kernel: one
    log line per process saying how to build it (:func:`vocalis.kernels.native.hint`)."""
    native.hint("vocalis_f32", choice)


__all__ = ["F32Linear", "f32_kernel_available", "f32_kernel_hint"]
