"""``vocalis reference ...``: export / replay / compare fixtures against the official package.

    vocalis reference export --model pocket-tts --voice alba --text "Hello." --seed 0 --out fx/
    vocalis reference replay --fixture fx/ --chunk-frames 1 -o replay.wav
    vocalis reference compare --fixture fx/ --candidate replay.wav --out fx/cmp

Exit codes: 0 success / comparison passed; 1 comparison failed; 2 bad input (missing file,
unknown model or voice, bad options), with one line on stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from vocalis.errors import InputError, VocalisError

app = typer.Typer(
    name="reference",
    help="Prove parity with the official packages: export fixtures, replay them through "
         "vocalis, compare waveforms.",
    no_args_is_help=True,
    add_completion=False,
)


def _fail(e: Exception) -> None:
    typer.echo(f"error: {e}", err=True)
    raise typer.Exit(2)


@app.command()
def export(
    out: Annotated[Path, typer.Option("--out", help="Fixture directory to write.")],
    voice: Annotated[str, typer.Option(help="Audio file, predefined voice name, or .safetensors "
                                            "voice state.")],
    model: Annotated[str, typer.Option(help="pocket-tts, pocket-tts/<config>, or a YAML "
                                            "config path.")] = "pocket-tts",
    text: Annotated[Optional[str], typer.Option(help="Text to speak.")] = None,
    text_file: Annotated[Optional[Path], typer.Option(help="Read the text from this UTF-8 "
                                                           "file.")] = None,
    seed: Annotated[int, typer.Option(help="torch.manual_seed before generation.")] = 0,
    temperature: Annotated[Optional[float], typer.Option(help="Sampling temperature "
                                                              "(config default).")] = None,
    eos_threshold: Annotated[Optional[float], typer.Option(help="EOS threshold "
                                                                "(config default).")] = None,
    frames_after_eos: Annotated[Optional[int], typer.Option(help="Frames generated after "
                                                                 "EOS.")] = None,
    noise_clamp: Annotated[Optional[float], typer.Option(help="Noise clamp.")] = None,
    sampler_decode_steps: Annotated[Optional[int], typer.Option(help="Flow decode "
                                                                     "steps.")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(help="Maximum tokens per text "
                                                           "chunk (50).")] = None,
    decoder_frames_per_call: Annotated[Optional[int], typer.Option(
        help="Official max_decoder_frames_per_call: 0 = whatever has queued (default), "
             "1 = frame by frame.")] = None,
) -> None:
    """Run the official pocket-tts once (seeded) and write a fixture."""
    from vocalis.reference.export import export_fixture

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


@app.command()
def replay(
    fixture: Annotated[Path, typer.Option(help="Fixture directory (or a file in it).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="WAV to write (float32).")],
    chunk_frames: Annotated[Optional[int], typer.Option(help="Frames per decode call.")] = None,
    full_decoder: Annotated[bool, typer.Option(help="One decode call per text chunk.")] = False,
    model: Annotated[Optional[str], typer.Option(help="vocalis model id (default: the "
                                                      "fixture's).")] = None,
) -> None:
    """Decode the fixture's official latents with vocalis's Mimi decoder."""
    from vocalis.reference.export import _write_float_wav
    from vocalis.reference.replay import load_fixture, replay_fixture

    try:
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


@app.command()
def compare(
    fixture: Annotated[Path, typer.Option(help="Fixture directory or reference WAV.")],
    candidate: Annotated[Path, typer.Option(help="Candidate WAV.")],
    out: Annotated[Path, typer.Option("--out", help="Directory for comparison.json.")],
) -> None:
    """Compare a candidate WAV with the fixture's official waveform (exit 1 on failure)."""
    from vocalis.reference.compare import compare as _compare, summary

    try:
        if not fixture.expanduser().exists():
            raise InputError(f"fixture not found: {fixture}")
        report = _compare(fixture, candidate, out)
    except VocalisError as e:
        _fail(e)
    typer.echo(summary(report))
    if not report["pass"]:
        raise typer.Exit(1)


if __name__ == "__main__":  # pragma: no cover
    app()
