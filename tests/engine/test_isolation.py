"""Rows are isolated: nothing one request does changes another's audio.

* Every numeric option is checked against its documented range at the boundary (API,
  server), with an error that names the option; NumPy numbers are accepted.
* NaN forced into one row's FlowLM cache or decoder state mid-stream fails that request
  alone (a ``GenerationError``); a concurrent request and the next request in the same
  row equal their solo runs.
* Property-based (hypothesis): random option values give a clear error or finite audio,
  and a concurrent seeded request is unaffected.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vocalis
from tests.engine.pocket_2m import load_2m
from vocalis.engine.types import AudioChunk, Failed, Finished
from vocalis.errors import GenerationError, InputError
from vocalis.models.pocket.layers import StreamingConv1d
from tests.engine.test_engine import cosine

TEXT = "Hello there, how are you today?"
LONG = "This request keeps talking for a while, so that another one can run beside it."


@pytest.fixture(scope="module")
def tts(checkpoints):
    t = load_2m(checkpoints, max_batch=4, max_queue=16)
    yield t
    t.close()


def events(req):
    pcm, last = [], None
    for ev in req.events(timeout=120):
        if isinstance(ev, AudioChunk):
            pcm.append(ev.samples)
        else:
            last = ev
    return (np.concatenate(pcm) if pcm else np.zeros(0, np.float32)), last


def assert_same(solo, other):
    assert other.shape == solo.shape
    assert np.isfinite(other).all()
    assert cosine(solo, other) >= 0.9999


# ----------------------------------------------------------------------------- ranges


@pytest.mark.parametrize("option,value", [
    ("temperature", 1e300), ("temperature", -0.1), ("temperature", math.inf),
    ("temperature", math.nan), ("temperature", "hot"), ("eos_threshold", math.nan),
    ("eos_threshold", 1e39), ("noise_clamp", 0.0), ("noise_clamp", -1.0),
    ("frames_after_eos", -1), ("frames_after_eos", 1.5), ("sampler_decode_steps", 0),
    ("sampler_decode_steps", 65), ("max_tokens", 0), ("max_tokens", 1001),
    ("max_frames", 10_001), ("max_frames", True), ("seed", -1), ("seed", 2**63),
])
def test_out_of_range_options_are_refused_naming_the_option(tts, option, value):
    kwargs = {option: value}
    seed = kwargs.pop("seed", 1)
    with pytest.raises(InputError) as e:
        tts.submit(TEXT, voice=tts.test_voice, seed=seed, **kwargs)
    assert e.value.param == option
    assert option in str(e.value)


def test_numpy_numbers_are_accepted_and_equal_python_ones(tts):
    a = tts.synthesize(TEXT, voice=tts.test_voice, seed=np.int64(7), temperature=np.float32(0.5),
                       max_frames=np.int32(6))
    b = tts.synthesize(TEXT, voice=tts.test_voice, seed=7, temperature=0.5, max_frames=6)
    assert np.array_equal(a.samples, b.samples)


def test_range_edges_give_finite_audio_on_every_architecture(checkpoints):
    """The largest accepted temperature and thresholds still compute in float32."""
    for config in ("english_2m_2026-10", "english_7m_2026-10", "english_18m_2026-10", "english"):
        d = checkpoints.get(config)
        with vocalis.load(str(d)) as t:
            v = t.voice(str(d / "voice.wav"))
            for opts in ({"temperature": 1e6}, {"temperature": 0.0, "noise_clamp": 1.0},
                         {"temperature": 1e6, "noise_clamp": 3.4e38},
                         {"eos_threshold": -3.4e38}, {"temperature": 1e-30}):
                a = t.synthesize(TEXT, voice=v, seed=3, max_frames=4, **opts)
                assert a.samples.size == 4 * 1920 and np.isfinite(a.samples).all(), (config, opts)


# ----------------------------------------------------------------------------- isolation


def poison_when_streaming(tts, req, target: str, after_chunks: int = 3):
    """Consume ``req`` and, after a few audio chunks, write NaN into its row's state:
    ``flow`` = its FlowLM KV cache, ``conv`` = a decoder conv state, ``ring`` = the
    decoder's ring KV cache. Returns (samples, last event).

    The NaN is written by the engine's own threads, at the start of the row's next FlowLM
    step (``flow``, the model thread) or codec stage (the codec thread; not at a new chunk's
    first frame, which starts from a fresh state). Written from this thread it raced in CI:
    the codec states could be overwritten by a stage's result, and the FlowLM cache could
    be written after the failed row had been cleared, so that the row's next request read
    NaN."""
    batch = tts.engine.batch
    job = next(j for j in tts.engine._active.values() if j.req is req) if target else None
    owner, stage = {"conv": (batch, "decode_tail"), "ring": (batch, "decode_head"),
                    "flow": (tts.engine.family, "step")}[target]
    armed = threading.Event()
    original = getattr(owner, stage)

    def hooked(*args):
        if target == "flow":
            jobs = args[1]
            if armed.is_set() and job in jobs:
                armed.clear()
                poison(batch, tts, target, job.row, job.state.pos)
        else:
            rows, _, first = args
            if armed.is_set() and job.row in rows and not first[rows.index(job.row)]:
                armed.clear()
                poison(batch, tts, target, job.row, None)
        return original(*args)

    setattr(owner, stage, hooked)  # an instance attribute, removed below
    pcm, last = [], None
    try:
        for ev in req.events(timeout=120):
            if isinstance(ev, AudioChunk):
                pcm.append(ev.samples)
                if len(pcm) == after_chunks:
                    armed.set()
            else:
                last = ev
    finally:
        delattr(owner, stage)
    return np.concatenate(pcm), last


def poison(batch, tts, target, row, pos):
    if target == "flow":
        for d in batch.flow_kv:  # [2, rows, Hkv, slots, D]
            d[:, row, :, :pos] = float("nan")
    elif target == "conv":
        conv = next(m for m in batch.convs if isinstance(m, StreamingConv1d)
                    and m is not tts.model.mimi.upsample.convtr)
        batch.conv_state[conv][row] = float("nan")
    else:
        for d in batch.dec_kv:
            d[:, row] = float("nan")


@pytest.mark.parametrize("target", ["flow", "conv", "ring"])
def test_nan_in_one_row_fails_it_alone_and_leaves_nothing_behind(tts, target):
    v = tts.test_voice
    solo_neighbour = tts.synthesize(LONG, voice=v, seed=11, max_frames=40).samples
    solo_next = tts.synthesize(TEXT, voice=v, seed=12, max_frames=30).samples
    solo_after = tts.synthesize(LONG, voice=v, seed=13, max_frames=30).samples

    doomed = tts.submit(LONG, voice=v, seed=10, max_frames=60)  # row 0
    neighbour = tts.submit(LONG, voice=v, seed=11, max_frames=40)  # row 1
    # wait for admission of the doomed request so that its row is known
    while not any(j.req is doomed for j in tts.engine._active.values()):
        threading.Event().wait(0.005)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("n", events(neighbour)))
    t.start()
    bad_pcm, bad_last = poison_when_streaming(tts, doomed, target)
    t.join(120)
    assert isinstance(bad_last, Failed), bad_last
    assert isinstance(bad_last.error, GenerationError)
    assert "NaN or inf" in str(bad_last.error)
    assert np.isfinite(bad_pcm).all()  # no non-finite sample was ever delivered
    n_pcm, n_last = out["n"]
    assert isinstance(n_last, Finished)
    assert_same(solo_neighbour, n_pcm)

    # the next requests reuse the poisoned row (lowest free row), while and after others run
    nxt = tts.submit(TEXT, voice=v, seed=12, max_frames=30)
    after = tts.submit(LONG, voice=v, seed=13, max_frames=30)
    n_pcm, n_last = events(nxt)
    a_pcm, a_last = events(after)
    assert isinstance(n_last, Finished) and isinstance(a_last, Finished)
    assert_same(solo_next, n_pcm)
    assert_same(solo_after, a_pcm)


def test_nan_voice_state_fails_only_that_request(tts, tmp_path):
    """A voice file (real input) whose state holds NaN: that request fails with a clear
    error, a concurrent one and the next one in the same row are unaffected."""
    from vocalis.models.pocket.voice import VoiceState

    v = tts.test_voice
    kv = [k.clone() for k in v.state.kv]
    kv[0][:, :, -1] = float("nan")
    bad_voice = VoiceState(kv, dict(v.state.meta))
    solo = tts.synthesize(LONG, voice=v, seed=21, max_frames=20).samples
    bad = tts.submit(TEXT, voice=bad_voice, seed=20)
    good = tts.submit(LONG, voice=v, seed=21, max_frames=20)
    _, last = events(bad)
    assert isinstance(last, Failed) and isinstance(last.error, GenerationError)
    g_pcm, _ = events(good)
    assert_same(solo, g_pcm)
    again = tts.synthesize(LONG, voice=v, seed=21, max_frames=20).samples
    assert_same(solo, again)
    with pytest.raises(GenerationError):
        tts.synthesize(TEXT, voice=bad_voice, seed=20)


# ----------------------------------------------------------------------------- property


def option_values():
    floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                       st.floats(min_value=-10, max_value=10),
                       st.sampled_from([0.0, 1e6, 1e6 + 1, 1e300, -1e-300, 3.4e38]))
    ints = st.one_of(st.integers(min_value=-5, max_value=80), st.sampled_from([2**63, -2**63]))
    return st.fixed_dictionaries({}, optional={
        "temperature": floats, "eos_threshold": floats, "noise_clamp": floats,
        "frames_after_eos": ints, "sampler_decode_steps": ints,
        "max_tokens": st.one_of(ints, st.integers(min_value=1, max_value=1000)),
        "seed": st.one_of(st.none(), ints),
    })


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(opts=option_values())
def test_random_options_give_an_error_or_finite_audio_and_spare_neighbours(tts, opts):
    v = tts.test_voice
    ref = tts.engine  # started
    assert ref is not None
    solo = tts._iso_solo if hasattr(tts, "_iso_solo") else None
    if solo is None:
        solo = tts._iso_solo = tts.synthesize(LONG, voice=v, seed=5, max_frames=16).samples
    neighbour = tts.submit(LONG, voice=v, seed=5, max_frames=16)
    seed = opts.pop("seed", None)
    try:
        audio = tts.synthesize(TEXT, voice=v, seed=seed, max_frames=6, **opts)
    except InputError as e:
        assert e.param in {*opts, "seed"}
    else:
        assert np.isfinite(audio.samples).all() and audio.samples.size > 0
    pcm, last = events(neighbour)
    assert isinstance(last, Finished)
    assert_same(solo, pcm)


# ----------------------------------------------------------------------------- boundaries


def test_cli_and_batch_refuse_out_of_range_options(checkpoints, tmp_path):
    import json
    import subprocess
    import sys

    d = checkpoints.get("english_2m_2026-10")
    out = tmp_path / "never.wav"
    proc = subprocess.run([sys.executable, "-m", "vocalis.cli", "generate", "--model", str(d),
                           "--voice", str(d / "voice.wav"), "--text", TEXT, "--temperature",
                           "1e300", "-o", str(out)], capture_output=True, timeout=120)
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr.decode()
    assert lines[0].startswith("error: temperature must be a number in [0.0, 1000000]")
    assert not out.exists()
    reqs = tmp_path / "r.json"
    voice = str(d / "voice.wav")
    reqs.write_text(json.dumps([{"text": TEXT, "voice": voice},
                                {"text": TEXT, "voice": voice, "options": {"temperature": 1e300}}]))
    proc = subprocess.run([sys.executable, "-m", "vocalis.cli", "batch", "--model", str(d),
                           "--requests", str(reqs), "--out-dir", str(tmp_path / "out")],
                          capture_output=True, timeout=120)
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr.decode()
    assert "request 1:" in lines[0] and "temperature must be" in lines[0]


@pytest.fixture(scope="module")
def server(tts, tmp_path_factory):
    from tests.server.test_server import Server

    from vocalis.server import create_app

    d = tmp_path_factory.mktemp("iso_voices")
    s = Server(create_app(tts, voices_dir=d, default_voice=tts.test_voice.name))
    yield s
    s.stop()


def speech(server, **fields):
    body = {"model": "tts-1", "voice": "alloy", "input": TEXT, "response_format": "pcm",
            "max_frames": 6, **fields}
    status, _, data = server.request("POST", "/v1/audio/speech", body)
    return status, data


def test_server_refuses_the_poisoning_request_and_neighbours_keep_speaking(server):
    ok_status, before = speech(server, seed=1)
    assert ok_status == 200
    status, data = speech(server, seed=1, temperature=1e300, max_frames=None)
    assert status == 400
    err = __import__("json").loads(data)["error"]
    assert err["param"] == "temperature" and "[0.0, 1000000]" in err["message"]
    status, after = speech(server, seed=1)
    assert status == 200 and after == before
    assert np.abs(np.frombuffer(after, "<i2")).max() > 0


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(opts=option_values())
def test_server_random_options_give_400_naming_the_option_or_finite_audio(server, opts):
    import json

    ref = getattr(server, "_iso_ref", None)
    if ref is None:
        ref = server._iso_ref = speech(server, input=LONG, seed=5, max_frames=12)[1]
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", speech(server, input=LONG, seed=5,
                                                                   max_frames=12)))
    t.start()
    # JSON cannot carry NaN/inf: send them the way lenient clients do (Python's json module)
    status, data = speech(server, **opts)
    if status == 400:
        err = json.loads(data)["error"]
        assert err["param"] in {*opts, "seed"} and err["message"], err
    else:
        assert status == 200, data[:300]
        assert len(data) > 0 and len(data) % 2 == 0
    t.join(60)
    status, data = box["r"]
    assert status == 200
    assert_same(np.frombuffer(ref, "<i2").astype(np.float32),
                np.frombuffer(data, "<i2").astype(np.float32))
