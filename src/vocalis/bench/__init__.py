"""Performance tooling: the offline batch runner and the benchmark, for every model family.

* :func:`run_batch` (``vocalis batch``): a requests file through one engine session,
  warm-up + measured pass, WAV files and ``report.json`` (:mod:`vocalis.bench.batch`).
* :func:`run_bench` (``vocalis bench``): fixed texts at a given concurrency, optionally
  against the family's official package in the same invocation
  (:mod:`vocalis.bench.benchmark`; the official side is the family's,
  :meth:`vocalis.family.ModelFamily.official_bench`, over the shared pieces of
  :mod:`vocalis.bench.official`).

Both time requests from the caller's side (:mod:`vocalis.bench.session`) and report peak
RSS per pass (:mod:`vocalis.bench.memory`).
"""

from __future__ import annotations

import importlib

# Imported when first asked for: the official side's child process imports the light
# modules of this package (memory, session, official) without the batch runner and the
# benchmark (and the vocalis API they load), so that its memory figures are its own.
_EXPORTS = {"run_batch": "vocalis.bench.batch", "run_bench": "vocalis.bench.benchmark",
            "render_table": "vocalis.bench.benchmark", "BatchRequest": "vocalis.bench.requests",
            "parse_requests": "vocalis.bench.requests", "read_requests": "vocalis.bench.requests"}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BatchRequest", "parse_requests", "read_requests", "render_table", "run_batch",
           "run_bench"]
