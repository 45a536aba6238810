"""Shared by the scripts that run the official ``qwen-tts`` in its own environment (the bench
and reference runners, and the tests' ``tests/qwen3/qwen_official/_official.py``). It imports
nothing from vocalis: those scripts load it by path, under the official interpreter.

``qwen_tts`` imports ``torchaudio.compliance.kaldi`` at module level, for the 25 Hz
tokenizer's x-vector extractor only (``kaldi.fbank``); no 12 Hz checkpoint builds it, and no
torchaudio release matches torch 2.13. :func:`install_torchaudio_stand_in` puts a stand-in
in its place (its ``fbank`` raises) when the real one does not import.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types

NAMES = ("torchaudio", "torchaudio.compliance", "torchaudio.compliance.kaldi")


def install_torchaudio_stand_in() -> bool:
    """Install the stand-in unless torchaudio imports; True when it was installed.
    transformers is imported first, so that its "is torchaudio available?" probe sees the
    real state of the environment."""
    try:
        import torchaudio.compliance.kaldi  # noqa: F401
        return False
    except Exception:  # noqa: BLE001 - missing, or a build for another torch
        pass
    import transformers  # noqa: F401

    def fbank(*_args, **_kwargs):
        raise RuntimeError("torchaudio stand-in: kaldi.fbank is only used by the 25 Hz tokenizer")

    for name in NAMES:
        sys.modules.pop(name, None)
    mods = [types.ModuleType(n) for n in NAMES]
    for m in mods:  # transformers probes find_spec("torchaudio")
        m.__spec__ = importlib.machinery.ModuleSpec(m.__name__, None)
    ta, comp, kaldi = mods
    kaldi.fbank = fbank
    ta.compliance, comp.kaldi = comp, kaldi
    sys.modules.update(dict(zip(NAMES, mods)))
    return True
