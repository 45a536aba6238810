"""Reference harness: export fixtures with the real official pocket-tts package (random
weights in the official layout), replay them through vocalis's Mimi decoder, compare."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

pytest.importorskip("pocket_tts")

from vocalis.errors import HarnessError, InputError, VoiceError  # noqa: E402
from vocalis.models.pocket.random_checkpoint import write_random_checkpoint  # noqa: E402
from vocalis.reference import compare, export_fixture, load_fixture, replay_fixture  # noqa: E402
from vocalis.reference.cli import app  # noqa: E402
from vocalis.reference.replay import decode_groups  # noqa: E402

TEXT = ("Hello world. This is a test of the reference harness. "
        "It has several sentences, so it splits.")
FRAME = 1920


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("ckpt_2m")
    return write_random_checkpoint("english_2m_2026-10", d)


@pytest.fixture(scope="module")
def fixture_dir(ckpt, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fixture")
    return export_fixture(str(ckpt), str(ckpt.parent / "voice.wav"), TEXT, out, seed=0,
                          max_tokens=10)


@pytest.fixture(scope="module")
def official(ckpt):
    from pocket_tts import TTSModel

    return TTSModel.load_model(config=str(ckpt))


def test_fixture_contents(fixture_dir, official, ckpt):
    for name in ("fixture.safetensors", "fixture.json", "reference.wav", "export.log"):
        assert (fixture_dir / name).is_file(), name
    meta = json.loads((fixture_dir / "fixture.json").read_text())
    t = load_file(str(fixture_dir / "fixture.safetensors"))

    assert meta["schema_version"] == 1 and meta["pocket_tts_version"] == "4.0.1"
    assert meta["model"]["official_load"] == {"config": str(ckpt.resolve())}
    assert meta["sample_rate"] == 24000 and meta["seed"] == 0 and meta["text"] == TEXT
    assert meta["sampling"]["max_tokens"] == 10
    assert meta["sampling"]["eos_threshold"] == -1.0  # 2m config default

    # Chunks: the official split + preparation, token ids from the official tokenizer.
    from pocket_tts.models.text_chunking import prepare_text_prompt, split_into_best_sentences

    tok = official.flow_lm.conditioner.tokenizer
    expected = [prepare_text_prompt(c, official.pad_with_spaces_for_short_inputs,
                                    official.remove_semicolons,
                                    official.append_terminal_punctuation,
                                    official.capitalize_first_letter,
                                    official.replace_characters)[0]
                for c in split_into_best_sentences(
                    tok, TEXT, 10, official.pad_with_spaces_for_short_inputs,
                    remove_semicolons=official.remove_semicolons,
                    append_terminal_punctuation=official.append_terminal_punctuation,
                    capitalize_first_letter=official.capitalize_first_letter,
                    replace_characters=official.replace_characters)]
    assert len(expected) >= 2
    assert meta["chunk_texts"] == expected
    for i, text in enumerate(expected):
        ids = t[f"text.{i:04d}.token_ids"]
        assert ids.dtype == torch.int64
        assert ids.tolist() == tok(text).tolist()
        assert meta["chunks"][i]["num_tokens"] == ids.shape[-1]

    # Decoder calls: latents = concatenated call inputs; one reset per chunk, first call.
    calls = meta["decoder"]["calls"]
    total = sum(c["frames"] for c in calls)
    assert t["latents"].shape == (1, total, 32) and t["latents"].dtype == torch.float32
    assert torch.equal(t["latents"], torch.cat(
        [t[f"decoder.{c['index']:04d}.latent"] for c in calls], dim=1))
    assert [c["chunk"] for c in calls if c["reset"]] == list(range(len(expected)))
    for c in calls:
        assert c["samples"] == c["frames"] * FRAME
        assert c["fade_in_samples"] == (120 if c["reset"] else 0)
        assert t[f"decoder.{c['index']:04d}.output"].shape == (1, 1, c["samples"])
    assert sum(ch["frames"] for ch in meta["chunks"]) == total
    assert t["waveform"].shape == (total * FRAME,) and t["waveform"].dtype == torch.float32
    assert meta["waveform_matches_decoder_outputs"] is True
    # Step latents are normalized: denormalized, the decoded ones are the decoder inputs.
    ch0 = t["text.0000.step_latents"]
    n0 = meta["chunks"][0]["frames"]
    den = ch0[:, :n0] * official.flow_lm.emb_std + official.flow_lm.emb_mean
    assert torch.equal(den, t["latents"][:, :n0])

    # Voice state tensors, as the official package builds them.
    voice = official.get_state_for_audio_prompt(ckpt.parent / "voice.wav")
    for module, st in voice.items():
        for key, v in st.items():
            assert torch.equal(t[f"voice.{module}.{key}"], v), (module, key)
    assert "voice.transformer.layers.0.self_attn.cache" in t

    wav, sr = soundfile.read(str(fixture_dir / "reference.wav"), dtype="float32")
    assert sr == 24000 and soundfile.info(str(fixture_dir / "reference.wav")).subtype == "FLOAT"
    assert np.array_equal(wav, t["waveform"].numpy())
    log = (fixture_dir / "export.log").read_text()
    assert "pocket_tts.models.tts_model" in log and "Decoded" in log


@pytest.mark.parametrize("kw", [{}, {"chunk_frames": 1}, {"chunk_frames": 4},
                                {"full_decoder": True}],
                         ids=["official-grouping", "1-frame", "4-frames", "full-decoder"])
def test_replay_matches_official(fixture_dir, kw, tmp_path):
    fx = load_fixture(fixture_dir)
    groups = decode_groups(fx, **kw)
    if kw.get("chunk_frames"):
        assert all(n <= kw["chunk_frames"] for _, n, _, _ in groups)
    if kw.get("full_decoder"):
        assert len(groups) == len(fx.meta["chunks"]) and all(r for _, _, r, _ in groups)
    wav = replay_fixture(fixture_dir, **kw)
    assert wav.dtype == np.float32 and wav.shape == fx.waveform.shape
    report = compare(fixture_dir, wav, tmp_path)
    assert report["pass"], report
    assert report["cosine"] > 0.99999 and report["equal_length"] and report["finite"]
    assert json.loads((tmp_path / "comparison.json").read_text())["pass"] is True


def test_compare_rejects_corrupted(fixture_dir, tmp_path):
    ref = load_fixture(fixture_dir).waveform
    shifted = ref.copy()
    a, b = 10 * FRAME, 14 * FRAME
    shifted[a:b] = ref[a + 240:b + 240]  # a 10 ms time shift inside one segment
    r = compare(fixture_dir, shifted, tmp_path / "shift")
    assert not r["pass"] and r["equal_length"] and r["cosine"] <= 0.99999
    r = compare(fixture_dir, ref[:-FRAME], tmp_path / "short")
    assert not r["pass"] and not r["equal_length"] and r["cosine"] > 0.99999
    nan = ref.copy()
    nan[5] = np.nan
    r = compare(fixture_dir, nan, tmp_path / "nan")
    assert not r["pass"] and not r["finite"]
    r = compare(fixture_dir, ref, None)
    assert r["pass"] and r["bit_exact"]


def test_export_is_seeded_and_grouping_is_recorded(ckpt, fixture_dir, tmp_path):
    """Same seed -> the same latents; frame-by-frame official decoding is recorded as such."""
    d = export_fixture(str(ckpt), str(ckpt.parent / "voice.wav"), TEXT, tmp_path, seed=0,
                       max_tokens=10, decoder_frames_per_call=1)
    a, b = load_fixture(fixture_dir), load_fixture(d)
    assert torch.equal(a.tensors["latents"], b.tensors["latents"])
    assert all(c["frames"] == 1 for c in b.calls)
    assert b.meta["sampling"]["decoder_frames_per_call"] == 1
    assert compare(fixture_dir, b.waveform, None)["pass"]


def test_bad_inputs(ckpt, fixture_dir, tmp_path):
    with pytest.raises(VoiceError):
        export_fixture(str(ckpt), str(tmp_path / "nope.wav"), "Hi.", tmp_path)
    with pytest.raises(InputError):
        export_fixture(str(ckpt), str(ckpt.parent / "voice.wav"), "Hi.", tmp_path, bogus=1)
    with pytest.raises(InputError):
        replay_fixture(fixture_dir, chunk_frames=2, full_decoder=True)
    with pytest.raises(InputError):
        replay_fixture(fixture_dir, chunk_frames=0)
    with pytest.raises(HarnessError):
        load_fixture(tmp_path)


def test_cli(ckpt, fixture_dir, tmp_path):
    runner = CliRunner()
    out_wav = tmp_path / "replay.wav"
    r = runner.invoke(app, ["replay", "--fixture", str(fixture_dir), "--chunk-frames", "1",
                            "-o", str(out_wav)])
    assert r.exit_code == 0, r.output
    assert soundfile.info(str(out_wav)).subtype == "FLOAT"

    r = runner.invoke(app, ["compare", "--fixture", str(fixture_dir), "--candidate",
                            str(out_wav), "--out", str(tmp_path / "cmp")])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("PASS") and len(r.output.strip().splitlines()) == 1
    assert json.loads((tmp_path / "cmp" / "comparison.json").read_text())["pass"]

    bad = tmp_path / "bad.wav"
    wav = load_fixture(fixture_dir).waveform
    soundfile.write(str(bad), wav[:-100], 24000, subtype="FLOAT")
    r = runner.invoke(app, ["compare", "--fixture", str(fixture_dir), "--candidate", str(bad),
                            "--out", str(tmp_path / "cmp_bad")])
    assert r.exit_code == 1 and r.output.startswith("FAIL")

    r = runner.invoke(app, ["compare", "--fixture", str(fixture_dir), "--candidate",
                            str(tmp_path / "missing.wav"), "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "not found" in r.output
    r = runner.invoke(app, ["replay", "--fixture", str(tmp_path / "nofixture"), "-o",
                            str(out_wav)])
    assert r.exit_code == 2
    r = runner.invoke(app, ["replay", "--fixture", str(fixture_dir), "--chunk-frames", "2",
                            "--full-decoder", "-o", str(out_wav)])
    assert r.exit_code == 2
    r = runner.invoke(app, ["export", "--model", str(ckpt), "--voice", "no-such-voice",
                            "--text", "Hi.", "--out", str(tmp_path / "e")])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1

    text_file = tmp_path / "text.txt"
    text_file.write_text("One sentence here. And another one.", encoding="utf-8")
    r = runner.invoke(app, ["export", "--model", str(ckpt.parent), "--voice",
                            str(ckpt.parent / "voice.wav"), "--text-file", str(text_file),
                            "--seed", "3", "--max-tokens", "5", "--temperature", "0.5",
                            "--frames-after-eos", "2", "--out", str(tmp_path / "e2")])
    assert r.exit_code == 0, r.output
    meta = json.loads((tmp_path / "e2" / "fixture.json").read_text())
    assert meta["seed"] == 3 and meta["sampling"]["temperature"] == 0.5
    assert all(ch["frames_after_eos"] == 2 for ch in meta["chunks"])
    assert len(meta["chunks"]) >= 2


def test_english_checkpoint(tmp_path):
    """The full-size Mimi decoder (english config, random weights): 1-frame replay passes."""
    yaml = write_random_checkpoint("english", tmp_path / "ckpt")
    d = export_fixture(str(yaml), str(yaml.parent / "voice.wav"), "Hello there. Second one.",
                       tmp_path / "fx", seed=1, max_tokens=5)
    fx = load_fixture(d)
    assert len(fx.meta["chunks"]) >= 2
    wav = replay_fixture(d, chunk_frames=1)
    report = compare(d, wav, tmp_path)
    assert report["pass"], report


def test_missing_official_package(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "pocket_tts", None)  # as if not installed
    with pytest.raises(HarnessError, match=r"pip install 'vocalis\[reference\]'"):
        export_fixture("pocket-tts", "alba", "Hi.", tmp_path)
