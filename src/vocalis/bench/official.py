"""What every family's official side of ``vocalis bench --against official`` shares.

A family runs its official package (:meth:`vocalis.family.ModelFamily.official_bench`,
:class:`vocalis.family.OfficialBench`) in a process of its own, so that its memory figures
are its own and nothing of vocalis runs beside it. This module holds the pieces that do
not depend on the family: the names of the configurations an official run is made in, the
child process that takes a JSON spec and writes a JSON result (:func:`run_child`), and the
figures of one official pass (:func:`pass_summary`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from vocalis.bench.session import distribution
from vocalis.errors import HarnessError

#: the official package as its users get it (its own thread settings)
AS_SHIPPED = "as-shipped"
#: the official package at vocalis's torch thread count
MATCHED_THREADS = "matched-threads"
#: how long one official run may take
OFFICIAL_TIMEOUT_S = 3600


def run_child(argv: list[str], spec: dict, *, what: str, timeout_s: float,
              env: dict | None = None) -> dict:
    """Run ``argv + [SPEC.json, OUT.json]`` with ``spec`` written to ``SPEC.json``; the JSON
    object the child wrote to ``OUT.json``. ``what`` names the run in messages (``"the
    official pocket-tts run"``); ``env``: the child's environment (default: this one).

    Raises:
        HarnessError: the child failed, wrote nothing, or took over ``timeout_s`` (the last
        line of its stderr in the message).
    """
    env = dict(os.environ if env is None else env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    with tempfile.TemporaryDirectory(prefix="vocalis-bench-") as d:
        spec_path, out_path = Path(d) / "spec.json", Path(d) / "out.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        try:
            proc = subprocess.run([*argv, str(spec_path), str(out_path)], check=False,
                                  capture_output=True, env=env, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"{what} took over {timeout_s:.0f} s") from None
        if proc.returncode != 0 or not out_path.exists():
            lines = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
            raise HarnessError(f"{what} failed: " + (lines[-1] if lines else f"exit {proc.returncode}"))
        return json.loads(out_path.read_text(encoding="utf-8"))


def pass_summary(results: list[dict], wall_ms: float) -> dict:
    """Figures of one official pass (requests one at a time) from its per-request figures
    (``ok``, ``audio_s``, ``frames``, ``ttfa_ms``, ``rtf``, ``x_real_time``), in the schema of
    :func:`vocalis.bench.session.summarize`: ``requests``, ``ok``, ``failed``, ``wall_ms``,
    ``audio_s``, ``frames``, ``x_real_time`` (aggregate), ``rtf``, ``ttfa_ms``,
    ``request_x_real_time``, ``request_rtf``."""
    ok = [r for r in results if r.get("ok", True)]
    audio_s = sum(r["audio_s"] for r in ok)
    xs = [r["x_real_time"] for r in ok if r["x_real_time"]]
    rtfs = [r["rtf"] for r in ok if r["rtf"]]
    wall_s = wall_ms / 1000
    return {"requests": len(results), "ok": len(ok), "failed": len(results) - len(ok),
            "wall_ms": round(wall_ms, 2), "audio_s": round(audio_s, 4),
            "frames": sum(r["frames"] or 0 for r in ok),
            "x_real_time": round(audio_s / wall_s, 3) if audio_s and wall_s else None,
            "rtf": round(wall_s / audio_s, 4) if audio_s else None,
            "ttfa_ms": distribution([r["ttfa_ms"] for r in ok]),
            "request_x_real_time": round(statistics.fmean(xs), 3) if xs else None,
            "request_rtf": round(statistics.fmean(rtfs), 4) if rtfs else None}


__all__ = ["AS_SHIPPED", "MATCHED_THREADS", "OFFICIAL_TIMEOUT_S", "pass_summary", "run_child"]
