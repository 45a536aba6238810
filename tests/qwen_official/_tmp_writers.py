"""TEMPORARY stand-ins for ``vocalis.models.qwen3.random_talker.write_random_talker`` and
``random_codec.write_random_speech_tokenizer`` (engineers QC and QB), used by the random
checkpoint tests until those land: the official classes, randomly initialised, saved with
``save_pretrained`` in the official venv. Config files are vocalis's own.

``DeferredWriters`` collects the weight files to make and writes them all in one official
subprocess on ``flush()`` (one interpreter start instead of two per checkpoint)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from tests.qwen_official import run_official
from vocalis.models.qwen3 import registry

CODEC_PREPROCESSOR = {"feature_extractor_type": "EncodecFeatureExtractor", "feature_size": 1,
                      "sampling_rate": 24000, "padding_side": "right", "padding_value": 0.0,
                      "return_attention_mask": True, "chunk_length_s": None, "overlap": None}


class DeferredWriters:
    def __init__(self):
        self.jobs: list[list] = []

    def talker(self, out_dir: Path, config, seed: int) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.jobs.append(["talker", str(out_dir), config.to_dict(), seed])

    def codec(self, out_dir: Path, config, seed: int) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.jobs.append(["codec", str(out_dir), config.to_dict(), seed])

    def writers(self) -> dict:
        return {"talker_writer": self.talker, "codec_writer": self.codec}

    def flush(self) -> dict:
        """Write every collected weight file, then the config files; returns the official timing."""
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "jobs.json"
            p.write_text(json.dumps(self.jobs))
            result = run_official("tmp_write_run.py", p, timeout=1200)
        for what, out, cfg, _ in self.jobs:
            out = Path(out)
            (out / "config.json").write_text(json.dumps(cfg, indent=2))
            if what == "talker":
                (out / "generation_config.json").write_text(json.dumps(registry.GENERATION_CONFIG, indent=2))
            else:
                (out / "preprocessor_config.json").write_text(json.dumps(CODEC_PREPROCESSOR, indent=2))
        self.jobs = []
        return result["timing"]
