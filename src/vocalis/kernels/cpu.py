"""What this CPU can run: its instruction-set features, and the build variants of our kernels.

A kernel is compiled for one instruction-set *variant* (compiler flags that let the compiler
use those instructions); a library built for instructions the CPU lacks would crash on its
first call (SIGILL), so a kernel is built and loaded only in a variant whose features this
CPU reports. Features are read from ``/proc/cpuinfo`` (Linux: the ``flags`` line on x86,
``Features`` on ARM), else from PyTorch's own detection
(``torch.backends.cpu.get_cpu_capability()``).

The variants: x86-64 with AVX2 and FMA (every kernel), with AVX-512 VNNI (the int8 kernel);
64-bit ARM (AArch64) with NEON (every kernel), with the dot-product instructions (the int8
and int4 kernels). Every variant of a kernel computes the same results bit for bit (the
kernels' cores, ``csrc/*_core.h``, sum in one order on every instruction set).
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from pathlib import Path

#: the features worth naming in ``vocalis kernels status`` (``/proc/cpuinfo`` names)
SHOWN = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni",
         "avx512_bf16", "amx_tile", "asimd", "asimddp", "i8mm", "sve")
X86 = ("x86_64", "amd64")
#: ``platform.machine()`` of 64-bit ARM: Linux says ``aarch64``, macOS ``arm64``
ARM64 = ("aarch64", "arm64")


@dataclass(frozen=True)
class Variant:
    """One instruction-set build of the kernels.

    ``name``: part of the build's folder name (``avx2``); ``machines``: the
    ``platform.machine()`` values it builds for; ``features``: what the CPU must report (as
    ``/proc/cpuinfo`` names them); ``flags``: the compiler flags of the build; ``needs``:
    those requirements in words, for messages."""

    name: str
    machines: tuple[str, ...]
    features: tuple[str, ...]
    flags: tuple[str, ...]
    needs: str


#: x86-64 with AVX2 and FMA (Intel Haswell, AMD Zen and later): the flags the kernels were
#: written and measured with
AVX2 = Variant("avx2", X86, ("avx2", "fma"), ("-O3", "-mavx2", "-mfma", "-fopenmp"),
               "an x86-64 CPU with AVX2 and FMA")
#: AVX2 plus AVX-512 F, VL and BW (Intel Skylake-SP and later Xeons, AMD Zen 4 and later):
#: the float32 kernel's steps of several rows hold two channels per 512-bit register (the
#: same sums per lane as AVX2, so the same bits), and its prompt-pass GEMM widens weights
#: with 512-bit word permutes; auto-vectorized code stays 256 bits wide
AVX512 = Variant("avx512", X86, ("avx2", "fma", "avx512f", "avx512vl", "avx512bw"),
                 ("-O3", "-mavx2", "-mfma", "-mavx512f", "-mavx512vl", "-mavx512bw",
                  "-mprefer-vector-width=256", "-fopenmp"),
                 "an x86-64 CPU with AVX-512 (F, VL and BW)")
#: AVX2 plus AVX-512 VNNI (Intel Ice Lake and Sapphire Rapids, AMD Zen 4 and later): the int8
#: kernel's byte products summed by one instruction (vpdpbusd) on the same 256-bit vectors,
#: the same exact int32 sums; auto-vectorized code stays 256 bits wide
AVX512_VNNI = Variant("avx512vnni", X86, ("avx2", "fma", "avx512f", "avx512vl", "avx512_vnni"),
                      ("-O3", "-mavx2", "-mfma", "-mavx512vl", "-mavx512vnni",
                       "-mprefer-vector-width=256", "-fopenmp"),
                      "an x86-64 CPU with AVX-512 VNNI")
#: 64-bit ARM (AArch64: NEON is part of every one): ARMv8.0 code, for CPUs without the
#: dot-product instructions (Cortex-A72: Raspberry Pi 4, AWS Graviton 1). ``-ffp-contract=off``:
#: no multiply and add fused unless the source says so (``std::fma``, ``vfmaq_f32``), so that
#: float32 results never depend on the compiler's choices (the cores hold no expression it
#: could fuse today; the x86 flags, measured as they are, leave it at GCC's default).
NEON = Variant("neon", ARM64, ("asimd",),
               ("-O3", "-march=armv8-a", "-ffp-contract=off", "-fopenmp"),
               "a 64-bit ARM CPU (AArch64, NEON)")
#: AArch64 with the int8 dot-product instructions (sdot: ARMv8.2 and later; ``asimddp`` in
#: ``/proc/cpuinfo``: AWS Graviton 2 and later, Ampere Altra, Apple M1 and later, Raspberry Pi
#: 5): the int8 and int4 kernels sum 4 byte products per lane in one instruction, the same
#: exact int32 sums
NEON_DOTPROD = Variant("neon-dotprod", ARM64, ("asimd", "asimddp"),
                       ("-O3", "-march=armv8.2-a+dotprod", "-ffp-contract=off", "-fopenmp"),
                       "a 64-bit ARM CPU with the dot-product instructions (asimddp)")


def machine() -> str:
    """``platform.machine()`` in lower case (``x86_64``, ``aarch64``...)."""
    return platform.machine().lower()


@functools.lru_cache(maxsize=1)
def features() -> frozenset[str]:
    """The CPU's instruction-set features, lower case, as ``/proc/cpuinfo`` names them."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return frozenset(value.lower().split())
    return _torch_features()


def _torch_features() -> frozenset[str]:
    """PyTorch's CPU capability as ``/proc/cpuinfo`` feature names (no ``/proc/cpuinfo``:
    macOS, Windows); on x86 PyTorch reports AVX2 only with FMA."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    return frozenset({"AVX2": ("avx2", "fma"),
                      "AVX512": ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"),
                      }.get(capability, ()))


def supports(variant: Variant, machine_name: str | None = None,
             cpu_features: frozenset[str] | None = None) -> bool:
    """Whether a CPU (this one by default) can run ``variant``."""
    m = machine() if machine_name is None else machine_name
    f = features() if cpu_features is None else cpu_features
    return m in variant.machines and all(x in f for x in variant.features)


def choose(variants: tuple[Variant, ...], machine_name: str | None = None,
           cpu_features: frozenset[str] | None = None) -> Variant | None:
    """The first of ``variants`` (best first) that a CPU (this one by default) can run, or
    None."""
    return next((v for v in variants if supports(v, machine_name, cpu_features)), None)


def describe() -> str:
    """This CPU in a few words: ``x86_64 (avx2 fma avx512f ...)``, the features of
    :data:`SHOWN` it has."""
    shown = [f for f in SHOWN if f in features()]
    return f"{machine()} ({' '.join(shown) or 'no AVX2, AVX-512 or NEON'})"


def needs(variants: tuple[Variant, ...]) -> str:
    """What a CPU needs to run one of ``variants``, in words: the least of each machine type
    (the last variant of each, as they are listed best first)."""
    least: dict[tuple[str, ...], str] = {}
    for v in variants:
        least[v.machines] = v.needs
    return " or ".join(least.values())


__all__ = ["ARM64", "AVX2", "AVX512_VNNI", "NEON", "NEON_DOTPROD", "SHOWN", "Variant", "choose",
           "describe", "features", "machine", "needs", "supports"]
