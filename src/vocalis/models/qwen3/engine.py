"""Qwen3-TTS as an engine family (:mod:`vocalis.engine.family`).

One engine step gives every active row one frame (16 codes), in the official order of
``qwen-tts==0.1.1`` (``modeling_qwen3_tts.py:1636-1744`` under HF ``generate``; see
:mod:`vocalis.models.qwen3.generate` for the batch-1 loop this reproduces):

1. codebook 0 of each row from its last talker logits (repetition penalty over the row's
   own codebook-0 history, ``min_new_tokens``, suppression, then its own sampler and
   generator); EOS ends the row's text (no frame);
2. the code predictor for all continuing rows at once (15 steps; rows share positions,
   so no masking), each draw from the row's own generator;
3. one talker step for all rows, each at its own position (per-row RoPE and key mask).

So every row draws from its generator in the official order (c0 of frame 0, then per frame
15 sub-talker draws and the next c0), and a seeded request gives the same codes alone or
beside others, up to the float rounding of batched products. Prompt passes run one row at
a time (batch 1, as the official). Frames are decoded by the exact streaming codec
decoder (:meth:`SpeechDecoder.stream`), by default replaying the official 300/25 chunked
decode; an in-context (ICL) request first feeds its reference codes and drops their audio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from vocalis.engine.family import KEEP_CACHE_POSITIONS, EngineBatch, EngineFamily, RowOut
from vocalis.engine.scheduler import non_finite
from vocalis.engine.tuning import default_split
from vocalis.kernels.f32 import F32Linear
from vocalis.models.qwen3.model import Qwen3Model
from vocalis.models.qwen3.prompt import FedText, TalkerPrompt
from vocalis.models.qwen3.sampling import GenerationParams, choose, talker_scores
from vocalis.models.qwen3.talker import KVCache
from vocalis.models.text_attention import TextAttention

# Talker cache positions: a row of the 0.6B talker holds 28 layers x 2 x 8 heads x 128 x 4 B
# = 229 KB per position in float32, and every row of the batch cache has as many positions
# as the longest, so the cache grows in small steps (each step copies it once; a large
# cache grows by a quarter: KVCache.ensure).
SLOT_STEP = 32
INITIAL_SLOTS = 64


@dataclass(frozen=True)
class Qwen3Params:
    """Per-request options: the official sampling and length options (``gen``), and
    ``max_frames``: an explicit frame limit (None: the runaway guard's ``guard`` frames, or
    only ``max_new_tokens`` when ``guard`` is None). ``asked_max_new_tokens``: the request
    set ``max_new_tokens`` itself (reaching it is then no runaway worth a warning)."""

    gen: GenerationParams
    max_frames: int | None = None
    guard: int | None = None
    seed: int | None = None
    asked_max_new_tokens: bool = False


@dataclass
class Qwen3Input:
    """What the prompt pass needs: the talker prompt, and the reference codes
    ``[T_ref, 16]`` an in-context request decodes first (None otherwise)."""

    prompt: TalkerPrompt
    ref_codes: torch.Tensor | None = None


@dataclass
class DecodeStart:
    """Passed to the codec with a row's first frame: reset the row, feed ``prefix``."""

    prefix: torch.Tensor | None = None


@dataclass
class Qwen3Row:
    """A request's state: codebook-0 history ``[1, n]``, the last talker logits ``[1, V]``
    (fp32) and final hidden state ``[1, 1, H]``, and the next talker position."""

    history: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden: torch.Tensor | None = None
    pos: int = 0
    scores: Any = None  # word timestamps: the last talker pass's attention over the text
    span: Any = None  # word timestamps: Qwen3EngineFamily._text_span of the row


class _RowCache:
    """Row ``r`` of a batch KV cache as a batch-1 cache (views: writes land in the batch)."""

    def __init__(self, cache: KVCache, row: int):
        self.k = cache.k[:, row:row + 1]
        self.v = cache.v[:, row:row + 1]

    def ensure(self, n: int) -> None:
        if n > self.k.shape[2]:
            raise RuntimeError("row cache too small (ensure the batch cache first)")


class Qwen3Batch(EngineBatch):
    """Talker KV cache ``[L, R, S, H_kv, D]`` and the codec's streaming state of ``rows``
    rows. The cache holds only the rows in use so far (R grows with the highest row
    admitted: the engine fills the lowest free rows) and S positions (grows in steps of
    ``SLOT_STEP``); an idle engine gives a grown cache back. ``chunked``: the codec
    replays the official 300/25 chunked decode (default, equal to the official output);
    False keeps full state over long utterances."""

    def __init__(self, model: Qwen3Model, rows: int, chunked: bool = True):
        self.model = model
        self.rows = rows
        self.chunked = chunked
        self.cache = model.talker.new_cache(1, INITIAL_SLOTS, SLOT_STEP)
        self.codec = model.decoder.new_state(rows, chunked=chunked)

    @property
    def capacity(self) -> int:
        return self.cache.slots

    def ensure(self, positions: int, rows: int = 1) -> None:
        """Room for ``positions`` positions in each of the first ``rows`` rows."""
        self.cache.ensure(positions)
        have = self.cache.k.shape[1]
        if rows > have:
            shape = list(self.cache.k.shape)
            shape[1] = rows - have
            self.cache.k = torch.cat([self.cache.k, self.cache.k.new_zeros(shape)], dim=1)
            self.cache.v = torch.cat([self.cache.v, self.cache.v.new_zeros(shape)], dim=1)

    def row_cache(self, row: int) -> _RowCache:
        return _RowCache(self.cache, row)

    def clear_row(self, row: int) -> None:
        if row < self.cache.k.shape[1]:
            self.cache.k[:, row].zero_()
            self.cache.v[:, row].zero_()
        self.codec.reset(torch.tensor([row], device=self.cache.k.device))

    def oversized(self) -> bool:
        """More than one row, or more than KEEP_CACHE_POSITIONS positions: worth giving back
        when the engine is idle (one row of INITIAL_SLOTS stays, for the next request)."""
        return self.cache.k.shape[1] > 1 or self.cache.slots > KEEP_CACHE_POSITIONS

    def release_memory(self) -> None:
        self.cache = self.model.talker.new_cache(1, INITIAL_SLOTS, SLOT_STEP)

    def cache_bytes(self) -> int:
        n = self.cache.k.numel() * self.cache.k.element_size() * 2
        st = self.codec
        tensors = list(st.convs) + [st.kv] + ([*st.shadow.convs, st.shadow.kv] if st.shadow else [])
        return n + sum(t.numel() * t.element_size() for t in tensors)

    # -- codec: one stage (the streaming decoder keeps its own per-row state)

    def decode_head(self, rows: list[int], frames: torch.Tensor, first: list):
        return frames

    def decode_tail(self, rows: list[int], x, first: list) -> torch.Tensor:
        return self.decode(rows, x, first)

    def decode(self, rows: list[int], frames: torch.Tensor, first: list) -> torch.Tensor:
        """PCM ``[n, 1920]`` of one frame ``frames [n, 16]`` for each of ``rows``, or
        ``[n, T * 1920]`` of T consecutive frames ``frames [n, T, 16]``; a row whose
        ``first`` entry is set starts afresh (after its :class:`DecodeStart` prefix)."""
        dec = self.model.decoder
        starts = [i for i, f in enumerate(first) if f]
        if starts:
            self.codec.reset(torch.tensor([rows[i] for i in starts], device=frames.device))
            for i in starts:
                prefix = getattr(first[i], "prefix", None)
                if prefix is not None and prefix.shape[0]:
                    dec.stream(self.codec, prefix.T[None].to(frames.device), rows=torch.tensor([rows[i]], device=frames.device))
        codes = frames[:, :, None] if frames.dim() == 2 else frames.transpose(1, 2)
        return dec.stream(self.codec, codes, rows=torch.tensor(rows, device=frames.device))


def lending_kernels(model: Qwen3Model) -> list:
    """The ``torch.ops`` namespaces of our kernels that ``model``'s products run (each
    library has its own helper thread, ``kernels/lend.h``): int8's; int8's and int4's for an
    int4 model (its prompt passes run the int8 kernel); float32's when the talker runs
    :class:`~vocalis.kernels.f32.F32Linear` (``model_linears=vocalis``); else none."""
    if model.quantized == "int8":
        return [torch.ops.vocalis_q8]
    if model.quantized == "int4":
        return [torch.ops.vocalis_q8, torch.ops.vocalis_q4]
    if any(isinstance(m, F32Linear) for m in model.talker.modules()):
        return [torch.ops.vocalis_f32]
    return []


def lend_kernels(model: Qwen3Model, on: bool) -> None:
    """Lend (``on``) or take back the codec's core to ``model``'s kernels
    (:func:`lending_kernels`)."""
    for op in lending_kernels(model):
        op.lend(on)


class Qwen3EngineFamily(EngineFamily):
    """The talker step, code predictor, EOS rule and codec of a :class:`Qwen3Model`."""

    #: the codec's first stage is the identity: one thread runs the whole codec
    codec_pipeline = False

    def __init__(self, model: Qwen3Model, chunked_decode: bool = True,
                 split: tuple[int, int] | None = None, codec_frames: int = 1,
                 lend: bool = False):
        self.model = model
        self.codec_frames = codec_frames  # frames per codec call after a row's first
        self.sample_rate = model.sample_rate
        self.frame_samples = model.frame_samples
        self.chunked_decode = chunked_decode
        self.split = split
        self.lend = lend
        # the kernel libraries that lend (the model's linears are chosen before the family)
        self._lending = lending_kernels(model) if lend else []
        self.shared_prompt_passes = 0  # padded prompt passes that served several rows
        self._talker_step = None  # the talker step left by step() for finish_step()

    @property
    def lends_openmp_threads(self) -> bool:
        """A float32 model with ``lend`` on: the engine gives a lone row's steps every thread
        while the codec waits (:meth:`Engine._model_threads
        <vocalis.engine.scheduler.Engine._model_threads>`)."""
        return self.lend and not self._lending

    def lend_codec_threads(self, on: bool) -> None:
        """Called by the engine's codec thread: ``on`` while it waits for frames, so that
        the products of our kernels (:func:`lending_kernels`; ``kernels/lend.h``) may run
        partly on its core; off before each codec call. No effect when ``lend`` is off
        (tuning choice); results are the same either way, bit for bit."""
        for op in self._lending:
            op.lend(on)

    def thread_split(self, total: int) -> tuple[int, int]:
        """(model threads, codec threads) of ``total``: the split measured at load
        (:mod:`vocalis.models.qwen3.tuning`), else the built-in one
        (:func:`vocalis.engine.tuning.default_split`)."""
        return self.split if self.split is not None else default_split(total)

    def row_ready(self, job) -> bool:
        """False while the row's streamed text has not reached its next frame's token."""
        return job.voice.prompt.text_ready(job.step)

    def new_batch(self, max_rows: int) -> Qwen3Batch:
        return Qwen3Batch(self.model, max_rows, self.chunked_decode)

    def new_state(self, params: Qwen3Params) -> Qwen3Row:
        return Qwen3Row()

    def start_chunk(self, job) -> int:
        """Frame budget: ``max_new_tokens - 1`` (HF stops before the last token's frame,
        ``modeling:2280-2289``), capped by ``max_frames`` or the runaway guard."""
        p: Qwen3Params = job.params
        budget = p.gen.max_new_tokens - 1
        limit = p.max_frames if p.max_frames is not None else p.guard
        job.asked_budget = p.max_frames is not None or (
            p.asked_max_new_tokens and (limit is None or budget <= limit))
        return budget if limit is None else min(budget, limit)

    def prefill(self, batch: Qwen3Batch, jobs: list) -> None:
        """The prompt passes of jobs starting together. A lone job runs alone (batch 1,
        the official path); several run as one padded pass per group of similar prompt
        lengths (:func:`prompt_groups`), reading the talker's weights once per group.

        Padding goes after each prompt: causal attention keeps it out of every real
        position, and the keys it leaves in the cache lie past the row's position, where
        the row's own steps overwrite them before any read (steps attend to slots
        ``0..pos`` only)."""
        talker = self.model.talker
        # grow the cache once for every row (each growth copies it)
        batch.ensure(max(j.voice.prompt.prefill.shape[1] + min(j.budget, SLOT_STEP) + 1
                         for j in jobs), max(j.row for j in jobs) + 1)
        for group in prompt_groups(jobs, lambda j: j.voice.prompt.prefill.shape[1]):
            if len(group) == 1:
                job = group[0]
                logits, hidden = talker.prefill(job.voice.prompt.prefill,
                                                batch.row_cache(job.row))
                self._start(job, logits[0], hidden[0], job.voice.prompt.prefill.shape[1])
                continue
            group = sorted(group, key=lambda j: j.row)
            prompts = [j.voice.prompt.prefill[0] for j in group]  # [L_i, H] each
            t = max(p.shape[0] for p in prompts)
            embeds = prompts[0].new_zeros(len(group), t, prompts[0].shape[-1])
            for i, p in enumerate(prompts):
                embeds[i, :p.shape[0]] = p
            a, b = group[0].row, group[-1].row + 1
            if b - a == len(group):  # consecutive rows (arrivals together): write in place
                logits, hidden = talker.prefill(embeds, _SliceCache(batch.cache, a, b))
            else:
                tmp = talker.new_cache(len(group), t)
                logits, hidden = talker.prefill(embeds, tmp)
                for i, job in enumerate(group):
                    batch.cache.k[:, job.row, :t] = tmp.k[:, i, :t]
                    batch.cache.v[:, job.row, :t] = tmp.v[:, i, :t]
            self.shared_prompt_passes += 1
            for i, (job, p) in enumerate(zip(group, prompts)):
                self._start(job, logits[i], hidden[i], p.shape[0])

    @staticmethod
    def _start(job, logits: torch.Tensor, hidden: torch.Tensor, length: int) -> None:
        """A row's state after its prompt pass: ``logits [T, V]``, ``hidden [T, H]`` of its
        (possibly padded) prompt of ``length`` real positions."""
        st: Qwen3Row = job.state
        st.logits, st.hidden = logits[length - 1][None], hidden[length - 1][None, None]
        st.pos = length
        st.history = torch.zeros(1, 0, dtype=torch.long, device=logits.device)

    def step(self, batch: Qwen3Batch, jobs: list) -> list[RowOut | None]:
        """One frame of each row: its first codebook from the logits of its last talker
        pass, the other 15 from the code predictor (every row at once). The talker step
        that prepares the next frame is left to :meth:`finish_step`. (A row waiting for its
        streamed text, :meth:`row_ready`, is not given: the engine passes None.)"""
        model, talker = self.model, self.model.talker
        spec = talker.spec
        n = len(jobs)
        self._talker_step = None
        out: list[RowOut | None] = [None] * n
        cont: list[int] = []
        c0: list[torch.Tensor] = []
        for r, job in enumerate(jobs):
            if job is None:
                continue
            st: Qwen3Row = job.state
            text = job.voice.prompt.trailing
            if isinstance(text, FedText) and text.guard is not None \
                    and job.params.max_frames is None:
                job.budget = min(job.budget, text.guard)  # a streamed text's, once closed
            if job.step >= job.budget:
                out[r] = RowOut(end=True)
                continue
            if not bool(torch.isfinite(st.logits).all()):
                out[r] = RowOut(error=non_finite(job, "talker", job.step))
                continue
            gen: GenerationParams = job.params.gen
            try:
                scores = talker_scores(st.logits, st.history, eos_id=spec.codec_eos_id,
                                       penalty=gen.repetition_penalty)
                code = choose(scores, gen.talker, job.rng)
            except Exception as e:  # this row's options alone
                out[r] = RowOut(error=e)
                continue
            st.history = torch.cat([st.history, code[:, None]], dim=1)
            if int(code) == spec.codec_eos_id:
                job.chunk_info[-1]["eos_step"] = job.step
                out[r] = RowOut(end=True)
                continue
            cont.append(r)
            c0.append(code)
        if not cont:
            return out
        # 2. code predictor: every continuing row at once, draws per row
        first = torch.stack(c0)  # [m, 1]
        hidden = torch.cat([jobs[r].state.hidden for r in cont])  # [m, 1, H]
        rngs = [jobs[r].rng for r in cont]
        samplers = [jobs[r].params.gen.subtalker for r in cont]

        def pick(logits: torch.Tensor) -> torch.Tensor:
            return torch.cat([choose(logits[i:i + 1], samplers[i], rngs[i]) for i in range(len(cont))])

        rest = talker.code_predictor.predict(hidden, talker.codec_embed(first), pick)  # [m, 15]
        frames = torch.cat([first, rest], dim=1)  # [m, 16]
        # 3. the input of the talker step of every row (rows without a frame: padding); the
        # step itself runs in finish_step, after these frames have gone to the codec
        embed = torch.zeros(n, 1, spec.talker.hidden_size, dtype=talker.dtype, device=model.device)
        sums = talker.frame_embed(frames[:, None])  # [m, 1, H]
        positions = [0] * n
        for i, r in enumerate(cont):
            job, st, prompt = jobs[r], jobs[r].state, jobs[r].voice.prompt
            t = job.step
            embed[r] = (sums[i:i + 1] + prompt.text_at(t))[0]
            positions[r] = st.pos
            start = DecodeStart(job.voice.ref_codes) if job.step == 0 else None
            job.chunk_info[-1].setdefault("codes", []).append(frames[i].tolist())  # [16] per frame
            out[r] = RowOut(frame=frames[i], start=start, scores=st.scores)
            st.scores = None
            if job.timestamps and st.span is None:
                st.span = self._text_span(job) or ()
        self._talker_step = (embed, [jobs[r] for r in cont], cont, positions)
        return out

    def finish_step(self, batch: Qwen3Batch) -> None:
        """The talker step of the last :meth:`step`'s rows (each at its own position): the
        logits of their next frame's first codebook. The engine calls it after that step's
        frames have gone to the codec, so their audio does not wait for it (a lone request's
        first audio comes one talker step sooner). A no-op when the step produced no frame.

        Raises: what the talker raises (the engine fails the step's rows)."""
        pending, self._talker_step = self._talker_step, None
        if pending is None:
            return
        embed, cont_jobs, cont, positions = pending
        talker, n = self.model.talker, embed.shape[0]
        live = {positions[r] for r in cont}
        batch.ensure(max(live) + 1)
        timed = {r: job for job, r in zip(cont_jobs, cont) if job.timestamps}
        probes: dict = {}
        if len(live) == 1:  # every row at one position: the plain kernel path (as batch 1)
            logits, hid = self._decode_runs(batch, embed, cont, live.pop(), timed, probes)
        else:
            for r in range(n):  # idle rows write at slot 0 of their own (masked) cache
                if r not in cont:
                    positions[r] = 0
            probe = self._probe({r: (r, j) for r, j in timed.items()})
            logits, hid = talker.decode(embed, _SliceCache(batch.cache, 0, n),
                                        torch.tensor(positions, dtype=torch.long, device=embed.device),
                                        probe)
            probes.update({r: (probe, r) for r in timed})
        for job, r in zip(cont_jobs, cont):
            st = job.state
            st.logits, st.hidden = logits[r:r + 1], hid[r:r + 1]
            st.pos += 1
            if r in probes:
                st.scores = self._text_scores(job, *probes[r])

    @staticmethod
    def _text_span(job) -> tuple[int, int, int] | None:
        """Where a row's text tokens sit in its talker cache, for word timestamps: (first
        position, count, position step) of the n text tokens, or None (in-context cloning
        prompts interleave reference text: not read). Whole-text layout: the text block
        ends two positions before the prompt's end (tts_eos, then tts_pad + codec BOS);
        streaming-text layout: token 0 rides on the prompt's last position and token j on
        the talker pass at ``prompt + j - 1`` (:mod:`vocalis.models.qwen3.prompt`)."""
        if job.voice.ref_codes is not None:
            return None
        length = job.voice.prompt.prefill.shape[1]
        if isinstance(job.voice.prompt.trailing, FedText):  # n: known once the text ends
            return length - 1, None, 1
        n = len(job.chunks[job.chunk][1]) - 8  # the template adds 3 + 5 tokens
        if job.voice.prompt.trailing is job.voice.prompt.tts_pad:
            return length - n - 2, n, 0
        return length - 1, n, 1

    def _probe(self, rows: dict) -> TextAttention | None:
        """The attention reader of one talker call: ``rows`` maps a row to (its index in
        the call, its job). Streaming-text rows read the tokens fed so far only."""
        spans = {}
        for i, job in rows.values():
            span = job.state.span
            if not span:
                continue
            first, n, fed = span
            if n is None:  # streamed text: token 0 rides on the prompt, the rest are pushed
                n = 1 + job.voice.prompt.trailing.tokens
            count = n if not fed else min(n, job.state.pos - first + 1)
            spans[i] = (first, first + count)
        return TextAttention(spans, None) if spans else None

    def _text_scores(self, job, probe, index: int):
        """A row's scores from its call's reader, padded with zeros to all its n text tokens
        (tokens not fed yet), or None."""
        if probe is None:
            return None
        got = probe.scores(index)
        span = job.state.span
        if got is None or not span:
            return None
        if span[1] is None:  # streamed text: the tokens so far (the timer pads)
            return got
        out = np.zeros(span[1], np.float32)
        out[:len(got)] = got
        return out

    def _decode_runs(self, batch: Qwen3Batch, embed: torch.Tensor, rows: list[int], pos: int,
                     timed: dict | None = None, probes: dict | None = None):
        """Rows at one shared position ``pos``: each contiguous run of ``rows`` goes through
        one view of the batch cache (no copy). Returns (logits ``[n, V]``, hidden
        ``[n, 1, H]``) indexed by row (rows not in ``rows`` are zeros). ``timed``: rows
        (-> job) that read their attention; ``probes`` receives row -> (reader, index)."""
        talker = self.model.talker
        n = embed.shape[0]
        logits = torch.zeros(n, talker.spec.vocab_size, device=embed.device)
        hid = torch.zeros(n, 1, talker.spec.talker.hidden_size, dtype=embed.dtype, device=embed.device)
        runs: list[list[int]] = []
        for r in rows:
            if runs and runs[-1][-1] == r - 1:
                runs[-1].append(r)
            else:
                runs.append([r])
        for run in runs:
            a, b = run[0], run[-1] + 1
            mine = {r: (r - a, timed[r]) for r in run if timed and r in timed}
            probe = self._probe(mine) if mine else None
            logits[a:b], hid[a:b] = talker.decode(embed[a:b], _SliceCache(batch.cache, a, b), pos,
                                                  probe)
            if probes is not None:
                probes.update({r: (probe, i) for r, (i, _) in mine.items()})
        return logits, hid


def prompt_groups(jobs: list, length, slack: float = 1.25, extra: int = 8) -> list[list]:
    """Jobs split into groups that share one padded prompt pass: sorted by prompt length
    ``length(job)``, a group takes jobs while the longest is at most ``slack`` times the
    shortest plus ``extra`` positions (padding is computed for nothing; the weights are
    read once per group instead of once per job)."""
    groups: list[list] = []
    for job in sorted(jobs, key=length):
        if groups and length(job) <= slack * length(groups[-1][0]) + extra:
            groups[-1].append(job)
        else:
            groups.append([job])
    return groups


class _SliceCache(_RowCache):
    def __init__(self, cache: KVCache, a: int, b: int):
        self.k = cache.k[:, a:b]
        self.v = cache.v[:, a:b]


__all__ = ["DecodeStart", "Qwen3Batch", "Qwen3EngineFamily", "Qwen3Input", "Qwen3Params", "Qwen3Row"]
