"""Voices the server speaks with: predefined names, the default voice, and custom voices.

Custom voices live in the voices directory, two files per voice::

    <id>.safetensors   the voice in its family's format (e.g. a Pocket TTS voice state in the
                       official export-voice layout, a Qwen3-TTS voice-clone prompt)
    <id>.json          metadata: id, name, created_at, source file name, duration, and what
                       the model's family records to offer it only to models it fits

A voice id is its name, and every name that enters the server (a speech request's
``voice`` or ``{"id": ...}``, an upload's ``name``, ``DELETE /v1/audio/voices/{id}``) follows
one grammar, checked as sent (nothing is stripped): 1-64 characters from ``A-Z a-z 0-9 _ -``,
starting with a letter or digit (:data:`NAME_RE`). A name outside it (a surrounding space, a
newline, any other character) is a 400 ``invalid_voice_name`` that states the grammar, so a
name can never name a path outside the directory nor break a header or a log line. Ids of
predefined voices,
``default`` and OpenAI's voice names are reserved. Creating a voice whose id exists is a
409, never an overwrite: files are written under temporary names and hard-linked into
place, which fails when the name is taken, even by another process.

OpenAI's voice names (``alloy``, ``ash``, ... ``cedar``) are aliases of the server's
default voice, so clients with a hard-coded list work.

The directory may be shared by several processes (Ray Serve replicas, servers on a shared
filesystem): the listing re-reads it, an id not known here is looked up on disk before it is
called unknown, and a custom voice deleted by another process is forgotten when its file is
gone.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import tempfile
import threading
import time
from pathlib import Path

from vocalis.audio import read_audio
from vocalis.errors import VocalisError, VoiceError
from vocalis.server.errors import APIError

log = logging.getLogger("vocalis.server")

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # always used with fullmatch
NAME_GRAMMAR = "1-64 characters from A-Z a-z 0-9 _ -, starting with a letter or digit"
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage",
                 "shimmer", "verse", "marin", "cedar")
DEFAULT_ID = "default"
MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # of audio_sample: exactly 10 MiB is accepted
UPLOAD_LIMIT_TEXT = f"{MAX_UPLOAD_BYTES} bytes (10 MiB)"


class VoiceStore:
    """Resolves voice ids to ready :class:`vocalis.api.Voice` objects (cached) and manages
    the custom voices on disk. Thread-safe."""

    def __init__(self, tts, root: str | os.PathLike[str], default_voice: str | None = None):
        self.tts = tts
        self.info = tts.info  # how messages name the model (a server's: under its served id)
        self.served_as: str | None = None  # the model's id when a server hosts several
        self.first = True  # the server's first model (the one --voice gives a default voice)
        self.root = Path(root).expanduser()
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._cache: dict[str, object] = {}
        self._custom: dict[str, dict] = {}
        info = tts.info
        # a model without voices (a voice description in instructions instead)
        self.voiceless = not info.needs_voice
        self.clones = info.cloning
        self.predefined: tuple[str, ...] = tuple(info.voices)  # built-in voices
        self.default_source = default_voice or info.default_voice
        if default_voice is not None:
            # Fail at start-up, not on the first request.
            self._cache[DEFAULT_ID] = self._voice_of(default_voice)
        self._scan()

    def _voice_of(self, src):
        """A voice from a name, a saved voice or an audio file (cloned as the family clones
        a server's voices: :meth:`vocalis.family.LoadedModel.clone`)."""
        path = Path(str(src)).expanduser()
        if self.clones and path.suffix.lower() != ".safetensors" and path.is_file():
            return self.tts.loaded.clone(path)
        return self.tts.voice(src)

    def _fits(self, meta: dict) -> bool:
        """Whether a stored voice was made for this server's model (its family's rule)."""
        return self.tts.loaded.voice_fits(meta)

    # ------------------------------------------------------------------ listing

    def _fingerprint(self) -> str | None:
        return self.tts.loaded.weights_fingerprint

    def _read_dir(self) -> tuple[dict[str, dict], int]:
        """The custom voices on disk made for this model: ({id: metadata}, how many were
        skipped as made for this kind of model but with other weights). Voices of another
        family or kind of model (a folder shared by the models of one server) are left
        out without counting: they are not meant for this model."""
        fp = self._fingerprint()
        found: dict[str, dict] = {}
        skipped = 0
        for meta_path in sorted(self.root.glob("*.json")):
            vid = meta_path.stem
            if not NAME_RE.fullmatch(vid) or not (self.root / f"{vid}.safetensors").is_file():
                continue
            with self._lock:
                known = self._custom.get(vid)
            if known is not None:  # metadata is written once: no need to read it again
                found[vid] = known
                continue
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                if meta_path.exists():  # not a file another process is deleting right now
                    log.warning("voices: ignoring %s (%s)", meta_path, e)
                continue
            if not isinstance(meta, dict):
                log.warning("voices: ignoring %s (not a JSON object)", meta_path)
                continue
            if not self._fits(meta):
                continue
            if fp and meta.get("weights") and meta["weights"] != fp:
                skipped += 1
                continue
            found[vid] = meta
        return found, skipped

    def _scan(self) -> None:
        found, skipped = self._read_dir()
        with self._lock:
            self._custom = found
        if skipped:
            log.warning("voices: %d voice(s) in %s were made with other weights of this "
                        "kind of model and are not offered with this model (make them again "
                        "from their audio)", skipped, self.root)
        stray = self._stray()
        if stray:
            log.warning("voices: %d file(s) in %s are not voices the server offers (a stored "
                        "voice is NAME.safetensors with its NAME.json, both written by POST "
                        "/v1/audio/voices): %s%s; their names cannot be uploaded until they "
                        "are removed", len(stray), self.root,
                        ", ".join(shown(n) for n in stray[:5]),
                        "..." if len(stray) > 5 else "")
        log.info("voices: %d custom voice(s) in %s", len(self._custom), self.root)

    def _stray(self) -> list[str]:
        """Files and folders named like half of a stored voice whose other half is missing or
        is not a file (a crash, a copy by hand): neither listed nor usable."""
        out = []
        for path in sorted(self.root.iterdir()):
            if path.suffix not in (".json", ".safetensors") or path.name.startswith("."):
                continue
            other = path.with_suffix(".safetensors" if path.suffix == ".json" else ".json")
            if not (path.is_file() and other.is_file()):
                out.append(path.name)
        return out

    def _taken(self, name: str) -> bool:
        """Whether a voice file of ``name`` is in the folder (this model's or not)."""
        return any(os.path.lexists(self.root / f"{name}{suffix}")
                   for suffix in (".safetensors", ".json"))

    def refresh(self) -> None:
        """Re-read the directory: voices another process created or deleted meanwhile
        (quietly; :meth:`list` and lookups of unknown ids call it)."""
        found, _ = self._read_dir()
        with self._lock:
            for vid in set(self._custom) - set(found):
                self._cache.pop(vid, None)
            self._custom = found

    def _reserved(self) -> set[str]:
        return {DEFAULT_ID, *self.predefined, *OPENAI_VOICES}

    def holds(self, voice_id: str) -> bool:
        """Whether ``voice_id`` is one of this model's custom voices."""
        with self._lock:
            if voice_id in self._custom:
                return True
        self.refresh()
        with self._lock:
            return voice_id in self._custom

    def _which(self) -> str:
        """' of model M' when the server hosts several models, else ''."""
        return f" of model {self.served_as!r}" if self.served_as else ""

    def _listing(self) -> str:
        q = f"?model={self.served_as}" if self.served_as else ""
        return f"GET /v1/audio/voices{q}"

    def list(self) -> list[dict]:
        out = []
        if self.voiceless:  # the voice is described by each request's instructions
            out.append({"id": DEFAULT_ID, "name": DEFAULT_ID, "object": "audio.voice",
                        "type": "default", "source": "instructions"})
        if self.default_source is not None:
            out.append({"id": DEFAULT_ID, "name": DEFAULT_ID, "object": "audio.voice",
                        "type": "default", "source": Path(str(self.default_source)).name})
        for name in self.predefined:
            out.append({"id": name, "name": name, "object": "audio.voice", "type": "predefined"})
        self.refresh()
        with self._lock:
            custom = sorted(self._custom.values(), key=lambda m: m.get("created_at", 0))
        for meta in custom:
            out.append(public(meta))
        return out

    # ------------------------------------------------------------------ resolving

    def _how_default(self) -> str:
        """How a server gives this model a default voice (the end of an error message)."""
        return ("or start the server with --voice FILE" if self.first else
                "(--voice gives only the first --model a default voice)")

    def resolve(self, voice_id: str | None):
        """Voice id -> Voice; None (a request that names no voice): the default voice.

        Raises APIError 400 (param ``voice``): ``invalid_voice_name`` for a name outside the
        grammar, ``voice_not_found`` for unknown ids, ``missing_required_parameter`` for
        None when there is no default voice.
        """
        if voice_id is None:
            if self.default_source is None and not self.voiceless:
                raise APIError(400, f"missing required parameter 'voice': the server has no "
                                    f"default voice{self._which()}; name one of "
                                    f"{self._listing()} {self._how_default()}", param="voice",
                               code="missing_required_parameter")
            voice_id = DEFAULT_ID
        check_name(voice_id, "voice")
        vid = voice_id
        info = self.info
        if self.voiceless:
            if vid in OPENAI_VOICES or vid == DEFAULT_ID:
                return None
            raise APIError(400, f"{info.name} ({info.title}) has no voices: describe the voice in "
                                "instructions, with voice 'default' or an OpenAI voice name",
                           param="voice", code="voice_not_found")
        vid = info.canonical_voice(vid)  # e.g. speakers are case-insensitive
        if vid in OPENAI_VOICES or vid == DEFAULT_ID:
            if self.default_source is None:
                raise APIError(400, f"voice {vid!r} names the default voice{self._which()}, but it "
                                    "has none (its model has no predefined voices): use a custom "
                                    f"voice ({self._listing()}) {self._how_default()}",
                               param="voice", code="voice_not_found")
            vid = DEFAULT_ID
        with self._lock:
            cached = self._cache.get(vid)
            custom = vid in self._custom
        if cached is not None and custom \
                and not (self.root / f"{vid}.safetensors").is_file():
            self.refresh()  # deleted by another process sharing the directory
            cached = None
        if cached is not None:
            return cached
        if vid == DEFAULT_ID:
            voice = self._voice_of(self.default_source)
        elif vid in self.predefined:
            voice = self.tts.voice(vid)
        else:
            path = self.root / f"{vid}.safetensors"
            with self._lock:
                known = vid in self._custom
            if not known or not path.is_file():  # created or deleted by another process
                self.refresh()                     # sharing the directory?
                with self._lock:
                    known = vid in self._custom
            if not known:
                speakers = (f" (its voices: {', '.join(self.predefined)}; or a custom voice)"
                            if self.predefined else "")
                raise APIError(400, f"unknown voice {voice_id!r}{self._which()}{speakers}: "
                                    f"{self._listing()} lists the voices" + ("" if self.served_as
                                                                             else " of this server"),
                               param="voice", code="voice_not_found")
            try:
                voice = self.tts.voice(str(path))
            except (FileNotFoundError, VoiceError):
                if path.is_file():
                    raise
                self.refresh()  # deleted meanwhile by another process
                return self.resolve(voice_id)
            voice.name = vid
        with self._lock:
            self._cache[vid] = voice
        return voice

    # ------------------------------------------------------------------ create / delete

    def create(self, name: str, data: bytes, filename: str | None, ref_text: str | None = None) -> dict:
        """Compute a voice from an uploaded audio sample and store it in the format of the
        model's family (with ``ref_text``, the transcript of the sample, where the family
        takes one: e.g. a Qwen3-TTS Base in-context prompt; else from the audio alone).

        Raises APIError: 400 bad name or a model that does not clone, 409 taken, 413 too
        large, 422 not decodable or unusable audio.
        """
        check_name(name, "name")
        info = self.info
        if not self.clones:
            raise APIError(400, f"{info.name} does not clone voices ({info.title}); "
                                + (f"its voices are: {', '.join(self.predefined)}" if self.predefined
                                   else "describe the voice in instructions"),
                           param="audio_sample", code="voice_cloning_unsupported")
        if ref_text is not None and not info.clone_transcript:
            raise APIError(400, f"ref_text: {info.title} clones a voice from the audio alone "
                                "(no transcript)", param="ref_text", code="invalid_value")
        if ref_text is not None and not ref_text.strip():
            raise APIError(400, "ref_text is empty: send the transcript of audio_sample, or leave it "
                                "out to clone from the speaker embedding alone", param="ref_text",
                           code="invalid_value")
        if name in self._reserved():
            raise APIError(409, f"voice id {name!r} is reserved (a predefined voice, 'default' "
                                "or an OpenAI voice name): choose another name",
                           param="name", code="voice_exists")
        if self.holds(name):
            raise APIError(409, f"voice {name!r} already exists: delete it first "
                                f"(DELETE /v1/audio/voices/{name}) or choose another name",
                           param="name", code="voice_exists")
        if self._taken(name):  # not a voice of this model: not this API's to delete
            raise APIError(409, f"voice name {name!r} is taken in the server's voices folder "
                                "by a voice of another model or a file that is not a voice: "
                                "choose another name", param="name", code="voice_exists")
        if len(data) > MAX_UPLOAD_BYTES:
            raise too_large(f"audio_sample is {len(data)} bytes")
        if not data:
            raise APIError(422, "audio_sample is empty: send an audio file (WAV, FLAC, OGG, "
                                "MP3...) of a few seconds of speech", param="audio_sample",
                           code="invalid_audio")
        filename_shown = Path(filename or "audio_sample").name
        buf = io.BytesIO(data)
        buf.name = filename_shown
        try:
            samples, rate = read_audio(buf)
        except VoiceError as e:
            raise APIError(422, f"audio_sample: {e}", param="audio_sample",
                           code="invalid_audio") from None
        suffix = Path(filename_shown).suffix
        suffix = suffix if re.fullmatch(r"\.[A-Za-z0-9]{1,8}", suffix) else ".wav"
        with tempfile.TemporaryDirectory(dir=self.root, prefix=".upload-") as tmp:
            src = Path(tmp) / f"sample{suffix}"
            src.write_bytes(data)
            try:
                voice = self.tts.loaded.clone(src, ref_text)
            except VoiceError as e:  # decoded, but unusable (silent, too short...): as above
                raise APIError(422, str(e).replace(str(src), filename_shown),
                               param="audio_sample", code="invalid_audio") from None
            except VocalisError as e:
                raise APIError(e.http_status, str(e).replace(str(src), filename_shown),
                               param="audio_sample", code=e.code) from None
            voice.name = name
            state_tmp = Path(tmp) / "voice.safetensors"
            voice.save(state_tmp)
            meta = {
                "id": name, "name": name, "object": "audio.voice", "type": "custom",
                "created_at": int(time.time()), "source_filename": filename_shown,
                "duration_s": round(samples.shape[0] / rate, 3), "sample_rate": rate,
                **self.tts.loaded.voice_record(voice, ref_text),
            }
            meta_tmp = Path(tmp) / "voice.json"
            meta_tmp.write_text(json.dumps(meta, indent=1), encoding="utf-8")
            with self._lock:
                final = self.root / f"{name}.safetensors"
                try:
                    os.link(state_tmp, final)  # fails if the name was taken meanwhile
                except FileExistsError:
                    raise APIError(409, f"voice {name!r} already exists", param="name",
                                   code="voice_exists") from None
                try:
                    os.replace(meta_tmp, self.root / f"{name}.json")
                except OSError as e:  # nothing half stored: the state goes too
                    final.unlink(missing_ok=True)
                    log.error("voices: could not store %s in %s: %s", shown(name), self.root, e)
                    raise APIError(500, f"voice {name!r} could not be stored in the server's "
                                        f"voices folder ({e.strerror or type(e).__name__}); "
                                        "see the server log", param="name",
                                   code="voice_not_stored") from None
                self._custom[name] = meta
                self._cache[name] = voice
        log.info("voices: created %s from %s (%.1f s)", shown(name), shown(filename_shown),
                 meta["duration_s"])
        return public(meta)

    def delete(self, voice_id: str) -> dict:
        """Delete a custom voice. Raises APIError: 400 bad name or built-in voice, 404 unknown."""
        check_name(voice_id, "voice_id")
        if voice_id in self._reserved():
            raise APIError(400, f"voice {voice_id!r} is built in and cannot be deleted",
                           param="voice_id", code="voice_not_deletable")
        self.holds(voice_id)  # re-reads the directory when the id is not known here
        with self._lock:
            if voice_id not in self._custom:
                raise APIError(404, f"no custom voice {voice_id!r}: GET /v1/audio/voices lists "
                                    "them", param="voice_id", code="voice_not_found")
            for suffix in (".json", ".safetensors"):
                try:
                    (self.root / f"{voice_id}{suffix}").unlink()
                except FileNotFoundError:
                    pass
            self._custom.pop(voice_id, None)
            self._cache.pop(voice_id, None)
        log.info("voices: deleted %r", voice_id)
        return {"id": voice_id, "object": "audio.voice.deleted", "deleted": True}


def check_name(name: str, param: str = "name") -> None:
    """Raise APIError 400 ``invalid_voice_name`` (naming ``param``) unless ``name`` follows
    the voice-name grammar exactly (:data:`NAME_RE`; surrounding whitespace is refused)."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise APIError(400, f"invalid voice name {shown(name)}: a voice name is {NAME_GRAMMAR}, "
                            "with no spaces (GET /v1/audio/voices lists the voices)",
                       param=param, code="invalid_voice_name")


def too_large(what: str) -> APIError:
    """The 413 for an upload over :data:`MAX_UPLOAD_BYTES` (``what``: the size seen)."""
    return APIError(413, f"{what}; the limit is {UPLOAD_LIMIT_TEXT} of audio_sample: send a "
                         "shorter clip (the first 30 s are used)", param="audio_sample",
                    code="file_too_large")


def shown(value: object, limit: int = 48) -> str:
    """A user string for a message or a log line: quoted and escaped (``repr``: control
    characters and newlines become ``\\n``, ``\\x00``...) and cut to ``limit`` characters."""
    text = str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def public(meta: dict) -> dict:
    keys = ("id", "name", "object", "type", "created_at", "source_filename", "duration_s", "mode")
    return {k: meta[k] for k in keys if k in meta}
