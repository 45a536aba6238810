"""Qwen3-TTS 12 Hz speech tokenizer: vocalis against the official qwen-tts 0.1.1.

A random ``speech_tokenizer/`` folder is written by vocalis's writer and loaded by both
packages; the official side runs in its own interpreter (``VOCALIS_QWEN_PYTHON``) through
``tests/qwen3/qwen_official/codec_run.py``, once per module (tests marked slow: the official imports
alone take half a minute on a loaded 2-core machine).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from vocalis.errors import CheckpointError, InputError, ModelNotFound
from vocalis.models.qwen3.codec import SpeechDecoder, SpeechTokenizerConfig, load_speech_decoder
from vocalis.models.qwen3.codec_encoder import SpeechEncoder, load_speech_encoder
from vocalis.models.qwen3.random_codec import (
    REAL_CONFIG,
    TINY_SPEAKER_CONFIG,
    random_speaker_encoder_tensors,
    tiny_config,
    write_random_speech_tokenizer,
)

QWEN_PY = os.environ.get("VOCALIS_QWEN_PYTHON", "/work/.venv-qwen/bin/python")
SCRIPT = Path(__file__).parent / "qwen_official" / "codec_run.py"
LENGTHS = (1, 7, 80, 350)
# Same math over different sequence lengths or batch sizes agrees to float rounding only
# (measured 2e-6 to 3e-6 max abs on waveforms of peak 1.0; see the streaming tests).
TOL = 1e-5


def run_official(tmp: Path, jobs: dict[str, dict]) -> dict[str, tuple[dict, dict]]:
    """Run ``codec_run.py`` once in the official package's interpreter over named jobs
    (``{"op", "tokenizer", "inputs": dict of arrays, ...}``) -> name: (summary, outputs)."""
    if not Path(QWEN_PY).is_file():
        pytest.fail(f"the official qwen-tts interpreter {QWEN_PY} does not exist: build the "
                    "virtual environment with `bash scripts/qwen_official_venv.sh .venv-qwen` "
                    "(python 3.11, torch CPU, qwen-tts==0.1.1) and set VOCALIS_QWEN_PYTHON")
    tmp.mkdir(parents=True, exist_ok=True)
    specs = []
    for name, job in jobs.items():
        spec = {**job, "inputs": str(tmp / f"{name}_in.npz"), "output": str(tmp / f"{name}_out.npz")}
        spec["tokenizer"] = str(job.get("tokenizer", tmp))
        np.savez(spec["inputs"], **job.get("inputs", {}))
        specs.append(spec)
    (tmp / "jobs.json").write_text(json.dumps({"threads": 1, "jobs": specs}))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([QWEN_PY, str(SCRIPT), str(tmp / "jobs.json")], capture_output=True,
                          text=True, timeout=1800, env=env)
    if proc.returncode != 0:
        pytest.fail(f"official run failed:\n{proc.stderr[-3000:]}")
    summaries = json.loads(proc.stdout.strip().splitlines()[-1])
    return {name: (summary, dict(np.load(spec["output"])) if summary["op"] != "shapes" else {})
            for name, spec, summary in zip(jobs, specs, summaries)}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("qwen3_codec") / "speech_tokenizer"
    write_random_speech_tokenizer(d, tiny_config(), seed=0)
    return d


@pytest.fixture(scope="module", params=["default", "packed"])
def decoder(tokenizer_dir, request) -> SpeechDecoder:
    """The decoder with PyTorch's default kernels, and with oneDNN-packed weights (the
    engine's choice where it measures faster): every test holds for both."""
    torch.set_num_threads(1)
    dec = load_speech_decoder(tokenizer_dir)
    dec.pack(request.param == "packed")
    assert dec.packed == (request.param == "packed")
    return dec


@pytest.fixture(scope="module")
def codes() -> dict[int, torch.Tensor]:
    """Random codes ``[16, T]`` per length (codebook values 0..2047)."""
    g = torch.Generator().manual_seed(7)
    return {t: torch.randint(0, 2048, (16, t), generator=g) for t in LENGTHS}


@pytest.fixture(scope="module")
def wavs() -> list[np.ndarray]:
    """Voice-like 24 kHz test signals, lengths not multiples of a frame."""
    from conftest import synthetic_voice

    return [synthetic_voice(1.3, 24000, seed=2)[:, 0], synthetic_voice(0.55, 24000, seed=4)[:, 0]]


@pytest.fixture(scope="module")
def speaker_tensors() -> dict[str, torch.Tensor]:
    return random_speaker_encoder_tensors(TINY_SPEAKER_CONFIG, seed=5, prefix="")


@pytest.fixture(scope="module")
def official(tokenizer_dir, codes, wavs, speaker_tensors, tmp_path_factory):
    """Every official computation of this module, in one run of the official interpreter
    (its imports take most of the time)."""
    from safetensors.torch import save_file

    tmp = tmp_path_factory.mktemp("official")
    save_file(speaker_tensors, str(tmp / "spk.safetensors"))
    for name, cfg in (("real", REAL_CONFIG), ("tiny", tiny_config())):
        (tmp / name).mkdir()
        (tmp / name / "config.json").write_text(json.dumps(cfg))
    return run_official(tmp, {
        "decode": {"op": "decode", "tokenizer": tokenizer_dir,
                   "inputs": {f"codes_{i}": codes[t].T.numpy() for i, t in enumerate(LENGTHS)}},
        "encode": {"op": "encode", "tokenizer": tokenizer_dir,
                   "inputs": {f"wav_{i}": w for i, w in enumerate(wavs)}},
        "speaker": {"op": "speaker", "speaker_config": TINY_SPEAKER_CONFIG,
                    "weights": str(tmp / "spk.safetensors"),
                    "inputs": {f"wav_{i}": w for i, w in enumerate(wavs)}},
        "shapes_real": {"op": "shapes", "tokenizer": tmp / "real"},
        "shapes_tiny": {"op": "shapes", "tokenizer": tmp / "tiny"},
    })


@pytest.fixture(scope="module")
def official_decode(official):
    return official["decode"]


@pytest.mark.slow
def test_official_loads_the_random_tokenizer(official_decode):
    summary, _ = official_decode
    assert summary["missing"] == [] and summary["unexpected"] == []
    assert summary["all_equal"] and summary["dtype"] == "torch.float32"
    assert summary["sr"] == 24000


@pytest.mark.slow
@pytest.mark.parametrize("i,t", list(enumerate(LENGTHS)))
def test_decode_matches_official(decoder, codes, official_decode, i, t):
    _, out = official_decode
    ours = decoder.decode(codes[t][None])[0].numpy()
    ref = out[f"single_{i}"]
    assert ours.shape == ref.shape == (t * 1920,)
    assert np.isfinite(ours).all() and 0.01 < ours.std() < 0.9  # neither silent nor clipped
    cos, diff = cosine(ours, ref), float(np.abs(ours - ref).max())
    print(f"T={t}: cosine {cos:.9f}, max abs diff {diff:.2e}")
    assert cos > 0.99999, (cos, diff)


@pytest.mark.slow
def test_padded_batch_decode_matches_official(decoder, codes, official_decode):
    """The official pads a batch with -1 and cuts each row to its frames (M:1012-1017)."""
    _, out = official_decode
    batch = torch.full((len(LENGTHS), 16, max(LENGTHS)), -1, dtype=torch.long)
    for i, t in enumerate(LENGTHS):
        batch[i, :, :t] = codes[t]
    wav = decoder.decode(batch)
    for i, t in enumerate(LENGTHS):
        ref = out[f"batch_{i}"]
        ours = wav[i, : t * 1920].numpy()
        assert ours.shape == ref.shape
        assert cosine(ours, ref) > 0.99999


def test_full_state_equals_chunked_up_to_300_frames_only(decoder, codes):
    c = codes[350][None]
    chunked, full = decoder.decode(c), decoder.decode(c, full_state=True)
    head = 300 * 1920
    # the first chunk is the same pass over 300 instead of 350 frames: only the matmul
    # and conv shapes differ (float rounding)
    diff = float((chunked[:, :head] - full[:, :head]).abs().max())
    print(f"300 vs 350 frames, first 300: max abs diff {diff:.2e}")
    assert diff <= TOL
    assert (chunked[:, head:] - full[:, head:]).abs().max() > 1e-5  # chunk 2 restarts


@pytest.mark.parametrize("step", [1, 3, 12])
def test_streaming_concatenates_to_full_state_decode(decoder, codes, step):
    c = codes[80][None]  # 80 frames: past the 72-frame attention window
    full = decoder.decode(c, full_state=True)
    state = decoder.new_state(1, chunked=False)
    parts = [decoder.stream(state, c[..., i:i + step]) for i in range(0, 80, step)]
    assert all(p.shape[-1] == min(step, 80 - i) * 1920 for i, p in zip(range(0, 80, step), parts))
    streamed = torch.cat(parts, dim=-1)
    diff = float((streamed - full).abs().max())
    print(f"chunks of {step}: max abs diff to one-shot {diff:.2e}")
    # not bit-equal: the same ops over shorter sequences round differently in the convs and
    # matmuls (about 4e-7 relative after the transformer); the tiny random decoder amplifies
    # that to a few 1e-6 at the output (peak 1.0)
    assert diff <= TOL


@pytest.mark.slow
def test_chunked_streaming_equals_official_decode_over_300(decoder, codes, official_decode):
    """A default (chunked) state replays the official 300/25 chunking while streaming."""
    c = codes[350][None]
    state = decoder.new_state(1)
    streamed = torch.cat([decoder.stream(state, c[..., i:i + 13]) for i in range(0, 350, 13)], -1)
    assert float((streamed - decoder.decode(c)).abs().max()) <= TOL
    assert cosine(streamed[0].numpy(), official_decode[1]["single_3"]) > 0.99999


def _alone(decoder, c, history, chunked):
    state = decoder.new_state(1, chunked=chunked)
    if history:
        decoder.stream(state, c[None, :, :history])
    return state


@pytest.mark.parametrize("chunked,history", [(False, (0, 5, 77)), (True, (270, 290, 3))])
def test_batched_streaming_rows_equal_each_row_alone(decoder, chunked, history):
    """Three rows at different positions decode 15 frames in one call; each row equals that
    row decoded alone (chunked: the rows cross the 275 and 300 chunk events at different
    offsets within the call)."""
    g = torch.Generator().manual_seed(3)
    cs = [torch.randint(0, 2048, (16, h + 15), generator=g) for h in history]
    state = decoder.new_state(3, chunked=chunked)
    for r, (h, c) in enumerate(zip(history, cs)):
        if h:
            decoder.stream(state, c[None, :, :h], rows=torch.tensor([r]))
    new = torch.stack([c[:, h:] for h, c in zip(history, cs)])
    batched = decoder.stream(state, new)
    for r, (h, c) in enumerate(zip(history, cs)):
        solo = decoder.stream(_alone(decoder, c, h, chunked), c[None, :, h:])
        diff = float((batched[r] - solo[0]).abs().max())
        assert diff <= TOL, (r, diff)
    assert state.frames.tolist() == [h + 15 for h in history]


def test_pack_and_unpack(tokenizer_dir, codes):
    """Packing swaps the kernels (audio equal to float rounding); unpacking restores the
    loaded decoder bit for bit; only float32 weights pack."""
    from vocalis.models.packed import PackedLinear
    from vocalis.models.qwen3.codec import CausalConv, CausalTransConv

    plain, dec = load_speech_decoder(tokenizer_dir), load_speech_decoder(tokenizer_dir)
    c = codes[7][None]
    want = plain.stream(plain.new_state(1), c)
    dec.pack(True)
    convs = [m for m in dec.modules() if isinstance(m, (CausalConv, CausalTransConv))]
    assert all(m.packed is not None for m in convs if m.conv.groups == 1)
    assert sum(isinstance(m, PackedLinear) for m in dec.modules()) == 7 * 2 + 2 * 2 + 2
    packed = dec.stream(dec.new_state(1), c)
    assert float((packed - want).abs().max()) <= TOL
    dec.pack(False)
    assert not any(isinstance(m, PackedLinear) for m in dec.modules())
    assert all(m.packed is None for m in convs)
    assert torch.equal(dec.stream(dec.new_state(1), c), want)
    with pytest.raises(ValueError, match="float32"):
        load_speech_decoder(tokenizer_dir, dtype=torch.bfloat16).pack(True)


def test_decode_rejects_bad_codes(decoder):
    with pytest.raises(InputError, match="16"):
        decoder.decode(torch.zeros(1, 8, 4, dtype=torch.long))
    with pytest.raises(InputError, match="2048"):
        decoder.decode(torch.full((1, 16, 4), 2150))
    with pytest.raises(InputError, match="integers"):
        decoder.decode(torch.zeros(1, 16, 4))
    state = decoder.new_state(2)
    one = torch.zeros(1, 16, 1, dtype=torch.long)
    with pytest.raises(InputError, match="rows"):
        decoder.stream(state, torch.zeros(3, 16, 1, dtype=torch.long))
    for rows in ([2], [-1], [0, 0]):
        with pytest.raises(InputError, match="rows"):
            decoder.stream(state, one.expand(len(rows), -1, -1), rows=torch.tensor(rows))


def test_reset_row_starts_a_new_utterance(decoder, codes):
    """A reused row decodes a new utterance as a fresh state does; the other row is unaffected."""
    c = codes[80]
    state = decoder.new_state(2)
    decoder.stream(state, torch.stack([c[:, :40], c[:, 40:]]))
    other = decoder.stream(state, c[None, :, 40:50], rows=torch.tensor([1]))
    state.reset(torch.tensor([0]))
    again = decoder.stream(state, c[None, :, :10], rows=torch.tensor([0]))
    assert state.frames.tolist() == [10, 50]
    assert float((again - decoder.decode(c[None, :, :10])).abs().max()) <= TOL
    alone = _alone(decoder, torch.cat([c[:, 40:], c[:, 40:50]], 1), 40, True)
    assert float((other - decoder.stream(alone, c[None, :, 40:50])).abs().max()) <= TOL


def test_loading_errors(tokenizer_dir, tmp_path):
    with pytest.raises(ModelNotFound, match="config.json"):
        load_speech_decoder(tmp_path / "nowhere")
    bad = tmp_path / "bad"
    shutil.copytree(tokenizer_dir, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["decoder_config"]["hidden_size"] = 48
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="wrong shape"):
        load_speech_decoder(bad)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["real", "tiny"])
def test_tensor_names_and_shapes_equal_official(official, name):
    """vocalis's modules (hence the writer) use the official names and shapes, real sizes too
    (both sides built on the meta device, no weights)."""
    cfg = REAL_CONFIG if name == "real" else tiny_config()
    summary, _ = official[f"shapes_{name}"]
    parsed = SpeechTokenizerConfig.from_dict(cfg)
    with torch.device("meta"):
        ours = {f"decoder.{k}": list(v.shape)
                for k, v in SpeechDecoder(parsed.decoder).state_dict().items()}
        ours.update({f"encoder.{k}": list(v.shape) for k, v in SpeechEncoder(
            parsed.encoder, parsed.encoder_valid_num_quantizers).state_dict().items()})
    assert ours == summary["shapes"]


@pytest.mark.slow
def test_encode_matches_official(tokenizer_dir, official, wavs):
    summary, out = official["encode"]
    assert summary["missing"] == [] and summary["unexpected"] == []
    enc = load_speech_encoder(tokenizer_dir)
    batch = enc.encode([torch.from_numpy(w) for w in wavs])
    for i, w in enumerate(wavs):
        single = enc.encode([torch.from_numpy(w)])[0]
        assert single.shape == (-(-len(w) // 1920), 16)
        assert np.array_equal(single.numpy(), out[f"single_{i}"])
        assert np.array_equal(batch[i].numpy(), out[f"batch_{i}"])
    with pytest.raises(InputError, match="non-empty"):
        enc.encode([torch.zeros(0)])


@pytest.mark.slow
def test_mel_filterbank_and_spectrogram_and_xvector_match_official(official, wavs,
                                                                   speaker_tensors):
    """Slaney filterbank equal to librosa's bit for bit, log-mel within 1e-6, x-vector within
    1e-5 of the official ``extract_speaker_embedding`` on the same random weights."""
    from vocalis.models.qwen3.speaker import (
        SpeakerEncoder,
        SpeakerEncoderConfig,
        mel_spectrogram,
        slaney_mel_filterbank,
    )

    _, out = official["speaker"]
    assert np.array_equal(slaney_mel_filterbank(), out["filterbank"])
    enc = SpeakerEncoder(SpeakerEncoderConfig.from_dict(TINY_SPEAKER_CONFIG))
    enc.load_state_dict(speaker_tensors, strict=True)
    enc.eval()
    for i, w in enumerate(wavs):
        mel = mel_spectrogram(torch.from_numpy(w)[None]).numpy()
        assert mel.shape == out[f"mel_{i}"].shape == (1, 128, len(w) // 256)
        assert np.abs(mel - out[f"mel_{i}"]).max() <= 1e-6
        xvec = enc.embed(torch.from_numpy(w)).numpy()
        ref = out[f"xvec_{i}"]
        assert xvec.shape == ref.shape == (64,) and np.abs(ref).max() > 1e-3
        diff = float(np.abs(xvec - ref).max())
        print(f"x-vector {i}: max abs diff {diff:.2e}")
        assert diff <= 1e-5
    with pytest.raises(InputError, match="384"):
        enc.embed(torch.zeros(300))


def test_icl_cut_follows_the_official_float_formula():
    """qwen3_tts_model.py:628 cuts int(ref/total * len) samples, which float rounding puts one
    below 1920 * ref for some lengths: 15/22 * 42240 = 28799.999... -> 28799."""
    from vocalis.models.qwen3.codec import icl_cut_samples

    assert icl_cut_samples(15, 22, 22 * 1920) == 28799
    assert icl_cut_samples(10, 20, 20 * 1920) == 19200
    assert icl_cut_samples(0, 0, 0) == 0
