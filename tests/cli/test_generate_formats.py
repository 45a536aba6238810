"""``vocalis generate``: the -o extension (or --format) chooses the format, files carry
exact lengths, ``--speed`` stretches, Ctrl-C says what was left.

Format runs go through :func:`vocalis.cli.main` in-process (the real command line, without
paying a Python start per run); the Ctrl-C test is a real subprocess sent SIGINT. Every
file is read back by soundfile, ``wave``, PyAV or ffprobe, never by vocalis.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import wave
from pathlib import Path

import numpy as np
import pytest

av = pytest.importorskip("av")

import soundfile as sf

from vocalis.cli import main

TEXT = "Hello there, which format is this?"
RATE = 24000


@pytest.fixture(scope="module")
def ckpt(checkpoints) -> Path:
    return checkpoints.get("english_2m_2026-10")


def gen(ckpt: Path, *extra: str) -> int:
    return main(["generate", "--model", str(ckpt), "--voice", str(ckpt / "voice.wav"),
                 "--text", TEXT, "--seed", "5", "-q", *extra])


@pytest.fixture(scope="module")
def reference(ckpt, tmp_path_factory) -> np.ndarray:
    path = tmp_path_factory.mktemp("ref") / "ref.wav"
    assert gen(ckpt, "-o", str(path)) == 0
    with wave.open(str(path)) as w:  # exact sizes in the header of a finished file
        n = w.getnframes()
        data = w.readframes(n)
    assert len(data) == 2 * n == path.stat().st_size - 44
    return np.frombuffer(data, "<i2")


def container(path: Path) -> tuple[str, str, int]:
    """(container format, codec, decoded samples) as ffmpeg sees the file."""
    with av.open(str(path)) as c:
        s = c.streams.audio[0]
        n = sum(f.samples for f in c.decode(audio=0))
        return c.format.name, s.codec_context.name, n


@pytest.mark.parametrize("suffix,fmt,codec", [
    (".mp3", "mp3", "mp3"), (".flac", "flac", "flac"), (".ogg", "ogg", "opus"),
    (".opus", "ogg", "opus"), (".aac", "aac", "aac")])
def test_extension_gives_the_format(ckpt, reference, tmp_path, suffix, fmt, codec):
    path = tmp_path / f"out{suffix}"
    assert gen(ckpt, "-o", str(path)) == 0
    assert not path.read_bytes().startswith(b"RIFF")
    got_fmt, got_codec, n = container(path)
    assert fmt in got_fmt.split(",") and got_codec.startswith(codec)
    want = reference.shape[0]
    if codec == "opus":
        assert n == 2 * want  # decoded at 48 kHz, pre-skip trimmed
    elif codec == "aac":
        assert want <= n <= want + 2048  # ADTS keeps its priming samples
    else:
        assert n == want  # FLAC STREAMINFO; MP3 Xing/LAME gapless tag
    if suffix in (".flac", ".mp3", ".ogg"):
        assert sf.info(str(path)).frames == want
    if suffix == ".flac":
        np.testing.assert_array_equal(sf.read(str(path), dtype="int16")[0], reference)


def test_pcm_and_explicit_format(ckpt, reference, tmp_path):
    raw = tmp_path / "out.pcm"
    assert gen(ckpt, "-o", str(raw)) == 0
    np.testing.assert_array_equal(np.frombuffer(raw.read_bytes(), "<i2"), reference)
    odd = tmp_path / "out.bin"
    assert gen(ckpt, "-o", str(odd), "--format", "flac") == 0
    assert sf.info(str(odd)).format == "FLAC" and sf.info(str(odd)).frames == reference.shape[0]
    ogg = tmp_path / "out.ogg"  # a file extension names its format too: ogg is opus
    assert gen(ckpt, "-o", str(ogg), "--format", "ogg") == 0
    with av.open(str(ogg)) as c:
        assert c.format.name == "ogg" and c.streams.audio[0].codec_context.name == "opus"


def test_stdout_streams_the_chosen_format(ckpt, reference, capsysbinary):
    assert gen(ckpt, "-o", "-", "--format", "mp3") == 0
    data = capsysbinary.readouterr().out
    with av.open(io.BytesIO(data)) as c:
        assert c.format.name == "mp3"
        n = sum(f.samples for f in c.decode(audio=0))
    assert reference.shape[0] <= n <= reference.shape[0] + 2400  # a stream: no gapless tag


@pytest.mark.parametrize("extra,needle", [
    (("-o", "out.xyz"), "extension"),
    (("-o", "out"), "extension"),
    (("-o", "out.wav", "--format", "mp3"), "does not match"),
    (("-o", "out.wav", "--format", "ogx"), "unknown --format"),
    (("-o", "out.wav", "--format", "ogg"), "does not match"),  # ogg is opus's extension
    (("-o", "out.wav", "--speed", "9"), "speed must be a number in [0.25, 4.0]"),
    (("-o", "out.wav", "--speed", "0.1"), "speed must be a number in [0.25, 4.0]"),
    (("-o", "out.wav", "--speed", "nan"), "speed must be a finite number between 0.25 and 4.0"),
    (("-o", "out.wav", "--speed", "inf"), "speed must be a finite number between 0.25 and 4.0"),
])
def test_refusals_are_one_line_exit_2(ckpt, tmp_path, capsys, monkeypatch, extra, needle):
    monkeypatch.chdir(tmp_path)
    assert gen(ckpt, *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0], err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_speed_option(ckpt, reference, tmp_path):
    path = tmp_path / "fast.wav"
    assert gen(ckpt, "-o", str(path), "--speed", "2") == 0
    with wave.open(str(path)) as w:
        assert w.getnframes() == round(reference.shape[0] / 2)


@pytest.mark.slow
def test_ctrl_c_says_interrupted_and_leaves_a_playable_partial_file(ckpt, tmp_path):
    path = tmp_path / "long.flac"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen([sys.executable, "-m", "vocalis.cli", "generate", "--model", str(ckpt),
                          "--voice", str(ckpt / "voice.wav"), "--text", "Hello there. " * 300,
                          "-o", str(path)], stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 120
    while not (path.exists() and path.stat().st_size > 5000):
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: interrupted: ")
    assert str(path) in lines[0] and "partial" in lines[0]
    seconds = float(lines[0].split("first ")[1].split(" s")[0])
    info = sf.info(str(path))  # finalized: STREAMINFO holds the true length
    assert info.frames > 0 and abs(info.frames / RATE - seconds) < 0.01


def test_reader_that_goes_away_stops_generate_quietly(ckpt):
    """``vocalis generate -o - | head -c 100``: the closed pipe ends it with 141 (128 +
    SIGPIPE, as a shell tool) and nothing on stderr."""
    p = subprocess.Popen([sys.executable, "-m", "vocalis.cli", "generate", "--model", str(ckpt),
                          "--voice", str(ckpt / "voice.wav"), "--text", "Hello there. " * 40,
                          "--seed", "1", "-q", "-o", "-"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = p.stdout.read(100)  # the reader takes 100 bytes, then goes away
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=300) == 141, err.decode()
    assert head[:4] == b"RIFF" and err == b""
