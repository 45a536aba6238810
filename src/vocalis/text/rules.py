"""The machinery of text normalization shared by every language's rules: one left-to-right
regular-expression pass (:class:`Rules`), number words (num2words), date and Roman-numeral
checks. The languages' rules live in :mod:`vocalis.text.normalize` (English, French,
German, Spanish, Italian, Portuguese), :mod:`vocalis.text.normalize_ru` and
:mod:`vocalis.text.normalize_cjk`."""

from __future__ import annotations

import re

from vocalis.errors import InputError

MAX_DIGITS = 15  # longer digit runs pass through as written

_n2w = None


def number_words():
    """num2words (imported once, on first use)."""
    global _n2w
    if _n2w is None:
        try:
            from num2words import num2words
        except ImportError:  # pragma: no cover - a base dependency
            raise InputError("text normalization needs num2words: pip install num2words==0.5.14") from None
        _n2w = num2words
    return _n2w


DAYS_IN = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def valid_date(d: int, m: int, y: int | None) -> bool:
    if not 1 <= m <= 12 or not 1 <= d <= DAYS_IN[m - 1]:
        return False
    if m == 2 and d == 29 and y is not None:
        return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    return True


_ROMAN = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}


def roman_value(s: str) -> int | None:
    """The value of a well-formed Roman numeral up to 399, else None."""
    total, prev = 0, 0
    for c in reversed(s):
        v = _ROMAN.get(c)
        if v is None:
            return None
        total = total - v if v < prev else total + v
        prev = max(prev, v)
    return total if 0 < total < 400 and _to_roman(total) == s else None


def _to_roman(n: int) -> str:
    out = ""
    for v, s in ((100, "C"), (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= v:
            out += s
            n -= v
    return out


class Rules:
    """One language's rules as one left-to-right regular-expression pass: ``parts`` are
    (name, pattern, handler); a handler gets the matched span, its own groups and the match,
    and returns the reading, or None to leave the span as written. A span one rule read (or
    refused) is not read again by another. ``skip``: rules left out (see :meth:`_fallback`).
    Subclasses build ``parts`` in ``__init__`` and call :meth:`_compile`."""

    def __init__(self, lang: str, skip: frozenset = frozenset()):
        self.lang = lang
        self.skip = skip
        self._fallbacks: dict[str, Rules] = {}

    def may_change(self, text: str) -> bool:
        """False when nothing in ``text`` can be read (a cheap test before the pass)."""
        return True

    def _compile(self, parts) -> None:
        parts = [p for p in parts if p is not None and p[0] not in self.skip]
        self.handlers = [h for _, _, h in parts]
        self.names = [name for name, _, _ in parts]
        self.rx = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx, _ in parts))
        # group offsets: the handler sees its own groups only
        self.groups = {name: re.compile(rx).groups for name, rx, _ in parts}

    def __call__(self, text: str, pos: int = 0, endpos: int | None = None) -> str:
        """``text[pos:endpos]`` normalized (the rules still see what is before ``pos``)."""
        endpos = len(text) if endpos is None else endpos
        out, at = [], pos
        for m in self.rx.finditer(text, pos, endpos):
            out.append(text[at:m.start()])
            out.append(self._one(m))
            at = m.end()
        out.append(text[at:endpos])
        return "".join(out)

    def _one(self, m: re.Match) -> str:
        name = m.lastgroup
        start = m.re.groupindex[name]
        k = self.groups[name]
        sub = [m.group(start + 1 + i) for i in range(k)]
        handler = self.handlers[self.names.index(name)]
        try:
            out = handler(m.group(name), sub, m)
        except (ValueError, OverflowError, IndexError, KeyError, TypeError, NotImplementedError):
            return m.group(0)
        return m.group(0) if out is None else out

    def _fallback(self, name: str, s: str, m: re.Match) -> str:
        """The span of ``m`` read by the other rules (``name`` refused it), in its context."""
        n = self._fallbacks.get(name)
        if n is None:
            n = self._fallbacks[name] = type(self)(self.lang, self.skip | {name})
        return n(m.string, m.start(), m.end())

    def _prev_word(self, m: re.Match) -> str:
        before = m.string[:m.start()].rstrip()
        w = re.findall(r"[\w'.]+$", before)
        return w[0] if w else ""

    def _next_text(self, m: re.Match) -> str:
        return m.string[m.end():]

    def _too_long(self, s: str) -> bool:
        return sum(c.isdigit() for c in s) > MAX_DIGITS



__all__ = ["DAYS_IN", "MAX_DIGITS", "Rules", "number_words", "roman_value", "valid_date"]
