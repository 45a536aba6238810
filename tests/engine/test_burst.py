"""A burst admitted in groups (``Engine.admit_group``): the first group's rows get their
first frames while the later groups wait, the rows already speaking are held back for a
step (``EngineFamily.holds_rows``), and every seeded request still equals its solo run."""

from __future__ import annotations

import threading

import pytest

from tests.engine.pocket_2m import load_2m
from tests.engine.test_isolation import assert_same, events

TEXTS = ["Hello there, how are you today?", "A second voice in the burst.", "Short one.",
         "The quick brown fox jumps over the lazy dog.", "Numbers like twelve.", "Last."]


@pytest.fixture(scope="module")
def tts(checkpoints):
    t = load_2m(checkpoints, max_batch=8, max_queue=16)
    yield t
    t.close()


def _burst(tts, n):
    reqs = [tts.submit(TEXTS[i], tts.test_voice, 10 + i, max_frames=6 + 2 * i) for i in range(n)]
    out = [None] * n

    def drain(i):
        out[i] = events(reqs[i])

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


@pytest.mark.parametrize("group", [0, 2, 4])
def test_a_burst_in_groups_gives_every_request_its_solo_audio(tts, group):
    solo = [events(tts.submit(TEXTS[i], tts.test_voice, 10 + i, max_frames=6 + 2 * i))[0]
            for i in range(len(TEXTS))]
    engine = tts.engine
    engine.admit_group = group
    try:
        passes = engine.prompt_passes
        got = _burst(tts, len(TEXTS))
        rows = list(engine.prompt_rows)[-(engine.prompt_passes - passes):]
    finally:
        engine.admit_group = 0
    for s, (pcm, last) in zip(solo, got):
        assert type(last).__name__ == "Finished"
        assert_same(s, pcm)
    # each prompt pass took one group at most (0: every request that fitted in one pass)
    assert sum(rows) == len(TEXTS)
    if group:
        assert max(rows) <= group and len(rows) >= len(TEXTS) // group
