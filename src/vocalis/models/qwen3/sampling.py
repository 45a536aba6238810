"""Token selection for the Qwen3-TTS talker (codebook 0) and sub-talker (codebooks 1-15),
in the order of the official path: ``qwen-tts==0.1.1`` calls HF ``generate`` (transformers
4.57.3), whose ``_get_logits_processor`` (``generation/utils.py:1141-1275``) and ``_sample``
(``generation/utils.py:2800-2829``) do, on fp32 logits ``[B, V]``:

1. repetition penalty over the ids generated so far (talker: codebook-0 tokens only, since
   ``generate`` starts from ``inputs_embeds`` with empty ``input_ids``);
2. ``min_new_tokens`` = 2: EOS → -inf while fewer than 2 tokens exist (talker);
3. suppression of ids ``vocab-1024 .. vocab-1`` except EOS (talker;
   ``modeling_qwen3_tts.py:2059-2063``);
4. only when sampling: temperature (skipped at 1.0), top-k (skipped at 0), top-p (skipped at 1.0);
5. ``softmax`` → ``torch.multinomial(probs, 1)`` when sampling, else ``argmax``.

The sub-talker gets steps 4-5 only (no penalty, no EOS, no suppression: its config has
``eos_token_id`` null and ``generate`` is called with ``do_sample/top_k/top_p/temperature``
only, ``modeling_qwen3_tts.py:1669-1679``).

Defaults are merged per key as ``Qwen3TTSModel._merge_generate_kwargs``
(``inference/qwen3_tts_model.py:287-354``): the caller's value, else the checkpoint's
``generation_config.json``, else the hard defaults below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from vocalis.errors import InputError

# inference/qwen3_tts_model.py:320-331
HARD_DEFAULTS = dict(do_sample=True, top_k=50, top_p=1.0, temperature=0.9, repetition_penalty=1.05,
                     subtalker_dosample=True, subtalker_top_k=50, subtalker_top_p=1.0,
                     subtalker_temperature=0.9, max_new_tokens=2048)
MIN_NEW_TOKENS = 2  # modeling_qwen3_tts.py:2046


@dataclass(frozen=True)
class SamplingParams:
    """One sampler: ``do_sample`` False means greedy (argmax) and ignores the rest."""

    do_sample: bool = True
    top_k: int = 50
    top_p: float = 1.0
    temperature: float = 0.9

    def check(self, name: str) -> None:
        if self.do_sample and not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise InputError(f"{name} temperature must be > 0, got {self.temperature}; "
                             "use greedy decoding instead of temperature 0", param=f"{name}temperature")
        if self.top_k < 0:
            raise InputError(f"{name} top_k must be >= 0 (0 = off), got {self.top_k}", param=f"{name}top_k")
        if not 0 < self.top_p <= 1:
            raise InputError(f"{name} top_p must be in (0, 1], got {self.top_p}", param=f"{name}top_p")


@dataclass(frozen=True)
class GenerationParams:
    """Everything the official ``generate_*`` methods take for sampling and length."""

    talker: SamplingParams = SamplingParams()
    subtalker: SamplingParams = SamplingParams()
    repetition_penalty: float = 1.05
    max_new_tokens: int = 2048

    @classmethod
    def resolve(cls, generation_config: dict | None = None, **user) -> "GenerationParams":
        """Merge as the official: ``user[k]`` if not None, else ``generation_config[k]``,
        else :data:`HARD_DEFAULTS`. Keys are the official kwarg names (``do_sample``,
        ``top_k``, ..., ``subtalker_temperature``, ``max_new_tokens``).

        Raises :class:`InputError` for unknown keys or out-of-range values."""
        unknown = sorted(set(user) - set(HARD_DEFAULTS))
        if unknown:
            raise InputError(f"unknown generation option(s) {unknown}; valid: {sorted(HARD_DEFAULTS)}")
        gc = generation_config or {}
        v = {k: user[k] if user.get(k) is not None else gc.get(k, d) for k, d in HARD_DEFAULTS.items()}
        out = cls(SamplingParams(bool(v["do_sample"]), int(v["top_k"]), float(v["top_p"]), float(v["temperature"])),
                  SamplingParams(bool(v["subtalker_dosample"]), int(v["subtalker_top_k"]),
                                 float(v["subtalker_top_p"]), float(v["subtalker_temperature"])),
                  float(v["repetition_penalty"]), int(v["max_new_tokens"]))
        out.check()
        return out

    def check(self) -> None:
        self.talker.check("")
        self.subtalker.check("subtalker_")
        if not self.repetition_penalty > 0:
            raise InputError(f"repetition_penalty must be > 0, got {self.repetition_penalty}",
                             param="repetition_penalty")
        if self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}", param="max_new_tokens")

    def greedy(self) -> "GenerationParams":
        """The same with argmax on both samplers (penalty and limits unchanged)."""
        return replace(self, talker=replace(self.talker, do_sample=False),
                       subtalker=replace(self.subtalker, do_sample=False))


def talker_scores(logits: torch.Tensor, history: torch.Tensor, *, eos_id: int, penalty: float) -> torch.Tensor:
    """Steps 1-3 on talker logits ``[B, V]`` fp32; ``history [B, n]`` = codebook-0 ids
    generated so far (n may be 0). Returns new scores ``[B, V]``.

    Penalty (``logits_process.py:402-405``): ``s<0 → s·p, else s/p`` at each generated id.
    Min new tokens (``logits_process.py:220-227``), suppression (``logits_process.py:1915-1919``).
    """
    scores = logits
    if penalty != 1.0 and history.shape[-1] > 0:
        s = torch.gather(scores, 1, history)
        s = torch.where(s < 0, s * penalty, s / penalty)
        scores = scores.scatter(1, history, s)
    vocab = torch.arange(scores.shape[-1], device=scores.device)
    if history.shape[-1] < MIN_NEW_TOKENS:
        scores = torch.where(vocab == eos_id, -math.inf, scores)
    suppress = (vocab >= scores.shape[-1] - 1024) & (vocab != eos_id)
    return torch.where(suppress, -float("inf"), scores)


def choose(scores: torch.Tensor, p: SamplingParams, generator: torch.Generator | None) -> torch.Tensor:
    """Steps 4-5: ``scores [B, V]`` → ids ``[B]``.

    Temperature ``s/T`` (``logits_process.py`` TemperatureLogitsWarper), top-k keeps
    ``s >= k-th largest`` (ties kept, ``logits_process.py:575-579``), top-p as
    ``logits_process.py:516-527``; then ``torch.multinomial(softmax(s), 1)`` drawing from
    ``generator`` (``generation/utils.py:2825-2827``; the official draws from the global RNG).
    A generator on another device than ``scores`` (the engine's per-request generators are
    CPU ones) draws there, so a seed gives the same draws on a GPU as on the CPU.
    """
    if not p.do_sample:
        return torch.argmax(scores, dim=-1)
    if p.temperature != 1.0:
        scores = scores / p.temperature
    if p.top_k:
        k = min(p.top_k, scores.shape[-1])
        scores = scores.masked_fill(scores < torch.topk(scores, k)[0][..., -1, None], -float("inf"))
    if p.top_p < 1.0:
        sorted_s, idx = torch.sort(scores, descending=False)
        remove = sorted_s.softmax(dim=-1).cumsum(dim=-1) <= (1 - p.top_p)
        remove[..., -1:] = 0
        scores = scores.masked_fill(remove.scatter(1, idx, remove), -float("inf"))
    probs = torch.nn.functional.softmax(scores, dim=-1)
    if generator is not None and generator.device != probs.device:
        return torch.multinomial(probs.to(generator.device), num_samples=1,
                                 generator=generator).squeeze(1).to(probs.device)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(1)
