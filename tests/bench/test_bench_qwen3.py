"""``vocalis bench --against official`` for Qwen3-TTS on tiny random checkpoints: the report's
structure, and that vocalis and the official ``qwen-tts`` (run in its own interpreter,
``VOCALIS_QWEN_PYTHON``) produced the same number of frames for every text. Not its speed.

The CLI runs as a subprocess (``python -m vocalis.cli``). ``--frames F`` is ``max_frames=F``
on the vocalis side and ``max_new_tokens=F+1`` on the official side; random weights rarely
emit EOS, so both give F frames (F * 1920 samples at 24 kHz).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.qwen3.qwen_official import official_python
from vocalis import families
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

T1 = ("The quick brown fox jumps over the lazy dog, and then it runs far away into the "
      "dark forest.")
T2 = ("She sells sea shells by the sea shore; the shells she sells are surely sea shells, "
      "or so I am told.")
FRAME_SAMPLES = 1920  # 24 kHz / 12.5 Hz


def run(*args: str, env_extra: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.update(env_extra or {})
    env = {k: v for k, v in env.items() if v is not None}
    return subprocess.run([sys.executable, "-m", "vocalis.cli", *args], check=False, capture_output=True,
                          env=env, timeout=timeout)


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("qwen3-bench")
    return {kind: write_random_checkpoint(f"qwen3-tts/{kind}", root / kind, seed=3, tiny=True)
            for kind in ("0.6b-customvoice", "1.7b-voicedesign", "0.6b-base")}


@pytest.fixture(scope="module")
def official_env() -> dict:
    return {"VOCALIS_QWEN_PYTHON": official_python()}


def check_pass(p: dict, n: int, frames: int) -> None:
    assert p["requests"] == p["ok"] == n and p["failed"] == 0
    assert p["frames"] == n * frames
    assert p["audio_s"] == pytest.approx(n * frames * FRAME_SAMPLES / 24000, abs=1e-3)
    for key in ("wall_ms", "x_real_time", "rtf", "request_x_real_time", "request_rtf", "ms_per_frame",
                "frames_per_s", "peak_rss_mb"):
        assert p[key] is not None and p[key] > 0, key
    assert p["x_real_time"] == pytest.approx(p["audio_s"] / (p["wall_ms"] / 1000), rel=1e-2)
    assert p["frames_per_s"] == pytest.approx(p["frames"] / (p["wall_ms"] / 1000), rel=1e-2)
    assert p["ttfa_ms"]["mean"] > 0 and p["ttfa_ms"]["min"] <= p["ttfa_ms"]["max"]


def check_report(rep: dict, model: Path, frames: int, n_req: int, concurrency: int) -> None:
    assert rep["schema"] == "vocalis.bench" and rep["schema_version"] == 2
    assert rep["family"] == "qwen3-tts" and rep["model"] == str(model)
    assert rep["frames"] == frames and rep["requests"] == n_req and rep["concurrency"] == concurrency
    assert rep["torch_threads"] == 1 and rep["options"]["max_frames"] == frames
    assert rep["mode"]["options"]["max_frames"] == frames
    v, o, r = rep["vocalis"], rep["official"], rep["ratios"]
    for p in (v["warmup"], v["session"]):
        check_pass(p, n_req, frames)
    check_pass(o["session"], 2, frames)
    check_pass(o["warmup"], 2, frames)
    assert [x["index"] for x in v["per_request"]] == list(range(n_req))
    for x in v["per_request"]:
        assert x["frames"] == frames and x["ms_per_frame"] == pytest.approx(x["wall_ms"] / frames, rel=1e-3)
    # official: one request per text, one at a time; its codes and its waveform both say F frames
    assert o["version"] == "0.1.1" and o["torch_threads"] == 1 and o["frames"] == frames
    assert o["config"] == "matched-threads" and o["whole_waveform"] is True
    assert rep["official_runs"] == [o]
    assert o["gen"]["max_new_tokens"] == frames + 1
    assert [x["index"] for x in o["per_request"]] == [0, 1]
    for x in o["per_request"]:
        assert x["frames"] == x["wave_frames"] == frames and x["samples"] == frames * FRAME_SAMPLES
        assert x["ttfa_ms"] == x["wall_ms"]  # the official method returns the whole waveform
    # same number of frames per text on both sides, request by request (same seeds)
    assert r["frames_equal"] is True
    assert r["frames"] == [{"text": i, "vocalis": frames, "official": frames} for i in (0, 1)]
    vs, os_ = v["session"], o["session"]
    assert r["concurrency"] == concurrency
    assert r["x_real_time"] == pytest.approx(vs["request_x_real_time"] / os_["request_x_real_time"], rel=1e-2)
    assert r["throughput"] == pytest.approx(vs["x_real_time"] / os_["x_real_time"], rel=1e-2)
    assert r["ttfa"] == pytest.approx(vs["ttfa_ms"]["mean"] / os_["ttfa_ms"]["mean"], rel=1e-2)
    assert r["ms_per_frame"] == pytest.approx(vs["ms_per_frame"] / os_["ms_per_frame"], rel=1e-2)


@pytest.mark.slow
def test_bench_customvoice_against_official(ckpts, official_env, tmp_path):
    model, out = ckpts["0.6b-customvoice"], tmp_path / "bench.json"
    proc = run("bench", "--model", str(model), "--text", T1, "--text", T2, "--frames", "6",
               "--concurrency", "2", "--requests", "3", "--threads", "1", "--against", "official",
               "--streaming-text", "--json", str(out), env_extra=official_env)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    table = proc.stdout.decode()
    assert "vocalis bench" in table and "ms per frame" in table and "official" in table
    rep = json.loads(out.read_text())
    check_report(rep, model, 6, 3, 2)
    speakers = [s.lower() for s in json.loads((model / "config.json").read_text())["talker_config"]["spk_id"]]
    # default speaker: the model's default voice (ModelInfo.default_voice), on both sides
    default = families.describe(str(model)).default_voice
    assert default in speakers
    assert rep["mode"]["kind"] == "custom_voice" and rep["mode"]["voice"] == default
    assert "speaker" not in rep["mode"]["options"]
    assert rep["official"]["method"] == "generate_custom_voice"
    assert rep["official"]["kwargs"] == {"speaker": default}
    # --streaming-text: the official non_streaming_mode=False on both sides
    assert rep["options"]["non_streaming_mode"] is False
    assert rep["mode"]["options"]["non_streaming_mode"] is False
    assert rep["official"]["gen"]["non_streaming_mode"] is False


@pytest.mark.slow
def test_bench_voicedesign_greedy_against_official(ckpts, official_env, tmp_path):
    model, out = ckpts["1.7b-voicedesign"], tmp_path / "bench.json"
    proc = run("bench", "--model", str(model), "--text", T1, "--text", T2, "--frames", "4",
               "--instruct", "A bright, fast voice.", "--language", "english", "--greedy", "--threads", "1",
               "--against", "official", "--json", str(out), "-q", env_extra=official_env)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    rep = json.loads(out.read_text())
    check_report(rep, model, 4, 2, 1)
    assert rep["mode"]["kind"] == "voice_design" and rep["mode"]["voice"] is None
    assert rep["options"] == rep["mode"]["options"] == {
        "instruct": "A bright, fast voice.", "language": "english", "greedy": True, "max_frames": 4}
    o = rep["official"]
    assert o["method"] == "generate_voice_design"
    assert o["kwargs"] == {"instruct": "A bright, fast voice.", "language": "english"}
    assert o["gen"] == {"do_sample": False, "subtalker_dosample": False, "max_new_tokens": 5}


@pytest.mark.slow
def test_bench_base_xvector_against_official(ckpts, official_env, tmp_path):
    """Base: both sides clone from the same reference audio (x-vector only) and give the same
    frame counts."""
    from tests.qwen3.test_qwen3_api import reference_audio

    wav, _ = reference_audio(tmp_path / "ref")
    model, out = ckpts["0.6b-base"], tmp_path / "bench.json"
    proc = run("bench", "--model", str(model), "--text", T1, "--text", T2, "--frames", "4",
               "--voice", str(wav), "--threads", "1", "--against", "official", "--json", str(out), "-q",
               env_extra=official_env)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    rep = json.loads(out.read_text())
    check_report(rep, model, 4, 2, 1)
    assert rep["mode"]["kind"] == "base" and rep["mode"]["voice"] == str(wav.resolve())
    assert rep["mode"]["options"] == {"xvector_only": True, "max_frames": 4}
    assert rep["official"]["method"] == "generate_voice_clone"
    assert "x_vector_only_mode=True" in rep["official"]["prompt"]


@pytest.mark.parametrize("kind,args,unset_official,needle", [
    ("1.7b-voicedesign", ["--speaker", "ryan"], False, "has no built-in speakers"),
    ("1.7b-voicedesign", ["--voice", "ryan"], False, "(VoiceDesign) has no voices"),
    ("0.6b-base", [], False, "(Base) clones a voice: give reference audio"),
    ("0.6b-base", ["--instruct", "Calm."], False, "(Base) takes no instruct"),
    ("0.6b-customvoice", ["--against", "official"], True, "VOCALIS_QWEN_PYTHON"),
    ("0.6b-customvoice", ["--against", "official", "--official-quantize"], False,
     "the official qwen-tts has no int8 path"),
    ("0.6b-customvoice", ["--topk", "3"], False, "No such option"),
    ("0.6b-customvoice", ["--eos-threshold", "0.5"], False,
     "unknown option --eos-threshold for Qwen3-TTS model"),
    ("0.6b-customvoice", ["--top-k", "-3"], False, "top_k must be an integer in [0, 3072]"),
    ("0.6b-customvoice", ["--speaker", "nobody"], False, "unknown speaker 'nobody'"),
    ("0.6b-customvoice", ["--language", "klingon"], False, "unknown language 'klingon'"),
    ("0.6b-customvoice", ["--dtype", "float16"], False, "unknown dtype 'float16'"),
    (None, ["--speaker", "ryan"], False, "unknown option --speaker for Pocket TTS model"),
], ids=["design-speaker", "design-voice", "base-no-voice", "base-instruct", "no-official-python",
        "official-quantize", "unknown-flag", "other-family-option", "bad-value", "bad-speaker",
        "bad-language", "bad-load-option", "pocket-speaker"])
def test_bench_qwen3_bad_arguments(ckpts, kind, args, unset_official, needle, monkeypatch, capsys):
    """Refused before anything loads, with one error line (in-process: loading a model fails
    the test)."""
    import vocalis.api
    from vocalis.cli import main

    def no_load(*a, **kw):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(vocalis.api, "load", no_load)
    if unset_official:
        monkeypatch.delenv("VOCALIS_QWEN_PYTHON", raising=False)
    else:
        monkeypatch.setenv("VOCALIS_QWEN_PYTHON", official_python())
    model = str(ckpts[kind]) if kind else "pocket-tts/english_2m_2026-10"
    rc = main(["bench", "--model", model, "--text", T1, "--text", T2, "--frames", "2", *args])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and needle in lines[0], err


def test_bench_request_completes_each_kind(ckpts, tmp_path):
    """What ``vocalis bench`` runs for each kind (the family's bench_request): the
    CustomVoice speaker as the voice (the default one when none is given), VoiceDesign's
    default description, a Base reference (``voice`` or ``ref_audio``) cloned x-vector only
    unless a transcript is given; a saved prompt and contradictions are left to the check."""
    from vocalis.models.qwen3.official import DEFAULT_INSTRUCT

    cv, vd, base = (families.describe(str(ckpts[k]))
                    for k in ("0.6b-customvoice", "1.7b-voicedesign", "0.6b-base"))
    f = cv.family
    assert f.bench_request(cv, None, {}) == (cv.default_voice, {})
    assert f.bench_request(cv, "RYAN", {"language": "english"}) == ("ryan", {"language": "english"})
    assert f.bench_request(cv, None, {"speaker": "Ryan"}) == ("ryan", {})
    assert f.bench_request(cv, "ryan", {"speaker": "eric"}) == ("ryan", {"speaker": "eric"})
    assert f.bench_request(vd, None, {}) == (None, {"instruct": DEFAULT_INSTRUCT})
    assert f.bench_request(vd, None, {"instruct": "Low."}) == (None, {"instruct": "Low."})
    wav = tmp_path / "ref.wav"
    wav.write_bytes(b"")
    assert f.bench_request(base, str(wav), {}) == (str(wav.resolve()), {"xvector_only": True})
    assert f.bench_request(base, None, {"ref_audio": str(wav), "ref_text": "Hi."}) == (
        str(wav.resolve()), {"ref_text": "Hi."})
    assert f.bench_request(base, "me.safetensors", {}) == ("me.safetensors", {})
    assert f.bench_request(base, "a.wav", {"ref_audio": "b.wav"}) == ("a.wav", {"ref_audio": "b.wav"})
    # Pocket TTS runs a request as given
    pocket = families.describe("pocket-tts")
    assert pocket.family.bench_request(pocket, None, {"temperature": 0.5}) == (None, {"temperature": 0.5})
