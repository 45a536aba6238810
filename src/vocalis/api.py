"""Public Python API.

    >>> import vocalis
    >>> tts = vocalis.load("pocket-tts")                 # or "pocket-tts/french", a YAML path
    >>> voice = tts.voice("alba")                        # name, audio file, or .safetensors
    >>> audio = tts.synthesize("Hello there.", voice=voice, seed=42)
    >>> audio.samples, audio.sample_rate                 # float32 [T] mono, 24000 Hz
    >>> for chunk in tts.stream("Hello there.", voice=voice, seed=42): ...

Model ids: ``pocket-tts`` (= ``pocket-tts/english``), ``pocket-tts/<config>`` for every
released config (``vocalis models list``), or a YAML config in the official format (a
local path, a directory holding ``config.yaml``, or ``hf://owner/repo/file.yaml[@rev]``).
"""

from __future__ import annotations

import logging
import secrets
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from vocalis.audio.stretch import Stretcher, check_speed
from vocalis.engine.openmp import frees_thread_pool, set_threads
from vocalis.engine.scheduler import Engine, make_job
from vocalis.engine.types import AudioChunk, Failed, Finished, Request
from vocalis.errors import CheckpointError, InputError, ModelNotFound, VoiceError
from vocalis.models.pocket import registry
from vocalis.models.pocket.config import PocketConfig, load_config_file
from vocalis.models.pocket.family import PocketFamily
from vocalis.models.pocket.model import (
    VOICE_MAX_SECONDS,
    PocketTTSModel,
    SamplingParams,
    _Tokenizer,
    resolve_weights,
)
from vocalis.models.pocket.voice import VoiceState, load_voice_state, save_voice_state

log = logging.getLogger(__name__)

FAMILY = "pocket-tts"


@dataclass
class Audio:
    """Result of :meth:`TTS.synthesize`.

    ``samples``: float32 mono ``[T]`` in [-1, 1] (not clipped); ``sample_rate`` in Hz;
    ``ttfa_ms``: time from the call to the first decoded audio; ``wall_ms``: total time;
    ``chunks``: per text chunk, its prepared text, token ids, frames and EOS step.
    """

    samples: np.ndarray
    sample_rate: int
    ttfa_ms: float = 0.0
    wall_ms: float = 0.0
    chunks: list[dict] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return self.samples.shape[0] / self.sample_rate


@dataclass
class Voice:
    """A voice ready to use with one model: its prefilled state and where it came from."""

    state: VoiceState
    name: str

    def save(self, path: str | Path) -> None:
        """Write the voice as a ``.safetensors`` file: a Pocket voice state in the official
        export-voice layout, or a Qwen3-TTS voice-clone prompt (Base models).

        Raises VoiceError for a voice that has nothing to save (a built-in speaker)."""
        if isinstance(self.state, VoiceState):
            save_voice_state(self.state, path)
        elif hasattr(self.state, "save"):
            self.state.save(path)
        else:
            raise VoiceError(f"voice {self.name!r} is a built-in speaker: there is no file to save")


def resolve_model_id(model_id: str) -> tuple[PocketConfig, str, bool]:
    """Model id -> (config, display name, is_released).

    Raises:
        ModelNotFound: unknown id (the message lists the released ones) or missing file.
    """
    if not isinstance(model_id, str) or not model_id.strip():
        raise ModelNotFound("model id is empty: use `pocket-tts` or see `vocalis models list`")
    mid = model_id.strip()
    if is_qwen3(mid):
        raise ModelNotFound(f"{model_id!r} is a Qwen3-TTS model, not a Pocket TTS config: "
                            "load it with vocalis.load")
    if mid in (FAMILY, f"{FAMILY}/"):
        mid = f"{FAMILY}/{registry.DEFAULT_CONFIG}"
    if mid.startswith(f"{FAMILY}/"):
        name = mid.split("/", 1)[1]
        if name in registry.config_names():
            return registry.released_config(name), name, True
        raise ModelNotFound(f"unknown model {model_id!r}; known (also qwen3-tts/..., see `vocalis models list`): "
                            + ", ".join(f"{FAMILY}/{n}" for n in registry.config_names())
                            + ", or a path to a YAML config")
    from vocalis import hub

    if mid.startswith(("hf://", "http://", "https://")):
        path = hub.resolve(mid)
    else:
        path = Path(mid).expanduser()
        if path.is_dir():
            path = path / "config.yaml"
        if not path.exists():
            raise ModelNotFound(
                f"unknown model {model_id!r}: not a released model id and no such file; known "
                "(also qwen3-tts/..., see `vocalis models list`): "
                + ", ".join(f"{FAMILY}/{n}" for n in registry.config_names()))
    if path.suffix not in (".yaml", ".yml"):
        raise ModelNotFound(f"model config must be a .yaml file, got {path}")
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


def _check_device(device: str) -> torch.device:
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InputError(f"unknown device {device!r}: use cpu, cuda or cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} requested but CUDA is not available: use --device cpu")
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"device {device!r} is not supported: use cpu or cuda")
    return dev


class _Stretched:
    """A request whose audio goes through a :class:`Stretcher` as it streams (``speed``).
    Everything but :meth:`events` is the engine request's; at the end ``stats.audio_s``
    becomes the stretched duration."""

    def __init__(self, request: Request, stretcher: Stretcher):
        self._request = request
        self._stretcher = stretcher

    def __getattr__(self, name):
        return getattr(self._request, name)

    def events(self, timeout: float | None = None):
        last = 0
        for ev in self._request.events(timeout):
            if isinstance(ev, AudioChunk):
                last = ev.chunk
                y = self._stretcher.process(ev.samples)
                if y.shape[0]:
                    yield AudioChunk(y, ev.chunk, ev.frame)
                continue
            if isinstance(ev, Finished) and not ev.stats.cancelled:
                y = self._stretcher.finish()
                if y.shape[0]:
                    yield AudioChunk(y, last, -1)
                ev.stats.audio_s = self._stretcher.n_out / self._stretcher.sample_rate
            yield ev


class TTS:
    """A loaded model. Thread-safe: concurrent requests share one batch in the engine."""

    family_name = FAMILY

    def __init__(self, model: PocketTTSModel, model_id: str, released: bool,
                 max_batch: int = 16, max_queue: int = 256, threads: int | None = None,
                 family=None):
        self.model = model
        self.threads = threads
        self.model_id = model_id
        self.released = released
        self.max_batch = max_batch
        self.max_queue = max_queue
        self._lock = threading.Lock()
        self._engine: Engine | None = None
        self.family = family if family is not None else PocketFamily(model)
        self.tuning = None  # the measured speed choices (vocalis.engine.tuning.Tuning)

    @property
    def sample_rate(self) -> int:
        return self.model.sample_rate

    @property
    def config_name(self) -> str:
        return self.model.name

    @property
    def served_name(self) -> str | None:
        """The model id of a released model (``pocket-tts/<config>``), else None."""
        return f"{FAMILY}/{self.config_name}" if self.released else None

    # ---------------------------------------------------------------- voices

    @frees_thread_pool
    def voice(self, src: str | Path | Voice | VoiceState | None = None) -> Voice:
        """A voice from a predefined name, an audio file, or a ``.safetensors`` voice state.

        Audio in any format soundfile reads, any rate and channel count: channels are
        averaged, the rate converted to 24 kHz, and prompts longer than 30 s are cut to
        their first 30 s (as the official server and ``export-voice`` do; a warning says so).
        Audio shorter than 80 ms, silent (peak below -60 dBFS) or holding NaN/inf samples is
        refused; under 1 s gets a warning.

        Raises:
            VoiceError: empty, unknown name (lists the predefined ones), unreadable or
            unusable audio (see above), or a voice state for another model.
            ModelNotFound: a predefined voice not cached while offline.
        """
        if isinstance(src, Voice):
            return Voice(self.model.check_voice(src.state), src.name)
        if isinstance(src, VoiceState):
            return Voice(self.model.check_voice(src), src.meta.get("source", "voice state"))
        if src is None:
            src = registry.default_voice(self.model.name) if self.released else None
            if src is None:
                raise VoiceError("this model has no predefined voices: pass voice= an audio "
                                 "file or a .safetensors voice state")
        if not isinstance(src, (str, Path)):
            raise VoiceError(f"voice must be a name, a file path or a Voice, got "
                             f"{type(src).__name__}")
        from vocalis import hub

        text = str(src)
        if not text.strip():
            raise VoiceError("voice is empty: give a predefined voice name, an audio file or a "
                             ".safetensors voice state")
        if hub.is_safetensors_ref(text):
            path = hub.resolve(text) if "://" in text else Path(text).expanduser()
            if not path.exists():
                raise VoiceError(f"voice file not found: {path}")
            state = load_voice_state(path)
            state.meta["source"] = text
            return Voice(self.model.check_voice(state), text)
        if text in registry.PREDEFINED_VOICES and not Path(text).exists():
            if not self.released:
                raise VoiceError(
                    f"predefined voice {text!r} was computed with the released weights and "
                    f"cannot be used with {self.model.name}: pass an audio file instead")
            path = hub.resolve(registry.predefined_voice_ref(self.model.name, text))
            state = load_voice_state(path)
            state.meta["source"] = text
            return Voice(self.model.check_voice(state), text)
        if "://" in text:
            path = hub.resolve(text)
        else:
            path = Path(text).expanduser()
            if not path.exists():
                if path.suffix or "/" in text or "\\" in text:
                    raise VoiceError(f"voice file not found: {path}")
                if not self.released:
                    raise VoiceError(f"unknown voice {text!r}: {self.model.name} has no "
                                     "predefined voices; pass an audio file or a .safetensors "
                                     "voice state")
                raise VoiceError(
                    f"unknown voice {text!r}: not a file; predefined voices are "
                    + ", ".join(registry.PREDEFINED_VOICES))
        from vocalis.audio import read_audio, to_mono_24k

        samples, rate = read_audio(path)
        limit = int(VOICE_MAX_SECONDS * rate)
        if samples.shape[0] > limit:
            log.warning("voice audio %s is %.1f s long; using its first %.0f s (as the official "
                        "package does)", path, samples.shape[0] / rate, VOICE_MAX_SECONDS)
            samples = samples[:limit]
        samples = to_mono_24k(samples, rate, self.sample_rate)
        with self._lock:
            state = self.model.voice_from_audio(samples, source=str(path))
        return Voice(state, str(path))

    # ---------------------------------------------------------------- generation

    def _params(self, seed, sampling: dict) -> SamplingParams:
        unknown = set(sampling) - set(SamplingParams.__dataclass_fields__) - {"seed"}
        if unknown:
            raise InputError(f"unknown sampling option(s): {', '.join(sorted(unknown))}; known: "
                             + ", ".join(f for f in SamplingParams.__dataclass_fields__
                                         if f != "seed"), param=sorted(unknown)[0])
        return SamplingParams(seed=seed, **sampling).validated()

    @property
    def engine(self) -> Engine:
        """The continuous-batching engine (started on first use)."""
        with self._lock:
            if self._engine is None:
                self._engine = Engine(self.family, self.max_batch, self.max_queue, self.threads)
                # The engine's threads hold the engine, not this object: when this object is
                # collected (or the interpreter exits), stop them so that the model is freed
                # and no thread runs torch code during interpreter teardown.
                weakref.finalize(self, self._engine.close)
            return self._engine

    @frees_thread_pool
    def submit(self, text: str, voice=None, seed: int | None = None, speed: float = 1.0,
               normalize: bool = False, **sampling) -> Request:
        """Queue a request and return its handle at once (see :mod:`vocalis.engine.types`).

        Text, options and voice are checked here, in the caller's thread: bad input raises
        before anything is queued. ``Request.events()`` yields ``AudioChunk`` events as
        frames are decoded, then ``Finished`` or ``Failed``; ``Request.cancel()`` frees the
        row within one engine step. ``request.n_chunks`` is the number of text chunks.
        ``speed`` (0.25-4.0, OpenAI's ``speed``): pitch-preserving time-stretch applied
        here, chunk by chunk (:mod:`vocalis.audio.stretch`); 1.0 leaves the audio untouched.
        ``normalize``: read numbers, dates, money, units and abbreviations out as words first
        (:func:`vocalis.text.normalize.normalize`, in :meth:`text_language`); refused with
        ``exact`` models, whose text must stay the official package's.

        Raises:
            InputError, VoiceError, ModelNotFound (see :meth:`voice`); CapacityError when
            ``max_queue`` requests are already waiting.
        """
        speed = check_speed(speed)
        stretcher = Stretcher(speed, self.sample_rate) if speed != 1.0 else None
        text = self.normalized_text(text, normalize, sampling)
        state, chunks, params, seed = self._prepare(text, voice, seed, sampling)
        seed_value = seed if seed is not None else secrets.randbits(63)
        req = self.engine.submit(make_job(self.family, state, chunks, params, seed_value))
        return req if stretcher is None else _Stretched(req, stretcher)

    def _prepare(self, text, voice, seed, options: dict):
        """(voice state, text chunks, params, seed) of one request, checked in the caller's
        thread. Each model family's ``TTS`` defines its own."""
        params = self._params(seed, options)
        chunks = self.model.chunk_text(text, params.max_tokens)
        return self.voice(voice).state, chunks, params, params.seed

    def stream(self, text: str, voice=None, seed: int | None = None, speed: float = 1.0,
               normalize: bool = False, **sampling) -> Iterator[np.ndarray]:
        """Yield float32 PCM chunks ``[n]`` (n = 1920 per frame) as frames are decoded.

        Same arguments as :meth:`synthesize`; the concatenated chunks equal its samples.
        Closing the generator early cancels the request.

        Raises:
            as :meth:`submit`, plus the request's own error if it fails while running.
        """
        req = self.submit(text, voice, seed, speed, normalize, **sampling)
        try:
            for ev in req.events():
                if isinstance(ev, AudioChunk):
                    yield ev.samples
                elif isinstance(ev, Failed):
                    raise ev.error
        finally:
            if not req.done.is_set():
                req.cancel()

    def synthesize(self, text: str, voice=None, seed: int | None = None, speed: float = 1.0,
                   normalize: bool = False, **sampling) -> Audio:
        """Speech for ``text``.

        Args:
            text: any length; split into chunks of at most ``max_tokens`` tokens.
            voice: name, audio file, ``.safetensors`` voice state or :class:`Voice`
                (default: the config's default predefined voice).
            seed: integer; same seed -> same audio as the official package after
                ``torch.manual_seed(seed)``. None = random.
            speed: 0.25-4.0; pitch-preserving time-stretch (Rubber Band): ``n`` samples at
                1.0 become ``round(n / speed)``. 1.0 (default) = the model's own audio.
            normalize: numbers, dates, money, units, abbreviations as words first (see
                :meth:`submit`). Default False.
            sampling: ``temperature``, ``eos_threshold``, ``frames_after_eos``,
                ``noise_clamp``, ``sampler_decode_steps``, ``max_tokens``
                (official names and defaults), ``max_frames`` (fixed length, no EOS).

        Raises:
            InputError, VoiceError, ModelNotFound (see :meth:`voice`), CapacityError.
        """
        req = self.submit(text, voice, seed, speed, normalize, **sampling)
        pieces: list[np.ndarray] = []
        for ev in req.events():
            if isinstance(ev, AudioChunk):
                pieces.append(ev.samples)
            elif isinstance(ev, Failed):
                raise ev.error
        st = req.stats
        samples = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        return Audio(samples, self.sample_rate, st.ttfa_ms or 0.0, st.wall_ms, st.chunks)

    # ---------------------------------------------------------------- text normalization

    def text_language(self, options: dict | None = None) -> str:
        """The language :meth:`submit` normalizes in: a Pocket config's language (from its
        name: ``french``, ``german_24l``...; English otherwise). Qwen3 overrides it with the
        request's ``language``."""
        import re

        found = re.search(r"(?<![a-z])(french|german|italian|portuguese|spanish|dutch)(?![a-z])",
                          str(self.model.name).lower())
        return found.group(1) if found else "english"

    def normalized_text(self, text, normalize: bool = True, options: dict | None = None):
        """``text`` through :func:`vocalis.text.normalize.normalize` when ``normalize`` is True,
        in :meth:`text_language` of ``options``; unchanged when False.

        Raises:
            InputError: ``normalize`` not a bool, an exact-mode model, or a language
            normalization does not cover.
        """
        if normalize is False or normalize is None:
            return text
        if not isinstance(normalize, bool):
            raise InputError(f"normalize must be true or false, got {normalize!r}", param="normalize")
        exact = getattr(self, "exact", None)
        if exact is None:
            exact = getattr(self.model, "exact", False)
        if exact:
            raise InputError("normalize with an exact model: normalization changes the text; exact mode "
                             "is for parity with the official package: drop one of them", param="normalize")
        if not isinstance(text, str):
            return text  # _prepare names the problem
        from vocalis.text.normalize import normalize as _normalize

        return _normalize(text, self.text_language(options or {}))

    def engine_status(self) -> dict:
        """Rows in use, queue depth and limits of the engine."""
        if self._engine is None:
            return {"active_rows": 0, "queued": 0, "max_batch": self.max_batch,
                    "max_queue": self.max_queue, "steps": 0, "frames": 0, "prompt_passes": 0,
                    "cache_mb": 0.0}
        return self._engine.status()

    def close(self) -> None:
        """Cancel running requests and stop the engine threads (also done when this object
        is garbage-collected or the interpreter exits). Idempotent."""
        if self._engine is not None:
            self._engine.close()

    def __enter__(self) -> "TTS":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@frees_thread_pool
def load(model_id: str = FAMILY, device: str = "cpu", threads: int | None = None,
         max_batch: int = 16, max_queue: int = 256, quantize: bool | str = False,
         exact: bool = False, dtype: str = "float32", full_state_decode: bool = False,
         tuning: str | dict | None = None) -> TTS:
    """Load a model (config, weights, tokenizer) onto ``device``.

    Weights come from the hub at the pinned revision (the gated repo with voice cloning,
    else the open one, saying so) or from the paths in a YAML config. ``quantize``
    (``True`` = ``"int8"``): dynamic int8 FlowLM linears, or for Qwen3-TTS the talker and
    code-predictor linears (CPU, float32; faster, not bit-identical); Qwen3-TTS also takes
    ``"int4"`` (4-bit weights in blocks of 32: :mod:`vocalis.kernels.int4`); both run kernels
    of ours, built once by ``vocalis kernels build``. ``max_batch``: rows run together;
    ``max_queue``: requests waiting beyond them before ``CapacityError``. ``exact``: keep
    PyTorch's default CPU kernels, so that a request alone is bit-identical to the official
    package (the default oneDNN-packed linears agree to float rounding, and are faster).

    Qwen3-TTS (``qwen3-tts/0.6b-customvoice`` ..., the Hub repo id ``Qwen/Qwen3-TTS-12Hz-*``
    or a local checkpoint folder) returns a :class:`vocalis.api_qwen3.Qwen3TTS`: ``dtype``
    (``float32`` or ``bfloat16``) is the talker's compute dtype (the codec stays float32);
    ``exact`` also turns off the runaway guard; ``full_state_decode`` decodes long
    utterances in one causal pass instead of the official 300/25 chunks.

    ``tuning`` (Pocket TTS): the speed choices (oneDNN-packed for 16 rows or for one row,
    or default linears for the FlowLM and the codec, the codec's ELU formula, the thread
    split between them, one or two codec threads at few rows) are measured on this machine
    at the first load and cached (:mod:`vocalis.models.pocket.tuning`); ``"flow_linears=hybrid"`` (never measured)
    keeps the default kernel for a lone row beside the packed weights, holding them twice;
    ``"fixed"`` uses the built-in choices without measuring, ``"flow_linears=default,
    threads=1:1"`` (or a dict) forces choices, and ``"codec_dtype=bfloat16"`` opts in to a
    bfloat16 codec decoder (not float32-exact). Qwen3-TTS measures four: packed (for 16 rows
    or one) or default linears for a float32 talker and code predictor, packed or default
    matmuls for its streaming codec, how many frames the codec decodes per call after a
    row's first (audio then leaves in chunks of that many frames) and the thread split
    between its model and codec threads (``"codec_linears=default,codec_frames=1,
    threads=1:1"``, :mod:`vocalis.models.qwen3.tuning`).
    Default: ``$VOCALIS_TUNING``, else ``"auto"``. The result is ``TTS.tuning``.

    Raises:
        ModelNotFound: unknown id, or weights not available (offline and not cached: the
        message says how to get them). CheckpointError: weights do not match the config.
        InputError: bad device, thread count or quantize mode; int4 for Pocket TTS; a
        Qwen3-TTS quantize mode whose kernel is not built (``vocalis kernels build``).
    """
    dev = _check_device(device)
    quantize = quantize_mode(quantize)
    if dtype not in ("float32", "bfloat16"):
        raise InputError(f"unknown dtype {dtype!r}: use float32 or bfloat16")
    for name, value, top in (("max_batch", max_batch, 1024), ("max_queue", max_queue, 1 << 20)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise InputError(f"{name} must be an integer in [1, {top}], got {value!r}")
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise InputError(f"threads must be an integer >= 1, got {threads!r}")
        set_threads(threads)
    if isinstance(model_id, str) and is_qwen3(model_id.strip()):
        return _load_qwen3(model_id.strip(), dev, threads, max_batch, max_queue, quantize, exact,
                           dtype, full_state_decode, tuning)
    if dtype != "float32" or full_state_decode:
        raise InputError("dtype and full_state_decode are Qwen3-TTS options; Pocket TTS runs in "
                         "float32 (use quantize for int8)")
    if quantize == "int4":
        raise InputError(f"{model_id}: int4 is a Qwen3-TTS option; Pocket TTS quantizes to int8 "
                         "(--quantize, or quantize=True in Python)", param="quantize")
    cfg, name, released = resolve_model_id(model_id)
    from vocalis import hub

    lt = cfg.flow_lm.lookup_table
    tok = _Tokenizer(lt.tokenizer, hub.resolve(lt.tokenizer_path, model_id=model_id), lt.n_bins)
    weights, cloning = resolve_weights(cfg, name, model_id=model_id)
    try:
        model = PocketTTSModel(cfg, name, tok, has_voice_cloning=cloning)
    except (NotImplementedError, ValueError, ZeroDivisionError, RuntimeError) as e:
        raise CheckpointError(f"config {name} describes a model vocalis cannot build: {e}") from None
    model.load_weights(weights)
    if quantize:
        if dev.type != "cpu":
            raise InputError("int8 quantization runs on the CPU only: drop quantize or use cpu")
        model.quantize_int8()
    model.to(dev, exact=exact, pack=False)
    from vocalis.models.pocket.tuning import parse_split, tune

    chosen = tune(model, threads or torch.get_num_threads(), max_batch, exact, tuning)
    tts = TTS(model, model_id, released, max_batch, max_queue, threads,
              family=PocketFamily(model, parse_split(chosen.choices["threads"]),
                                  chosen.choices["codec_pipeline"] == "on"))
    tts.tuning = chosen
    return tts


#: what ``quantize`` names besides True/False (True = "int8"); int4 is Qwen3-TTS only
QUANTIZE_MODES = ("int8", "int4")


def quantize_mode(quantize) -> str | None:
    """``quantize`` of :func:`load` → ``None``, ``"int8"`` or ``"int4"``.

    Raises InputError for anything else (naming the accepted values)."""
    if quantize is False or quantize is None:
        return None
    if quantize is True:
        return "int8"
    if isinstance(quantize, str) and quantize.strip().lower() in QUANTIZE_MODES:
        return quantize.strip().lower()
    raise InputError(f"unknown quantize {quantize!r}: use false, true (= int8), 'int8' or 'int4'",
                     param="quantize")


def is_qwen3(model_id: str) -> bool:
    """A Qwen3-TTS id, Hub repo id, or local folder whose config.json is Qwen3-TTS's."""
    from vocalis.models.qwen3.checkpoint import is_qwen3 as _is_qwen3

    return _is_qwen3(model_id)


def _load_qwen3(model_id, dev, threads, max_batch, max_queue, quantize, exact, dtype,
                full_state_decode, tuning=None):
    from vocalis.api_qwen3 import Qwen3TTS
    from vocalis.models.qwen3.model import load_model

    # Qwen3Model.quantize checks these too; here they fail before gigabytes of weights are read
    if quantize and dev.type != "cpu":
        raise InputError(f"{quantize} quantization runs on the CPU only: drop quantize or use cpu",
                         param="quantize")
    if quantize and dtype != "float32":
        raise InputError("quantize starts from float32 weights: drop quantize or use dtype float32",
                         param="quantize")
    if quantize and not exact:
        from vocalis.models.qwen3.tuning import check_quantized_spec

        check_quantized_spec(threads or torch.get_num_threads(), tuning)
    if quantize:
        from vocalis.models.qwen3.model import require_quantize_kernels

        require_quantize_kernels(quantize)  # InputError before any weight is read
    from vocalis.models.qwen3.checkpoint import resolve_checkpoint

    path, release = resolve_checkpoint(model_id)
    name = release.model_id if release is not None else path.name  # messages name the folder
    model = load_model(path, name, dtype=dtype, device=dev)
    if quantize:
        model.quantize(quantize)
        log.info("%s: talker and code predictor in %s", name, quantize)
    model.talker.trace()
    from vocalis.engine.tuning import parse_split
    from vocalis.models.qwen3.tuning import tune

    chosen = tune(model, threads or torch.get_num_threads(), max_batch, exact, tuning)
    tts = Qwen3TTS(model, model_id, release is not None, max_batch, max_queue, threads, exact,
                   full_state_decode, split=parse_split(chosen.choices["threads"]),
                   codec_frames=int(chosen.choices["codec_frames"]),
                   lend=chosen.choices["lend"] == "on")
    tts.tuning = chosen
    return tts


__all__ = ["Audio", "TTS", "Voice", "load", "ModelNotFound"]
