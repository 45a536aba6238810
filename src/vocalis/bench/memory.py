"""Resident memory figures of this process (Linux ``/proc``; ``getrusage`` elsewhere).

``peak_rss_mb()`` is the high-water mark since the process started or since the last
:func:`reset_peak` (Linux resets it when ``5`` is written to ``/proc/self/clear_refs``),
so one process can report the peak of each phase (warm-up, measured pass) separately.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kb(field: str) -> float | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_mb() -> float | None:
    """Current resident set size in MiB (None where the platform does not say)."""
    kb = _status_kb("VmRSS")
    return None if kb is None else kb / 1024


def peak_rss_mb() -> float:
    """Peak resident set size in MiB since start or the last successful :func:`reset_peak`."""
    kb = _status_kb("VmHWM")
    if kb is not None:
        return kb / 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def reset_peak() -> bool:
    """Reset the peak to the current RSS; False where the kernel does not allow it (then
    :func:`peak_rss_mb` stays the process-lifetime peak)."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False
