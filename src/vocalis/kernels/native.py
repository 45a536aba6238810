"""Build, find and load vocalis's C++ kernels (``csrc/``): once per machine, on purpose.

The kernels (:data:`KERNELS`), each registered as ``torch.ops.<name>``:

* ``vocalis_f32`` (``csrc/f32.cpp``, :class:`~vocalis.kernels.f32.F32Linear`): float32
  linears for a model's steps, a tuning candidate of both families (Qwen3-TTS
  ``model_linears=vocalis``, Pocket TTS ``flow_linears=vocalis`` and
  ``codec_linears=vocalis``), the ELU of Pocket
  TTS's codec (``codec_elu=vocalis``: :class:`~vocalis.models.pocket.mimi.VocalisELU`),
  the GELU of its transformers (``gelu=vocalis``:
  :func:`~vocalis.models.pocket.layers.vocalis_gelu_tanh`) and its SEANet decoder's blocks
  (``codec_seanet=vocalis``: :func:`~vocalis.models.pocket.mimi.fused_block`);
* ``vocalis_q8`` (``csrc/q8.cpp``, :class:`~vocalis.kernels.int8.Int8Linear`): Qwen3-TTS
  ``quantize="int8"``, and the prompt passes of ``"int4"``;
* ``vocalis_q4`` (``csrc/q4.cpp``, :mod:`vocalis.kernels.int4`): Qwen3-TTS ``quantize="int4"``.

Each ``.cpp`` is the torch op (checks, outputs, threads: ``csrc/lend.h``) over a torch-free
core (``csrc/f32_core.h``, ``q8_core.h``, ``q4_core.h``) written once for every instruction
set (``csrc/simd.h``: x86 AVX2 and AVX-512 VNNI, ARM NEON with and without the dot-product
instructions, portable C++) with the same results bit for bit on each;
``csrc/selftest.cpp`` runs the cores without PyTorch (``tests/families/test_kernels_arm.py``
runs it for x86 natively and for ARM under qemu).

Building (:func:`build`; ``vocalis kernels build``) compiles each kernel with the C++
compiler (``$CXX``, else ``c++``, ``g++`` or ``clang++``) against the installed PyTorch's
headers and libraries, for the best instruction-set variant this CPU runs
(:mod:`vocalis.kernels.cpu`); it needs neither ninja nor Python's headers. Loading
(:func:`load`, :func:`require`, :func:`offer`) only opens a library built before
(``torch.ops.load_library``): nothing here compiles as a side effect of loading a model or
of tuning. Where a kernel is not built, tuning leaves its candidate out and PyTorch's
kernels run (one log line per process says how to build it: :func:`hint`), and a request
that cannot run without it (``quantize="int8"`` or ``"int4"``) is refused with an
:class:`~vocalis.errors.InputError` that names the fix.

The cache (:func:`cache_dir`): ``$VOCALIS_CACHE/kernels``, else
``$XDG_CACHE_HOME/vocalis/kernels``, else ``~/.cache/vocalis/kernels``. A build is a folder
``<name>-<variant>-<key>`` holding ``<name>.so`` and ``build.json``, where ``<key>`` hashes
what the library must match to be loaded (:func:`build_key`: the kernel's source and the
shared headers, the torch version and its C++ ABI, the variant's compiler flags, the machine
type): a library built from other sources or for another torch is never loaded. Each build
compiles in a temporary folder ``.building-*`` beside them and is renamed into place in one
step, so an interrupted or failed build leaves nothing that could be loaded.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from vocalis.errors import InputError
from vocalis.hub import vocalis_cache_dir
from vocalis.kernels import cpu

log = logging.getLogger(__name__)

CSRC = Path(__file__).with_name("csrc")
#: bump when the build changes in a way that :func:`build_key` does not see
FORMAT = 1
#: the C++ standard the sources are written in
STD = "-std=c++17"
#: compilers looked for on PATH when ``$CXX`` is not set, in this order
COMPILERS = ("c++", "g++", "clang++")
BUILD_COMMAND = "vocalis kernels build"
#: a ``.building-*`` folder this old (seconds) is a build that died without cleaning up
STALE_S = 3600


@dataclass(frozen=True)
class Kernel:
    """One kernel: ``name`` (its ``torch.ops`` namespace and library file), ``mode`` (what it
    computes, as users name it), ``source`` (its file in ``csrc/``), ``used_by`` (what runs
    it) and ``variants`` (its instruction-set builds, best first)."""

    name: str
    mode: str
    source: str
    used_by: str
    variants: tuple[cpu.Variant, ...]


KERNELS: dict[str, Kernel] = {k.name: k for k in (
    Kernel("vocalis_f32", "float32", "f32.cpp",
           "tuning choices model_linears=vocalis (Qwen3-TTS), flow_linears=vocalis, "
           "codec_linears=vocalis, codec_elu=vocalis, gelu=vocalis and codec_seanet=vocalis "
           "(Pocket TTS)",
           (cpu.AVX512, cpu.AVX2, cpu.NEON)),
    Kernel("vocalis_q8", "int8", "q8.cpp",
           "Qwen3-TTS quantize='int8', and the prompt passes of quantize='int4'",
           (cpu.AVX512_VNNI, cpu.AVX2, cpu.NEON_DOTPROD, cpu.NEON)),
    Kernel("vocalis_q4", "int4", "q4.cpp", "Qwen3-TTS quantize='int4'",
           (cpu.AVX2, cpu.NEON_DOTPROD, cpu.NEON)),
)}


def kernel(name: str) -> Kernel:
    """The kernel called ``name``: its ``torch.ops`` name (``vocalis_q8``) or its mode
    (``int8``).

    Raises:
        InputError (param ``kernel``): an unknown name.
    """
    for k in KERNELS.values():
        if name in (k.name, k.mode):
            return k
    raise InputError(f"unknown kernel {name!r}: use one of "
                     f"{', '.join(k.mode for k in KERNELS.values())}", param="kernel")


# ---------------------------------------------------------------- where builds live


def cache_dir() -> Path:
    """The kernel cache: ``$VOCALIS_CACHE/kernels``, else ``$XDG_CACHE_HOME/vocalis/kernels``,
    else ``~/.cache/vocalis/kernels`` (read when called, not at import)."""
    return vocalis_cache_dir() / "kernels"


def cache_origin() -> str:
    """Which setting :func:`cache_dir` comes from, in words."""
    if os.environ.get("VOCALIS_CACHE"):
        return "$VOCALIS_CACHE"
    if os.environ.get("XDG_CACHE_HOME"):
        return "$XDG_CACHE_HOME"
    return "the default; set VOCALIS_CACHE to move it"


@functools.cache
def _sources_digest(k: Kernel) -> str:
    """sha256 of the kernel's source and every shared header (read once per process)."""
    digest = hashlib.sha256()
    for path in (CSRC / k.source, *sorted(CSRC.glob("*.h"))):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def build_key(k: Kernel, variant: cpu.Variant) -> dict:
    """What a built library of ``k`` must match to be loaded here (stored in its
    ``build.json``; its hash names the build's folder)."""
    import torch

    return {"format": FORMAT, "kernel": k.name, "variant": variant.name,
            "flags": [STD, *variant.flags], "sources": _sources_digest(k),
            "torch": torch.__version__, "torch_git": getattr(torch.version, "git_version", None),
            "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
            "machine": cpu.machine(), "system": platform.system()}


def library(k: Kernel, variant: cpu.Variant, root: Path | None = None) -> Path:
    """Where the library of ``k`` built in ``variant`` for this torch lives (or would)."""
    key = json.dumps(build_key(k, variant), sort_keys=True)
    folder = f"{k.name}-{variant.name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    return (cache_dir() if root is None else root) / folder / f"{k.name}.so"


# ---------------------------------------------------------------- loading (never builds)

_LOCK = threading.Lock()
_loaded: dict[str, Path] = {}  # name -> the library it was loaded from
_broken: dict[str, str] = {}  # name -> why its built library did not load
_hinted = False  # the "not built" line of hint() was said in this process


def _cannot_run(k: Kernel) -> str | None:
    """None when this CPU can run ``k``, else a clause saying why not."""
    if cpu.choose(k.variants) is not None:
        return None
    return f"runs on {cpu.needs(k.variants)}, and this CPU is {cpu.describe()}"


def unsupported(name: str) -> str | None:
    """None when this CPU can run kernel ``name``, else why not (words for a message)."""
    k = kernel(name)
    why = _cannot_run(k)
    return None if why is None else f"vocalis's {k.mode} kernel {why}"


def find(name: str) -> Path | None:
    """The built library of kernel ``name`` for this machine and torch, or None. Never
    builds."""
    k = kernel(name)
    variant = cpu.choose(k.variants)
    if variant is None:
        return None
    path = library(k, variant)
    return path if path.is_file() else None


def loaded(name: str) -> Path | None:
    """The library kernel ``name`` was loaded from in this process, or None."""
    return _loaded.get(kernel(name).name)


def load(name: str) -> bool:
    """Register ``torch.ops.<name>`` from its library built before (:func:`build`); False
    when it is not built for this machine, this CPU cannot run it, or its library did not
    load (said once, as a warning). Never compiles. Thread-safe; a kernel is loaded once
    per process, and stays loaded whatever ``$VOCALIS_CACHE`` says later."""
    k = kernel(name)
    with _LOCK:
        if k.name in _loaded:
            return True
        if k.name in _broken:
            return False
        path = find(k.name)
        if path is None:
            return False
        import torch

        try:
            torch.ops.load_library(str(path))
        except (OSError, RuntimeError) as e:
            _broken[k.name] = f"{path} did not load ({_first_line(str(e))})"
            log.warning("vocalis's %s kernel: %s; build it again with `%s --force`", k.mode,
                        _broken[k.name], BUILD_COMMAND)
            return False
        _loaded[k.name] = path
        log.debug("vocalis's %s kernel loaded from %s", k.mode, path)
        return True


def _why_not_loaded(k: Kernel) -> str:
    """A clause saying why ``k`` is not loaded here and what to do."""
    why = _cannot_run(k)
    if why is not None:
        return why
    if k.name in _broken:
        return f"is built but {_broken[k.name]}: build it again with `{BUILD_COMMAND} --force`"
    needs = "" if compiler() is not None else (" (it needs a C++ compiler: Debian/Ubuntu "
                                               "apt-get install g++)")
    return (f"is not built for this machine in {cache_dir()}: build vocalis's kernels once "
            f"with `{BUILD_COMMAND}`{needs}")


def missing(name: str) -> str:
    """Why kernel ``name`` is not loaded here and what to do: words for a message."""
    k = kernel(name)
    return f"vocalis's {k.mode} kernel {_why_not_loaded(k)}"


def require(name: str, use: str, instead: str = "drop quantize",
            param: str | None = "quantize") -> None:
    """Load kernel ``name`` for ``use`` (what needs it, e.g. ``quantize='int4'``).

    Raises:
        InputError (``param``): not built for this machine, its library did not load, or
            this CPU cannot run it; the message names the cause, the fix and ``instead``.
    """
    if load(name):
        return
    k = kernel(name)
    raise InputError(f"{use} needs vocalis's {k.mode} kernel, which {_why_not_loaded(k)}; or "
                     f"{instead}", param=param)


def offer(name: str, choice: str) -> bool:
    """Whether a tuning candidate ``choice`` that runs kernel ``name`` may be offered: True
    when the kernel is loaded (or loads now from its build); otherwise the candidate is left
    out and PyTorch's kernels run (:func:`hint` then says how to build it). Never compiles."""
    if load(name):
        return True
    log.debug("%s is not offered: %s", choice, missing(name))
    return False


def hint(name: str, choice: str) -> None:
    """Say, once per process and in one log line (INFO), that the candidate ``choice`` was
    left out of a tuning decision because kernel ``name`` is not built, and how to build it.
    Tuning calls it after a decision that the missing kernel changed (measured, or taken
    from the cache), not for fixed or forced choices nor for a load that failed. Silent
    where the kernel is loaded, where this CPU cannot run it, or where its library did not
    load (:func:`load` warned)."""
    global _hinted
    k = kernel(name)
    with _LOCK:
        if _hinted or k.name in _loaded or k.name in _broken or _cannot_run(k) is not None:
            return
        _hinted = True
    log.info("%s is not offered: vocalis's %s kernel is not built for this machine, PyTorch's "
             "kernels run instead (`%s` builds vocalis's kernels once)", choice, k.mode,
             BUILD_COMMAND)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "no message"


# ---------------------------------------------------------------- the compiler


def compiler() -> list[str] | None:
    """The C++ compiler command: ``$CXX`` (which may hold arguments, e.g. ``ccache g++``),
    else the first of :data:`COMPILERS` on PATH; None when there is none."""
    cxx = os.environ.get("CXX", "").strip()
    if cxx:
        argv = shlex.split(cxx)
        exe = shutil.which(argv[0])
        return [exe, *argv[1:]] if exe else None
    for name in COMPILERS:
        exe = shutil.which(name)
        if exe:
            return [exe]
    return None


def compiler_version(argv: list[str]) -> str:
    """The first line of ``<compiler> --version``, or ``argv[0]`` when it says nothing."""
    try:
        out = subprocess.run([*argv, "--version"], check=False, capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)
        return _first_line(out.stdout) if out.returncode == 0 and out.stdout.strip() else argv[0]
    except (OSError, subprocess.SubprocessError):
        return argv[0]


def _no_compiler() -> str:
    cxx = os.environ.get("CXX", "").strip()
    if cxx:
        return (f"$CXX is {cxx!r}, which is not a program on PATH: set CXX to a C++ compiler "
                f"(e.g. g++) or unset it, then run `{BUILD_COMMAND}` again")
    return (f"no C++ compiler found ({', '.join(COMPILERS)} on PATH): install one (Debian/"
            f"Ubuntu: apt-get install g++; Fedora: dnf install gcc-c++) and run "
            f"`{BUILD_COMMAND}` again; until then vocalis runs PyTorch's kernels, and Qwen3-TTS "
            "quantize is unavailable")


def command(argv: list[str], k: Kernel, variant: cpu.Variant, out: Path) -> list[str]:
    """The compiler command that builds ``k`` in ``variant`` into the library ``out``:
    compiled and linked in one step against the installed torch (its include and library
    folders, its C++ ABI), as ``torch.utils.cpp_extension`` would, without ninja."""
    import torch

    # cpp_extension logs a CUDA warning at import on CPU-only machines: not ours to show
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    from torch.utils import cpp_extension

    cmd = [*argv, "-shared", "-fPIC", STD,
           f"-D_GLIBCXX_USE_CXX11_ABI={int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))}"]
    for folder in cpp_extension.include_paths():
        cmd += ["-isystem", folder]
    cmd += [*variant.flags, str(CSRC / k.source), "-o", str(out)]
    cmd += [f"-L{folder}" for folder in cpp_extension.library_paths()]
    cmd += ["-lc10", "-ltorch_cpu", "-ltorch"]
    if platform.system() == "Linux":
        cmd.append("-Wl,--no-undefined")  # a missing symbol fails the build, not the load
    return cmd


# ---------------------------------------------------------------- building


@dataclass
class Built:
    """What :func:`build` did for one kernel: ``state`` is ``built`` (now, in ``seconds``),
    ``present`` (built before) or ``skipped`` (this CPU cannot run it: ``why``)."""

    kernel: str
    mode: str
    state: str
    variant: str | None = None
    path: Path | None = None
    seconds: float | None = None
    why: str | None = None


class BuildInterrupted(KeyboardInterrupt):
    """A :func:`build` stopped by Ctrl-C (or SIGTERM through the CLI): the kernels it was
    compiling were not installed (``kernels``: their modes)."""

    def __init__(self, kernels: list[str]):
        super().__init__(f"interrupted while building the {' and '.join(kernels)} kernel"
                         f"{'s' if len(kernels) > 1 else ''}")
        self.kernels = kernels


@dataclass
class _Job:
    kernel: Kernel
    variant: cpu.Variant
    path: Path
    tmp: Path
    cmd: list[str]
    log: object
    started: float = field(default_factory=time.perf_counter)


def _writable(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=".building-probe-", dir=root))
    except OSError as e:
        raise InputError(f"cannot write the kernel cache {root} ({e.strerror or e}): make it "
                         "writable, or set VOCALIS_CACHE to a writable folder (and the same "
                         "VOCALIS_CACHE when running vocalis)") from None


def _clean_leftovers(root: Path) -> None:
    """Remove ``.building-*`` folders of builds that died without cleaning up (killed with
    SIGKILL, a power cut): never loaded, only in the way."""
    now = time.time()
    for p in root.glob(".building-*"):
        try:
            if now - p.stat().st_mtime > STALE_S:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _install(job: _Job, version: str, force: bool) -> None:
    """Move a finished build into place in one rename (replacing an older one with
    ``force``; leaving an identical one that a concurrent build installed first)."""
    lib = job.tmp / f"{job.kernel.name}.so"
    if not lib.is_file() or lib.stat().st_size == 0:
        raise InputError(f"the C++ compiler ({version}) exited without error but wrote no "
                         f"library for vocalis's {job.kernel.mode} kernel; nothing was "
                         f"installed: check the compiler and run `{BUILD_COMMAND}` again")
    info = {"key": build_key(job.kernel, job.variant), "compiler": version,
            "command": job.cmd, "seconds": round(time.perf_counter() - job.started, 1),
            "built_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cpu": cpu.describe()}
    (job.tmp / "build.json").write_text(json.dumps(info, indent=1) + "\n")
    for f in (lib, job.tmp / "build.json"):
        _fsync(f)
    compile_log = job.tmp / "compile.log"
    if compile_log.is_file() and compile_log.stat().st_size == 0:
        compile_log.unlink()  # kept only when the compiler said something (warnings)
    os.chmod(job.tmp, 0o777 & ~_umask())  # mkdtemp's 0700 would hide it from other users
    final = job.path.parent
    old = None
    if final.exists():
        if not force:  # a concurrent build of the same inputs came first
            shutil.rmtree(job.tmp, ignore_errors=True)
            return
        old = final.with_name(f".building-old-{final.name}-{os.getpid()}")
        os.rename(final, old)
    os.rename(job.tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _failure(job: _Job, returncode: int, version: str) -> str:
    what = f"vocalis's {job.kernel.mode} kernel"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        oom = " (SIGKILL: out of memory?)" if -returncode == signal.SIGKILL else ""
        return (f"the C++ compiler was killed by {name}{oom} while building {what}; nothing "
                f"was installed: run `{BUILD_COMMAND}` again")
    text = (job.tmp / "compile.log").read_text(errors="replace")
    errors = [line.strip() for line in text.splitlines() if "error" in line.lower()]
    first = errors[0] if errors else _first_line(text)
    kept = job.path.parent.parent / f"{job.kernel.name}.failed.log"
    try:
        shutil.copyfile(job.tmp / "compile.log", kept)
        where = f"; the compiler's output is in {kept}"
    except OSError:
        where = ""
    return (f"{what} did not compile with {version} (exit {returncode}: {first[:300]}); "
            f"nothing was installed{where}. Check that the compiler and the installed PyTorch "
            "go together (g++ 9 or later), or leave the kernels out: vocalis runs without them")


def build(kernels: Iterable[str] | None = None, force: bool = False, jobs: int | None = None,
          progress: Callable[[str], None] | None = None, variant: str | None = None,
          ) -> list[Built]:
    """Build vocalis's kernels for this machine into :func:`cache_dir` (all of them, or the
    ``kernels`` named by ``torch.ops`` name or mode), each in the best instruction-set variant
    this CPU runs, or in ``variant`` (a :class:`~vocalis.kernels.cpu.Variant` name, whether or
    not this CPU runs it: a build for another machine, or a comparison; a kernel without that
    variant is skipped); those already built are kept unless ``force``. Up to ``jobs``
    compilers run at a time (default: one per CPU core). Each kernel gives one ``progress``
    line (default: logged at INFO): built (with its time and path), already built, or
    skipped (this CPU cannot run it). Builds in a temporary folder and renames it into
    place, so an interrupted or failed build installs nothing. Loads nothing into this
    process (:func:`load` does).

    Returns one :class:`Built` per kernel, in :data:`KERNELS` order.

    Raises:
        InputError: an unknown kernel name; the cache folder is not writable; no C++
            compiler; a compiler failed or was killed (the message names the cause and the
            fix; kernels finished before it stay installed, the others are not).
        BuildInterrupted: Ctrl-C while compiling (nothing half-built is left).
    """
    say = progress or (lambda line: log.info("%s", line))
    names = {kernel(n).name for n in kernels} if kernels else set(KERNELS)
    chosen = [k for k in KERNELS.values() if k.name in names]
    root = cache_dir()
    results: dict[str, Built] = {}
    todo: list[tuple[Kernel, cpu.Variant, Path]] = []
    for k in chosen:
        if variant is None:
            v = cpu.choose(k.variants)
            why = unsupported(k.name)
        else:
            v = next((x for x in k.variants if x.name == variant), None)
            why = f"vocalis's {k.mode} kernel has no {variant} build"
        if v is None:
            results[k.name] = Built(k.name, k.mode, "skipped", why=why)
            say(f"{k.mode} kernel ({k.name}): skipped: {why}")
            continue
        path = library(k, v, root)
        if path.is_file() and not force:
            results[k.name] = Built(k.name, k.mode, "present", v.name, path)
            say(f"{k.mode} kernel ({k.name}, {v.name}): already built: {path}")
            continue
        todo.append((k, v, path))
    if todo:
        _writable(root)
        argv = compiler()
        if argv is None:
            raise InputError(_no_compiler())
        _clean_leftovers(root)
        version = compiler_version(argv)
        jobs = max(1, min(len(todo), jobs or os.cpu_count() or 1))
        say(f"building the {', '.join(k.mode for k, _, _ in todo)} kernel"
            f"{'s' if len(todo) > 1 else ''} with {version}, {jobs} at a time, into {root}")

        def built(b: Built) -> None:
            results[b.kernel] = b
            say(f"{b.mode} kernel ({b.kernel}, {b.variant}): built in {b.seconds:.1f} s: {b.path}")
        _compile(todo, argv, version, jobs, force, built)
    return [results[k.name] for k in chosen]


def _compile(todo, argv: list[str], version: str, jobs: int, force: bool,
             built: Callable[[Built], None]) -> None:
    """Run the compilers (``jobs`` at a time), calling ``built`` as each kernel is
    installed; on any failure or interruption, stop the others and remove their folders."""
    pending = list(todo)
    running: dict[subprocess.Popen, _Job] = {}
    temps: list[Path] = []
    try:
        while pending or running:
            while pending and len(running) < jobs:
                k, variant, path = pending.pop(0)
                path.parent.parent.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=f".building-{k.name}-", dir=path.parent.parent))
                temps.append(tmp)
                cmd = command(argv, k, variant, tmp / f"{k.name}.so")
                out = open(tmp / "compile.log", "wb")  # noqa: SIM115 (closed as its job ends)
                job = _Job(k, variant, path, tmp, cmd, out)
                try:
                    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
                except OSError as e:
                    out.close()
                    raise InputError(f"the C++ compiler {argv[0]} could not be started "
                                     f"({e.strerror or e}): {_no_compiler()}") from None
                running[proc] = job
            done = [p for p in running if p.poll() is not None]
            if not done:
                time.sleep(0.05)
                continue
            for proc in done:
                job = running.pop(proc)
                job.log.close()
                if proc.returncode != 0:
                    raise InputError(_failure(job, proc.returncode, version))
                seconds = time.perf_counter() - job.started
                _install(job, version, force)
                (job.path.parent.parent / f"{job.kernel.name}.failed.log").unlink(missing_ok=True)
                built(Built(job.kernel.name, job.kernel.mode, "built", job.variant.name,
                            job.path, seconds))
    except KeyboardInterrupt as e:
        if isinstance(e, BuildInterrupted):
            raise
        raise BuildInterrupted([job.kernel.mode for job in running.values()]
                               or [k.mode for k, _, _ in pending] or ["last"]) from None
    finally:
        for proc, job in running.items():
            proc.kill()
            proc.wait()
            job.log.close()
        for tmp in temps:
            shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- status


@dataclass
class KernelStatus:
    """One kernel in :func:`status`. ``state``: ``loaded`` (in this process, from ``path``),
    ``built`` (``path``, ready to load), ``missing`` (not built for this machine and torch;
    ``path`` is where a build would go), ``broken`` (built, but its library did not load)
    or ``unsupported`` (this CPU cannot run it). ``why``: for the last three, the cause and
    the fix. ``info``: the build's ``build.json`` (compiler, flags, time). ``others``:
    folders of other builds of this kernel in the cache (other sources, torch or
    instruction set), never loaded here."""

    name: str
    mode: str
    used_by: str
    state: str
    variant: str | None = None
    path: Path | None = None
    why: str | None = None
    info: dict | None = None
    others: list[str] = field(default_factory=list)


@dataclass
class Status:
    """What :func:`status` reports: the cache folder and where its setting comes from,
    this CPU (machine and features), the C++ compiler (None: none found), the torch
    version and one :class:`KernelStatus` per kernel."""

    cache: Path
    cache_origin: str
    cpu: str
    compiler: str | None
    torch: str
    kernels: list[KernelStatus]

    def to_dict(self) -> dict:
        """JSON-ready: paths as strings."""
        out = {"cache": str(self.cache), "cache_origin": self.cache_origin, "cpu": self.cpu,
               "compiler": self.compiler, "torch": self.torch, "kernels": []}
        for k in self.kernels:
            d = dict(k.__dict__)
            d["path"] = None if k.path is None else str(k.path)
            out["kernels"].append(d)
        return out


def _info(path: Path) -> dict | None:
    try:
        return json.loads((path.parent / "build.json").read_text())
    except (OSError, ValueError):
        return None


def status() -> Status:
    """What is built, for which CPU, where, and what is missing and why. Builds and loads
    nothing."""
    import torch

    root = cache_dir()
    argv = compiler()
    kernels = []
    for k in KERNELS.values():
        variant = cpu.choose(k.variants)
        try:
            others = sorted(p.name for p in root.glob(f"{k.name}-*") if p.is_dir())
        except OSError:
            others = []
        s = KernelStatus(k.name, k.mode, k.used_by, "unsupported", others=others)
        if variant is None:
            s.why = f"{unsupported(k.name)}: nothing to build"
        else:
            s.variant = variant.name
            s.path = library(k, variant, root)
            if s.path.parent.name in others:
                others.remove(s.path.parent.name)
            if k.name in _loaded:
                s.state, s.path = "loaded", _loaded[k.name]
                s.info = _info(s.path)
            elif k.name in _broken:
                s.state, s.why = "broken", missing(k.name)
            elif s.path.is_file():
                s.state, s.info = "built", _info(s.path)
            else:
                s.state = "missing"
                s.why = ("not built for this machine and torch: run "
                         f"`{BUILD_COMMAND}`" + ("" if argv is not None else
                                                  " (it needs a C++ compiler: Debian/Ubuntu "
                                                  "apt-get install g++)"))
        kernels.append(s)
    return Status(root, cache_origin(), cpu.describe(),
                  None if argv is None else f"{compiler_version(argv)} ({' '.join(argv)})",
                  f"{torch.__version__} (C++ ABI {int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))})",
                  kernels)


__all__ = ["BUILD_COMMAND", "KERNELS", "BuildInterrupted", "Built", "Kernel", "KernelStatus",
           "Status", "build", "build_key", "cache_dir", "command", "compiler", "find", "hint",
           "kernel", "library", "load", "loaded", "missing", "offer", "require", "status",
           "unsupported"]
