"""Request options and the checks every front end shares, each in one place.

A model family declares its request options once, as an :class:`OptionSchema` (names,
types, ranges, defaults, help, CLI spelling). Every front end (Python API, CLI, server,
Wyoming, batch files, Ray) checks a request's options with that schema before any model
work, so a value is accepted or refused the same way everywhere, with a message that names
the option, its range and the value (``InputError.param`` = the option).

The checks that do not depend on the family live here too: the seed (:func:`check_seed`,
:func:`new_seed`) and the text (:func:`check_text`).

Integers may be Python or NumPy integers; floats any real number type (``bool`` is refused
for both). Accepted values are returned as plain ``int`` / ``float``.
"""

from __future__ import annotations

import difflib
import math
import numbers
import os
import re
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from vocalis.errors import InputError

FLT_MAX = 3.4028234663852886e38  # largest finite float32


@dataclass(frozen=True)
class OptionRange:
    """``name`` takes values in ``[lo, hi]`` (``lo_open``: ``(lo, hi]``, ``hi_open``:
    ``[lo, hi)``); ``integer`` or real; ``why``: where the bounds come from (docs)."""

    name: str
    lo: float
    hi: float
    integer: bool = False
    lo_open: bool = False
    hi_open: bool = False
    why: str = ""

    def describe(self) -> str:
        lo = "(" if self.lo_open else "["
        hi = ")" if self.hi_open else "]"
        kind = "an integer" if self.integer else "a number"
        return f"{kind} in {lo}{_fmt(self.lo)}, {_fmt(self.hi)}{hi}"


def _fmt(x: float) -> str:
    if x == 2**63:
        return "2**63"
    if float(x).is_integer() and abs(x) < 1e7:
        return str(int(x)) if isinstance(x, int) or abs(x) >= 10 else repr(float(x))
    return f"{x:g}"


def not_finite_message(spec: OptionRange) -> str:
    """What to say of a NaN or infinite value for a real option, without the value:
    ``speed must be a finite number between 0.25 and 4.0`` (one wording for every front end;
    the server's schemas use it too)."""
    if spec.lo_open or spec.hi_open:
        return f"{spec.name} must be a finite number in {spec.describe().split(' in ')[1]}"
    return f"{spec.name} must be a finite number between {_fmt(spec.lo)} and {_fmt(spec.hi)}"


def check_option(spec: OptionRange, value):
    """``value`` as ``int``/``float`` when it lies in ``spec``'s range.

    Raises:
        InputError: wrong type, not finite, or out of range (``param`` = the option name).
    """
    bad = InputError(f"{spec.name} must be {spec.describe()}, got {value!r}", param=spec.name)
    if isinstance(value, bool):
        raise bad
    if spec.integer:
        if not isinstance(value, numbers.Integral):
            raise bad
        v: float | int = int(value)
    else:
        if not isinstance(value, numbers.Real):
            raise bad
        v = float(value)
        if not math.isfinite(v):
            raise InputError(f"{not_finite_message(spec)}, got {value!r}", param=spec.name)
    too_low = v <= spec.lo if spec.lo_open else v < spec.lo
    too_high = v >= spec.hi if spec.hi_open else v > spec.hi
    if too_low or too_high:
        raise bad
    return v


# ------------------------------------------------------------------------------ seed

#: every request's ``seed``: a torch generator seed (``torch.Generator.manual_seed`` takes
#: 64-bit values; 2**63 keeps it a signed 64-bit integer in every language and file format)
SEED = OptionRange("seed", 0, 2**63, integer=True, hi_open=True, why="torch generator seeds")
#: bits of a seed drawn for a request that gave none: 31, so that the seed a server reports
#: (``x-vocalis-seed``, the web page) fits a JavaScript number and an int32 field exactly
RANDOM_SEED_BITS = 31


def check_seed(seed) -> int | None:
    """``seed`` as an ``int`` in [0, 2**63), or None (a random seed is drawn at submission).
    No negative value means "random" (vLLM-Omni's ``-1`` included): a request wanting one
    leaves ``seed`` out, and the refusal says so.

    Raises InputError (``param="seed"``) for anything else."""
    if seed is None:
        return None
    try:
        return check_option(SEED, seed)
    except InputError as e:
        raise InputError(f"{e}; leave seed out for a random one", param="seed") from None


def seed_from_text(text: str) -> int | None:
    """The integer a seed written as text spells (a CLI argument, a URL query): decimal
    digits with an optional sign, spaces around ignored; None for anything else (``7.0``,
    ``1e3``, ``4_2``, ``abc``), which the caller refuses in its own words. The range is
    :func:`check_seed`'s."""
    if re.fullmatch(r"[+-]?[0-9]{1,40}", text.strip()):
        return int(text)
    return None


def new_seed() -> int:
    """A random seed for a request that gave none (:data:`RANDOM_SEED_BITS` bits)."""
    return secrets.randbits(RANDOM_SEED_BITS)


# ------------------------------------------------------------------------------ threads

#: CPU threads per CPU the machine reports, at most: more only adds switching (and
#: thousands of threads can exhaust the process's limits or crash the thread pool)
THREADS_PER_CPU = 4


def max_threads() -> int:
    """The largest ``threads`` accepted: :data:`THREADS_PER_CPU` × ``os.cpu_count()``."""
    return THREADS_PER_CPU * (os.cpu_count() or 1)


def check_threads(threads) -> int | None:
    """``threads`` (CPU threads for torch) as an ``int`` in [1, :func:`max_threads`], or None
    (torch's choice).

    Raises InputError (``param="threads"``) for anything else."""
    if threads is None:
        return None
    top = max_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= top:
        raise InputError(f"threads must be an integer in [1, {top}] ({THREADS_PER_CPU} per CPU "
                         f"of this machine's {os.cpu_count() or 1}), got {threads!r}",
                         param="threads")
    return threads


# ------------------------------------------------------------------------------ quantize

#: what ``quantize`` may name besides True/False (True = "int8"); each family lists its own
QUANTIZE_MODES = ("int8", "int4")


def quantize_mode(quantize) -> str | None:
    """``quantize`` of :func:`vocalis.load` → ``None``, ``"int8"`` or ``"int4"``.

    Raises InputError for anything else (naming the accepted values)."""
    if quantize is False or quantize is None:
        return None
    if quantize is True:
        return "int8"
    if isinstance(quantize, str) and quantize.strip().lower() in QUANTIZE_MODES:
        return quantize.strip().lower()
    raise InputError(f"unknown quantize {quantize!r}: use false, true (= int8), 'int8' or 'int4'",
                     param="quantize")


# ------------------------------------------------------------------------------ text


def check_unicode(text: str, what: str = "text", fix: str = "send UTF-8 text",
                  param: str | None = None) -> str:
    """``text`` if it encodes as UTF-8; else :class:`InputError` naming the first bad
    character: a lone surrogate (a JSON ``"\\ud800"`` escape, a broken str) or a raw byte
    that was not UTF-8 (Python's ``surrogateescape`` stand-in, from a command-line argument)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        ch = ord(text[e.start])
        if 0xDC80 <= ch <= 0xDCFF:
            why = f"byte 0x{ch - 0xDC00:02X} at character {e.start} is not UTF-8"
        else:
            why = f"a lone surrogate U+{ch:04X} at character {e.start}"
        raise InputError(f"{what} is not valid Unicode ({why}): {fix}", param=param) from None
    return text


def check_text(text, param: str = "input", what: str = "text",
               fix: str = "send the text as valid UTF-8") -> str:
    """The text of a request, checked the same way by every front end: a ``str``, valid
    Unicode (:func:`check_unicode`), not blank. Family rules (length in tokens, characters
    the tokenizer cannot speak) come later, from the loaded model.

    Raises:
        InputError (``param``): not a string, not valid Unicode, or empty / only whitespace.
    """
    if not isinstance(text, str):
        raise InputError(f"{what} must be a string, got {type(text).__name__}", param=param)
    check_unicode(text, what, fix, param)
    if not text.strip():
        raise InputError(f"{what} is empty: give some words to speak", param=param)
    return text


def text_from_file(content: str) -> str:
    """The text of a text file: without its final line break (``\\n``, ``\\r\\n`` or
    ``\\r``), which ends the file's last line and is not part of what is said. Other
    whitespace is kept: the text is the family's to prepare, as if given inline."""
    for end in ("\r\n", "\n", "\r"):
        if content.endswith(end):
            return content[: -len(end)]
    return content


# ------------------------------------------------------------------------------ schema


class UnknownOption(InputError):
    """An option no schema of the model declares (the server's ``unknown_parameter``)."""

    code = "unknown_parameter"


@dataclass(frozen=True)
class Option:
    """One request option of a model family.

    ``type``: ``int``, ``float``, ``bool`` or ``str`` (``object``: any value, which the family
    checks, e.g. reference audio as a path or ``(samples, rate)``); ``range`` for numbers;
    ``max_length`` and ``choices`` (exact spellings) for strings; ``default``: shown in help
    (None: the model's own);
    ``flag``: the command line spelling (default ``--name-with-dashes``; booleans may give
    ``"--on/--off"``); ``voice``: also an option of ``TTS.voice()`` (how a voice is made);
    ``path``: a file path (batch files resolve it from their folder); ``openai``: the
    OpenAI speech field that carries it (``instructions``; ``voice``: an option that names
    or gives the voice, e.g. a built-in speaker, whose mistakes the family reports as
    ``param="voice"``).
    """

    name: str
    type: type
    help: str
    range: OptionRange | None = None
    max_length: int | None = None
    choices: tuple[str, ...] | None = None
    default: object = None
    flag: str | None = None
    voice: bool = False
    path: bool = False
    openai: str | None = None

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def check(self, value):
        """``value`` checked against this option's type and range (None passes through).

        Raises InputError (``param`` = the option name)."""
        if value is None or self.type is object:
            return value
        if self.range is not None:
            return check_option(self.range, value)
        if self.type is bool:
            if not isinstance(value, bool):
                raise InputError(f"{self.name} must be true or false, got {value!r}", param=self.name)
            return value
        if self.type is str:
            if not isinstance(value, str):
                raise InputError(f"{self.name} must be a string, got {type(value).__name__}",
                                 param=self.name)
            check_unicode(value, self.name, "send valid UTF-8", self.name)
            if self.max_length is not None and len(value) > self.max_length:
                raise InputError(f"{self.name} is {len(value)} characters; at most "
                                 f"{self.max_length}", param=self.name)
            if self.choices is not None and value not in self.choices:
                raise InputError(f"unknown {self.name} {value!r}{did_you_mean(value, self.choices)};"
                                 f" use {', '.join(self.choices)}", param=self.name)
            return value
        if self.type in (int, float):
            spec = OptionRange(self.name, -math.inf, math.inf, integer=self.type is int)
            if isinstance(value, bool) or not isinstance(
                    value, numbers.Integral if self.type is int else numbers.Real):
                raise InputError(f"{self.name} must be {spec.describe().split(' in ')[0]}, got "
                                 f"{value!r}", param=self.name)
            return self.type(value)
        raise TypeError(f"option {self.name}: unsupported type {self.type!r}")

    def describe(self) -> str:
        """The accepted values in words (docs, help)."""
        if self.range is not None:
            return self.range.describe()
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        if self.type is object:
            return "a file path" if self.path else "any value the family takes"
        return {bool: "true or false", str: "a string", int: "an integer",
                float: "a number"}.get(self.type, "see the family's docs")


class OptionSchema:
    """The request options of one model family, in order. ``owner``: how messages name
    who takes them (e.g. ``"Pocket TTS"``)."""

    def __init__(self, owner: str, options: Iterable[Option] = ()):
        self.owner = owner
        self._options: dict[str, Option] = {}
        for opt in options:
            if opt.name in self._options:
                raise ValueError(f"{owner}: option {opt.name!r} declared twice")
            self._options[opt.name] = opt

    def __iter__(self) -> Iterator[Option]:
        return iter(self._options.values())

    def __contains__(self, name: object) -> bool:
        return name in self._options

    def __len__(self) -> int:
        return len(self._options)

    def __getitem__(self, name: str) -> Option:
        return self._options[name]

    @property
    def names(self) -> list[str]:
        return list(self._options)

    def __repr__(self) -> str:
        return f"OptionSchema({self.owner!r}, {self.names!r})"

    def __str__(self) -> str:
        """One line per option: its name, the values it takes, its default and its help
        (``print(tts.family.options)``)."""
        if not self._options:
            return f"{self.owner or 'this schema'}: no options"
        width = max(len(n) for n in self._options)
        head = f"{self.owner} options" if self.owner else "options"
        lines = [f"{head} ({len(self)}):"]
        for opt in self:
            default = f" (default {opt.default!r})" if opt.default is not None else ""
            lines.append(f"  {opt.name:<{width}}  {opt.describe()}{default}: {opt.help}")
        return "\n".join(lines)

    def subset(self, names: Iterable[str]) -> "OptionSchema":
        keep = set(names)
        return OptionSchema(self.owner, [o for o in self if o.name in keep])

    def check(self, options: dict, model: str | None = None) -> dict:
        """The options with every value checked (``None`` values dropped, numbers as plain
        ``int``/``float``).

        Raises:
            UnknownOption: a name this schema does not declare (with the closest one).
            InputError: a value of the wrong type or out of range (``param`` = its name).
        """
        out = {}
        for name, value in options.items():
            opt = self._options.get(name)
            if opt is None:
                raise self.unknown(name, model)
            value = opt.check(value)
            if value is not None:
                out[name] = value
        return out

    def unknown(self, name: str, model: str | None = None, spelled=None) -> UnknownOption:
        """The error for an option ``name`` this schema does not take (``spelled``: how the
        front end shows names, e.g. CLI flags)."""
        spell = spelled or (lambda n: n)
        who = f"{self.owner} model {model}" if model else self.owner
        known = ", ".join(spell(n) for n in self._options) or "none"
        return UnknownOption(f"unknown option {spell(str(name))} for {who}"
                             f"{did_you_mean(str(name), self._options, spell)}; its options: {known}",
                             param=str(name))


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The shortest of ``choices`` that ``word`` begins, else the closest of ``choices`` to
    ``word`` (case-insensitive, :func:`difflib.get_close_matches`), else None."""
    lowered = {c.lower(): c for c in choices}
    # a word that begins choices means the shortest of them (english_2m: english_2m_2026-10,
    # not english_2m_refl_2026-10), even where another is closer letter for letter (english)
    starts = sorted((c for c in lowered if c.startswith(word.lower())), key=len) \
        if len(word) >= 3 else []
    close = starts[:1] or difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None


def did_you_mean(word: str, choices: Iterable[str], spell=None) -> str:
    """``" (did you mean X?)"`` for :func:`closest`, else ``""``."""
    near = closest(word, choices)
    return f" (did you mean {(spell or (lambda n: n))(near)}?)" if near is not None else ""


__all__ = ["FLT_MAX", "Option", "OptionRange", "OptionSchema", "QUANTIZE_MODES",
           "RANDOM_SEED_BITS", "SEED",
           "UnknownOption", "check_option", "closest", "check_seed", "check_text", "check_unicode",
           "did_you_mean", "new_seed", "not_finite_message", "quantize_mode", "seed_from_text",
           "text_from_file"]
