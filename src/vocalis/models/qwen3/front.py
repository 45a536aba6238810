"""Qwen3-TTS's front half (:mod:`vocalis.family`): model ids, kinds, voices, loading.

Model ids: ``qwen3-tts/0.6b-base``, ``qwen3-tts/0.6b-customvoice``, ``qwen3-tts/1.7b-base``,
``qwen3-tts/1.7b-customvoice``, ``qwen3-tts/1.7b-voicedesign``, the Hub repo ids
(``Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice``...), or a local checkpoint folder in the official
layout.

Requests take the official modes as options (``vocalis.models.qwen3.options``):

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
CustomVoice ``generate_custom_voice`` (a speaker; here the model's first when none is
given, as a server's default voice; language ``auto``; ``instruct`` on 1.7B only: 0.6B
ignores it, with a warning here), VoiceDesign ``generate_voice_design`` (``instruct``
required), Base ``generate_voice_clone`` (reference audio; ``ref_text`` for in-context
cloning, or ``xvector_only``); ``non_streaming_mode`` True, True and False. Sampling options
keep the official names and the checkpoint's ``generation_config.json`` defaults;
``greedy=True`` switches both samplers to argmax.

This module stays light (no torch): checking a request needs only the config; the model
code is imported when a model is loaded.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path

import numpy as np

from vocalis import hub
from vocalis.audio import check_audio_file
from vocalis.errors import InputError, ModelNotFound, NothingToSpeak, VoiceError
from vocalis.family import LoadedModel, LoadSettings, ModelFamily, ModelInfo, Prepared, TextFeed, Voice
from vocalis.models.qwen3 import checkpoint, registry
from vocalis.models.qwen3.config import load_config
from vocalis.models.qwen3.options import (
    LOAD_OPTIONS,
    MAX_TEXT_TOKENS,
    OPTIONS,
    RANDOM_OPTIONS,
    SAMPLER,
    is_audio_array,
)
from vocalis.options import did_you_mean
from vocalis.outputs import place_folder

log = logging.getLogger(__name__)

KINDS = {"base": "Base", "custom_voice": "CustomVoice", "voice_design": "VoiceDesign"}
SIZES = {"0b6": "0.6B", "1b7": "1.7B"}
_INSTRUCT = {
    "base": "no (the voice is cloned from reference audio)",
    "custom_voice/0b6": "ignored (0.6B CustomVoice drops instruct, as the official package does)",
    "custom_voice/1b7": "yes (optional style instruction)",
    "voice_design": "yes (the voice description)",
}


#: the options that shape sampling, which ``greedy`` (argmax on both samplers) replaces
_SAMPLING = ("temperature", "top_k", "top_p", "do_sample", "subtalker_temperature",
             "subtalker_top_k", "subtalker_top_p", "subtalker_dosample")


def takes_instruct(kind: str, size: str) -> bool:
    """VoiceDesign and 1.7B CustomVoice; 0.6B CustomVoice ignores it (official
    ``qwen3_tts_model.py:799-800``); Base has no instruct."""
    return kind == "voice_design" or (kind == "custom_voice" and size != "0b6")


def _given(ref_text) -> str:
    """Which of ``ref_text`` and ``xvector_only`` a refusal of them names: the one given
    (``ref_text`` when both were)."""
    return "ref_text" if ref_text is not None else "xvector_only"


class Qwen3TTSFamily(ModelFamily):
    """Alibaba's Qwen3-TTS 12 Hz models (``qwen-tts`` 0.1.1): Base, CustomVoice, VoiceDesign."""

    name = "qwen3-tts"
    title = "Qwen3-TTS"
    url = "https://github.com/QwenLM/Qwen3-TTS"
    author = "Alibaba Qwen"
    options = OPTIONS
    load_options = LOAD_OPTIONS
    random_options = RANDOM_OPTIONS
    quantize_modes = ("int8", "int4")
    checkpoint_hint = "a folder holding config.json and speech_tokenizer/"

    # ---------------------------------------------------------------- models

    def claims(self, model_id: str) -> bool:
        return checkpoint.is_qwen3(model_id)

    def model_ids(self) -> list[str]:
        return registry.model_ids()

    def describe(self, model_id: str) -> ModelInfo:
        mid = model_id.strip()
        local = Path(os.path.expanduser(mid))
        release = None if local.is_dir() else checkpoint.find_release(mid)
        if release is None:
            if not local.is_dir() and mid.lower().startswith(("qwen3-tts/", "qwen/")):
                ids = registry.model_ids()
                raise ModelNotFound(f"unknown Qwen3-TTS model {mid!r}{did_you_mean(mid, ids)}; "
                                    f"known: {', '.join(ids)}, or a checkpoint folder",
                                    param="model")
            folder = checkpoint.check_checkpoint_dir(local)
            cfg, name = load_config(folder), folder.name
        else:
            folder, cfg, name = None, registry.config(release.model_id), release.model_id
        t = cfg.talker_config
        kind, size = cfg.tts_model_type, cfg.tts_model_size
        speakers = tuple(t.spk_id) if kind == "custom_voice" else ()  # config order: the first is the default
        instruct = takes_instruct(kind, size)
        return ModelInfo(
            family=self, model_id=mid, name=name, released=release is not None,
            sample_rate=24000, served_name=release.model_id if release else None,
            kind=kind, kind_title=f"{SIZES.get(size, size)} {KINDS.get(kind, kind)}", voices=speakers,
            default_voice=speakers[0] if speakers else None, voices_case_insensitive=True,
            needs_voice=kind != "voice_design", cloning=kind == "base",
            clone_transcript=kind == "base", languages=tuple(t.languages), language="auto",
            language_option="language", instructions=instruct,
            instructions_option="instruct" if instruct else None, local_path=folder,
            extra={"config": cfg, "release": release, "size": size,
                   "size_title": SIZES.get(size, size),
                   "dialects": {s: t.spk_is_dialect[s] for s in speakers
                                if t.spk_is_dialect.get(s)}})

    def load(self, info: ModelInfo, settings: LoadSettings, **load_options) -> "Qwen3LoadedModel":
        # The model code (torch) is imported here, not at the top: checking a request needs
        # only this module.
        import torch

        from vocalis.engine.tuning import parse_split
        from vocalis.models.qwen3.engine import Qwen3EngineFamily
        from vocalis.models.qwen3.model import load_model, require_quantize_kernels
        from vocalis.models.qwen3.tuning import check_quantized_spec, tune

        dtype = load_options.get("dtype", "float32")
        full_state_decode = bool(load_options.get("full_state_decode", False))
        quantize, dev = settings.quantize, settings.device
        threads = settings.threads or torch.get_num_threads()
        # Qwen3Model.quantize checks these too; here they fail before gigabytes are read
        if quantize and dev.type != "cpu":
            raise InputError(f"{quantize} quantization runs on the CPU only: drop quantize or use "
                             "cpu", param="quantize")
        if quantize and dtype != "float32":
            raise InputError("quantize starts from float32 weights: drop quantize or use dtype "
                             "float32", param="quantize")
        if quantize:  # (never with exact: vocalis.load refuses the pair)
            check_quantized_spec(threads, settings.tuning)
            require_quantize_kernels(quantize)  # InputError before any weight is read
        path, release = checkpoint.resolve_checkpoint(info.model_id)
        model = load_model(path, info.name, dtype=dtype, device=dev)
        if quantize:
            model.quantize(quantize)
            log.info("%s: talker and code predictor in %s", info.name, quantize)
        model.talker.trace()
        if not settings.exact:  # a streamed text's tokens get the whole text's bits
            model.talker.min_text_rows = 8
        chosen = tune(model, threads, settings.max_batch, settings.exact, settings.tuning)
        engine = Qwen3EngineFamily(model, chunked_decode=not full_state_decode,
                                   split=parse_split(chosen.choices["threads"]),
                                   codec_frames=int(chosen.choices["codec_frames"]),
                                   lend=chosen.choices["lend"] == "on")
        return Qwen3LoadedModel(info, model, engine, exact=settings.exact, quantize=quantize,
                                tuning=chosen)

    def check(self, info: ModelInfo, text, voice, options: dict) -> dict:
        """The rules of the official modes: which options each kind takes, a known speaker
        and language, the reference audio's transcript (or ``xvector_only``), files that
        exist. Raises InputError or VoiceError naming the option."""
        kind, name = info.kind, info.name
        if isinstance(text, str) and text.strip() and not any(c.isalnum() for c in text):
            raise NothingToSpeak("text has nothing to speak (only punctuation, symbols or "
                                 "emoji): give words or numbers", param="input")
        speaker, instruct = options.get("speaker"), options.get("instruct")
        ref_audio, ref_text = options.get("ref_audio"), options.get("ref_text")
        xvector_only = bool(options.get("xvector_only"))
        language = options.get("language")
        if language is not None and language.lower() not in info.languages:
            raise InputError(f"unknown language {language!r}{did_you_mean(language, info.languages)};"
                             f" {name} takes: {', '.join(info.languages)}", param="language")
        if options.get("greedy"):
            sampling = [k for k in _SAMPLING if options.get(k) is not None]
            if sampling:  # argmax takes none of them: refused rather than ignored
                raise InputError(f"greedy and {', '.join(sampling)} together: greedy takes the "
                                 "most likely code, sampling options do not apply; give one",
                                 param=sampling[0])
        if instruct is not None and not instruct.strip():
            raise InputError("instruct is empty: describe the voice or style, or leave it out",
                             param="instruct")
        if speaker is not None and kind != "custom_voice":
            raise InputError(f"{name} has no built-in speakers (only CustomVoice models do); "
                             + ("clone a voice with ref_audio" if kind == "base"
                                else "describe it with instruct"), param="speaker")
        if kind != "base" and (ref_audio is not None or ref_text is not None or xvector_only):
            given = ("ref_audio" if ref_audio is not None
                     else "ref_text" if ref_text is not None else "xvector_only")
            raise InputError(f"{name} takes no reference audio (ref_audio, ref_text, "
                             "xvector_only): only Base models clone voices", param=given)
        if instruct is not None and kind == "base":
            raise InputError(f"{name} (Base) takes no instruct: CustomVoice 1.7B and VoiceDesign "
                             "models do", param="instruct")
        if kind == "custom_voice":
            if isinstance(voice, Voice):
                voice = voice.state
            if speaker is not None and voice is not None and str(voice).lower() != speaker.lower():
                raise InputError("give the speaker once (speaker or voice; --speaker or --voice): "
                                 "they differ", param="speaker")
            self._speaker(info, speaker if speaker is not None else voice)
        elif kind == "voice_design":
            if voice is not None:
                raise VoiceError(f"{name} (VoiceDesign) has no voices: describe the voice with "
                                 "instruct", param="voice")
            if instruct is None:
                raise InputError(f"{name} (VoiceDesign) needs instruct (`instructions` in the "
                                 "OpenAI API): a description of the voice, e.g. \"A calm, low "
                                 "female voice\"", param="instruct")
        else:
            if ref_audio is not None and voice is not None:
                raise InputError("give the reference once: voice and ref_audio are both set",
                                 param="ref_audio")
            given_as = "ref_audio" if ref_audio is not None else "voice"
            self._reference(info, ref_audio if ref_audio is not None else voice, ref_text,
                            xvector_only, given_as)
        return options

    @staticmethod
    def _speaker(info: ModelInfo, src) -> str:
        """The speaker a CustomVoice request names (the model's first when None)."""
        if src is None:
            return info.default_voice
        if not isinstance(src, str) or Path(src).suffix or "/" in src:
            raise VoiceError(f"{info.name} is a CustomVoice model: its voices are the built-in "
                             f"speakers ({', '.join(info.voices)}); audio files and voice-clone "
                             "prompts are for Qwen3-TTS Base models", param="voice")
        if src.lower() not in info.voices:
            raise VoiceError(f"unknown speaker {src!r}{did_you_mean(src, info.voices)}; "
                             f"{info.name} has: {', '.join(info.voices)}", param="voice")
        return src.lower()

    @staticmethod
    def _reference(info: ModelInfo, src, ref_text, xvector_only: bool,
                   given_as: str = "voice") -> None:
        """Checks of a Base request's reference (a Voice, a saved prompt, audio) that need no
        weights; ``given_as``: the parameter that carried it (``voice`` or ``ref_audio``),
        named by the errors."""
        if src is None:
            raise VoiceError(f"{info.name} (Base) clones a voice: give reference audio "
                             "(ref_audio=, --ref-audio) with ref_text or xvector_only, or a saved "
                             "voice-clone prompt", param="voice")
        if isinstance(src, Voice) or not isinstance(src, (str, Path)):
            if isinstance(src, Voice) or not is_audio_array(src):
                if ref_text is not None or xvector_only:
                    raise InputError("ref_text and xvector_only apply to reference audio, not to "
                                     "a saved prompt", param=_given(ref_text))
                return  # a loaded prompt (checked against the model when it is used)
        else:
            text = str(src)
            if not text.strip():
                raise VoiceError("the reference is empty: give an audio file or a .safetensors "
                                 "voice-clone prompt", param=given_as)
            path = Path(text).expanduser()
            if path.suffix.lower() == ".safetensors":
                if ref_text is not None or xvector_only:
                    raise InputError("ref_text and xvector_only apply to reference audio, not to "
                                     "a saved prompt", param=_given(ref_text))
                if "://" not in text and not path.is_file():
                    raise VoiceError(f"voice-clone prompt not found: {path}", param=given_as)
                return
            if "://" not in text and not path.is_file():
                raise VoiceError(f"reference audio not found: {path}", param=given_as)
            if "://" not in text:
                check_audio_file(path)
        if xvector_only and ref_text is not None:
            raise InputError("ref_text and xvector_only exclude each other: give the transcript "
                             "for in-context cloning, or xvector_only alone", param="ref_text")
        if not xvector_only and (ref_text is None or not str(ref_text).strip()):
            raise InputError("in-context cloning needs the transcript of the reference audio: "
                             "pass ref_text (--ref-text), or xvector_only=True (--xvector-only) to "
                             "clone from the speaker embedding alone", param="ref_text")

    # the benchmark side (bench helpers, torch) is not imported by this light front half
    # until `vocalis bench` or `vocalis batch` asks for it

    def bench_request(self, info: ModelInfo, voice, options: dict) -> tuple[object, dict]:
        from vocalis.models.qwen3.official import bench_request

        return bench_request(info, voice, options)

    def official_bench(self):
        from vocalis.models.qwen3.official import Qwen3OfficialBench

        return Qwen3OfficialBench()

    def save_voice(self, voice: Voice, path: Path) -> None:
        if not hasattr(voice.state, "save"):
            raise VoiceError(f"voice {voice.name!r} is a built-in speaker: there is no file to save")
        voice.state.save(path)

    # ---------------------------------------------------------------- model commands

    def summary(self, model_id: str) -> str:
        rel = registry.release(model_id)
        t = registry.config(model_id).talker_config
        return (f"{t.num_hidden_layers:>2} layers  d_model {t.hidden_size:>4}  {rel.description}  "
                f"({rel.repo_id}@{rel.revision[:7]})")

    def show(self, info: ModelInfo) -> list[tuple[str, str]]:
        rel, size = info.extra["release"], info.extra["size"]
        if rel is None:
            rows = [("checkpoint", str(info.local_path))]
        else:
            rows = [("model", rel.model_id), ("description", rel.description),
                    ("repo", rel.repo_id), ("revision", f"{rel.revision} (pinned)")]
        rows += [("type", info.kind), ("size", f"{info.extra['size_title']} ({size})"),
                 ("languages", ", ".join(info.languages))]
        if info.kind == "custom_voice":
            dialects = info.extra["dialects"]
            rows.append(("speakers", ", ".join(f"{s} ({dialects[s]})" if s in dialects else s
                                               for s in sorted(info.voices))))
        rows.append(("instruct", _INSTRUCT.get(info.kind) or _INSTRUCT.get(f"{info.kind}/{size}",
                                                                            "yes")))
        n = checkpoint.parameter_counts(rel.model_id if rel else info.local_path)
        talker = f"talker {n['talker'] / 1e6:.1f} M"
        if n["speaker_encoder"]:
            talker += f" + speaker encoder {n['speaker_encoder'] / 1e6:.1f} M"
        codec = f"speech tokenizer {n['speech_tokenizer'] / 1e6:.1f} M"
        if rel is not None:  # the released dtypes; a local folder: its files' sizes
            rows.append(("parameters", f"{talker} (bf16), {codec} (fp32)"))
            model_b, codec_b = checkpoint.weight_bytes(n)
        else:
            rows.append(("parameters", f"{talker}, {codec}"))
            model_b, codec_b = ((info.local_path / f).stat().st_size
                                for f in ("model.safetensors", "speech_tokenizer/model.safetensors"))
        rows.append(("weights", f"{(model_b + codec_b) / 1e9:.2f} GB (model.safetensors "
                                f"{model_b / 1e9:.2f} GB, speech_tokenizer/model.safetensors "
                                f"{codec_b / 1e9:.2f} GB)"))
        if rel is not None:
            snap, missing = checkpoint.cache_status(rel)
            fetch = f"`vocalis models download {rel.model_id}`"
            if snap is not None and not missing:
                rows.append(("cache", f"cached: {snap}"))
            elif snap is not None and snap.is_dir():
                rows.append(("cache", f"incomplete in {snap} (missing {', '.join(missing)}): run "
                                      f"{fetch}"))
            else:
                rows.append(("cache", f"not cached in {hub.hf_cache_dir()}: run {fetch}"))
        return rows

    def config_text(self, info: ModelInfo) -> str:
        return json.dumps(dataclasses.asdict(info.extra["config"]), indent=2) + "\n"

    def download(self, info: ModelInfo, all_voices: bool = False) -> list[tuple[str, str]]:
        folder, _ = checkpoint.resolve_checkpoint(info.model_id, download=True)
        return [("checkpoint", str(folder))]

    def random_configs(self) -> list[str]:
        return registry.model_ids()

    def random_config(self, config: str) -> str | None:
        release = checkpoint.find_release(config)  # a vocalis id or a Hub repo id
        return release.model_id if release is not None else None

    def write_random(self, config: str, out: Path, seed: int, force: bool,
                     replaceable=None, tiny: bool = False) -> tuple[Path, str | None]:
        from vocalis.models.qwen3 import random_checkpoint

        try:
            registry.config(config, tiny)  # an unknown id is refused before any file
        except ModelNotFound as e:
            raise InputError(str(e), param="config") from None
        out = Path(out).expanduser().absolute()
        place_folder(out, lambda tmp: random_checkpoint.write_random_checkpoint(
            config, tmp, seed=seed, tiny=tiny), force, replaceable or self.is_random_checkpoint)
        info = self.describe(str(out))
        how = {"custom_voice": f"--speaker {info.default_voice}", "voice_design":
               "--instruct 'A calm, clear voice.'", "base": "--ref-audio REF.wav --xvector-only"}
        return out, (f"vocalis generate --model {out} {how.get(info.kind, '')} --text 'Hello "
                     "from vocalis.' -o out.wav")

    def is_random_checkpoint(self, folder: Path) -> bool:
        from vocalis.models.qwen3.random_talker import is_random_talker

        return is_random_talker(folder)


class Qwen3LoadedModel(LoadedModel):
    """A loaded Qwen3-TTS model (:class:`vocalis.models.qwen3.model.Qwen3Model`)."""

    def voice(self, src=None, ref_text: str | None = None, xvector_only: bool = False) -> Voice:
        """A voice of this model.

        * CustomVoice: a built-in speaker name (case-insensitive; None: the first).
        * Base: reference audio (any format, rate and channel count soundfile reads, or
          ``(samples, sample_rate)``) with its transcript ``ref_text`` (in-context cloning)
          or ``xvector_only=True``; or a saved voice-clone prompt (``.safetensors``,
          :meth:`Voice.save`).
        * VoiceDesign: none (describe the voice with ``instruct``).

        Raises:
            VoiceError: no voice, an unknown speaker (lists them), unusable audio, or a
            prompt made for another model. InputError: ref_text missing or empty.
        """
        from vocalis.models.qwen3 import voice as qvoice

        info, m = self.info, self.model
        if isinstance(src, Voice):
            src = src.state
        if info.kind == "voice_design":
            raise VoiceError(f"{m.name} (VoiceDesign) has no voices: describe the voice with "
                             "instruct", param="voice")
        if info.kind == "custom_voice":
            if ref_text is not None or xvector_only:
                raise InputError(f"{m.name} (CustomVoice) takes no reference audio options "
                                 "(ref_text, xvector_only): only Base models clone voices",
                                 param=_given(ref_text))
            name = Qwen3TTSFamily._speaker(info, src)
            return Voice(name, name, self.family)
        if isinstance(src, qvoice.ClonePrompt):
            Qwen3TTSFamily._reference(info, Voice(src, ""), ref_text, xvector_only)
            return Voice(self._fits(src), "voice-clone prompt", self.family)
        if src is not None and not is_audio_array(src) and not isinstance(src, (str, Path)):
            raise VoiceError("the reference must be an audio file, (samples, sample_rate) or a "
                             f".safetensors voice-clone prompt, got {type(src).__name__}",
                             param="voice")
        Qwen3TTSFamily._reference(info, src, ref_text, xvector_only)
        if is_audio_array(src):
            return Voice(self._clone_from(src, ref_text, xvector_only), "audio array", self.family)
        text = str(src)
        path = hub.resolve(text) if "://" in text else Path(text).expanduser()
        if path.suffix.lower() == ".safetensors":
            return Voice(self._fits(qvoice.ClonePrompt.load(path)), text, self.family)
        return Voice(self._clone_from(path, ref_text, xvector_only), str(path), self.family)

    def _clone_from(self, src, ref_text, xvector_only):
        """A voice-clone prompt from an audio file or ``(samples, sample_rate)``."""
        from vocalis.models.qwen3 import voice as qvoice

        m = self.model
        speaker_encoder, speech_encoder = m.encoders()
        kw = dict(speaker_encoder=speaker_encoder, speech_encoder=speech_encoder,
                  ref_text=ref_text, xvector_only=xvector_only,
                  hidden_size=m.spec.talker.hidden_size, model_size=m.model_size)
        with self.lock:
            if isinstance(src, Path):
                return qvoice.clone_prompt_from_file(src, **kw)
            samples, rate = src
            return qvoice.create_clone_prompt(np.asarray(samples, dtype=np.float32), int(rate),
                                              **kw)

    def _fits(self, prompt):
        m = self.model
        prompt.check_fits(m.spec.talker.hidden_size, m.model_size, m.model_type)
        return prompt

    def clone(self, path: Path, transcript: str | None = None) -> Voice:
        return self.voice(str(path), ref_text=transcript, xvector_only=transcript is None)

    def voice_record(self, voice: Voice, transcript: str | None = None) -> dict:
        return {**super().voice_record(voice, transcript), "model_size": self.model.model_size,
                "mode": "in-context" if transcript is not None else "x-vector",
                "ref_text": transcript}

    def voice_fits(self, record: dict) -> bool:
        return (super().voice_fits(record) and self.info.cloning
                and record.get("model_size") == self.model.model_size)

    def word_decoder(self):
        return self.model.tokenizer.decode

    def warmup_request(self) -> tuple[str, dict]:
        options = {"max_frames": 3}  # at most 3 frames
        if self.info.kind == "voice_design":  # its voice is described, never given
            options["instruct"] = "A calm voice."
        return "Hello there.", options

    def word_tokens(self, ids: list[int]) -> list[int]:
        return list(ids[3:-5])  # the assistant template adds 3 tokens before, 5 after

    def fed_word_chunks(self, text: str) -> list[tuple[str, list[int]]]:
        # the fed tokens are the whole text's (TokenStream), so its template's middle
        return [(text, self.word_tokens(self.model.text_ids(text)[0].tolist()))]

    def prepare(self, text: str, voice, options: dict, seed: int | None) -> Prepared:
        from vocalis.models.qwen3.engine import Qwen3Input
        from vocalis.models.qwen3.model import guard_frames

        ids = self.model.text_ids(text)
        n_text = ids.shape[1] - 8  # the template adds 3 + 5 tokens
        if n_text > MAX_TEXT_TOKENS:
            raise InputError(f"text is {n_text} tokens; Qwen3-TTS takes at most "
                             f"{MAX_TEXT_TOKENS} per request: split it", param="input")
        prompt, ref_codes, params = self._request(
            ids, voice, options, seed, None if self.exact else guard_frames(n_text))
        return Prepared(Qwen3Input(prompt, ref_codes), [(text, ids[0].tolist(), 0)], params)

    def open_text(self, voice, options: dict, seed: int | None) -> "Qwen3TextFeed":
        """Text streamed in, in the streaming-text layout (``non_streaming_mode`` false, the
        default here whatever the model's kind; true is refused), without an in-context
        reference (Base models clone from the speaker embedding: ``xvector_only``)."""
        if options.get("non_streaming_mode"):
            raise InputError("streamed text takes the streaming-text layout: leave "
                             "non_streaming_mode (--whole-text) out", param="non_streaming_mode")
        if self.info.kind == "base" and not options.get("xvector_only"):
            raise InputError("streamed text cannot use an in-context reference (it needs the "
                             "text ahead of the reference codes): give xvector_only",
                             param="xvector_only")
        return Qwen3TextFeed(self, voice, {**options, "non_streaming_mode": False}, seed)

    def _request(self, ids, voice, options: dict, seed: int | None, guard: int | None,
                 feed: bool = False):
        """(talker prompt, reference codes or None, :class:`Qwen3Params`) of a request
        whose template ids are ``ids [1, n]`` (with ``feed``: the role and first text token
        only, the rest to come through the prompt's :class:`FedText`)."""
        from vocalis.models.qwen3.engine import Qwen3Params
        from vocalis.models.qwen3.prompt import (
            custom_voice_prompt,
            voice_clone_prompt,
            voice_design_prompt,
        )
        from vocalis.models.qwen3.sampling import GenerationParams

        m, info = self.model, self.info
        opts = dict(options)
        gen_user = {k: opts.pop(k) for k in SAMPLER if k in opts}
        gen = GenerationParams.resolve(m.generation_config, **gen_user)
        if opts.pop("greedy", False):
            gen = gen.greedy()
        language, instruct = opts.get("language"), opts.get("instruct")
        nsm = opts.get("non_streaming_mode")
        ref_codes = None
        if info.kind == "custom_voice":
            speaker = opts.get("speaker")
            name = self.voice(speaker if speaker is not None else voice).state
            instruct_ids = None
            if instruct is not None:
                if info.instructions:
                    instruct_ids = m.instruct_ids(instruct)
                else:
                    log.warning("%s ignores instruct (the official 0.6B CustomVoice drops it "
                                "too)", m.name)
            prompt = custom_voice_prompt(m.talker, ids, name, language, instruct_ids,
                                         True if nsm is None else nsm, feed=feed)
        elif info.kind == "voice_design":
            prompt = voice_design_prompt(m.talker, ids, m.instruct_ids(instruct), language,
                                         True if nsm is None else nsm, feed=feed)
        else:
            ref_audio = opts.get("ref_audio")
            clone = self.voice(ref_audio if ref_audio is not None else voice,
                               ref_text=opts.get("ref_text"),
                               xvector_only=bool(opts.get("xvector_only"))).state
            icl = clone.ref_codes is not None and not clone.xvector_only
            if icl:
                ref_codes = clone.ref_codes
            prompt = voice_clone_prompt(m.talker, ids, clone.xvector, language,
                                        m.ref_ids(clone.ref_text) if icl else None, ref_codes,
                                        False if nsm is None else nsm, feed=feed)
        params = Qwen3Params(gen, opts.get("max_frames"), guard, seed, "max_new_tokens" in gen_user)
        return prompt, ref_codes, params


class Qwen3TextFeed(TextFeed):
    """A Qwen3-TTS request whose text is pushed in pieces: :class:`TokenStream` hands out
    the token ids no later text can change; the first starts the request (its prompt
    carries it on the codec BOS, as the whole text's would), the others go to the prompt's
    :class:`FedText`, one per frame; :meth:`close` adds the rest and ``tts_eos``. The
    runaway guard is that of the longest text until the text is closed, then the whole
    text's (:class:`Qwen3EngineFamily` applies it)."""

    def __init__(self, loaded: Qwen3LoadedModel, voice, options: dict, seed: int | None):
        from vocalis.models.qwen3.text import TokenStream

        self._loaded, self._voice, self._options, self._seed = loaded, voice, options, seed
        self._tokens = TokenStream(loaded.model.tokenizer)
        self._prompt = None
        self._closed = False
        self._held: list[int] = []  # final ids kept back until the text has a letter or digit

    @property
    def text(self) -> str:
        return self._tokens.text

    def push(self, text: str) -> Prepared | None:
        if self._closed:
            raise InputError("text after the end of the text: open another request", param="input")
        return self._feed(self._tokens.push(text))

    def close(self) -> Prepared | None:
        if self._closed:
            return None
        new = self._tokens.close()
        self._closed = True
        if self._prompt is None and not any(c.isalnum() for c in self.text):
            raise NothingToSpeak("the streamed text has nothing to speak (only white space, "
                                 "punctuation or symbols): give words or numbers", param="input")
        from vocalis.models.qwen3.model import guard_frames

        out = self._feed(new)
        self._prompt.trailing.close(None if self._loaded.exact
                                    else guard_frames(len(self._tokens.ids)))
        return out

    def _feed(self, new: list[int]) -> Prepared | None:
        import torch

        from vocalis.models.qwen3.engine import Qwen3Input
        from vocalis.models.qwen3.model import guard_frames

        if len(self._tokens.ids) > MAX_TEXT_TOKENS:
            raise InputError(f"the streamed text passed {MAX_TEXT_TOKENS} tokens, the most "
                             "Qwen3-TTS takes per request: it was stopped there; send the "
                             "rest in another", param="input")
        if self._prompt is not None:
            self._prompt.trailing.push(new)
            return None
        self._held += new
        if not self._held or not any(c.isalnum() for c in self.text):
            return None  # nothing speakable yet (as a whole text of only symbols is refused)
        new, self._held = self._held, []
        m = self._loaded.model
        ids = torch.tensor([self._tokens.role + new[:1]], dtype=torch.long, device=m.device)
        self._prompt, _, params = self._loaded._request(
            ids, self._voice, self._options, self._seed,
            None if self._loaded.exact else guard_frames(MAX_TEXT_TOKENS), feed=True)
        self._prompt.trailing.push(new[1:])
        return Prepared(Qwen3Input(self._prompt, None), [("", new[:1], 0)], params)


FAMILY = Qwen3TTSFamily()

__all__ = ["FAMILY", "KINDS", "Qwen3LoadedModel", "Qwen3TTSFamily", "Qwen3TextFeed",
           "takes_instruct"]
