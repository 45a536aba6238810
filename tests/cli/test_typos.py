"""A mistyped model, config, voice, speaker or language gets a "did you mean" with the
closest name, in one line, before anything is loaded (issue 37)."""

from __future__ import annotations

import pytest

from vocalis import cli
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    return write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path_factory.mktemp("q") / "cv",
                                   seed=1, tiny=True)


@pytest.mark.parametrize("args,want", [
    (["generate", "--model", "pocket-tts/englsh", "--text", "Hi."], "did you mean pocket-tts/english?"),
    (["generate", "--model", "qwen3-tts/0.6b-custom", "--text", "Hi."],
     "did you mean qwen3-tts/0.6b-customvoice?"),
    (["generate", "--model", "pocket-tts", "--voice", "alab", "--text", "Hi."], "did you mean alba?"),
    (["generate", "--model", "{qwen}", "--speaker", "rian", "--text", "Hi."], "did you mean ryan?"),
    (["generate", "--model", "{qwen}", "--language", "englsh", "--text", "Hi."],
     "did you mean english?"),
    (["models", "random", "--config", "english_2m_2026_10", "--out", "{tmp}/x"],
     "did you mean pocket-tts/english_2m_2026-10?"),
])
def test_typos_get_the_closest_name(args, want, qwen, tmp_path, capsys):
    args = [a.replace("{qwen}", str(qwen)).replace("{tmp}", str(tmp_path)) for a in args]
    if args[0] == "generate":
        args += ["-o", str(tmp_path / "never.wav")]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and want in err[0], err
    assert not (tmp_path / "never.wav").exists()
