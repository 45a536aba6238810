"""LiveKit Agents' ElevenLabs TTS plugin (``livekit-plugins-elevenlabs``, pinned), unchanged,
against a vocalis server on loopback: what a LiveKit voice agent does when its TTS is
pointed at vocalis (``base_url``). The plugin runs in its own environment
(``VOCALIS_AGENTS_PYTHON``, built by ``scripts/agent_plugins_venv.sh``; ``.ci/run`` builds
it) through ``tests/server/agent_clients/livekit_client.py``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.server.test_server import Server, ckpt, tts, voices_dir  # noqa: F401 (fixtures)
from tests.server.test_stream import rows_free
from vocalis.server import create_app

ROOT = Path(__file__).resolve().parents[2]
CLIENT = Path(__file__).parent / "agent_clients" / "livekit_client.py"
PIECES = ["Hello there. ", "How are ", "you today? ", "I am fine."]


def agents_python() -> str:
    py = os.environ.get("VOCALIS_AGENTS_PYTHON") or str(ROOT / ".venv-agents" / "bin" / "python")
    if not Path(py).is_file():
        pytest.fail(f"the LiveKit plugin's environment is missing ({py}): run "
                    "`bash scripts/agent_plugins_venv.sh` and set VOCALIS_AGENTS_PYTHON "
                    "(.ci/run does both)")
    return py


@pytest.fixture(scope="module")
def server(tts, ckpt, voices_dir):  # noqa: F811
    s = Server(create_app(tts, voices_dir=voices_dir, default_voice=str(ckpt / "voice.wav")))
    yield s
    s.stop()


def livekit(server, *args) -> dict:
    r = subprocess.run([agents_python(), str(CLIENT), server.url + "/v1", "alloy", *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_livekit_plugin_streams_text_in_and_audio_out(server, tts):  # noqa: F811
    """The plugin opens ElevenLabs' multi-stream-input WebSocket (its query parameters,
    keep-alives, context and flush messages as it sends them to ElevenLabs), streams the
    text in pieces and gets every sentence's audio as 24 kHz frames."""
    frames = tts.engine_status()["frames"]
    got = livekit(server, *PIECES)
    assert got["sample_rate"] == 24000 and got["samples"] > 0
    spoken = tts.engine_status()["frames"] - frames
    # every frame the engine generated for it reached the plugin (1920 samples per frame)
    assert got["samples"] == spoken * tts.engine_family.frame_samples
    assert rows_free(tts)


def test_livekit_plugin_interruption_frees_the_rows(server, tts):  # noqa: F811
    """A barge-in (the plugin's stream closed after its first audio frames) closes the
    context: the server cancels what is left and frees its rows."""
    got = livekit(server, "--interrupt-after", "2",
                  " ".join(f"Sentence number {i} goes on for a while." for i in range(8)))
    assert got["interrupted"] and got["frames"] == 2
    assert rows_free(tts)
