"""Pitch-preserving time-stretching (OpenAI's ``speed``), chunk by chunk as audio streams.

Rubber Band (R3 "finer" engine, real-time mode, formants preserved) through ``pylibrb``.
:class:`Stretcher` feeds the library fixed 512-sample blocks whatever the size of the
chunks it is given, so the output does not depend on how the input was cut: a stream
stretched chunk by chunk is sample-identical to the same audio stretched in one call
(:func:`stretch`), with no seam at chunk boundaries. The library's start delay is
trimmed and the tail cut so that ``n`` input samples give ``round(n / speed)`` output
samples, aligned with the input.

``speed == 1`` never reaches this module: callers skip it, so that audio stays
bit-identical to the unstretched path.
"""

from __future__ import annotations

import numpy as np

from vocalis.options import OptionRange, check_option
from vocalis.errors import InputError

__all__ = ["MAX_SPEED", "MIN_SPEED", "Stretcher", "check_speed", "stretch"]

MIN_SPEED = 0.25
MAX_SPEED = 4.0
_BLOCK = 512  # samples per call into Rubber Band


SPEED_RANGE = OptionRange("speed", MIN_SPEED, MAX_SPEED)


def check_speed(speed) -> float:
    """``speed`` as a float in [0.25, 4.0] (OpenAI's range; 1.0 = the model's own pace,
    2.0 = twice as fast); raises :class:`InputError` (``param="speed"``), also for a speed
    other than 1.0 where Rubber Band is not installed (before any model work)."""
    speed = check_option(SPEED_RANGE, speed)
    if speed != 1.0:
        _rubber_band()
    return speed


def _rubber_band():
    """The ``pylibrb`` module; InputError (``param="speed"``) naming the extra to install."""
    try:
        import pylibrb
    except ImportError:
        raise InputError("speed other than 1.0 needs Rubber Band: pip install pylibrb "
                         "(or pip install 'vocalis[speed]')", param="speed") from None
    return pylibrb


class Stretcher:
    """A streaming time-stretcher for mono float32 audio.

    ``process(samples [n]) -> [m]`` returns what is ready (possibly empty: Rubber Band
    needs about 0.1 s of input before its first output); ``finish() -> [k]`` returns the
    rest. Over a whole stream, ``sum(m) + k == round(sum(n) / speed)``.

    Args:
        speed: in [0.25, 4.0]; 2.0 halves the duration, pitch unchanged.
        sample_rate: in Hz.

    Raises:
        InputError: speed out of range, or pylibrb (Rubber Band) not installed.
    """

    def __init__(self, speed: float, sample_rate: int):
        self.speed = check_speed(speed)
        self.sample_rate = int(sample_rate)
        rb = _rubber_band()
        Option, RubberBandStretcher = rb.Option, rb.RubberBandStretcher
        opts = Option.PROCESS_REALTIME | Option.ENGINE_FINER | Option.FORMANT_PRESERVED
        self._rb = RubberBandStretcher(int(sample_rate), 1, opts,
                                       initial_time_ratio=1.0 / self.speed)
        self._rb.set_max_process_size(_BLOCK)
        self._skip = self._rb.get_start_delay()  # output samples that precede the input
        self._pending = np.zeros(self._rb.get_preferred_start_pad(), np.float32)
        self._held = np.zeros(0, np.float32)  # output beyond round(n_in / speed) so far
        self.n_in = 0
        self.n_out = 0

    def _feed(self, final: bool) -> list[np.ndarray]:
        out = []
        while self._pending.shape[0] >= _BLOCK or (final and self._pending.shape[0]):
            block, self._pending = self._pending[:_BLOCK], self._pending[_BLOCK:]
            last = final and self._pending.shape[0] == 0
            self._rb.process(np.ascontiguousarray(block[None, :]), final=last)
            out.append(self._rb.retrieve_available()[0])
        if final:
            while (tail := self._rb.retrieve_available()[0]).shape[0]:
                out.append(tail)
        return out

    def _emit(self, parts: list[np.ndarray]) -> np.ndarray:
        y = np.concatenate([self._held, *parts]).astype(np.float32, copy=False)
        if self._skip:
            cut = min(self._skip, y.shape[0])
            y, self._skip = y[cut:], self._skip - cut
        room = max(0, round(self.n_in / self.speed) - self.n_out)
        y, self._held = y[:room], y[room:]
        self.n_out += y.shape[0]
        return y

    def process(self, samples: np.ndarray) -> np.ndarray:
        x = np.asarray(samples, dtype=np.float32).reshape(-1)
        self.n_in += x.shape[0]
        self._pending = np.concatenate([self._pending, x])
        return self._emit(self._feed(final=False))

    def finish(self) -> np.ndarray:
        y = self._emit(self._feed(final=True))
        missing = round(self.n_in / self.speed) - self.n_out  # never more than a few samples
        if missing > 0:
            y = np.concatenate([y, np.zeros(missing, np.float32)])
            self.n_out += missing
        self._held = np.zeros(0, np.float32)
        return y


def stretch(samples: np.ndarray, sample_rate: int, speed: float) -> np.ndarray:
    """``samples [n]`` float32 mono at ``sample_rate`` Hz -> ``[round(n / speed)]``.

    Raises:
        InputError: as :class:`Stretcher`.
    """
    if check_speed(speed) == 1.0:
        return np.asarray(samples, dtype=np.float32)
    s = Stretcher(speed, sample_rate)
    return np.concatenate([s.process(samples), s.finish()])
