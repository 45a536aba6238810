"""Speed choices by measurement (vocalis.engine.tuning, vocalis.models.pocket.tuning).

Nothing here depends on how fast anything is: the decisions are driven by a table of
scores handed to ``tune`` in place of the clock (the model, its kernels and the cache are
real), and the one test with the real clock checks only what was measured and stored.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import vocalis
from vocalis.engine import tuning as tuning_mod
from vocalis.engine.tuning import measured_splits
from vocalis.errors import InputError
from tests.conftest import kernels_unbuildable
from vocalis.kernels.f32 import F32Linear
from vocalis.models.packed import PackedLinear
from vocalis.models.pocket.layers import TransformerLayer, gelu_tanh, vocalis_gelu_tanh
from vocalis.models.pocket.mimi import ExpELU, VocalisELU
from vocalis.models.pocket.tuning import split_candidates, tune

CONFIG = "english_2m_2026-10"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh vocalis cache folder and no tuning from the environment."""
    monkeypatch.setenv("VOCALIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("VOCALIS_TUNING", raising=False)
    return tmp_path / "cache" / "tuning.json"


@pytest.fixture
def fresh(checkpoints):
    """``fresh()``: a newly loaded model on the CPU with unpacked (default) linears and
    nothing measured; ``tune`` is called once per loaded model."""
    loaded = []

    def make():
        tts = vocalis.load(str(checkpoints.get(CONFIG)), threads=2, max_batch=4,
                           tuning="flow_linears=default,codec_linears=default,threads=1:1,"
                                  "codec_pipeline=on,codec_elu=default,gelu=default,"
                                  "codec_out_conv=default,codec_seanet=default")
        loaded.append(tts)  # every choice forced: nothing measured, nothing cached
        return tts.model
    yield make
    for tts in loaded:
        tts.close()


def elus(model) -> set[type]:
    """The ELU classes in the model's SEANet decoder."""
    return {type(m) for m in model.mimi.decoder.modules()
            if isinstance(m, (torch.nn.ELU, ExpELU, VocalisELU))}


def kinds(module) -> set[type]:
    return {type(m) for m in module.modules()
            if type(m) in (torch.nn.Linear, PackedLinear, F32Linear)}


#: our float32 kernel is a FlowLM candidate where it is built: here where it can be (x86
#: with AVX2, a C++ compiler), through the session's build (``built_kernels``)
OWN_F32 = kernels_unbuildable() is None
FLOW = ("packed", "packed1", "default") + (("vocalis",) if OWN_F32 else ())
ELU = ("exp", "default") + (("vocalis",) if OWN_F32 else ())  # the same build
GELU = ("default",) + (("vocalis",) if OWN_F32 else ())
OUT_CONV = ("default", "matmul")
SEANET = ("default",) + (("vocalis",) if OWN_F32 else ())  # the same build
SEANET_SOURCE = "measured" if OWN_F32 else "fixed"
CODEC = ("packed", "packed1", "default") + (("vocalis",) if OWN_F32 else ())
GELU_SOURCE = "measured" if OWN_F32 else "fixed"  # one candidate: taken unmeasured


@pytest.fixture(autouse=True, scope="module")
def _kernels_built_where_they_can_be(request):
    if OWN_F32:
        request.getfixturevalue("built_kernels")


@pytest.fixture(autouse=True)
def _machine_load_unknown(monkeypatch):
    """Other processes' CPU use during a measurement is not looked at (as where
    ``/proc/stat`` is missing), so that the scripted scores alone decide how many rounds are
    measured; the tests of the busy-machine rule script it."""
    monkeypatch.setattr(tuning_mod, "other_cpus", lambda before, after: None, raising=False)


class Scores:
    """``measure`` stand-in: a fixed score per (choice, candidate), or a list of them, one
    per call (its last repeated); records each call and which kernels the model had when it
    was made."""

    def __init__(self, model, table: dict[tuple[str, str], float], default: float = 5.0):
        self.model, self.table, self.default = model, table, default
        self.calls: list[tuple[str, str]] = []
        self.seen: dict[tuple[str, str], tuple[set, set]] = {}
        self.layouts: dict[tuple[str, str], set] = {}  # FlowLM (batch hint, one-row default)

    def __call__(self, name: str, value: str) -> float:
        self.calls.append((name, value))
        self.seen[(name, value)] = (kinds(self.model.flow_lm), kinds(self.model.mimi))
        self.layouts[(name, value)] = {
            (m.batch_hint, m.one_row_default) for m in self.model.flow_lm.modules()
            if isinstance(m, PackedLinear)}
        score = self.table.get((name, value), self.default)
        if isinstance(score, list):
            return score[min(self.calls.count((name, value)), len(score)) - 1]
        return score


FAST_DEFAULT_FLOW = {("flow_linears", "default"): 1.0, ("flow_linears", "packed"): 2.0,
                     ("codec_linears", "packed"): 1.0, ("codec_linears", "default"): 2.0,
                     ("codec_elu", "exp"): 1.0, ("codec_out_conv", "matmul"): 1.0,
                     ("threads", "2:2"): 1.0, ("codec_pipeline", "off"): 1.0}
# at 2 threads the only split of the budget, 1:1, is taken without measuring; at 4 threads
# the splits 3:1, 2:2 and 1:3 are measured (2:2 wins above)


def test_measured_choices_follow_the_scores_and_are_applied(fresh, cache):
    model = fresh()
    scores = Scores(model, FAST_DEFAULT_FLOW)
    t = tune(model, threads=2, max_batch=4, exact=False, measure=scores)
    assert t.choices == {"flow_linears": "default", "codec_linears": "packed", "codec_elu": "exp",
                         "codec_out_conv": "matmul", "codec_seanet": "default", "gelu": "default",
                         "threads": "1:1", "codec_pipeline": "off", "codec_dtype": "float32"}
    assert t.sources == {"flow_linears": "measured", "codec_linears": "measured",
                         "codec_elu": "measured", "codec_out_conv": "measured",
                         "codec_seanet": SEANET_SOURCE, "gelu": GELU_SOURCE, "threads": "fixed",
                         "codec_pipeline": "measured",
                         "codec_dtype": "fixed"}  # bf16 is opt-in; 1:1 is the only split of 2
    # every kernel candidate was timed twice, in turn (forward, then backward), each with
    # its own kernels in place; hybrid (weights held twice) is never measured
    flow = list(FLOW)
    codec = list(CODEC)
    assert scores.calls == ([("flow_linears", v) for v in flow + flow[::-1]]
                            + [("codec_linears", v) for v in codec + codec[::-1]]
                            + [("codec_elu", v) for v in ELU + ELU[::-1]]
                            + [("codec_out_conv", v) for v in OUT_CONV + OUT_CONV[::-1]]
                            + [("codec_seanet", v) for v in (SEANET + SEANET[::-1]
                                                              if OWN_F32 else ())]
                            + [("gelu", v) for v in (GELU + GELU[::-1] if OWN_F32 else ())]
                            + [("codec_pipeline", v) for v in ["on", "off"]])
    assert model.mimi.decoder.model[-1].by_matmul  # the measured choice is in place
    assert scores.seen[("flow_linears", "packed")][0] == {PackedLinear}
    assert scores.seen[("flow_linears", "default")][0] == {torch.nn.Linear}
    if OWN_F32:
        assert scores.seen[("flow_linears", "vocalis")][0] == {F32Linear}
    assert scores.seen[("codec_linears", "packed")][1] == {PackedLinear}
    for value, hint in (("packed", 16), ("packed1", 1)):
        assert scores.layouts[("flow_linears", value)] == {(hint, False)}
    # the decision is what the model now runs with
    assert kinds(model.flow_lm) == {torch.nn.Linear}
    assert kinds(model.mimi) == {PackedLinear}
    assert elus(model) == {ExpELU}
    assert "threads" not in t.timings
    # and it was stored under this machine's key
    stored = json.loads(cache.read_text())
    (entry,) = stored.values()
    assert entry["choices"] == {k: v for k, v in t.choices.items()
                                if t.sources[k] == "measured"}
    assert entry["key"]["threads"] == 2 and entry["key"]["torch"] == torch.__version__
    assert entry["key"]["cpu"] == tuning_mod.cpu_info()["model"]
    # with 4 threads the splits of the budget are measured, and only those
    model = fresh()
    scores = Scores(model, FAST_DEFAULT_FLOW)
    t = tune(model, threads=4, max_batch=4, exact=False, measure=scores)
    assert (t.choices["threads"], t.sources["threads"]) == ("2:2", "measured")
    assert [v for n, v in scores.calls if n == "threads"] == ["3:1", "2:2", "1:3"]
    assert t.timings["threads"] == {"3:1": 5.0, "2:2": 1.0, "1:3": 5.0}


def test_each_candidate_keeps_its_best_round(fresh, cache):
    """A candidate that one slow spell hit in one round still wins on its other round (and
    on the third that the disagreement asks for); the timings kept are each candidate's
    shortest."""
    model = fresh()
    scores = Scores(model, {("flow_linears", "packed1"): [9.0, 1.0],
                            ("flow_linears", "packed"): [2.0, 2.5],
                            ("codec_linears", "default"): [3.0, 0.5]})
    t = tune(model, threads=2, max_batch=4, exact=False, measure=scores)
    assert t.choices["flow_linears"] == "packed1" and t.choices["codec_linears"] == "default"
    assert t.rounds["flow_linears"]["packed1"] == [9.0, 1.0, 1.0] and not t.uncached
    assert t.timings["flow_linears"] == {"packed": 2.0, "packed1": 1.0, "default": 5.0,
                                         **({"vocalis": 5.0} if OWN_F32 else {})}
    assert list(t.timings["codec_linears"]) == list(CODEC)
    # the choice is what the model runs: the weights laid out for one row
    layouts = {(m.batch_hint, m.one_row_default) for m in model.flow_lm.modules()
               if isinstance(m, PackedLinear)}
    assert layouts == {(1, False)} and kinds(model.flow_lm) == {PackedLinear}


# ------------------------------------------------------------ a busy machine at the first load

#: the module's own (the autouse fixture replaces it in every test)
REAL_OTHER_CPUS = getattr(tuning_mod, "other_cpus", None)
#: a key for :func:`tuning_mod.resolve` alone (no model): ``kernel`` is measured in two
#: rounds (as Pocket's kernel choices), ``split`` in one (as the thread splits)
BUSY_KEY = {"cpu": "test", "threads": 2}
BUSY_CHOICES = {"kernel": ("a", "b"), "split": ("x", "y")}


class Script:
    """``measure``, ``apply`` and ``other_cpus`` stand-ins for :func:`tuning_mod.resolve`:
    scores per (choice, candidate), a list read one per call (its last repeated); other
    work's CPUs per round likewise (None: unknown)."""

    def __init__(self, scores: dict, busy: list | None = None):
        self.scores, self.busy = scores, busy or [None]
        self.calls: list[tuple[str, str]] = []
        self.applied: dict[str, str] = {}
        self.rounds = 0

    def measure(self, name: str, value: str) -> float:
        self.calls.append((name, value))
        score = self.scores.get((name, value), 5.0)
        if isinstance(score, list):
            return score[min(self.calls.count((name, value)), len(score)) - 1]
        return score

    def apply(self, name: str, value: str) -> None:
        self.applied[name] = value

    def other_cpus(self, before, after):
        self.rounds += 1
        return self.busy[min(self.rounds, len(self.busy)) - 1]

    def resolve(self, monkeypatch) -> tuning_mod.Tuning:
        monkeypatch.setattr(tuning_mod, "other_cpus", self.other_cpus, raising=False)
        return tuning_mod.resolve(BUSY_KEY, BUSY_CHOICES, {"kernel": "a", "split": "x"}, "auto",
                                  self.measure, self.apply, rounds={"kernel": 2})

    def count(self, name: str) -> int:
        return sum(1 for n, _ in self.calls if n == name)


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "vocalis.tuning" and r.levelno >= logging.WARNING]


def test_steady_rounds_are_measured_once_and_cached_without_a_warning(cache, monkeypatch,
                                                                     caplog):
    """Rounds that agree (each contender's second-shortest within 1.5x of its shortest) on a
    machine not busier than the calibration allows: no extra round, every round's score
    kept, the choice cached, nothing said."""
    script = Script({("kernel", "a"): [1.0, 1.4], ("kernel", "b"): [2.0, 2.1],
                     ("split", "x"): 3.0, ("split", "y"): 4.0}, busy=[0.0])
    with caplog.at_level(logging.INFO, logger="vocalis.tuning"):
        t = script.resolve(monkeypatch)
    assert script.calls == [("kernel", "a"), ("kernel", "b"), ("kernel", "b"), ("kernel", "a"),
                            ("split", "x"), ("split", "y")]
    assert t.choices == {"kernel": "a", "split": "x"} and script.applied == t.choices
    assert t.sources == {"kernel": "measured", "split": "measured"} and t.uncached == {}
    assert t.rounds == {"kernel": {"a": [1.0, 1.4], "b": [2.0, 2.1]},
                        "split": {"x": [3.0], "y": [4.0]}}
    assert t.timings == {"kernel": {"a": 1.0, "b": 2.0}, "split": {"x": 3.0, "y": 4.0}}
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["choices"] == t.choices and entry["timings"] == t.timings
    assert warnings(caplog) == [] and "not cached" not in t.describe()
    assert tuning_mod.unsettled({"a": [1.0, 1.5], "b": [3.0, 1.0, 1.2]}) is None
    assert tuning_mod.unsettled({"a": [1.0, 1.2], "b": [1.0, 1.6], "c": [1.0, 1.55]}) == "b"


def test_a_spike_that_persists_is_used_but_not_cached(cache, monkeypatch, caplog):
    """A contender 40x slower in every round after its first (another process took the
    machine): two extra rounds are measured, and as its best is still not reproduced the
    choice runs for this load, is left out of the cache (the settled one is written) and is
    named in one warning line; the next load measures it again."""
    script = Script({("kernel", "a"): [1.0, 40.0], ("kernel", "b"): 2.0,
                     ("split", "x"): 3.0, ("split", "y"): 4.0})
    with caplog.at_level(logging.INFO, logger="vocalis.tuning"):
        t = script.resolve(monkeypatch)
    assert script.count("kernel") == 2 * (2 + tuning_mod.EXTRA_ROUNDS) == 8
    assert script.calls[4:8] == [("kernel", "a"), ("kernel", "b"), ("kernel", "b"),
                                 ("kernel", "a")]  # the order keeps alternating
    assert t.rounds["kernel"] == {"a": [1.0, 40.0, 40.0, 40.0], "b": [2.0] * 4}
    assert t.choices["kernel"] == "a" and script.applied["kernel"] == "a"  # used
    assert t.sources["kernel"] == "measured" and t.timings["kernel"] == {"a": 1.0, "b": 2.0}
    assert t.uncached == {"kernel": "rounds of 'a' ranged 1.0-40.0 ms"}
    assert "kernel=a (measured, not cached: busy)" in t.describe()
    assert "split=x (measured)" in t.describe()
    assert warnings(caplog) == [
        ("tuning: kernel measured on a busy machine (rounds of 'a' ranged 1.0-40.0 ms); used "
         "for this run, not cached: it is measured again at the next load")]
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["choices"] == {"split": "x"} and "kernel" not in entry["timings"]
    # the next load: the settled choice from the cache, the other one measured again
    again = Script({}).resolve(monkeypatch)
    assert again.sources == {"kernel": "measured", "split": "cache"}
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["choices"] == {"kernel": "a", "split": "x"}  # settled this time (5.0 each)


def test_a_spike_that_goes_away_is_measured_again_and_cached(cache, monkeypatch, caplog):
    """A contender 40x slower in its first round only: one extra round reproduces its best,
    which settles the choice: it is cached, with no warning."""
    script = Script({("kernel", "a"): [40.0, 1.0, 1.1], ("kernel", "b"): 2.0,
                     ("split", "x"): 3.0, ("split", "y"): 4.0})
    with caplog.at_level(logging.INFO, logger="vocalis.tuning"):
        t = script.resolve(monkeypatch)
    assert script.count("kernel") == 6  # two rounds, then one more
    assert t.rounds["kernel"] == {"a": [40.0, 1.0, 1.1], "b": [2.0] * 3}
    assert t.choices["kernel"] == "a" and t.uncached == {}
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["choices"] == {"kernel": "a", "split": "x"}
    assert entry["timings"]["kernel"] == {"a": 1.0, "b": 2.0}
    assert warnings(caplog) == []


def test_a_busy_machine_gives_more_rounds_and_caches_only_what_settles(cache, monkeypatch,
                                                                      caplog):
    """Other work keeping the machine busy beyond what the calibration's threads leave free
    asks for extra rounds, also of a choice measured in one round (one score has nothing to
    disagree with); rounds that agree are cached, ones that do not are not."""
    busy = tuning_mod.busy_limit(BUSY_KEY["threads"]) + 1.0
    script = Script({("split", "x"): [3.0, 9.0], ("split", "y"): 4.0}, busy=[busy])
    with caplog.at_level(logging.INFO, logger="vocalis.tuning"):
        t = script.resolve(monkeypatch)
    assert script.count("kernel") == 2 * 4 and script.count("split") == 2 * 3
    assert t.rounds["split"] == {"x": [3.0, 9.0, 9.0], "y": [4.0] * 3}
    assert t.choices == {"kernel": "a", "split": "x"}  # kernel: 5.0 each, the first kept
    assert list(t.uncached) == ["split"]
    (said,) = warnings(caplog)
    assert said.startswith("tuning: split measured on a busy machine (rounds of 'x' ranged "
                           f"3.0-9.0 ms; other work kept {busy:.1f} CPUs busy); used for")
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["choices"] == {"kernel": "a"}  # its rounds agreed: a steady load slows all
    # one extra round that finds the machine quiet again and agrees settles the choice
    cache.unlink()
    script = Script({}, busy=[0.0, busy, 0.0])
    t = script.resolve(monkeypatch)
    assert script.count("kernel") == 2 * 3 and script.count("split") == 2 * 1
    assert t.uncached == {} and json.loads(cache.read_text())


@pytest.mark.skipif(REAL_OTHER_CPUS is not None and tuning_mod.cpu_sample() is None,
                    reason="no /proc/stat: the machine's CPU time is unknown")
def test_other_cpus_counts_another_process():
    """A process spinning for a second beside this one (which waits for it) is about one
    CPU of other work; a span too short to judge is None."""
    spin = "import time\nt = time.perf_counter()\nwhile time.perf_counter() - t < 1.0: pass"
    before = tuning_mod.cpu_sample()
    subprocess.run([sys.executable, "-c", spin], check=True, timeout=60)
    after = tuning_mod.cpu_sample()
    assert REAL_OTHER_CPUS(before, after) >= 0.7
    assert REAL_OTHER_CPUS(before, before) is None


def test_hybrid_linears_are_opt_in(fresh, cache):
    """hybrid holds the FlowLM weights twice: it is taken when forced, never measured,
    and the codec does not offer it (its transformer never sees a lone row)."""
    model = fresh()
    t = tune(model, 2, 4, False, spec="flow_linears=hybrid", measure=Scores(model, {}))
    assert (t.choices["flow_linears"], t.sources["flow_linears"]) == ("hybrid", "forced")
    layouts = {(m.batch_hint, m.one_row_default) for m in model.flow_lm.modules()
               if isinstance(m, PackedLinear)}
    assert layouts == {(16, True)} and kinds(model.flow_lm) == {PackedLinear}
    scores = Scores(model, {("flow_linears", "default"): 0.1})
    t = tune(fresh(), 2, 4, False, measure=scores)
    assert ("flow_linears", "hybrid") not in scores.calls
    assert t.choices["flow_linears"] == "default"


def test_packed_layouts_compute_the_linear():
    """Against ``F.linear``: each packed layout agrees to float rounding at 1 and 5 rows;
    the hybrid's lone row is the default kernel itself (bit for bit)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 384)
    for hint, one_row in ((16, False), (1, False), (16, True)):
        p = PackedLinear(lin, hint, one_row)
        for rows in (1, 5):
            x = torch.randn(rows, 256)
            want = torch.nn.functional.linear(x, lin.weight, lin.bias)
            got = p(x)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
            if one_row and rows == 1:
                assert torch.equal(got, want)
        x = torch.randn(1, 1, 256)  # a step's [rows, T, d] input
        torch.testing.assert_close(p(x), torch.nn.functional.linear(x, lin.weight, lin.bias),
                                   rtol=1e-5, atol=1e-5)


def test_exp_elu_is_elu():
    """ExpELU against PyTorch's ``F.elu``: the same function to float rounding over the
    whole float32 range (infinities and NaN included), in float32 and bfloat16, and at
    the shapes the SEANet decoder feeds it."""
    torch.manual_seed(0)
    x = torch.cat([torch.randn(4000) * 4, torch.linspace(-100, 100, 2001),
                   torch.tensor([0.0, -0.0, 1e-30, -1e-30, 88.0, -200.0, float("inf"),
                                 float("-inf"), float("nan")])])
    want = torch.nn.functional.elu(x)
    got = ExpELU()(x)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7, equal_nan=True)
    assert got[x == float("-inf")].item() == -1.0 and got[x == float("inf")].item() == float("inf")
    assert torch.isnan(got[-1]) and (got[x > 0] == x[x > 0]).all()  # the positive side is x
    for shape in ((16, 64, 1920), (1, 512, 16), (3, 128, 480)):
        y = torch.randn(shape)
        torch.testing.assert_close(ExpELU()(y), torch.nn.functional.elu(y), rtol=1e-6, atol=1e-7)
        assert ExpELU()(y).shape == y.shape
    b = torch.randn(2, 64, 100).bfloat16()
    got = ExpELU()(b)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), torch.nn.functional.elu(b.float()),
                               rtol=1e-2, atol=1e-2)


@pytest.mark.skipif(not OWN_F32, reason=f"our kernels cannot be built here: {kernels_unbuildable()}")
def test_vocalis_elu_is_elu():
    """VocalisELU (our kernel's expm1) against float64 ``expm1``, an independent formula:
    within 2 float32 roundings of it everywhere the decoder's values go and beyond (the
    reduction steps' edges, the clamp, signed zeros, subnormals, infinities; NaN stays NaN;
    the positive side is x itself), as close to ``F.elu`` as ExpELU is, at the decoder's
    shapes, for non-contiguous inputs, and in bfloat16 (PyTorch's ELU: the kernel is
    float32)."""
    torch.manual_seed(0)
    x = torch.cat([torch.randn(4000) * 4, torch.linspace(-100, 100, 2001),
                   torch.tensor([0.0, -0.0, 1e-30, -1e-30, -1e-41, -0.3465736, -0.3465737,
                                 -17.0, -87.0, -87.5, -200.0, 88.0, float("inf"),
                                 float("-inf"), float("nan")])])
    got = VocalisELU()(x)
    x64 = x.double()
    want = torch.where(x64 > 0, x64, torch.expm1(x64))
    finite = torch.isfinite(x)
    err = (got.double() - want)[finite].abs()
    assert (err <= 2 * torch.finfo(torch.float32).eps * want[finite].abs() + 1e-45).all()
    assert got[x == float("-inf")].item() == -1.0 and got[x == float("inf")].item() == float("inf")
    assert torch.isnan(got[-1]) and (got[x > 0] == x[x > 0]).all()
    torch.testing.assert_close(got, torch.nn.functional.elu(x), rtol=1e-6, atol=1e-7,
                               equal_nan=True)
    for shape in ((16, 64, 1920), (1, 512, 16), (3, 128, 480), (5,)):
        y = torch.randn(shape) * 3
        out = VocalisELU()(y)
        assert out.shape == y.shape and out.dtype == torch.float32
        torch.testing.assert_close(out, torch.nn.functional.elu(y), rtol=1e-6, atol=1e-7)
    y = torch.randn(4, 64, 30).transpose(1, 2)  # a strided view
    torch.testing.assert_close(VocalisELU()(y), torch.nn.functional.elu(y), rtol=1e-6,
                               atol=1e-7)
    b = torch.randn(2, 64, 100).bfloat16()
    assert VocalisELU()(b).dtype == torch.bfloat16
    torch.testing.assert_close(VocalisELU()(b), torch.nn.functional.elu(b))


def decoded_frames(model) -> torch.Tensor:
    """Four frames of two rows decoded by the model's codec as it stands (fresh state, the
    same random latents each call): PCM ``[2, 4 * 1920]``."""
    from vocalis.models.pocket.batch import PocketBatch

    batch = PocketBatch(model, 2)
    batch.ensure(2, 16)
    g = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        return torch.cat([batch.decode([0, 1], torch.randn(2, 32, generator=g), [i == 0] * 2)
                          for i in range(4)], dim=-1)


@pytest.mark.skipif(not OWN_F32, reason=f"our kernels cannot be built here: {kernels_unbuildable()}")
def test_the_elu_kernel_is_a_codec_elu_choice_and_decodes_as_nn_elu(fresh, cache):
    """codec_elu=vocalis, measured fastest, is taken and runs in the SEANet decoder, whose
    frames then equal nn.ELU's to float rounding."""
    from vocalis.models.pocket.mimi import set_decoder_elu

    model = fresh()
    t = tune(model, threads=2, max_batch=4, exact=False,
             measure=Scores(model, {("codec_elu", "vocalis"): 1.0}))
    assert t.choices["codec_elu"] == "vocalis" and t.sources["codec_elu"] == "measured"
    assert elus(model) == {VocalisELU}
    pcm = {}
    for kind in ("vocalis", "default"):
        set_decoder_elu(model.mimi.decoder, kind)
        pcm[kind] = decoded_frames(model)
    assert elus(model) == {torch.nn.ELU}
    torch.testing.assert_close(pcm["vocalis"], pcm["default"], rtol=0, atol=1e-5)


@pytest.mark.parametrize("c_out,kernel,dilation,pad_mode", [(1, 3, 1, "constant"),
                                                          (3, 3, 2, "replicate"),
                                                          (4, 7, 1, "constant"),
                                                          (2, 1, 1, "constant")])
def test_a_streamed_convolution_by_matmul_is_pytorchs_convolution(c_out, kernel, dilation,
                                                                  pad_mode):
    """StreamingConv1d.by_matmul (one matrix product of the taps, then a shifted sum), fed
    in pieces of different lengths, equals torch.nn.functional.conv1d of the whole signal
    with the left context the streaming convolution starts from (zeros, or the first sample
    repeated), to float rounding; its state after the pieces is the last input samples."""
    from vocalis.models.pocket.layers import StreamingConv1d

    g = torch.Generator().manual_seed(3)
    conv = StreamingConv1d(16, c_out, kernel, dilation=dilation, pad_mode=pad_mode)
    conv.by_matmul = True
    with torch.no_grad():
        conv.conv.weight.copy_(torch.randn(conv.conv.weight.shape, generator=g))
        conv.conv.bias.copy_(torch.randn(c_out, generator=g))
    x = torch.randn(3, 16, 50, generator=g)
    state = conv.new_state(3)
    with torch.inference_mode():
        got = torch.cat([conv(x[..., a:b], state) for a, b in ((0, 7), (7, 8), (8, 50))], -1)
    ctx = (kernel - 1) * dilation
    left = (x[..., :1].expand(-1, -1, ctx) if pad_mode == "replicate"
            else torch.zeros(3, 16, ctx))
    want = torch.nn.functional.conv1d(torch.cat([left, x], -1), conv.conv.weight,
                                      conv.conv.bias, dilation=dilation)
    assert got.shape == want.shape == (3, c_out, 50)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    if ctx:
        assert torch.equal(state[0], x[..., -ctx:])
    strided = StreamingConv1d(16, 2, 4, stride=2)
    with pytest.raises(ValueError, match="stride 1 and one group"):
        strided.matmul_conv(x)


def test_the_output_conv_choice_decodes_as_nn_conv1d(fresh, cache):
    """codec_out_conv=matmul, measured fastest, is taken: the SEANet decoder's last
    convolution runs by matrix product, and frames decoded with it equal nn.Conv1d's to float
    rounding; exact models keep nn.Conv1d."""
    from vocalis.models.pocket.mimi import set_output_conv

    model = fresh()
    t = tune(model, threads=2, max_batch=4, exact=False,
             measure=Scores(model, {("codec_out_conv", "matmul"): 1.0}))
    assert t.choices["codec_out_conv"] == "matmul" and t.sources["codec_out_conv"] == "measured"
    last = model.mimi.decoder.model[-1]
    assert last.by_matmul and last.conv.out_channels == 1
    pcm = {}
    for kind in ("matmul", "default"):
        set_output_conv(model.mimi.decoder, kind)
        pcm[kind] = decoded_frames(model)
    assert not last.by_matmul
    assert pcm["matmul"].abs().max() > 1e-3  # not silence
    torch.testing.assert_close(pcm["matmul"], pcm["default"], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="unknown output convolution kind 'fast'"):
        set_output_conv(model.mimi.decoder, "fast")
    with pytest.raises(InputError, match=re.escape("codec_out_conv='matmul' is not allowed")):
        tune(fresh(), 2, 4, True, spec="codec_out_conv=matmul", measure=never)


@pytest.mark.skipif(not OWN_F32, reason=f"our kernels cannot be built here: {kernels_unbuildable()}")
def test_the_seanet_kernel_is_a_codec_seanet_choice_and_decodes_as_the_modules(fresh, cache):
    """codec_seanet=vocalis, measured fastest, is taken: the SEANet decoder's blocks run by
    our kernel, and frames decoded with it equal the modules' to float rounding; exact
    models keep the modules and refuse it (the kernel itself: tests/pocket/test_seanet_kernel.py)."""
    from vocalis.models.pocket.mimi import set_seanet

    model = fresh()
    t = tune(model, threads=2, max_batch=4, exact=False,
             measure=Scores(model, {("codec_seanet", "vocalis"): 1.0}))
    assert t.choices["codec_seanet"] == "vocalis" and t.sources["codec_seanet"] == "measured"
    dec = model.mimi.decoder
    assert dec.fused and set(dec.packed) == {1, 4, 7}
    pcm = {}
    for kind in ("vocalis", "default"):
        set_seanet(dec, kind)
        pcm[kind] = decoded_frames(model)
    assert not dec.fused and not dec.packed
    assert pcm["vocalis"].abs().max() > 1e-3  # not silence
    torch.testing.assert_close(pcm["vocalis"], pcm["default"], rtol=0, atol=1e-5)
    assert not torch.equal(pcm["vocalis"], pcm["default"])  # the kernel did run
    with pytest.raises(InputError, match=re.escape("codec_seanet='vocalis' is not allowed")):
        tune(fresh(), 2, 4, True, spec="codec_seanet=vocalis", measure=never)
    # a decoder the kernel cannot compute (reflect padding): refused, saying why (a trial)
    odd = fresh()
    odd.mimi.decoder.model[-1].pad_mode = "reflect"
    with pytest.raises(InputError, match=re.escape("codec_seanet='vocalis' is not allowed here "
                                                   "(this SEANet decoder is not laid out")):
        tune(odd, 2, 4, False, spec="codec_seanet=vocalis", measure=never)
    # a bfloat16 decoder runs its modules: the kernel's float32 copy of its weights is let go
    both = fresh()
    tune(both, 2, 4, False, spec="fixed,codec_seanet=vocalis,codec_dtype=bfloat16",
         measure=never)
    dec = both.mimi.decoder
    assert next(dec.parameters()).dtype == torch.bfloat16 and dec.packed == {}
    assert decoded_frames(both).abs().max() > 1e-3  # it decodes (by the modules)


def gelus(model) -> set:
    """The GELU functions held by the transformer layers of the FlowLM and of Mimi's decoder
    transformer (the encoder transformer's: :func:`encoder_gelus`)."""
    return {m.gelu for part in (model.flow_lm, model.mimi.decoder_transformer)
            for m in part.modules() if isinstance(m, TransformerLayer)}


def encoder_gelus(model) -> set:
    return {m.gelu for m in model.mimi.encoder_transformer.modules()
            if isinstance(m, TransformerLayer)}


@pytest.mark.skipif(not OWN_F32, reason=f"our kernels cannot be built here: {kernels_unbuildable()}")
def test_the_gelu_kernel_is_a_measured_choice_for_every_transformer(fresh, cache):
    """gelu=vocalis, measured faster, is taken and held by every layer of the FlowLM and of
    Mimi's decoder transformer; the encoder transformer, which makes voice states from audio,
    keeps PyTorch's (voice files stay the official package's); measured slower, PyTorch's
    stays."""
    model = fresh()
    assert gelus(model) == {gelu_tanh}
    t = tune(model, threads=2, max_batch=4, exact=False,
             measure=Scores(model, {("gelu", "vocalis"): 1.0, ("gelu", "default"): 2.0}))
    assert t.choices["gelu"] == "vocalis" and t.sources["gelu"] == "measured"
    assert set(t.timings["gelu"]) == {"default", "vocalis"}
    assert gelus(model) == {vocalis_gelu_tanh} and encoder_gelus(model) == {gelu_tanh}
    model = fresh()
    cache.unlink()
    t = tune(model, threads=2, max_batch=4, exact=False,
             measure=Scores(model, {("gelu", "vocalis"): 2.0, ("gelu", "default"): 1.0}))
    assert t.choices["gelu"] == "default" and gelus(model) == {gelu_tanh}


@pytest.mark.skipif(not OWN_F32, reason=f"our kernels cannot be built here: {kernels_unbuildable()}")
def test_the_gelu_choice_speaks_as_the_exact_model(checkpoints, cache):
    """A seeded request with gelu=vocalis equals the exact model's (PyTorch's GELU, the
    official arithmetic) to float rounding: same length, cosine > 0.99999 (the exact model
    holds PyTorch's GELU)."""
    d = str(checkpoints.get(CONFIG))
    voice = d + "/voice.wav"
    text = "The kernel changes speed only, not what is said."
    with vocalis.load(d, threads=2, exact=True) as ref:
        assert gelus(ref.model) == {gelu_tanh}
        want = ref.synthesize(text, voice=voice, seed=5, max_frames=16).samples
    with vocalis.load(d, threads=2, tuning="fixed,gelu=vocalis") as tts:
        assert gelus(tts.model) == {vocalis_gelu_tanh}
        got = tts.synthesize(text, voice=voice, seed=5, max_frames=16).samples
    assert got.shape == want.shape
    a, b = got.astype(np.float64), want.astype(np.float64)
    assert a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) > 0.99999
    assert not np.array_equal(got, want)  # the two GELUs do differ: ours ran


def never(name, value):
    raise AssertionError(f"measured {name}={value} although the choice was known")


def test_cached_choice_is_reused_without_measuring(fresh, cache):
    model = fresh()
    first = tune(model, 2, 4, False, measure=Scores(model, FAST_DEFAULT_FLOW))
    model = fresh()
    again = tune(model, 2, 4, False, measure=never)
    assert again.choices == first.choices
    assert again.sources == {"flow_linears": "cache", "codec_linears": "cache",
                             "codec_elu": "cache", "codec_out_conv": "cache",
                             "codec_seanet": "cache" if OWN_F32 else "fixed",
                             "gelu": "cache" if OWN_F32 else "fixed",
                             "threads": "fixed", "codec_pipeline": "cache",
                             "codec_dtype": "fixed"}
    assert again.calibration_ms == 0
    assert kinds(model.flow_lm) == {torch.nn.Linear} and kinds(model.mimi) == {PackedLinear}
    assert elus(model) == {ExpELU}


@pytest.mark.skipif(not OWN_F32, reason=f"our kernels cannot be built here: {kernels_unbuildable()}")
def test_kernels_built_after_a_measurement_are_measured_at_the_next_load(fresh, cache,
                                                                        monkeypatch):
    """A load before ``vocalis kernels build`` caches choices measured without our kernels;
    the next load, with them built, measures again the choices they are candidates of (and
    only those), instead of keeping the cached ones (a new user's report)."""
    import vocalis.models.pocket.tuning as pocket_tuning

    with monkeypatch.context() as m:  # as on a machine where they are not built yet
        m.setattr(pocket_tuning, "f32_kernel_available", lambda choice: False)
        model = fresh()
        first = tune(model, 2, 4, False, measure=Scores(model, FAST_DEFAULT_FLOW))
    assert first.choices["flow_linears"] == "default" and first.choices["codec_elu"] == "exp"
    model = fresh()
    scores = Scores(model, {**FAST_DEFAULT_FLOW, ("flow_linears", "vocalis"): 0.5,
                            ("codec_elu", "vocalis"): 0.5, ("gelu", "vocalis"): 0.5,
                            ("codec_seanet", "vocalis"): 0.5})
    t = tune(model, 2, 4, False, measure=scores)
    assert t.choices["flow_linears"] == "vocalis" and t.choices["codec_elu"] == "vocalis"
    assert t.choices["gelu"] == "vocalis" and t.choices["codec_seanet"] == "vocalis"
    assert {n for n, _ in scores.calls} == {"flow_linears", "codec_linears", "codec_elu", "gelu",
                                            "codec_seanet"}
    assert t.sources == {"flow_linears": "measured", "codec_linears": "measured",
                         "codec_elu": "measured", "codec_out_conv": "cache",
                         "codec_seanet": "measured", "gelu": "measured", "threads": "fixed",
                         "codec_pipeline": "cache", "codec_dtype": "fixed"}
    assert kinds(model.flow_lm) == {F32Linear} and elus(model) == {VocalisELU}
    model = fresh()  # and the next load keeps them
    again = tune(model, 2, 4, False, measure=never)
    assert again.choices == t.choices and set(again.sources.values()) <= {"cache", "fixed"}


def test_changed_key_measures_again(fresh, cache, monkeypatch):
    model = fresh()
    tune(model, 2, 4, False, measure=Scores(model, FAST_DEFAULT_FLOW))
    # another thread budget
    model = fresh()
    other = Scores(model, {("threads", "1:1"): 0.5})
    t = tune(model, 1, 4, False, measure=other)
    assert t.sources["flow_linears"] == "measured" and other.calls
    # another CPU (same threads as the first entry)
    real = tuning_mod.cpu_info()
    monkeypatch.setattr(tuning_mod, "cpu_info", lambda: {**real, "model": "Other CPU 9000"})
    model = fresh()
    moved = Scores(model, {("flow_linears", "packed"): 0.1, ("codec_linears", "default"): 0.1})
    t = tune(model, 2, 4, False, measure=moved)
    assert t.choices["flow_linears"] == "packed" and t.choices["codec_linears"] == "default"
    assert {t.sources[k] for k in ("flow_linears", "codec_linears", "codec_elu",
                                   "codec_pipeline")} == {"measured"}
    assert len(json.loads(cache.read_text())) == 3  # three keys, three entries


def test_forced_choice_wins_over_cache_and_measurement(fresh, cache, monkeypatch):
    model = fresh()
    tune(model, 2, 4, False, measure=Scores(model, FAST_DEFAULT_FLOW))  # caches codec packed
    model = fresh()
    t = tune(model, 2, 4, False, spec="codec_linears=default,threads=1:2,codec_elu=default",
             measure=never)
    assert t.choices == {"flow_linears": "default", "codec_linears": "default",
                         "codec_elu": "default", "codec_out_conv": "matmul",
                         "codec_seanet": "default", "gelu": "default",
                         "threads": "1:2", "codec_pipeline": "off", "codec_dtype": "float32"}
    assert t.sources == {"flow_linears": "cache", "codec_linears": "forced", "codec_elu": "forced",
                         "codec_out_conv": "cache",
                         "codec_seanet": "cache" if OWN_F32 else "fixed",
                         "gelu": "cache" if OWN_F32 else "fixed",
                         "threads": "forced", "codec_pipeline": "cache", "codec_dtype": "fixed"}
    assert kinds(model.mimi) == {torch.nn.Linear} and elus(model) == {torch.nn.ELU}
    # the environment variable forces the same way; "fixed" measures nothing
    monkeypatch.setenv("VOCALIS_TUNING", "flow_linears=packed")
    model = fresh()
    t = tune(model, 2, 4, False, measure=never)
    assert (t.choices["flow_linears"], t.sources["flow_linears"]) == ("packed", "forced")
    assert kinds(model.flow_lm) == {PackedLinear}
    t = tune(fresh(), 2, 4, False, spec="fixed,threads=2:1", measure=never)
    assert (t.choices["threads"], t.sources["threads"]) == ("2:1", "forced")
    t = tune(fresh(), 2, 4, False, spec="fixed", measure=never)
    assert set(t.sources.values()) == {"fixed"}
    assert t.choices == {"flow_linears": "packed", "codec_linears": "packed", "codec_elu": "exp",
                         "codec_out_conv": "default", "codec_seanet": "default",
                         "gelu": "default", "threads": "1:1",
                         "codec_pipeline": "on", "codec_dtype": "float32"}


def test_exact_models_keep_default_kernels_and_measure_nothing(fresh, cache):
    model = fresh()
    t = tune(model, 2, 4, True, measure=never)
    assert t.choices == {"flow_linears": "default", "codec_linears": "default",
                         "codec_elu": "default", "codec_out_conv": "default",
                         "codec_seanet": "default", "gelu": "default",
                         "threads": "1:1", "codec_pipeline": "on", "codec_dtype": "float32"}
    assert elus(model) == {torch.nn.ELU} and not model.mimi.decoder.fused
    assert not model.mimi.decoder.model[-1].by_matmul
    with pytest.raises(InputError, match=re.escape("gelu='vocalis' is not allowed here "
                                                   "(an exact model keeps PyTorch's GELU)")):
        tune(fresh(), 2, 4, True, spec="gelu=vocalis", measure=never)
    with pytest.raises(InputError, match=re.escape("codec_elu='exp' is not allowed here "
                                                   "(an exact model keeps nn.ELU)")):
        tune(fresh(), 2, 4, True, spec="codec_elu=exp", measure=never)
    with pytest.raises(InputError, match="flow_linears='packed' is not allowed"):
        tune(fresh(), 2, 4, True, spec="flow_linears=packed", measure=never)
    with pytest.raises(InputError, match="codec_dtype='bfloat16' is not allowed here "
                                         r"\(an exact model stays float32\)"):
        tune(fresh(), 2, 4, True, spec="codec_dtype=bfloat16", measure=never)
    packed = fresh()
    tune(packed, 2, 4, False, spec="fixed", measure=never)
    with pytest.raises(ValueError, match="unpacked"):  # once per model
        tune(packed, 2, 4, False, spec="fixed", measure=never)


@pytest.mark.parametrize("spec, message", [
    ("flow_linears=fast", "use one of packed, packed1, hybrid, default"
                          + (", vocalis" if OWN_F32 else "")),
    ("codec_linears=hybrid", "use one of packed, packed1, default"),
    ("flow_linears=packed,flow_linears=default", "flow_linears is given twice"),
    ("auto,fixed", "give one of 'auto' or 'fixed', not both"),
    ("threads=2:9", "threads='2:9' is not allowed here (the splits follow the thread "
                    "budget, 2)"),
    ("linears=packed", "unknown choice 'linears'; this model has: flow_linears, codec_linears"),
    ("threads=3:1", "threads='3:1' is not allowed"),
    ("packed", "is not name=value"),
])
def test_bad_forced_choices_name_the_fix(fresh, cache, spec, message):
    with pytest.raises(InputError, match=re.escape(message)):
        tune(fresh(), 2, 4, False, spec=spec, measure=never)


def test_real_calibration_measures_every_candidate_and_caches(checkpoints, cache,
                                                             monkeypatch):
    """The real clock, on the tiny config: only what was measured and stored is checked
    (not whether the machine was quiet: a busy one is the scripted tests' below)."""
    monkeypatch.setattr(tuning_mod, "SETTLED_SPREAD", float("inf"), raising=False)
    tts = vocalis.load(str(checkpoints.get(CONFIG)), threads=2, max_batch=4)
    try:
        t = tts.tuning
        assert t.sources == {"flow_linears": "measured", "codec_linears": "measured",
                             "codec_elu": "measured", "codec_out_conv": "measured",
                             "codec_seanet": SEANET_SOURCE, "gelu": GELU_SOURCE, "threads": "fixed",
                             "codec_pipeline": "measured", "codec_dtype": "fixed"}
        assert t.choices["threads"] == "1:1" and "threads" not in t.timings
        for name, options in (("flow_linears", FLOW),
                              ("codec_linears", CODEC),
                              ("codec_elu", ELU),
                              ("codec_out_conv", OUT_CONV),
                              *([("codec_seanet", SEANET), ("gelu", GELU)] if OWN_F32 else []),
                              ("codec_pipeline", ("on", "off"))):
            assert set(t.timings[name]) == set(options)
            assert all(v > 0 for v in t.timings[name].values())
            assert t.choices[name] == min(options, key=t.timings[name].get)
        assert tts.engine_family.thread_split(2) == tuple(map(int, t.choices["threads"].split(":")))
        assert tts.engine_family.codec_pipeline == (t.choices["codec_pipeline"] == "on")
        voice = str(checkpoints.get(CONFIG) / "voice.wav")
        audio = tts.synthesize("Hello there.", voice=voice, seed=1, max_frames=8)
        assert np.isfinite(audio.samples).all() and audio.samples.size == 8 * 1920
    finally:
        tts.close()
    again = vocalis.load(str(checkpoints.get(CONFIG)), threads=2, max_batch=4)
    again.close()
    assert set(again.tuning.sources.values()) == {"cache", "fixed"}
    assert again.tuning.sources["flow_linears"] == "cache"
    assert again.tuning.choices == t.choices


def test_every_choice_speaks_the_same(checkpoints, cache):
    """Kernels and thread splits change speed only: the same seeded request under other
    choices equals the exact model's output to float rounding."""
    d = str(checkpoints.get(CONFIG))
    voice = d + "/voice.wav"
    ref = vocalis.load(d, threads=2, exact=True)
    want = ref.synthesize("Choices change speed only.", voice=voice, seed=3,
                          max_frames=12).samples
    ref.close()
    for spec in ("flow_linears=packed,codec_linears=default,threads=2:1",
                 "flow_linears=default,codec_linears=packed,threads=1:2,codec_pipeline=off",
                 "flow_linears=packed,codec_linears=packed,threads=2:2",
                 "flow_linears=hybrid,codec_linears=packed1",
                 "flow_linears=packed1,codec_linears=default,codec_elu=exp",
                 "flow_linears=default,codec_linears=default,codec_elu=exp",
                 *(["flow_linears=vocalis,codec_linears=packed",
                    "flow_linears=default,codec_linears=vocalis,codec_elu=vocalis,gelu=vocalis"]
                   if OWN_F32 else [])):
        tts = vocalis.load(d, threads=2, tuning=spec)
        if spec.startswith("flow_linears=vocalis"):  # the bundle is bfloat16, as released:
            held = [m.weight is None for m in tts.model.flow_lm.modules()  # held so
                    if isinstance(m, F32Linear)]
            assert held and all(held)
        got = tts.synthesize("Choices change speed only.", voice=voice, seed=3,
                             max_frames=12).samples
        tts.close()
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=0, err_msg=spec)


def test_cli_reports_a_bad_tuning_in_one_line(checkpoints, tmp_path):
    out = subprocess.run([sys.executable, "-m", "vocalis.cli", "generate", "-t", "Hi.",
                          "--model", str(checkpoints.get(CONFIG)), "--voice",
                          str(checkpoints.get(CONFIG) / "voice.wav"), "-o",
                          str(tmp_path / "a.wav"), "--tuning", "threads=fast"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "threads='fast' is not allowed" in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_bfloat16_codec_is_opt_in_and_close_to_float32(checkpoints, cache):
    """codec_dtype=bfloat16 runs the SEANet decoder in bfloat16 (weights and streaming
    states): batched and streamed audio stays within bfloat16 rounding of float32."""
    d = str(checkpoints.get(CONFIG))
    voice = d + "/voice.wav"
    fp32 = vocalis.load(d, threads=2, tuning="fixed")
    texts = ["Choices change speed only.", "A second row beside it, a little longer."]
    want = [fp32.synthesize(t, voice=voice, seed=5 + i, max_frames=15).samples
            for i, t in enumerate(texts)]
    fp32.close()
    bf = vocalis.load(d, threads=2, tuning="fixed,codec_dtype=bfloat16")
    try:
        assert bf.tuning.choices["codec_dtype"] == "bfloat16"
        assert bf.tuning.sources["codec_dtype"] == "forced"
        assert next(bf.model.mimi.decoder.parameters()).dtype == torch.bfloat16
        reqs = [bf.submit(t, voice=voice, seed=5 + i, max_frames=15) for i, t in enumerate(texts)]
        for req, ref in zip(reqs, want):
            got = np.concatenate([ev.samples for ev in req.events(timeout=120)
                                  if hasattr(ev, "samples")])
            assert got.dtype == np.float32 and got.shape == ref.shape
            assert cosine(got, ref) > 0.999
            assert not np.array_equal(got, ref)  # it is bfloat16 arithmetic, not float32
    finally:
        bf.close()


def test_damaged_cache_entries_are_measured_again(fresh, cache):
    """A cache edited by hand or cut short: malformed parts are ignored, the model loads."""
    model = fresh()
    tune(model, 2, 4, False, measure=Scores(model, FAST_DEFAULT_FLOW))
    (key,) = json.loads(cache.read_text())
    for timings in (None, "flow_linears", [1, 2], {"flow_linears": 3}):
        entry = json.loads(cache.read_text())
        entry[key]["timings"] = timings
        cache.write_text(json.dumps(entry))
        t = tune(fresh(), 2, 4, False, measure=never)  # the choices themselves are fine
        assert t.sources["flow_linears"] == "cache"
    entry = json.loads(cache.read_text())
    entry[key]["choices"] = {"flow_linears": ["packed"], "codec_linears": None, "threads": 7}
    cache.write_text(json.dumps(entry))
    scores = Scores(model, FAST_DEFAULT_FLOW)
    t = tune(fresh(), 2, 4, False, measure=scores)
    assert t.sources["flow_linears"] == t.sources["codec_linears"] == "measured"
    for text in ("not json", "[1, 2, 3]"):
        cache.write_text(text)
        t = tune(fresh(), 2, 4, False, measure=Scores(model, FAST_DEFAULT_FLOW))
        assert t.sources["flow_linears"] == "measured"
    assert json.loads(cache.read_text())  # rewritten as a JSON object


def test_forcing_the_opt_in_codec_dtype_still_caches_the_measured_choices(fresh, cache):
    model = fresh()
    t = tune(model, 2, 4, False, spec="codec_dtype=bfloat16",
             measure=Scores(model, FAST_DEFAULT_FLOW))
    assert t.sources["flow_linears"] == "measured" and t.sources["codec_dtype"] == "forced"
    again = tune(fresh(), 2, 4, False, spec="codec_dtype=bfloat16", measure=never)
    assert again.sources["flow_linears"] == "cache"
    # a forced measurable choice makes the others' timings depend on it: they are cached
    # for loads forcing the same choice (a server restarted with it measures nothing); a
    # load forcing nothing does not use them
    cache.unlink()
    t = tune(fresh(), 2, 4, False, spec="threads=1:1", measure=Scores(model, FAST_DEFAULT_FLOW))
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["key"]["forced"] == {"threads": "1:1"} and "threads" not in entry["choices"]
    again = tune(fresh(), 2, 4, False, spec="threads=1:1", measure=never)
    assert again.choices == t.choices and again.sources["flow_linears"] == "cache"
    assert tune(fresh(), 2, 4, False, measure=Scores(model, FAST_DEFAULT_FLOW)).sources[
        "flow_linears"] == "measured"
    # a load forcing a choice with no entry of its own reads the unforced entry
    assert tune(fresh(), 2, 4, False, spec="threads=2:1",
                measure=never).sources["flow_linears"] == "cache"
    assert len(json.loads(cache.read_text())) == 2


# ---------------------------------------------------------------- Qwen3-TTS: the thread split

@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

    return write_random_checkpoint("qwen3-tts/0.6b-customvoice",
                                   tmp_path_factory.mktemp("qwen3-tuning") / "cv", seed=3, tiny=True)


def test_qwen3_choices_follow_scores_are_cached_applied_and_forced(qwen3_dir, cache, monkeypatch):
    from vocalis.models.qwen3.model import load_model
    from vocalis.models.qwen3.tuning import tune as tune_qwen3

    model = load_model(qwen3_dir)
    calls = []

    def model_kernels():
        return {type(m) for m in model.talker.modules()
                if type(m) in (torch.nn.Linear, PackedLinear)}

    def scores(name, value):
        calls.append((name, value))
        # the packed codec measured slower here: the default kernels must win and be applied
        assert model.decoder.packed == (name == "codec_linears" and value == "packed")
        if name == "model_linears":  # each kernel in place (every linear of the talker)
            own = {type(m) for m in model.talker.modules() if isinstance(m, F32Linear)}
            assert model_kernels() == {"default": {torch.nn.Linear}, "vocalis": set()}.get(
                value, {PackedLinear})
            assert own == ({F32Linear} if value == "vocalis" else set())
            return {"packed1": 1.0}.get(value, 5.0)
        return {"2:2": 1.0, "default": 1.0, "2": 1.0, "off": 1.0}.get(value, 5.0)

    both = {"model_linears": "measured", "codec_linears": "measured", "codec_frames": "measured",
            "threads": "measured", "lend": "measured"}
    t = tune_qwen3(model, 4, 4, False, measure=scores)  # 4 threads: the splits 3:1, 2:2, 1:3
    want = {"model_linears": "packed1", "codec_linears": "default", "codec_frames": "2",
            "threads": "2:2", "lend": "off"}
    assert (t.choices, t.sources) == (want, both)
    assert not model.decoder.packed
    assert model_kernels() == {PackedLinear}  # the talker runs the winner, laid out for 1 row
    assert {m.batch_hint for m in model.talker.modules() if isinstance(m, PackedLinear)} == {1}
    assert sorted(calls) == sorted([("model_linears", k)
                                    for k in ("packed", "packed1", "default", "vocalis")]
                                   + [("codec_linears", "default"), ("codec_linears", "packed")]
                                   + [("codec_frames", g) for g in ("1", "2", "4")]
                                   + [("threads", s) for s in ("3:1", "2:2", "1:3")]
                                   + [("lend", v) for v in ("on", "off")])
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["choices"] == want
    assert entry["key"]["model"]["family"] == "qwen3-tts" and entry["key"]["threads"] == 4
    # reused without measuring (on a model loaded again); another quantization is another
    # key, and a quantized model keeps its own kernels (model_linears is not measured)
    cached = {"model_linears": "cache", "codec_linears": "cache", "codec_frames": "cache",
              "threads": "cache", "lend": "cache"}
    model = load_model(qwen3_dir)
    assert tune_qwen3(model, 4, 4, False, measure=never).sources == cached
    assert model_kernels() == {PackedLinear}
    model = load_model(qwen3_dir)
    model.quantize_int8()
    calls.clear()
    t = tune_qwen3(model, 4, 4, False, measure=scores)
    assert t.sources == {**both, "model_linears": "fixed"}
    assert t.choices["model_linears"] == "default"
    # the int8 kernels may borrow the codec's idle core: measured, the faster kept
    assert ("lend", "on") in calls and ("lend", "off") in calls and t.choices["lend"] == "off"
    with pytest.raises(InputError, match=re.escape("model_linears='packed' is not allowed here "
                                                   "(a quantized model has its own kernels)")):
        tune_qwen3(model, 4, 4, False, spec="model_linears=packed", measure=never)
    assert len(json.loads(cache.read_text())) == 2
    # on 2 threads the only split of the budget is taken unmeasured
    calls.clear()
    t = tune_qwen3(model, 2, 4, False, measure=scores)
    assert (t.choices["threads"], t.sources["threads"]) == ("1:1", "fixed")
    assert not [c for c in calls if c[0] == "threads"]
    # forced (argument or environment) wins; exact models measure nothing
    forced = tune_qwen3(model, 2, 4, False, spec="threads=1:2,codec_linears=packed,codec_frames=4",
                        measure=never)
    assert forced.choices == {"model_linears": "default", "codec_linears": "packed",
                              "codec_frames": "4", "threads": "1:2", "lend": "off"}
    assert model.decoder.packed
    assert tune_qwen3(model, 2, 4, False, spec="lend=on", measure=never).choices["lend"] == "on"
    with pytest.raises(InputError, match=re.escape("lend='on' is not allowed here (a lent core "
                                                   "needs the CPU and a budget of two threads")):
        tune_qwen3(model, 1, 4, False, spec="lend=on", measure=never)
    monkeypatch.setenv("VOCALIS_TUNING", "threads=2:1")
    assert tune_qwen3(model, 2, 4, False, measure=never).sources["threads"] == "forced"
    monkeypatch.delenv("VOCALIS_TUNING")
    exact = load_model(qwen3_dir)
    t = tune_qwen3(exact, 2, 4, True, measure=never)
    assert (t.choices, t.sources) == (
        {"model_linears": "default", "codec_linears": "default", "codec_frames": "1",
         "threads": "1:1", "lend": "off"},
        {"model_linears": "fixed", "codec_linears": "fixed", "codec_frames": "fixed",
         "threads": "fixed", "lend": "fixed"})
    assert not exact.decoder.packed
    with pytest.raises(InputError, match=re.escape("lend='on' is not allowed here (an exact "
                                                   "model keeps the built-in threads)")):
        tune_qwen3(exact, 2, 4, True, spec="lend=on", measure=never)
    with pytest.raises(InputError, match=re.escape(
            "unknown choice 'flow_linears'; this model has: model_linears, codec_linears, "
            "codec_frames, threads, lend")):
        tune_qwen3(model, 2, 4, False, spec="flow_linears=packed", measure=never)


def test_qwen3_packed_model_linears_speak_the_same(qwen3_dir, cache):
    """The talker and predictor on oneDNN-packed weights (either layout) or our float32
    kernel (traced as the engine runs them) against the default kernels of an exact model:
    the same seeded
    request, alone and beside another, gives the same codes, and audio equal to float
    rounding."""

    ref = vocalis.load(str(qwen3_dir), threads=2, exact=True)
    texts = ["Packed or not, the same codes.", "A second request beside it."]
    speaker = ref.speakers[0]
    want = [ref.synthesize(t, speaker=speaker, seed=7 + i, max_frames=6)
            for i, t in enumerate(texts)]
    ref.close()
    for kernel in ("packed", "packed1", "vocalis"):  # vocalis: lent the codec's core
        tts = vocalis.load(str(qwen3_dir), threads=2, max_batch=2,
                           tuning=f"fixed,model_linears={kernel}")
        try:
            assert tts.model.talker.traced
            hints = {m.batch_hint for m in tts.model.talker.modules()
                     if isinstance(m, PackedLinear)}
            assert hints == {"packed": {16}, "packed1": {1}, "vocalis": set()}[kernel]
            assert any(isinstance(m, F32Linear) for m in tts.model.talker.modules()) == (
                kernel == "vocalis")
            if kernel == "vocalis":  # a bfloat16 checkpoint, as the official ones: every
                # linear holds its weights as bfloat16 (the kernel widens them exactly)
                held = [m.weight is None for m in tts.model.talker.modules()
                        if isinstance(m, F32Linear)]
                assert held and all(held)
                with pytest.raises(InputError, match="quantize when loading instead"):
                    tts.model.quantize("int8")
            alone = tts.synthesize(texts[0], speaker=speaker, seed=7, max_frames=6)
            reqs = [tts.submit(t, speaker=speaker, seed=7 + i, max_frames=6)
                    for i, t in enumerate(texts)]
            both = [np.concatenate([ev.samples for ev in r.events(timeout=300)
                                    if hasattr(ev, "samples")]) for r in reqs]
        finally:
            tts.close()
        assert [c["codes"] for c in alone.chunks] == [c["codes"] for c in want[0].chunks], kernel
        for got, ref_audio in zip([alone.samples] + both, [want[0], want[0], want[1]]):
            assert got.shape == ref_audio.samples.shape
            np.testing.assert_allclose(got, ref_audio.samples, atol=1e-4, rtol=0, err_msg=kernel)


def test_qwen3_real_calibration_sets_the_engine_split(qwen3_dir, cache):
    """The real clock on the tiny config: every split measured, the fastest kept, cached,
    and what the engine runs with; a bad forced split is one line at the CLI."""
    tts = vocalis.load(str(qwen3_dir), threads=2, max_batch=4)
    try:
        t = tts.tuning
        assert t.sources == {"model_linears": "measured", "codec_linears": "measured",
                             "codec_frames": "measured", "threads": "fixed", "lend": "measured"}
        assert set(t.timings["model_linears"]) == {"packed", "packed1", "default", "vocalis"}
        assert t.choices["model_linears"] == min(t.timings["model_linears"],
                                                 key=t.timings["model_linears"].get)
        assert tts.model.talker.traced  # traced again with the chosen kernels
        assert set(t.timings["codec_linears"]) == {"packed", "default"}
        assert set(t.timings["codec_frames"]) == {"1", "2", "4"}
        assert t.choices["codec_frames"] == min(t.timings["codec_frames"],
                                                key=t.timings["codec_frames"].get)
        assert tts.engine.codec_frames == int(t.choices["codec_frames"])
        assert tts.model.decoder.packed == (t.choices["codec_linears"] == "packed")
        assert t.choices["codec_linears"] == min(t.timings["codec_linears"],
                                                 key=t.timings["codec_linears"].get)
        # only splits of the budget are measured: on 2 threads 1:1 is the only one
        assert t.choices["threads"] == "1:1" and "threads" not in t.timings
        assert tts.engine_family.thread_split(2) == tuple(map(int, t.choices["threads"].split(":")))
        audio = tts.synthesize("Hello there.", speaker=tts.speakers[0], seed=1, max_frames=4)
        assert audio.samples.size == 4 * 1920 and np.isfinite(audio.samples).all()
    finally:
        tts.close()
    again = vocalis.load(str(qwen3_dir), threads=2, max_batch=4)
    again.close()
    assert again.tuning.sources == {"model_linears": "cache", "codec_linears": "cache",
                                    "codec_frames": "cache", "threads": "fixed", "lend": "cache"}
    assert again.tuning.choices == t.choices
    out = subprocess.run([sys.executable, "-m", "vocalis.cli", "generate", "-t", "Hi.",
                          "--model", str(qwen3_dir), "--speaker", tts.speakers[0],
                          "--tuning", "threads=7:7", "-o", str(cache.parent / "x.wav")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "threads='7:7' is not allowed" in out.stderr


def test_only_splits_of_the_budget_are_measured_and_others_may_be_forced(cache):
    """The measured splits give the two threads the budget together (model + codec ==
    threads), the built-in one first; every one of them may also be forced, as may the
    oversubscribing ones. A candidate that is not a contender is never measured or chosen,
    and a lone contender is taken without measuring."""
    assert measured_splits(1) == ("1:1",)
    assert measured_splits(2) == ("1:1",)
    assert measured_splits(4) == ("3:1", "2:2", "1:3")
    assert measured_splits(6) == ("4:2", "5:1", "3:3", "2:4", "1:5")
    for total in (1, 2, 3, 4, 6, 8):
        assert all(sum(tuning_mod.parse_split(s)) == total or total == 1
                   for s in measured_splits(total))
        assert set(measured_splits(total)) <= set(split_candidates(total))
    assert {"1:2", "2:2", "2:1"} <= set(split_candidates(2))

    calls = []

    def measure(name, value):
        calls.append((name, value))
        return {"a": 1.0, "b": 5.0, "c": 1.0, "d": 7.0}[value]

    t = tuning_mod.resolve({"k": 1}, {"x": ("a", "b", "c", "d"), "y": ("a", "b")},
                           {"x": "a", "y": "a"}, "auto", measure, lambda n, v: None,
                           contenders={"x": ("b", "d"), "y": ("b",)})
    assert t.choices == {"x": "b", "y": "b"} and t.timings == {"x": {"b": 5.0, "d": 7.0}}
    assert t.sources == {"x": "measured", "y": "fixed"} and calls == [("x", "b"), ("x", "d")]
    forced = tuning_mod.resolve({"k": 1}, {"x": ("a", "b", "c", "d")}, {"x": "a"}, "x=c",
                                never, lambda n, v: None, contenders={"x": ("b", "d")})
    assert (forced.choices, forced.sources) == ({"x": "c"}, {"x": "forced"})


def test_cli_generate_measures_its_choices_for_one_row(checkpoints, tmp_path):
    """``vocalis generate`` runs one request, which takes one engine row: its first run
    measures the speed choices for one row (not for a server's batch), and stores them so."""
    env = {**os.environ, "VOCALIS_CACHE": str(tmp_path / "cache")}
    env.pop("VOCALIS_TUNING", None)
    d = checkpoints.get(CONFIG)
    out = subprocess.run([sys.executable, "-m", "vocalis.cli", "generate", "-t", "Hi there.",
                          "--model", str(d), "--voice", str(d / "voice.wav"), "--seed", "1",
                          "--max-frames", "3", "--threads", "2", "-q",
                          "-o", str(tmp_path / "a.wav")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    entries = json.loads((tmp_path / "cache" / "tuning.json").read_text())
    assert [e["key"]["model"]["batch"] for e in entries.values()] == [1]
    assert entries.popitem()[1]["key"]["threads"] == 2


def test_quantized_load_refuses_forced_model_linears_before_converting(qwen3_dir, monkeypatch):
    """A quantized load that forces model_linears is refused with tune()'s message, before
    the weights are converted (the conversion of a real 0.6B model takes seconds)."""
    from vocalis.models.qwen3.model import Qwen3Model

    def converted(self, mode="int8"):
        raise AssertionError("the weights were converted before the tuning spec was checked")

    monkeypatch.setattr(Qwen3Model, "quantize", converted)
    msg = re.escape("model_linears='packed' is not allowed here (a quantized model has its own "
                    "kernels)")
    with pytest.raises(InputError, match=msg):
        vocalis.load(str(qwen3_dir), quantize="int8", tuning="model_linears=packed")
    monkeypatch.setenv("VOCALIS_TUNING", "model_linears=packed1")
    with pytest.raises(InputError, match=r"\$VOCALIS_TUNING.*model_linears='packed1'"):
        vocalis.load(str(qwen3_dir), quantize="int4")


def test_the_cache_key_does_not_depend_on_how_the_path_is_spelled(checkpoints, monkeypatch):
    """``ckpt``, ``/abs/ckpt`` and ``../x/ckpt`` name one checkpoint: one cache entry."""
    from vocalis.models.pocket.tuning import tuning_key

    ckpt = checkpoints.get(CONFIG)
    monkeypatch.chdir(ckpt.parent)
    spellings = [ckpt.name, str(ckpt.resolve()), f"../{ckpt.parent.name}/{ckpt.name}/config.yaml"]
    keys = []
    for spelling in spellings:
        tts = vocalis.load(spelling, tuning="fixed")
        keys.append(tuning_key(tts.model, 2, 1))
        tts.close()
    assert keys[0] == keys[1] == keys[2]


def test_a_quantized_model_measures_the_bfloat16_codec_and_float32_comes_back_exactly(
        fresh, cache):
    """With --quantize the codec's dtype is a measured choice like the others (the float32
    model keeps float32 unless forced); measuring bfloat16 and keeping float32 leaves the
    float32 weights bit for bit as they were."""
    model = fresh()
    model.quantize_int8()
    before = {k: v.clone() for k, v in model.mimi.decoder.state_dict().items()}
    slow16 = {**FAST_DEFAULT_FLOW, ("codec_dtype", "float32"): 1.0,
              ("codec_dtype", "bfloat16"): 2.0}
    scores = Scores(model, slow16)
    t = tune(model, 2, 4, False, measure=scores)
    assert (t.choices["codec_dtype"], t.sources["codec_dtype"]) == ("float32", "measured")
    assert [v for n, v in scores.calls if n == "codec_dtype"] == ["float32", "bfloat16"]
    after = model.mimi.decoder.state_dict()
    assert set(after) == set(before)
    for k, v in before.items():
        assert after[k].dtype == v.dtype and torch.equal(after[k], v), k
    assert json.loads(cache.read_text())  # cached with the others
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["choices"]["codec_dtype"] == "float32"
    cache.unlink()
    fast16 = {**FAST_DEFAULT_FLOW, ("codec_dtype", "float32"): 2.0,
              ("codec_dtype", "bfloat16"): 1.0}
    model = fresh()
    model.quantize_int8()
    t = tune(model, 2, 4, False, measure=Scores(model, fast16))
    assert (t.choices["codec_dtype"], t.sources["codec_dtype"]) == ("bfloat16", "measured")
    assert model.mimi.decoder_dtype() == torch.bfloat16
    cache.unlink()
    model = fresh()  # float32: never measured, whatever the scores
    scores = Scores(model, fast16)
    t = tune(model, 2, 4, False, measure=scores)
    assert (t.choices["codec_dtype"], t.sources["codec_dtype"]) == ("float32", "fixed")
    assert not [c for c in scores.calls if c[0] == "codec_dtype"]


def int8_kinds(module) -> set[type]:
    from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear

    return {type(m) for m in module.modules()
            if type(m) in (torch.nn.Linear, PackedLinear, DynamicInt8Linear)}


def test_a_quantized_model_measures_int8_codec_linears_for_its_decoder_transformer_only(
        fresh, cache):
    """With --quantize, codec_linears=int8 is a contender: when it wins, the Mimi decoder
    transformer's linears become int8 (weights per output channel) while the encoder
    transformer (voice states from audio) keeps its float32 linears untouched; a float32
    model never measures it, and forcing it there is refused."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear

    model = fresh()
    model.quantize_int8()
    before = {k: v.clone() for k, v in model.mimi.encoder_transformer.state_dict().items()}
    fast8 = {**FAST_DEFAULT_FLOW, ("codec_linears", "int8"): 0.5}
    scores = Scores(model, fast8)
    t = tune(model, 2, 4, False, measure=scores)
    assert (t.choices["codec_linears"], t.sources["codec_linears"]) == ("int8", "measured")
    assert {v for n, v in scores.calls if n == "codec_linears"} == {"int8", *CODEC}
    # int8 chosen: the decoder transformer holds int8 linears, the encoder its own
    assert int8_kinds(model.mimi.decoder_transformer) == {DynamicInt8Linear}
    assert int8_kinds(model.mimi.encoder_transformer) == {torch.nn.Linear}
    lin = model.mimi.decoder_transformer.transformer.layers[0].linear1
    assert lin.weight().qscheme() == torch.per_channel_affine  # a scale per output channel
    assert lin.weight().q_per_channel_scales().numel() == lin.weight().shape[0]
    after = model.mimi.encoder_transformer.state_dict()
    for k, v in before.items():
        assert torch.equal(after[k], v), k
    # the cached choice is applied again without measuring
    again = fresh()
    again.quantize_int8()
    t2 = tune(again, 2, 4, False, measure=never)
    assert (t2.choices["codec_linears"], t2.sources["codec_linears"]) == ("int8", "cache")
    assert int8_kinds(again.mimi.decoder_transformer) == {DynamicInt8Linear}
    # int8 losing: the packed layout, no int8 module left
    cache.unlink()
    model = fresh()
    model.quantize_int8()
    t = tune(model, 2, 4, False, measure=Scores(model, {**FAST_DEFAULT_FLOW,
                                                        ("codec_linears", "int8"): 3.0}))
    assert t.choices["codec_linears"] == "packed"
    assert int8_kinds(model.mimi.decoder_transformer) == {PackedLinear}
    # the default kernels winning after int8 was measured: the float32 linears, as loaded
    cache.unlink()
    model = fresh()
    model.quantize_int8()
    loaded = {k: v.clone() for k, v in model.mimi.decoder_transformer.state_dict().items()}
    t = tune(model, 2, 4, False, measure=Scores(model, {**FAST_DEFAULT_FLOW,
                                                        ("codec_linears", "default"): 0.1,
                                                        ("codec_linears", "int8"): 3.0}))
    assert t.choices["codec_linears"] == "default"
    assert int8_kinds(model.mimi.decoder_transformer) == {torch.nn.Linear}
    now = model.mimi.decoder_transformer.state_dict()
    assert set(now) == set(loaded) and all(torch.equal(now[k], v) for k, v in loaded.items())
    cache.unlink()
    model = fresh()  # float32: int8 is no candidate
    scores = Scores(model, fast8)
    t = tune(model, 2, 4, False, measure=scores)
    assert t.choices["codec_linears"] == "packed"
    assert ("codec_linears", "int8") not in scores.calls
    with pytest.raises(InputError, match="codec_linears='int8' is not allowed here"):
        tune(fresh(), 2, 4, False, spec="codec_linears=int8", measure=never)


def test_the_codec_dtype_is_measured_with_the_real_clock(fresh, cache):
    """The real measurement (a scratch batch per dtype) runs, and leaves the model in the
    dtype it chose."""
    model = fresh()
    model.quantize_int8()
    t = tune(model, 2, 4, False, spec="flow_linears=default,codec_linears=default,"
                                       "codec_elu=default,codec_pipeline=on")
    assert t.sources["codec_dtype"] == "measured"
    assert set(t.timings["codec_dtype"]) == {"float32", "bfloat16"}
    want = torch.bfloat16 if t.choices["codec_dtype"] == "bfloat16" else torch.float32
    assert model.mimi.decoder_dtype() == want


CORPUS = ["Choices change speed only.", "A second row beside it, a little longer.",
          "Numbers like 42 and 7 are read as words.", "Is this a question?",
          "Short.", "An exclamation, with a pause, then more words!",
          "The codec turns latents into a waveform, frame by frame.",
          "Quiet words at the end of a longer sentence fade out slowly."]


@pytest.mark.parametrize("layer_scale", [None, 1.0])
def test_the_quantized_path_with_a_quantized_codec_passes_its_gate(checkpoints, cache,
                                                                   layer_scale):
    """Issue 35's gate for a quantized codec (the decoder transformer in int8, the SEANet
    decoder in bfloat16, alone and together): against the same quantized model with a
    float32 codec (same seed), equal length and waveform cosine >= 0.999 on every text of
    the corpus (the codec does not feed back, so the frames and the end of speech are the
    same); the distribution is printed for the docs. ``layer_scale=1.0``: the decoder
    transformer's layer scales raised from their initial 0.01 to 1 in every model
    compared, so that its int8 error reaches the waveform undamped (a harder case than
    random weights at init)."""
    d = str(checkpoints.get(CONFIG))
    voice = d + "/voice.wav"
    fixed = "fixed,flow_linears=default,codec_elu=default"

    def run(spec: str) -> list[np.ndarray]:
        tts = vocalis.load(d, threads=2, quantize=True, tuning=fixed + spec)
        try:
            if layer_scale is not None:
                for layer in tts.model.mimi.decoder_transformer.transformer.layers:
                    layer.layer_scale_1.scale.data.fill_(layer_scale)
                    layer.layer_scale_2.scale.data.fill_(layer_scale)
            return [tts.synthesize(t, voice=voice, seed=11 + i, max_frames=12).samples
                    for i, t in enumerate(CORPUS)]
        finally:
            tts.close()

    want = run(",codec_linears=default,codec_dtype=float32")
    for spec in (",codec_linears=default,codec_dtype=bfloat16",
                 ",codec_linears=int8,codec_dtype=float32",
                 ",codec_linears=int8,codec_dtype=bfloat16"):
        got = run(spec)
        cos = []
        for g, w in zip(got, want):
            assert g.shape == w.shape
            cos.append(cosine(g, w))
        print("%s vs float32 codec (int8 model, layer scale %s), cosine: min %.6f median %.6f"
              % (spec[1:], layer_scale, min(cos), float(np.median(cos))))
        assert min(cos) >= 0.999
        assert not all(np.array_equal(g, w) for g, w in zip(got, want))  # it did change
