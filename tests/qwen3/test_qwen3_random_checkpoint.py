"""Random-weight Qwen3-TTS checkpoints, written by vocalis's own writers (talker:
random_talker, speech tokenizer and speaker encoder: random_codec, tokenizer files and configs:
random_checkpoint), load in the official package and generate."""

from __future__ import annotations

import pytest

from tests.qwen3.qwen_official import run_official
from vocalis.models.qwen3 import random_checkpoint, registry

IDS = registry.model_ids()
LAYOUT = {"config.json", "generation_config.json", "model.safetensors", "vocab.json", "merges.txt",
          "tokenizer_config.json", "preprocessor_config.json", "speech_tokenizer/config.json",
          "speech_tokenizer/model.safetensors", "speech_tokenizer/preprocessor_config.json"}


def _files(d) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """All five tiny checkpoints, written once, loaded and run in one official process."""
    root = tmp_path_factory.mktemp("qwen3-tiny")
    dirs = {m: random_checkpoint.write_random_checkpoint(m, root / m.split("/")[1], seed=0, tiny=True)
            for m in IDS}
    out = run_official("load_run.py", 4, *dirs.values(), timeout=1200)
    print(f"\nofficial: load_run import {out['timing']['import']} s, subprocess {out['wall_s']} s")
    return {m: (d, out["runs"][str(d)]) for m, d in dirs.items()}


def _check_official_run(out: dict, model_id: str, tiny: bool) -> None:
    rel = registry.release(model_id)
    t = registry.config(model_id, tiny).talker_config
    assert out["tts_model_type"] == rel.tts_model_type and out["tts_model_size"] == rel.size
    assert out["languages"] == sorted(t.languages) and out["speakers"] == t.speakers
    assert out["small_to_mtp"] == ("Linear" if rel.size == "1b7" else "Identity")
    assert out["has_speaker_encoder"] == (rel.tts_model_type == "base")
    assert out["sample_rate"] == 24000 and out["finite"]
    for mode, n in out["samples"].items():
        assert n > 0, mode
        if mode != "icl":  # icl output is trimmed by the reference's share
            assert n % 1920 == 0 and n <= 3 * 1920, (mode, n)  # max_new_tokens 4: at most 3 frames
    print(f"\n{model_id}{' tiny' if tiny else ''}: official {out['timing']}")


@pytest.mark.slow
@pytest.mark.parametrize("model_id", IDS)
def test_tiny_checkpoint_loads_and_generates_in_the_official_package(tiny_runs, model_id):
    d, out = tiny_runs[model_id]
    assert _files(d) >= LAYOUT
    _check_official_run(out, model_id, tiny=True)


def test_cli_models_random_writes_a_checkpoint(tmp_path, capsys):
    from vocalis import cli

    out = tmp_path / "cv"
    assert cli.main(["models", "random", "--config", "qwen3-tts/0.6b-customvoice", "--out", str(out),
                     "--tiny", "--seed", "3"]) == 0
    where, command = capsys.readouterr().out.strip().splitlines()
    assert where == str(out) and command.startswith(f"vocalis generate --model {out} --speaker ")
    assert _files(out) >= LAYOUT
    assert registry.config("qwen3-tts/0.6b-customvoice", tiny=True).to_dict() == \
        __import__("vocalis.models.qwen3.config", fromlist=["load_config"]).load_config(out).to_dict()


def test_cli_models_random_refuses_unknown_ids_and_tiny_pocket(tmp_path, capsys):
    from vocalis import cli

    for args, msg in ((["--config", "qwen3-tts/0.9b-base"], "unknown config 'qwen3-tts/0.9b-base' (did you mean qwen3-tts/0.6b-base?)"),
                      (["--config", "english", "--tiny"], "unknown option --tiny for Pocket TTS")):
        assert cli.main(["models", "random", *args, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and msg in err[0]
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_real_shape_0_6b_customvoice_loads_and_generates_in_the_official_package(tmp_path):
    d = random_checkpoint.write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "ckpt", seed=0)
    out = run_official("load_run.py", 3, d, timeout=1200)
    print(f"\nreal 0.6B: subprocess {out['wall_s']} s")
    _check_official_run(out["runs"][str(d)], "qwen3-tts/0.6b-customvoice", tiny=False)
