"""Text preparation and chunking: same chunks and token ids as the official functions, on
tricky texts, random texts, every config's rules and both tokenizer kinds."""

from __future__ import annotations

import random
import time

import pytest

from vocalis.errors import InputError
from vocalis.models.pocket import registry
from vocalis.models.pocket.model import _Tokenizer
from vocalis.models.pocket.tokenizer_files import write_sentencepiece_model, write_tokenizers_json
from vocalis.models.pocket.text import TextRules, prepare, split_chunks

tc = pytest.importorskip("pocket_tts.models.text_chunking")
from pocket_tts.modules.text_conditioner import JsonTokenizer, SentencePieceTokenizer  # noqa: E402

TEXTS = [
    "hello world",
    "Hello world. I am here! Are you? Yes\u2026 maybe...",
    "Pi is 3.14159 and e is 2.718. The U.S. economy grew 2.5% in Q3.",
    "Dr. Smith met Mr. Jones at 5 p.m.; they talked about A.I. and the U.K.",
    "\u201cQuoted,\u201d she said. \u2018Single\u2019 quotes\u2019 and don\u2019t forget it\u2019s fine.",
    '"Hi?", she said. (A parenthetical.) [Bracketed] \u00abguillemets\u00bb \u201elow\u201d',
    "Dashes \u2013 en and \u2014 em - and hyphen-ated words; semicolons; colons: here",
    "Line one\nLine two\r\nLine three\n\nLine five",
    "\u00a1Hola! \u00bfQu\u00e9 tal? Bien, gracias.",
    "no punctuation at the end",
    "ends with comma,",
    "ends with dash \u2014",
    "ends with quote \u201d",
    "Short.",
    "a",
    "Emoji \U0001F600 and CJK \u4f60\u597d and control \x07\x0b chars.",
    " ".join(["This is a really long sentence without any stops at all"] * 12),
    " ".join(["word,"] * 80) + " end.",
    "1.2.3.4 version 10.5. Next sentence 7. 8 is a number.",
]

RULES = {
    "english": registry.released_config("english"),
    "english_2026-01": registry.released_config("english_2026-01"),
    "french": registry.released_config("french"),
    "spanish": registry.released_config("spanish"),
    "german": registry.released_config("german"),
    "english_2m_2026-10": registry.released_config("english_2m_2026-10"),
}


def rules_of(cfg) -> TextRules:
    return TextRules(cfg.pad_with_spaces_for_short_inputs, cfg.remove_semicolons,
                     cfg.append_terminal_punctuation, cfg.capitalize_first_letter,
                     dict(cfg.replace_characters))


@pytest.fixture(scope="module", params=["json", "sentencepiece"])
def tokenizers(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("tok")
    if request.param == "json":
        path = write_tokenizers_json(d / "tokenizer.json", 4000, seed=0)
        return _Tokenizer("tokenizers", path, 4000), JsonTokenizer(4000, str(path))
    path = write_sentencepiece_model(d / "tokenizer.model", 4000, seed=0)
    return _Tokenizer("sentencepiece", path, 4000), SentencePieceTokenizer(4000, str(path))


def official(tok, text, max_tokens, cfg):
    chunks = tc.split_into_best_sentences(
        tok, text, max_tokens, cfg.pad_with_spaces_for_short_inputs, cfg.remove_semicolons,
        cfg.append_terminal_punctuation, cfg.capitalize_first_letter, cfg.replace_characters)
    out = []
    for c in chunks:
        p, g = tc.prepare_text_prompt(c, cfg.pad_with_spaces_for_short_inputs,
                                      cfg.remove_semicolons, cfg.append_terminal_punctuation,
                                      cfg.capitalize_first_letter, cfg.replace_characters)
        out.append((p, tok.encode(p), g))
    return out


def mine(tok, text, max_tokens, cfg):
    r = rules_of(cfg)
    out = []
    for c in split_chunks(tok, text, max_tokens, r):
        p, g = prepare(c, r)
        out.append((p, tok.encode(p), g))
    return out


@pytest.mark.parametrize("config", list(RULES))
@pytest.mark.parametrize("max_tokens", [50, 12, 3])
def test_chunks_match_official(tokenizers, config, max_tokens):
    ours, theirs = tokenizers
    cfg = RULES[config]
    for text in TEXTS:
        try:
            expected = official(theirs, text, max_tokens, cfg)
        except ValueError:
            with pytest.raises(InputError):
                mine(ours, text, max_tokens, cfg)
            continue
        assert mine(ours, text, max_tokens, cfg) == expected, text


def _random_text(rng: random.Random, n_words: int) -> str:
    words = ["the", "cat", "Dr.", "3.5", "12", "U.S.", "it\u2019s", "\u201cno\u201d", "don't",
             "caf\u00e9", "na\u00efve", "x", "(aside)", "well,", "so;", "then:", "\u2014", "-",
             "yes!", "why?", "hmm\u2026", "end.", "\n", "1.", "2", "A.I.", "v2.0.1"]
    return " ".join(rng.choice(words) for _ in range(n_words))


def test_random_texts_match_official(tokenizers):
    ours, theirs = tokenizers
    rng = random.Random(0)
    for i in range(150):
        text = _random_text(rng, rng.randint(1, 120))
        cfg = RULES[list(RULES)[i % len(RULES)]]
        max_tokens = rng.choice([5, 20, 50])
        try:
            expected = official(theirs, text, max_tokens, cfg)
        except ValueError:
            continue
        assert mine(ours, text, max_tokens, cfg) == expected, text


def test_long_text_matches_official_and_scales(tokenizers):
    ours, theirs = tokenizers
    rng = random.Random(1)
    cfg = RULES["english"]
    medium = " ".join(_random_text(rng, 30) + "." for _ in range(60))  # ~9k characters
    assert mine(ours, medium, 50, cfg) == official(theirs, medium, 50, cfg)
    # 200,000 characters: the official boundary check is quadratic; ours must stay fast.
    huge = (medium + " ") * (200_000 // len(medium) + 1)
    huge = huge[:200_000]
    t0 = time.perf_counter()
    chunks = split_chunks(ours, huge, 50, rules_of(cfg))
    elapsed = time.perf_counter() - t0
    assert len(chunks) > 1000
    assert elapsed < 60, f"chunking 200k characters took {elapsed:.1f} s"


def test_empty_texts_are_input_errors():
    for text in ["", "   ", "\n\t "]:
        with pytest.raises(InputError, match="empty"):
            prepare(text, TextRules())
    with pytest.raises(InputError, match="empty"):
        prepare('"\u201c\u201d', rules_of(RULES["french"]))  # only removed characters
