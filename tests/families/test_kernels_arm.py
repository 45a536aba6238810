"""vocalis's kernels on every instruction set they are written for, ARM included, checked on
this machine: the torch-free cores (``kernels/csrc/*_core.h``) built into a small standalone
program (``kernels/csrc/selftest.cpp``) once per instruction set, natively for x86 (AVX2 forced,
also on an AVX-512 machine, and AVX-512 VNNI where this CPU has it), cross-compiled for ARM
(``aarch64-linux-gnu-g++``) and run under emulation (``qemu-aarch64-static``), and once in
portable C++.

The cases are written here: inputs, the outputs of the torch ops this machine loads (the
reference), and for float32 the float64 product and its error bound. The program checks:

* int8 and int4: the packed weights and the products equal the reference bit for bit (exact
  integer sums, then the float32 operations in one fixed order on every instruction set);
  a case of values halfway between two levels checks the rounding (to nearest, ties to even)
  of both quantizers;
* float32 (float32 weights and bfloat16-held ones): the product stays within the float32
  dot-product bound of the float64 product (Higham, *Accuracy and Stability of Numerical
  Algorithms*, 2nd ed., eq. 3.5: ``|fl(x.w) - x.w| <= gamma_K sum_k |x_k w_k|``,
  ``gamma_K = K u / (1 - K u)``, ``u = 2^-24``, plus ``gamma_K`` at ``u = 2^-53`` for the
  float64 product itself), and equals the reference bit for bit as well (one summation order
  on every instruction set, ``kernels/csrc/simd.h``);
* on each build: a row alone equals it in a batch, bfloat16-held weights give their float32
  values' results, a product split into blocks (as threads split it) equals it whole.

Shapes: K not a multiple of the vector width (nor of 16, 32 or 256), N not a multiple of the
tile, one row and several (row groups and their remainders).

Under ARM emulation the dot-product build runs on ``-cpu max`` and the plain NEON build on a
Cortex-A72 (ARMv8.0, no dot product), where the dot-product build must stop on an illegal
instruction (proof that it uses them). The torch ops' own sources are compiled for ARM too
(the command ``vocalis kernels build`` runs there, with the cross compiler, stopped before
code generation: no ARM libtorch here to link). What this does not prove: speed on ARM, the
torch ops loaded and run on a real ARM machine, the lending thread (``csrc/lend.h``) on ARM.

Skipped only where the tools are missing (the reason says which and how to install them):
``.ci/run`` installs them (Debian: ``apt-get install g++-aarch64-linux-gnu qemu-user-static``).
"""

from __future__ import annotations

import shutil
import signal
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tests.families.formulas import gelu_tanh_bound
from vocalis.kernels import cpu, native

SELFTEST = native.CSRC / "selftest.cpp"
CROSS_CXX = "aarch64-linux-gnu-g++"
QEMUS = ("qemu-aarch64-static", "qemu-aarch64")
INSTALL = "Debian/Ubuntu: apt-get install g++-aarch64-linux-gnu qemu-user-static"
NO_DOTPROD_CPU = "cortex-a72"  # ARMv8.0: NEON without the dot-product instructions


@dataclass(frozen=True)
class Target:
    """One build of the program: ``variant`` (None: portable C++), the qemu CPU model that
    runs it under emulation, and what its ``--isa`` prints."""

    name: str
    variant: cpu.Variant | None
    qemu_cpu: str | None
    isa: str


TARGETS = (
    Target("x86-avx2", cpu.AVX2, None, "isa float32=avx2 int8=avx2 int4=avx2"),
    Target("x86-avx512", cpu.AVX512, None, "isa float32=avx512 int8=avx2 int4=avx2"),
    Target("x86-avx512vnni", cpu.AVX512_VNNI, None,
           "isa float32=avx512 int8=avx512vnni int4=avx2"),
    Target("arm-neon-dotprod", cpu.NEON_DOTPROD, "max",
           "isa float32=neon int8=neon-dotprod int4=neon-dotprod"),
    Target("arm-neon", cpu.NEON, NO_DOTPROD_CPU, "isa float32=neon int8=neon int4=neon"),
    Target("portable", None, None, "isa float32=scalar int8=scalar int4=scalar"),
)
BY_NAME = {t.name: t for t in TARGETS}


def cross_tools() -> tuple[str, str] | str:
    """(cross compiler, qemu) for AArch64 on this machine, or why not."""
    cross = shutil.which(CROSS_CXX)
    qemu = next((q for q in map(shutil.which, QEMUS) if q), None)
    if cross and qemu:
        return cross, qemu
    lacking = [name for name, path in ((CROSS_CXX, cross), ("qemu-aarch64-static", qemu))
               if not path]
    return f"no {' or '.join(lacking)} to cross-compile and emulate ARM ({INSTALL})"


def plan(t: Target) -> tuple[list[str], list[str], list[str]] | str:
    """How ``t`` builds and runs here: (compiler, its flags, the prefix that runs the
    program), or why it cannot (words for a skip)."""
    if t.variant is None:
        flags = ["-O3", "-DVOCALIS_FORCE_SCALAR"]
        variant_machines: tuple[str, ...] = (cpu.machine(),)
    else:
        # without OpenMP: the program's threads are its own (std::thread, check_seanet)
        flags = [f for f in t.variant.flags if f != "-fopenmp"]
        variant_machines = t.variant.machines
    if cpu.machine() in variant_machines:
        if t.variant is not None and not cpu.supports(t.variant):
            return f"this CPU cannot run the {t.name} build ({cpu.describe()})"
        argv = native.compiler()
        return (argv, flags, []) if argv else "no C++ compiler"
    if variant_machines == cpu.ARM64 and cpu.machine() in cpu.X86:
        tools = cross_tools()
        if isinstance(tools, str):
            return tools
        return [tools[0]], [*flags, "-static"], [tools[1], "-cpu", t.qemu_cpu]
    return f"no way to run the {t.name} build on this {cpu.machine()} machine"


# ------------------------------------------------------------------ the cases


def _f32(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().float().numpy().tobytes()


def _bound(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 product and the float32 dot-product bound (plus the float64 product's
    own), computed in float64."""
    xd, wd = x.double(), w.double()
    k = x.shape[-1]
    gamma = sum(k * u / (1 - k * u) for u in (2.0 ** -24, 2.0 ** -53))
    return xd @ wd.t(), gamma * (xd.abs() @ wd.abs().t())


def _halves(g: torch.Generator, rows: int, cols: int, top: int, block: int) -> torch.Tensor:
    """Values halfway between two integers in (-top, top), and ``top`` itself first in every
    block of ``block``: quantized with a step of exactly 1, each one is a tie."""
    v = torch.randint(-top, top, (rows, cols), generator=g).float() + 0.5
    v[:, ::block] = float(top)
    return v


def write_cases(path: Path) -> int:
    """Write the cases file that selftest.cpp reads (its header comment gives the layout),
    with the outputs of this machine's torch ops; returns the number of cases."""
    assert sys.byteorder == "little"
    ops_f, ops_8, ops_4 = torch.ops.vocalis_f32, torch.ops.vocalis_q8, torch.ops.vocalis_q4
    g = torch.Generator().manual_seed(33)
    out: list[bytes] = []

    def case(kind: int, name: str, x: torch.Tensor, *parts: bytes, n: int) -> None:
        m, k = x.shape
        out.append(struct.pack("<II", kind, len(name)) + name.encode() +
                   struct.pack("<qqq", m, n, k) + _f32(x) + b"".join(parts))

    # float32: K of 5 (the tail alone), 13 (8 + 5), 64, 1000 (16s then one 8), 1027 (a tail
    # of 3); N of 3, 7, 9, 37 (partial tiles of 4); rows 1 and 7 (passes of 3, 3, 1)
    for k, n in ((5, 3), (13, 7), (64, 8), (1000, 37), (1027, 9)):
        w = torch.randn(n, k, generator=g)
        wb = w.to(torch.bfloat16)
        for m in (1, 7):
            x = torch.randn(m, k, generator=g) * 3
            exact, bound = _bound(x, w)
            case(1, f"float32 {m}x{k} @ {n}x{k}", x, _f32(w), _f32(ops_f.linear(x, w)),
                 exact.numpy().tobytes(), bound.numpy().tobytes(), n=n)
            exact, bound = _bound(x, wb.float())
            y = ops_f.bf16_linear(x, *ops_f.pack_bf16(wb), n)
            case(2, f"bfloat16 weights {m}x{k} @ {n}x{k}", x,
                 wb.view(torch.int16).numpy().tobytes(), _f32(y), exact.numpy().tobytes(), bound.numpy().tobytes(), n=n)

    # the prompt passes' GEMM (bfloat16 weights): K of 13 (a block of 8 and a tail), 64, 520
    # and 1027 (panel blocks of 512, then 8 or 3); N of 7 (a part of a panel and of a tile),
    # 16 (one panel), 37 (a third panel with one tile of 1 channel); rows 1, 7 and 13
    # (blocks of 6 and what is left)
    for k, n in ((13, 7), (64, 16), (520, 37), (1027, 16)):
        wb = torch.randn(n, k, generator=g).to(torch.bfloat16)
        for m in (1, 7, 13):
            x = torch.randn(m, k, generator=g) * 3
            exact, bound = _bound(x, wb.float())
            y = ops_f.bf16_gemm(x, *ops_f.pack_bf16(wb), n)
            case(6, f"bfloat16 GEMM {m}x{k} @ {n}x{k}", x, wb.view(torch.int16).numpy().tobytes(),
                 _f32(y), exact.numpy().tobytes(), bound.numpy().tobytes(), n=n)

    def int8(name: str, x: torch.Tensor, w: torch.Tensor) -> None:
        tiles, scales, sums = ops_8.pack(w)
        case(3, name, x, _f32(w), tiles.numpy().tobytes(), _f32(scales),
             sums.numpy().tobytes(), _f32(ops_8.linear(x, tiles, scales, sums)), n=w.shape[0])

    def int4(name: str, x: torch.Tensor, w: torch.Tensor) -> None:
        packed, scales = ops_4.pack(w)
        case(4, name, x, _f32(w), packed.numpy().tobytes(), _f32(scales),
             _f32(ops_4.linear(x, packed, scales)), n=w.shape[0])

    # int8: K of 13, 96, 100, 1030 (blocks of 32 padded); rows 1 and 7 (passes of 4, 3)
    for k, n in ((13, 7), (96, 40), (100, 42), (1030, 9)):
        w = torch.randn(n, k, generator=g)
        for m in (1, 7):
            int8(f"int8 {m}x{k} @ {n}x{k}", torch.randn(m, k, generator=g) * 2, w)
    # int4: K of 13, 256, 300, 1030 (padded to 256s); N of 7, 9, 16, 17 (tiles of 8 when
    # several rows); one row (its own path) and 7
    for k, n in ((13, 7), (256, 16), (300, 9), (1030, 17)):
        w = torch.randn(n, k, generator=g)
        for m in (1, 7):
            int4(f"int4 {m}x{k} @ {n}x{k}", torch.randn(m, k, generator=g) * 2, w)
    # ties: steps of exactly 1 (the largest value 63 or 127 per row, 7 or 127 per block)
    for m in (1, 5):
        int8(f"int8 ties {m}x100 @ 9x100", _halves(g, m, 100, 63, 100),
             _halves(g, 9, 100, 127, 100))
        int4(f"int4 ties {m}x300 @ 9x300", _halves(g, m, 300, 127, 32), _halves(g, 9, 300, 7, 32))
    # ELU (Pocket's codec_elu=vocalis): the range the decoder sees, both sides of each
    # reduction step, the clamp, the signed zeros, subnormals, the infinities and NaN; the
    # bound: 2 float32 roundings of float64 expm1 (x itself for x > 0, NaN for NaN)
    x = torch.cat([torch.randn(3000, generator=g) * 3, torch.linspace(-90, 5, 1901),
                   torch.tensor([0.0, -0.0, 1e-30, -1e-30, -1e-41, 1e-41, -0.3465736, -0.3465737,
                                 -17.0, -87.0, -87.5, -200.0, 3.4e38, float("inf"),
                                 float("-inf"), float("nan")])])
    x64 = x.double()
    exact = torch.where(x64 > 0, x64, torch.expm1(x64))
    exact = torch.where(torch.isnan(x64), x64, exact)
    bound = 2 * torch.finfo(torch.float32).eps * exact.abs().clamp(min=1e-30) + 1e-45
    case(5, f"elu of {x.numel()} values", x[:, None], _f32(ops_f.elu(x)),
         exact.numpy().tobytes(), bound.numpy().tobytes(), n=1)
    # GELU, tanh approximation (Pocket's gelu=vocalis): the range the transformers see, the
    # clamps of exp (x near -10.05 and 10.4), signed zeros, subnormals, the infinities and NaN;
    # the bound as in tests/families/test_tuning.py::test_vocalis_gelu_is_gelu_tanh
    x = torch.cat([torch.randn(3000, generator=g) * 4, torch.linspace(-30, 30, 2001),
                   torch.tensor([0.0, -0.0, 1e-30, -1e-30, -1e-41, 1e-41, -10.05, -10.06, 10.4,
                                 3.4e38, -3.4e38, float("inf"), float("-inf"), float("nan")])])
    exact, bound = gelu_tanh_bound(x)
    case(7, f"gelu of {x.numel()} values", x[:, None], _f32(ops_f.gelu_tanh(x)),
         exact.numpy().tobytes(), bound.numpy().tobytes(), n=1)
    # SEANet decoder blocks (Pocket's codec_seanet=vocalis): a partial tile of frames (40 =
    # 32 + 8) with the output convolution; a block without it, dilation 2, whose rows' products
    # the op computes together (16 frames, 3 rows); 6 frames of one row, 2 output channels;
    # random states (the middle of a stream)
    for b, ci, c, st, h, k1, d1, k3, o, n in ((3, 8, 8, 4, 4, 3, 1, 3, 1, 40),
                                             (3, 12, 8, 5, 8, 3, 2, 1, 0, 16),
                                             (1, 8, 4, 6, 4, 3, 1, 3, 2, 7)):
        p1, p3 = (k1 - 1) * d1, k3 - 1
        u = torch.randn(b, ci, n, generator=g)
        w0, b0 = torch.randn(ci, c, 2 * st, generator=g) / 3, torch.randn(c, generator=g)
        w1, b1 = torch.randn(h, c, k1, generator=g) / 3, torch.randn(h, generator=g)
        w2, b2 = torch.randn(c, h, 1, generator=g) / 3, torch.randn(c, generator=g)
        w3, b3 = torch.randn(o, c, k3, generator=g) / 3, torch.randn(o, generator=g)
        s0, s1 = torch.randn(b, c, st, generator=g), torch.randn(b, c, p1, generator=g)
        s3 = torch.randn(b, c, p3, generator=g)
        last = (s3, w3, b3) if o else (None, None, None)
        y, n0, n1, n3 = ops_f.seanet_block(u, s0, *ops_f.pack_seanet(w0, w1, w2)[:1], b0, st,
                                           s1, *ops_f.pack_seanet(w0, w1, w2)[1:2], b1,
                                           ops_f.pack_seanet(w0, w1, w2)[2], b2, d1, *last)
        dims = struct.pack("<8q", ci, c, st, h, k1, d1, k3, o)
        case(8, f"seanet block {b}x{ci}x{n}, stride {st}, {o} outputs", u.reshape(b, ci * n),
             dims, *map(_f32, (w0, b0, w1, b1, w2, b2, w3, b3, s0, s1, s3, y, n0, n1,
                               n3 if o else s3)), n=n)
    path.write_bytes(b"VOCKT001" + struct.pack("<I", len(out)) + b"".join(out))
    return len(out)


@pytest.fixture(scope="module")
def cases(tmp_path_factory, built_kernels) -> tuple[Path, int]:
    """The cases file and its number of cases (the reference: this machine's torch ops,
    built and loaded by the session's ``built_kernels``)."""
    path = tmp_path_factory.mktemp("kernel-cases") / "cases.bin"
    return path, write_cases(path)


# ------------------------------------------------------------------ the builds


@pytest.fixture(scope="module")
def selftest(tmp_path_factory):
    """build(target) -> the program built for ``target`` and the prefix that runs it (built
    once per module), or a skip saying why it cannot run here."""
    folder = tmp_path_factory.mktemp("selftest")
    built: dict[str, tuple[Path, list[str]]] = {}

    def build(t: Target) -> tuple[Path, list[str]]:
        if t.name not in built:
            how = plan(t)
            if isinstance(how, str):
                pytest.skip(how)
            argv, flags, run = how
            exe = folder / t.name
            r = subprocess.run([*argv, native.STD, *flags, str(SELFTEST), "-o", str(exe),
                                "-pthread"],
                               check=False, capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr
            built[t.name] = exe, run
        return built[t.name]

    return build


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_every_kernel_gives_the_reference_results(target, selftest, cases):
    exe, run = selftest(target)
    path, n = cases
    r = subprocess.run([*run, str(exe), str(path)], check=False, capture_output=True, text=True,
                       timeout=300)
    lines = r.stdout.splitlines()
    assert lines and lines[0] == target.isa, r.stdout + r.stderr
    failed = [x for x in lines if x.startswith("FAIL")]
    assert failed == [] and r.returncode == 0, "\n".join(failed) or r.stdout + r.stderr
    assert sum(x.startswith("ok ") for x in lines) == n
    assert lines[-1] == f"PASSED: {n} cases, 0 failed"


def test_the_dotprod_build_uses_the_dot_product_instructions(selftest, cases):
    """On a CPU model without them (Cortex-A72) the neon-dotprod build stops on an illegal
    instruction: its int8 and int4 products do run sdot (and -cpu max has them)."""
    exe, run = selftest(BY_NAME["arm-neon-dotprod"])
    if not run:
        pytest.skip("runs natively here: no CPU model without the dot product to try it on")
    a72 = [*run[:-1], NO_DOTPROD_CPU]
    r = subprocess.run([*a72, str(exe), str(cases[0])], check=False, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode in (-signal.SIGILL, 128 + signal.SIGILL), (r.returncode, r.stdout)
    # it got as far as the first int8 case: the float32 cases (plain NEON) passed before
    assert "ok   float32" in r.stdout and "int8" not in r.stdout.replace("int8=", "")


def test_the_torch_ops_compile_for_arm(tmp_path):
    """The torch ops' sources (with lend.h), compiled for ARM with the command ``vocalis kernels
    build`` runs there (the neon-dotprod variant, this machine's PyTorch headers), stopped
    before code generation: no x86 intrinsic or header left outside the cores' x86 branches.
    The three sources in one translation unit, so that PyTorch's headers are read once."""
    if cpu.machine() not in cpu.X86:
        pytest.skip(f"for an x86 machine (this one is {cpu.machine()}: its own build covers it)")
    tools = cross_tools()
    if isinstance(tools, str):
        pytest.skip(tools)
    unity = tmp_path / "all.cpp"
    unity.write_text("".join(f'#include "{native.CSRC / k.source}"\n'
                             for k in native.KERNELS.values()))
    k = native.KERNELS["vocalis_q8"]
    cmd = native.command([tools[0]], k, cpu.NEON_DOTPROD, Path("/dev/null"))
    cmd[cmd.index(str(native.CSRC / k.source))] = str(unity)
    # compile only: the link would need an ARM libtorch
    cmd = [c for c in cmd if not c.startswith(("-l", "-L", "-Wl,"))] + ["-fsyntax-only"]
    r = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
