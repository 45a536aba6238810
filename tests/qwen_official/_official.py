"""Prelude imported by every script in this folder; runs inside the official package's venv.

* Makes ``import qwen_tts`` work without a matching torchaudio: ``qwen_tts`` imports
  ``torchaudio.compliance.kaldi`` at module level for the 25 Hz tokenizer only (``kaldi.fbank``
  in its x-vector extractor), which no 12 Hz checkpoint builds. When torchaudio is missing or
  broken, a stand-in whose ``fbank`` raises takes its place.
* ``OUT``: the folder the test reads results from; ``save(result, **arrays)`` writes
  ``result.json`` and one ``<name>.npy`` per array there.
"""

from __future__ import annotations

import json
import os
import sys
import time
import types
from pathlib import Path

T0 = time.perf_counter()
try:
    import torchaudio.compliance.kaldi  # noqa: F401
except Exception:  # no torchaudio for torch 2.13: stand in for the 25 Hz-only import
    def _fbank(*args, **kwargs):
        raise RuntimeError("torchaudio stand-in: kaldi.fbank is used only by the 25 Hz tokenizer")

    import importlib.machinery

    import transformers  # noqa: F401  (decides "torchaudio available?" before the stand-in exists)

    names = ("torchaudio", "torchaudio.compliance", "torchaudio.compliance.kaldi")
    for name in names:
        sys.modules.pop(name, None)
    ta, comp, kaldi = (types.ModuleType(n) for n in names)
    for m in (ta, comp, kaldi):
        m.__spec__ = importlib.machinery.ModuleSpec(m.__name__, None)
    kaldi.fbank = _fbank
    ta.compliance, comp.kaldi = comp, kaldi
    sys.modules.update({"torchaudio": ta, "torchaudio.compliance": comp, "torchaudio.compliance.kaldi": kaldi})

OUT = Path(os.environ.get("VOCALIS_OFFICIAL_OUT", "."))
TIMING: dict[str, float] = {}


class timed:
    """``with timed("from_pretrained"): ...`` records wall seconds into TIMING."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.t = time.perf_counter()

    def __exit__(self, *exc):
        TIMING[self.name] = round(time.perf_counter() - self.t, 3)


def save(result: dict, **arrays) -> None:
    import numpy as np

    OUT.mkdir(parents=True, exist_ok=True)
    for name, a in arrays.items():
        np.save(OUT / f"{name}.npy", np.asarray(a))
    result = {**result, "timing": {**TIMING, "script_total": round(time.perf_counter() - T0, 3)}}
    (OUT / "result.json").write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
