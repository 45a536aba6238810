"""Sentences of text that arrives piece by piece (a language model writing, a Wyoming
stream): the one place where front ends decide when a sentence is complete.

:func:`split_sentences` cuts a buffer into complete sentences and the unfinished rest;
:class:`SentenceBuffer` keeps that rest between pieces and tells where each sentence lies
in the whole text received (character offsets, for clients that cut a transcript at an
interruption). Wyoming's streamed synthesis and the server's WebSocket endpoint both use
them, so a text is cut the same way whatever protocol carried it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vocalis.text.normalize import abbreviations_before_names

# Marks that end a sentence wherever they stand (no space needed after them, none of them
# is ever inside a sentence): CJK full stops (。！？ and the half-width ｡), Devanagari danda
# and double danda (। ॥), Arabic question mark and Arabic/Urdu full stop (؟ ۔), Armenian
# full stop (։), Ethiopic full stop and question mark (። ፧), Myanmar section sign (။).
_FULL_STOPS = "\u3002\uff01\uff1f\uff61\u0964\u0965\u061f\u06d4\u0589\u1362\u1367\u104b"

# A sentence ends at . ! ? ... (with closing quotes or brackets) followed by white space,
# at one of the full stops above, or at a line break.
_BOUNDARY = re.compile(
    r"[.!?\u2026]+[\"'\u201d\u2019)\]]*\s+|[" + _FULL_STOPS + r"]+[\"'\u201d\u2019)\]]*\s*|\n+")

# Words whose dot does not end a sentence when a name or a number may follow: the titles and
# abbreviations text normalization reads (one source: its tables; compared in lower case,
# without the dot). Keeping a sentence whole only delays its audio; cutting one in two breaks
# its reading (Dr. | Smith, am 3. | Mai).
_NO_END_AFTER = abbreviations_before_names()


def _ends_sentence(buffer: str, m: re.Match) -> bool | None:
    """Whether the boundary ``m`` ends a sentence; None: not known until more text comes.

    ``!``, ``?``, ``…``, the full stops of ``_FULL_STOPS`` (CJK, danda...) and line breaks
    always do. A ``.`` does when the next character has arrived and is not a lower-case
    letter or a digit (``etc. and``, ``No. 7``),
    and the word before it is not a title or abbreviation (``Dr. Smith``, ``г. Москва``), a
    single letter (``J. Smith``, ``z. B.``) or a number of up to three digits (German and
    Russian ordinals: ``am 3. Mai``).
    """
    if "." not in m.group(0) or re.search(r"[!?\u2026\n" + _FULL_STOPS + "]", m.group(0)):
        return True
    if m.end() >= len(buffer):
        return None
    nxt = buffer[m.end()]
    if nxt.islower() or nxt.isdigit():
        return False
    word = re.search(r"[^\s\"'(\[\u201c\u2018«]*$", buffer[:m.start()]).group(0)
    if word.lower() in _NO_END_AFTER or re.fullmatch(r"[^\W\d_]|\d{1,3}", word):
        return False
    return True


def _stripped(buffer: str, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` narrowed to the non-space text of ``buffer[start:end]``."""
    while start < end and buffer[start].isspace():
        start += 1
    while end > start and buffer[end - 1].isspace():
        end -= 1
    return start, end


def sentence_spans(buffer: str, max_chars: int) -> tuple[list[tuple[int, int]], int]:
    """Where the complete sentences of ``buffer`` lie, and where its unfinished rest begins.

    Returns ``([(start, end), ...], rest_start)``: character offsets into ``buffer`` of each
    sentence without its surrounding white space (empty ones dropped). A sentence ends at a
    boundary (see ``_BOUNDARY``) that :func:`_ends_sentence` accepts (a full stop at the very
    end waits for the next character); a rest longer than ``max_chars`` without one is cut at
    its last space before ``max_chars`` (else at ``max_chars``).
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(buffer):
        ends = _ends_sentence(buffer, m)
        if ends is None:
            break
        if not ends:
            continue
        a, b = _stripped(buffer, start, m.end())
        if a < b:
            spans.append((a, b))
        start = m.end()
    while len(buffer) - start > max_chars:
        cut = buffer.rfind(" ", start, start + max_chars) - start
        cut = cut if cut > 0 else max_chars
        a, b = _stripped(buffer, start, start + cut)
        if a < b:
            spans.append((a, b))
        start += cut
    return spans, start


def split_sentences(buffer: str, max_chars: int) -> tuple[list[str], str]:
    """Complete sentences of ``buffer`` (stripped) and the unfinished rest; see
    :func:`sentence_spans` for the rules."""
    spans, rest = sentence_spans(buffer, max_chars)
    return [buffer[a:b] for a, b in spans], buffer[rest:]


@dataclass(frozen=True)
class Sentence:
    """One sentence of a streamed text: ``text`` and its place in the whole text received,
    ``start``/``end`` character offsets (Python string indices, end exclusive)."""

    text: str
    start: int
    end: int


class SentenceBuffer:
    """Text received piece by piece, given back as complete sentences.

    ``feed(piece)`` returns the sentences ``piece`` completed; ``flush()`` returns the rest
    as the last sentence(s) (the text is over). Offsets count every character fed since the
    buffer was made. ``max_chars``: a text without a sentence end is cut at a space once it
    is this long (see :func:`sentence_spans`).
    """

    def __init__(self, max_chars: int):
        self.max_chars = max_chars
        self.pending = ""    # text not yet part of a sentence
        self.offset = 0      # where ``pending`` begins in the whole text

    def __len__(self) -> int:
        return len(self.pending)

    def _take(self, spans: list[tuple[int, int]], rest: int) -> list[Sentence]:
        out = [Sentence(self.pending[a:b], self.offset + a, self.offset + b) for a, b in spans]
        self.pending = self.pending[rest:]
        self.offset += rest
        return out

    def feed(self, piece: str) -> list[Sentence]:
        self.pending += piece
        return self._take(*sentence_spans(self.pending, self.max_chars))

    def tentative(self) -> Sentence | None:
        """The pending text as a sentence when it ends in ``.``, ``!``, ``?`` or ``…`` whose
        meaning waits for the next character (``Hello there.`` could go on as ``Hello
        there. How``, ``etc. and`` or ``Wow!!``): what :meth:`feed` would give if that
        character were a space and a capital letter, else None. A front end may start speaking it early and drop it if the text
        goes on."""
        text = self.pending.rstrip()
        if not text.rstrip("\"'\u201d\u2019)]").endswith((".", "!", "?", "\u2026")):
            return None
        spans, rest = sentence_spans(text + " X", self.max_chars)
        if len(spans) != 1 or rest != len(text) + 1:
            return None
        a, b = spans[0]
        return Sentence(text[a:b], self.offset + a, self.offset + b)

    def flush(self) -> list[Sentence]:
        spans, rest = sentence_spans(self.pending, self.max_chars)
        a, b = _stripped(self.pending, rest, len(self.pending))
        if a < b:
            spans.append((a, b))
        return self._take(spans, len(self.pending))


__all__ = ["Sentence", "SentenceBuffer", "sentence_spans", "split_sentences"]
