"""Model families are plug-ins: a test-only family (``stub_family.py``: a sine tone per
text byte) is registered by the test and served by every front end without any front-end
module knowing it: the Python API, ``vocalis generate``, ``vocalis serve`` with the
``openai`` client (streamed and whole file), its WebSocket stream and ``vocalis say``,
Wyoming and ``vocalis batch``. Its option
errors come out of each front end as that front end's normal error.

The expected audio is computed from the stub's formula (``stub_family.expected``), not by
vocalis."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import openai
import pytest
import soundfile as sf
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize, SynthesizeVoice

import stub_family
import vocalis
from vocalis import cli, families
from vocalis.errors import InputError, ModelNotFound, VoiceError
from vocalis.options import UnknownOption

HERE = Path(__file__).resolve().parents[1]  # tests/: stub_family.py
MODEL = "stub-sine/tiny"


@pytest.fixture(scope="module")
def stub():
    families.register(stub_family.FAMILY)
    yield stub_family.FAMILY
    families.unregister(stub_family.FAMILY.name)


def int16(x: np.ndarray) -> np.ndarray:
    """16-bit PCM as the official writers make it: ``x * 32767`` in float32, truncated."""
    return (np.clip(x, -1, 1).astype(np.float32) * np.float32(32767)).astype(np.int16)


# --------------------------------------------------------------------------- registry, API


def test_registry_finds_the_family_and_refuses_clashes(stub):
    assert families.family_of(MODEL) is stub
    assert MODEL in families.model_ids()
    info = families.describe(MODEL)
    assert (info.sample_rate, info.voices, info.default_voice) == (16000, ("low", "high"), "low")
    with pytest.raises(ValueError, match="already registered"):
        families.register(stub_family.StubFamily())
    with pytest.raises(ModelNotFound) as e:
        families.family_of("stub-sine-tiny")  # no family claims it: the closest id is named
    assert "did you mean stub-sine/tiny" in str(e.value)


def test_python_api(stub):
    tts = vocalis.load(MODEL)
    try:
        a = tts.synthesize("Hi there!", voice="high", pitch_scale=1.5)
        assert a.sample_rate == 16000
        np.testing.assert_array_equal(a.samples, stub_family.expected("Hi there!", "high", 1.5))
        streamed = np.concatenate(list(tts.stream("abc")))
        np.testing.assert_array_equal(streamed, stub_family.expected("abc"))
        with pytest.raises(InputError) as e:
            tts.synthesize("Hi", pitch_scale=3)
        assert e.value.param == "pitch_scale" and "[0.5, 2.0]" in str(e.value)
        with pytest.raises(UnknownOption) as e:
            tts.synthesize("Hi", temperature=0.5)  # another family's option
        assert e.value.param == "temperature"
        with pytest.raises(VoiceError):
            tts.synthesize("Hi", voice="nobody")
        with pytest.raises(InputError) as e:  # a family that reads no attention
            tts.synthesize("Hi", word_timestamps=True)
        assert e.value.param == "word_timestamps" and "gives no word timestamps" in str(e.value)
    finally:
        tts.close()


# --------------------------------------------------------------------------- CLI


def test_cli_generate_and_its_errors(stub, tmp_path, capsys):
    out = tmp_path / "a.wav"
    assert cli.main(["generate", "--model", MODEL, "--voice", "high", "--pitch-scale", "0.75",
                     "--text", "Hello.", "-o", str(out)]) == 0
    samples, rate = sf.read(str(out), dtype="int16")
    assert rate == 16000
    np.testing.assert_array_equal(samples, int16(stub_family.expected("Hello.", "high", 0.75)))
    capsys.readouterr()
    assert cli.main(["generate", "--model", MODEL, "--pitch-scale", "9", "--text", "Hi",
                     "-o", str(tmp_path / "b.wav")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pitch_scale" in err[0] and not (tmp_path / "b.wav").exists()
    # a flag of another family: refused before anything loads, naming the stub's own flags
    assert cli.main(["generate", "--model", MODEL, "--temperature", "0.5", "--text", "Hi",
                     "-o", str(tmp_path / "c.wav")]) == 2
    err = capsys.readouterr().err
    assert "--temperature" in err and "--pitch-scale" in err
    assert cli.main(["generate", "--help"]) == 0
    assert "--pitch-scale" in capsys.readouterr().out


# --------------------------------------------------------------------------- server


@pytest.fixture(scope="module")
def served(stub, tmp_path_factory):
    """``vocalis serve`` in a process of its own, the stub family brought in by
    ``$VOCALIS_FAMILIES`` (as a plug-in that is not installed as a package)."""
    env = dict(os.environ, VOCALIS_FAMILIES="stub_family:FAMILY",
               PYTHONPATH=os.pathsep.join([str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.Popen([sys.executable, "-m", "vocalis", "serve", "--model", MODEL,
                             "--port", "0", "--voices-dir", str(tmp_path_factory.mktemp("v"))],
                            env=env, stderr=subprocess.PIPE, text=True)
    url, lines = None, []
    deadline = time.monotonic() + 60
    while url is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if " at http://" in line:
            url = line.strip().rsplit(" at ", 1)[1]
    assert url, "".join(lines)
    yield url
    proc.terminate()
    proc.wait(20)


def test_served_through_the_openai_client(served):
    client = openai.OpenAI(base_url=served + "/v1", api_key="none", max_retries=0, timeout=60)
    whole = client.audio.speech.create(model=MODEL, voice="high", input="Good day.",
                                       response_format="pcm", extra_body={"pitch_scale": 1.25})
    want = int16(stub_family.expected("Good day.", "high", 1.25))
    np.testing.assert_array_equal(np.frombuffer(whole.content, "<i2"), want)
    with client.audio.speech.with_streaming_response.create(
            model=MODEL, voice="default", input="Good day.", response_format="wav") as resp:
        data = b"".join(resp.iter_bytes())
    samples, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == 16000
    np.testing.assert_array_equal(samples, int16(stub_family.expected("Good day.")))
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model=MODEL, voice="low", input="Hi",
                                   extra_body={"pitch_scale": 5})
    assert e.value.body["param"] == "pitch_scale"
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model=MODEL, voice="low", input="Hi",
                                   extra_body={"temperature": 0.5})
    assert (e.value.body["param"], e.value.body["code"]) == ("temperature", "unknown_parameter")
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model=MODEL, voice="low", input="Hi", response_format="pcm",
                                   extra_body={"word_timestamps": True})
    assert e.value.body["param"] == "word_timestamps"
    with urllib.request.urlopen(served + "/health") as r:
        health = json.loads(r.read())
    caps = health["models"][0]
    assert caps["family"] == "stub-sine" and [o["name"] for o in caps["options"]] == \
        ["pitch_scale", "max_frames"]


def test_served_over_the_websocket_stream(served, tmp_path):
    """WS /v1/audio/speech/stream and ``vocalis say``: text in pieces, each sentence's audio
    the stub's formula for it; the family's option errors as error events."""
    import wave

    from websockets.asyncio.client import connect

    url = served.replace("http://", "ws://") + "/v1/audio/speech/stream"
    config = {"type": "session.config", "model": MODEL, "voice": "high", "pitch_scale": 1.25,
              "response_format": "pcm", "stream_audio": True, "split_granularity": "sentence"}

    async def go(cfg, pieces):
        async with connect(url) as ws:
            await ws.send(json.dumps(cfg))
            for p in pieces:
                await ws.send(json.dumps({"type": "input.text", "text": p}))
            await ws.send(json.dumps({"type": "input.done"}))
            per, events = {}, []
            while True:
                msg = await asyncio.wait_for(ws.recv(), 30)
                if isinstance(msg, bytes):
                    per[events[-1]["sentence_text"]] += msg
                    continue
                events.append(json.loads(msg))
                if events[-1]["type"] == "audio.start":
                    per[events[-1]["sentence_text"]] = b""
                if events[-1]["type"] in ("session.done", "error"):
                    return per, events

    per, events = asyncio.run(go(config, ["Good d", "ay. How are", " you?"]))
    assert list(per) == ["Good day.", "How are you?"]
    for text, data in per.items():
        np.testing.assert_array_equal(np.frombuffer(data, "<i2"),
                                      int16(stub_family.expected(text, "high", 1.25)))
    assert [e["sample_rate"] for e in events if e["type"] == "audio.start"] == [16000, 16000]
    for bad, param, code in [({"pitch_scale": 5}, "pitch_scale", None),
                             ({"temperature": 0.5}, "temperature", "unknown_parameter")]:
        _, events = asyncio.run(go({**config, **bad}, ["Hi."]))
        assert events[-1]["type"] == "error" and events[-1]["param"] == param, events
        assert code is None or events[-1]["code"] == code

    out = tmp_path / "said.wav"
    assert cli.main(["say", "--url", url, "--model", MODEL, "--voice", "low", "-q",
                     "--text", "Yes. No.", "-o", str(out)]) == 0
    with wave.open(str(out)) as w:
        said = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        assert w.getframerate() == 16000
    np.testing.assert_array_equal(said, np.concatenate(
        [int16(stub_family.expected(t, "low")) for t in ("Yes.", "No.")]))


# --------------------------------------------------------------------------- Wyoming


def test_wyoming(stub, tmp_path):
    from vocalis.wyoming import WyomingTTS, bound_port

    tts = vocalis.load(MODEL)
    state = WyomingTTS(tts, tmp_path, options={"pitch_scale": 2.0})

    async def go():
        server = await state.start("tcp://127.0.0.1:0")
        try:
            async with AsyncTcpClient("127.0.0.1", bound_port(server)) as c:
                await c.write_event(Synthesize("Yes.", voice=SynthesizeVoice(name="high")).event())
                pcm, rate = [], None
                while True:
                    ev = await asyncio.wait_for(c.read_event(), 30)
                    if AudioStart.is_type(ev.type):
                        rate = AudioStart.from_event(ev).rate
                    if AudioChunk.is_type(ev.type):
                        pcm.append(np.frombuffer(AudioChunk.from_event(ev).audio, "<i2"))
                    if ev.type in ("audio-stop", "error"):
                        return ev.type, rate, np.concatenate(pcm) if pcm else None
        finally:
            await server.stop()

    try:
        kind, rate, pcm = asyncio.run(go())
        assert (kind, rate) == ("audio-stop", 16000)
        np.testing.assert_array_equal(pcm, int16(stub_family.expected("Yes.", "high", 2.0)))
        with pytest.raises(InputError) as e:  # the server's options: refused at start-up
            WyomingTTS(tts, tmp_path, options={"pitch_scale": 0.1})
        assert e.value.param == "pitch_scale"
    finally:
        tts.close()


# --------------------------------------------------------------------------- batch


def test_batch(stub, tmp_path, capsys):
    reqs = tmp_path / "requests.json"
    reqs.write_text(json.dumps([{"text": "One.", "voice": "high", "options": {"pitch_scale": 1.5}},
                                {"text": "Two.", "options": {"seed": 3}}]))
    out = tmp_path / "out"
    assert cli.main(["batch", "--model", MODEL, "--requests", str(reqs), "--out-dir", str(out)]) == 0
    for name, text, voice, scale in (("0000.wav", "One.", "high", 1.5), ("0001.wav", "Two.", "low", 1.0)):
        samples, rate = sf.read(str(out / name), dtype="int16")
        np.testing.assert_array_equal(samples, int16(stub_family.expected(text, voice, scale)))
    reqs.write_text(json.dumps([{"text": "One.", "options": {"pitch_scale": 7}}]))
    capsys.readouterr()
    assert cli.main(["batch", "--model", MODEL, "--requests", str(reqs), "--out-dir",
                     str(tmp_path / "bad")]) == 2
    assert "pitch_scale" in capsys.readouterr().err


# --------------------------------------------------------------------------- fail fast


@pytest.mark.parametrize("args,needle", [
    (["--voice", "missing.wav"], "voice file not found"),
    (["--voice", "{ckpt}/config.yaml"], "not a readable audio file"),
    (["--voice", "{ckpt}/voice.wav", "--temperature", "-1"], "temperature"),
    (["--voice", "{ckpt}/voice.wav", "--speaker", "ryan"], "--speaker"),
    (["--voice", "{ckpt}/voice.wav", "--text", "\udcff"], "not valid Unicode"),
    (["batch", "--requests", "missing.json", "--out-dir", "never"], "requests file not found"),
    (["batch", "--requests", "{ckpt}/config.yaml", "--out-dir", "never"], "not valid JSON"),
    (["bench", "--voice", "{ckpt}/voice.wav", "-t", "Short.", "-t", "Other."], "80+"),
])
def test_bad_input_is_refused_before_torch_is_imported(checkpoints, args, needle):
    """Every check that needs no weights runs before the model loads: the error comes from a
    process that never imported torch (so no model was loaded and no kernel built).
    ``vocalis generate`` unless another command is named first."""
    ckpt = checkpoints.get("english_2m_2026-10")
    args = [a.replace("{ckpt}", str(ckpt)) for a in args]
    command = [args.pop(0)] if args[0] in ("batch", "bench") else ["generate"]
    if command == ["generate"]:
        if "--text" not in args:
            args += ["--text", "Hello."]
        args += ["-o", "never.wav"]
    code = ("import sys; from vocalis.cli import main; rc = main(sys.argv[1:]); "
            "print('torch' in sys.modules); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, *command, "--model", str(ckpt), *args],
                       capture_output=True, timeout=60,
                       env=dict(os.environ, PYTHONIOENCODING="utf-8:surrogateescape"))
    assert r.returncode == 2, r.stderr.decode()
    assert r.stdout.decode().strip() == "False"
    err = r.stderr.decode(errors="replace").strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
