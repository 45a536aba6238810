"""Sentences of streamed text (vocalis.text.sentences): the rules Wyoming and the
WebSocket endpoint share, and the offsets of each sentence in the whole text."""

from __future__ import annotations

import pytest

from vocalis.text.sentences import Sentence, SentenceBuffer, sentence_spans, split_sentences


def test_spans_point_at_the_stripped_sentences():
    text = "  One.  Two!\nThree? Fo"
    spans, rest = sentence_spans(text, 100)
    assert [text[a:b] for a, b in spans] == ["One.", "Two!", "Three?"]
    assert text[rest:] == "Fo"
    assert split_sentences(text, 100) == (["One.", "Two!", "Three?"], "Fo")


def test_buffer_fed_piece_by_piece_gives_offsets_into_the_whole_text():
    pieces = ["Hel", "lo Dr", ". Smith. How", " are you", "? I am", " fine"]
    whole = "".join(pieces)
    buf = SentenceBuffer(100)
    out: list[Sentence] = []
    for p in pieces:
        out += buf.feed(p)
    out += buf.flush()
    assert [s.text for s in out] == ["Hello Dr. Smith.", "How are you?", "I am fine"]
    for s in out:
        assert whole[s.start:s.end] == s.text
    assert len(buf) == 0 and buf.flush() == []


def test_buffer_cuts_a_long_text_without_an_end_at_a_space():
    buf = SentenceBuffer(8)
    assert [s.text for s in buf.feed("aaa bbb ccc")] == ["aaa bbb"]
    rest = buf.flush()
    assert [(s.text, s.start, s.end) for s in rest] == [("ccc", 8, 11)]


def test_a_full_stop_at_the_end_waits_for_the_next_character():
    buf = SentenceBuffer(100)
    assert buf.feed("Hello there.") == []
    assert buf.feed(" ") == []
    assert [s.text for s in buf.feed("Next")] == ["Hello there."]


def test_full_stops_of_other_scripts_end_a_sentence():
    # Devanagari danda and double danda, CJK, Arabic question mark, Urdu full stop,
    # Armenian and Ethiopic full stops: each ends a sentence as "." / "!" / "?" do.
    cases = [
        ("नमस्ते। आप कैसे हैं॥ ठीक", ["नमस्ते।", "आप कैसे हैं॥"], "ठीक"),
        ("你好。世界！真的？好", ["你好。", "世界！", "真的？"], "好"),
        ("こんにちは｡元気", ["こんにちは｡"], "元気"),
        ("كيف حالك؟ بخير", ["كيف حالك؟"], "بخير"),
        ("آپ کیسے ہیں۔ ٹھیک", ["آپ کیسے ہیں۔"], "ٹھیک"),
        ("Բարեւ։ Ինչպես", ["Բարեւ։"], "Ինչպես"),
        ("ሰላም። እንዴት ነህ፧ ደህና", ["ሰላም።", "እንዴት ነህ፧"], "ደህና"),
    ]
    for text, sentences, rest in cases:
        assert split_sentences(text, 1000) == (sentences, rest), text


def test_a_danda_at_the_end_of_a_piece_ends_the_sentence_at_once():
    buf = SentenceBuffer(100)
    assert [s.text for s in buf.feed("नमस्ते।")] == ["नमस्ते।"]
    assert [(s.text, s.start, s.end) for s in buf.feed(" आप कैसे हैं॥")] == [("आप कैसे हैं॥", 8, 20)]


@pytest.mark.parametrize("text, guess", [
    ("Hello there.", "Hello there."), ("Hello there. ", "Hello there."),
    ("Wow!", "Wow!"), ('He said "go."', 'He said "go."'), ("Hmm\u2026", "Hmm\u2026"),
    ("I like apples etc.", "I like apples etc."),
    ("Meet Dr.", None), ("It is 3.", None), ("J.", None), ("Hello there", None),
])
def test_a_rest_that_may_end_a_sentence_is_offered_as_a_guess(text, guess):
    """The guess is what the buffer gives once a space and a capital letter follow."""
    buf = SentenceBuffer(4096)
    done = buf.feed("First one. ") + buf.feed(text)
    assert [s.text for s in done] == ["First one."]
    got = buf.tentative()
    if guess is None:
        assert got is None
        return
    assert got.text == guess and got.start == len("First one. ")
    confirmed = buf.feed(" Next")
    assert confirmed == [got]
