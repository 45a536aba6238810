"""A loaded Qwen3-TTS checkpoint: talker (with code predictor), speech-tokenizer decoder,
text tokenizer and generation defaults; the Base checkpoints' speaker encoder and codec
encoder load on first use (voice cloning only).

The folder is the official layout (``config.json``, ``generation_config.json``,
``model.safetensors``, ``vocab.json``, ``merges.txt``, ``tokenizer_config.json``,
``speech_tokenizer/{config.json,model.safetensors}``), as the Hub repos
``Qwen/Qwen3-TTS-12Hz-*`` ship it and ``vocalis models random`` writes it.

Compute dtypes: the talker in ``dtype`` (float32 default; bfloat16 allowed), the codec
always in float32 (bf16 SnakeBeta is known to produce NaN or silence: vLLM-Omni #1663).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import torch

from vocalis.errors import CheckpointError, InputError
from vocalis.kernels import native
from vocalis.kernels.f32 import F32Linear
from vocalis.kernels.int4 import Int4Linear
from vocalis.kernels.int8 import Int8Linear
from vocalis.models.qwen3.codec import SpeechDecoder, load_speech_decoder
from vocalis.models.qwen3.codec_encoder import load_speech_encoder
from vocalis.models.qwen3.config import Qwen3TTSConfig, load_config
from vocalis.models.qwen3.prompt import supported_languages
from vocalis.models.qwen3.talker import Talker, load_talker
from vocalis.models.qwen3.voice import load_speaker_encoder
from vocalis.models.qwen3.text import (
    Qwen3TextTokenizer,
    assistant_text,
    instruct_text,
    ref_text,
)

SAMPLE_RATE = 24000  # Hz, codec output (speech_tokenizer output_sample_rate)
FRAME_SAMPLES = 1920  # samples per 80 ms frame (decode_upsample_rate)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}

# The runaway guard (issue: about one Base run in 200 never emits EOS in the official code):
# at most GUARD_BASE + GUARD_PER_TOKEN frames per text token. Slow speech is about 2-4 text
# tokens per second (BPE English ~0.75 word/token, Chinese ~1.4 characters/token), i.e. at
# most ~6 frames per token at 12.5 Hz; 15 leaves 2.5x headroom for pauses and slow styles.
GUARD_BASE = 40  # frames (3.2 s)
GUARD_PER_TOKEN = 15  # frames (1.2 s) per text token


def _stacked(*linears: torch.nn.Linear) -> torch.nn.Linear:
    """One bias-free ``nn.Linear`` whose output is the outputs of ``linears`` (same input
    size) side by side."""
    w = torch.cat([lin.weight.detach() for lin in linears], dim=0)
    out = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype, device=w.device)
    out.weight = torch.nn.Parameter(w, requires_grad=False)
    return out


#: the kernels each quantize mode runs, the mode's own first (int4's prompt passes run int8's)
QUANTIZE_KERNELS = {"int8": ("vocalis_q8",), "int4": ("vocalis_q4", "vocalis_q8")}


def require_quantize_kernels(mode: str) -> None:
    """Load the kernels that quantize ``mode`` (``"int8"`` or ``"int4"``) runs, from their
    builds (:mod:`vocalis.kernels`; never compiled here). Both modes exist only as our
    kernels: fbgemm's dynamic int8 computes other values (another activation scale), so a
    fallback to it would make a seeded request's audio depend on whether the kernels happen
    to be built; a load that asks for a mode whose kernel is not built is refused
    instead.

    Raises:
        InputError (param ``quantize``): a kernel is not built here (the message says
            ``vocalis kernels build``) or this CPU cannot run it.
    """
    for name in QUANTIZE_KERNELS[mode]:
        native.require(name, f"quantize={mode!r}")


def guard_frames(n_text_tokens: int) -> int:
    """Frame limit of the runaway guard for a text of ``n_text_tokens`` tokens."""
    return GUARD_BASE + GUARD_PER_TOKEN * max(1, n_text_tokens)


class Qwen3Model:
    """Everything a request needs, loaded from one checkpoint folder.

    Attributes: ``talker`` (:class:`Talker`), ``decoder`` (:class:`SpeechDecoder`, float32),
    ``tokenizer``, ``config`` (:class:`Qwen3TTSConfig`), ``generation_config`` (dict of the
    checkpoint's ``generation_config.json``), ``name`` (display name), ``directory``.
    """

    sample_rate = SAMPLE_RATE
    frame_samples = FRAME_SAMPLES

    def __init__(self, directory: Path, config: Qwen3TTSConfig, talker: Talker, decoder: SpeechDecoder,
                 tokenizer: Qwen3TextTokenizer, generation_config: dict, name: str):
        self.directory = directory
        self.config = config
        self.talker = talker
        self.decoder = decoder
        self.tokenizer = tokenizer
        self.generation_config = generation_config
        self.name = name
        self._encoders = None
        self._lock = threading.Lock()
        self.quantized: str | None = None  # "int8" or "int4" after quantize()

    # ---------------------------------------------------------------- facts

    @property
    def spec(self):
        return self.talker.spec

    @property
    def model_type(self) -> str:
        """``base``, ``custom_voice`` or ``voice_design``."""
        return self.config.tts_model_type

    @property
    def model_size(self) -> str:
        """``0b6`` or ``1b7``."""
        return self.config.tts_model_size

    @property
    def device(self) -> torch.device:
        return self.talker.device

    @property
    def speakers(self) -> list[str]:
        """Built-in speakers (CustomVoice), lower-case as the official ``get_supported_speakers``."""
        return list(self.spec.speakers)

    @property
    def languages(self) -> list[str]:
        """``auto`` and the languages of the config (no dialect keys)."""
        return supported_languages(self.talker)

    @property
    def kind(self) -> str:
        """The released model's name for this kind, e.g. ``0.6B CustomVoice``, ``1.7B Base``."""
        size = {"0b6": "0.6B", "1b7": "1.7B"}.get(self.model_size, self.model_size)
        kind = {"base": "Base", "custom_voice": "CustomVoice",
                "voice_design": "VoiceDesign"}.get(self.model_type, self.model_type)
        return f"{size} {kind}"

    @property
    def takes_instruct(self) -> bool:
        """VoiceDesign and 1.7B CustomVoice; 0.6B CustomVoice ignores it (official
        ``qwen3_tts_model.py:799-800``); Base has no instruct."""
        return self.model_type == "voice_design" or (self.model_type == "custom_voice"
                                                      and self.model_size != "0b6")

    def quantize_int8(self) -> None:
        """:meth:`quantize` to ``"int8"``."""
        self.quantize("int8")

    def quantize(self, mode: str = "int8") -> None:
        """Replace the talker's and the code predictor's linears by quantized ones (CPU
        only, float32 only; faster on x86, not bit-identical to fp32).

        ``mode``: ``"int8"`` (:class:`~vocalis.kernels.int8.Int8Linear`, weights per output
        channel) or ``"int4"`` (:class:`~vocalis.kernels.int4.Int4Linear`, weights in blocks
        of 32 with a float32 scale each). Both run C++ kernels of ours (x86 AVX2/AVX-512, ARM NEON),
        built once per machine by ``vocalis kernels build`` (:mod:`vocalis.kernels`; there is
        no PyTorch path of ours for either: :func:`require_quantize_kernels`). With int4 the
        talker's linears also keep an int8 copy for its prompt pass (several positions per
        row, where int8 is faster): about 0.72 GB of talker weights instead of 0.44 GB at 0.6B.

        Converted: q/k/v/o and gate/up/down of every talker and predictor decoder layer,
        the 15 predictor ``lm_head``s and the talker ``codec_head``. Embeddings, norms, the
        text projection (prompt only), the speaker/speech encoders and the codec stay float32.
        q, k and v become one quantized linear of their stacked weights, and so do gate and
        up: their input is the same, so one activation quantization and one kernel call
        serve them (int8: each output's error stays within its own linear's bound, weight
        scales being per output channel, see :class:`~vocalis.kernels.int8.Int8Linear`; int4:
        weight blocks never span two output channels, and the activation blocks are the same).

        Raises:
            InputError: an unknown mode; the model is not on the CPU, is not float32, is
                already quantized or already runs our float32 kernel (tuning chose
                ``model_linears=vocalis``: quantize at load); a kernel ``mode`` runs is not
                built here (``vocalis kernels build``) or this CPU cannot run it.
        """
        if mode not in ("int8", "int4"):
            raise InputError(f"unknown quantize mode {mode!r}: use int8 or int4", param="quantize")
        if self.device.type != "cpu":
            raise InputError(f"{mode} quantization runs on the CPU only: drop quantize or use device cpu",
                             param="quantize")
        if self.talker.dtype != torch.float32:
            raise InputError(f"{mode} quantization starts from float32 weights: drop quantize or use "
                             "dtype float32", param="quantize")
        if self.quantized:
            raise InputError(f"{self.name} is already quantized to {self.quantized}", param="quantize")
        if any(isinstance(m, F32Linear) for m in self.talker.modules()):
            raise InputError(f"{self.name} already runs the float32 kernels its tuning chose "
                             "(model_linears=vocalis); quantize when loading instead: "
                             f"vocalis.load(..., quantize={mode!r})", param="quantize")
        require_quantize_kernels(mode)  # InputError before any weight is touched
        if mode == "int4":
            def convert(linear, talker: bool):
                return Int4Linear(linear, Int8Linear(linear) if talker else None)
        else:
            def convert(linear, talker: bool):
                return Int8Linear(linear)
        t = self.talker
        t.untrace()  # the graphs hold the float linears
        targets = []
        with torch.no_grad():
            for dec in (t.model, t.code_predictor.model):
                is_talker = dec is t.model
                for layer in dec.layers:
                    att, mlp = layer.self_attn, layer.mlp
                    att.qkv = convert(_stacked(att.q_proj, att.k_proj, att.v_proj), is_talker)
                    mlp.gate_up = convert(_stacked(mlp.gate_proj, mlp.up_proj), is_talker)
                    att.q_proj = att.k_proj = att.v_proj = None
                    mlp.gate_proj = mlp.up_proj = None
                    targets += [(att, "o_proj", is_talker), (mlp, "down_proj", is_talker)]
            targets += [(t.code_predictor.lm_head, str(i), False)
                        for i in range(len(t.code_predictor.lm_head))]
            targets.append((t, "codec_head", True))
            for parent, name, is_talker in targets:
                setattr(parent, name, convert(getattr(parent, name), is_talker))
        self.quantized = mode

    # ---------------------------------------------------------------- text

    def ids(self, text: str) -> torch.Tensor:
        """Token ids ``[1, n]`` (long, on the model's device) of ``text`` as is."""
        return torch.tensor([self.tokenizer.encode(text)], dtype=torch.long, device=self.device)

    def text_ids(self, text: str) -> torch.Tensor:
        """``[1, n]`` ids of the official assistant template around ``text``."""
        return self.ids(assistant_text(text))

    def instruct_ids(self, instruct: str) -> torch.Tensor:
        return self.ids(instruct_text(instruct))

    def ref_ids(self, text: str) -> torch.Tensor:
        return self.ids(ref_text(text))

    # ---------------------------------------------------------------- cloning

    def encoders(self):
        """(speaker encoder, speech encoder) of a Base checkpoint, loaded on first use.

        Raises InputError on a checkpoint that is not Base."""
        if self.model_type != "base":
            raise InputError(f"{self.name} is a Qwen3-TTS {self.model_type} model: only Base "
                             "models clone a voice from reference audio")
        with self._lock:
            if self._encoders is None:
                self._encoders = (load_speaker_encoder(self.directory, self.device),
                                  load_speech_encoder(self.directory / "speech_tokenizer", self.device))
            return self._encoders


def load_model(directory: str | Path, name: str | None = None, dtype: str = "float32",
               device: str | torch.device = "cpu") -> Qwen3Model:
    """Load a checkpoint folder (official layout).

    Raises:
        CheckpointError: a file is missing, unreadable or does not match its config.
        InputError: ``dtype`` is not float32 or bfloat16.
    """
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}: use float32 or bfloat16", param="dtype")
    d = Path(directory)
    config = load_config(d)
    if not (d / "speech_tokenizer").is_dir():
        raise CheckpointError(f"{d / 'speech_tokenizer'} is missing: a Qwen3-TTS checkpoint folder holds "
                              "the codec in speech_tokenizer/ (re-download the checkpoint)")
    gen_path = d / "generation_config.json"
    try:
        generation_config = json.loads(gen_path.read_text()) if gen_path.is_file() else {}
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{gen_path} is not readable JSON ({e}); re-download the checkpoint") from None
    talker = load_talker(d, dtype=DTYPES[dtype], device=device)
    decoder = load_speech_decoder(d / "speech_tokenizer", device=device, dtype=torch.float32)
    tokenizer = Qwen3TextTokenizer.from_dir(d)
    return Qwen3Model(d, config, talker, decoder, tokenizer, generation_config, name or str(d))


__all__ = ["FRAME_SAMPLES", "QUANTIZE_KERNELS", "SAMPLE_RATE", "Qwen3Model", "guard_frames",
           "load_model", "require_quantize_kernels"]
