"""``vocalis kernels build`` and ``vocalis kernels status`` (the typer sub-app ``app``,
registered by :mod:`vocalis.cli`).

Errors are :class:`~vocalis.errors.InputError`: the CLI's ``main()`` ends the command with one
line ``error: ...`` and exit code 2 (no compiler, a cache folder that cannot be written, a
compiler that failed or was killed, Ctrl-C or SIGTERM during the build); nothing half-built
is left behind.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from typing import Annotated

import typer

from vocalis.errors import InputError
from vocalis.kernels import native

app = typer.Typer(
    help="vocalis's C++ kernels: build them once per machine, see what is built.\n\n"
         "Optional, for speed; Qwen3-TTS --quantize-mode int8/int4 needs them. See "
         "docs/kernels.md.",
    no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

KERNEL_HELP = ("Only this kernel: float32, int8 or int4 (or vocalis_f32, vocalis_q8, "
               "vocalis_q4); repeat for several. Default: all of them.")


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM raises KeyboardInterrupt meanwhile (the build then cleans up as for Ctrl-C)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@app.command("build")
def build_command(
    kernel: Annotated[list[str] | None, typer.Option("--kernel", "-k", metavar="NAME",
                                                     help=KERNEL_HELP, show_default=False)]
    = None,
    force: Annotated[bool, typer.Option("--force", help="Build again where already built.")]
    = False,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", min=1, metavar="N",
                                             show_default=False,
                                             help="Compilers at a time (default: one per "
                                                  "CPU core).")] = None,
) -> None:
    """Build vocalis's C++ kernels for this machine (once; needs a C++ compiler).

    One line per kernel: built (its time and library), already built, or skipped (this CPU
    cannot run it). The libraries go to $VOCALIS_CACHE/kernels (default
    ~/.cache/vocalis/kernels), one folder per kernel, instruction set, torch version and
    source; vocalis loads them from there and never compiles on its own. Without them
    vocalis runs PyTorch's kernels, except Qwen3-TTS --quantize-mode int8/int4, which needs
    them.
    """
    try:
        with _sigterm_interrupts():
            native.build(kernel or None, force=force, jobs=jobs, progress=typer.echo)
    except KeyboardInterrupt as e:
        what = str(e) if isinstance(e, native.BuildInterrupted) else "the build was interrupted"
        raise InputError(f"{what}; nothing half-built was kept: run `vocalis kernels build` "
                         "again") from None


def _describe_build(info: dict | None) -> str:
    if not info:
        return ""
    parts = [p for p in (info.get("compiler"), info.get("built_utc")) if p]
    return f" (built with {', '.join(parts)})" if parts else ""


@app.command("status")
def status_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """What is built, for which CPU, where, and what is missing and why.

    Lists the cache folder, this CPU's instruction-set features, the C++ compiler and
    torch, then one line per kernel: built (its library), missing (and how to build it) or
    unsupported (this CPU cannot run it). Builds and loads nothing.
    """
    s = native.status()
    if as_json:
        typer.echo(json.dumps(s.to_dict(), indent=1))
        return
    rows = [("cache", f"{s.cache} ({s.cache_origin})"), ("cpu", s.cpu),
            ("compiler", s.compiler or "none found (Debian/Ubuntu: apt-get install g++)"),
            ("torch", s.torch)]
    width = max(len(k) for k, _ in rows) + 1
    for key, value in rows:
        typer.echo(f"{key + ':':<{width}} {value}")
    mode_w = max(len(k.mode) for k in s.kernels)
    name_w = max(len(k.name) for k in s.kernels)
    for k in s.kernels:
        head = f"{k.mode:<{mode_w}}  {k.name:<{name_w}}"
        if k.state in ("built", "loaded"):
            line = f"{head}  {k.state} ({k.variant}): {k.path}{_describe_build(k.info)}"
        elif k.state == "missing":
            line = f"{head}  missing ({k.variant}): {k.why}"
        else:
            line = f"{head}  {k.state}: {k.why}"
        if k.others:
            n = len(k.others)
            line += (f"; {n} other build{'s' if n > 1 else ''} in the cache (other sources, "
                     f"torch or instruction set) {'are' if n > 1 else 'is'} not used")
        typer.echo(line)


__all__ = ["app"]
