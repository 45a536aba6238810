"""Qwen3-TTS Base voice-clone prompts (vocalis.models.qwen3.voice) against the official
``Qwen3TTSModel.create_voice_clone_prompt`` of qwen-tts 0.1.1.

Tiny random Base checkpoints are written by vocalis's writer; the official package loads the
0.6B one with ``Qwen3TTSModel.from_pretrained`` and makes prompts from the same audio files, in
one subprocess for the module (``tests/qwen3/qwen_official/clone_run.py``). Writing the two tiny
checkpoints takes ~20 s (the text tokenizer is trained), so every test using them is slow.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import soundfile as sf
import torch

from tests.qwen3.qwen_official import run_official
from vocalis.errors import CheckpointError, InputError, VoiceError
from vocalis.models.qwen3.codec_encoder import load_speech_encoder
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint
from vocalis.models.qwen3.voice import (
    ClonePrompt,
    clone_prompt_from_file,
    create_clone_prompt,
    load_speaker_encoder,
)

try:
    import soxr  # noqa: F401

    HAVE_SOXR = True
except ImportError:
    HAVE_SOXR = False

# Same math in float32 over different op orders agrees to rounding only (see test_qwen3_codec).
TOL = 1e-5
TEXT = "A reference sentence."


def chirp(seconds: float, rate: int, channels: int = 1, seed: int = 0) -> np.ndarray:
    """Non-trivial test signal ``[T, C]``: a 100 Hz -> 3 kHz chirp with harmonics, a syllable
    envelope and noise; a different phase and noise per channel."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    out = []
    for c in range(channels):
        f = 100 + (3000 - 100) * t / seconds
        phase = 2 * np.pi * np.cumsum(f) / rate + c
        x = np.sin(phase) + 0.4 * np.sin(2 * phase) + 0.2 * np.sin(3.5 * phase)
        env = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * t + c)
        out.append(0.3 * env * x + 0.02 * rng.standard_normal(t.shape))
    return np.stack(out, axis=1).astype(np.float32)


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    root = tmp_path_factory.mktemp("qvoice")
    return {"0b6": write_random_checkpoint("qwen3-tts/0.6b-base", root / "b06", seed=3, tiny=True),
            "1b7": write_random_checkpoint("qwen3-tts/1.7b-base", root / "b17", seed=4, tiny=True)}


@pytest.fixture(scope="module")
def audio_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("qvoice_audio")
    files = {"24k": d / "ref24k.wav", "44k": d / "ref44k_stereo.wav"}
    sf.write(str(files["24k"]), chirp(3.3, 24000, 1, seed=1)[:, 0], 24000, subtype="FLOAT")
    sf.write(str(files["44k"]), chirp(2.6, 44100, 2, seed=2), 44100, subtype="FLOAT")
    return files


JOBS = {"x24": ("24k", True), "icl24": ("24k", False), "x44": ("44k", True), "icl44": ("44k", False)}


@pytest.fixture(scope="module")
def official(ckpts, audio_files, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qvoice_official")
    jobs = [{"name": n, "audio": str(audio_files[a]), "ref_text": TEXT, "xvector_only": x}
            for n, (a, x) in JOBS.items()]
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    (tmp / "pt").mkdir()
    out = run_official("clone_run.py", ckpts["0b6"], tmp / "jobs.json", tmp / "pt", timeout=1200)
    out["pt"] = tmp / "pt"
    return out


@pytest.fixture(scope="module")
def encoders(ckpts):
    torch.set_num_threads(1)
    return {size: (load_speaker_encoder(d), load_speech_encoder(d / "speech_tokenizer"))
            for size, d in ckpts.items()}


@pytest.fixture(scope="module")
def ours(encoders, audio_files):
    spk, speech = encoders["0b6"]
    return {n: clone_prompt_from_file(audio_files[a], speaker_encoder=spk, speech_encoder=speech,
                                      ref_text=TEXT, xvector_only=x)
            for n, (a, x) in JOBS.items()}


# ----------------------------------------------------------------------------- parity

@pytest.mark.slow
@pytest.mark.parametrize("name", ["x24", "icl24"])
def test_matches_official_24k(official, ours, name):
    xv = official["arrays"][f"xvec_{name}"]
    assert ours[name].xvector.shape == (32,)
    assert np.abs(ours[name].xvector.numpy() - xv).max() < TOL
    item = official["items"][name]
    assert ours[name].xvector_only == item["x_vector_only_mode"] == (not item["icl_mode"])
    if name.startswith("icl"):
        codes = official["arrays"][f"codes_{name}"]
        assert ours[name].ref_codes.shape == codes.shape == (int(np.ceil(3.3 * 24000 / 1920)), 16)
        assert np.array_equal(ours[name].ref_codes.numpy(), codes)
        assert ours[name].ref_text == item["ref_text"] == TEXT
    else:
        assert ours[name].ref_codes is None and not item["has_code"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["x44", "icl44"])
def test_matches_official_44k_stereo(official, ours, name):
    """Stereo 44.1 kHz file: channels averaged, resampled to 24 kHz (62 401 samples: librosa's
    float ratio rounds the exact 62 400 up). With soxr (what librosa uses) the prompt is the
    official one; with the scipy fallback only close."""
    xv = official["arrays"][f"xvec_{name}"]
    diff = float(np.abs(ours[name].xvector.numpy() - xv).max())
    if HAVE_SOXR:
        assert diff < TOL
    else:
        cos = float(np.dot(ours[name].xvector.numpy(), xv) /
                    (np.linalg.norm(xv) * np.linalg.norm(ours[name].xvector.numpy())))
        # measured: max abs 0.087 on values up to 5.8, cosine 0.99988 (resample_poly's and
        # soxr's anti-aliasing filters differ near 12 kHz, where the noise has energy)
        assert cos > 0.999, (diff, cos)
    if name.startswith("icl"):
        codes = official["arrays"][f"codes_{name}"]
        assert ours[name].ref_codes.shape == codes.shape == (int(np.ceil(2.6 * 24000 / 1920)), 16)
        same = float((ours[name].ref_codes.numpy() == codes).mean())
        if HAVE_SOXR:
            assert same == 1.0
        else:
            # measured: 97.7% (one frame's codebooks 4-15 differ; codebook 0 identical)
            assert same > 0.9, same


@pytest.mark.slow
def test_official_model_identity(official, encoders):
    assert official["tts_model_size"] == encoders["0b6"][0].model_size == "0b6"
    assert official["tts_model_type"] == "base"


@pytest.mark.slow
def test_from_official_item(official, ours):
    a = official["arrays"]
    item = {"ref_code": torch.from_numpy(a["codes_icl24"]), "ref_spk_embedding": torch.from_numpy(a["xvec_icl24"]),
            "x_vector_only_mode": False, "icl_mode": True, "ref_text": TEXT}
    p = ClonePrompt.from_official_item(item, model_size="0b6")
    assert p.hidden_size == 32 and not p.xvector_only and p.ref_text == TEXT
    assert torch.equal(p.ref_codes, ours["icl24"].ref_codes)
    p.check_fits(32, "0b6")
    obj = type("Item", (), {"ref_code": None, "ref_spk_embedding": torch.from_numpy(a["xvec_x24"]),
                            "x_vector_only_mode": True, "icl_mode": False, "ref_text": None})()
    q = ClonePrompt.from_official_item(obj, model_size="0b6")
    assert q.xvector_only and q.ref_codes is None
    assert ClonePrompt.from_official_item(ours["icl24"].to_official_dict(), model_size="0b6").ref_text == TEXT


@pytest.mark.slow
def test_from_official_file(official, ours, tmp_path):
    """Prompts the official package torch.save-d, read back without importing qwen_tts."""
    pt = official["pt"]
    p = ClonePrompt.from_official_file(pt / "icl24_dict.pt", model_size="0b6")
    assert torch.equal(p.ref_codes, ours["icl24"].ref_codes) and p.ref_text == TEXT and p.icl
    assert np.abs(p.xvector.numpy() - ours["icl24"].xvector.numpy()).max() < TOL
    x = ClonePrompt.from_official_file(pt / "batch.pt", model_size="0b6", index=0)  # JOBS order: x24 first
    assert x.xvector_only and x.ref_codes is None
    assert np.abs(x.xvector.numpy() - ours["x24"].xvector.numpy()).max() < TOL
    with pytest.raises(VoiceError, match=r"save `dataclasses.asdict\(item\)` instead"):
        ClonePrompt.from_official_file(pt / "icl24_item.pt", model_size="0b6")
    with pytest.raises(VoiceError, match="holds 4 prompt item"):
        ClonePrompt.from_official_file(pt / "batch.pt", model_size="0b6", index=9)
    with pytest.raises(VoiceError, match="needs its reference text"):  # the batch form drops ref_text
        ClonePrompt.from_official_file(pt / "batch.pt", model_size="0b6", index=1)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a torch file")
    with pytest.raises(VoiceError, match="not a readable torch.save file"):
        ClonePrompt.from_official_file(junk, model_size="0b6")


# ----------------------------------------------------------------------------- files

@pytest.mark.slow
def test_save_load_round_trip(ours, tmp_path):
    for name in ("x24", "icl24"):
        p = ours[name].save(tmp_path / f"{name}.safetensors")
        back = ClonePrompt.load(p)
        assert torch.equal(back.xvector, ours[name].xvector)
        assert back.xvector.dtype == torch.float32
        if ours[name].ref_codes is None:
            assert back.ref_codes is None
        else:
            assert torch.equal(back.ref_codes, ours[name].ref_codes) and back.ref_codes.dtype == torch.long
        for f in ("ref_text", "xvector_only", "hidden_size", "model_size", "encoder_fingerprint"):
            assert getattr(back, f) == getattr(ours[name], f)
    assert back.encoder_fingerprint and len(back.encoder_fingerprint) == 16


def test_load_bad_files(tmp_path):
    from safetensors.torch import save_file

    with pytest.raises(VoiceError, match="not found"):
        ClonePrompt.load(tmp_path / "nope.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x13\x00\x00\x00\x00\x00\x00\x00{not json at all}" + bytes(range(50)))
    with pytest.raises(VoiceError, match="not a readable clone prompt"):
        ClonePrompt.load(junk)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"xvector": torch.zeros(32)}, str(foreign), metadata={"format": "pt"})
    with pytest.raises(VoiceError, match="not a Qwen3-TTS voice-clone prompt"):
        ClonePrompt.load(foreign)


@pytest.mark.slow
def test_check_fits(encoders, audio_files):
    spk17, _ = encoders["1b7"]
    p17 = clone_prompt_from_file(audio_files["24k"], speaker_encoder=spk17, xvector_only=True)
    assert p17.hidden_size == 64 and p17.model_size == "1b7" and p17.xvector.shape == (64,)
    spk06, _ = encoders["0b6"]
    with pytest.raises(VoiceError, match=r"made with a 1\.7B Base model \(hidden size 64\), not this 0\.6B one "
                                         r"\(hidden size 32\); recreate it"):
        p17.check_fits(spk06.hidden_size, spk06.model_size, "base")
    with pytest.raises(VoiceError, match="only Base models clone voices"):
        p17.check_fits(64, "1b7", "custom_voice")
    p17.check_fits(64, "1b7", "base", spk17.fingerprint)


@pytest.mark.slow
def test_load_speaker_encoder_errors(ckpts, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    cv = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "cv", seed=0, tiny=True)
    with pytest.raises(InputError, match="only Base checkpoints clone voices"):
        load_speaker_encoder(cv)
    bad = tmp_path / "bad"
    shutil.copytree(ckpts["0b6"], bad, ignore=shutil.ignore_patterns("speech_tokenizer"))
    t = load_file(str(bad / "model.safetensors"))
    t.pop("speaker_encoder.fc.weight")
    save_file(t, str(bad / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"missing \['fc.weight'\]"):
        load_speaker_encoder(bad)


# ----------------------------------------------------------------------------- bad input

@pytest.mark.slow
def test_bad_reference_audio(encoders, tmp_path, caplog):
    spk, speech = encoders["0b6"]
    kw = {"speaker_encoder": spk, "speech_encoder": speech, "ref_text": TEXT}
    rng = np.random.default_rng(0)
    with pytest.raises(VoiceError, match=r"silent \(digital silence, below -60 dBFS\)"):
        create_clone_prompt(np.zeros(48000, np.float32), 24000, **kw)
    with pytest.raises(VoiceError, match=r"silent \(peak -66 dBFS"):
        create_clone_prompt(np.full(48000, 5e-4, np.float32), 24000, **kw)
    corrupt = tmp_path / "corrupt.wav"
    corrupt.write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt " + rng.bytes(200))
    with pytest.raises(VoiceError, match="corrupt.wav"):
        clone_prompt_from_file(corrupt, **kw)
    with pytest.raises(VoiceError, match=r"too short \(0\.10 s, at least 1 s needed\); 3-20 s"):
        create_clone_prompt(chirp(0.1, 24000)[:, 0], 24000, **kw)
    ten_min = (0.1 * rng.standard_normal(600 * 1000)).astype(np.float32)  # 10 min at 1 kHz
    with pytest.raises(VoiceError, match=r"too long \(600\.0 s, at most 60 s\); trim it"):
        create_clone_prompt(ten_min, 1000, **kw)
    nan = chirp(2.0, 24000)[:, 0]
    nan[100] = np.nan
    with pytest.raises(VoiceError, match="1 NaN or infinite"):
        create_clone_prompt(nan, 24000, **kw)
    nan_file = tmp_path / "nan.wav"
    sf.write(str(nan_file), nan, 24000, subtype="FLOAT")
    with pytest.raises(VoiceError, match="NaN or infinite"):
        clone_prompt_from_file(nan_file, **kw)
    with pytest.raises(VoiceError, match="not found"):
        clone_prompt_from_file(tmp_path / "missing.wav", **kw)
    with caplog.at_level(logging.WARNING, logger="vocalis.models.qwen3.voice"):
        p = create_clone_prompt(chirp(1.5, 24000)[:, 0], 24000, **kw)
    assert p.ref_codes.shape == (19, 16)
    assert "is short (1.5 s)" in caplog.text and "3-20 s" in caplog.text


@pytest.mark.slow
def test_ref_text_rules(encoders):
    spk, speech = encoders["0b6"]
    wav = chirp(1.2, 24000)[:, 0]
    with pytest.raises(InputError, match="--ref-text.*--xvector-only"):
        create_clone_prompt(wav, 24000, speaker_encoder=spk, speech_encoder=speech)
    with pytest.raises(InputError, match="--ref-text is empty"):
        create_clone_prompt(wav, 24000, speaker_encoder=spk, speech_encoder=speech, ref_text="  \n")
    p = create_clone_prompt(wav, 24000, speaker_encoder=spk, ref_text="ignored", xvector_only=True)
    assert p.xvector_only and p.ref_codes is None and p.ref_text is None
    with pytest.raises(InputError, match=r"looks like \[channels, samples\]") as e:
        create_clone_prompt(chirp(1.2, 24000, 2).T, 24000, speaker_encoder=spk, xvector_only=True)
    assert e.value.param == "voice"  # the reference (old code: None, no field named)


@pytest.mark.slow
def test_stereo_array_equals_file(encoders, ours):
    """[samples, channels] arrays are mixed as the file reader mixes them."""
    spk, speech = encoders["0b6"]
    p = create_clone_prompt(chirp(2.6, 44100, 2, seed=2), 44100, speaker_encoder=spk, speech_encoder=speech,
                            ref_text=TEXT)
    assert torch.equal(p.xvector, ours["icl44"].xvector) and torch.equal(p.ref_codes, ours["icl44"].ref_codes)
