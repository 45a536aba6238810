"""The ``vocalis`` command line.

Commands::

    vocalis generate --text "Hello." -o hello.wav      speech to a file (.wav .mp3 .flac .ogg
                                                       .opus .aac .pcm) or -o - for stdout
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

from vocalis import families
from vocalis.audio.encode import FORMATS, SUFFIXES, make_encoder
from vocalis.engine.types import AudioChunk, Failed
from vocalis.errors import HarnessError, InputError, VocalisError
from vocalis.kernels.cli import app as kernels_app
from vocalis.options import QUANTIZE_MODES, check_text, text_from_file
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

NORMALIZE_HELP = ("Read numbers, dates, money, units and abbreviations as words first, in the "
                  "text's language (English, French, German, Spanish, Italian, Portuguese, "
                  "Russian, Japanese, Korean; not Chinese). Not with --exact.")
MODEL_HELP = ("A released model id (`vocalis models list`: pocket-tts, pocket-tts/CONFIG, "
              "qwen3-tts/...), a Hub repo id, or a local checkpoint: a folder, or a YAML config "
              "(also hf:// or https://). Default: pocket-tts.")
QUIET_HELP = "Only warnings and errors on stderr: no progress bar, no summary."
QUANTIZE_MODE_HELP = ("int8 (as --quantize) or int4 (4-bit weights), where the model's family "
                      "offers it (Qwen3-TTS: vocalis's kernels, built once by `vocalis kernels "
                      "build`). Implies --quantize, and wins over --no-quantize.")


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


def _flag_of(name: str) -> str:
    """The flag a family option name is given with, for messages (``--ref-text``)."""
    for family in families.all_families():
        for kind in ("options", "load_options", "random_options"):
            schema = getattr(family, kind)
            if name in schema:
                return schema[name].cli_flag.split("/")[0]
    return "--" + str(name).replace("_", "-")


def _family_params(kinds: tuple[str, ...]) -> tuple[list[inspect.Parameter], dict[str, str]]:
    """typer parameters for the family options of ``kinds``, and {parameter name: kind}."""
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
    params = []
    for name, items in entries.items():
        family, opt = items[0]
        titles = [f.title for f, _ in items]
        if len(items) == 1:
            helptext, panel = opt.help, f"{family.title} options"
        else:
            helptext = "  ".join(f"{f.title}: {o.help}" for f, o in items)
            panel = ("Options of every model" if len(items) == len(every)
                     else f"{' and '.join(titles)} options")
        if opt.choices:
            helptext += f" ({'|'.join(opt.choices)})"
        decls = [opt.cli_flag]
        if opt.type is bool and "/" not in opt.cli_flag:
            annotation, default = bool, False
        else:
            annotation = (opt.type if opt.type in (int, float, bool, str) else str) | None
            default = None
        info = typer.Option(*decls, help=helptext, rich_help_panel=panel, show_default=False)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=Annotated[annotation, info]))
    return params, kind_of


def _family_options(*kinds: str):
    """Decorator of a command function taking ``family: dict`` (see above)."""

    def decorate(fn):
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values()
               if p.name != "family"]

        def command(**kw):
            given = {k: {} for k in kinds}
            for name, kind in command.kind_of.items():
                value = kw.pop(name, None)
                # an on-flag left off (default False) was not given; --off of an on/off
                # pair (default None) was
                if value is not None and not (value is False and command.off_by_default.get(name)):
                    given[kind][name] = value
            return fn(**kw, family=given)

        def refresh() -> None:
            extra, command.kind_of = _family_params(kinds)
            taken = {p.name for p in own}
            extra = [p for p in extra if p.name not in taken]
            for p in extra:
                command.kind_of.setdefault(p.name, "options")
            command.kind_of = {k: v for k, v in command.kind_of.items() if k not in taken}
            command.off_by_default = {p.name: p.default is False for p in extra}
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
    path = Path(output).expanduser()
    by_suffix = SUFFIXES.get(path.suffix.lower())
    if fmt is None and by_suffix is None:
        raise InputError(f"cannot tell the audio format of {path.name!r} from its extension: "
                         f"name it {', '.join(SUFFIXES)}, or give --format")
    if fmt is not None and by_suffix is not None and fmt != by_suffix:
        raise InputError(f"--format {fmt} does not match the extension of {path.name!r} "
                         f"({by_suffix}): change one of them")
    if path.is_dir():
        raise InputError(f"output {path} is a directory: give a file name such as {path}/out.wav")
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


TUNING_HELP = ("Speed choices: auto (measured on this machine at the first "
               "load, then cached), fixed (built-in, no measuring), or forced ones, "
               "comma-separated: threads = MODEL:CODEC and codec_linears = packed|default "
               "(Pocket TTS and Qwen3-TTS; Pocket TTS also packed1, oneDNN's layout for "
               "one row); Pocket TTS also flow_linears = packed|packed1|default|hybrid|vocalis "
               "(hybrid: never measured, holds the FlowLM weights twice; vocalis: our float32 "
               "kernel), "
               "codec_elu = exp|default, codec_pipeline = on|off, "
               "codec_dtype = float32|bfloat16; Qwen3-TTS also model_linears = "
               "packed|packed1|default|vocalis (float32 talker and predictor; vocalis: "
               "our float32 kernel), codec_frames = 1|2|4 (frames per codec call: audio "
               "leaves in chunks of that many frames after the first) and lend = on|off "
               "(the codec's core helps the model while the codec waits); "
               "e.g. fixed,codec_dtype=bfloat16. "
               "Default: $VOCALIS_TUNING, else auto.")


@app.command(context_settings=_SETTINGS)
@_family_options("options", "load")
def generate(
    text: Annotated[str | None, typer.Option(
        "--text", "-t", help="Text to speak; - reads it from stdin.", show_default=False)] = None,
    text_file: Annotated[str | None, typer.Option(
        "--text-file", "-f", help="Read the text from this UTF-8 file (- = stdin); its final "
                                  "line break is not part of the text.",
        show_default=False)] = None,
    voice: Annotated[str | None, typer.Option(
        "--voice", "-v",
        help="A built-in voice (`vocalis voices list`), an audio file to clone, or a saved "
             ".safetensors voice. Default: the model's default voice.",
        show_default=False)] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help=MODEL_HELP,
                                              show_default=False)] = None,
    output: Annotated[str, typer.Option(
        "--output", "-o", help="Audio file to write as audio is generated; its extension gives "
                               "the format (.wav .mp3 .flac .ogg/.opus .aac .pcm/.raw); - streams "
                               "to stdout (WAV unless --format).")] = DEFAULT_OUTPUT,
    fmt: Annotated[str | None, typer.Option(
        "--format", help="wav, mp3, opus (or ogg), flac, aac (ADTS) or pcm (raw s16le mono). "
                         "Default: from the -o extension.", show_default=False)] = None,
    speed: Annotated[float, typer.Option(
        help="0.25-4.0: speak faster (>1) or slower (<1), pitch kept (Rubber Band "
             "time-stretch). 1.0 = the model's own pace.")] = 1.0,
    seed: Annotated[int | None, typer.Option(
        help="Random seed (integer >= 0): same seed, same audio. Default: random.",
        show_default=False)] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    threads: Annotated[int | None, typer.Option(
        help="CPU threads for torch. Default: torch's choice.", show_default=False)] = None,
    quantize: Annotated[bool, typer.Option(
        help="int8 linears where the model's family offers them (CPU only, float32 models; "
             "faster, not bit-identical to float32).")] = False,
    quantize_mode: Annotated[str | None, typer.Option(
        "--quantize-mode", help=QUANTIZE_MODE_HELP, show_default=False)] = None,
    exact: Annotated[bool, typer.Option(
        help="Keep PyTorch's default CPU kernels and measure no speed choices: bit-identical "
             "to the official package (the measured choices agree to float rounding).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    normalize: Annotated[bool, typer.Option(
        "--normalize", help=NORMALIZE_HELP)] = False,
    tuning: Annotated[str | None, typer.Option(help=TUNING_HELP, show_default=False)] = None,
    family: dict | None = None,
) -> None:
    """Speak text into an audio file (or stdout)."""
    _setup_logging(quiet)
    family = family or {}
    text = _read_text(text, text_file)
    fmt = _check_output(output, fmt)
    # Every check that needs no weights runs before anything is loaded: the model id, the
    # options (each family's schema), the text and the voice (a missing file fails here).
    info = families.describe(model or families.default_model_id())
    options = _checked_options(info, family.get("options", {}))
    text, seed, speed, options = info.check_request(text, voice, seed, speed, options)
    load_options = _load_options(info, family.get("load", {}))
    mode = _quantize(quantize, quantize_mode)
    # torch and the model code are imported only now, after the checks that need neither
    from vocalis import api

    try:
        if sys.stderr.isatty():  # someone waits at a terminal: say what takes the time
            log.info("loading %s (%s)", info.name, info.title)
        # One request runs on one engine row (its text chunks follow each other), so the
        # model is loaded, and its speed choices measured, for one row, not for a server's.
        tts = api.load(info.model_id, device=device, threads=threads, max_batch=1, quantize=mode,
                       exact=exact, tuning=tuning, **load_options)
        t0 = time.perf_counter()
        # submit() checks the voice and the text against the model before anything is
        # queued, so a mistake never leaves an empty or truncated file behind.
        req = tts.submit(text, voice, seed, speed, normalize, **options)
    except KeyboardInterrupt:
        _error("interrupted before any audio: nothing was written")
        raise typer.Exit(130) from None
    n_chunks = req.n_chunks

    to_stdout = output == "-"
    try:
        # A file gets its exact lengths at the end (the encoder seeks back: WAV sizes, FLAC
        # STREAMINFO, MP3 Xing/LAME tag); stdout gets the streaming headers.
        file = None if to_stdout else open(Path(output).expanduser(), "wb")  # noqa: SIM115
        writer = make_encoder(fmt, tts.sample_rate, target=file)
    except OSError as e:
        req.cancel()
        raise InputError(f"cannot write {output}: {e.strerror or e}") from None
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
            writer.close()
            if file is not None:
                file.close()
            tts.close()
    if write_error is not None:
        raise InputError(f"cannot write {output}: {write_error.strerror or write_error}")
    duration_s = n_samples / tts.sample_rate
    if interrupted:
        _interrupted(output, to_stdout, duration_s)
    wall_s = time.perf_counter() - t0
    x_rt = duration_s / wall_s if wall_s > 0 else float("inf")
    where = "stdout" if to_stdout else str(output)
    first = "no audio (the request ended before its first frame)" if ttfa_ms is None \
        else f"TTFA {ttfa_ms:.0f} ms"
    log.info("%s: %.2f s of audio in %.2f s (%.1fx real time), %s", where, duration_s, wall_s,
             x_rt, first)


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
    model: Annotated[str | None, typer.Option("--model", "-m", help=MODEL_HELP,
                                              show_default=False)] = None,
) -> None:
    """List the built-in voices of a model (predefined voices, speakers), one per line, the
    default marked; or say how the model takes its voice."""
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
        help="Audio file to clone (any format soundfile reads), a voice name or a .safetensors "
             "voice.", show_default=False)],
    out: Annotated[str, typer.Argument(help="The .safetensors voice file to write.",
                                       show_default=False)],
    model: Annotated[str | None, typer.Option("--model", "-m", help=MODEL_HELP,
                                              show_default=False)] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    family: dict | None = None,
) -> None:
    """Turn an audio prompt into a voice file for fast reuse with --voice, in the format of
    the model's family (interchangeable with the official package's where it has one)."""
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
    model_id: Annotated[str, typer.Argument(metavar="ID", help=MODEL_HELP, show_default=False)],
    config: Annotated[bool, typer.Option(
        "--config", help="Print the model's config in its official format instead.")] = False,
) -> None:
    """What a model is: its family, kind, languages, voices, sizes, pinned revision and
    whether its files are in the cache."""
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
    model_id: Annotated[str, typer.Argument(metavar="ID", help=MODEL_HELP, show_default=False)],
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
        help="Released model id to copy the shapes from (e.g. pocket-tts/english, "
             "english_2m_2026-10, qwen3-tts/0.6b-customvoice).", show_default=False)],
    out: Annotated[str, typer.Option(help="Folder to write the checkpoint into: new or empty "
                                          "(see --force).", show_default=False)],
    seed: Annotated[int, typer.Option(help="Seed of the random weights and tokenizer "
                                           "(0 to 4294967295).")] = 0,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace the checkpoint already in --out (and everything in that "
                        "folder); other non-empty folders are always refused.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    family: dict | None = None,
) -> None:
    """Write a random-weight checkpoint (official layout) for tests and offline use; prints
    where it is, then a ready-to-run generate command."""
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
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    if quiet and _handler is not None:
        _handler.setLevel(logging.WARNING)


@app.command(context_settings=_SETTINGS)
def batch(
    requests: Annotated[str, typer.Option(
        "--requests", "-r", help='JSON array of requests: [{"text": ..., "voice": ..., '
        '"options": {"seed": 42, ...}}, ...]; "voice" and "options" are optional.',
        show_default=False)],
    out_dir: Annotated[str, typer.Option(
        "--out-dir", help="Folder for NNNN.wav (request NNNN, measured pass), NNNN.npy "
                          "(Qwen3-TTS: its codes) and report.json (created if missing).",
        show_default=False)],
    model: Annotated[str | None, typer.Option("--model", "-m", help=MODEL_HELP,
                                              show_default=False)] = None,
    batch_size: Annotated[int | None, typer.Option(
        "--batch-size", "-b", help="Requests in flight in the engine at once (1-256). "
                                   "Default: 16.", show_default=False)] = None,
    sequential: Annotated[bool, typer.Option(
        "--sequential", help="One request at a time (same as --batch-size 1).")] = False,
    mode: Annotated[str, typer.Option(
        help="oneshot, or streaming: also time every audio event and check that each "
             "request's events concatenate exactly to its WAV file.")] = "oneshot",
    threads: Annotated[int | None, typer.Option(
        help="CPU threads for torch. Default: torch's choice.", show_default=False)] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    session_options: Annotated[str | None, typer.Option(
        "--session-options", help='JSON object: load settings ("max_batch", "max_queue", '
        '"quantize", "tuning" and the model family\'s load options, e.g. "dtype") and default '
        'request options of the model\'s family for every request ("temperature", '
        '"max_frames", ...).',
        show_default=False)] = None,
    log_file: Annotated[str | None, typer.Option(
        "--log-file", help="Also write the log, with timestamps, to this file.",
        show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    normalize: Annotated[bool, typer.Option(
        "--normalize", help=NORMALIZE_HELP)] = False,
    ray: Annotated[bool, typer.Option(
        "--ray", help="Run on Ray Data instead: the requests (a JSON array, JSON Lines in a "
                      ".jsonl file, or Parquet; each row may carry an \"id\") through an actor "
                      "pool, one engine per actor; NNNN.wav per request and a manifest; a bad "
                      "row is recorded and the rest run; a second run skips what is done. No "
                      "warm-up pass and no report.json (needs pip install 'vocalis\\[ray]').")
    ] = False,
    ray_address: Annotated[str | None, typer.Option(
        help="With --ray: the cluster's head, HOST:PORT, or auto. Default: $RAY_ADDRESS, else "
             "a private local Ray instance on 127.0.0.1.", show_default=False)] = None,
    actors: Annotated[int, typer.Option(help="With --ray: actors in the pool (one model "
                                             "and engine each).")] = 1,
    actor_cpus: Annotated[float, typer.Option(help="With --ray: CPUs reserved per actor.")] = 1.0,
    actor_gpus: Annotated[float, typer.Option(help="With --ray: GPUs per actor (with --device "
                                                   "cuda).")] = 0.0,
    manifest: Annotated[str, typer.Option(help="With --ray: manifest format, jsonl or "
                                               "parquet.")] = "jsonl",
    ray_cpus: Annotated[int | None, typer.Option(
        help="With --ray and no --ray-address: CPUs of the local Ray instance. Default: all.",
        show_default=False)] = None,
) -> None:
    """Run a file of requests through one engine session: warm-up pass, measured pass, WAVs
    and a JSON report (or, with --ray, through a Ray Data actor pool: WAVs and a manifest).

    Everything is checked before anything runs (with --ray: row by row, bad rows are
    recorded). Prints the report's (manifest's) path. Exit 0 when every request succeeded,
    1 when some failed (the others still complete; see the report), 2 for bad input.
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
        "--text", "-t", help="A benchmark text of 80+ characters; give at least two distinct "
                             "ones.", show_default=False)],
    voice: Annotated[str | None, typer.Option(
        "--voice", "-v", help="A built-in voice, an audio file or a saved .safetensors voice "
                              "(needed for models without a default voice and for Pocket TTS "
                              "--against official). Qwen3-TTS Base: a reference audio file, "
                              "cloned x-vector only unless --ref-text is given; CustomVoice: a "
                              "speaker.", show_default=False)] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help=MODEL_HELP,
                                              show_default=False)] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    threads: Annotated[int | None, typer.Option(
        help="CPU threads for torch (with --against, the official package also runs at this "
             "count, beside its as-shipped run for Pocket TTS). Default: torch's choice.",
        show_default=False)] = None,
    concurrency: Annotated[int, typer.Option(
        "--concurrency", "-c", help="Requests in flight at once (1-256).")] = 1,
    frames: Annotated[int | None, typer.Option(
        help="Ignore end of speech where the model allows it: this many frames per text chunk "
             "(max_frames), on both sides with --against (for random-weight checkpoints).",
        show_default=False)] = None,
    requests: Annotated[int | None, typer.Option(
        "--requests", "-n", help="Requests per pass (text i mod number of texts, seed "
                                 "SEED+i). Default: max(texts, concurrency).",
        show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="Seed of request 0 (request i gets SEED+i).")] = 0,
    against: Annotated[str | None, typer.Option(
        "--against", help="official: also run the model family's official package (one "
                          "request at a time, its own process) on the same checkpoint, texts, "
                          "seeds and options, and print ratios. Pocket TTS: pocket-tts as "
                          "shipped (1 thread) and at --threads (once when that is 1), ratios "
                          "against the faster; Qwen3-TTS: qwen-tts in the interpreter "
                          "$VOCALIS_QWEN_PYTHON, at --threads.", show_default=False)] = None,
    quantize: Annotated[bool, typer.Option(
        help="vocalis side: int8 linears where the model's family offers them (CPU; faster, "
             "not bit-identical).")] = False,
    quantize_mode: Annotated[str | None, typer.Option(
        "--quantize-mode", help=QUANTIZE_MODE_HELP, show_default=False)] = None,
    official_quantize: Annotated[bool, typer.Option(
        "--official-quantize", help="With --against official: load the official model with "
                                    "its own int8 path (pocket-tts quantize=True).")] = False,
    session_options: Annotated[str | None, typer.Option(
        "--session-options", help='JSON object of engine settings: {"max_batch": N, '
                                  '"max_queue": N}. Default: max_batch = concurrency.',
        show_default=False)] = None,
    json_out: Annotated[str | None, typer.Option(
        "--json", help="Write the full report (schema vocalis.bench) to this JSON file.",
        show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    tuning: Annotated[str | None, typer.Option(help=TUNING_HELP, show_default=False)] = None,
    family: dict | None = None,
) -> None:
    """Benchmark: one excluded pass then one measured pass; TTFA, x real time, throughput at
    a concurrency, peak RSS; optionally against the official package. Prints the CPU, its
    ISA flags, the thread count and the speed choices the model runs with. Every request
    option of the model's family is a flag (e.g. --temperature, --speaker, --instruct)."""
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
        "--model", "-m", metavar="MODEL", help=MODEL_HELP + " Repeat to serve several models (each "
                                           "request's `model` picks one; the first is the "
                                           "default).", show_default=False)] = None,
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0 for every "
                                           "interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port; 0 picks a free one.")] = 8000,
    voices_dir: Annotated[str | None, typer.Option(
        help="Folder of custom voices (created if missing). Default: "
             "$XDG_DATA_HOME/vocalis/voices (~/.local/share/vocalis/voices).",
        show_default=False)] = None,
    voice: Annotated[str | None, typer.Option(
        "--voice", "-v", help="Default voice (for `default` and OpenAI's voice names) of the "
                              "first --model: a predefined name or speaker, an audio file or a "
                              ".safetensors voice. Default: the model's default voice or first "
                              "speaker (released models only).",
        show_default=False)] = None,
    api_key: Annotated[str | None, typer.Option(
        envvar="VOCALIS_API_KEY", help="Require `Authorization: Bearer KEY` on /v1/* "
                                       "(also read from $VOCALIS_API_KEY).",
        show_default=False)] = None,
    max_batch: Annotated[int, typer.Option(help="Requests generated together (engine rows).")]
    = 16,
    max_queue: Annotated[int, typer.Option(help="Requests waiting for a row; more get HTTP "
                                                "429.")] = 256,
    max_input_chars: Annotated[int, typer.Option(help="Longest input accepted (OpenAI: "
                                                      "4096).")] = 4096,
    shutdown_timeout: Annotated[float, typer.Option(
        help="Seconds in-flight streams get to finish on SIGINT/SIGTERM before they are "
             "cancelled.")] = 10.0,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    threads: Annotated[int | None, typer.Option(
        help="CPU threads for torch. Default: torch's choice.", show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Warnings and errors only (no "
                                                              "access log).")] = False,
    model_name: Annotated[list[str] | None, typer.Option(
        metavar="NAME", help="Model id clients see in /v1/models and /health (1-128 characters from A-Z a-z "
             "0-9 . _ : / -); repeat it once per --model, in the same order. Default: "
             "pocket-tts/CONFIG or qwen3-tts/VARIANT for a released model, the checkpoint "
             "folder's name for a local one (paths are never shown).",
        show_default=False)] = None,
    normalize: Annotated[bool, typer.Option(
        "--normalize/--no-normalize", help="Read numbers, dates, money, units and abbreviations as "
        "words (English, French, German, Spanish, Italian, Portuguese, Russian, Japanese, Korean) "
        "for requests without a `normalize` field.")] = True,
    quantize: Annotated[bool, typer.Option(
        help="Dynamic int8 linears for every --model (Pocket FlowLM; Qwen3 talker and code "
             "predictor; CPU; faster, not bit-identical).")] = False,
    quantize_mode: Annotated[str | None, typer.Option(
        "--quantize-mode", help=QUANTIZE_MODE_HELP, show_default=False)] = None,
    ray: Annotated[bool, typer.Option(
        "--ray", help="Serve on Ray Serve: replicas that each load the model and its engine, "
                      "behind Serve's HTTP proxy at --host/--port (needs pip install "
                      "'vocalis\\[ray]'). --voices-dir must then be a folder every replica "
                      "reaches (a shared filesystem on a cluster).")] = False,
    ray_address: Annotated[str | None, typer.Option(
        help="With --ray: the cluster's head, HOST:PORT (its GCS port, 6379 by default), or "
             "auto for the one `ray start --head` started here. Default: $RAY_ADDRESS, else a "
             "private local Ray instance on 127.0.0.1.", show_default=False)] = None,
    replicas: Annotated[int | None, typer.Option(
        help="With --ray: number of replicas. Default: 1.", show_default=False)] = None,
    autoscale: Annotated[str | None, typer.Option(
        metavar="MIN-MAX[:TARGET]", help="With --ray, instead of --replicas: Serve autoscaling "
        "between MIN and MAX replicas, aiming at TARGET ongoing requests per replica (Serve's "
        "default: 2).", show_default=False)] = None,
    replica_cpus: Annotated[float, typer.Option(
        help="With --ray: CPUs reserved per replica (fractions allowed).")] = 1.0,
    replica_gpus: Annotated[float, typer.Option(
        help="With --ray: GPUs per replica (use with --device cuda).")] = 0.0,
    ray_cpus: Annotated[int | None, typer.Option(
        help="With --ray and no --ray-address: CPUs of the local Ray instance. Default: all.",
        show_default=False)] = None,
    family: dict | None = None,
) -> None:
    """Serve the OpenAI speech API, voices, metrics and a web page (FastAPI + uvicorn, or
    Ray Serve replicas with --ray)."""
    _setup_logging(quiet)
    models = model or [families.default_model_id()]
    load_options = _load_options_for(models, (family or {}).get("load", {}))
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
        quantize=_quantize(quantize, quantize_mode), load_options=load_options)


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
    text: Annotated[str, typer.Argument(help="Text to normalize; - reads it from stdin.",
                                        show_default=False)],
    language: Annotated[str, typer.Option(
        "--language", "-l", help="en/english, fr/french, de/german, es/spanish, it/italian, "
                                 "pt/portuguese, ru/russian, ja/japanese, ko/korean, or auto "
                                 "(English; text in another script is left as written).")] = "en",
) -> None:
    """Print TEXT with numbers, dates, money, units and abbreviations written as words (what
    `--normalize` and `vocalis serve` send to the model)."""
    if text == "-":
        text = text_from_file(sys.stdin.read())  # the final line break ends the input
    typer.echo(normalize(text, language))


# --------------------------------------------------------------------------- wyoming


@app.command(context_settings=_SETTINGS)
@_family_options("load")
def wyoming(
    uri: Annotated[str, typer.Option(help="Where to listen: tcp://HOST:PORT (0.0.0.0 for every "
                                          "interface) or unix://PATH.")] = "tcp://127.0.0.1:10200",
    model: Annotated[str | None, typer.Option("--model", "-m", metavar="MODEL", help=MODEL_HELP,
                                              show_default=False)] = None,
    voice: Annotated[str | None, typer.Option(
        "--voice", "-v", help="The `default` voice: a predefined name or speaker, an audio file or "
                              "a .safetensors voice. Default: the model's default voice or first "
                              "speaker (released models only).", show_default=False)] = None,
    voices_dir: Annotated[str | None, typer.Option(
        help="Folder of custom voices (as `vocalis serve` stores them). Default: "
             "$XDG_DATA_HOME/vocalis/voices.", show_default=False)] = None,
    max_batch: Annotated[int, typer.Option(help="Requests generated together (engine rows), "
                                                "shared by all clients.")] = 16,
    threads: Annotated[int | None, typer.Option(
        help="CPU threads for torch. Default: torch's choice.", show_default=False)] = None,
    seed: Annotated[int | None, typer.Option(
        help="Seed of every request (reproducible audio). Default: random per request.",
        show_default=False)] = None,
    max_input_chars: Annotated[int, typer.Option(help="Longest text per synthesize or "
                                                      "synthesize-chunk event.")] = 4096,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    normalize: Annotated[bool, typer.Option(
        "--normalize/--no-normalize", help="Read numbers, dates, money, units and abbreviations as "
        "words first, in the voice's language where text normalization covers it (as `vocalis "
        "serve` does).")] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Warnings and errors only.")] = False,
    family: dict | None = None,
) -> None:
    """Serve a model to Home Assistant over the Wyoming protocol (no zeroconf)."""
    _setup_logging(quiet)
    model = model or families.default_model_id()
    [load_options] = _load_options_for([model], (family or {}).get("load", {}))
    from vocalis.wyoming import run as run_wyoming

    def ready(where: str) -> None:
        typer.echo(f"vocalis: Wyoming server for {model} at {where}", err=True)

    run_wyoming(model, uri, voice=voice, voices_dir=voices_dir, max_batch=max_batch,
                threads=threads, seed=seed, device=device, max_input_chars=max_input_chars,
                on_ready=ready, normalize=normalize, load_options=load_options)


# --------------------------------------------------------------------------- reference


@app.command(
    "reference",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
    help="Parity harness against pocket-tts 4.0.1: export, replay, compare "
         "(`vocalis reference --help`).",
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


def _with_flag(message: str, param: str | None) -> str:
    """A library message in the command line's words: the flag of the parameter at fault
    is added when the message does not name it (``... (--voice)``)."""
    if not param:
        return message
    flag = _COMMON_FLAGS.get(param) or _flag_of(param)
    return message if flag in message else f"{message} ({flag})"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _error(message: str) -> None:
    try:
        sys.stderr.write(f"error: {_one_line(message)}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class ReaderGone(Exception):
    """The reader of ``-o -`` closed the pipe (not an ``OSError``: click turns those into
    exit 1)."""


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 user error, 1 other failure, 130 Ctrl-C,
    141 the reader of ``-o -`` went away)."""
    _setup_logging()
    _refresh_family_options()  # the flags of every family registered by now
    command = typer.main.get_command(app)
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
        _error(_with_flag(str(e) or type(e).__name__, e.param))
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
