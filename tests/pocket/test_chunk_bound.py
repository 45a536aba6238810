"""No text can make a chunk unbounded (issue 7, item 3).

The tokenizers are the real files of the random checkpoints: ``english_2m_2026-10`` uses a
SentencePiece model, ``english`` a ``tokenizers`` JSON. Token counts are taken with those
libraries directly (not through vocalis), and the official chunker is the reference for
texts that stay in the parity zone.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time

import pytest
import soundfile as sf

import vocalis
from vocalis.models.pocket.text import MAX_CHUNK_TOKENS, chunk_token_bound

tc = pytest.importorskip("pocket_tts.models.text_chunking")

CONFIGS = {"english_2m_2026-10": "tokenizer.model", "english": "tokenizer.json"}
URL = "https://example.com/" + "/".join(f"segment{i}x" for i in range(400))[:5000]
ADVERSARIAL = {
    "4096 a": "a" * 4096,
    "url": URL,
    "spaced words": " ".join(["word"] * 3000),
    "emoji glued to letters": "x\U0001F600" * 2000,
    "accents": "\u00e9" * 3000,
    "mixed": ("caf\u00e9" * 300 + " ") * 8,
}


@pytest.fixture(scope="module", params=list(CONFIGS))
def loaded(request, checkpoints):
    ckpt = checkpoints.get(request.param)
    tts = vocalis.load(str(ckpt))
    path = ckpt / CONFIGS[request.param]
    if path.suffix == ".json":
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(str(path))
        count = lambda s: len(tok.encode(s).ids)  # noqa: E731
    else:
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_file=str(path))
        count = lambda s: len(sp.encode(s))  # noqa: E731
    yield tts, count
    tts.close()


def _letters(s: str) -> str:
    """Letters and digits in order (chunk texts are decoded tokens: preparation edits spaces
    and punctuation, and unknown characters come back as ⁇)."""
    return "".join(c for c in s.lower() if c.isalnum())


def test_bound_formula():
    assert [chunk_token_bound(m) for m in (1, 50, 500, 700, 1000, 10**6)] == \
        [250, 250, 1000, 1400, 2000, MAX_CHUNK_TOKENS]


@pytest.mark.parametrize("name", list(ADVERSARIAL))
@pytest.mark.parametrize("max_tokens", [1, 50, 1000])
def test_every_chunk_is_bounded(loaded, name, max_tokens):
    tts, count = loaded
    text = ADVERSARIAL[name]
    chunks = tts.model.chunk_text(text, max_tokens)
    bound = chunk_token_bound(max_tokens)
    for prepared, ids, _ in chunks:
        assert len(ids) == count(prepared)  # the ids are the tokenizer's own
        assert len(ids) <= bound, (name, len(ids))
    if count(text) > bound and not re.search(r"[.!?,;:]", text):  # one passage, split:
        # the fallback pieces are about max_tokens tokens
        assert max(len(ids) for _, ids, _ in chunks) <= min(max_tokens, bound // 2) + 3
    # nothing is lost or invented: the same characters in the same order
    assert _letters("".join(p for p, _, _ in chunks)) == _letters(text)


def test_200k_characters_without_spaces_chunk_fast(loaded):
    tts, count = loaded
    t0 = time.perf_counter()
    chunks = tts.model.chunk_text("a" * 200_000)
    elapsed = time.perf_counter() - t0
    assert max(len(ids) for _, ids, _ in chunks) <= 53 and len(chunks) > 1000
    assert _letters("".join(p for p, _, _ in chunks)) == "a" * 200_000
    assert elapsed < 30, elapsed


def test_log_says_what_happens(loaded, caplog):
    tts, _ = loaded
    with caplog.at_level(logging.WARNING, logger="vocalis"):
        tts.model.chunk_text("a" * 4096)
    msg = " ".join(r.getMessage() for r in caplog.records)
    assert "inside words longer than 50 tokens" in msg and "at most 50 tokens" in msg


def test_parity_zone_keeps_official_chunks(loaded):
    """A long sentence without punctuation below the bound stays one chunk, as officially."""
    tts, count = loaded
    from pocket_tts.modules.text_conditioner import JsonTokenizer, SentencePieceTokenizer

    path = str(tts.model.tokenizer.path)
    off_tok = (JsonTokenizer if path.endswith(".json") else SentencePieceTokenizer)(4000, path)
    cfg = tts.model.config
    text = " ".join(["word"] * 200) + ". Then a second sentence."
    official = tc.split_into_best_sentences(
        off_tok, text, 50, cfg.pad_with_spaces_for_short_inputs, cfg.remove_semicolons,
        cfg.append_terminal_punctuation, cfg.capitalize_first_letter, cfg.replace_characters)
    official = [tc.prepare_text_prompt(c, cfg.pad_with_spaces_for_short_inputs,
                                       cfg.remove_semicolons, cfg.append_terminal_punctuation,
                                       cfg.capitalize_first_letter, cfg.replace_characters)[0]
                for c in official]
    ours = [p for p, _, _ in tts.model.chunk_text(text, 50)]
    assert ours == official and count(ours[0]) > 200


def test_long_no_space_request_streams_bounded_chunks(checkpoints):
    """4096 x "a" through the engine: bounded chunks, one frame each (max_frames=1)."""
    ckpt = checkpoints.get("english_2m_2026-10")
    with vocalis.load(str(ckpt)) as tts:
        chunks = tts.model.chunk_text("a" * 4096, 200)
        audio = tts.synthesize("a" * 4096, str(ckpt / "voice.wav"), seed=0, max_frames=1,
                               max_tokens=200)
    assert len(chunks) > 10 and max(len(ids) for _, ids, _ in chunks) <= 203
    assert audio.samples.shape[0] == len(chunks) * 1920


@pytest.mark.slow
def test_cli_200k_characters_no_traceback(checkpoints, tmp_path):
    """The CLI once tried to allocate 320 GB for this and left an empty WAV."""
    ckpt = checkpoints.get("english_2m_2026-10")
    src = tmp_path / "big.txt"
    src.write_text("a" * 200_000, encoding="utf-8")
    out = tmp_path / "big.wav"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "vocalis.cli", "generate", "--model", str(ckpt), "--voice",
         str(ckpt / "voice.wav"), "--text-file", str(src), "--max-frames", "1", "--max-tokens",
         "1000", "--seed", "0", "-o", str(out)], capture_output=True, env=env, timeout=900)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    info = sf.info(str(out))
    # 200 001 tokens in pieces of at most 1000 tokens (max_tokens), one frame each
    assert info.frames >= 200 * 1920 and info.frames % 1920 == 0
    assert "inside words longer than 1000 tokens" in err
