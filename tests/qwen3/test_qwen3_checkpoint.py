"""Finding Qwen3-TTS checkpoints (vocalis.models.qwen3.checkpoint) and `vocalis models
show/download` for them, with the real huggingface_hub.

A tiny random checkpoint (official layout) is written once. It is checked as a local folder,
with each required piece taken away in turn, and served by a local HTTP server speaking the
Hub's API (tree listing, resolve), so that `snapshot_download` itself lays out the Hugging
Face cache; offline resolution is then checked against that cache, with the pinned commit
present, absent or incomplete. Parameter counts are checked against the tensors of the
written files and against the counts of the official classes (reference notes §0).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote, urlparse

import pytest

from vocalis.errors import CheckpointError, ModelNotFound
from vocalis.models.qwen3 import registry
from vocalis.models.qwen3.checkpoint import (
    ALLOW_PATTERNS,
    REQUIRED_FILES,
    cache_status,
    check_checkpoint_dir,
    checkpoint_size_bytes,
    is_qwen3,
    parameter_counts,
    resolve_checkpoint,
)

MODEL_ID = "qwen3-tts/0.6b-customvoice"
REL = registry.RELEASES[MODEL_ID]
OTHER_COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

    return write_random_checkpoint(MODEL_ID, tmp_path_factory.mktemp("qwen3") / "ckpt", seed=0, tiny=True)


def one_line(exc: BaseException) -> str:
    message = str(exc)
    assert message and "\n" not in message
    return message


# ---------------------------------------------------------------- local folders


def test_local_folder_resolves(tiny):
    assert resolve_checkpoint(str(tiny)) == (tiny, None)
    assert resolve_checkpoint(tiny) == (tiny, None)
    assert check_checkpoint_dir(tiny) == tiny
    assert is_qwen3(str(tiny)) and is_qwen3(tiny)


def _partial_copy(src: Path, dst: Path, drop: str) -> Path:
    """``src`` as links to its files, without ``drop`` (a file or folder relative to src)."""
    for f in src.rglob("*"):
        rel = f.relative_to(src)
        if not f.is_file() or rel == Path(drop) or Path(drop) in rel.parents:
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        (dst / rel).symlink_to(f)
    return dst


@pytest.mark.parametrize("drop,needle", [
    ("config.json", "has no config.json"),
    ("model.safetensors", "model.safetensors is missing"),
    ("vocab.json", "text tokenizer file vocab.json"),
    ("merges.txt", "text tokenizer file merges.txt"),
    ("tokenizer_config.json", "text tokenizer file tokenizer_config.json"),
    ("speech_tokenizer", "speech_tokenizer/ is missing"),
    ("speech_tokenizer/config.json", "speech_tokenizer/config.json is missing"),
    ("speech_tokenizer/model.safetensors", "speech_tokenizer/model.safetensors is missing"),
])
def test_each_missing_piece_is_one_clear_error(tiny, tmp_path, drop, needle):
    d = _partial_copy(tiny, tmp_path / "ckpt", drop)
    with pytest.raises(CheckpointError) as info:
        resolve_checkpoint(str(d))
    message = one_line(info.value)
    assert str(d) in message and needle in message, message
    assert "vocalis models download" in message or "point to the folder" in message


def test_speech_tokenizer_folder_missing_names_the_fix(tiny, tmp_path):
    d = _partial_copy(tiny, tmp_path / "ckpt", "speech_tokenizer")
    with pytest.raises(CheckpointError) as info:
        resolve_checkpoint(str(d))
    message = one_line(info.value)
    assert message.startswith(f"{d}/speech_tokenizer/ is missing: ")
    assert "(config.json, model.safetensors)" in message and "vocalis models" in message


def test_configs_of_other_models_are_refused(tiny, tmp_path):
    d = _partial_copy(tiny, tmp_path / "ckpt", "config.json")
    (d / "config.json").write_text(json.dumps({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}))
    with pytest.raises(CheckpointError, match="not 'qwen3_tts'"):
        resolve_checkpoint(str(d))
    assert not is_qwen3(d)
    e = _partial_copy(tiny, tmp_path / "ckpt2", "speech_tokenizer/config.json")
    (e / "speech_tokenizer" / "config.json").write_text(json.dumps({"model_type": "qwen3_tts_tokenizer_25hz"}))
    with pytest.raises(CheckpointError, match="speech_tokenizer/config.json has model_type"):
        resolve_checkpoint(str(e))


def test_unknown_paths_and_ids_list_the_released_models(tiny, tmp_path):
    for model in (str(tmp_path / "nope"), "qwen3-tts/9b-customvoice", "Qwen/Qwen3-TTS-12Hz-9B-Base"):
        with pytest.raises(ModelNotFound) as info:
            resolve_checkpoint(model)
        message = one_line(info.value)
        assert model in message and all(m in message for m in registry.model_ids()), message
    with pytest.raises(ModelNotFound, match="is not a folder"):
        resolve_checkpoint(str(tiny / "config.json"))
    with pytest.raises(ModelNotFound):
        resolve_checkpoint("  ")


def test_is_qwen3(tiny, tmp_path):
    for model in ("qwen3-tts/0.6b-customvoice", "QWEN3-TTS/1.7B-VoiceDesign", "Qwen/Qwen3-TTS-12Hz-1.7B-Base",
                  "qwen/qwen3-tts-12hz-0.6b-base", "qwen3-tts/unknown", str(tiny)):
        assert is_qwen3(model), model
    (tmp_path / "pocket").mkdir()
    (tmp_path / "pocket" / "config.json").write_text("not json {")
    for model in ("pocket-tts", "pocket-tts/english", str(tmp_path / "missing"), str(tmp_path),
                  str(tmp_path / "pocket"), str(tiny / "config.json"), "", "Qwen/Qwen2.5-7B"):
        assert not is_qwen3(model), model


# ---------------------------------------------------------------- sizes


def test_parameter_counts_equal_the_tensors_in_the_files(tiny):
    from safetensors import safe_open

    def stored(path: Path) -> int:
        with safe_open(str(path), "pt") as f:
            names = f.keys()
            return sum(_prod(f.get_slice(k).get_shape()) for k in names)

    n = parameter_counts(tiny)
    assert n["talker"] + n["speaker_encoder"] == stored(tiny / "model.safetensors")
    assert n["speech_tokenizer"] == stored(tiny / "speech_tokenizer" / "model.safetensors")
    assert parameter_counts(MODEL_ID, tiny=True) == n


def _prod(shape) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


# Counts of the official classes built on the meta device (qwen-tts 0.1.1), which also match the
# Hub file sizes at bf16: shared/reference/qwen3-tts.md §0.
OFFICIAL_PARAMS_M = {"qwen3-tts/0.6b-base": 914.6, "qwen3-tts/0.6b-customvoice": 905.8,
                     "qwen3-tts/1.7b-voicedesign": 1916.7}


@pytest.mark.parametrize("model_id", list(OFFICIAL_PARAMS_M))
def test_parameter_counts_of_the_releases(model_id):
    n = parameter_counts(model_id)
    assert (n["talker"] + n["speaker_encoder"]) / 1e6 == pytest.approx(OFFICIAL_PARAMS_M[model_id], abs=0.05)
    assert n["speech_tokenizer"] / 1e6 == pytest.approx(170.6, abs=0.05)
    assert (n["speaker_encoder"] > 0) == model_id.endswith("base")
    # model.safetensors 1.83 / 1.81 / 3.83 GB (bf16) + the 682 MB fp32 codec (reference §0, §3)
    hub_gb = {"qwen3-tts/0.6b-base": 1.83, "qwen3-tts/0.6b-customvoice": 1.81, "qwen3-tts/1.7b-voicedesign": 3.83}
    assert checkpoint_size_bytes(registry.RELEASES[model_id]) / 1e9 == pytest.approx(hub_gb[model_id] + 0.682, abs=0.01)


# ---------------------------------------------------------------- a local Hub


class _FakeHub(BaseHTTPRequestHandler):
    """The Hub API endpoints ``snapshot_download`` uses: the tree listing (recent
    huggingface_hub), revision info (older ones) and ``resolve`` for each file."""

    protocol_version = "HTTP/1.1"
    repos: ClassVar[dict[str, dict[str, bytes]]] = {}
    commit = REL.revision
    hits: ClassVar[list[str]] = []

    def log_message(self, *args):
        pass

    def _send(self, status, body=b"", headers=None, head=False):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, obj, head):
        return self._send(200, json.dumps(obj).encode(), {"Content-Type": "application/json"}, head)

    def _handle(self, head):
        type(self).hits.append(self.path)
        parts = [unquote(p) for p in urlparse(self.path).path.lstrip("/").split("/")]
        api = parts[:2] == ["api", "models"]
        if api:
            parts = parts[2:]
        if len(parts) < 4:
            return self._send(404, b"{}", head=head)
        repo, kind, revision = f"{parts[0]}/{parts[1]}", parts[2], parts[3]
        files = self.repos.get(repo)
        if files is None:
            return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound", "X-Error-Message": "no repo"}, head)
        if revision not in (self.commit, "main"):
            return self._send(404, b"{}", {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "no rev"}, head)
        if api and kind == "tree":
            return self._json([{"type": "file", "path": p, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                               for p, b in sorted(files.items())], head)
        if api and kind == "revision":
            return self._json({"id": repo, "sha": self.commit, "siblings": [{"rfilename": p} for p in files]}, head)
        if api or kind != "resolve":
            return self._send(404, b"{}", head=head)
        filename = "/".join(parts[4:])
        if filename not in files:
            return self._send(404, b"{}", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": self.commit}, head)
        body = files[filename]
        return self._send(200, body, {"X-Repo-Commit": self.commit,
                                      "ETag": f'"{hashlib.sha256(body).hexdigest()}"'}, head)

    def do_HEAD(self):
        self._handle(head=True)

    def do_GET(self):
        self._handle(head=False)


@pytest.fixture(scope="module")
def repo_files(tiny) -> dict[str, bytes]:
    files = {str(f.relative_to(tiny)): f.read_bytes() for f in tiny.rglob("*") if f.is_file()}
    files["README.md"] = b"# Qwen3-TTS\n"  # in the real repos, not needed
    files["extra/unused.bin"] = b"\0" * 1000
    return files


@pytest.fixture
def hf_env(tmp_path, monkeypatch):
    """An empty, private HF cache; no token; online unless a test says otherwise."""
    cache = tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("VOCALIS_CACHE", str(tmp_path / "vocalis"))
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return cache


@pytest.fixture
def fake_hub(hf_env, repo_files, monkeypatch):
    _FakeHub.repos = {REL.repo_id: repo_files}
    _FakeHub.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    yield url
    server.shutdown()
    server.server_close()


def _snapshot(cache: Path, commit: str = REL.revision) -> Path:
    return cache / ("models--" + REL.repo_id.replace("/", "--")) / "snapshots" / commit


def _fetched(hits: list[str]) -> set[str]:
    prefix = f"/{REL.repo_id}/resolve/{REL.revision}/"
    return {unquote(h[len(prefix):]) for h in hits if h.startswith(prefix)}


def test_download_then_offline(fake_hub, hf_env, tiny, monkeypatch):
    folder, rel = resolve_checkpoint(MODEL_ID)
    assert rel == REL and folder == _snapshot(hf_env)
    # exactly the files vocalis asks for: not README.md, not extra/
    assert _fetched(_FakeHub.hits) == set(ALLOW_PATTERNS) & set(_FakeHub.repos[REL.repo_id])
    assert not (folder / "README.md").exists() and not (folder / "extra").exists()
    for name in REQUIRED_FILES:
        assert (folder / name).read_bytes() == (tiny / name).read_bytes(), name
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(hf_env)  # huggingface_hub accepts what it laid out
    assert [r.repo_id for r in info.repos] == [REL.repo_id]
    assert [r.commit_hash for r in next(iter(info.repos)).revisions] == [REL.revision]
    assert cache_status(REL) == (folder, [])

    hits = len(_FakeHub.hits)
    assert resolve_checkpoint(MODEL_ID, download=False) == (folder, REL)  # pinned + cached: no request
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for model in (MODEL_ID, MODEL_ID.upper(), REL.repo_id, REL.repo_id.lower()):
        assert resolve_checkpoint(model) == (folder, REL), model
    assert len(_FakeHub.hits) == hits


def _offline_error(model: str = MODEL_ID) -> str:
    with pytest.raises(ModelNotFound) as info:
        resolve_checkpoint(model)
    return one_line(info.value)


def test_offline_errors_when_the_pinned_commit_is_not_cached(fake_hub, hf_env, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    message = _offline_error()
    for needle in ("HF_HUB_OFFLINE is set", "not cached", REL.repo_id, REL.revision, str(hf_env),
                   f"vocalis models download {MODEL_ID}", "HF_HOME"):
        assert needle in message, needle
    assert _FakeHub.hits == []

    monkeypatch.delenv("HF_HUB_OFFLINE")
    folder, _ = resolve_checkpoint(MODEL_ID)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the cache holds another commit (what `main` pointed at once): the pinned one is still absent
    folder.rename(_snapshot(hf_env, OTHER_COMMIT))
    (folder.parent.parent / "refs").mkdir(exist_ok=True)
    (folder.parent.parent / "refs" / "main").write_text(OTHER_COMMIT)
    assert "not cached" in _offline_error(REL.repo_id)
    # the pinned commit present but incomplete (an interrupted download)
    shutil.copytree(_snapshot(hf_env, OTHER_COMMIT), folder, symlinks=True)
    (folder / "speech_tokenizer" / "model.safetensors").unlink()
    message = _offline_error()
    assert "incomplete" in message and "speech_tokenizer/model.safetensors" in message
    assert cache_status(REL) == (folder, ["speech_tokenizer/model.safetensors"])
    # online, the download completes it
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert resolve_checkpoint(MODEL_ID) == (folder, REL)
    assert (folder / "speech_tokenizer" / "model.safetensors").is_file()


def test_download_false_never_fetches(fake_hub, hf_env):
    with pytest.raises(ModelNotFound, match="downloads are off and the checkpoint is not cached"):
        resolve_checkpoint(MODEL_ID, download=False)
    assert _FakeHub.hits == []


def test_hub_errors(fake_hub, hf_env, monkeypatch):
    monkeypatch.setattr(_FakeHub, "commit", OTHER_COMMIT)  # the pinned commit is gone from the Hub
    with pytest.raises(ModelNotFound) as info:
        resolve_checkpoint(MODEL_ID)
    assert f"revision {REL.revision!r} not found" in one_line(info.value)
    monkeypatch.setattr(_FakeHub, "repos", {})
    with pytest.raises(ModelNotFound) as info:
        resolve_checkpoint(MODEL_ID)
    assert REL.repo_id in one_line(info.value)


def test_hub_unreachable(hf_env, monkeypatch):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    message = _offline_error()
    assert "could not be reached" in message and f"vocalis models download {MODEL_ID}" in message


# ---------------------------------------------------------------- CLI


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vocalis.cli", *args], check=False, capture_output=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", **env}, timeout=180)


def _fields(stdout: bytes) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in stdout.decode().splitlines())


@pytest.mark.slow
def test_cli_show(tmp_path, tiny):
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    proc = run("models", "show", MODEL_ID, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    f = {k: v.strip() for k, v in _fields(proc.stdout).items()}
    assert f["model"] == MODEL_ID and f["repo"] == REL.repo_id
    assert f["revision"] == f"{REL.revision} (pinned)"
    assert f["type"] == "custom_voice" and f["size"] == "0.6B (0b6)"
    assert f["languages"].split(", ")[:2] == ["auto", "chinese"] and "english" in f["languages"]
    assert f["speakers"].split(", ") == ["aiden", "dylan (beijing_dialect)", "eric (sichuan_dialect)", "ono_anna",
                                         "ryan", "serena", "sohee", "uncle_fu", "vivian"]
    assert f["instruct"].startswith("ignored")
    assert f["parameters"] == "talker 905.8 M (bf16), speech tokenizer 170.6 M (fp32)"
    assert f["cache"].startswith(f"not cached in {tmp_path / 'hub'}") and f"models download {MODEL_ID}" in f["cache"]

    proc = run("models", "show", "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    f = {k: v.strip() for k, v in _fields(proc.stdout).items()}
    assert f["model"] == "qwen3-tts/1.7b-customvoice" and f["instruct"].startswith("yes")

    proc = run("models", "show", str(tiny), env=env)  # a local folder: its own config and files
    assert proc.returncode == 0, proc.stderr.decode()
    f = {k: v.strip() for k, v in _fields(proc.stdout).items()}
    assert f["checkpoint"] == str(tiny) and f["type"] == "custom_voice" and "repo" not in f and "cache" not in f
    n = parameter_counts(tiny)
    assert f["parameters"] == (f"talker {n['talker'] / 1e6:.1f} M, "
                               f"speech tokenizer {n['speech_tokenizer'] / 1e6:.1f} M")

    proc = run("models", "show", "qwen3-tts/2b-base", env=env)
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: unknown Qwen3-TTS model")


def test_cli_download_offline_is_one_line_exit_2(tmp_path, tiny):
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    proc = run("models", "download", MODEL_ID, env=env)
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 2 and proc.stdout == b""
    assert len(lines) == 1 and lines[0].startswith("error: ") and "not cached" in lines[0]
    assert f"vocalis models download {MODEL_ID}" in lines[0]
    d = _partial_copy(tiny, tmp_path / "ckpt", "speech_tokenizer")
    proc = run("models", "download", str(d), env=env)
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "speech_tokenizer/ is missing" in lines[0]


@pytest.mark.slow
def test_cli_download_then_show_cached(fake_hub, hf_env):
    env = {"HF_HUB_CACHE": str(hf_env), "HF_ENDPOINT": fake_hub, "HF_HUB_OFFLINE": "0",
           "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    proc = run("models", "download", "-q", MODEL_ID, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().splitlines() == [f"checkpoint: {_snapshot(hf_env)}"]
    proc = run("models", "show", MODEL_ID, env={**env, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr.decode()
    assert _fields(proc.stdout)["cache"].strip() == f"cached: {_snapshot(hf_env)}"
