"""Official processor token ids. argv: CHECKPOINT_DIR TEXTS_JSON (a list of strings).

Loads the processor as ``Qwen3TTSModel.from_pretrained`` does (qwen_tts/inference/
qwen3_tts_model.py:108-118) and tokenizes each text as ``_tokenize_texts`` (processor(text=...,
return_tensors="pt", padding=True)). Also returns the ids without ``fix_mistral_regex``.
"""

import json
import sys

import _official
from _official import save, timed

with timed("import"):
    from transformers import AutoConfig, AutoModel, AutoProcessor

    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration, Qwen3TTSProcessor

ckpt, texts_path = sys.argv[1], sys.argv[2]
texts = json.load(open(texts_path, encoding="utf-8"))
AutoConfig.register("qwen3_tts", Qwen3TTSConfig)
AutoModel.register(Qwen3TTSConfig, Qwen3TTSForConditionalGeneration)
AutoProcessor.register(Qwen3TTSConfig, Qwen3TTSProcessor)
with timed("processor_from_pretrained"):
    processor = AutoProcessor.from_pretrained(ckpt, fix_mistral_regex=True)
plain = AutoProcessor.from_pretrained(ckpt)
with timed("tokenize"):
    ids = [processor(text=t, return_tensors="pt", padding=True)["input_ids"][0].tolist() for t in texts]
plain_ids = [plain(text=t, return_tensors="pt", padding=True)["input_ids"][0].tolist() for t in texts]
save({"ids": ids, "plain_ids": plain_ids, "tokenizer_class": type(processor.tokenizer).__name__,
      "fix_mistral_regex": bool(getattr(processor.tokenizer, "fix_mistral_regex", False)),
      "vocab_size": processor.tokenizer.vocab_size, "len": len(processor.tokenizer)})
