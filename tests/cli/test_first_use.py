"""What a new user meets on a first try (issue: first-use report): the flag named in an error
is the one typed, `say` without a server is a failure (exit 1) rather than a mistake (exit
2), `-o -` is called stdout, the first measurement of speed choices is announced, and the
Python example ends in one line, not a traceback."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from vocalis import cli
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

REPO = Path(__file__).resolve().parents[2]
SMALL = "english_2m_2026-10"
#: every speed choice of a Pocket TTS load forced but one (codec_pipeline): a measurement
#: that takes about a second and runs alike on any CPU with 2 threads
TUNING = "flow_linears=default,codec_linears=default,codec_elu=default,threads=1:1"
MEASURING = "measuring speed choices for this CPU"


def _env(**extra) -> dict:
    src = str(REPO / "src")
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "HF_HUB_OFFLINE": "1", "LC_ALL": "C.UTF-8", "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": src + (os.pathsep + path if path else ""), **extra}


def _one_line(err: str, code: int, rc: int) -> str:
    lines = err.strip().splitlines()
    assert rc == code, (rc, lines)
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.fixture(scope="module")
def ckpt(checkpoints) -> Path:
    return checkpoints.get(SMALL)


@pytest.fixture(scope="module")
def customvoice(tmp_path_factory) -> Path:
    return write_random_checkpoint("qwen3-tts/0.6b-customvoice",
                                   tmp_path_factory.mktemp("q") / "qckpt", seed=1, tiny=True)


@pytest.fixture(scope="module")
def qwen_base(tmp_path_factory) -> Path:
    return write_random_checkpoint("qwen3-tts/0.6b-base",
                                   tmp_path_factory.mktemp("q") / "qbase", seed=1, tiny=True)


# --------------------------------------------------------------------------- the flag typed


@pytest.mark.parametrize("given,flag", [
    (["--speaker", "nobody"], "--speaker"),
    (["--speaker=nobody"], "--speaker"),
    (["--voice", "nobody"], "--voice"),
    (["-v", "nobody"], "--voice"),
])
def test_an_unknown_speaker_names_the_flag_that_gave_it(customvoice, tmp_path, capsys, given,
                                                         flag):
    out = tmp_path / "never.wav"
    rc = cli.main(["generate", "--model", str(customvoice), *given, "--text", "Hi.",
                   "-o", str(out)])
    line = _one_line(capsys.readouterr().err, 2, rc)
    assert "unknown speaker 'nobody'" in line and line.endswith(f"({flag})"), line
    assert not out.exists()


@pytest.mark.parametrize("base,given,flag", [
    (False, ["--speaker", "ryan", "--ref-text", "Some words."], "--ref-text"),
    (False, ["--speaker", "ryan", "--xvector-only"], "--xvector-only"),
    (True, ["--voice", "{saved}", "--xvector-only"], "--xvector-only"),
    (True, ["--voice", "{saved}", "--ref-text", "Some words."], "--ref-text"),
])
def test_a_misused_reference_option_names_the_flag_given(customvoice, request, tmp_path,
                                                          capsys, base, given, flag):
    """Qwen3-TTS reference options where they do not apply (a CustomVoice model; a saved
    voice-clone prompt) are refused naming the flag the user gave (old code: --ref-audio
    for a CustomVoice model given --ref-text or --xvector-only, --ref-text for a saved
    prompt given --xvector-only)."""
    model = request.getfixturevalue("qwen_base") if base else customvoice
    saved = tmp_path / "saved.safetensors"
    saved.write_bytes(b"")  # refused before it is read
    out = tmp_path / "never.wav"
    rc = cli.main(["generate", "--model", str(model), *[g.format(saved=saved) for g in given],
                   "--text", "Hi.", "-o", str(out)])
    line = _one_line(capsys.readouterr().err, 2, rc)
    assert line.endswith(f"({flag})"), line
    assert not out.exists()


# --------------------------------------------------------------------------- say


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_say_without_a_server_is_a_failure_naming_the_url(tmp_path, capsys, scheme):
    # docs/cli.md: 2 is a mistake in the input, 1 any other failure (no server there)
    url = f"{scheme}://127.0.0.1:{_free_port()}/v1/audio/speech/stream"
    out = tmp_path / "said.wav"
    rc = cli.main(["say", "--url", url, "--text", "Hi.", "-o", str(out)])
    line = _one_line(capsys.readouterr().err, 1, rc)
    assert f"cannot connect to {url}" in line and "connection refused" in line, line
    assert not out.exists()


@pytest.mark.parametrize("url,why", [
    ("ftp://127.0.0.1/x", "the scheme must be one of ws, wss, http, https, not 'ftp'"),
    ("127.0.0.1:8000", "it has no scheme (http://, ws://...)"),
    ("localhost:8000", "it has no scheme (http://, ws://...)"),
    ("ws:///no-host", "it names no host"),
    ("ws://127.0.0.1:99999/v1/audio/speech/stream", "out of range")])
def test_say_with_a_bad_url_is_a_mistake(tmp_path, capsys, url, why):
    """One line, exit 2, saying what is wrong with the URL and what to give instead."""
    rc = cli.main(["say", "--url", url, "--text", "Hi.", "-o", str(tmp_path / "said.wav")])
    line = _one_line(capsys.readouterr().err, 2, rc)
    assert f"bad URL {url!r}: " in line and why in line, line
    assert line.endswith("use the server's base URL, http://HOST:PORT (or "
                         "ws://HOST:PORT/v1/audio/speech/stream)"), line


# --------------------------------------------------------------------------- stdout


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_a_full_stdout_is_called_stdout(ckpt):
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([sys.executable, "-m", "vocalis.cli", "generate", "--text",
                               "Hello there.", "-m", str(ckpt), "--voice", str(ckpt / "voice.wav"),
                               "-o", "-"], check=False, stdout=full, stderr=subprocess.PIPE,
                              env=_env(), timeout=300)
    line = _one_line(proc.stderr.decode(), 2, proc.returncode)
    assert "cannot write stdout: No space left" in line and "cannot write -" not in line, line


# --------------------------------------------------------------------------- speed choices


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="measures with 2 threads")
def test_generate_says_before_it_measures_and_not_when_cached(ckpt, tmp_path, capsys,
                                                              monkeypatch):
    monkeypatch.setenv("VOCALIS_CACHE", str(tmp_path / "cache"))
    args = ["generate", "--text", "Hi.", "-m", str(ckpt), "--voice", str(ckpt / "voice.wav"),
            "--max-frames", "2", "--threads", "2", "--tuning", TUNING,
            "-o", str(tmp_path / "a.wav")]
    assert cli.main(args) == 0
    err = capsys.readouterr().err.splitlines()
    said = [i for i, line in enumerate(err) if line.startswith(MEASURING)]
    done = [i for i, line in enumerate(err) if line.startswith("tuning measured in")]
    assert len(said) == 1 and len(done) == 1 and said[0] < done[0], err
    assert cli.main(args) == 0  # the choice is cached now: nothing measured, nothing said
    err = capsys.readouterr().err
    assert MEASURING not in err and "tuning measured" not in err, err
    # quiet: neither line
    monkeypatch.setenv("VOCALIS_CACHE", str(tmp_path / "cache2"))
    assert cli.main([*args, "-q"]) == 0
    assert MEASURING not in capsys.readouterr().err


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="measures with 2 threads")
def test_serve_says_before_it_measures(ckpt, tmp_path):
    env = _env(VOCALIS_CACHE=str(tmp_path / "cache"), VOCALIS_TUNING=TUNING)
    p = subprocess.Popen([sys.executable, "-m", "vocalis", "serve", "--host", "127.0.0.1",
                          "--port", "0", "--model", str(ckpt), "--voice", str(ckpt / "voice.wav"),
                          "--threads", "2"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in p.stdout:
            lines.append(line.rstrip())
            if re.search(r"serving .* at http://", line):
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(240) and p.poll() is None, lines
    finally:
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
    said = [i for i, line in enumerate(lines) if line.startswith(MEASURING)]
    done = [i for i, line in enumerate(lines) if line.startswith("tuning measured in")]
    assert len(said) == 1 and len(done) == 1 and said[0] < done[0], lines


# --------------------------------------------------------------------------- the example


def test_python_example_offline_without_the_model_is_one_line(tmp_path):
    # the released model is not in this (empty) cache: ModelNotFound, caught as VocalisError
    hf = tmp_path / "hf"
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "python_api.py"),
                           "--out", str(tmp_path / "hello.wav")], check=False, capture_output=True,
                          text=True,
                          env=_env(HF_HOME=str(hf), HF_HUB_CACHE=str(hf / "hub")), cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "vocalis models download pocket-tts" in lines[0]
    assert not (tmp_path / "hello.wav").exists()
