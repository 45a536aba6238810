"""vocalis's C++ kernels (``csrc/``): Qwen3-TTS ``quantize="int8"`` and ``"int4"``, and the
float32 linear of both families.

Each is a small x86 AVX2 kernel of ours, built at first use by ``torch.utils.cpp_extension``
(needs a C++ compiler; about 40 s once per machine and kernel version, cached under
``$TORCH_EXTENSIONS_DIR``, default ``~/.cache/torch_extensions``) and registered as
``torch.ops.<name>``: ``vocalis_q8`` (``csrc/q8.cpp``, see
:class:`~vocalis.kernels.int8.Int8Linear`), ``vocalis_q4`` (``csrc/q4.cpp``, see
:mod:`vocalis.kernels.int4`) and ``vocalis_f32`` (``csrc/f32.cpp``, see
:class:`~vocalis.kernels.f32.F32Linear`).
"""

from __future__ import annotations

import hashlib
import logging
import platform
import shutil
import threading
from pathlib import Path

import torch

from vocalis.errors import InputError

_DIR = Path(__file__).with_name("csrc")
KERNELS = {"vocalis_q8": ("int8", "q8.cpp"), "vocalis_q4": ("int4", "q4.cpp"),
           "vocalis_f32": ("float32", "f32.cpp")}
_LOCK = threading.Lock()
_loaded: set[str] = set()


def kernel_available() -> str | None:
    """None when the quantized kernels can be built and run here, else why not (one sentence)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"the int8 and int4 kernels need an x86-64 CPU with AVX2 (this is {platform.machine()})"
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        return "the int8 and int4 kernels need a CPU with AVX2 (PyTorch reports " \
               f"{torch.backends.cpu.get_cpu_capability()})"
    if shutil.which("c++") is None and shutil.which("g++") is None:
        return "the int8 and int4 kernels are built at first use and need a C++ compiler " \
               "(Debian: apt-get install g++)"
    return None


def _headers_flag() -> str:
    """A define naming a hash of the kernels' shared headers: cpp_extension rebuilds when a
    source or a flag changes, and the headers are neither."""
    digest = hashlib.sha256()
    for header in sorted(_DIR.glob("*.h")):
        digest.update(header.name.encode() + b"\0" + header.read_bytes())
    return f"-DVOCALIS_HEADERS_{digest.hexdigest()[:16]}"


def load_kernel(name: str) -> None:
    """Build (first time on this machine) and register ``torch.ops.<name>``, one of
    :data:`KERNELS`.

    Raises:
        InputError (param ``quantize``): not an x86 CPU with AVX2, no C++ compiler, or the
            build failed; the message names the cause and the fix.
    """
    if name in _loaded:
        return
    mode, source = KERNELS[name]
    with _LOCK:
        if name in _loaded:
            return
        why = kernel_available()
        if why is not None:
            raise InputError(f"{why}: install it or drop quantize (float32 needs no kernel)",
                             param="quantize")
        # cpp_extension logs a CUDA warning at import on CPU-only machines: not ours to show
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
        from torch.utils.cpp_extension import load

        from torch.utils.cpp_extension import _get_build_directory

        built = (Path(_get_build_directory(name, verbose=False)) / f"{name}.so").exists()
        logging.getLogger(__name__).log(  # said when it may be built now, not at each load
            logging.DEBUG if built else logging.INFO,
            "loading the %s kernel (built once per machine and kernel version, about 40 s)", mode)
        try:
            load(name, [str(_DIR / source)],
                 extra_cflags=["-O3", "-mavx2", "-mfma", "-fopenmp", _headers_flag()],
                 extra_ldflags=["-fopenmp"], is_python_module=False, verbose=False)
        except Exception as e:  # compiler or linker failure: its first line says which
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise InputError(f"the {mode} kernel could not be built ({first}): check the C++ "
                             "compiler (g++) or drop quantize", param="quantize") from None
        _loaded.add(name)


__all__ = ["KERNELS", "kernel_available", "load_kernel"]
