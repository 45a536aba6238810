"""Pocket TTS's per-frame work as TorchScript graphs: the FlowLM step, the sampler head and
the codec's first stage (:func:`vocalis.models.tracing.trace_module`).

Each frame of each request runs these three; eager, they are some 580, 200 and 250 small
PyTorch calls, each passing through the Python interpreter, whose lock the engine's model
and codec threads then queue for (a lone row's frame is mostly that). A graph runs the
same ATen ops on the same values (the audio is the same bit for bit, tested), without the
interpreter between them, and it lets go of the interpreter's lock while it runs.

The graphs read and write the batch's caches through views that the caller slices for
the rows at hand (consecutive rows only; other row sets, word-timestamp steps and exact
models run eagerly), and positions enter as tensors, so one graph serves every batch size,
position and cache size. Traced after the speed choices have put their kernels in place;
:func:`vocalis.models.pocket.tuning.tune` and
:meth:`~vocalis.models.pocket.model.PocketTTSModel.quantize_int8`, which change the
kernels, drop them (:meth:`~vocalis.models.pocket.model.PocketTTSModel.drop_graphs`). A
FlowLM with ``flow_linears=hybrid`` (a one-row kernel chosen by the row count at each
call, which a graph would fix at its traced count) keeps its step and sampler eager.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from vocalis.models.tracing import trace_module

log = logging.getLogger(__name__)

#: the sampler head steps traced at load (the default of ``sampler_decode_steps``); other
#: counts run eagerly
SAMPLER_STEPS = (1,)


class FlowStep(nn.Module):
    """``forward(latents [n, 32], bos [n] bool, pos [n] long, pos_k [S] long, kv)`` ->
    condition ``[n, cond]`` float32: one FlowLM step of rows ``[0, n)`` (as
    :meth:`vocalis.models.pocket.batch.PocketBatch.step_rows`), ``kv``: each layer's cache
    ``[2, n, capacity, Hkv, D]`` (views of the batch's), ``pos_k = arange(max(pos) + 1)``."""

    def __init__(self, flow_lm: nn.Module):
        super().__init__()
        self.flow_lm = flow_lm

    def forward(self, latents, bos, pos, pos_k, kv):
        fm = self.flow_lm
        x = torch.where(bos[:, None], fm.bos_emb[None, :], latents)[:, None, :]
        h = fm.transformer.linear_rows(fm.input_linear(x), kv, slice(0, x.shape[0]), pos, pos_k)
        return fm.condition(h)


class Sampler(nn.Module):
    """``forward(cond [n, cond], noise [n, 32])`` -> latents ``[n, 32]``:
    :meth:`~vocalis.models.pocket.flow_lm.FlowLM.sample` with ``steps`` steps."""

    def __init__(self, flow_lm: nn.Module, steps: int):
        super().__init__()
        self.flow_lm = flow_lm
        self.steps = steps

    def forward(self, cond, noise):
        return self.flow_lm.sample(cond, noise, self.steps)


class CodecHead(nn.Module):
    """``forward(latents [n, 32], up_state [n, C, tail], pos [n] long, kv)`` ->
    ``(x [n, C, 16], next up_state)``: the first codec stage
    (:func:`vocalis.models.pocket.batch.codec_head`) of rows whose decoder ring caches are
    ``kv`` (each layer's ``[2, n, ring, H, D]``, views of the batch's)."""

    def __init__(self, model):
        super().__init__()
        self.mimi = model.mimi  # registered, so that the graph holds the codec's weights
        self.model = [model]  # not a submodule: the FlowLM's normalization buffers only

    def forward(self, latents, up_state, pos, kv):
        from vocalis.models.pocket.batch import codec_head

        state = [up_state]
        x = codec_head(self.model[0], latents, state, kv, slice(0, latents.shape[0]), pos)
        return x, state[0]


def trace_graphs(model) -> dict:
    """Record the graphs of ``model`` (a :class:`PocketTTSModel` on its device, its kernels
    chosen); returns ``{"flow_step": ..., "codec_head": ...}`` and puts the sampler graphs on
    ``model.flow_lm`` (by step count). Example inputs: 2 rows at position 3. A kernel that
    cannot be recorded leaves the model eager (logged): the graphs are a speed-up only."""
    model.drop_graphs()
    try:
        graphs, samplers = _record(model)
    except Exception as e:  # noqa: BLE001 - any failure to record: the eager path stays
        log.warning("Pocket TTS graphs not recorded (%s: %s); frames run eagerly",
                    type(e).__name__, e)
        return {}
    model.flow_lm.__dict__["_sample_graphs"] = samplers
    return graphs


def _record(model) -> tuple[dict, dict]:
    from vocalis.models.packed import PackedLinear
    from vocalis.models.pocket.batch import PocketBatch

    fm, mimi = model.flow_lm, model.mimi
    dev = model.device
    latent = int(fm.bos_emb.shape[-1])
    with torch.inference_mode(False):  # the graphs write into these while being recorded
        scratch = PocketBatch(model, 2)
        scratch.ensure(2, 8)
    up = mimi.upsample.convtr

    def step_args():
        return (torch.zeros(2, latent, device=dev), torch.tensor([True, False], device=dev),
                torch.full((2,), 3, dtype=torch.long, device=dev),
                torch.arange(4, device=dev), [d[:, :2] for d in scratch.flow_kv])

    def head_args():
        return (torch.zeros(2, latent, device=dev), scratch.conv_state[up][:2].clone(),
                torch.full((2,), 3, dtype=torch.long, device=dev),
                [d[:, :2] for d in scratch.dec_kv])

    def sample_args():
        cond = fm.condition(torch.zeros(2, 1, fm.d_model, device=dev))
        return cond, torch.zeros(2, latent, device=dev)

    graphs = {"codec_head": trace_module(CodecHead(model), head_args, optimize=False)}
    samplers = {}
    if not any(isinstance(m, PackedLinear) and m.one_row_default for m in fm.modules()):
        graphs["flow_step"] = trace_module(FlowStep(fm), step_args, optimize=False)
        samplers = {s: trace_module(Sampler(fm, s), sample_args, optimize=False)
                    for s in SAMPLER_STEPS}
    return graphs, samplers


__all__ = ["SAMPLER_STEPS", "CodecHead", "FlowStep", "Sampler", "trace_graphs"]
