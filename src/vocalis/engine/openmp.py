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

Where no libgomp is loaded (another OpenMP runtime: macOS, Windows, some conda builds),
:func:`release_thread_pool` does nothing; :func:`set_threads` works everywhere.
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


def _runtime() -> ctypes.CDLL | None:
    """The loaded libgomp (never a second copy: ``RTLD_NOLOAD``), once PyTorch is imported;
    None when none is loaded or it lacks ``omp_pause_resource_all``. (Not
    ``torch.__config__.parallel_info()``: it starts PyTorch's inter-op threads.)"""
    global _lib, _looked
    with _lock:
        if _looked:
            return _lib
        import torch  # noqa: F401 - loads the OpenMP runtime PyTorch was built with

        lib = _loaded("libgomp")
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
