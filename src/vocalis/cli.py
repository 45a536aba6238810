"""The ``vocalis`` command line.

Commands::

    vocalis generate --text "Hello." -o hello.wav      speech to a file (.wav .mp3 .flac .ogg
                                                       .opus .aac .pcm) or -o - for stdout
    vocalis say --url ws://HOST:PORT/v1/audio/speech/stream   stdin lines spoken by a
                                                       running server as they are typed
    vocalis voices list | export AUDIO OUT.safetensors
    vocalis models list | show ID | download ID | random --config NAME --out DIR
    vocalis kernels build | status                    vocalis's C++ kernels, built once per machine
    vocalis reference ...                              the parity harness (vocalis.reference.cli)
    vocalis text normalize --language en "TEXT"        the text as normalization reads it

Every :class:`~vocalis.errors.VocalisError` and every usage error ends the command with
one line ``error: <message>`` on stderr and exit code 2; no tracebacks for user mistakes.
Logs (the ``vocalis`` logger only) go to stderr at INFO, WARNING with ``-q``.

A command imports its subsystem when it runs (``vocalis.api`` and its torch, the server's
FastAPI, Ray, the benchmark, the reference harness): the command line starts in a fraction
of a second, and every check that needs no model answers before any of them is imported.
"""

from __future__ import annotations

import inspect
import json
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Annotated

import typer

try:  # typer >= 0.2x ships its own copy of click
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover - older typer on top of click
    from click import exceptions as _cx

from vocalis import families, hub
from vocalis.audio.encode import FORMATS, SUFFIXES, make_encoder
from vocalis.engine.types import AudioChunk, Failed
from vocalis.errors import HarnessError, InputError, VocalisError
from vocalis.kernels.cli import app as kernels_app
from vocalis.options import (QUANTIZE_MODES, check_text, check_threads, seed_from_text,
                             text_from_file)
from vocalis.options import quantize_mode as mode_of
from vocalis.text.files import read_utf8
from vocalis.text.normalize import normalize

log = logging.getLogger("vocalis.cli")

EXIT_USER_ERROR = 2
MAX_RANDOM_SEED = 2**32 - 1  # random checkpoints: the tokenizer trainer takes a 32-bit seed
DEFAULT_OUTPUT = "./vocalis_output.wav"

_SETTINGS = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="vocalis",
    help="Fast and faithful local text-to-speech (Pocket TTS, Qwen3-TTS).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings=_SETTINGS,
)
voices_app = typer.Typer(help="Predefined voices and voice-state files.", no_args_is_help=True)
models_app = typer.Typer(help="Released model configs, downloads and random-weight checkpoints.",
                         no_args_is_help=True)
app.add_typer(voices_app, name="voices")
app.add_typer(models_app, name="models")
app.add_typer(kernels_app, name="kernels")

# ``--help`` fits 80 columns (tests/cli/test_cli.py checks every command): one or two lines of
# help per option, options grouped in panels, placeholders that say what a value is; the
# details are in docs/cli.md and the pages it links to.
TEXT_PANEL = "Text and voice"
OUTPUT_PANEL = "Output"
MODEL_PANEL = "Model and speed"
SERVER_PANEL = "Server"
MODELS_PANEL = "Models and voices"
REQUESTS_PANEL = "Requests and output"
BENCH_PANEL = "Benchmark"
OFFICIAL_PANEL = "Against the official package"
RAY_PANEL = "Ray (with --ray)"

MODEL_HELP = ("A model id (`vocalis models list`), a Hub repo id or a local checkpoint. "
              "Default: pocket-tts.")
MODEL_ARG_HELP = "A model id (`vocalis models list`), a Hub repo id or a local checkpoint."
VOICE_HELP = ("A built-in voice (`vocalis voices list`), an audio file to clone or a "
              ".safetensors voice. Default: the model's.")
NORMALIZE_HELP = ("Read numbers, dates, money, units and abbreviations as words first "
                  "(docs/normalization.md).")
QUIET_HELP = "Only warnings and errors on stderr: no progress bar, no summary."
DEVICE_HELP = "cpu, cuda or cuda:N."
THREADS_HELP = ("CPU threads for torch. Default: torch's choice (every core). On a machine where "
                "other work keeps cores busy, give no more than the free cores (see "
                "docs/limitations.md).")
QUANTIZE_HELP = ("int8 weights where the model's family offers them (CPU; faster, not "
                 "bit-identical).")
QUANTIZE_MODE_HELP = ("int8 (= --quantize) or int4 where the family offers it (Qwen3-TTS: "
                      "needs `vocalis kernels build`).")
EXACT_HELP = ("PyTorch's default kernels, no speed choices: bit-identical to the official "
              "package. Not with --quantize.")
VOICES_DIR_HELP = "Folder of custom voices. Default: $XDG_DATA_HOME/vocalis/voices."
RAY_ADDRESS_HELP = ("The cluster's head (its GCS port), or auto. Default: $RAY_ADDRESS, "
                    "else a private local Ray.")
RAY_CPUS_HELP = "Without --ray-address: CPUs of the local Ray instance. Default: all."
TUNING_HELP = ("Speed choices: auto (measured once, cached), fixed, or forced ones like "
               "threads=1:1; see docs/speed-choices.md. Default: $VOCALIS_TUNING, else auto.")


def _quantize(quantize: bool, quantize_mode: str | None) -> bool | str:
    """``--quantize`` and ``--quantize-mode`` as ``vocalis.load``'s ``quantize`` (the mode
    wins); InputError (exit 2) for an unknown mode, before anything loads."""
    if quantize_mode is None:
        return bool(quantize)
    mode = quantize_mode.strip().lower()
    if mode not in QUANTIZE_MODES:
        raise InputError(f"--quantize-mode must be {' or '.join(QUANTIZE_MODES)}, got {quantize_mode!r}")
    return mode


# --------------------------------------------------------------------------- family options

# A command decorated with @_family_options takes, besides its own parameters, the options
# every registered model family declares (vocalis.family.ModelFamily: options, load_options,
# random_options; "voice": the options marked voice), as command-line flags in one help panel
# per family. The values given arrive in the command's ``family`` parameter as a dict
# {kind: {name: value}}; each family's schema checks them (exit 2 naming the flag). The flags
# are rebuilt from the registry whenever the command line runs (main()), so a family
# registered at run time brings its flags along.

_FAMILY_COMMANDS: list = []
_KINDS = {"options": "options", "voice": "options", "load": "load_options",
          "random": "random_options"}


def _threads_flag(value: int | None) -> int | None:
    """``--threads``, checked as the flags are read (before torch is imported)."""
    return check_threads(value)


#: the model flags most commands share, declared once
ModelFlag = Annotated[str | None, typer.Option(
    "--model", "-m", metavar="MODEL", rich_help_panel=MODEL_PANEL, show_default=False,
    help=MODEL_HELP)]
DeviceFlag = Annotated[str, typer.Option(
    "--device", metavar="DEVICE", rich_help_panel=MODEL_PANEL, help=DEVICE_HELP)]
ThreadsFlag = Annotated[int | None, typer.Option(
    "--threads", callback=_threads_flag, metavar="N", rich_help_panel=MODEL_PANEL, show_default=False,
    help=THREADS_HELP)]


def _seed_value(value: str) -> int:
    """A ``--seed`` as the integer it spells: decimal digits with an optional sign (a
    negative one is refused later by the range check, in its words); not ``7.0``, ``1e3``
    or ``4_2``, which HTTP and the Python API refuse too.

    Raises typer.BadParameter (one line, exit 2)."""
    if isinstance(value, int) and not isinstance(value, bool):  # a default
        return value
    seed = seed_from_text(str(value))
    if seed is None:
        raise typer.BadParameter(f"{value!r} is not an integer: give digits, such as 42")
    return seed


def _flag_of(name: str) -> str:
    """The flag a family option name is given with, for messages (``--ref-text``); a name
    given as a flag already (``--text``) is that flag."""
    if str(name).startswith("-"):
        return str(name)
    for family in families.all_families():
        for kind in ("options", "load_options", "random_options"):
            schema = getattr(family, kind)
            if name in schema:
                return schema[name].cli_flag.split("/")[0]
    return "--" + str(name).replace("_", "-")


_OFF = "__off"  # the parameter of an on/off pair's off flag: NAME__off


def _metavar(opt) -> str:
    """The placeholder a family option's value is shown with in ``--help``: N (int), X
    (float), FILE (a path), TEXT (str), VALUE (anything else); none for a flag."""
    if opt.type is bool:
        return ""
    if opt.path:
        return "FILE"
    return {int: "N", float: "X", str: "TEXT"}.get(opt.type, "VALUE")


def _help_of(opt) -> str:
    return opt.help + (f" ({'|'.join(opt.choices)})" if opt.choices else "")


def _family_params(kinds: tuple[str, ...]) -> tuple[list[inspect.Parameter], dict[str, str],
                                                    dict[str, tuple[str, str]]]:
    """typer parameters for the family options of ``kinds``, {option name: kind}, and the
    on/off pairs {option name: (on flag, off flag)}.

    A flag pair (``--do-sample/--no-do-sample``) becomes two flags, one row each in
    ``--help`` (typer's column for the off flags would leave the help a narrow column); the
    off flag's parameter is ``NAME__off``."""
    entries: dict[str, list] = {}
    kind_of: dict[str, str] = {}
    for kind in kinds:
        for family in families.all_families():
            for opt in getattr(family, _KINDS[kind]):
                if kind == "voice" and not opt.voice:
                    continue
                if opt.name in kind_of and kind_of[opt.name] != kind:
                    continue  # the first kind that declares a name takes it
                kind_of[opt.name] = kind
                entries.setdefault(opt.name, []).append((family, opt))
    every = families.all_families()
    params: list[inspect.Parameter] = []
    pairs: dict[str, tuple[str, str]] = {}

    def add(name: str, flag: str, annotation, default, helptext: str, panel: str,
            metavar: str) -> None:
        info = typer.Option(flag, help=helptext, rich_help_panel=panel, show_default=False,
                            metavar=metavar)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=Annotated[annotation, info]))

    for name, items in entries.items():
        family, opt = items[0]
        titles = [f.title for f, _ in items]
        if len(items) == 1:
            helptext, panel = _help_of(opt), f"{family.title} options"
        else:  # one line per family
            helptext = "\n\n".join(f"{f.title}: {_help_of(o)}" for f, o in items)
            panel = ("Options of every model" if len(items) == len(every)
                     else f"{' and '.join(titles)} options")
        if opt.type is bool:
            on, _, off = opt.cli_flag.partition("/")
            add(name, on, bool, False, helptext, panel, "")
            if off:
                pairs[name] = (on, off)
                add(name + _OFF, off, bool, False, f"The opposite of {on}.", panel, "")
        else:
            annotation = (opt.type if opt.type in (int, float, str) else str) | None
            add(name, opt.cli_flag, annotation, None, helptext, panel, _metavar(opt))
    return params, kind_of, pairs


def _family_options(*kinds: str):
    """Decorator of a command function taking ``family: dict`` (see above)."""

    def decorate(fn):
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values()
               if p.name != "family"]

        def command(**kw):
            given = {k: {} for k in kinds}
            for name, kind in command.kind_of.items():
                value = kw.pop(name, None)
                if name in command.pairs:  # --on and --off, both flags
                    off = kw.pop(name + _OFF, False)
                    if value and off:
                        on_flag, off_flag = command.pairs[name]
                        raise InputError(f"give either {on_flag} or {off_flag}, not both")
                    value = True if value else (False if off else None)
                elif value is False:  # a flag left off was not given
                    value = None
                if value is not None:
                    given[kind][name] = value
            return fn(**kw, family=given)

        def refresh() -> None:
            extra, kind_of, pairs = _family_params(kinds)
            taken = {p.name for p in own}
            extra = [p for p in extra if p.name not in taken
                     and p.name.removesuffix(_OFF) not in taken]
            command.kind_of = {k: v for k, v in kind_of.items() if k not in taken}
            command.pairs = {k: v for k, v in pairs.items() if k not in taken}
            params = [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=p.default,
                                        annotation=p.annotation) for p in own] + extra
            command.__signature__ = inspect.Signature(params)
            command.__annotations__ = {p.name: p.annotation for p in params}

        command.__name__, command.__doc__ = fn.__name__, fn.__doc__
        command.__module__ = fn.__module__
        command.refresh = refresh
        refresh()
        _FAMILY_COMMANDS.append(command)
        return command

    return decorate


def _refresh_family_options() -> None:
    for command in _FAMILY_COMMANDS:
        command.refresh()


def _checked_options(info, given: dict) -> dict:
    """The request options given on the command line, checked by the model's family (an
    option of another family: exit 2 naming its flag and the model's options)."""
    schema = info.family.options
    unknown = [n for n in given if n not in schema]
    if unknown:
        raise schema.unknown(unknown[0], info.name, _flag_of)
    return schema.check(given, info.name)


def _load_options(info, given: dict) -> dict:
    """The load options given, checked by the model's family."""
    schema = info.family.load_options
    unknown = [n for n in given if n not in schema]
    if unknown:
        raise schema.unknown(unknown[0], info.name, _flag_of)
    return schema.check(given, info.name)


# --------------------------------------------------------------------------- logging


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at emit time (rich's progress display swaps it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ assigns it
        pass


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if record.exc_info and record.levelno >= logging.ERROR:
            msg += "\n" + self.formatException(record.exc_info)
        if record.levelno >= logging.WARNING:
            return f"{record.levelname.lower()}: {msg}"
        return msg


_handler: logging.Handler | None = None
_log_file: logging.Handler | None = None  # --log-file's handler: errors are written there too


def _setup_logging(quiet: bool = False) -> None:
    """Log the ``vocalis`` logger (only) to stderr: INFO, or WARNING when quiet."""
    global _handler
    logger = logging.getLogger("vocalis")
    if _handler is None:
        _handler = _StderrHandler()
        _handler.setFormatter(_Formatter())
        logger.addHandler(_handler)
        logger.propagate = False
    logger.setLevel(logging.WARNING if quiet else logging.INFO)


# --------------------------------------------------------------------------- helpers


def _version_callback(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("vocalis")
        except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
            v = "unknown"
        typer.echo(f"vocalis {v}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version_callback,
                                          is_eager=True, help="Print the version and exit.")]
    = False,
) -> None:
    """Fast and faithful local text-to-speech (Pocket TTS, Qwen3-TTS)."""


def _read_text(text: str | None, text_file: str | None) -> str:
    """The text of ``--text`` / ``--text-file`` (``-``: stdin). A file's (and stdin's) final
    line break is not part of the text (:func:`vocalis.options.text_from_file`)."""
    if text is not None and text_file is not None:
        raise InputError("give either --text or --text-file, not both")
    if text is None and text_file is None:
        raise InputError("no text given: use --text TEXT, --text - (stdin) or --text-file FILE")
    if text is not None and text != "-":
        return check_text(text, "--text", "--text", "use a UTF-8 terminal (e.g. LANG=C.UTF-8) "
                          "or put the text in a UTF-8 file for --text-file")
    if text == "-" or text_file == "-":
        if sys.stdin.isatty():
            log.info("reading text from stdin (end with Ctrl-D)")
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"text on stdin is not UTF-8: {e}") from None
    else:
        text = read_utf8(text_file, "text file")
    return check_text(text_from_file(text), "input", "the text")


def _check_output(output: str, fmt: str | None) -> str:
    """Check the output target; returns its format (``--format``, else from the suffix)."""
    if fmt is not None:  # a file extension names its format too: ogg = opus, raw = pcm
        fmt = SUFFIXES.get("." + fmt.lower(), fmt.lower())
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown --format {fmt!r}: use one of {', '.join(FORMATS)}")
    if output == "-":
        if sys.stdout.isatty():
            raise InputError("refusing to write audio bytes to a terminal: redirect stdout "
                             "(-o - > out.wav, -o - | player) or use -o FILE")
        return fmt or "wav"
    if not output.strip():
        raise InputError("-o is empty: give a file name such as out.wav, or - for stdout")
    path = Path(output).expanduser()
    if path.is_dir():
        raise InputError(f"output {path} is a directory: give a file name such as {path}/out.wav")
    by_suffix = SUFFIXES.get(path.suffix.lower())
    if fmt is None and by_suffix is None:
        raise InputError(f"cannot tell the audio format of {path.name!r} from its extension: "
                         f"name it {', '.join(SUFFIXES)}, or give --format")
    if fmt is not None and by_suffix is not None and fmt != by_suffix:
        raise InputError(f"--format {fmt} does not match the extension of {path.name!r} "
                         f"({by_suffix}): change one of them")
    if not path.parent.is_dir():
        raise InputError(f"output folder does not exist: {path.parent}")
    return fmt or by_suffix


def _progress(total_chunks: int, quiet: bool):
    """A rich progress bar over text chunks on stderr, or None."""
    if quiet or total_chunks <= 1:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        return None
    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TextColumn("chunks"), TimeElapsedColumn(),
                    console=console, transient=True)


# --------------------------------------------------------------------------- generate


@app.command(context_settings=_SETTINGS)
@_family_options("options", "load")
def generate(
    text: Annotated[str | None, typer.Option(
        "--text", "-t", metavar="TEXT", rich_help_panel=TEXT_PANEL, show_default=False,
        help="Text to speak; - reads it from stdin.")] = None,
    text_file: Annotated[str | None, typer.Option(
        "--text-file", "-f", metavar="FILE", rich_help_panel=TEXT_PANEL, show_default=False,
        help="Read the text from this UTF-8 file (- = stdin).")] = None,
    voice: Annotated[str | None, typer.Option(
        "--voice", "-v", metavar="VOICE", rich_help_panel=TEXT_PANEL, show_default=False,
        help=VOICE_HELP)] = None,
    normalize: Annotated[bool, typer.Option(
        "--normalize", rich_help_panel=TEXT_PANEL, help=NORMALIZE_HELP + " Not with --exact.")]
    = False,
    speed: Annotated[float, typer.Option(
        metavar="X", rich_help_panel=TEXT_PANEL,
        help="0.25-4.0: faster (>1) or slower (<1), pitch kept.")] = 1.0,
    seed: Annotated[int | None, typer.Option(
        parser=_seed_value, metavar="N", rich_help_panel=TEXT_PANEL, show_default=False,
        help="Same seed, same audio. Default: random.")] = None,
    output: Annotated[str, typer.Option(
        "--output", "-o", metavar="FILE", rich_help_panel=OUTPUT_PANEL,
        help="Audio file, written as audio comes; its extension gives the format; - = "
             "stdout.")] = DEFAULT_OUTPUT,
    fmt: Annotated[str | None, typer.Option(
        "--format", metavar="FORMAT", rich_help_panel=OUTPUT_PANEL, show_default=False,
        help="wav, mp3, opus (ogg), flac, aac or pcm. Default: from the -o extension.")] = None,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", rich_help_panel=OUTPUT_PANEL,
        help=QUIET_HELP[:-1] + " (the summary names the seed drawn when --seed is not "
             "given: with -q, give --seed to be able to make the same audio again).")] = False,
    words_file: Annotated[str | None, typer.Option(
        "--words", metavar="FILE", rich_help_panel=OUTPUT_PANEL, show_default=False,
        help="Also write every word's start and end (seconds) as JSON to this file (word "
             "timestamps, from the model's attention).")] = None,
    model: ModelFlag = None,
    device: DeviceFlag = "cpu",
    threads: ThreadsFlag = None,
    quantize: Annotated[bool, typer.Option(
        "--quantize", rich_help_panel=MODEL_PANEL, help=QUANTIZE_HELP)] = False,
    quantize_mode: Annotated[str | None, typer.Option(
        "--quantize-mode", metavar="MODE", rich_help_panel=MODEL_PANEL, show_default=False,
        help=QUANTIZE_MODE_HELP)] = None,
    exact: Annotated[bool, typer.Option(
        "--exact", rich_help_panel=MODEL_PANEL, help=EXACT_HELP)] = False,
    tuning: Annotated[str | None, typer.Option(
        metavar="SPEC", rich_help_panel=MODEL_PANEL, show_default=False,
        help=TUNING_HELP)] = None,
    family: dict | None = None,
) -> None:
    """Speak text into an audio file (or stdout)."""
    _setup_logging(quiet)
    family = family or {}
    text = _read_text(text, text_file)
    fmt = _check_output(output, fmt)
    if words_file is not None and not Path(words_file).expanduser().parent.is_dir():
        raise InputError(f"cannot write {words_file}: its folder does not exist (create it, or "
                         "give another --words path)")
    # Every check that needs no weights runs before anything is loaded: the model id, the
    # options (each family's schema), the text and the voice (a missing file fails here).
    info = families.describe(model or families.default_model_id())
    options = _checked_options(info, family.get("options", {}))
    text, seed, speed, options = info.check_request(text, voice, seed, speed, options)
    load_options = _load_options(info, family.get("load", {}))
    mode = _quantize(quantize, quantize_mode)
    if exact and mode:
        raise InputError("--exact and --quantize together: --exact runs the official package's "
                         "float32 arithmetic, --quantize changes it; give one of them")
    # torch and the model code are imported only now, after the checks that need neither
    from vocalis import api

    try:
        if sys.stderr.isatty():  # someone waits at a terminal: say what takes the time
            log.info("loading %s (%s)", info.name, info.title)
        # One request runs on one engine row (its text chunks follow each other), so the
        # model is loaded, and its speed choices measured, for one row, not for a server's.
        tts = api.load(info.model_id, device=device, threads=threads, max_batch=1, quantize=mode,
                       exact=exact, tuning=tuning, **load_options)
        # a voice cloned from audio is made first and timed apart: TTFA and x real time
        # measure the speech, as with a voice that is ready (a name, a .safetensors file)
        voice, options, cloned = _clone_first(tts, voice, options)
        t0 = time.perf_counter()
        # submit() checks the voice and the text against the model before anything is
        # queued, so a mistake never leaves an empty or truncated file behind.
        req = tts.submit(text, voice, seed, speed, normalize,
                         word_timestamps=words_file is not None, **options)
    except KeyboardInterrupt:
        _error("interrupted before any audio: nothing was written")
        raise typer.Exit(130) from None
    n_chunks = req.n_chunks
    words: list = []

    to_stdout = output == "-"
    try:
        # A file gets its exact lengths at the end (the encoder seeks back: WAV sizes, FLAC
        # STREAMINFO, MP3 Xing/LAME tag); stdout gets the streaming headers.
        file = None if to_stdout else open(Path(output).expanduser(), "wb")  # noqa: SIM115
        writer = make_encoder(fmt, tts.sample_rate, target=file)
    except OSError as e:
        req.cancel()
        raise InputError(f"cannot write {output}: {e.strerror or e}") from None
    words_out = None
    if words_file is not None:  # opened now: a path that cannot take it fails before the audio
        try:
            words_out = open(Path(words_file).expanduser(), "w", encoding="utf-8")  # noqa: SIM115
        except OSError as e:
            req.cancel()
            if file is not None:
                file.close()
            raise InputError(f"cannot write {words_file}: {e.strerror or e}") from None
    progress = _progress(n_chunks, quiet)
    ttfa_ms: float | None = None
    write_error: OSError | None = None
    n_samples = 0
    interrupted = False

    def out(data: bytes) -> None:
        if to_stdout and data:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()

    ctrl_c = _CtrlC(req)
    try:
        out(writer.begin())
        task = None
        if progress is not None:
            progress.start()
            task = progress.add_task("speaking", total=n_chunks)
        chunk = 0
        for ev in req.events():
            if ctrl_c.fired:
                break
            words += getattr(ev, "words", None) or []
            if isinstance(ev, AudioChunk):
                out(writer.write(ev.samples))
                n_samples += ev.samples.shape[0]
                if ttfa_ms is None:
                    ttfa_ms = (time.perf_counter() - t0) * 1000
                if progress is not None and ev.chunk > chunk:
                    progress.advance(task, ev.chunk - chunk)
                    chunk = ev.chunk
            elif isinstance(ev, Failed):
                raise ev.error
        if progress is not None:
            progress.advance(task, n_chunks - chunk)
    except KeyboardInterrupt:
        interrupted = True
    except OSError as e:  # disk full, broken device...: a problem of the output, not ours
        if isinstance(e, BrokenPipeError):  # click would turn it into exit 1
            raise ReaderGone from None
        write_error = e
    finally:
        ctrl_c.restore()
        interrupted = interrupted or ctrl_c.fired
        req.cancel()
        if progress is not None:
            progress.stop()
        try:
            out(writer.end())  # also when interrupted: a partial file still gets true lengths
        except OSError as e:
            write_error = write_error or e
        finally:
            try:  # closing flushes what is buffered: a full disk can show only now
                writer.close()
                if file is not None:
                    file.close()
            except OSError as e:
                write_error = write_error or e
            finally:
                tts.close()
    if write_error is not None:
        if words_out is not None:
            words_out.close()
        raise InputError(f"cannot write {'stdout' if to_stdout else output}: "
                         f"{write_error.strerror or write_error}")
    if words_out is not None:  # (interrupted: the words that ended by then)
        try:
            with words_out:
                words_out.write(json.dumps([w.as_dict() for w in words], ensure_ascii=False,
                                           indent=1) + "\n")
        except OSError as e:
            raise InputError(f"cannot write {words_file}: {e.strerror or e}") from None
    duration_s = n_samples / tts.sample_rate
    if interrupted:
        _interrupted(output, to_stdout, duration_s)
    wall_s = time.perf_counter() - t0
    x_rt = duration_s / wall_s if wall_s > 0 else float("inf")
    where = "stdout" if to_stdout else str(output)
    first = "no audio (the request ended before its first frame)" if ttfa_ms is None \
        else f"TTFA {ttfa_ms:.0f} ms"
    if cloned is not None:
        source, clone_s = cloned
        first += (f"; before that, the voice was cloned from {source} in {clone_s:.2f} s "
                  "(`vocalis voices export` saves it for reuse)")
    if seed is None:  # drawn for this run: said, so that the audio can be made again
        first += f"; seed {req.stats.seed} (--seed {req.stats.seed} makes the same audio)"
    log.info("%s: %.2f s of audio in %.2f s (%.1fx real time), %s", where, duration_s, wall_s,
             x_rt, first)


def _clone_first(tts, voice, options: dict) -> tuple[object, dict, tuple[str, float] | None]:
    """When this run clones its voice from audio (a file or URL given as ``--voice``, or in
    the family's option that carries the voice as audio, e.g. ``--ref-audio``): the voice
    cloned now, the options left for the request (without those that made the voice) and
    ``(the audio's name, seconds it took)``; else ``(voice, options, None)`` unchanged."""
    schema = tts.family.options
    carrier = next((o.name for o in schema if o.openai == "voice" and o.path
                    and options.get(o.name) is not None), None)
    src = options[carrier] if carrier else voice
    if not tts.info.cloning or not isinstance(src, (str, Path)):
        return voice, options, None
    ref = str(src)
    if hub.is_safetensors_ref(ref) or not ("://" in ref or Path(ref).expanduser().is_file()):
        return voice, options, None  # a saved voice, or a name
    made_with = {o.name: options[o.name] for o in schema
                 if o.voice and options.get(o.name) is not None}
    t = time.perf_counter()
    made = tts.voice(ref, **made_with)
    took = time.perf_counter() - t
    rest = {k: v for k, v in options.items() if k not in made_with and k != carrier}
    return made, rest, (ref if "://" in ref else Path(ref).name, took)


class _CtrlC:
    """While generating, Ctrl-C (SIGINT) cancels the request and sets ``fired`` instead of
    raising ``KeyboardInterrupt`` wherever the main thread happens to be: raised inside the
    encoder's file-writing callback (PyAV's ``pyio_write``), it would be printed and
    ignored, and generation would run to the end. Only in the main thread (where Python
    delivers signals); elsewhere it does nothing."""

    def __init__(self, req):
        self.fired = False
        self._old = None
        if threading.current_thread() is threading.main_thread():
            def handler(signum, frame):
                self.fired = True
                req.cancel()
            self._old = signal.signal(signal.SIGINT, handler)

    def restore(self) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
            self._old = None


def _interrupted(output: str, to_stdout: bool, duration_s: float) -> None:
    """Ctrl-C during generate: one line saying what was left, exit 130."""
    if to_stdout:
        what = f"the audio on stdout is partial ({duration_s:.2f} s)"
    elif duration_s > 0:
        what = f"{output} is partial: it holds the first {duration_s:.2f} s, playable"
    else:
        Path(output).expanduser().unlink(missing_ok=True)
        what = f"no audio yet, so {output} was not written"
    _error(f"interrupted: {what}")
    raise typer.Exit(130)


# --------------------------------------------------------------------------- voices


@voices_app.command("list", context_settings=_SETTINGS)
def voices_list(
    model: Annotated[str | None, typer.Option("--model", "-m", metavar="MODEL", help=MODEL_HELP,
                                              show_default=False)] = None,
) -> None:
    """List the built-in voices of a model, one per line, the default marked.

    Predefined voices or speakers; for a model without them, how it takes its voice."""
    _setup_logging()
    info = families.describe(model or families.default_model_id())
    if not info.voices:
        if not info.needs_voice:
            how = "it has no voices: describe one with --instruct"
        elif info.cloning and info.clone_transcript:
            how = ("clone a voice from reference audio (--ref-audio FILE with --ref-text or "
                   "--xvector-only)")
        elif info.cloning:
            how = ("give an audio file to clone (--voice AUDIO_FILE) or a .safetensors voice "
                   "made by `vocalis voices export`")
            if not info.released:
                how = f"it is not a released model, so it has no predefined voices: {how}"
        else:
            how = "it has no built-in voices"
        typer.echo(f"none: {info.name} ({info.title}): {how}")
        return
    for v in info.voices:
        typer.echo(f"{v} (default)" if v == info.default_voice else v)


@voices_app.command("export", context_settings=_SETTINGS)
@_family_options("voice")
def voices_export(
    audio: Annotated[str, typer.Argument(
        metavar="AUDIO", show_default=False,
        help="Audio file to clone (any format soundfile reads), a voice name or a .safetensors "
             "voice.")],
    out: Annotated[str, typer.Argument(metavar="OUT", help="The .safetensors voice file to write.",
                                       show_default=False)],
    model: Annotated[str | None, typer.Option("--model", "-m", metavar="MODEL", help=MODEL_HELP,
                                              show_default=False)] = None,
    device: Annotated[str, typer.Option("--device", metavar="DEVICE", help=DEVICE_HELP)] = "cpu",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    family: dict | None = None,
) -> None:
    """Turn an audio prompt into a voice file for fast reuse with --voice.

    The file is in the format of the model's family (interchangeable with the official
    package's where it has one)."""
    _setup_logging(quiet)
    out_path = Path(out).expanduser()
    if out_path.suffix.lower() != ".safetensors":
        raise InputError(f"voice file name must end in .safetensors, got {out}")
    if not out_path.parent.is_dir():
        raise InputError(f"output folder does not exist: {out_path.parent}")
    info = families.describe(model or families.default_model_id())
    voice_options = (family or {}).get("voice", {})
    voice_schema = info.family.options.subset(o.name for o in info.family.options if o.voice)
    for name in voice_options:
        if name not in voice_schema:
            raise voice_schema.unknown(name, info.name, _flag_of)
    from vocalis import api  # torch, after the checks that need none

    # Exporting runs no generation: the default kernels (exact) measure no speed choices and
    # give the official package's voice state bit for bit.
    tts = api.load(info.model_id, device=device, max_batch=1, exact=True)
    voice = tts.voice(audio, **voice_options)
    try:
        voice.save(out_path)
    except OSError as e:
        raise InputError(f"cannot write {out_path}: {e.strerror or e}") from None
    log.info("wrote %s (voice %s, model %s)", out_path, voice.name, tts.config_name)


# --------------------------------------------------------------------------- models


@models_app.command("list", context_settings=_SETTINGS)
def models_list() -> None:
    """List every released model id with its shape."""
    rows = [(m, f.summary(m)) for f in families.all_families() for m in f.model_ids()]
    width = max(len(m) for m, _ in rows)
    for model_id, summary in rows:
        typer.echo(f"{model_id:<{width}}  {summary}".rstrip())


@models_app.command("show", context_settings=_SETTINGS)
def models_show(
    model_id: Annotated[str, typer.Argument(metavar="MODEL", help=MODEL_ARG_HELP,
                                            show_default=False)],
    config: Annotated[bool, typer.Option(
        "--config", help="Print the model's config in its official format instead.")] = False,
) -> None:
    """What a model is: its family, kind, languages, voices and sizes.

    Also its pinned revision and whether its files are in the cache."""
    _setup_logging()
    info = families.describe(model_id)
    if config:
        typer.echo(info.family.config_text(info), nl=False)
        return
    rows = info.family.show(info)
    width = max(len(k) for k, _ in rows) + 1
    for key, value in rows:
        typer.echo(f"{key + ':':<{width}} {value}")


@models_app.command("download", context_settings=_SETTINGS)
def models_download(
    model_id: Annotated[str, typer.Argument(metavar="MODEL", help=MODEL_ARG_HELP,
                                            show_default=False)],
    all_voices: Annotated[bool, typer.Option(
        "--all-voices", help="Also fetch every predefined voice, not only the default one "
                             "(models whose voices are files).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
) -> None:
    """Fetch weights, tokenizer and voices into the Hugging Face cache for offline use.

    Prints one line per file or folder: what it is and its local path. Later runs with
    HF_HUB_OFFLINE=1 use these files."""
    _setup_logging(quiet)
    info = families.describe(model_id)
    if quiet:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    for what, path in info.family.download(info, all_voices):
        typer.echo(f"{what}: {path}")


@models_app.command("random", context_settings=_SETTINGS)
@_family_options("random")
def models_random(
    config: Annotated[str, typer.Option(
        metavar="NAME", show_default=False,
        help="Released model id to copy the shapes from (e.g. pocket-tts/english, "
             "english_2m_2026-10, qwen3-tts/0.6b-customvoice).")],
    out: Annotated[str, typer.Option(metavar="DIR", show_default=False,
                                     help="Folder to write the checkpoint into: new or empty "
                                          "(see --force).")],
    seed: Annotated[int, typer.Option(parser=_seed_value, metavar="N",
                                      help="Seed of the random weights and tokenizer "
                                           "(0 to 4294967295).")] = 0,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace the checkpoint already in --out (and everything in that "
                        "folder); other non-empty folders are always refused.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    family: dict | None = None,
) -> None:
    """Write a random-weight checkpoint (official layout) for tests and offline use.

    Prints where it is, then a ready-to-run generate command."""
    _setup_logging(quiet)
    if not 0 <= seed <= MAX_RANDOM_SEED:
        raise InputError(f"--seed must be in [0, {MAX_RANDOM_SEED}], got {seed}")
    out_dir = Path(out).expanduser()
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir} exists and is not a folder")
    owner = families.random_family(config)
    given = (family or {}).get("random", {})
    schema = owner.random_options
    for name in given:
        if name not in schema:
            raise schema.unknown(name, f"config {config}", _flag_of)
    try:
        where, command = owner.write_random(config, out_dir, seed, force,
                                            families.is_random_checkpoint, **given)
    except OSError as e:
        raise InputError(f"cannot write the checkpoint into {out}: {e.strerror or e}") from None
    typer.echo(str(where))
    if command:
        typer.echo(command)


# --------------------------------------------------------------------------- batch, bench


def _log_to_file(log_file: str | None, quiet: bool) -> None:
    """Also log the ``vocalis`` logger, with timestamps, to ``log_file`` (INFO and up)."""
    if log_file is None:
        return
    path = Path(log_file).expanduser()
    if path.is_dir():
        raise InputError(f"--log-file {path} is a directory: give a file name")
    if not path.parent.is_dir():
        raise InputError(f"--log-file folder does not exist: {path.parent}")
    try:
        handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot open --log-file {path}: {e.strerror or e}") from None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    logger = logging.getLogger("vocalis")
    global _log_file
    if _log_file is not None:  # an earlier command of this process (tests): its file closes
        logger.removeHandler(_log_file)
        _log_file.close()
    _log_file = handler
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    if quiet and _handler is not None:
        _handler.setLevel(logging.WARNING)


@app.command(context_settings=_SETTINGS)
def batch(
    requests: Annotated[str, typer.Option(
        "--requests", "-r", metavar="FILE", rich_help_panel=REQUESTS_PANEL, show_default=False,
        help='JSON array of requests: [{"text": ..., "voice": ..., "options": {...}}, ...]; '
             'see docs/batch-and-ray.md.')],
    out_dir: Annotated[str, typer.Option(
        "--out-dir", metavar="DIR", rich_help_panel=REQUESTS_PANEL, show_default=False,
        help="Folder for NNNN.wav per request and report.json (created if missing).")],
    batch_size: Annotated[int | None, typer.Option(
        "--batch-size", "-b", metavar="N", rich_help_panel=REQUESTS_PANEL, show_default=False,
        help="Requests in flight in the engine at once (1-256). Default: 16.")] = None,
    sequential: Annotated[bool, typer.Option(
        "--sequential", rich_help_panel=REQUESTS_PANEL,
        help="One request at a time (= --batch-size 1).")] = False,
    mode: Annotated[str, typer.Option(
        "--mode", metavar="MODE", rich_help_panel=REQUESTS_PANEL,
        help="oneshot, or streaming: also check that each request's audio events add up to "
             "its WAV.")] = "oneshot",
    normalize: Annotated[bool, typer.Option(
        "--normalize", rich_help_panel=REQUESTS_PANEL, help=NORMALIZE_HELP)] = False,
    session_options: Annotated[str | None, typer.Option(
        "--session-options", metavar="JSON", rich_help_panel=REQUESTS_PANEL,
        show_default=False,
        help="JSON object of load settings and default request options (docs/batch-and-ray.md)"
             ".")] = None,
    log_file: Annotated[str | None, typer.Option(
        "--log-file", metavar="FILE", show_default=False,
        help="Also write the log, with timestamps, to this file.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    model: ModelFlag = None,
    device: DeviceFlag = "cpu",
    threads: ThreadsFlag = None,
    ray: Annotated[bool, typer.Option(
        "--ray", rich_help_panel=RAY_PANEL,
        help="Run on a Ray Data actor pool: resumable, a manifest instead of report.json "
             "(pip install 'vocalis\\[ray]').")] = False,
    ray_address: Annotated[str | None, typer.Option(
        metavar="HOST:PORT", rich_help_panel=RAY_PANEL, show_default=False,
        help=RAY_ADDRESS_HELP)] = None,
    actors: Annotated[int, typer.Option(
        metavar="N", rich_help_panel=RAY_PANEL,
        help="Actors in the pool (one model and engine each).")] = 1,
    actor_cpus: Annotated[float, typer.Option(
        metavar="X", rich_help_panel=RAY_PANEL, help="CPUs reserved per actor.")] = 1.0,
    actor_gpus: Annotated[float, typer.Option(
        metavar="X", rich_help_panel=RAY_PANEL,
        help="GPUs per actor (with --device cuda).")] = 0.0,
    manifest: Annotated[str, typer.Option(
        metavar="FORMAT", rich_help_panel=RAY_PANEL,
        help="Manifest format: jsonl or parquet.")] = "jsonl",
    ray_cpus: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=RAY_PANEL, show_default=False, help=RAY_CPUS_HELP)] = None,
) -> None:
    """Run a file of requests: a warm-up pass, a measured pass, WAVs and a report.

    One engine session (or, with --ray, a Ray Data actor pool: WAVs and a manifest).
    Everything is checked before anything runs (with --ray: row by row, bad rows are
    recorded). Prints the report's (manifest's) path. Exit 0 when every request
    succeeded, 1 when some failed (the others still complete; see the report), 2 for
    bad input. See docs/batch-and-ray.md.
    """
    _setup_logging(quiet)
    _log_to_file(log_file, quiet)
    model = model or families.default_model_id()
    if ray:
        _batch_ray(model, requests, out_dir, batch_size=batch_size, sequential=sequential,
                   mode=mode, threads=threads, device=device, session_options=session_options,
                   normalize=normalize, ray_address=ray_address, actors=actors,
                   actor_cpus=actor_cpus, actor_gpus=actor_gpus, manifest=manifest,
                   ray_cpus=ray_cpus, quiet=quiet)
        return
    ray_only = {"--ray-address": ray_address, "--actors": actors if actors != 1 else None,
                "--actor-cpus": actor_cpus if actor_cpus != 1.0 else None,
                "--actor-gpus": actor_gpus or None,
                "--manifest": manifest if manifest != "jsonl" else None, "--ray-cpus": ray_cpus}
    given = [k for k, v in ray_only.items() if v is not None]
    if given:
        raise InputError(f"{', '.join(given)}: option(s) of --ray; add --ray to run on Ray Data")
    from vocalis.bench.batch import REPORT_NAME, run_batch

    report, rc = run_batch(model, requests, out_dir, batch_size=batch_size,
                           sequential=sequential, mode=mode, threads=threads, device=device,
                           session_options=session_options, normalize=normalize)
    s = report["session"]
    ttfa = (s.get("ttfa_ms") or {}).get("mean")
    log.info("measured pass: %d/%d request(s) ok, %.2f s of audio in %.2f s (%s x real time), "
             "mean TTFA %s ms, peak RSS %.0f MB, up to %d in flight",
             s["ok"], s["ok"] + s["failed"], s["audio_s"] or 0.0, (s["wall_ms"] or 0) / 1000,
             f"{s['x_real_time']:.2f}" if s["x_real_time"] else "-",
             f"{ttfa:.0f}" if ttfa is not None else "-", s["peak_rss_mb"] or 0,
             report["in_flight"])
    if report["streaming"] is not None:
        st = report["streaming"]
        log.info("streaming check: %d/%d request(s) equal to their WAV", st["equal"], st["checked"])
    path = Path(out_dir).expanduser() / REPORT_NAME
    typer.echo(str(path))
    if rc:
        problems = [f"request {f['index']}: {f['error']}" for f in report["failures"]]
        if not report["after"]["ok"]:
            problems.append(f"after-run request: {report['after']['error']}")
        if report["streaming"] is not None and not report["streaming"]["all_equal"]:
            problems.append("streamed events differ from the WAV files")
        _error(f"{len(report['failures'])} of {s['ok'] + s['failed']} request(s) failed; "
               + "; ".join(problems[:3]) + (" ..." if len(problems) > 3 else "")
               + f" (see {path})")
        raise typer.Exit(rc)


def _batch_ray(model: str, requests: str, out_dir: str, *, batch_size: int | None,
               sequential: bool, mode: str, quiet: bool, ray_address: str | None,
               **kw) -> None:
    """``vocalis batch --ray``: the requests through a Ray Data actor pool."""
    from vocalis.ray import require_ray

    require_ray("--ray")
    if mode != "oneshot":
        raise InputError(f"--mode {mode} is not available with --ray (each request is written "
                         "whole; use vocalis batch without --ray for the streaming check)")
    from vocalis.bench.batch import check_batch_size
    from vocalis.ray.data import run_batch_ray

    size = check_batch_size(batch_size, sequential)
    summary, rc = run_batch_ray(model, requests, out_dir, address=ray_address, batch_size=size,
                                progress=not quiet, **kw)
    x = summary["x_real_time"]
    log.info("%d request(s): %d written, %d skipped (done before), %d failed; %.2f s of audio "
             "in %.2f s (%s x real time)", summary["requests"], summary["written"],
             summary["skipped"], summary["failed"], summary["audio_s"], summary["wall_s"],
             f"{x:.2f}" if x else "-")
    typer.echo(summary["manifest"])
    if rc:
        shown_failures = "; ".join(f["error"] for f in summary["failures"][:3])
        more = " ..." if summary["failed"] > 3 else ""
        _error(f"{summary['failed']} of {summary['requests']} request(s) failed: "
               f"{shown_failures}{more} (see {summary['manifest']})")
        raise typer.Exit(rc)


@app.command(context_settings=_SETTINGS)
@_family_options("options", "load")
def bench(
    text: Annotated[list[str], typer.Option(
        "--text", "-t", metavar="TEXT", rich_help_panel=BENCH_PANEL, show_default=False,
        help="A benchmark text of 80+ characters; give at least two distinct ones.")],
    voice: Annotated[str | None, typer.Option(
        "--voice", "-v", metavar="VOICE", rich_help_panel=BENCH_PANEL, show_default=False,
        help="A built-in voice, an audio file or a .safetensors voice. Default: the model's.")]
    = None,
    concurrency: Annotated[int, typer.Option(
        "--concurrency", "-c", metavar="N", rich_help_panel=BENCH_PANEL,
        help="Requests in flight at once (1-256).")] = 1,
    requests: Annotated[int | None, typer.Option(
        "--requests", "-n", metavar="N", rich_help_panel=BENCH_PANEL, show_default=False,
        help="Requests per pass (text i mod texts, seed SEED+i). Default: max(texts, "
             "concurrency).")] = None,
    frames: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=BENCH_PANEL, show_default=False,
        help="Frames per text chunk, end of speech ignored (random-weight checkpoints).")]
    = None,
    seed: Annotated[int, typer.Option(
        parser=_seed_value, metavar="N", rich_help_panel=BENCH_PANEL,
        help="Seed of request 0 (request i gets SEED+i).")] = 0,
    json_out: Annotated[str | None, typer.Option(
        "--json", metavar="FILE", rich_help_panel=BENCH_PANEL, show_default=False,
        help="Write the full report (schema vocalis.bench) to this JSON file.")] = None,
    model: ModelFlag = None,
    device: DeviceFlag = "cpu",
    threads: Annotated[int | None, typer.Option(
        callback=_threads_flag,
        metavar="N", rich_help_panel=MODEL_PANEL, show_default=False,
        help="CPU threads for torch (with --against, the official package's too). Default: "
             "torch's choice.")] = None,
    quantize: Annotated[bool, typer.Option(
        "--quantize", rich_help_panel=MODEL_PANEL, help=QUANTIZE_HELP)] = False,
    quantize_mode: Annotated[str | None, typer.Option(
        "--quantize-mode", metavar="MODE", rich_help_panel=MODEL_PANEL, show_default=False,
        help=QUANTIZE_MODE_HELP)] = None,
    tuning: Annotated[str | None, typer.Option(
        metavar="SPEC", rich_help_panel=MODEL_PANEL, show_default=False,
        help=TUNING_HELP)] = None,
    session_options: Annotated[str | None, typer.Option(
        "--session-options", metavar="JSON", rich_help_panel=MODEL_PANEL, show_default=False,
        help='Engine settings: {"max_batch": N, "max_queue": N}. Default: max_batch = '
             'concurrency.')] = None,
    against: Annotated[str | None, typer.Option(
        "--against", metavar="official", rich_help_panel=OFFICIAL_PANEL, show_default=False,
        help="Also run the family's official package on the same checkpoint, texts, seeds "
             "and options, and print ratios (docs/performance.md).")] = None,
    official_quantize: Annotated[bool, typer.Option(
        "--official-quantize", rich_help_panel=OFFICIAL_PANEL,
        help="Load the official model with its own int8 path (pocket-tts quantize=True).")]
    = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    family: dict | None = None,
) -> None:
    """Benchmark a model: TTFA, x real time, throughput and peak RSS.

    One excluded pass, then one measured pass at a concurrency; optionally against the
    official package. Prints the CPU, its ISA flags, the thread count and the speed
    choices the model runs with. Every request option of the model's family is a flag
    (e.g. --temperature, --speaker, --instruct). See docs/performance.md."""
    _setup_logging(quiet)
    family = family or {}
    import json

    from vocalis.bench.batch import LOAD_KEYS, parse_session_options
    from vocalis.bench.benchmark import check_texts, render_table, run_bench

    check_texts(text)
    # Every check that needs no weights runs before anything is loaded: the model id, its
    # family's options (a flag of another family: exit 2 naming it), then run_bench checks
    # each request (ModelInfo.check_request) and what the official side can run.
    info = families.describe(model or families.default_model_id())
    options = _checked_options(info, family.get("options", {}))
    load_options = _load_options(info, family.get("load", {}))
    engine_kw, extra = parse_session_options(session_options, info)
    if extra or any(k not in LOAD_KEYS for k in engine_kw):
        given = sorted(set(extra) | {k for k in engine_kw if k not in LOAD_KEYS})
        raise InputError(f"--session-options for bench takes only {', '.join(LOAD_KEYS)}; give "
                         f"request and load options as flags (--frames for fixed lengths; got "
                         f"{', '.join(given)})")
    if quantize or quantize_mode is not None:
        flag = _quantize(quantize, quantize_mode)
        if "quantize" in engine_kw and mode_of(engine_kw["quantize"]) != mode_of(flag):
            raise InputError(f"--session-options quantize {engine_kw['quantize']!r} contradicts "
                             f"--quantize/--quantize-mode ({flag!r}): give one of them")
        engine_kw["quantize"] = flag
    if tuning is not None:
        engine_kw["tuning"] = tuning
    if against is not None and against != "official":
        raise InputError(f"--against {against!r}: only 'official' is supported")
    json_path = None
    if json_out is not None:
        json_path = Path(json_out).expanduser()
        if json_path.is_dir() or not json_path.parent.is_dir():
            raise InputError(f"--json {json_path}: not a file in an existing folder")
    report = run_bench(info.model_id, text, voice, device=device, threads=threads,
                       concurrency=concurrency, frames=frames, requests=requests, seed=seed,
                       against=against, official_quantize=official_quantize,
                       session_options=engine_kw, options=options, load_options=load_options)
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=120)
    console.print(render_table(report))
    if json_path is not None:
        json_path.write_text(json.dumps(report, indent=2) + "\n")
        log.info("wrote %s", json_path)
    failed = report["vocalis"]["session"]["failed"]
    if failed:
        errors = [r["error"] for r in report["vocalis"]["per_request"] if not r["ok"]]
        _error(f"{failed} benchmark request(s) failed: {errors[0]}")
        raise typer.Exit(1)


# --------------------------------------------------------------------------- serve


@app.command(context_settings=_SETTINGS)
@_family_options("load")
def serve(
    model: Annotated[list[str] | None, typer.Option(
        "--model", "-m", metavar="MODEL", rich_help_panel=MODELS_PANEL, show_default=False,
        help="A model id, Hub repo id or local checkpoint; repeat it to serve several "
             "(docs/multi-model.md). Default: pocket-tts.")] = None,
    model_name: Annotated[list[str] | None, typer.Option(
        metavar="NAME", rich_help_panel=MODELS_PANEL, show_default=False,
        help="The id clients see, once per --model in order. Default: the model id (a local "
             "checkpoint: its folder's name).")] = None,
    voice: Annotated[str | None, typer.Option(
        "--voice", "-v", metavar="VOICE", rich_help_panel=MODELS_PANEL, show_default=False,
        help="Default voice of the first --model (also for OpenAI's voice names). Default: "
             "the model's.")] = None,
    voices_dir: Annotated[str | None, typer.Option(
        metavar="DIR", rich_help_panel=MODELS_PANEL, show_default=False,
        help=VOICES_DIR_HELP + " Created if missing.")] = None,
    host: Annotated[str, typer.Option(
        "--host", metavar="HOST", rich_help_panel=SERVER_PANEL,
        help="Address to listen on (0.0.0.0: every interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(
        metavar="N", rich_help_panel=SERVER_PANEL, help="TCP port; 0 picks a free one.")] = 8000,
    api_key: Annotated[str | None, typer.Option(
        envvar="VOCALIS_API_KEY", metavar="KEY", rich_help_panel=SERVER_PANEL,
        show_default=False, show_envvar=False,
        help="Require `Authorization: Bearer KEY` on /v1/* and /metrics (also "
             "$VOCALIS_API_KEY).")] = None,
    max_batch: Annotated[int, typer.Option(
        metavar="N", rich_help_panel=SERVER_PANEL,
        help="Requests generated together (engine rows).")] = 16,
    max_queue: Annotated[int, typer.Option(
        metavar="N", rich_help_panel=SERVER_PANEL,
        help="Requests waiting for a row; more get HTTP 429.")] = 256,
    max_input_chars: Annotated[int, typer.Option(
        metavar="N", rich_help_panel=SERVER_PANEL,
        help="Longest input accepted (OpenAI: 4096).")] = 4096,
    shutdown_timeout: Annotated[float, typer.Option(
        metavar="SECONDS", rich_help_panel=SERVER_PANEL,
        help="Time streams get to finish on SIGINT/SIGTERM before they are cancelled.")]
    = 10.0,
    no_normalize: Annotated[bool, typer.Option(
        "--no-normalize", rich_help_panel=SERVER_PANEL,
        help="Speak numbers, dates... as written when a request has no `normalize` field "
             "(default: as words, docs/normalization.md).")] = False,
    normalize: Annotated[bool, typer.Option("--normalize", hidden=True)] = False,
    warmup: Annotated[int, typer.Option(
        "--warmup", metavar="ROWS", rich_help_panel=SERVER_PANEL,
        help="Before accepting connections, run two bursts of ROWS short requests per model "
             "(up to --max-batch), so that the first clients' audio has no start-up gaps "
             "(voice agents: the number of connections you expect). 0: none.")] = 0,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Warnings and errors only (no access log).")] = False,
    device: DeviceFlag = "cpu",
    threads: ThreadsFlag = None,
    quantize: Annotated[bool, typer.Option(
        "--quantize", rich_help_panel=MODEL_PANEL, help=QUANTIZE_HELP)] = False,
    quantize_mode: Annotated[str | None, typer.Option(
        "--quantize-mode", metavar="MODE", rich_help_panel=MODEL_PANEL, show_default=False,
        help=QUANTIZE_MODE_HELP)] = None,
    ray: Annotated[bool, typer.Option(
        "--ray", rich_help_panel=RAY_PANEL,
        help="Serve on Ray Serve replicas (pip install 'vocalis\\[ray]'); see "
             "docs/batch-and-ray.md.")] = False,
    ray_address: Annotated[str | None, typer.Option(
        metavar="HOST:PORT", rich_help_panel=RAY_PANEL, show_default=False,
        help=RAY_ADDRESS_HELP)] = None,
    replicas: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=RAY_PANEL, show_default=False,
        help="Number of replicas. Default: 1.")] = None,
    autoscale: Annotated[str | None, typer.Option(
        metavar="MIN-MAX[:TARGET]", rich_help_panel=RAY_PANEL, show_default=False,
        help="Instead of --replicas: MIN to MAX replicas, TARGET requests each (default 2).")]
    = None,
    replica_cpus: Annotated[float, typer.Option(
        metavar="X", rich_help_panel=RAY_PANEL,
        help="CPUs reserved per replica (fractions allowed).")] = 1.0,
    replica_gpus: Annotated[float, typer.Option(
        metavar="X", rich_help_panel=RAY_PANEL,
        help="GPUs per replica (with --device cuda).")] = 0.0,
    ray_cpus: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=RAY_PANEL, show_default=False, help=RAY_CPUS_HELP)] = None,
    family: dict | None = None,
) -> None:
    """Serve the OpenAI speech API, voices, metrics and a web page.

    FastAPI and uvicorn, or Ray Serve replicas with --ray. See docs/server.md."""
    _setup_logging(quiet)
    normalize = not no_normalize  # --normalize: the default, still accepted
    models = model or [families.default_model_id()]
    load_options = _load_options_for(models, (family or {}).get("load", {}))
    if ray and warmup:
        raise InputError("--warmup is not available with --ray (replicas do not warm up): "
                         "drop --warmup")
    if ray:
        _serve_ray(models, host=host, port=port, voices_dir=voices_dir, api_key=api_key,
                   max_batch=max_batch, max_queue=max_queue, device=device, threads=threads,
                   voice=voice, max_input_chars=max_input_chars, shutdown_timeout=shutdown_timeout,
                   model_name=model_name, normalize=normalize, ray_address=ray_address,
                   replicas=replicas, autoscale=autoscale, replica_cpus=replica_cpus,
                   replica_gpus=replica_gpus, ray_cpus=ray_cpus,
                   quantize=_quantize(quantize, quantize_mode), load_options=load_options)
        return
    ray_only = {"--ray-address": ray_address,
                "--replicas": replicas, "--autoscale": autoscale,
                "--replica-cpus": replica_cpus if replica_cpus != 1.0 else None,
                "--replica-gpus": replica_gpus or None, "--ray-cpus": ray_cpus}
    given = [k for k, v in ray_only.items() if v is not None]
    if given:
        raise InputError(f"{', '.join(given)}: option(s) of --ray; add --ray to serve on Ray")
    if not 0 <= port <= 65535:
        raise InputError(f"--port must be in 0..65535 (0 picks a free port), got {port}")
    from vocalis.server import run

    def ready(url: str, served: list[str]) -> None:  # always shown: with --port 0 it is the
        # only way to know; the ids clients use (/v1/models), not the --model arguments
        typer.echo(f"vocalis: serving {', '.join(served)} at {url}", err=True)

    run(models, host=host, port=port, voices_dir=voices_dir, api_key=api_key,
        max_batch=max_batch, max_queue=max_queue, device=device, threads=threads, voice=voice,
        max_input_chars=max_input_chars, shutdown_timeout=shutdown_timeout, quiet=quiet,
        model_name=model_name or None, on_ready=ready, normalize=normalize,
        quantize=_quantize(quantize, quantize_mode), load_options=load_options, warmup=warmup)


def _load_options_for(models: list[str], given: dict) -> list[dict]:
    """Per model, the load options of ``given`` its family takes. Each model is described
    first (an unknown id fails here, before anything loads); an option no served model's
    family takes is refused (exit 2 naming its flag)."""
    infos = [families.describe(m) for m in models]
    for name in given:
        if not any(name in i.family.load_options for i in infos):
            raise infos[0].family.load_options.unknown(name, infos[0].name, _flag_of)
    return [i.family.load_options.check({k: v for k, v in given.items() if k in i.family.load_options},
                                        i.name) for i in infos]


def _serve_ray(models: list[str], *, ray_address: str | None, replicas: int | None,
               autoscale: str | None, load_options: list[dict] | None = None, **kw) -> None:
    """``vocalis serve --ray``: the same app on Ray Serve replicas; ``load_options``: the
    family load options of each model (one dict per model), given to every replica's
    ``vocalis.load``."""
    from vocalis.ray import require_ray

    require_ray("--ray")
    if replicas is not None and autoscale is not None:
        raise InputError("give either --replicas N or --autoscale MIN-MAX, not both")
    from vocalis.ray.serve import run as run_on_ray

    def ready(url: str) -> None:
        how = f"autoscaling {autoscale}" if autoscale else f"{replicas or 1} replica(s)"
        typer.echo(f"vocalis: serving {', '.join(models)} on Ray Serve ({how}) at {url}",
                   err=True)

    run_on_ray(models, address=ray_address,
               replicas=None if autoscale else (1 if replicas is None else replicas),
               autoscale=autoscale, on_ready=ready, load_options=load_options, **kw)


# --------------------------------------------------------------------------- text

text_app = typer.Typer(help="Text tools: normalization.", no_args_is_help=True)
app.add_typer(text_app, name="text")


@text_app.command("normalize", context_settings=_SETTINGS)
def text_normalize(
    text: Annotated[str, typer.Argument(metavar="TEXT", show_default=False,
                                        help="Text to normalize; - reads it from stdin.")],
    language: Annotated[str, typer.Option(
        "--language", "-l", metavar="LANG",
        help="en, fr, de, es, it, pt, ru, ja, ko (or the names: english...), or auto "
             "(English; other scripts left as written).")] = "en",
) -> None:
    """Print TEXT with numbers, dates, money, units and abbreviations as words.

    What `--normalize` and `vocalis serve` send to the model; see docs/normalization.md."""
    if text == "-":
        text = text_from_file(sys.stdin.read())  # the final line break ends the input
    typer.echo(normalize(text, language))


# --------------------------------------------------------------------------- wyoming


@app.command(context_settings=_SETTINGS)
@_family_options("load")
def wyoming(
    model: Annotated[str | None, typer.Option(
        "--model", "-m", metavar="MODEL", rich_help_panel=MODELS_PANEL, show_default=False,
        help=MODEL_HELP)] = None,
    voice: Annotated[str | None, typer.Option(
        "--voice", "-v", metavar="VOICE", rich_help_panel=MODELS_PANEL, show_default=False,
        help="The `default` voice: a built-in voice, an audio file or a .safetensors voice. "
             "Default: the model's.")] = None,
    voices_dir: Annotated[str | None, typer.Option(
        metavar="DIR", rich_help_panel=MODELS_PANEL, show_default=False,
        help=VOICES_DIR_HELP)] = None,
    uri: Annotated[str, typer.Option(
        "--uri", metavar="URI", rich_help_panel=SERVER_PANEL,
        help="Where to listen: tcp://HOST:PORT (0.0.0.0: every interface) or unix://PATH.")]
    = "tcp://127.0.0.1:10200",
    max_batch: Annotated[int, typer.Option(
        metavar="N", rich_help_panel=SERVER_PANEL,
        help="Requests generated together (engine rows), shared by all clients.")] = 16,
    max_input_chars: Annotated[int, typer.Option(
        metavar="N", rich_help_panel=SERVER_PANEL,
        help="Longest text per synthesize or synthesize-chunk event.")] = 4096,
    seed: Annotated[int | None, typer.Option(
        parser=_seed_value, metavar="N", rich_help_panel=SERVER_PANEL, show_default=False,
        help="Seed of every request (reproducible audio). Default: random.")] = None,
    no_normalize: Annotated[bool, typer.Option(
        "--no-normalize", rich_help_panel=SERVER_PANEL,
        help="Speak numbers, dates... as written (default: as words in the voice's language, "
             "as `vocalis serve`).")] = False,
    normalize: Annotated[bool, typer.Option("--normalize", hidden=True)] = False,
    device: DeviceFlag = "cpu",
    threads: ThreadsFlag = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Warnings and errors only.")]
    = False,
    family: dict | None = None,
) -> None:
    """Serve a model to Home Assistant over the Wyoming protocol (no zeroconf).

    See docs/wyoming.md."""
    _setup_logging(quiet)
    normalize = not no_normalize  # --normalize: the default, still accepted
    model = model or families.default_model_id()
    [load_options] = _load_options_for([model], (family or {}).get("load", {}))
    from vocalis.wyoming import run as run_wyoming

    def ready(where: str) -> None:
        typer.echo(f"vocalis: Wyoming server for {model} at {where}", err=True)

    run_wyoming(model, uri, voice=voice, voices_dir=voices_dir, max_batch=max_batch,
                threads=threads, seed=seed, device=device, max_input_chars=max_input_chars,
                on_ready=ready, normalize=normalize, load_options=load_options)


@app.command(context_settings=_SETTINGS)
def say(
    url: Annotated[str, typer.Option(
        "--url", metavar="URL", rich_help_panel=SERVER_PANEL,
        help="The running server's WebSocket endpoint, or its base URL (http://HOST:PORT).")]
    = "ws://127.0.0.1:8000/v1/audio/speech/stream",
    text: Annotated[str | None, typer.Option(
        "--text", "-t", metavar="TEXT", rich_help_panel=TEXT_PANEL, show_default=False,
        help="Text to speak. Default: the lines of stdin, each sent as it is typed.")] = None,
    voice: Annotated[str | None, typer.Option(
        "--voice", "-v", metavar="VOICE", rich_help_panel=TEXT_PANEL, show_default=False,
        help="A voice the server offers (GET /v1/audio/voices). Default: the server's.")]
    = None,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", metavar="MODEL", rich_help_panel=TEXT_PANEL, show_default=False,
        help="A model the server serves. Default: its first.")] = None,
    seed: Annotated[int | None, typer.Option(
        "--seed", parser=_seed_value, metavar="N", rich_help_panel=TEXT_PANEL,
        show_default=False,
        help="Seed of every sentence (reproducible audio). Default: random.")] = None,
    output: Annotated[str, typer.Option(
        "--output", "-o", metavar="FILE", rich_help_panel=OUTPUT_PANEL,
        help="A .wav file, or - for raw 16-bit mono PCM on stdout.")] = DEFAULT_OUTPUT,
    api_key: Annotated[str | None, typer.Option(
        "--api-key", metavar="KEY", rich_help_panel=SERVER_PANEL, show_default=False,
        envvar="VOCALIS_API_KEY", help="The server's --api-key (or $VOCALIS_API_KEY).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Warnings and errors only.")]
    = False,
) -> None:
    """Speak text through a running `vocalis serve` as it is written: each line goes to the
    server's WebSocket endpoint at once, each sentence is spoken as soon as it is complete.

    See docs/server.md (Streaming text in)."""
    _setup_logging(quiet)
    if output != "-" and not output.lower().endswith(".wav"):
        raise InputError(f"-o {output!r}: give a .wav file, or - for raw 16-bit PCM on stdout",
                         param="output")
    _check_output(output, "wav")  # a folder that exists, no terminal for raw bytes
    if text is not None:
        check_text(text, "text")
    import asyncio

    from vocalis.client import SpeechStream, StreamError
    config = {k: v for k, v in {"voice": voice, "model": model, "seed": seed}.items()
              if v is not None}
    sink = _PCMSink(output)
    refused: list = []  # sentences the server did not speak (it spoke the rest)
    seeds: list = []  # each sentence's seed (audio.start's; None: refused)
    sent_all: list = []  # [True] once every piece of text and the end went out

    async def run() -> None:
        async with SpeechStream(url, api_key=api_key, **config) as s:
            lines: asyncio.Queue = asyncio.Queue()
            loop = asyncio.get_running_loop()
            if text is not None:
                lines.put_nowait(text)
                lines.put_nowait(None)
            else:  # a daemon thread: a blocked read never holds the command at exit
                def read() -> None:
                    try:
                        for line in sys.stdin:
                            loop.call_soon_threadsafe(lines.put_nowait, line)
                        loop.call_soon_threadsafe(lines.put_nowait, None)
                    except RuntimeError:  # the loop closed (Ctrl-C): nobody reads any more
                        return
                threading.Thread(target=read, daemon=True, name="vocalis-say-stdin").start()

            async def feed() -> None:
                while (line := await lines.get()) is not None:
                    await s.send_text(line)
                await s.flush()
                sent_all.append(True)

            feeder = asyncio.create_task(feed())
            try:
                await s.collect(on_audio=lambda data: sink.write(data, s.sample_rate),
                                on_error=refused.append)
            finally:
                feeder.cancel()
                seeds.extend(s.seeds)  # None: a sentence refused (said above)
            if not any(e.code == "server_shutting_down" for e in refused):
                await s.close()  # (a server shutting down closes by itself)

    interrupted = False
    try:
        asyncio.run(run())
    except KeyboardInterrupt:  # Ctrl-C: asyncio.run cancelled run(), the connection is gone
        interrupted = True
    finally:
        sink.close()
    if interrupted:  # one line, exit 130, as generate (docs/cli.md)
        duration_s = sink.samples / (sink.rate or 24000)
        if output == "-":
            what = f"the audio on stdout is partial ({duration_s:.2f} s)"
        elif sink.samples:
            what = f"{output} is partial: it holds the first {duration_s:.2f} s, playable"
        else:
            what = f"no audio yet, so {output} was not written"
        _error(f"interrupted: {what}")
        raise typer.Exit(130)
    shut = [e for e in refused if e.code == "server_shutting_down"]
    refused = [e for e in refused if e not in shut]
    if shut and not sent_all:  # it spoke what it had: that audio is kept, exit 1
        duration_s = sink.samples / (sink.rate or 24000)
        got = (f"{duration_s:.2f} s of audio " + ("on stdout" if output == "-" else
                                                  f"in {output}")
               if sink.samples else f"no audio, so {output} was not written")
        raise StreamError(f"the server shut down before the text ended: it spoke what it had "
                          f"received ({got}); the rest was not sent: run again against a "
                          "server that is up", shut[0].code, http_status=503)
    if sink.samples == 0 and refused:  # the server's reason is the error: one line, exit 2
        last = refused.pop()
        for e in refused:
            typer.echo(f"vocalis: not spoken: {e}", err=True)
        raise StreamError(str(last), last.code, param="text" if text is not None else None)
    for e in refused:
        typer.echo(f"vocalis: not spoken: {e}", err=True)
    if sink.samples == 0:
        raise InputError("nothing was spoken: the server sent no audio for the text (is it "
                         "empty?): give some words to speak")
    if not quiet:  # on stderr, so also with -o - (as generate's summary)
        where = "on stdout" if output == "-" else f"in {output}"
        said = f"vocalis: {sink.samples / (sink.rate or 1):.2f} s of audio {where}"
        # seeds drawn (no --seed) are said, so that the audio can be made again
        if seed is None and len(seeds) == 1 and seeds[0] is not None:
            said += f"; seed {seeds[0]} (--seed {seeds[0]} makes the same audio)"
        elif seed is None and any(x is not None for x in seeds):
            shown_seeds = ", ".join("none" if x is None else str(x) for x in seeds)
            said += (f"; seeds by sentence {shown_seeds} (a sentence said again with --seed "
                     "and its seed sounds the same)")
        typer.echo(said, err=True)


class _PCMSink:
    """16-bit mono PCM to a WAV file (opened at the first audio, when the rate is known) or
    to stdout (``-``)."""

    def __init__(self, output: str):
        self.output = output
        self.rate: int | None = None
        self.samples = 0
        self._wav = None

    def write(self, data: bytes, rate: int | None) -> None:
        self.samples += len(data) // 2
        if self.rate is None:  # the first audio's (the summary's seconds, the WAV header)
            self.rate = rate or 24000
        if self.output == "-":
            try:
                sys.stdout.buffer.write(data)
                sys.stdout.buffer.flush()
            except BrokenPipeError:  # `vocalis say -o - | head -c 10`: exit 141, as generate
                raise ReaderGone from None
            return
        if self._wav is None:
            import wave

            self._wav = wave.open(self.output, "wb")
            self._wav.setnchannels(1)
            self._wav.setsampwidth(2)
            self._wav.setframerate(self.rate)
        self._wav.writeframes(data)

    def close(self) -> None:
        if self._wav is not None:
            self._wav.close()


# --------------------------------------------------------------------------- reference


@app.command(
    "reference",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
    help="Parity harness against the official packages: export, replay, compare "
         "(`vocalis reference --help`; docs/faithful.md).",
)
def reference(ctx: typer.Context) -> None:
    # Forwards to vocalis.reference.cli:app, imported only when used (it needs the official
    # package); says so in one line when it is missing.
    try:
        from vocalis.reference import cli as reference_cli
    except ImportError as e:
        missing = getattr(e, "name", None) or ""
        if missing.startswith("pocket_tts"):
            raise HarnessError("the reference harness needs the official package: "
                               "pip install -e '.[reference]' (pocket-tts==4.0.1)") from None
        raise HarnessError(f"the reference harness is not available in this build ({e})") from None
    command = typer.main.get_command(reference_cli.app)
    _tidy_help(command)
    rv = command.main(args=list(ctx.args), prog_name="vocalis reference", standalone_mode=False)
    if isinstance(rv, int) and rv:
        raise typer.Exit(rv)


# --------------------------------------------------------------------------- entry point


class _Never(Exception):
    pass


_NoArgsIsHelp = getattr(_cx, "NoArgsIsHelpError", _Never)


#: the flags of the request fields every command spells the same way
_COMMON_FLAGS = {"voice": "--voice", "input": "--text", "seed": "--seed", "speed": "--speed",
                 "model": "--model", "quantize": "--quantize-mode", "device": "--device",
                 "threads": "--threads", "normalize": "--normalize"}


def _voice_options() -> list[str]:
    """The family options that carry the voice in place of ``--voice`` (their schema's
    ``openai="voice"``: e.g. Qwen3-TTS CustomVoice ``--speaker``): a family reports a bad
    voice as ``param="voice"`` whichever of them carried it."""
    return [o.name for family in families.all_families() for o in family.options
            if o.openai == "voice"]


def _gave(argv: list[str], *flags: str) -> bool:
    """Whether the command line ``argv`` holds one of ``flags`` (``--flag``,
    ``--flag=VALUE``, ``-f``, ``-fVALUE``), before a ``--``."""
    for arg in argv:
        if arg == "--":
            return False
        for flag in flags:
            if arg == flag or arg.startswith(flag + "=" if flag.startswith("--") else flag):
                return True
    return False


def _with_flag(message: str, param: str | None, argv: list[str] | None = None) -> str:
    """A library message in the command line's words: the flag of the parameter at fault
    is added when the message does not name it (``... (--voice)``). A voice the user gave
    with another flag than ``--voice`` (``--speaker``; ``argv``: the command line) is named
    by that flag."""
    if not param:
        return message
    flag = _COMMON_FLAGS.get(param) or _flag_of(param)
    if param == "voice" and argv is not None and not _gave(argv, "--voice", "-v"):
        given = [f for f in map(_flag_of, _voice_options()) if _gave(argv, f)]
        if given:
            flag = given[0]
    return message if flag in message else f"{message} ({flag})"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _error(message: str, more: list[str] | tuple[str, ...] = ()) -> None:
    """``error: MESSAGE`` on stderr, one line, then each line of ``more`` (an error's list of
    problems) indented on its own line; also into ``--log-file`` when one is open."""
    lines = [_one_line(message), *map(_one_line, more)]
    try:
        sys.stderr.write(f"error: {lines[0]}\n" + "".join(f"  {ln}\n" for ln in lines[1:]))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    if _log_file is not None:
        for ln in lines:
            _log_file.handle(logging.LogRecord("vocalis.cli", logging.ERROR, __file__, 0, "%s",
                                               (ln,), None))


class ReaderGone(Exception):
    """The reader of ``-o -`` closed the pipe (not an ``OSError``: click turns those into
    exit 1)."""


def _tidy_help(command, parent=None) -> None:
    """The help of ``command`` and its sub-commands as it should print: no type where the
    name says it all (typer shows ``<bool>`` for a flag, ``--help`` included, unless its
    metavar is empty, and ``<str>`` for an argument, whose name is its metavar), and each
    paragraph of a command's help one line, for the terminal to wrap (typer keeps a
    docstring's line breaks, which at 80 columns leaves a ragged edge)."""
    ctx = typer.Context(command, parent=parent, info_name=command.name,
                        **(command.context_settings or {}))
    for param in command.get_params(ctx):  # with the help option
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
        elif param.param_type_name == "argument" and param.metavar:
            param.display_type_rich = lambda ctx: None
    if command.help:
        command.help = "\n\n".join(p if p.startswith("\b") else " ".join(p.split())
                                    for p in inspect.cleandoc(command.help).split("\n\n"))
    for sub in getattr(command, "commands", {}).values():
        _tidy_help(sub, ctx)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 user error, 1 other failure, 130 Ctrl-C,
    141 the reader of ``-o -`` went away)."""
    _setup_logging()
    _refresh_family_options()  # the flags of every family registered by now
    command = typer.main.get_command(app)
    _tidy_help(command)
    try:
        rv = command.main(args=argv, prog_name="vocalis", standalone_mode=False)
    except _NoArgsIsHelp as e:
        help_text = e.format_message()
        if help_text:
            typer.echo(help_text)
        return 0
    except _cx.UsageError as e:
        hint = f" (see `{e.ctx.command_path} --help`)" if e.ctx is not None else ""
        _error(e.format_message() + hint)
        return EXIT_USER_ERROR
    except typer.Abort:
        _error("aborted")
        return 1
    except _cx.ClickException as e:
        _error(e.format_message())
        return EXIT_USER_ERROR
    except VocalisError as e:
        problems = getattr(e, "problems", None)  # several, one per line (a requests file's)
        if problems:
            _error(str(e).split("\n", 1)[0], problems)
        else:
            _error(_with_flag(str(e) or type(e).__name__, e.param,
                              sys.argv[1:] if argv is None else list(argv)))
        # a request that failed while running (GenerationError) is not an input mistake
        return EXIT_USER_ERROR if e.http_status < 500 else 1
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except (BrokenPipeError, ReaderGone):
        # The reader went away (`vocalis generate -o - | head -c 100`): leave quietly.
        try:
            import os

            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141  # 128 + SIGPIPE, as a shell tool that the closed pipe stopped
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
