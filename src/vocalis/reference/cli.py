"""``vocalis reference ...``: export / replay / compare fixtures against the official package.

    vocalis reference export --model pocket-tts --voice alba --text "Hello." --seed 0 --out fx/
    vocalis reference replay --fixture fx/ --chunk-frames 1 -o replay.wav
    vocalis reference compare --fixture fx/ --candidate replay.wav --out fx/cmp

Qwen3-TTS (the model option decides the family: ``qwen3-tts/...``, ``Qwen/Qwen3-TTS-12Hz-...`` or
a local checkpoint folder whose config.json has model_type qwen3_tts; see
:mod:`vocalis.reference.qwen3`):

    vocalis reference export --model ckpt/ --speaker Ryan --text "Hello." --seed 0 --out fx/
    vocalis reference replay --fixture fx/ -o fx/replay/
    vocalis reference compare --fixture fx/ [--candidate fx/replay/] --out fx/cmp

Exit codes: 0 success / comparison passed; 1 comparison failed; 2 bad input (missing file,
unknown model or voice, bad options), with one line on stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from vocalis.errors import InputError, VocalisError
from vocalis.reference import qwen3
from vocalis.reference.compare import compare as _compare
from vocalis.reference.compare import summary
from vocalis.reference.export import _write_float_wav, export_fixture
from vocalis.reference.qwen3 import export_fixture as export_qwen3
from vocalis.reference.qwen3 import is_qwen3_fixture, is_qwen3_model
from vocalis.reference.replay import load_fixture, replay_fixture

app = typer.Typer(
    name="reference",
    help="Prove parity with the official packages: export fixtures, replay them through "
         "vocalis, compare waveforms.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


# export's help panels
_FIXTURE = "Fixture"
_POCKET = "Pocket TTS"
_QWEN3 = "Qwen3-TTS"


def _fail(e: Exception) -> None:
    typer.echo(f"error: {e}", err=True)
    raise typer.Exit(2)


@app.command(context_settings={"help_option_names": ["-h", "--help"]})
def export(
    out: Annotated[Path, typer.Option("--out", metavar="DIR", rich_help_panel=_FIXTURE,
                                      help="Fixture directory to write.")],
    model: Annotated[str, typer.Option(
        "--model", metavar="MODEL", rich_help_panel=_FIXTURE,
        help="pocket-tts, pocket-tts/CONFIG or a YAML config; or a Qwen3-TTS id or "
             "checkpoint folder.")] = "pocket-tts",
    text: Annotated[Optional[str], typer.Option("--text", metavar="TEXT", rich_help_panel=_FIXTURE,
                                                help="Text to speak.")] = None,
    text_file: Annotated[Optional[Path], typer.Option(
        metavar="FILE", rich_help_panel=_FIXTURE,
        help="Read the text from this UTF-8 file.")] = None,
    seed: Annotated[int, typer.Option(metavar="N", rich_help_panel=_FIXTURE,
                                      help="torch.manual_seed before generation.")] = 0,
    voice: Annotated[str | None, typer.Option(
        "--voice", metavar="VOICE", rich_help_panel=_POCKET,
        help="Audio file, predefined voice name, or .safetensors voice state.")] = None,
    temperature: Annotated[Optional[float], typer.Option(
        metavar="X", rich_help_panel=_POCKET, help="Sampling temperature (config default).")]
    = None,
    eos_threshold: Annotated[Optional[float], typer.Option(
        metavar="X", rich_help_panel=_POCKET, help="EOS threshold (config default).")] = None,
    frames_after_eos: Annotated[Optional[int], typer.Option(
        metavar="N", rich_help_panel=_POCKET, help="Frames generated after EOS.")] = None,
    noise_clamp: Annotated[Optional[float], typer.Option(
        metavar="X", rich_help_panel=_POCKET, help="Noise clamp.")] = None,
    sampler_decode_steps: Annotated[Optional[int], typer.Option(
        metavar="N", rich_help_panel=_POCKET, help="Flow decode steps.")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(
        metavar="N", rich_help_panel=_POCKET, help="Maximum tokens per text chunk (50).")]
    = None,
    decoder_frames_per_call: Annotated[Optional[int], typer.Option(
        metavar="N", rich_help_panel=_POCKET,
        help="Official max_decoder_frames_per_call: 0 = whatever has queued (default), "
             "1 = frame by frame.")] = None,
    speaker: Annotated[str | None, typer.Option(metavar="NAME", rich_help_panel=_QWEN3,
                                                help="CustomVoice speaker.")] = None,
    language: Annotated[str | None, typer.Option(metavar="LANG", rich_help_panel=_QWEN3,
                                                 help="Language (default Auto).")] = None,
    instruct: Annotated[str | None, typer.Option(
        metavar="TEXT", rich_help_panel=_QWEN3,
        help="Instruct (VoiceDesign: the voice description).")] = None,
    ref_audio: Annotated[Path | None, typer.Option(
        metavar="FILE", rich_help_panel=_QWEN3, help="Base: reference audio to clone.")] = None,
    ref_text: Annotated[str | None, typer.Option(
        metavar="TEXT", rich_help_panel=_QWEN3,
        help="Base: words of the reference audio (in-context cloning).")] = None,
    xvector_only: Annotated[bool, typer.Option(
        "--xvector-only", rich_help_panel=_QWEN3,
        help="Base: clone from the speaker embedding only.")] = False,
    greedy: Annotated[bool, typer.Option("--greedy", rich_help_panel=_QWEN3,
                                         help="Argmax instead of sampling.")] = False,
    max_new_tokens: Annotated[int | None, typer.Option(metavar="N", rich_help_panel=_QWEN3,
                                                       help="Generation limit.")] = None,
) -> None:
    """Run the official package once (seeded) and write a fixture."""
    try:
        if text is not None and text_file is not None:
            raise InputError("give --text or --text-file, not both")
        if text_file is not None:
            try:
                text = text_file.expanduser().read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise InputError(f"cannot read text file {text_file}: {e}") from None
        if text is None:
            raise InputError("give the text with --text or --text-file")
        if is_qwen3_model(model):
            _export_qwen3(model, out, text, speaker, language, instruct, ref_audio, ref_text,
                          xvector_only, seed, greedy, max_new_tokens,
                          {"voice": voice, "temperature": temperature,
                           "eos_threshold": eos_threshold, "frames_after_eos": frames_after_eos,
                           "noise_clamp": noise_clamp, "sampler_decode_steps": sampler_decode_steps,
                           "max_tokens": max_tokens,
                           "decoder_frames_per_call": decoder_frames_per_call})
            return
        qwen = {"speaker": speaker, "language": language, "instruct": instruct,
                "ref_audio": ref_audio, "ref_text": ref_text, "xvector_only": xvector_only or None,
                "greedy": greedy or None, "max_new_tokens": max_new_tokens}
        given = [k for k, v in qwen.items() if v is not None]
        if given:
            raise InputError(f"--{given[0].replace('_', '-')} is a Qwen3-TTS option; "
                             f"{model} is a Pocket TTS model")
        if voice is None:
            raise InputError("give the voice with --voice (audio file, predefined voice name or "
                             ".safetensors voice state)")
        sampling = dict(temperature=temperature, eos_threshold=eos_threshold,
                        frames_after_eos=frames_after_eos, noise_clamp=noise_clamp,
                        sampler_decode_steps=sampler_decode_steps, max_tokens=max_tokens,
                        decoder_frames_per_call=decoder_frames_per_call)
        d = export_fixture(model, voice, text, out, seed=seed,
                           **{k: v for k, v in sampling.items() if v is not None})
        meta = json.loads((d / "fixture.json").read_text(encoding="utf-8"))
    except VocalisError as e:
        _fail(e)
    t = meta["totals"]
    typer.echo(f"wrote {d}: {t['chunks']} chunk(s), {t['decoder_calls']} decoder call(s), "
               f"{t['frames']} frames, {t['samples']} samples")


def _export_qwen3(model, out, text, speaker, language, instruct, ref_audio, ref_text,
                  xvector_only, seed, greedy, max_new_tokens, pocket_only: dict) -> None:
    given = [k for k, v in pocket_only.items() if v is not None]
    if given:
        raise InputError(f"--{given[0].replace('_', '-')} is a Pocket TTS option; {model} is a "
                         "Qwen3-TTS model")
    d = export_qwen3(model, out, text, speaker=speaker, language=language, instruct=instruct,
                     ref_audio=ref_audio, ref_text=ref_text, xvector_only=xvector_only, seed=seed,
                     greedy=greedy, max_new_tokens=max_new_tokens)
    meta = json.loads((d / "fixture.json").read_text(encoding="utf-8"))
    typer.echo(f"wrote {d}: Qwen3-TTS {meta['mode']}, {meta['frames']} frames, "
               f"{meta['samples']} samples")


@app.command(context_settings={"help_option_names": ["-h", "--help"]})
def replay(
    fixture: Annotated[Path, typer.Option(metavar="DIR",
                                          help="Fixture directory (or a file in it).")],
    output: Annotated[Path, typer.Option("--output", "-o", metavar="FILE",
                                         help="WAV to write (float32; Qwen3: a folder or "
                                              ".wav).")],
    chunk_frames: Annotated[Optional[int], typer.Option(
        metavar="N", help="Pocket: frames per decode call.")] = None,
    full_decoder: Annotated[bool, typer.Option(
        "--full-decoder", help="Pocket: one decode call per text chunk.")] = False,
    model: Annotated[Optional[str], typer.Option(
        "--model", metavar="MODEL", help="vocalis model id (default: the fixture's).")] = None,
) -> None:
    """Replay a fixture through vocalis.

    Pocket: decode the fixture's official latents with vocalis's Mimi decoder. Qwen3:
    rebuild prompt, logits and codes with vocalis, decode the official codes."""
    try:
        if is_qwen3_fixture(fixture):
            if chunk_frames is not None or full_decoder:
                raise InputError("--chunk-frames/--full-decoder are Pocket options; a Qwen3 "
                                 "replay decodes one shot and frame by frame")

            fx = qwen3.load_fixture(fixture)
            wav = qwen3.write_replay(fx, qwen3.replay_fixture(fx, model), output)
            typer.echo(f"wrote {wav} (and its .json/.safetensors/_stream.wav) at "
                       f"{fx.sample_rate} Hz")
            return
        wav = replay_fixture(fixture, chunk_frames=chunk_frames, full_decoder=full_decoder,
                             model=model)
        sr = load_fixture(fixture).sample_rate
        try:
            output.expanduser().parent.mkdir(parents=True, exist_ok=True)
            _write_float_wav(output.expanduser(), wav, sr)
        except Exception as e:  # soundfile errors, permissions
            raise InputError(f"cannot write {output}: {e}") from None
    except VocalisError as e:
        _fail(e)
    typer.echo(f"wrote {output}: {wav.shape[0]} samples at {sr} Hz")


@app.command(context_settings={"help_option_names": ["-h", "--help"]})
def compare(
    fixture: Annotated[Path, typer.Option(metavar="DIR",
                                          help="Fixture directory or reference WAV.")],
    out: Annotated[Path, typer.Option("--out", metavar="DIR",
                                      help="Directory for comparison.json (Qwen3: "
                                           "report.json, summary.txt).")],
    candidate: Annotated[Path | None, typer.Option(
        metavar="FILE",
        help="Candidate WAV (Qwen3: a replay folder or WAV; omitted: replay now).")] = None,
) -> None:
    """Compare a candidate with the fixture's official run (exit 1 on failure)."""
    try:
        if not fixture.expanduser().exists():
            raise InputError(f"fixture not found: {fixture}")
        if is_qwen3_fixture(fixture):
            report = qwen3.compare(fixture, candidate, out)
            typer.echo(qwen3.summary(report))
            if not report["pass"]:
                raise typer.Exit(1)
            return
        if candidate is None:
            raise InputError("give the candidate WAV with --candidate")
        report = _compare(fixture, candidate, out)
    except VocalisError as e:
        _fail(e)
    typer.echo(summary(report))
    if not report["pass"]:
        raise typer.Exit(1)


if __name__ == "__main__":  # pragma: no cover
    app()
