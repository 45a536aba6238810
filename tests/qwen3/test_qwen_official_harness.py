"""The subprocess harness that drives the official qwen-tts package (tests/qwen3/qwen_official)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.qwen3.qwen_official import ENV_VAR, official_python, run_official


def test_missing_interpreter_fails_and_says_how_to_build_it(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nope" / "python"))
    with pytest.raises(pytest.fail.Exception, match=r"no interpreter [\s\S]*scripts/qwen_official_venv.sh"):
        official_python()


@pytest.mark.slow  # official interpreter start with its imports (~15-30 s)
def test_run_official_returns_json_and_arrays_from_the_official_venv():
    out = run_official("echo_run.py", "héllo", 3, timeout=300)
    assert out["argv"] == ["héllo", "3"]
    assert os.path.realpath(out["prefix"]) == os.path.realpath(Path(official_python()).parent.parent)  # the venv
    np.testing.assert_array_equal(out["arrays"]["ramp"], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert out["wall_s"] > 0 and "script_total" in out["timing"]


def test_a_failing_official_script_fails_the_test_with_its_stderr(tmp_path):
    bad = tmp_path / "bad_run.py"
    bad.write_text("import sys\nprint('official side exploded', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(pytest.fail.Exception, match=r"exited 3[\s\S]*official side exploded"):
        run_official(bad, timeout=120)
