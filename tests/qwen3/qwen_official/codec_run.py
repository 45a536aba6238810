"""Run the official qwen-tts 0.1.1 speech tokenizer (12 Hz) on inputs from an .npz file.

Run with the interpreter of the official package's virtual environment (``VOCALIS_QWEN_PYTHON``):

    python codec_run.py JOBS.json

JOBS.json: ``{"threads": N, "jobs": [job, ...]}``, each job
``{"op": ..., "tokenizer": DIR, "inputs": IN.npz, "output": OUT.npz}`` with op
``decode`` (inputs ``codes_0..codes_{n-1}`` of shape (T_i, 16): one official
``Qwen3TTSTokenizer.decode`` call per item and one batched call over all items),
``encode`` (inputs ``wav_0..``, float32 at 24 kHz: one batched ``encode`` call and one call
per item), ``speaker`` (inputs ``wav_0..``; ``speaker_config`` and ``weights``, a safetensors
file of ``Qwen3TTSSpeakerEncoder`` tensors: the official ``mel_spectrogram``, librosa's mel
filterbank and ``extract_speaker_embedding`` per item), ``shapes`` (the official model's tensor names and shapes, built on the meta
device from DIR/config.json, no weights). Each job writes its OUT.npz; the last stdout line is the JSON list of job summaries
(including the keys the loaded model lacks or the file has in excess, and whether every
loaded tensor equals the file's).
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch


def _stub_torchaudio() -> None:
    """The shared torchaudio stand-in (this folder is on sys.path: ``_official``)."""
    import _official  # noqa: F401


def run_job(job: dict) -> dict:
    from qwen_tts import Qwen3TTSTokenizer

    summary: dict = {"op": job["op"]}
    out: dict = {}
    if job["op"] == "shapes":
        from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (
            Qwen3TTSTokenizerV2Config)
        from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import (
            Qwen3TTSTokenizerV2Model)

        cfg = Qwen3TTSTokenizerV2Config(**{k: v for k, v in json.load(
            open(f"{job['tokenizer']}/config.json")).items() if k not in ("architectures",
                                                                          "model_type")})
        with torch.device("meta"):
            model = Qwen3TTSTokenizerV2Model(cfg)
        summary["shapes"] = {k: list(v.shape) for k, v in model.state_dict().items()}
        return summary

    if job["op"] == "speaker":
        import librosa
        from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSSpeakerEncoderConfig
        from qwen_tts.core.models.modeling_qwen3_tts import (
            Qwen3TTSForConditionalGeneration, Qwen3TTSSpeakerEncoder, mel_spectrogram)
        from safetensors.torch import load_file

        enc = Qwen3TTSSpeakerEncoder(Qwen3TTSSpeakerEncoderConfig(**job["speaker_config"]))
        enc.load_state_dict(load_file(job["weights"]), strict=True)
        enc.eval()
        # the official method, called on a stand-in holding only what it reads
        holder = type("Holder", (), {"speaker_encoder": enc, "device": torch.device("cpu"),
                                     "dtype": torch.float32})()
        data = np.load(job["inputs"])
        out["filterbank"] = librosa.filters.mel(sr=24000, n_fft=1024, n_mels=128, fmin=0,
                                                fmax=12000)
        for i in range(len(data.files)):
            wav = data[f"wav_{i}"]
            out[f"mel_{i}"] = mel_spectrogram(torch.from_numpy(wav).unsqueeze(0), n_fft=1024,
                                              num_mels=128, sampling_rate=24000, hop_size=256,
                                              win_size=1024, fmin=0, fmax=12000).numpy()
            out[f"xvec_{i}"] = Qwen3TTSForConditionalGeneration.extract_speaker_embedding(
                holder, wav, 24000).numpy()
        np.savez(job["output"], **out)
        return summary

    tok = Qwen3TTSTokenizer.from_pretrained(job["tokenizer"])
    from safetensors.torch import load_file

    file = load_file(f"{job['tokenizer']}/model.safetensors")
    state = tok.model.state_dict()
    summary["missing"] = sorted(set(state) - set(file))
    summary["unexpected"] = sorted(set(file) - set(state))
    summary["all_equal"] = all(torch.equal(state[k].cpu(), file[k]) for k in set(file) & set(state))
    summary["dtype"] = str(tok.model.dtype)
    summary["attn"] = tok.model.config.decoder_config._attn_implementation
    data = np.load(job["inputs"])
    if job["op"] == "decode":
        items = [data[f"codes_{i}"] for i in range(len(data.files))]
        for i, c in enumerate(items):
            wavs, sr = tok.decode([{"audio_codes": c}])
            out[f"single_{i}"] = wavs[0]
        wavs, sr = tok.decode([{"audio_codes": c} for c in items])
        for i, w in enumerate(wavs):
            out[f"batch_{i}"] = w
        summary["sr"] = sr
    elif job["op"] == "encode":
        wavs = [data[f"wav_{i}"] for i in range(len(data.files))]
        enc = tok.encode(wavs, sr=24000)
        for i, c in enumerate(enc.audio_codes):
            out[f"batch_{i}"] = c.numpy()
        for i, w in enumerate(wavs):
            out[f"single_{i}"] = tok.encode(w, sr=24000).audio_codes[0].numpy()
    else:
        raise SystemExit(f"unknown op {job['op']!r}")
    np.savez(job["output"], **out)
    return summary


def main() -> None:
    spec = json.load(open(sys.argv[1]))
    torch.set_num_threads(int(spec.get("threads", 1)))
    _stub_torchaudio()
    print(json.dumps([run_job(job) for job in spec["jobs"]]))


if __name__ == "__main__":
    main()
