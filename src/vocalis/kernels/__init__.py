"""vocalis's own C++ kernels: their sources (``csrc/``), their build, status and loading
(:mod:`.native`), this CPU's features (:mod:`.cpu`), the ``vocalis kernels`` commands
(:mod:`.cli`) and the modules that run them (:mod:`.f32`, :mod:`.int8`, :mod:`.int4`).

They are no one family's: Qwen3-TTS quantizes to int8 and int4 through them, and both
families may run their float32 steps through the float32 one (a measured tuning choice).

Kernels are compiled once per machine, on purpose (``vocalis kernels build``, or
:func:`build` in Python), never as a side effect of loading a model: a model loaded where
they are not built runs PyTorch's kernels, except for what needs them
(``quantize="int8"``/``"int4"`` of Qwen3-TTS), which is refused with an
:class:`~vocalis.errors.InputError` naming the fix. :func:`status` says what is built, for
which CPU, where, and what is missing and why.
"""

from vocalis.kernels.native import (
    KERNELS,
    BuildInterrupted,
    Built,
    KernelStatus,
    Status,
    build,
    cache_dir,
    load,
    status,
)

__all__ = ["KERNELS", "BuildInterrupted", "Built", "KernelStatus", "Status", "build", "cache_dir",
           "load", "status"]
