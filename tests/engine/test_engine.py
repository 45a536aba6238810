"""Continuous batching: a seeded request gives the same audio alone or in a batch with
others that arrive, finish and are cancelled at other times; streaming equals one-shot;
cancellation frees rows; the queue bound is enforced; a failure stays with its request."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import vocalis
from tests.engine.pocket_2m import load_2m
from vocalis.engine.types import AudioChunk, Failed, Finished
from vocalis.errors import CapacityError

TEXTS = [
    "The first request is short.",
    "A second one, somewhat longer than the first, with a comma and a full stop. And a "
    "second sentence to make two chunks maybe.",
    "Three.",
    "Number four talks about 3.5 apples; Dr. Who\u2019s \u201cquotes\u201d and dashes \u2014 "
    "all here.",
]


def cosine(a, b):
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


@pytest.fixture(scope="module")
def tts(checkpoints):
    t = load_2m(checkpoints, max_batch=8, max_queue=64)
    yield t
    t.close()


def collect(req):
    pcm = []
    for ev in req.events(timeout=120):
        if isinstance(ev, AudioChunk):
            pcm.append(ev.samples)
        elif isinstance(ev, Failed):
            raise ev.error
        else:
            assert isinstance(ev, Finished)
    return np.concatenate(pcm) if pcm else np.zeros(0, np.float32), req.stats


def solo(tts, i, **kw):
    return tts.synthesize(TEXTS[i % len(TEXTS)], voice=tts.test_voice, seed=100 + i, **kw).samples


def assert_close(alone, batched):
    assert alone.shape == batched.shape
    assert cosine(alone, batched) >= 0.9999


def test_batched_equals_alone_with_staggered_arrivals(tts):
    alone = {i: solo(tts, i) for i in range(6)}
    reqs = {}
    for i in range(6):
        reqs[i] = tts.submit(TEXTS[i % len(TEXTS)], voice=tts.test_voice, seed=100 + i)
        time.sleep(0.02 * i)  # arrivals at different steps
    for i, req in reqs.items():
        pcm, stats = collect(req)
        assert_close(alone[i], pcm)
        assert stats.frames * 1920 == pcm.shape[0]
    assert tts.engine_status()["active_rows"] == 0


def slow_second_stage(tts, monkeypatch, seconds: float) -> None:
    """Delay each second codec stage run on the helper thread by ``seconds`` (injected)."""
    batch = tts.engine.batch
    tail = batch.decode_tail

    def slow_on_helper(*args):
        if threading.current_thread().name == "vocalis-decoder-2":
            time.sleep(seconds)
        return tail(*args)

    monkeypatch.setattr(batch, "decode_tail", slow_on_helper)


def test_codec_split_waits_for_frames_still_on_the_helper(tts, monkeypatch):
    """A slow second codec stage on the helper thread (injected delay) must not let the
    decoder thread's split-mode pass read a row's codec state before its previous frame is
    done, nor deliver frames out of order (this raced in CI under load)."""
    alone = {i: solo(tts, i, max_frames=40 if i == 0 else 10) for i in range(6)}
    slow_second_stage(tts, monkeypatch, 0.1)
    first = tts.submit(TEXTS[0], voice=tts.test_voice, seed=100, max_frames=40)
    events = first.events(timeout=60)
    got = [next(events)]  # one row alone: its frames go through the two-thread pipeline
    rest = {i: tts.submit(TEXTS[i % len(TEXTS)], voice=tts.test_voice, seed=100 + i,
                          max_frames=10) for i in range(1, 6)}  # six rows: split mode
    for ev in events:
        got.append(ev)
    assert isinstance(got[-1], Finished)
    # one stale frame barely moves a cosine over 40 frames: compare every sample (batched
    # products differ from a lone row's only by float rounding, far below 1e-3)
    np.testing.assert_allclose(np.concatenate([ev.samples for ev in got[:-1]]), alone[0],
                               atol=1e-3, rtol=0)
    for i, req in rest.items():
        np.testing.assert_allclose(collect(req)[0], alone[i], atol=1e-3, rtol=0)


def test_a_lone_first_frame_borrows_an_idle_codec_thread_and_not_a_busy_one(tts, monkeypatch):
    """A lone request at an idle engine has its first frame decoded by the model thread
    without asking the codec thread for a turn when that thread has nothing left to do
    (time to first audio); when the previous request's last second stage is still out on
    the helper thread (injected delay), the next request waits for it: both requests' audio
    equals each one's alone, sample for sample within float rounding."""
    eng = tts.engine
    alone = {i: solo(tts, i, max_frames=6) for i in (0, 1)}
    turns = []
    take = eng._take_turn
    monkeypatch.setattr(eng, "_take_turn", lambda: turns.append(1) or take())
    time.sleep(0.2)  # idle: the codec thread is done with everything
    pcm, _ = collect(tts.submit(TEXTS[0], voice=tts.test_voice, seed=100, max_frames=6))
    np.testing.assert_allclose(pcm, alone[0], atol=1e-5, rtol=0)
    assert turns == []  # borrowed, no turn asked for
    slow_second_stage(tts, monkeypatch, 0.3)
    first = tts.submit(TEXTS[0], voice=tts.test_voice, seed=100, max_frames=6)
    deadline = time.monotonic() + 60
    while eng.status()["active_rows"] and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.1)  # its steps and first stages are done, its second stages on the helper
    second = tts.submit(TEXTS[1], voice=tts.test_voice, seed=101, max_frames=6)
    np.testing.assert_allclose(collect(first)[0], alone[0], atol=1e-5, rtol=0)
    np.testing.assert_allclose(collect(second)[0], alone[1], atol=1e-5, rtol=0)


def test_a_lone_first_audio_waits_for_its_reader_and_a_request_never_read_ends(
        tts, monkeypatch):
    """After a lone request's first frame the model thread lets the reader take the audio
    before its next step (the reader's thread needs the GIL the step would hold): with the
    wait made long, no step follows the first until the reader reads; then the request
    goes on to its full audio. With the default wait (the switch interval), a request that
    nobody reads still ends."""
    from vocalis.engine import scheduler

    eng = tts.engine
    alone = solo(tts, 0, max_frames=6)
    monkeypatch.setattr(scheduler, "hand_over_s", lambda: 60.0)
    time.sleep(0.2)
    before = eng.steps
    req = tts.submit(TEXTS[0], voice=tts.test_voice, seed=100, max_frames=6)
    deadline = time.monotonic() + 60
    while req.stats.ttfa_ms is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.3)  # time for many steps, were the engine not waiting
    assert req.stats.ttfa_ms is not None and eng.steps == before + 1
    pcm, _ = collect(req)
    np.testing.assert_allclose(pcm, alone, atol=1e-5, rtol=0)
    monkeypatch.undo()
    unread = tts.submit(TEXTS[1], voice=tts.test_voice, seed=101, max_frames=6)
    assert unread.done.wait(60)
    assert isinstance(list(unread.events())[-1], Finished)


def test_a_relayed_first_audio_is_taken_by_the_thread_it_goes_to(tts):
    """The server's pump reads a request's events and relays the audio to the event loop:
    reading does not count as taking the first audio, the loop's ``next`` does."""
    import asyncio

    from vocalis.audio.encode import make_encoder
    from vocalis.server.bridge import SpeechJob

    async def run():
        req = tts.submit(TEXTS[0], voice=tts.test_voice, seed=100, max_frames=4)
        job = SpeechJob(req, make_encoder("pcm", tts.sample_rate), asyncio.get_running_loop())
        job.start()
        while job.queue.empty():  # the pump has read the first audio and relayed it
            await asyncio.sleep(0.005)
        relayed = req._handed.is_set()
        piece = await job.next()
        taken = req._handed.is_set()
        while (await job.next()).kind == "audio":
            pass
        return relayed, piece.kind, taken

    relayed, kind, taken = asyncio.run(run())
    assert (relayed, kind, taken) == (False, "audio", True)


def test_cancel_mid_stream_frees_row_and_others_unaffected(tts):
    alone = solo(tts, 1, eos_threshold=100.0)
    long_req = tts.submit(TEXTS[1], voice=tts.test_voice, seed=101, eos_threshold=100.0)
    victim = tts.submit(TEXTS[3], voice=tts.test_voice, seed=7, eos_threshold=100.0)
    got = 0
    for ev in victim.events(timeout=60):
        if isinstance(ev, AudioChunk):
            got += 1
            if got == 3:
                victim.cancel()
        if isinstance(ev, Finished):
            assert ev.stats.cancelled
    assert got == 3  # no audio is delivered after the cancel
    pcm, _ = collect(long_req)
    assert_close(alone, pcm)
    deadline = time.time() + 10
    while tts.engine_status()["active_rows"] and time.time() < deadline:
        time.sleep(0.05)
    assert tts.engine_status()["active_rows"] == 0


def test_stream_concatenates_exactly_and_close_cancels(tts):
    chunks = list(tts.stream(TEXTS[3], voice=tts.test_voice, seed=5))
    np.testing.assert_array_equal(np.concatenate(chunks),
                                  tts.synthesize(TEXTS[3], voice=tts.test_voice, seed=5).samples)
    gen = tts.stream(TEXTS[1], voice=tts.test_voice, seed=5, eos_threshold=100.0)
    next(gen)
    gen.close()
    deadline = time.time() + 10
    while tts.engine_status()["active_rows"] and time.time() < deadline:
        time.sleep(0.05)
    assert tts.engine_status()["active_rows"] == 0


def test_sixteen_threads_share_the_batch(tts):
    alone = {i: solo(tts, i, max_frames=12) for i in range(16)}
    out = {}
    rows_seen = []

    def run(i):
        out[i] = tts.synthesize(TEXTS[i % len(TEXTS)], voice=tts.test_voice, seed=100 + i,
                                max_frames=12).samples

    def watch():
        for _ in range(200):
            rows_seen.append(tts.engine_status()["active_rows"])
            time.sleep(0.01)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    w = threading.Thread(target=watch)
    w.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.join()
    for i in range(16):
        assert_close(alone[i], out[i])
    assert max(rows_seen) > 1  # requests really ran together


def test_queue_bound_raises_capacity_error(checkpoints):
    d = checkpoints.get("english_2m_2026-10")
    t = vocalis.load(str(d), max_batch=1, max_queue=2)
    try:
        v = t.voice(str(d / "voice.wav"))
        reqs = [t.submit("Hello there.", voice=v, seed=1, eos_threshold=100.0)]
        deadline = time.time() + 30
        while t.engine_status()["active_rows"] == 0 and time.time() < deadline:
            time.sleep(0.01)
        reqs += [t.submit("Hello there.", voice=v, seed=1) for _ in range(2)]  # fill the queue
        # (it says how to let more wait)
        with pytest.raises(CapacityError, match=r"queue full \(2 requests waiting, max_queue=2\)"
                                                r".*max_queue=N.*--max-queue N"):
            t.submit("Hello there.", voice=v, seed=1)
        for r in reqs:
            r.cancel()
        for r in reqs:
            assert r.done.wait(30)
    finally:
        t.close()


def test_failing_request_does_not_take_others_down(tts, monkeypatch):
    engine = tts.engine
    orig = engine._next_chunk
    doomed = set()

    def broken(job):
        if job.req.id in doomed:
            raise RuntimeError("injected failure")
        return orig(job)

    monkeypatch.setattr(engine, "_next_chunk", broken)
    alone = solo(tts, 0)
    bad = tts.submit(TEXTS[2], voice=tts.test_voice, seed=4)
    doomed.add(bad.id)  # may already be admitted: then it fails at its next chunk or not at all
    good = tts.submit(TEXTS[0], voice=tts.test_voice, seed=100)
    pcm, _ = collect(good)
    assert_close(alone, pcm)
    last = list(bad.events(timeout=60))[-1]
    assert isinstance(last, (Failed, Finished))
    if isinstance(last, Failed):
        assert "injected failure" in str(last.error)


def test_dropped_model_stops_its_engine_threads(checkpoints):
    import gc

    d = checkpoints.get("english_2m_2026-10")

    def engine_threads():
        return {t for t in threading.enumerate() if t.name.startswith("vocalis-") and t.is_alive()}

    def wait_gone(threads):
        deadline = time.time() + 10
        while any(t.is_alive() for t in threads) and time.time() < deadline:
            time.sleep(0.05)
        return not any(t.is_alive() for t in threads)

    before = engine_threads()
    t = vocalis.load(str(d))
    t.synthesize("Hello.", voice=str(d / "voice.wav"), seed=1)
    mine = engine_threads() - before
    assert len(mine) == 3  # scheduler and two codec threads
    del t
    gc.collect()
    assert wait_gone(mine)
    before = engine_threads()
    with vocalis.load(str(d)) as t2:  # the context manager closes the engine
        t2.synthesize("Hello.", voice=str(d / "voice.wav"), seed=1)
        mine = engine_threads() - before
    assert mine and wait_gone(mine)


def test_requests_arriving_together_share_one_prompt_pass(tts, tmp_path):
    """Eight requests queued in the same instant (different text lengths and voices, so the
    batched prompt pass pads rows of different lengths at different positions) are prefilled
    in one pass when the engine admits every free row at once (``admit_group`` 0; groups:
    tests/engine/test_burst.py), and each equals its solo run."""
    import soundfile as sf

    from conftest import synthetic_voice

    sf.write(str(tmp_path / "short.wav"), synthetic_voice(0.7, 24000)[:, 0], 24000)
    voices = [tts.test_voice, tts.voice(str(tmp_path / "short.wav"))]
    texts = [TEXTS[i % len(TEXTS)] for i in range(8)]
    solos = [tts.synthesize(t, voice=voices[i % 2], seed=300 + i).samples
             for i, t in enumerate(texts)]
    engine = tts.engine
    while engine.status()["active_rows"]:
        time.sleep(0.01)
    passes = engine.prompt_passes
    group, engine.admit_group = engine.admit_group, 0  # every free row in one step
    try:
        with engine._cond:  # hold the scheduler so that all eight are admitted in one step
            reqs = [tts.submit(t, voice=voices[i % 2], seed=300 + i)
                    for i, t in enumerate(texts)]
        outs = [collect(r)[0] for r in reqs]
    finally:
        engine.admit_group = group
    new = engine.prompt_passes - passes
    assert list(engine.prompt_rows)[-new] == 8  # the first pass served all eight
    assert max(r.stats.queued_ms for r in reqs) - min(r.stats.queued_ms for r in reqs) < 50
    for solo_pcm, out in zip(solos, outs):
        assert_close(solo_pcm, out)


def _resident_or_swapped_mb() -> float:
    """The process's resident plus swapped-out memory in MiB: unlike VmRSS alone it does
    not fall when the kernel swaps pages out under memory pressure."""
    from vocalis.bench.memory import _status_kb, rss_mb

    return rss_mb() + (_status_kb("VmSwap") or 0.0) / 1024


def test_idle_engine_gives_its_cache_memory_back(checkpoints):
    """A long request grows the FlowLM cache (allocated for its whole frame budget at its
    prompt pass); once the engine is idle the cache is released: the engine holds no
    reference to its tensors and the process's memory drops by most of their size; the
    next request is as before, and its ordinary-sized cache is kept."""
    import weakref

    d = checkpoints.get("english")
    with vocalis.load(str(d), max_batch=2) as t:
        v = t.voice(str(d / "voice.wav"))
        ref = t.synthesize(TEXTS[0], voice=v, seed=1, max_frames=8).samples
        req = t.submit(TEXTS[0], voice=v, seed=2, max_frames=8000)
        first = next(iter(req.events(timeout=120)))
        assert isinstance(first, AudioChunk)
        cache_mb, mem = t.engine_status()["cache_mb"], _resident_or_swapped_mb()
        held = [weakref.ref(kv) for kv in t._engine.batch.flow_kv]
        req.cancel()
        assert req.done.wait(30)
        # ~8000 positions x 6 layers x (keys + values) x 1024 floats
        assert cache_mb > 300
        deadline = time.monotonic() + 10
        while t.engine_status()["cache_mb"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert t.engine_status()["cache_mb"] == 0
        assert all(r() is None for r in held), "the released cache is still referenced"
        # freed to the system, not kept by the allocator (the kernel's figure; other
        # threads' allocations move it a little, hence not the whole size)
        assert _resident_or_swapped_mb() < mem - 0.5 * cache_mb
        # an ordinary request's cache is kept between requests (no reallocation per request)
        t.synthesize(TEXTS[0], voice=v, seed=1, max_frames=8)
        time.sleep(0.2)
        assert t.engine_status()["cache_mb"] > 0
        assert np.array_equal(t.synthesize(TEXTS[0], voice=v, seed=1, max_frames=8).samples, ref)


def test_engine_status_has_the_same_fields_before_and_after_the_engine_starts(checkpoints):
    """``engine_status()`` of a model that has served nothing (its engine not started) and of
    one that has: the same fields, the counters at zero before and counting after."""
    t = load_2m(checkpoints, max_batch=2, max_queue=3)
    try:
        before = t.engine_status()
        assert before == {"active_rows": 0, "queued": 0, "max_batch": 2, "max_queue": 3,
                          "steps": 0, "frames": 0, "prompt_passes": 0, "announced": 0,
                          "cache_mb": 0.0}
        assert len(t.synthesize("Hi there.", voice=t.test_voice, seed=1, max_frames=4).samples)
        after = t.engine_status()
        assert list(after) == list(before)
        assert 0 < after["frames"] <= 4 and after["steps"] > 0 and after["prompt_passes"] == 1
        assert after["active_rows"] == 0 and after["queued"] == 0 and after["cache_mb"] > 0
    finally:
        t.close()
