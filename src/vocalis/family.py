"""What a model family gives vocalis: the contract between the front ends and a family.

A family (Pocket TTS, Qwen3-TTS, or a plug-in) is one :class:`ModelFamily` object, found
by :mod:`vocalis.families` from a model id. It has two halves:

* the **front half**, here: which model ids it takes (:meth:`ModelFamily.claims`), what a
  model can do, read from its config without loading weights (:class:`ModelInfo`: voices,
  languages, instructions, cloning, sample rate), its request options
  (:attr:`ModelFamily.options`, an :class:`~vocalis.options.OptionSchema`: the only place a
  request option is validated), the checks of a request that need no weights
  (:meth:`ModelFamily.check`), loading (:meth:`ModelFamily.load` returns a
  :class:`LoadedModel`: voices and request preparation), and the model commands of the CLI
  (list, show, download, random checkpoints);
* the **back half**, the model math behind :class:`vocalis.engine.family.EngineFamily`
  (batched prompt passes, steps, decoding), which the engine runs.

Front ends (:mod:`vocalis.api`, the CLI, the server, Wyoming, bench, batch, Ray) speak to
these classes only; they never branch on a family. A new family is a package that
subclasses :class:`ModelFamily` and :class:`LoadedModel` and registers itself
(:func:`vocalis.families.register`, or the ``vocalis.families`` entry point).
"""

from __future__ import annotations

import os
import re
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vocalis.audio.stretch import check_speed
from vocalis.errors import InputError, VoiceError
from vocalis.options import Option, OptionSchema, check_seed, check_text


@dataclass
class ModelInfo:
    """What one model is and takes, known from its id and config (no weights read).

    ``name``: how messages name it (a config name, a release id or a folder name);
    ``served_name``: the id a server answers to for a released model (None: the server
    names a local checkpoint after its folder); ``kind``/``kind_title``: the family's model
    kind where it has several (``"voice_design"``/``"VoiceDesign"``); ``voices``: built-in
    voice names (predefined voices, speakers), ``default_voice`` the one used when a request
    names none; ``needs_voice`` False for a model without voices (described by
    ``instructions`` instead); ``cloning``: reference audio makes a voice,
    ``clone_transcript``: cloning takes the reference's transcript (optional);
    ``languages``: languages a request may choose with the option ``language_option``
    (empty: the model speaks ``language``); ``instructions``: OpenAI's ``instructions`` is
    used, as the option ``instructions_option``; ``local_path``: the local files behind the
    model (a server hides them in messages); ``sample_rate`` in Hz.
    """

    family: "ModelFamily"
    model_id: str
    name: str
    released: bool
    sample_rate: int
    served_name: str | None = None
    kind: str | None = None
    kind_title: str | None = None
    voices: tuple[str, ...] = ()
    default_voice: str | None = None
    voices_case_insensitive: bool = False
    needs_voice: bool = True
    cloning: bool = False
    clone_transcript: bool = False
    languages: tuple[str, ...] = ()
    language: str = "english"
    language_option: str | None = None
    instructions: bool = False
    instructions_option: str | None = None
    local_path: Path | None = None
    extra: dict = field(default_factory=dict)  # family facts for `models show` and /health

    @property
    def title(self) -> str:
        """``"Pocket TTS"``, ``"Qwen3-TTS CustomVoice"``: the family and kind in words."""
        return self.family.title + (f" {self.kind_title}" if self.kind_title else "")

    def canonical_voice(self, name: str) -> str:
        """A built-in voice's name as the model spells it (speakers are case-insensitive
        where ``voices_case_insensitive``); other names unchanged."""
        if self.voices_case_insensitive and name.lower() in self.voices:
            return name.lower()
        return name

    def check_request(self, text, voice=None, seed=None, speed=1.0,
                      options: dict | None = None) -> tuple[str, int | None, float, dict]:
        """Every check of a request to this model that needs no weights, in the order every
        front end runs them: ``speed``, ``seed``, the options against the family's schema,
        the text, then the family's own rules (:meth:`ModelFamily.check`: voices, which
        options go together). Returns ``(text, seed, speed, options)`` checked. ``text``
        None: a text that will be streamed in (checked as it comes; the family sees "").

        Raises InputError or VoiceError naming the problem (``param``)."""
        speed = check_speed(speed)
        seed = check_seed(seed)
        opts = self.family.options.check(dict(options or {}), self.name)
        text = "" if text is None else check_text(text, "input")
        opts = self.family.check(self, text, voice, opts)
        return text, seed, speed, opts

    def capabilities(self) -> dict:
        """What a request to this model may carry, as JSON (``/health``, the web page):
        ``family``, ``kind``, ``voices``, ``default_voice``, ``needs_voice``, ``cloning``,
        ``clone_transcript``, ``languages``, ``instructions``, ``options`` (the family's
        request options: name, type, accepted values, help)."""
        return {"family": self.family.name, "family_title": self.family.title,
                "model_type": self.kind, "kind_title": self.kind_title,
                "voices": list(self.voices), "default_voice": self.default_voice,
                "needs_voice": self.needs_voice, "cloning": self.cloning,
                "clone_transcript": self.clone_transcript, "languages": list(self.languages),
                "language": self.language, "language_option": self.language_option,
                "instructions": self.instructions,
                "options": [{"name": o.name, "type": o.type.__name__, "accepts": o.describe(),
                             "help": o.help} for o in self.family.options]}


@dataclass(frozen=True)
class LoadSettings:
    """How to load a model, checked by :func:`vocalis.api.load`: ``device`` (``cpu``,
    ``cuda``, ``cuda:N``), torch ``threads`` (None: torch's choice), ``max_batch`` rows per
    engine step, ``quantize`` (None or a mode the family lists in ``quantize_modes``),
    ``exact`` (PyTorch's default kernels: bit-identical to the official package), ``tuning``
    (speed choices: ``"auto"``, ``"fixed"`` or forced ones; None = ``$VOCALIS_TUNING``)."""

    device: Any
    threads: int | None = None
    max_batch: int = 16
    quantize: str | None = None
    exact: bool = False
    tuning: str | dict | None = None


@dataclass
class Prepared:
    """One checked request, ready for the engine: the family's per-request input
    (``state``: a voice state, a talker prompt...), its text chunks ``(prepared text, token
    ids, family extra)`` and its parameters (the family's own type)."""

    state: Any
    chunks: list
    params: Any


class TextFeed(ABC):
    """A request whose text arrives in pieces (a language model's output), for a model that
    takes its text as it comes (:meth:`LoadedModel.open_text`). The caller's thread pushes
    text; the request starts as soon as its first part is final, and its rows wait in the
    engine for text that has not come (``EngineFamily.row_ready``), so that its audio is
    that of the whole text given at once."""

    @abstractmethod
    def push(self, text: str) -> Prepared | None:
        """Add ``text``. Returns the request's engine input the first time it can start,
        else None (it has started, or needs more text first).

        Raises InputError (too much text, text after :meth:`close`)."""

    @abstractmethod
    def close(self) -> Prepared | None:
        """No more text. Returns the engine input when the request had not started yet
        (then it holds the whole text), else None.

        Raises InputError when the whole text has nothing to speak."""

    @property
    @abstractmethod
    def text(self) -> str:
        """The text pushed so far."""


class Voice:
    """A voice ready to use with one model: the family's voice state (a prefilled voice
    state, a voice-clone prompt, a speaker name) and where it came from (``name``)."""

    def __init__(self, state: Any, name: str, family: "ModelFamily | None" = None):
        self.state = state
        self.name = name
        self.family = family

    def save(self, path: str | Path) -> None:
        """Write the voice as a ``.safetensors`` file in its family's format (interchangeable
        with the official package's where it has one); ``tts.voice(path)`` reads it back.

        Raises:
            VoiceError: a voice that has nothing to save (a built-in speaker).
            InputError: a name that does not end in ``.safetensors`` (``tts.voice`` would
            take any other file for audio), a folder that does not exist, or a file that
            cannot be written there (``param="path"``)."""
        if self.family is None:
            raise VoiceError(f"voice {self.name!r} belongs to no model family: make it with "
                             "a loaded model (tts.voice)")
        if not isinstance(path, (str, os.PathLike)):
            raise InputError(f"the path to save voice {self.name!r} to must be a str or a path, "
                             f"got {type(path).__name__}", param="path")
        p = Path(path).expanduser()
        if p.suffix.lower() != ".safetensors":
            raise InputError(f"a voice file's name must end in .safetensors (tts.voice reads "
                             f"any other file as audio), got {str(path)!r}: save it as "
                             f"{str(p.with_name(p.name + '.safetensors'))!r}", param="path")
        if not p.parent.is_dir():
            raise InputError(f"cannot save voice {self.name!r} to {p}: the folder {p.parent} "
                             "does not exist; create it first", param="path")
        from safetensors import SafetensorError  # (with torch: not imported for the CLI's help)

        try:
            self.family.save_voice(self, p)
        except (OSError, SafetensorError) as e:
            # (safetensors names the temporary file it wrote first: not the user's path)
            why = getattr(e, "strerror", None) or re.sub(r' at path ".*"$', "",
                                                         " ".join(str(e).split()))
            raise InputError(f"cannot write voice {self.name!r} to {p} ({why}): choose a "
                             "writable path", param="path") from None

    def __repr__(self) -> str:
        return f"Voice({self.name!r})"


class LoadedModel(ABC):
    """A loaded model of one family: what :class:`vocalis.api.TTS` asks of it.

    ``info``: its :class:`ModelInfo`; ``model``: the family's model object (weights and
    math); ``engine_family``: its :class:`vocalis.engine.family.EngineFamily` (what the
    engine runs); ``exact``, ``quantize`` and ``tuning``: how it was loaded.
    """

    def __init__(self, info: ModelInfo, model: Any, engine_family, *, exact: bool = False,
                 quantize: str | None = None, tuning=None):
        self.info = info
        self.model = model
        self.engine_family = engine_family
        self.exact = exact
        self.quantize = quantize
        self.tuning = tuning
        self.lock = threading.Lock()  # one voice computation at a time beside the engine

    @property
    def family(self) -> "ModelFamily":
        return self.info.family

    @property
    def weights_fingerprint(self) -> str | None:
        """Identifies the weights a stored voice was made with (None: not tracked)."""
        return getattr(self.model, "weights_fingerprint", None)

    @abstractmethod
    def voice(self, src=None, **voice_options) -> Voice:
        """A voice of this model from ``src``: a built-in voice name, an audio file, a
        ``(samples, sample_rate)`` pair, a saved ``.safetensors`` voice, or a :class:`Voice`;
        ``voice_options`` are the schema's options marked ``voice`` (e.g. a transcript).

        Raises VoiceError (unknown name, unusable audio, a voice of another model) or
        InputError (a voice option that does not apply)."""

    def word_decoder(self):
        """The tokenizer's ``ids -> text`` for word timestamps (:mod:`vocalis.timing`) when
        the family's engine reads its text attention (``RowOut.scores``), else None."""
        return None

    def word_tokens(self, ids: list[int]) -> list[int]:
        """The text tokens of a prepared chunk's ``ids`` (what ``RowOut.scores`` covers, in
        order): all of them unless the family wraps the text in a template."""
        return list(ids)

    def warmup_request(self) -> tuple[str, dict] | None:
        """A short text and the options that keep it to a few frames, for
        :meth:`vocalis.api.TTS.warm_up` (None: the family gives none; the model cannot be
        warmed up)."""
        return None

    def fed_word_chunks(self, text: str) -> list[tuple[str, list[int]]]:
        """For a streamed text (:meth:`open_text`) now complete: its chunks as
        :class:`vocalis.timing.WordTimer` takes them, ``(text, text tokens)``, the tokens
        the model was fed. Families that take streamed text and give word timestamps
        define it."""
        raise NotImplementedError

    @abstractmethod
    def prepare(self, text: str, voice, options: dict, seed: int | None) -> Prepared:
        """One request checked against the loaded model (tokens, voice) and turned into
        the engine's input. ``options`` have passed the schema and :meth:`ModelFamily.check`.

        Raises InputError or VoiceError naming the problem."""

    def open_text(self, voice, options: dict, seed: int | None) -> TextFeed:
        """A request whose text will be pushed in pieces (:class:`TextFeed`); ``options``
        have passed the schema and :meth:`ModelFamily.check` (with an empty text).

        Raises InputError when this model (or these options) takes only whole texts; the
        default: every model of the family."""
        raise InputError(f"{self.info.name} takes whole texts only, not text streamed token "
                         "by token: send it sentence by sentence", param="input")

    def text_language(self, options: dict) -> str:
        """The language the request's text is in (for normalization)."""
        if self.info.language_option and options.get(self.info.language_option):
            return str(options[self.info.language_option])
        return self.info.language

    def clone(self, path: Path, transcript: str | None = None) -> Voice:
        """A voice from reference audio for a server (an upload, ``--voice`` of ``vocalis
        serve``), with its transcript where the family takes one."""
        return self.voice(str(path))

    def voice_record(self, voice: Voice, transcript: str | None = None) -> dict:
        """What a server stores beside a saved custom voice, so that it is offered only to
        the models it fits (:meth:`voice_fits`)."""
        return {"family": self.family.name, "model": self.info.name,
                "weights": self.weights_fingerprint}

    def voice_fits(self, record: dict) -> bool:
        """Whether a stored voice (its :meth:`voice_record`) fits this model."""
        return record.get("family") == self.family.name

    def describe_weights(self) -> dict:
        """How the model computes (``/health``, ``/v1/models``): ``quantize`` and ``exact``."""
        return {"quantize": self.quantize, "exact": self.exact}


class OfficialBench(ABC):
    """A family's official implementation as the other side of ``vocalis bench --against
    official``: same checkpoint, texts and seeds, one request at a time, in a process of its
    own. ``name``: e.g. ``"pocket-tts 4.0.1"``."""

    name: str = ""

    @abstractmethod
    def check(self, info: ModelInfo, voice, options: dict, quantize: bool) -> None:
        """Fail before anything runs when the official side cannot run this request (no
        official package or interpreter, a voice it cannot take). ``quantize``: its own
        quantized path. Raises InputError, VoiceError or HarnessError."""

    @abstractmethod
    def runs(self, info: ModelInfo, voice, options: dict, *, texts: list[str],
             seeds: list[int], frames: int | None, threads: int, device: str,
             quantize: bool, frame_samples: int, timeout_s: float) -> list[dict]:
        """Run the official package; one report part per configuration it ran (schema of
        :func:`vocalis.bench.benchmark.run_bench`: ``config``, ``matches_vocalis_threads``,
        ``warmup``, ``session``, ``per_request``...). Raises HarnessError."""


class ModelFamily(ABC):
    """One model family (see the module docstring). Subclasses set the class attributes
    and implement the abstract methods; the defaults of the others fit most families.

    ``name``: the family id (``"pocket-tts"``), also the id prefix of its released models;
    ``title``: how people call it (``"Pocket TTS"``); ``url``: its upstream project
    (attribution, with ``author``); ``checkpoint_hint``: what a local checkpoint of it looks
    like (messages); ``options``: its request options; ``load_options``: keywords of
    :func:`vocalis.load` only it takes (e.g. a compute dtype), ``random_options`` those of
    :meth:`write_random`; ``quantize_modes``: what ``quantize`` may name (first = ``True``).
    """

    name: str = ""
    title: str = ""
    url: str = ""
    author: str = ""
    checkpoint_hint: str = ""
    options: OptionSchema = OptionSchema("")
    load_options: OptionSchema = OptionSchema("")
    random_options: OptionSchema = OptionSchema("")
    quantize_modes: tuple[str, ...] = ()

    # ---------------------------------------------------------------- models

    @abstractmethod
    def claims(self, model_id: str) -> bool:
        """Whether ``model_id`` is one of this family's (an id, a repo id, a checkpoint's
        path). Cheap (reads one small file at most) and never raises."""

    @abstractmethod
    def model_ids(self) -> list[str]:
        """The released model ids, default first."""

    @abstractmethod
    def describe(self, model_id: str) -> ModelInfo:
        """The :class:`ModelInfo` of ``model_id`` from its config; no weights are read.

        Raises ModelNotFound: an unknown id (with the closest) or missing files."""

    @abstractmethod
    def load(self, info: ModelInfo, settings: LoadSettings, **load_options) -> LoadedModel:
        """Load weights (the hub's, at pinned revisions, or local files) and measure speed
        choices. ``load_options`` have passed :attr:`load_options`.

        Raises ModelNotFound, CheckpointError, InputError (a setting the model cannot take)."""

    def check(self, info: ModelInfo, text, voice, options: dict) -> dict:
        """Request checks that need no weights, after the schema and the common text checks
        (which options go together for this kind of model, voices that cannot exist, text
        with nothing to say): the one place of these rules, run by every front end before a
        model is loaded and again at submission.

        Returns the options (possibly completed). Raises InputError or VoiceError."""
        return options

    def save_voice(self, voice: Voice, path: Path) -> None:
        """Write ``voice`` to ``path`` (``.safetensors``). Raises VoiceError when it has
        nothing to save."""
        raise VoiceError(f"voice {voice.name!r} has nothing to save ({self.title} voices are "
                         "built in)")

    # ---------------------------------------------------------------- model commands

    def summary(self, model_id: str) -> str:
        """One line about a released model (``vocalis models list``)."""
        return ""

    def show(self, info: ModelInfo) -> list[tuple[str, str]]:
        """``(field, value)`` rows about a model (``vocalis models show``): what it is, its
        revision, sizes, and whether it is in the cache."""
        return [("model", info.name), ("family", self.title)]

    def config_text(self, info: ModelInfo) -> str:
        """The model's config in its official format (``vocalis models show --config``)."""
        raise InputError(f"{self.title} models have no config file to show")

    def download(self, info: ModelInfo, all_voices: bool = False) -> list[tuple[str, str]]:
        """Fetch what the model needs into the cache (``vocalis models download``);
        ``(what, local path)`` per file or folder."""
        raise InputError(f"{self.title} models have nothing to download")

    def random_configs(self) -> list[str]:
        """The configs :meth:`write_random` takes (``vocalis models random --config``)."""
        return []

    def random_config(self, config: str) -> str | None:
        """The config of :meth:`random_configs` that ``config`` names (case-insensitive; the
        family prefix may be left out), or None when it is not this family's."""
        configs = self.random_configs()
        known = {c.lower(): c for c in configs}
        c = config.strip().lower()
        if c == self.name and configs:  # the family's name alone: its default model
            return configs[0]
        return known.get(c) or known.get(f"{self.name}/{c}")

    # ---------------------------------------------------------------- benchmarks

    def bench_request(self, info: ModelInfo, voice, options: dict) -> tuple[object, dict]:
        """The voice and options ``vocalis bench`` runs with when the user gave ``voice``
        and ``options`` (e.g. a default description for a model that needs one). Default:
        as given."""
        return voice, options

    def official_bench(self) -> OfficialBench | None:
        """The official implementation to benchmark against, or None."""
        return None

    def is_random_checkpoint(self, folder: Path) -> bool:
        """Whether ``folder`` holds a random checkpoint :meth:`write_random` wrote (which
        ``--force`` may replace)."""
        return False

    def write_random(self, config: str, out: Path, seed: int, force: bool,
                     **random_options) -> tuple[Path, str | None]:
        """Write a random-weight checkpoint of ``config`` into ``out`` (official layout);
        returns what to print (the checkpoint) and a command that uses it (or None).

        Raises InputError: an unknown config, a folder that is taken, a bad seed."""
        raise InputError(f"{self.title} has no random checkpoints")

    # ---------------------------------------------------------------- helpers

    def option(self, name: str) -> Option | None:
        return self.options[name] if name in self.options else None

    def __repr__(self) -> str:
        return f"<model family {self.name}>"


__all__ = ["LoadSettings", "LoadedModel", "ModelFamily", "ModelInfo", "OfficialBench", "Prepared",
           "TextFeed", "Voice"]
