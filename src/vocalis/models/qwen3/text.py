"""Qwen3-TTS text tokenizer: Qwen2 byte-level BPE, read from a checkpoint folder with the
``tokenizers`` library (no ``transformers`` at run time).

Files: ``vocab.json``, ``merges.txt`` and ``tokenizer_config.json`` (its ``added_tokens_decoder``
gives the special tokens such as ``<|im_start|>`` 151644 and ``<tts_pad>`` 151671).

The pipeline is the one transformers 4.57.3 builds for ``Qwen2TokenizerFast`` from these files
(``convert_slow_tokenizer.Qwen2Converter``): added tokens matched on the raw text, NFC
normalization, a regex split, byte-level mapping, BPE without ``ignore_merges``.

The split regex: the official loader calls ``AutoProcessor.from_pretrained(path,
fix_mistral_regex=True)``, and ``tokenization_utils_base._patch_mistral_regex`` then replaces
Qwen2's split regex by :data:`FIXED_SPLIT_REGEX` when the base vocabulary has more than 100 000
entries, the path is a local folder, and that folder's ``config.json`` has no
``transformers_version`` or one newer than 4.57.2 and older than 5.0.0 (or a Mistral
``model_type``). The released checkpoints meet these conditions, so "Say HelloWorld" splits
"Hello"/"World" as with the fixed regex. :func:`official_split_regex` applies the same rule
(checked against the official processor in tests/qwen3/test_qwen3_tokenizer.py).

By code reading (not run): given a Hub repo id instead of a folder, transformers 4.57.3 patches
only repos tagged as Mistral-based, so it keeps Qwen2's regex there. vocalis always tokenizes
from a folder on disk (a Hub snapshot is one), and matches the official package loading that
same folder.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from vocalis.errors import CheckpointError, InputError

QWEN2_SPLIT_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                     r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
FIXED_SPLIT_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                     r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
                     r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_MISTRAL_TYPES = {"mistral", "mistral3", "voxtral", "ministral", "pixtral"}


def _version(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits or 0))
    return tuple(out + [0] * (3 - len(out)))


def official_split_regex(checkpoint_dir: str | Path, base_vocab_size: int) -> str:
    """The split regex the official processor ends up with for a local checkpoint folder
    (transformers 4.57.3 ``_patch_mistral_regex`` with ``fix_mistral_regex=True``)."""
    if base_vocab_size <= 100000:
        return QWEN2_SPLIT_REGEX
    path = Path(checkpoint_dir) / "config.json"
    cfg = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    version = cfg.get("transformers_version")
    if version and _version(version) <= (4, 57, 2):
        if cfg.get("model_type") is not None and cfg.get("model_type") not in _MISTRAL_TYPES:
            return QWEN2_SPLIT_REGEX
    elif version and _version(version) >= (5, 0, 0):
        return QWEN2_SPLIT_REGEX
    return FIXED_SPLIT_REGEX


class Qwen3TextTokenizer:
    """Text -> token ids, identical to the official ``Qwen3TTSProcessor`` on the same folder.

    ``encode(text)`` returns ``list[int]`` (no BOS/EOS added, as the processor); special tokens
    written in the text (``<|im_start|>``...) map to their ids. ``token_id(tok)`` looks one up.
    """

    def __init__(self, tokenizer, base_vocab_size: int, split_regex: str):
        self._tok = tokenizer
        self.base_vocab_size = base_vocab_size
        self.split_regex = split_regex

    @classmethod
    def from_dir(cls, checkpoint_dir: str | Path, split_regex: str | None = None) -> "Qwen3TextTokenizer":
        """Load from a checkpoint folder. ``split_regex`` overrides the official choice
        (:func:`official_split_regex`). Raises CheckpointError if a file is missing or bad."""
        from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
        from tokenizers.models import BPE

        d = Path(checkpoint_dir)
        files = {n: d / n for n in ("vocab.json", "merges.txt", "tokenizer_config.json")}
        for name, p in files.items():
            if not p.is_file():
                raise CheckpointError(f"{p} is missing: a Qwen3-TTS checkpoint folder holds vocab.json, "
                                      "merges.txt and tokenizer_config.json")
        try:
            vocab = json.loads(files["vocab.json"].read_text(encoding="utf-8"))
            tok_cfg = json.loads(files["tokenizer_config.json"].read_text(encoding="utf-8"))
            model = BPE.from_file(str(files["vocab.json"]), str(files["merges.txt"]), dropout=None,
                                  unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                                  fuse_unk=False, byte_fallback=False)
        except Exception as e:  # JSON or BPE file errors
            raise CheckpointError(f"tokenizer files in {d} are not readable ({e}); re-download the checkpoint") from None
        tok = Tokenizer(model)
        tok.normalizer = normalizers.NFC()
        regex = split_regex or official_split_regex(d, len(vocab))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        tok.decoder = decoders.ByteLevel()
        added = sorted((int(i), t) for i, t in (tok_cfg.get("added_tokens_decoder") or {}).items())
        for expected, (i, t) in enumerate(added, start=len(vocab)):
            if i != expected:
                raise CheckpointError(f"tokenizer_config.json: added token {t.get('content')!r} has id {i}, "
                                      f"expected {expected} (added tokens follow vocab.json without gaps)")
            token = AddedToken(t["content"], single_word=t.get("single_word", False), lstrip=t.get("lstrip", False),
                               rstrip=t.get("rstrip", False), normalized=t.get("normalized", False),
                               special=t.get("special", True))
            (tok.add_special_tokens if token.special else tok.add_tokens)([token])
        return cls(tok, len(vocab), regex)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (str). Raises InputError for a non-string."""
        if not isinstance(text, str):
            raise InputError(f"text must be a string, got {type(text).__name__}")
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=False)

    def token_id(self, token: str) -> int:
        """Id of a vocabulary or added token. Raises CheckpointError when the checkpoint lacks it."""
        i = self._tok.token_to_id(token)
        if i is None:
            raise CheckpointError(f"the checkpoint's tokenizer has no token {token!r}")
        return i

    @property
    def vocab_size(self) -> int:
        """Base vocabulary plus added tokens."""
        return self._tok.get_vocab_size(with_added_tokens=True)


# Prompt texts of the official wrapper (qwen_tts/inference/qwen3_tts_model.py:269-276).
def assistant_text(text: str) -> str:
    return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"


def ref_text(text: str) -> str:
    return f"<|im_start|>assistant\n{text}<|im_end|>\n"


def instruct_text(instruct: str) -> str:
    return f"<|im_start|>user\n{instruct}<|im_end|>\n"


class TokenStream:
    """Token ids of a text that arrives in pieces (a language model's output), each handed
    out as soon as no later text can change it, so that the ids handed out, followed by
    those of :meth:`close`, are exactly ``encode(assistant_text(whole text))[3:-5]`` (the
    text ids of the official template, as :meth:`Qwen3Model.text_ids` gives them).

    The tokenizer splits the text (after NFC) into pieces with its pre-tokenizer regex, then
    runs BPE on each piece alone, so ids are final once their piece is. Later text can
    change more than the last piece (with the checkpoints' regex, ``"文B"`` is two pieces
    and ``"文Ba"`` one; ``"\\n"`` then ``" "`` then ``"\\n"`` become one), but no regex
    alternative reads across the start of a run of white space from the text before it:
    the pieces before the last such run are final. Speech so waits for the word after a
    word (one token per frame keeps the talker well behind any language model).
    ``tests/qwen3/test_qwen3_text_feed.py`` checks the claim on random texts cut at random.
    """

    def __init__(self, tokenizer: Qwen3TextTokenizer):
        self._tok = tokenizer
        self.text = ""
        self.ids: list[int] = []  # text ids handed out so far
        self.role: list[int] = []  # the template's 3 role ids, once text ids are out
        self._final: list[int] = []  # template ids of the final pieces (role, then text)
        self._done = 0  # where the final pieces end in the segment (a piece boundary)

    def _segment(self) -> str:
        # the part of the template between its special tokens that holds the text
        return "assistant\n" + unicodedata.normalize("NFC", self.text)

    def push(self, delta: str) -> list[int]:
        """Add ``delta``; returns the ids that became final (maybe none). Only the text
        after the final pieces is split and encoded again (it starts a piece, and the
        regex reads no text before where it starts), so a push costs the unfinished tail,
        not the whole reply."""
        self.text += delta
        tail = self._segment()[self._done:]
        pieces = self._tok._tok.pre_tokenizer.pre_tokenize_str(tail)
        # the start of the last run of white space, moved back to a piece boundary (a
        # punctuation piece may end with line breaks)
        run = next((i for i in range(len(tail) - 1, 0, -1)
                    if tail[i].isspace() and not tail[i - 1].isspace()), 0)
        cut = max((a for _, (a, _) in pieces if a <= run), default=0)
        if cut == 0:
            return []
        # the ids of the pieces before it, from the encoding of the tail as it is (the
        # tail cut there would be split again differently: "  " alone is one piece,
        # before a digit two); the first tail carries the template's opening token
        head = "<|im_start|>" if self._done == 0 else ""
        enc = self._tok._tok.encode(head + tail, add_special_tokens=False)
        new = [i for i, (_, end) in zip(enc.ids, enc.offsets) if end <= len(head) + cut]
        self._done += cut
        self._final += new
        return self._take(self._final)

    def close(self) -> list[int]:
        """The text is complete: the ids not handed out yet."""
        return self._take(self._tok.encode(assistant_text(self.text))[:-5])

    def _take(self, template: list[int]) -> list[int]:
        """``template``: final ids of the template, role (3 ids) then text."""
        if len(template) <= 3:
            return []
        self.role, ids = template[:3], template[3:]
        n = len(self.ids)
        if ids[:n] != self.ids:  # the claim above failed (e.g. a special token's name cut)
            raise InputError("the streamed text changed tokens already spoken (it writes a "
                             "special token such as <|im_end|> in pieces?): send plain text",
                             param="input")
        new = ids[n:]
        self.ids = list(ids)
        return new
