"""Text preparation and chunking for Pocket TTS.

The model was trained on single sentences that start with a capital and end with
sentence punctuation, so the official package rewrites the text and splits long
inputs at sentence boundaries (found on *tokens*) into chunks of at most
``max_tokens`` tokens. Tokens decide the audio, so these rules reproduce
pocket-tts 4.0.1 ``models/text_chunking.py`` exactly; the tests compare the
chunks and token ids with the official functions. One deliberate difference: no
chunk exceeds :func:`chunk_token_bound` tokens (the official code keeps a passage
without punctuation whole, however long).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from vocalis.errors import InputError, NothingToSpeak
from vocalis.options import check_unicode  # noqa: F401  (re-exported: the text rules use it)

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
        raise InputError("text is empty: give some words to speak", param="input")
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
    most ``max_tokens``. A single segment may still exceed it, as in the official code (a
    warning is logged), up to :func:`chunk_token_bound` tokens (250 by default, 2000 at
    most); longer ones are split at spaces, and words inside them at character boundaries,
    into pieces of at most ``min(max_tokens, bound // 2)`` tokens. So no prepared chunk has
    more than ``chunk_token_bound(max_tokens)`` tokens, whatever the text.

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
    return _bound_chunks(tok, chunks, max_tokens, rules)


#: Official parity zone: a chunk of up to ``max(PARITY_TOKENS, 2 * max_tokens)`` tokens (one
#: sentence or clause without punctuation inside) is kept whole, as the official code does.
#: A chunk's prompt pass runs between the other rows' steps, so this also bounds how long one
#: request stalls the others (a pass's time grows with its tokens; figures:
#: docs/limitations.md).
PARITY_TOKENS = 250
#: Hard bound: no chunk ever has more tokens than this, whatever ``max_tokens`` and the text.
MAX_CHUNK_TOKENS = 2000


def chunk_token_bound(max_tokens: int) -> int:
    """The most tokens one prepared chunk can have for ``max_tokens``:
    ``min(MAX_CHUNK_TOKENS, max(PARITY_TOKENS, 2 * max_tokens))`` (250 for the default 50)."""
    return min(MAX_CHUNK_TOKENS, max(PARITY_TOKENS, 2 * max_tokens))


def _bound_chunks(tok: Tokenizer, chunks: list[str], max_tokens: int,
                  rules: TextRules) -> list[str]:
    """Keep chunks within :func:`chunk_token_bound`; split the longer ones into pieces of at
    most ``min(max_tokens, bound // 2)`` tokens (at spaces, and inside words longer than
    that). Only such chunks differ from the official ones (which grow caches and masks with
    the square of their length)."""
    bound = chunk_token_bound(max_tokens)
    piece = min(max_tokens, bound // 2)
    out: list[str] = []
    over: list[int] = []
    for chunk in chunks:
        n = len(tok.encode(prepare(chunk, rules)[0]))
        if n > bound:
            log.warning("a passage of %d tokens has no sentence or clause punctuation (the "
                        "limit is %d): splitting it at spaces, and inside words longer than "
                        "%d tokens, into chunks of at most %d tokens", n, bound, piece, piece)
            out.extend(_split_long(tok, chunk, piece))
            continue
        if n > max_tokens:
            over.append(n)
        out.append(chunk)
    if over:
        log.warning("%d chunk(s) exceed max_tokens=%d (the longest has %d tokens): a sentence "
                    "without punctuation is kept whole as the official code does; the model "
                    "may skip words", len(over), max_tokens, max(over))
    return out


def _split_long(tok: Tokenizer, text: str, limit: int) -> list[str]:
    """Greedy pieces of ``text`` of about ``limit`` tokens each: whole words where they fit
    (token counts of words taken alone), words of more than ``limit`` tokens cut at character
    boundaries into pieces of at most ``limit`` tokens. Linear in the text length."""
    pieces: list[str] = []
    current: list[str] = []
    count = 0
    for word in text.split():
        n = len(tok.encode(word))
        if n > limit:
            if current:
                pieces.append(" ".join(current))
                current, count = [], 0
            pieces.extend(_cut_word(tok, word, n, limit))
            continue
        if current and count + n > limit:
            pieces.append(" ".join(current))
            current, count = [], 0
        current.append(word)
        count += n
    if current:
        pieces.append(" ".join(current))
    return pieces


def _cut_word(tok: Tokenizer, word: str, n_tokens: int, limit: int) -> list[str]:
    """``word`` (``n_tokens`` tokens) in slices of at most ``limit`` tokens each, cut between
    characters (never inside a UTF-8 sequence), sized from the word's characters per token."""
    size = max(1, int(limit * len(word) / n_tokens))
    out: list[str] = []
    i = 0
    while i < len(word):
        step = size
        while step > 1 and (n := len(tok.encode(word[i:i + step]))) > limit:
            step = max(1, min(step - 1, step * limit // n))
        out.append(word[i:i + step])
        i += step
    return out


_PROBE = "\U000F0000"  # a private-use character no tokenizer has a piece for


@lru_cache(maxsize=16)
def _unknown_ids(tok: Tokenizer) -> frozenset[int]:
    """Ids the tokenizer gives to characters it has no piece for (``<unk>``, or the bytes of
    a byte-fallback tokenizer); not the bare word-start piece that comes with them."""
    return frozenset(i for i in tok.encode(_PROBE) if tok.decode([i]).strip())


#: scripts by the first word of their letters' Unicode names, in words; with the language a
#: Qwen3-TTS model speaks in them (its ``language`` value), where there is one
_SCRIPTS = {"CJK": ("Chinese characters (Han)", "chinese"),
            "HIRAGANA": ("Japanese kana", "japanese"), "KATAKANA": ("Japanese kana", "japanese"),
            "HANGUL": ("Korean Hangul", "korean"), "CYRILLIC": ("Cyrillic", "russian")}


def _scripts(letters) -> list[str]:
    """The scripts of ``letters`` in words, in order of first appearance (Chinese characters
    (Han), Japanese kana, Korean Hangul, Devanagari, Arabic...)."""
    out: list[str] = []
    for c in letters:
        first = unicodedata.name(c, "").split(" ")[0]
        if first in ("", "LATIN", "FULLWIDTH"):  # Latin letters the vocabulary lacks: rare
            continue
        name = _SCRIPTS.get(first, (f"{first.title()} script", None))[0]
        if name not in out:
            out.append(name)
    return out


def _other_model(scripts: list[str]) -> str:
    """What to do about text in ``scripts`` (see :func:`_scripts`): the Qwen3-TTS language
    that reads them, else words in a language the model speaks."""
    languages = {name: lang for name, lang in _SCRIPTS.values()}
    langs = [languages[s] for s in scripts if languages.get(s)]
    if not langs:
        return ("no model vocalis runs reads that script yet; give text in a language this "
                "model speaks (Pocket TTS models read Latin letters)")
    lang = "japanese" if "japanese" in langs else langs[0]
    return (f"for {lang.title()} use a Qwen3-TTS model (e.g. qwen3-tts/0.6b-customvoice, "
            f"language {lang}), or give text in a language this model speaks")


def check_speakable(tok: Tokenizer, text: str) -> None:
    """Refuse text in which the tokenizer finds no letter or digit it knows (emoji, symbols,
    control characters or punctuation only); warn about characters it maps to unknown.

    Raises:
        NothingToSpeak: nothing speakable (the message shows the text's start).
    """
    ids = tok.encode(text)
    unknown = _unknown_ids(tok)
    known = set(ids) - unknown
    if not any(any(c.isalnum() for c in tok.decode([i])) for i in known):
        scripts = _scripts(c for c in text if c.isalpha())
        if scripts:  # letters, of a script the vocabulary does not have
            raise NothingToSpeak(f"text has nothing the model can speak: {text[:40]!r} is "
                                 f"written in {' and '.join(scripts)}, and this Pocket TTS model "
                                 f"has no letters for it: {_other_model(scripts)}", param="input")
        raise NothingToSpeak(f"text has nothing the model can speak: {text[:40]!r} holds no "
                             "letter or digit the model knows (only emoji, symbols, punctuation "
                             "or control characters): write the words out", param="input")
    if unknown & set(ids):
        chars = sorted({c for c in set(text) if not c.isspace() and unknown & set(tok.encode(c))})
        log.warning("%d kind(s) of character are not in the model's vocabulary and are spoken "
                    "as an unknown sound: %s; write them out in words", len(chars),
                    " ".join(f"{c!r}" for c in chars[:10]) + (" ..." if len(chars) > 10 else ""))
