"""MkDocs hook: the performance page's tables and plot, made from ``docs/benchmarks/*.json``.

Each JSON file is one benchmark run, in one of two forms:

* ``schema: "vocalis.bench"``: the report ``vocalis bench --json FILE`` writes (with the
  ``provenance`` block of :mod:`vocalis.bench.report_meta`: commit, command, UTC date).
  Copy the file here and rebuild: its CPU gets a table, its figures join the plot.
* ``schema: "vocalis.bench.transcribed"``: figures that were only ever written as prose
  (the README's tables before reports were kept as data), transcribed with their
  provenance (``source``, ``date``, ``commit`` / ``commit_note``, ``hardware``, ``command``).

On build, ``performance.md``'s markers are replaced:

* ``<!-- benchmarks:summary -->``: one line per run (CPU, date, model, commit, link);
* ``<!-- benchmarks:tables -->``: per CPU, one table per run with its provenance and notes;

and ``benchmarks/throughput.svg`` (aggregate x real time against concurrency, vocalis and
the official package, one panel per model family) is drawn with matplotlib and added to
the site. Nothing is fetched from the network.
"""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.benchmarks")

PAGE = "performance.md"
PLOT = "benchmarks/throughput.svg"
TABLES_MARK = "<!-- benchmarks:tables -->"
SUMMARY_MARK = "<!-- benchmarks:summary -->"
#: seconds of audio per frame (both families: 1920 samples at 24 kHz)
FRAME_S = 0.08
UNIT_TEXT = {"ms": " ms", "s": " s", "MB": " MB", "x real time": "x real time",
             "frames/s": " frames/s", "x": "x"}
FAMILY_NAMES = {"pocket-tts": "Pocket TTS", "qwen3-tts": "Qwen3-TTS"}


# --------------------------------------------------------------------------- reading


def benchmarks_dir(config) -> Path:
    return Path(config["docs_dir"]) / "benchmarks"


def load_runs(folder: Path) -> list[dict]:
    """Every JSON report in ``folder`` as a normalized run, in time order."""
    runs = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        schema = data.get("schema")
        if schema == "vocalis.bench.transcribed":
            run = dict(data)
        elif schema == "vocalis.bench":
            run = from_bench_report(data)
        else:
            raise ValueError(f"{path.name}: unknown schema {schema!r} (expected vocalis.bench "
                             "or vocalis.bench.transcribed)")
        run.setdefault("id", path.stem)
        run["file"] = path.name
        for key in ("date", "hardware", "model", "family", "figures"):
            if not run.get(key):
                raise ValueError(f"{path.name}: no {key}")
        if not (run.get("commit") or run.get("commit_note")):
            raise ValueError(f"{path.name}: no commit (nor a commit_note saying why)")
        runs.append(run)
    runs.sort(key=lambda r: (str(r["date"])[:10], r.get("sequence", 0), str(r.get("created", ""))))
    return runs


def _isa_label(isa) -> str:
    return ", ".join(isa) if isa else "not recorded"


def from_bench_report(rep: dict) -> dict:
    """A ``vocalis bench --json`` report as a run: its machine, provenance and the figures
    the README's tables use (per-request x real time, TTFA, aggregate x real time, ms per
    frame, RSS growth), against the faster official run when there is one."""
    host = rep.get("host") or {}
    cpu = host.get("cpu") or {}
    prov = rep.get("provenance") or {}
    conc = rep.get("concurrency") or 1
    quant = rep.get("quantize_mode")
    prec = quant or "fp32"
    v = (rep.get("vocalis") or {}).get("session") or {}
    off_run = rep.get("official") or {}
    o = off_run.get("session") or {}
    ratios = rep.get("ratios") or {}
    off_cfg = off_run.get("config")

    def r2(x, nd=2):
        return None if x is None else round(float(x), nd)

    def fig(label, metric, vv, ov, ratio, unit=None, plot=True):
        f = {"label": label, "metric": metric, "concurrency": conc, "quantize": quant,
             "vocalis": vv, "official": ov, "ratio": ratio, "plot": plot}
        if unit:
            f["vocalis_unit"] = f["official_unit"] = unit
        if ratio is not None:
            f["ratio_unit"] = "x"
        if ov is not None and off_cfg:
            f["official_config"] = off_cfg
        return f

    head = f"{conc} stream" if conc == 1 else f"{conc} concurrent"
    figures = [
        fig(f"{head}, {prec}: x real time per request", "request_x_real_time",
            r2(v.get("request_x_real_time")), r2(o.get("request_x_real_time")),
            r2(ratios.get("x_real_time")), plot=False),
        fig(f"{head}, {prec}: TTFA (mean)", "ttfa", r2((v.get("ttfa_ms") or {}).get("mean"), 0),
            r2((o.get("ttfa_ms") or {}).get("mean"), 0), r2(ratios.get("ttfa")), unit="ms",
            plot=False),
        fig(f"{head}, {prec}: aggregate x real time", "x_real_time", r2(v.get("x_real_time")),
            r2(o.get("x_real_time")), r2(ratios.get("throughput"))),
        fig(f"{head}, {prec}: ms per frame", "ms_per_frame", r2(v.get("ms_per_frame"), 0),
            r2(o.get("ms_per_frame"), 0), r2(ratios.get("ms_per_frame")), unit="ms", plot=False),
        fig(f"{head}, {prec}: RSS growth in the pass", "rss_growth", r2(v.get("rss_growth_mb"), 0),
            None, None, unit="MB", plot=False),
    ]
    date = prov.get("date") or rep.get("created") or ""
    isa = cpu.get("isa")
    model = rep.get("config") or rep.get("model")
    device = str(rep.get("device", "cpu"))
    # a GPU run is cited by its GPU (reports before host.gpu existed name only the device)
    gpu = None if device.startswith("cpu") else (host.get("gpu") or f"GPU ({device}, name not recorded)")
    return {
        "id": None, "title": f"{FAMILY_NAMES.get(rep.get('family'), rep.get('family'))}, "
                             f"{gpu or cpu.get('model') or 'unknown CPU'}, {prec}, concurrency {conc}",
        "source": "vocalis bench --json report", "date": date[:10],
        "time": date[11:19] + " UTC" if len(date) >= 19 and prov.get("date") else None,
        "created": date, "commit": prov.get("commit"),
        "commit_note": None if prov.get("commit") else "not recorded in the report",
        "hardware": {"cpu_model": cpu.get("model"), "cpu_label": cpu_label(cpu.get("model"), isa),
                     "isa": isa, "cores": cpu.get("logical_cpus") or host.get("cpu_count"),
                     "gpu": gpu,
                     "description": f"{cpu.get('model') or 'unknown CPU'} (ISA: {_isa_label(isa)}; "
                                    f"torch {cpu.get('capability', '?')}), "
                                    f"{cpu.get('logical_cpus') or host.get('cpu_count')} logical CPUs, "
                                    f"device {device}" + (f" ({gpu})" if gpu else "")},
        "threads": rep.get("torch_threads"), "torch": host.get("torch"),
        "family": rep.get("family"), "model": f"`{model}`",
        "official": (f"{'pocket-tts' if rep.get('family') == 'pocket-tts' else 'qwen-tts'} "
                     f"{off_run.get('version')}" if off_run else "not run"),
        "command": prov.get("command"),
        "conditions": [], "figures": figures,
        "notes": [f"Speed choices: `{json.dumps((rep.get('tuning') or {}).get('choices'))}`"]
        if (rep.get("tuning") or {}).get("choices") else [],
    }


# --------------------------------------------------------------------------- formatting


def fmt_number(x) -> str:
    """``3.16``, ``73``, ``0.5``: the shortest text that gives the number back."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def fmt_value(value) -> str:
    """A figure's value: a number, ``{"range": [lo, hi]}`` (``lo-hi``: the range over
    several runs) or ``{"runs": [a, b, ...]}`` (separate runs, in order)."""
    if value is None:
        return "-"
    if isinstance(value, dict):
        if "range" in value:
            return "-".join(fmt_number(x) for x in value["range"])
        if "runs" in value:
            return ", ".join(fmt_number(x) for x in value["runs"])
        raise ValueError(f"unknown value {value!r}")
    return fmt_number(value)


def fmt_cell(fig: dict, side: str) -> str:
    value = fig.get(side)
    if value is None:
        return "-"
    text = fmt_value(value) + UNIT_TEXT.get(fig.get(side + "_unit") or "", "")
    if side == "official" and fig.get("official_config"):
        text += f" ({fig['official_config']})"
    note = fig.get(side + "_note")
    if note:
        text += ("" if note[0] in ",;" else " ") + note
    return text


def _escape_cell(text: str) -> str:
    return text.replace("|", "\\|")


def cpu_label(model: str | None, isa) -> str:
    """A CPU's name with the instruction sets that tell one machine of that name from another
    (``lscpu`` names AMD's server CPUs of every generation ``AMD EPYC``)."""
    flags = set(isa or ())
    if "avx512f" in flags:
        extra = ["AVX-512"] + [n for f, n in (("avx512_vnni", "VNNI"), ("avx512_bf16", "BF16"))
                               if f in flags]
    elif "avx2" in flags:
        extra = ["AVX2"]
    else:
        extra = []
    name = model or "unknown CPU"
    return f"{name} ({', '.join(extra)})" if extra else name


def cpu_key(run: dict) -> str:
    """The machine a run is filed under: its GPU when it ran on one, else its CPU."""
    hw = run["hardware"]
    if hw.get("gpu"):
        return hw["gpu"]
    return hw.get("cpu_label") or hw.get("cpu_model") or "unknown CPU"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def render_run(run: dict, level: int = 4) -> str:
    hw = run["hardware"]
    when = str(run["date"]) + (f", {run['time']}" if run.get("time") else "")
    if run.get("commit"):
        commit = f"`{run['commit']}`" + (f" ({run['commit_note']})" if run.get("commit_note") else "")
    else:
        commit = run["commit_note"]
    lines = [f"{'#' * level} {run['title']}, {run['date']} {{ #{run['id']} }}", ""]
    meta = [
        ("Date", when),
        ("Commit", commit),
        ("Hardware", hw.get("description") or hw.get("cpu_model") or "not recorded"),
        ("ISA flags", _isa_label(hw.get("isa")) + (f" ({hw['isa_note']})" if hw.get("isa_note") else "")),
        ("Threads", str(run.get("threads")) if run.get("threads") is not None else "not recorded"),
        ("torch", run.get("torch") or "not recorded"),
        ("Model", run["model"]),
        ("Compared with", run.get("official") or "-"),
        ("Source", f"{run.get('source', '')} (`docs/benchmarks/{run['file']}`)"),
    ]
    lines += [f"- **{k}**: {v}" for k, v in meta]
    if run.get("command"):
        lines += ["", "```bash", run["command"], "```"]
    for p in run.get("conditions") or []:
        lines += ["", p]
    figs = run["figures"]
    with_official = any(f.get("official") is not None or f.get("ratio") is not None for f in figs)
    lines.append("")
    if with_official:
        lines += ["| run | vocalis | official | ratio |", "|---|---|---|---|"]
    else:
        lines += ["| run | vocalis |", "|---|---|"]
    for f in figs:
        cells = [f["label"], fmt_cell(f, "vocalis")]
        if with_official:
            cells += [fmt_cell(f, "official"), fmt_cell(f, "ratio")]
        lines.append("| " + " | ".join(_escape_cell(c) for c in cells) + " |")
    for p in run.get("notes") or []:
        lines += ["", p]
    return "\n".join(lines) + "\n"


def render_tables(runs: list[dict]) -> str:
    """Per model family, then per CPU (in order of first appearance), the runs in time order."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for run in sorted(runs, key=lambda r: list(FAMILY_NAMES).index(r["family"])
                      if r["family"] in FAMILY_NAMES else len(FAMILY_NAMES)):
        groups.setdefault((run["family"], cpu_key(run)), []).append(run)
    out = []
    for (family, cpu), group in groups.items():
        fam = FAMILY_NAMES.get(family, family)
        out.append(f"### {fam} on {cpu} {{ #{slug(family)}-{slug(cpu)} }}\n")
        for run in group:
            out.append(render_run(run))
    return "\n".join(out)


def render_summary(runs: list[dict]) -> str:
    lines = ["| date | CPU | model | commit | run |", "|---|---|---|---|---|"]
    for run in runs:
        commit = f"`{run['commit']}`" if run.get("commit") else f"(recorded in `{run.get('recorded_in')}`)" \
            if run.get("recorded_in") else "not recorded"
        fam = FAMILY_NAMES.get(run["family"], run["family"])
        lines.append(f"| {run['date']} | {cpu_key(run)} | {fam} | {commit} | "
                     f"[{_escape_cell(run['title'])}](#{run['id']}) |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- plot


def x_real_time(fig: dict, value: float) -> float | None:
    """A throughput figure as x real time: frames/s and ms per frame are converted with
    80 ms of audio per frame."""
    metric = fig["metric"]
    if metric == "x_real_time":
        return value
    if metric == "frames_per_s":
        return value * FRAME_S
    if metric == "ms_per_frame":
        return FRAME_S * 1000 / value if value else None
    return None


def _spread(value) -> tuple[float, float, float] | None:
    """(centre, low, high) of a value: a number, a range or separate runs."""
    if value is None:
        return None
    if isinstance(value, dict):
        xs = [float(x) for x in value.get("range") or value.get("runs") or []]
        if not xs:
            return None
        return (sum(xs) / len(xs), min(xs), max(xs))
    return (float(value),) * 3


def plot_series(runs: list[dict]) -> dict[str, list[dict]]:
    """Per family, the series to draw: for each CPU its latest run that has a throughput
    figure, one series per precision and side (vocalis; official, which runs one request at
    a time, so its throughput is its single-stream figure at every concurrency)."""
    latest: dict[tuple[str, str], dict] = {}
    for run in runs:
        if any(f.get("plot", True) and x_real_time(f, 1.0) is not None and f.get("concurrency")
               for f in run["figures"]):
            latest[(run["family"], cpu_key(run))] = run  # runs are in time order
    out: dict[str, list[dict]] = {}
    for (family, cpu), run in sorted(latest.items()):
        series: dict[tuple[str, str], dict[int, tuple]] = {}
        for f in run["figures"]:
            if not f.get("plot", True) or not f.get("concurrency"):
                continue
            for side in ("vocalis", "official"):
                s = _spread(f.get(side))
                if s is None or x_real_time(f, s[0]) is None:
                    continue
                prec = f.get("quantize") or "fp32"
                if side == "official":
                    prec = "int8" if "vs official int8" in f["label"] else "fp32"
                vals = tuple(x_real_time(f, x) for x in s)
                pts = series.setdefault((side, prec), {})
                pts.setdefault(f["concurrency"], vals)  # first figure of a concurrency wins
        for (side, prec), pts in sorted(series.items()):
            out.setdefault(family, []).append({
                "run": run["id"], "date": run["date"], "cpu": cpu, "side": side,
                "precision": prec, "points": sorted(pts.items())})
    return out


def render_plot(runs: list[dict]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "vocalis-docs"  # stable ids: same data, same file
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt

    data = plot_series(runs)
    families = sorted(data)
    fig, axes = plt.subplots(1, max(1, len(families)), figsize=(6.5 * max(1, len(families)), 6.4),
                             squeeze=False)
    colours = {}
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, family in zip(axes[0], families):
        for s in data[family]:
            key = (s["cpu"], s["precision"])
            colour = colours.setdefault(key, palette[len(colours) % len(palette)])
            xs = [c for c, _ in s["points"]]
            mid = [v[0] for _, v in s["points"]]
            err = [[v[0] - v[1] for _, v in s["points"]], [v[2] - v[0] for _, v in s["points"]]]
            official = s["side"] == "official"
            label = (f"{'official' if official else 'vocalis'} {s['precision']}, {s['cpu']} "
                     f"({s['date']})")
            ax.errorbar(xs, mid, yerr=err, color=colour, linestyle="--" if official else "-",
                        marker="s" if official else "o", capsize=3, label=label)
        ax.set_title(FAMILY_NAMES.get(family, family))
        ax.set_xscale("log", base=2)
        ticks = sorted({c for s in data[family] for c, _ in s["points"]})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("requests in flight (concurrency)")
        ax.set_ylabel("aggregate x real time (higher is faster)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.16), frameon=False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


# --------------------------------------------------------------------------- MkDocs events


def on_files(files, config):
    from mkdocs.structure.files import File

    runs = load_runs(benchmarks_dir(config))
    files.append(File.generated(config, PLOT, content=render_plot(runs)))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != PAGE:
        return markdown
    runs = load_runs(benchmarks_dir(config))
    for mark in (TABLES_MARK, SUMMARY_MARK):
        if mark not in markdown:
            raise ValueError(f"{PAGE}: marker {mark} missing")
    return (markdown.replace(SUMMARY_MARK, render_summary(runs))
            .replace(TABLES_MARK, render_tables(runs)))


__all__ = ["fmt_cell", "fmt_value", "from_bench_report", "load_runs", "plot_series",
           "render_plot", "render_run", "render_tables", "x_real_time"]
