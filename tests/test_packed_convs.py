"""oneDNN-packed streaming convolutions (:func:`vocalis.models.layers.pack_convs`) against
PyTorch's own ``nn.Conv1d`` / ``nn.ConvTranspose1d`` on the same weights, streamed over
several calls: the same outputs to float rounding, and unpacking restores the original
kernels bit for bit."""

from __future__ import annotations

import pytest
import torch

from vocalis.models.layers import (StreamingConv1d, StreamingConvTranspose1d, can_pack_linears,
                                   pack_convs)

pytestmark = pytest.mark.skipif(not can_pack_linears(torch.device("cpu")),
                                reason="this PyTorch build has no oneDNN")


def _stream(module, x: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    state = module.new_state(x.shape[0])
    outs, at = [], 0
    for n in sizes:
        outs.append(module(x[..., at:at + n], state))
        at += n
    return torch.cat(outs, dim=-1)


@pytest.mark.parametrize("kernel,dilation,pad_mode", [(7, 1, "constant"), (3, 9, "constant"),
                                                      (1, 1, "constant"), (3, 1, "replicate")])
def test_packed_conv_streams_what_the_conv_computes(kernel, dilation, pad_mode):
    g = torch.Generator().manual_seed(kernel * 10 + dilation)
    conv = StreamingConv1d(24, 40, kernel, dilation=dilation, pad_mode=pad_mode)
    with torch.no_grad():
        conv.conv.weight.copy_(torch.randn(conv.conv.weight.shape, generator=g) * 0.2)
        conv.conv.bias.copy_(torch.randn(40, generator=g))
    x = torch.randn(3, 24, 60, generator=g)
    sizes = [1, 4, 15, 40]
    with torch.no_grad():
        want = _stream(conv, x, sizes)
        # independent reference: one nn.Conv1d over the left-padded whole input
        pad = (kernel - 1) * dilation
        left = x[..., :1].expand(-1, -1, pad) if pad_mode == "replicate" else x.new_zeros(3, 24, pad)
        ref = torch.nn.functional.conv1d(torch.cat([left, x], -1), conv.conv.weight, conv.conv.bias,
                                         dilation=dilation)
        assert (want - ref).abs().max() < 1e-5
        conv.pack(True)
        assert conv.packed is not None
        got = _stream(conv, x, sizes)
        conv.pack(False)
        back = _stream(conv, x, sizes)
    assert got.shape == want.shape and float((got - want).abs().max()) < 1e-5
    assert torch.equal(back, want)


@pytest.mark.parametrize("stride", [4, 5, 8])
def test_packed_transposed_conv_streams_what_the_conv_computes(stride):
    g = torch.Generator().manual_seed(stride)
    ct = StreamingConvTranspose1d(32, 16, 2 * stride, stride)
    with torch.no_grad():
        ct.convtr.weight.copy_(torch.randn(ct.convtr.weight.shape, generator=g) * 0.2)
        ct.convtr.bias.copy_(torch.randn(16, generator=g))
    x = torch.randn(2, 32, 20, generator=g)
    sizes = [1, 2, 7, 10]
    with torch.no_grad():
        want = _stream(ct, x, sizes)
        # independent reference: the whole input through nn.ConvTranspose1d, tail dropped
        ref = torch.nn.functional.conv_transpose1d(x, ct.convtr.weight, ct.convtr.bias,
                                                   stride=stride)[..., :20 * stride]
        assert (want - ref).abs().max() < 1e-5
        ct.pack(True)
        assert ct.packed is not None
        got = _stream(ct, x, sizes)
        ct.pack(False)
        back = _stream(ct, x, sizes)
    assert got.shape == want.shape == (2, 16, 20 * stride)
    assert float((got - want).abs().max()) < 1e-5
    assert torch.equal(back, want)


def test_convs_that_cannot_pack_keep_their_kernels():
    strided = StreamingConv1d(8, 8, 4, stride=2)
    depthwise = StreamingConvTranspose1d(8, 8, 4, 2, groups=8)
    odd = StreamingConvTranspose1d(8, 4, 3, 2)  # kernel != 2 * stride
    holder = torch.nn.ModuleList([strided, depthwise, odd])
    pack_convs(holder, True)
    assert strided.packed is None and depthwise.packed is None and odd.packed is None
