"""Pocket TTS: loading, text chunks, voice prompts, and the generation rules.

The engine (``vocalis.engine.scheduler`` over ``models.pocket.batch``) runs requests
with the official pass boundaries and random draws, so that a seeded request equals
the official package run after ``torch.manual_seed(seed)``:

* per text chunk: one forward over the chunk's tokens (after the voice prefix), which
  also draws one ``[1, 32]`` noise sample that is discarded;
* then one forward per frame from BOS, each drawing one noise sample; EOS counts only
  from frame 6; frames are emitted until ``eos_step + frames_after_eos`` (exclusive) or
  ``max_gen_len = ceil((tokens / 3 + 2) * 12.5)``;
* each chunk is decoded with a fresh codec state, and its first 120 samples (5 ms) are
  faded in linearly.

Source: pocket-tts 4.0.1 ``models/tts_model.py``; see ``shared/reference/pocket-tts.md``.
"""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from vocalis import hub
from vocalis.errors import CheckpointError, InputError, ModelNotFound, VoiceError
from vocalis.models.packed import can_pack_linears, int8_linear, pack_linears
from vocalis.models.pocket.config import PocketConfig
from vocalis.models.pocket.flow_lm import FlowLM
from vocalis.models.pocket.mimi import MimiCodec
from vocalis.models.pocket.options import MAX_FRAMES  # noqa: F401  (re-exported)
from vocalis.models.pocket.voice import VoiceState
from vocalis.models.pocket.text import (
    TextRules,
    check_speakable,
    check_unicode,
    chunk_token_bound,
    prepare,
    split_chunks,
)

log = logging.getLogger(__name__)

FRAMES_BEFORE_EOS = 6  # EOS is ignored on the first frames of a chunk
TOKENS_PER_SECOND = 3.0
PADDING_SECONDS = 2.0
FADE_IN_SAMPLES = 120  # 5 ms at 24 kHz
VOICE_MAX_SECONDS = 30.0
VOICE_MIN_SECONDS = 0.08  # one codec frame: shorter prompts are refused
VOICE_WARN_SECONDS = 1.0  # shorter prompts get a warning
VOICE_SILENCE_PEAK = 1e-3  # -60 dBFS: a prompt whose peak is below is refused as silent


@dataclass(frozen=True)
class SamplingParams:
    """Per-request generation parameters (official names and defaults).

    ``temperature``: noise variance (std = sqrt(temperature)); ``eos_threshold``: EOS when
    the logit is strictly above it; ``frames_after_eos``: frames kept after EOS (None =
    3 for texts of <= 4 words else 1, plus 2); ``noise_clamp``: truncate the noise to
    [-clamp, clamp]; ``sampler_decode_steps``: LSD steps; ``max_tokens``: chunk size;
    ``seed``: None = random; ``max_frames``: if set, ignore EOS and emit exactly this many
    frames per chunk (benchmarking on random weights).
    """

    temperature: float | None = None
    eos_threshold: float | None = None
    frames_after_eos: int | None = None
    noise_clamp: float | None = None
    sampler_decode_steps: int = 1
    max_tokens: int = 50
    seed: int | None = None
    max_frames: int | None = None


def max_gen_len(n_tokens: int, frame_rate: float = 12.5) -> int:
    """Frame budget of a chunk: ``ceil((tokens / 3 + 2) * frame_rate)``."""
    return math.ceil((n_tokens / TOKENS_PER_SECOND + PADDING_SECONDS) * frame_rate)


class _Tokenizer:
    """tokenizers JSON or SentencePiece model behind one ``encode/decode`` interface."""

    def __init__(self, kind: str, path: Path, n_bins: int):
        self.path = path
        try:
            if kind in ("tokenizers", "json") or path.suffix == ".json":
                import tokenizers

                self._tok = tokenizers.Tokenizer.from_file(str(path))
                size = self._tok.get_vocab_size()
                self.encode = lambda text: self._tok.encode(text).ids
                self.decode = lambda ids: self._tok.decode(ids)
            else:
                import sentencepiece

                self._sp = sentencepiece.SentencePieceProcessor(model_file=str(path))
                size = self._sp.vocab_size()
                self.encode = lambda text: self._sp.encode(text, out_type=int)
                self.decode = lambda ids: self._sp.decode(ids)
        except Exception as e:  # the libraries raise bare Exception/RuntimeError on bad files
            raise CheckpointError(f"cannot load tokenizer {path}: {e}") from None
        if size != n_bins:
            raise CheckpointError(
                f"tokenizer {path} has {size} tokens but the config says n_bins={n_bins}")


def _fingerprint(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().float().cpu().numpy().tobytes()).hexdigest()[:16]


class PocketTTSModel:
    """A loaded Pocket TTS model (FlowLM + Mimi + tokenizer) on one device.

    Attributes: ``config``, ``name`` (config name or YAML path), ``sample_rate`` (Hz),
    ``frame_samples`` (1920), ``has_voice_cloning``.
    """

    def __init__(self, config: PocketConfig, name: str, tokenizer: _Tokenizer,
                 device: str | torch.device = "cpu", has_voice_cloning: bool = True):
        self.config = config
        self.name = name
        self.tokenizer = tokenizer
        self.has_voice_cloning = has_voice_cloning
        self.device = torch.device(device)
        m = config.mimi
        # Built without initialising the parameters (every tensor comes from the weights
        # file in load_weights, which refuses files that miss any), then given memory.
        with torch.device("meta"):
            self.flow_lm = FlowLM(config.flow_lm, m.quantizer.dimension, m.latent_dim)
            self.mimi = MimiCodec(m)
        self.flow_lm.to_empty(device="cpu")
        self.mimi.to_empty(device="cpu")
        self.sample_rate = m.sample_rate
        self.frame_samples = m.frame_samples
        self.rules = TextRules(
            pad_with_spaces_for_short_inputs=config.pad_with_spaces_for_short_inputs,
            remove_semicolons=config.remove_semicolons,
            append_terminal_punctuation=config.append_terminal_punctuation,
            capitalize_first_letter=config.capitalize_first_letter,
            replace_characters=dict(config.replace_characters),
        )
        self.weights_fingerprint = ""
        self.quantized = False
        # TorchScript graphs of the per-frame work (vocalis.models.pocket.graphs), by name;
        # empty: everything runs eagerly
        self.graphs: dict = {}
        self.exact = True

    # ---------------------------------------------------------------- loading

    def state_dict_template(self) -> dict[str, torch.Tensor]:
        """Official tensor names -> tensors of this model (``flow_lm.*``, ``mimi.*``)."""
        out = {f"flow_lm.{k}": v for k, v in self.flow_lm.state_dict().items()}
        out.update({f"mimi.{k}": v for k, v in self.mimi.state_dict().items()})
        return out

    def load_weights(self, path: Path) -> None:
        """Load an official-layout ``model.safetensors`` bundle (any float dtype; cast to fp32).

        Raises:
            CheckpointError: unreadable file, or missing/unexpected/mis-shaped tensors
            (the message names them).
        """
        try:
            tensors = load_file(str(path))
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"cannot read weights {path}: {e}") from None
        expected = self.state_dict_template()
        missing = sorted(set(expected) - set(tensors))
        unexpected = sorted(set(tensors) - set(expected))
        wrong = sorted(k for k in set(expected) & set(tensors)
                       if tuple(expected[k].shape) != tuple(tensors[k].shape))
        problems = []
        if missing:
            problems.append(f"{len(missing)} missing ({', '.join(missing[:5])}"
                            f"{', ...' if len(missing) > 5 else ''})")
        if unexpected:
            problems.append(f"{len(unexpected)} unexpected ({', '.join(unexpected[:5])}"
                            f"{', ...' if len(unexpected) > 5 else ''})")
        if wrong:
            k = wrong[0]
            problems.append(f"{len(wrong)} with wrong shape (e.g. {k}: file "
                            f"{list(tensors[k].shape)}, config {list(expected[k].shape)})")
        if problems:
            raise CheckpointError(f"weights {path} do not match config {self.name}: "
                                  + "; ".join(problems))
        with torch.no_grad():
            for k, v in tensors.items():
                expected[k].copy_(v.to(expected[k].dtype))
        self.weights_fingerprint = _fingerprint(self.flow_lm.speaker_proj_weight)

    def quantize_int8(self) -> None:
        """Dynamic int8 quantization of the FlowLM transformer's attention and FFN linears
        (as the official ``--quantize``; CPU only; not numerically identical to fp32).

        Weights become int8 with one scale per matrix (PyTorch's ``quantize_dynamic``
        default, as the official package's torch.ao path); activations are quantized per
        call. The sampler head, embeddings and the Mimi codec stay float32 here (the speed
        choices may then put the codec's decoder transformer in int8 and its SEANet in
        bfloat16: :mod:`vocalis.models.pocket.tuning`).

        Raises:
            InputError: the model is not on the CPU.
        """
        if self.device.type != "cpu":
            raise InputError("int8 quantization runs on the CPU only: drop --quantize or use "
                             "--device cpu")
        self.drop_graphs()  # they hold the float32 linears
        for layer in self.flow_lm.transformer.layers:
            for parent, names in ((layer.self_attn, ("in_proj", "out_proj")),
                                  (layer, ("linear1", "linear2"))):
                for name in names:
                    setattr(parent, name, int8_linear(getattr(parent, name), per_channel=False))
        self.quantized = True

    def drop_graphs(self) -> None:
        """Run eagerly from now on: drop the graphs of the per-frame work
        (:mod:`vocalis.models.pocket.graphs`), recorded with kernels that a change of
        kernels makes stale."""
        self.graphs = {}
        self.flow_lm.__dict__["_sample_graphs"] = {}

    def to(self, device: str | torch.device, exact: bool = False,
           pack: bool | None = None) -> "PocketTTSModel":
        """Move to ``device`` for inference (call once, after :meth:`load_weights`).

        ``pack`` (default: ``not exact``): on CPU, repack the float32 linears for oneDNN
        (:class:`~vocalis.models.packed.PackedLinear`), equal to float rounding; faster on
        some CPUs, slower on others, so :func:`vocalis.load` passes ``pack=False`` and lets
        :mod:`vocalis.models.pocket.tuning` decide by measurement. ``exact=True`` keeps
        PyTorch's default kernels, whose batch-1 results are bit-identical to the official
        package's.
        """
        self.device = torch.device(device)
        self.flow_lm.to(self.device).eval()
        self.mimi.to(self.device).eval()
        self.exact = exact
        if pack is None:
            pack = not exact
        if pack and exact:
            raise ValueError("exact keeps the default kernels: do not pack")
        if pack and can_pack_linears(self.device):
            pack_linears(self.flow_lm)
            pack_linears(self.mimi)
        return self

    # ---------------------------------------------------------------- text

    def chunk_text(self, text: str, max_tokens: int = 50) -> list[tuple[str, list[int], int]]:
        """Split and prepare text: ``[(prepared chunk text, token ids, frames_after_eos_guess)]``.

        Every chunk has at most ``chunk_token_bound(max_tokens)`` tokens (250 for the
        default 50; see :func:`vocalis.models.pocket.text.split_chunks`). Characters the tokenizer
        does not know (emoji, most symbols) are logged as a warning.

        Raises:
            InputError: not a string, not valid Unicode (a lone surrogate), empty, or nothing
            the model can speak (no letter or digit it knows).
        """
        if not isinstance(text, str):
            raise InputError(f"text must be a string, got {type(text).__name__}")
        check_unicode(text)
        if not text.strip():
            raise InputError("text is empty: give some words to speak")
        check_speakable(self.tokenizer, text)
        bound = chunk_token_bound(max_tokens)
        out = []
        for chunk in split_chunks(self.tokenizer, text, max_tokens, self.rules):
            prepared, guess = prepare(chunk, self.rules)
            ids = self.tokenizer.encode(prepared)
            if len(ids) > bound:  # split_chunks guarantees it; never allocate beyond it
                raise InputError(f"a text chunk has {len(ids)} tokens, above the limit of "
                                 f"{bound}: add punctuation or spaces to the text")
            out.append((prepared, ids, guess + 2))
        return out

    # ---------------------------------------------------------------- voices

    @torch.no_grad()
    def voice_from_audio(self, audio: np.ndarray, source: str = "audio") -> VoiceState:
        """Voice state from mono float32 PCM ``[T]`` at the model's sample rate.

        The prompt is cut after its last loud 20 ms frame (within 35 dB of the loudest),
        the last 20 ms faded out and 80 ms of silence appended (official ``end_on_pause``);
        then encoded by Mimi, projected with ``speaker_proj_weight`` and run through the
        FlowLM in one pass (after ``bos_before_voice`` where the config has it).

        Prompts shorter than ``VOICE_MIN_SECONDS`` (one 80 ms codec frame) or silent (peak
        below ``VOICE_SILENCE_PEAK``, -60 dBFS) are refused; prompts shorter than
        ``VOICE_WARN_SECONDS`` (1 s) get a warning (3-10 s of clear speech clone best).

        Raises:
            VoiceError: the model has no voice-cloning weights, or the audio is empty, too
            short, silent, holds NaN/inf samples, or gives non-finite values in the model.
        """
        if not self.has_voice_cloning:
            raise VoiceError(
                "these weights have no voice cloning (the gated kyutai/pocket-tts repo could "
                "not be downloaded): use a predefined voice name or a .safetensors voice state, "
                "or accept the terms at https://huggingface.co/kyutai/pocket-tts and run "
                "`hf auth login`")
        audio = np.ascontiguousarray(audio, dtype=np.float32)
        if audio.size == 0:
            raise VoiceError(f"voice audio {source} is empty")
        bad = int(np.count_nonzero(~np.isfinite(audio)))
        if bad:
            raise VoiceError(f"voice audio {source} holds {bad} NaN or infinite sample(s) of "
                             f"{audio.size}: it is corrupt; re-export it (e.g. `ffmpeg -i INPUT "
                             "-ac 1 voice.wav`)")
        seconds = audio.size / self.sample_rate
        if seconds < VOICE_MIN_SECONDS:
            raise VoiceError(f"voice audio {source} is {seconds * 1000:.1f} ms long "
                             f"({audio.size} samples); a voice "
                             f"needs at least {VOICE_MIN_SECONDS * 1000:.0f} ms (one codec "
                             "frame): use 3-10 s of clear speech")
        peak = float(np.abs(audio).max())
        if peak < VOICE_SILENCE_PEAK:
            raise VoiceError(f"voice audio {source} is silent (peak {_dbfs(peak)}): use a "
                             "recording of 3-10 s of clear speech")
        if seconds < VOICE_WARN_SECONDS:
            log.warning("voice audio %s is only %.2f s long: a prompt under %.0f s carries "
                        "little of the voice; 3-10 s of clear speech clone best", source,
                        seconds, VOICE_WARN_SECONDS)
        wav = _end_on_pause(torch.from_numpy(audio)[None], self.sample_rate)
        latents = self.mimi.encode(wav[None].to(self.device)).float()
        prompt = torch.nn.functional.linear(latents, self.flow_lm.speaker_proj_weight)
        if self.flow_lm.insert_bos_before_voice:
            prompt = torch.cat([self.flow_lm.bos_before_voice, prompt], dim=1)
        caches = self.flow_lm.new_caches(1, prompt.shape[1])
        self.flow_lm.transformer(prompt, caches)
        kv = [c.data.clone() for c in caches]
        if not all(bool(torch.isfinite(k).all()) for k in kv):
            raise VoiceError(f"voice audio {source} gives non-finite values in the model "
                             f"(samples up to {peak:.3g}): normalise it to [-1, 1] and retry")
        return VoiceState(kv, {"config": self.name, "weights": self.weights_fingerprint,
                               "source": source})

    def check_voice(self, voice: VoiceState) -> VoiceState:
        """Raise :class:`VoiceError` unless ``voice`` fits this model's layers and heads."""
        t = self.config.flow_lm.transformer
        want = (t.num_layers, t.kv_heads, t.head_dim)
        got = (len(voice.kv), voice.kv[0].shape[3], voice.kv[0].shape[4])
        where = voice.meta.get("source", "voice state")
        if got != want:
            raise VoiceError(
                f"{where} was made for a model with {got[0]} layers x {got[1]} KV heads x "
                f"{got[2]} dims, but {self.name} has {want[0]} x {want[1]} x {want[2]}: export "
                "the voice again with this model (`vocalis voices export --model ...`)")
        fp = voice.meta.get("weights")
        if fp and self.weights_fingerprint and fp != self.weights_fingerprint:
            raise VoiceError(
                f"{where} was made with other weights (config {voice.meta.get('config', '?')}) "
                f"than {self.name}; a voice state only works with the weights that made it: "
                "export it again from the audio with this model")
        return voice.to(self.device) if voice.kv[0].device != self.device else voice


def _dbfs(peak: float) -> str:
    return "-inf dBFS" if peak <= 0 else f"{20 * math.log10(peak):.0f} dBFS"


def _end_on_pause(wav: torch.Tensor, sample_rate: int, pause_s: float = 0.08,
                  fade_s: float = 0.02, floor_db: float = 35.0) -> torch.Tensor:
    """``[1, T]`` -> ``[1, T']``: cut trailing silence, fade out 20 ms, append 80 ms of zeros.

    20 ms frames; a frame is loud when its RMS level (dB) is within ``floor_db`` of the
    loudest. Same arithmetic as pocket-tts ``data/audio_utils.end_on_pause``.
    """
    frame = max(1, int(0.02 * sample_rate))
    n = wav.shape[-1] // frame
    if n == 0:
        return wav
    rms = wav[..., : n * frame].reshape(-1, n, frame).square().mean(dim=(0, 2)).sqrt()
    db = 20 * torch.log10(rms + 1e-12)
    loud = torch.nonzero(db > db.max() - floor_db).flatten()
    # No loud frame only when the levels are not finite (NaN, or overflow to inf): keep all.
    end = (int(loud[-1]) + 1) * frame if loud.numel() else n * frame
    wav = wav[..., :end].clone()
    fade = min(int(fade_s * sample_rate), end)
    wav[..., end - fade:] *= torch.linspace(1, 0, fade, dtype=wav.dtype)
    return torch.cat([wav, wav.new_zeros(*wav.shape[:-1], int(pause_s * sample_rate))], dim=-1)


def resolve_weights(config: PocketConfig, name: str, model_id: str | None = None,
                    ) -> tuple[Path, bool]:
    """Local path of the weights bundle and whether it has voice cloning.

    Tries ``weights_path`` (gated repo with voice cloning) and falls back to
    ``weights_path_without_voice_cloning``, saying so, as the official loader does.

    Raises:
        ModelNotFound: neither can be had (the message says how to get them).
    """
    if config.weights_path is None and config.weights_path_without_voice_cloning is None:
        raise ModelNotFound(f"config {name} names no weights_path")
    first_error: Exception | None = None
    if config.weights_path is not None:
        try:
            return hub.resolve(config.weights_path, model_id=model_id), True
        except ModelNotFound as e:
            first_error = e
            if config.weights_path_without_voice_cloning is None:
                raise
    alt = config.weights_path_without_voice_cloning
    assert alt is not None
    try:
        path = hub.resolve(alt, model_id=model_id)
    except ModelNotFound as e:
        if first_error is not None and not isinstance(first_error, hub.GatedRepoError):
            raise first_error from None
        raise e from None
    log.warning("weights with voice cloning unavailable (%s); using %s: predefined voices and "
                ".safetensors voice states work, cloning from audio does not",
                str(first_error).splitlines()[0] if first_error else "?", alt)
    return path, False
