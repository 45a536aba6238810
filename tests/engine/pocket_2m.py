"""The small random-weight Pocket TTS model the engine tests run."""

from __future__ import annotations

import vocalis


def load_2m(checkpoints, max_batch: int, max_queue: int):
    """The ``english_2m_2026-10`` random checkpoint loaded with these engine sizes, with
    ``test_voice`` (its voice file) attached; the caller closes it."""
    d = checkpoints.get("english_2m_2026-10")
    t = vocalis.load(str(d), max_batch=max_batch, max_queue=max_queue)
    t.test_voice = t.voice(str(d / "voice.wav"))
    return t
