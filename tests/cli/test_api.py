"""Public API behaviour and bad input: typed exceptions with messages that name the
problem and the fix."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import soundfile as sf
import torch
import yaml
from safetensors.torch import load_file, save_file

import vocalis
from vocalis.errors import (
    CheckpointError,
    EventsAlreadyRead,
    InputError,
    ModelNotFound,
    VoiceError,
)

SMALL = "english_2m_2026-10"


@pytest.fixture(scope="module")
def small(checkpoints):
    d = checkpoints.get(SMALL)
    return d, vocalis.load(str(d))


def test_load_by_directory_and_yaml(small):
    d, tts = small
    assert tts.sample_rate == 24000
    assert vocalis.load(str(d / "config.yaml")).config_name.endswith("config.yaml")


def test_seeded_synthesis_is_reproducible_and_seeds_differ(small):
    d, tts = small
    voice = tts.voice(str(d / "voice.wav"))
    a = tts.synthesize("Same seed, same audio.", voice=voice, seed=3, eos_threshold=100.0)
    b = tts.synthesize("Same seed, same audio.", voice=voice, seed=3, eos_threshold=100.0)
    c = tts.synthesize("Same seed, same audio.", voice=voice, seed=4, eos_threshold=100.0)
    np.testing.assert_array_equal(a.samples, b.samples)
    assert a.samples.shape == c.samples.shape  # no EOS: length fixed by the token count
    assert not np.array_equal(a.samples, c.samples)
    assert a.samples.dtype == np.float32 and a.ttfa_ms > 0 and a.wall_ms >= a.ttfa_ms


def test_the_seed_drawn_for_a_request_without_one_is_reported_and_repeats_it(small):
    d, tts = small
    voice = tts.voice(str(d / "voice.wav"))
    take = tts.synthesize("A good take.", voice=voice, eos_threshold=100.0)
    assert isinstance(take.seed, int) and 0 <= take.seed < 2**31  # RANDOM_SEED_BITS
    again = tts.synthesize("A good take.", voice=voice, seed=take.seed, eos_threshold=100.0)
    assert again.seed == take.seed
    np.testing.assert_array_equal(again.samples, take.samples)
    req = tts.submit("Hi.", voice=voice, max_frames=2)
    last = list(req.events())[-1]
    assert last.stats is req.stats and isinstance(req.stats.seed, int)
    assert req.stats.as_dict()["seed"] == req.stats.seed
    given = tts.submit("Hi.", voice=voice, seed=2**40, max_frames=2, speed=1.5)  # stretched too
    list(given.events())
    assert given.stats.seed == 2**40 and given.stats.as_dict()["seed"] == 2**40


def test_max_frames_fixes_length(small):
    d, tts = small
    audio = tts.synthesize("One chunk.", voice=str(d / "voice.wav"), seed=0, max_frames=7)
    assert audio.samples.shape[0] == 7 * 1920


def test_unicode_emoji_cjk_control_characters(small):
    d, tts = small
    audio = tts.synthesize("Hi \U0001F600 \u4f60\u597d \x07 caf\u00e9\u2026", voice=str(d / "voice.wav"),
                           seed=1)
    assert audio.samples.size > 0 and np.isfinite(audio.samples).all()


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text(small, text):
    d, tts = small
    with pytest.raises(InputError, match="empty"):
        tts.synthesize(text, voice=str(d / "voice.wav"))


@pytest.mark.parametrize("text,kind", [(None, "NoneType"), (b"Hello.", "bytes"), (["Hi."], "list")])
@pytest.mark.parametrize("call", ["synthesize", "submit", "stream"])
def test_text_that_is_no_string_names_its_type(small, text, kind, call):
    # None used to pass the family's check as "" and be called empty
    d, tts = small
    with pytest.raises(InputError, match=f"^text must be a string, got {kind}$") as e:
        result = getattr(tts, call)(text, voice=str(d / "voice.wav"))
        if call == "stream":
            next(result)  # a generator: the request is made at the first chunk
    assert e.value.param == "input"


@pytest.mark.parametrize("seed", ["12", 1.5, True, -1])
def test_bad_seed(small, seed):
    d, tts = small
    with pytest.raises(InputError, match="seed"):
        tts.synthesize("Hello.", voice=str(d / "voice.wav"), seed=seed)


@pytest.mark.parametrize("options,match", [
    (dict(temperature=-1.0), "temperature"), (dict(max_tokens=0), "max_tokens"),
    (dict(sampler_decode_steps=0), "sampler_decode_steps"), (dict(noise_clamp=0.0), "noise_clamp"),
    (dict(frames_after_eos=-2), "frames_after_eos"), (dict(speed=5.0), "speed"),
])
def test_bad_sampling_options(small, options, match):
    d, tts = small
    with pytest.raises(InputError, match=match):
        tts.synthesize("Hello.", voice=str(d / "voice.wav"), **options)


def test_every_error_class_is_exported_at_the_top_level():
    import inspect

    from vocalis import errors

    mine = {n for n, c in inspect.getmembers(errors, inspect.isclass)
            if issubclass(c, errors.VocalisError) and c.__module__ == errors.__name__}
    assert "GenerationError" in mine  # (named in docs/python-api.md)
    assert mine <= set(vocalis.__all__)
    assert all(getattr(vocalis, n) is getattr(errors, n) for n in mine)


def test_printing_a_familys_options_lists_them_with_their_ranges(small):
    _, tts = small
    text = str(tts.family.options)
    assert text.splitlines()[0] == f"Pocket TTS options ({len(tts.family.options)}):"
    assert "  temperature           a number in [0.0, 1000000]: Noise variance" in text
    assert "  max_frames            an integer in [1, 10000]: " in text
    assert "object at 0x" not in repr(tts.family.options)
    assert repr(tts.family.load_options) == "OptionSchema('Pocket TTS', ['dtype'])"
    assert "dtype  one of float32 (default 'float32'): " in str(tts.family.load_options)


def test_unknown_model_lists_known_ids():
    with pytest.raises(ModelNotFound, match="did you mean pocket-tts/english_2m_2026-10.*vocalis "
                                            "models list"):
        vocalis.load("pocket-tts/english_2m_2026_10")
    with pytest.raises(ModelNotFound, match="unknown model"):
        vocalis.load("/no/such/config.yaml")


@pytest.mark.parametrize("kwargs,match", [
    # the documented name is model_id: model= is not blamed on the default model
    ({"model": "DIR"}, r"unknown keyword model for vocalis.load \(did you mean model_id\?\)"),
    ({"model_id": "DIR", "max_bach": 4},
     r"unknown keyword max_bach for vocalis.load \(did you mean max_batch\?\); it takes "
     r"model_id, device, .*max_queue.*Pocket TTS: dtype"),
    # a Qwen3-TTS load option: refused for this Pocket TTS model, with what it takes
    ({"model_id": "DIR", "full_state_decode": True},
     r"unknown keyword full_state_decode for vocalis.load with Pocket TTS model .*Pocket TTS's "
     r"load options: dtype"),
])
def test_a_misspelled_load_keyword_names_the_closest(small, kwargs, match):
    d, _ = small
    kwargs = {k: str(d) if v == "DIR" else v for k, v in kwargs.items()}
    with pytest.raises(InputError, match=match) as e:
        vocalis.load(**kwargs)
    assert e.value.param == next(k for k in kwargs if k != "model_id")


def test_load_takes_a_path_object_and_names_a_wrong_type(small):
    d, _ = small
    assert vocalis.load(d).config_name == str(d / "config.yaml")
    assert vocalis.load(model_id=d).config_name == str(d / "config.yaml")
    for bad, kind in ((5, "int"), ([str(d)], "list")):
        with pytest.raises(InputError, match=f"model_id must be a model id or a path .*got {kind}$"):
            vocalis.load(bad)


def test_offline_without_cache_says_how_to_get_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelNotFound) as e:
        vocalis.load("pocket-tts")
    msg = str(e.value)
    assert "vocalis models download" in msg and "models random" in msg


def test_unknown_voice_name_and_missing_voice_file(small):
    d, tts = small
    with pytest.raises(VoiceError, match="no predefined voices"):
        tts.voice("nobody")  # a custom model has none: say so instead of listing them
    with pytest.raises(VoiceError, match="voice file not found"):
        tts.voice("/no/such/voice.wav")


def test_predefined_voice_refused_for_custom_weights(small):
    d, tts = small
    with pytest.raises(VoiceError, match="audio file"):
        tts.voice("alba")


@pytest.mark.parametrize("kind", ["empty", "text", "truncated", "missing"])
def test_bad_voice_files(small, tmp_path, kind):
    d, tts = small
    path = tmp_path / f"{kind}.wav"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("this is not audio at all\n" * 20)
    elif kind == "truncated":
        data = (d / "voice.wav").read_bytes()
        path.write_bytes(data[:30])
    with pytest.raises(VoiceError) as e:
        tts.voice(str(path))
    assert path.name in str(e.value)


def test_very_short_and_very_long_voices(small, tmp_path, caplog):
    d, tts = small
    short = tmp_path / "short.wav"
    sf.write(str(short), np.full(2400, 0.1, np.float32), 24000)  # 0.1 s
    assert tts.voice(str(short)).state.length >= 2
    long = tmp_path / "long.flac"
    rng = np.random.default_rng(0)
    sf.write(str(long), (0.05 * rng.standard_normal(16000 * 600)).astype(np.float32), 16000)
    with caplog.at_level("WARNING"):
        v = tts.voice(str(long))  # 10 minutes at 16 kHz
    assert "first 30 s" in caplog.text
    # 30 s -> 375 frames of 80 ms (plus BOS), however long the file
    assert v.state.length <= 30 * 12.5 + 3


def test_voice_save_refuses_a_missing_folder_and_a_name_it_could_not_load_back(small, tmp_path,
                                                                            monkeypatch):
    d, tts = small
    voice = tts.voice(str(d / "voice.wav"))
    with pytest.raises(InputError, match=f"the folder {tmp_path / 'nowhere'} does not exist") as e:
        voice.save(tmp_path / "nowhere" / "me.safetensors")  # was a raw SafetensorError (.tmpXXXX)
    assert e.value.param == "path"
    with pytest.raises(InputError, match=r"must end in \.safetensors.*save it as '.*me\.safetensors'"):
        voice.save(str(tmp_path / "me"))  # was written, then tts.voice took it for audio
    assert not list(tmp_path.iterdir())
    voice.save(str(tmp_path / "me.safetensors"))  # save -> load round-trips
    again = tts.voice(str(tmp_path / "me.safetensors"))
    a = tts.synthesize("Hi.", voice=voice, seed=1, max_frames=2).samples
    np.testing.assert_array_equal(tts.synthesize("Hi.", voice=again, seed=1, max_frames=2).samples, a)
    from safetensors import SafetensorError

    def unwritable(family, voice, path):
        raise SafetensorError(f'Error while serializing: I/O error: Permission denied (os error '
                              f'13) at path "{path.parent}/.tmpAbC123"')

    monkeypatch.setattr(type(tts.family), "save_voice", unwritable)
    with pytest.raises(InputError, match=r"cannot write voice .* \(.*Permission denied \(os error "
                                         r"13\)\): choose a writable path$") as e:
        voice.save(tmp_path / "ro.safetensors")
    assert ".tmp" not in str(e.value)


def test_voice_state_for_other_model_is_refused(small, checkpoints, tmp_path):
    d, tts = small
    other = vocalis.load(str(checkpoints.get("english_18m_2026-10")))
    f = tmp_path / "v18m.safetensors"
    other.voice(str(d / "voice.wav")).save(f)
    with pytest.raises(VoiceError, match="layers"):
        tts.voice(str(f))
    # same shapes, other weights: refused thanks to the fingerprint in the metadata
    rnd = checkpoints.root / "reseeded"
    from vocalis.models.pocket.random_checkpoint import write_random_checkpoint

    write_random_checkpoint(SMALL, rnd, seed=5)
    f2 = tmp_path / "reseeded.safetensors"
    vocalis.load(str(rnd)).voice(str(d / "voice.wav")).save(f2)
    with pytest.raises(VoiceError, match="other weights"):
        tts.voice(str(f2))
    bogus = tmp_path / "bogus.safetensors"
    save_file({"something": torch.zeros(3)}, str(bogus))
    with pytest.raises(VoiceError, match="not a Pocket TTS voice state"):
        tts.voice(str(bogus))


def test_checkpoint_missing_tensors_are_named(small, tmp_path):
    d, _ = small
    tensors = load_file(str(d / "model.safetensors"))
    del tensors["flow_lm.out_eos.weight"]
    del tensors["mimi.quantizer.output_proj.weight"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    cfg = yaml.safe_load((d / "config.yaml").read_text())
    cfg["weights_path"] = str(tmp_path / "model.safetensors")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(CheckpointError) as e:
        vocalis.load(str(tmp_path / "config.yaml"))
    assert "flow_lm.out_eos.weight" in str(e.value) and "2 missing" in str(e.value)


def test_concurrent_calls_from_threads(small):
    d, tts = small
    voice = tts.voice(str(d / "voice.wav"))
    solo = {i: tts.synthesize(f"Thread number {i}.", voice=voice, seed=i).samples for i in range(4)}
    results: dict = {}

    def run(i):
        results[i] = tts.synthesize(f"Thread number {i}.", voice=voice, seed=i).samples

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):  # batched with each other: equal up to the rounding of batched matmuls
        a, b = results[i].astype(np.float64), solo[i].astype(np.float64)
        assert a.shape == b.shape
        assert a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) >= 0.9999


@pytest.mark.parametrize("used_inside", [False, True])
def test_a_closed_model_takes_no_request(small, used_inside):
    # after its with block, a model neither answers nor starts engine threads again
    d, _ = small
    with vocalis.load(str(d)) as tts:
        if used_inside:
            tts.synthesize("Hi.", voice=str(d / "voice.wav"), seed=1, max_frames=2)
    before = {t.name for t in threading.enumerate()}
    with pytest.raises(InputError, match="closed.*load it again"):
        tts.synthesize("Hi.", voice=str(d / "voice.wav"), seed=1, max_frames=2)
    started = {t.name for t in threading.enumerate()} - before
    assert not any(name.startswith("vocalis") for name in started), started
    tts.close()  # idempotent


@pytest.mark.parametrize("speed", [1.0, 1.5])  # the engine's request, the stretched one's
def test_reading_a_requests_events_twice_raises_instead_of_hanging(small, speed):
    d, tts = small
    r = tts.submit("Hi.", voice=str(d / "voice.wav"), max_frames=2, speed=speed)
    first = list(r.events())
    assert type(first[-1]).__name__ == "Finished"
    with pytest.raises(EventsAlreadyRead, match="already read.*req.stats"):
        list(r.events(timeout=5))  # (a timeout: without the check this waited for ever)
    assert r.stats.frames == 2  # the figures stay
