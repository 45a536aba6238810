"""Pocket TTS speed choices, measured on the running machine (:mod:`vocalis.engine.tuning`).

Choices, decided in this order:

``flow_linears`` (``packed`` | ``packed1`` | ``hybrid`` | ``default`` | ``vocalis``)
    The FlowLM's float32 linears as oneDNN-packed weights
    (:class:`~vocalis.models.packed.PackedLinear`) laid out for 16 rows (``packed``) or for
    one row (``packed1``), PyTorch's default kernels, or our float32 kernel (``vocalis``:
    :class:`~vocalis.kernels.f32.F32Linear`, offered where it is built, by ``vocalis kernels
    build``; it holds weights that are bfloat16 values, as in the released bundles, in
    bfloat16 and widens them exactly as it reads them: the float32 products in half the
    bytes); opt-in (forced,
    never measured) ``hybrid``: the default kernel for a lone row and the 16-row layout for more, which
    holds the weights twice (about 290 MB more for the FlowLM of the released configs).
    Score: the median time of one batched FlowLM step at 1 row plus at ``B = min(max_batch,
    8)`` rows, on the model thread count of the default split, plus a 40-token prompt pass
    of one row on every thread (a request's time to first audio: the kernels that step one
    row fastest can run the prompt pass twice as slow; docs/speed-choices.md).
``codec_linears`` (``packed`` | ``packed1`` | ``default`` | ``vocalis``; ``int8`` for quantized
models)
    The same for the Mimi decoder's transformer linears (no ``hybrid``: a codec frame is 16
    positions, never a lone row; ``vocalis``, offered where our kernels are built: the
    decoder transformer's linears as :class:`~vocalis.kernels.f32.F32Linear`, whose 16
    positions per row run its GEMM over the bfloat16-held weights of the released bundles;
    the encoder transformer keeps its linears); score: one codec frame
    (both stages) at 1 and at ``B`` rows, on the codec thread count of the default split.
    A quantized model (``--quantize``: its audio already differs from float32) also
    measures ``int8``: the decoder transformer's linears dynamically quantized
    (:func:`~vocalis.models.packed.int8_linear`, weights per output channel, VNNI where the
    CPU has it; the encoder transformer, which makes voice states from audio, keeps
    PyTorch's default kernels). Its gate is ``codec_dtype``'s (below), tested with both.
``codec_elu`` (``exp`` | ``default`` | ``vocalis``)
    The SEANet decoder's ELUs as :class:`~vocalis.models.pocket.mimi.ExpELU`
    (``max(x, exp(min(x, 0)) - 1)``, the same function in cheaper vectorized passes),
    PyTorch's ``nn.ELU``, or our float32 kernel (``vocalis``:
    :class:`~vocalis.models.pocket.mimi.VocalisELU`, offered where it is built). Score:
    the decoder's ELUs alone, on the inputs they get when the SEANet decoder (the codec's
    second stage) decodes 1 and ``B`` rows, on the codec thread count of the default split.
    They are a noticeable share of that stage's time with ``nn.ELU``, but scored by the
    whole stage the kernels' differences (a few ms of 50) were within its noise on a busy
    machine (docs/speed-choices.md).
``codec_out_conv`` (``default`` | ``matmul``)
    The SEANet decoder's last convolution (64 channels to the waveform, kernel 3) by
    ``nn.Conv1d``, or as one matrix product of its three taps and a shifted sum
    (:meth:`~vocalis.models.pocket.layers.StreamingConv1d.matmul_conv`): with one output
    channel PyTorch's CPU convolution takes a slow generic path. Score: that convolution
    alone, on inputs of the shape it gets when the decoder decodes 1 and ``B`` rows, on the
    codec thread count of the default split.
``codec_seanet`` (``default`` | ``vocalis``)
    The SEANet decoder's upsampling blocks by its modules, or each by one float32 kernel
    (``vocalis``: :func:`~vocalis.models.pocket.mimi.fused_block`, offered where our kernels
    are built and the decoder is laid out as it computes:
    :func:`~vocalis.models.pocket.mimi.seanet_fusable`). Score: the SEANet decoder (the
    codec's second stage) of 1 and ``B`` rows, on the codec thread count of the default
    split, with the ELU and output convolution chosen before it.
``gelu`` (``default`` | ``vocalis``)
    The GELU (tanh approximation) of the FlowLM's and the Mimi decoder transformer's layers,
    by PyTorch or by our float32 kernel (``vocalis``:
    :func:`~vocalis.models.pocket.layers.vocalis_gelu_tanh`, offered where it is built; the
    encoder transformer, which makes voice states from audio, keeps PyTorch's).
    Score: the GELUs alone, on inputs of the shapes a prompt pass of 40 tokens, a FlowLM step
    of 1 and ``B`` rows and a codec frame of 1 and ``B`` rows give them, on one thread.
``threads`` (``"model:codec"``, e.g. ``1:1``)
    How the engine splits its thread budget between the FlowLM thread and the two codec
    threads. Score: the wall time (best of two) of the engine's concurrent work for a few
    frames, run on real threads as the engine runs it: the FlowLM stepping while the decoder thread runs
    the first codec stage and the helper thread the second (1 row), and the FlowLM stepping
    ``B`` rows while the two codec threads decode half the rows each (as its split mode).
    Only splits that add up to the budget are measured: on 2 threads ``1:1`` is the only
    one and is taken without measuring.

``codec_pipeline`` (``on`` | ``off``)
    When a step decodes few frames (fewer than 4 rows), run the codec's two stages on two
    threads as a pipeline (``on``) or both on the decoder thread (``off``: one thread
    fewer beside the FlowLM, less oversubscription on few cores). Score: the wall time of
    a few frames of one row with the chosen thread split, FlowLM beside the codec.
``codec_dtype`` (``float32`` | ``bfloat16``), measured for quantized models only
    The Mimi SEANet decoder (the codec's second stage, most of its cost) in bfloat16:
    faster on CPUs with AVX512-BF16 or AMX (figures in docs/performance.md), and no
    longer float32-exact: the audio differs from float32 by bfloat16 rounding (tests
    require waveform cosine >= 0.999 on every text of their corpus, equal length). A
    quantized model (``--quantize``: its audio already differs from float32) measures it
    like the others (score: the second codec stage of 1 and of B rows on the codec's
    threads) and caches the choice; a float32 model keeps float32 unless forced, so that
    the default path stays faithful. While measuring, the float32 weights are kept and put
    back exactly when float32 wins.

Packed, default and our linears compute the same products, the ELUs and the GELUs the same
functions (they agree to float rounding), so no measured choice changes what is said, only
how fast. ``exact`` models keep the default kernels, ``nn.ELU``, PyTorch's GELU and the
built-in split (bit-identical to the official package); devices other than the CPU are not
measured.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Callable

import torch

from vocalis.engine import tuning as tuning_mod
from vocalis.engine.tuning import (
    concurrent_ms,
    default_split,
    measured_splits,
    parse_split,
    split_candidates,
)
from vocalis.engine.tuning import repeat as _repeat
from vocalis.kernels.f32 import GEMM_ROWS, F32Linear, f32_kernel_available, f32_kernel_hint
from vocalis.kernels.native import missing
from vocalis.models.packed import LinearKernels, PackedLinear, can_pack_linears, int8_linear
from vocalis.models.pocket.batch import PocketBatch
from vocalis.models.pocket.layers import TransformerLayer, set_gelu
from vocalis.models.pocket.mimi import (
    ELU_KINDS,
    OUT_CONV_KINDS,
    seanet_fusable,
    set_decoder_elu,
    set_output_conv,
    set_seanet,
)

#: bump when the calibration method changes (old cache entries are then measured again)
METHOD_VERSION = 15  # 3: the engine's thread counts hold (vocalis.engine.openmp); 4: splits
# of the budget only; 5: packed1 is a candidate, the FlowLM score has a prompt pass, two rounds;
# 6: codec_elu; 7: flow_linears=vocalis; 8: codec_dtype measured for quantized models;
# 9: codec_linears=int8 measured for quantized models; 10: codec_elu=vocalis, scored by
# the ELUs alone; 11: flow_linears=vocalis runs prompt passes by its GEMM; 12: gelu,
# codec_linears=vocalis; 13: codec_out_conv; 14: that GEMM got faster (it runs the prompt
# passes of flow_linears=vocalis and every codec frame of codec_linears=vocalis); 15:
# codec_seanet
STEPS = 3  # frames per thread-split run
ROUNDS = 2  # each kernel candidate measured twice, in turn, its shorter score kept
PROMPT_TOKENS = 40  # a typical first text chunk (chunks hold up to 50 tokens)


def _without_paths(d):
    """A config dump without its file paths (``weights_path``, ``tokenizer_path``...): where
    the files are, and how their path was spelled, does not change what is measured."""
    if isinstance(d, dict):
        return {k: _without_paths(v) for k, v in d.items() if not k.endswith("_path")}
    return d


def fingerprint(model, max_batch: int) -> dict:
    """What the timings depend on besides the machine: the config (shapes, not file paths),
    the quantization and the calibration batch size."""
    cfg = json.dumps(_without_paths(model.config.model_dump(mode="json")), sort_keys=True,
                     default=str)
    return {"family": "pocket-tts", "config": Path(model.name).name,
            "config_sha": hashlib.sha256(cfg.encode()).hexdigest()[:16],
            "quantized": bool(getattr(model, "quantized", False)),
            "batch": calibration_rows(max_batch), "method": METHOD_VERSION}


def calibration_rows(max_batch: int) -> int:
    return max(1, min(int(max_batch), 8))


def tuning_key(model, threads: int, max_batch: int) -> dict:
    return tuning_mod.machine_key(threads, fingerprint(model, max_batch))


class _Probe:
    """Timed runs of the model's own step and codec on a scratch batch (zero caches,
    zero latents: the kernels' cost does not depend on the values)."""

    def __init__(self, model, rows: int):
        self.model = model
        self.rows = rows
        self.latent_dim = int(model.flow_lm.bos_emb.shape[-1])
        self.batch = PocketBatch(model, rows)
        self.batch.ensure(rows, 64 + PROMPT_TOKENS)
        self._elu_inputs: dict[int, list[torch.Tensor]] = {}  # row count -> ELU inputs
        self._gelu_inputs: dict[int, list[torch.Tensor]] = {}  # row count -> GELU inputs

    def prompt_fn(self, tokens: int) -> Callable[[], object]:
        """A prompt pass of ``tokens`` positions for one row after a 32-position voice."""
        fm = self.model.flow_lm
        x = torch.zeros(1, tokens, fm.d_model, device=self.model.device)
        pos = torch.full((1,), 32, dtype=torch.long, device=self.model.device)
        return lambda: fm.transformer.forward_linear_rows(x, self.batch.flow_kv, slice(0, 1),
                                                          pos, 32)

    def step_fn(self, n: int) -> Callable[[], object]:
        dev = self.model.device
        lat = torch.zeros(n, self.latent_dim, device=dev)
        bos = torch.zeros(n, dtype=torch.bool, device=dev)
        pos = torch.full((n,), 32, dtype=torch.long, device=dev)
        return lambda: self.batch.step(n, lat, bos, pos, 32)

    def elu_fn(self, rows: list[int]) -> Callable[[], object]:
        """The SEANet decoder's ELUs alone, on the inputs they get when the decoder decodes
        ``rows`` (recorded once per row count, from one decode), through the ELU module
        the decoder holds now (``codec_elu``'s score: made after each candidate is put in)."""
        kinds = tuple(ELU_KINDS.values())
        if len(rows) not in self._elu_inputs:
            got: list[torch.Tensor] = []
            hooks = [m.register_forward_hook(lambda m, a, out: got.append(a[0].clone()))
                     for m in self.model.mimi.decoder.modules() if isinstance(m, kinds)]
            try:
                _, tail = self.head_tail_fns(rows)
                with torch.inference_mode():
                    tail()
            finally:
                for h in hooks:
                    h.remove()
            self._elu_inputs[len(rows)] = got
        inputs = self._elu_inputs[len(rows)]
        elu = next(m for m in self.model.mimi.decoder.modules() if isinstance(m, kinds))

        def run() -> None:
            for x in inputs:
                elu(x)
        return run

    def out_conv_fn(self, rows: list[int]) -> Callable[[], object]:
        """The SEANet decoder's last convolution alone (with its left context), on the input
        it gets when the decoder decodes ``rows``: ``[n, C, frame_samples]``, through the way
        it is computed now (``codec_out_conv``'s score). Random values, not zeros: a fresh
        tensor of zeros can be pages the kernel maps to one shared page of zeros, which read
        faster than memory."""
        conv = self.model.mimi.decoder.model[-1]
        w = conv.conv.weight
        g = torch.Generator().manual_seed(0)
        x = torch.randn(len(rows), conv.conv.in_channels, self.model.mimi.frame_samples,
                        generator=g).to(device=w.device, dtype=w.dtype)
        state = conv.new_state(len(rows))
        return lambda: conv(x, state)

    def gelu_fn(self, rows: int) -> Callable[[], object]:
        """The transformers' GELUs alone (the function the layers hold now: ``gelu``'s score),
        on inputs of the shapes they get in a prompt pass of PROMPT_TOKENS tokens, a FlowLM
        step of 1 and ``rows`` rows (one position each) and a codec frame of 1 and ``rows``
        rows (16 positions each): ``[n, positions, ffn]`` per layer."""
        flow = [m for m in self.model.flow_lm.modules() if isinstance(m, TransformerLayer)]
        if rows not in self._gelu_inputs:  # made once, timed for every candidate and round
            codec = [m for m in self.model.mimi.decoder_transformer.modules()
                     if isinstance(m, TransformerLayer)]
            stride = self.model.mimi.upsample_stride
            g = torch.Generator().manual_seed(0)
            shapes = ([(1, PROMPT_TOKENS, m.linear1.out_features) for m in flow]
                      + [(n, 1, m.linear1.out_features) for n in sorted({1, rows}) for m in flow]
                      + [(n, stride, m.linear1.out_features) for n in sorted({1, rows})
                         for m in codec])
            self._gelu_inputs[rows] = [torch.randn(s, generator=g).to(self.model.device) * 2
                                       for s in shapes]
        inputs = self._gelu_inputs[rows]
        gelu = flow[0].gelu

        def run() -> None:
            for x in inputs:
                gelu(x)
        return run

    def decode_fn(self, rows: list[int]) -> Callable[[], object]:
        lat = torch.zeros(len(rows), self.latent_dim, device=self.model.device)
        first = [False] * len(rows)
        return lambda: self.batch.decode(rows, lat, first)

    def head_tail_fns(self, rows: list[int]) -> tuple[Callable, Callable]:
        lat = torch.zeros(len(rows), self.latent_dim, device=self.model.device)
        first = [False] * len(rows)
        with torch.inference_mode():
            x = self.batch.decode_head(rows, lat, first)
        return (lambda: self.batch.decode_head(rows, lat, first),
                lambda: self.batch.decode_tail(rows, x, first))


def _decoder_only(model, make: Callable) -> Callable:
    """A ``codec_linears`` kernel: ``make(linear)`` for each linear of the Mimi decoder
    transformer; any other linear of the codec (the encoder transformer's, which makes voice
    states from audio: voice files stay the official package's) stays as it is."""
    decoder = {id(m) for m in model.mimi.decoder_transformer.modules()
               if type(m) is torch.nn.Linear}
    return lambda linear: make(linear) if id(linear) in decoder else linear


def _codec_int8(model) -> Callable:
    """The ``codec_linears=int8`` kernel: an int8 copy of each decoder transformer linear."""
    return _decoder_only(model, int8_linear)


def _codec_own(model) -> Callable:
    """The ``codec_linears=vocalis`` kernel: our float32 kernel for each decoder transformer
    linear, its GEMM for calls of 16 positions or more (every codec frame)."""
    return _decoder_only(model, functools.partial(F32Linear, gemm_rows=GEMM_ROWS))


def tune(model, threads: int, max_batch: int, exact: bool, spec=None,
         measure: tuning_mod.Measure | None = None) -> tuning_mod.Tuning:
    """Decide and apply the Pocket choices for ``model`` (already on its device, with no
    packed linears: call once per loaded model).

    ``threads``: the engine's thread budget; ``spec``: forced choices (see
    :func:`vocalis.engine.tuning.parse_spec`); ``measure``: replaces the timing (tests).
    Returns the :class:`~vocalis.engine.tuning.Tuning`; ``choices["threads"]`` and
    ``choices["codec_pipeline"]`` configure :class:`~vocalis.models.pocket.engine.PocketEngineFamily`.

    Raises:
        InputError: a malformed or impossible forced choice.
        ValueError: the model's linears are already packed.
    """
    model.drop_graphs()  # recorded with the kernels this replaces (recorded again at load)
    if any(isinstance(m, PackedLinear) for part in (model.flow_lm, model.mimi)
           for m in part.modules()):
        raise ValueError("tune() takes a model with unpacked linears (load it with "
                         "PocketTTSModel.to(..., pack=False)); it decides the packing itself")
    total = max(1, int(threads))
    cpu = model.device.type == "cpu"
    packable = cpu and not exact and can_pack_linears(model.device)
    kernels = ("packed", "packed1", "default") if packable else ("default",)
    # our float32 kernel for the FlowLM (the codec's: codec_own below)
    quantized = bool(getattr(model, "quantized", False))
    own = cpu and not exact and not quantized and f32_kernel_available("flow_linears=vocalis")
    ours = ("vocalis",) if own else ()
    # our ELU kernel (the same build), for every float32 model measured on the CPU
    elu_own = cpu and not exact and f32_kernel_available("codec_elu=vocalis")
    gelu_own = elu_own and f32_kernel_available("gelu=vocalis")
    codec_own = ("vocalis",) if elu_own and f32_kernel_available("codec_linears=vocalis") else ()
    seanet_own = (("vocalis",) if elu_own and seanet_fusable(model.mimi.decoder)
                  and f32_kernel_available("codec_seanet=vocalis") else ())
    int8 = ("int8",) if cpu and not exact and quantized else ()
    f0, c0 = default_split(total)
    # hybrid is for the FlowLM only (the codec's transformer never sees a lone row: a frame
    # is 16 positions), and only when forced: it holds the weights twice
    candidates = {"flow_linears": (kernels[:-1] + ("hybrid", "default") if packable
                                   else kernels) + ours,
                  "codec_linears": kernels + int8 + codec_own,
                  "codec_elu": (("exp", "default") + (("vocalis",) if elu_own else ())
                                if cpu and not exact else ("default",)),
                  "codec_out_conv": OUT_CONV_KINDS if cpu and not exact else ("default",),
                  "codec_seanet": ("default",) + seanet_own,
                  "gelu": ("default",) + (("vocalis",) if gelu_own else ()),
                  "threads": split_candidates(total), "codec_pipeline": ("on", "off"),
                  "codec_dtype": ("float32", "bfloat16") if cpu and not exact else ("float32",)}
    defaults = {"flow_linears": kernels[0], "codec_linears": kernels[0],
                "codec_elu": "exp" if cpu and not exact else "default",
                "codec_out_conv": "default", "codec_seanet": "default", "gelu": "default",
                "threads": f"{f0}:{c0}", "codec_pipeline": "on", "codec_dtype": "float32"}
    flow_own = functools.partial(F32Linear, gemm_rows=GEMM_ROWS)  # prompt passes by GEMM
    linears = {"flow_linears": LinearKernels(model.flow_lm, {"vocalis": flow_own}),
               "codec_linears": LinearKernels(model.mimi, {"int8": _codec_int8(model),
                                                           "vocalis": _codec_own(model)})}
    split = {"threads": defaults["threads"], "codec_pipeline": "on"}
    fp32_decoder: dict = {}  # the SEANet decoder's float32 weights while it runs bfloat16

    def apply(name: str, value: str) -> None:
        if name in ("threads", "codec_pipeline"):
            split[name] = value
            return
        if name == "codec_elu":
            set_decoder_elu(model.mimi.decoder, value)
            return
        if name == "codec_out_conv":
            set_output_conv(model.mimi.decoder, value)
            return
        if name == "codec_seanet":
            set_seanet(model.mimi.decoder, value)
            return
        if name == "gelu":
            set_gelu(model.flow_lm, value)
            set_gelu(model.mimi.decoder_transformer, value)
            return
        if name == "codec_dtype":  # last: the others are measured in float32
            dec = model.mimi.decoder
            if value == "bfloat16" and "weights" not in fp32_decoder:
                fp32_decoder["weights"] = {k: v.clone() for k, v in dec.state_dict().items()}
                dec.to(torch.bfloat16)
                dec.packed = {}  # a bfloat16 decoder runs its modules: no packed float32 copy
            elif value == "float32" and "weights" in fp32_decoder:  # exactly as it was
                dec.to(torch.float32)
                dec.load_state_dict(fp32_decoder.pop("weights"))
                set_seanet(dec, "vocalis" if dec.fused else "default")  # packed again
            return
        linears[name].use(value)

    probe: dict[str, _Probe] = {}

    def timing(name: str, value: str) -> float:
        if "p" not in probe:
            probe["p"] = _Probe(model, calibration_rows(max_batch))
        p = probe["p"]
        sizes = sorted({1, p.rows})
        if name == "flow_linears":  # the steps, and a prompt pass on every thread (TTFA)
            return (sum(tuning_mod.timed_ms(p.step_fn(n), f0) for n in sizes)
                    + tuning_mod.timed_ms(p.prompt_fn(PROMPT_TOKENS), total))
        if name == "codec_linears":
            return sum(tuning_mod.timed_ms(p.decode_fn(list(range(n))), c0) for n in sizes)
        if name == "codec_seanet":  # the second codec stage, of 1 and of B rows
            return sum(tuning_mod.timed_ms(p.head_tail_fns(list(range(n)))[1], c0)
                       for n in sizes)
        if name == "codec_dtype":  # a scratch batch whose codec states take the dtype
            q = _Probe(model, p.rows)
            return sum(tuning_mod.timed_ms(q.head_tail_fns(list(range(n)))[1], c0)
                       for n in sizes)
        if name == "codec_elu":
            return sum(tuning_mod.timed_ms(p.elu_fn(list(range(n))), c0) for n in sizes)
        if name == "codec_out_conv":
            return sum(tuning_mod.timed_ms(p.out_conv_fn(list(range(n))), c0) for n in sizes)
        if name == "gelu":
            return tuning_mod.timed_ms(p.gelu_fn(p.rows), 1)
        if name == "codec_pipeline":
            f, c = parse_split(split["threads"])
            head, tail = p.head_tail_fns([0])
            if value == "on":
                return concurrent_ms([(f, _repeat(p.step_fn(1), STEPS)),
                                      (c, _repeat(head, STEPS)), (c, _repeat(tail, STEPS))])
            return concurrent_ms([(f, _repeat(p.step_fn(1), STEPS)),
                                  (c, _repeat(p.decode_fn([0]), STEPS))])
        f, c = parse_split(value)
        head, tail = p.head_tail_fns([0])
        score = concurrent_ms([(f, _repeat(p.step_fn(1), STEPS)), (c, _repeat(head, STEPS)),
                               (c, _repeat(tail, STEPS))])
        if p.rows > 1:
            half = p.rows // 2
            if p.rows >= 4:  # the engine's split mode: half the rows on each codec thread
                codec = [(c, _repeat(p.decode_fn(list(range(half))), STEPS)),
                         (c, _repeat(p.decode_fn(list(range(half, p.rows))), STEPS))]
            else:
                head, tail = p.head_tail_fns(list(range(p.rows)))
                codec = [(c, _repeat(head, STEPS)), (c, _repeat(tail, STEPS))]
            score += concurrent_ms([(f, _repeat(p.step_fn(p.rows), STEPS))] + codec)
        return score

    key = tuning_key(model, total, max_batch)
    measurable = (("flow_linears", "codec_linears", "codec_elu", "codec_out_conv",
                   "codec_seanet", "gelu",
                   "threads", "codec_pipeline")
                  + (("codec_dtype",) if quantized else ()) if cpu and not exact else ())
    notes = {"threads": f"the splits follow the thread budget, {total}"}
    if exact:
        notes.update(flow_linears="an exact model keeps the default kernels",
                     codec_linears="an exact model keeps the default kernels",
                     codec_elu="an exact model keeps nn.ELU",
                     codec_out_conv="an exact model keeps PyTorch's convolution",
                     codec_seanet="an exact model keeps PyTorch's convolutions",
                     gelu="an exact model keeps PyTorch's GELU",
                     codec_dtype="an exact model stays float32")
    elif not cpu:
        notes.update(flow_linears="packing is for the CPU", codec_linears="packing is for the CPU",
                     codec_elu="the ELU choice is measured on the CPU only",
                     codec_out_conv="the output convolution is measured on the CPU only",
                     codec_seanet="the SEANet kernel is for the CPU",
                     gelu="the GELU choice is measured on the CPU only",
                     codec_dtype="bfloat16 codec is a CPU option")
    elif not own and not quantized:
        notes["flow_linears"] = missing("vocalis_f32")  # why vocalis is not among them
    if cpu and not exact and not elu_own:
        notes["codec_elu"] = notes["gelu"] = notes["codec_seanet"] = missing("vocalis_f32")
    elif cpu and not exact and not seanet_fusable(model.mimi.decoder):
        notes["codec_seanet"] = ("this SEANet decoder is not laid out as the kernel computes "
                                 "it (docs/speed-choices.md)")
    result = tuning_mod.resolve(key, candidates, defaults, spec, measure or timing, apply,
                                measurable, notes, {"threads": measured_splits(total),
                                                    "flow_linears": kernels + ours},
                                rounds={"flow_linears": ROUNDS, "codec_linears": ROUNDS,
                                        "codec_elu": ROUNDS, "codec_out_conv": ROUNDS,
                                        "codec_seanet": ROUNDS,
                                        "gelu": ROUNDS})
    if (packable and not own and not quantized
            and result.sources["flow_linears"] in ("measured", "cache")):
        # decided without it for want of a build (never offered to int8 linears): say how
        f32_kernel_hint("flow_linears=vocalis")
    elif cpu and not exact and not elu_own and result.sources["codec_elu"] in ("measured",
                                                                              "cache"):
        f32_kernel_hint("codec_elu=vocalis")
    if probe:
        probe.clear()
        tuning_mod.release_memory()
    return result


__all__ = ["METHOD_VERSION", "default_split", "parse_split", "split_candidates", "tune",
           "tuning_key"]
