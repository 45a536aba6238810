"""``vocalis batch`` and ``vocalis bench`` on a small random checkpoint: their reports, not
their speed.

The CLI runs as a subprocess (``python -m vocalis.cli``) against one random-weight
checkpoint of the small ``english_2m_2026-10`` config; fixed frame counts (``max_frames``,
``--frames``) keep every run to a few frames.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

CONFIG = "english_2m_2026-10"
T1 = ("The quick brown fox jumps over the lazy dog, and then it runs far away into the "
      "dark forest.")
T2 = ("She sells sea shells by the sea shore; the shells she sells are surely sea shells, "
      "or so I am told.")


def run(*args: str, cwd: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "vocalis.cli", *args], check=False,
                          capture_output=True,
                          cwd=cwd, env=env, timeout=timeout)


def err_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines()
            if ln.startswith("error:")]


def read_wav(path: Path) -> tuple[wave._wave_params, np.ndarray]:
    with wave.open(str(path), "rb") as w:
        return w.getparams(), np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")


@pytest.fixture(scope="module")
def ckpt(checkpoints) -> Path:
    d = checkpoints.get(CONFIG)
    assert (d / "voice.wav").is_file()
    return d


def write_requests(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


# --------------------------------------------------------------------------- batch


def test_batch_streaming_report(ckpt, tmp_path):
    voice = str(ckpt / "voice.wav")
    reqs = write_requests(tmp_path / "requests.json", [
        {"text": "Hello there, this is the first request.", "voice": voice,
         "options": {"seed": 1, "max_frames": 6}},
        {"text": "A second one. It has two sentences, so maybe two chunks.", "voice": voice,
         "options": {"seed": 2, "max_frames": 4, "max_tokens": 8}},
        {"text": "Third, without a seed.", "voice": voice, "options": {"max_frames": 5}},
    ])
    out = tmp_path / "out"
    log_file = tmp_path / "batch.log"
    proc = run("batch", "--model", str(ckpt), "--requests", str(reqs), "--out-dir", str(out),
               "--batch-size", "2", "--mode", "streaming", "--threads", "1",
               "--log-file", str(log_file))
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().strip() == str(out / "report.json")
    assert "measured pass" in log_file.read_text()
    rep = json.loads((out / "report.json").read_text())

    assert rep["schema"] == "vocalis.batch" and rep["schema_version"] == 2
    assert rep["family"] == "pocket-tts" and rep["config"] == str(ckpt / "config.yaml")
    assert rep["mode"] == "streaming" and rep["batch_size"] == 2 and not rep["sequential"]
    # the passes and the summary say the same number of requests in flight
    assert rep["in_flight"] == 2
    assert re.findall(r"up to (\d+) in flight", log_file.read_text()) == ["2", "2", "2"]
    assert rep["sample_rate"] == 24000 and rep["torch_threads"] == 1
    # one entry per request and pass; warm-up entries have no file
    assert [(e["pass"], e["index"]) for e in rep["requests"]] == (
        [("warmup", i) for i in range(3)] + [("measured", i) for i in range(3)])
    for e in rep["requests"]:
        assert e["ok"] and e["error"] is None
        assert e["ttfa_ms"] > 0 and e["wall_ms"] >= e["ttfa_ms"] and e["audio_s"] > 0
        assert e["rtf"] == pytest.approx(e["wall_ms"] / 1000 / e["audio_s"], rel=1e-2)
        assert e["audio_events"] == e["frames"]
        assert ("wav" in e) == ("options" in e) == (e["pass"] == "measured")
    measured = [e for e in rep["requests"] if e["pass"] == "measured"]
    assert [e["frames"] for e in measured[:1]] == [6]
    assert [e["options"] for e in measured] == [{"max_frames": 6}, {"max_frames": 4, "max_tokens": 8},
                                                {"max_frames": 5}]
    assert all(e["codes"] is None for e in measured)  # Pocket TTS reports no codes
    # the seed each request used: its own, or the one drawn for it (31 bits), said so
    assert [(e["seed"], e["random_seed"]) for e in measured[:2]] == [(1, False), (2, False)]
    drawn = [e for e in rep["requests"] if e["index"] == 2]
    assert all(e["random_seed"] and isinstance(e["seed"], int) and 0 <= e["seed"] < 2**31
               for e in drawn)
    assert measured[1]["frames"] == 4 * measured[1]["text_chunks"]
    assert measured[1]["text_chunks"] >= 2

    # WAVs: measured outputs only, one per request, 16-bit 24 kHz mono, equal to the events
    assert sorted(p.name for p in out.glob("*.wav")) == ["0000.wav", "0001.wav", "0002.wav"]
    for e in measured:
        params, pcm = read_wav(out / e["wav"])
        assert (params.nchannels, params.sampwidth, params.framerate) == (1, 2, 24000)
        assert pcm.shape[0] == e["frames"] * 1920 == round(e["audio_s"] * 24000)
        s = e["streaming"]
        assert s["equal"] and s["in_order"] and s["frames_match"] and s["whole_frames"]
        assert s["wav_samples"] == s["event_samples"] == pcm.shape[0]
        assert s["audio_events"] == e["frames"]
    assert rep["streaming"] == {"checked": 3, "equal": 3, "all_equal": True}

    sess = rep["session"]
    m = rep["passes"]["measured"]
    assert sess["wall_ms"] == m["wall_ms"] > 0 and sess["ok"] == 3 and sess["failed"] == 0
    assert sess["audio_s"] == pytest.approx(sum(e["audio_s"] for e in measured), abs=1e-3)
    assert sess["x_real_time"] == pytest.approx(sess["audio_s"] / (sess["wall_ms"] / 1000),
                                                rel=1e-2)
    assert sess["peak_rss_mb"] > 50 and rep["passes"]["warmup"]["peak_rss_mb"] > 50
    assert set(m["ttfa_ms"]) == {"mean", "p50", "p90", "min", "max"}
    # seeded requests repeat across passes; the engine is reusable afterwards
    assert rep["repeat"]["seeded_requests"] == 2 and rep["repeat"]["frames_equal"]
    assert rep["repeat"]["min_cosine"] >= 0.9999
    after = rep["after"]
    assert after["ok"] and after["index"] == 0 and after["same_frames_as_measured"]
    assert after["cosine_to_measured"] >= 0.9999
    assert rep["engine"]["after"]["active_rows"] == 0 and rep["engine"]["after"]["queued"] == 0
    assert rep["failures"] == []


class _FaultyTTS:
    """A real session whose requests containing FAIL end with a Failed event at run time."""

    def __init__(self, tts):
        self._tts = tts

    def __getattr__(self, name):
        return getattr(self._tts, name)

    def submit(self, text, voice=None, seed=None, **sampling):
        if "FAIL" not in text:
            return self._tts.submit(text, voice, seed, **sampling)
        from vocalis.engine.types import Failed, Request

        req = Request()
        req._put(Failed(RuntimeError("injected fault"), req.stats))
        return req


def test_batch_one_failing_request_does_not_stop_the_others(ckpt, tmp_path):
    import vocalis
    from vocalis.bench import run_batch

    voice = str(ckpt / "voice.wav")
    reqs = write_requests(tmp_path / "r.json", [
        {"text": "First request.", "voice": voice, "options": {"seed": 5, "max_frames": 3}},
        {"text": "This one will FAIL.", "voice": voice, "options": {"seed": 6, "max_frames": 3}},
        {"text": "Third request.", "voice": voice, "options": {"seed": 7, "max_frames": 3}},
    ])
    tts = vocalis.load(str(ckpt), max_batch=2)
    try:
        out = tmp_path / "out"
        (out).mkdir()
        (out / "0001.wav").write_bytes(b"stale")  # from an earlier run: must go
        rep, rc = run_batch(str(ckpt), reqs, out, sequential=True, tts=_FaultyTTS(tts))
    finally:
        tts.close()
    assert rc == 1
    assert rep["sequential"] and rep["batch_size"] == rep["in_flight"] == 1
    assert rep["mode"] == "oneshot"
    assert rep["failures"] == [{"index": 1, "error": "RuntimeError: injected fault"}]
    measured = {e["index"]: e for e in rep["requests"] if e["pass"] == "measured"}
    assert measured[1]["ok"] is False and measured[1]["wav"] is None
    assert measured[0]["ok"] and measured[2]["ok"] and measured[2]["frames"] == 3
    assert sorted(p.name for p in out.glob("*.wav")) == ["0000.wav", "0002.wav"]
    assert rep["session"]["ok"] == 2 and rep["session"]["failed"] == 1
    assert rep["after"]["ok"] and rep["streaming"] is None
    assert json.loads((out / "report.json").read_text())["failures"] == rep["failures"]


def test_batch_capacity_errors_fail_requests_not_the_run(ckpt, tmp_path):
    """More requests in flight than the engine holds: the extra ones fail with
    CapacityError at run time; the rest complete, exit 1 with one error line. A batch size
    above the number of requests: all of them in flight, and the log says so throughout."""
    voice = str(ckpt / "voice.wav")
    reqs = write_requests(tmp_path / "r.json", [
        {"text": f"Request number {i}.", "voice": voice, "options": {"seed": i, "max_frames": 8}}
        for i in range(3)])
    out = tmp_path / "out"
    proc = run("batch", "--model", str(ckpt), "--requests", str(reqs), "--out-dir", str(out),
               "--batch-size", "5", "--session-options", '{"max_batch": 1, "max_queue": 1}',
               "--threads", "1")
    assert proc.returncode == 1, proc.stderr.decode()
    assert re.findall(r"up to (\d+) in flight", proc.stderr.decode()) == ["3", "3", "3"]
    errors = err_lines(proc)
    assert len(errors) == 1 and "CapacityError" in errors[0] and "report.json" in errors[0]
    rep = json.loads((out / "report.json").read_text())
    assert rep["session_options"]["max_batch"] == 1
    assert rep["batch_size"] == 5 and rep["in_flight"] == 3
    assert 1 <= len(rep["failures"]) <= 2
    assert all(f["error"].startswith("CapacityError") for f in rep["failures"])
    ok = {e["index"] for e in rep["requests"] if e["pass"] == "measured" and e["ok"]}
    assert ok and {p.name for p in out.glob("*.wav")} == {f"{i:04d}.wav" for i in ok}


BAD_FILES = [  # "V" stands for the checkpoint's voice.wav (a random checkpoint has no default voice)
    ("not-json", '[{"text": "hi"', None, "not valid JSON"),
    ("not-array", '{"text": "hi"}', None, "must be a JSON array"),
    ("empty-array", "[]", None, "empty"),
    ("not-object", '[{"text": "hi", "voice": "V"}, "hello"]', 1, "must be an object"),
    ("missing-text", '[{"text": "hi", "voice": "V"}, {"voice": "x.wav"}]', 1,
     "missing field 'text'"),
    ("unknown-field", '[{"text": "a", "voice": "V"}, {"text": "b", "voice": "V"}, '
     '{"text": "c", "speed": 2}]', 2, "unknown field"),
    ("empty-text", '[{"text": "a", "voice": "V"}, {"text": "   "}]', 1, "empty"),
    ("seed-float", '[{"text": "a", "voice": "V", "options": {"seed": 1.5}}]', 0,
     "seed must be an integer"),
    ("seed-string", '[{"text": "a", "voice": "V"}, {"text": "b", "voice": "V", "options": '
     '{"seed": "42"}}]', 1, "seed must be an integer"),
    ("unknown-option", '[{"text": "a", "voice": "V", "options": {"speed": 2}}]', 0,
     "unknown option"),
    ("bad-option-value", '[{"text": "a", "voice": "V"}, {"text": "b", "voice": "V", '
     '"options": {"temperature": -1}}]', 1, "temperature must be"),
    ("other-family-option", '[{"text": "a", "voice": "V", "options": {"speaker": "ryan"}}]',
     0, "unknown option speaker"),
    ("unknown-voice", '[{"text": "a", "voice": "V"}, {"text": "b", "voice": "no_such_voice"}]',
     1, "unknown voice"),
    ("no-voice", '[{"text": "a", "voice": "V"}, {"text": "b"}]', 1, "give a voice"),
]


@pytest.mark.parametrize("content,index,needle", [c[1:] for c in BAD_FILES],
                         ids=[c[0] for c in BAD_FILES])
def test_batch_bad_request_files(ckpt, tmp_path, content, index, needle):
    reqs = write_requests(tmp_path / "r.json", content.replace('"V"', json.dumps(
        str(ckpt / "voice.wav"))))
    out = tmp_path / "out"
    proc = run("batch", "--model", str(ckpt), "--requests", str(reqs), "--out-dir", str(out))
    assert proc.returncode == 2, proc.stderr.decode()
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    assert needle in lines[0]
    if index is not None:
        assert f"request {index}:" in lines[0]
    assert not out.exists()  # nothing ran, nothing written


def test_batch_json_lines_without_ray_says_which_runner_reads_them(ckpt, tmp_path):
    reqs = write_requests(tmp_path / "r.jsonl", '{"text": "hi"}\n{"text": "there"}\n')
    proc = run("batch", "--model", str(ckpt), "--requests", str(reqs), "--out-dir",
               str(tmp_path / "out"))
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, lines
    assert "read by `vocalis batch --ray`" in lines[0] and "add --ray" in lines[0]
    # an error inside the file names the file's field, not a command line flag
    reqs = write_requests(tmp_path / "v.json", '[{"text": "hi", "voice": "nope.wav"}]')
    proc = run("batch", "--model", str(ckpt), "--requests", str(reqs), "--out-dir",
               str(tmp_path / "out"))
    line = proc.stderr.decode().strip()
    assert proc.returncode == 2 and "request 0: voice file not found" in line
    assert not line.endswith("(--voice)"), line


def test_batch_lists_every_bad_request_and_logs_it(ckpt, tmp_path):
    """Every bad request on a line of its own (20, then how many more), exit 2, nothing
    written; --log-file gets the error too."""
    voice = str(ckpt / "voice.wav")
    bad = [{"voice": voice}, {"text": ""}, {"text": "a", "colour": 1},
           {"text": "a", "voice": voice, "options": {"seed": -1}}] * 6  # 24 bad requests
    reqs = write_requests(tmp_path / "r.json", [{"text": "Fine.", "voice": voice}, *bad])
    out, log_file = tmp_path / "out", tmp_path / "batch.log"
    proc = run("batch", "--model", str(ckpt), "--requests", str(reqs), "--out-dir", str(out),
               "--log-file", str(log_file))
    assert proc.returncode == 2, proc.stderr.decode()
    lines = proc.stderr.decode().strip().splitlines()
    assert lines[0] == f"error: requests file {reqs}: 24 requests have problems (nothing was run):"
    assert [ln.split(":")[0] for ln in lines[1:21]] == [f"  request {i}" for i in range(1, 21)]
    assert "missing field 'text'" in lines[1] and "'text' is empty" in lines[2]
    assert "unknown field(s) 'colour'" in lines[3] and "seed must be" in lines[4]
    assert lines[21:] == ["  and 4 more"]
    assert not out.exists()
    logged = log_file.read_text().splitlines()
    assert len(logged) == 22 and all(" ERROR vocalis.cli: " in ln for ln in logged)
    assert logged[0].endswith("24 requests have problems (nothing was run):")
    assert logged[1].endswith("request 1: missing field 'text'")


def test_batch_emoji_only_requests_are_named_without_a_command_line_flag(ckpt, tmp_path):
    """Requests the loaded model cannot speak (only emoji): each named by its index, no
    '(--text)', which is not how a requests file gives its text."""
    voice = str(ckpt / "voice.wav")
    reqs = write_requests(tmp_path / "r.json", [
        {"text": "Fine.", "voice": voice}, {"text": "\U0001f600\U0001f389", "voice": voice},
        {"text": "Fine too.", "voice": voice}, {"text": "\U0001f44d", "voice": voice}])
    proc = run("batch", "--model", str(ckpt), "--requests", str(reqs), "--out-dir",
               str(tmp_path / "out"))
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    lines = err.strip().splitlines()
    assert lines[-3] == "error: 2 requests have problems (nothing was run):", lines
    assert lines[-2].startswith("  request 1: text has nothing the model can speak")
    assert lines[-1].startswith("  request 3: text has nothing the model can speak")
    assert "--text" not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("ray", [False, True], ids=["batch", "batch-ray"])
def test_batch_file_of_another_format_lists_the_accepted_ones(ckpt, tmp_path, ray):
    if ray:
        pytest.importorskip("ray")
    reqs = write_requests(tmp_path / "r.csv", "text,voice\nHello,alba\n")
    proc = run("batch", *(["--ray"] if ray else []), "--model", str(ckpt), "--requests",
               str(reqs), "--out-dir", str(tmp_path / "out"))
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, lines
    assert "is not valid JSON" in lines[0] and "accepted formats" in lines[0]
    for fmt in ("JSON array", ".jsonl", ".ndjson", ".parquet", ".csv files are not read"):
        assert fmt in lines[0], (fmt, lines[0])


@pytest.mark.parametrize("args,needle", [
    (["--batch-size", "0"], "batch size"),
    (["--batch-size", "100000"], "batch size"),
    (["--batch-size", "2", "--sequential"], "not both"),
    (["--mode", "fast"], "unknown mode"),
    (["--session-options", '{"max_batch": 0}'], "max_batch"),
    (["--session-options", '{"colour": 1}'], "unknown key"),
    (["--session-options", '{"quantize": 1}'], "quantize"),
    (["--session-options", '[1]'], "JSON object"),
], ids=["zero", "absurd", "both", "mode", "max-batch", "unknown-session-key", "quantize",
        "not-object"])
def test_batch_bad_arguments(ckpt, tmp_path, args, needle):
    reqs = write_requests(tmp_path / "r.json", [{"text": "hi"}])
    proc = run("batch", "--model", str(ckpt), "--requests", str(reqs), "--out-dir",
               str(tmp_path / "out"), *args)
    assert proc.returncode == 2
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], lines


def test_parse_requests_reports_every_problem():
    from vocalis.bench import parse_requests
    from vocalis.errors import InputError

    with pytest.raises(InputError, match=r"^2 requests have problems") as caught:
        parse_requests([{"text": "ok"}, {"text": ""}, {"txt": "x"}])
    assert caught.value.problems == [
        "request 1: 'text' is empty: give some words to speak",
        "request 2: unknown field(s) 'txt'; allowed: text, voice, options"]
    assert str(caught.value).splitlines()[1:] == caught.value.problems
    with pytest.raises(InputError, match=r"^request 1: 'text' is empty") as caught:
        parse_requests([{"text": "ok"}, {"text": ""}])  # one: its own message
    assert not hasattr(caught.value, "problems")
    reqs = parse_requests([{"text": "a", "voice": "alba", "options": {"seed": 3, "temperature": 0.5}}])
    assert (reqs[0].seed, reqs[0].sampling, reqs[0].voice) == (3, {"temperature": 0.5}, "alba")


# --------------------------------------------------------------------------- bench


def test_bench_against_official_json(ckpt, tmp_path):
    """At 2 threads the official package runs as shipped (1 thread) and at matched threads
    (2); ``official`` and the ratios are the faster of the two (whichever it is)."""
    out = tmp_path / "bench.json"
    proc = run("bench", "--model", str(ckpt), "--voice", str(ckpt / "voice.wav"),
               "--text", T1, "--text", T2, "--frames", "6", "--concurrency", "2",
               "--threads", "2", "--temperature", "0.5", "--against", "official",
               "--json", str(out))
    assert proc.returncode == 0, proc.stderr.decode()
    table = proc.stdout.decode()
    assert "vocalis bench" in table and "throughput" in table and "official" in table
    assert "as-shipped" in table and "matched-threads" in table and "other official" in table
    rep = json.loads(out.read_text())
    assert rep["schema"] == "vocalis.bench" and rep["schema_version"] == 2
    assert rep["concurrency"] == 2 and rep["requests"] == 2 and rep["frames"] == 6
    # a family option as a flag: the same request options on both sides
    assert rep["torch_threads"] == 2 and rep["options"] == {"temperature": 0.5, "max_frames": 6}
    assert rep["family"] == "pocket-tts" and rep["load_options"] == {}
    assert rep["mode"] == {"kind": None, "voice": str(ckpt / "voice.wav"),
                           "options": {"temperature": 0.5, "max_frames": 6}}
    # the machine and the speed choices (the suite runs VOCALIS_TUNING=fixed) are named
    cpu = rep["host"]["cpu"]
    assert cpu["model"] and cpu["model"] in Path("/proc/cpuinfo").read_text()
    assert "avx2" not in cpu["isa"] or " avx2" in Path("/proc/cpuinfo").read_text()
    assert rep["tuning"]["sources"] == {"flow_linears": "fixed", "codec_linears": "fixed",
                                        "codec_elu": "fixed", "codec_out_conv": "fixed",
                                        "codec_seanet": "fixed", "gelu": "fixed",
                                        "threads": "fixed",
                                        "codec_pipeline": "fixed", "codec_dtype": "fixed"}
    assert rep["tuning"]["choices"]["threads"] == "1:1"
    flat = " ".join(table.split())
    assert "choices: flow_linears=packed (fixed)" in flat
    assert "ISA: " in flat and all(flag in flat for flag in cpu["isa"])
    v = rep["vocalis"]
    for p in (v["warmup"], v["session"]):
        assert p["requests"] == p["ok"] == 2 and p["failed"] == 0
    s = v["session"]
    for key in ("wall_ms", "audio_s", "x_real_time", "rtf", "request_x_real_time",
                "request_rtf", "peak_rss_mb", "rss_before_mb", "rss_growth_mb"):
        assert s[key] is not None and s[key] >= 0, key
    assert s["ttfa_ms"]["mean"] > 0 and s["x_real_time"] == pytest.approx(
        s["audio_s"] / (s["wall_ms"] / 1000), rel=1e-2)
    assert s["rtf"] == pytest.approx(1 / s["x_real_time"], rel=1e-2)
    assert [r["index"] for r in v["per_request"]] == [0, 1]
    # every text chunk has exactly 6 frames
    assert all(r["frames"] == 6 * r["text_chunks"] for r in v["per_request"])
    runs = rep["official_runs"]
    assert [(x["config"], x["torch_threads"], x["matches_vocalis_threads"]) for x in runs] == [
        ("as-shipped", 1, False), ("matched-threads", 2, True)]
    for x in runs:
        assert x["version"] == "4.0.1" and x["frames"] == 6 and "eos_threshold" in x["frames_method"]
        assert x["load_kwargs"]["temp"] == "0.5" and x["generate_kwargs"] == {}
        assert x["session"]["requests"] == 2 and x["session"]["ttfa_ms"]["mean"] > 0
        assert [r["frames"] for r in x["per_request"]] == [r["frames"] for r in v["per_request"]]
    o = rep["official"]
    assert o in runs and o["session"]["request_x_real_time"] == max(
        x["session"]["request_x_real_time"] for x in runs)
    r = rep["ratios"]
    assert r["frames_equal"] is True and r["concurrency"] == 2
    assert r["x_real_time"] == round(s["request_x_real_time"] / o["session"]["request_x_real_time"], 3)
    assert r["ttfa"] == round(s["ttfa_ms"]["mean"] / o["session"]["ttfa_ms"]["mean"], 3)
    assert r["ttfa"] > 0 and r["throughput"] > 0


def test_bench_official_configs_and_table():
    """One official run at 1 thread (as shipped is then matched), two above; the faster by
    per-request x real time is chosen (ties: the first); the table names both."""
    from rich.console import Console

    from vocalis.bench.benchmark import faster_official, render_table
    from vocalis.models.pocket.official import official_configs
    from vocalis.errors import InputError

    assert official_configs(1) == [
        {"config": "as-shipped", "threads": None, "matches_vocalis_threads": True}]
    assert [(c["config"], c["threads"]) for c in official_configs(4)] == [
        ("as-shipped", None), ("matched-threads", 4)]
    for bad in (0, None, 1.5, True):
        with pytest.raises(InputError, match="torch_threads"):
            official_configs(bad)
    with pytest.raises(ValueError):
        faster_official([])

    def pass_(x, ttfa):
        return {"requests": 2, "audio_s": 1.0, "frames": 12, "wall_ms": 500.0, "ttfa_ms": {
            "mean": ttfa, "p90": ttfa}, "request_x_real_time": x, "request_rtf": 1 / x,
            "x_real_time": x, "ms_per_frame": 40.0, "frames_per_s": 24.0, "peak_rss_mb": 500.0,
            "rss_growth_mb": 1.0}

    shipped = {"config": "as-shipped", "matches_vocalis_threads": False, "torch_threads": 1,
               "session": pass_(2.5, 120.0)}
    matched = {"config": "matched-threads", "matches_vocalis_threads": True, "torch_threads": 2,
               "session": pass_(1.75, 98.5)}
    assert faster_official([matched, shipped]) is shipped
    assert faster_official([shipped, {**matched, "session": pass_(2.5, 1.0)}]) is shipped
    assert faster_official([{**shipped, "session": {"request_x_real_time": None}}, matched]) is matched
    report = {"config": "c", "device": "cpu", "torch_threads": 2, "concurrency": 1, "requests": 2,
              "frames": 6, "vocalis": {"session": pass_(5.0, 50.0)}, "official": shipped,
              "official_runs": [shipped, matched], "ratios": {"x_real_time": 2.0}}
    console = Console(width=120, record=True)
    console.print(render_table(report))
    text = console.export_text()
    assert "official (as-shipped, 1 thread, 1 at a time)" in text
    other = [ln for ln in text.splitlines() if "other official" in ln]
    assert len(other) == 1 and "matched-threads, 2 threads: 1.75 / 98.5" in other[0]
    one = {**shipped, "matches_vocalis_threads": True}
    console.print(render_table({**report, "torch_threads": 1, "official": one, "official_runs": [one]}))
    text = console.export_text()
    assert "as-shipped = matched-threads, 1 thread" in text and "other official" not in text


@pytest.mark.parametrize("texts,needle", [
    ([T1], "at least 2"),
    ([T1, "Too short."], "characters"),
    ([T1, " " + T1], "repeats"),
], ids=["one-text", "short", "same"])
def test_bench_needs_two_distinct_long_texts(ckpt, texts, needle):
    args = [a for t in texts for a in ("--text", t)]
    proc = run("bench", "--model", str(ckpt), "--voice", str(ckpt / "voice.wav"), *args)
    assert proc.returncode == 2
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], lines


@pytest.mark.parametrize("args,needle", [
    (["--speaker", "ryan"], "unknown option --speaker for Pocket TTS model"),
    (["--instruct", "Calm."], "unknown option --instruct for Pocket TTS model"),
    (["--dtype", "bfloat16"], "dtype"),
    (["--temperature", "-1"], "temperature must be a number in [0.0, "),
    (["--max-tokens", "0"], "max_tokens must be an integer in [1, 1000], got 0"),
    (["--frames", "0"], "frames must be an integer from 1"),
    (["--voice", "no_such_voice"], "unknown voice 'no_such_voice'"),
    (["--official-quantize"], "add --against official"),
    (["--session-options", '{"temperature": 0.5}'], "takes only max_batch"),
], ids=["other-family-option", "other-family-instruct", "load-option-value", "bad-value",
        "bad-int", "frames", "voice", "official-quantize-alone", "session-request-option"])
def test_bench_refuses_options_before_loading(ckpt, args, needle, monkeypatch, capsys):
    """A family option the model's family does not take (exit 2 naming the flag) or a bad
    value: refused before any model is loaded (in-process: loading fails the test)."""
    import vocalis.api
    from vocalis.cli import main

    def no_load(*a, **kw):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(vocalis.api, "load", no_load)
    voice = [] if "--voice" in args else ["--voice", str(ckpt / "voice.wav")]
    rc = main(["bench", "--model", str(ckpt), *voice, "--text", T1, "--text", T2, *args])
    err = capsys.readouterr().err
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("error:")]
    assert rc == 2 and len(lines) == 1 and needle in lines[0], err
