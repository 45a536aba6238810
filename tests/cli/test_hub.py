"""vocalis.hub with the real huggingface_hub: an offline temporary cache, a cache laid out
as huggingface_hub documents it, and a local HTTP server speaking the Hub's resolve protocol
(HF_ENDPOINT), which populates the cache through hf_hub_download itself."""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vocalis import hub
from vocalis.errors import InputError, ModelNotFound
from vocalis.hub import GatedRepoError, is_safetensors_ref, parse_hf, resolve

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hf_env(tmp_path, monkeypatch):
    """An empty, private HF cache and vocalis cache; no token; online unless a test says otherwise."""
    cache = tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("VOCALIS_CACHE", str(tmp_path / "vocalis"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # in case the process started offline
    return cache


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    "ref,expected",
    [
        ("hf://kyutai/tts-voices/alba-mackenna/casual.wav", ("kyutai/tts-voices", "alba-mackenna/casual.wav", None)),
        ("hf://kyutai/pocket-tts/tokenizer.model@08ffc587", ("kyutai/pocket-tts", "tokenizer.model", "08ffc587")),
        (
            "hf://kyutai/pocket-tts-without-voice-cloning/languages/english/embeddings/alba.safetensors@a7056f50",
            ("kyutai/pocket-tts-without-voice-cloning", "languages/english/embeddings/alba.safetensors", "a7056f50"),
        ),
        ("hf://o/r/f.bin@refs/pr/1", ("o/r", "f.bin", "refs/pr/1")),
        ("hf://o/r/we@ird.wav@main", ("o/r", "we@ird.wav", "main")),
    ],
)
def test_parse_hf(ref, expected):
    assert parse_hf(ref) == expected


@pytest.mark.parametrize(
    "ref", ["hf://owner/repo", "hf://owner", "hf://owner/repo/", "hf://o/r/f@", "hf://o/r@main/f", "hf://o//f", "x.wav"]
)
def test_parse_hf_rejects(ref):
    with pytest.raises(InputError):
        parse_hf(ref)


@pytest.mark.parametrize(
    "ref,expected",
    [
        ("hf://o/r/voices/alba.safetensors", True),
        ("hf://o/r/voices/alba.safetensors@a7056f505a4a8ca72d8b5fb1440071d6f1a35739", True),
        ("hf://o/r/voices/alba.wav@v1.safetensors", False),
        ("hf://o/r/v.1/alba.SafeTensors@main", True),
        ("https://example.com/x/alba.safetensors?download=true", True),
        ("https://example.com/x/alba.safetensors#frag", True),
        ("https://example.com/x/alba.wav?name=a.safetensors", False),
        ("voices/alba.safetensors", True),
        (Path("voices/alba.wav"), False),
        ("voices/alba", False),
    ],
)
def test_is_safetensors_ref(ref, expected):
    assert is_safetensors_ref(ref) is expected


# ---------------------------------------------------------------- local paths


def test_local_path(tmp_path):
    f = tmp_path / "w.safetensors"
    f.write_bytes(b"x")
    assert resolve(f) == f
    assert resolve(str(f)) == f


def test_local_path_missing(tmp_path):
    missing = tmp_path / "nope" / "w.safetensors"
    with pytest.raises(ModelNotFound) as info:
        resolve(str(missing))
    assert str(missing) in str(info.value)
    with pytest.raises(ModelNotFound, match="not a file"):
        resolve(tmp_path)
    with pytest.raises(ModelNotFound, match="supported references"):
        resolve("s3://bucket/key.bin")


def test_local_path_expands_user(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "v.wav").write_bytes(b"x")
    assert resolve("~/v.wav") == tmp_path / "v.wav"


# ---------------------------------------------------------------- offline cache


def test_hf_offline_empty_cache_says_how_to_get_it(hf_env, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFound) as info:
        resolve("hf://kyutai/pocket-tts/tts_b6369a24.safetensors@427e3d61b276ed69fdd03de0d185fa8a8d97fc5b",
                model_id="pocket-tts")
    assert not isinstance(info.value, GatedRepoError)
    message = str(info.value)
    assert "\n" not in message
    for needle in (
        "not cached",
        "kyutai/pocket-tts",
        "tts_b6369a24.safetensors",
        "427e3d61b276ed69fdd03de0d185fa8a8d97fc5b",
        "vocalis models download pocket-tts",
        "vocalis models random --config pocket-tts --out DIR",
        str(hf_env),
    ):
        assert needle in message, needle


def _put_in_cache(cache: Path, repo_id: str, filename: str, data: bytes, commit: str, ref: str | None = "main"):
    """Lay out a file as huggingface_hub's cache does (see its 'Manage cache' guide):
    blobs/<sha256>, snapshots/<commit>/<path> -> ../../blobs/<sha256>, refs/<branch> = commit."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    link = repo / "snapshots" / commit / filename
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(Path(*[".."] * (len(Path(filename).parts) + 1)) / "blobs" / blob.name)
    if ref:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return link


def test_hf_offline_cached_file_resolves(hf_env, monkeypatch):
    link = _put_in_cache(hf_env, "acme/voices", "en/alba.safetensors", b"weights", COMMIT)
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(hf_env)  # huggingface_hub accepts the layout
    assert not info.warnings and [r.repo_id for r in info.repos] == ["acme/voices"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for ref in ("hf://acme/voices/en/alba.safetensors", f"hf://acme/voices/en/alba.safetensors@{COMMIT}"):
        path = resolve(ref)
        assert path == link and path.read_bytes() == b"weights"
    with pytest.raises(ModelNotFound, match="not cached"):
        resolve("hf://acme/voices/en/alba.safetensors@v2")  # a branch never fetched
    with pytest.raises(ModelNotFound, match="not cached"):
        resolve("hf://acme/voices/en/other.safetensors")


# ---------------------------------------------------------------- a local Hub


class _FakeHub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    files = {("acme/tts", "config.yaml"): b"flow_lm: {}\n", ("acme/tts", "sub/dir/w.bin"): b"\x00\x01\x02" * 100}
    plain = {"/files/voice.wav": b"RIFF....WAVE", "/files/weights.safetensors": b"st"}
    hits: list[str] = []

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, status, body=b"", headers=None, head=False):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _handle(self, head):
        type(self).hits.append(self.path)
        if self.path in self.plain:
            return self._send(200, self.plain[self.path], head=head)
        parts = self.path.lstrip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return self._send(404, b"not found", head=head)
        repo, revision, filename = f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:])
        if parts[0] == "gated":
            return self._send(403, b"{}", {"X-Error-Code": "GatedRepo", "X-Error-Message": "gated"}, head)
        if parts[0] == "private":
            return self._send(401, b"{}", {"X-Error-Code": "RepoNotFound", "X-Error-Message": "nope"}, head)
        if (repo, filename) not in self.files and parts[0] != "acme":
            return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound", "X-Error-Message": "nope"}, head)
        if revision not in ("main", COMMIT):
            return self._send(404, b"{}", {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "no rev"}, head)
        if (repo, filename) not in self.files:
            return self._send(404, b"{}", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT}, head)
        body = self.files[(repo, filename)]
        etag = hashlib.sha256(body).hexdigest()
        return self._send(200, body, {"X-Repo-Commit": COMMIT, "ETag": f'"{etag}"'}, head)

    def do_HEAD(self):
        self._handle(head=True)

    def do_GET(self):
        self._handle(head=False)


@pytest.fixture
def fake_hub(hf_env, monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    _FakeHub.hits = []
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    yield url
    server.shutdown()
    server.server_close()


def test_hf_download_then_offline(fake_hub, hf_env, monkeypatch):
    path = resolve("hf://acme/tts/sub/dir/w.bin")
    assert path.read_bytes() == _FakeHub.files[("acme/tts", "sub/dir/w.bin")]
    assert hf_env in path.parents
    assert (hf_env / "models--acme--tts" / "refs" / "main").read_text() == COMMIT
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hits = len(_FakeHub.hits)
    assert resolve("hf://acme/tts/sub/dir/w.bin") == path
    assert resolve(f"hf://acme/tts/sub/dir/w.bin@{COMMIT}") == path
    assert len(_FakeHub.hits) == hits  # offline: no request at all


def test_hf_gated_and_private(fake_hub):
    with pytest.raises(GatedRepoError) as info:
        resolve("hf://gated/model/tts.safetensors")
    message = str(info.value)
    assert "https://huggingface.co/gated/model" in message and "hf auth login" in message
    assert isinstance(info.value, ModelNotFound)
    with pytest.raises(GatedRepoError, match="hf auth login"):
        resolve("hf://private/model/tts.safetensors")


def test_hf_not_found_errors(fake_hub):
    with pytest.raises(ModelNotFound) as info:
        resolve("hf://nobody/model/tts.safetensors")
    assert not isinstance(info.value, GatedRepoError) and "nobody/model" in str(info.value)
    with pytest.raises(ModelNotFound, match="no such file"):
        resolve("hf://acme/tts/missing.yaml")
    with pytest.raises(ModelNotFound, match="revision 'v9'"):
        resolve("hf://acme/tts/config.yaml@v9")


def test_hf_unreachable_hub_and_nothing_cached(hf_env, monkeypatch):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    # huggingface_hub retries connection errors 5 times with backoff (about 23 s) before
    # giving up; skip the waiting, not the retries.
    from huggingface_hub.utils import _http

    monkeypatch.setattr(_http.time, "sleep", lambda seconds: None)
    with pytest.raises(ModelNotFound) as info:
        resolve("hf://acme/tts/config.yaml")
    message = str(info.value)
    assert "could not be reached" in message and "not cached" in message and "vocalis models download" in message


# ---------------------------------------------------------------- URLs


def test_url_download_once(fake_hub, hf_env):
    url = fake_hub + "/files/weights.safetensors"
    path = resolve(url)
    assert path.read_bytes() == b"st"
    assert path == hub.url_cache_dir() / (hashlib.sha256(url.encode()).hexdigest() + ".safetensors")
    assert hub.url_cache_dir() == hf_env.parent.parent / "vocalis" / "urls"
    assert _FakeHub.hits.count("/files/weights.safetensors") == 1
    assert resolve(url) == path
    assert _FakeHub.hits.count("/files/weights.safetensors") == 1
    assert not list(path.parent.glob("*.part"))


def test_url_errors(fake_hub, monkeypatch):
    url = fake_hub + "/files/missing.wav"
    with pytest.raises(ModelNotFound) as info:
        resolve(url)
    assert url in str(info.value) and "404" in str(info.value)
    assert not list(hub.url_cache_dir().glob("*"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFound, match="not cached"):
        resolve(fake_hub + "/files/voice.wav")


def test_url_unreachable(hf_env):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/voice.wav"
    with pytest.raises(ModelNotFound) as info:
        resolve(url)
    assert url in str(info.value)
