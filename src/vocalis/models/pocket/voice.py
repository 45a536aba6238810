"""Voice states: the FlowLM KV cache after the voice prompt, and its file format.

A voice state holds, per transformer layer, keys (with RoPE applied) and values of
the ``P`` prompt positions (``[BOS_before_voice] + F`` encoded audio frames). The
file format is the official ``export-voice`` safetensors layout, so files move
both ways between vocalis and pocket-tts:

    ``transformer.layers.{i}.self_attn/cache``  float32 ``[2, 1, P, Hkv, D]``
    ``transformer.layers.{i}.self_attn/offset`` int64 ``[1]`` = P
    ``transformer.layers.{i}.self_attn/pad``    int64 ``[1]`` = 0

Legacy files may carry ``.../current_end`` instead of ``offset``; its length is P.
vocalis adds safetensors metadata (config name, weights fingerprint) that the
official loader ignores, to refuse a state made for other weights.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from vocalis.errors import VoiceError
from vocalis.outputs import save_safetensors

_KEY = re.compile(r"^transformer\.layers\.(\d+)\.self_attn/(cache|offset|pad|current_end)$")


@dataclass
class VoiceState:
    """Prefilled FlowLM KV cache of a voice prompt.

    ``kv[i]``: float32 ``[2, 1, P, Hkv, D]`` for layer i; ``length`` = P positions.
    ``meta``: where it came from (``config``, ``weights`` fingerprint, ``source``).
    """

    kv: list[torch.Tensor]
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def length(self) -> int:
        return self.kv[0].shape[2]

    def to(self, device) -> "VoiceState":
        return VoiceState([t.to(device) for t in self.kv], dict(self.meta))


def save_voice_state(state: VoiceState, path: str | Path) -> None:
    """Write ``state`` as an official-layout voice file (see module docstring)."""
    tensors: dict[str, torch.Tensor] = {}
    n = torch.tensor([state.length], dtype=torch.int64)
    for i, kv in enumerate(state.kv):
        prefix = f"transformer.layers.{i}.self_attn"
        tensors[f"{prefix}/cache"] = kv.detach().to("cpu", torch.float32).contiguous()
        tensors[f"{prefix}/offset"] = n.clone()
        tensors[f"{prefix}/pad"] = torch.zeros(1, dtype=torch.int64)
    meta = {f"vocalis.{k}": str(v) for k, v in state.meta.items()}
    save_safetensors(tensors, path, metadata=meta or None)


def load_voice_state(path: str | Path) -> VoiceState:
    """Read a voice file written by vocalis or by pocket-tts ``export-voice``.

    Raises:
        VoiceError: not a safetensors file, or not a voice state (names what is missing).
    """
    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = {k.removeprefix("vocalis."): v for k, v in (f.metadata() or {}).items()
                    if k.startswith("vocalis.")}
            layers: dict[int, dict[str, torch.Tensor]] = {}
            for key in f.keys():
                m = _KEY.match(key)
                if m is None:
                    raise VoiceError(
                        f"{path} is not a Pocket TTS voice state: unexpected tensor {key!r} "
                        "(export one with `vocalis voices export AUDIO OUT.safetensors`)")
                layers.setdefault(int(m.group(1)), {})[m.group(2)] = f.get_tensor(key)
    except (SafetensorError, OSError, ValueError) as e:
        if isinstance(e, VoiceError):
            raise
        raise VoiceError(f"cannot read voice state {path}: {e}; it must be a .safetensors voice "
                         "file from `vocalis voices export` or `pocket-tts export-voice`") from None
    if not layers or sorted(layers) != list(range(len(layers))):
        raise VoiceError(f"{path} holds no complete set of layer caches; it is not a voice state")
    kv = []
    for i in range(len(layers)):
        entry = layers[i]
        cache = entry.get("cache")
        if cache is None or cache.dim() != 5 or cache.shape[0] != 2 or cache.shape[1] != 1:
            raise VoiceError(f"{path}: layer {i} has no cache of shape [2, 1, P, H, D]")
        if "offset" in entry:
            p = int(entry["offset"].view(-1)[0])
        elif "current_end" in entry:
            p = int(entry["current_end"].shape[0])
        else:
            p = cache.shape[2]
        if not 0 < p <= cache.shape[2]:
            raise VoiceError(f"{path}: layer {i} offset {p} is outside its cache of "
                             f"{cache.shape[2]} positions")
        if not torch.isfinite(cache[:, :, :p]).all():
            raise VoiceError(f"{path}: layer {i} cache holds non-finite values")
        kv.append(cache[:, :, :p].float().contiguous())
    meta.setdefault("source", str(path))
    return VoiceState(kv, meta)
