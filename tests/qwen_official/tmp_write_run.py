"""TEMPORARY (until the vocalis talker/codec writers are merged): random talker weights and
speech tokenizers from the official classes (official random init, seeded), saved with
save_pretrained. argv: JOBS_JSON = [[what, out_dir, config_dict, seed], ...], what in
{"talker", "codec"}. The caller writes its own config files afterwards."""

import json
import sys

import _official
from _official import save, timed

import torch

with timed("import"):
    from qwen_tts.core import Qwen3TTSTokenizerV2Config, Qwen3TTSTokenizerV2Model
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration

for what, out, cfg, seed in json.load(open(sys.argv[1])):
    torch.manual_seed(int(seed))
    with timed(f"{what} {out}"):
        if what == "talker":
            model = Qwen3TTSForConditionalGeneration(Qwen3TTSConfig(**cfg)).to(torch.bfloat16)
        else:
            model = Qwen3TTSTokenizerV2Model(Qwen3TTSTokenizerV2Config(**cfg))
        model.save_pretrained(out, safe_serialization=True)
save({})
