"""vocalis's C++ kernels are built once, on purpose (``vocalis kernels build``,
``vocalis.kernels.build()``), and only loaded afterwards (:mod:`vocalis.kernels.native`).

What is checked, with the real build, CLI and loading (in fresh processes where it matters:
a library loaded into this process stays loaded):

* a build into a temporary ``VOCALIS_CACHE`` (home not writable) gives one line per kernel,
  a library that a fresh process loads and runs, and ``vocalis kernels status`` before and
  after; a second build keeps it;
* with no kernel built, loading models offers no kernel candidate, logs one line per process
  naming ``vocalis kernels build`` (after a measured choice, not for fixed ones), never
  starts a compiler (a compiler that records its calls is first on PATH and in ``$CXX``;
  ``$TORCH_EXTENSIONS_DIR`` and the kernel cache stay empty);
  ``quantize="int4"`` and ``"int8"`` are refused with an InputError that names the fix, in
  Python and on the command line;
* bad input of ``vocalis kernels build`` (no compiler, a read-only cache, a compiler killed,
  Ctrl-C or SIGTERM half-way): exit 2, one line naming the cause and the fix, nothing
  loadable left behind;
* the instruction-set variant follows the CPU's features (x86, and 64-bit ARM: a machine told
  it is one builds and reports the NEON variants), and the int8 kernel's AVX-512 VNNI build
  gives its AVX2 build's results bit for bit (every instruction set, ARM's under emulation:
  ``tests/families/test_kernels_arm.py``).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import kernels_unbuildable
from vocalis.kernels import cpu, native

CLI = [sys.executable, "-m", "vocalis.cli"]
NEEDS_BUILD = pytest.mark.skipif(kernels_unbuildable() is not None,
                                 reason=f"{kernels_unbuildable()}")


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a fresh vocalis process with an empty kernel cache of its own."""
    env = {**os.environ, "VOCALIS_CACHE": str(tmp_path / "cache"), **extra}
    env.pop("XDG_CACHE_HOME", None)
    return env


def vocalis(args: list[str], env: dict[str, str], timeout: float = 300,
            prefix: list[str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*(prefix or []), *CLI, *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def error_line(r: subprocess.CompletedProcess) -> str:
    """The one line a failed command writes (asserting it is one)."""
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def loadable(cache: Path) -> list[Path]:
    """Libraries anywhere under the cache, and the leftovers of builds."""
    return sorted(cache.rglob("*.so")) + sorted(cache.rglob(".building-*"))


def fake_compiler(tmp_path: Path, body: str) -> Path:
    """An executable ``c++`` stand-in that answers ``--version`` and otherwise runs ``body``
    (sh), where ``$out`` is its ``-o`` path."""
    path = tmp_path / "bin" / "fake-c++"
    path.parent.mkdir(exist_ok=True)
    path.write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo 'fake c++ 1.0'; exit 0; }\n"
                    "out=\nprev=\nfor a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; "
                    f"prev=$a; done\n{body}\n")
    path.chmod(0o755)
    return path


# ------------------------------------------------------------------ build, status, load


@NEEDS_BUILD
def test_build_into_a_fresh_cache_then_status_and_load(tmp_path):
    env = env_for(tmp_path, HOME=str(tmp_path / "no-home"))  # nothing may be written there
    cache = tmp_path / "cache" / "kernels"
    before = vocalis(["kernels", "status"], env)
    assert before.returncode == 0, before.stderr
    assert f"cache:    {cache} ($VOCALIS_CACHE)" in before.stdout
    for mode in ("float32", "int8", "int4"):
        line = next(x for x in before.stdout.splitlines() if x.startswith(mode + " "))
        assert "  missing (" in line and "vocalis kernels build" in line, line

    r = vocalis(["kernels", "build", "--kernel", "int4"], env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("building the int4 kernel with "), lines
    assert lines[1].startswith("int4 kernel (vocalis_q4, avx2): built in "), lines
    lib = Path(lines[1].rsplit(": ", 1)[1])
    assert lib.is_file() and lib.parent.parent == cache and lib.name == "vocalis_q4.so"
    assert loadable(cache) == [lib]  # one library, no leftovers
    info = json.loads((lib.parent / "build.json").read_text())
    assert info["key"]["flags"] == ["-std=c++17", "-O3", "-mavx2", "-mfma", "-fopenmp"]
    assert not (tmp_path / "no-home").exists()

    again = vocalis(["kernels", "build", "-k", "vocalis_q4"], env)
    assert again.returncode == 0 and again.stdout.strip() == (
        f"int4 kernel (vocalis_q4, avx2): already built: {lib}"), again.stdout

    after = json.loads(vocalis(["kernels", "status", "--json"], env).stdout)
    states = {k["mode"]: (k["state"], k["path"]) for k in after["kernels"]}
    assert states["int4"] == ("built", str(lib))
    assert states["int8"][0] == states["float32"][0] == "missing"
    assert after["cache"] == str(cache) and "avx2" in after["cpu"]

    # a fresh process loads the library from this cache (never builds) and runs it
    script = ("import torch\nfrom vocalis.kernels import native\n"
              "assert native.load('int4') and not native.load('int8')\n"
              "p, s = torch.ops.vocalis_q4.pack(torch.ones(4, 256))\n"
              "print(native.loaded('int4'), tuple(p.shape), tuple(s.shape))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(lib), "(4,", "128)", "(4,", "8)"]


def test_the_variant_follows_the_cpu_features():
    avx2 = frozenset({"avx2", "fma", "sse4_2"})
    vnni = avx2 | {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"}
    q8 = native.KERNELS["vocalis_q8"].variants
    assert q8 == (cpu.AVX512_VNNI, cpu.AVX2, cpu.NEON_DOTPROD, cpu.NEON)  # best first
    assert cpu.choose(q8, "x86_64", vnni) is cpu.AVX512_VNNI
    assert cpu.choose(q8, "x86_64", avx2 | {"avx512f", "avx512vl"}) is cpu.AVX2  # no VNNI
    f32 = native.KERNELS["vocalis_f32"].variants
    assert f32 == (cpu.AVX512, cpu.AVX2, cpu.NEON)
    assert cpu.choose(f32, "x86_64", vnni) is cpu.AVX512
    assert cpu.choose(f32, "x86_64", avx2 | {"avx512f", "avx512vl", "avx512bw"}) is cpu.AVX512
    assert cpu.choose(f32, "x86_64", avx2 | {"avx512f", "avx512vl"}) is cpu.AVX2  # no BW
    assert cpu.choose(f32, "x86_64", avx2 | {"avx512f"}) is cpu.AVX2  # no VL
    assert cpu.choose((cpu.AVX2,), "x86_64", avx2) is cpu.AVX2
    assert cpu.choose((cpu.AVX2,), "x86_64", frozenset({"avx2"})) is None  # no FMA
    assert cpu.choose(q8, "aarch64", vnni | {"asimd"}) is cpu.NEON  # x86 names mean nothing
    assert cpu.choose(q8, "x86_64", frozenset({"asimd", "asimddp"})) is None
    assert cpu.AVX2.flags == ("-O3", "-mavx2", "-mfma", "-fopenmp")  # the measured build
    neon = frozenset({"fp", "asimd", "evtstrm", "crc32"})  # a Cortex-A72's (Raspberry Pi 4)
    dot = neon | {"asimdhp", "asimddp", "asimdrdm"}  # a Neoverse N1's (Graviton 2)
    for k in native.KERNELS.values():  # every kernel has the AVX2 build and the NEON build,
        # the least each machine type runs
        assert [v for v in k.variants if v.machines == cpu.X86][-1] is cpu.AVX2
        assert [v for v in k.variants if v.machines == cpu.ARM64][-1] is cpu.NEON
        assert cpu.choose(k.variants, "aarch64", neon) is cpu.NEON
        assert cpu.choose(k.variants, "arm64", neon) is cpu.NEON
        best = cpu.NEON_DOTPROD if cpu.NEON_DOTPROD in k.variants else cpu.NEON
        assert cpu.choose(k.variants, "aarch64", dot) is best
        assert cpu.choose(k.variants, "aarch64", frozenset({"fp"})) is None  # no NEON reported
        assert cpu.choose(k.variants, "riscv64", dot | avx2) is None
    assert cpu.choose(native.KERNELS["vocalis_f32"].variants, "aarch64", dot) is cpu.NEON
    assert cpu.choose(native.KERNELS["vocalis_q4"].variants, "aarch64", dot) is cpu.NEON_DOTPROD
    assert "-march=armv8.2-a+dotprod" in cpu.NEON_DOTPROD.flags
    assert "-march=armv8-a" in cpu.NEON.flags


@pytest.mark.parametrize("features,variants", [
    ("fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid asimdrdm lrcpc dcpop asimddp",
     {"float32": "neon", "int8": "neon-dotprod", "int4": "neon-dotprod"}),
    ("fp asimd evtstrm crc32 cpuid", {"float32": "neon", "int8": "neon", "int4": "neon"}),
], ids=["graviton2", "cortex-a72"])
def test_on_an_arm_machine_build_and_status_name_the_neon_variants(tmp_path, monkeypatch,
                                                                   features, variants):
    """What ``vocalis kernels status`` and ``build`` do on a 64-bit ARM Linux machine (this
    one told it is one: ``platform.machine()`` and ``/proc/cpuinfo``'s Features): every
    kernel is offered, each in the variant its CPU runs, built with that variant's -march
    (the compiler command, not run here: tests/families/test_kernels_arm.py compiles it)."""
    monkeypatch.setenv("VOCALIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cpu, "machine", lambda: "aarch64")
    monkeypatch.setattr(cpu, "features", lambda: frozenset(features.split()))
    # that machine has loaded nothing (earlier tests may have loaded this one's x86 builds)
    monkeypatch.setattr(native, "_loaded", {})
    monkeypatch.setattr(native, "_broken", {})
    status = native.status()
    assert status.cpu == f"aarch64 ({'asimd asimddp' if 'asimddp' in features else 'asimd'})"
    assert {k.mode: (k.state, k.variant) for k in status.kernels} == {
        mode: ("missing", v) for mode, v in variants.items()}
    for s in status.kernels:
        k = native.KERNELS[s.name]
        assert native.unsupported(s.name) is None
        assert s.path.parent.name.startswith(f"{k.name}-{s.variant}-")
        v = cpu.choose(k.variants)
        march = "-march=armv8.2-a+dotprod" if s.variant == "neon-dotprod" else "-march=armv8-a"
        cmd = native.command(["g++"], k, v, tmp_path / "out.so")
        assert march in cmd and "-ffp-contract=off" in cmd and "-mavx2" not in cmd
        assert native.build_key(k, v)["machine"] == "aarch64"


def test_a_cpu_without_a_variant_is_told_what_the_kernels_run_on(monkeypatch):
    monkeypatch.setattr(cpu, "machine", lambda: "riscv64")
    monkeypatch.setattr(cpu, "features", lambda: frozenset({"rv64imafdc"}))
    assert native.unsupported("int8") == (
        "vocalis's int8 kernel runs on an x86-64 CPU with AVX2 and FMA or a 64-bit ARM CPU "
        "(AArch64, NEON), and this CPU is riscv64 (no AVX2, AVX-512 or NEON)")
    assert {k.mode: k.state for k in native.status().kernels} == {
        "float32": "unsupported", "int8": "unsupported", "int4": "unsupported"}


INT8_OUTPUTS = r"""
import sys, torch
torch.ops.load_library(sys.argv[1])
out, g = {}, torch.Generator().manual_seed(0)
for threads in (1, 2):
    torch.set_num_threads(threads)
    for k, n in ((96, 40), (100, 42), (1024, 1030), (13, 7)):
        w = torch.randn(n, k, generator=g)
        t, s, z = torch.ops.vocalis_q8.pack(w)
        for m in (1, 3, 13, 60):
            x = torch.randn(m, k, generator=g)
            out[f"{threads}-{k}-{n}-{m}"] = torch.ops.vocalis_q8.linear(x, t, s, z)
            out[f"{threads}-{k}-{n}-{m}-3d"] = torch.ops.vocalis_q8.linear(x[None], t, s, z)
torch.save(out, sys.argv[2])
"""


@NEEDS_BUILD
@pytest.mark.skipif(not cpu.supports(cpu.AVX512_VNNI), reason="needs a CPU with AVX-512 VNNI")
def test_the_avx512_vnni_int8_build_gives_the_avx2_results_bit_for_bit(tmp_path, monkeypatch,
                                                                       built_kernels):
    """This CPU loads the avx512vnni build of the int8 kernel (the session's); the avx2
    build, which every x86 CPU with AVX2 loads, gives the same outputs bit for bit (padded
    and full tiles, row groups of 4 and their remainders, 1 and 2 threads)."""
    vnni = native.loaded("int8")
    assert vnni is not None and vnni.parent.name.startswith("vocalis_q8-avx512vnni-")
    monkeypatch.setenv("VOCALIS_CACHE", str(tmp_path / "cache"))
    [avx2] = native.build(["int8"], variant="avx2")
    assert avx2.state == "built" and avx2.path.parent.name.startswith("vocalis_q8-avx2-")
    outputs = []
    for lib in (vnni, avx2.path):
        outputs.append(tmp_path / f"{lib.parent.name}.pt")
        r = subprocess.run([sys.executable, "-c", INT8_OUTPUTS, str(lib), str(outputs[-1])],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    import torch

    a, b = (torch.load(p) for p in outputs)
    assert a.keys() == b.keys() and len(a) == 64
    assert [k for k in a if not torch.equal(a[k], b[k])] == []


# ------------------------------------------------------------------ nothing built


LOADS = r"""
import json, logging, sys, time
import vocalis
from vocalis.errors import InputError

lines = []
class Keep(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())
logging.getLogger("vocalis").addHandler(Keep())
logging.getLogger("vocalis").setLevel(logging.INFO)
pocket, qwen = sys.argv[1], sys.argv[2]
POCKET = "codec_linears=default,codec_elu=default,threads=1:1,codec_pipeline=on"
QWEN = "codec_linears=default,codec_frames=1,threads=1:1,lend=off"
report = {"refused": {}}
t0 = time.perf_counter()
with vocalis.load(pocket, threads=2, tuning="fixed") as tts:  # nothing measured: no news
    report["said_when_fixed"] = [x for x in lines if "not offered" in x]
# the kernel candidates measured (the other choices forced, to be quick)
with vocalis.load(pocket, threads=2, tuning=POCKET) as tts:
    report["pocket"] = tts.tuning.choices["flow_linears"]
with vocalis.load(pocket, threads=2, tuning=POCKET) as tts:  # from the cache
    pass
with vocalis.load(qwen, threads=2, tuning=QWEN) as tts:
    report["qwen3"] = tts.tuning.choices["model_linears"]
report["load_s"] = time.perf_counter() - t0
for spec, model in (("flow_linears=vocalis", pocket), ("model_linears=vocalis", qwen)):
    try:
        vocalis.load(model, threads=2, tuning=spec)
    except InputError as e:
        report["refused"][spec] = str(e)
for mode in ("int4", "int8"):
    try:
        vocalis.load(qwen, threads=2, quantize=mode)
    except InputError as e:
        report["refused"][mode] = [e.param, str(e)]
report["lines"] = [x for x in lines if "not offered" in x or "kernel" in x]
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def unbuilt(tmp_path_factory, checkpoints):
    """Loads of a Pocket and a Qwen3 model in a fresh process with an empty kernel cache and
    a compiler (first on PATH, and ``$CXX``) that only records that it was called."""
    from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

    tmp = tmp_path_factory.mktemp("unbuilt")
    qwen = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp / "qwen", seed=4, tiny=True)
    called = tmp / "compiler-called"
    compiler = fake_compiler(tmp, f"echo \"$@\" >> {called}\nexit 1")
    for name in ("c++", "g++", "clang++", "cc", "gcc", "ninja"):
        (compiler.parent / name).symlink_to(compiler)
    env = env_for(tmp, CXX=str(compiler), TORCH_EXTENSIONS_DIR=str(tmp / "torch_extensions"),
                  PATH=f"{compiler.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("VOCALIS_TUNING", None)
    r = subprocess.run([sys.executable, "-c", LOADS, str(checkpoints.get("english_2m_2026-10")),
                        str(qwen)], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    cli = vocalis(["generate", "--model", str(qwen), "--text", "Hi.", "--speaker", "ryan",
                   "--quantize-mode", "int4", "-o", str(tmp / "a.wav")], env)
    return {"report": json.loads(r.stdout), "tmp": tmp, "called": called, "cli": cli}


def test_a_load_with_nothing_built_offers_no_kernel_and_never_compiles(unbuilt):
    report, tmp = unbuilt["report"], unbuilt["tmp"]
    assert not unbuilt["called"].exists()  # no compiler was started, by us or by torch
    assert not (tmp / "torch_extensions").exists()
    assert loadable(tmp / "cache") == []
    assert report["load_s"] < 120  # two small models, one choice measured for each
    assert report["pocket"] != "vocalis" and report["qwen3"] != "vocalis"
    # one line in the whole process (two models, four loads, two measured), naming the fix
    assert report["said_when_fixed"] == []
    said = [x for x in report["lines"] if "not offered" in x]
    assert len(said) == 1, report["lines"]
    assert said[0].startswith("flow_linears=vocalis is not offered: vocalis's float32 kernel is "
                              "not built") and "`vocalis kernels build`" in said[0]
    # forcing the candidate says why it is not there
    for spec in ("flow_linears=vocalis", "model_linears=vocalis"):
        msg = report["refused"][spec]
        assert f"{spec.replace('=', '=' + chr(39))}' is not allowed here" in msg, msg
        assert "float32 kernel is not built" in msg and "`vocalis kernels build`" in msg, msg


def test_a_quantized_pocket_load_says_nothing_of_the_float32_kernel(checkpoints, tmp_path):
    """Our float32 kernel is never a candidate for a quantized Pocket FlowLM (its linears
    are int8), built or not: its load does not tell the user to build it for that (it did,
    and said the kernel was not built when it was); it names only the codec's ELU, which the
    kernel would run (float32 there). The float32 load beside it, whose FlowLM choice it
    would have been, names the FlowLM's."""
    env = env_for(tmp_path)  # an empty kernel cache: nothing built there
    env.pop("VOCALIS_TUNING", None)
    ck = checkpoints.get("english_2m_2026-10")
    args = ["generate", "--model", str(ck), "--voice", str(ck / "voice.wav"), "--text", "Hi."]
    r = vocalis(args + ["--quantize", "-o", str(tmp_path / "q.wav")], env)
    assert r.returncode == 0, r.stderr
    assert "tuning measured" in r.stderr, r.stderr  # measured, not fixed
    said = [x for x in r.stderr.splitlines() if "not offered" in x]
    assert len(said) == 1 and said[0].startswith("codec_elu=vocalis is not offered: "), r.stderr
    assert "flow_linears=vocalis" not in r.stderr, r.stderr
    r = vocalis(args + ["-o", str(tmp_path / "f.wav")], env)
    assert r.returncode == 0, r.stderr
    assert "flow_linears=vocalis is not offered" in r.stderr, r.stderr


def test_quantize_without_its_kernel_is_refused_naming_the_fix(unbuilt):
    for mode in ("int4", "int8"):
        param, msg = unbuilt["report"]["refused"][mode]
        assert param == "quantize", msg
        assert msg.startswith(f"quantize='{mode}' needs vocalis's {mode} kernel, which is not "
                              "built for this machine in "), msg
        assert msg.endswith("build vocalis's kernels once with `vocalis kernels build`; or "
                            "drop quantize"), msg
    line = error_line(unbuilt["cli"])
    assert "quantize='int4' needs vocalis's int4 kernel" in line
    assert "`vocalis kernels build`" in line
    assert not (unbuilt["tmp"] / "a.wav").exists()


# ------------------------------------------------------------------ bad input of the build


def test_build_without_a_compiler_says_how_to_get_one(tmp_path):
    env = env_for(tmp_path, PATH=str(tmp_path / "empty"))
    env.pop("CXX", None)
    line = error_line(vocalis(["kernels", "build"], env))
    assert "no C++ compiler found" in line and "apt-get install g++" in line, line
    assert loadable(tmp_path / "cache") == []
    missing = error_line(vocalis(["kernels", "build"], {**env, "CXX": "no-such-c++ -O2"}))
    assert "$CXX is 'no-such-c++ -O2', which is not a program on PATH" in missing, missing


def _read_only_prefix(folder: Path) -> list[str] | None:
    """A command prefix under which ``folder`` is read-only: none needed for a user that
    permissions stop; for root (whom they do not) a read-only bind mount in a mount
    namespace of its own, where that is allowed; None otherwise."""
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    if os.geteuid() != 0:
        return []
    prefix = ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"',
              str(folder)]
    try:
        probe = subprocess.run([*prefix, "touch", str(folder / "probe")], capture_output=True,
                               timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return prefix if probe.returncode != 0 and not (folder / "probe").exists() else None


def test_build_into_a_read_only_cache_is_refused_in_one_line(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    prefix = _read_only_prefix(cache)
    if prefix is None:
        pytest.skip("no way to make a folder read-only for root here (unshare, mount)")
    r = vocalis(["kernels", "build"], env_for(tmp_path), prefix=prefix)
    line = error_line(r)
    assert f"error: cannot write the kernel cache {cache / 'kernels'} (" in line, line
    assert "set VOCALIS_CACHE to a writable folder" in line, line
    assert list(cache.iterdir()) == []


@NEEDS_BUILD
def test_a_compiler_killed_half_way_installs_nothing(tmp_path):
    # the compiler writes part of the library, then dies as an out-of-memory kill would
    compiler = fake_compiler(tmp_path, 'printf "\\177ELF half" > "$out"\nkill -KILL $$')
    env = env_for(tmp_path, CXX=str(compiler))
    line = error_line(vocalis(["kernels", "build", "-k", "int4"], env))
    assert ("the C++ compiler was killed by SIGKILL (SIGKILL: out of memory?) while building "
            "vocalis's int4 kernel; nothing was installed: run `vocalis kernels build` "
            "again") in line, line
    assert loadable(tmp_path / "cache") == []
    status = json.loads(vocalis(["kernels", "status", "--json"], env).stdout)
    assert {k["mode"]: k["state"] for k in status["kernels"]}["int4"] == "missing"


@NEEDS_BUILD
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_build_leaves_nothing_loadable(tmp_path, sig):
    started = tmp_path / "started"
    compiler = fake_compiler(tmp_path, f'printf "\\177ELF half" > "$out"\ntouch {started}\n'
                                       "exec sleep 120")
    env = env_for(tmp_path, CXX=str(compiler))
    # two compilers at a time; SIGINT as a terminal delivers it (a shell's background job,
    # which pytest may be, would pass it on ignored)
    proc = subprocess.Popen([*CLI, "kernels", "build", "-j", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        assert loadable(tmp_path / "cache")  # half-built, in its temporary folder
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    line = error_line(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert line.startswith("error: interrupted while building the "), line
    assert line.endswith("kernels; nothing half-built was kept: run `vocalis kernels build` "
                         "again"), line
    assert loadable(tmp_path / "cache") == []
