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

from vocalis.bench.batch import run_batch
from vocalis.bench.benchmark import render_table, run_bench
from vocalis.bench.requests import BatchRequest, parse_requests, read_requests

__all__ = ["BatchRequest", "parse_requests", "read_requests", "render_table", "run_batch",
           "run_bench"]
