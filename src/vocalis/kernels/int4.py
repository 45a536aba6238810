"""4-bit weight-only linears for the CPU (Qwen3-TTS ``quantize="int4"``).

A frame of the 0.6B model reads the talker's weights once and the code predictor's 15
times (about 1.6 GB per frame in int8; docs/limitations.md): on a few CPU cores its speed
is the memory's. Weights of 4 bits (plus one float32 scale per 32) halve those bytes.
PyTorch's own CPU int4 kernels (``_weight_int4pack_mm_for_cpu``) were slower than int8 at
one row where measured (docs/performance.md, the Qwen3-TTS notes), so the product is a
small C++ kernel of ours (``csrc/q4.cpp`` over ``csrc/q4_core.h``: x86 with AVX2 and FMA, ARM
NEON with or without the dot-product instructions, the same results on each), built once per
machine by ``vocalis kernels build`` (:mod:`vocalis.kernels.native`); there is no PyTorch
path of ours.

Format (per output channel ``n``, per block ``b`` of 32 inputs, input size padded with
zero weights to a multiple of 256):

* weights: ``d_w = max |w| / 7``, ``q_w = clamp(round(w / d_w), -8, 7)``;
* activations, per call and row: ``d_x = max |x| / 127``, ``q_x = round(x / d_x)``;
* ``y_n = sum_b d_w[n, b] * d_x[b] * sum_i q_w[n, b, i] * q_x[b, i]``, the block sums exact
  in int32, the rest in float32 in a fixed order: a row's result does not depend on the
  other rows of the call (nor on the thread count), so a seeded request gives the same
  codes alone and in a batch.

The error of one output against float32 is bounded by the two roundings (half a step each):
``|y - x.w| <= sum_b (d_w/2 * ||x_b||_1 + d_x/2 * ||q_w d_w||_1)`` over the blocks
(``tests/qwen3/test_qwen3_int4.py`` checks it). Being 4-bit, that error is about 4x the int8
path's: measure the codes on the released weights before relying on it.
"""

from __future__ import annotations

import torch

from vocalis.kernels import native


def load_kernel() -> None:
    """Register ``torch.ops.vocalis_q4`` from its build (``vocalis kernels build``); never
    compiles.

    Raises:
        InputError (param ``quantize``): the kernel is not built for this machine, or this
            CPU cannot run it; the message names the cause and the fix.
    """
    native.require("vocalis_q4", "quantize='int4'")


def pack(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``weight [N, K]`` float32 → ``(packed [N, Kp/2] uint8, scales [N, Kp/32] float32)``,
    ``Kp`` = K rounded up to 256 (see the module docstring for the format).

    Raises: InputError (param ``quantize``) as :func:`load_kernel`."""
    load_kernel()
    packed, scales = torch.ops.vocalis_q4.pack(weight.detach().float().contiguous())
    return packed, scales


class Int4Linear(torch.nn.Module):
    """4-bit replacement of a float32 ``nn.Linear`` (CPU; see the module docstring).

    ``prompt``: an :class:`~vocalis.kernels.int8.Int8Linear` of the same weights for
    calls of several positions per row (``x [B, T, K]`` with ``T > 1``: the talker's prompt
    pass). There the 4-bit kernel, which unpacks its nibbles per call, is slower than
    the int8 kernel (compute-bound, 49 positions); one-position calls (every frame's step) use
    the 4-bit weights. Which kernel runs depends on the call's shape per row only, so a
    request's result still does not depend on the other rows. ``None``: always 4-bit.

    Input ``[..., K]`` float32, output ``[..., N]`` float32. Bias (if any) stays float32.

    Raises (at construction): InputError (param ``quantize``) when the kernel is not built
    here or this CPU cannot run it (:func:`load_kernel`).
    """

    def __init__(self, linear: torch.nn.Linear, prompt: torch.nn.Module | None = None):
        super().__init__()
        w = linear.weight.detach().float()
        self.out_features, self.in_features = w.shape
        packed, scales = pack(w)
        self.register_buffer("packed", packed, persistent=False)
        self.register_buffer("scales", scales, persistent=False)
        self.bias = None if linear.bias is None else torch.nn.Parameter(linear.bias.detach().float(),
                                                                        requires_grad=False)
        self.prompt = prompt

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.prompt is not None and x.dim() >= 3 and x.shape[-2] > 1:
            return self.prompt(x)
        y = torch.ops.vocalis_q4.linear(x, self.packed, self.scales)
        return y if self.bias is None else y.add_(self.bias)

    def extra_repr(self) -> str:
        tail = ", int8 for prompt passes" if self.prompt is not None else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, int4{tail}"


__all__ = ["Int4Linear", "load_kernel", "pack"]
