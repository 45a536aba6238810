"""Pocket TTS as an engine family (:mod:`vocalis.engine.family`).

Per request the random draws follow the official package exactly: one ``[1, 32]``
normal draw at each text chunk's prompt pass (discarded) and one per frame, from the
request's own generator, so a seeded request gives the same frames whatever runs beside
it; only the float rounding of batched products can differ. EOS counts from frame 6 and
a chunk ends ``frames_after_eos`` frames after it (pocket-tts 4.0.1
``models/tts_model.py``; see ``shared/reference/pocket-tts.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vocalis.engine.family import EngineFamily, RowOut
from vocalis.engine.scheduler import non_finite
from vocalis.models.pocket.batch import PocketBatch
from vocalis.models.pocket.model import (
    FRAMES_BEFORE_EOS,
    PocketTTSModel,
    SamplingParams,
    max_gen_len,
)
from vocalis.models.pocket.tuning import default_split
from vocalis.models.text_attention import TextAttention


def draw_noise(rng: torch.Generator, std: float, clamp: float | None, dim: int) -> torch.Tensor:
    """One ``[1, dim]`` float32 draw, as the official ``normal_`` / ``trunc_normal_`` call."""
    noise = torch.empty(1, dim, dtype=torch.float32)
    if std == 0:  # temperature 0: no noise (trunc_normal_ would divide by the std)
        return noise.zero_()
    if clamp is None:
        noise.normal_(0.0, std, generator=rng)
    else:
        torch.nn.init.trunc_normal_(noise, 0.0, std, -clamp, clamp, generator=rng)
    return noise


@dataclass
class PocketRow:
    """A request's Pocket-specific state: noise std and EOS threshold (from its options),
    and for the current chunk: frames kept after EOS, the EOS frame, the next FlowLM
    position and the previous latent (None at the chunk's first frame: BOS)."""

    std: float
    threshold: float
    after_eos: int = 0
    eos_step: int | None = None
    pos: int = 0
    latent: torch.Tensor | None = None


class PocketEngineFamily(EngineFamily):
    """The FlowLM step, its EOS rule and the Mimi codec over a :class:`PocketBatch`."""

    #: a step given None for a row leaves that row's caches untouched (see step)
    holds_rows = True
    #: requests admitted per step (a burst in groups of three, shortest prompts first: the
    #: engine's rule). Measured with 16 requests arriving together (real-size english,
    #: scripts/burst_ttfa.py): on a 2-core AMD EPYC Zen 5 (arrival order then), median first
    #: audio 6.3-6.5x a lone request's against 8.8-10.5x all at once, p95 10.5-11.3x against
    #: 8.8-10.6x, throughput 3-5% lower; groups of 2, 4 and 8 did worse. On a 2-core Zen 3,
    #: shortest first: groups of 3 4.3-5.3x / 9.0-9.9x, of 2 5.2-5.6x / 10.7-11.6x, of 4
    #: 6.3x / 11.2x, of 6 6.5-6.7x / 9.8-11.4x
    admit_group = 3

    def __init__(self, model: PocketTTSModel, split: tuple[int, int] | None = None,
                 codec_pipeline: bool = True,
                 timestamp_heads: dict[int, tuple[int, ...]] | None = None):
        self.model = model
        # FlowLM heads read for word timestamps (layer -> heads); None: all of them
        self.timestamp_heads = timestamp_heads
        self.split = split  # (FlowLM threads, codec threads), chosen by measurement
        self.codec_pipeline = codec_pipeline  # few rows: two codec threads (else one)
        self.sample_rate = model.sample_rate
        self.frame_samples = model.frame_samples

    def thread_split(self, total: int) -> tuple[int, int]:
        """The split measured for this machine (:mod:`vocalis.models.pocket.tuning`), else
        the built-in one: about a third of the threads for the Mimi codec, the rest for the
        FlowLM."""
        return self.split if self.split is not None else default_split(total)

    def new_batch(self, max_rows: int) -> PocketBatch:
        return PocketBatch(self.model, max_rows)

    def new_state(self, params: SamplingParams) -> PocketRow:
        cfg = self.model.config
        temp = cfg.default_temperature if params.temperature is None else params.temperature
        threshold = (cfg.default_eos_threshold if params.eos_threshold is None
                     else params.eos_threshold)
        return PocketRow(temp ** 0.5, threshold)

    def start_chunk(self, job) -> int:
        _, ids, guess = job.chunks[job.chunk]
        p, st, cfg = job.params, job.state, self.model.config
        st.after_eos = guess
        if p.frames_after_eos is not None:
            st.after_eos = p.frames_after_eos
        elif cfg.model_recommended_frames_after_eos is not None:
            st.after_eos = cfg.model_recommended_frames_after_eos
        st.eos_step = None
        st.latent = None
        job.asked_budget = p.max_frames is not None
        if p.max_frames is not None:
            return p.max_frames
        return max_gen_len(len(ids), cfg.mimi.frame_rate)

    def prefill(self, batch: PocketBatch, jobs: list) -> None:
        ids = [job.chunks[job.chunk][1] for job in jobs]
        for job, n in zip(jobs, ids):
            batch.ensure(job.row + 1, job.voice.length + len(n) + job.budget)
        # a prompt pass also runs the chunk's first step (time to first audio)
        fuse = not self.model.exact
        ends = batch.prefill([j.row for j in jobs], [j.voice for j in jobs], ids,
                             first_step=fuse)
        for job, end in zip(jobs, ends):
            job.state.pos = end
            # the official prompt pass draws one noise sample and discards it
            draw_noise(job.rng, job.state.std, job.params.noise_clamp,
                       self.model.flow_lm.latent_dim)

    def step(self, batch: PocketBatch, jobs: list) -> list[RowOut | None]:
        fm = self.model.flow_lm
        dev = self.model.device
        n = len(jobs)
        dim = fm.latent_dim
        latents = torch.zeros(n, dim, device=dev)
        bos = torch.ones(n, dtype=torch.bool, device=dev)
        pos_list = [0] * n
        for r, job in enumerate(jobs):
            if job is None:
                continue
            pos_list[r] = job.state.pos
            if job.state.latent is not None:
                latents[r] = job.state.latent
                bos[r] = False
        rows = [r for r, j in enumerate(jobs) if j is not None]
        ready = batch.take_ready(rows, pos_list)  # computed by their prompt pass
        rest = [r for r in rows if r not in ready]
        cond = None
        probe = self._probe(jobs, rest)
        if rest:
            pos = torch.tensor(pos_list, dtype=torch.long, device=dev)
            if len(rest) == n:
                cond = batch.step(n, latents, bos, pos, max(pos_list), probe)
            else:  # rows left out (free, ready, or held back by the engine): not touched
                idx = torch.tensor(rest, dtype=torch.long, device=dev)
                part = batch.step_rows(rest, latents[idx], bos[idx], pos[idx],
                                       max(pos_list[r] for r in rest), probe)
                cond = part.new_zeros(n, part.shape[-1])
                cond[idx] = part
        if ready:
            if cond is None:
                first = next(iter(ready.values()))
                cond = first.new_zeros(n, first.shape[-1])
            for r, c in ready.items():
                cond[r] = c
        eos_logit = fm.out_eos(cond)[:, 0].float().cpu()
        out: list[RowOut | None] = [None] * n
        noise = torch.zeros(n, dim)
        live = list(jobs)
        for r, job in enumerate(jobs):
            if job is not None:
                try:
                    noise[r] = draw_noise(job.rng, job.state.std, job.params.noise_clamp, dim)[0]
                except Exception as e:  # this row's options alone: fail this row alone
                    out[r] = RowOut(error=e)
                    live[r] = None
        steps = {job.params.sampler_decode_steps for job in live if job is not None}
        if not steps:
            return out
        noise = noise.to(dev)
        if len(steps) == 1 or fm.head_type in ("drifting", "pointwise"):
            sampled = fm.sample(cond, noise, steps.pop())
        else:
            sampled = torch.zeros_like(noise)
            for s in steps:
                rows = [r for r, j in enumerate(live) if j is not None
                        and j.params.sampler_decode_steps == s]
                idx = torch.tensor(rows, device=dev)
                sampled[idx] = fm.sample(cond[idx], noise[idx], s)
        finite = (torch.isfinite(sampled).all(dim=1).cpu() & torch.isfinite(eos_logit)).tolist()
        for r, job in enumerate(live):
            if job is None:
                continue
            g, st = job.step, job.state
            if not finite[r]:
                out[r] = RowOut(error=non_finite(job, "FlowLM step", g))
                continue
            if job.params.max_frames is None:
                if eos_logit[r] > st.threshold and st.eos_step is None and g >= FRAMES_BEFORE_EOS:
                    st.eos_step = g
                    job.chunk_info[-1]["eos_step"] = g
                if st.eos_step is not None and g >= st.eos_step + st.after_eos:
                    out[r] = RowOut(end=True)
                    continue
            st.latent = sampled[r]
            st.pos += 1
            scores = None
            if probe is not None and job.timestamps and r in rest:
                scores = probe.scores(r if len(rest) == n else rest.index(r))
            out[r] = RowOut(frame=st.latent, scores=scores)
        return out

    def _probe(self, jobs: list, rest: list[int]) -> TextAttention | None:
        """The attention reader of a step whose rows ``rest`` run the FlowLM, for the rows
        that asked for word timestamps (None when none did). A row's text tokens sit right
        after its voice prompt in its cache."""
        spans = {}
        for i, r in enumerate(rest):
            job = jobs[r]
            if job.timestamps:
                start = job.voice.length
                spans[r if len(rest) == len(jobs) else i] = (
                    start, start + len(job.chunks[job.chunk][1]))
        return TextAttention(spans, self.timestamp_heads) if spans else None


__all__ = ["PocketEngineFamily", "PocketRow", "draw_noise"]
