"""Text streamed into Qwen3-TTS token by token (``TTS.open_text``).

The independent reference is the same model given the whole text at once
(``synthesize(text, non_streaming_mode=False)``, the official streaming-text layout, whose
parity with qwen-tts is tested in test_qwen3_api.py): with the same seed the streamed request
must give the same codes and samples whatever the cuts and the delays, also when a token comes
after the frame that needs it (the row waits). The token ids handed out early are checked
against the tokenizer run on the whole text (the tokenizers library), for both split regexes
the checkpoints use, on random texts cut at random places.
"""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vocalis
from vocalis.engine.types import AudioChunk, Finished
from vocalis.errors import InputError, VoiceError
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint
from vocalis.models.qwen3.text import (
    FIXED_SPLIT_REGEX,
    QWEN2_SPLIT_REGEX,
    Qwen3TextTokenizer,
    TokenStream,
    assistant_text,
)

TEXT = "Hello world, this is a test of the engine. And a second sentence follows it here!"
OPTS = dict(speaker="ryan", max_frames=40)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3-feed")
    return {kind: write_random_checkpoint(f"qwen3-tts/0.6b-{kind}", root / kind, seed=1, tiny=True)
            for kind in ("customvoice", "base")}


@pytest.fixture(scope="module")
def tts(dirs):
    model = vocalis.load(str(dirs["customvoice"]), max_batch=4)
    yield model
    model.close()


@pytest.fixture(scope="module")
def whole(tts):
    audio = tts.synthesize(TEXT, seed=5, non_streaming_mode=False, **OPTS)
    assert len(audio.chunks[0]["codes"]) == 40
    return audio


def _split(text: str, rng: random.Random, n: int) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), min(n, len(text) - 1)))
    return [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]


def _collect(req) -> tuple[np.ndarray, list]:
    chunks = [ev.samples for ev in req.events(timeout=60) if isinstance(ev, AudioChunk)]
    return np.concatenate(chunks), req.request.stats.chunks[0]["codes"]


# ----------------------------------------------------------------------------- token ids

_ALPHABET = list("ab cdAB.,!?'\"\n\t\r-/0123456789éeü\u0301中文\u00a0\u3000") + [" "] * 4


@pytest.mark.parametrize("regex", [QWEN2_SPLIT_REGEX, FIXED_SPLIT_REGEX], ids=["qwen2", "fixed"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.sampled_from(_ALPHABET), min_size=1, max_size=40),
       cuts=st.lists(st.integers(1, 39), max_size=10))
def test_ids_handed_out_early_are_those_of_the_whole_text(dirs, regex, text, cuts):
    tok = _tokenizer(dirs, regex)
    cuts = sorted({c for c in cuts if c < len(text)})
    stream, got = TokenStream(tok), []
    for a, b in zip([0] + cuts, cuts + [len(text)]):
        got += stream.push(text[a:b])
    got += stream.close()
    assert got == tok.encode(assistant_text(text))[3:-5]


def test_ids_come_once_the_next_word_has_begun(dirs):
    tok = _tokenizer(dirs, QWEN2_SPLIT_REGEX)
    stream = TokenStream(tok)
    assert stream.push("Hello") == []           # "Hello" may still become "Hellos"
    first = stream.push(" wor")                  # the space ends it
    assert first == tok.encode("Hello") and stream.role == tok.encode("<|im_start|>assistant\n")


_TOKENIZERS: dict = {}


def _tokenizer(dirs, regex):
    if regex not in _TOKENIZERS:
        _TOKENIZERS[regex] = Qwen3TextTokenizer.from_dir(dirs["customvoice"], split_regex=regex)
    return _TOKENIZERS[regex]


# ----------------------------------------------------------------------------- the engine

def test_streamed_text_gives_the_whole_texts_codes_and_samples(tts, whole):
    rng = random.Random(0)
    for _ in range(3):
        req = tts.open_text(seed=5, **OPTS)
        parts = _split(TEXT, rng, 12)
        out: dict = {}
        reader = threading.Thread(target=lambda: out.update(zip(("samples", "codes"), _collect(req))))
        reader.start()
        for part in parts:
            req.push(part)
            time.sleep(rng.choice([0, 0, 0.001, 0.02]))
        req.close()
        reader.join(60)
        assert out["codes"] == whole.chunks[0]["codes"]
        np.testing.assert_array_equal(out["samples"], whole.samples)


def test_a_token_after_its_frame_makes_the_row_wait_not_change(tts, whole):
    req = tts.open_text(seed=5, **OPTS)
    req.push("Hello world, ")  # "Hello world," is final: its first token rides in the prompt
    assert req.request is not None
    text = req._feed._prompt.trailing
    k = len(text)  # step t takes text token t + 1: steps 0 .. k-1 have theirs
    assert 0 < k < 40
    events = req.events(timeout=60)
    got = [next(events).samples for _ in range(k)]
    assert not text.ready(k)  # step k needs a token not sent yet: the row waits
    frames = tts.engine.status()["frames"]
    time.sleep(0.1)
    assert tts.engine.status()["frames"] == frames  # and makes no frame meanwhile
    assert tts.engine.status()["active_rows"] == 1
    req.push(TEXT[len("Hello world, "):])
    req.close()
    got += [ev.samples for ev in events if isinstance(ev, AudioChunk)]
    assert req.request.stats.chunks[0]["codes"] == whole.chunks[0]["codes"]
    np.testing.assert_array_equal(np.concatenate(got), whole.samples)


def test_a_tokens_projection_does_not_depend_on_the_tokens_beside_it(tts):
    """What makes the streamed text's bits those of the whole text: Talker.text_rows gives
    a token the same row whatever else it is projected with (products of >= 8 rows)."""
    import torch

    talker = tts.loaded.model.talker
    assert talker.min_text_rows == 8
    rng = random.Random(1)
    with torch.inference_mode():
        ids = [rng.randrange(100, 1000) for _ in range(40)]
        whole = talker.text_rows(ids)
        for n in (1, 2, 3, 5, 8, 13, 40):
            start = rng.randrange(0, 40 - n + 1)
            part = talker.text_rows(ids[start:start + n])
            assert torch.equal(part, whole[:, start:start + n]), n


def test_int8_streamed_text_gives_the_whole_texts_codes(dirs, built_kernels):
    model = vocalis.load(str(dirs["customvoice"]), quantize="int8", max_batch=2)
    try:
        want = model.synthesize(TEXT, seed=7, non_streaming_mode=False, **OPTS).chunks[0]["codes"]
        for seed in (0, 1):
            req = model.open_text(seed=7, **OPTS)
            for part in _split(TEXT, random.Random(seed), 15):
                req.push(part)
            req.close()
            assert _collect(req)[1] == want
    finally:
        model.close()


def test_streamed_rows_beside_others_each_equal_alone(tts, whole):
    other_text = "A different request runs beside the streamed one, with its own seed."
    alone = tts.synthesize(other_text, seed=9, non_streaming_mode=False, **OPTS)
    fed = tts.open_text(seed=5, **OPTS)
    fed.push("Hello ")
    side = tts.submit(other_text, seed=9, non_streaming_mode=False, **OPTS)
    out: dict = {}
    reader = threading.Thread(target=lambda: out.update(zip(("samples", "codes"), _collect(fed))))
    reader.start()
    for part in _split(TEXT[len("Hello "):], random.Random(3), 8):
        fed.push(part)
        time.sleep(0.005)
    fed.close()
    side_audio = np.concatenate([ev.samples for ev in side.events(timeout=60)
                                 if isinstance(ev, AudioChunk)])
    reader.join(60)
    assert side.stats.chunks[0]["codes"] == alone.chunks[0]["codes"]
    assert out["codes"] == whole.chunks[0]["codes"]
    assert np.corrcoef(side_audio, alone.samples)[0, 1] > 0.99999
    assert np.corrcoef(out["samples"], whole.samples)[0, 1] > 0.99999


def test_cancel_frees_a_waiting_row(tts):
    req = tts.open_text(seed=1, **OPTS)
    req.push("Hello world ")
    events = req.events(timeout=60)
    next(events)  # it runs, then waits for text
    req.cancel()
    last = [ev for ev in events][-1]
    assert isinstance(last, Finished) and last.stats.cancelled
    deadline = time.monotonic() + 10
    while tts.engine.status()["active_rows"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tts.engine.status()["active_rows"] == 0
    req.push("more")  # ignored after cancel, no error


def test_cancel_before_the_first_token_ends_quietly(tts):
    req = tts.open_text(seed=1, **OPTS)
    req.push("Hel")
    assert req.request is None
    req.cancel()
    (ev,) = list(req.events(timeout=5))
    assert isinstance(ev, Finished) and ev.stats.cancelled


def test_a_short_text_starts_at_close(tts):
    req = tts.open_text(seed=2, **OPTS)
    req.push("Hi")
    assert req.request is None
    req.close()
    alone = tts.synthesize("Hi", seed=2, non_streaming_mode=False, **OPTS)
    samples, codes = _collect(req)
    assert codes == alone.chunks[0]["codes"]


@pytest.mark.parametrize("kwargs, param", [
    (dict(speaker="ryan", non_streaming_mode=True), "non_streaming_mode"),
    (dict(speaker="nobody"), "voice"),
    (dict(speaker="ryan", temperature=-1.0), "temperature"),
])
def test_bad_options_are_refused_before_any_text(tts, kwargs, param):
    with pytest.raises((InputError, VoiceError)) as e:
        tts.open_text(seed=1, **kwargs)
    assert e.value.param == param


def test_text_after_close_and_nothing_to_speak_are_refused(tts):
    req = tts.open_text(seed=1, **OPTS)
    req.push("Hello there ")
    req.close()
    with pytest.raises(InputError, match="after the end"):
        req.push("more")
    list(req.events(timeout=60))
    empty = tts.open_text(seed=1, **OPTS)
    empty.push("   ")
    with pytest.raises(InputError, match="nothing to speak"):
        empty.close()


def test_base_needs_xvector_only_and_pocket_takes_sentences(dirs, checkpoints, voice_files):
    base = vocalis.load(str(dirs["base"]))
    try:
        with pytest.raises(InputError, match="xvector_only") as e:
            base.open_text(seed=1, ref_audio=str(voice_files["24k_mono_pcm16.wav"]), ref_text="Some words.")
        assert e.value.param == "xvector_only"
    finally:
        base.close()
    pocket = vocalis.load(str(checkpoints.get("english_2m_2026-10")))
    try:
        with pytest.raises(InputError, match="sentence by sentence"):
            pocket.open_text(voice=str(checkpoints.get("english_2m_2026-10") / "voice.wav"))
    finally:
        pocket.close()


def _wait_free(tts, timeout=10.0):
    deadline = time.monotonic() + timeout
    while tts.engine.status()["active_rows"] and time.monotonic() < deadline:
        time.sleep(0.01)
    return tts.engine.status()["active_rows"]


def test_too_much_text_ends_the_request_and_frees_its_row(tts):
    req = tts.open_text(seed=1, **OPTS)
    req.push("Hello there ")
    with pytest.raises(InputError, match="stopped there"):
        req.push("word " * 5000)
    with pytest.raises(InputError, match="has ended"):
        req.close()
    last = list(req.events(timeout=30))[-1]
    assert isinstance(last, Finished) and last.stats.cancelled
    assert _wait_free(tts) == 0
    tts.synthesize("Still serving.", seed=1, **OPTS)  # the engine is not stuck


def test_a_bad_piece_is_refused_and_the_request_goes_on(tts, whole):
    req = tts.open_text(seed=5, **OPTS)
    req.push("Hello world, ")
    with pytest.raises(InputError, match="Unicode|surrogate"):
        req.push("my \ud800 friend ")
    req.push(TEXT[len("Hello world, "):])
    req.close()
    assert _collect(req)[1] == whole.chunks[0]["codes"]


def test_a_reader_sees_the_end_when_the_text_is_refused_at_close(tts):
    req = tts.open_text(seed=1, **OPTS)
    seen: list = []
    reader = threading.Thread(target=lambda: seen.extend(req.events(timeout=30)))
    reader.start()
    req.push("😀😀 ...  ")  # nothing speakable: the request does not start on it
    assert req.request is None
    with pytest.raises(InputError, match="nothing to speak"):
        req.close()
    reader.join(30)
    assert not reader.is_alive() and isinstance(seen[-1], Finished) and seen[-1].stats.cancelled
    with pytest.raises(InputError):
        tts.synthesize("😀😀 ...", seed=1, **OPTS)  # as a whole text is refused


def test_symbols_before_the_first_word_start_with_it(tts):
    text = "... Hello there, all."
    want = tts.synthesize(text, seed=3, non_streaming_mode=False, **OPTS).chunks[0]["codes"]
    req = tts.open_text(seed=3, **OPTS)
    req.push("... ")
    assert req.request is None
    for part in ("Hel", "lo there, ", "all."):
        req.push(part)
    req.close()
    assert _collect(req)[1] == want


def test_the_runaway_guard_is_the_whole_texts_once_the_text_is_closed(tts):
    """No max_frames: a random-weight model may never end by itself; the whole text stops at
    its guard (frames from its token count), and so does the streamed one once closed."""
    text = "A short reply."
    whole = tts.synthesize(text, seed=4, speaker="ryan", non_streaming_mode=False)
    req = tts.open_text(seed=4, speaker="ryan")
    req.push("A short ")
    req.push("reply.")
    req.close()
    samples, codes = _collect(req)
    assert codes == whole.chunks[0]["codes"] and len(samples) == len(whole.samples)


def test_a_full_queue_at_the_start_ends_the_streamed_request(dirs):
    from vocalis.errors import CapacityError

    model = vocalis.load(str(dirs["customvoice"]), max_batch=1, max_queue=1)
    try:
        busy = model.submit(TEXT, seed=1, speaker="ryan", max_frames=400)
        next(iter(busy.events(timeout=60)))  # it holds the only row
        waiting = model.submit(TEXT, seed=2, speaker="ryan", max_frames=400)  # the queue
        req = model.open_text(seed=1, **OPTS)
        with pytest.raises(CapacityError):
            req.push("Hello there ")
        (ev,) = list(req.events(timeout=5))  # a reader is not left waiting
        assert isinstance(ev, Finished) and ev.stats.cancelled
        with pytest.raises(InputError, match="has ended"):
            req.push("more")
        busy.cancel()
        waiting.cancel()
    finally:
        model.close()
