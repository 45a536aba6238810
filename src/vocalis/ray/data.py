"""``vocalis batch --ray``: a requests file through a Ray Data actor pool, resumable.

Steps:

1. The requests file is read and every row checked on the driver, as ``vocalis batch``
   checks it (:func:`vocalis.bench.requests.check_one`: the model family's option schema
   and :meth:`~vocalis.family.ModelInfo.check_request`), but row by row: a bad row is
   recorded as failed in the manifest (``request N: ...``, and ``line L`` for JSON Lines)
   and the others run. Formats, by extension: ``.jsonl``/``.ndjson`` (JSON Lines),
   ``.parquet`` (columns ``text``, ``voice``, ``options`` as a struct, a map or a JSON
   string, optional ``id``), anything else a JSON array (the ``vocalis batch`` format).
   Each row may carry an ``id`` (a string or a 64-bit integer, kept as given; unique, 7 and
   "7" being the same id; ``row-N`` only on row N). A row without one, or whose own is
   unusable (a bad line, a reused id), gets ``row-N`` (N its index): no two records of a
   manifest share an id.
2. Requests already done (in the manifest as ``ok`` with the same key, and their file on
   disk) are skipped. The key (:func:`_request_key`) covers the text, seed and options, the
   voice and every option naming a file by the file's content (a voice file replaced under
   the same name runs again), the model (:func:`model_identity`: a released id with its
   pinned revisions, a local checkpoint by its files) and normalization.
3. The others become a Ray Dataset (one JSON string per row, so that options of any shape
   survive Arrow) and go through ``map_batches`` on an actor pool: each actor loads the
   model once and runs each batch of rows (``batch_size``, the engine's ``max_batch``)
   through its continuous-batching engine at once (each row's voice made once per actor
   and the row checked against the loaded model, as ``vocalis batch`` does:
   :func:`vocalis.bench.batch.prepare_jobs`); it writes one 16-bit WAV per request,
   ``NNNN.wav`` by index as ``vocalis batch`` names them (and ``NNNN.npy``, the codes, for
   families whose engine reports them), and returns one manifest record per row. A request that fails is a record with
   its error; the job goes on.
4. The driver appends each record to ``manifest.partial.jsonl`` as it arrives (so an
   interrupted job resumes from there) and writes the manifest, one record per request in
   file order, at the end: ``manifest.jsonl`` or ``manifest.parquet``.

Manifest record: ``id`` (in ``manifest.parquet`` an int64 column when every id is an
integer, else strings), ``index``, ``path`` (file name in the output folder, or null),
``seconds`` (audio), ``sample_rate``, ``status`` (``ok`` / ``failed``), ``error``, ``seed``,
``key`` (a hash of what the audio depends on, see step 2).

Everything the actors read (the model, voice files) and write (the output folder) must be
at the same path on every node: a shared filesystem on a cluster.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vocalis import families
from vocalis.audio import write_wav
from vocalis.bench.batch import (
    DEFAULT_BATCH_SIZE,
    MAX_BATCH_SIZE,
    _wav_name,
    load_session,
    parse_session_options,
    prepare_jobs,
)
from vocalis.bench.requests import BatchRequest, check_one, not_read
from vocalis.bench.session import VoiceCache, run_pass
from vocalis.errors import InputError, VocalisError
from vocalis.family import ModelInfo
from vocalis.ray import (
    ClusterError,
    absolute,
    check_address,
    check_model,
    check_ray_cpus,
    check_resources,
    connect,
    last_error_line,
)
from vocalis.text.files import read_utf8

log = logging.getLogger("vocalis.ray")

MANIFEST_FORMATS = ("jsonl", "parquet")
PARTIAL_NAME = "manifest.partial.jsonl"
_MAX_ID_CHARS = 256


@dataclass
class Row:
    """One request of the file: checked (``request`` set) or bad (``error`` set)."""

    index: int
    id: str | int  # its own (a string or an integer, as given), else implicit_id(index)
    request: dict | None = None  # {"text", "voice", "seed", "sampling"}
    error: str | None = None
    key: str | None = None
    legacy_key: str | None = None  # the key an earlier vocalis gave it (see _legacy_key)


# --------------------------------------------------------------------------- reading


def _file_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    return "json"


def _raw_items(path: Path) -> list[tuple[object, str | None]]:
    """(decoded item, a problem that makes it unreadable) per row of the file.

    Raises InputError when the file as a whole cannot be read."""
    fmt = _file_format(path)
    if fmt == "parquet":
        try:  # pyarrow: part of the optional Ray extra, needed for Parquet only
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError("reading Parquet needs pyarrow: pip install 'vocalis[ray]'") from None
        if not path.is_file():
            raise InputError(f"requests file {path} does not exist")
        try:
            table = pq.read_table(str(path))
        except Exception as e:  # noqa: BLE001 - pyarrow's errors are many
            raise InputError(f"requests file {path} is not a readable Parquet file: "
                             f"{' '.join(str(e).split())[:300]}") from None
        return [(_from_parquet(rec), None) for rec in table.to_pylist()]
    raw = read_utf8(path, "requests file")
    if fmt == "jsonl":
        out: list[tuple[object, str | None]] = []
        for lineno, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append((json.loads(line), None))
            except json.JSONDecodeError as e:
                out.append((None, f"line {lineno}: not valid JSON: {e.msg} at column {e.colno}"))
        if not out:
            raise InputError(f"requests file {path} has no requests (no non-empty line)")
        return out
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise InputError(f"requests file {path} is not valid JSON: {e.msg} at line {e.lineno} "
                         f"column {e.colno}; accepted formats, by extension: .jsonl or .ndjson "
                         "(JSON Lines: one object per line), .parquet (Parquet), any other a "
                         'JSON array of request objects like [{"text": ...}]'
                         f"{not_read(path)}") from None
    if not isinstance(data, list):
        raise InputError(f"requests file {path}: requests must be a JSON array of objects like "
                         '[{"text": ...}] (or JSON Lines in a .jsonl file)')
    if not data:
        raise InputError(f"requests file {path}: requests array is empty")
    return [(item, None) for item in data]


def _from_parquet(rec: dict) -> dict:
    """A Parquet row as a request object: null columns are absent; ``options`` may be a
    struct (null fields absent), a map (pairs) or a JSON string."""
    out = {k: v for k, v in rec.items() if v is not None}
    opts = out.get("options")
    if isinstance(opts, str):
        try:
            out["options"] = json.loads(opts)
        except json.JSONDecodeError as e:
            out["options"] = _BadOptions(f"'options' is a string but not JSON: {e.msg}")
    elif isinstance(opts, list) and all(isinstance(p, tuple) and len(p) == 2 for p in opts):
        out["options"] = {k: v for k, v in opts if v is not None}
    elif isinstance(opts, dict):
        out["options"] = {k: v for k, v in opts.items() if v is not None}
    return out


class _BadOptions:
    def __init__(self, why: str):
        self.why = why


#: files up to this size go into a resume key by content; bigger ones (weights) by size and
#: modification time, so that a job's start does not read gigabytes
_SMALL_FILE_BYTES = 1 << 20
_MODEL_MAX_FILES = 10_000
_MODEL_MAX_DEPTH = 3
_COMMIT = re.compile(r"(?<![0-9a-f])[0-9a-f]{40}(?![0-9a-f])")
_digests: dict[tuple[str, int, int], str] = {}


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, computed once per distinct (path, size, modification time)
    in this process: a job whose 10,000 rows share one voice file reads it once.

    Raises OSError (missing, unreadable)."""
    p = os.path.abspath(os.fspath(path))
    st = os.stat(p)
    k = (p, st.st_size, st.st_mtime_ns)
    digest = _digests.get(k)
    if digest is None:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
        digest = _digests[k] = h.hexdigest()
    return digest


def _file_ref(value):
    """What a resume key holds for a voice or a file option: a file's content (its SHA-256
    and extension, which decides how it is read), not its path; anything else (a voice
    name, an ``hf://`` reference, a path that is not a file here) as given."""
    if not isinstance(value, str) or "://" in value:
        return value
    try:
        if not os.path.isfile(value):
            return value
        return {"sha256": file_digest(value), "suffix": Path(value).suffix.lower()}
    except OSError:  # unreadable here: the actor reports it; the key keeps the path
        return value


def model_identity(info: ModelInfo, model: str, skip: Path | None = None) -> str:
    """What a resume key holds for the model (see :func:`_request_key`).

    A released model (or an ``hf://`` reference): its id and the revisions it pins (the
    40-hex commits of its description, e.g. each weight file's ``@commit``), so that a
    vocalis release that moves a pin runs the requests again. A local checkpoint: its
    folder's files (up to 3 levels deep, hidden ones and ``skip``, the output folder,
    left out), each small file (up to 1 MiB: configs, tokenizer files) by content, each
    bigger one (weights) by size and modification time, and the file given when the model
    is one (a ``.yaml`` config beside others), and the files outside the folder that its
    config names by absolute path (:func:`_named_files`); not the folder's path, so a moved
    folder still resumes, while rewritten weights (or weights copied without their times)
    run again. Cheap: a ``stat`` per file and a read of the small ones.
    """
    if info.local_path is None:
        pins = sorted(set(_COMMIT.findall(repr(info.extra))))
        return json.dumps({"model": model, "pins": pins})
    folder = Path(info.local_path)
    files: list = []
    _walk(folder, folder, skip.resolve() if skip is not None else None, 0, files)
    given = Path(model)
    entry = given.name if given.is_file() else None
    return json.dumps({"files": files, "entry": entry, "named": _named_files(info, folder)},
                      sort_keys=True)


def _named_files(info: ModelInfo, folder: Path) -> list:
    """The files outside ``folder`` that the model's config names by absolute path (a
    config whose weights live elsewhere), by path and, as in the folder, content or size
    and time."""
    out = []
    root = folder.resolve()
    for text in sorted(set(re.findall(r"'([^'\n]{1,4096})'", repr(info.extra)))):
        if os.sep not in text or "://" in text:
            continue
        p = Path(text).expanduser()
        try:
            if not p.is_absolute() or not p.is_file() or p.resolve().is_relative_to(root):
                continue
            st = p.stat()
            out.append([str(p), file_digest(p)] if st.st_size <= _SMALL_FILE_BYTES
                       else [str(p), st.st_size, st.st_mtime_ns])
        except OSError:
            continue
    return out


def _walk(root: Path, folder: Path, skip: Path | None, depth: int, out: list) -> None:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for e in entries:
        if len(out) >= _MODEL_MAX_FILES:
            out.append("...")  # a folder of everything: the rest is not looked at
            return
        if e.name.startswith(".") or e.name == "__pycache__":
            continue
        try:
            if e.is_dir():
                if depth + 1 < _MODEL_MAX_DEPTH and (skip is None or Path(e.path).resolve() != skip):
                    _walk(root, Path(e.path), skip, depth + 1, out)
                continue
            if not e.is_file():
                continue
            st = e.stat()
            rel = Path(e.path).relative_to(root).as_posix()
            if st.st_size <= _SMALL_FILE_BYTES:
                out.append([rel, file_digest(e.path)])
            else:
                out.append([rel, st.st_size, st.st_mtime_ns])
        except OSError:
            continue


def _request_key(req: dict, model: str, normalize: bool,
                 file_options: tuple[str, ...] = ()) -> str:
    """The resume key of a checked request: a hash of its text, voice, seed and options
    (a voice file and each option naming a file, ``file_options``, by content: see
    :func:`_file_ref`), ``model`` (:func:`model_identity`) and ``normalize``."""
    sampling = {k: _file_ref(v) if k in file_options else v
                for k, v in req["sampling"].items()}
    blob = json.dumps({"text": req["text"], "voice": _file_ref(req["voice"]),
                       "seed": req["seed"], "sampling": sampling, "model": model,
                       "normalize": normalize, "key": 2}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _legacy_key(req: dict, model: str, normalize: bool) -> str:
    """The key of earlier vocalis versions (the voice file's path, the model as given, not
    their contents): only to say that such a manifest's requests run again, never to skip
    one."""
    blob = json.dumps({"text": req["text"], "voice": req["voice"], "seed": req["seed"],
                       "sampling": req["sampling"], "model": model, "normalize": normalize},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


_IMPLICIT_ID = re.compile(r"row-(0|[1-9][0-9]*)")


def implicit_id(index: int) -> str:
    """The id of a row that has none (or whose id is unusable): ``row-N``, N its index."""
    return f"row-{index}"


def _explicit_id(i: int, raw, seen: dict[str, int]) -> str | int:
    """Row ``i``'s own ``id``, checked: a non-empty string or an integer (kept as given),
    unique among the rows (compared as text), and not of the form ``row-N`` unless N is
    ``i`` (that form is the id of rows without one, which it could collide with).

    Raises InputError (the row then gets its implicit id)."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int)) or not str(raw).strip() \
            or len(str(raw)) > _MAX_ID_CHARS or (isinstance(raw, int) and not -2**63 <= raw < 2**63):
        raise InputError(f"request {i}: 'id' must be a non-empty string (at most "
                         f"{_MAX_ID_CHARS} characters) or a 64-bit integer, got {raw!r:.60}")
    m = _IMPLICIT_ID.fullmatch(raw) if isinstance(raw, str) else None
    if m is not None and int(m.group(1)) != i:
        raise InputError(f"request {i}: id {raw!r} has the form row-N, the id of request N "
                         "when it has none: choose another id")
    if str(raw) in seen:
        raise InputError(f"request {i}: id {raw!r:.60} is already used by request "
                         f"{seen[str(raw)]}")
    return raw


def read_rows(path: str | os.PathLike[str], *, info: ModelInfo | None = None,
              model: str = "", defaults: dict | None = None,
              normalize: bool = False, legacy_model: str | None = None) -> list[Row]:
    """Every row of a requests file, checked one by one (see the module doc) for the model
    ``info`` (default: the default model); ``model`` (the model's identity,
    :func:`model_identity`) and ``normalize`` go into each row's resume key (with the
    contents of its voice file and other files, :func:`_request_key`); ``legacy_model``
    (the model as given): also each row's key as earlier versions made it
    (``Row.legacy_key``); ``defaults``: request options under each row's own
    (``--session-options``).

    Raises:
        InputError: the file as a whole cannot be read (missing, not JSON, no rows).
    """
    info = info or check_model(families.default_model_id())
    schema = info.family.options
    file_options = tuple(k for k in schema.names if schema[k].path)
    p = Path(path).expanduser()
    items = _raw_items(p)
    base = p.resolve().parent
    rows: list[Row] = []
    seen_ids: dict[str, int] = {}  # by text: 7 and "7" are one id (a Parquet column is typed)
    for i, (item, problem) in enumerate(items):
        rid: str | int = implicit_id(i)
        if problem is not None:
            rows.append(Row(i, rid, error=f"request {i}: {problem}"))
            continue
        try:
            if isinstance(item, dict) and "id" in item:
                item = dict(item)
                rid = _explicit_id(i, item.pop("id"), seen_ids)
                seen_ids[str(rid)] = i  # taken even if the row turns out bad
            if isinstance(item, dict) and isinstance(item.get("options"), _BadOptions):
                raise InputError(f"request {i}: {item['options'].why}")
            r = check_one(i, item, base, info, defaults)
            sampling = {k: absolute(v) if k in schema and schema[k].path else v
                        for k, v in r.sampling.items()}  # actors do not run in this folder
            req = {"text": r.text, "voice": absolute(r.voice), "seed": r.seed,
                   "sampling": sampling}
            json.dumps(req)  # a value JSON cannot carry is the row's problem
        except (VocalisError, TypeError, ValueError) as e:
            rows.append(Row(i, rid, error=str(e)))
            continue
        rows.append(Row(i, rid, request=req, key=_request_key(req, model, normalize, file_options),
                        legacy_key=None if legacy_model is None
                        else _legacy_key(req, legacy_model, normalize)))
    return rows


# --------------------------------------------------------------------------- manifest


def _read_manifest(out: Path) -> dict[str, dict]:
    """Records already written (the final manifest, then the journal of an interrupted
    run, later ones winning), by key."""
    records: list[dict] = []
    parquet = out / "manifest.parquet"
    if parquet.is_file():
        try:  # pyarrow: part of the optional Ray extra, needed for Parquet only
            import pyarrow.parquet as pq

            records += pq.read_table(str(parquet)).to_pylist()
        except Exception as e:  # noqa: BLE001
            log.warning("cannot read %s (%s): its requests run again", parquet, e)
    for name in ("manifest.jsonl", PARTIAL_NAME):
        f = out / name
        if not f.is_file():
            continue
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a crash
            if isinstance(rec, dict):
                records.append(rec)
    return {r["key"]: r for r in records if isinstance(r.get("key"), str)}


def _done(rec: dict | None, out: Path, name: str) -> bool:
    """Whether ``rec`` (an earlier run's record of the same request) is done and its file
    is still ``name`` (the request kept its index: another request may now own the old
    name)."""
    if rec is None or rec.get("status") != "ok" or rec.get("path") != name:
        return False
    f = out / name
    return f.is_file() and f.stat().st_size > 44  # a WAV header alone is not audio


def _write_manifest(out: Path, records: list[dict], fmt: str) -> Path:
    target = out / f"manifest.{fmt}"
    tmp = out / f".manifest.{fmt}.tmp"
    if fmt == "parquet":
        import pyarrow as pa  # the optional Ray extra, needed for Parquet only
        import pyarrow.parquet as pq

        # one type per column: integer ids stay integers when every id is one
        ints = all(isinstance(r.get("id"), int) for r in records)
        schema = pa.schema([("id", pa.int64() if ints else pa.string()), ("index", pa.int64()),
                            ("path", pa.string()), ("seconds", pa.float64()),
                            ("sample_rate", pa.int64()), ("status", pa.string()),
                            ("error", pa.string()), ("seed", pa.int64()), ("key", pa.string())])
        rows = [{k: r.get(k) for k in schema.names} for r in records]
        if not ints:
            for r in rows:
                r["id"] = str(r["id"])
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), str(tmp))
    else:
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    os.replace(tmp, target)
    for other in MANIFEST_FORMATS:  # one manifest: the other format's is stale now
        if other != fmt:
            (out / f"manifest.{other}").unlink(missing_ok=True)
    return target


# --------------------------------------------------------------------------- the actor


class Synthesizer:
    """A Ray Data actor: one loaded model, each batch of rows run through its engine at
    once, files written, one manifest record (a JSON string) per row."""

    def __init__(self, model: str, load_kw: dict, out_dir: str, total: int,
                 device: str = "cpu", threads: int | None = None, normalize: bool = False):
        logging.getLogger("vocalis").setLevel(logging.INFO)
        self.tts = load_session(model, device, threads, **load_kw)
        self.voices = VoiceCache(self.tts)
        self.out = Path(out_dir)
        self.total = total
        self.normalize = normalize
        self.in_flight = int(load_kw.get("max_batch", 16))

    def _job(self, index: int, req: dict):
        """The engine job of a row (voice made, row checked against the loaded model), or
        raises its error (``request N: ...``)."""
        text = req["text"]
        if self.normalize:
            try:
                text = self.tts.normalized_text(text, True, req["sampling"])
            except VocalisError as e:
                raise type(e)(f"request {index}: {e}", param=e.param) from None
        r = BatchRequest(index, text, req["voice"], req["seed"], dict(req["sampling"]))
        return prepare_jobs(self.tts, [r], self.voices)[0]

    def __call__(self, batch: dict) -> dict:
        records: dict[int, dict] = {}
        jobs = []
        rate = self.tts.sample_rate
        for payload in batch["payload"]:
            row = json.loads(payload)
            rec = {"id": row["id"], "index": row["index"], "path": None, "seconds": None,
                   "sample_rate": rate, "status": "failed", "error": None,
                   "seed": row["request"]["seed"], "key": row["key"]}
            records[row["index"]] = rec
            try:
                jobs.append(self._job(row["index"], row["request"]))
            except VocalisError as e:
                rec["error"] = str(e)
            except Exception as e:  # noqa: BLE001 - an unreadable voice file, say: this row only
                rec["error"] = f"request {row['index']}: {type(e).__name__}: {e}"
        outcomes, _ = run_pass(self.tts, jobs, self.in_flight) if jobs else ([], 0.0)
        for o in outcomes:
            rec = records[o.index]
            if not o.ok:
                rec["error"] = f"request {o.index}: {o.error}"
                continue
            name = _wav_name(o.index, self.total)
            try:
                tmp = self.out / f".{name}.tmp"
                write_wav(tmp, o.samples, rate)
                os.replace(tmp, self.out / name)  # never a half-written file under its name
                if o.codes is not None:  # families whose engine reports the codes
                    npy = self.out / Path(name).with_suffix(".npy")
                    np.save(self.out / f".{npy.name}.tmp.npy", o.codes)
                    os.replace(self.out / f".{npy.name}.tmp.npy", npy)
            except (OSError, VocalisError) as e:
                rec["error"] = f"request {o.index}: cannot write {name}: {e}"
                continue
            rec.update(path=name, seconds=round(o.audio_s, 4), status="ok")
        return {"record": [json.dumps(records[i]) for i in sorted(records)]}


# --------------------------------------------------------------------------- the job


def run_batch_ray(model: str, requests_file: str | os.PathLike[str],
                  out_dir: str | os.PathLike[str], *, address: str | None = None,
                  actors: int = 1, actor_cpus: float = 1.0, actor_gpus: float = 0.0,
                  batch_size: int | None = None, threads: int | None = None,
                  device: str = "cpu", session_options: str | dict | None = None,
                  manifest: str = "jsonl", normalize: bool = False, ray_cpus: int | None = None,
                  progress: bool = True) -> tuple[dict, int]:
    """Run a requests file on Ray Data (see the module doc); returns (summary, exit status:
    0 when every request is done, 1 when some failed).

    Summary: ``requests``, ``written``, ``skipped`` (done by an earlier run), ``failed``,
    ``failures`` (the first 20 ``{index, id, error}``), ``manifest`` (its path),
    ``wall_s``, ``audio_s`` (written this run), ``x_real_time`` (their aggregate).

    Raises:
        InputError: a bad option, an unreadable requests file, an unreachable cluster.
        ClusterError: the actors could not start (e.g. the model does not load on a node).
    """
    if manifest not in MANIFEST_FORMATS:
        raise InputError(f"--manifest {manifest!r}: use {' or '.join(MANIFEST_FORMATS)}")
    if isinstance(actors, bool) or not isinstance(actors, int) or actors < 1:
        raise InputError(f"--actors must be an integer >= 1, got {actors!r}")
    if actor_cpus < 0 or actor_gpus < 0:
        raise InputError("--actor-cpus and --actor-gpus must be >= 0")
    in_flight = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    if isinstance(in_flight, bool) or not isinstance(in_flight, int) \
            or not 1 <= in_flight <= MAX_BATCH_SIZE:
        raise InputError(f"batch size must be an integer from 1 to {MAX_BATCH_SIZE}, got "
                         f"{batch_size!r}")
    model_ref = absolute(model) or model
    info = check_model(model_ref)  # here, not as a pool of actors that die one after another
    load_kw, defaults = parse_session_options(session_options, info)
    load_kw.setdefault("max_batch", in_flight)
    load_kw.setdefault("max_queue", max(256, in_flight))
    check_ray_cpus(ray_cpus)  # before the output folder is made
    if address or os.environ.get("RAY_ADDRESS"):
        check_address(address or os.environ["RAY_ADDRESS"])
    out = Path(out_dir).expanduser().resolve()
    rows = read_rows(requests_file, info=info, model=model_identity(info, model_ref, skip=out),
                     defaults=defaults, normalize=normalize, legacy_model=model_ref)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out-dir {out} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create --out-dir {out}: {e.strerror or e}") from None

    previous = _read_manifest(out)
    final: dict[int, dict] = {}
    todo: list[Row] = []
    for r in rows:
        if r.error is not None:
            final[r.index] = {"id": r.id, "index": r.index, "path": None, "seconds": None,
                              "sample_rate": None, "status": "failed", "error": r.error,
                              "seed": None, "key": None}
        elif _done(previous.get(r.key), out, _wav_name(r.index, len(rows))):
            final[r.index] = {**previous[r.key], "id": r.id, "index": r.index}
        else:
            todo.append(r)
    skipped = sum(1 for r in rows if r.error is None) - len(todo)
    legacy = sum(1 for r in todo if r.legacy_key is not None
                 and _done(previous.get(r.legacy_key), out, _wav_name(r.index, len(rows))))
    if legacy:
        log.warning("%d request(s) done by an earlier vocalis version run again: its manifest's "
                    "keys named the voice file and the model by path only, so a file replaced "
                    "under the same name could not be told apart", legacy)
    bad = len(rows) - skipped - len(todo)
    log.info("%d request(s): %d to run, %d done by an earlier run, %d bad", len(rows),
             len(todo), skipped, bad)
    for r in rows:
        if r.error is not None:
            log.warning("%s", r.error)

    t0 = time.perf_counter()
    written = 0
    audio_s = 0.0
    if todo:
        ray, started = connect(address, num_cpus=ray_cpus)
        try:
            check_resources(ray, "actor", actors, actor_cpus, actor_gpus)
            records = _run_dataset(todo, model_ref, load_kw, out, len(rows), device,
                                   threads, normalize, actors, actor_cpus, actor_gpus,
                                   in_flight, progress)
        finally:
            if started:
                ray.shutdown()
        for rec in records:
            final[rec["index"]] = rec
            if rec["status"] == "ok":
                written += 1
                audio_s += rec["seconds"] or 0.0
    wall_s = time.perf_counter() - t0
    ordered = [final[r.index] for r in rows]
    path = _write_manifest(out, ordered, manifest)
    (out / PARTIAL_NAME).unlink(missing_ok=True)
    failures = [{"index": r["index"], "id": r["id"], "error": r["error"]}
                for r in ordered if r["status"] != "ok"]
    summary = {"requests": len(rows), "written": written, "skipped": skipped,
               "failed": len(failures), "failures": failures[:20], "manifest": str(path),
               "wall_s": round(wall_s, 3), "audio_s": round(audio_s, 4),
               "x_real_time": round(audio_s / wall_s, 3) if written and wall_s > 0 else None}
    return summary, 1 if failures else 0


def _run_dataset(todo: list[Row], model: str, load_kw: dict, out: Path, total: int,
                 device: str, threads: int | None, normalize: bool, actors: int,
                 actor_cpus: float, actor_gpus: float, batch_size: int,
                 progress: bool) -> list[dict]:
    """``todo`` through the actor pool; the records as they come, journaled."""
    # Ray (optional, heavy): connect() has found it by now
    import ray.data
    from ray.data import ActorPoolStrategy, DataContext

    ctx = DataContext.get_current()
    ctx.enable_progress_bars = progress
    payloads = [{"payload": json.dumps({"index": r.index, "id": r.id, "key": r.key,
                                        "request": r.request})} for r in todo]
    blocks = max(1, min(len(payloads), actors * 4))
    ds = ray.data.from_items(payloads, override_num_blocks=blocks)
    remote: dict = {"num_cpus": actor_cpus}
    if actor_gpus:
        remote["num_gpus"] = actor_gpus
    ds = ds.map_batches(Synthesizer, batch_size=batch_size, batch_format="numpy",
                        compute=ActorPoolStrategy(size=actors),
                        fn_constructor_args=(model, load_kw, str(out), total),
                        fn_constructor_kwargs={"device": device, "threads": threads,
                                               "normalize": normalize},
                        **remote)
    records: list[dict] = []
    last_log = time.monotonic()
    ok = failed = 0
    journal_path = out / PARTIAL_NAME
    had_journal = journal_path.exists()
    try:
        with open(journal_path, "a", encoding="utf-8") as journal:
            for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
                for blob in batch["record"]:
                    rec = json.loads(blob)
                    records.append(rec)
                    journal.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    ok += rec["status"] == "ok"
                    failed += rec["status"] != "ok"
                journal.flush()
                if time.monotonic() - last_log > 5 or ok + failed == len(todo):
                    last_log = time.monotonic()
                    log.info("progress: %d/%d request(s) done (%d ok, %d failed)", ok + failed,
                             len(todo), ok, failed)
    except BaseException as e:
        if not records and not had_journal:  # nothing to resume from: leave no empty journal
            journal_path.unlink(missing_ok=True)
        if isinstance(e, KeyboardInterrupt):
            log.warning("interrupted after %d of %d request(s)%s", len(records), len(todo),
                        f"; they are kept in {journal_path.name}: run the same command again "
                        "to resume" if records else "")
        if isinstance(e, VocalisError) or not isinstance(e, Exception):  # Ctrl-C, exit
            raise
        why = last_error_line(str(e))
        raise ClusterError(f"the Ray Data job stopped after {len(records)} of {len(todo)} "
                           f"request(s): {why[:500]} (done requests are kept: run again to "
                           "resume)") from None
    return records
