"""Sentences of streamed text (vocalis.text.sentences): the rules Wyoming and the
WebSocket endpoint share, and the offsets of each sentence in the whole text."""

from __future__ import annotations

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
