"""Qwen3-TTS configs and the release registry, checked against the official model classes
(qwen-tts==0.1.1, run in its own venv on the meta device) and the released file sizes."""

from __future__ import annotations

import copy
import json
import re

import pytest

from tests.qwen3.qwen_official import run_official
from vocalis.errors import CheckpointError, ModelNotFound
from vocalis.models.qwen3 import registry
from vocalis.models.qwen3.config import CodecConfig, Qwen3TTSConfig, load_codec_config, load_config

IDS = registry.model_ids()
# Tests that take the `official` fixture share one official process (~30-50 s with its imports).
slow = pytest.mark.slow


def _layout(shapes: dict) -> set[str]:
    """Tensor names with layer indices folded: the structure, whatever the depth."""
    return {re.sub(r"\.layers\.\d+\.", ".layers.N.", k) for k in shapes}


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    spec = {"talkers": {f"{m}{'/tiny' if t else ''}": registry.config_dict(m, t) for m in IDS for t in (False, True)},
            "codecs": {"real": registry.codec_config_dict(), "tiny": registry.codec_config_dict(tiny=True)}}
    p = tmp_path_factory.mktemp("cfg") / "spec.json"
    p.write_text(json.dumps(spec))
    return run_official("config_run.py", p, timeout=300)


# Tensor elements of the released checkpoints, from their model.safetensors sizes: 1.83 GB,
# 1.81 GB, 3.83 GB at bf16, and the speech tokenizer's 682 MB at fp32 (codebooks are buffers,
# so this counts the state dict, not parameters) (reference notes, section 0).
RELEASED_PARAMS_M = {"qwen3-tts/0.6b-base": 914.6, "qwen3-tts/0.6b-customvoice": 905.8,
                     "qwen3-tts/1.7b-voicedesign": 1916.7}


@slow
@pytest.mark.parametrize("model_id", list(RELEASED_PARAMS_M))
def test_real_configs_have_the_released_parameter_counts(official, model_id):
    assert official["talkers"][model_id]["n_state"] / 1e6 == pytest.approx(RELEASED_PARAMS_M[model_id], abs=0.05)


@slow
def test_real_codec_config_has_the_released_parameter_count(official):
    assert official["codecs"]["real"]["n_state"] / 1e6 == pytest.approx(170.6, abs=0.05)


@slow
def test_1_7b_customvoice_and_voicedesign_share_one_architecture(official):
    t = official["talkers"]
    assert t["qwen3-tts/1.7b-customvoice"]["shapes"] == t["qwen3-tts/1.7b-voicedesign"]["shapes"]


@slow
@pytest.mark.parametrize("tiny", [False, True])
@pytest.mark.parametrize("model_id", IDS)
def test_languages_and_speakers_match_the_official_model(official, model_id, tiny):
    o = official["talkers"][f"{model_id}{'/tiny' if tiny else ''}"]
    t = registry.config(model_id, tiny).talker_config
    assert sorted(t.languages) == sorted(o["languages"])
    assert t.speakers == o["speakers"]
    kind = registry.release(model_id).tts_model_type
    assert (len(o["speakers"]) == 9) == (kind == "custom_voice")
    assert o["speaker_encoder"] == (kind == "base")


@slow
@pytest.mark.parametrize("model_id", IDS)
def test_tiny_variants_keep_every_structural_feature(official, model_id):
    real, tiny = official["talkers"][model_id], official["talkers"][f"{model_id}/tiny"]
    assert _layout(real["shapes"]) == _layout(tiny["shapes"])  # same tensors, fewer layers, smaller
    assert tiny["small_to_mtp"] == real["small_to_mtp"] == ("Linear" if "1.7b" in model_id else "Identity")
    assert tiny["q_norm"] and real["q_norm"]
    for o in (real, tiny):
        s = o["shapes"]
        hidden = s["talker.model.norm.weight"][0]
        q, k = s["talker.model.layers.0.self_attn.q_proj.weight"][0], s["talker.model.layers.0.self_attn.k_proj.weight"][0]
        assert q == 2 * k  # GQA: 2 query heads per kv head
        assert (q == 2 * hidden) == ("0.6b" in model_id) and (q == hidden) == ("1.7b" in model_id)
        assert s["talker.model.text_embedding.weight"][0] == 151936
        assert s["talker.codec_head.weight"][0] == 3072
        assert s["talker.code_predictor.model.codec_embedding.0.weight"] == [2048, hidden]
        assert sum(k.startswith("talker.code_predictor.lm_head.") for k in s) == 15
    t = registry.config(model_id, True).talker_config
    assert (t.text_hidden_size != t.hidden_size) == ("0.6b" in model_id)


@slow
def test_tiny_codec_keeps_the_codec_structure(official):
    real, tiny = official["codecs"]["real"]["shapes"], official["codecs"]["tiny"]["shapes"]
    assert _layout(real) == _layout(tiny)
    cfg = registry.codec_config(tiny=True)
    d = cfg.decoder_config
    assert d.num_quantizers == 16 and d.codebook_size == 2048 and d.sliding_window == 72
    import math
    assert math.prod(d.upsample_rates + d.upsampling_ratios) == cfg.decode_upsample_rate == 1920


@pytest.mark.parametrize("tiny", [False, True])
@pytest.mark.parametrize("model_id", IDS)
def test_config_round_trips_through_json(tmp_path, model_id, tiny):
    d = registry.config_dict(model_id, tiny)
    (tmp_path / "speech_tokenizer").mkdir()
    (tmp_path / "config.json").write_text(json.dumps(d))
    (tmp_path / "speech_tokenizer" / "config.json").write_text(json.dumps(registry.codec_config_dict(tiny)))
    cfg = load_config(tmp_path)
    assert cfg.to_dict() == json.loads(json.dumps(d))
    assert cfg.talker_config.codec_eos_token_id == 2150 and cfg.tts_pad_token_id == 151671
    assert load_codec_config(tmp_path).to_dict() == json.loads(json.dumps(registry.codec_config_dict(tiny)))


def test_release_lookup_accepts_ids_and_hub_repos_and_pins_commits():
    rel = registry.release("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice")
    assert rel is registry.release("QWEN3-TTS/0.6B-CustomVoice")
    for r in registry.RELEASES.values():
        assert len(r.revision) == 40 and int(r.revision, 16) >= 0
    with pytest.raises(ModelNotFound, match="known: qwen3-tts/0.6b-base"):
        registry.release("qwen3-tts/0.9b")


def test_bad_config_files_are_refused_with_a_clear_message(tmp_path):
    d = registry.config_dict("qwen3-tts/0.6b-customvoice")
    broken = copy.deepcopy(d)
    del broken["talker_config"]["codec_eos_token_id"]
    with pytest.raises(CheckpointError, match="talker_config lacks codec_eos_token_id"):
        Qwen3TTSConfig.from_dict(broken)
    with pytest.raises(CheckpointError, match="not 'qwen3_tts'"):
        Qwen3TTSConfig.from_dict({**d, "model_type": "mistral"})
    with pytest.raises(CheckpointError, match="tokenizer_type"):
        Qwen3TTSConfig.from_dict({**d, "tokenizer_type": "qwen3_tts_tokenizer_25hz"})
    base = registry.config_dict("qwen3-tts/0.6b-base")
    del base["speaker_encoder_config"]
    with pytest.raises(CheckpointError, match="speaker_encoder_config"):
        Qwen3TTSConfig.from_dict(base)
    with pytest.raises(CheckpointError, match="config.json is missing"):
        load_config(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not readable JSON"):
        load_config(tmp_path)
    with pytest.raises(CheckpointError, match="speech_tokenizer/config.json is missing"):
        load_codec_config(tmp_path)
    with pytest.raises(CheckpointError, match="not 'qwen3_tts_tokenizer_12hz'"):
        CodecConfig.from_dict({**registry.codec_config_dict(), "model_type": "mimi"})
