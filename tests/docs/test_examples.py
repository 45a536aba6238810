"""The files of ``examples/`` work: the runnable ones run on a random-weight checkpoint (the
``openai`` script against a real ``vocalis serve`` on 127.0.0.1), the configuration files
name only what vocalis reads, and every ``vocalis`` command shown in the README and the
guides uses options that exist."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import soundfile as sf
import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SMALL = "english_2m_2026-10"  # the smallest config: seconds to write, load and run


def _env() -> dict:
    src = str(REPO / "src")
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": src + (os.pathsep + path if path else "")}


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args], check=False, cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


@pytest.fixture(scope="module")
def ckpt(checkpoints) -> Path:
    return checkpoints.get(SMALL)


def test_python_api_example(ckpt, tmp_path):
    out = tmp_path / "hello.wav"
    proc = _run([str(EXAMPLES / "python_api.py"), "--model", str(ckpt), "--voice",
                 str(ckpt / "voice.wav"), "--max-frames", "4", "--out", str(out)], tmp_path)
    audio, rate = sf.read(out)
    assert rate == 24000 and len(audio) == 4 * 1920  # one text chunk of 4 frames
    assert "streamed 4 chunks" in proc.stdout and "refused as expected" in proc.stdout


class Server:
    """``vocalis serve`` on 127.0.0.1, a free port, until stopped."""

    def __init__(self, args: list[str]):
        self.p = subprocess.Popen([sys.executable, "-m", "vocalis", "serve", "--host", "127.0.0.1",
                                   "--port", "0", *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=_env())
        self.lines: list[str] = []
        self.url: str | None = None
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip())
            m = re.search(r"serving .* at (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
                self.ready.set()
        self.ready.set()

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(10)


def test_openai_client_example_against_vocalis_serve(ckpt, tmp_path):
    pytest.importorskip("openai")
    server = Server(["--model", str(ckpt), "--voice", str(ckpt / "voice.wav"), "--max-batch", "2"])
    try:
        assert server.ready.wait(120) and server.url, "server did not start:\n" + "\n".join(server.lines)
        proc = _run([str(EXAMPLES / "openai_client.py"), "--base-url", server.url + "/v1",
                     "--model", SMALL, "--voice", "alloy", "--max-frames", "3",
                     "--prefix", str(tmp_path / "hello")], tmp_path, timeout=180)
    finally:
        server.stop()
    assert f"'{SMALL}'" in proc.stdout  # models.list() names the checkpoint by its folder
    streamed = (tmp_path / "hello-streamed.wav").read_bytes()
    # a streamed WAV cannot know its length: "unknown length" sizes, then 3 frames of s16le
    assert streamed[:4] == b"RIFF" and streamed[8:12] == b"WAVE"
    assert len(streamed) == 44 + 3 * 1920 * 2
    audio, rate = sf.read(tmp_path / "hello.flac")  # a whole file: exact length
    assert rate == 24000 and len(audio) == 3 * 1920


def test_batch_requests_example(ckpt, tmp_path):
    """The example names predefined voices, which only the released weights have: run it
    with the checkpoint's voice file instead and a fixed length."""
    requests = json.loads((EXAMPLES / "batch-requests.json").read_text())
    assert all(set(r) <= {"text", "voice", "options"} for r in requests)
    for r in requests:
        r["voice"] = str(ckpt / "voice.wav")
        r.setdefault("options", {})["max_frames"] = 3
    path = tmp_path / "requests.json"
    path.write_text(json.dumps(requests))
    _run(["-m", "vocalis", "batch", "--model", str(ckpt), "--requests", str(path),
          "--out-dir", str(tmp_path / "out"), "-q"], tmp_path)
    wavs = sorted((tmp_path / "out").glob("*.wav"))
    assert len(wavs) == len(requests) == 3
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report  # per request figures and the session's


def test_ray_serve_example_args_are_serve_args():
    pytest.importorskip("ray")
    from vocalis.ray.serve import ServeArgs

    config = yaml.safe_load((EXAMPLES / "ray-serve.yaml").read_text())
    (app,) = config["applications"]
    assert app["import_path"] == "vocalis.ray.serve:build"
    ServeArgs(**app["args"])  # extra="forbid": an unknown key fails


def test_open_webui_env():
    env = dict(line.split("=", 1) for line in (EXAMPLES / "open-webui.env").read_text().splitlines()
               if line and not line.startswith("#"))
    assert env["AUDIO_TTS_ENGINE"] == "openai"
    assert env["AUDIO_TTS_OPENAI_API_BASE_URL"].endswith("/v1")
    assert env["AUDIO_TTS_MODEL"] == "pocket-tts" and env["AUDIO_TTS_VOICE"] == "alba"
    assert env["AUDIO_TTS_OPENAI_API_KEY"]  # Open WebUI wants a non-empty key


def test_home_assistant_examples():
    automation = yaml.safe_load((EXAMPLES / "home-assistant" / "automation.yaml").read_text())
    (action,) = automation["actions"]
    assert action["action"] == "tts.speak" and action["data"]["message"]
    unit = (EXAMPLES / "home-assistant" / "vocalis-wyoming.service").read_text()
    (exec_start,) = re.findall(r"^ExecStart=(.*)$", unit, re.MULTILINE)
    argv = shlex.split(exec_start)
    assert Path(argv[0]).name == "vocalis"
    _check_command(argv[1:], "examples/home-assistant/vocalis-wyoming.service")


# --------------------------------------------------------------------------- commands in the docs


def _click_app():
    import typer

    from vocalis.cli import app

    return typer.main.get_command(app)


def _check_command(words: list[str], where: str) -> None:
    """``words`` (after ``vocalis``): every subcommand exists and every ``--option`` is one
    of that command's options."""
    cmd = _click_app()
    i = 0
    # typer's groups (its own click) have get_command; plain commands do not
    while hasattr(cmd, "get_command") and i < len(words) and not words[i].startswith("-"):
        sub = cmd.get_command(None, words[i])
        assert sub is not None, f"{where}: vocalis {' '.join(words[:i + 1])}: no such command"
        if i == 0 and words[0] == "reference":  # forwards to the harness's own app
            import typer

            from vocalis.reference import cli as reference_cli

            sub = typer.main.get_command(reference_cli.app)
        cmd, i = sub, i + 1
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
    for w in words[i:]:
        if w.startswith("--"):
            assert w.split("=")[0] in known, f"{where}: `vocalis ... {w}`: no such option"


def _shown_commands():
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text()
        for block in re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.DOTALL):
            for line in block.replace("\\\n", " ").splitlines():
                for part in re.split(r"&&|\|", line.split(" #")[0]):
                    part = re.sub(r"\[[^\]]*\]", "", part).strip()  # [--optional ...] forms
                    if part.startswith("vocalis "):
                        yield path.name, part


@pytest.mark.parametrize("where, command", list(_shown_commands()))
def test_commands_shown_in_the_docs_exist(where, command):
    words = shlex.split(command.replace('"..."', "x"))
    _check_command(words[1:], where)
