"""Qwen3-TTS speed choices, measured on the running machine (:mod:`vocalis.engine.tuning`).

Choices, decided in this order:

``model_linears`` (``packed`` | ``packed1`` | ``default`` | ``vocalis``)
    The float32 talker's and code predictor's linears (every ``nn.Linear`` of the talker:
    its decoder layers, codec head and text projection, and the predictor's layers and
    heads) as oneDNN-packed weights laid out for 16 rows (``packed``) or for one row
    (``packed1``; :class:`~vocalis.models.packed.PackedLinear`), PyTorch's default
    kernels, or our float32 kernel (``vocalis``:
    :class:`~vocalis.kernels.f32.F32Linear`, offered where it is built, by ``vocalis kernels
    build``; weights that are bfloat16 values, as in the official checkpoints, are held in
    bfloat16 and widened exactly as read; its products can run partly on the codec's core
    while the codec waits, see ``lend``). Only for a float32 model on the CPU (int8 and int4 models have
    their own kernels). Score: one frame of the model (the predictor's 15 steps and a
    talker step) at one row plus one at ``B`` rows, on the model's thread count of the built-in split, four runs each (the
    median of the last three); ``vocalis``'s one-row frame with the codec's core lent when
    the budget has two threads or more, as a lone stream runs it while its codec waits.
    No prompt pass is in the score: a request has one and a frame every 80 ms of audio, and
    a score with a prompt pass in it chose kernels whose shorter prompt pass cost every
    frame of a lone stream more. The 16-row layout reads the weights faster than the
    default kernels for several rows and slower for one; the one-row layout stays close to
    the default either way (figures: docs/speed-choices.md).
``codec_linears`` (``packed`` | ``default``)
    The streaming codec decoder's float32 matmuls through oneDNN-packed weights (short
    convolutions as one matmul over the unfolded input, transposed convolutions,
    transformer and ConvNeXt linears; :meth:`SpeechDecoder.pack
    <vocalis.models.qwen3.codec.SpeechDecoder.pack>`) or PyTorch's default kernels.
    Score: the median time of one codec frame of one row plus one frame of ``B`` rows
    (below), each on the codec's thread count of the built-in split and on every thread
    (the engine decodes a lone request's first frame with every thread). Packing gains
    most on two threads, where PyTorch's default matmuls of a few rows use one; on one
    thread the two can come within noise of each other (figures: docs/performance.md).
``codec_frames`` (``1`` | ``2`` | ``4``)
    How many frames of a row the codec decodes in one call after the row's first frame
    (which always leaves alone: time to first audio). The engine holds a row's frames
    until that many steps have run, the row's text chunk ends, the rows change or a prompt
    pass starts (:meth:`Engine._gather <vocalis.engine.scheduler.Engine._gather>`). More
    frames per call read the codec's weights once for all of them and give its matrix
    products more rows; audio then leaves in chunks of that many frames. Score: the median
    time per frame of one row's codec call of that many frames on the codec's threads of
    the built-in split. A frame costs less in a call of several, which raises the
    throughput of concurrent streams; a lone stream, bound by its model thread, gains
    little (figures: docs/speed-choices.md). ``--tuning codec_frames=1`` restores audio
    frame by frame.
``threads`` (``"model:codec"``, e.g. ``1:1``)
    How the engine splits its thread budget between the model thread (talker step and
    the code predictor's 15 steps) and the codec thread (the streaming speech-tokenizer
    decoder, one call per frame). Score: the wall time (after a warm-up) of a frame of one
    row as the engine runs it, model and codec at once on their own threads, plus the
    same per row at ``B = min(max_batch, 4)`` rows when the engine can hold more than one
    (a lone stream's latency and the batched cost per row weigh the same), the shorter of
    two runs. Only splits that add up to the budget are measured: on 2 threads ``1:1`` is
    the only one and is taken without measuring. Each measured split costs a few seconds
    at the first load (once per machine and model, cached; docs/speed-choices.md).
``lend`` (``on`` | ``off``)
    Whether the codec thread lends its core to the model thread while it waits for frames.
    A lone stream's codec decodes 4 frames per call and waits between calls (a large
    share of the time, more in float32), while one thread reads the model's weights only
    as fast as one core reads memory, short of what two cores read (figures:
    docs/speed-choices.md, "Engine threads").

    * int8 and int4: one helper thread of ours takes blocks of output channels of the
      model thread's products (``kernels/lend.h``), taken back before each codec call;
      results are the same bit for bit either way (what it gains: docs/performance.md).
    * float32 with ``model_linears=vocalis``: as int8, through ``kernels/f32.cpp``.
    * float32 with PyTorch's or oneDNN's linears: a lone row's steps run on every thread
      when the codec waits as they begin
      (:meth:`Engine._model_threads <vocalis.engine.scheduler.Engine._model_threads>`);
      several rows keep the model's share. The codes are those of the model's share up to
      float rounding of oneDNN's products on another thread count. oneDNN's float32
      products gain less from a second core than our kernels (docs/speed-choices.md).

    Not for exact models or a budget of one thread. Score: one frame of the model at one
    row, the codec idle (as while it waits): lent, or on the model's share alone.

Why it is measured: the codec costs about as much per frame as the talker and predictor
together, so whether the model should keep every thread beside the codec, or share the
cores, depends on the CPU, its memory and the thread budget. Where the splits were first
compared they came within the run-to-run noise of each other until the engine's thread
counts held (:mod:`vocalis.engine.openmp`; before, both threads of every split ran on the
same count), and one split was clearly best after (figures: docs/speed-choices.md). Other
machines decide for themselves.

The split changes only which thread runs what, and the two codec kernels compute the same
products, so the codes are those of the built-in choices and the audio agrees with them
to float rounding (about 1e-6). ``exact`` models keep the default kernels and the
built-in split and measure nothing, as Pocket's do; devices other than the CPU are not
measured.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Callable

import torch

from vocalis.engine import tuning as tuning_mod
from vocalis.engine.tuning import (
    concurrent_ms,
    default_split,
    measured_splits,
    parse_split,
    repeat,
    split_candidates,
    timed_ms,
)
from vocalis.kernels.f32 import F32Linear, f32_kernel_available, f32_kernel_hint
from vocalis.kernels.native import missing
from vocalis.models.packed import LinearKernels, can_pack_linears
from vocalis.models.qwen3.engine import Qwen3Batch, _SliceCache, lend_kernels, lending_kernels

log = logging.getLogger(__name__)

#: frames per codec call to try (see the module docstring), the built-in one first
CODEC_FRAMES = ("1", "2", "4")
#: bump when the calibration method changes (old cache entries are then measured again)
METHOD_VERSION = 12  # 6: the engine's thread counts hold (vocalis.engine.openmp); 7: splits of
# the budget only; 8: model_linears; 9: int8 through vocalis's kernel (kernels/q8.cpp); 10: lend,
# model_linears=vocalis (kernels/f32.cpp); 11: model_linears=vocalis holds bfloat16-exact
# weights in bfloat16 and runs prompt passes too; 12: the int8 kernel's AVX-512 VNNI build
STEPS = 1  # frames per thread-split run
REPEATS = 2  # runs per thread-split score, the shortest kept (with one run, the choice between
# splits a few % apart flipped from one day to the next)


def fingerprint(model, max_batch: int) -> dict:
    """What the timings depend on besides the machine: the config (shapes), the compute
    dtype, the quantization and the calibration batch size."""
    cfg = json.dumps(model.config.to_dict(), sort_keys=True, default=str)
    return {"family": "qwen3-tts", "config": f"{model.model_size}-{model.model_type}",
            "config_sha": hashlib.sha256(cfg.encode()).hexdigest()[:16],
            "dtype": str(model.talker.dtype).removeprefix("torch."),
            "quantized": model.quantized or False, "batch": calibration_rows(max_batch),
            "method": METHOD_VERSION}


def calibration_rows(max_batch: int) -> int:
    return max(1, min(int(max_batch), 4))


def tuning_key(model, threads: int, max_batch: int) -> dict:
    return tuning_mod.machine_key(threads, fingerprint(model, max_batch))


class _Probe:
    """Timed frames of the model's own talker, code predictor and codec on scratch state
    (zero caches and inputs, greedy picks: the kernels' cost does not depend on the values)."""

    def __init__(self, model, rows: int):
        self.model = model
        self.rows = rows
        self.batch = Qwen3Batch(model, rows)
        self.batch.ensure(64, rows)

    def model_fn(self, n: int) -> Callable[[], object]:
        """One frame of ``n`` rows: the code predictor's 15 steps, then a talker step."""
        talker, dev = self.model.talker, self.model.device
        h = talker.spec.talker.hidden_size
        hidden = torch.zeros(n, 1, h, dtype=talker.dtype, device=dev)
        first = talker.codec_embed(torch.zeros(n, 1, dtype=torch.long, device=dev))
        cache = _SliceCache(self.batch.cache, 0, n)

        def run() -> None:
            talker.code_predictor.predict(hidden, first, lambda logits: logits.argmax(-1))
            talker.decode(hidden, cache, 32)
        return run

    def codec_fn(self, n: int, frames_per_call: int = 1) -> Callable[[], object]:
        """One frame of audio (or ``frames_per_call`` consecutive frames in one call) for
        each of ``n`` rows."""
        shape = (n, 16) if frames_per_call == 1 else (n, frames_per_call, 16)
        frames = torch.zeros(shape, dtype=torch.long, device=self.model.device)
        rows, first = list(range(n)), [False] * n
        return lambda: self.batch.decode(rows, frames, first)


def _choices(total: int, exact: bool, quantized: bool, codec_packable: bool,
             model_packable: bool, cpu: bool = True, own_f32: bool = False,
             ) -> tuple[dict, dict, dict]:
    """The choices :func:`tune` offers: ``(defaults, candidates, notes)``, where ``notes``
    says why a choice has a single candidate. One table for :func:`tune` and for
    :func:`check_quantized_spec`, so the early check refuses exactly what tuning refuses."""
    f0, c0 = default_split(total)
    kernels = ("packed", "default") if codec_packable else ("default",)
    model_kernels = (("packed", "packed1") if model_packable else ()) + ("default",) \
        + (("vocalis",) if own_f32 else ())
    lendable = cpu and not exact and total >= 2
    lend = ("on", "off") if lendable else ("off",)
    candidates = {"model_linears": model_kernels, "codec_linears": kernels,
                  "codec_frames": CODEC_FRAMES, "threads": split_candidates(total),
                  "lend": lend}
    defaults = {"model_linears": "default", "codec_linears": kernels[0],
                "codec_frames": CODEC_FRAMES[0], "threads": f"{f0}:{c0}", "lend": lend[0]}
    notes = {"threads": f"the splits follow the thread budget, {total}"}
    if not lendable:
        notes["lend"] = ("an exact model keeps the built-in threads" if exact
                         else "a lent core needs the CPU and a budget of two threads or more")
    if exact:
        notes["codec_linears"] = "an exact model keeps the default kernels"
        notes["model_linears"] = "an exact model keeps the default kernels"
    else:
        if not codec_packable:
            notes["codec_linears"] = "oneDNN packs float32 CPU weights only"
        if not model_packable and not own_f32:
            notes["model_linears"] = ("a quantized model has its own kernels" if quantized
                                      else "oneDNN packs float32 CPU weights only")
    return defaults, candidates, notes


def check_quantized_spec(threads: int, spec=None) -> None:
    """Refuse, before any weight is read or converted, a forced choice that :func:`tune`
    would refuse for a quantized model (``model_linears`` other than ``default``), with the
    same message. ``spec`` as in :func:`tune` (None reads ``$VOCALIS_TUNING``).

    Raises:
        InputError: that forced choice, or a malformed spec.
    """
    origin = "tuning"
    if spec is None and os.environ.get(tuning_mod.ENV, "").strip():
        spec, origin = os.environ[tuning_mod.ENV], f"${tuning_mod.ENV}"
    _, candidates, notes = _choices(max(1, int(threads)), exact=False, quantized=True,
                                    codec_packable=True, model_packable=False)
    tuning_mod.parse_spec(spec, candidates, origin, notes)


def tune(model, threads: int, max_batch: int, exact: bool, spec=None,
         measure: tuning_mod.Measure | None = None) -> tuning_mod.Tuning:
    """Decide the Qwen3 choices for ``model`` (loaded, quantized or not).

    ``threads``: the engine's thread budget; ``spec``: forced choices (see
    :func:`vocalis.engine.tuning.parse_spec`); ``measure``: replaces the timing (tests).
    Returns the :class:`~vocalis.engine.tuning.Tuning`; ``choices["threads"]`` configures
    :class:`~vocalis.models.qwen3.engine.Qwen3EngineFamily`; ``model_linears`` is applied to
    ``model.talker`` (traced again when it was traced) and ``codec_linears`` to
    ``model.decoder`` here.

    Raises:
        InputError: a malformed or impossible forced choice.
    """
    total = max(1, int(threads))
    cpu = model.device.type == "cpu"
    f0, c0 = default_split(total)
    dec = model.decoder
    packable = cpu and not exact and dec.can_pack
    talker = model.talker
    model_packable = (cpu and not exact and not model.quantized
                      and talker.dtype == torch.float32 and can_pack_linears(model.device))
    own_f32 = (cpu and not exact and not model.quantized and talker.dtype == torch.float32
               and f32_kernel_available("model_linears=vocalis"))
    defaults, candidates, notes = _choices(total, exact, bool(model.quantized), packable,
                                           model_packable, cpu, own_f32)
    if model_packable and not own_f32:
        notes["model_linears"] = missing("vocalis_f32")  # why vocalis is not among them
    probe: dict[str, _Probe] = {}
    linears = LinearKernels(talker, {"vocalis": F32Linear})

    def apply(name: str, value: str) -> None:
        if name == "codec_linears":
            dec.pack(value == "packed")
        elif name == "model_linears" and value != linears.value:
            traced = talker.traced
            talker.untrace()  # the graphs hold the linears they were recorded with
            linears.use(value)
            # the layout left behind goes back to the OS now, not at the end: measuring
            # every layout of the 1.7B talker (7 GB of float32 linears) otherwise kept
            # them all and went past 24 GB
            tuning_mod.release_memory()
            if traced:
                talker.trace()

    def timing(name: str, value: str) -> float:
        if "p" not in probe:
            probe["p"] = _Probe(model, calibration_rows(max_batch))
        p = probe["p"]
        if name == "model_linears":  # a frame at 1 and at B rows on the model's threads
            # (our float32 kernel's one-row frame with the codec's core lent, as a lone
            # stream runs while its codec waits)
            score = 0.0
            for n in sorted({1, p.rows}):
                lent = value == "vocalis" and n == 1 and total >= 2
                lend_kernels(model, lent)
                try:
                    score += timed_ms(p.model_fn(n), f0, repeats=3, warmup=1)
                finally:
                    lend_kernels(model, False)
            return score
        if name == "codec_linears":  # at the codec's share and at every thread (a lone
            # request's first frame is decoded with every thread, the model waiting)
            return sum(timed_ms(p.codec_fn(n), t) for n in sorted({1, p.rows})
                       for t in sorted({c0, total}))
        if name == "lend":  # a frame at 1 row, the codec idle: lent or not
            if not lending_kernels(model):  # PyTorch's float32 products: on every thread
                # or on the model's share
                return timed_ms(p.model_fn(1), total if value == "on" else f0, repeats=3,
                                warmup=1)
            lend_kernels(model, value == "on")
            try:
                return timed_ms(p.model_fn(1), f0, repeats=3, warmup=1)
            finally:
                lend_kernels(model, False)
        if name == "codec_frames":  # ms per frame on the codec's threads
            g = int(value)
            return timed_ms(p.codec_fn(1, g), c0, repeats=3, warmup=1) / g
        f, c = parse_split(value)
        score = 0.0  # ms per frame of a lone stream plus ms per row-frame at B rows
        for n in sorted({1, p.rows}):
            score += concurrent_ms([(f, repeat(p.model_fn(n), STEPS)),
                                    (c, repeat(p.codec_fn(n), STEPS))], repeats=REPEATS) / (n * STEPS)
        return score

    key = tuning_key(model, total, max_batch)
    measurable = (("model_linears", "codec_linears", "codec_frames", "threads", "lend")
                  if cpu and not exact else ())
    result = tuning_mod.resolve(key, candidates, defaults, spec, measure or timing, apply,
                                measurable, notes, {"threads": measured_splits(total)})
    if model_packable and not own_f32 and result.sources["model_linears"] in ("measured", "cache"):
        f32_kernel_hint("model_linears=vocalis")  # decided without it: say how to build it
    if probe:
        probe.clear()
        tuning_mod.release_memory()
    return result


__all__ = ["CODEC_FRAMES", "METHOD_VERSION", "STEPS", "check_quantized_spec", "tune", "tuning_key"]
