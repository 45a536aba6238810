"""Random-weight Pocket TTS checkpoints in the official file layout.

Real weights cannot be downloaded everywhere (CI, air-gapped machines), but the
whole pipeline — loading, voice cloning, generation, decoding, the official package
itself — runs on any weights with the right names and shapes. ``write_random_checkpoint``
writes, for one released config:

* ``model.safetensors``: every tensor of the official bundle (same names and shapes;
  parameters stored as bfloat16 like the released bundles, buffers as float32);
* the tokenizer the config asks for (tokenizers JSON or SentencePiece model) with its
  ``n_bins`` vocabulary;
* ``config.yaml``: the released config with local paths (absolute, or relative to the
  folder with ``relative_paths=True``), loadable by both vocalis (``--model DIR``) and
  pocket-tts (``--config DIR/config.yaml``; relative paths: from inside the folder);
* ``voice.wav``: a 2 s synthetic voice prompt (24 kHz mono) to clone from.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from vocalis.errors import InputError
from vocalis.models.pocket import registry, tokenizer_files
from vocalis.models.pocket.config import dump_config
from vocalis.models.pocket.flow_lm import FlowLM
from vocalis.models.pocket.mimi import MimiCodec
from vocalis.outputs import place_folder

_BUFFERS = ("emb_std", "emb_mean", ".freqs")


def random_state_dict(config_name: str, seed: int = 0) -> dict[str, torch.Tensor]:
    """Official tensor names -> random tensors for ``config_name``.

    Parameters get PyTorch's default initialisation for their layer type (drawn from a
    generator seeded with ``seed``), normalisation gains 1 and biases 0 as at init;
    ``bos_emb``, ``bos_before_voice`` and ``speaker_proj_weight`` are Gaussian;
    ``emb_std``/``emb_mean`` are drawn around 1 and 0, ``freqs`` keep their formula.
    """
    cfg = registry.released_config(config_name)
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        flow = FlowLM(cfg.flow_lm, cfg.mimi.quantizer.dimension, cfg.mimi.latent_dim)
        mimi = MimiCodec(cfg.mimi)
        with torch.no_grad():
            flow.bos_emb.normal_()
            if flow.insert_bos_before_voice:
                flow.bos_before_voice.normal_()
            flow.speaker_proj_weight.normal_(0.0, 1.0 / math.sqrt(cfg.mimi.latent_dim))
            flow.emb_std.uniform_(0.5, 1.5)
            flow.emb_mean.normal_(0.0, 0.1)
            flow.conditioner.embed.weight.normal_()
    finally:
        torch.random.set_rng_state(state)
    out: dict[str, torch.Tensor] = {}
    for prefix, module in (("flow_lm", flow), ("mimi", mimi)):
        for k, v in module.state_dict().items():
            name = f"{prefix}.{k}"
            keep = any(name.endswith(b) for b in _BUFFERS)
            out[name] = v.detach().clone().contiguous() if keep else v.detach().to(torch.bfloat16)
    return out


def _synthetic_voice(seconds: float = 2.0, rate: int = 24000, seed: int = 0) -> np.ndarray:
    """A voiced-speech-like test signal: a glottal-ish harmonic series with pitch glide,
    syllable-rate amplitude modulation and a little noise, ending in silence."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    f0 = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    x = sum(np.sin(k * phase) / k for k in range(1, 12))
    env = 0.5 * (1 - np.cos(2 * np.pi * 4 * t)) * (t < seconds - 0.3)
    x = 0.2 * env * x + 0.005 * rng.standard_normal(t.shape)
    return x.astype(np.float32)


#: ``seed`` range: the SentencePiece trainer takes an unsigned 32-bit seed
MAX_SEED = 2**32 - 1
_HEADER = "# random-weight checkpoint of "


def is_random_checkpoint(folder: Path) -> bool:
    """``folder`` holds a random Pocket TTS checkpoint written by vocalis."""
    try:
        with open(folder / "config.yaml", encoding="utf-8") as f:
            return f.readline().startswith(_HEADER)
    except (OSError, UnicodeDecodeError):
        return False


def write_random_checkpoint(config_name: str, out_dir: str | Path, seed: int = 0, *,
                            force: bool = False, relative_paths: bool = False,
                            replaceable=None) -> Path:
    """Write a random checkpoint for a released config into ``out_dir``; returns the YAML path.

    The files are written into a temporary folder next to ``out_dir`` and moved into place
    at the end, so an error or an interrupt leaves nothing half-written. ``out_dir`` must
    not exist or be empty; ``force=True`` replaces a folder that holds a checkpoint written
    here (``replaceable(folder)``, default :func:`is_random_checkpoint`; and everything in
    it), never another folder. Files get the usual permissions
    (``0666`` less the umask, e.g. 0644).

    ``relative_paths``: ``config.yaml`` names its weights and tokenizer by file name, so the
    folder can be moved or copied (vocalis resolves them from the YAML's folder; the official
    package from the working directory, so run it from inside the folder). Otherwise the
    paths are absolute and the official package loads the YAML from anywhere.

    Raises:
        InputError: unknown config name (lists the known ones), a seed outside
        ``[0, MAX_SEED]``, or an ``out_dir`` that is a file, a non-empty folder (without
        ``force``) or a folder that is not a random checkpoint.
    """
    if config_name not in registry.config_names():
        raise InputError(f"unknown config {config_name!r}; known: "
                         + ", ".join(registry.config_names()))
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InputError(f"seed must be an integer in [0, {MAX_SEED}], got {seed!r}")
    out = Path(out_dir).expanduser().absolute()
    place_folder(out, lambda tmp: _write_files(config_name, tmp, out, seed, relative_paths),
                 force, replaceable or is_random_checkpoint)
    return out / "config.yaml"


def _write_files(config_name: str, tmp: Path, final: Path, seed: int, relative: bool) -> None:
    """Write the checkpoint into ``tmp``; the YAML names files as they will be in ``final``."""
    cfg = registry.released_config(config_name)
    lt = cfg.flow_lm.lookup_table
    if lt.tokenizer in ("tokenizers", "json"):
        tok_name = "tokenizer.json"
        tokenizer_files.write_tokenizers_json(tmp / tok_name, vocab_size=lt.n_bins, seed=seed)
    else:
        tok_name = "tokenizer.model"
        tokenizer_files.write_sentencepiece_model(tmp / tok_name, vocab_size=lt.n_bins, seed=seed)
    save_file(random_state_dict(config_name, seed), str(tmp / "model.safetensors"),
              metadata={"vocalis.random_checkpoint": config_name, "vocalis.seed": str(seed)})
    cfg.weights_path = "model.safetensors" if relative else str(final / "model.safetensors")
    cfg.weights_path_without_voice_cloning = None
    lt.tokenizer_path = tok_name if relative else str(final / tok_name)
    (tmp / "config.yaml").write_text(
        f"{_HEADER}{config_name} (seed {seed}), written by `vocalis models random`"
        + ("; paths are relative to this folder" if relative else "") + "\n"
        + dump_config(cfg), encoding="utf-8")
    import soundfile

    soundfile.write(str(tmp / "voice.wav"), _synthetic_voice(seed=seed), 24000, subtype="PCM_16")
