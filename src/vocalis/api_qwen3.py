"""Qwen3-TTS through the public API: :class:`Qwen3TTS` is a :class:`vocalis.api.TTS` (same
engine, ``submit`` / ``stream`` / ``synthesize``, events, cancellation, ``speed``) whose
requests take the official modes as keyword arguments:

    >>> tts = vocalis.load("qwen3-tts/0.6b-customvoice")
    >>> tts.synthesize("Hello.", speaker="ryan", language="english", seed=1)
    >>> tts = vocalis.load("qwen3-tts/1.7b-voicedesign")
    >>> tts.synthesize("Hello.", instruct="A calm, low voice.")
    >>> tts = vocalis.load("qwen3-tts/0.6b-base")
    >>> tts.synthesize("Hello.", ref_audio="me.wav", ref_text="What I say in me.wav.")
    >>> tts.synthesize("Hello.", ref_audio="me.wav", xvector_only=True)
    >>> tts.voice("me.wav", ref_text="...").save("me.safetensors")   # a voice-clone prompt
    >>> tts.synthesize("Hello.", voice="me.safetensors")

The official methods (``qwen_tts/inference/qwen3_tts_model.py``) and their defaults:
CustomVoice ``generate_custom_voice`` (speaker required, language ``auto``, ``instruct`` on
1.7B only: 0.6B ignores it, with a warning here), VoiceDesign ``generate_voice_design``
(``instruct`` required), Base ``generate_voice_clone`` (reference audio; ``ref_text`` for
in-context cloning, or ``xvector_only``); ``non_streaming_mode`` True, True and False.
Sampling options keep the official names and the checkpoint's ``generation_config.json``
defaults; ``greedy=True`` switches both samplers to argmax.
"""

from __future__ import annotations

import dataclasses
import logging
import numbers
from pathlib import Path

import numpy as np

from vocalis.api import TTS, Voice
from vocalis.engine.options import OptionRange, check_option
from vocalis.engine.openmp import frees_thread_pool
from vocalis.errors import InputError, VoiceError
from vocalis.models.qwen3.family import Qwen3Family, Qwen3Input, Qwen3Params
from vocalis.models.qwen3.model import Qwen3Model, guard_frames
from vocalis.models.qwen3.prompt import custom_voice_prompt, voice_clone_prompt, voice_design_prompt
from vocalis.models.qwen3.sampling import HARD_DEFAULTS, GenerationParams

log = logging.getLogger(__name__)

MAX_TEXT_TOKENS = 4096  # one prompt; the talker's positions (32768) bound prompt + frames

# Numeric ranges of the official sampling options (the official checks none of them).
OPTION_RANGES: dict[str, OptionRange] = {r.name: r for r in (
    OptionRange("temperature", 0.0, 1e6, lo_open=True, why="> 0 (greedy is do_sample=False)"),
    OptionRange("subtalker_temperature", 0.0, 1e6, lo_open=True, why="> 0"),
    OptionRange("top_k", 0, 3072, integer=True, why="0 = off; the talker vocabulary is 3072"),
    OptionRange("subtalker_top_k", 0, 2048, integer=True, why="0 = off; 2048 codes per codebook"),
    OptionRange("top_p", 0.0, 1.0, lo_open=True, why="nucleus mass"),
    OptionRange("subtalker_top_p", 0.0, 1.0, lo_open=True, why="nucleus mass"),
    OptionRange("repetition_penalty", 0.0, 1e6, lo_open=True, why="> 0 (1 = off)"),
    OptionRange("max_new_tokens", 1, 32768, integer=True, why="talker positions (32768)"),
    OptionRange("max_frames", 1, 32767, integer=True, why="frames (80 ms each)"),
)}
FLAGS = ("do_sample", "subtalker_dosample", "greedy", "xvector_only", "non_streaming_mode")
STRINGS = ("speaker", "language", "instruct", "ref_text")
KNOWN = sorted(set(HARD_DEFAULTS) | set(OPTION_RANGES) | set(FLAGS) | set(STRINGS) | {"ref_audio"})


def _is_audio_array(src) -> bool:
    return (isinstance(src, tuple) and len(src) == 2 and isinstance(src[0], np.ndarray)
            and isinstance(src[1], numbers.Integral) and not isinstance(src[1], bool))


def check_string(value: str, param: str, name: str | None = None) -> str:
    """``value`` if it encodes as UTF-8 (no lone surrogates). Raises InputError naming ``param``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError(f"{name or param} holds an invalid character at position {e.start} (a lone surrogate, "
                         "not Unicode text): send valid UTF-8", param=param) from None
    return value


class Qwen3TTS(TTS):
    """A loaded Qwen3-TTS model (see the module docstring). Thread-safe."""

    family_name = "qwen3-tts"

    def __init__(self, model: Qwen3Model, model_id: str, released: bool, max_batch: int = 16,
                 max_queue: int = 256, threads: int | None = None, exact: bool = False,
                 full_state_decode: bool = False, split: tuple[int, int] | None = None,
                 codec_frames: int = 1, lend: bool = False):
        super().__init__(model, model_id, released, max_batch, max_queue, threads,
                         family=Qwen3Family(model, chunked_decode=not full_state_decode,
                                            split=split, codec_frames=codec_frames,
                                            lend=lend))
        self.exact = exact

    @property
    def served_name(self) -> str | None:
        return self.model.name if self.released else None

    @property
    def speakers(self) -> list[str]:
        """Built-in speakers (CustomVoice; empty otherwise)."""
        return self.model.speakers

    # ---------------------------------------------------------------- voices

    @frees_thread_pool
    def voice(self, src=None, ref_text: str | None = None, xvector_only: bool = False) -> Voice:
        """A voice of this model.

        * CustomVoice: a built-in speaker name (case-insensitive).
        * Base: reference audio (any format, rate and channel count soundfile reads) with
          its transcript ``ref_text`` (in-context cloning) or ``xvector_only=True``; or a
          saved voice-clone prompt (``.safetensors``, :meth:`Voice.save`).
        * VoiceDesign: none (describe the voice with ``instruct``).

        Raises:
            VoiceError: no voice, an unknown speaker (lists them), unusable audio, or a
            prompt made for another model. InputError: ref_text missing or empty.
        """
        m = self.model
        if isinstance(src, Voice):
            src = src.state
        if m.model_type == "voice_design":
            raise VoiceError(f"{m.name} (VoiceDesign) has no voices: describe the voice with instruct")
        if m.model_type == "custom_voice":
            if src is None:
                raise VoiceError(f"{m.name} needs a speaker; one of: {', '.join(m.speakers)}")
            if not isinstance(src, str) or Path(src).suffix or "/" in src:
                raise VoiceError(f"{m.name} is a CustomVoice model: its voices are the built-in speakers "
                                 f"({', '.join(m.speakers)}); audio files and voice-clone prompts are for "
                                 "Qwen3-TTS Base models")
            if src.lower() not in m.speakers:
                raise VoiceError(f"unknown speaker {src!r}; {m.name} has: {', '.join(m.speakers)}")
            if ref_text is not None or xvector_only:
                raise InputError(f"{m.name} (CustomVoice) takes no reference audio options "
                                 "(ref_text, xvector_only): only Base models clone voices")
            return Voice(src.lower(), src.lower())
        from vocalis.models.qwen3 import voice as qvoice

        if isinstance(src, qvoice.ClonePrompt):
            if ref_text is not None or xvector_only:
                raise InputError("ref_text and xvector_only apply to reference audio, not to a saved prompt")
            return Voice(self._fits(src), "voice-clone prompt")
        if src is None:
            raise VoiceError(f"{m.name} (Base) clones a voice: give reference audio (ref_audio=, "
                             "--ref-audio) with ref_text or xvector_only, or a saved voice-clone prompt")
        if _is_audio_array(src):  # (samples, sample_rate), as the official package accepts
            return Voice(self._clone_from(src, ref_text, xvector_only), "audio array")
        if not isinstance(src, (str, Path)) or not str(src).strip():
            raise VoiceError("the reference must be an audio file, (samples, sample_rate) or a .safetensors "
                             f"voice-clone prompt, got {type(src).__name__}")
        path = Path(str(src)).expanduser()
        if path.suffix.lower() == ".safetensors":
            if ref_text is not None or xvector_only:
                raise InputError("ref_text and xvector_only apply to reference audio, not to a saved prompt")
            return Voice(self._fits(qvoice.ClonePrompt.load(path)), str(path))
        if not path.is_file():
            raise VoiceError(f"reference audio not found: {path}")
        return Voice(self._clone_from(path, ref_text, xvector_only), str(path))

    def _clone_from(self, src, ref_text, xvector_only):
        """A voice-clone prompt from an audio file or ``(samples, sample_rate)``."""
        from vocalis.models.qwen3 import voice as qvoice

        m = self.model
        if xvector_only and ref_text is not None:
            raise InputError("ref_text and xvector_only exclude each other: give the transcript for "
                             "in-context cloning, or xvector_only alone", param="ref_text")
        if not xvector_only and (ref_text is None or not str(ref_text).strip()):
            raise InputError("in-context cloning needs the transcript of the reference audio: pass ref_text "
                             "(--ref-text), or xvector_only=True (--xvector-only) to clone from the "
                             "speaker embedding alone", param="ref_text")
        speaker_encoder, speech_encoder = m.encoders()
        kw = dict(speaker_encoder=speaker_encoder, speech_encoder=speech_encoder, ref_text=ref_text,
                  xvector_only=xvector_only, hidden_size=m.spec.talker.hidden_size, model_size=m.model_size)
        with self._lock:
            if isinstance(src, Path):
                return qvoice.clone_prompt_from_file(src, **kw)
            samples, rate = src
            return qvoice.create_clone_prompt(np.asarray(samples, dtype=np.float32), int(rate), **kw)

    def _fits(self, prompt):
        m = self.model
        prompt.check_fits(m.spec.talker.hidden_size, m.model_size, m.model_type)
        return prompt

    # ---------------------------------------------------------------- requests

    def text_language(self, options: dict | None = None) -> str:
        """The request's ``language`` (``auto`` when absent): what ``normalize`` reads in."""
        lang = (options or {}).get("language")
        return lang if isinstance(lang, str) else "auto"

    def _params(self, seed, options: dict) -> Qwen3Params:
        gen_user = {}
        for k in list(options):
            v = options[k]
            if k in OPTION_RANGES and v is not None:
                options[k] = check_option(OPTION_RANGES[k], v)
            elif k in FLAGS and v is not None and not isinstance(v, bool):
                raise InputError(f"{k} must be true or false, got {v!r}", param=k)
        for k in HARD_DEFAULTS:
            if k in options:
                gen_user[k] = options.pop(k)
        gen = GenerationParams.resolve(self.model.generation_config, **gen_user)
        if options.pop("greedy", False):
            gen = gen.greedy()
        max_frames = options.pop("max_frames", None)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                                 or not 0 <= int(seed) < 2**63):
            raise InputError(f"seed must be an integer in [0, 2**63), got {seed!r}", param="seed")
        return Qwen3Params(gen, max_frames, None, None if seed is None else int(seed),
                           "max_new_tokens" in gen_user)

    def _prepare(self, text, voice, seed, options: dict):
        """(engine input, text chunks, params, seed) of one request; raises on bad input."""
        m = self.model
        opts = dict(options)
        unknown = sorted(set(opts) - set(KNOWN))
        if unknown:
            raise InputError(f"unknown option(s) {', '.join(unknown)} for Qwen3-TTS; known: {', '.join(KNOWN)}",
                             param=unknown[0])
        params = self._params(seed, opts)
        for k in STRINGS:
            if opts.get(k) is not None and not isinstance(opts[k], str):
                raise InputError(f"{k} must be a string, got {type(opts[k]).__name__}", param=k)
        if not isinstance(text, str):
            raise InputError(f"text must be a string, got {type(text).__name__}", param="input")
        for k in STRINGS:
            if opts.get(k) is not None:
                check_string(opts[k], k)
        if not check_string(text, "input", "text").strip():
            raise InputError("text is empty: give the text to speak", param="input")
        if not any(c.isalnum() for c in text):
            raise InputError("text has nothing to speak (only punctuation, symbols or emoji): give words "
                             "or numbers", param="input")
        ids = m.text_ids(text)
        n_text = ids.shape[1] - 8  # the template adds 3 + 5 tokens
        if n_text > MAX_TEXT_TOKENS:
            raise InputError(f"text is {n_text} tokens; Qwen3-TTS takes at most {MAX_TEXT_TOKENS} per request: "
                             "split it", param="input")
        language = opts.pop("language", None)
        instruct = opts.pop("instruct", None)
        nsm = opts.pop("non_streaming_mode", None)
        speaker = opts.pop("speaker", None)
        ref_audio, ref_text = opts.pop("ref_audio", None), opts.pop("ref_text", None)
        xvector_only = bool(opts.pop("xvector_only", False) or False)
        if instruct is not None and not instruct.strip():
            raise InputError("instruct is empty: describe the voice or style, or leave it out", param="instruct")
        kind = m.model_type
        if speaker is not None and kind != "custom_voice":
            raise InputError(f"{m.name} has no built-in speakers (only CustomVoice models do); "
                             + ("clone a voice with ref_audio" if kind == "base" else "describe it with instruct"),
                             param="speaker")
        if kind != "base" and (ref_audio is not None or ref_text is not None or xvector_only):
            raise InputError(f"{m.name} takes no reference audio (ref_audio, ref_text, xvector_only): "
                             "only Base models clone voices", param="ref_audio")
        if instruct is not None and kind == "base":
            raise InputError(f"{m.name} (Base) takes no instruct: CustomVoice 1.7B and VoiceDesign models do",
                             param="instruct")
        ref_codes = None
        if kind == "custom_voice":
            if speaker is not None and voice is not None and str(getattr(voice, "state", voice)).lower() \
                    != speaker.lower():
                raise InputError("give the speaker once (speaker or voice; --speaker or --voice): they differ",
                                 param="speaker")
            name = self.voice(speaker if speaker is not None else voice).state
            instruct_ids = None
            if instruct is not None:
                if m.takes_instruct:
                    instruct_ids = m.instruct_ids(instruct)
                else:
                    log.warning("%s ignores instruct (the official 0.6B CustomVoice drops it too)", m.name)
            prompt = custom_voice_prompt(m.talker, ids, name, language, instruct_ids,
                                         True if nsm is None else nsm)
        elif kind == "voice_design":
            if voice is not None:
                raise VoiceError(f"{m.name} (VoiceDesign) has no voices: describe the voice with instruct")
            if instruct is None:
                raise InputError(f"{m.name} (VoiceDesign) needs instruct (`instructions` in the "
                                 "OpenAI API): a description of the voice, "
                                 "e.g. \"A calm, low female voice\"", param="instruct")
            prompt = voice_design_prompt(m.talker, ids, m.instruct_ids(instruct), language,
                                         True if nsm is None else nsm)
        else:
            if ref_audio is not None and voice is not None:
                raise InputError("give the reference once: voice and ref_audio are both set", param="ref_audio")
            clone = self.voice(ref_audio if ref_audio is not None else voice, ref_text=ref_text,
                               xvector_only=xvector_only).state
            icl = clone.ref_codes is not None and not clone.xvector_only
            if icl:
                ref_codes = clone.ref_codes
            prompt = voice_clone_prompt(m.talker, ids, clone.xvector, language,
                                        m.ref_ids(clone.ref_text) if icl else None, ref_codes,
                                        False if nsm is None else nsm)
        guard = None if self.exact else guard_frames(n_text)
        params = dataclasses.replace(params, guard=guard)
        inp = Qwen3Input(prompt, ref_codes)
        return inp, [(text, ids[0].tolist(), 0)], params, params.seed


__all__ = ["OPTION_RANGES", "Qwen3TTS"]
