"""Every bad input gets its one-line answer (issue 7, item 5: voices, text, models random,
bench, empty voice). CLI runs as a subprocess; the server over real HTTP on loopback."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import vocalis
from vocalis.errors import InputError, VoiceError
from tests.server.test_server import Server  # noqa: E402  (uvicorn on 127.0.0.1, a free port)

SMALL = "english_2m_2026-10"


def cli(*args, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", LC_ALL="C.UTF-8")
    return subprocess.run([sys.executable, "-m", "vocalis.cli", *args], capture_output=True,
                          env=env, cwd=cwd, timeout=timeout)


def one_error_line(proc) -> str:
    err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.fixture(scope="module")
def ckpt(checkpoints) -> Path:
    return checkpoints.get(SMALL)


@pytest.fixture(scope="module")
def tts(ckpt):
    t = vocalis.load(str(ckpt))
    yield t
    t.close()


@pytest.fixture(scope="module")
def server(tts, ckpt, tmp_path_factory):
    from vocalis.server import create_app

    s = Server(create_app(tts, voices_dir=tmp_path_factory.mktemp("voices"),
                          default_voice=str(ckpt / "voice.wav")))
    yield s
    s.stop()


def speech(server, text) -> tuple[int, dict]:
    body = json.dumps({"model": "tts-1", "input": "PLACEHOLDER", "voice": "alloy",
                       "response_format": "pcm", "seed": 1, "max_frames": 2})
    raw = body.replace('"PLACEHOLDER"', text).encode()  # ``text`` is JSON source
    status, _, data = server.request("POST", "/v1/audio/speech", raw,
                                     {"Content-Type": "application/json"})
    return status, json.loads(data) if status != 200 else {}


def _speech_like(seconds: float, rate: int = 24000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 150 * t) * np.sin(2 * np.pi * 3 * t)).astype(np.float32)


# --------------------------------------------------------------------------- voices


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_voice_file_with_nonfinite_samples(tts, tmp_path, bad):
    x = _speech_like(2.0)
    x[1000] = bad
    path = tmp_path / "bad.wav"
    sf.write(str(path), x, 24000, subtype="FLOAT")
    assert not np.isfinite(sf.read(str(path))[0]).all()  # the file really holds it
    with pytest.raises(VoiceError, match=r"1 NaN or infinite sample.*corrupt"):
        tts.voice(str(path))
    with pytest.raises(VoiceError, match="NaN or infinite"):
        tts.model.voice_from_audio(x)


def test_voice_with_overflowing_samples(tts):
    with pytest.raises(VoiceError, match=r"non-finite values in the model.*\[-1, 1\]"):
        tts.model.voice_from_audio(np.full(48000, 1e30, np.float32))


def test_upload_of_nonfinite_voice_is_a_client_error(server, tmp_path):
    import io

    x = _speech_like(2.0)
    x[10] = np.nan
    buf = io.BytesIO()
    sf.write(buf, x, 24000, format="WAV", subtype="FLOAT")
    boundary = "vocalisboundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nnanvoice\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"audio_sample\"; "
            f"filename=\"nan.wav\"\r\nContent-Type: audio/wav\r\n\r\n").encode() \
        + buf.getvalue() + f"\r\n--{boundary}--\r\n".encode()
    status, _, data = server.request("POST", "/v1/audio/voices", body,
                                     {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert 400 <= status < 500, (status, data)
    assert "NaN or infinite" in json.loads(data)["error"]["message"]


@pytest.mark.parametrize("samples", [1, 240, 1919])  # one sample, 10 ms, under a codec frame
def test_too_short_voice_is_refused(tts, tmp_path, samples):
    path = tmp_path / "short.wav"
    sf.write(str(path), _speech_like(1.0)[:samples] + 0.1, 24000, subtype="PCM_16")
    with pytest.raises(VoiceError, match=r"needs at least 80 ms"):
        tts.voice(str(path))


def test_short_voice_warns(tts, caplog):
    with caplog.at_level(logging.WARNING, logger="vocalis"):
        tts.model.voice_from_audio(_speech_like(0.5), "half.wav")
    assert any("only 0.50 s long" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="vocalis"):
        tts.model.voice_from_audio(_speech_like(2.0), "two.wav")
    assert not caplog.records


@pytest.mark.parametrize("level", [0.0, 1e-4])
def test_silent_voice_is_refused(tts, tmp_path, level):
    path = tmp_path / "silent.wav"
    rng = np.random.default_rng(0)
    sf.write(str(path), (level * rng.uniform(-1, 1, 48000)).astype(np.float32), 24000,
             subtype="FLOAT")
    with pytest.raises(VoiceError, match="is silent"):
        tts.voice(str(path))


@pytest.mark.parametrize("name", ["", "   "])
def test_empty_voice_says_empty(tts, name):
    with pytest.raises(VoiceError, match=r"^voice is empty"):
        tts.voice(name)


# --------------------------------------------------------------------------- text


@pytest.mark.parametrize("text", ["Caf\udce9 au lait.", "\ud800", "ok \udfff ok"])
def test_api_lone_surrogate_is_input_error(tts, ckpt, text):
    with pytest.raises(InputError, match="not valid Unicode"):
        tts.synthesize(text, str(ckpt / "voice.wav"), seed=0, max_frames=1)


def test_server_json_lone_surrogate_is_400(server):
    status, body = speech(server, '"Caf\\ud800 au lait."')
    assert status == 400 and "not valid Unicode" in body["error"]["message"], body
    assert speech(server, '"Caf\\u00e9 au lait."')[0] == 200  # a proper escape works


def test_cli_text_with_invalid_utf8_bytes(ckpt, tmp_path):
    out = tmp_path / "o.wav"
    r = cli(b"generate", b"--model", str(ckpt).encode(), b"--voice",
            str(ckpt / "voice.wav").encode(), b"--text", b"Caf\xe9 au lait.", b"-o",
            str(out).encode())
    line = one_error_line(r)
    assert "--text is not valid Unicode (byte 0xE9 at character 3" in line
    assert not out.exists()


def test_cli_text_file_with_invalid_utf8(ckpt, tmp_path):
    src = tmp_path / "latin1.txt"
    src.write_bytes(b"Caf\xe9 au lait.")
    out = tmp_path / "o.wav"
    r = cli("generate", "--model", str(ckpt), "--voice", str(ckpt / "voice.wav"),
            "--text-file", str(src), "-o", str(out))
    line = one_error_line(r)
    assert "is not UTF-8 (byte 0xE9 at offset 3): save it as UTF-8" in line and not out.exists()


def _unknown_ids(ckpt) -> tuple[set[int], object]:
    """The unknown-piece id and the encoder, from the sentencepiece library itself."""
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(ckpt / "tokenizer.model"))
    return {sp.unk_id()}, sp


@pytest.mark.parametrize("text", ["\U0001F600\U0001F389", "\x07\x0b\x01", "\u4f60\u597d",
                                  "... !!!"])
def test_nothing_speakable_is_refused(tts, ckpt, server, text):
    unk, sp = _unknown_ids(ckpt)
    ids = sp.encode(text)
    # independently: every piece is unknown, a bare word start or punctuation
    assert all(i in unk or not any(c.isalnum() for c in sp.id_to_piece(i)) for i in ids)
    with pytest.raises(InputError, match="nothing the model can speak"):
        tts.synthesize(text, str(ckpt / "voice.wav"), seed=0, max_frames=1)
    status, body = speech(server, json.dumps(text))
    assert status == 400 and "nothing the model can speak" in body["error"]["message"]


@pytest.mark.parametrize("text,says", [
    ("\u4f60\u597d\u4e16\u754c",  # 你好世界
     "is written in Chinese characters (Han), and this Pocket TTS model has no letters for "
     "it: for Chinese use a Qwen3-TTS model (e.g. qwen3-tts/0.6b-customvoice, language "
     "chinese), or give text in a language this model speaks"),
    ("\uc548\ub155\ud558\uc138\uc694",  # 안녕하세요
     "is written in Korean Hangul, and this Pocket TTS model has no letters for it: for "
     "Korean use a Qwen3-TTS model"),
    ("\u0928\u092e\u0938\u094d\u0924\u0947",  # नमस्ते
     "is written in Devanagari script, and this Pocket TTS model has no letters for it: no "
     "model vocalis runs reads that script yet; give text in a language this model speaks"),
])
def test_text_in_a_script_the_model_lacks_names_the_script_and_what_to_do(ckpt, server, text,
                                                                           says):
    """Pocket TTS given only Chinese (or Korean, Hindi): the message names the script and
    the model to use instead, on the command line (one line, exit 2) and over HTTP (400)."""
    unk, sp = _unknown_ids(ckpt)
    assert set(sp.encode(text)) - unk <= {sp.piece_to_id("\u2581")}  # independently: unknown
    line = one_error_line(cli("generate", "--model", str(ckpt), "--voice",
                              str(ckpt / "voice.wav"), "--text", text, "-o", "-"))
    assert line.startswith("error: text has nothing the model can speak: ") and says in line
    status, body = speech(server, json.dumps(text))
    assert status == 400 and body["error"]["param"] == "input"
    assert says in body["error"]["message"]


def test_unknown_characters_warn_once(tts, ckpt, caplog):
    unk, sp = _unknown_ids(ckpt)
    assert unk & set(sp.encode("\U0001F600"))  # the tokenizer has no piece for it
    with caplog.at_level(logging.WARNING, logger="vocalis"):
        audio = tts.synthesize("Hello \U0001F600 there \U0001F600.", str(ckpt / "voice.wav"),
                               seed=0, max_frames=1)
    assert audio.samples.size > 0
    warned = [r.getMessage() for r in caplog.records if "vocabulary" in r.getMessage()]
    assert len(warned) == 1 and "'\U0001F600'" in warned[0]


# --------------------------------------------------------------------------- bench


def test_bench_without_voice_uses_cli_wording(ckpt):
    r = cli("bench", "--model", str(ckpt), "--text", "x" * 90, "--text", "y" * 90)
    line = one_error_line(r)
    assert "--voice" in line and "voice=" not in line


# --------------------------------------------------------------------------- models random


def test_models_random_seed_out_of_range(tmp_path):
    from vocalis.models.pocket.random_checkpoint import write_random_checkpoint

    out = tmp_path / "ck"
    line = one_error_line(cli("models", "random", "--config", SMALL, "--out", str(out),
                              "--seed", "-1"))
    assert "--seed must be in [0, 4294967295], got -1" in line
    for seed in (2**32, -5, 1.5, True):
        with pytest.raises(InputError, match=r"seed must be an integer in \[0, 4294967295\]"):
            write_random_checkpoint(SMALL, out, seed=seed)
    assert list(tmp_path.iterdir()) == []  # no folder, no temporary left


@pytest.mark.slow
def test_models_random_files_paths_and_overwrite(tmp_path, monkeypatch):
    out = tmp_path / "ck"
    r = cli("models", "random", "--config", SMALL, "--out", str(out), "-q")
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == ["config.yaml", "model.safetensors", "tokenizer.model", "voice.wav"]
    assert [p.name for p in tmp_path.iterdir()] == ["ck"]  # no temporary folder left
    umask = os.umask(0)
    os.umask(umask)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert set(modes.values()) == {0o666 & ~umask}, modes

    import yaml

    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["weights_path"] == "model.safetensors"
    assert cfg["flow_lm"]["lookup_table"]["tokenizer_path"] == "tokenizer.model"

    # over an existing checkpoint: refused, nothing touched
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert "already holds a checkpoint" in one_error_line(
        cli("models", "random", "--config", SMALL, "--out", str(out), "--seed", "1"))
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before

    # a moved copy uses its own files (the original is gone)
    moved = tmp_path / "moved"
    shutil.move(str(out), str(moved))
    with vocalis.load(str(moved)) as t:
        assert Path(t.model.tokenizer.path) == moved / "tokenizer.model"
        ours = t.model.chunk_text("Hello there. How are you?", 3)
    # the official loader takes relative paths from the working directory
    from pocket_tts import TTSModel

    with monkeypatch.context() as m:
        m.chdir(moved)
        off = TTSModel.load_model(config="config.yaml")
    assert len(ours) == 2
    for prepared, ids, _ in ours:
        assert off.flow_lm.conditioner.prepare(prepared)[0].tolist() == ids

    # --force replaces the checkpoint and drops stale files; other folders stay refused
    (moved / "stale.txt").write_text("old")
    r = cli("models", "random", "--config", SMALL, "--out", str(moved), "--seed", "1",
            "--force", "-q")
    assert r.returncode == 0, r.stderr
    assert not (moved / "stale.txt").exists()
    assert "(seed 1)" in (moved / "config.yaml").read_text().splitlines()[0]
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert "holds no random checkpoint" in one_error_line(
        cli("models", "random", "--config", SMALL, "--out", str(other), "--force"))
    assert (other / "notes.txt").read_text() == "mine"


def test_models_random_qwen3_modes_refusals_and_force(tmp_path):
    """A Qwen3-TTS random checkpoint is written like a Pocket one: the usual permissions,
    refused over a non-empty folder, replaced with --force (also by the other family)."""
    out = tmp_path / "q"
    r = cli("models", "random", "--config", "qwen3-tts/0.6b-customvoice", "--tiny", "--out",
            str(out), "-q")
    assert r.returncode == 0, r.stderr
    where, command = r.stdout.decode().strip().splitlines()  # the folder, then how to use it
    assert where == str(out.absolute()) and command.startswith(f"vocalis generate --model {out}")
    assert [p.name for p in tmp_path.iterdir()] == ["q"]  # no temporary folder left
    umask = os.umask(0)
    os.umask(umask)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"config.json", "model.safetensors", "vocab.json"}
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o666 & ~umask}
    assert stat.S_IMODE((out / "speech_tokenizer").stat().st_mode) == 0o777 & ~umask
    assert "already holds a checkpoint" in one_error_line(
        cli("models", "random", "--config", "qwen3-tts/0.6b-base", "--tiny", "--out", str(out)))
    assert json.loads((out / "config.json").read_text())["tts_model_type"] == "custom_voice"
    r = cli("models", "random", "--config", "qwen3-tts/0.6b-base", "--tiny", "--out", str(out),
            "--force", "-q")
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "config.json").read_text())["tts_model_type"] == "base"
    r = cli("models", "random", "--config", SMALL, "--out", str(out), "--force", "-q")
    assert r.returncode == 0, r.stderr
    assert not (out / "config.json").exists() and (out / "config.yaml").is_file()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert "holds no random checkpoint" in one_error_line(
        cli("models", "random", "--config", "qwen3-tts/0.6b-base", "--tiny", "--out",
            str(other), "--force"))
    assert (other / "notes.txt").read_text() == "mine"
    assert "unknown config 'qwen3-tts/0.9b' (did you mean" in one_error_line(
        cli("models", "random", "--config", "qwen3-tts/0.9b", "--out", str(tmp_path / "z")))
    assert not (tmp_path / "z").exists()


def test_voice_files_get_the_usual_permissions(ckpt, tmp_path):
    out = tmp_path / "v.safetensors"
    r = cli("voices", "export", str(ckpt / "voice.wav"), str(out), "--model", str(ckpt), "-q")
    assert r.returncode == 0, r.stderr
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


def test_relative_paths_resolve_from_the_yaml_folder(ckpt, tmp_path, monkeypatch):
    from vocalis.errors import ModelNotFound

    copy = tmp_path / "copy"
    shutil.copytree(ckpt, copy)
    yaml_text = (copy / "config.yaml").read_text()
    assert str(ckpt / "model.safetensors") in yaml_text
    (copy / "config.yaml").write_text(yaml_text.replace(f"{ckpt}{os.sep}", ""))
    monkeypatch.chdir(tmp_path)  # elsewhere: the working directory has no such files
    with vocalis.load(str(copy)) as t:
        assert Path(t.model.tokenizer.path) == copy / "tokenizer.model"
    (copy / "model.safetensors").unlink()
    with pytest.raises(ModelNotFound, match=f"not found: {copy / 'model.safetensors'}"):
        vocalis.load(str(copy))


# --------------------------------------------------------------------------- machine limits


@pytest.mark.parametrize("command", [["generate", "--text", "hi"], ["serve"], ["wyoming"],
                                     ["bench", "--text", "hi"], ["batch", "requests.txt"]])
def test_threads_beyond_the_machine_are_refused_before_loading(command):
    # thousands of torch threads exhaust the process (a segfault at 100000): every command
    # refuses more than 4 per CPU as the flags are read, in one line
    too_many = 4 * (os.cpu_count() or 1) + 1
    proc = cli(*command, "--threads", str(too_many), timeout=60)
    line = one_error_line(proc)
    assert f"got {too_many}" in line and "--threads" in line and "[1, " in line


@pytest.mark.parametrize("threads", [0, 4 * (os.cpu_count() or 1) + 1, 2.5, True])
def test_api_threads_out_of_range(threads):
    with pytest.raises(InputError, match="threads must be an integer") as e:
        vocalis.load("pocket-tts", threads=threads)
    assert e.value.param == "threads"


def test_empty_text_names_its_flag_once():
    line = one_error_line(cli("generate", "--text", "", "-o", "x.wav", timeout=60))
    assert line.count("--text") == 1 and "----" not in line


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_a_full_disk_is_one_line_not_a_traceback(ckpt):
    # /dev/full takes the open and fails every write with ENOSPC, as a full disk does
    proc = cli("generate", "--text", "Hello there.", "-m", str(ckpt), "--voice",
               str(ckpt / "voice.wav"), "--format", "wav", "-o", "/dev/full")
    err = proc.stderr.decode()
    assert "Traceback" not in err
    line = one_error_line(proc)
    assert "cannot write /dev/full" in line and "No space left" in line


def test_exact_and_quantize_are_refused_together():
    # exact promises the official float32 arithmetic; quantized weights cannot keep it
    line = one_error_line(cli("generate", "--text", "hi", "--exact", "--quantize", timeout=60))
    assert "--exact and --quantize" in line
    with pytest.raises(InputError, match="exact and quantize") as e:
        vocalis.load("pocket-tts", exact=True, quantize=True)
    assert e.value.param == "quantize"


def test_speed_without_rubber_band_is_refused_before_loading(tmp_path, monkeypatch):
    # pylibrb (the [speed] extra) hidden: a module of that name that fails to import
    (tmp_path / "pylibrb.py").write_text("raise ImportError('not installed here')\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=f"{tmp_path}{os.pathsep}"
               + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "vocalis.cli", "generate", "--text", "hi",
                           "--speed", "1.5", "-o", str(tmp_path / "x.wav")],
                          capture_output=True, env=env, timeout=60)
    line = one_error_line(proc)
    assert "Rubber Band" in line and "vocalis[speed]" in line and "--speed" in line
    from vocalis.audio.stretch import check_speed

    monkeypatch.setitem(sys.modules, "pylibrb", None)  # import fails
    assert check_speed(1.0) == 1.0  # the model's own pace needs no stretcher
    with pytest.raises(InputError, match="Rubber Band") as e:
        check_speed(1.5)
    assert e.value.param == "speed"


@pytest.mark.parametrize("output,want", [("", "-o is empty"), ("{tmp}", "is a directory")])
def test_output_that_is_no_file_is_named(tmp_path, output, want):
    line = one_error_line(cli("generate", "--text", "hi", "-o",
                              output.replace("{tmp}", str(tmp_path)), timeout=60))
    assert want in line
