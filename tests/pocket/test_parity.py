"""Parity with the official pocket-tts 4.0.1 package, run side by side on the same
random-weight checkpoint, text, voice audio and seed — for every released config.

What must match: the prepared text and token ids of every chunk, the voice state
(KV cache after the voice prompt) within 1e-5, the number of samples (hence frames),
and the waveform (cosine similarity > 0.99999).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import vocalis
from vocalis.models.pocket import registry

pocket_tts = pytest.importorskip("pocket_tts")
from pocket_tts import TTSModel  # noqa: E402
from pocket_tts.models.text_chunking import (  # noqa: E402
    prepare_text_prompt,
    split_into_best_sentences,
)

HARD_TEXT = (
    "Dr. Smith paid $3.50 for 2.5 kg of apples at 9:30 a.m. yesterday; it wasn\u2019t cheap.\n"
    "\u201cReally?\u201d she asked \u2014 and he said: \u2018yes, it\u2019s true\u2019 (mostly) "
    "- or so the U.S. report claims.\r\n"
    "Then, without any warning at all, the long sentence kept going, and going, with commas, "
    "clauses, asides, and digressions, until it finally had to end somewhere near here!"
)
SEED = 1234
KEEP = {"english", "english_2026-01", "english_2m_2026-10", "english_18m_2026-10"}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def official_chunks(off: TTSModel, text: str, max_tokens: int = 50) -> list[tuple[str, list[int]]]:
    """Prepared chunk texts and token ids exactly as the official generate path computes them."""
    tok = off.flow_lm.conditioner.tokenizer
    chunks = split_into_best_sentences(
        tok, text, max_tokens, off.pad_with_spaces_for_short_inputs,
        remove_semicolons=off.remove_semicolons,
        append_terminal_punctuation=off.append_terminal_punctuation,
        capitalize_first_letter=off.capitalize_first_letter,
        replace_characters=off.replace_characters)
    out = []
    for chunk in chunks:
        prepared, _ = prepare_text_prompt(
            chunk, off.pad_with_spaces_for_short_inputs, off.remove_semicolons,
            off.append_terminal_punctuation, off.capitalize_first_letter, off.replace_characters)
        out.append((prepared, off.flow_lm.conditioner.prepare(prepared)[0].tolist()))
    return out


def official_voice_kv(state: dict, layers: int) -> list[torch.Tensor]:
    return [state[f"transformer.layers.{i}.self_attn"]["cache"] for i in range(layers)]


def assert_same_audio(ref: np.ndarray, mine: np.ndarray) -> None:
    assert ref.shape == mine.shape, f"sample counts differ: official {ref.shape}, vocalis {mine.shape}"
    assert ref.shape[0] % 1920 == 0
    assert np.isfinite(mine).all()
    c = cosine(ref, mine)
    assert c > 0.99999, f"waveform cosine {c}"


@pytest.mark.slow
@pytest.mark.parametrize("config", registry.config_names())
def test_every_config_matches_official(config, checkpoints, voice_files):
    ckpt = checkpoints.get(config)
    yaml = str(ckpt / "config.yaml")
    tts = None
    try:
        tts = vocalis.load(yaml)
        off = TTSModel.load_model(config=yaml)
        # text: same chunks, same prepared texts, same token ids
        mine_chunks = [(t, ids) for t, ids, _ in tts.model.chunk_text(HARD_TEXT)]
        assert len(mine_chunks) >= 2
        assert mine_chunks == official_chunks(off, HARD_TEXT)

        # voice state from 24 kHz mono audio
        wav = voice_files["24k_mono_pcm16.wav"]
        voice = tts.voice(str(wav))
        off_state = off.get_state_for_audio_prompt(wav)
        layers = tts.model.config.flow_lm.transformer.num_layers
        for mine_kv, ref_kv in zip(voice.state.kv, official_voice_kv(off_state, layers)):
            assert mine_kv.shape == ref_kv.shape
            assert (mine_kv - ref_kv).abs().max().item() <= 1e-5

        # seeded generation
        torch.manual_seed(SEED)
        ref = off.generate_audio(off_state, HARD_TEXT).numpy()
        audio = tts.synthesize(HARD_TEXT, voice=voice, seed=SEED)
        assert audio.sample_rate == off.sample_rate == 24000
        assert_same_audio(ref, audio.samples)
        assert sum(c["frames"] for c in audio.chunks) * 1920 == ref.shape[0]
    finally:
        if tts is not None:
            tts.close()
        if config not in KEEP:  # free the disk; other tests reuse only these
            checkpoints.drop(config)


@pytest.mark.parametrize("config", ["english_2m_2026-10", "english_2026-01", "english"])
@pytest.mark.parametrize("voice_name", ["44k_stereo_pcm16.wav", "16k_mono.flac",
                                        "48k_6ch_float.wav", "22k_stereo_pcm24.wav",
                                        "8k_mono_u8.wav", "32k_stereo.ogg"])
def test_voice_state_from_other_rates_and_channels(config, voice_name, checkpoints, voice_files,
                                                   official_models):
    tts, off = official_models(config)
    path = voice_files[voice_name]
    voice = tts.voice(str(path))
    if voice_name.endswith("float.wav"):
        # The official reader (stdlib `wave`) cannot open float WAV files; give it the samples
        # read by soundfile, resampled by its own convert_audio (vocalis reads them directly).
        import soundfile as sf
        from pocket_tts.data.audio_utils import convert_audio

        data, rate = sf.read(str(path), dtype="float32")
        samples = torch.from_numpy(data.mean(axis=1))[None]
        path = convert_audio(samples, rate, 24000, 1)
    ref = official_voice_kv(off.get_state_for_audio_prompt(path), len(voice.state.kv))
    for mine_kv, ref_kv in zip(voice.state.kv, ref):
        assert mine_kv.shape == ref_kv.shape
        assert (mine_kv - ref_kv).abs().max().item() <= 1e-5


@pytest.fixture(scope="module")
def official_models(checkpoints):
    cache: dict = {}

    def get(config: str):
        if config not in cache:
            yaml = str(checkpoints.get(config) / "config.yaml")
            cache[config] = (vocalis.load(yaml), TTSModel.load_model(config=yaml))
        return cache[config]

    return get


SAMPLING_CASES = [
    # (config, vocalis sampling options, official attributes)
    ("english", dict(temperature=0.7), dict(temp=0.7)),
    ("english", dict(sampler_decode_steps=3), dict(sampler_decode_steps=3)),
    ("english", dict(noise_clamp=0.5), dict(noise_clamp=0.5)),
    ("english", dict(eos_threshold=100.0), dict(eos_threshold=100.0)),  # no EOS: full length
    ("english_2m_2026-10", dict(eos_threshold=100.0), dict(eos_threshold=100.0)),
    ("english_18m_2026-10", dict(temperature=0.0), dict(temp=0.0)),
]


@pytest.mark.parametrize("config,options,official_attrs", SAMPLING_CASES)
def test_sampling_options_match_official(config, options, official_attrs, official_models,
                                         voice_files):
    tts, off = official_models(config)
    wav = voice_files["24k_mono_pcm16.wav"]
    text = "Short one. " + HARD_TEXT.split("\n")[0]
    saved = {k: getattr(off, k) for k in official_attrs}
    try:
        for k, v in official_attrs.items():
            setattr(off, k, v)
        state = off.get_state_for_audio_prompt(wav)
        torch.manual_seed(SEED)
        ref = off.generate_audio(state, text).numpy()
    finally:
        for k, v in saved.items():
            setattr(off, k, v)
    audio = tts.synthesize(text, voice=str(wav), seed=SEED, **options)
    assert_same_audio(ref, audio.samples)


def test_frames_after_eos_and_max_tokens_match_official(official_models, voice_files):
    tts, off = official_models("english_2m_2026-10")
    wav = voice_files["24k_mono_pcm16.wav"]
    state = off.get_state_for_audio_prompt(wav)
    for fae, max_tokens in ((0, 50), (4, 12)):
        torch.manual_seed(SEED)
        ref = off.generate_audio(state, HARD_TEXT, max_tokens=max_tokens,
                                 frames_after_eos=fae).numpy()
        audio = tts.synthesize(HARD_TEXT, voice=str(wav), seed=SEED, frames_after_eos=fae,
                               max_tokens=max_tokens)
        assert_same_audio(ref, audio.samples)


def test_stream_concatenates_to_synthesize(official_models, voice_files):
    tts, _ = official_models("english_2m_2026-10")
    wav = str(voice_files["24k_mono_pcm16.wav"])
    chunks = list(tts.stream(HARD_TEXT, voice=wav, seed=7))
    assert all(c.dtype == np.float32 and c.ndim == 1 for c in chunks)
    one_shot = tts.synthesize(HARD_TEXT, voice=wav, seed=7).samples
    np.testing.assert_array_equal(np.concatenate(chunks), one_shot)


def test_voice_files_interchange_with_official(official_models, voice_files, tmp_path):
    from pocket_tts.models.model_state import export_model_state

    tts, off = official_models("english")
    wav = voice_files["44k_stereo_pcm16.wav"]
    # vocalis -> official
    mine_file = tmp_path / "vocalis_voice.safetensors"
    tts.voice(str(wav)).save(mine_file)
    off_state = off.get_state_for_audio_prompt(str(mine_file))
    torch.manual_seed(SEED)
    ref = off.generate_audio(off_state, "Voice files move both ways.").numpy()
    mine = tts.synthesize("Voice files move both ways.", voice=str(mine_file), seed=SEED).samples
    assert_same_audio(ref, mine)
    # official -> vocalis
    off_file = tmp_path / "official_voice.safetensors"
    export_model_state(off.get_state_for_audio_prompt(wav, truncate=True), off_file)
    loaded = tts.voice(str(off_file))
    direct = tts.voice(str(wav))
    for a, b in zip(loaded.state.kv, direct.state.kv):
        assert (a - b).abs().max().item() <= 1e-5
    torch.manual_seed(SEED + 1)
    ref = off.generate_audio(off.get_state_for_audio_prompt(str(off_file)), "And back.").numpy()
    mine = tts.synthesize("And back.", voice=loaded, seed=SEED + 1).samples
    assert_same_audio(ref, mine)


def test_int8_quantized_matches_official_quantize(checkpoints, voice_files):
    """Opt-in int8 (both sides quantize the same FlowLM linears with torch's dynamic int8)."""
    yaml = str(checkpoints.get("english_2m_2026-10") / "config.yaml")
    tts = vocalis.load(yaml, quantize=True)
    off = TTSModel.load_model(config=yaml, quantize=True)
    wav = voice_files["24k_mono_pcm16.wav"]
    state = off.get_state_for_audio_prompt(wav)
    torch.manual_seed(SEED)
    ref = off.generate_audio(state, HARD_TEXT).numpy()
    mine = tts.synthesize(HARD_TEXT, voice=str(wav), seed=SEED).samples
    tts.close()
    assert ref.shape == mine.shape
    assert cosine(ref, mine) > 0.999


def test_own_float32_kernels_match_official(checkpoints, voice_files, request):
    """Our float32 kernels, as tuning may choose them on the default path: the FlowLM's
    linears (``flow_linears=vocalis``: bfloat16-held weights, the prompt passes by the GEMM,
    the steps by the dot-product kernel), the codec transformer's linears (its GEMM:
    ``codec_linears=vocalis``), the codec's ELUs (``codec_elu=vocalis``), its last
    convolution by matrix product (``codec_out_conv=matmul``), every transformer's GELU
    (``gelu=vocalis``) and, in a second model, the SEANet decoder's blocks by one kernel each
    (``codec_seanet=vocalis``), on the real-size ``english`` (products of 1024 and 4096
    values, past the GEMM's blocks of 512): the same audio as the official package (same
    length, cosine > 0.99999)."""
    request.getfixturevalue("built_kernels")  # skips where they cannot be built
    yaml = str(checkpoints.get("english") / "config.yaml")
    own = "fixed,flow_linears=vocalis,codec_linears=vocalis,codec_elu=vocalis,gelu=vocalis"
    tts = vocalis.load(yaml, tuning=own + ",codec_out_conv=matmul")
    fused = vocalis.load(yaml, tuning=own + ",codec_seanet=vocalis")
    off = TTSModel.load_model(config=yaml)
    try:
        assert len(tts.model.chunk_text(HARD_TEXT)[0][1]) >= 16  # a prompt pass by the GEMM
        wav = voice_files["24k_mono_pcm16.wav"]
        state = off.get_state_for_audio_prompt(wav)
        torch.manual_seed(SEED)
        ref = off.generate_audio(state, HARD_TEXT).numpy()
        mine = tts.synthesize(HARD_TEXT, voice=str(wav), seed=SEED).samples
        blocks = fused.synthesize(HARD_TEXT, voice=str(wav), seed=SEED).samples
    finally:
        tts.close()
        fused.close()
    assert fused.model.mimi.decoder.fused and not tts.model.mimi.decoder.fused
    assert_same_audio(ref, mine)
    assert_same_audio(ref, blocks)


@pytest.mark.parametrize("config", ["english", "english_7m_2026-10"])
def test_exact_mode_is_bit_identical_for_a_lone_request(config, checkpoints, voice_files):
    """exact=True keeps PyTorch's default kernels: the voice state and every generated
    latent equal the official ones bit for bit; the waveform differs only by the codec's
    frame grouping (the official decoder decodes whatever frames have queued up at once)."""
    yaml = str(checkpoints.get(config) / "config.yaml")
    tts = vocalis.load(yaml, exact=True)
    off = TTSModel.load_model(config=yaml, eos_threshold=100.0)
    wav = voice_files["24k_mono_pcm16.wav"]
    state = off.get_state_for_audio_prompt(wav)
    voice = tts.voice(str(wav))
    for mine_kv, ref_kv in zip(voice.state.kv, official_voice_kv(state, len(voice.state.kv))):
        assert torch.equal(mine_kv, ref_kv)
    text = HARD_TEXT.split("\n")[0]
    torch.manual_seed(SEED)
    ref = off.generate_audio(state, text).numpy()
    mine = tts.synthesize(text, voice=voice, seed=SEED, eos_threshold=100.0).samples
    tts.close()
    assert ref.shape == mine.shape
    assert np.abs(ref - mine).max() < 1e-6


def test_cli_voice_export_equals_official_export(checkpoints, voice_files, tmp_path):
    """``vocalis voices export`` writes the official package's voice file for the same audio,
    tensor for tensor and bit for bit (it loads with the default kernels)."""
    import safetensors.torch
    from pocket_tts.models.model_state import export_model_state

    from vocalis import cli

    d = checkpoints.get("english_2m_2026-10")
    wav = voice_files["44k_stereo_pcm16.wav"]
    mine = tmp_path / "vocalis.safetensors"
    assert cli.main(["voices", "export", str(wav), str(mine), "--model", str(d / "config.yaml"),
                     "-q"]) == 0
    off = TTSModel.load_model(config=str(d / "config.yaml"))
    theirs = tmp_path / "official.safetensors"
    export_model_state(off.get_state_for_audio_prompt(wav, truncate=True), theirs)
    a, b = safetensors.torch.load_file(mine), safetensors.torch.load_file(theirs)
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].shape == b[k].shape and torch.equal(a[k], b[k]), k
