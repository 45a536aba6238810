"""Qwen3-TTS through vocalis's engine and public API against the official qwen-tts==0.1.1.

Tiny random checkpoints (vocalis's own writers, official layout) are loaded by both sides:
vocalis with ``vocalis.load(dir, exact=True)`` and the official ``Qwen3TTSModel`` in its own
venv (tests/qwen3/qwen_official/engine_run.py, one subprocess for the module). The codes the
official ``model.generate`` returns are compared with the codes vocalis's engine generated
(``Audio.chunks[0]["codes"]``), and the waveforms (official one-shot decode vs vocalis's
streaming decoder) by length and cosine.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import vocalis
from tests.qwen3.qwen_official import run_official
from vocalis.errors import InputError, VoiceError
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

TEXT = "Hello world, this is a test of the engine."
N = 21  # max_new_tokens: 20 frames unless EOS comes first
GREEDY = dict(do_sample=False, subtalker_dosample=False)


def cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


# (checkpoint, official method, official kwargs, seed, vocalis keyword arguments)
CASES = [
    ("0.6b-customvoice", "custom_voice", dict(speaker="Ryan", language="English", max_new_tokens=N, **GREEDY), 0,
     dict(speaker="Ryan", language="English", max_new_tokens=N, greedy=True)),
    ("0.6b-customvoice", "custom_voice", dict(speaker="eric", non_streaming_mode=False, max_new_tokens=N), 7,
     dict(speaker="eric", non_streaming_mode=False, max_new_tokens=N)),
    ("1.7b-customvoice", "custom_voice", dict(speaker="vivian", language="Auto", instruct="Speak slowly.",
                                              max_new_tokens=N, top_p=0.8, temperature=1.2), 11,
     dict(speaker="Vivian", language="auto", instruct="Speak slowly.", max_new_tokens=N, top_p=0.8,
          temperature=1.2)),
    ("1.7b-voicedesign", "voice_design", dict(instruct="A deep warm voice.", language="english",
                                              max_new_tokens=N), 3,
     dict(instruct="A deep warm voice.", language="english", max_new_tokens=N)),
    ("eos-0.6b-customvoice", "custom_voice", dict(speaker="aiden", language="English", max_new_tokens=60), 5,
     dict(speaker="aiden", language="English", max_new_tokens=60)),
    ("0.6b-base", "voice_clone", dict(ref_text="A short reference sentence.", language="english",
                                      max_new_tokens=N), 13,
     dict(ref_text="A short reference sentence.", language="english", max_new_tokens=N)),
    ("1.7b-base", "voice_clone", dict(x_vector_only_mode=True, max_new_tokens=N, **GREEDY), 0,
     dict(xvector_only=True, max_new_tokens=N, greedy=True)),
]
REF_SECONDS = 2.4


def reference_audio(path):
    """A 24 kHz speech-like test signal (harmonics with a moving pitch and a syllable
    envelope, plus a little noise), saved as float WAV and .npy (the official input)."""
    import soundfile as sf

    t = np.arange(int(24000 * REF_SECONDS)) / 24000
    f0 = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / 24000
    x = sum(np.sin(k * phase) / k for k in range(1, 8)) * (0.55 + 0.45 * np.sin(2 * np.pi * 3.1 * t))
    x = 0.25 * x + 0.01 * np.random.default_rng(0).standard_normal(t.shape)
    x = x.astype(np.float32)
    sf.write(path.with_suffix(".wav"), x, 24000, subtype="FLOAT")
    np.save(path.with_suffix(".npy"), x)
    return path.with_suffix(".wav"), path.with_suffix(".npy")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3-api")
    dirs = {}
    for name in {c[0] for c in CASES}:
        eos = name.startswith("eos-")
        mid = "qwen3-tts/" + name.removeprefix("eos-")
        dirs[name] = write_random_checkpoint(mid, root / name, seed=1, tiny=True, eos_scale=3.0 if eos else 1.0)
    wav, npy = reference_audio(root / "ref")
    cases = [dict(dir=str(dirs[c[0]]), method=c[1], kwargs=dict(text=TEXT, **c[2]), seed=c[3],
                  ref_wav=str(npy) if c[1] == "voice_clone" else None) for c in CASES]
    (root / "cases.json").write_text(json.dumps(cases))
    official = run_official("engine_run.py", root / "cases.json", timeout=1200)
    models = {name: vocalis.load(str(d), exact=True, max_batch=4) for name, d in dirs.items()}
    yield dirs, official, models, wav
    for m in models.values():
        m.close()


@pytest.mark.slow  # one official subprocess for the module (~1 min on 2 cores)
@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{c[0]}-{c[1]}-{c[3]}" for c in CASES])
def test_engine_codes_and_audio_equal_official(setup, i):
    dirs, official, models, ref_wav = setup
    check_against_official(models[CASES[i][0]], official, i, ref_wav)


@pytest.mark.slow
@pytest.mark.parametrize("i", [0, 4, 5], ids=["customvoice", "eos", "base-icl"])
def test_grouped_codec_calls_keep_the_official_audio(setup, i):
    """The codec decoding 4 frames per call after the first (``codec_frames=4``; with an
    EOS that ends a group early, and after in-context reference codes)."""
    dirs, official, _, ref_wav = setup
    with vocalis.load(str(dirs[CASES[i][0]]), exact=True, tuning="fixed,codec_frames=4") as tts:
        calls = frames_per_codec_call(tts)
        check_against_official(tts, official, i, ref_wav)
    assert 4 in calls


def check_against_official(tts, official, i, ref_wav):
    """Case ``CASES[i]`` through ``tts``: codes equal to the official ones, waveform within
    cosine 0.99999 of the official one-shot decode."""
    name, method, _, seed, kw = CASES[i]
    if method == "voice_clone":
        kw = dict(kw, ref_audio=str(ref_wav))
    audio = tts.synthesize(TEXT, seed=seed, **kw)
    codes = np.array(audio.chunks[0]["codes"])
    off_codes, off_wav = official["arrays"][f"codes_{i}"], official["arrays"][f"wav_{i}"]
    assert codes.shape == off_codes.shape and codes.shape[0] > 0
    assert np.array_equal(codes, off_codes)
    assert audio.samples.shape == (1920 * codes.shape[0],)
    # In-context cloning: the official decodes reference + generated codes and cuts
    # int(ref / total * samples) from the front (float rounding can keep one sample of the
    # reference); vocalis feeds the reference codes to the streaming decoder first and drops
    # exactly their 1920 * ref frames.
    extra = off_wav.shape[0] - audio.samples.shape[0]
    assert extra == 0 or ("ref_text" in kw and extra == 1), extra
    off_wav = off_wav[extra:]
    cos, diff = cosine(audio.samples, off_wav), float(np.abs(audio.samples - off_wav).max())
    print(f"\n{name} {method} seed {seed}: {codes.shape[0]} frames, codes identical, "
          f"waveform cosine {cos:.9f}, max abs diff {diff:.2e}, official extra samples {extra}")
    assert cos > 0.99999 and diff < 1e-4
    if name.startswith("eos-"):
        assert codes.shape[0] < 59 and audio.chunks[0]["eos_step"] == codes.shape[0]


@pytest.mark.slow
def test_a_seeded_request_gives_the_same_codes_alone_and_beside_others(setup):
    """Rows at different positions, sampling with different options, admitted at different
    steps: each request's codes equal its codes alone."""
    _, _, models, _ = setup
    tts = models["0.6b-customvoice"]
    reqs = [("Hi.", dict(speaker="ryan", seed=1)),
            (TEXT, dict(speaker="serena", seed=2, temperature=1.3, top_k=10)),
            ("A longer sentence, spoken by the second speaker of the list.", dict(speaker="vivian", seed=3,
                                                                                 non_streaming_mode=False)),
            ("Short again.", dict(speaker="dylan", seed=4, greedy=True))]
    alone, together = codes_alone_and_together(tts, reqs, N)
    for a, b in zip(alone, together):
        assert a == b


@pytest.mark.slow
def test_first_audio_does_not_wait_for_the_talker_step(setup):
    """A request's first frame goes to the codec before the talker step that prepares its
    next frame: its audio arrives while that step (the family's ``finish_step``, held back
    here by a gate that only this test opens) has not run, and the audio is the same as
    without the gate."""
    _, _, models, _ = setup
    tts = models["0.6b-customvoice"]
    want = tts.synthesize(TEXT, speaker="ryan", seed=5, max_frames=6).samples
    family = tts.engine_family
    gate, held, opened = threading.Event(), threading.Event(), []
    real = family.finish_step

    def gated(batch):
        if not held.is_set():
            held.set()
            opened.append(gate.wait(60))  # False: nobody opened it (the audio waited for it)
        real(batch)

    family.finish_step = gated
    try:
        chunks = tts.stream(TEXT, speaker="ryan", seed=5, max_frames=6)
        first = next(chunks)  # (the talker step may not have been reached yet)
        assert not gate.is_set() and held.wait(60)
        gate.set()
        got = np.concatenate([first, *chunks])
    finally:
        gate.set()
        del family.finish_step
    assert opened == [True]
    assert first.shape == (1920,)
    np.testing.assert_array_equal(got, want)


def codes_alone_and_together(tts, reqs, max_new_tokens):
    """The codes of each ``(text, options)`` request run alone, then all submitted at once
    (checked to have shared a prompt pass)."""
    alone = [tts.synthesize(t, max_new_tokens=max_new_tokens, **kw).chunks[0]["codes"] for t, kw in reqs]
    handles = [tts.submit(t, max_new_tokens=max_new_tokens, **kw) for t, kw in reqs]
    together = []
    for h in handles:
        list(h.events())
        together.append(h.stats.chunks[0]["codes"])
    assert max(tts.engine.prompt_rows) > 1  # they ran together
    return alone, together


@pytest.mark.slow
def test_requests_arriving_together_share_a_padded_prompt_pass(setup):
    """Prompts of different lengths (padded after their ends) prefilled in one pass give
    each request the codes it gets alone."""
    _, _, models, _ = setup
    tts = models["0.6b-customvoice"]
    texts = ["One two three.", "One two three four.", "One, two, three, four, five.",
             "One two.", "One two three four five six.", "Two."]
    reqs = [(t, dict(speaker=s, seed=10 + i))
            for i, (t, s) in enumerate(zip(texts, ["ryan", "serena", "vivian", "dylan", "ryan", "aiden"]))]
    before = tts.engine.family.shared_prompt_passes
    alone, together = codes_alone_and_together(tts, reqs, N)
    assert tts.engine.family.shared_prompt_passes > before
    for a, b in zip(alone, together):
        assert a == b


@pytest.mark.slow
def test_a_shared_prompt_pass_into_rows_that_are_not_neighbours(setup):
    """Two requests arriving together while rows 0 and 2 still speak take rows 1 and 3:
    their padded prompt pass cannot write the batch cache in place (the path for rows side
    by side), and each still gets the codes it gets alone."""
    _, _, models, _ = setup
    tts = models["0.6b-customvoice"]
    eng = tts.engine
    pair = [("One two three four.", dict(speaker="serena", seed=21)),
            ("One, two, three.", dict(speaker="dylan", seed=22))]
    alone = [tts.synthesize(t, max_new_tokens=N, **kw).chunks[0]["codes"] for t, kw in pair]
    with eng._cond:  # admitted in one step: rows 0, 1, 2
        a = tts.submit("A long one.", speaker="ryan", seed=1, max_new_tokens=4000)
        b = tts.submit("Short.", speaker="aiden", seed=2, max_new_tokens=3)
        c = tts.submit("Another long one.", speaker="vivian", seed=3, max_new_tokens=4000)
    list(b.events())
    passes = eng.family.shared_prompt_passes
    with eng._cond:
        assert len(eng._active) == 2 and 1 not in eng._active  # b's row is free again
        handles = [tts.submit(t, max_new_tokens=N, **kw) for t, kw in pair]
    together = []
    for h in handles:
        list(h.events())
        together.append(h.stats.chunks[0]["codes"])
    for h in (a, c):
        h.cancel()
        list(h.events())
        assert h.stats.cancelled  # still speaking when the pair arrived: rows 1 and 3
    assert eng.family.shared_prompt_passes == passes + 1
    assert together == alone


def test_bad_input_is_refused_with_a_clear_message(tmp_path):
    d = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "cv", seed=2, tiny=True)
    tts = vocalis.load(str(d))
    cases = [
        (dict(text=""), InputError, "text is empty"),
        (dict(text="hi", speaker="nobody"), VoiceError, "unknown speaker 'nobody'"),
        (dict(text="hi", speaker="ryan", language="klingon"), InputError, "unknown language 'klingon'"),
        (dict(text="hi", speaker="ryan", ref_audio="x.wav"), InputError, "only Base models clone"),
        (dict(text="hi", speaker="ryan", temperature=0), InputError, "temperature must be"),
        (dict(text="hi", speaker="ryan", top_k=-1), InputError, "top_k must be"),
        (dict(text="hi", speaker="ryan", bogus=1), InputError, "unknown option bogus"),
        (dict(text="hi", speaker="ryan", max_new_tokens=0), InputError, "max_new_tokens must be"),
        (dict(text="hi", speaker="ryan", greedy="yes"), InputError, "greedy must be true or false"),
        (dict(text="Hi \ud800", speaker="ryan"), InputError, "text is not valid Unicode (a lone surrogate U+D800 at character 3)"),
        (dict(text="🎉 ...", speaker="ryan"), InputError, "nothing to speak"),
        (dict(text=b"hi", speaker="ryan"), InputError, "text must be a string, got bytes"),
        (dict(text="hi", voice="me.safetensors"), VoiceError, "its voices are the built-in speakers"),
        (dict(text="hi", voice="ryan", speaker="serena"), InputError, "give the speaker once"),
    ]
    for kw, err, msg in cases:
        text = kw.pop("text")
        with pytest.raises(err, match=None) as e:
            tts.submit(text, **kw)
        assert msg in str(e.value), (kw, str(e.value))
    assert tts.engine_status()["steps"] == 0  # nothing reached the engine
    tts.close()


def test_cli_generate_of_no_frames_says_so(tmp_path, capsys):
    """``--max-new-tokens 1`` gives no frame (HF stops before the last token's frame): the
    CLI writes an empty WAV and says there was no audio, not a TTFA of 0 ms."""
    import soundfile as sf

    from vocalis import cli

    d = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "cv", seed=2, tiny=True)
    out = tmp_path / "a.wav"
    assert cli.main(["generate", "--model", str(d), "--text", "Hi.", "--speaker", "ryan",
                     "--max-new-tokens", "1", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "no audio" in err and "TTFA" not in err, err
    wav, sr = sf.read(out, dtype="float32")
    assert sr == 24000 and wav.shape == (0,)


def test_cli_generate_writes_the_api_audio_and_refuses_bad_options(tmp_path, capsys):
    import soundfile as sf

    from vocalis import cli

    d = write_random_checkpoint("qwen3-tts/1.7b-customvoice", tmp_path / "cv17", seed=3, tiny=True)
    out = tmp_path / "a.wav"
    args = ["generate", "--model", str(d), "--text", TEXT, "--speaker", "Sohee", "--language", "korean",
            "--instruct", "Cheerfully.", "--seed", "9", "--max-new-tokens", "9", "--top-k", "20", "-o", str(out)]
    assert cli.main(args) == 0
    wav, sr = sf.read(out, dtype="float32")
    with vocalis.load(str(d)) as tts:
        ref = tts.synthesize(TEXT, speaker="sohee", language="Korean", instruct="Cheerfully.", seed=9,
                             max_new_tokens=9, top_k=20).samples
    assert sr == 24000 and wav.shape == ref.shape == (8 * 1920,)
    assert np.abs(wav - ref).max() < 1e-4  # 16-bit WAV (scale 32767, rounding)
    capsys.readouterr()
    bad = [(["--speaker", "ryan", "--eos-threshold", "1"], "unknown option --eos-threshold for Qwen3-TTS"),
           (["--speaker", "nobody"], "unknown speaker 'nobody'"),
           (["--speaker", "ryan", "--ref-audio", "x.wav"], "only Base models clone"),
           (["--speaker", "ryan", "--dtype", "float16"], "unknown dtype 'float16'")]
    for extra, msg in bad:
        out2 = tmp_path / "b.wav"
        assert cli.main(["generate", "--model", str(d), "--text", "hi", "-o", str(out2), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0], err
        assert not out2.exists()
    assert cli.main(["generate", "--text", "hi", "--speaker", "ryan", "-o", str(tmp_path / "c.wav")]) == 2
    assert "unknown option --speaker for Pocket TTS" in capsys.readouterr().err
    assert cli.main(["voices", "list", "--model", str(d)]) == 0
    listed = capsys.readouterr().out.split("\n")
    assert listed[0] == "vivian (default)" and "sohee" in listed and len(listed) == 10


def test_runaway_guard_and_idle_memory(tmp_path, caplog):
    """Random weights almost never emit EOS: the guard stops a request after
    40 + 15 x (text tokens) frames (vocalis.models.qwen3.model.guard_frames), unless the model
    was loaded exact (then only max_new_tokens - 1 bounds it), and logs a warning; a request
    that reaches a max_new_tokens it set itself gets no warning. Rows grown by a batch go
    back when the engine is idle."""
    import logging

    def warnings():
        records = {id(r): r for r in caplog.records}  # reached by one or two routes
        n = sum("did not end by itself" in r.getMessage() for r in records.values())
        caplog.clear()
        return n

    d = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "cv", seed=5, tiny=True)
    text = "Hi."
    # on the engine's own logger: the CLI's log set-up (run earlier in this process by other
    # tests) stops vocalis records from reaching the root logger
    logger = logging.getLogger("vocalis.engine.scheduler")
    logger.addHandler(caplog.handler)
    try:
        _guard_cases(d, text, warnings)
    finally:
        logger.removeHandler(caplog.handler)


def _guard_cases(d, text, warnings):
    import time

    with vocalis.load(str(d)) as tts:
        n = len(tts.model.tokenizer.encode(text))
        audio = tts.synthesize(text, speaker="ryan", seed=1)
        assert audio.chunks[0]["eos_step"] is None
        assert len(audio.chunks[0]["codes"]) == 40 + 15 * n
        assert warnings() == 1
        # asked for more than the guard allows: the guard stops it, and says so
        audio = tts.synthesize(text, speaker="ryan", seed=1, max_new_tokens=40 + 15 * n + 30)
        assert len(audio.chunks[0]["codes"]) == 40 + 15 * n and warnings() == 1
        hs = [tts.submit(text, speaker="ryan", seed=i, max_new_tokens=5) for i in range(3)]
        for h in hs:
            list(h.events())
            assert h.stats.frames == 4
        assert warnings() == 0  # the length they asked for
        deadline = time.monotonic() + 10
        while tts.engine.batch.cache.k.shape[1] > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tts.engine.batch.cache.k.shape[1] == 1
    with vocalis.load(str(d), exact=True) as tts:
        audio = tts.synthesize(text, speaker="ryan", seed=1, max_new_tokens=40 + 15 * n + 20)
        assert len(audio.chunks[0]["codes"]) == 40 + 15 * n + 19
        assert warnings() == 0


@pytest.mark.parametrize("codec_frames", [1, 4])
def test_stream_concatenates_to_the_one_shot_decode_of_its_codes(tmp_path, codec_frames):
    """Frames leave one by one through the streaming decoder; together they equal the
    one-shot decode of the same codes (the official decode path). With ``codec_frames=4``
    the codec decodes the first frame alone and then 4 frames per call."""
    import torch

    d = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "cv", seed=6, tiny=True)
    with vocalis.load(str(d), tuning=f"fixed,codec_frames={codec_frames}") as tts:
        assert tts.engine.codec_frames == codec_frames
        calls = frames_per_codec_call(tts)
        req = tts.submit(TEXT, speaker="vivian", seed=3, max_new_tokens=30)
        pieces = []
        for ev in req.events():
            if hasattr(ev, "samples"):
                pieces.append(ev.samples)
        codes = torch.tensor(req.stats.chunks[0]["codes"]).T[None]
        whole = tts.model.decoder.decode(codes)[0].numpy()
    assert len(pieces) == 29 and all(p.shape == (1920,) for p in pieces)
    assert calls == [1] + [codec_frames] * (28 // codec_frames)
    stream = np.concatenate(pieces)
    assert stream.shape == whole.shape
    assert np.abs(stream - whole).max() < 1e-5


def frames_per_codec_call(tts) -> list[int]:
    """Record the frame count of every streaming-decoder call of ``tts`` (returned list)."""
    dec, calls = tts.model.decoder, []
    inner = dec.stream

    def stream(state, codes, rows=None):
        calls.append(int(codes.shape[-1]))
        return inner(state, codes, rows)
    dec.stream = stream
    return calls


def test_grouped_codec_calls_follow_rows_cancellation_and_finishes(tmp_path):
    """codec_frames=4 beside arrivals, a cancellation and requests of different lengths:
    each request's codes equal its codes alone, its audio equals the one-shot decode of
    its codes, a cancelled stream stops and frees its row, and the engine serves on."""
    import time

    import torch

    d = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "cv", seed=8, tiny=True)
    reqs = [("Hi.", dict(speaker="ryan", seed=1, max_new_tokens=11)),
            (TEXT, dict(speaker="serena", seed=2, max_new_tokens=23)),
            ("Short again.", dict(speaker="dylan", seed=4, max_new_tokens=6))]
    with vocalis.load(str(d), tuning="fixed,codec_frames=4", max_batch=4) as tts:
        alone = [tts.synthesize(t, **kw).chunks[0]["codes"] for t, kw in reqs]
        calls = frames_per_codec_call(tts)
        long_one = tts.stream(TEXT, speaker="aiden", seed=9, max_new_tokens=200)
        next(long_one)  # its first frame, decoded alone
        handles = [tts.submit(t, **kw) for t, kw in reqs]
        got = []
        for h in handles:
            pcm = [ev.samples for ev in h.events() if hasattr(ev, "samples")]
            got.append((h.stats.chunks[0]["codes"], np.concatenate(pcm)))
        for _ in range(3):
            next(long_one)
        long_one.close()  # cancels the request
        for (codes, pcm), want in zip(got, alone):
            assert codes == want
            whole = tts.model.decoder.decode(torch.tensor(codes).T[None])[0].numpy()
            assert pcm.shape == whole.shape and np.abs(pcm - whole).max() < 1e-5
        assert max(calls) == 4 and 1 in calls  # grouped calls and lone first frames
        deadline = time.monotonic() + 10
        while tts.engine.status()["active_rows"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert tts.engine.status()["active_rows"] == 0
        assert tts.synthesize("Hi.", **reqs[0][1]).chunks[0]["codes"] == alone[0]


def test_cli_base_cloning_export_reuse_and_bad_reference_audio(tmp_path, capsys):
    """Base: --ref-audio with --ref-text (in-context) or --xvector-only; `voices export` writes
    a prompt that --voice reuses with the same audio; a prompt refused by another model size;
    bad reference audio: one line, exit 2, no output file."""
    import soundfile as sf

    from vocalis import cli

    d = write_random_checkpoint("qwen3-tts/0.6b-base", tmp_path / "b06", seed=7, tiny=True)
    d17 = write_random_checkpoint("qwen3-tts/1.7b-base", tmp_path / "b17", seed=7, tiny=True)
    ref, _ = reference_audio(tmp_path / "ref")
    common = ["--model", str(d), "--text", TEXT, "--seed", "2", "--max-new-tokens", "7", "--language", "english"]
    a = tmp_path / "a.wav"
    assert cli.main(["generate", *common, "--ref-audio", str(ref), "--ref-text", "Some words.", "-o", str(a)]) == 0
    prompt = tmp_path / "me.safetensors"
    assert cli.main(["voices", "export", str(ref), str(prompt), "--model", str(d), "--ref-text", "Some words."]) == 0
    b = tmp_path / "b.wav"
    assert cli.main(["generate", *common, "--voice", str(prompt), "-o", str(b)]) == 0
    wa, _ = sf.read(a, dtype="float32")
    wb, _ = sf.read(b, dtype="float32")
    assert wa.shape == wb.shape == (6 * 1920,) and np.array_equal(wa, wb)
    capsys.readouterr()
    silent, short, long_, corrupt = (tmp_path / n for n in ("silent.wav", "short.wav", "long.wav", "bad.wav"))
    sf.write(silent, np.zeros(48000, np.float32), 24000)
    sf.write(short, np.random.default_rng(1).standard_normal(2400).astype(np.float32) * 0.1, 24000)
    sf.write(long_, np.random.default_rng(2).standard_normal(1000 * 600).astype(np.float32) * 0.1, 1000)
    corrupt.write_bytes(b"RIFF\x10\x00\x00\x00WAVEjunkjunk")
    bad = [(["--ref-audio", str(silent), "--xvector-only"], "silent"),
           (["--ref-audio", str(short), "--xvector-only"], "too short"),
           (["--ref-audio", str(long_), "--xvector-only"], "too long"),
           (["--ref-audio", str(corrupt), "--xvector-only"], str(corrupt)),
           (["--ref-audio", str(ref)], "--ref-text"),
           (["--speaker", "ryan", "--ref-audio", str(ref), "--xvector-only"], "no built-in speakers"),
           ([], "clones a voice"),
           (["--voice", str(prompt), "--model", str(d17)], "0.6B")]
    for extra, msg in bad:
        out = tmp_path / "x.wav"
        assert cli.main(["generate", *common, *extra, "-o", str(out)]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0], (extra, err)
        assert not out.exists()
