"""``vocalis batch`` on Qwen3-TTS: request files with Qwen3 options, codes per request, and
whole-batch checks up front.

Tiny random checkpoints (CustomVoice and Base). The codes the batch saves (``NNNN.npy``) are
compared with the codes ``Qwen3TTS.synthesize`` reports for the same request and seed
(``Audio.chunks[*]["codes"]``; those are checked against the official qwen-tts in
tests/qwen3/test_qwen3_api.py); the WAV length with frames x 1920 samples (80 ms at 24 kHz).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave

import numpy as np
import pytest

import vocalis
from vocalis.bench.batch import run_batch
from vocalis.errors import InputError, VoiceError
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

N = 8  # max_new_tokens: random weights rarely emit EOS
FRAME = 1920


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    root = tmp_path_factory.mktemp("qbatch")
    cv = write_random_checkpoint("qwen3-tts/0.6b-customvoice", root / "cv", seed=1, tiny=True)
    base = write_random_checkpoint("qwen3-tts/0.6b-base", root / "base", seed=2, tiny=True)
    return cv, base


@pytest.fixture(scope="module")
def cv_tts(ckpts):
    tts = vocalis.load(str(ckpts[0]), max_batch=4)
    yield tts
    tts.close()


@pytest.fixture(scope="module")
def base_tts(ckpts):
    tts = vocalis.load(str(ckpts[1]), max_batch=4)
    yield tts
    tts.close()


def write(path, data):
    path.write_text(json.dumps(data))
    return path


def wav_len(path) -> int:
    with wave.open(str(path), "rb") as w:
        return w.getnframes()


def api_codes(tts, text, voice=None, seed=None, **opts) -> np.ndarray:
    audio = tts.synthesize(text, voice=voice, seed=seed, **opts)
    return np.asarray([c for ch in audio.chunks for c in ch["codes"]], dtype=np.int64)


@pytest.mark.slow
def test_customvoice_codes_and_wavs(cv_tts, tmp_path):
    spk = cv_tts.speakers[0]
    reqs = write(tmp_path / "r.json", [
        {"text": "Hello there, friend.", "voice": spk,
         "options": {"language": "english", "seed": 3, "max_new_tokens": N}},
        {"text": "Another line to speak.",
         "options": {"speaker": spk, "seed": 5, "max_new_tokens": N, "top_k": 20}},
    ])
    report, rc = run_batch("unused", reqs, tmp_path / "out", batch_size=2, tts=cv_tts)
    assert rc == 0, report["failures"]
    meas = [e for e in report["requests"] if e["pass"] == "measured"]
    assert [e["codes"] for e in meas] == ["0000.npy", "0001.npy"]
    assert meas[0]["options"] == {"language": "english", "max_new_tokens": N}
    assert meas[1]["options"] == {"speaker": spk, "max_new_tokens": N, "top_k": 20}
    for e, (text, voice, seed, opts) in zip(meas, [
            ("Hello there, friend.", spk, 3, {"language": "english"}),
            ("Another line to speak.", None, 5, {"speaker": spk, "top_k": 20})]):
        codes = np.load(tmp_path / "out" / e["codes"])
        assert codes.dtype == np.int64 and codes.ndim == 2 and codes.shape[1] == 16
        assert 1 <= codes.shape[0] <= N and codes.shape[0] == e["frames"]
        assert codes.min() >= 0 and codes.max() < 2048
        assert wav_len(tmp_path / "out" / e["wav"]) == codes.shape[0] * FRAME
        np.testing.assert_array_equal(
            codes, api_codes(cv_tts, text, voice, seed, max_new_tokens=N, **opts))
    assert report["repeat"]["frames_equal"] is True


@pytest.mark.slow
def test_base_relative_ref_audio_and_xvector(base_tts, tmp_path):
    from vocalis.audio.wav import write_wav

    t = np.arange(24000 * 2) / 24000
    write_wav(tmp_path / "me.wav", (0.3 * np.sin(2 * np.pi * 150 * t)).astype(np.float32), 24000)
    reqs = write(tmp_path / "r.json", [
        {"text": "Cloned from an embedding.",
         "options": {"ref_audio": "me.wav", "xvector_only": True, "seed": 1, "max_new_tokens": N}},
        {"text": "Cloned in context.", "voice": "me.wav",
         "options": {"ref_text": "A test tone.", "seed": 2, "max_new_tokens": N}},
    ])
    cwd = os.getcwd()
    os.chdir(tmp_path.parent)  # relative paths resolve against the requests file's folder
    try:
        report, rc = run_batch("unused", reqs, tmp_path / "out", sequential=True, tts=base_tts)
    finally:
        os.chdir(cwd)
    assert rc == 0, report["failures"]
    meas = [e for e in report["requests"] if e["pass"] == "measured"]
    ref = str(tmp_path / "me.wav")
    assert meas[0]["options"]["ref_audio"] == ref and meas[1]["voice"] == ref
    c0 = np.load(tmp_path / "out" / meas[0]["codes"])
    np.testing.assert_array_equal(c0, api_codes(base_tts, "Cloned from an embedding.", seed=1,
                                                ref_audio=ref, xvector_only=True,
                                                max_new_tokens=N))
    c1 = np.load(tmp_path / "out" / meas[1]["codes"])
    np.testing.assert_array_equal(c1, api_codes(base_tts, "Cloned in context.", ref, seed=2,
                                                ref_text="A test tone.", max_new_tokens=N))
    # in-context cloning: the reference's own audio is dropped, only generated frames remain
    assert wav_len(tmp_path / "out" / meas[1]["wav"]) == c1.shape[0] * FRAME


@pytest.mark.parametrize("bad, err, words", [
    ({"text": "x", "voice": "nobody"}, VoiceError, "unknown speaker 'nobody'"),
    ({"text": "x", "options": {"ref_audio": "me.wav"}}, InputError, "takes no reference audio"),
    ({"text": "x", "options": {"speaker": "a", "temperature": -1}}, InputError, "temperature"),
    ({"text": "x", "options": {"speakr": "a"}}, InputError,
     "unknown option speakr for Qwen3-TTS model cv (did you mean speaker?)"),
    ({"text": "x", "options": {"eos_threshold": 0.5}}, InputError, "unknown option eos_threshold"),
    ({"text": "x", "options": {"instruct": "Calm.", "language": "klingon"}}, InputError,
     "unknown language 'klingon'"),
    ({"text": "x", "options": {"ref_audio": 3}}, InputError, "ref_audio must be a file path"),
    ({"text": "x", "options": {"seed": -1}}, InputError, "seed must be an integer"),
])
def test_bad_request_fails_up_front(cv_tts, tmp_path, bad, err, words):
    spk = cv_tts.speakers[0]
    reqs = write(tmp_path / "r.json", [
        {"text": "Fine.", "voice": spk, "options": {"max_new_tokens": N}}, bad])
    with pytest.raises(err) as e:
        run_batch("unused", reqs, tmp_path / "out", tts=cv_tts)
    assert "request 1: " in str(e.value) and words in str(e.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_cli_qwen3_options_checked_before_load(ckpts, tmp_path):
    """The family comes from --model: a Pocket-only option is refused for a Qwen3 model
    (and a Qwen3 option accepted) before the model loads."""
    reqs = write(tmp_path / "r.json", [{"text": "x", "options": {"eos_threshold": 0.1}}])
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-m", "vocalis.cli", "batch", "--model", str(ckpts[0]),
                           "--requests", str(reqs), "--out-dir", str(tmp_path / "out")],
                          capture_output=True, env=env, timeout=120, check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "request 0: unknown option eos_threshold for Qwen3-TTS model cv" in err
    assert "speaker" in err
    assert not (tmp_path / "out").exists()
