"""Qwen3-TTS reference harness: fixtures exported by a real run of the official qwen-tts==0.1.1
(its own venv, VOCALIS_QWEN_PYTHON) on tiny random checkpoints, replayed through vocalis and
compared stage by stage; tampered fixtures and bad input are refused.

The official run is the independent side: the vocalis numbers (prompt, first logits, codes,
decoded waveform) are scored against what it recorded. Random weights rarely emit EOS, so
every export is bounded with max_new_tokens."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from tests.qwen3.qwen_official import official_python
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint
from vocalis.reference import qwen3
from vocalis.reference.cli import app

MAX_NEW = 20  # official: a run that hits the limit keeps MAX_NEW - 1 frames
TEXT = "Hello world, this is a test of the reference harness."


@pytest.fixture(scope="module")
def env():
    mp = pytest.MonkeyPatch()
    mp.setenv(qwen3.ENV_VAR, official_python())
    yield
    mp.undo()


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("qwen3-ref")


@pytest.fixture(scope="module")
def ckpts(root) -> dict[str, Path]:
    return {name: write_random_checkpoint(f"qwen3-tts/0.6b-{name}", root / name, seed=1, tiny=True)
            for name in ("customvoice", "base")}


@pytest.fixture(scope="module")
def ref_wav(root) -> Path:
    t = np.arange(int(24000 * 1.5)) / 24000
    wav = (0.3 * np.sin(2 * np.pi * 150 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)
    path = root / "ref.wav"
    soundfile.write(str(path), wav, 24000)
    return path


@pytest.fixture(scope="module")
def cv_fixture(env, ckpts, root) -> Path:
    """CustomVoice, sampled (seed 7), exported through the CLI."""
    out = root / "fx-cv"
    r = CliRunner().invoke(app, ["export", "--model", str(ckpts["customvoice"]), "--speaker", "Ryan",
                                 "--language", "English", "--text", TEXT, "--seed", "7",
                                 "--max-new-tokens", str(MAX_NEW), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert r.output.startswith(f"wrote {out}: Qwen3-TTS custom_voice")
    return out


@pytest.fixture(scope="module")
def icl_fixture(env, ckpts, ref_wav, root) -> Path:
    """Base, in-context cloning from a reference wav + text, sampled (seed 3)."""
    return qwen3.export_fixture(ckpts["base"], root / "fx-icl", TEXT, ref_audio=ref_wav,
                                ref_text="A short reference sentence.", seed=3, max_new_tokens=MAX_NEW)


def _all_pass(report: dict) -> None:
    assert report["pass"], qwen3.summary(report)
    assert [c["name"] for c in report["checks"]] == ["text_ids", "prompt", "logits", "codes", "waveform",
                                                    "waveform_stream"]
    assert all(c["status"] == "pass" for c in report["checks"]), qwen3.summary(report)


@pytest.mark.slow  # one official run (~15 s on 2 cores)
def test_customvoice_export_replay_compare(cv_fixture, tmp_path):
    meta = json.loads((cv_fixture / "fixture.json").read_text())
    t = load_file(str(cv_fixture / "fixture.safetensors"))
    assert meta["schema"] == "vocalis.reference.qwen3" and meta["mode"] == "custom_voice"
    assert meta["official"]["versions"]["qwen_tts"] == "0.1.1" and meta["seed"] == 7
    assert meta["official"]["generate_kwargs"]["max_new_tokens"] == MAX_NEW
    assert meta["official"]["generate_kwargs"]["do_sample"] is True  # the checkpoint's default
    # what the official run recorded is self-consistent
    assert t["codes"].dtype == torch.int64 and t["codes"].shape[1] == 16
    assert 0 < t["codes"].shape[0] <= MAX_NEW - 1
    assert t["waveform"].shape == (t["codes"].shape[0] * 1920,)
    assert torch.equal(t["waveform"], t["decoder.output"])  # no reference to cut
    assert t["logits.first"].shape == (1, 3072)
    # non-streaming prompt (modeling_qwen3_tts.py:2135-2227): role 3 + codec prefix 6 + text n + eos + bos,
    # with n = ids - 8 (role 3, template tail 5)
    assert t["prompt.prefill"].shape[:2] == (1, t["text.input_ids"].shape[1] + 3)
    wav, sr = soundfile.read(str(cv_fixture / "reference.wav"), dtype="float32")
    assert sr == 24000 and np.array_equal(wav, t["waveform"].numpy())

    runner = CliRunner()
    r = runner.invoke(app, ["replay", "--fixture", str(cv_fixture), "-o", str(tmp_path / "replay")])
    assert r.exit_code == 0, r.output
    for name in ("replay.wav", "replay_stream.wav", "replay.json", "replay.safetensors"):
        assert (tmp_path / "replay" / name).is_file(), name
    r = runner.invoke(app, ["compare", "--fixture", str(cv_fixture), "--candidate", str(tmp_path / "replay"),
                            "--out", str(tmp_path / "cmp")])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("PASS")
    report = json.loads((tmp_path / "cmp" / "report.json").read_text())
    _all_pass(report)
    assert (tmp_path / "cmp" / "summary.txt").read_text().startswith("PASS")
    # a plain WAV candidate: only the waveform is compared
    r = runner.invoke(app, ["compare", "--fixture", str(cv_fixture), "--candidate",
                            str(tmp_path / "replay" / "replay_stream.wav"), "--out", str(tmp_path / "cmp2")])
    assert r.exit_code == 0, r.output
    checks = {c["name"]: c["status"] for c in json.loads((tmp_path / "cmp2" / "report.json").read_text())["checks"]}
    assert checks["waveform"] == "pass" and checks["codes"] == "skipped"


@pytest.mark.slow  # one official run (~15 s on 2 cores)
def test_icl_export_replay_compare(icl_fixture):
    t = load_file(str(icl_fixture / "fixture.safetensors"))
    meta = json.loads((icl_fixture / "fixture.json").read_text())
    assert meta["mode"] == "icl" and meta["official"]["method"] == "voice_clone"
    assert meta["official"]["generate_kwargs"]["non_streaming_mode"] is False  # voice_clone's default
    r, n = t["ref.codes"].shape[0], t["codes"].shape[0]
    assert r == 19 and t["ref.codes"].shape[1] == 16  # ceil(1.5 s * 12.5 Hz)
    assert t["ref.xvector"].shape == (32,)  # tiny 0.6B talker hidden size
    # the official ICL output: decode(cat(ref, codes)) minus int(R / (R + T) * S) samples
    s = t["decoder.output"].shape[0]
    assert s == (r + n) * 1920
    assert torch.equal(t["waveform"], t["decoder.output"][int(r / (r + n) * s):])
    report = qwen3.compare(icl_fixture, None, icl_fixture / "cmp")
    _all_pass(report)


@pytest.mark.slow  # one official run (~15 s on 2 cores)
def test_xvector_greedy_export_replay_compare(env, ckpts, ref_wav, tmp_path):
    d = qwen3.export_fixture(ckpts["base"], tmp_path / "fx", "Short one.", ref_audio=ref_wav, xvector_only=True,
                             language="english", greedy=True, max_new_tokens=8, seed=0)
    meta = json.loads((d / "fixture.json").read_text())
    assert meta["mode"] == "xvector" and meta["official"]["generate_kwargs"]["do_sample"] is False
    t = load_file(str(d / "fixture.safetensors"))
    assert "ref.codes" not in t and t["codes"].shape[0] <= 7
    _all_pass(qwen3.compare(d, None, None))


@pytest.mark.slow  # one official run (~15 s on 2 cores) on a 1.7B-shaped tiny checkpoint
def test_voice_design_export_replay_compare(env, root, tmp_path):
    ckpt = write_random_checkpoint("qwen3-tts/1.7b-voicedesign", root / "voicedesign", seed=2, tiny=True)
    d = qwen3.export_fixture(ckpt, tmp_path / "fx", "Hello there.", instruct="A calm low voice.", seed=5,
                             max_new_tokens=10)
    t = load_file(str(d / "fixture.safetensors"))
    assert json.loads((d / "fixture.json").read_text())["mode"] == "voice_design"
    assert "text.instruct_ids" in t  # the instruct block is part of the official prompt
    _all_pass(qwen3.compare(d, None, None))


@pytest.mark.slow  # reuses the CustomVoice run
def test_tampered_fixture_fails(cv_fixture, tmp_path):
    replay = tmp_path / "replay"
    qwen3.write_replay(qwen3.load_fixture(cv_fixture), qwen3.replay_fixture(cv_fixture), replay)
    good = load_file(str(cv_fixture / "fixture.safetensors"))
    n = good["codes"].shape[0]

    def tampered(name: str, **changes) -> Path:
        d = tmp_path / name
        shutil.copytree(cv_fixture, d)
        save_file({**good, **changes}, str(d / "fixture.safetensors"))
        return d

    codes = good["codes"].clone()
    codes[n - 2, 5] = (codes[n - 2, 5] + 1) % 2048
    r = CliRunner().invoke(app, ["compare", "--fixture", str(tampered("codes", codes=codes)), "--candidate",
                                 str(replay), "--out", str(tmp_path / "cmp-codes")])
    assert r.exit_code == 1, r.output
    assert r.output.startswith("FAIL")
    report = json.loads((tmp_path / "cmp-codes" / "report.json").read_text())
    check = {c["name"]: c for c in report["checks"]}
    assert check["codes"]["status"] == "fail" and check["codes"]["first_differing_frame"] == n - 2
    assert check["prompt"]["status"] == "pass"

    prefill = good["prompt.prefill"].clone()
    prefill[0, 3, 0] += 1e-3
    report = qwen3.compare(tampered("prompt", **{"prompt.prefill": prefill}), replay, None)
    check = {c["name"]: c for c in report["checks"]}
    assert not report["pass"] and check["prompt"]["status"] == "fail" and check["codes"]["status"] == "pass"
    assert check["prompt"]["max_abs_diff"] == pytest.approx(1e-3, rel=1e-3)

    logits = good["logits.first"].clone()
    logits[0, 7] += 1e-3
    report = qwen3.compare(tampered("logits", **{"logits.first": logits}), replay, None)
    assert [c["name"] for c in report["checks"] if c["status"] == "fail"] == ["logits"]

    wave = good["waveform"].clone()
    wave[1920:3840] = wave[2160:4080].clone()  # a 10 ms time shift inside one frame's worth of samples
    report = qwen3.compare(tampered("wave", waveform=wave), replay, None)
    assert [c["name"] for c in report["checks"] if c["status"] == "fail"] == ["waveform", "waveform_stream"]
    report = qwen3.compare(tampered("short", waveform=good["waveform"][:-1920].clone()), replay, None)
    assert any("length differs" in r for r in report["reasons"])


def _one_line_exit_2(args: list[str]) -> str:
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    return r.output


def test_bad_input_exits_2(ckpts, ref_wav, tmp_path, monkeypatch):
    monkeypatch.setenv(qwen3.ENV_VAR, official_python())
    cv, base = str(ckpts["customvoice"]), str(ckpts["base"])
    out = ["--out", str(tmp_path / "fx")]
    assert "unknown speaker 'nobody'" in _one_line_exit_2(["export", "--model", cv, "--speaker", "nobody",
                                                           "--text", "Hi.", *out])
    assert "needs --speaker" in _one_line_exit_2(["export", "--model", cv, "--text", "Hi.", *out])
    assert "unknown language" in _one_line_exit_2(["export", "--model", cv, "--speaker", "ryan", "--language",
                                                   "klingon", "--text", "Hi.", *out])
    assert "--ref-audio" in _one_line_exit_2(["export", "--model", base, "--text", "Hi.", *out])
    assert "--ref-text" in _one_line_exit_2(["export", "--model", base, "--ref-audio", str(ref_wav), "--text", "Hi.",
                                             *out])
    assert "not found" in _one_line_exit_2(["export", "--model", base, "--ref-audio", str(tmp_path / "no.wav"),
                                            "--xvector-only", "--text", "Hi.", *out])
    assert "Pocket TTS option" in _one_line_exit_2(["export", "--model", cv, "--speaker", "ryan", "--voice", "alba",
                                                    "--text", "Hi.", *out])
    assert "max_new_tokens" in _one_line_exit_2(["export", "--model", cv, "--speaker", "ryan", "--text", "Hi.",
                                                 "--max-new-tokens", "0", *out])
    not_qwen = tmp_path / "other"
    not_qwen.mkdir()
    (not_qwen / "config.json").write_text('{"model_type": "llama"}')
    assert "Qwen3-TTS option" in _one_line_exit_2(["export", "--model", str(not_qwen), "--speaker", "ryan",
                                                   "--voice", "alba", "--text", "Hi.", *out])
    monkeypatch.delenv(qwen3.ENV_VAR)
    msg = _one_line_exit_2(["export", "--model", cv, "--speaker", "ryan", "--text", "Hi.", *out])
    assert "VOCALIS_QWEN_PYTHON is not set" in msg and "scripts/qwen_official_venv.sh" in msg
    monkeypatch.setenv(qwen3.ENV_VAR, str(tmp_path / "no-python"))
    assert "not an executable" in _one_line_exit_2(["export", "--model", cv, "--speaker", "ryan", "--text", "Hi.",
                                                    *out])
    bad = tmp_path / "bad-fixture"
    bad.mkdir()
    (bad / "fixture.json").write_text(json.dumps({"schema": "vocalis.reference.qwen3", "schema_version": 1}))
    assert "no fixture.safetensors" in _one_line_exit_2(["replay", "--fixture", str(bad), "-o", str(tmp_path / "r")])
    assert "no fixture.safetensors" in _one_line_exit_2(["compare", "--fixture", str(bad), "--out",
                                                         str(tmp_path / "c")])


@pytest.mark.slow  # one official start (~12 s): the official package's own refusal maps to exit 2
def test_official_refusal_exits_2(ckpts, tmp_path, monkeypatch):
    monkeypatch.setenv(qwen3.ENV_VAR, official_python())
    junk = tmp_path / "junk.wav"
    junk.write_text("not audio")
    msg = _one_line_exit_2(["export", "--model", str(ckpts["base"]), "--ref-audio", str(junk), "--xvector-only",
                            "--text", "Hi.", "--max-new-tokens", "3", "--out", str(tmp_path / "fx")])
    assert msg.startswith("error: the official")
    assert (tmp_path / "fx" / "export.log").is_file()


def test_family_detection(ckpts, tmp_path):
    assert qwen3.is_qwen3_model("qwen3-tts/0.6b-base") and qwen3.is_qwen3_model("Qwen/Qwen3-TTS-12Hz-1.7B-Base")
    assert qwen3.is_qwen3_model(ckpts["base"]) and qwen3.is_qwen3_model(ckpts["base"] / "config.json")
    assert not qwen3.is_qwen3_model("pocket-tts") and not qwen3.is_qwen3_model(tmp_path)
