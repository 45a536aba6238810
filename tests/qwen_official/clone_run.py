"""Run the official ``Qwen3TTSModel.create_voice_clone_prompt`` on audio files.

argv: CHECKPOINT_DIR JOBS_JSON, JOBS_JSON a list of ``{"name", "audio" (a path, read by the
official ``librosa.load(sr=None, mono=True)``), "ref_text", "xvector_only"}``. Saves
``xvec_<name>`` (float32 ``[H]``) and, in ICL mode, ``codes_<name>`` (int64 ``[T, 16]``); the
result lists each item's ``x_vector_only_mode``, ``icl_mode`` and ``ref_text``, and the
official model's ``tts_model_size`` / ``tts_model_type``."""

import json
import sys

import _official  # noqa: F401  (torchaudio stand-in, before qwen_tts)
from _official import save, timed

with timed("import"):
    import numpy as np
    import torch
    from qwen_tts import Qwen3TTSModel

with open(sys.argv[2]) as f:
    jobs = json.load(f)
ckpt = sys.argv[1]
torch.set_num_threads(1)
with timed("from_pretrained"):
    tts = Qwen3TTSModel.from_pretrained(ckpt, dtype=torch.float32)
arrays, items = {}, {}
with timed("create_voice_clone_prompt"):
    for job in jobs:
        it = tts.create_voice_clone_prompt(ref_audio=job["audio"], ref_text=job["ref_text"],
                                           x_vector_only_mode=job["xvector_only"])[0]
        arrays[f"xvec_{job['name']}"] = it.ref_spk_embedding.float().cpu().numpy()
        if it.ref_code is not None:
            arrays[f"codes_{job['name']}"] = it.ref_code.cpu().numpy().astype(np.int64)
        items[job["name"]] = {"x_vector_only_mode": it.x_vector_only_mode, "icl_mode": it.icl_mode,
                              "ref_text": it.ref_text, "has_code": it.ref_code is not None}
m = tts.model
save({"items": items, "tts_model_size": m.tts_model_size, "tts_model_type": m.tts_model_type,
      "speaker_encoder_sample_rate": m.speaker_encoder_sample_rate}, **arrays)
