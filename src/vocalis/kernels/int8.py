"""Our int8 linear (``csrc/q8.cpp``, ``torch.ops.vocalis_q8``): Qwen3-TTS ``quantize="int8"``,
and the prompt passes of ``quantize="int4"``."""

from __future__ import annotations

import torch

from vocalis.kernels import native


class Int8Linear(torch.nn.Module):
    """Int8 replacement of a float32 ``nn.Linear`` for the CPU (``Qwen3Model.quantize``),
    computed by our kernel ``torch.ops.vocalis_q8`` (x86 AVX2 or AVX-512 VNNI, ARM NEON with
    or without the dot-product instructions, the same results on each: ``csrc/q8.cpp`` over
    ``csrc/q8_core.h``, built by ``vocalis kernels build``: :mod:`vocalis.kernels.native`).

    Weights: symmetric int8 per output channel, ``q_nk = round(w_nk / s_n)`` with
    ``s_n = max_k |w_nk| / 127``, stored in tiles of 4 channels read as one stream.
    Activations: quantized per call and per row, ``a_k = round(x_k / s_x)`` with
    ``s_x = max_k |x_k| / 63`` (the precision of fbgemm's dynamic int8 with reduce_range);
    ``y_n = s_x s_n sum_k a_k q_nk``, the sum exact in int32. A row's result depends on that
    row alone: the same alone as in a batch, on any thread count. Error per output ``n``
    (the bound the tests check): ``s_x/2 * ||w_n||_1 + s_n/2 * ||a||_1 s_x``.

    Why not fbgemm's packed int8 (``quantized::linear_dynamic``, which this replaced): a
    one-row step is bound by reading the weights, and this layout reads them as one stream
    with a software prefetch, faster at one row, at a few rows and in prompt passes
    (figures: docs/performance.md); its products can also take the codec's idle core
    (``csrc/lend.h``).

    Input ``[..., K]`` float32, output ``[..., N]`` float32. Bias (if any) stays float32.

    Raises (at construction): InputError (param ``quantize``) when the kernel is not built
    here or this CPU cannot run it (:func:`vocalis.kernels.native.require`).
    """

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        native.require("vocalis_q8", "quantize='int8'")
        w = linear.weight.detach().float()
        self.out_features, self.in_features = w.shape
        tiles, scales, sums = torch.ops.vocalis_q8.pack(w.contiguous())
        self.register_buffer("tiles", tiles, persistent=False)
        self.register_buffer("weight_scale", scales, persistent=False)
        self.register_buffer("weight_sums", sums, persistent=False)
        self.bias = None if linear.bias is None else torch.nn.Parameter(linear.bias.detach().float(),
                                                                        requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.vocalis_q8.linear(x, self.tiles, self.weight_scale, self.weight_sums)
        return y if self.bias is None else y.add_(self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


__all__ = ["Int8Linear"]
