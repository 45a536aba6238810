"""Per-thread intra-op thread counts that hold, and one OpenMP pool owner.

The engine runs its model and its codec on their own Python threads, each with its own
intra-op thread count (``Engine._set_threads``). Two properties of PyTorch's CPU build
(intra-op parallelism on GNU OpenMP, libgomp, in the Linux wheels) broke that:

1. **A count set before a thread's first parallel operation did not hold.**
   ``torch.set_num_threads(n)`` sets OpenMP's count for the calling thread and stores
   ``n`` in one process-wide value; the first parallel operation of each thread (and
   ``torch.get_num_threads``) then runs ATen's lazy per-thread init, which sets that
   thread's count to the process-wide value *as it is then*
   (``at::internal::lazy_init_num_threads`` -> ``at::init_num_threads``, ATen's
   ``ParallelOpenMP.cpp``). So the codec thread, which set one thread at its start but
   decoded its first frame after the model thread had taken two for a prompt pass, ran
   every frame after on two threads, beside the model thread: the two cores were
   oversubscribed, and the thread calibration's model and codec threads ended up with the
   same count whatever split it meant to time. :func:`set_threads` runs the lazy init
   first, then sets the count, so the count holds.
2. **A second pool slows every parallel region.** libgomp gives every thread that opens a
   parallel region of more than one thread its own pool of workers and keeps it until
   the thread exits; once the workers of all live pools outnumber the CPUs, each idle
   worker spins about 100 times instead of about 300,000 before it sleeps on a futex
   (``do_spin``, libgomp ``config/linux/wait.h``; ``gomp_throttled_spin_count_var``,
   ``env.c``), and a matrix product of one row (tens of microseconds) waits for a worker
   to wake: a thread's one-row steps run up to about twice as slow while another
   thread's pool lives, and as fast as before once it is freed (figures:
   docs/speed-choices.md, "Measurements behind the choices"). So what computes outside
   the engine (loading, calibration, a request's prompt or a voice built in the caller's
   thread) frees its
   thread's pool when done (:func:`release_thread_pool`: OpenMP 5.0's
   ``omp_pause_resource_all``, which libgomp implements for the calling thread's pool
   alone, ``gomp_pause_host`` in ``team.c``). The thread's next parallel region builds a
   new pool (a ``pthread_create`` per worker, tens of microseconds).

The libgomp paused is PyTorch's own, the one ``libtorch_cpu`` calls: other wheels bring
their own copy (sentencepiece's, loaded by the SentencePiece tokenizers of the small Pocket
TTS configs, and by the official package), and pausing that one freed nothing, so
PyTorch's pools were never freed (on a 2-core AMD EPYC Zen 4, a lone request's first audio
59-62 ms instead of 50-53, its prompt pass and first frame slower). Where PyTorch runs on
another OpenMP runtime (macOS, Windows, some conda builds), :func:`release_thread_pool`
does nothing; :func:`set_threads` works everywhere.
"""

from __future__ import annotations

import ctypes
import os
import threading

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_looked = False

#: ``omp_pause_soft`` of the OpenMP 5.0 ``omp_pause_resource_t`` enumeration
OMP_PAUSE_SOFT = 1


def _loaded(prefix: str) -> ctypes.CDLL | None:
    """A shared library already loaded in this process whose file name starts with
    ``prefix`` (Linux: read from ``/proc/self/maps``), opened without loading a second copy
    (``RTLD_NOLOAD``); None when there is none."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = {line.rstrip("\n").split(maxsplit=5)[-1] for line in f}
    except OSError:
        return None
    for path in sorted(paths):
        if os.path.basename(path).startswith(prefix) and ".so" in path:
            try:
                return ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0) | os.RTLD_LAZY)
            except OSError:
                return None
    return None


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _file_of(fn) -> str | None:
    """The shared library file that holds the function ``fn`` (a ctypes function), by
    ``dladdr``; None where it cannot be told."""
    for libc in (None, "libdl.so.2"):
        try:
            dladdr = ctypes.CDLL(libc).dladdr
        except (OSError, AttributeError):
            continue
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        dladdr.restype = ctypes.c_int
        info = _DlInfo()
        if dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
    return None


def _torch_runtime() -> ctypes.CDLL | bool | None:
    """The OpenMP runtime PyTorch's own parallel regions run on: the library that gives
    ``libtorch_cpu`` its ``omp_pause_resource_all`` (``dlsym`` on its handle searches it and
    its dependencies), opened by that library's file; False when that is not a libgomp,
    None when it cannot be told. Other packages may load a libgomp of their own beside it
    (sentencepiece's wheel bundles one, loaded by the SentencePiece tokenizers of the small
    Pocket TTS configs): pausing that one frees nothing of PyTorch's."""
    import torch

    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    for name in sorted(os.listdir(lib)) if os.path.isdir(lib) else ():
        if not name.startswith("libtorch_cpu."):
            continue
        try:
            handle = ctypes.CDLL(os.path.join(lib, name),
                                 mode=getattr(os, "RTLD_NOLOAD", 0) | os.RTLD_LAZY)
            path = _file_of(handle.omp_pause_resource_all)
        except (OSError, AttributeError):
            continue
        if path is None:
            continue
        if not os.path.basename(path).startswith("libgomp"):
            return False
        try:
            return ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0) | os.RTLD_LAZY)
        except OSError:
            return None
    return None


def _runtime() -> ctypes.CDLL | None:
    """PyTorch's libgomp (never a second copy: ``RTLD_NOLOAD``), once PyTorch is imported
    (:func:`_torch_runtime`; where that cannot be told, the first libgomp loaded in the
    process, by path); None when PyTorch runs on another OpenMP runtime, none is loaded or
    it lacks ``omp_pause_resource_all``. (Not ``torch.__config__.parallel_info()``: it starts
    PyTorch's inter-op threads.)"""
    global _lib, _looked
    with _lock:
        if _looked:
            return _lib
        import torch  # noqa: F401 - loads the OpenMP runtime PyTorch was built with

        lib = _torch_runtime()
        if lib is None:
            lib = _loaded("libgomp")
        elif lib is False:
            lib = None
        if lib is not None and not hasattr(lib, "omp_pause_resource_all"):
            lib = None
        if lib is not None:
            lib.omp_pause_resource_all.argtypes = [ctypes.c_int]
            lib.omp_pause_resource_all.restype = ctypes.c_int
        _lib, _looked = lib, True
        return lib


def release_thread_pool() -> bool:
    """Free the calling thread's OpenMP worker pool, if it has one (see the module
    docstring). Returns True when libgomp accepted (0 from ``omp_pause_resource_all``),
    False where there is nothing to call or it refused (inside a parallel region)."""
    lib = _runtime()
    if lib is None:
        return False
    return lib.omp_pause_resource_all(OMP_PAUSE_SOFT) == 0


def set_threads(n: int) -> None:
    """Give the calling thread ``n`` intra-op threads, so that they hold when other threads
    set theirs (see point 1 of the module docstring): ``torch.get_num_threads()`` runs this
    thread's lazy init now, then ``torch.set_num_threads(n)`` sets its count (OpenMP's
    per-thread count, MKL's thread-local one)."""
    import torch

    torch.get_num_threads()
    torch.set_num_threads(int(n))


def frees_thread_pool(fn):
    """Decorator: call :func:`release_thread_pool` when ``fn`` returns or raises (for
    public entry points that compute in the caller's thread)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            release_thread_pool()
    return wrapper


__all__ = ["frees_thread_pool", "release_thread_pool", "set_threads"]
