"""Run the official ``Qwen3TTSModel.create_voice_clone_prompt`` on audio files.

argv: CHECKPOINT_DIR JOBS_JSON [PT_DIR], JOBS_JSON a list of ``{"name", "audio" (a path, read by the
official ``librosa.load(sr=None, mono=True)``), "ref_text", "xvector_only"}``. Saves
``xvec_<name>`` (float32 ``[H]``) and, in ICL mode, ``codes_<name>`` (int64 ``[T, 16]``); the
result lists each item's ``x_vector_only_mode``, ``icl_mode`` and ``ref_text``, and the
official model's ``tts_model_size`` / ``tts_model_type``. With PT_DIR, each item is also
``torch.save``-d there as ``<name>_item.pt`` (the dataclass), ``<name>_dict.pt``
(``dataclasses.asdict``), and all items batched as ``batch.pt``
(``_prompt_items_to_voice_clone_prompt``)."""

import dataclasses
import json
import sys
from pathlib import Path

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
pt_dir = Path(sys.argv[3]) if len(sys.argv) > 3 else None
arrays, items, made = {}, {}, []
with timed("create_voice_clone_prompt"):
    for job in jobs:
        it = tts.create_voice_clone_prompt(ref_audio=job["audio"], ref_text=job["ref_text"],
                                           x_vector_only_mode=job["xvector_only"])[0]
        made.append(it)
        if pt_dir is not None:
            torch.save(it, pt_dir / f"{job['name']}_item.pt")
            torch.save(dataclasses.asdict(it), pt_dir / f"{job['name']}_dict.pt")
        arrays[f"xvec_{job['name']}"] = it.ref_spk_embedding.float().cpu().numpy()
        if it.ref_code is not None:
            arrays[f"codes_{job['name']}"] = it.ref_code.cpu().numpy().astype(np.int64)
        items[job["name"]] = {"x_vector_only_mode": it.x_vector_only_mode, "icl_mode": it.icl_mode,
                              "ref_text": it.ref_text, "has_code": it.ref_code is not None}
if pt_dir is not None:
    torch.save(tts._prompt_items_to_voice_clone_prompt(made), pt_dir / "batch.pt")
m = tts.model
save({"items": items, "tts_model_size": m.tts_model_size, "tts_model_type": m.tts_model_type,
      "speaker_encoder_sample_rate": m.speaker_encoder_sample_rate}, **arrays)
