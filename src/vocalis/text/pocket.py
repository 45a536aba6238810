"""Text preparation and chunking for Pocket TTS.

The model was trained on single sentences that start with a capital and end with
sentence punctuation, so the official package rewrites the text and splits long
inputs at sentence boundaries (found on *tokens*) into chunks of at most
``max_tokens`` tokens. Tokens decide the audio, so these rules reproduce
pocket-tts 4.0.1 ``models/text_chunking.py`` exactly; the tests compare the
chunks and token ids with the official functions.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Protocol

from vocalis.errors import InputError

log = logging.getLogger(__name__)

SENTENCE_END = ".!?\u2026"
WEAK_END = ",;:-\u2013\u2014"
CLOSERS = "\"'\u201d\u2019)]\u00bb"
_STRAY_AFTER_END = re.compile(r"([.!?\u2026])\s*[,;:]")


class Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: list[int]) -> str: ...


@dataclass(frozen=True)
class TextRules:
    """Per-config text rules (the config file's top-level flags)."""

    pad_with_spaces_for_short_inputs: bool = False
    remove_semicolons: bool = False
    append_terminal_punctuation: bool = True
    capitalize_first_letter: bool = True
    replace_characters: dict[str, str] = field(default_factory=dict)


def _terminal_punctuation(text: str) -> str:
    core = text.rstrip(CLOSERS + " ")
    closers = text[len(core):].strip()
    if not core or core[-1] in SENTENCE_END:
        return text
    if core[-1] in WEAK_END:
        return core.rstrip(WEAK_END + " ") + "." + closers
    return text + "."


def prepare(text: str, rules: TextRules) -> tuple[str, int]:
    """Rewrite one prompt as the model expects; returns ``(text, frames_after_eos_guess)``.

    Steps: strip; character replacements then whitespace collapse and removal of a stray
    ``,;:`` after sentence punctuation; newlines to spaces (and one pass of double-space
    removal); ``;`` -> ``,`` if configured; capitalize the first character; make the text
    end with sentence punctuation; prefix 8 spaces to short inputs if configured. The guess
    is 3 frames after EOS for texts of at most 4 words, else 1.

    Raises:
        InputError: nothing speakable is left (empty or only removed characters).
    """
    text = text.strip()
    if rules.replace_characters:
        text = " ".join(text.translate(str.maketrans(rules.replace_characters)).split())
        text = _STRAY_AFTER_END.sub(r"\1", text)
    if text == "":
        raise InputError("text is empty: give some words to speak")
    text = text.replace("\n", " ").replace("\r", " ").replace("  ", " ")
    if rules.remove_semicolons:
        text = text.replace(";", ",")
    guess = 3 if len(text.split()) <= 4 else 1
    if rules.capitalize_first_letter and not text[0].isupper():
        text = text[0].upper() + text[1:]
    if rules.append_terminal_punctuation:
        text = _terminal_punctuation(text)
    if rules.pad_with_spaces_for_short_inputs and len(text.split()) < 5:
        text = " " * 8 + text
    return text, guess


_WINDOW = 16


def _around(tok: Tokenizer, ids: list[int], i: int) -> tuple[str, str]:
    """The end of ``decode(ids[:i])`` and the start of ``decode(ids[i:])``.

    The official code decodes the whole prefix and suffix at every boundary, which is
    quadratic in the text length. Decoding is a concatenation of token pieces except at the
    very start (leading-space removal) and inside multi-byte byte-fallback runs, so a window
    of tokens gives the same last two / first characters once it decodes to enough text;
    otherwise fall back to the full decode.
    """
    head = tok.decode(ids[i - _WINDOW:i]) if i > _WINDOW else ""
    if len(head) < 8:
        head = tok.decode(ids[:i])
    tail = tok.decode(ids[i:i + _WINDOW])
    if not tail and len(ids) > i + _WINDOW:
        tail = tok.decode(ids[i:])
    return head[-2:], tail[:1]


def _boundaries(ids: list[int], marks: set[int], tok: Tokenizer | None) -> list[int]:
    """Segment starts: the first non-mark token after a run of mark tokens.

    With a tokenizer, a boundary right after ``<digit>.`` followed by a digit (a decimal
    number) is skipped; the check decodes the token prefix and suffix as the official does.
    """
    starts = [0]
    after_mark = False
    for i, t in enumerate(ids):
        if t in marks:
            after_mark = True
            continue
        if after_mark:
            is_decimal = False
            if tok is not None:
                head, tail = _around(tok, ids, i)
                is_decimal = (len(head) >= 2 and head[-1] == "." and head[-2].isdigit()
                              and bool(tail) and tail[0].isdigit())
            if not is_decimal:
                starts.append(i)
        after_mark = False
    starts.append(len(ids))
    return starts


def _segments(ids: list[int], starts: list[int], tok: Tokenizer) -> list[tuple[int, str]]:
    return [(b - a, tok.decode(ids[a:b])) for a, b in zip(starts, starts[1:])]


def split_chunks(tok: Tokenizer, text: str, max_tokens: int, rules: TextRules) -> list[str]:
    """Split ``text`` into chunks of at most ``max_tokens`` tokens at sentence ends.

    Sentences longer than ``max_tokens`` are split again after ``,;:``; consecutive
    segments are packed greedily (joined by one space) while their token counts sum to at
    most ``max_tokens``. A single segment may still exceed it (a warning is logged).

    Raises:
        InputError: empty text, or ``max_tokens < 1``.
    """
    if max_tokens < 1:
        raise InputError(f"max_tokens must be >= 1, got {max_tokens}")
    text, _ = prepare(text, rules)
    ids = tok.encode(text.strip())
    sentence_marks = set(tok.encode(".!...?")[1:])
    segments = _segments(ids, _boundaries(ids, sentence_marks, tok), tok)

    clause_marks = set(tok.encode(",;:")[1:])
    refined: list[tuple[int, str]] = []
    for n, seg in segments:
        if n > max_tokens:
            sub_ids = tok.encode(seg.strip())
            subs = _segments(sub_ids, _boundaries(sub_ids, clause_marks, None), tok)
            if len(subs) > 1:
                refined.extend(subs)
                continue
        refined.append((n, seg))

    chunks: list[str] = []
    current, count = "", 0
    for n, seg in refined:
        if current == "":
            current, count = seg, n
        elif count + n > max_tokens:
            chunks.append(current.strip())
            current, count = seg, n
        else:
            current += " " + seg
            count += n
    if current != "":
        chunks.append(current.strip())
    out: list[str] = []
    for chunk in chunks:
        n = len(tok.encode(chunk.strip()))
        if n > max(HARD_LIMIT_TOKENS, HARD_LIMIT_FACTOR * max_tokens):
            # Beyond what the official code would survive (its caches and masks grow with the
            # square of this): split at spaces. Only such texts differ from the official chunks.
            log.warning("a passage of %d tokens has no sentence or clause punctuation; "
                        "splitting it at spaces into chunks of at most %d tokens", n, max_tokens)
            out.extend(_split_words(tok, chunk, max_tokens))
            continue
        if n > max_tokens:
            log.warning("chunk has %d tokens (max %d); the model may skip words: %.50r", n,
                        max_tokens, chunk)
        out.append(chunk)
    return out


HARD_LIMIT_FACTOR = 2
HARD_LIMIT_TOKENS = 1000


def _split_words(tok: Tokenizer, text: str, max_tokens: int) -> list[str]:
    pieces: list[str] = []
    current: list[str] = []
    for word in text.split():
        if current and len(tok.encode(" ".join(current + [word]))) > max_tokens:
            pieces.append(" ".join(current))
            current = []
        current.append(word)
    if current:
        pieces.append(" ".join(current))
    return pieces
