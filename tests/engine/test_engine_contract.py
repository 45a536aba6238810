"""The engine through its contract alone (``vocalis.engine.family``), with a family that is
neither Pocket TTS nor Qwen3-TTS (``stub_family``: a sine tone per text byte, whose audio
the tests compute from its formula): rows are isolated, audio leaves in order, a failing
row fails alone, cancellation frees the row within one step, the codec may gather several
frames per call or run in two pipelined stages, ``finish_step`` runs once per step."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import stub_family as sf
from vocalis.engine.family import RowOut
from vocalis.engine.scheduler import Engine, make_job
from vocalis.engine.types import AudioChunk, Failed, Finished, Request
from vocalis.errors import EventsAlreadyRead

TEXTS = ["Hello there.", "A second, longer request with more bytes in it.", "3", "done now"]


def job(engine_family, text, voice="low", scale=1.0):
    return make_job(engine_family, voice, [(text, list(text.encode()), 0)],
                    sf.Params(scale, None), seed=1)


def collect(req, timeout=60):
    pcm, last = [], None
    for ev in req.events(timeout=timeout):
        if isinstance(ev, AudioChunk):
            pcm.append(ev.samples)
        last = ev
    return (np.concatenate(pcm) if pcm else np.zeros(0, np.float32)), last


class Gathering(sf.StubEngine):
    """Whole codec on one thread, three frames per codec call after a row's first."""

    codec_pipeline = False
    codec_frames = 3


class Pipelined(sf.StubEngine):
    """A two-stage codec (the engine runs the stages of consecutive frames on two threads)."""

    codec_pipeline = True


class Failing(sf.StubEngine):
    """Fails the row at the byte ``!`` (its own request only)."""

    def step(self, batch, jobs):
        out = super().step(batch, jobs)
        for r, job in enumerate(jobs):
            if job is not None and out[r] is not None and out[r].frame is not None \
                    and int(out[r].frame[2]) == ord("!"):
                out[r] = RowOut(error=RuntimeError("the stub's ! fails"))
        return out


class Counting(sf.StubEngine):
    def __init__(self):
        self.steps = 0
        self.finished = 0
        self.lock = threading.Lock()

    def step(self, batch, jobs):
        with self.lock:
            self.steps += 1
        return super().step(batch, jobs)

    def finish_step(self, batch):
        with self.lock:
            self.finished += 1


@pytest.mark.parametrize("family", [sf.StubEngine, Gathering, Pipelined])
def test_concurrent_rows_equal_their_formula(family):
    engine = Engine(family(), max_batch=3, max_queue=16, threads=2)
    try:
        reqs = [(t, v, s, engine.submit(job(engine.family, t, v, s)))
                for t, v, s in [(TEXTS[i % 4], ("low", "high")[i % 2], 0.5 + i / 8) for i in range(8)]]
        for text, voice, scale, req in reqs:
            pcm, last = collect(req)
            assert isinstance(last, Finished) and last.stats.frames == len(text.encode())
            np.testing.assert_array_equal(pcm, sf.expected(text, voice, scale))
    finally:
        engine.close()


def test_a_failing_row_fails_alone():
    engine = Engine(Failing(), max_batch=4, threads=2)
    try:
        bad = engine.submit(job(engine.family, "Oh no!"))
        good = [engine.submit(job(engine.family, t)) for t in TEXTS[:3]]
        pcm, last = collect(bad)
        assert isinstance(last, Failed) and "the stub's ! fails" in str(last.error)
        for text, req in zip(TEXTS, good):
            pcm, last = collect(req)
            assert isinstance(last, Finished)
            np.testing.assert_array_equal(pcm, sf.expected(text))
    finally:
        engine.close()


def test_cancel_frees_the_row_within_one_step():
    fam = Counting()
    engine = Engine(fam, max_batch=1, threads=2)
    try:
        long = engine.submit(job(fam, "x" * 5000))
        events = long.events(timeout=30)
        assert isinstance(next(events), AudioChunk)
        with fam.lock:
            at = fam.steps
        long.cancel()
        *_, last = events
        assert isinstance(last, Finished) and last.stats.cancelled
        with fam.lock:
            assert fam.steps - at <= 2  # the step under way, then none
        nxt, last = collect(engine.submit(job(fam, "after")))  # the row is free again
        np.testing.assert_array_equal(nxt, sf.expected("after"))
        with fam.lock:
            assert fam.finished == fam.steps  # finish_step once after each step
    finally:
        engine.close()


def test_engine_status_and_frames_count():
    engine = Engine(sf.StubEngine(), max_batch=2, threads=2)
    try:
        collect(engine.submit(job(engine.family, "abcd")))
        st = engine.status()
        assert st["frames"] == 4 and st["active_rows"] == 0 and st["max_batch"] == 2
    finally:
        engine.close()


def test_the_contract_declares_every_hook_the_engine_calls():
    # an EngineFamily that leaves out an abstract hook cannot be made: nothing is implicit
    class Incomplete(sf.StubEngine.__mro__[1]):  # EngineFamily itself
        pass

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()
    assert torch.is_tensor(sf.StubBatch(1).decode([0], torch.tensor([[220.0, 1.0, 65.0]]), [True]))


def test_reading_the_events_again_after_their_end_raises_instead_of_waiting():
    engine = Engine(Failing(), max_batch=2, threads=2)
    try:
        for text in ("abc", "Oh no!"):  # ended by Finished, by Failed
            req = engine.submit(job(engine.family, text))
            collect(req)
            # (a timeout: without the check this waited for ever for events that never come)
            with pytest.raises(EventsAlreadyRead, match=f"request {req.id} were already read"):
                list(req.events(timeout=2))
    finally:
        engine.close()


def test_a_second_reader_while_one_reads_is_refused_and_the_first_gets_every_event():
    req = Request()
    first = req.events(timeout=30)
    req._put(AudioChunk(np.zeros(4, np.float32), 0, 0))
    assert isinstance(next(first), AudioChunk)  # the first reader is reading
    with pytest.raises(EventsAlreadyRead, match="another reader"):
        next(req.events(timeout=2))  # (without the check: a stolen event, or a wait)
    req._put(AudioChunk(np.ones(4, np.float32), 0, 1))
    req._put(Finished(req.stats))
    rest = list(first)
    assert [type(e) for e in rest] == [AudioChunk, Finished] and rest[0].frame == 1


def test_a_reader_that_stops_early_leaves_the_rest_to_the_next():
    req = Request()
    with pytest.raises(TimeoutError):
        next(req.events(timeout=0.01))
    for frame in range(3):
        req._put(AudioChunk(np.zeros(4, np.float32), 0, frame))
    req._put(Finished(req.stats))
    for ev in req.events():
        break  # read frame 0, then stop
    assert [getattr(e, "frame", None) for e in req.events(timeout=5)] == [1, 2, None]


class Recorded(sf.StubBatch):
    """Records the thread and torch thread count of every codec call, and its first flags."""

    def __init__(self, rows):
        super().__init__(rows)
        self.calls = []

    def decode(self, rows, frames, first):
        self.calls.append((threading.current_thread().name, torch.get_num_threads(), list(first)))
        return super().decode(rows, frames, first)


class Recording(sf.StubEngine):
    codec_pipeline = False

    def new_batch(self, max_rows):
        return Recorded(max_rows)


class RecordingPipelined(Recording):
    codec_pipeline = True  # later frames: first stage on the codec thread, second on its helper


@pytest.mark.parametrize("family", [Recording, RecordingPipelined])
def test_a_lone_first_frame_is_decoded_by_the_waiting_model_thread_on_every_thread(family):
    """The model thread waits for a lone request's first frame (time to first audio): it
    decodes that frame itself on every thread, where its thread pool is warm from the
    prompt pass, while the codec threads (which decode the other frames on their share)
    wait; the audio is the formula's, in order. Requests follow each other at once, as a
    caller that submits the next as soon as the last one's audio is out: the codec's last
    frames of one are not still being decoded beside the next one's first."""
    engine = Engine(family(), max_batch=2, threads=2)
    codec = {"vocalis-decoder", "vocalis-decoder-2"} if family.codec_pipeline \
        else {"vocalis-decoder"}
    try:
        for text in ("Hello there.", "abc", "A third one", "4", "and a fifth request"):
            engine.batch.calls.clear()
            pcm, last = collect(engine.submit(job(engine.family, text)))
            assert isinstance(last, Finished)
            np.testing.assert_array_equal(pcm, sf.expected(text))
            calls = engine.batch.calls
            assert calls[0] == ("vocalis-engine", 2, [True])
            assert all(name in codec and first == [False] for name, _, first in calls[1:])
            if len(calls) > 2:  # (the last frames, the engine idle: every thread)
                assert calls[1][1] == 1
    finally:
        engine.close()
