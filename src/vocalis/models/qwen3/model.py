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
from vocalis.models.qwen3.codec import SpeechDecoder, load_speech_decoder
from vocalis.models.qwen3.config import Qwen3TTSConfig, load_config
from vocalis.models.qwen3.prompt import supported_languages
from vocalis.models.qwen3.talker import Talker, load_talker
from vocalis.text.qwen3 import (
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
        return self.talker.codec_head.weight.device

    @property
    def speakers(self) -> list[str]:
        """Built-in speakers (CustomVoice), lower-case as the official ``get_supported_speakers``."""
        return list(self.spec.speakers)

    @property
    def languages(self) -> list[str]:
        """``auto`` and the languages of the config (no dialect keys)."""
        return supported_languages(self.talker)

    @property
    def takes_instruct(self) -> bool:
        """VoiceDesign and 1.7B CustomVoice; 0.6B CustomVoice ignores it (official
        ``qwen3_tts_model.py:799-800``); Base has no instruct."""
        return self.model_type == "voice_design" or (self.model_type == "custom_voice"
                                                      and self.model_size != "0b6")

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
                from vocalis.models.qwen3.codec_encoder import load_speech_encoder
                from vocalis.models.qwen3.voice import load_speaker_encoder

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


__all__ = ["FRAME_SAMPLES", "SAMPLE_RATE", "Qwen3Model", "guard_frames", "load_model"]
