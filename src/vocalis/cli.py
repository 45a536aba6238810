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
"""

from __future__ import annotations

import logging
import shlex
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

from vocalis.errors import HarnessError, InputError, VocalisError, VoiceError
from vocalis.kernels.cli import app as kernels_app

log = logging.getLogger("vocalis.cli")

EXIT_USER_ERROR = 2
DEFAULT_MODEL = "pocket-tts"
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

NORMALIZE_HELP = ("Read numbers, dates, money, units and abbreviations as words first (the "
                  "model's language, Qwen3: --language; English, French, German, Spanish, Italian, "
                  "Portuguese, Russian, Japanese, Korean; not Chinese). Not with --exact.")
MODEL_HELP = ("Model id: pocket-tts (= pocket-tts/english), pocket-tts/CONFIG (see `vocalis models "
              "list`), a YAML config in the official format, a directory holding config.yaml, "
              "or an hf:// or https:// YAML; or Qwen3-TTS: qwen3-tts/0.6b-customvoice, "
              "qwen3-tts/0.6b-base, qwen3-tts/1.7b-{base,customvoice,voicedesign}, the Hub repo "
              "id Qwen/Qwen3-TTS-12Hz-..., or a local Qwen3-TTS checkpoint folder.")
QUIET_HELP = "Only warnings and errors on stderr: no progress bar, no summary."
QUANTIZE_MODE_HELP = ("int8 (as --quantize) or int4: Qwen3 talker and code predictor with 4-bit "
                      "weights (x86 CPU with AVX2; Qwen3's int8 and int4 run vocalis's kernels, "
                      "built once by `vocalis kernels build`). Implies --quantize, and wins over "
                      "--no-quantize.")


def _quantize(quantize: bool, quantize_mode: str | None) -> bool | str:
    """``--quantize`` and ``--quantize-mode`` as ``vocalis.load``'s ``quantize`` (the mode
    wins); InputError (exit 2) for an unknown mode, before anything loads."""
    from vocalis.api import QUANTIZE_MODES

    if quantize_mode is None:
        return bool(quantize)
    mode = quantize_mode.strip().lower()
    if mode not in QUANTIZE_MODES:
        raise InputError(f"--quantize-mode must be {' or '.join(QUANTIZE_MODES)}, got {quantize_mode!r}")
    return mode


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
    if text is not None and text_file is not None:
        raise InputError("give either --text or --text-file, not both")
    if text is None and text_file is None:
        raise InputError("no text given: use --text TEXT, --text - (stdin) or --text-file FILE")
    if text is not None and text != "-":
        from vocalis.text.pocket import check_unicode

        check_unicode(text, "--text", "use a UTF-8 terminal (e.g. LANG=C.UTF-8) or put the "
                      "text in a UTF-8 file for --text-file")
    if text == "-" or text_file == "-":
        if sys.stdin.isatty():
            log.info("reading text from stdin (end with Ctrl-D)")
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"text on stdin is not UTF-8: {e}") from None
    elif text_file is not None:
        from vocalis.text.files import read_utf8

        text = read_utf8(text_file, "text file")
    assert text is not None
    if not text.strip():
        raise InputError("text is empty: give some words to speak")
    return text


def _check_output(output: str, fmt: str | None) -> str:
    """Check the output target; returns its format (``--format``, else from the suffix)."""
    from vocalis.audio.encode import FORMATS, SUFFIXES

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


STREAMING_TEXT_HELP = ("Qwen3: --streaming-text feeds the text to the talker along the frames "
                       "(official non_streaming_mode=False: a short prompt pass, lower time to "
                       "first audio); --whole-text puts all of it in the prompt first "
                       "(non_streaming_mode=True). Default: the official method's (whole text "
                       "for CustomVoice and VoiceDesign, streaming text for Base).")

def _sampling(**options) -> dict:
    return {k: v for k, v in options.items() if v is not None}


def _family_options(model: str, qwen3: bool, pocket_only: dict, qwen3_only: dict, dtype: str) -> None:
    """Refuse options of the other model family (one line, exit 2)."""
    def flags(names) -> str:
        spelled = {"non_streaming_mode": "streaming-text/--whole-text"}
        return ", ".join("--" + spelled.get(n, n.replace("_", "-")) for n in names)

    if qwen3 and pocket_only:
        raise InputError(f"{flags(pocket_only)}: Pocket TTS option(s), not for the Qwen3-TTS model {model}")
    if not qwen3 and (qwen3_only or dtype != "float32"):
        names = list(qwen3_only) + (["dtype"] if dtype != "float32" else [])
        raise InputError(f"{flags(names)}: Qwen3-TTS option(s), not for the Pocket TTS model {model}")


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
def generate(
    text: Annotated[str | None, typer.Option(
        "--text", "-t", help="Text to speak; - reads it from stdin.", show_default=False)] = None,
    text_file: Annotated[str | None, typer.Option(
        "--text-file", "-f", help="Read the text from this UTF-8 file (- = stdin).",
        show_default=False)] = None,
    voice: Annotated[str | None, typer.Option(
        "--voice", "-v",
        help="A predefined voice name (`vocalis voices list`), an audio file to clone, or a "
             ".safetensors voice state. Default: the model's default voice (released models "
             "only).", show_default=False)] = None,
    model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)] = DEFAULT_MODEL,
    output: Annotated[str, typer.Option(
        "--output", "-o", help="Audio file to write as audio is generated; its extension gives "
                               "the format (.wav .mp3 .flac .ogg/.opus .aac .pcm/.raw); - streams "
                               "to stdout (WAV unless --format).")] = DEFAULT_OUTPUT,
    fmt: Annotated[str | None, typer.Option(
        "--format", help="wav, mp3, opus (Ogg), flac, aac (ADTS) or pcm (raw s16le mono). "
                         "Default: from the -o extension.", show_default=False)] = None,
    speed: Annotated[float, typer.Option(
        help="0.25-4.0: speak faster (>1) or slower (<1), pitch kept (Rubber Band "
             "time-stretch). 1.0 = the model's own pace.")] = 1.0,
    seed: Annotated[int | None, typer.Option(
        help="Random seed (integer >= 0): same seed, same audio. Default: random.",
        show_default=False)] = None,
    temperature: Annotated[float | None, typer.Option(
        help="Pocket: noise variance (default 0.3). Qwen3: sampling temperature of the talker "
             "(default from the checkpoint: 0.9).", show_default=False)] = None,
    eos_threshold: Annotated[float | None, typer.Option(
        help="End of speech when the EOS logit is above this. Default: the model's.",
        show_default=False)] = None,
    frames_after_eos: Annotated[int | None, typer.Option(
        help="Frames kept after end of speech. Default: from the text length.",
        show_default=False)] = None,
    noise_clamp: Annotated[float | None, typer.Option(
        help="Clamp the sampling noise to +-this. Default: no clamp.", show_default=False)] = None,
    sampler_decode_steps: Annotated[int | None, typer.Option(
        help="Flow sampler steps per frame. Default: 1.", show_default=False)] = None,
    max_tokens: Annotated[int | None, typer.Option(
        help="Maximum tokens per text chunk. Default: 50.", show_default=False)] = None,
    max_frames: Annotated[int | None, typer.Option(
        help="Pocket (benchmarks): ignore end of speech and emit exactly this many frames "
             "(80 ms each) per chunk. Qwen3: stop after at most this many frames (replaces "
             "the runaway guard).", show_default=False)] = None,
    speaker: Annotated[str | None, typer.Option(
        help="Qwen3 CustomVoice: built-in speaker (e.g. ryan, vivian; case-insensitive).",
        show_default=False)] = None,
    language: Annotated[str | None, typer.Option(
        help="Qwen3: language of the text (english, chinese, ...; auto = detect). Default: auto.",
        show_default=False)] = None,
    instruct: Annotated[str | None, typer.Option(
        help="Qwen3 VoiceDesign (required) and 1.7B CustomVoice: how to speak / the voice to "
             "design, in words.", show_default=False)] = None,
    ref_audio: Annotated[str | None, typer.Option(
        help="Qwen3 Base: reference audio of the voice to clone (any format, 1-60 s).",
        show_default=False)] = None,
    ref_text: Annotated[str | None, typer.Option(
        help="Qwen3 Base: transcript of --ref-audio (in-context cloning).", show_default=False)] = None,
    xvector_only: Annotated[bool, typer.Option(
        "--xvector-only", help="Qwen3 Base: clone from the speaker embedding only (no --ref-text).")] = False,
    greedy: Annotated[bool, typer.Option(
        "--greedy", help="Qwen3: argmax instead of sampling, for the talker and the code predictor.")] = False,
    streaming_text: Annotated[bool | None, typer.Option(
        "--streaming-text/--whole-text", help=STREAMING_TEXT_HELP, show_default=False)] = None,
    top_k: Annotated[int | None, typer.Option(
        help="Qwen3: top-k of the talker (0 = off). Default: the checkpoint's (50).",
        show_default=False)] = None,
    top_p: Annotated[float | None, typer.Option(
        help="Qwen3: top-p of the talker. Default: the checkpoint's (1.0).", show_default=False)] = None,
    repetition_penalty: Annotated[float | None, typer.Option(
        help="Qwen3: repetition penalty over generated codebook-0 tokens. Default: 1.05.",
        show_default=False)] = None,
    max_new_tokens: Annotated[int | None, typer.Option(
        help="Qwen3: the official length limit (tokens; frames = tokens - 1). Default: 8192.",
        show_default=False)] = None,
    dtype: Annotated[str, typer.Option(
        help="Qwen3: compute dtype of the talker, float32 or bfloat16 (the codec stays float32).")
    ] = "float32",
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    threads: Annotated[int | None, typer.Option(
        help="CPU threads for torch. Default: torch's choice.", show_default=False)] = None,
    quantize: Annotated[bool, typer.Option(
        help="Dynamic int8 linears: Pocket FlowLM, Qwen3 talker and code predictor (CPU only, "
             "float32; faster, not bit-identical to fp32).")] = False,
    quantize_mode: Annotated[str | None, typer.Option(
        "--quantize-mode", help=QUANTIZE_MODE_HELP, show_default=False)] = None,
    exact: Annotated[bool, typer.Option(
        help="Keep PyTorch's default CPU kernels and measure no speed choices: bit-identical "
             "to the official package (the measured choices agree to float rounding).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    normalize: Annotated[bool, typer.Option(
        "--normalize", help=NORMALIZE_HELP)] = False,
    tuning: Annotated[str | None, typer.Option(help=TUNING_HELP, show_default=False)] = None,
) -> None:
    """Speak text into an audio file (or stdout)."""
    _setup_logging(quiet)
    text = _read_text(text, text_file)
    fmt = _check_output(output, fmt)
    from vocalis.audio.stretch import check_speed

    speed = check_speed(speed)
    from vocalis import api
    from vocalis.engine.types import AudioChunk, Failed

    qwen3 = api.is_qwen3(model.strip())
    pocket_only = _sampling(eos_threshold=eos_threshold, frames_after_eos=frames_after_eos,
                            noise_clamp=noise_clamp, sampler_decode_steps=sampler_decode_steps,
                            max_tokens=max_tokens)
    qwen3_only = _sampling(speaker=speaker, language=language, instruct=instruct, ref_audio=ref_audio,
                           ref_text=ref_text, xvector_only=xvector_only or None, greedy=greedy or None,
                           top_k=top_k, top_p=top_p, repetition_penalty=repetition_penalty,
                           max_new_tokens=max_new_tokens,
                           non_streaming_mode=None if streaming_text is None else not streaming_text)
    _family_options(model, qwen3, pocket_only, qwen3_only, dtype)
    if qwen3:
        sampling = _sampling(temperature=temperature, max_frames=max_frames, **qwen3_only)
    else:
        sampling = _sampling(temperature=temperature, max_frames=max_frames, **pocket_only)

    try:
        # One request runs on one engine row (its text chunks follow each other), so the
        # model is loaded, and its speed choices measured, for one row, not for a server's.
        tts = api.load(model, device=device, threads=threads, max_batch=1,
                       quantize=_quantize(quantize, quantize_mode), exact=exact,
                       dtype=dtype, tuning=tuning)
        if qwen3:
            v = voice  # the request resolves it with its mode (speaker, reference, prompt)
        else:
            if voice is None and not tts.released:
                raise VoiceError(f"model {model} is not a released model, so it has no predefined "
                                 "voices: pass --voice AUDIO_FILE or --voice VOICE.safetensors")
            v = tts.voice(voice)

        t0 = time.perf_counter()
        # submit() checks the parameters, the voice and the text before anything is queued,
        # so a mistake never leaves an empty or truncated file behind.
        req = tts.submit(text, v, seed, speed, normalize, **sampling)
    except KeyboardInterrupt:
        _error("interrupted before any audio: nothing was written")
        raise typer.Exit(130) from None
    n_chunks = req.n_chunks

    from vocalis.audio.encode import make_encoder

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
    model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)] = DEFAULT_MODEL,
) -> None:
    """List the predefined voices of a model (one per line, the default marked); for
    Qwen3-TTS CustomVoice, its built-in speakers."""
    _setup_logging()
    from vocalis.api import is_qwen3, resolve_model_id
    from vocalis.models.pocket import registry

    if is_qwen3(model.strip()):
        _qwen3_voices(model.strip())
        return
    _, name, released = resolve_model_id(model)
    if not released:
        typer.echo(f"none: {name} is not a released model; predefined voices were computed with "
                   "the released weights. Use --voice AUDIO_FILE or a .safetensors voice state "
                   "exported with `vocalis voices export --model ...`.")
        return
    default = registry.default_voice(name)
    for v in registry.PREDEFINED_VOICES:
        typer.echo(f"{v} (default)" if v == default else v)


def _qwen3_voices(model: str) -> None:
    """Speakers of a Qwen3-TTS model from its config (a release's, or a local folder's)."""
    from vocalis.models.qwen3 import checkpoint, registry
    from vocalis.models.qwen3.config import load_config

    release = checkpoint.find_release(model)
    if release is not None and not _is_dir(model):
        cfg = registry.config(release.model_id)
    else:
        cfg = load_config(checkpoint.check_checkpoint_dir(Path(model).expanduser()))
    speakers = list(cfg.talker_config.spk_id)
    if not speakers:
        how = ("clone a voice: --ref-audio FILE with --ref-text or --xvector-only"
               if cfg.tts_model_type == "base" else "describe the voice with --instruct")
        typer.echo(f"none: {model} is a Qwen3-TTS {cfg.tts_model_type} model; {how}")
        return
    for i, v in enumerate(speakers):
        typer.echo(f"{v} (default on the server)" if i == 0 else v)


def _is_dir(model: str) -> bool:
    return Path(model).expanduser().is_dir()


@voices_app.command("export", context_settings=_SETTINGS)
def voices_export(
    audio: Annotated[str, typer.Argument(
        help="Audio file to clone (any format soundfile reads; first 30 s), a voice name or a "
             ".safetensors voice.", show_default=False)],
    out: Annotated[str, typer.Argument(help="The .safetensors voice state to write.",
                                       show_default=False)],
    model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)] = DEFAULT_MODEL,
    ref_text: Annotated[str | None, typer.Option(
        help="Qwen3 Base: transcript of the audio (in-context cloning prompt).",
        show_default=False)] = None,
    xvector_only: Annotated[bool, typer.Option(
        "--xvector-only", help="Qwen3 Base: a speaker-embedding-only prompt (no --ref-text).")] = False,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
) -> None:
    """Turn an audio prompt into a voice file for fast reuse with --voice: a Pocket voice
    state, or a Qwen3-TTS Base voice-clone prompt (with --ref-text or --xvector-only)."""
    _setup_logging(quiet)
    out_path = Path(out).expanduser()
    if out_path.suffix.lower() != ".safetensors":
        raise InputError(f"voice file name must end in .safetensors, got {out}")
    if not out_path.parent.is_dir():
        raise InputError(f"output folder does not exist: {out_path.parent}")
    from vocalis import api

    qwen3 = api.is_qwen3(model.strip())
    if not qwen3 and (ref_text is not None or xvector_only):
        raise InputError("--ref-text and --xvector-only are Qwen3-TTS Base options")
    # Exporting runs no generation: the default kernels (exact) measure no speed choices and
    # give the official package's voice state bit for bit.
    tts = api.load(model, device=device, max_batch=1, exact=True)
    voice = tts.voice(audio, ref_text=ref_text, xvector_only=xvector_only) if qwen3 else tts.voice(audio)
    try:
        voice.save(out_path)
    except OSError as e:
        raise InputError(f"cannot write {out_path}: {e.strerror or e}") from None
    log.info("wrote %s (voice %s, model %s)", out_path, voice.name, tts.config_name)


# --------------------------------------------------------------------------- models


def _describe_config(name: str) -> str:
    from vocalis.models.pocket import registry

    cfg = registry.released_config(name)
    t = cfg.flow_lm.transformer
    parts = [f"{t.num_layers:>2} layers", f"d_model {t.d_model:>4}",
             f"head {cfg.flow_lm.flow.type:<9}", f"tokenizer {cfg.flow_lm.lookup_table.tokenizer}"]
    text = "  ".join(parts)
    if name == registry.DEFAULT_CONFIG:
        text += "  (default: pocket-tts)"
    return text


@models_app.command("list", context_settings=_SETTINGS)
def models_list() -> None:
    """List every released model id with its shape."""
    from vocalis.models.pocket import registry
    from vocalis.models.qwen3 import registry as qwen3_registry

    names = registry.config_names()
    width = max(max(len(n) for n in names) + len("pocket-tts/"), *map(len, qwen3_registry.model_ids()))
    for name in names:
        typer.echo(f"{'pocket-tts/' + name:<{width}}  {_describe_config(name)}")
    for model_id in qwen3_registry.model_ids():
        rel = qwen3_registry.release(model_id)
        t = qwen3_registry.config(model_id).talker_config
        typer.echo(f"{model_id:<{width}}  {t.num_hidden_layers:>2} layers  d_model {t.hidden_size:>4}  "
                   f"{rel.description}  ({rel.repo_id}@{rel.revision[:7]})")


@models_app.command("show", context_settings=_SETTINGS)
def models_show(
    model_id: Annotated[str, typer.Argument(metavar="ID", help=MODEL_HELP, show_default=False)],
) -> None:
    """Print a model's config as YAML (the official format); for Qwen3-TTS, its release
    facts (repo, pinned revision, type, languages, speakers, instruct, sizes, cache)."""
    _setup_logging()
    from vocalis.models.qwen3.checkpoint import is_qwen3

    if is_qwen3(model_id):
        _show_qwen3(model_id)
        return
    from vocalis.api import resolve_model_id
    from vocalis.models.pocket.config import dump_config

    cfg, _, _ = resolve_model_id(model_id)
    typer.echo(dump_config(cfg), nl=False)


_INSTRUCT = {
    "base": "no (the voice is cloned from reference audio)",
    "custom_voice/0b6": "ignored (0.6B CustomVoice drops instruct, as the official package does)",
    "custom_voice/1b7": "yes (optional style instruction)",
    "voice_design": "yes (the voice description)",
}


def _show_qwen3(model: str) -> None:
    from vocalis.models.qwen3 import checkpoint, registry
    from vocalis.models.qwen3.config import load_config

    # as resolve_checkpoint: an existing folder wins over an id of the same spelling
    rel = None if Path(model).expanduser().is_dir() else checkpoint.find_release(model)
    if rel is None:
        folder, _ = checkpoint.resolve_checkpoint(model, download=False)  # local folder, or the error
        cfg = load_config(folder)
        rows = [("checkpoint", str(folder))]
    else:
        cfg = registry.config(rel.model_id)
        rows = [("model", rel.model_id), ("description", rel.description), ("repo", rel.repo_id),
                ("revision", f"{rel.revision} (pinned)")]
    t = cfg.talker_config
    kind = cfg.tts_model_type
    size = {"0b6": "0.6B", "1b7": "1.7B"}.get(cfg.tts_model_size, cfg.tts_model_size)
    rows += [("type", kind), ("size", f"{size} ({cfg.tts_model_size})"), ("languages", ", ".join(t.languages))]
    if kind == "custom_voice":
        rows.append(("speakers", ", ".join(
            f"{s} ({t.spk_is_dialect[s]})" if t.spk_is_dialect.get(s) else s for s in t.speakers)))
    instruct = _INSTRUCT.get(kind) or _INSTRUCT.get(f"{kind}/{cfg.tts_model_size}", "yes")
    rows.append(("instruct", instruct))
    n = checkpoint.parameter_counts(rel.model_id if rel else folder)
    talker = f"talker {n['talker'] / 1e6:.1f} M"
    if n["speaker_encoder"]:
        talker += f" + speaker encoder {n['speaker_encoder'] / 1e6:.1f} M"
    codec = f"speech tokenizer {n['speech_tokenizer'] / 1e6:.1f} M"
    if rel is not None:  # the released dtypes; a local folder: its files' sizes
        rows.append(("parameters", f"{talker} (bf16), {codec} (fp32)"))
        model_b, codec_b = checkpoint.weight_bytes(n)
    else:
        rows.append(("parameters", f"{talker}, {codec}"))
        model_b, codec_b = ((folder / f).stat().st_size
                            for f in ("model.safetensors", "speech_tokenizer/model.safetensors"))
    weights = (f"{(model_b + codec_b) / 1e9:.2f} GB (model.safetensors {model_b / 1e9:.2f} GB, "
               f"speech_tokenizer/model.safetensors {codec_b / 1e9:.2f} GB)")
    rows.append(("weights", weights))
    if rel is not None:
        from vocalis import hub

        snap, missing = checkpoint.cache_status(rel)
        if snap is not None and not missing:
            rows.append(("cache", f"cached: {snap}"))
        elif snap is not None and snap.is_dir():
            rows.append(("cache", f"incomplete in {snap} (missing {', '.join(missing)}): run "
                                  + f"`vocalis models download {rel.model_id}`"))
        else:
            rows.append(("cache", f"not cached in {hub.hf_cache_dir()}: run `vocalis models download {rel.model_id}`"))
    width = max(len(k) for k, _ in rows) + 1
    for key, value in rows:
        typer.echo(f"{key + ':':<{width}} {value}")


@models_app.command("download", context_settings=_SETTINGS)
def models_download(
    model_id: Annotated[str, typer.Argument(metavar="ID", help=MODEL_HELP, show_default=False)],
    all_voices: Annotated[bool, typer.Option(
        "--all-voices", help="Also fetch every predefined voice, not only the default one "
                             "(Pocket TTS; Qwen3-TTS speakers are built into the checkpoint).")]
    = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
) -> None:
    """Fetch weights, tokenizer and voices into the Hugging Face cache for offline use.

    Prints one line per file: what it is and its local path. Later runs with
    HF_HUB_OFFLINE=1 use these files. Qwen3-TTS: fetches the checkpoint folder (config,
    weights, tokenizer, speech_tokenizer/) at the pinned commit and prints its path.
    """
    _setup_logging(quiet)
    from vocalis.models.qwen3.checkpoint import is_qwen3, resolve_checkpoint

    if is_qwen3(model_id):  # the whole checkpoint folder at its pinned commit (--all-voices: n/a)
        if quiet:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
        folder, _ = resolve_checkpoint(model_id, download=True)
        typer.echo(f"checkpoint: {folder}")
        return
    from vocalis import hub
    from vocalis.api import resolve_model_id
    from vocalis.models.pocket import registry
    from vocalis.models.pocket.model import resolve_weights

    cfg, name, released = resolve_model_id(model_id)
    weights, cloning = resolve_weights(cfg, name)
    typer.echo(f"weights{'' if cloning else ' (no voice cloning)'}: {weights}")
    tokenizer = hub.resolve(cfg.flow_lm.lookup_table.tokenizer_path, model_id=model_id)
    typer.echo(f"tokenizer: {tokenizer}")
    if released:
        wanted = registry.PREDEFINED_VOICES if all_voices else (registry.default_voice(name),)
        for v in wanted:
            path = hub.resolve(registry.predefined_voice_ref(name, v), model_id=model_id)
            typer.echo(f"voice {v}: {path}")


@models_app.command("random", context_settings=_SETTINGS)
def models_random(
    config: Annotated[str, typer.Option(
        help="Released config name to copy the shapes from (e.g. english, english_2m_2026-10, "
             "qwen3-tts/0.6b-customvoice).",
        show_default=False)],
    out: Annotated[str, typer.Option(help="Folder to write the checkpoint into: new or empty "
                                          "(see --force).", show_default=False)],
    seed: Annotated[int, typer.Option(help="Seed of the random weights and tokenizer "
                                           "(0 to 4294967295).")] = 0,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace the checkpoint already in --out (and everything in that "
                        "folder); other non-empty folders are always refused.")] = False,
    absolute_paths: Annotated[bool, typer.Option(
        "--absolute-paths", help="Write absolute paths into config.yaml, so that pocket-tts "
                                 "loads it from any folder (default: paths relative to the "
                                 "checkpoint folder, which can then be moved or copied).")]
    = False,
    tiny: Annotated[bool, typer.Option(
        "--tiny", help="Qwen3-TTS only: toy sizes with the same structure (for tests).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
) -> None:
    """Write a random-weight checkpoint (official layout) for tests and offline use.

    Pocket TTS: prints the YAML path, then a ready-to-run generate command. Qwen3-TTS: prints
    the checkpoint folder (config.json, model.safetensors, tokenizer files, speech_tokenizer/).
    """
    _setup_logging(quiet)
    from vocalis.models.pocket.random_checkpoint import MAX_SEED, write_random_checkpoint

    if not 0 <= seed <= MAX_SEED:
        raise InputError(f"--seed must be in [0, {MAX_SEED}], got {seed}")
    out_dir = Path(out).expanduser()
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir} exists and is not a folder")
    if config.lower().startswith(("qwen3-tts/", "qwen/")):
        from vocalis.models.qwen3 import random_checkpoint as qwen3_random

        from vocalis.models.pocket.random_checkpoint import is_random_checkpoint
        from vocalis.outputs import place_folder

        qwen3_random.registry.config(config, tiny)  # an unknown id is refused before any file
        out_dir = out_dir.absolute()
        try:
            place_folder(out_dir, lambda tmp: qwen3_random.write_random_checkpoint(
                config, tmp, seed=seed, tiny=tiny), force, is_random_checkpoint)
        except OSError as e:
            raise InputError(f"cannot write the checkpoint into {out}: {e.strerror or e}") from None
        typer.echo(str(out_dir))
        return
    if tiny:
        raise InputError("--tiny applies to qwen3-tts models only; for Pocket TTS use the smallest "
                         "released config, english_2m_2026-10")
    name = config.removeprefix("pocket-tts/")
    try:
        yaml_path = write_random_checkpoint(name, out_dir, seed=seed, force=force,
                                            relative_paths=not absolute_paths)
    except OSError as e:
        raise InputError(f"cannot write the checkpoint into {out}: {e.strerror or e}") from None
    folder = yaml_path.parent
    typer.echo(str(yaml_path.resolve()))
    typer.echo(f"vocalis generate --model {shlex.quote(str(folder))} --voice "
               f"{shlex.quote(str(folder / 'voice.wav'))} --text 'Hello from vocalis.' "
               "-o out.wav")


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
    model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)] = DEFAULT_MODEL,
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
        "--session-options", help='JSON object: engine settings ("max_batch", "max_queue", '
        '"quantize") and default sampling options for every request ("temperature", '
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
             "mean TTFA %s ms, peak RSS %.0f MB, %d in flight",
             s["ok"], s["ok"] + s["failed"], s["audio_s"] or 0.0, (s["wall_ms"] or 0) / 1000,
             f"{s['x_real_time']:.2f}" if s["x_real_time"] else "-",
             f"{ttfa:.0f}" if ttfa is not None else "-", s["peak_rss_mb"] or 0,
             report["batch_size"])
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
def bench(
    text: Annotated[list[str], typer.Option(
        "--text", "-t", help="A benchmark text of 80+ characters; give at least two distinct "
                             "ones.", show_default=False)],
    voice: Annotated[str | None, typer.Option(
        "--voice", "-v", help="Voice name, audio file or .safetensors voice state (needed for "
                              "non-released models and --against official). Qwen3-TTS: Base: "
                              "a reference audio file (cloned x-vector only); CustomVoice: a "
                              "speaker name.",
        show_default=False)] = None,
    model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)] = DEFAULT_MODEL,
    speaker: Annotated[str | None, typer.Option(
        help="Qwen3-TTS CustomVoice: built-in speaker. Default: the model's first.",
        show_default=False)] = None,
    instruct: Annotated[str | None, typer.Option(
        help="Qwen3-TTS VoiceDesign: voice description (default: a calm, clear adult voice); "
             "1.7B CustomVoice: style instruction.", show_default=False)] = None,
    language: Annotated[str | None, typer.Option(
        help="Qwen3-TTS: language (e.g. english; default the model's auto).",
        show_default=False)] = None,
    greedy: Annotated[bool, typer.Option(
        "--greedy", help="Qwen3-TTS: argmax sampling on both sides (do_sample=False, "
                         "subtalker_dosample=False).")] = False,
    streaming_text: Annotated[bool | None, typer.Option(
        "--streaming-text/--whole-text", help=STREAMING_TEXT_HELP + " Both sides.",
        show_default=False)] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    threads: Annotated[int | None, typer.Option(
        help="CPU threads for torch (with --against, the official package also runs at this "
             "count, beside its as-shipped run for Pocket TTS). Default: torch's choice.",
        show_default=False)] = None,
    concurrency: Annotated[int, typer.Option(
        "--concurrency", "-c", help="Requests in flight at once (1-256).")] = 1,
    frames: Annotated[int | None, typer.Option(
        help="Ignore end of speech: exactly this many frames (80 ms) per text chunk, on both "
             "sides with --against (for random-weight checkpoints).", show_default=False)] = None,
    requests: Annotated[int | None, typer.Option(
        "--requests", "-n", help="Requests per pass (text i mod number of texts, seed "
                                 "SEED+i). Default: max(texts, concurrency).",
        show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="Seed of request 0 (request i gets SEED+i).")] = 0,
    against: Annotated[str | None, typer.Option(
        "--against", help="official: also run the official pocket-tts (one request at a time, "
                          "own process) on the same checkpoint, texts and seeds, as shipped "
                          "(1 thread) and at --threads (once when that is 1), and print ratios "
                          "against the faster. Qwen3-TTS: the official qwen-tts in the "
                          "interpreter $VOCALIS_QWEN_PYTHON, at --threads.",
        show_default=False)] = None,
    quantize: Annotated[bool, typer.Option(
        help="vocalis side: dynamic int8 linears (Pocket FlowLM; Qwen3 talker and code "
             "predictor; CPU; faster, not bit-identical).")] = False,
    quantize_mode: Annotated[str | None, typer.Option(
        "--quantize-mode", help=QUANTIZE_MODE_HELP, show_default=False)] = None,
    official_quantize: Annotated[bool, typer.Option(
        "--official-quantize", help="Load the official model with quantize=True (its int8 "
                                    "path).")] = False,
    session_options: Annotated[str | None, typer.Option(
        "--session-options", help='JSON object of engine settings: {"max_batch": N, '
                                  '"max_queue": N}. Default: max_batch = concurrency.',
        show_default=False)] = None,
    json_out: Annotated[str | None, typer.Option(
        "--json", help="Write the full report (schema vocalis.bench) to this JSON file.",
        show_default=False)] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    tuning: Annotated[str | None, typer.Option(help=TUNING_HELP, show_default=False)] = None,
) -> None:
    """Benchmark: one excluded pass then one measured pass; TTFA, x real time, throughput at
    a concurrency, peak RSS; optionally against the official package. Prints the CPU, its
    ISA flags, the thread count and the speed choices the model runs with."""
    _setup_logging(quiet)
    import json

    from vocalis.bench.batch import LOAD_KEYS, parse_session_options
    from vocalis.bench.benchmark import check_texts, render_table, run_bench

    check_texts(text)
    engine_kw, extra = parse_session_options(session_options)
    if quantize or quantize_mode is not None:
        from vocalis.api import quantize_mode as mode_of

        flag = _quantize(quantize, quantize_mode)
        if "quantize" in engine_kw and mode_of(engine_kw["quantize"]) != mode_of(flag):
            raise InputError(f"--session-options quantize {engine_kw['quantize']!r} contradicts "
                             f"--quantize/--quantize-mode ({flag!r}): give one of them")
        engine_kw["quantize"] = flag
    if tuning is not None:
        engine_kw["tuning"] = tuning
    if extra:
        raise InputError(f"--session-options for bench takes only {', '.join(LOAD_KEYS)}; use "
                         f"--frames for fixed lengths (got {', '.join(sorted(extra))})")
    if against is not None and against != "official":
        raise InputError(f"--against {against!r}: only 'official' is supported")
    json_path = None
    if json_out is not None:
        json_path = Path(json_out).expanduser()
        if json_path.is_dir() or not json_path.parent.is_dir():
            raise InputError(f"--json {json_path}: not a file in an existing folder")
    from vocalis import api

    qwen3 = api.is_qwen3(model.strip())
    nsm = None if streaming_text is None else not streaming_text
    _family_options(model, qwen3, {}, _sampling(speaker=speaker, instruct=instruct, language=language,
                                                greedy=greedy or None, non_streaming_mode=nsm),
                    "float32")
    if voice is None and not qwen3 and not api.resolve_model_id(model)[2]:
        raise VoiceError(f"model {model} is not a released model, so it has no predefined "
                         "voices: pass --voice AUDIO_FILE or --voice VOICE.safetensors")
    report = run_bench(model.strip() if qwen3 else model, text, voice, device=device,
                       threads=threads, concurrency=concurrency, frames=frames, requests=requests,
                       seed=seed, against=against, official_quantize=official_quantize,
                       session_options=engine_kw,
                       sampling=_sampling(greedy=greedy or None, non_streaming_mode=nsm) or None,
                       speaker=speaker,
                       instruct=instruct, language=language)
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
def serve(
    model: Annotated[list[str] | None, typer.Option(
        "--model", "-m", metavar="MODEL", help=MODEL_HELP + " Repeat to serve several models (each request's "
                                           "`model` picks one; the first is the default). "
                                           "[default: pocket-tts]",
        show_default=False)] = None,
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
) -> None:
    """Serve the OpenAI speech API, voices, metrics and a web page (FastAPI + uvicorn, or
    Ray Serve replicas with --ray)."""
    _setup_logging(quiet)
    models = model or [DEFAULT_MODEL]
    if ray:
        _serve_ray(models, host=host, port=port, voices_dir=voices_dir, api_key=api_key,
                   max_batch=max_batch, max_queue=max_queue, device=device, threads=threads,
                   voice=voice, max_input_chars=max_input_chars, shutdown_timeout=shutdown_timeout,
                   model_name=model_name, normalize=normalize, ray_address=ray_address,
                   replicas=replicas, autoscale=autoscale, replica_cpus=replica_cpus,
                   replica_gpus=replica_gpus, ray_cpus=ray_cpus,
                   quantize=_quantize(quantize, quantize_mode))
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
        quantize=_quantize(quantize, quantize_mode))


def _serve_ray(models: list[str], *, ray_address: str | None, replicas: int | None,
               autoscale: str | None, **kw) -> None:
    """``vocalis serve --ray``: the same app on Ray Serve replicas."""
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
               autoscale=autoscale, on_ready=ready, **kw)


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
    from vocalis.text.normalize import normalize

    if text == "-":
        text = sys.stdin.read()
    typer.echo(normalize(text, language))


# --------------------------------------------------------------------------- wyoming


@app.command(context_settings=_SETTINGS)
def wyoming(
    uri: Annotated[str, typer.Option(help="Where to listen: tcp://HOST:PORT (0.0.0.0 for every "
                                          "interface) or unix://PATH.")] = "tcp://127.0.0.1:10200",
    model: Annotated[str, typer.Option("--model", "-m", metavar="MODEL", help=MODEL_HELP)]
    = DEFAULT_MODEL,
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
) -> None:
    """Serve a model to Home Assistant over the Wyoming protocol (no zeroconf)."""
    _setup_logging(quiet)
    from vocalis.wyoming import run as run_wyoming

    def ready(where: str) -> None:
        typer.echo(f"vocalis: Wyoming server for {model} at {where}", err=True)

    run_wyoming(model, uri, voice=voice, voices_dir=voices_dir, max_batch=max_batch,
                threads=threads, seed=seed, device=device, max_input_chars=max_input_chars,
                on_ready=ready, normalize=normalize)


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
        _error(str(e) or type(e).__name__)
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
