"""Load a checkpoint folder with the official ``Qwen3TTSModel.from_pretrained`` and run one
short generation for its model type. argv: CHECKPOINT_DIR MAX_NEW_TOKENS.

Returns the supported speakers/languages the official wrapper reports, the model type and
size it read, and the length of each generated waveform (sample rate 24 kHz)."""

import sys

import _official
from _official import save, timed

with timed("import"):
    import numpy as np
    import torch

    from qwen_tts import Qwen3TTSModel

ckpt, max_new = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
with timed("from_pretrained"):
    tts = Qwen3TTSModel.from_pretrained(ckpt, dtype=torch.float32)
m = tts.model
kind = m.tts_model_type
kw = dict(max_new_tokens=max_new, do_sample=False, subtalker_dosample=False)
wavs = {}
with timed("generate"):
    if kind == "custom_voice":
        w, sr = tts.generate_custom_voice(text="Hello there.", language="English", speaker="Ryan", **kw)
        wavs["custom"] = w[0]
        w, sr = tts.generate_custom_voice(text="你好。", language="Chinese", speaker="eric", **kw)
        wavs["dialect"] = w[0]
    elif kind == "voice_design":
        w, sr = tts.generate_voice_design(text="Hello there.", instruct="A calm low voice.", language="English", **kw)
        wavs["design"] = w[0]
    else:
        t = np.arange(24000 * 2) / 24000
        ref = (0.3 * np.sin(2 * np.pi * 150 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)
        w, sr = tts.generate_voice_clone(text="Hello there.", language="English", ref_audio=(ref, 24000),
                                         x_vector_only_mode=True, **kw)
        wavs["xvector"] = w[0]
        w, sr = tts.generate_voice_clone(text="Hello there.", language="Auto", ref_audio=(ref, 24000),
                                         ref_text="A reference.", **kw)
        wavs["icl"] = w[0]
save({"tts_model_type": kind, "tts_model_size": m.tts_model_size, "sample_rate": sr,
      "speakers": sorted(tts.get_supported_speakers() or []),
      "languages": sorted(tts.get_supported_languages() or []),
      "samples": {k: int(len(v)) for k, v in wavs.items()},
      "finite": all(bool(np.isfinite(v).all()) for v in wavs.values()),
      "small_to_mtp": type(m.talker.code_predictor.small_to_mtp_projection).__name__,
      "has_speaker_encoder": hasattr(m, "speaker_encoder") and m.speaker_encoder is not None})
