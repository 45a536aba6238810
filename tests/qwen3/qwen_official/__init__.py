"""Drive the official Qwen3-TTS package (``qwen-tts==0.1.1``) in its own virtual environment.

It pins ``transformers==4.57.3``, which cannot share vocalis's environment, so tests run a
script of this folder with that environment's interpreter: ``VOCALIS_QWEN_PYTHON``, or
``/work/.venv-qwen/bin/python`` when unset. ``.ci/run`` builds it (``scripts/qwen_official_venv.sh``).
Without it the tests fail (they do not skip) with a message saying how to build it.

Scripts import ``_official`` (torchaudio stand-in, ``OUT`` folder, ``save(result, **arrays)``,
``timed(name)``) and read their inputs from argv.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
import tempfile

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ENV_VAR = "VOCALIS_QWEN_PYTHON"
DEFAULT_PYTHON = "/work/.venv-qwen/bin/python"
BUILD_HINT = ("build it with `bash scripts/qwen_official_venv.sh .venv-qwen` and "
              f"`export {ENV_VAR}=$PWD/.venv-qwen/bin/python` (bash .ci/run does both)")


def official_python() -> str:
    """Interpreter of the venv holding qwen-tts==0.1.1; fails the test if it is missing."""
    path = os.environ.get(ENV_VAR) or DEFAULT_PYTHON
    if not (Path(path).is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"no interpreter for the official qwen-tts package at {path} "
                    f"({ENV_VAR} {'is set' if os.environ.get(ENV_VAR) else 'unset'}): {BUILD_HINT}",
                    pytrace=False)
    return path


def run_official(script: str | Path, *args, timeout: float = 600) -> dict:
    """Run ``tests/qwen3/qwen_official/<script>`` (or a path) under the official interpreter.

    Returns the script's ``result.json`` as a dict, plus ``"arrays"``: ``{name: np.ndarray}``
    for every array it saved, and ``"wall_s"``: the subprocess wall time including imports.
    Fails the test (stderr tail in the message) on a non-zero exit or a timeout.
    """
    py = official_python()
    path = Path(script) if Path(script).is_absolute() else HERE / script
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                "PYTHONPATH": str(HERE)})
    with tempfile.TemporaryDirectory(prefix="qwen-official-") as out:
        env["VOCALIS_OFFICIAL_OUT"] = out
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([py, str(path), *map(str, args)], env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"official script {path.name} timed out after {timeout} s\n{(e.stderr or '')[-3000:]}")
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            pytest.fail(f"official script {path.name} exited {proc.returncode}\n{proc.stderr[-4000:]}")
        result_path = Path(out) / "result.json"
        if not result_path.is_file():
            pytest.fail(f"official script {path.name} wrote no result.json\n{proc.stderr[-3000:]}")
        result = json.loads(result_path.read_text(encoding="utf-8"))
        result["arrays"] = {p.stem: np.load(p) for p in Path(out).glob("*.npy")}
    result["wall_s"] = round(wall, 3)
    return result
