"""Performance tooling: the offline batch runner and the benchmark.

* :func:`run_batch` (``vocalis batch``): a requests file through one engine session,
  warm-up + measured pass, WAV files and ``report.json`` (:mod:`vocalis.bench.batch`).
* :func:`run_bench` (``vocalis bench``): fixed texts at a given concurrency, optionally
  against the official package in the same invocation (:mod:`vocalis.bench.benchmark`):
  pocket-tts in a child process (:mod:`vocalis.bench.official`), or for Qwen3-TTS
  (:mod:`vocalis.bench.qwen3`) the official qwen-tts in its own interpreter
  (:mod:`vocalis.bench.official_qwen3`, running ``qwen3_official_runner.py``).

Both time requests from the caller's side (:mod:`vocalis.bench.session`) and report peak
RSS per pass (:mod:`vocalis.bench.memory`).
"""

from vocalis.bench.batch import run_batch
from vocalis.bench.benchmark import render_table, run_bench
from vocalis.bench.requests import BatchRequest, parse_requests, read_requests

__all__ = ["BatchRequest", "parse_requests", "read_requests", "render_table", "run_batch",
           "run_bench"]
