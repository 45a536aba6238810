"""Compare a candidate waveform with a reference (a fixture's official waveform or a WAV).

Pass = equal lengths, every sample finite in both, and cosine similarity above
:data:`COSINE_THRESHOLD` (0.99999). SNR and max abs difference are reported to help
read a failure, not to decide it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from vocalis.errors import HarnessError, InputError
from vocalis.reference.replay import load_fixture

COSINE_THRESHOLD = 0.99999
COMPARISON_JSON = "comparison.json"


def read_float_wav(path: str | Path) -> tuple[np.ndarray, int]:
    """A WAV/FLAC/... file -> (float32 mono ``[samples]`` in [-1, 1], sample rate in Hz).

    Multi-channel files are refused (a candidate must be mono, as the models produce).

    Raises:
        HarnessError: missing or unreadable file, or more than one channel.
    """
    import soundfile

    p = Path(path).expanduser()
    if not p.is_file():
        raise HarnessError(f"audio file not found: {p}")
    try:
        data, sr = soundfile.read(str(p), dtype="float32", always_2d=True)
    except Exception as e:  # soundfile raises LibsndfileError / RuntimeError / TypeError
        raise HarnessError(f"cannot read audio {p}: {e}") from None
    if data.shape[1] != 1:
        raise HarnessError(f"{p} has {data.shape[1]} channels; expected mono")
    return np.ascontiguousarray(data[:, 0]), int(sr)


def _reference(ref: str | Path | np.ndarray) -> tuple[np.ndarray, int | None, str]:
    if isinstance(ref, np.ndarray):
        return ref.astype(np.float32, copy=False).reshape(-1), None, "array"
    p = Path(ref).expanduser()
    if p.is_dir() or p.suffix in (".safetensors", ".json"):
        fx = load_fixture(p)
        return fx.waveform, fx.sample_rate, str(fx.dir)
    wav, sr = read_float_wav(p)
    return wav, sr, str(p)


def _candidate(cand: str | Path | np.ndarray) -> tuple[np.ndarray, int | None, str]:
    if isinstance(cand, np.ndarray):
        return cand.astype(np.float32, copy=False).reshape(-1), None, "array"
    wav, sr = read_float_wav(cand)
    return wav, sr, str(Path(cand).expanduser())


def metrics(ref: np.ndarray, cand: np.ndarray) -> dict:
    """Similarity of two float ``[samples]`` signals over their common prefix.

    Returns ``cosine`` (float64 dot / norms; 1.0 when both are all zeros),
    ``max_abs_diff``, ``rms_diff``, ``snr_db`` (reference energy over difference energy,
    None when the signals are identical or the overlap is empty) and ``bit_exact``.
    """
    n = min(ref.shape[0], cand.shape[0])
    a = ref[:n].astype(np.float64)
    b = cand[:n].astype(np.float64)
    finite = bool(np.isfinite(a).all() and np.isfinite(b).all())
    if n == 0 or not finite:
        return {"compared_samples": n, "cosine": None, "max_abs_diff": None, "rms_diff": None,
                "snr_db": None, "bit_exact": False}
    d = a - b
    na, nb = float(np.sqrt(np.dot(a, a))), float(np.sqrt(np.dot(b, b)))
    if na == 0.0 and nb == 0.0:
        cos = 1.0
    elif na == 0.0 or nb == 0.0:
        cos = 0.0
    else:
        cos = float(np.dot(a, b) / (na * nb))
    err = float(np.dot(d, d))
    sig = float(np.dot(a, a))
    snr = None if err == 0.0 else (10.0 * math.log10(sig / err) if sig > 0 else -math.inf)
    if snr is not None and not math.isfinite(snr):
        snr = None
    return {
        "compared_samples": n,
        "cosine": cos,
        "max_abs_diff": float(np.max(np.abs(d))),
        "rms_diff": float(np.sqrt(err / n)),
        "snr_db": snr,
        "bit_exact": bool(err == 0.0 and ref.shape[0] == cand.shape[0]),
    }


def compare(reference_wav_or_fixture: str | Path | np.ndarray,
            candidate_wav: str | Path | np.ndarray, out_dir: str | Path | None,
            threshold: float = COSINE_THRESHOLD) -> dict:
    """Compare ``candidate_wav`` with the reference and write ``out_dir/comparison.json``.

    Args:
        reference_wav_or_fixture: a fixture (directory, ``fixture.json`` or
            ``fixture.safetensors``: its ``waveform``), an audio file, or float32 samples.
        candidate_wav: an audio file or float32 samples ``[samples]``.
        out_dir: where to write ``comparison.json`` (created); None writes nothing.
        threshold: cosine similarity to beat.

    Returns:
        The report: ``reference``/``candidate`` (source, samples, sample_rate_hz),
        ``equal_length``, ``finite``, ``cosine``, ``max_abs_diff``, ``rms_diff``, ``snr_db``,
        ``bit_exact``, ``threshold``, ``pass`` and ``reasons`` (why it failed).

    Raises:
        HarnessError: unreadable fixture or audio. InputError: bad threshold.
    """
    if not (0.0 < float(threshold) <= 1.0):
        raise InputError(f"threshold must be in (0, 1], got {threshold}")
    ref, ref_sr, ref_src = _reference(reference_wav_or_fixture)
    cand, cand_sr, cand_src = _candidate(candidate_wav)
    m = metrics(ref, cand)
    finite = bool(np.isfinite(ref).all() and np.isfinite(cand).all())
    equal_length = ref.shape[0] == cand.shape[0]
    same_rate = ref_sr is None or cand_sr is None or ref_sr == cand_sr
    reasons = []
    if not equal_length:
        reasons.append(f"length differs: reference {ref.shape[0]} samples, candidate "
                       f"{cand.shape[0]}")
    if not finite:
        reasons.append("non-finite samples (NaN/inf)")
    if not same_rate:
        reasons.append(f"sample rate differs: reference {ref_sr} Hz, candidate {cand_sr} Hz")
    if m["cosine"] is None or m["cosine"] <= threshold:
        reasons.append(f"cosine {m['cosine']} <= {threshold}" if m["cosine"] is not None
                       else "cosine undefined")
    report = {
        "reference": {"source": ref_src, "samples": int(ref.shape[0]), "sample_rate_hz": ref_sr},
        "candidate": {"source": cand_src, "samples": int(cand.shape[0]),
                      "sample_rate_hz": cand_sr},
        "equal_length": equal_length,
        "finite": finite,
        **m,
        "threshold": float(threshold),
        "pass": not reasons,
        "reasons": reasons,
    }
    if out_dir is not None:
        out = Path(out_dir).expanduser()
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / COMPARISON_JSON).write_text(json.dumps(report, indent=2) + "\n",
                                               encoding="utf-8")
        except OSError as e:
            raise HarnessError(f"cannot write {out / COMPARISON_JSON}: {e}") from None
    return report


def summary(report: dict) -> str:
    """One line for humans: PASS/FAIL, cosine, max diff, SNR, lengths."""
    snr, cos, mad = report.get("snr_db"), report.get("cosine"), report.get("max_abs_diff")
    snr_s = "inf" if report.get("bit_exact") else ("n/a" if snr is None else f"{snr:.1f}")
    line = (f"{'PASS' if report['pass'] else 'FAIL'}: cosine="
            f"{'n/a' if cos is None else f'{cos:.9f}'} (> {report['threshold']}) "
            f"max_abs_diff={'n/a' if mad is None else f'{mad:.3g}'} snr_db={snr_s} "
            f"samples={report['candidate']['samples']}/{report['reference']['samples']}")
    if report["reasons"]:
        line += " [" + "; ".join(report["reasons"]) + "]"
    return line
