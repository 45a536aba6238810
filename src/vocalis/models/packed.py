"""Linear and convolution layouts shared by the families' speed choices: weights reordered
once into oneDNN's blocked layout (``PackedLinear``, ``packed_matmul``, ``unfolded_conv``)
and the switch between layouts that tuning measures (``LinearKernels``). Same products as
PyTorch's default kernels, summed in another order: results agree to float rounding.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn import functional as F


def can_pack_linears(device: torch.device) -> bool:
    """oneDNN packed float32 linears are available for this device (x86/ARM CPU builds)."""
    return (device.type == "cpu" and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise")
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))


class PackedLinear(nn.Module):
    """A float32 ``nn.Linear`` whose weight is reordered once into oneDNN's blocked layout.

    Same products as ``F.linear``; the summation order differs from MKL's GEMV/GEMM, so
    results agree to float rounding (about 1e-6 relative), not bit for bit. On some CPUs it
    streams the weight faster at batch 1 (memory-bound) and uses the cores better for small
    batches.

    ``batch_hint``: the number of rows oneDNN lays the weight out for. The layout for 16 rows
    can run a 1-row product much slower than PyTorch's default kernel, while the layout for
    1 row matches it and stays faster at 16 rows (figures: docs/speed-choices.md); which wins
    is measured per machine
    (:mod:`vocalis.models.pocket.tuning`).

    ``one_row_default``: also keep the original weight and compute one-row inputs with
    PyTorch's default kernel (bit-identical to ``F.linear`` there), the packed layout for
    more rows: the weight is then held twice.
    """

    def __init__(self, linear: nn.Linear, batch_hint: int = 16, one_row_default: bool = False):
        super().__init__()
        self.batch_hint = batch_hint
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        # buffers (not saved with the weights), so that torch.jit.trace records them as
        # the module's attributes: it cannot hold oneDNN's opaque tensor as a constant
        self.register_buffer("_packed", packed_weight(linear.weight, batch_hint), persistent=False)
        self.register_buffer("_bias", None if linear.bias is None
                             else linear.bias.detach().float().contiguous(), persistent=False)
        # a plain tensor, not a submodule: pack_linears must not see a Linear inside
        self._weight = linear.weight.detach() if one_row_default else None

    @property
    def one_row_default(self) -> bool:
        return self._weight is not None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._weight is not None and x.numel() == self.in_features:
            return F.linear(x, self._weight, self._bias)
        return packed_matmul(x, self._packed, self._bias)


def packed_weight(w: torch.Tensor, batch_hint: int = 16) -> torch.Tensor:
    """A float32 weight ``[N, K]`` reordered once into oneDNN's blocked layout, for
    :func:`packed_matmul`."""
    return torch.ops.mkldnn._reorder_linear_weight(w.detach().float().contiguous(), batch_hint)


def packed_matmul(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``x [M, K] @ w.T + bias -> [M, N]`` with ``packed`` from :func:`packed_weight`.
    Under ``torch.jit.trace`` the call goes through a TorchScript function (the tracer
    cannot record the op's empty list of optional scalars)."""
    if torch.jit.is_tracing():
        return _scripted_packed_matmul()(x, packed, bias)
    return torch.ops.mkldnn._linear_pointwise(x.contiguous(), packed, bias, "none", [], "")


@functools.cache
def _scripted_packed_matmul():
    """:func:`packed_matmul` as a TorchScript function (compiled once, at first use)."""
    return torch.jit.CompilationUnit(
        "def packed_matmul(x: Tensor, w: Tensor, b: Optional[Tensor]) -> Tensor:\n"
        "    scalars = torch.jit.annotate(List[Optional[number]], [])\n"
        "    return torch.ops.mkldnn._linear_pointwise(x.contiguous(), w, b, 'none', "
        "scalars, '')\n").packed_matmul


def conv_taps_weight(conv: nn.Conv1d) -> torch.Tensor:
    """A Conv1d weight ``[C_out, C_in, K]`` packed as ``[C_out, K * C_in]`` (column
    ``k * C_in + c`` is tap k of input channel c) for :func:`unfolded_conv`."""
    w = conv.weight
    return packed_weight(w.permute(0, 2, 1).reshape(w.shape[0], -1))


def unfolded_conv(x: torch.Tensor, n: int, conv: nn.Conv1d, packed: torch.Tensor) -> torch.Tensor:
    """The first ``n`` outputs of stride-1, ungrouped ``conv`` over ``x [B, C_in, T]`` (no
    padding: T >= n + dilation * (K - 1)) as one matmul: row (b, t) of the unfolded input
    holds ``x[b, :, t + k * dilation]`` for every tap k (im2col). ``packed``:
    :func:`conv_taps_weight` of ``conv``. Returns ``[B, C_out, n]``, time-major in memory.
    Same products as the convolution, summed in another order (float rounding apart)."""
    b, c, t = x.shape
    k, d = conv.kernel_size[0], conv.dilation[0]
    xt = x.transpose(1, 2).contiguous()  # [B, T, C_in]; a no-op on time-major input
    cols = xt.as_strided((b, n, k, c), (t * c, c, d * c, 1), xt.storage_offset())
    y = packed_matmul(cols.reshape(b * n, k * c), packed, conv.bias)
    return y.view(b, n, -1).transpose(1, 2)


def pack_linears(module: nn.Module, batch_hint: int = 16, one_row_default: bool = False,
                 ) -> list[tuple[nn.Module, str, nn.Linear]]:
    """Replace every plain ``nn.Linear`` inside ``module`` by a :class:`PackedLinear` laid
    out for ``batch_hint`` rows (``one_row_default``: see there; call after the weights are
    loaded); returns ``(parent, attribute, original)`` for each replaced linear, so that
    :func:`unpack_linears` can put them back (drop the list to free the originals)."""
    return replace_linears(module, lambda lin: PackedLinear(lin, batch_hint, one_row_default))


def unpack_linears(replaced: list[tuple[nn.Module, str, nn.Linear]]) -> None:
    """Undo :func:`pack_linears` (``replaced`` is what it returned)."""
    for parent, name, original in replaced:
        setattr(parent, name, original)


#: the oneDNN layouts of :class:`PackedLinear` by name: (rows the weights are laid out for,
#: one-row inputs on the default kernel)
LINEAR_LAYOUTS = {"packed": (16, False), "packed1": (1, False), "hybrid": (16, True)}


def int8_linear(linear: nn.Linear, per_channel: bool = True) -> nn.Module:
    """A dynamically quantized copy of ``linear`` (PyTorch's ``quantize_dynamic``, fbgemm on
    x86): int8 weights, per output channel (``per_channel``) or one scale for the whole
    matrix, activations quantized to int8 at each call from their own range; products in
    int32, output float32. ``linear`` itself is left as it was. Not float32-exact (int8
    rounding of weights and activations). CPU only.

    Shape: input ``[..., in_features]`` -> ``[..., out_features]``."""
    import warnings

    from torch.ao.quantization import (
        default_dynamic_qconfig,
        per_channel_dynamic_qconfig,
        quantize_dynamic,
    )

    if torch.backends.quantized.engine == "none":
        torch.backends.quantized.engine = "fbgemm"
    qconfig = per_channel_dynamic_qconfig if per_channel else default_dynamic_qconfig
    with warnings.catch_warnings():  # torch.ao's deprecation notices
        warnings.simplefilter("ignore")
        return quantize_dynamic(nn.Sequential(linear), {nn.Linear: qconfig},
                                dtype=torch.qint8)[0]


def replace_linears(module: nn.Module, make) -> list[tuple[nn.Module, str, nn.Linear]]:
    """Replace every plain ``nn.Linear`` inside ``module`` by ``make(linear)``; returns what
    :func:`pack_linears` returns (for :func:`unpack_linears`)."""
    replaced = []
    for name, child in list(module.named_children()):
        if type(child) is nn.Linear:
            setattr(module, name, make(child))
            replaced.append((module, name, child))
        else:
            replaced += replace_linears(child, make)
    return replaced


class LinearKernels:
    """The kernel the linears inside ``module`` run: ``"default"`` (``nn.Linear``), a name
    of :data:`LINEAR_LAYOUTS`, or one of ``kernels`` (name -> a module made from an
    ``nn.Linear``, e.g. :class:`vocalis.kernels.f32.F32Linear`). The replaced linears are
    held so that :meth:`use` can switch back (drop this object to free them)."""

    def __init__(self, module: nn.Module, kernels: dict | None = None):
        self.module = module
        self.value = "default"
        self.kernels = dict(kernels or {})
        self._replaced: list[tuple[nn.Module, str, nn.Linear]] = []

    def use(self, value: str) -> None:
        """Switch to ``value`` (a no-op when it is the current one).

        Raises:
            KeyError: an unknown layout name."""
        if value == self.value:
            return
        layout = None if value in ("default", *self.kernels) else LINEAR_LAYOUTS[value]
        unpack_linears(self._replaced)
        if value in self.kernels:
            self._replaced = replace_linears(self.module, self.kernels[value])
        else:
            self._replaced = [] if layout is None else pack_linears(self.module, *layout)
        self.value = value
