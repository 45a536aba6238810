"""The official pocket-tts 4.0.1 as the other side of ``vocalis bench --against official``.

:class:`PocketOfficialBench` (what :meth:`PocketTTS.official_bench
<vocalis.models.pocket.front.PocketTTS.official_bench>` returns) runs this module as
``python -m vocalis.models.pocket.official SPEC.json OUT.json``, so that the official model
has a process of its own: its memory figures are its own, and nothing of vocalis (model,
engine threads) is resident or running beside it. It is the same checkpoint, texts, seeds
and request options; requests run one after the other, as the official package serves them
(``generate_audio_stream`` is not thread-safe).

The official package runs on the CPU (``device`` in each run), whatever vocalis ran on.

Configurations (:func:`official_configs`): ``as-shipped`` leaves torch as ``import
pocket_tts`` leaves it (one intra-op thread, the package as its users get it; its
generation and decoding threads still run side by side); ``matched-threads`` sets vocalis's
torch thread count after the import. At one vocalis thread they coincide and it runs once.
The result's ``torch_threads`` is the count the child actually ran with.

Timing is the same as vocalis's: ``ttfa_ms`` from just before ``generate_audio_stream`` is
called to the first audio chunk in the caller's hands (the official per-chunk deep copy of
the voice state, tokenization, cache allocation and thread start-up included, model and
voice loading excluded); ``wall_ms`` until the generator is exhausted.

Request options map to the official keywords (:data:`LOAD_OPTIONS` of ``load_model``,
:data:`GENERATE_OPTIONS` of ``generate_audio_stream``). Fixed length (``max_frames``,
``--frames``): the official package has no such option. The child loads the model with
``eos_threshold=1e9`` (the EOS logit never exceeds it, so EOS never fires) and replaces the
loaded instance's ``_estimate_max_gen_len`` by ``lambda tokens: frames``, the one place the
official generation loop takes its frame budget (and the size of its caches) from; every
text chunk then runs exactly ``frames`` steps, as vocalis's ``max_frames`` does. Without it
both sides use the model's EOS settings.

Also here: how a vocalis model id and voice translate to the official package's
(:func:`resolve_official_model`, :func:`resolve_official_voice`), shared with the reference
harness (:mod:`vocalis.reference.export`).
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch
import yaml

from vocalis.bench import memory
from vocalis.bench.official import AS_SHIPPED, MATCHED_THREADS, pass_summary, run_child
from vocalis.bench.session import _r
from vocalis.errors import HarnessError, InputError, ModelNotFound, VoiceError
from vocalis.family import ModelInfo, OfficialBench
from vocalis.models.pocket.registry import DEFAULT_CONFIG

log = logging.getLogger(__name__)

#: the EOS threshold that disables EOS (the logit is compared with ``>``)
NO_EOS_THRESHOLD = 1e9
#: request options -> ``TTSModel.load_model`` keywords
LOAD_OPTIONS = {
    "temperature": "temp",
    "eos_threshold": "eos_threshold",
    "noise_clamp": "noise_clamp",
    "sampler_decode_steps": "sampler_decode_steps",
}
#: request options that are ``generate_audio_stream`` keywords of the same name
GENERATE_OPTIONS = ("frames_after_eos", "max_tokens")
#: request options the official side takes: the above and ``max_frames`` (see the module doc)
OFFICIAL_OPTIONS = (*LOAD_OPTIONS, *GENERATE_OPTIONS, "max_frames")
#: the child: this module
CHILD = "vocalis.models.pocket.official"


@contextmanager
def _torch_threads_kept():
    """Importing ``pocket_tts`` calls ``torch.set_num_threads(1)`` for the whole process:
    put the count back afterwards (the parent resolves names with the official package)."""
    n = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _missing(e: ImportError) -> HarnessError:
    return HarnessError(f"--against official needs the official pocket-tts package ({e}): pip "
                        "install 'vocalis[reference]'")


# --------------------------------------------------------------------------- names


def resolve_official_model(model: str) -> dict[str, str]:
    """Vocalis model id -> ``TTSModel.load_model`` keywords.

    ``pocket-tts`` -> the default config; ``pocket-tts/<config>`` -> ``language=<config>``;
    a local YAML path (or a directory holding ``config.yaml``), ``hf://`` or ``https://``
    reference -> ``config=<path>`` (local paths made absolute).

    Raises:
        ModelNotFound: unknown released config or missing file.
        HarnessError: the official package is not installed.
    """
    try:
        # the official package, optional: only the official side and the harness need it
        with _torch_threads_kept():
            from pocket_tts.utils.config import CONFIGS_DIR  # official config directory
    except ImportError as e:
        raise _missing(e) from None

    if not isinstance(model, str) or not model.strip():
        raise ModelNotFound("model id is empty: use `pocket-tts`, `pocket-tts/<config>` or a "
                            "path to a YAML config")
    mid = model.strip()
    known = sorted(p.stem for p in Path(CONFIGS_DIR).glob("*.yaml"))
    if mid in ("pocket-tts", "pocket-tts/"):
        mid = f"pocket-tts/{DEFAULT_CONFIG}"
    if mid.startswith("pocket-tts/"):
        name = mid.split("/", 1)[1]
        if name not in known:
            raise ModelNotFound(f"unknown model {model!r}; the official package knows: "
                                + ", ".join(f"pocket-tts/{n}" for n in known)
                                + " (or give a path to a YAML config)")
        return {"language": name}
    if mid.startswith(("hf://", "http://", "https://")):
        return {"config": mid}
    path = Path(mid).expanduser()
    if path.is_dir():
        path = path / "config.yaml"
    if not path.exists():
        raise ModelNotFound(f"model config not found: {path} (use pocket-tts/<config> for a "
                            "released model)")
    if path.suffix not in (".yaml", ".yml"):
        raise ModelNotFound(f"model config must be a .yaml file, got {path}")
    return {"config": str(_anchored_yaml(path.resolve()))}


def _anchored_yaml(path: Path) -> Path:
    """``path``, or a temporary copy whose relative file paths (weights, tokenizer) are made
    absolute from the YAML's folder: vocalis resolves them from there, pocket-tts from the
    working directory (checkpoints written by ``vocalis models random`` are relative)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    changed = False

    def anchor(holder: dict | None, key: str) -> None:
        nonlocal changed
        value = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(value, str) and "://" not in value and not Path(value).is_absolute() \
                and (path.parent / value).exists():
            holder[key] = str(path.parent / value)
            changed = True

    anchor(data, "weights_path")
    anchor(data, "weights_path_without_voice_cloning")
    anchor(((data or {}).get("flow_lm") or {}).get("lookup_table"), "tokenizer_path")
    if not changed:
        return path
    fd, tmp = tempfile.mkstemp(prefix="vocalis-official-", suffix=".yaml")
    with open(fd, "w", encoding="utf-8") as f:
        yaml.safe_dump(data, f, sort_keys=False)
    return Path(tmp)


def resolve_official_voice(voice: str | Path) -> tuple[Any, str]:
    """Voice argument -> (what to pass to ``get_state_for_audio_prompt``, kind:
    ``"audio"``, ``"safetensors"`` or ``"predefined"``).

    Raises:
        VoiceError: empty, or neither a file nor a predefined voice of the official package.
        HarnessError: the official package is not installed.
    """
    try:
        # the official package, optional: only the official side and the harness need it
        with _torch_threads_kept():
            from pocket_tts.utils.utils import _ORIGINS_OF_PREDEFINED_VOICES
    except ImportError as e:
        raise _missing(e) from None

    text = str(voice).strip()
    if not text:
        raise VoiceError("voice is empty: give an audio file, a predefined voice name or a "
                         ".safetensors voice state")
    is_remote = text.startswith(("hf://", "http://", "https://"))
    kind = "safetensors" if text.split("@")[0].endswith(".safetensors") else "audio"
    if is_remote:
        return text, kind
    path = Path(text).expanduser()
    if path.exists():
        return path.resolve(), kind
    if text in _ORIGINS_OF_PREDEFINED_VOICES:
        return text, "predefined"
    raise VoiceError(f"voice {text!r} is not a file nor a predefined voice name; predefined: "
                     + ", ".join(sorted(_ORIGINS_OF_PREDEFINED_VOICES)))


def official_configs(torch_threads: int) -> list[dict]:
    """The official pocket-tts runs for a vocalis run at ``torch_threads`` threads.

    Each is ``{config, threads (for the child; None = as ``import pocket_tts`` leaves torch),
    matches_vocalis_threads}``: ``as-shipped`` always, then ``matched-threads`` when
    ``torch_threads`` > 1 (at 1 thread the as-shipped run is already matched: one run).

    Raises:
        InputError: ``torch_threads`` is not an integer >= 1.
    """
    if isinstance(torch_threads, bool) or not isinstance(torch_threads, int) or torch_threads < 1:
        raise InputError(f"torch_threads must be an integer >= 1, got {torch_threads!r}")
    runs = [{"config": AS_SHIPPED, "threads": None, "matches_vocalis_threads": torch_threads == 1}]
    if torch_threads > 1:
        runs.append({"config": MATCHED_THREADS, "threads": torch_threads,
                     "matches_vocalis_threads": True})
    return runs


# --------------------------------------------------------------------------- the parent side


class PocketOfficialBench(OfficialBench):
    """The official pocket-tts in a child process (see the module doc)."""

    name = "pocket-tts 4.0.1"

    def check(self, info: ModelInfo, voice, options: dict, quantize: bool) -> None:
        if voice is None:
            raise InputError("--against official needs --voice (an audio file, a .safetensors "
                             "voice state or a predefined voice name)", param="voice")
        if not isinstance(voice, (str, Path)):
            raise VoiceError("--against official needs the voice as a file or a predefined "
                             "name, which the official package can load too", param="voice")
        other = [k for k in options if k not in OFFICIAL_OPTIONS]
        if other:
            raise InputError(f"--against official: the official pocket-tts has no option "
                             f"{other[0]}; it takes {', '.join(OFFICIAL_OPTIONS)}",
                             param=other[0])
        resolve_official_model(info.model_id)  # a config the official package cannot load
        resolve_official_voice(voice)

    def runs(self, info: ModelInfo, voice, options: dict, *, texts: list[str],
             seeds: list[int], frames: int | None, threads: int, device: str,
             quantize: bool, frame_samples: int, timeout_s: float) -> list[dict]:
        load_kwargs = resolve_official_model(info.model_id)
        official_voice = str(resolve_official_voice(voice)[0])
        frames = options.get("max_frames", frames)
        configs = official_configs(threads)
        if len(configs) == 1:
            log.info("vocalis ran at 1 thread: the official package as shipped is already at "
                     "matched threads, so it runs once")
        out = []
        for c in configs:
            log.info("official %s, %s (%s): warm-up pass and measured pass, %d request(s), one "
                     "at a time", self.name, c["config"], f"{c['threads']} thread(s)"
                     if c["threads"] else "threads as import pocket_tts leaves them", len(texts))
            spec = {"load_kwargs": load_kwargs, "voice": official_voice, "texts": texts,
                    "seeds": seeds, "threads": c["threads"], "frames": frames,
                    "quantize": quantize,
                    "options": {k: v for k, v in options.items() if k != "max_frames"}}
            run = run_child([sys.executable, "-m", CHILD], spec, timeout_s=timeout_s,
                            what="the official pocket-tts run")
            out.append({"config": c["config"], "matches_vocalis_threads":
                        c["matches_vocalis_threads"], "device": "cpu", **run})
        return out


# --------------------------------------------------------------------------- the child


def run_official(load_kwargs: dict, voice, texts: list[str], seeds: list[int],
                 threads: int | None, frames: int | None = None, quantize: bool = False,
                 warmup: bool = True, options: dict | None = None) -> dict:
    """Load the official model, one excluded pass over ``texts`` then one measured pass.

    ``threads``: torch intra-op threads, or None to keep what ``import pocket_tts`` sets
    (one). ``options``: request options (:data:`LOAD_OPTIONS`, :data:`GENERATE_OPTIONS`).
    Raises ValueError for another thread count or option.
    """
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise ValueError(f"threads must be None (as pocket-tts ships) or an integer >= 1, "
                         f"got {threads!r}")
    options = dict(options or {})
    other = set(options) - set(LOAD_OPTIONS) - set(GENERATE_OPTIONS)
    if other:
        raise ValueError(f"options the official side does not take: {sorted(other)}")
    # the official package: imported in this child only (it sets torch.set_num_threads(1))
    from pocket_tts import TTSModel

    if threads is not None:
        torch.set_num_threads(threads)
    logging.getLogger("pocket_tts").setLevel(logging.ERROR)
    kwargs = {**load_kwargs, **{LOAD_OPTIONS[k]: v for k, v in options.items() if k in LOAD_OPTIONS}}
    if frames is not None:
        kwargs["eos_threshold"] = NO_EOS_THRESHOLD
    if quantize:
        kwargs["quantize"] = True
    gen_kwargs = {k: v for k, v in options.items() if k in GENERATE_OPTIONS}
    t0 = time.perf_counter()
    model = TTSModel.load_model(**kwargs)
    if frames is not None:
        model._estimate_max_gen_len = lambda token_count: frames
    load_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    state = model.get_state_for_audio_prompt(Path(voice) if Path(voice).exists() else voice)
    voice_ms = (time.perf_counter() - t0) * 1000
    rate = model.sample_rate
    frame_samples = int(rate / model.config.mimi.frame_rate)

    def one(i: int) -> dict:
        torch.manual_seed(seeds[i])
        n, ttfa = 0, None
        t0 = time.perf_counter()
        for chunk in model.generate_audio_stream(state, texts[i], **gen_kwargs):
            if ttfa is None:
                ttfa = (time.perf_counter() - t0) * 1000
            n += int(chunk.shape[-1])
        wall = (time.perf_counter() - t0) * 1000
        audio_s = n / rate
        return {"index": i, "ok": True, "error": None, "ttfa_ms": _r(ttfa), "wall_ms": _r(wall),
                "audio_s": _r(audio_s, 4), "frames": n // frame_samples,
                "rtf": _r(wall / 1000 / audio_s, 4) if n else None,
                "x_real_time": _r(audio_s / (wall / 1000), 3) if n else None}

    def run_pass() -> tuple[list[dict], float]:
        t0 = time.perf_counter()
        out = [one(i) for i in range(len(texts))]
        return out, (time.perf_counter() - t0) * 1000

    warm_summary = None
    if warmup:
        memory.reset_peak()
        w, w_ms = run_pass()
        warm_summary = pass_summary(w, w_ms)
        warm_summary["peak_rss_mb"] = _r(memory.peak_rss_mb(), 1)
    rss_before = memory.rss_mb()
    memory.reset_peak()
    meas, meas_ms = run_pass()
    peak = memory.peak_rss_mb()
    session = pass_summary(meas, meas_ms)
    session.update(peak_rss_mb=_r(peak, 1), rss_before_mb=_r(rss_before, 1),
                   rss_growth_mb=_r(max(0.0, peak - rss_before), 1) if rss_before is not None else None)
    try:
        official = version("pocket-tts")
    except PackageNotFoundError:  # pragma: no cover - imported above, so installed
        official = None
    return {"version": official, "load_kwargs": {k: str(v) for k, v in kwargs.items()},
            "generate_kwargs": gen_kwargs, "frames": frames, "quantize": quantize,
            "torch_threads": torch.get_num_threads(), "sample_rate": rate,
            "load_ms": _r(load_ms), "voice_ms": _r(voice_ms),
            "warmup": warm_summary, "session": session, "per_request": meas,
            "frames_method": (f"eos_threshold={NO_EOS_THRESHOLD:g} and _estimate_max_gen_len "
                              f"-> {frames} on the loaded instance") if frames else "model EOS"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m vocalis.models.pocket.official SPEC.json OUT.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    result = run_official(**spec)
    Path(argv[1]).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


__all__ = ["GENERATE_OPTIONS", "LOAD_OPTIONS", "NO_EOS_THRESHOLD", "OFFICIAL_OPTIONS",
           "PocketOfficialBench", "official_configs", "resolve_official_model",
           "resolve_official_voice", "run_official"]


if __name__ == "__main__":
    sys.exit(main())
