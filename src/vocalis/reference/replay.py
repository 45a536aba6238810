"""Replay a fixture's official latents through vocalis's Mimi decoder.

The official decoder thread decodes "whatever latents have queued up" per call, so its
grouping depends on thread timing. Replaying with other groupings (one frame per call,
N frames per call, a whole chunk per call) shows whether vocalis's streaming decoder gives
the same samples however the frames are grouped; comparing with the fixture's waveform
(:func:`vocalis.reference.compare.compare`) is the fidelity check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vocalis.api import load
from vocalis.errors import HarnessError, InputError
from vocalis.reference.export import FIXTURE_JSON, FIXTURE_TENSORS, SCHEMA, SCHEMA_VERSION


@dataclass
class Fixture:
    """A loaded fixture: ``meta`` (``fixture.json``) and ``tensors`` (name -> CPU tensor)."""

    dir: Path
    meta: dict
    tensors: dict[str, torch.Tensor]

    @property
    def sample_rate(self) -> int:
        return int(self.meta["sample_rate"])

    @property
    def waveform(self) -> np.ndarray:
        """Official waveform, float32 ``[samples]``."""
        return self.tensors["waveform"].numpy().astype(np.float32, copy=False)

    @property
    def calls(self) -> list[dict]:
        return self.meta["decoder"]["calls"]


def fixture_dir(path: str | Path) -> Path:
    """A fixture directory, or any file inside it (``fixture.json``, ``.safetensors``)."""
    p = Path(path).expanduser()
    if p.is_file():
        p = p.parent
    if not p.exists():
        raise HarnessError(f"fixture not found: {path}")
    return p


def load_fixture(path: str | Path) -> Fixture:
    """Load a fixture written by :func:`vocalis.reference.export.export_fixture`.

    Raises:
        HarnessError: missing files, another schema, or inconsistent contents.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    d = fixture_dir(path)
    jpath, tpath = d / FIXTURE_JSON, d / FIXTURE_TENSORS
    for f in (jpath, tpath):
        if not f.is_file():
            raise HarnessError(f"not a fixture directory: {d} has no {f.name} (write one with "
                               "`vocalis reference export`)")
    try:
        meta = json.loads(jpath.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise HarnessError(f"cannot read {jpath}: {e}") from None
    if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
        raise HarnessError(f"{jpath} is not a vocalis reference fixture")
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise HarnessError(f"{jpath} has schema version {meta.get('schema_version')}, this "
                           f"vocalis reads version {SCHEMA_VERSION}: export it again")
    try:
        tensors = load_file(str(tpath))
    except (SafetensorError, OSError) as e:
        raise HarnessError(f"cannot read {tpath}: {e}") from None
    fx = Fixture(d, meta, tensors)
    _validate(fx)
    return fx


def _validate(fx: Fixture) -> None:
    t, calls = fx.tensors, fx.meta.get("decoder", {}).get("calls")
    if "latents" not in t or "waveform" not in t or not calls:
        raise HarnessError(f"fixture {fx.dir} lacks latents, waveform or decoder calls")
    total = sum(int(c["frames"]) for c in calls)
    if t["latents"].shape[1] != total:
        raise HarnessError(f"fixture {fx.dir}: latents hold {t['latents'].shape[1]} frames but "
                           f"the decoder calls sum to {total}")
    if not calls[0]["reset"]:
        raise HarnessError(f"fixture {fx.dir}: the first decoder call is not a reset")


def decode_groups(fx: Fixture, chunk_frames: int | None = None,
                  full_decoder: bool = False) -> list[tuple[int, int, bool, int]]:
    """Decode calls to make, as ``(first_frame, frames, reset, chunk)`` over ``latents``.

    Default: the official calls. ``full_decoder``: one call per text chunk (between resets).
    ``chunk_frames=N``: N frames per call, never crossing a reset.
    """
    if chunk_frames is not None and full_decoder:
        raise InputError("give either chunk_frames or full_decoder, not both")
    if chunk_frames is not None and (isinstance(chunk_frames, bool)
                                     or not isinstance(chunk_frames, int) or chunk_frames < 1):
        raise InputError(f"chunk_frames must be an integer >= 1, got {chunk_frames!r}")
    official = [(int(c["first_frame"]), int(c["frames"]), bool(c["reset"]), int(c["chunk"]))
                for c in fx.calls]
    if chunk_frames is None and not full_decoder:
        return official
    # spans between resets (one per text chunk that produced frames)
    spans: list[list[int]] = []
    for first, n, reset, chunk in official:
        if reset or not spans:
            spans.append([first, 0, chunk])
        spans[-1][1] += n
    groups = []
    for first, n, chunk in spans:
        step = n if full_decoder else chunk_frames
        for k, off in enumerate(range(0, n, step)):
            groups.append((first + off, min(step, n - off), k == 0, chunk))
    return groups


@torch.no_grad()
def replay_fixture(fixture_dir_or_file: str | Path, chunk_frames: int | None = None,
                   full_decoder: bool = False, model: str | None = None) -> np.ndarray:
    """Decode the fixture's official latents with vocalis's Mimi decoder.

    A fresh decoder state at each ``reset`` (start of a text chunk), sized like the official
    one; the 120-sample linear fade-in (``linspace(0, 1, 120)``) on the first samples
    decoded after each reset; frames grouped per decode call as the official calls did
    (default), ``chunk_frames`` at a time, or a whole chunk at once (``full_decoder``).

    Args:
        fixture_dir_or_file: fixture directory or a file in it.
        chunk_frames: frames per decode call (>= 1), or None.
        full_decoder: one decode call per text chunk.
        model: vocalis model id to load instead of the fixture's.

    Returns:
        float32 ``[samples]`` PCM at the fixture's sample rate (``frames * 1920`` samples).

    Raises:
        HarnessError: bad fixture or a decoder that does not fit it. InputError: bad options.
        ModelNotFound / CheckpointError: the model cannot be loaded.
    """
    fx = load_fixture(fixture_dir_or_file)
    groups = decode_groups(fx, chunk_frames, full_decoder)

    tts = load(model or _model_id(fx))
    mimi = tts.model.mimi
    latents = fx.tensors["latents"].to(torch.float32)
    if latents.shape[-1] != mimi.quantizer.output_proj.in_channels:
        raise HarnessError(f"fixture latents are {latents.shape[-1]}-d but the decoder of "
                           f"{tts.model_id} takes {mimi.quantizer.output_proj.in_channels}-d")
    if tts.sample_rate != fx.sample_rate:
        raise HarnessError(f"fixture is at {fx.sample_rate} Hz but {tts.model_id} decodes at "
                           f"{tts.sample_rate} Hz")
    capacities = _capacities(fx, groups, mimi.upsample_stride)
    fade_len = int(fx.meta["decoder"].get("fade_in_samples", 120))
    fade = torch.linspace(0, 1, fade_len)
    device = tts.model.device
    pieces: list[torch.Tensor] = []
    state = None
    for first, n, reset, chunk in groups:
        if reset:
            state = mimi.new_decoder_state(1, capacities[chunk])
        pcm = mimi.decode(latents[:, first:first + n].to(device), state)
        pcm = pcm.to("cpu", torch.float32)
        if reset:
            k = min(fade_len, pcm.shape[-1])
            pcm[..., :k] *= fade[:k]
        pieces.append(pcm.reshape(-1))
    return torch.cat(pieces).numpy().astype(np.float32, copy=False)


def _model_id(fx: Fixture) -> str:
    m = fx.meta["model"]
    load = m.get("official_load", {})
    if "config" in load:  # exported from a YAML: absolute local path or hf:// / https://
        return load["config"]
    return m["id"]


def _capacities(fx: Fixture, groups, stride: int) -> dict[int, int]:
    """Decoder state capacity (latent frames) per chunk index: the official ``max_gen_len``
    (``mimi_capacity_steps / 16``), and at least the chunk's frames."""
    frames: dict[int, int] = {}
    for _, n, _, chunk in groups:
        frames[chunk] = frames.get(chunk, 0) + n
    steps = {int(c["index"]): c.get("mimi_capacity_steps") for c in fx.meta.get("chunks", [])}
    return {chunk: max(n, -(-int(steps[chunk]) // stride) if steps.get(chunk) else 0, 1)
            for chunk, n in frames.items()}
