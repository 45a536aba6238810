"""Qwen3-TTS text tokenizer: ids identical to the official processor (qwen-tts==0.1.1 with
transformers 4.57.3, run in its own venv) on the tokenizer files a random checkpoint writes."""

from __future__ import annotations

import json

import pytest

from tests.qwen3.qwen_official import run_official
from vocalis.errors import CheckpointError
from vocalis.models.qwen3 import registry
from vocalis.models.qwen3.random_checkpoint import write_tokenizer_files
from vocalis.models.qwen3.text import (FIXED_SPLIT_REGEX, QWEN2_SPLIT_REGEX, Qwen3TextTokenizer, assistant_text,
                                instruct_text, official_split_regex, ref_text)

SAMPLES = [
    "Hello from vocalis.",
    "Say HelloWorld to my iPhone",
    "'Sam went to McDonald's, didn't he? I'M SURE we'll see, they've said.",
    "你好，世界！今天天气很好，我们一起去公园散步吧。",
    "こんにちは、世界。カタカナとひらがな、漢字のテストです。",
    "안녕하세요, 세계! 음성 합성 테스트입니다.",
    "Guten Tag! Die Straße ist schön; Müller fährt über die Brücke.",
    "Bonjour à tous ! L'été dernier, nous sommes allés à Nice.",
    "Привет, мир! Сегодня прекрасная погода, не правда ли?",
    "Olá, mundo! A configuração está pronta, não é?",
    "¡Hola, mundo! ¿Cómo estás? El niño comió una manzana.",
    "Ciao a tutti! Perché la città è così bella d'estate?",
    "Emoji 😀🎉👍🏽👨‍👩‍👧 and flags 🇫🇷🇯🇵 → ≠ ∞ © ™ … “quotes” — dashes",
    "Mixed: iPhone15Pro 和 MacBook、東京タワー and Москва-2026, x=3.14e-5, 1,234,567.89€",
    "  leading spaces, trailing  \n\n\tTabs\r\nand CRLF lines \u00a0nbsp\u3000ideographic space ",
    "Combining: e\u0301 vs \u00e9, A\u030a, Hangul jamo \u1100\u1161, ﬁ ligature, ＡＢＣ full width",
    "/path/to/file.txt https://example.com/a?b=c&d=e <html> #hashtag @user $100 50% C++ C#",
    "Special tokens inline: <|im_start|>user and <tts_pad><tts_text_bos> text<|im_end|><|endoftext|>",
    "",
    " ",
    "long " + " ".join(["The quick brown fox jumps over the lazy dog; 敏捷的棕色狐狸跳过了懒狗。"] * 40),
]
CORPUS = SAMPLES + [assistant_text(s) for s in SAMPLES[:6]] + [ref_text(s) for s in SAMPLES[3:7]] \
    + [instruct_text("A calm, low male voice. 用温柔的语气说。")]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    d = tmp_path_factory.mktemp("qwen3-tok")
    write_tokenizer_files(d)
    (d / "config.json").write_text(json.dumps(registry.config_dict("qwen3-tts/0.6b-customvoice", tiny=True)))
    return d


@pytest.fixture(scope="module")
def official(ckpt, tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "texts.json"
    p.write_text(json.dumps(CORPUS, ensure_ascii=False), encoding="utf-8")
    return run_official("tokenizer_run.py", ckpt, p, timeout=300)


@pytest.mark.slow  # one official process (~30-50 s with its imports)
def test_ids_match_the_official_processor(ckpt, official):
    tok = Qwen3TextTokenizer.from_dir(ckpt)
    assert official["fix_mistral_regex"] is True and official["vocab_size"] == 151643
    assert tok.vocab_size == official["len"] == 151676
    for text, ids in zip(CORPUS, official["ids"]):
        assert tok.encode(text) == ids, text


@pytest.mark.slow  # one official process (~30-50 s with its imports)
def test_the_split_regex_matters_and_vocalis_follows_the_official_choice(ckpt, official):
    """Without fix_mistral_regex the official ids differ on these inputs; vocalis matches the
    processor the official wrapper builds (with the flag), not plain Qwen2 splitting."""
    plain = Qwen3TextTokenizer.from_dir(ckpt, split_regex=QWEN2_SPLIT_REGEX)
    tok = Qwen3TextTokenizer.from_dir(ckpt)
    assert tok.split_regex == FIXED_SPLIT_REGEX
    for i in (1, 2):  # "Say HelloWorld to my iPhone", "'Sam went to McDonald's ..."
        assert official["plain_ids"][i] != official["ids"][i]
        assert plain.encode(CORPUS[i]) == official["plain_ids"][i]
        assert tok.encode(CORPUS[i]) == official["ids"][i]


def test_prompt_texts_put_special_tokens_where_the_official_code_slices(ckpt):
    """The official generate() takes input_id[:, :3] as the role and [:, 3:-5] as the text."""
    tok = Qwen3TextTokenizer.from_dir(ckpt)
    ids = tok.encode(assistant_text("Hello"))
    assert ids[:3] == [151644, 77091, 198] and ids[-5:] == [151645, 198, 151644, 77091, 198]
    assert ids[3:-5] == tok.encode("Hello")
    assert tok.encode(ref_text("Hi"))[-2:] == [151645, 198]
    assert tok.encode(instruct_text("x"))[:3] == [151644, 872, 198]
    assert [tok.token_id(t) for t in ("<tts_pad>", "<tts_text_bos>", "<tts_text_eod>")] == [151671, 151672, 151673]


def test_split_regex_rule_follows_transformers_version(tmp_path):
    for version, regex in (("4.57.3", FIXED_SPLIT_REGEX), (None, FIXED_SPLIT_REGEX),
                           ("4.57.1", QWEN2_SPLIT_REGEX), ("5.0.0", QWEN2_SPLIT_REGEX)):
        cfg = {"model_type": "qwen3_tts", **({"transformers_version": version} if version else {})}
        (tmp_path / "config.json").write_text(json.dumps(cfg))
        assert official_split_regex(tmp_path, 151643) == regex, version
    assert official_split_regex(tmp_path, 5000) == QWEN2_SPLIT_REGEX


def test_random_tokenizer_files_are_deterministic(tmp_path):
    write_tokenizer_files(tmp_path / "a")
    write_tokenizer_files(tmp_path / "b")
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_missing_or_broken_tokenizer_files_are_refused(ckpt, tmp_path):
    with pytest.raises(CheckpointError, match="vocab.json is missing"):
        Qwen3TextTokenizer.from_dir(tmp_path)
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((ckpt / name).read_bytes())
    (tmp_path / "vocab.json").write_text("{broken")
    with pytest.raises(CheckpointError, match="not readable"):
        Qwen3TextTokenizer.from_dir(tmp_path)
