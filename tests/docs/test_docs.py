"""The documentation builds (``mkdocs build --strict``: a broken link, a missing page or an
unresolved reference fails), its performance tables are the JSON reports' figures, and the
README stays a five-minute read that starts with the set-up."""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "docs" / "benchmarks"


def _hook():
    spec = importlib.util.spec_from_file_location("docs_hook_benchmarks",
                                                  REPO / "docs" / "hooks" / "benchmarks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], check=False,
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, (
        "mkdocs build --strict failed (pip install -e '.[docs]' installs MkDocs):\n"
        + proc.stdout[-4000:] + proc.stderr[-8000:])
    return out


def _cells(row_html: str) -> list[str]:
    cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row_html, re.DOTALL)
    return [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells]


def _section(page: str, anchor: str) -> str:
    m = re.search(rf'<h4 id="{re.escape(anchor)}"', page)
    assert m, f"no heading #{anchor} on the performance page"
    end = re.search(r"<h[1-4] ", page[m.end():])
    return page[m.start(): m.end() + (end.start() if end else len(page))]


def test_site_builds_with_api_reference(site):
    for page in ("index.html", "performance/index.html", "reference/api/index.html",
                 "reference/server/index.html", "changelog/index.html"):
        assert (site / page).is_file(), page
    api = (site / "reference" / "api" / "index.html").read_text()
    assert "vocalis.api.load" in api and "synthesize" in api  # rendered from the docstrings
    assert "create_app" in (site / "reference" / "server" / "index.html").read_text()
    assert "Unreleased" in (site / "changelog" / "index.html").read_text()
    # nothing at build time points at a font CDN
    assert "fonts.googleapis.com" not in (site / "index.html").read_text()


@pytest.mark.parametrize("name, label", [
    ("pocket-2026-12-01-intel-xeon.json", "1 stream, fp32: x real time"),
    ("pocket-2026-12-02-amd-epyc-thread-counts.json", "16 concurrent, fp32: aggregate x real time"),
    ("qwen3-2026-12-03-amd-epyc-bf16-tiles.json", "1 stream, int8 vs official fp32: ms per frame"),
])
def test_performance_table_row_equals_its_json_figure(site, name, label):
    data = json.loads((BENCHMARKS / name).read_text())
    fig = next(f for f in data["figures"] if f["label"] == label)
    page = (site / "performance" / "index.html").read_text()
    section = _section(page, data["id"])
    rows = [_cells(r) for r in re.findall(r"<tr>(.*?)</tr>", section, re.DOTALL)]
    row = next(r for r in rows if r and r[0] == label)

    def number_text(v):
        if isinstance(v, dict):
            sep = "-" if "range" in v else ", "
            return sep.join(number_text(x) for x in v.get("range") or v["runs"])
        return str(int(v)) if float(v).is_integer() else repr(float(v))

    assert row[1].startswith(number_text(fig["vocalis"])), (row, fig)
    assert row[2].startswith(number_text(fig["official"])), (row, fig)
    assert row[3].startswith(number_text(fig["ratio"]) + "x"), (row, fig)
    # and its provenance is on the page beside it
    assert data["date"] in section and data["hardware"]["description"].split(" (")[0] in section
    assert (data["commit"] or data["recorded_in"]) in section


def test_every_report_has_date_commit_model_and_hardware():
    runs = _hook().load_runs(BENCHMARKS)  # raises on a report missing any of them
    assert len(runs) == len(list(BENCHMARKS.glob("*.json"))) >= 20
    for run in runs:
        assert run["date"] and run["model"] and run["hardware"]
        assert run.get("commit") or run.get("commit_note")
        assert run.get("command") and run.get("threads")
        for f in run["figures"]:
            assert f["label"] and f["metric"] and "vocalis" in f


def test_plot_is_drawn_at_build_time(site):
    svg = (site / "benchmarks" / "throughput.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "Pocket TTS" in svg and "Qwen3-TTS" in svg
    assert 'src="../benchmarks/throughput.svg"' in (site / "performance" / "index.html").read_text()


def test_a_vocalis_bench_report_becomes_a_table_and_a_plot_point(tmp_path):
    """Adding a CPU is adding the JSON file ``vocalis bench --json`` writes."""
    hook = _hook()
    session = {"x_real_time": 6.5, "request_x_real_time": 0.41, "ttfa_ms": {"mean": 120.4},
               "ms_per_frame": 195.2, "rss_growth_mb": 410.0}
    official = {"x_real_time": 2.1, "request_x_real_time": 2.1, "ttfa_ms": {"mean": 230.0},
                "ms_per_frame": 38.0}
    report = {
        "schema": "vocalis.bench", "schema_version": 1, "created": "2027-01-15T10:00:00+0000",
        "host": {"torch": "2.13.0", "cpu_count": 8,
                 "cpu": {"model": "Test CPU 9000", "isa": ["avx2", "avx512f"],
                         "capability": "AVX512", "logical_cpus": 8}},
        "tuning": {"choices": {"flow_linears": "vocalis"}}, "model": "ckpt", "config": "english",
        "device": "cpu", "torch_threads": 8, "concurrency": 16, "quantize_mode": None,
        "family": "pocket-tts", "vocalis": {"session": session},
        "official": {"config": "as-shipped", "version": "4.0.1", "session": official},
        "ratios": {"x_real_time": 0.2, "ttfa": 0.52, "throughput": 3.1, "ms_per_frame": 5.14},
        "provenance": {"commit": "abc1234", "command": "vocalis bench --model ckpt -c 16",
                       "date": "2027-01-15T10:00:00Z"},
    }
    (tmp_path / "pocket-2027-01-15-test-cpu.json").write_text(json.dumps(report))
    (run,) = hook.load_runs(tmp_path)
    assert run["date"] == "2027-01-15" and run["commit"] == "abc1234"
    assert run["hardware"]["cpu_label"] == "Test CPU 9000 (AVX-512)" and run["threads"] == 8
    md = hook.render_tables([run])
    assert "### Pocket TTS on Test CPU 9000 (AVX-512)" in md and "vocalis bench --model ckpt -c 16" in md
    assert "| 16 concurrent, fp32: aggregate x real time | 6.5 | 2.1 (as-shipped) | 3.1x |" in md
    (series,) = [s for s in hook.plot_series([run])["pocket-tts"] if s["side"] == "vocalis"]
    assert series["points"] == [(16, (6.5, 6.5, 6.5))]

    # a GPU run is filed under its GPU, not under its host's CPU
    gpu = {**report, "device": "cuda", "official": None, "ratios": {},
           "host": {**report["host"], "gpu": "Test GPU 100"}}
    (tmp_path / "pocket-2027-01-15-test-cpu.json").write_text(json.dumps(gpu))
    (run,) = hook.load_runs(tmp_path)
    assert hook.cpu_key(run) == "Test GPU 100" and "Test GPU 100" in run["title"]
    assert "### Pocket TTS on Test GPU 100" in hook.render_tables([run])
    older = {**gpu, "host": report["host"]}  # a report from before host.gpu
    (tmp_path / "pocket-2027-01-15-test-cpu.json").write_text(json.dumps(older))
    (run,) = hook.load_runs(tmp_path)
    assert hook.cpu_key(run) == "GPU (cuda, name not recorded)"


def test_readme_is_short_and_starts_with_the_setup():
    text = (REPO / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines (at most 250)"
    blocks = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    assert blocks[0].startswith("pip install torch==2.13.0 && pip install -e . && vocalis generate")
    assert blocks[1].strip() == "bash .ci/run"
    assert text.index(blocks[1]) < text.index("## What it is")
    for target in re.findall(r"\]\(((?:docs|examples)/[^)#]*)", text):
        assert (REPO / target).exists(), f"README links to {target}, which does not exist"
