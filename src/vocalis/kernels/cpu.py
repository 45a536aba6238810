"""What this CPU can run: its instruction-set features, and the build variants of our kernels.

A kernel is compiled for one instruction-set *variant* (compiler flags that let the compiler
use those instructions); a library built for instructions the CPU lacks would crash on its
first call (SIGILL), so a kernel is built and loaded only in a variant whose features this
CPU reports. Features are read from ``/proc/cpuinfo`` (Linux: the ``flags`` line on x86,
``Features`` on ARM), else from PyTorch's own detection
(``torch.backends.cpu.get_cpu_capability()``).
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
#: AVX2 plus AVX-512 VNNI (Intel Ice Lake and Sapphire Rapids, AMD Zen 4 and later): the int8
#: kernel's byte products summed by one instruction (vpdpbusd) on the same 256-bit vectors,
#: the same exact int32 sums; auto-vectorized code stays 256 bits wide
AVX512_VNNI = Variant("avx512vnni", X86, ("avx2", "fma", "avx512f", "avx512vl", "avx512_vnni"),
                      ("-O3", "-mavx2", "-mfma", "-mavx512vl", "-mavx512vnni",
                       "-mprefer-vector-width=256", "-fopenmp"),
                      "an x86-64 CPU with AVX-512 VNNI")


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


__all__ = ["AVX2", "AVX512_VNNI", "SHOWN", "Variant", "choose", "describe", "features", "machine",
           "supports"]
