"""Valid ranges of per-request numeric options, checked once at the API boundary.

Every entry point (Python API, CLI, server, batch files) goes through
:func:`check_option`, so a value is accepted or refused the same way everywhere, with a
message that names the option, its range and the value. A model family declares its
options as a tuple of :class:`OptionRange`; the README prints the same table.

Integers may be Python or NumPy integers; floats any real number type (``bool`` is
refused for both). Accepted values are returned as plain ``int`` / ``float``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from vocalis.errors import InputError

FLT_MAX = 3.4028234663852886e38  # largest finite float32


@dataclass(frozen=True)
class OptionRange:
    """``name`` takes values in ``[lo, hi]`` (``lo_open``: ``(lo, hi]``); ``integer`` or real;
    ``why``: where the bounds come from (shown in docs, not in errors)."""

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
            raise bad
    too_low = v <= spec.lo if spec.lo_open else v < spec.lo
    too_high = v >= spec.hi if spec.hi_open else v > spec.hi
    if too_low or too_high:
        raise bad
    return v


__all__ = ["FLT_MAX", "OptionRange", "check_option"]
