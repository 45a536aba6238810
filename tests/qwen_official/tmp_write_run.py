"""TEMPORARY (until the vocalis talker/codec writers are merged): random talker weights and
speech tokenizer from the official classes. argv: OUT_DIR CONFIG_JSON CODEC_CONFIG_JSON SEED WHAT
(WHAT: talker | codec). Writes model.safetensors (+ config.json) with save_pretrained."""

import json
import sys
from pathlib import Path

import _official
from _official import save, timed

import torch

out, cfg_path, codec_path, seed, what = sys.argv[1:6]
out = Path(out)
torch.manual_seed(int(seed))
with timed("construct"):
    if what == "talker":
        from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration

        model = Qwen3TTSForConditionalGeneration(Qwen3TTSConfig(**json.load(open(cfg_path))))
        model = model.to(torch.bfloat16)
    else:
        from qwen_tts.core import Qwen3TTSTokenizerV2Config, Qwen3TTSTokenizerV2Model

        model = Qwen3TTSTokenizerV2Model(Qwen3TTSTokenizerV2Config(**json.load(open(codec_path))))
with timed("save"):
    model.save_pretrained(out, safe_serialization=True)
save({"n_params": sum(p.numel() for p in model.parameters())})
