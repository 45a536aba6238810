"""Batch-1 Qwen3-TTS code generation that reproduces the official ``qwen-tts==0.1.1`` codes
(``modeling_qwen3_tts.py:1636-1744`` talker ``forward`` under HF ``generate``, and
``2240-2299``), greedy and seeded.

Per step t (``modeling:1663-1691``, HF ``_sample``):

1. the talker logits of the last position → codebook-0 token ``c0`` (``sampling.py``);
2. if ``c0`` is EOS, stop: the EOS token never gets a frame; if this was token number
   ``max_new_tokens``, stop too: HF ends before its frame is predicted, so a run that hits
   the limit yields ``max_new_tokens - 1`` frames (``modeling:2280-2289`` keeps only
   frames with predicted codes);
3. the code predictor turns ``[past_hidden, E(c0)]`` into codebooks 1-15 (15 draws);
4. the talker input is the sum of the 16 embeddings plus ``trailing[t]`` (or ``tts_pad``
   once the trailing text is used up), and one talker step gives the next logits.

Random draws therefore come in the official order: c0 of frame 0; then per frame the 15
sub-talker draws followed by the next c0. The official draws from the global torch RNG
after ``torch.manual_seed(S)``; here they come from ``generator`` (a ``torch.Generator``
seeded with S gives the same stream on CPU).
"""

from __future__ import annotations

import torch

from vocalis.models.qwen3.prompt import TalkerPrompt
from vocalis.models.qwen3.sampling import GenerationParams, choose, talker_scores
from vocalis.models.qwen3.talker import Talker


def seeded_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A per-request generator equivalent to the global RNG after ``torch.manual_seed(seed)``."""
    return torch.Generator(device=device).manual_seed(seed)


@torch.no_grad()
def generate_codes(talker: Talker, prompt: TalkerPrompt, params: GenerationParams,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """Codes ``[T, 16]`` (long) of one request; ``T <= params.max_new_tokens - 1`` unless
    EOS came first (then ``T`` = number of tokens before EOS)."""
    spec = talker.spec
    cache = talker.new_cache(1, prompt.prefill.shape[1] + min(params.max_new_tokens, 256))
    logits, hidden = talker.prefill(prompt.prefill, cache)
    logits, hidden = logits[:, -1], hidden[:, -1:]
    pos = prompt.prefill.shape[1]
    history = torch.zeros(1, 0, dtype=torch.long, device=logits.device)
    sub = lambda lg: choose(lg, params.subtalker, generator)  # noqa: E731
    frames = []
    for step in range(params.max_new_tokens):
        c0 = choose(talker_scores(logits, history, eos_id=spec.codec_eos_id, penalty=params.repetition_penalty),
                    params.talker, generator)
        history = torch.cat([history, c0[:, None]], dim=1)
        if int(c0) == spec.codec_eos_id or step == params.max_new_tokens - 1:
            break
        rest = talker.code_predictor.predict(hidden, talker.codec_embed(c0[:, None]), sub)
        frame = torch.cat([c0[:, None], rest], dim=1)  # [1, 16]
        frames.append(frame)
        embed = talker.frame_embed(frame[:, None])
        text = prompt.trailing[:, step:step + 1] if step < prompt.trailing.shape[1] else prompt.tts_pad
        logits, hidden = talker.decode(embed + text, cache, pos)
        pos += 1
    if not frames:
        return torch.zeros(0, spec.num_code_groups, dtype=torch.long)
    return torch.cat(frames, dim=0).cpu()
