"""Shared fixtures: random-weight checkpoints in the official layout, voice audio files.

Checkpoints are written by vocalis's own tool (``write_random_checkpoint``) under a
session temp dir and loaded by both vocalis and the official pocket-tts package.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Speed choices are measured per machine at the first load (vocalis.engine.tuning); the suite
# uses the built-in ones so that nothing depends on timing (tests/families/test_tuning.py covers the
# measurement, the cache and forced choices).
os.environ.setdefault("VOCALIS_TUNING", "fixed")


class Checkpoints:
    def __init__(self, root: Path):
        self.root = root

    def get(self, name: str) -> Path:
        """Directory of a random checkpoint for released config ``name`` (written once)."""
        from vocalis.models.pocket.random_checkpoint import write_random_checkpoint

        d = self.root / name
        if not (d / "config.yaml").exists():
            write_random_checkpoint(name, d, seed=0)
        return d

    def drop(self, name: str) -> None:
        shutil.rmtree(self.root / name, ignore_errors=True)


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> Checkpoints:
    return Checkpoints(tmp_path_factory.mktemp("checkpoints"))


def kernels_unbuildable() -> str | None:
    """Why this machine cannot build vocalis's C++ kernels (its CPU, no C++ compiler), or
    None."""
    from vocalis.kernels import native

    for name in native.KERNELS:
        why = native.unsupported(name)
        if why is not None:
            return why
    return None if native.compiler() is not None else "no C++ compiler to build vocalis's kernels"


@pytest.fixture(scope="session")
def built_kernels():
    """vocalis's C++ kernels, built on purpose through ``vocalis.kernels.build()`` (a no-op
    where ``vocalis kernels build`` ran before, as ``.ci/run`` does; the cache the
    environment names) and loaded into this process; tests never rely on a build at load.
    Skips where this machine cannot build them."""
    from vocalis import kernels
    from vocalis.kernels import native

    why = kernels_unbuildable()
    if why is not None:
        pytest.skip(why)
    kernels.build()
    for name in native.KERNELS:
        assert kernels.load(name), native.missing(name)
    return kernels.status()


def synthetic_voice(seconds: float, rate: int, channels: int = 1, seed: int = 1) -> np.ndarray:
    """Voice-like test signal ``[T, C]`` float32: harmonics with a pitch glide and syllable
    envelope, a different phase per channel, silence at the end."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    out = []
    for c in range(channels):
        f0 = 120 + 25 * np.sin(2 * np.pi * 0.9 * t + c)
        phase = 2 * np.pi * np.cumsum(f0) / rate
        x = sum(np.sin(k * phase + c) / k for k in range(1, 10))
        env = 0.5 * (1 - np.cos(2 * np.pi * 3 * t)) * (t < seconds - 0.25)
        out.append(0.25 * env * x + 0.003 * rng.standard_normal(t.shape))
    return np.stack(out, axis=1).astype(np.float32)


@pytest.fixture(scope="session")
def voice_files(tmp_path_factory) -> dict[str, Path]:
    """Voice prompts in several formats, rates and channel counts."""
    import soundfile as sf

    d = tmp_path_factory.mktemp("voices")
    specs = {
        "24k_mono_pcm16.wav": (24000, 1, "WAV", "PCM_16"),
        "44k_stereo_pcm16.wav": (44100, 2, "WAV", "PCM_16"),
        "16k_mono.flac": (16000, 1, "FLAC", "PCM_16"),
        "48k_6ch_float.wav": (48000, 6, "WAV", "FLOAT"),
        "22k_stereo_pcm24.wav": (22050, 2, "WAV", "PCM_24"),
        "8k_mono_u8.wav": (8000, 1, "WAV", "PCM_U8"),
        "32k_stereo.ogg": (32000, 2, "OGG", "VORBIS"),
    }
    out = {}
    for name, (rate, ch, fmt, subtype) in specs.items():
        path = d / name
        sf.write(str(path), synthetic_voice(1.6, rate, ch), rate, format=fmt, subtype=subtype)
        out[name] = path
    return out


@pytest.fixture(scope="module", autouse=True)
def _cli_logging_restored():
    """In-process ``vocalis.cli.main`` points the ``vocalis`` logger at stderr (propagate
    off): undo it after each module so that the next modules' caplog sees vocalis records."""
    import logging

    import vocalis.cli as cli

    logger = logging.getLogger("vocalis")
    saved = (logger.propagate, logger.level, list(logger.handlers))
    yield
    logger.propagate, level, handlers = saved
    logger.setLevel(level)
    logger.handlers[:] = handlers
    cli._handler = None
