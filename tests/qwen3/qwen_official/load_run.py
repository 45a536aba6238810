"""Load checkpoint folders with the official ``Qwen3TTSModel.from_pretrained`` and run short
greedy generations for each one's model type. argv: MAX_NEW_TOKENS DIR [DIR ...].

Per folder: the supported speakers/languages the official wrapper reports, the model type and
size it read, and the length of each generated waveform (24 kHz)."""

import sys

import _official
from _official import TIMING, save, timed

with timed("import"):
    import numpy as np
    import torch

    from qwen_tts import Qwen3TTSModel

max_new, dirs = int(sys.argv[1]), sys.argv[2:]
kw = dict(max_new_tokens=max_new, do_sample=False, subtalker_dosample=False)
t = np.arange(24000 * 2) / 24000
REF = (0.3 * np.sin(2 * np.pi * 150 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)
runs = {}
for ckpt in dirs:
    torch.manual_seed(0)
    with timed(f"from_pretrained {ckpt}"):
        tts = Qwen3TTSModel.from_pretrained(ckpt, dtype=torch.float32)
    m = tts.model
    kind = m.tts_model_type
    wavs = {}
    with timed(f"generate {ckpt}"):
        if kind == "custom_voice":
            w, sr = tts.generate_custom_voice(text="Hello there.", language="English", speaker="Ryan", **kw)
            wavs["custom"] = w[0]
            w, sr = tts.generate_custom_voice(text="你好。", language="Chinese", speaker="eric", **kw)
            wavs["dialect"] = w[0]
        elif kind == "voice_design":
            w, sr = tts.generate_voice_design(text="Hello there.", instruct="A calm low voice.", language="English",
                                              **kw)
            wavs["design"] = w[0]
        else:
            w, sr = tts.generate_voice_clone(text="Hello there.", language="English", ref_audio=(REF, 24000),
                                             x_vector_only_mode=True, **kw)
            wavs["xvector"] = w[0]
            w, sr = tts.generate_voice_clone(text="Hello there.", language="Auto", ref_audio=(REF, 24000),
                                             ref_text="A reference.", **kw)
            wavs["icl"] = w[0]
    runs[ckpt] = {"tts_model_type": kind, "tts_model_size": m.tts_model_size, "sample_rate": sr,
                  "speakers": sorted(tts.get_supported_speakers() or []),
                  "languages": sorted(tts.get_supported_languages() or []),
                  "samples": {k: int(len(v)) for k, v in wavs.items()},
                  "finite": all(bool(np.isfinite(v).all()) for v in wavs.values()),
                  "small_to_mtp": type(m.talker.code_predictor.small_to_mtp_projection).__name__,
                  "has_speaker_encoder": m.speaker_encoder is not None,
                  "timing": {k.split(" ")[0]: v for k, v in TIMING.items() if k.endswith(ckpt)}}
save({"runs": runs})
