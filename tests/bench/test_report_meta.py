"""``vocalis bench --json`` reports say which commit ran, how it was invoked and when."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from vocalis.bench import report_meta

REPO = Path(__file__).resolve().parents[2]


def test_provenance_names_commit_command_and_utc_date():
    p = report_meta.provenance()
    assert set(p) == {"commit", "commit_dirty", "vocalis_version", "command", "date"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", p["date"])
    head = subprocess.run(["git", "rev-parse", "HEAD"], check=False, cwd=REPO, capture_output=True,
                          text=True)
    if head.returncode == 0:  # a git checkout: the commit vocalis was imported from
        assert p["commit"] == head.stdout.strip()
        assert isinstance(p["commit_dirty"], bool)


def test_command_line_reads_as_typed():
    assert report_meta.command_line(["/venv/bin/vocalis", "bench", "--text", "a b"]) == \
        "vocalis bench --text 'a b'"
    assert report_meta.command_line(["/src/vocalis/__main__.py", "bench", "-c", "16"]) == \
        "vocalis bench -c 16"
    assert report_meta.command_line(["script.py", "--x"]) == "script.py --x"


def test_outside_a_checkout_the_commit_is_null(tmp_path):
    assert report_meta.source_commit(tmp_path / "x.py") == (None, None)


def test_bench_report_carries_provenance(checkpoints):
    """A real (tiny) ``run_bench``: the report holds the CPU, the threads and the provenance."""
    from vocalis.bench.benchmark import run_bench

    ckpt = checkpoints.get("english_2m_2026-10")
    texts = ["The quick brown fox jumps over the lazy dog, and then it runs far away to hide now.",
             "She sells sea shells by the sea shore; the shells she sells are surely sea shells."]
    rep = run_bench(str(ckpt), texts, str(ckpt / "voice.wav"), frames=2)
    assert rep["provenance"]["commit"] == report_meta.provenance()["commit"]
    assert rep["provenance"]["date"][:4].isdigit() and rep["host"]["cpu"]["model"]
    assert rep["torch_threads"] >= 1 and rep["vocalis"]["session"]["failed"] == 0
