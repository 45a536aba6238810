"""Tokenizer files for random-weight checkpoints, checked with the official loaders
(pocket_tts SentencePieceTokenizer / JsonTokenizer) and the official text chunker."""

from __future__ import annotations

import hashlib
import random
import re
import subprocess
import sys
import time

import pytest

from vocalis.errors import InputError
from vocalis.models.pocket import tokenizer_files as tf

text_conditioner = pytest.importorskip("pocket_tts.modules.text_conditioner")

TEXT = (
    "Hello there, Dr. Smith! It costs $3.14 (about 1,000 yen) at 10:30; really? "
    "Yes: “l’école est fermée” — says Zoë... Er wohnt in der Straße 12. ¿Dónde está? "
    "Mr. O’Brien’s cat isn't here... OK!"
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tok")
    t0 = time.perf_counter()
    model = tf.write_sentencepiece_model(d / "tokenizer.model")
    t1 = time.perf_counter()
    json_path = tf.write_tokenizers_json(d / "tokenizer.json")
    t2 = time.perf_counter()
    return model, json_path, (t1 - t0, t2 - t1)


def test_fast(files):
    sp_s, json_s = files[2]
    assert sp_s < 10 and json_s < 10, files[2]


def test_official_loaders_accept_the_files(files):
    model, json_path, _ = files
    sp = text_conditioner.SentencePieceTokenizer(4000, str(model))
    js = text_conditioner.JsonTokenizer(4000, str(json_path))
    assert sp.sp.vocab_size() == 4000 and js.tokenizer.get_vocab_size() == 4000
    # build_tokenizer picks the backend from the suffix, as the configs do.
    assert isinstance(text_conditioner.build_tokenizer(4000, str(json_path)), text_conditioner.JsonTokenizer)
    with pytest.raises(AssertionError):
        text_conditioner.SentencePieceTokenizer(4001, str(model))
    with pytest.raises(AssertionError):
        text_conditioner.JsonTokenizer(3999, str(json_path))


def test_round_trip_and_same_ids(files):
    model, json_path, _ = files
    sp = text_conditioner.SentencePieceTokenizer(4000, str(model))
    js = text_conditioner.JsonTokenizer(4000, str(json_path))
    ids = sp.encode(TEXT)
    assert len(ids) > 40 and 0 not in ids  # no <unk>
    assert sp.decode(ids) == TEXT
    assert js.encode(TEXT) == ids
    assert js.decode(ids) == TEXT
    # NFKC normalization: the ellipsis character becomes three periods, as in SentencePiece's nmt_nfkc.
    assert sp.decode(sp.encode("Wait… what?")) == js.decode(js.encode("Wait… what?")) == "Wait... what?"
    # Spaces are tokens (pad_with_spaces_for_short_inputs relies on it) and round-trip.
    padded = " " * 8 + "Hi there."
    assert sp.encode(padded)[:8] == js.encode(padded)[:8] == [sp.sp.piece_to_id("▁")] * 8
    assert sp.decode(sp.encode(padded)) == js.decode(js.encode(padded)) == padded


def test_sentencepiece_and_json_agree_on_many_strings(files):
    model, json_path, _ = files
    sp = text_conditioner.SentencePieceTokenizer(4000, str(model))
    js = text_conditioner.JsonTokenizer(4000, str(json_path))
    rng = random.Random(7)
    alphabet = list(".!?,;:…'\"“”‘’«» abcXYZéüßñ0129-–—()\t\u00a0中<>")
    texts = ["", " ", "  two  spaces  ", "<unk>", "中文", "e\u0301t\u00e9", "ＡＢＣ ﬁ", "....", "7777 1999.5"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 25))) for _ in range(2000)]
    texts += tf.synthetic_corpus(seed=123, num_lines=300)
    # Runs of 3+ identical letters ("sss" = s+ss = ss+s) are exact ties that the two
    # libraries may break differently (documented); the corpus never makes them.
    triple = re.compile(r"([^\W\d_])\1\1")
    assert not any(triple.search(t) for t in tf.synthetic_corpus(seed=123, num_lines=300))
    texts = [t for t in texts if not triple.search(t)]
    assert len(texts) > 2000
    for text in texts:
        ids = sp.encode(text)
        assert js.encode(text) == ids, text
        assert js.decode(ids) == sp.decode(ids), text


def test_punctuation_pieces_for_the_official_chunker(files):
    model, json_path, _ = files
    for tok in (
        text_conditioner.SentencePieceTokenizer(4000, str(model)),
        text_conditioner.JsonTokenizer(4000, str(json_path)),
    ):
        first, *marks = tok(".!...?")[0].tolist()
        assert tok.decode([first]) == "" and tok.decode(marks) == ".!...?"
        assert [tok.decode([m]) for m in marks] == [".", "!", ".", ".", ".", "?"]
        first, *fallback = tok(",;:")[0].tolist()
        assert [tok.decode([m]) for m in fallback] == [",", ";", ":"]
        # Marks never merge with words, digits or quotes: every sentence end is a boundary token.
        ids = tok.encode('He said "no." In 1999. Really?! Pi is 3.14.')
        assert ids.count(marks[0]) == 4 and ids.count(marks[1]) == 1 and ids.count(marks[-1]) == 1


def test_official_chunker_splits_sentences(files):
    chunking = pytest.importorskip("pocket_tts.models.text_chunking")
    _, json_path, _ = files
    tok = text_conditioner.JsonTokenizer(4000, str(json_path))
    text = " ".join(f"This is sentence number {i}, with a few words in it." for i in range(12))
    chunks = chunking.split_into_best_sentences(tok, text, 30, False, False)
    assert len(chunks) > 3
    assert " ".join(chunks) == text
    assert all(c.endswith(".") for c in chunks)
    # The decimal rule keeps 3.14 inside one sentence.
    chunks = chunking.split_into_best_sentences(tok, "Pi is 3.14 exactly. " * 10, 12, False, False)
    assert all("3.14" in c for c in chunks)


def test_deterministic_in_a_fresh_process(files, tmp_path):
    model, json_path, _ = files
    code = (
        "import sys\n"
        "from vocalis.models.pocket import tokenizer_files as tf\n"
        "tf.write_sentencepiece_model(sys.argv[1])\n"
        "tf.write_tokenizers_json(sys.argv[2])\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.model"), str(tmp_path / "a.json")], check=True)
    assert (tmp_path / "a.model").read_bytes() == model.read_bytes()
    assert (tmp_path / "a.json").read_bytes() == json_path.read_bytes()


def test_other_seed_and_size(tmp_path):
    a = tf.write_sentencepiece_model(tmp_path / "s1.model", vocab_size=500, seed=1)
    b = tf.write_sentencepiece_model(tmp_path / "s2.model", vocab_size=500, seed=2)
    assert hashlib.sha256(a.read_bytes()).digest() != hashlib.sha256(b.read_bytes()).digest()
    j = tf.write_tokenizers_json(tmp_path / "sub" / "s1.json", vocab_size=500, seed=1)
    text_conditioner.SentencePieceTokenizer(500, str(a))
    text_conditioner.JsonTokenizer(500, str(j))
    with pytest.raises(InputError):
        tf.train_sentencepiece(50)
