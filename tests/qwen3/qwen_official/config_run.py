"""Build the official model classes from config dicts on the meta device (no memory, no
weights). argv: CONFIGS_JSON = {"talkers": {name: config.json dict}, "codecs": {name: dict}}.

Per talker: tensor elements in the state dict (what model.safetensors holds), supported languages/speakers, the code predictor's
small_to_mtp_projection type, speaker encoder presence, and the tensor names and shapes.
Per codec: state-dict elements and tensor names and shapes."""

import json
import sys

import _official
from _official import save, timed

import torch

with timed("import"):
    from qwen_tts.core import Qwen3TTSTokenizerV2Config, Qwen3TTSTokenizerV2Model
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration

spec = json.load(open(sys.argv[1]))
talkers, codecs = {}, {}
with timed("build"), torch.device("meta"):
    for name, cfg in spec["talkers"].items():
        m = Qwen3TTSForConditionalGeneration(Qwen3TTSConfig(**cfg))
        attn = m.talker.model.layers[0].self_attn
        talkers[name] = {
            "n_state": sum(v.numel() for v in m.state_dict().values()),
            "languages": list(m.get_supported_languages()),
            "speakers": sorted(m.get_supported_speakers()),
            "small_to_mtp": type(m.talker.code_predictor.small_to_mtp_projection).__name__,
            "speaker_encoder": m.speaker_encoder is not None,
            "q_norm": hasattr(attn, "q_norm") and hasattr(attn, "k_norm"),
            "shapes": {k: list(v.shape) for k, v in m.state_dict().items()},
        }
    for name, cfg in spec["codecs"].items():
        m = Qwen3TTSTokenizerV2Model(Qwen3TTSTokenizerV2Config(**cfg))
        codecs[name] = {"n_state": sum(v.numel() for v in m.state_dict().values()),
                        "shapes": {k: list(v.shape) for k, v in m.state_dict().items()}}
save({"talkers": talkers, "codecs": codecs})
