"""Official side of tests/qwen3/test_qwen3_api.py: the official ``Qwen3TTSModel`` methods on
checkpoint folders, for comparison with vocalis's engine. argv: CASES.json.

CASES.json: a list of ``{"dir", "method": custom_voice | voice_design | voice_clone, "kwargs",
"seed", "ref_wav": path of a float32 .npy at 24 kHz (voice_clone)}``. Per case i the script
saves ``wav_i`` (the returned waveform) and ``codes_i`` ``[T, 16]`` (the talker codes
returned by ``model.generate``, before any ICL reference is prepended); ``torch.manual_seed``
is called with the case's seed right before the method."""

import json
import sys

import _official  # noqa: F401  (torchaudio stand-in)
from _official import save, timed

with timed("import"):
    import numpy as np
    import torch

    from qwen_tts import Qwen3TTSModel

torch.set_num_threads(1)
cases = json.loads(open(sys.argv[1]).read())
models: dict = {}
arrays, meta = {}, []
for i, case in enumerate(cases):
    d = case["dir"]
    if d not in models:
        with timed(f"from_pretrained {d}"):
            models[d] = Qwen3TTSModel.from_pretrained(d, dtype=torch.float32)
    tts = models[d]
    captured = []
    generate = tts.model.generate

    def capture(*a, _generate=generate, **k):
        codes, hidden = _generate(*a, **k)
        captured.extend(c.detach().cpu().numpy() for c in codes)
        return codes, hidden

    tts.model.generate = capture
    kw = dict(case["kwargs"])
    if case.get("ref_wav"):
        kw["ref_audio"] = (np.load(case["ref_wav"]), 24000)
    torch.manual_seed(case["seed"])
    with timed(f"case {i}"):
        wavs, sr = getattr(tts, f"generate_{case['method']}")(**kw)
    tts.model.generate = generate
    arrays[f"wav_{i}"] = wavs[0]
    arrays[f"codes_{i}"] = captured[0]
    meta.append({"sample_rate": sr, "frames": int(captured[0].shape[0])})
save({"cases": meta}, **arrays)
