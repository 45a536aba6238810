"""Official side of ``vocalis reference export --model <Qwen3-TTS>``.

This file runs as a script under the interpreter of the virtual environment that holds the
official ``qwen-tts==0.1.1`` package (``VOCALIS_QWEN_PYTHON``), never inside vocalis: it
imports nothing from vocalis and only the standard library before the official package.

    python qwen3_official_runner.py JOB.json

``JOB.json`` keys: ``checkpoint`` (local folder), ``out`` (fixture folder), ``method``
(``custom_voice`` | ``voice_design`` | ``voice_clone``), ``call`` (keyword arguments of the
official ``Qwen3TTSModel.generate_<method>``: ``text``, ``language``, ``speaker``,
``instruct``, ``ref_audio`` (a file path), ``ref_text``, ``x_vector_only_mode``,
``non_streaming_mode``, and generation keywords such as ``do_sample`` or
``max_new_tokens``), ``seed``, ``dtype`` (``float32``), ``threads``.

The model is loaded with the official ``Qwen3TTSModel.from_pretrained(checkpoint,
dtype=...)`` on CPU; ``torch.manual_seed(seed)`` is called right before ``generate_<method>``.
Wrappers on this model instance (the package files are never touched) record:

``fixture.safetensors`` (written into ``out``)
    ``prompt.prefill [1, L, H]``, ``prompt.trailing [1, N, H]``, ``prompt.tts_pad [1, 1, H]``:
    the ``inputs_embeds``, ``trailing_text_hidden`` and ``tts_pad_embed`` given to
    ``talker.generate`` (``modeling_qwen3_tts.py:2285-2291``);
    ``logits.first [1, V]`` fp32: the talker logits of the prefill's last position (first
    generation step, before any logits processor);
    ``codes [T, 16]`` int64: the generated codes (``Qwen3TTSForConditionalGeneration.generate``
    output, EOS cut, reference codes not included);
    ``text.input_ids``, ``text.instruct_ids``, ``text.ref_ids`` ``[1, n]`` int64: the official
    processor's token ids;
    ``ref.codes [R, 16]`` int64 and ``ref.xvector [H]`` (Base): ``create_voice_clone_prompt``'s
    reference codes (ICL only) and speaker embedding;
    ``decoder.output [S]`` fp32: what ``speech_tokenizer.decode`` returned (for ICL, the
    reference part included);
    ``waveform [samples]`` fp32: the ``generate_<method>`` output.
``official.json``
    versions, thread count, dtype, the method, the call, the merged generation keywords and
    ``non_streaming_mode``/``languages``/``speakers`` given to the model's ``generate``,
    sample rate, timings.

Exit status: 0 done; 3 the official package refused the input (``ValueError``; the last
stderr line is ``OFFICIAL-INPUT-ERROR: <message>``); anything else is a failure (traceback on
stderr).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def _torchaudio_stand_in() -> None:
    """The torchaudio stand-in of ``vocalis/models/qwen3/official_env.py``, run by path (this script
    runs under the official interpreter, without vocalis)."""
    import runpy

    runpy.run_path(str(Path(__file__).resolve().parents[1] / "models" / "qwen3" / "official_env.py"))["install_torchaudio_stand_in"]()


def _cpu(x):
    return x.detach().to("cpu").contiguous()


def main(job_path: str) -> int:
    t0 = time.perf_counter()
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    _torchaudio_stand_in()
    import numpy as np
    import torch
    from qwen_tts import Qwen3TTSModel
    from safetensors.torch import save_file

    torch.set_num_threads(int(job.get("threads") or 1))
    timing: dict[str, float] = {"import": round(time.perf_counter() - t0, 3)}
    out = Path(job["out"])
    out.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    tts = Qwen3TTSModel.from_pretrained(job["checkpoint"], dtype=getattr(torch, job.get("dtype", "float32")))
    timing["from_pretrained"] = round(time.perf_counter() - t, 3)
    model = tts.model
    cap: dict = {}

    # 1. the talker prompt and the first-step logits
    talker_generate = model.talker.generate

    def first_logits_hook(_module, _args, output):
        if "logits.first" not in cap:
            cap["logits.first"] = _cpu(output.logits[:, -1].float())

    def talker_generate_wrapper(*args, **kwargs):
        cap["prompt.prefill"] = _cpu(kwargs["inputs_embeds"])
        cap["prompt.trailing"] = _cpu(kwargs["trailing_text_hidden"])
        cap["prompt.tts_pad"] = _cpu(kwargs["tts_pad_embed"])
        cap["prompt.attention_mask"] = _cpu(kwargs["attention_mask"])
        handle = model.talker.register_forward_hook(first_logits_hook)
        try:
            return talker_generate(*args, **kwargs)
        finally:
            handle.remove()

    model.talker.generate = talker_generate_wrapper

    # 2. the model-level generate: token ids, merged generation keywords, generated codes
    model_generate = model.generate

    def model_generate_wrapper(*args, **kwargs):
        for name in ("input_ids", "instruct_ids", "ref_ids"):
            items = kwargs.get(name)
            if items and items[0] is not None:
                cap[f"text.{name}"] = _cpu(items[0]).to(torch.int64).reshape(1, -1)
        cap["generate_kwargs"] = {k: v for k, v in kwargs.items()
                                  if isinstance(v, (bool, int, float, str)) or v is None}
        cap["languages"] = list(kwargs.get("languages") or [])
        cap["speakers"] = list(kwargs.get("speakers") or [])
        codes_list, hidden_list = model_generate(*args, **kwargs)
        cap["codes"] = _cpu(codes_list[0]).to(torch.int64)
        return codes_list, hidden_list

    model.generate = model_generate_wrapper

    # 3. Base: the reference codes and speaker embedding built from the reference audio
    create_prompt = tts.create_voice_clone_prompt

    def create_prompt_wrapper(*args, **kwargs):
        items = create_prompt(*args, **kwargs)
        it = items[0]
        if it.ref_code is not None:
            cap["ref.codes"] = _cpu(it.ref_code).to(torch.int64)
        cap["ref.xvector"] = _cpu(it.ref_spk_embedding).reshape(-1)
        return items

    tts.create_voice_clone_prompt = create_prompt_wrapper

    # 4. the codec decode (for ICL: reference + generated codes, before the cut)
    decode = model.speech_tokenizer.decode

    def decode_wrapper(*args, **kwargs):
        wavs, sr = decode(*args, **kwargs)
        cap["decoder.output"] = torch.from_numpy(np.asarray(wavs[0], dtype=np.float32).reshape(-1).copy())
        cap["sample_rate"] = int(sr)
        return wavs, sr

    model.speech_tokenizer.decode = decode_wrapper

    call = dict(job["call"])
    method = job["method"]
    if method not in ("custom_voice", "voice_design", "voice_clone"):
        print(f"OFFICIAL-INPUT-ERROR: unknown method {method!r}", file=sys.stderr)
        return 3
    t = time.perf_counter()
    torch.manual_seed(int(job["seed"]))
    try:
        with torch.no_grad():
            wavs, sr = getattr(tts, "generate_" + method)(**call)
    except ValueError as e:
        msg = " ".join(str(e).split())
        print(f"OFFICIAL-INPUT-ERROR: {msg}", file=sys.stderr)
        return 3
    timing["generate"] = round(time.perf_counter() - t, 3)
    cap["waveform"] = torch.from_numpy(np.asarray(wavs[0], dtype=np.float32).reshape(-1).copy())

    tensors = {k: v.contiguous() for k, v in cap.items() if isinstance(v, torch.Tensor)}
    save_file(tensors, str(out / "fixture.safetensors"))
    from importlib.metadata import version

    meta = {
        "versions": {"qwen_tts": version("qwen-tts"), "transformers": version("transformers"),
                     "torch": torch.__version__, "python": sys.version.split()[0]},
        "torch_num_threads": torch.get_num_threads(),
        "dtype": job.get("dtype", "float32"),
        "checkpoint": job["checkpoint"],
        "method": method,
        "call": call,
        "seed": int(job["seed"]),
        "generate_kwargs": cap.get("generate_kwargs", {}),
        "languages": cap.get("languages", []),
        "speakers": cap.get("speakers", []),
        "tts_model_type": model.tts_model_type,
        "tts_model_size": model.tts_model_size,
        "sample_rate": int(sr),
        "tensors": sorted(tensors),
        "timing": {**timing, "total": round(time.perf_counter() - t0, 3)},
    }
    (out / "official.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: qwen3_official_runner.py JOB.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
