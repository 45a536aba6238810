"""Word timestamps (vocalis.timing): the word walk against hand-worked cases, the attention
reader against PyTorch's own attention, and the Pocket TTS engine end to end (random
weights: the attention is arbitrary, so only the guarantees are checked — every word once,
in order, inside its chunk's audio, the audio unchanged)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from tests.engine.pocket_2m import load_2m
from vocalis.engine.types import AudioChunk, Finished
from vocalis.errors import InputError
from vocalis.models.pocket.layers import Attention
from vocalis.models.text_attention import TextAttention
from vocalis.timing import WordTimer, map_words, token_words

SR, FRAME = 24000, 1920
PIECES = ["\u2581One", "\u2581two", ",", "\u2581three", "."]


def decode(ids: list[int]) -> str:
    return "".join(PIECES[i] for i in ids).replace("\u2581", " ").strip()


def frame(voiced_from: int = 0, amp: float = 0.1) -> np.ndarray:
    x = np.zeros(FRAME, np.float32)
    if voiced_from < FRAME:
        x[voiced_from:] = amp
    return x


def scores_for(token: int) -> np.ndarray:
    s = np.full(len(PIECES), 0.01, np.float32)
    s[token] = 1.0
    return s / s.sum()


def test_tokens_group_into_words_with_their_punctuation():
    words, owner = token_words(list(range(5)), decode)
    assert words == ["One", "two,", "three."]
    assert owner == [0, 1, 1, 2, 2]


def test_the_walk_follows_attention_and_silence_by_hand():
    t = WordTimer("One two, three.", [("One two, three.", list(range(5)))], decode, SR)
    got = []
    got += t.push(frame(FRAME), 0, None)           # f0 silent: nothing starts
    got += t.push(frame(0), 0, scores_for(0))      # f1 voiced: "One" starts at 0.08 s
    got += t.push(frame(0), 0, scores_for(0))      # f2
    got += t.push(frame(0), 0, scores_for(1))      # f3: "two," draws more: One ends at 0.24
    assert [(w.word, w.start, w.end) for w in got] == [("One", 0.08, 0.24)]
    got += t.push(frame(FRAME), 0, scores_for(3))  # f4 silent: two, ends at its last voice
    got += t.push(frame(960), 0, scores_for(3))    # f5 voiced from its middle: three. starts
    got += t.finish()
    assert [(w.word, w.start, w.end) for w in got] == [
        ("One", 0.08, 0.24), ("two,", 0.24, 0.32), ("three.", (5 * FRAME + 960) / SR, 0.48)]
    assert [(w.text_start, w.text_end) for w in got] == [(0, 3), (4, 8), (9, 15)]


def test_words_not_reached_share_the_rest_of_the_chunk():
    t = WordTimer("One two, three.", [("One two, three.", list(range(5)))], decode, SR)
    for _ in range(4):
        assert t.push(frame(0), 0, None) == []
    got = t.finish()
    third = 4 * FRAME // 3
    assert [(w.start, w.end) for w in got] == [
        (0.0, third / SR), (third / SR, 2 * third / SR), (2 * third / SR, 4 * FRAME / SR)]


def test_a_cut_request_gives_only_the_word_being_spoken():
    t = WordTimer("One two, three.", [("One two, three.", list(range(5)))], decode, SR)
    got = t.push(frame(0), 0, scores_for(0)) + t.push(frame(0), 0, scores_for(1))
    got += t.finish(cut=True)
    assert [(w.word, w.start, w.end) for w in got] == [("One", 0.0, 0.08), ("two,", 0.08, 0.16)]


@pytest.mark.parametrize("spoken, said, want", [
    (["It", "costs", "five", "dollars", "today."], ["It", "costs", "$5", "today."],
     [0, 1, 2, 2, 3]),                                   # normalized: two read words, one said
    (["e.", "g.", "like", "this"], ["e.g.", "like", "this"], [0, 0, 1, 2]),
    (["Hello", "world."], ["Hello", "\u041f\u0440\u0438\u0432\u0435\u0442", "world."], [0, 2]),
    (["one", "two", "extra"], ["one", "two"], [0, 1, 1]),  # a read word of no input word
])
def test_read_words_map_onto_the_input_words(spoken, said, want):
    assert map_words(spoken, said) == want


def test_every_input_word_gets_one_entry_even_what_the_model_did_not_say():
    """Input words are the text's own: a word the tokenizer lost still gets its entry
    (zero length where it stands), one the model read as two gets one."""
    text = "One \u041f\u0440\u0438\u0432\u0435\u0442 two, three."
    t = WordTimer(text, [(decode(list(range(5))), list(range(5)))], decode, SR)
    got = []
    for token in (0, 0, 1, 1, 3, 3):
        got += t.push(frame(0), 0, scores_for(token))
    got += t.finish()
    assert [w.word for w in got] == text.split()
    assert [text[w.text_start:w.text_end] for w in got] == text.split()
    assert got[1].start == got[1].end == got[0].end
    for a, b in zip(got, got[1:]):
        assert a.start <= a.end <= b.start


@pytest.mark.parametrize("seed", range(6))
def test_random_attention_keeps_every_guarantee(seed):
    rng = np.random.default_rng(seed)
    chunks, frames = [], []
    for c in range(int(rng.integers(1, 4))):
        ids = [int(i) for i in rng.integers(0, 5, size=int(rng.integers(1, 9)))]
        chunks.append((decode(ids), ids))
        frames.append(int(rng.integers(0, 12)))
    text = " ".join(c[0] for c in chunks)
    t = WordTimer(text, chunks, decode, SR)
    got = []
    for c, n in enumerate(frames):
        for _ in range(n):
            x = frame(int(rng.integers(0, FRAME + 1)), float(rng.choice([0.0, 0.1])))
            s = rng.random(len(chunks[c][1])).astype(np.float32)
            got += t.push(x, c, s / s.sum() if rng.random() > 0.2 else None)
    got += t.finish()
    assert len(got) == t.word_count == sum(len(token_words(ids, decode)[0]) for _, ids in chunks)
    bounds = np.cumsum([0] + frames) * FRAME / SR
    for a, b in zip(got, got[1:]):
        assert a.end <= b.start + 1e-9 and a.chunk <= b.chunk
    for w in got:
        assert bounds[w.chunk] - 1e-9 <= w.start <= w.end <= bounds[w.chunk + 1] + 1e-9


def test_the_attention_reader_is_the_attention_the_step_uses():
    """The reader's weights, applied to the cache's values, give PyTorch's
    scaled_dot_product_attention output of the same step, head by head."""
    torch.manual_seed(0)
    attn = Attention(32, heads=4, max_period=10000.0, kv_heads=2)
    data = torch.randn(2, 2, 2, 16, 8)  # [2, rows, Hkv, slots, D]
    x = torch.randn(2, 1, 32)
    pos = torch.tensor([5, 7])
    keys = torch.arange(8)
    mask = (keys[None, :] <= pos[:, None])[:, None, None, :]  # [B, 1, 1, S]
    seen = {}
    real = attn._attend

    def spy(q, k, v, m):
        seen.update(q=q, k=k, v=v, m=m)
        return real(q, k, v, m)

    attn._attend = spy
    for head in range(4):
        probe = TextAttention({0: (0, 6), 1: (0, 8)}, {0: (head,)})
        attn.forward_rows(x, data.clone(), slice(0, 2), pos, pos[:, None], mask, probe, 0)
        k = seen["k"].repeat_interleave(2, dim=1)  # [B, Hkv, S, D] -> [B, H, S, D]
        v = seen["v"].repeat_interleave(2, dim=1)
        want = F.scaled_dot_product_attention(seen["q"], k, v, seen["m"])  # [B, H, 1, D]
        for b, n in ((0, 6), (1, 8)):
            p = torch.from_numpy(probe.scores(b))
            assert p.shape == (n,) and abs(float(p.sum()) - 1) < 1e-5
            got = p @ v[b, head, :n]
            torch.testing.assert_close(got, want[b, head, 0], rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ Pocket TTS end to end

TEXT = ("The quick brown fox jumps over the lazy dog. It was a bright cold day in April, "
        "and the clocks were striking thirteen.")


@pytest.fixture(scope="module")
def tts(checkpoints):
    t = load_2m(checkpoints, 4, 16)
    yield t
    t.close()


def _input_words(text: str) -> list[str]:
    return [w for w in text.split() if any(c.isalnum() for c in w)]


def test_pocket_words_cover_the_text_inside_each_chunk_and_leave_the_audio_alone(tts):
    plain = tts.synthesize(TEXT, tts.test_voice, seed=5, max_tokens=8)
    timed = tts.synthesize(TEXT, tts.test_voice, seed=5, max_tokens=8, word_timestamps=True)
    assert np.array_equal(plain.samples, timed.samples)
    assert plain.words is None
    assert len(timed.chunks) >= 2
    words = timed.words
    assert [w.word for w in words] == _input_words(TEXT)
    for w in words:
        assert TEXT[w.text_start:w.text_end] == w.word
    ends = np.cumsum([0] + [c["frames"] for c in timed.chunks]) * FRAME / SR
    assert ends[-1] == pytest.approx(timed.duration_s)
    for a, b in zip(words, words[1:]):
        assert a.start <= a.end <= b.start
    for w in words:
        assert ends[w.chunk] - 1e-9 <= w.start <= w.end <= ends[w.chunk + 1] + 1e-9


def test_pocket_frames_carry_attention_over_their_chunk_tokens(tts):
    req = tts.submit(TEXT, tts.test_voice, seed=5, max_tokens=8, word_timestamps=True)
    evs = list(req.events())
    stats = evs[-1].stats
    scored = [e for e in evs if isinstance(e, AudioChunk) and e.scores is not None]
    assert scored, "no frame carried attention scores"
    for e in scored:
        n = len(stats.chunks[e.chunk]["token_ids"])
        assert e.scores.shape == (n,) and abs(float(e.scores.sum()) - 1) < 1e-4
    said = [w for e in evs for w in (e.words or [])]
    assert [w.word for w in said] == _input_words(TEXT)
    assert isinstance(evs[-1], Finished)


def test_pocket_speed_scales_the_times(tts):
    a = tts.synthesize(TEXT, tts.test_voice, seed=5, word_timestamps=True)
    b = tts.synthesize(TEXT, tts.test_voice, seed=5, word_timestamps=True, speed=2.0)
    assert [w.word for w in b.words] == [w.word for w in a.words]
    for x, y in zip(a.words, b.words):
        assert y.start == pytest.approx(x.start / 2) and y.end == pytest.approx(x.end / 2)
    assert b.words[-1].end <= b.duration_s + FRAME / SR


def test_word_timestamps_must_be_a_bool(tts):
    with pytest.raises(InputError, match="word_timestamps must be true or false"):
        tts.synthesize("Hello.", tts.test_voice, word_timestamps="yes")


def test_the_chosen_heads_exist_in_their_configs():
    """The heads taken from the pocket-tts-timestamped fork name layers and heads that the
    config's FlowLM has, and only released configs have them."""
    from vocalis.models.pocket import registry

    named = [n for n in registry.config_names() if registry.timestamp_heads(n)]
    assert "english_2026-09" in named and "english_2m_2026-10" not in named
    for name in named:
        t = registry.released_config(name).flow_lm.transformer
        for layer, heads in registry.timestamp_heads(name).items():
            assert 0 <= layer < t.num_layers and all(0 <= h < t.num_heads for h in heads)
    assert registry.timestamp_heads("/some/folder/config.yaml") is None


def test_words_of_real_tokenizers_match_their_decoded_text(checkpoints, tmp_path):
    """token_words with the families' own tokenizers (SentencePiece, byte-level BPE): the
    words are the decoded text's, and each word's tokens decode to that word; checked
    against the prefix rule (the word count of the decoded prefix up to each token)."""
    import re

    from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint
    from vocalis.models.qwen3.text import Qwen3TextTokenizer

    sp = load_2m(checkpoints, 1, 1)
    try:
        pocket_tok = sp.loaded.model.tokenizer
    finally:
        sp.close()
    qdir = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "q", seed=1,
                                   tiny=True)
    qwen_tok = Qwen3TextTokenizer.from_dir(qdir)
    text = ("Well, it's 3.5 km to the station... isn't it? Ja, natürlich: «très bien» "
            "and a longwordwithoutanyspacesatallthatkeepsgoing, then (done).")
    for tok in (pocket_tok, qwen_tok):
        ids = tok.encode(text)
        words, owner = token_words(ids, tok.decode)
        pieces = [w for w in re.findall(r"\S+", tok.decode(ids))
                  if any(c.isalnum() for c in w)]
        assert words == pieces
        prefix = [len(re.findall(r"\S+", tok.decode(ids[:i + 1]))) - 1 for i in range(len(ids))]
        raw = re.findall(r"\S+", tok.decode(ids))
        keep = {j: k for k, j in enumerate(j for j, w in enumerate(raw)
                                           if any(c.isalnum() for c in w))}
        assert owner == [keep.get(p, -1) for p in prefix]
