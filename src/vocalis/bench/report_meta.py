"""Provenance of a benchmark report: which code ran, how it was invoked, and when.

``vocalis bench --json`` reports already hold the machine (``host.cpu``: model, ISA flags),
the thread count and the figures; :func:`provenance` adds what a figure needs to be cited
later (the documentation's performance page reads it, ``docs/hooks/benchmarks.py``)::

    {"commit": "3f519f2...", "commit_dirty": false, "vocalis_version": "0.1.0",
     "command": "vocalis bench --model ckpt ...", "date": "2026-12-03T15:40:36Z"}

``commit`` is the git commit of the source tree vocalis was imported from (``null`` when it
is not a git checkout, e.g. an installed wheel); ``commit_dirty`` says whether that tree had
uncommitted changes (``null`` when unknown).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

from vocalis import __version__

GIT_TIMEOUT_S = 5


def _git(*args: str, cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                             timeout=GIT_TIMEOUT_S, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def source_commit(start: Path | None = None) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout holding ``start`` (default: this package)."""
    here = (start or Path(__file__)).resolve().parent
    top = _git("rev-parse", "--show-toplevel", cwd=here)
    if not top:
        return None, None
    commit = _git("rev-parse", "HEAD", cwd=here) or None
    status = _git("status", "--porcelain", "--untracked-files=no", cwd=here)
    return commit, (None if status is None else bool(status))


def command_line(argv: list[str] | None = None) -> str:
    """The command as a user would type it again: ``vocalis bench ...`` when run through the
    ``vocalis`` script or ``python -m vocalis``, else the interpreter's argv."""
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return ""
    head = Path(argv[0]).name
    if head in ("vocalis", "__main__.py") or argv[0].endswith(("vocalis/__main__.py",)):
        return shlex.join(["vocalis", *argv[1:]])
    return shlex.join(argv)


def provenance() -> dict:
    """The ``provenance`` block of a report (see the module doc)."""
    commit, dirty = source_commit()
    return {"commit": commit, "commit_dirty": dirty, "vocalis_version": __version__,
            "command": command_line(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def gpu_name(device: str) -> str | None:
    """The GPU's name (``torch.cuda.get_device_name``, e.g. "NVIDIA H200") when ``device`` is
    a CUDA device, else None: a GPU run is cited by its GPU, not by the host's CPU."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(dev)
