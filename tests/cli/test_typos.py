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
    # a config's beginning means the shortest config that begins so
    (["generate", "--model", "pocket-tts/english_2m", "--text", "Hi."],
     "did you mean pocket-tts/english_2m_2026-10?"),
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


def test_a_text_files_final_line_break_is_not_spoken(qwen, tmp_path):
    """`--text-file` with "Hi there" and a line break speaks what `--text "Hi there"` does
    (same seed: the same samples); Qwen3-TTS used to speak the line break too."""
    import soundfile as sf

    f = tmp_path / "t.txt"
    f.write_text("Hi there\n", encoding="utf-8")
    common = ["generate", "--model", str(qwen), "--speaker", "ryan", "--seed", "3", "--max-frames", "30"]
    assert cli.main([*common, "--text-file", str(f), "-o", str(tmp_path / "a.wav")]) == 0
    assert cli.main([*common, "--text", "Hi there", "-o", str(tmp_path / "b.wav")]) == 0
    a, _ = sf.read(str(tmp_path / "a.wav"), dtype="int16")
    b, _ = sf.read(str(tmp_path / "b.wav"), dtype="int16")
    assert a.shape == b.shape and (a == b).all()
    f.write_text("Hi there\n\n", encoding="utf-8")  # only the last line break goes
    assert cli.main([*common, "--text-file", str(f), "-o", str(tmp_path / "c.wav")]) == 0


@pytest.mark.parametrize("flag", ["--ref-audio", "--voice"])
def test_a_missing_reference_names_the_flag_that_gave_it(flag, tmp_path, capsys):
    base = write_random_checkpoint("qwen3-tts/0.6b-base", tmp_path / "base", seed=1, tiny=True)
    args = ["generate", "--model", str(base), "--text", "Hi.", flag, str(tmp_path / "nope.wav"),
            "--ref-text", "Some words.", "-o", str(tmp_path / "never.wav")]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reference audio not found" in err[0], err
    assert err[0].endswith(f"({flag})"), err


def test_greedy_with_sampling_options_is_refused(qwen, tmp_path, capsys):
    # greedy takes the argmax: a temperature beside it would be ignored without a word
    args = ["generate", "--model", str(qwen), "--text", "Hi.", "--greedy", "--temperature",
            "0.5", "-o", str(tmp_path / "never.wav")]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "greedy and temperature together" in err[0], err
    assert err[0].endswith("(--temperature)") and not (tmp_path / "never.wav").exists()
