"""TEMPORARY stand-ins for ``vocalis.models.qwen3.random_talker.write_random_talker`` and
``random_codec.write_random_speech_tokenizer`` (engineers QC and QB), used by the random
checkpoint tests until those land: the official classes, randomly initialised, saved with
``save_pretrained`` in the official venv. Config files are vocalis's own (written after)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from tests.qwen_official import run_official
from vocalis.models.qwen3 import registry


def _run(out: Path, what: str, cfg: dict, seed: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "cfg.json"
        p.write_text(json.dumps(cfg))
        run_official("tmp_write_run.py", out, p, p, seed, what, timeout=900)


def write_random_talker(out_dir: Path, config, seed: int) -> None:
    cfg = config.to_dict()
    _run(out_dir, "talker", cfg, seed)
    (out_dir / "config.json").write_text(json.dumps(cfg, indent=2))
    (out_dir / "generation_config.json").write_text(json.dumps(registry.GENERATION_CONFIG, indent=2))


def write_random_speech_tokenizer(out_dir: Path, config, seed: int) -> None:
    cfg = config.to_dict()
    _run(out_dir, "codec", cfg, seed)
    (out_dir / "config.json").write_text(json.dumps(cfg, indent=2))
    (out_dir / "preprocessor_config.json").write_text(json.dumps({
        "feature_extractor_type": "EncodecFeatureExtractor", "feature_size": 1, "sampling_rate": 24000,
        "padding_side": "right", "padding_value": 0.0, "return_attention_mask": True,
        "chunk_length_s": None, "overlap": None}, indent=2))
