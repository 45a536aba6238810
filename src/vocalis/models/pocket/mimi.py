"""The Mimi codec as Pocket TTS uses it: a SEANet + transformer encoder that turns
24 kHz audio into 12.5 Hz latents (voice prompts), and a streaming decoder that
turns each latent frame into 1920 samples.

Architecture: Défossez et al., "Moshi" (arXiv:2410.00037), SEANet from Tagliasacchi
et al. (arXiv:2009.02095); layer layout and tensor names as pocket-tts 4.0.1
``models/mimi.py`` / ``modules/seanet.py`` so official checkpoints load directly.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from vocalis.models.pocket.config import CodecTransformer, SEANet
from vocalis.models.pocket.config import Mimi as MimiConfig
from vocalis.models.pocket.layers import (
    KVCache,
    StreamingConv1d,
    StreamingConvTranspose1d,
    Transformer,
)


class ResBlock(nn.Module):
    """``x + conv1x1(elu(conv_k(elu(x))))`` with hidden width ``dim // compress``."""

    def __init__(self, dim: int, kernel: int, dilation: int, compress: int, pad_mode: str):
        super().__init__()
        hidden = dim // compress
        self.block = nn.ModuleList([
            nn.ELU(), StreamingConv1d(dim, hidden, kernel, dilation=dilation, pad_mode=pad_mode),
            nn.ELU(), StreamingConv1d(hidden, dim, 1, pad_mode=pad_mode),
        ])

    def forward(self, x: torch.Tensor, state: dict | None) -> torch.Tensor:
        v = x
        for layer in self.block:
            v = layer(v, None if state is None else state[layer]) if isinstance(
                layer, StreamingConv1d) else layer(v)
        return x + v


class ExpELU(nn.Module):
    """ELU (alpha 1) as ``max(x, exp(min(x, 0)) - 1)``: the same function, since
    ``exp(x) - 1 >= x`` for every x with equality at 0 only (so the maximum picks ``x`` for
    ``x > 0`` and ``exp(x) - 1`` for ``x <= 0``), in four cheap vectorized passes, which
    on some CPUs take less time than ``torch.nn.functional.elu`` (docs/speed-choices.md;
    the speed choice measures it). It differs from ``F.elu`` by float rounding
    (``exp(x) - 1`` against ``expm1(x)``: at most about 6e-8 absolute). The Pocket speed
    choice ``codec_elu=exp`` (:mod:`vocalis.models.pocket.tuning`) puts it in the SEANet
    decoder in place of ``nn.ELU``; exact models keep ``nn.ELU``.

    Shape: any; returns a new tensor of the input's shape and dtype."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.clamp(max=0).exp_().sub_(1)
        return torch.maximum(x, t, out=t)


class VocalisELU(nn.Module):
    """ELU (alpha 1) by our float32 kernel (``torch.ops.vocalis_f32.elu``, ``csrc/f32_core.h``:
    ``expm1`` by range reduction and a degree-8 polynomial, about 6 times faster than
    ``torch.nn.functional.elu`` on an AVX2 CPU, the same bits on every instruction set). It
    differs from ``F.elu`` by float rounding (at most about 1e-7 relative: tested against
    float64 ``expm1``). The Pocket speed choice ``codec_elu=vocalis``, offered where the kernel
    is built (``vocalis kernels build``). A SEANet decoder run in bfloat16
    (``codec_dtype=bfloat16``) computes its ELUs with ``F.elu`` in that dtype: the kernel is
    float32.

    Shape: any; returns a new contiguous tensor of the input's shape and dtype."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or x.device.type != "cpu":
            return F.elu(x)
        return torch.ops.vocalis_f32.elu(x)


#: the ELU modules of the ``codec_elu`` kinds
ELU_KINDS = {"default": nn.ELU, "exp": ExpELU, "vocalis": VocalisELU}


def set_decoder_elu(decoder: nn.Module, kind: str) -> None:
    """Put ``nn.ELU`` (``kind="default"``), :class:`ExpELU` (``"exp"``) or :class:`VocalisELU`
    (``"vocalis"``) at every ELU of ``decoder`` (the SEANet decoder; none holds weights, so
    checkpoints are unaffected).

    Raises:
        ValueError: an unknown ``kind``.
    """
    if kind not in ELU_KINDS:
        raise ValueError(f"unknown ELU kind {kind!r}: use one of {', '.join(ELU_KINDS)}")
    make = ELU_KINDS[kind]
    kinds = tuple(ELU_KINDS.values())
    for group in [m for m in decoder.modules() if isinstance(m, nn.ModuleList)]:
        for i, layer in enumerate(group):
            if isinstance(layer, kinds) and type(layer) is not make:
                group[i] = make()


#: how the SEANet decoder's last convolution (to the waveform's channels) is computed: by
#: ``nn.Conv1d``, or as one matrix product and a shifted sum
#: (:meth:`~vocalis.models.pocket.layers.StreamingConv1d.matmul_conv`)
OUT_CONV_KINDS = ("default", "matmul")


def set_output_conv(decoder: "SEANetDecoder", kind: str) -> None:
    """Compute the last convolution of ``decoder`` (the SEANet decoder's, 64 channels -> the
    waveform) by ``nn.Conv1d`` (``kind="default"``) or as a matrix product
    (``"matmul"``): the same function to float rounding, the same weights.

    Raises:
        ValueError: an unknown ``kind``.
    """
    if kind not in OUT_CONV_KINDS:
        raise ValueError(f"unknown output convolution kind {kind!r}: use one of "
                         f"{', '.join(OUT_CONV_KINDS)}")
    decoder.model[-1].by_matmul = kind == "matmul"


#: how the SEANet decoder's upsampling blocks (and its last ELU and convolution) are computed:
#: by the modules, or each block by one kernel (:func:`fused_block`)
SEANET_KINDS = ("default", "vocalis")


def _block_starts(decoder: "SEANetDecoder") -> range:
    """The index of each upsampling block's first layer (its ELU) in ``decoder.model``:
    ``[conv, (ELU, transposed conv, residual block) per ratio, ELU, conv]``."""
    return range(1, len(decoder.model) - 2, 3)


def seanet_fusable(decoder: "SEANetDecoder") -> bool:
    """Whether every upsampling block of ``decoder`` is what :func:`fused_block` computes: an
    ELU, a transposed convolution of kernel twice its stride, one residual block (a
    convolution of stride 1, then a 1x1 one; channel counts multiples of 4, constant
    padding), and at the end an ELU and a convolution of stride 1. Every released Pocket TTS
    config is."""
    layers = list(decoder.model)
    if (len(layers) - 3) % 3 != 0 or len(layers) < 6:
        return False
    elus = tuple(ELU_KINDS.values())
    convs = [layers[-1]]
    for i in _block_starts(decoder):
        elu, up, block = layers[i:i + 3]
        if not (isinstance(elu, elus) and isinstance(up, StreamingConvTranspose1d)
                and isinstance(block, ResBlock)):
            return False
        ct = up.convtr
        if (ct.kernel_size[0] != 2 * ct.stride[0] or ct.groups != 1 or ct.padding[0] != 0
                or ct.output_padding[0] != 0 or ct.dilation[0] != 1 or ct.bias is None
                or ct.out_channels % 4 != 0):
            return False
        c1, c2 = block.block[1], block.block[3]
        if c2.conv.kernel_size[0] != 1 or c1.conv.out_channels % 4 != 0:
            return False
        convs += [c1, c2]
    return isinstance(layers[-2], elus) and all(
        m.conv.bias is not None and m.conv.groups == 1 and m.conv.stride[0] == 1
        and m.pad_mode == "constant" for m in convs) and layers[-1].conv.dilation[0] == 1


def fused_block(decoder: "SEANetDecoder", i: int, x: torch.Tensor, state: dict) -> torch.Tensor:
    """The upsampling block of ``decoder`` that starts at layer ``i`` (its ELU, transposed
    convolution and residual block; for the last block, the decoder's last ELU and
    convolution too) of ``x [B, C_in, n]`` (float32, CPU) -> ``[B, C, n * stride]`` by one
    kernel, ``torch.ops.vocalis_f32.seanet_block`` (``csrc/f32_core.h``): each tile of
    time steps goes through the whole block while it is in the cache. The same function as
    the modules, summed in another order (they agree to float rounding), each row on its
    own (a row's result does not depend on the other rows), the same bits on every
    instruction set; the ELUs are :class:`VocalisELU`'s. ``state``: the decoder's
    streaming state (the convolutions' left contexts and the transposed convolution's
    partial sums, in the modules' layout: read and replaced)."""
    up, block = decoder.model[i + 1], decoder.model[i + 2]
    c1, c2 = block.block[1], block.block[3]
    last = i + 3 == len(decoder.model) - 2
    out = decoder.model[-1] if last else None
    s0, s1 = state[up], state[c1]
    ct = up.convtr
    w0p, w1p, w2p = decoder.packed[i]
    y, s0[0], s1[0], s3 = torch.ops.vocalis_f32.seanet_block(
        x, s0[0], w0p, ct.bias, ct.stride[0], s1[0], w1p, c1.conv.bias, w2p, c2.conv.bias,
        c1.conv.dilation[0],
        state[out][0] if last else None, out.conv.weight if last else None,
        out.conv.bias if last else None)
    s1[1] = False
    if last:
        state[out][0], state[out][1] = s3, False
    return y


def set_seanet(decoder: "SEANetDecoder", kind: str) -> None:
    """Compute the upsampling blocks of ``decoder`` (the SEANet decoder) by its modules
    (``kind="default"``) or each by one kernel (``"vocalis"``: :func:`fused_block`; float32
    on the CPU, other inputs take the modules): the same function to float rounding, the
    same weights.

    Raises:
        ValueError: an unknown ``kind``, or ``"vocalis"`` for a decoder that
            :func:`seanet_fusable` refuses.
    """
    if kind not in SEANET_KINDS:
        raise ValueError(f"unknown SEANet kind {kind!r}: use one of {', '.join(SEANET_KINDS)}")
    if kind == "vocalis" and not seanet_fusable(decoder):
        raise ValueError("this SEANet decoder's blocks are not the ones codec_seanet=vocalis "
                         "computes")
    decoder.fused = kind == "vocalis"
    decoder.packed = {}
    if decoder.fused:  # the blocks' weights in the kernel's layout (about 8 MB for Pocket TTS)
        with torch.no_grad():
            for i in _block_starts(decoder):
                c1, c2 = decoder.model[i + 2].block[1], decoder.model[i + 2].block[3]
                decoder.packed[i] = torch.ops.vocalis_f32.pack_seanet(
                    decoder.model[i + 1].convtr.weight.float(), c1.conv.weight.float(),
                    c2.conv.weight.float())


def _stateful(module: nn.Module) -> bool:
    return isinstance(module, (StreamingConv1d, StreamingConvTranspose1d))


class SEANetEncoder(nn.Module):
    """Waveform ``[B, 1, T]`` -> features ``[B, dimension, T / hop]``."""

    def __init__(self, c: SEANet):
        super().__init__()
        layers: list[nn.Module] = [StreamingConv1d(c.channels, c.n_filters, c.kernel_size,
                                                   pad_mode=c.pad_mode)]
        mult = 1
        for ratio in reversed(c.ratios):
            for j in range(c.n_residual_layers):
                layers.append(ResBlock(mult * c.n_filters, c.residual_kernel_size,
                                       c.dilation_base ** j, c.compress, c.pad_mode))
            layers += [nn.ELU(), StreamingConv1d(mult * c.n_filters, mult * c.n_filters * 2,
                                                 2 * ratio, stride=ratio, pad_mode=c.pad_mode)]
            mult *= 2
        layers += [nn.ELU(), StreamingConv1d(mult * c.n_filters, c.dimension, c.last_kernel_size,
                                             pad_mode=c.pad_mode)]
        self.model = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.model:
            x = layer(x, None) if isinstance(layer, (StreamingConv1d, ResBlock)) else layer(x)
        return x


class SEANetDecoder(nn.Module):
    """Features ``[B, dimension, n]`` -> waveform ``[B, 1, n * hop]``, streaming."""

    def __init__(self, c: SEANet):
        super().__init__()
        mult = 2 ** len(c.ratios)
        layers: list[nn.Module] = [StreamingConv1d(c.dimension, mult * c.n_filters, c.kernel_size,
                                                   pad_mode=c.pad_mode)]
        for ratio in c.ratios:
            layers += [nn.ELU(), StreamingConvTranspose1d(mult * c.n_filters,
                                                          mult * c.n_filters // 2, 2 * ratio, ratio)]
            for j in range(c.n_residual_layers):
                layers.append(ResBlock(mult * c.n_filters // 2, c.residual_kernel_size,
                                       c.dilation_base ** j, c.compress, c.pad_mode))
            mult //= 2
        layers += [nn.ELU(), StreamingConv1d(c.n_filters, c.channels, c.last_kernel_size,
                                             pad_mode=c.pad_mode)]
        self.model = nn.ModuleList(layers)
        #: each upsampling block by one kernel (set_seanet), with its weights packed for it:
        #: {index of the block's first layer: (w0p, w1p, w2p)}
        self.fused = False
        self.packed: dict = {}

    def forward(self, x: torch.Tensor, state: dict) -> torch.Tensor:
        if self.fused and x.dtype == torch.float32 and x.device.type == "cpu":
            x = self.model[0](x, state[self.model[0]])
            for i in _block_starts(self):
                x = fused_block(self, i, x, state)
            return x
        for layer in self.model:
            if _stateful(layer):
                x = layer(x, state[layer])
            elif isinstance(layer, ResBlock):
                x = layer(x, state)
            else:
                x = layer(x)
        return x


class ProjectedTransformer(nn.Module):
    """Transformer over ``[B, C, T]`` channel-first features (no input/output projection:
    every released config has ``input_dimension == output_dimensions == (d_model,)``)."""

    def __init__(self, c: CodecTransformer):
        super().__init__()
        if c.input_dimension != c.d_model or tuple(c.output_dimensions) != (c.d_model,):
            raise NotImplementedError("codec transformer with projections is not supported")
        self.transformer = Transformer(c.d_model, c.num_heads, c.num_layers, c.dim_feedforward,
                                       c.max_period, context=c.context, layer_scale=c.layer_scale)

    def forward(self, x: torch.Tensor, caches: list[KVCache] | None) -> torch.Tensor:
        return self.transformer(x.transpose(1, 2), caches).transpose(1, 2)


class Downsample(nn.Module):
    def __init__(self, stride: int, dim: int, out_dim: int):
        super().__init__()
        self.conv = StreamingConv1d(dim, out_dim, 2 * stride, stride=stride, bias=False,
                                    pad_mode="replicate")


class Upsample(nn.Module):
    def __init__(self, stride: int, dim: int, in_dim: int):
        super().__init__()
        self.convtr = StreamingConvTranspose1d(in_dim, dim, 2 * stride, stride, groups=dim,
                                               bias=False)


class OutputProjection(nn.Module):
    def __init__(self, dim: int, out_dim: int):
        super().__init__()
        self.output_proj = nn.Conv1d(dim, out_dim, 1, bias=False)


class DecoderState:
    """Streaming state of the Mimi decoder for B rows: conv tails and transformer KV caches.

    ``capacity_frames`` bounds how many latent frames one state can decode (the KV cache
    holds ``16 * capacity_frames`` encoder-rate positions).
    """

    def __init__(self, mimi: "MimiCodec", batch: int, capacity_frames: int):
        self.convs: dict = {m: m.new_state(batch) for m in mimi.modules() if _stateful(m)}
        steps = capacity_frames * mimi.upsample_stride
        self.caches = mimi.decoder_transformer.transformer.new_caches(batch, steps)
        self.frames = 0


class MimiCodec(nn.Module):
    def __init__(self, c: MimiConfig):
        super().__init__()
        self.config = c
        self.sample_rate = c.sample_rate
        self.frame_samples = c.frame_samples
        enc_rate = c.sample_rate / c.hop
        stride = enc_rate / c.frame_rate
        if stride != int(stride) or stride <= 1:
            raise NotImplementedError("Mimi needs an integer encoder/frame rate ratio > 1")
        self.upsample_stride = int(stride)
        self.encoder = SEANetEncoder(c.seanet)
        self.decoder = SEANetDecoder(c.dec_seanet)
        self.encoder_transformer = ProjectedTransformer(c.transformer)
        self.decoder_transformer = ProjectedTransformer(c.dec_transformer)
        self.quantizer = OutputProjection(c.quantizer.dimension, c.quantizer.output_dimension)
        self.downsample = Downsample(self.upsample_stride, c.seanet.dimension, c.latent_dim)
        self.upsample = Upsample(self.upsample_stride, c.dec_seanet.dimension,
                                 c.outer_dim or c.dec_seanet.dimension)

    @torch.no_grad()
    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """Waveform ``[B, 1, T]`` at 24 kHz -> latents ``[B, ceil(T / 1920), latent_dim]``.

        The input is right-padded with zeros to a whole number of frames; encoder
        convolutions start from zero left context (replicate for the downsampler).
        """
        fs = self.frame_samples
        n = max(1, math.ceil(audio.shape[-1] / fs))
        pad = n * fs - audio.shape[-1]
        if pad:
            audio = torch.nn.functional.pad(audio, (0, pad))
        x = self.encoder(audio)
        x = self.encoder_transformer(x, None)
        x = self.downsample.conv(x, None)
        return x.transpose(1, 2)

    def new_decoder_state(self, batch: int, capacity_frames: int) -> DecoderState:
        return DecoderState(self, batch, capacity_frames)

    @torch.no_grad()
    def decode(self, latents: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Denormalized latents ``[B, n, 32]`` -> PCM ``[B, 1, n * 1920]``, continuing ``state``."""
        x = self.quantizer.output_proj(latents.transpose(1, 2))
        x = self.upsample.convtr(x, state.convs[self.upsample.convtr])
        x = self.decoder_transformer(x, state.caches)
        x = self.decoder(x.to(self.decoder_dtype()), state.convs).float()
        state.frames += latents.shape[1]
        return x

    def decoder_dtype(self) -> torch.dtype:
        """float32, or bfloat16 after the opt-in ``codec_dtype=bfloat16`` speed choice
        (:mod:`vocalis.models.pocket.tuning`): the SEANet decoder's weights and states."""
        return next(self.decoder.parameters()).dtype
