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
import time
from pathlib import Path

T0 = time.perf_counter()


def _install_stand_in() -> None:
    """The torchaudio stand-in of src/vocalis/models/qwen3/official_env.py, run by path (this runs
    under the official interpreter, without vocalis)."""
    import runpy

    path = Path(__file__).resolve().parents[3] / "src" / "vocalis" / "models" / "qwen3" / "official_env.py"
    runpy.run_path(str(path))["install_torchaudio_stand_in"]()


_install_stand_in()

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
