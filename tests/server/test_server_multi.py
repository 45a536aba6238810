"""One server hosting several models (Pocket TTS and Qwen3-TTS CustomVoice and Base), over
real HTTP (uvicorn on loopback, the ``openai`` client): each request's ``model`` picks one,
and its audio equals the same seeded request through that model's Python API; voices are
listed, uploaded and refused per model; errors name what the chosen model accepts; the
``vocalis serve`` command takes ``--model`` more than once. Random-weight checkpoints written
by vocalis's own writers in the official layouts."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import soundfile as sf

import vocalis
from tests.server.test_server import SMALL, Server
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint
from vocalis.server import create_app

openai = pytest.importorskip("openai")

TEXT = "Two models, one server."
QWEN = dict(max_new_tokens=9)  # 8 frames


@pytest.fixture(scope="module")
def multi(checkpoints, tmp_path_factory):
    root = tmp_path_factory.mktemp("multi")
    pocket = vocalis.load(str(checkpoints.get(SMALL)), max_batch=4)
    cv = vocalis.load(str(write_random_checkpoint("qwen3-tts/0.6b-customvoice", root / "cv",
                                                  seed=4, tiny=True)), max_batch=4)
    base = vocalis.load(str(write_random_checkpoint("qwen3-tts/0.6b-base", root / "base",
                                                    seed=4, tiny=True)), max_batch=4)
    app = create_app([pocket, cv, base], voices_dir=root / "voices",
                     default_voice=str(checkpoints.get(SMALL) / "voice.wav"),
                     model_name=["narrator", "speakers", "cloner"])
    server = Server(app)
    yield server, {"narrator": pocket, "speakers": cv, "cloner": base}, root
    server.stop()
    for t in (pocket, cv, base):
        t.close()


def wav_of(data: bytes) -> np.ndarray:
    wav, sr = sf.read(io.BytesIO(data), dtype="float32")
    assert sr == 24000
    return wav


def test_models_are_listed_and_each_request_picks_one(multi):
    server, tts, _ = multi
    client = server.client()
    ids = [m.id for m in client.models.list().data]
    assert ids[:3] == ["narrator", "pocket-tts", "speakers"]
    assert "cloner" in ids and "tts-1" in ids
    assert "qwen3-tts" not in ids  # two Qwen3 models: the family name would be ambiguous
    card = client.models.retrieve("speakers")
    assert (card.id, card.family, card.quantize, card.exact) == ("speakers", "qwen3-tts", None, False)
    cards = {m.id: m for m in client.models.list().data}
    assert cards["narrator"].family == cards["tts-1"].family == "pocket-tts"
    assert cards["cloner"].family == "qwen3-tts" and cards["narrator"].quantize is None

    def speak(model, voice, seed, **extra):
        return wav_of(client.audio.speech.create(model=model, input=TEXT, voice=voice,
                                                 response_format="wav",
                                                 extra_body=dict(seed=seed, **extra)).content)

    with ThreadPoolExecutor(4) as pool:  # both engines busy at once
        jobs = {
            "pocket": pool.submit(speak, "narrator", "default", 3),
            "alias": pool.submit(speak, "tts-1", "default", 3),
            "ryan": pool.submit(speak, "speakers", "Ryan", 5, language="english", **QWEN),
            "serena": pool.submit(speak, "speakers", "serena", 6, **QWEN),
        }
        got = {k: f.result() for k, f in jobs.items()}
    voice = tts["narrator"].voice(str(tts["narrator"].model_id) + "/voice.wav")
    ref = tts["narrator"].synthesize(TEXT, voice=voice, seed=3).samples
    assert got["pocket"].shape == ref.shape and np.abs(got["pocket"] - ref).max() < 1e-4
    # OpenAI's names mean the first model (same seed: the same audio, up to the float
    # rounding of the rows it was batched with)
    assert got["alias"].shape == ref.shape and np.abs(got["alias"] - ref).max() < 1e-4
    ref = tts["speakers"].synthesize(TEXT, speaker="ryan", language="english", seed=5,
                                     **QWEN).samples
    assert got["ryan"].shape == ref.shape == (8 * 1920,)
    assert np.abs(got["ryan"] - ref).max() < 1e-4
    ref = tts["speakers"].synthesize(TEXT, speaker="serena", seed=6, **QWEN).samples
    assert np.abs(got["serena"] - ref).max() < 1e-4

    status, _, data = server.request("GET", "/health")
    health = json.loads(data)
    assert status == 200 and health["model"] == "narrator"
    by_id = {m["id"]: m for m in health["models"]}
    assert by_id["speakers"]["family"] == "qwen3-tts" and "english" in by_id["speakers"]["languages"]
    assert by_id["cloner"]["cloning"] is True and by_id["speakers"]["cloning"] is False
    assert by_id["narrator"]["aliases"] == ["pocket-tts"]


def test_errors_name_what_the_chosen_model_accepts(multi):
    server, _, _ = multi
    body = {"model": "nobody", "input": TEXT, "voice": "default"}
    status, _, data = server.request("POST", "/v1/audio/speech", body)
    err = json.loads(data)["error"]
    assert status == 404 and err["code"] == "model_not_found"
    for name in ("'narrator'", "'speakers'", "'cloner'", "ryan", "english"):
        assert name in err["message"], err["message"]
    # a Qwen3 speaker is not a Pocket voice, and the reverse
    status, _, data = server.request("POST", "/v1/audio/speech",
                                     {**body, "model": "narrator", "voice": "ryan"})
    err = json.loads(data)["error"]
    assert status == 400 and err["param"] == "voice" and "of model 'narrator'" in err["message"]
    status, _, data = server.request("POST", "/v1/audio/speech",
                                     {**body, "model": "speakers", "voice": "alba"})
    err = json.loads(data)["error"]
    assert status == 400 and "of model 'speakers'" in err["message"] and "ryan" in err["message"]
    # options of the other family are refused by the chosen model, naming the option
    status, _, data = server.request("POST", "/v1/audio/speech",
                                     {**body, "model": "narrator", "language": "french"})
    err = json.loads(data)["error"]
    assert status == 400 and err["param"] == "language" and "narrator" in err["message"]
    status, _, data = server.request("POST", "/v1/audio/speech",
                                     {**body, "model": "speakers", "voice": "ryan",
                                      "noise_clamp": 1.0})
    err = json.loads(data)["error"]
    assert status == 400 and err["param"] == "noise_clamp"
    # the model is named by its served id, not its folder's name (cv): a new user's finding
    assert "Qwen3-TTS model speakers" in err["message"], err
    status, _, data = server.request("POST", "/v1/audio/speech",
                                     {**body, "model": "speakers", "voice": "ryan",
                                      "language": "klingon"})
    err = json.loads(data)["error"]
    assert status == 400 and "speakers" in err["message"] and "cv" not in err["message"], err
    # a later model without predefined voices: --voice would not help it, so say so
    status, _, data = server.request("POST", "/v1/audio/speech",
                                     {**body, "model": "cloner", "voice": "alloy"})
    err = json.loads(data)["error"]
    assert status == 400 and err["param"] == "voice", err
    assert "of model 'cloner'" in err["message"] and "GET /v1/audio/voices?model=cloner" in \
        err["message"] and "--voice gives only the first --model a default voice" in err["message"]


def test_reference_options_misused_are_named_as_given(multi, checkpoints):
    """Qwen3-TTS reference options where they do not apply: the error's ``param`` is the
    option the request gave (old code: ``ref_audio`` for a CustomVoice model given only
    ref_text or xvector_only, ``ref_text`` for a saved voice given only xvector_only)."""
    import httpx

    server, _, _ = multi

    def refused(**fields):
        status, _, data = server.request("POST", "/v1/audio/speech",
                                         {"input": TEXT, **fields})
        err = json.loads(data)["error"]
        assert status == 400, (fields, err)
        return err["param"], err["message"]

    for given in (dict(ref_text="Some words."), dict(xvector_only=True)):
        param, message = refused(model="speakers", voice="ryan", **given)
        assert param == next(iter(given)) and "only Base models clone voices" in message
    sample = (checkpoints.get(SMALL) / "voice.wav").read_bytes()
    r = httpx.post(server.url + "/v1/audio/voices",
                   data={"name": "saved_ref", "model": "cloner", "ref_text": "Hello there."},
                   files={"audio_sample": ("me.wav", sample, "audio/wav")}, timeout=120)
    assert r.status_code == 201, r.text
    try:
        for given in (dict(xvector_only=True), dict(ref_text="Some words.")):
            param, message = refused(model="cloner", voice="saved_ref", **given)
            assert param == next(iter(given)), (given, message)
            assert "apply to reference audio, not to a saved prompt" in message
    finally:
        assert server.request("DELETE", "/v1/audio/voices/saved_ref")[0] == 200
    # a transcript without any reference: what is missing is the voice (its reference)
    param, message = refused(model="cloner", ref_text="Some words.")
    assert param == "voice" and "missing required parameter 'voice'" in message, message


def test_voices_are_per_model_and_uploads_go_where_asked(multi, checkpoints):
    server, tts, root = multi
    listed = json.loads(server.request("GET", "/v1/audio/voices")[2])["data"]
    models_seen = {v["model"] for v in listed}
    assert models_seen == {"narrator", "speakers"}  # the Base model has no voice until one is uploaded
    only = json.loads(server.request("GET", "/v1/audio/voices?model=speakers")[2])["data"]
    assert {v["model"] for v in only} == {"speakers"} and "ryan" in [v["id"] for v in only]
    status, _, _ = server.request("GET", "/v1/audio/voices?model=nobody")
    assert status == 404

    import httpx

    sample = (checkpoints.get(SMALL) / "voice.wav").read_bytes()

    def upload(name, **fields):
        return httpx.post(server.url + "/v1/audio/voices", data={"name": name, **fields},
                          files={"audio_sample": ("me.wav", sample, "audio/wav")}, timeout=120)

    r = upload("pocket_me")  # no model: the default model, which clones
    assert r.status_code == 201 and r.json()["model"] == "narrator"
    r = upload("qwen_me", model="cloner", ref_text="Hello there, this is me.")
    assert r.status_code == 201 and r.json()["model"] == "cloner" and r.json()["mode"] == "in-context"
    r = upload("nope", model="speakers")
    assert r.status_code == 400 and r.json()["error"]["code"] == "voice_cloning_unsupported"
    assert r.json()["error"]["message"].startswith("speakers does not clone voices"), r.json()
    r = upload("pocket_me", model="cloner")  # one folder: a name is taken for every model
    assert r.status_code == 409

    # each uploaded voice speaks with its own model, as the Python API does
    got = server.client().audio.speech.create(model="cloner", input=TEXT, voice="qwen_me",
                                              response_format="wav",
                                              extra_body=dict(seed=9, **QWEN)).content
    ref = tts["cloner"].synthesize(TEXT, voice=tts["cloner"].voice(
        str(root / "voices" / "qwen_me.safetensors")), seed=9, **QWEN).samples
    assert np.abs(wav_of(got) - ref).max() < 1e-4
    status, _, data = server.request("POST", "/v1/audio/speech", {
        "model": "narrator", "input": TEXT, "voice": "qwen_me"})
    assert status == 400 and b"unknown voice" in data
    # delete finds the model holding it
    status, _, data = server.request("DELETE", "/v1/audio/voices/qwen_me")
    assert status == 200 and json.loads(data)["deleted"] is True
    assert not (root / "voices" / "qwen_me.safetensors").exists()
    assert server.request("DELETE", "/v1/audio/voices/pocket_me")[0] == 200


def _serve(*args, timeout=120):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "vocalis", "serve", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_cli_refuses_mismatched_or_clashing_names(checkpoints, tmp_path):
    ckpt = str(checkpoints.get(SMALL))
    r = _serve("--model", ckpt, "--model-name", "a", "--model-name", "b", "--port", "0")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        "error: 2 --model-name for 1 --model: give at most one name per model, in the same order"]
    r = _serve("--model", ckpt, "--model", ckpt, "--port", "0", "--voices-dir", str(tmp_path))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()  # refused before loading: no load log before it
    assert len(lines) == 1 and f"--model {ckpt!r} is given twice" in lines[0], r.stderr
    assert "--model-name" in lines[0]
    r = _serve("--model", ckpt, "--model", ckpt, "--model-name", "x", "--model-name", "x",
               "--port", "0", "--voices-dir", str(tmp_path))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "two models would be served as 'x'" in lines[0]
    # a file where the voices' folder should be is refused before any model loads
    r = _serve("--model", ckpt, "--port", "0", "--voices-dir", ckpt + "/voice.wav")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "is a file, not a folder" in lines[0]


def test_a_later_model_named_tts_1_takes_that_alias_over_saying_so(multi, caplog):
    """``--model-name tts-1`` on a second model: a served id is explicit and wins over
    OpenAI's alias (ServerState.pick), so ``tts-1`` then means that model; the start-up log
    says which model lost the alias. The first model keeps OpenAI's other names."""
    _, tts, root = multi
    with caplog.at_level("WARNING", logger="vocalis.server"):
        app = create_app([tts["narrator"], tts["speakers"]], voices_dir=root / "voices",
                         model_name=["narrator", "tts-1"])
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == ["model 2 is served as 'tts-1', one of OpenAI's model names: requests for "
                      "it go to model 2, not to the first model 'narrator', which loses that "
                      "alias (it keeps OpenAI's others); give model 2 another --model-name to "
                      "keep the alias on 'narrator'"], warned
    server = Server(app)
    try:
        client = server.client()
        cards = {m.id: m for m in client.models.list().data}
        assert cards["tts-1"].family == "qwen3-tts" and cards["tts-1-hd"].family == "pocket-tts"
        got = wav_of(client.audio.speech.create(model="tts-1", input=TEXT, voice="Ryan",
                                                response_format="wav",
                                                extra_body=dict(seed=5, **QWEN)).content)
        assert got.shape == (8 * 1920,)  # the Qwen3 model's speaker and frames
    finally:
        server.stop()
    caplog.clear()
    with caplog.at_level("WARNING", logger="vocalis.server"):  # the first model: nothing lost
        create_app([tts["narrator"], tts["speakers"]], voices_dir=root / "voices",
                   model_name=["tts-1", "speakers"])
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_two_configs_in_one_folder_are_refused_before_either_loads(checkpoints, tmp_path):
    """Two config files in one folder would both be served under the folder's name: refused
    before any weights are read (both configs name weights that do not exist; a load would
    fail on those first, as the old code did), naming both files and the fix."""
    config = (checkpoints.get(SMALL) / "config.yaml").read_text()
    folder = tmp_path / "configs"
    folder.mkdir()
    missing = tmp_path / "missing.safetensors"
    lines = [f"weights_path: {missing}" if ln.startswith("weights_path:") else ln
             for ln in config.splitlines()]
    for name in ("a.yaml", "b.yaml"):
        (folder / name).write_text("\n".join(lines) + "\n")
    a, b = str(folder / "a.yaml"), str(folder / "b.yaml")
    r = _serve("--model", a, "--model", b, "--port", "0", "--voices-dir", str(tmp_path / "v"))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"error: two models would be served as 'configs': --model {a!r} (its folder's "
        f"name, as for every local checkpoint) and --model {b!r} (its folder's name, as for "
        "every local checkpoint); give one its own --model-name (once per --model, in their "
        "order)"]
    # the same --model-name on both: named alike, both files named
    r = _serve("--model", a, "--model", b, "--model-name", "x", "--model-name", "x",
               "--port", "0", "--voices-dir", str(tmp_path / "v"))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"error: two models would be served as 'x': --model {a!r} and --model {b!r} are both "
        "given that --model-name; give each its own --model-name (in the order of --model)"]
    # a --model-name on the first that is the second's folder name: each id's source named
    c = tmp_path / "x"
    c.mkdir()
    (c / "c.yaml").write_text("\n".join(lines) + "\n")
    r = _serve("--model", a, "--model", str(c / "c.yaml"), "--model-name", "x",
               "--port", "0", "--voices-dir", str(tmp_path / "v"))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"error: two models would be served as 'x': --model {a!r} (its --model-name) and "
        f"--model {str(c / 'c.yaml')!r} (its folder's name, as for every local checkpoint); "
        "give one its own --model-name (once per --model, in their order)"]
    # with a name each, the clash is gone: the load runs (and fails on the missing weights)
    r = _serve("--model", a, "--model", b, "--model-name", "x", "--port", "0",
               "--voices-dir", str(tmp_path / "v"))
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == (
        f"error: file not found: {missing}; check the path or the config that names it")


def test_a_shared_voice_folder_warns_only_about_voices_this_model_should_use(multi, checkpoints,
                                                                             tmp_path, caplog):
    """Models of one server share a voice folder: a model is not warned about the voices of
    another family or kind (a CustomVoice model never clones, so no stored voice is its),
    only about voices of its own kind made with other weights."""
    import logging

    from vocalis.server.voices import VoiceStore

    _, tts, _ = multi
    folder = tmp_path / "voices"
    sample = (checkpoints.get(SMALL) / "voice.wav").read_bytes()
    VoiceStore(tts["narrator"], folder).create("pocket_me", sample, "me.wav")
    VoiceStore(tts["cloner"], folder).create("qwen_me", sample, "me.wav",
                                             ref_text="Hello there, this is me.")
    caplog.set_level(logging.INFO, logger="vocalis")
    for name, ids in (("narrator", {"pocket_me"}), ("speakers", set()), ("cloner", {"qwen_me"})):
        caplog.clear()
        store = VoiceStore(tts[name], folder)
        assert {v["id"] for v in store.list() if v["type"] == "custom"} == ids, name
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], name
    # a Pocket voice made with other weights: the Pocket model says so, the others do not
    meta = json.loads((folder / "pocket_me.json").read_text())
    (folder / "other.safetensors").write_bytes((folder / "pocket_me.safetensors").read_bytes())
    (folder / "other.json").write_text(json.dumps({**meta, "weights": "0" * 16}))
    for name, warned in (("narrator", True), ("speakers", False), ("cloner", False)):
        caplog.clear()
        VoiceStore(tts[name], folder)
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert bool(warnings) == warned, (name, warnings)
        if warned:
            assert "1 voice(s)" in warnings[0] and "other weights" in warnings[0]
