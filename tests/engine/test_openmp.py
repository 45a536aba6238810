"""Per-thread intra-op thread counts and OpenMP pools (vocalis.engine.openmp).

What is observed is independent of the code under test: the thread count PyTorch reports
inside the thread that runs the work, and the operating system's list of the process's
threads (``/proc/self/task``), where each OpenMP pool worker is one thread.
"""

from __future__ import annotations

import os
import threading

import pytest
import torch

from vocalis.engine.openmp import set_threads
from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

linux = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads /proc/self/task")


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def work() -> None:
    a = torch.randn(1500, 1500)
    (a @ a).sum()
    (a + a).sum()


def test_a_count_set_before_the_threads_first_operation_holds(restore_threads):
    """A thread sets one thread, another thread then sets two, and only then does the first
    one compute: it must still run on one thread. (With ``torch.set_num_threads`` alone,
    PyTorch's lazy per-thread init gives it the other thread's two at its first operation:
    the engine's codec thread ran on every thread that way.)"""
    ready, go = threading.Event(), threading.Event()
    seen = {}

    def worker():
        set_threads(1)
        ready.set()
        go.wait()
        work()
        seen["count"] = torch.get_num_threads()

    t = threading.Thread(target=worker)
    t.start()
    ready.wait()
    torch.set_num_threads(2)
    go.set()
    t.join()
    assert seen["count"] == 1


def run_alone(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (no threads left by other tests) and return
    the JSON it prints last."""
    import json
    import subprocess
    import sys
    import textwrap

    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=600, env={**os.environ, "VOCALIS_TUNING": "fixed"})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


PRELUDE = """
import json, os, threading
import torch
from vocalis.engine.openmp import release_thread_pool, set_threads

def os_threads():
    return sorted(int(t) for t in os.listdir("/proc/self/task"))

def work():
    a = torch.randn(1500, 1500)
    (a @ a).sum()
    (a + a).sum()

def in_thread(fn):
    out = {}
    t = threading.Thread(target=lambda: out.update(v=fn()))
    t.start()
    t.join()
    return out["v"]
"""


@linux
def test_release_thread_pool_ends_the_callers_pool_workers():
    """Two threads of work leave one pool worker behind in the calling thread;
    :func:`release_thread_pool` ends it, and the next parallel work builds it again."""
    r = run_alone(PRELUDE + """
def run():
    set_threads(2)
    release_thread_pool()  # the first call looks the runtime up: count after it
    before = os_threads()
    work()
    with_pool = os_threads()
    released = release_thread_pool()
    after = os_threads()
    work()
    return dict(before=before, with_pool=with_pool, released=released, after=after,
                again=os_threads())
print(json.dumps(in_thread(run)))
""")
    workers = set(r["with_pool"]) - set(r["before"])  # threads the work started
    assert len(workers) == 1
    assert r["released"] is True
    assert not workers & set(r["after"])  # ended
    assert len(set(r["again"]) - set(r["after"])) == 1  # a new one for the next work


@linux
def test_engine_threads_keep_their_counts_and_callers_keep_no_pool(tmp_path):
    """In the engine, the codec thread decodes on its share of the split (one of two
    threads) even though the model thread takes both for each prompt pass; a lone
    request's first frame is decoded on both (by the model thread, which waits for it:
    tests/engine/test_engine_contract.py), and so are the last frames of the engine's last
    request (the model thread idle); and a caller that computed on two threads before
    ``submit`` is left without an OpenMP pool."""
    d = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "cv", seed=2, tiny=True)
    r = run_alone(PRELUDE + f"""
import vocalis
with vocalis.load({str(d)!r}, threads=2, tuning="fixed,threads=1:1,codec_frames=2") as tts:
    engine = tts.engine
    seen = {{"decode": [], "prefill": set()}}
    batch, family = engine.batch, engine.family
    decode, prefill = batch.decode, family.prefill

    def counted_decode(rows, frames, first):
        seen["decode"][-1].append((len(rows) == 1 and all(first), torch.get_num_threads()))
        return decode(rows, frames, first)

    def counted_prefill(*a, **k):
        seen["prefill"].add(torch.get_num_threads())
        return prefill(*a, **k)

    batch.decode, family.prefill = counted_decode, counted_prefill
    for seed in (1, 2):  # the second request arrives after the first prompt pass
        seen["decode"].append([])
        tts.synthesize("Hello there, how are you today?", speaker="ryan", seed=seed,
                       max_new_tokens=8)

    def caller():
        set_threads(2)
        before = os_threads()
        work()  # the caller's own two-thread work: one pool worker
        with_pool = os_threads()
        seen["decode"].append([])
        audio = tts.synthesize("One more sentence.", speaker="ryan", seed=3, max_new_tokens=6)
        return before, with_pool, os_threads(), int(audio.samples.size)

    before, with_pool, after, samples = in_thread(caller)
    print(json.dumps(dict(decode=seen["decode"], prefill=sorted(seen["prefill"]),
                          before=before, with_pool=with_pool, after=after, samples=samples)))
""")
    assert len(r["decode"]) == 3
    for calls in r["decode"]:  # codec calls of one request, in order
        assert len(calls) >= 3
        assert calls[0] == [True, 2] and calls[-1] == [False, 2]  # first frame, last frames
        assert all(c == [False, 1] for c in calls[1:-1])
    assert r["prefill"] == [2]
    assert r["samples"] > 0
    workers = set(r["with_pool"]) - set(r["before"])  # the caller's pool worker
    assert len(workers) == 1
    assert not workers & set(r["after"])  # gone after synthesize


def test_a_lone_float32_row_borrows_the_waiting_codecs_thread(tmp_path):
    """With the tuning choice ``lend=on`` a lone float32 request's steps after its first
    frame run on both threads when the codec thread is waiting for frames (as it is right
    after the lone first frame), and on the model's one otherwise; ``lend=off`` keeps every
    step after the first on one thread. The codes are the same (greedy) either way."""
    d = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "cv", seed=2, tiny=True)
    r = run_alone(PRELUDE + f"""
import vocalis
out = {{}}
for lend in ("on", "off"):
    with vocalis.load({str(d)!r}, threads=2, tuning=f"fixed,threads=1:1,codec_frames=4,lend={{lend}}") as tts:
        family = tts.engine.family
        step, counts = family.step, []

        def counted_step(*a, **k):
            counts.append(torch.get_num_threads())
            return step(*a, **k)

        family.step = counted_step
        audio = tts.synthesize("Hello there, how are you today?", speaker="ryan", seed=1,
                               greedy=True, max_new_tokens=12)
        out[lend] = dict(steps=counts, codes=[c for ch in audio.chunks for c in ch["codes"]])
print(json.dumps(out))
""")
    on, off = r["on"]["steps"], r["off"]["steps"]
    assert len(on) >= 8 and len(off) >= 8
    assert on[0] == off[0] == 2  # the first step rides the prompt pass's burst
    assert on[1] == 2  # the codec waits right after the lone first frame
    assert set(off[1:]) == {1}
    assert set(on[1:]) <= {1, 2}
    assert r["on"]["codes"] == r["off"]["codes"]


@linux
def test_release_thread_pool_frees_torchs_pool_beside_another_libgomp():
    """sentencepiece's wheel bundles a libgomp of its own (the small Pocket TTS configs'
    tokenizers, or the official package, load it beside PyTorch's): the pool freed is still
    PyTorch's."""
    r = run_alone("""
import sentencepiece  # noqa: F401 - its libgomp is loaded first
""" + PRELUDE + """
maps = open("/proc/self/maps").read()
gomps = sorted({line.split()[-1] for line in maps.splitlines() if "libgomp" in line})

def run():
    set_threads(2)
    release_thread_pool()
    before = os_threads()
    work()
    with_pool = os_threads()
    released = release_thread_pool()
    return dict(before=before, with_pool=with_pool, released=released, after=os_threads())
print(json.dumps(dict(gomps=gomps, **in_thread(run))))
""")
    assert len(r["gomps"]) >= 2  # the case under test: two libgomp copies in the process
    workers = set(r["with_pool"]) - set(r["before"])
    assert len(workers) == 1
    assert r["released"] is True
    assert not workers & set(r["after"])
