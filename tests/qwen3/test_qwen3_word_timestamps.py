"""Qwen3-TTS word timestamps (vocalis.timing over the talker's attention), tiny random
checkpoints: the audio is unchanged, every word comes once in order inside the audio, and
the streaming-text layout reads only the text tokens fed so far (its token schedule)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import vocalis
from vocalis.engine.types import AudioChunk
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

TEXT = "Hello there, my good friend. How are you doing today?"
OTHER = "A second request speaks beside the first one, longer and longer still."


@pytest.fixture(scope="module")
def tts(tmp_path_factory):
    d = write_random_checkpoint("qwen3-tts/0.6b-customvoice",
                                tmp_path_factory.mktemp("q3ts") / "m", seed=1, tiny=True)
    t = vocalis.load(str(d), max_batch=4)
    yield t
    t.close()


def _words(text: str) -> list[str]:
    return [w for w in text.split() if any(c.isalnum() for c in w)]


def _check(words, text: str, duration: float) -> None:
    assert [w.word for w in words] == _words(text)
    for w in words:
        assert text[w.text_start:w.text_end] == w.word
    for a, b in zip(words, words[1:]):
        assert 0 <= a.start <= a.end <= b.start
    assert words[-1].end <= duration + 1e-9


@pytest.mark.parametrize("nsm", [True, False], ids=["whole-text", "streaming-text"])
def test_words_leave_the_audio_alone_and_cover_the_text(tts, nsm):
    kw = dict(speaker="ryan", seed=3, non_streaming_mode=nsm, max_new_tokens=40)
    plain = tts.synthesize(TEXT, **kw)
    timed = tts.synthesize(TEXT, word_timestamps=True, **kw)
    assert np.array_equal(plain.samples, timed.samples)
    _check(timed.words, TEXT, timed.duration_s)


def test_the_streaming_layout_reads_the_tokens_fed_so_far(tts):
    """Token j of the text enters the talker with frame j (token 0 with the prompt), so
    frame g's attention covers tokens 0..g only; the whole-text layout sees them all."""
    n = len(tts.loaded.word_tokens(tts.loaded.model.text_ids(TEXT)[0].tolist()))
    for nsm in (False, True):
        req = tts.submit(TEXT, speaker="ryan", seed=3, non_streaming_mode=nsm, max_new_tokens=12,
                         word_timestamps=True)
        frames = [e for e in req.events() if isinstance(e, AudioChunk)]
        assert frames[0].scores is None  # the prompt pass's frame: nothing read
        for e in frames[1:]:
            assert e.scores.shape == (n,) and abs(float(e.scores.sum()) - 1) < 1e-4
            if not nsm:
                assert not e.scores[e.frame + 1:].any() and e.scores[:e.frame + 1].all()
            else:
                assert e.scores.all()


def test_rows_at_different_positions_time_their_own_words(tts):
    """Two requests in one batch at their own positions (the per-row talker call)."""
    out = {}

    def run(name, text):
        out[name] = tts.synthesize(text, speaker="ryan", seed=5, max_new_tokens=30,
                                   word_timestamps=True)

    first = threading.Thread(target=run, args=("a", TEXT))
    first.start()
    run("b", OTHER)
    first.join()
    _check(out["a"].words, TEXT, out["a"].duration_s)
    _check(out["b"].words, OTHER, out["b"].duration_s)


def test_streamed_text_is_timed_once_complete_and_its_audio_is_unchanged(tts):
    """open_text in pieces (as a language model writes): the same audio as the whole text
    in the streaming-text layout, and every word timed once the text is closed."""
    kw = dict(speaker="ryan", seed=3, max_new_tokens=40)
    whole = tts.synthesize(TEXT, non_streaming_mode=False, **kw)
    req = tts.open_text(word_timestamps=True, **kw)
    rng = np.random.default_rng(0)
    cuts = sorted({int(c) for c in rng.integers(1, len(TEXT), size=8)})
    for a, b in zip([0, *cuts], [*cuts, len(TEXT)]):
        req.push(TEXT[a:b])
    req.close()
    samples, words = [], []
    for ev in req.events(timeout=60):
        if isinstance(ev, AudioChunk):
            samples.append(ev.samples)
        words += ev.words or []
    got = np.concatenate(samples)
    assert np.array_equal(got, whole.samples)
    _check(words, TEXT, len(got) / tts.sample_rate)
