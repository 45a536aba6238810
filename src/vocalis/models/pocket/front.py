"""Pocket TTS's front half (:mod:`vocalis.family`): model ids, configs, voices, loading.

Model ids: ``pocket-tts`` (= ``pocket-tts/english``), ``pocket-tts/<config>`` for every
released config of ``pocket-tts`` 4.0.1, or a YAML config in the official format (a local
path, a folder holding ``config.yaml``, or ``hf://owner/repo/file.yaml[@rev]``).

Voices: a predefined voice name (released models: voice states precomputed by Kyutai with
the released weights), an audio file to clone (any format soundfile reads), or a
``.safetensors`` voice state in the official export-voice layout.

This module stays light (no torch): checking a request needs only the config; the model
code is imported when a model is loaded.
"""

from __future__ import annotations

import logging
import re
import shlex
from pathlib import Path

from vocalis import hub
from vocalis.audio import check_audio_file
from vocalis.errors import CheckpointError, InputError, ModelNotFound, VoiceError
from vocalis.family import LoadedModel, LoadSettings, ModelFamily, ModelInfo, Prepared, Voice
from vocalis.models.pocket import registry
from vocalis.models.pocket.config import PocketConfig, dump_config, load_config_file
from vocalis.models.pocket.options import OPTIONS
from vocalis.options import Option, OptionSchema, did_you_mean

log = logging.getLogger(__name__)

PREFIX = "pocket-tts"
_LANGUAGE = re.compile(r"(?<![a-z])(french|german|italian|portuguese|spanish|dutch)(?![a-z])")


def resolve_model_id(model_id: str) -> tuple[PocketConfig, str, bool]:
    """Model id -> (config, name, is_released); ``name`` is the config name of a released
    model, else the YAML's path.

    Raises:
        ModelNotFound: unknown id (the message suggests the closest) or a missing file.
    """
    mid = model_id.strip()
    if mid in (PREFIX, f"{PREFIX}/"):
        mid = f"{PREFIX}/{registry.DEFAULT_CONFIG}"
    if mid.startswith(f"{PREFIX}/"):
        name = mid.split("/", 1)[1]
        if name in registry.config_names():
            return registry.released_config(name), name, True
        ids = [f"{PREFIX}/{n}" for n in registry.config_names()]
        raise ModelNotFound(f"unknown model {model_id!r}{did_you_mean(mid, ids)}: `vocalis "
                            f"models list` lists the {len(ids)} Pocket TTS configs; or give a "
                            "path to a YAML config", param="model")
    if hub.is_hf_ref(mid) or hub.is_url(mid):
        path = hub.resolve(mid)
    else:
        path = Path(mid).expanduser()
        if path.is_dir():
            path = path / "config.yaml"
        if not path.exists():
            raise ModelNotFound(f"unknown model {model_id!r}: no such file or folder ({path})",
                                param="model")
    if path.suffix not in (".yaml", ".yml"):
        raise ModelNotFound(f"model config must be a .yaml file, got {path}", param="model")
    cfg = load_config_file(path)
    _anchor_relative_paths(cfg, path.parent)
    return cfg, str(path), False


def _anchor_relative_paths(cfg: PocketConfig, base: Path) -> None:
    """Relative local paths in a YAML are taken relative to the YAML's folder, unless they
    exist only relative to the working directory (where the official loader looks); a path
    found in neither is reported in the YAML's folder."""

    def fix(p: str | None) -> str | None:
        if p is None or "://" in p or Path(p).is_absolute():
            return p
        candidate = base / p
        return p if Path(p).exists() and not candidate.exists() else str(candidate)

    cfg.weights_path = fix(cfg.weights_path)
    cfg.weights_path_without_voice_cloning = fix(cfg.weights_path_without_voice_cloning)
    cfg.flow_lm.lookup_table.tokenizer_path = fix(cfg.flow_lm.lookup_table.tokenizer_path)


def config_language(name: str) -> str:
    """The language of a config (from its name: ``french``, ``german_24l``...; else English)."""
    found = _LANGUAGE.search(str(name).lower())
    return found.group(1) if found else "english"


class PocketTTS(ModelFamily):
    """Kyutai's Pocket TTS: every config of the official ``pocket-tts`` 4.0.1 release."""

    name = PREFIX
    title = "Pocket TTS"
    url = "https://github.com/kyutai-labs/pocket-tts"
    author = "Kyutai"
    options = OPTIONS
    random_options = OptionSchema("Pocket TTS", (
        Option("absolute_paths", bool, "Write absolute paths into config.yaml, so that pocket-tts "
               "loads it from any folder (default: relative to the checkpoint folder).",
               flag="--absolute-paths"),
    ))
    load_options = OptionSchema("Pocket TTS", (
        Option("dtype", str, "Pocket TTS computes in float32 (quantize for int8).",
               choices=("float32",), default="float32"),
    ))
    quantize_modes = ("int8",)
    checkpoint_hint = "a folder holding config.yaml, or a .yaml config"

    # ---------------------------------------------------------------- models

    def claims(self, model_id: str) -> bool:
        mid = model_id.strip()
        if mid == PREFIX or mid.startswith(f"{PREFIX}/"):
            return True
        if mid.lower().endswith((".yaml", ".yml")):
            return True
        try:
            return (Path(mid).expanduser() / "config.yaml").is_file()
        except (OSError, ValueError):
            return False

    def model_ids(self) -> list[str]:
        return [f"{PREFIX}/{n}" for n in registry.config_names()]

    def describe(self, model_id: str) -> ModelInfo:
        cfg, name, released = resolve_model_id(model_id)
        local = None if released or "://" in model_id else Path(name).expanduser().parent
        return ModelInfo(
            family=self, model_id=model_id.strip(), name=name, released=released,
            sample_rate=cfg.mimi.sample_rate,
            served_name=f"{PREFIX}/{name}" if released else None,
            voices=tuple(registry.PREDEFINED_VOICES) if released else (),
            default_voice=registry.default_voice(name) if released else None,
            cloning=True, language=config_language(name), local_path=local,
            extra={"config": cfg})

    def load(self, info: ModelInfo, settings: LoadSettings, **load_options) -> "PocketModel":
        # The model code (torch) is imported here, not at the top: checking a request needs
        # only this module.
        import torch

        from vocalis.models.pocket.engine import PocketEngineFamily
        from vocalis.models.pocket.graphs import trace_graphs
        from vocalis.models.pocket.model import PocketTTSModel, _Tokenizer, resolve_weights
        from vocalis.models.pocket.tuning import parse_split, tune

        cfg = info.extra["config"]
        lt = cfg.flow_lm.lookup_table
        tok = _Tokenizer(lt.tokenizer, hub.resolve(lt.tokenizer_path, model_id=info.model_id),
                        lt.n_bins)
        weights, cloning = resolve_weights(cfg, info.name, model_id=info.model_id)
        try:
            model = PocketTTSModel(cfg, info.name, tok, has_voice_cloning=cloning)
        except (NotImplementedError, ValueError, ZeroDivisionError, RuntimeError) as e:
            raise CheckpointError(f"config {info.name} describes a model vocalis cannot build: "
                                  f"{e}") from None
        model.load_weights(weights)
        if settings.quantize:
            if settings.device.type != "cpu":
                raise InputError("int8 quantization runs on the CPU only: drop quantize or use "
                                 "cpu", param="quantize")
            model.quantize_int8()
        model.to(settings.device, exact=settings.exact, pack=False)
        chosen = tune(model, settings.threads or torch.get_num_threads(), settings.max_batch,
                      settings.exact, settings.tuning)
        if not settings.exact and settings.device.type == "cpu":
            # after tuning, with the chosen kernels in place (exact models stay eager: the
            # official package's own op sequence, run as it runs it)
            model.graphs = trace_graphs(model)
        engine = PocketEngineFamily(model, parse_split(chosen.choices["threads"]),
                                    chosen.choices["codec_pipeline"] == "on",
                                    registry.timestamp_heads(info.name))
        return PocketModel(info, model, engine, exact=settings.exact,
                           quantize=settings.quantize, tuning=chosen)

    def check(self, info: ModelInfo, text, voice, options: dict) -> dict:
        if voice is None or isinstance(voice, (str, Path)):
            # a missing or unreadable file or an unknown name, before any load
            kind, where = voice_source(info, voice)
            if kind == "audio" and isinstance(where, Path):
                check_audio_file(where)
        return options

    def save_voice(self, voice: Voice, path: Path) -> None:
        from vocalis.models.pocket.voice import VoiceState, save_voice_state

        if not isinstance(voice.state, VoiceState):
            raise VoiceError(f"voice {voice.name!r} is not a Pocket TTS voice state")
        save_voice_state(voice.state, path)

    def official_bench(self):
        # the official side (its child process, bench helpers, torch) is not imported by
        # this light front half until `vocalis bench --against official` asks for it
        from vocalis.models.pocket.official import PocketOfficialBench

        return PocketOfficialBench()

    # ---------------------------------------------------------------- model commands

    def summary(self, model_id: str) -> str:
        name = model_id.split("/", 1)[1]
        cfg = registry.released_config(name)
        t = cfg.flow_lm.transformer
        text = (f"{t.num_layers:>2} layers  d_model {t.d_model:>4}  head {cfg.flow_lm.flow.type:<9}"
                f"  tokenizer {cfg.flow_lm.lookup_table.tokenizer}")
        return text + ("  (default: pocket-tts)" if name == registry.DEFAULT_CONFIG else "")

    def show(self, info: ModelInfo) -> list[tuple[str, str]]:
        cfg = info.extra["config"]
        t = cfg.flow_lm.transformer
        rows = [("model", f"{PREFIX}/{info.name}" if info.released else info.name),
                ("family", self.title), ("language", info.language),
                ("flow model", f"{t.num_layers} layers, d_model {t.d_model}, head "
                               f"{cfg.flow_lm.flow.type}"),
                ("tokenizer", f"{cfg.flow_lm.lookup_table.tokenizer}, "
                              f"{cfg.flow_lm.lookup_table.n_bins} tokens"),
                ("sample rate", f"{info.sample_rate} Hz")]
        if info.released:
            rows.append(("voices", f"{', '.join(info.voices)} (default {info.default_voice})"))
        for what, ref in (("weights", cfg.weights_path),
                          ("weights (no cloning)", cfg.weights_path_without_voice_cloning),
                          ("tokenizer file", cfg.flow_lm.lookup_table.tokenizer_path)):
            if ref is not None:
                rows.append((what, f"{ref} ({_cache_state(ref)})"))
        return rows

    def config_text(self, info: ModelInfo) -> str:
        return dump_config(info.extra["config"])

    def download(self, info: ModelInfo, all_voices: bool = False) -> list[tuple[str, str]]:
        from vocalis.models.pocket.model import resolve_weights

        cfg = info.extra["config"]
        weights, cloning = resolve_weights(cfg, info.name, model_id=info.model_id)
        rows = [("weights" + ("" if cloning else " (no voice cloning)"), str(weights)),
                ("tokenizer", str(hub.resolve(cfg.flow_lm.lookup_table.tokenizer_path,
                                              model_id=info.model_id)))]
        if info.released:
            wanted = info.voices if all_voices else (info.default_voice,)
            for v in wanted:
                path = hub.resolve(registry.predefined_voice_ref(info.name, v),
                                   model_id=info.model_id)
                rows.append((f"voice {v}", str(path)))
        return rows

    def random_configs(self) -> list[str]:
        return self.model_ids()

    def write_random(self, config: str, out: Path, seed: int, force: bool,
                     replaceable=None, absolute_paths: bool = False) -> tuple[Path, str | None]:
        from vocalis.models.pocket.random_checkpoint import write_random_checkpoint

        name = config.strip().removeprefix(f"{PREFIX}/")
        if name not in registry.config_names():
            ids = self.model_ids()
            raise InputError(f"unknown config {config!r}{did_you_mean(config, ids)}; Pocket TTS "
                             f"configs: {', '.join(ids)}", param="config")
        yaml_path = write_random_checkpoint(name, out, seed=seed, force=force,
                                            relative_paths=not absolute_paths,
                                            replaceable=replaceable)
        folder = yaml_path.parent
        command = (f"vocalis generate --model {shlex.quote(str(folder))} --voice "
                   f"{shlex.quote(str(folder / 'voice.wav'))} --text 'Hello from vocalis.' "
                   "-o out.wav")
        return yaml_path.resolve(), command

    def is_random_checkpoint(self, folder: Path) -> bool:
        from vocalis.models.pocket.random_checkpoint import is_random_checkpoint

        return is_random_checkpoint(folder)


def _cache_state(ref: str) -> str:
    """Whether a file of a config is here: ``cached`` / ``not cached`` (Hub files at their
    pinned revision, looked up without network), or ``found`` / ``missing`` (local paths)."""
    if hub.is_hf_ref(ref):
        repo, filename, rev = hub.parse_hf(ref)
        _, missing = hub.snapshot_missing(repo, rev or "main", [filename])
        return "not cached: `vocalis models download`" if missing else "cached"
    if hub.is_url(ref):
        return "cached" if hub.url_cache_path(ref).exists() else "not cached"
    return "found" if Path(ref).exists() else "missing"


def voice_source(info: ModelInfo, src: str | Path | None) -> tuple[str, str | Path]:
    """Where a voice given by name or path comes from, without reading it: ``("predefined",
    name)``, ``("state", path)`` for a ``.safetensors`` voice state, or ``("audio", path)``.

    Raises VoiceError: no voice for a model without predefined ones, an empty or unknown
    name (with the closest predefined one), a missing file, or a predefined voice with
    weights other than the released ones."""
    if src is None:
        if not info.released:
            raise VoiceError(f"model {info.name} is not a released model, so it has no predefined "
                             "voices: give a voice (an audio file, or a .safetensors voice state)",
                             param="voice")
        src = info.default_voice
    text = str(src)
    if not text.strip():
        raise VoiceError("voice is empty: give a predefined voice name, an audio file or a "
                         ".safetensors voice state", param="voice")
    if hub.is_safetensors_ref(text):
        if "://" in text:
            return "state", text
        path = Path(text).expanduser()
        if not path.exists():
            raise VoiceError(f"voice file not found: {path}", param="voice")
        return "state", path
    if text in registry.PREDEFINED_VOICES and not Path(text).exists():
        if not info.released:
            raise VoiceError(f"predefined voice {text!r} was computed with the released weights "
                             f"and cannot be used with {info.name}: give an audio file instead",
                             param="voice")
        return "predefined", text
    if "://" in text:
        return "audio", text
    path = Path(text).expanduser()
    if not path.exists():
        if path.suffix or "/" in text or "\\" in text:
            raise VoiceError(f"voice file not found: {path}", param="voice")
        if not info.released:
            raise VoiceError(f"unknown voice {text!r}: {info.name} has no predefined voices; give "
                             "an audio file or a .safetensors voice state", param="voice")
        raise VoiceError(f"unknown voice {text!r}{did_you_mean(text, registry.PREDEFINED_VOICES)}:"
                         " not a file; predefined voices are "
                         + ", ".join(registry.PREDEFINED_VOICES), param="voice")
    return "audio", path


class PocketModel(LoadedModel):
    """A loaded Pocket TTS model (:class:`vocalis.models.pocket.model.PocketTTSModel`)."""

    def voice(self, src=None, **voice_options) -> Voice:
        """A voice from a predefined name, an audio file, or a ``.safetensors`` voice state.

        Audio in any format soundfile reads, any rate and channel count: channels are
        averaged, the rate converted to 24 kHz, and prompts longer than 30 s are cut to
        their first 30 s (as the official server and ``export-voice`` do; a warning says so).
        Audio shorter than 80 ms, silent (peak below -60 dBFS) or holding NaN/inf samples is
        refused; under 1 s gets a warning.

        Raises:
            InputError: a voice option (Pocket TTS takes none).
            VoiceError: empty, unknown name (lists the predefined ones), unreadable or
            unusable audio (see above), or a voice state for another model.
            ModelNotFound: a predefined voice not cached while offline.
        """
        from vocalis.audio import read_audio, to_mono_24k
        from vocalis.models.pocket.model import VOICE_MAX_SECONDS
        from vocalis.models.pocket.voice import VoiceState, load_voice_state

        if voice_options:
            name = sorted(voice_options)[0]
            raise InputError(f"{name}: Pocket TTS clones a voice from its audio alone and takes "
                             "no voice options", param=name)
        m = self.model
        if isinstance(src, Voice):
            return Voice(m.check_voice(src.state), src.name, self.family)
        if isinstance(src, VoiceState):
            return Voice(m.check_voice(src), src.meta.get("source", "voice state"), self.family)
        if src is not None and not isinstance(src, (str, Path)):
            raise VoiceError(f"voice must be a name, a file path or a Voice, got "
                             f"{type(src).__name__}", param="voice")
        kind, where = voice_source(self.info, src)
        label = str(src) if src is not None else str(where)
        if kind == "predefined":
            path = hub.resolve(registry.predefined_voice_ref(m.name, str(where)))
            kind = "state"
        else:
            path = hub.resolve(where) if isinstance(where, str) else where
        if kind == "state":
            state = load_voice_state(path)
            state.meta["source"] = label
            return Voice(m.check_voice(state), label, self.family)
        samples, rate = read_audio(path)
        limit = int(VOICE_MAX_SECONDS * rate)
        if samples.shape[0] > limit:
            log.warning("voice audio %s is %.1f s long; using its first %.0f s (as the official "
                        "package does)", path, samples.shape[0] / rate, VOICE_MAX_SECONDS)
            samples = samples[:limit]
        samples = to_mono_24k(samples, rate, m.sample_rate)
        with self.lock:
            state = m.voice_from_audio(samples, source=str(path))
        return Voice(state, str(path), self.family)

    def voice_fits(self, record: dict) -> bool:
        # voices stored before records named their family were all Pocket TTS voice states
        return record.get("family", self.family.name) == self.family.name

    def word_decoder(self):
        return self.model.tokenizer.decode

    def warmup_request(self) -> tuple[str, dict]:
        return "Hello there.", {"max_frames": 3}  # exactly 3 frames

    def prepare(self, text: str, voice, options: dict, seed: int | None) -> Prepared:
        from vocalis.models.pocket.model import SamplingParams

        params = SamplingParams(seed=seed, **options)
        chunks = self.model.chunk_text(text, params.max_tokens)
        return Prepared(self.voice(voice).state, chunks, params)


FAMILY = PocketTTS()

__all__ = ["FAMILY", "PocketModel", "PocketTTS", "config_language", "resolve_model_id",
           "voice_source"]
