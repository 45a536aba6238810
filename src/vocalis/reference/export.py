"""Export a reference fixture by running the OFFICIAL ``pocket-tts`` package.

A fixture is everything someone porting Pocket TTS to another runtime (or vocalis itself)
needs to check their numbers against the official implementation, for one seeded run:

``fixture.safetensors``
    ``latents``                 float32 ``[1, T, 32]``: every decoder input, concatenated
                                (denormalized: ``latent_norm * emb_std + emb_mean``, exactly
                                what the official decoder thread passes to
                                ``MimiModel.decode_from_latent``); ``T`` = frames decoded.
    ``decoder.NNNN.latent``     float32 ``[1, n, 32]``: the input of decoder call NNNN.
    ``decoder.NNNN.output``     float32 ``[1, 1, n * 1920]``: what that call returned, before
                                the fade-in (PCM at the model's sample rate).
    ``text.NNNN.token_ids``     int64 ``[1, N]``: token ids of prepared text chunk NNNN (the
                                conditioner's ``prepare`` output).
    ``text.NNNN.step_latents``  float32 ``[1, S, 32]``: the FlowLM output of every executed
                                autoregressive step of the chunk, *normalized* (before
                                ``emb_std``/``emb_mean``), including a final step whose frame
                                was dropped because generation stopped there.
    ``flow_lm.emb_std``, ``flow_lm.emb_mean``  float32 ``[32]``: the checkpoint's latent
                                normalization (``latents = step_latents * emb_std + emb_mean``).
    ``voice.<module>.<key>``    the voice state (prefilled FlowLM KV caches, e.g.
                                ``voice.transformer.layers.0.self_attn.cache``
                                ``[2, 1, P, H, D]``, ``...offset`` int64 ``[1]``).
    ``waveform``                float32 ``[samples]``: the official ``generate_audio`` output
                                (PCM in [-1, 1], not clipped, fade-ins applied).
``fixture.json``
    Schema version, model id and how the official package was loaded, sample rate, seed,
    sampling parameters, input text, per chunk its prepared text / token count / EOS
    decisions / frames, and per decoder call: index, chunk, frames, samples, ``reset``
    (fresh decoder state, with the fade-in over its first ``fade_in_samples`` samples).
``reference.wav``
    The waveform as a float32 WAV.
``export.log``
    The official package's log output during the run.

Everything is captured by wrapping methods of the loaded official model instance at run
time (``_generate_audio_stream_short_text``, ``flow_lm.conditioner.prepare``,
``_decode_audio_worker``, ``mimi.decode_from_latent``, ``_autoregressive_generation``,
``_run_flow_lm_and_increment_step``); the installed package's files are never touched and
no other instance is affected. Importing the official package calls
``torch.set_num_threads(1)`` for the whole process (as it does for its own users); the
thread count is recorded, since CPU matmul/SDPA rounding depends on it.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import vocalis
from vocalis.errors import (
    HarnessError,
    InputError,
    ModelNotFound,
    VocalisError,
    VoiceError,
)
from vocalis.models.pocket.official import (
    GENERATE_OPTIONS,
    LOAD_OPTIONS,
    resolve_official_model,
    resolve_official_voice,
)

log = logging.getLogger(__name__)

SCHEMA = "vocalis.reference.fixture"
SCHEMA_VERSION = 1
OFFICIAL_VERSION = "4.0.1"  # the version this harness was written against
FIXTURE_TENSORS = "fixture.safetensors"
FIXTURE_JSON = "fixture.json"
REFERENCE_WAV = "reference.wav"
EXPORT_LOG = "export.log"

# sampling options, named as the official CLI (``--temperature`` ...) / ``load_model``:
# LOAD_OPTIONS (ours -> TTSModel.load_model keyword) and GENERATE_OPTIONS, shared with the
# official side of `vocalis bench`
#: harness-only: the official model's ``max_decoder_frames_per_call`` (0 = decode whatever
#: has queued up, the official default; 1 = frame by frame)
HARNESS_OPTIONS = ("decoder_frames_per_call",)
SAMPLING_OPTIONS = tuple(LOAD_OPTIONS) + GENERATE_OPTIONS + HARNESS_OPTIONS


def _official():
    """Import the official package lazily (it sets ``torch.set_num_threads(1)`` on import)."""
    try:
        import pocket_tts  # noqa: F401
        from pocket_tts import TTSModel
    except ImportError as e:
        raise HarnessError(
            f"the official pocket-tts package is needed for the reference harness ({e}): "
            "pip install 'vocalis[reference]'") from None
    return TTSModel


def official_version() -> str:
    try:
        from importlib.metadata import version

        return version("pocket-tts")
    except Exception:  # pragma: no cover - metadata missing
        return "unknown"


# ------------------------------------------------------------------------- capture


@dataclass
class _Chunk:
    index: int
    text: str
    frames_after_eos: int
    token_ids: torch.Tensor | None = None
    mimi_capacity_steps: int | None = None
    step_latents: list[torch.Tensor] = field(default_factory=list)
    eos_flags: list[bool] = field(default_factory=list)


@dataclass
class _Call:
    index: int
    chunk: int
    reset: bool
    latent: torch.Tensor
    output: torch.Tensor | None = None


class _Recorder:
    """Collects what the wrapped official methods see. Chunks run strictly one after the
    other in the official pipeline (the caller joins the decoder thread before the next
    chunk); thread-locals tie each generation/decoder thread to its chunk anyway."""

    def __init__(self, fade_in_samples: int):
        self.fade_in_samples = fade_in_samples
        self.chunks: list[_Chunk] = []
        self.calls: list[_Call] = []
        self.lock = threading.Lock()
        self.local = threading.local()

    def current_chunk(self) -> _Chunk | None:
        return self.chunks[-1] if self.chunks else None


def _install(model, rec: _Recorder) -> list[tuple[Any, str]]:
    """Wrap methods of this official model instance; returns what to undo."""
    installed: list[tuple[Any, str]] = []

    def patch(obj, name: str, make):
        orig = getattr(obj, name, None)
        if orig is None:
            raise HarnessError(
                f"official pocket-tts {official_version()} has no {type(obj).__name__}.{name}; "
                f"this harness was written for pocket-tts=={OFFICIAL_VERSION}: "
                f"pip install 'pocket-tts=={OFFICIAL_VERSION}'")
        obj.__dict__[name] = make(orig)  # instance attribute shadows the class method
        installed.append((obj, name))

    def short_text(orig):
        @functools.wraps(orig)
        def wrapper(*args, **kwargs):
            text = kwargs.get("text_to_generate", args[1] if len(args) > 1 else None)
            fae = kwargs.get("frames_after_eos", args[2] if len(args) > 2 else None)
            with rec.lock:
                rec.chunks.append(_Chunk(len(rec.chunks), text, int(fae)))
            yield from orig(*args, **kwargs)
        return wrapper

    def prepare(orig):
        @functools.wraps(orig)
        def wrapper(text, *args, **kwargs):
            ids = orig(text, *args, **kwargs)
            chunk = rec.current_chunk()
            if chunk is not None and chunk.token_ids is None and chunk.text == text:
                chunk.token_ids = ids.detach().to("cpu", torch.int64).clone()
            return ids
        return wrapper

    def decode_worker(orig):
        @functools.wraps(orig)
        def wrapper(latents_queue, result_queue, mimi_sequence_length, mimi_steps_per_latent):
            chunk = rec.current_chunk()
            if chunk is not None:
                chunk.mimi_capacity_steps = int(mimi_sequence_length)
            rec.local.decoder = {"chunk": chunk.index if chunk else -1, "fresh": True}
            try:
                return orig(latents_queue, result_queue, mimi_sequence_length,
                            mimi_steps_per_latent)
            finally:
                rec.local.decoder = None
        return wrapper

    def decode_from_latent(orig):
        @functools.wraps(orig)
        def wrapper(latent, mimi_state):
            ctx = getattr(rec.local, "decoder", None)
            if ctx is None:  # not the TTS decoder thread (e.g. DEBUG_MIMI dumps)
                return orig(latent, mimi_state)
            with rec.lock:
                call = _Call(len(rec.calls), ctx["chunk"], ctx["fresh"],
                             latent.detach().to("cpu", torch.float32).clone())
                rec.calls.append(call)
            ctx["fresh"] = False
            out = orig(latent, mimi_state)
            # The worker fades the first samples in place after we return: keep a copy.
            call.output = out.detach().to("cpu", torch.float32).clone()
            return out
        return wrapper

    def autoregressive(orig):
        @functools.wraps(orig)
        def wrapper(*args, **kwargs):
            rec.local.generating = rec.current_chunk()
            try:
                return orig(*args, **kwargs)
            finally:
                rec.local.generating = None
        return wrapper

    def flow_step(orig):
        @functools.wraps(orig)
        def wrapper(*args, **kwargs):
            latent, is_eos = orig(*args, **kwargs)
            chunk = getattr(rec.local, "generating", None)
            if chunk is not None and kwargs.get("backbone_input_latents") is not None:
                chunk.step_latents.append(latent.detach().to("cpu", torch.float32).clone())
                chunk.eos_flags.append(bool(is_eos.reshape(-1)[0].item()))
            return latent, is_eos
        return wrapper

    try:
        patch(model, "_generate_audio_stream_short_text", short_text)
        patch(model.flow_lm.conditioner, "prepare", prepare)
        patch(model, "_decode_audio_worker", decode_worker)
        patch(model.mimi, "decode_from_latent", decode_from_latent)
        patch(model, "_autoregressive_generation", autoregressive)
        patch(model, "_run_flow_lm_and_increment_step", flow_step)
    except BaseException:
        _uninstall(installed)
        raise
    return installed


def _uninstall(installed: list[tuple[Any, str]]) -> None:
    for obj, name in reversed(installed):
        obj.__dict__.pop(name, None)


class _OfficialLogCapture(logging.Handler):
    """Collects the ``pocket_tts`` loggers' records (all levels) as formatted lines."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter(
            "%(relativeCreated)9.0f ms %(levelname)-7s %(threadName)s %(name)s: %(message)s"))
        self.lines: list[str] = []
        self._lock_lines = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # pragma: no cover - a bad log call in the official package
            line = f"{record.levelname} {record.name}: {record.msg!r} {record.args!r}"
        with self._lock_lines:
            self.lines.append(line)


class _ForwardWarnings(logging.Handler):
    """While the official logger does not propagate, hand its warnings to the root logger's
    handlers so they still reach the user."""

    def __init__(self):
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger().handle(record)


@contextmanager
def _capture_official_logs():
    logger = logging.getLogger("pocket_tts")
    cap, fwd = _OfficialLogCapture(), _ForwardWarnings()
    saved = (logger.level, logger.propagate)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(cap)
    logger.addHandler(fwd)
    try:
        yield cap
    finally:
        logger.removeHandler(cap)
        logger.removeHandler(fwd)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


# ------------------------------------------------------------------------- export


def _check_sampling(sampling: dict) -> dict:
    unknown = sorted(set(sampling) - set(SAMPLING_OPTIONS))
    if unknown:
        raise InputError(f"unknown sampling option(s): {', '.join(unknown)}; known: "
                         + ", ".join(SAMPLING_OPTIONS))
    out = {k: v for k, v in sampling.items() if v is not None}
    for k in ("frames_after_eos", "max_tokens", "sampler_decode_steps",
              "decoder_frames_per_call"):
        if k in out and (isinstance(out[k], bool) or not isinstance(out[k], int)):
            raise InputError(f"{k} must be an integer, got {out[k]!r}")
    if out.get("max_tokens", 1) < 1:
        raise InputError(f"max_tokens must be >= 1, got {out['max_tokens']}")
    if out.get("sampler_decode_steps", 1) < 1:
        raise InputError(f"sampler_decode_steps must be >= 1, got {out['sampler_decode_steps']}")
    if out.get("frames_after_eos", 0) < 0:
        raise InputError(f"frames_after_eos must be >= 0, got {out['frames_after_eos']}")
    if out.get("decoder_frames_per_call", 0) < 0:
        raise InputError("decoder_frames_per_call must be >= 0 (0 = whatever has queued up)")
    for k in ("temperature", "eos_threshold", "noise_clamp"):
        if k in out:
            try:
                out[k] = float(out[k])
            except (TypeError, ValueError):
                raise InputError(f"{k} must be a number, got {out[k]!r}") from None
    if out.get("temperature", 1.0) < 0:
        raise InputError(f"temperature must be >= 0, got {out['temperature']}")
    return out


def _write_float_wav(path: Path, samples: np.ndarray, sample_rate: int) -> None:
    import soundfile

    soundfile.write(str(path), np.asarray(samples, np.float32), sample_rate, subtype="FLOAT",
                    format="WAV")


def export_fixture(model: str, voice: str | Path, text: str, out_dir: str | Path,
                   seed: int = 0, **sampling) -> Path:
    """Run the official package once and write a fixture into ``out_dir``.

    Args:
        model: vocalis model id: ``pocket-tts``, ``pocket-tts/<config>`` or a YAML path.
        voice: audio file, predefined voice name, or ``.safetensors`` voice state (local,
            ``hf://`` or URL) — anything ``TTSModel.get_state_for_audio_prompt`` takes.
        text: the text to speak (split into chunks by the official package).
        out_dir: created if needed; existing fixture files are overwritten.
        seed: ``torch.manual_seed(seed)`` is called right before ``generate_audio`` (after
            the voice state is built).
        sampling: ``temperature``, ``eos_threshold``, ``noise_clamp``,
            ``sampler_decode_steps`` (given to ``load_model``), ``frames_after_eos``,
            ``max_tokens`` (given to ``generate_audio``), and ``decoder_frames_per_call``
            (sets the official ``max_decoder_frames_per_call``; default 0 = official default).

    Returns:
        ``out_dir`` as a Path.

    Raises:
        HarnessError: official package missing or incompatible, or generation failed.
        InputError / ModelNotFound / VoiceError: bad text, options, model or voice.
    """
    TTSModel = _official()
    opts = _check_sampling(sampling)
    if not isinstance(text, str) or not text.strip():
        raise InputError("text is empty: give some words to speak")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"seed must be an integer, got {seed!r}")
    load_kwargs = resolve_official_model(model)
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)

    voice_arg, voice_kind = resolve_official_voice(voice)  # fail fast, before loading the model
    with _capture_official_logs() as cap:
        try:
            tts = TTSModel.load_model(**load_kwargs, **{LOAD_OPTIONS[k]: v for k, v in
                                                        opts.items() if k in LOAD_OPTIONS})
        except (FileNotFoundError, ValueError, OSError) as e:
            raise ModelNotFound(f"the official package could not load {model!r}: {e}") from None
        if "decoder_frames_per_call" in opts:
            tts.max_decoder_frames_per_call = opts["decoder_frames_per_call"]
        try:
            voice_state = tts.get_state_for_audio_prompt(voice_arg)
        except (FileNotFoundError, ValueError, OSError, RuntimeError) as e:
            raise VoiceError(f"the official package could not use voice {str(voice)!r}: "
                             f"{e}") from None
        voice_tensors = {f"voice.{module}.{key}": t.detach().to("cpu").clone().contiguous()
                         for module, st in voice_state.items() for key, t in st.items()}

        fade = tts.config.mimi.sample_rate // 200
        rec = _Recorder(fade)
        installed = _install(tts, rec)
        try:
            gen_kwargs = {k: opts[k] for k in GENERATE_OPTIONS if k in opts}
            torch.manual_seed(seed)
            waveform = tts.generate_audio(voice_state, text, **gen_kwargs)
        except VocalisError:
            raise
        except ValueError as e:  # the official text checks ("Text prompt cannot be empty")
            raise InputError(f"the official package rejected the text: {e}") from None
        except Exception as e:
            raise HarnessError(f"the official package failed to generate: "
                               f"{type(e).__name__}: {e}") from e
        finally:
            _uninstall(installed)
        log_lines = list(cap.lines)

    return _write(out, tts, model, load_kwargs, voice, voice_kind, voice_tensors, text, seed,
                  opts, rec, waveform, log_lines)


def _eos_step(flags: list[bool], min_frames: int) -> int | None:
    for i, f in enumerate(flags):
        if f and i >= min_frames:
            return i
    return None


def _write(out: Path, tts, model: str, load_kwargs: dict, voice, voice_kind: str,
           voice_tensors: dict, text: str, seed: int, opts: dict, rec: _Recorder,
           waveform: torch.Tensor, log_lines: list[str]) -> Path:
    from safetensors.torch import save_file

    sr = int(tts.config.mimi.sample_rate)
    frame_samples = int(tts.mimi.frame_size)
    wave = waveform.detach().to("cpu", torch.float32).reshape(-1).contiguous()
    calls = rec.calls
    if not calls:
        raise HarnessError("the official package produced no audio (no decoder call)")
    if any(c.output is None for c in calls):
        raise HarnessError("a decoder call failed in the official package (see export.log)")

    tensors: dict[str, torch.Tensor] = {
        "latents": torch.cat([c.latent for c in calls], dim=1).contiguous(),
        "waveform": wave,
    }
    for c in calls:
        tensors[f"decoder.{c.index:04d}.latent"] = c.latent.contiguous()
        tensors[f"decoder.{c.index:04d}.output"] = c.output.contiguous()
    for ch in rec.chunks:
        if ch.token_ids is not None:
            tensors[f"text.{ch.index:04d}.token_ids"] = ch.token_ids.contiguous()
        if ch.step_latents:
            tensors[f"text.{ch.index:04d}.step_latents"] = torch.cat(
                ch.step_latents, dim=1).contiguous()
    tensors.update(voice_tensors)
    for name in ("emb_std", "emb_mean"):  # latents = step_latents * emb_std + emb_mean
        tensors[f"flow_lm.{name}"] = getattr(tts.flow_lm, name).detach().to(
            "cpu", torch.float32).clone().contiguous()

    # Self-check: the waveform is the decoder outputs with the fade-in on each reset call.
    rebuilt = []
    for c in calls:
        pcm = c.output.clone()
        if c.reset:
            n = min(rec.fade_in_samples, pcm.shape[-1])
            pcm[..., :n] *= torch.linspace(0, 1, rec.fade_in_samples)[:n]
        rebuilt.append(pcm.reshape(-1))
    rebuilt_t = torch.cat(rebuilt)
    consistent = bool(rebuilt_t.shape == wave.shape and torch.equal(rebuilt_t, wave))
    if not consistent:
        log.warning("official waveform differs from its decoder outputs + fade-ins; the fixture "
                    "is written but replays will not match it")

    min_frames = int(getattr(tts, "_MIN_FRAMES_BEFORE_EOS", 0))
    chunks_meta = []
    for ch in rec.chunks:
        frames = sum(c.latent.shape[1] for c in calls if c.chunk == ch.index)
        chunks_meta.append({
            "index": ch.index,
            "text": ch.text,
            "num_tokens": None if ch.token_ids is None else int(ch.token_ids.shape[-1]),
            "frames_after_eos": ch.frames_after_eos,
            "mimi_capacity_steps": ch.mimi_capacity_steps,
            "steps": len(ch.eos_flags),
            "eos_flags": ch.eos_flags,
            "eos_step": _eos_step(ch.eos_flags, min_frames),
            "frames": frames,
            "samples": frames * frame_samples,
        })
    first_frame = 0
    calls_meta = []
    for c in calls:
        n = int(c.latent.shape[1])
        calls_meta.append({
            "index": c.index,
            "chunk": c.chunk,
            "first_frame": first_frame,
            "frames": n,
            "samples": int(c.output.shape[-1]),
            "reset": c.reset,
            "fade_in_samples": min(rec.fade_in_samples, int(c.output.shape[-1])) if c.reset
            else 0,
        })
        first_frame += n

    model_meta: dict[str, Any] = {
        "id": model,
        "official_load": load_kwargs,
        "config": load_kwargs.get("language") or load_kwargs.get("config"),
        "sample_rate": sr,
        "frame_rate": float(tts.config.mimi.frame_rate),
        "frame_samples": frame_samples,
        "latent_dim": int(calls[0].latent.shape[-1]),
        "has_voice_cloning": bool(getattr(tts, "has_voice_cloning", True)),
    }
    meta = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "pocket_tts_version": official_version(),
        "vocalis_version": vocalis.__version__,
        "torch_version": torch.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "model": model_meta,
        "sample_rate": sr,
        "seed": seed,
        "seed_note": "torch.manual_seed(seed) right before generate_audio, after the voice "
                     "state was built",
        "sampling": {
            "temperature": float(tts.temp),
            "eos_threshold": float(tts.eos_threshold),
            "noise_clamp": None if tts.noise_clamp is None else float(tts.noise_clamp),
            "sampler_decode_steps": int(tts.sampler_decode_steps),
            "frames_after_eos": opts.get("frames_after_eos"),
            "max_tokens": int(opts.get("max_tokens", _default_max_tokens())),
            "decoder_frames_per_call": int(tts.max_decoder_frames_per_call),
            "min_frames_before_eos": min_frames,
        },
        "voice": {"source": str(voice), "kind": voice_kind,
                  "tensors": sorted(voice_tensors)},
        "text": text,
        "chunk_texts": [ch.text for ch in rec.chunks],
        "chunks": chunks_meta,
        "decoder": {
            "fade_in_samples": rec.fade_in_samples,
            "fade_in": "x[:n] *= linspace(0, 1, fade_in_samples)[:n] on the first call "
                       "after each reset, n = min(fade_in_samples, samples)",
            "input": "denormalized latents (latent_norm * emb_std + emb_mean)",
            "calls": calls_meta,
        },
        "totals": {"frames": first_frame, "samples": int(wave.shape[0]),
                   "chunks": len(rec.chunks), "decoder_calls": len(calls)},
        "waveform_matches_decoder_outputs": consistent,
        "files": {"tensors": FIXTURE_TENSORS, "wav": REFERENCE_WAV, "log": EXPORT_LOG},
    }
    save_file(tensors, str(out / FIXTURE_TENSORS),
              metadata={"schema": SCHEMA, "schema_version": str(SCHEMA_VERSION)})
    (out / FIXTURE_JSON).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n",
                                    encoding="utf-8")
    _write_float_wav(out / REFERENCE_WAV, wave.numpy(), sr)
    (out / EXPORT_LOG).write_text("\n".join(log_lines) + ("\n" if log_lines else ""),
                                  encoding="utf-8")
    return out


def _default_max_tokens() -> int:
    from pocket_tts.default_parameters import MAX_TOKEN_PER_CHUNK

    return int(MAX_TOKEN_PER_CHUNK)
