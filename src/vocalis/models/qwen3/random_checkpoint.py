"""Random-weight Qwen3-TTS checkpoints in the official folder layout.

``write_random_checkpoint("qwen3-tts/0.6b-customvoice", out, seed=0, tiny=True)`` writes::

    out/config.json, generation_config.json, model.safetensors     (talker: random_talker)
    out/vocab.json, merges.txt, tokenizer_config.json               (text tokenizer: here)
    out/preprocessor_config.json                                    (processor class: here)
    out/speech_tokenizer/config.json, model.safetensors, preprocessor_config.json
                                                                     (codec: random_codec)

The folder loads in the official ``Qwen3TTSModel.from_pretrained(out)``. Weights are random;
the text tokenizer is a real byte-level BPE (trained deterministically on a small built-in
multilingual corpus) padded with unused entries to the released base vocabulary of 151 643
tokens, then the released added tokens at their ids (``<|endoftext|>`` 151643, ``<|im_start|>``
151644, ``<tts_pad>`` 151671...). The full-size vocabulary is kept even for tiny checkpoints:
the official processor changes its split regex only for vocabularies over 100 000 entries, and
the prompt code looks these ids up in the text embedding (``text_vocab_size`` 151 936).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from vocalis.models.qwen3 import registry
from vocalis.models.qwen3.config import CodecConfig, Qwen3TTSConfig
from vocalis.models.qwen3.random_codec import (
    random_speaker_encoder_tensors,
    write_random_speech_tokenizer,
)
from vocalis.models.qwen3.random_talker import write_random_talker
from vocalis.models.qwen3.text import QWEN2_SPLIT_REGEX

BASE_VOCAB_SIZE = 151643
# Added tokens from id 151643 on: Qwen3's chat tokens, then the TTS ones. The ids the TTS code
# uses are the released ones (<|im_start|> 151644, <|im_end|> 151645, <tts_pad> 151671,
# <tts_text_bos> 151672, <tts_text_eod> 151673); the names at the other ids follow Qwen3's
# tokenizer and were not checked against the released file. ``special`` False: not special in Qwen3.
ADDED_TOKENS: list[tuple[str, bool]] = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True), ("<|box_start|>", True), ("<|box_end|>", True), ("<|quad_start|>", True),
    ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False), ("<|fim_pad|>", False),
    ("<|repo_name|>", False), ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False), ("<|audio_start|>", True), ("<|audio_end|>", True),
    ("<tts_pad>", True), ("<tts_text_bos>", True), ("<tts_text_eod>", True), ("<tts_text_bos_single>", True),
    ("<|audio_pad|>", True),
]

# Small built-in corpus the random BPE is trained on (merges only need to be plausible).
_CORPUS = [
    "Hello from vocalis. The quick brown fox jumps over the lazy dog, doesn't it? I'm sure we'll see.",
    "Say HelloWorld to my iPhone; McDonald's opened at 10:30 on 2026-11-30 (price: $4.99).",
    "你好，世界！今天天气很好，我们一起去公园散步吧。语音合成技术发展得非常快。",
    "こんにちは、世界。今日はとても良い天気ですね。音声合成のテストです。",
    "안녕하세요, 세계! 오늘 날씨가 정말 좋네요. 음성 합성 테스트입니다.",
    "Guten Tag! Die Straße ist schön, und Müller fährt über die Brücke.",
    "Bonjour à tous ! L'été dernier, nous sommes allés à la plage près de Nice.",
    "Привет, мир! Сегодня прекрасная погода, не правда ли?",
    "Olá, mundo! A configuração está pronta, não é? Vamos começar a reunião.",
    "¡Hola, mundo! ¿Cómo estás? El niño comió una manzana en la mañana.",
    "Ciao a tutti! Perché la città è così bella d'estate? Andiamo al caffè.",
    "Emoji 😀🎉👍🏽 and symbols → ≠ ∞ © ™ … “quotes” ‘single’ — dashes.",
    "def tokenize(text):\n    return [ord(c) for c in text]  # code\n\tindent\r\nwindows line",
]


# Ids the official prompt code depends on: it slices "<|im_start|>assistant\n" as 3 tokens
# (qwen3_tts_model.py, generate: input_id[:, :3], [:, 3:-5]; ref_id[:, 3:-2]), so "assistant"
# and "user" are single tokens, at their released ids; "\n" is byte token 198.
PINNED = {"assistant": 77091, "user": 872}
_CORPUS += [f"<|im_start|>{role}\n{line}<|im_end|>\n" for role in ("assistant", "user") for line in _CORPUS] * 4


def _byte_alphabet() -> list[str]:
    """The 256 byte-level symbols in GPT-2 order (printable bytes first), as Qwen2's ids 0..255."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    rest = [b for b in range(256) if b not in printable]
    return [chr(b) for b in printable] + [chr(256 + k) for k in range(len(rest))]


def _train_merges() -> list[tuple[str, str]]:
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers, trainers
    from tokenizers.models import BPE

    tok = Tokenizer(BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in json.loads(tok.to_str())["model"]["merges"]]


def write_tokenizer_files(out_dir: str | Path) -> None:
    """Write ``vocab.json`` (151 643 entries), ``merges.txt`` and ``tokenizer_config.json`` (the
    released added tokens at their ids) into ``out_dir``. Byte tokens take ids 0..255 in GPT-2
    order, ``assistant`` and ``user`` their released ids. Deterministic: same bytes every call."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    merges = _train_merges()
    learned = [a + b for a, b in merges]
    missing = [t for t in PINNED if t not in learned]
    if missing:
        raise RuntimeError(f"random BPE did not learn {missing}")  # a bug in the built-in corpus
    vocab = {t: i for i, t in enumerate(_byte_alphabet())}
    free = (i for i in range(len(vocab), BASE_VOCAB_SIZE) if i not in PINNED.values())
    for t in learned:
        vocab[t] = PINNED[t] if t in PINNED else next(free)
    for i in free:  # unreachable filler entries (no merge makes them)
        vocab[f"<|vocalis_unused_{i}|>"] = i
    vocab = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    assert len(vocab) == BASE_VOCAB_SIZE and list(vocab.values()) == list(range(BASE_VOCAB_SIZE))
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (out / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges), encoding="utf-8")
    added = {str(BASE_VOCAB_SIZE + k): {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                                        "single_word": False, "special": special}
             for k, (c, special) in enumerate(ADDED_TOKENS)}
    tok_cfg = {"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": added,
               "additional_special_tokens": [c for c, s in ADDED_TOKENS if s and c not in
                                             ("<|endoftext|>", "<|im_end|>")],
               "bos_token": None, "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>",
               "errors": "replace", "model_max_length": 131072, "pad_token": "<|endoftext|>",
               "processor_class": "Qwen3TTSProcessor", "split_special_tokens": False,
               "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}
    (out / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=2, ensure_ascii=False), encoding="utf-8")
    (out / "preprocessor_config.json").write_text(json.dumps({"processor_class": "Qwen3TTSProcessor"}, indent=2),
                                                  encoding="utf-8")


def _default_talker_writer(eos_scale: float = 1.0):
    def write(out: Path, cfg: Qwen3TTSConfig, seed: int) -> None:
        d = cfg.to_dict()
        extra = None
        if d.get("tts_model_type") == "base":  # Base checkpoints carry the x-vector encoder
            extra = random_speaker_encoder_tensors(d["speaker_encoder_config"], seed)
        write_random_talker(out, d, seed, extra_tensors=extra, eos_scale=eos_scale)

    return write


def _default_codec_writer():
    def write(out: Path, codec: CodecConfig, seed: int) -> None:
        write_random_speech_tokenizer(out, codec.to_dict(), seed)

    return write


def write_random_checkpoint(model_id: str, out_dir: str | Path, seed: int = 0, tiny: bool = False, *,
                            talker_writer: Callable[[Path, Qwen3TTSConfig, int], None] | None = None,
                            codec_writer: Callable[[Path, CodecConfig, int], None] | None = None,
                            eos_scale: float = 1.0) -> Path:
    """Write a random-weight checkpoint of release ``model_id`` (a vocalis id such as
    ``qwen3-tts/0.6b-customvoice`` or its Hub repo id) into ``out_dir``; ``tiny`` uses the test
    variant of the same structure. Returns ``out_dir``. The talker files come from
    ``random_talker.write_random_talker`` and ``speech_tokenizer/`` from
    ``random_codec.write_random_speech_tokenizer`` unless other writers are given;
    ``eos_scale`` scales the codec head's EOS row (random weights rarely emit EOS; a larger
    scale makes sampled runs end within tens of frames).

    Raises ModelNotFound for an unknown ``model_id``.
    """
    cfg = registry.config(model_id, tiny)
    codec = registry.codec_config(tiny)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (talker_writer or _default_talker_writer(eos_scale))(out, cfg, seed)
    (codec_writer or _default_codec_writer())(out / "speech_tokenizer", codec, seed)
    write_tokenizer_files(out)
    return out
