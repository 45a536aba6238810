"""Resolve file references (local paths, ``hf://`` files, ``http(s)://`` URLs) to local files.

The reference formats are the ones the official Pocket TTS configs use
(``pocket_tts.utils.utils.download_if_necessary``):

* a local path: ``weights/model.safetensors``, ``~/voices/anna.wav``;
* a file on the Hugging Face Hub: ``hf://owner/repo/path/in/repo`` or
  ``hf://owner/repo/path/in/repo@revision`` (branch, tag or commit hash);
* a plain URL: ``https://example.com/voice.wav``.

Differences from the official function: every failure is a
:class:`~vocalis.errors.VocalisError` whose one-line message says what is
missing and how to get it; a local path must exist; ``~`` is expanded; URLs
are fetched with the standard library (no ``requests``) into their own cache.

Environment variables, read at call time (so they may change after import):

``HF_HOME`` / ``HF_HUB_CACHE``
    Where the Hugging Face cache lives (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``,
    else ``~/.cache/huggingface/hub``), as ``huggingface_hub`` defines them.
``HF_HUB_OFFLINE``
    ``1``: never touch the network; ``hf://`` files and URLs must already be cached.
``HF_ENDPOINT``
    Another Hub endpoint (a mirror).
``VOCALIS_CACHE``
    vocalis' own cache folder (default ``$XDG_CACHE_HOME/vocalis`` or
    ``~/.cache/vocalis``); downloaded URLs go to ``<cache>/urls/<sha256 of URL><suffix>``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import socket
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from vocalis.errors import InputError, ModelNotFound

__all__ = [
    "GatedRepoError",
    "hf_cache_dir",
    "is_hf_ref",
    "is_offline",
    "is_safetensors_ref",
    "is_url",
    "parse_hf",
    "ref_suffix",
    "resolve",
    "url_cache_dir",
    "url_cache_path",
    "vocalis_cache_dir",
]

logger = logging.getLogger(__name__)

HF_PREFIX = "hf://"
URL_TIMEOUT_S = 30.0
_TRUE = {"1", "on", "yes", "true"}


class GatedRepoError(ModelNotFound):
    """The Hub refused access (HTTP 401/403): a gated or private repository, or a missing/invalid token."""

    http_status = 403
    code = "model_access_denied"


# --------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------


def is_hf_ref(ref: str | os.PathLike[str]) -> bool:
    """True for an ``hf://`` reference."""
    return isinstance(ref, str) and ref.startswith(HF_PREFIX)


def is_url(ref: str | os.PathLike[str]) -> bool:
    """True for an ``http://`` or ``https://`` URL."""
    return isinstance(ref, str) and ref.startswith(("http://", "https://"))


def parse_hf(ref: str) -> tuple[str, str, str | None]:
    """Split ``hf://owner/repo/path/in/repo[@revision]`` into ``(repo_id, filename, revision)``.

    ``repo_id`` is ``owner/repo``; ``filename`` is the path inside the repository
    (may contain ``/``); ``revision`` is what follows the last ``@`` of the path
    (branch, tag or commit hash), or ``None`` (the Hub's default branch).

    Raises:
        InputError: ``ref`` is not an ``hf://`` reference with an owner, a
            repository and a file, or has an empty revision, or puts
            ``@revision`` after the repository name instead of after the file.
    """
    if not is_hf_ref(ref):
        raise InputError(f"not an hf:// reference: {ref!r} (expected hf://owner/repo/path/in/repo[@revision])")
    parts = ref[len(HF_PREFIX) :].split("/")
    if len(parts) < 3 or not all(parts):
        raise InputError(
            f"malformed hf:// reference {ref!r}: expected hf://owner/repo/path/in/repo[@revision]"
        )
    if "@" in parts[1]:
        raise InputError(
            f"malformed hf:// reference {ref!r}: put the revision after the file, "
            f"as in hf://owner/repo/path/in/repo@revision"
        )
    repo_id = f"{parts[0]}/{parts[1]}"
    filename = "/".join(parts[2:])
    revision: str | None = None
    if "@" in filename:
        filename, revision = filename.rsplit("@", 1)
        if not revision or not filename:
            raise InputError(f"malformed hf:// reference {ref!r}: empty file name or revision around '@'")
    return repo_id, filename, revision


def ref_suffix(ref: str | os.PathLike[str]) -> str:
    """Lower-case file suffix of a reference (``.safetensors``, ``.wav``...), or ``""``.

    Ignores ``@revision`` of ``hf://`` references and the query string and
    fragment of URLs.
    """
    if is_hf_ref(ref):
        name = ref[len(HF_PREFIX) :]
        name = name.rsplit("@", 1)[0] if "@" in name.rsplit("/", 1)[-1] else name
    elif is_url(ref):
        name = urlparse(ref).path
    else:
        name = os.fspath(ref)
    return Path(name).suffix.lower()


def is_safetensors_ref(ref: str | os.PathLike[str]) -> bool:
    """True when the reference names a ``.safetensors`` file (case-insensitive).

    ``hf://o/r/voice.safetensors@main`` and
    ``https://host/voice.safetensors?download=1`` are; ``voice.wav`` is not.
    """
    return ref_suffix(ref) == ".safetensors"


# --------------------------------------------------------------------------
# Environment
# --------------------------------------------------------------------------


def is_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or ``huggingface_hub``'s own flag) asks for no network."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE:
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.is_offline_mode())
    except (ImportError, AttributeError):  # pragma: no cover - very old huggingface_hub
        return False


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache folder as ``huggingface_hub`` would compute it now."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(os.path.expandvars(os.path.expanduser(explicit)))
    home = os.environ.get("HF_HOME")
    if home:
        return Path(os.path.expandvars(os.path.expanduser(home))) / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface" / "hub"


def vocalis_cache_dir() -> Path:
    """vocalis' own cache folder: ``$VOCALIS_CACHE``, else ``$XDG_CACHE_HOME/vocalis``, else ``~/.cache/vocalis``."""
    explicit = os.environ.get("VOCALIS_CACHE")
    if explicit:
        return Path(os.path.expanduser(explicit))
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "vocalis"


def url_cache_dir() -> Path:
    """Folder of downloaded URLs: ``<vocalis cache>/urls``."""
    return vocalis_cache_dir() / "urls"


def url_cache_path(url: str) -> Path:
    """Where :func:`resolve` keeps ``url``: ``<url cache>/<sha256(url)><suffix of the URL path>``."""
    suffix = Path(urlparse(url).path).suffix
    return url_cache_dir() / (hashlib.sha256(url.encode()).hexdigest() + suffix)


# --------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------


def resolve(ref: str | os.PathLike[str], *, model_id: str | None = None) -> Path:
    """Return a local file for ``ref``, downloading it if needed.

    Args:
        ref: a local path, ``hf://owner/repo/path[@revision]`` or an ``http(s)://`` URL.
        model_id: the model this file belongs to, used only to word the advice
            in errors (``vocalis models download <model_id>``).

    Returns:
        The path of an existing local file (for ``hf://``, inside the Hugging
        Face cache; for URLs, inside :func:`url_cache_dir`).

    Raises:
        ModelNotFound: local path missing; ``hf://`` repository, revision or file
            not found; file not cached while offline or while the Hub cannot be
            reached; URL download failed.
        GatedRepoError: (a ``ModelNotFound``) the Hub answered 401/403: gated or
            private repository, or bad token.
        InputError: malformed ``hf://`` reference or repository id.
    """
    if is_hf_ref(ref):
        repo_id, filename, revision = parse_hf(ref)
        return _resolve_hf(repo_id, filename, revision, model_id=model_id)
    if is_url(ref):
        return _resolve_url(ref)
    path = Path(os.path.expanduser(os.fspath(ref)))
    if path.is_file():
        return path
    if path.exists():
        raise ModelNotFound(f"{path} is not a file (a directory?); pass the path of the file itself")
    text = os.fspath(ref)
    hint = ""
    if "://" in text:
        hint = " (supported references: local paths, hf://owner/repo/path[@revision], http(s):// URLs)"
    raise ModelNotFound(f"file not found: {path}{hint}; check the path or the config that names it")


def _advice(model_id: str | None) -> str:
    target = model_id or "ID"
    return (
        f"to get it, run `vocalis models download {target}` on a machine with internet access, "
        f"or copy a Hugging Face cache that holds it into {hf_cache_dir()} (or point HF_HOME/HF_HUB_CACHE at one), "
        f"or use a random-weight checkpoint: `vocalis models random --config {model_id or 'ID'} "
        "--out DIR`"
    )


def _describe(repo_id: str, filename: str, revision: str | None) -> str:
    return f"{filename!r} from Hugging Face repo {repo_id!r} at revision {revision or 'main'!r}"


def _resolve_hf(repo_id: str, filename: str, revision: str | None, *, model_id: str | None = None) -> Path:
    from huggingface_hub import errors as hf_errors
    from huggingface_hub import hf_hub_download

    offline = is_offline()
    if not offline and revision is not None and _COMMIT.fullmatch(revision):
        # A commit revision never changes: a cached copy is authoritative, no network needed.
        try:
            return Path(hf_hub_download(repo_id=repo_id, filename=filename, revision=revision,
                                        cache_dir=str(hf_cache_dir()), local_files_only=True))
        except (hf_errors.LocalEntryNotFoundError, OSError, ValueError):
            pass
    if not offline:
        unreachable = _unreachable(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
        if unreachable:
            raise ModelNotFound(
                f"{_describe(repo_id, filename, revision)}: the Hugging Face Hub could not be "
                f"reached ({unreachable}) and the file is not cached in {hf_cache_dir()}; "
                f"{_advice(model_id)}")
    kwargs: dict = {
        "repo_id": repo_id,
        "filename": filename,
        "revision": revision,
        "cache_dir": str(hf_cache_dir()),
        "local_files_only": offline,
    }
    endpoint = os.environ.get("HF_ENDPOINT")
    if endpoint:
        kwargs["endpoint"] = endpoint.rstrip("/")
    what = _describe(repo_id, filename, revision)
    transport_errors = tuple(
        e for e in (getattr(hf_errors, "HTTPError", None), getattr(hf_errors, "OfflineModeIsEnabled", None)) if e
    )
    try:
        return Path(hf_hub_download(**kwargs))
    except hf_errors.GatedRepoError as exc:
        raise GatedRepoError(_gated_message(repo_id, what)) from exc
    except hf_errors.LocalEntryNotFoundError as exc:
        if offline:
            why = "HF_HUB_OFFLINE is set and the file is not cached"
        else:
            cause = exc.__cause__ or exc.__context__
            status = getattr(getattr(cause, "response", None), "status_code", None)
            if isinstance(cause, hf_errors.HfHubHTTPError) and status is not None:
                why = f"the Hugging Face Hub answered HTTP {status}"
            else:
                why = "the Hugging Face Hub could not be reached" + (f" ({_short(cause)})" if cause else "")
            why += " and the file is not cached"
        raise ModelNotFound(f"{what}: {why} in {hf_cache_dir()}; {_advice(model_id)}") from exc
    except hf_errors.RevisionNotFoundError as exc:
        raise ModelNotFound(
            f"revision {revision!r} not found in Hugging Face repo {repo_id!r} (wanted {filename!r}); "
            f"check the branch, tag or commit after '@'"
        ) from exc
    except hf_errors.RemoteEntryNotFoundError as exc:
        raise ModelNotFound(
            f"{what}: no such file in the repository; check the path in the reference or the config"
        ) from exc
    except hf_errors.HFValidationError as exc:
        raise InputError(f"invalid Hugging Face repo id or file in {repo_id!r}/{filename!r}: {_short(exc)}") from exc
    except hf_errors.HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            raise GatedRepoError(_gated_message(repo_id, what, maybe_missing=True)) from exc
        if isinstance(exc, hf_errors.RepositoryNotFoundError) or status == 404:
            raise ModelNotFound(
                f"Hugging Face repo {repo_id!r} not found (wanted {filename!r}); check the repo id"
            ) from exc
        raise ModelNotFound(f"{what}: the Hub answered HTTP {status} ({_short(exc)}); try again later") from exc
    except transport_errors as exc:
        raise ModelNotFound(
            f"{what}: download failed ({_short(exc)}); check the network or proxy settings, or {_advice(model_id)}"
        ) from exc
    except OSError as exc:
        raise ModelNotFound(f"{what}: could not store it in {hf_cache_dir()} ({_short(exc)})") from exc


_COMMIT = re.compile(r"[0-9a-f]{40}")


def _unreachable(endpoint: str, timeout: float = 3.0) -> str | None:
    """Why the hub host cannot be reached (DNS or TCP within ``timeout`` s), else None.

    Checked once before a download so that a machine without network gets one clear
    error at once instead of huggingface_hub's retries with back-off.
    """
    u = urlparse(endpoint)
    host = u.hostname or ""
    port = u.port or (443 if u.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as e:
        return e.strerror or str(e) or type(e).__name__


def _gated_message(repo_id: str, what: str, maybe_missing: bool = False) -> str:
    missing = " (or it does not exist: check the repo id)" if maybe_missing else ""
    return (
        f"access to Hugging Face repo {repo_id!r} was refused{missing} while fetching {what}: "
        f"accept its terms at https://huggingface.co/{repo_id} while logged in, "
        f"then authenticate here with `hf auth login` (or set HF_TOKEN)"
    )


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = text or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _resolve_url(url: str) -> Path:
    target = url_cache_path(url)
    if target.is_file():
        return target
    if is_offline():
        raise ModelNotFound(
            f"{url} is not cached ({target}) and HF_HUB_OFFLINE is set; download it on a machine with "
            f"internet access and pass the local file instead"
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelNotFound(f"cannot create the download cache {target.parent} for {url}: {_short(exc)}") from exc
    request = urllib.request.Request(url, headers={"User-Agent": "vocalis"})
    fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(request, timeout=URL_TIMEOUT_S) as response:
            shutil.copyfileobj(response, out, length=1 << 20)
        os.replace(tmp_name, target)
    except urllib.error.HTTPError as exc:
        raise ModelNotFound(f"could not download {url}: HTTP {exc.code} {exc.reason}") from exc
    except urllib.error.URLError as exc:
        raise ModelNotFound(
            f"could not download {url}: {_short(exc.reason) if isinstance(exc.reason, BaseException) else exc.reason}; "
            f"check the URL and the network, or download it yourself and pass the local path"
        ) from exc
    except (OSError, ValueError) as exc:  # timeouts, resets, disk full, bad URL
        raise ModelNotFound(
            f"could not download {url}: {_short(exc)}; check the URL and the network, "
            f"or download it yourself and pass the local path"
        ) from exc
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    logger.info("downloaded %s to %s", url, target)
    return target


# --------------------------------------------------------------------------
# Whole snapshots (several files of one repository at one revision)
# --------------------------------------------------------------------------


def snapshot_path(repo_id: str, revision: str) -> Path | None:
    """The cache folder ``models--owner--name/snapshots/<commit>`` of ``repo_id`` at ``revision``
    (a commit hash, or a branch/tag recorded under ``refs/`` by an earlier download), or None
    when the revision is a branch/tag the cache does not know. The folder may not exist.
    Never touches the network."""
    repo_dir = hf_cache_dir() / ("models--" + repo_id.replace("/", "--"))
    if _COMMIT.fullmatch(revision):
        return repo_dir / "snapshots" / revision
    ref = repo_dir / "refs" / revision
    try:
        commit = ref.read_text().strip()
    except OSError:
        return None
    return repo_dir / "snapshots" / commit if _COMMIT.fullmatch(commit) else None


def snapshot_missing(repo_id: str, revision: str, files: list[str] | tuple[str, ...]) -> tuple[Path | None, list[str]]:
    """``(snapshot folder, files of ``files`` it lacks)`` for ``repo_id`` at ``revision`` in the
    local cache (see :func:`snapshot_path`); a file counts only if its blob is there too (a
    dangling link is missing). Never touches the network."""
    folder = snapshot_path(repo_id, revision)
    if folder is None:
        return None, list(files)
    return folder, [f for f in files if not (folder / f).is_file()]


def resolve_snapshot(repo_id: str, revision: str, *, allow_patterns: list[str], required: list[str],
                     model_id: str | None = None, download: bool = True) -> Path:
    """A local snapshot folder of ``repo_id`` at ``revision`` holding every file in ``required``.

    A pinned commit whose files are all cached is returned without touching the network
    (a commit never changes). Otherwise, unless offline (``HF_HUB_OFFLINE``) or
    ``download`` is False, ``huggingface_hub.snapshot_download`` fetches the files matching
    ``allow_patterns`` into the Hugging Face cache (:func:`hf_cache_dir`; ``HF_ENDPOINT``
    honoured).

    Args:
        repo_id: ``owner/name`` on the Hub.
        revision: commit hash (recommended), branch or tag.
        allow_patterns: the files to download (``fnmatch`` patterns, as ``snapshot_download``).
        required: paths inside the repository that must exist afterwards.
        model_id: used only to word the advice in errors (``vocalis models download <model_id>``).
        download: False: use the cache only, as if offline.

    Raises:
        ModelNotFound: not cached while offline (or ``download`` False) or while the Hub cannot
            be reached; repository or revision not found; the repository lacks a required file.
        GatedRepoError: the Hub answered 401/403.
        InputError: malformed repository id.
    """
    from huggingface_hub import errors as hf_errors
    from huggingface_hub import snapshot_download

    what = f"Hugging Face repo {repo_id!r} at revision {revision!r}"
    folder, missing = snapshot_missing(repo_id, revision, required)
    if folder is not None and not missing:
        return folder
    offline = is_offline()
    if offline or not download:
        cached = "not cached" if folder is None or not folder.is_dir() else f"incomplete in the cache (missing {', '.join(missing)})"
        why = "HF_HUB_OFFLINE is set" if offline else "downloads are off"
        raise ModelNotFound(f"{what}: {why} and the checkpoint is {cached} in {hf_cache_dir()}; {_advice(model_id)}")
    endpoint = os.environ.get("HF_ENDPOINT")
    unreachable = _unreachable(endpoint or "https://huggingface.co")
    if unreachable:
        raise ModelNotFound(f"{what}: the Hugging Face Hub could not be reached ({unreachable}) and the checkpoint "
                            f"is not cached in {hf_cache_dir()}; {_advice(model_id)}")
    kwargs: dict = {"repo_id": repo_id, "revision": revision, "allow_patterns": list(allow_patterns),
                    "cache_dir": str(hf_cache_dir())}
    if endpoint:
        kwargs["endpoint"] = endpoint.rstrip("/")
    transport_errors = tuple(
        e for e in (getattr(hf_errors, "HTTPError", None), getattr(hf_errors, "OfflineModeIsEnabled", None)) if e
    )
    try:
        path = Path(snapshot_download(**kwargs))
    except hf_errors.GatedRepoError as exc:
        raise GatedRepoError(_gated_message(repo_id, what)) from exc
    except hf_errors.RevisionNotFoundError as exc:
        raise ModelNotFound(f"revision {revision!r} not found in Hugging Face repo {repo_id!r}; "
                            f"check the pinned revision") from exc
    except hf_errors.LocalEntryNotFoundError as exc:  # also IncompleteSnapshotError
        cause = exc.__cause__ or exc.__context__
        raise ModelNotFound(f"{what}: the download failed ({_short(cause or exc)}) and the checkpoint is not cached "
                            f"in {hf_cache_dir()}; {_advice(model_id)}") from exc
    except hf_errors.HFValidationError as exc:
        raise InputError(f"invalid Hugging Face repo id {repo_id!r}: {_short(exc)}") from exc
    except hf_errors.HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            raise GatedRepoError(_gated_message(repo_id, what, maybe_missing=True)) from exc
        if isinstance(exc, hf_errors.RepositoryNotFoundError) or status == 404:
            raise ModelNotFound(f"Hugging Face repo {repo_id!r} not found; check the repo id") from exc
        raise ModelNotFound(f"{what}: the Hub answered HTTP {status} ({_short(exc)}); try again later") from exc
    except transport_errors as exc:
        raise ModelNotFound(f"{what}: download failed ({_short(exc)}); check the network or proxy settings, "
                            f"or {_advice(model_id)}") from exc
    except OSError as exc:
        raise ModelNotFound(f"{what}: could not store it in {hf_cache_dir()} ({_short(exc)})") from exc
    absent = [f for f in required if not (path / f).is_file()]
    if absent:
        raise ModelNotFound(f"{what} has no {', '.join(absent)}: not a checkpoint vocalis can load; "
                            f"check the repo id and revision")
    logger.info("%s is in %s", what, path)
    return path
