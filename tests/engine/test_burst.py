"""A burst admitted in groups (``Engine.admit_group``): the first group's rows get their
first frames while the later groups wait, the rows already speaking are held back for a
step (``EngineFamily.holds_rows``), and every seeded request still equals its solo run."""

from __future__ import annotations

import threading
import time

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


@pytest.mark.parametrize("live", [False, True])
def test_live_requests_are_never_held_back(tts, live):
    """Requests played as they come (``live``, as the WebSocket and Wyoming front ends
    submit) arriving together get their prompt pass together and then step at every
    engine step: no group speaks first and is held back while the later groups get their
    first frames, as a burst of ordinary requests is. Same audio either way."""
    solo = [events(tts.submit(TEXTS[i], tts.test_voice, 10 + i, max_frames=6 + 2 * i))[0]
            for i in range(len(TEXTS))]
    engine = tts.engine
    engine.admit_group = 2
    try:
        with engine._cond:  # (a reentrant lock) all arrive before the engine admits any
            passes = engine.prompt_passes
            reqs = [tts.submit(TEXTS[i], tts.test_voice, 10 + i, max_frames=6 + 2 * i,
                               live=live) for i in range(len(TEXTS))]
        got = [events(r) for r in reqs]
        rows = list(engine.prompt_rows)[-(engine.prompt_passes - passes):]
    finally:
        engine.admit_group = 0
    assert rows == ([len(TEXTS)] if live else [2, 2, 2])
    for s, (pcm, last) in zip(solo, got):
        assert type(last).__name__ == "Finished"
        assert_same(s, pcm)
    held = [last.stats.held_steps for _, last in got]
    if live:
        assert held == [0] * len(TEXTS)
        assert len({last.stats.admission for _, last in got}) == 1
    else:  # the first group sat out the steps of the two later groups' first frames
        by_admission = sorted((last.stats.admission, h) for (_, last), h in zip(got, held))
        assert by_admission[0][1] >= 1 and by_admission[-1][1] == 0, by_admission


LONG = ("This request has by far the longest text of the burst, with many words in it, so that "
        "its prompt pass is the largest of all of them.")
WORDS = ["Hi.", "Yes, please.", "Good morning to you.", "The bus comes at nine tonight.",
         "We will meet by the old bridge after the market closes.",
         "Please bring the maps, the lamp, two ropes and something warm to drink."]


def _admissions(tts, texts, group):
    """Submit ``texts`` while the engine cannot admit (its lock held), so that all wait
    together; each request's admission number (RequestStats.admission), in text order."""
    engine = tts.engine
    engine.admit_group = group
    try:
        with engine._cond:
            reqs = [tts.submit(t, tts.test_voice, 20 + i, max_frames=3)
                    for i, t in enumerate(texts)]
        got = [events(r) for r in reqs]
    finally:
        engine.admit_group = 0
    for _, last in got:
        assert type(last).__name__ == "Finished"
    first = min(last.stats.admission for _, last in got)
    return [last.stats.admission - first for _, last in got]


def test_a_burst_is_admitted_shortest_prompt_first(tts):
    """Requests waiting together are admitted a group at a time, the shortest texts first
    (ties in arrival order), whatever order they came in: the median request waits for the
    short half of the prompt passes only."""
    texts = [WORDS[5], WORDS[2], WORDS[0], WORDS[4], WORDS[1], WORDS[3]]  # shuffled
    assert _admissions(tts, texts, 2) == [2, 1, 0, 2, 0, 1]
    # a group as large as the burst: one admission, in arrival order, nothing reordered
    assert _admissions(tts, texts, 6) == [0] * 6


def test_a_long_request_is_passed_over_a_bounded_number_of_times(tts, monkeypatch):
    """A long request that arrived first is not held back for ever by shorter ones:
    passed over ``MAX_PASSED_OVER`` times, it goes before every shorter one."""
    from vocalis.engine import scheduler

    texts = [LONG] + WORDS[:5]
    assert _admissions(tts, texts, 2) == [2, 0, 0, 1, 1, 2]  # no bound reached: last
    monkeypatch.setattr(scheduler, "MAX_PASSED_OVER", 1)
    assert _admissions(tts, texts, 2) == [1, 0, 0, 1, 2, 2]  # passed over once, then first


def test_live_must_be_a_bool(tts):
    from vocalis.errors import InputError
    with pytest.raises(InputError, match="live must be true or false"):
        tts.submit("Hello.", tts.test_voice, live="yes")


def test_warm_up_runs_its_bursts_and_refuses_bad_counts(tts):
    from vocalis.errors import InputError
    frames = tts.engine.frames
    seconds = tts.warm_up(2, tts.test_voice, rounds=3)
    assert seconds > 0
    assert tts.engine.frames - frames == 3 * 2 * 3  # rounds x rows x Pocket's 3 frames
    for rows in (0, 9, True, 2.0):
        with pytest.raises(InputError, match=r"warm-up rows must be a whole number in 1\.\.8"):
            tts.warm_up(rows, tts.test_voice)
    with pytest.raises(InputError, match="warm-up rounds"):
        tts.warm_up(1, tts.test_voice, rounds=0)


def test_an_idle_engine_waits_for_announced_submissions(tts, monkeypatch):
    """A burst that reaches the engine over some time (a server still checking its other
    requests) is admitted as a whole, shortest first, when its submissions were announced
    (``TTS.expect``): the long text that came first does not take the first row alone.
    Without the announcements the same arrivals are admitted in arrival order."""
    from vocalis.engine import scheduler

    # only the announcements end the wait here, not the clock
    monkeypatch.setattr(scheduler, "GATHER_S", 60.0)
    engine = tts.engine
    texts = [LONG, WORDS[1], WORDS[0]]
    engine.admit_group = 1
    try:
        announced = [tts.expect() for _ in texts]
        assert tts.engine_status()["announced"] == 3
        reqs = []
        for text, a in zip(texts, announced):
            reqs.append(tts.submit(text, tts.test_voice, 40, max_frames=3))
            time.sleep(0.2)  # arrivals spread out: an engine that did not wait would start
            a.done()
            a.done()  # idempotent
        assert tts.engine_status()["announced"] == 0
        got = [events(r)[1] for r in reqs]
        # the control: each request is admitted before the next one is submitted
        plain = []
        for text in texts:
            r = tts.submit(text, tts.test_voice, 40, max_frames=3)
            plain.append(events(r)[1])
    finally:
        engine.admit_group = 0
    first = min(last.stats.admission for last in got)
    assert [last.stats.admission - first for last in got] == [2, 1, 0]
    first = min(last.stats.admission for last in plain)
    assert [last.stats.admission - first for last in plain] == [0, 1, 2]


def test_an_announcement_never_made_does_not_stall_the_engine(tts, monkeypatch):
    """A front end that announces a request and never submits it (nor says so) does not
    stall the engine: the next request is admitted once ``GATHER_S`` has passed (it
    finishes; the test does not time the wait), and a live request does not wait at all
    (with ``GATHER_S`` at 600 s it finishes within its 120 s event timeout)."""
    from vocalis.engine import scheduler

    monkeypatch.setattr(scheduler, "GATHER_S", 0.2)
    engine = tts.engine
    engine.admit_group = 2
    lost = tts.expect()
    try:
        last = events(tts.submit(WORDS[0], tts.test_voice, 41, max_frames=3))[1]
        assert type(last).__name__ == "Finished"
        monkeypatch.setattr(scheduler, "GATHER_S", 600.0)  # a live request must not wait
        live = tts.submit(WORDS[1], tts.test_voice, 42, max_frames=3, live=True)
        assert type(list(live.events(timeout=120))[-1]).__name__ == "Finished"
    finally:
        lost.done()
        engine.admit_group = 0
    assert tts.engine_status()["announced"] == 0
