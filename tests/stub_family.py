"""A test-only model family: a sine tone per text byte, through vocalis's plug-in interface.

It proves that a family is a plug-in: registered by a test (``vocalis.families.register``)
or by ``$VOCALIS_FAMILIES=stub_family:FAMILY``, it is served by every front end without any
front-end module knowing it. The model is deterministic and tiny, so the tests can compute
its audio independently (:func:`expected`).

Model ids: ``stub-sine/tiny``. Voices: ``low`` (220 Hz, the default) and ``high`` (440 Hz).
Its own option: ``pitch_scale`` in [0.5, 2.0] (and the shared ``max_frames``). Each byte
``b`` of the UTF-8 text is one 50 ms frame at ``base * pitch_scale * (1 + (b % 12) / 12)``
Hz, amplitude 0.25, phase restarting at every frame; an engine step gives every row one
frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vocalis.engine.family import EngineBatch, EngineFamily, RowOut
from vocalis.errors import ModelNotFound, VoiceError
from vocalis.family import LoadedModel, ModelFamily, ModelInfo, Prepared, Voice
from vocalis.options import Option, OptionRange, OptionSchema

RATE = 16000
FRAME = 800  # samples: 50 ms
BASES = {"low": 220.0, "high": 440.0}


def tone(base: float, scale: float, byte: int) -> np.ndarray:
    """One frame of the stub's audio (float32 ``[FRAME]``)."""
    t = np.arange(FRAME, dtype=np.float64) / RATE
    return (0.25 * np.sin(2 * np.pi * base * scale * (1 + (byte % 12) / 12) * t)).astype(np.float32)


def expected(text: str, voice: str = "low", pitch_scale: float = 1.0) -> np.ndarray:
    """What the stub says for ``text``, computed without vocalis."""
    return np.concatenate([tone(BASES[voice], pitch_scale, b) for b in text.encode("utf-8")])


@dataclass
class Params:
    scale: float
    max_frames: int | None


class StubBatch(EngineBatch):
    def __init__(self, rows: int):
        self.rows = rows

    def clear_row(self, row: int) -> None:
        pass

    def decode(self, rows, frames, first):  # frames [n, 3] or [n, T, 3]: (base, scale, byte)
        f = frames.reshape(len(rows), -1, 3).tolist()
        return torch.from_numpy(np.stack([np.concatenate([tone(b, s, int(c)) for b, s, c in row])
                                          for row in f]))


class StubEngine(EngineFamily):
    sample_rate, frame_samples = RATE, FRAME

    def new_batch(self, max_rows): return StubBatch(max_rows)
    def new_state(self, params): return None
    def thread_split(self, total): return 1, 1
    def prefill(self, batch, jobs): pass

    def start_chunk(self, job) -> int:
        job.asked_budget = job.params.max_frames is not None
        n = len(job.chunks[job.chunk][1]) + 1  # a frame per byte, then the end
        return min(n, job.params.max_frames) if job.params.max_frames else n

    def step(self, batch, jobs):
        out = []
        for job in jobs:
            if job is None:
                out.append(None)
                continue
            ids = job.chunks[job.chunk][1]
            if job.step == len(ids):
                out.append(RowOut(end=True))
                continue
            byte = ids[job.step]
            out.append(RowOut(frame=torch.tensor([BASES[job.voice], job.params.scale, byte],
                                                 dtype=torch.float64)))
        return out


class StubLoaded(LoadedModel):
    def voice(self, src=None, **voice_options) -> Voice:
        name = src.name if isinstance(src, Voice) else (src or self.info.default_voice)
        if name not in BASES:
            raise VoiceError(f"unknown voice {name!r}; the stub has low and high", param="voice")
        return Voice(name, name, self.family)

    def prepare(self, text, voice, options, seed) -> Prepared:
        params = Params(options.get("pitch_scale", 1.0), options.get("max_frames"))
        return Prepared(self.voice(voice).state, [(text, list(text.encode("utf-8")), 0)], params)


class StubFamily(ModelFamily):
    name, title, author, url = "stub-sine", "Stub Sine", "vocalis tests", "https://example.invalid"
    options = OptionSchema("Stub Sine", (
        Option("pitch_scale", float, "Multiply every tone's pitch.", OptionRange("pitch_scale", 0.5, 2.0)),
        Option("max_frames", int, "At most this many frames.", OptionRange("max_frames", 1, 10_000, integer=True)),
    ))

    def claims(self, model_id): return model_id.strip().startswith("stub-sine/")
    def model_ids(self): return ["stub-sine/tiny"]
    def summary(self, model_id): return "a sine tone per text byte (tests)"

    def describe(self, model_id) -> ModelInfo:
        if model_id.strip() != "stub-sine/tiny":
            raise ModelNotFound(f"unknown stub model {model_id!r}", param="model")
        return ModelInfo(family=self, model_id="stub-sine/tiny", name="stub-sine/tiny", released=True,
                         sample_rate=RATE, served_name="stub-sine/tiny", voices=("low", "high"),
                         default_voice="low")

    def check(self, info, text, voice, options):
        if isinstance(voice, str) and voice not in BASES:
            raise VoiceError(f"unknown voice {voice!r}; the stub has low and high", param="voice")
        return options

    def load(self, info, settings, **load_options) -> StubLoaded:
        return StubLoaded(info, None, StubEngine(), exact=settings.exact)


FAMILY = StubFamily()
