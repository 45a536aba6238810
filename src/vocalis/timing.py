"""Word timestamps: when each word of a request's text is spoken in its audio.

A model family that can align (its ``LoadedModel.word_decoder()`` is not None) gives, for
every frame of a request that asked for timestamps, the attention of that frame's step over
the text tokens of its text chunk (``RowOut.scores``, carried to ``AudioChunk.scores``:
float32 ``[tokens of the chunk]``, summing to 1 over the heads the family uses). This module turns those scores and the decoded audio into words
with start and end times, as the audio is produced:

* the chunk's words come from its tokens: token ``i`` belongs to word ``w`` when the
  decoded prefix ``ids[:i + 1]`` holds ``w + 1`` whitespace-separated words, so a word's
  tokens (and its punctuation) are grouped whatever the tokenizer (SentencePiece or
  byte-level BPE; read from a window of the 8 tokens before each, so in linear time);
  words without a letter or digit are dropped;
* a frame's word scores are its token scores summed per word;
* the spoken word advances monotonically: from the current word to the next one when a
  later word draws more attention than the current one (at most one word per frame;
  the method of Kyutai's pocket-tts PR #280 and the ``pocket-tts-timestamped`` fork: heads
  that attend to the word being spoken, or to the next one during a pause);
* silence places the edges: audio is cut into 10 ms windows (240 samples at 24 kHz) and
  a window is voiced when its RMS exceeds 1e-3 (-60 dBFS); a word starts at the first
  voiced window after the previous word ended and ends after its last voiced window;
* at the end of a chunk, the words not reached yet share the time left after the
  current word's start evenly, so every word of the chunk gets a span inside the chunk's
  audio, in order; a chunk's first word starts at or after the chunk's first sample and
  its last word ends at or before its last (chunk boundaries are exact: they are the
  frame counts of the chunks).

Times are seconds from the start of the request's audio; they are frame-exact at chunk
boundaries and otherwise as precise as the model's attention (Pocket TTS: 38-72 ms mean
error reported by the fork on real weights with the heads used here; Qwen3-TTS: not
measured on real weights).
Speed changes (``speed != 1``) scale every time by ``1 / speed``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: RMS above which a 10 ms window counts as speech (-60 dBFS)
VOICED_RMS = 1e-3
#: samples per voicing window at 24 kHz (10 ms); scaled for other rates
WINDOW_S = 0.010

_WORD = re.compile(r"\S+")
_WINDOW_TOKENS = 8  # tokens before a token that tell whether it starts a word


def _speakable(word: str) -> bool:
    return any(ch.isalnum() for ch in word)


@dataclass
class Word:
    """One word of the input and its time in the audio.

    ``word``: the word as the request's text has it; ``start``/``end``: seconds from the
    start of the request's audio (``start <= end``; equal for a word the model said nothing
    of); ``chunk``: the text chunk it belongs to; ``text_start``/``text_end``: its character
    range in the request's text (see :func:`map_words`).
    """

    word: str
    start: float
    end: float
    chunk: int
    text_start: int | None = None
    text_end: int | None = None

    def as_dict(self) -> dict:
        return {"word": self.word, "start": round(self.start, 4), "end": round(self.end, 4),
                "text_start": self.text_start, "text_end": self.text_end}


def token_words(ids: Sequence[int], decode: Callable[[list[int]], str]) -> tuple[list[str], list[int]]:
    """Group a chunk's tokens into words.

    Args:
        ids: the chunk's text token ids.
        decode: the family's tokenizer ``ids -> text``.
    Returns:
        ``(words, owner)``: the chunk's speakable words (as decoded) and, per token, the
        index of its word in ``words`` (-1 for tokens of no speakable word).
    """
    # Whether token i starts a word is read from a window of the tokens before it (the
    # same window decoded with and without it: one more whitespace-separated piece), so the
    # cost is linear in the chunk's length; a word longer than the window still counts once.
    ids = list(ids)
    owner_raw: list[int] = []
    count = 0
    for i in range(len(ids)):
        if i == 0:
            count = len(_WORD.findall(decode(ids[:1])))
        else:
            s = max(0, i - _WINDOW_TOKENS)
            before = len(_WORD.findall(decode(ids[s:i])))
            count += max(0, len(_WORD.findall(decode(ids[s:i + 1]))) - before)
        owner_raw.append(count - 1)
    raw = _WORD.findall(decode(ids))
    keep: dict[int, int] = {}
    words: list[str] = []
    for j, w in enumerate(raw):
        if _speakable(w):
            keep[j] = len(words)
            words.append(w)
    return words, [keep.get(o, -1) for o in owner_raw]


def _core(word: str) -> str:
    return "".join(ch for ch in word.casefold() if ch.isalnum())


class _ChunkAligner:
    """The monotonic word walk of one text chunk."""

    def __init__(self, index: int, words: list[str], owner: list[int], t0: int,
                 window: int):
        self.index = index
        self.words = words
        self.owner = np.asarray(owner, dtype=np.int64)
        self.window = window
        self.t0 = t0  # the chunk's first sample in the request's audio
        self.t = t0  # one past the last sample seen
        self.cur = -1  # the word being spoken (-1: none yet)
        self.cur_start = 0  # its first sample
        self.last_voiced = t0  # one past the last voiced window seen
        self.waiting = False  # the current word starts at the next voiced window

    def _word_scores(self, scores: np.ndarray | None) -> np.ndarray | None:
        if scores is None or not len(self.words):
            return None
        s = np.zeros(len(self.words), np.float64)
        m = self.owner[: len(scores)] >= 0
        np.add.at(s, self.owner[: len(scores)][m], np.asarray(scores, np.float64)[m])
        return s

    def _voiced(self, samples: np.ndarray) -> list[tuple[int, int]]:
        """Voiced windows of a frame as sample ranges ``[a, b)`` of the request's audio."""
        out = []
        w = self.window
        for a in range(0, len(samples), w):
            seg = samples[a:a + w].astype(np.float64)
            if len(seg) and np.sqrt(np.mean(seg * seg)) > VOICED_RMS:
                out.append((self.t + a, self.t + a + len(seg)))
        return out

    def push(self, samples: np.ndarray, scores: np.ndarray | None) -> list[tuple[int, int, int]]:
        """One frame: returns the words it closed as ``(word, start, end)`` in samples."""
        closed: list[tuple[int, int, int]] = []
        voiced = self._voiced(samples)
        ws = self._word_scores(scores)
        n = len(self.words)
        if n:
            if self.cur < 0:
                if voiced:
                    self.cur, self.cur_start, self.waiting = 0, voiced[0][0], False
            elif self.cur < n - 1 and ws is not None and ws[self.cur + 1:].max() > ws[self.cur]:
                end = max(self.last_voiced, self.cur_start)
                closed.append((self.cur, self.cur_start, end))
                self.cur += 1
                if voiced:
                    self.cur_start, self.waiting = max(voiced[0][0], end), False
                else:
                    self.cur_start, self.waiting = max(self.t, end), True
            elif self.waiting and voiced:
                self.cur_start, self.waiting = max(voiced[0][0], self.cur_start), False
        if voiced:
            self.last_voiced = voiced[-1][1]
        self.t += len(samples)
        return closed

    def finish(self, cut: bool = False) -> list[tuple[int, int, int]]:
        """The chunk's audio is over: close the current word and fit the rest in (``cut``:
        the request was stopped; only the word being spoken is closed)."""
        n = len(self.words)
        if not n:
            return []
        if cut:
            if self.cur < 0:
                return []
            out = [(self.cur, self.cur_start, max(self.cur_start, min(self.t, self.last_voiced)))]
            self.cur = n
            return out
        if self.cur < 0:  # no voiced audio at all: spread the words over the chunk
            self.cur, self.cur_start = 0, self.t0
        left = n - self.cur
        end = max(self.last_voiced, self.cur_start) if left == 1 else self.t
        if left > 1 and self.last_voiced > self.cur_start:
            end = self.last_voiced
        span = max(0, end - self.cur_start)
        out = []
        for k in range(left):
            a = self.cur_start + (span * k) // left
            b = self.cur_start + (span * (k + 1)) // left
            out.append((self.cur + k, a, b))
        self.cur = n
        return out


def map_words(spoken: Sequence[str], said: Sequence[str]) -> list[int]:
    """For each word the model read (``spoken``, in order), the index of the input word
    (``said``) it belongs to: non-decreasing, so that several read words may make one input
    word (``e.g.`` read as ``e. g.``, ``$5`` as ``five dollars``) and an input word may have
    none (characters the model cannot say). Words equal in their letters and digits
    anchor the mapping (difflib's matching blocks); between anchors the read words are
    shared among the input words in order, in proportion."""
    from difflib import SequenceMatcher

    a = [_core(w) for w in spoken]
    b = [_core(w) for w in said]
    out = [0] * len(a)
    i = j = 0
    for bi, bj, n in SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
        m, k = bi - i, bj - j  # a gap: m read words, k input words
        for t in range(m):  # (read words with no input word of their own: the one before)
            out[i + t] = j + t * k // m if k else max(j - 1, 0)
        for t in range(n):
            out[bi + t] = bj + t
        i, j = bi + n, bj + n
    return out if b else [-1] * len(a)


class WordTimer:
    """Word timestamps of one request, built as its audio events come.

    Args:
        text: the request's text (as submitted: the words and their character offsets are
            its own).
        chunks: the request's text chunks as ``(chunk text, token ids)``.
        decode: the family's tokenizer ``ids -> text``.
        sample_rate: Hz of the audio events.
        speed: the request's speed (times are divided by it).

    The model's own words (its tokens, grouped) are timed; :func:`map_words` maps them
    onto the input's words (whitespace-separated pieces holding a letter or digit), so that
    every input word gets exactly one :class:`Word`, with its offsets: the span of its read
    words, or a zero-length one where the model said nothing of it. Feed every
    :class:`~vocalis.engine.types.AudioChunk` to :meth:`push` (it returns the words
    finished by then) and call :meth:`finish` after the last one.
    """

    def __init__(self, text: str, chunks: Sequence[tuple[str, Sequence[int]]],
                 decode: Callable[[list[int]], str], sample_rate: int, speed: float = 1.0):
        self.sample_rate = sample_rate
        self.speed = speed
        self.window = max(1, round(WINDOW_S * sample_rate))
        self.text = text
        self._chunks = [token_words(ids, decode) for _, ids in chunks]
        self._said = [(m.start(), m.end()) for m in _WORD.finditer(text)
                      if _speakable(m.group())]
        spoken = [w for words, _ in self._chunks for w in words]
        self._owner = map_words(spoken, [text[a:b] for a, b in self._said])
        self._base = np.cumsum([0] + [len(w) for w, _ in self._chunks]).tolist()
        self._need = [0] * len(self._said)  # read words per input word
        for o in self._owner:
            self._need[o] += 1
        self._got = [0] * len(self._said)
        self._span: list[list] = [[None, None, 0] for _ in self._said]  # start, end, chunk
        self._next = 0  # the next input word to hand out
        self._t_end = 0.0  # where the last handed-out word ended (s)
        self._cur: _ChunkAligner | None = None
        self._t = 0  # samples so far
        self._done = False

    @property
    def word_count(self) -> int:
        """Words of the input (one :class:`Word` each)."""
        return len(self._said)

    def _open(self, index: int) -> None:
        words, owner = self._chunks[index]
        self._cur = _ChunkAligner(index, words, owner, self._t, self.window)

    def _words(self, al: _ChunkAligner, closed, cut: bool = False) -> list[Word]:
        """Take the read words ``closed`` (``(index in chunk, start, end)`` samples) and
        hand out the input words complete by now (all of them at the end, ``cut``: those
        with some audio)."""
        for w, a, b in closed:
            o = self._owner[self._base[al.index] + w]
            if o < 0:
                continue
            span = self._span[o]
            if span[0] is None:
                span[0], span[2] = a / self.sample_rate / self.speed, al.index
            span[1] = b / self.sample_rate / self.speed
            self._got[o] += 1
        out: list[Word] = []
        while self._next < len(self._said):
            o = self._next
            if self._got[o] < self._need[o] and not (cut and self._got[o]):
                break  # not all of it said yet (stopped: nothing of it said)
            span = self._span[o]
            if span[0] is None:  # nothing of it was said: zero length where it stands
                span[0] = span[1] = self._t_end
                span[2] = al.index
            a, b = self._said[o]
            out.append(Word(self.text[a:b], span[0], max(span[0], span[1]), span[2], a, b))
            self._t_end = max(self._t_end, span[1])
            self._next += 1
        return out

    def _close_to(self, index: int) -> list[Word]:
        """Finish the chunks before ``index`` (those with no audio get zero-length words)."""
        out: list[Word] = []
        while not self._done and (self._cur is None or self._cur.index < index):
            nxt = 0 if self._cur is None else self._cur.index + 1
            if self._cur is not None:
                out += self._words(self._cur, self._cur.finish())
            if nxt >= len(self._chunks):
                self._done = True
                break
            self._open(nxt)
        if self._done:
            out += self._rest()
        return out

    def _rest(self) -> list[Word]:
        """At the very end: the input words not handed out (nothing of them was said)."""
        out = []
        while self._next < len(self._said):
            o = self._next
            span = self._span[o]
            start = self._t_end if span[0] is None else span[0]
            end = max(start, self._t_end if span[1] is None else span[1])
            a, b = self._said[o]
            out.append(Word(self.text[a:b], start, end, span[2] if span[0] is not None
                            else max(0, len(self._chunks) - 1), a, b))
            self._t_end = end
            self._next += 1
        return out

    def push(self, samples: np.ndarray, chunk: int, scores: np.ndarray | None) -> list[Word]:
        """One frame of audio (``samples [n]`` float at the model rate, before any speed
        change) of text chunk ``chunk`` with its attention ``scores``; returns the words
        that ended by then."""
        out = self._close_to(chunk)
        if self._cur is not None and not self._done:
            out += self._words(self._cur, self._cur.push(samples, scores))
        self._t += len(samples)
        return out

    def finish(self, cut: bool = False) -> list[Word]:
        """The request's audio is over: the remaining words. ``cut``: it was stopped
        (cancelled) before its end; only the words with some audio are given (the one being
        spoken ends at the last voiced audio)."""
        if cut:
            if self._cur is None or self._done:
                return []
            self._done = True
            return self._words(self._cur, self._cur.finish(cut=True), cut=True)
        return self._close_to(len(self._chunks))


__all__ = ["VOICED_RMS", "Word", "WordTimer", "map_words", "token_words"]
