"""Reference harness for Qwen3-TTS: export a fixture from an official run, replay it through
vocalis, compare stage by stage.

* :func:`export_fixture` runs the official ``qwen-tts==0.1.1`` package once (seeded) in its own
  virtual environment (``VOCALIS_QWEN_PYTHON``; the script is
  :mod:`vocalis.reference.qwen3_official_runner`, shipped in this package) and writes the talker
  prompt embeddings, the first-step talker logits, the codes and the waveform.
* :func:`replay_fixture` rebuilds the same request with vocalis: the prompt (``prompt.py``, text
  tokenized by vocalis; for Base the fixture's official x-vector and reference codes, so that
  the comparison isolates the talker), the first-step logits, the codes
  (``generate.generate_codes`` with a generator seeded like the official global RNG), and the
  waveform of the **official** codes through vocalis's :class:`SpeechDecoder`, one shot and
  streamed frame by frame (ICL: ``cat(ref_codes, codes)`` decoded, then the official cut
  ``codec.icl_cut_samples``).
* :func:`compare` scores a replay against the fixture: prompt max abs diff <= 1e-5, first-step
  logits max abs diff <= 1e-4, identical codes, waveforms of equal length with cosine > 0.99999.

Fixture folder: ``fixture.json`` (schema ``vocalis.reference.qwen3``), ``fixture.safetensors``
(names in :mod:`vocalis.reference.qwen3_official_runner`), ``official.json`` (the runner's own
record), ``reference.wav`` (float32), ``export.log`` (the official process's output).
Replay: ``replay.json`` + ``replay.safetensors`` + ``replay.wav`` (+ ``replay_stream.wav``) in
a folder, or ``X.wav`` with ``X.json``/``X.safetensors`` beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

import vocalis
from vocalis.errors import HarnessError, InputError, ModelNotFound
from vocalis.models.qwen3 import codec
from vocalis.models.qwen3.checkpoint import is_qwen3, resolve_checkpoint
from vocalis.models.qwen3.generate import generate_codes, seeded_generator
from vocalis.models.qwen3.prompt import custom_voice_prompt, voice_clone_prompt, voice_design_prompt
from vocalis.models.qwen3.sampling import HARD_DEFAULTS, GenerationParams
from vocalis.models.qwen3.talker import load_talker
from vocalis.reference.compare import metrics, read_float_wav
from vocalis.reference.export import _write_float_wav
from vocalis.reference.replay import Fixture, fixture_dir
from vocalis.models.qwen3.text import Qwen3TextTokenizer, assistant_text, instruct_text, ref_text

SCHEMA = "vocalis.reference.qwen3"
REPLAY_SCHEMA = "vocalis.reference.qwen3.replay"
SCHEMA_VERSION = 1
FIXTURE_JSON = "fixture.json"
FIXTURE_TENSORS = "fixture.safetensors"
OFFICIAL_JSON = "official.json"
REFERENCE_WAV = "reference.wav"
EXPORT_LOG = "export.log"
REPORT_JSON = "report.json"
SUMMARY_TXT = "summary.txt"
ENV_VAR = "VOCALIS_QWEN_PYTHON"
BUILD_HINT = (f"build the official package's venv with `bash scripts/qwen_official_venv.sh .venv-qwen` and "
              f"`export {ENV_VAR}=$PWD/.venv-qwen/bin/python`")
RUNNER = Path(__file__).with_name("qwen3_official_runner.py")

#: pass thresholds (brief of the harness; the waveform one is Pocket's)
PROMPT_TOL = 1e-5
LOGITS_TOL = 1e-4
COSINE_THRESHOLD = 0.99999
METHODS = {"custom_voice": "custom_voice", "voice_design": "voice_design", "base": "voice_clone"}


# ------------------------------------------------------------------------- models


def _read_config(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_qwen3_model(model: str | Path | None) -> bool:
    """True for a vocalis Qwen3 id (``qwen3-tts/...``), a Hub repo id ``Qwen/Qwen3-TTS-...``, or a
    local folder (or its ``config.json``) whose ``model_type`` is ``qwen3_tts``."""
    if model is None:
        return False

    p = Path(str(model).strip()).expanduser()
    return is_qwen3(str(p.parent) if p.name == "config.json" and p.is_file() else str(model).strip())


def resolve_checkpoint_dir(model: str | Path) -> Path:
    """A Qwen3-TTS checkpoint folder for ``model``: a local folder (or its ``config.json``), or an
    id resolved through the Hub cache at the pinned revision
    (:func:`vocalis.models.qwen3.checkpoint.resolve_checkpoint`).

    Raises:
        ModelNotFound / CheckpointError: no such folder or id, not a Qwen3-TTS folder, not
        cached while offline.
    """
    text = str(model).strip()
    if not text:
        raise ModelNotFound("model is empty: give a Qwen3-TTS checkpoint folder or id")
    p = Path(text).expanduser()
    if p.name == "config.json" and p.is_file():
        text = str(p.parent)
    return Path(resolve_checkpoint(text)[0]).resolve()


def official_python() -> str:
    """The interpreter of the official package's venv (``VOCALIS_QWEN_PYTHON``).

    Raises:
        HarnessError: unset, or not an executable file (the message says how to build it).
    """
    path = os.environ.get(ENV_VAR)
    if not path:
        raise HarnessError(f"{ENV_VAR} is not set: the Qwen3-TTS reference export runs the official qwen-tts==0.1.1 "
                           f"in its own venv; {BUILD_HINT}")
    if not (Path(path).is_file() and os.access(path, os.X_OK)):
        raise HarnessError(f"{ENV_VAR}={path} is not an executable interpreter; {BUILD_HINT}")
    return path


# ------------------------------------------------------------------------- export


def _check_request(cfg: dict, text, speaker, language, instruct, ref_audio, ref_text, xvector_only,
                   seed, max_new_tokens) -> str:
    """Checks done before starting the official process; returns the official method name."""
    kind = cfg.get("tts_model_type")
    if kind not in METHODS:
        raise ModelNotFound(f"unknown tts_model_type {kind!r} in config.json (expected base, custom_voice or "
                            "voice_design)")
    if not isinstance(text, str) or not text.strip():
        raise InputError("text is empty: give some words to speak", param="text")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"seed must be an integer, got {seed!r}", param="seed")
    if max_new_tokens is not None and (isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int)
                                       or max_new_tokens < 2):
        raise InputError(f"max_new_tokens must be an integer >= 2 (the official keeps max_new_tokens - 1 frames), "
                         f"got {max_new_tokens!r}", param="max_new_tokens")
    t = cfg.get("talker_config") or {}
    langs = ["auto"] + [k for k in (t.get("codec_language_id") or {}) if "dialect" not in k]
    if language is not None and language.lower() not in langs:
        raise InputError(f"unknown language {language!r}; this model takes: {', '.join(langs)}", param="language")
    speakers = list(t.get("spk_id") or {})
    clone = (ref_audio, ref_text, xvector_only)
    if kind == "custom_voice":
        if not speaker:
            raise InputError(f"a CustomVoice model needs --speaker; it has: {', '.join(speakers)}", param="speaker")
        if speaker.lower() not in speakers:
            raise InputError(f"unknown speaker {speaker!r}; this model has: {', '.join(speakers)}", param="speaker")
    elif speaker:
        raise InputError(f"--speaker is for CustomVoice models; this is a {kind} model", param="speaker")
    if kind == "voice_design" and not (instruct and instruct.strip()):
        raise InputError("a VoiceDesign model needs --instruct (a description of the voice)", param="instruct")
    if kind == "base":
        if instruct:
            raise InputError("--instruct is not taken by a Base (voice clone) model", param="instruct")
        if not ref_audio:
            raise InputError("a Base model clones a voice: give --ref-audio (and --ref-text, or --xvector-only)",
                             param="ref_audio")
        if not Path(ref_audio).expanduser().is_file():
            raise InputError(f"reference audio not found: {ref_audio}", param="ref_audio")
        if not xvector_only and not (ref_text and ref_text.strip()):
            raise InputError("in-context cloning needs --ref-text (the words of the reference audio); "
                             "or pass --xvector-only", param="ref_text")
    elif any(clone[:2]) or xvector_only:
        raise InputError(f"--ref-audio/--ref-text/--xvector-only are for Base models; this is a {kind} model",
                         param="ref_audio")
    return METHODS[kind]


def export_fixture(model: str | Path, out_dir: str | Path, text: str, *, speaker: str | None = None,
                   language: str | None = None, instruct: str | None = None, ref_audio: str | Path | None = None,
                   ref_text: str | None = None, xvector_only: bool = False, seed: int = 0, greedy: bool = False,
                   max_new_tokens: int | None = None, non_streaming_mode: bool | None = None,
                   threads: int | None = None, timeout: float | None = None) -> Path:
    """Run the official package once on a local Qwen3-TTS checkpoint and write a fixture.

    The method follows the checkpoint: CustomVoice ``generate_custom_voice`` (``speaker``,
    optional ``instruct``), VoiceDesign ``generate_voice_design`` (``instruct``), Base
    ``generate_voice_clone`` with ``ref_audio`` and ``ref_text`` (in-context) or
    ``xvector_only``. ``language`` None is the official default (Auto); ``greedy`` sets
    ``do_sample=False, subtalker_dosample=False``; ``max_new_tokens`` bounds generation
    (official default: the checkpoint's ``generation_config.json``); ``non_streaming_mode`` None
    keeps each method's official default. ``torch.manual_seed(seed)`` right before the call;
    CPU, float32, ``threads`` torch threads (default: this process's count).

    Returns:
        ``out_dir`` as a Path.

    Raises:
        HarnessError: no official interpreter, or the official run failed (see ``export.log``).
        ModelNotFound: not a Qwen3-TTS folder. InputError: bad text/options (checked here or
        refused by the official package).
    """
    ckpt = resolve_checkpoint_dir(model)
    cfg = _read_config(ckpt / "config.json") or {}
    method = _check_request(cfg, text, speaker, language, instruct, ref_audio, ref_text, xvector_only, seed,
                            max_new_tokens)
    python = official_python()
    out = Path(out_dir).expanduser()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create {out}: {e}") from None
    call: dict = {"text": text}
    if language is not None:
        call["language"] = language
    if speaker:
        call["speaker"] = speaker
    if instruct:
        call["instruct"] = instruct
    if method == "voice_clone":
        call["ref_audio"] = str(Path(ref_audio).expanduser().resolve())
        call["x_vector_only_mode"] = bool(xvector_only)
        if ref_text:
            call["ref_text"] = ref_text
    if non_streaming_mode is not None:
        call["non_streaming_mode"] = bool(non_streaming_mode)
    if greedy:
        call.update(do_sample=False, subtalker_dosample=False)
    if max_new_tokens is not None:
        call["max_new_tokens"] = int(max_new_tokens)
    job = {"checkpoint": str(ckpt), "out": str(out.resolve()), "method": method, "call": call, "seed": seed,
           "dtype": "float32", "threads": int(threads or torch.get_num_threads())}
    for stale in (FIXTURE_TENSORS, OFFICIAL_JSON, FIXTURE_JSON):
        (out / stale).unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    with tempfile.TemporaryDirectory(prefix="vocalis-qwen3-job-") as tmp:
        job_path = Path(tmp) / "job.json"
        job_path.write_text(json.dumps(job, ensure_ascii=False), encoding="utf-8")
        try:
            proc = subprocess.run([python, str(RUNNER), str(job_path)], check=False, env=env, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"the official run timed out after {timeout} s") from None
        except OSError as e:
            raise HarnessError(f"cannot start {python}: {e}; {BUILD_HINT}") from None
    (out / EXPORT_LOG).write_text(proc.stdout + proc.stderr, encoding="utf-8")
    if proc.returncode == 3:
        line = [ln for ln in proc.stderr.splitlines() if ln.startswith("OFFICIAL-INPUT-ERROR:")]
        msg = line[-1].split(":", 1)[1].strip() if line else "see export.log"
        raise InputError(f"the official package refused the request: {msg}")
    if proc.returncode != 0 or not (out / OFFICIAL_JSON).is_file():
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise HarnessError(f"the official run failed (exit {proc.returncode}): {tail} (full log: {out / EXPORT_LOG})")
    official = json.loads((out / OFFICIAL_JSON).read_text(encoding="utf-8"))
    request = {"text": text, "speaker": speaker, "language": language, "instruct": instruct, "ref_text": ref_text,
               "ref_audio": call.get("ref_audio"), "xvector_only": bool(xvector_only)}
    return _write_meta(out, model, ckpt, official, request)


def _write_meta(out: Path, model, ckpt: Path, official: dict, request: dict) -> Path:
    from safetensors.torch import load_file

    t = load_file(str(out / FIXTURE_TENSORS))
    missing = [k for k in ("prompt.prefill", "prompt.trailing", "prompt.tts_pad", "logits.first", "codes",
                           "waveform", "text.input_ids") if k not in t]
    if missing:
        raise HarnessError(f"the official run did not record {', '.join(missing)} (see {out / EXPORT_LOG})")
    ref_frames = int(t["ref.codes"].shape[0]) if "ref.codes" in t else 0
    meta = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "vocalis_version": vocalis.__version__,
        "model": {"id": str(model), "checkpoint": str(ckpt), "tts_model_type": official["tts_model_type"],
                  "tts_model_size": official["tts_model_size"]},
        "official": {k: official[k] for k in ("versions", "torch_num_threads", "dtype", "method", "call",
                                              "generate_kwargs", "languages", "speakers", "timing")},
        "request": request,
        "mode": ("icl" if ref_frames else "xvector") if official["method"] == "voice_clone" else official["method"],
        "seed": official["seed"],
        "seed_note": "torch.manual_seed(seed) right before generate_<method>",
        "sample_rate": official["sample_rate"],
        "frames": int(t["codes"].shape[0]),
        "ref_frames": ref_frames,
        "samples": int(t["waveform"].shape[0]),
        "files": {"tensors": FIXTURE_TENSORS, "wav": REFERENCE_WAV, "log": EXPORT_LOG, "official": OFFICIAL_JSON},
    }
    (out / FIXTURE_JSON).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    _write_float_wav(out / REFERENCE_WAV, t["waveform"].numpy(), int(official["sample_rate"]))
    return out


# ------------------------------------------------------------------------- fixtures


def is_qwen3_fixture(path: str | Path) -> bool:
    """True when ``path`` (a folder or a file in it) holds a Qwen3 fixture's ``fixture.json``."""
    try:
        meta = _read_config(fixture_dir(path) / FIXTURE_JSON)
    except HarnessError:
        return False
    return isinstance(meta, dict) and meta.get("schema") == SCHEMA


def load_fixture(path: str | Path) -> Fixture:
    """Load a fixture written by :func:`export_fixture`.

    Raises:
        HarnessError: missing files, another schema or version, missing tensors.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    d = fixture_dir(path)
    for name in (FIXTURE_JSON, FIXTURE_TENSORS):
        if not (d / name).is_file():
            raise HarnessError(f"not a fixture folder: {d} has no {name} (write one with `vocalis reference export`)")
    meta = _read_config(d / FIXTURE_JSON)
    if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
        raise HarnessError(f"{d / FIXTURE_JSON} is not a Qwen3-TTS reference fixture")
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise HarnessError(f"{d / FIXTURE_JSON} has schema version {meta.get('schema_version')}, this vocalis reads "
                           f"{SCHEMA_VERSION}: export it again")
    try:
        tensors = load_file(str(d / FIXTURE_TENSORS))
    except (SafetensorError, OSError) as e:
        raise HarnessError(f"cannot read {d / FIXTURE_TENSORS}: {e}") from None
    need = ["prompt.prefill", "prompt.trailing", "prompt.tts_pad", "logits.first", "codes", "waveform"]
    if meta.get("mode") in ("icl", "xvector"):
        need.append("ref.xvector")
    if meta.get("mode") == "icl":
        need.append("ref.codes")
    missing = [k for k in need if k not in tensors]
    if missing:
        raise HarnessError(f"fixture {d} lacks {', '.join(missing)}: export it again")
    return Fixture(d, meta, tensors)


# ------------------------------------------------------------------------- replay


def _checkpoint_of(fx: Fixture, model: str | Path | None) -> Path:
    if model is not None:
        return resolve_checkpoint_dir(model)
    ckpt = Path(fx.meta["model"]["checkpoint"])
    if not ckpt.is_dir():
        raise ModelNotFound(f"the fixture's checkpoint {ckpt} is not there any more: pass --model <folder>")
    return ckpt


@torch.no_grad()
def replay_fixture(fixture: str | Path | Fixture, model: str | Path | None = None) -> dict[str, torch.Tensor]:
    """Rebuild the fixture's request with vocalis (CPU, float32).

    Returns tensors named as the fixture's: ``text.input_ids`` (+ ``text.instruct_ids``,
    ``text.ref_ids``) from vocalis's tokenizer; ``prompt.prefill [1, L, H]``,
    ``prompt.trailing [1, N, H]``, ``prompt.tts_pad [1, 1, H]`` from ``prompt.py`` (Base: with the
    fixture's official ``ref.xvector``/``ref.codes``); ``logits.first [1, V]`` (talker prefill,
    last position); ``codes [T, 16]`` from ``generate_codes`` with ``seeded_generator(seed)`` and
    the official merged generation keywords; ``waveform`` and ``waveform.stream`` (float32
    ``[samples]``): the fixture's official codes through vocalis's decoder, one shot and one
    frame per ``stream`` call (ICL: ``cat(ref.codes, codes)`` decoded, first
    ``icl_cut_samples(R, R + T, samples)`` samples dropped, ``qwen3_tts_model.py:612-628``).

    Raises:
        HarnessError: bad fixture. ModelNotFound / CheckpointError: the checkpoint cannot be loaded.
        InputError: the request is refused by vocalis (e.g. unknown speaker).
    """
    fx = fixture if isinstance(fixture, Fixture) else load_fixture(fixture)
    ckpt = _checkpoint_of(fx, model)
    off, req = fx.meta["official"], fx.meta["request"]
    tok = Qwen3TextTokenizer.from_dir(ckpt)
    enc = lambda s: torch.tensor([tok.encode(s)], dtype=torch.long)
    out: dict[str, torch.Tensor] = {"text.input_ids": enc(assistant_text(req["text"]))}
    talker = load_talker(ckpt, dtype=torch.float32)
    language = (off.get("languages") or [None])[0]
    nsm = bool(off["generate_kwargs"].get("non_streaming_mode"))
    method = off["method"]
    if method == "custom_voice":
        instruct_ids = enc(instruct_text(req["instruct"])) if req.get("instruct") else None
        if instruct_ids is not None and talker.spec.model_size not in "0b6":
            out["text.instruct_ids"] = instruct_ids
        with warnings.catch_warnings():  # 0.6B drops instruct, as the official does
            warnings.simplefilter("ignore")
            prompt = custom_voice_prompt(talker, out["text.input_ids"], req["speaker"], language, instruct_ids,
                                         non_streaming_mode=nsm)
    elif method == "voice_design":
        out["text.instruct_ids"] = enc(instruct_text(req["instruct"]))
        prompt = voice_design_prompt(talker, out["text.input_ids"], out["text.instruct_ids"], language,
                                     non_streaming_mode=nsm)
    else:
        ref_codes = fx.tensors.get("ref.codes")
        ref_ids = None
        if ref_codes is not None:
            ref_ids = out["text.ref_ids"] = enc(ref_text(req["ref_text"]))
        prompt = voice_clone_prompt(talker, out["text.input_ids"], fx.tensors["ref.xvector"].float(), language,
                                    ref_ids=ref_ids, ref_codes=ref_codes, non_streaming_mode=nsm)
    out.update({"prompt.prefill": prompt.prefill, "prompt.trailing": prompt.trailing,
                "prompt.tts_pad": prompt.tts_pad})
    logits, _ = talker.prefill(prompt.prefill, talker.new_cache(1, prompt.prefill.shape[1]))
    out["logits.first"] = logits[:, -1]
    gk = {k: v for k, v in off["generate_kwargs"].items() if k in HARD_DEFAULTS}
    params = GenerationParams.resolve({}, **gk)
    out["codes"] = generate_codes(talker, prompt, params, seeded_generator(int(fx.meta["seed"])))

    dec = codec.load_speech_decoder(ckpt / "speech_tokenizer")
    codes = fx.tensors["codes"].long()
    ref = fx.tensors.get("ref.codes")
    full = codes if ref is None else torch.cat([ref.long(), codes], dim=0)  # [R + T, 16]
    x = full.T[None]  # [1, 16, R + T]
    one = dec.decode(x)[0] if full.shape[0] else torch.zeros(0)
    state = dec.new_state(1)
    pieces = [dec.stream(state, x[..., i:i + 1])[0] for i in range(full.shape[0])]
    stream = torch.cat(pieces) if pieces else torch.zeros(0)
    if ref is not None:
        cut = codec.icl_cut_samples(ref.shape[0], full.shape[0], one.shape[0])
        one, stream = one[cut:], stream[cut:]
    out["waveform"] = one.float().contiguous()
    out["waveform.stream"] = stream.float().contiguous()
    return {k: v.detach().cpu().clone().contiguous() for k, v in out.items()}


def _replay_paths(path: str | Path) -> tuple[Path, Path, Path]:
    """(wav, json, safetensors) of a replay: ``X.wav`` -> ``X.json``/``X.safetensors`` beside it;
    a folder -> ``replay.wav``/``replay.json``/``replay.safetensors`` in it."""
    p = Path(path).expanduser()
    if p.suffix.lower() == ".wav":
        return p, p.with_suffix(".json"), p.with_suffix(".safetensors")
    return p / "replay.wav", p / "replay.json", p / "replay.safetensors"


def write_replay(fx: Fixture, replay: dict[str, torch.Tensor], output: str | Path) -> Path:
    """Write a replay (see :func:`_replay_paths`); also ``<wav stem>_stream.wav``. Returns the WAV path.

    Raises:
        InputError: the files cannot be written.
    """
    from safetensors.torch import save_file

    wav, js, st = _replay_paths(output)
    try:
        wav.parent.mkdir(parents=True, exist_ok=True)
        save_file(replay, str(st))
        _write_float_wav(wav, replay["waveform"].numpy(), fx.sample_rate)
        _write_float_wav(wav.with_name(wav.stem + "_stream.wav"), replay["waveform.stream"].numpy(), fx.sample_rate)
        meta = {"schema": REPLAY_SCHEMA, "schema_version": SCHEMA_VERSION, "vocalis_version": vocalis.__version__,
                "fixture": str(fx.dir.resolve()), "torch_num_threads": torch.get_num_threads(),
                "sample_rate": fx.sample_rate, "tensors": sorted(replay)}
        js.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot write the replay to {output}: {e}") from None
    return wav


def load_replay(path: str | Path) -> dict[str, torch.Tensor] | None:
    """A replay written by :func:`write_replay` (folder or its WAV), or None when ``path`` is a
    plain audio file (then only the waveform is compared).

    Raises:
        HarnessError: missing file, or a replay that cannot be read.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    wav, js, st = _replay_paths(path)
    meta = _read_config(js) if js.is_file() else None
    if isinstance(meta, dict) and meta.get("schema") == REPLAY_SCHEMA and st.is_file():
        try:
            return load_file(str(st))
        except (SafetensorError, OSError) as e:
            raise HarnessError(f"cannot read {st}: {e}") from None
    if not wav.is_file():
        raise HarnessError(f"candidate not found: {path}")
    data, _ = read_float_wav(wav)
    return {"waveform": torch.from_numpy(data)}


# ------------------------------------------------------------------------- compare


def _max_abs(a: torch.Tensor, b: torch.Tensor) -> float | None:
    if a.shape != b.shape:
        return None
    if a.numel() == 0:
        return 0.0
    return float((a.double() - b.double()).abs().max())


def _tensor_check(name: str, off: dict, cand: dict, keys: list[str], tol: float) -> dict:
    present = [k for k in keys if k in off]
    if not all(k in cand for k in present):
        return {"name": name, "status": "skipped", "detail": "the candidate has no " + name}
    diffs, shapes, reasons = {}, {}, []
    for k in present:
        diffs[k] = _max_abs(off[k].float(), cand[k].float())
        shapes[k] = {"official": list(off[k].shape), "vocalis": list(cand[k].shape)}
        if diffs[k] is None:
            reasons.append(f"{k} shape {tuple(cand[k].shape)} != official {tuple(off[k].shape)}")
        elif not diffs[k] <= tol:
            reasons.append(f"{k} max abs diff {diffs[k]:.3g} > {tol:g}")
    worst = max((d for d in diffs.values() if d is not None), default=None)
    return {"name": name, "status": "fail" if reasons else "pass", "max_abs_diff": worst, "tolerance": tol,
            "per_tensor": diffs, "shapes": shapes, "reasons": reasons}


def _codes_check(off: torch.Tensor, cand: dict) -> dict:
    if "codes" not in cand:
        return {"name": "codes", "status": "skipped", "detail": "the candidate has no codes"}
    c = cand["codes"].long()
    n = min(off.shape[0], c.shape[0])
    differ = (off[:n] != c[:n]).any(dim=1).nonzero().flatten()
    first = int(differ[0]) if len(differ) else (n if off.shape[0] != c.shape[0] else None)
    same = first is None
    out = {"name": "codes", "status": "pass" if same else "fail", "identical": same,
           "frames": {"official": int(off.shape[0]), "vocalis": int(c.shape[0])},
           "first_differing_frame": first, "reasons": []}
    if not same:
        out["reasons"].append(f"codes differ from frame {first} (official {off.shape[0]} frames, "
                              f"vocalis {c.shape[0]})")
    return out


def _wave_check(name: str, ref: np.ndarray, cand: dict, key: str, threshold: float) -> dict:
    if key not in cand:
        return {"name": name, "status": "skipped", "detail": f"the candidate has no {key}"}
    w = cand[key].numpy().astype(np.float32, copy=False).reshape(-1)
    m = metrics(ref, w)
    finite = bool(np.isfinite(ref).all() and np.isfinite(w).all())
    reasons = []
    if ref.shape[0] != w.shape[0]:
        reasons.append(f"length differs: official {ref.shape[0]} samples, vocalis {w.shape[0]}")
    if not finite:
        reasons.append("non-finite samples")
    if ref.shape[0] and (m["cosine"] is None or not m["cosine"] > threshold):
        reasons.append(f"cosine {m['cosine']} <= {threshold}")
    return {"name": name, "status": "fail" if reasons else "pass", "samples": {"official": int(ref.shape[0]),
            "vocalis": int(w.shape[0])}, **m, "threshold": threshold, "reasons": reasons}


def compare(fixture: str | Path, candidate: str | Path | dict | None = None, out_dir: str | Path | None = None,
            model: str | Path | None = None) -> dict:
    """Compare a replay with the fixture and write ``out_dir/report.json`` and ``summary.txt``.

    Args:
        fixture: a Qwen3 fixture folder (or a file in it).
        candidate: a replay (folder or WAV written by :func:`write_replay`), tensors as
            :func:`replay_fixture` returns them, a plain audio file (waveform only), or None to
            replay now.
        out_dir: where to write the report (created); None writes nothing.
        model: checkpoint to replay with when ``candidate`` is None (default: the fixture's).

    Returns:
        The report: ``checks`` (``text_ids``, ``prompt``, ``logits``, ``codes``, ``waveform``,
        ``waveform_stream``; each ``status`` pass/fail/skipped with its numbers and ``reasons``),
        ``pass`` (every check that ran passed and the waveform ran), ``reasons``.

    Raises:
        HarnessError: unreadable fixture or candidate; errors of :func:`replay_fixture`.
    """
    fx = load_fixture(fixture)
    if candidate is None:
        cand, source = replay_fixture(fx, model), "replayed now"
    elif isinstance(candidate, dict):
        cand, source = candidate, "tensors"
    else:
        cand, source = load_replay(candidate), str(candidate)
    off = fx.tensors
    checks = []
    id_keys = [k for k in ("text.input_ids", "text.instruct_ids", "text.ref_ids") if k in off]
    if all(k in cand for k in id_keys) and "text.input_ids" in cand:
        bad = [k for k in id_keys if not torch.equal(off[k].long(), cand[k].long())]
        checks.append({"name": "text_ids", "status": "fail" if bad else "pass", "compared": id_keys,
                       "reasons": [f"{k} differ from the official processor's" for k in bad]})
    else:
        checks.append({"name": "text_ids", "status": "skipped", "detail": "the candidate has no token ids"})
    checks.append(_tensor_check("prompt", off, cand, ["prompt.prefill", "prompt.trailing", "prompt.tts_pad"],
                                PROMPT_TOL))
    checks.append(_tensor_check("logits", off, cand, ["logits.first"], LOGITS_TOL))
    checks.append(_codes_check(off["codes"].long(), cand))
    checks.append(_wave_check("waveform", fx.waveform, cand, "waveform", COSINE_THRESHOLD))
    checks.append(_wave_check("waveform_stream", fx.waveform, cand, "waveform.stream", COSINE_THRESHOLD))
    reasons = [f"{c['name']}: {r}" for c in checks for r in c.get("reasons", [])]
    if checks[4]["status"] == "skipped":
        reasons.append("waveform: the candidate has no waveform")
    report = {
        "schema": "vocalis.reference.qwen3.report",
        "fixture": str(fx.dir),
        "candidate": source,
        "model": fx.meta["model"],
        "mode": fx.meta["mode"],
        "seed": fx.meta["seed"],
        "thresholds": {"prompt_max_abs": PROMPT_TOL, "logits_max_abs": LOGITS_TOL, "codes": "identical",
                       "waveform_cosine": COSINE_THRESHOLD},
        "checks": checks,
        "pass": not reasons,
        "reasons": reasons,
    }
    if out_dir is not None:
        out = Path(out_dir).expanduser()
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / REPORT_JSON).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
            (out / SUMMARY_TXT).write_text(summary(report) + "\n", encoding="utf-8")
        except OSError as e:
            raise HarnessError(f"cannot write the report to {out}: {e}") from None
    return report


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def summary(report: dict) -> str:
    """Human summary: a PASS/FAIL line, then one line per check."""
    head = "PASS" if report["pass"] else "FAIL"
    lines = [f"{head}: Qwen3-TTS {report['mode']} fixture {report['fixture']} (seed {report['seed']})"]
    for c in report["checks"]:
        head = f"  {c['name']:<16} {c['status'].upper():<7}"
        if c["status"] == "skipped":
            lines.append(f"{head} {c['detail']}")
            continue
        if c["name"] in ("prompt", "logits"):
            body = f"max_abs_diff={_fmt(c['max_abs_diff'])} (<= {c['tolerance']:g})"
        elif c["name"] == "codes":
            f = c["frames"]
            body = (f"identical, {f['official']} frames" if c["identical"] else
                    f"first differing frame {c['first_differing_frame']} ({f['official']} official / "
                    f"{f['vocalis']} vocalis frames)")
        elif c["name"] == "text_ids":
            body = "equal to the official processor's" if c["status"] == "pass" else "differ"
        else:
            cos = c.get("cosine")
            body = (f"cosine={'n/a' if cos is None else f'{cos:.9f}'} (> {c['threshold']}) "
                    f"max_abs_diff={_fmt(c.get('max_abs_diff'))} samples={c['samples']['vocalis']}/"
                    f"{c['samples']['official']}")
        lines.append(f"{head} {body}")
    for r in report["reasons"]:
        lines.append(f"  - {r}")
    return "\n".join(lines)
