"""Official side of tests/qwen3/test_qwen3_talker.py; runs in the qwen-tts==0.1.1 venv.

    python talker_run.py CHECKPOINT_DIR CASES.pt RESULTS.pt [DTYPE]
    python talker_run.py --shapes CONFIGS.json OUT.pt

CHECKPOINT_DIR holds config.json, generation_config.json, model.safetensors and the test's
tokenizer.json. The official model is built by transformers' own ``from_pretrained``
(the class's override also loads ``speech_tokenizer/``, which a talker test does not need)
and driven through the official ``Qwen3TTSModel`` methods, with two stand-ins:
the processor tokenizes with the same ``tokenizers`` file as the vocalis side (tokenizer
parity is tested elsewhere), and the speech tokenizer's ``decode`` only records the codes
it is given. Each case is a dict:

- ``kind``: ``prompt`` (capture the embeddings passed to ``talker.generate``), ``codes``
  (the codes passed to decode; ``seed`` → ``torch.manual_seed`` first) or ``logits``
  (teacher-forced talker logits over the prompt plus the frames ``frames [F, 16]``);
- ``method``: ``custom_voice`` | ``voice_design`` | ``voice_clone``; ``kwargs``: passed to it;
- voice_clone: ``xvector [H]``, optional ``ref_code [T, 16]`` and ``ref_text``.
"""

from __future__ import annotations

import importlib.machinery
import json
import sys
import types
from pathlib import Path

import _official  # noqa: E402,F401  (torchaudio stand-in; this folder is on sys.path)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration  # noqa: E402
from qwen_tts.inference.qwen3_tts_model import Qwen3TTSModel, VoiceClonePromptItem  # noqa: E402

torch.set_num_threads(1)
if sys.argv[1] == "--shapes":  # --shapes CONFIGS.json OUT.pt: official state-dict shapes per config (meta device)
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig

    shapes = {}
    for name, cfg in json.loads(Path(sys.argv[2]).read_text()).items():
        with torch.device("meta"):
            m = Qwen3TTSForConditionalGeneration(Qwen3TTSConfig.from_dict(cfg))
        shapes[name] = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    torch.save(shapes, sys.argv[3])
    sys.exit(0)
ckpt, cases_path, out_path = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
dtype = getattr(torch, sys.argv[4] if len(sys.argv) > 4 else "float32")
model = super(Qwen3TTSForConditionalGeneration, Qwen3TTSForConditionalGeneration).from_pretrained(
    str(ckpt), dtype=dtype).eval()
tok = Tokenizer.from_file(str(ckpt / "tokenizer.json"))


class Processor:
    def __call__(self, text, return_tensors="pt", padding=True):
        return {"input_ids": torch.tensor([tok.encode(text).ids])}


class Stop(Exception):
    pass


CAPTURE: dict = {}


class Codec:
    def decode(self, items):
        CAPTURE["codes"] = [it["audio_codes"] for it in items]
        return [np.zeros(1, np.float32) for _ in items], 24000


def capture_prompt(**kw):
    CAPTURE.update(prefill=kw["inputs_embeds"], trailing=kw["trailing_text_hidden"], tts_pad=kw["tts_pad_embed"],
                   mask=kw["attention_mask"], kwargs={k: v for k, v in kw.items() if not torch.is_tensor(v)})
    raise Stop


model.speech_tokenizer = Codec()
wrapper = Qwen3TTSModel(model, Processor(), json.loads((ckpt / "generation_config.json").read_text()))
talker_generate = model.talker.generate


def call(case):
    kwargs = dict(case["kwargs"])
    if case["method"] == "voice_clone":
        ref = case.get("ref_code")
        kwargs["voice_clone_prompt"] = [VoiceClonePromptItem(
            ref_code=ref, ref_spk_embedding=case["xvector"], x_vector_only_mode=ref is None,
            icl_mode=ref is not None, ref_text=case.get("ref_text"))]
    return getattr(wrapper, "generate_" + case["method"])(**kwargs)


def frames_embeds(frames, trailing, tts_pad):
    """Talker inputs of teacher-forced frames, as modeling_qwen3_tts.py:1681-1691 builds them."""
    t, out = model.talker, []
    for f, ids in enumerate(frames):
        ids = ids[None]
        hid = torch.cat([t.get_input_embeddings()(ids[:, :1])] + [
            t.code_predictor.get_input_embeddings()[i](ids[:, i + 1:i + 2]) for i in range(15)], dim=1).sum(1, keepdim=True)
        out.append(hid + (trailing[:, f].unsqueeze(1) if f < trailing.shape[1] else tts_pad))
    return torch.cat(out, dim=1)


results = []
with torch.no_grad():
    for case in torch.load(cases_path, weights_only=False):
        CAPTURE.clear()
        if case["kind"] in ("prompt", "logits"):
            model.talker.generate = capture_prompt
            try:
                call(case)
            except Stop:
                pass
            model.talker.generate = talker_generate
            res = {k: CAPTURE[k] for k in ("prefill", "trailing", "tts_pad", "mask", "kwargs")}
            if case["kind"] == "logits":
                seq = torch.cat([CAPTURE["prefill"], frames_embeds(case["frames"], CAPTURE["trailing"],
                                                                     CAPTURE["tts_pad"])], dim=1)
                out = model.talker(inputs_embeds=seq, attention_mask=torch.ones(1, seq.shape[1], dtype=torch.long),
                                   use_cache=False)
                res["logits"] = out.logits
        else:
            if case.get("seed") is not None:
                torch.manual_seed(case["seed"])
            call(case)
            codes, ref = CAPTURE["codes"][0], case.get("ref_code")
            if ref is not None:  # ICL decodes cat(ref_code, codes) (inference/qwen3_tts_model.py:612-618)
                assert torch.equal(codes[:len(ref)], ref)
                codes = codes[len(ref):]
            res = {"codes": codes}
        results.append(res)
torch.save(results, out_path)
