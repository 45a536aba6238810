"""Qwen3-TTS talker, prompts, sampling and generation against the official qwen-tts==0.1.1.

Tiny random checkpoints of the five released variants are written by vocalis's
``write_random_talker``; the official package (its own venv, ``VOCALIS_QWEN_PYTHON``) loads
the same files with transformers' loader and runs its ``Qwen3TTSModel.generate_*`` methods
(tests/qwen3/qwen_official/talker_run.py). Both sides tokenize with one small byte-level BPE
trained here, whose special tokens sit at the ids the tiny config uses.
"""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest
import torch

from vocalis.errors import InputError
from vocalis.models.qwen3.generate import generate_codes, seeded_generator
from vocalis.models.qwen3.prompt import (assistant_text, build_prompt, custom_voice_prompt, instruct_text,
                                         ref_text_template, voice_clone_prompt, voice_design_prompt)
from vocalis.models.qwen3.random_talker import TINY_TEXT_IDS, VARIANTS, talker_config, write_random_talker
from vocalis.models.qwen3.sampling import HARD_DEFAULTS, GenerationParams
from vocalis.models.qwen3.talker import load_talker

SCRIPT = Path(__file__).parent / "qwen_official" / "talker_run.py"
ENV_VAR = "VOCALIS_QWEN_PYTHON"
TEXT = "Hello world, this is a test of the talker."
FRAMES = 30  # greedy and sampled runs: max_new_tokens = FRAMES + 1 gives FRAMES frames


def official_python() -> str:
    path = os.environ.get(ENV_VAR) or "/work/.venv-qwen/bin/python"
    if not (Path(path).is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"no interpreter with qwen-tts==0.1.1 at {path}: build a venv with `pip install "
                    f"qwen-tts==0.1.1 --no-deps transformers==4.57.3 accelerate==1.12.0 librosa soundfile einops "
                    f"sox onnxruntime` and set {ENV_VAR} to its python (.ci/run does it)", pytrace=False)
    return path


def write_tokenizer(path: Path):
    """Byte-level BPE (tokenizers) with the tiny config's special tokens at their ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [TEXT, "assistant", "user", "Speak slowly and calmly.", "A deep warm voice.", "hello there friend"] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    vocab = {**tok.get_vocab(), **TINY_TEXT_IDS}
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
              for m in json.loads(tok.to_str())["model"]["merges"]]
    assert max(tok.get_vocab().values()) < min(TINY_TEXT_IDS.values())
    out = Tokenizer(models.BPE(vocab, merges))
    out.pre_tokenizer, out.decoder = tok.pre_tokenizer, tok.decoder
    out.add_special_tokens(list(TINY_TEXT_IDS))
    assert all(out.token_to_id(t) == i for t, i in TINY_TEXT_IDS.items())
    out.save(str(path))
    return out


def xvector(talker, seed=5):
    return torch.randn(talker.spec.talker.hidden_size, generator=torch.Generator().manual_seed(seed))


def ref_code(n, seed=6):
    return torch.randint(0, 2048, (n, 16), generator=torch.Generator().manual_seed(seed))


def prompt_cases(variant: str, talker) -> list[dict]:
    """Every mode the variant has: languages (incl. auto and the dialect rule), speakers,
    instruct, x-vector, ICL (text longer and shorter than the reference), both
    non_streaming_mode values and the official defaults (argument left out)."""
    if variant.endswith("customvoice"):
        kws = [dict(speaker="Ryan", language="English"),
               dict(speaker="eric", non_streaming_mode=False),  # auto -> sichuan dialect
               dict(speaker="Dylan", language="chinese", instruct="Speak slowly and calmly."),
               dict(speaker="vivian", language="Auto", non_streaming_mode=False, instruct="A deep warm voice."),
               dict(speaker="eric", language="english", non_streaming_mode=True)]
        return [dict(method="custom_voice", kwargs=dict(text=TEXT, **k)) for k in kws]
    if variant.endswith("voicedesign"):
        kws = [dict(instruct="A deep warm voice.", language="English"),
               dict(instruct="Speak slowly and calmly.", non_streaming_mode=False)]
        return [dict(method="voice_design", kwargs=dict(text=TEXT, **k)) for k in kws]
    xv = xvector(talker)
    cases = [dict(kwargs=dict(language="English")), dict(kwargs=dict(non_streaming_mode=True)),
             dict(kwargs=dict(language="german"), ref_code=ref_code(2), ref_text="hello there friend"),
             dict(kwargs=dict(non_streaming_mode=False), ref_code=ref_code(40), ref_text="hello there friend"),
             dict(kwargs=dict(non_streaming_mode=True), ref_code=ref_code(3), ref_text="hello there friend")]
    return [dict(method="voice_clone", xvector=xv, **{**c, "kwargs": dict(text=TEXT, **c["kwargs"])}) for c in cases]


def vocalis_prompt(talker, tok, case):
    enc = lambda s: torch.tensor([tok.encode(s).ids])  # noqa: E731
    kw = {k: x for k, x in case["kwargs"].items() if k not in HARD_DEFAULTS}
    ids = enc(assistant_text(kw.pop("text")))
    if "instruct" in kw:
        kw["instruct_ids"] = enc(instruct_text(kw.pop("instruct")))
    if case["method"] == "custom_voice":
        return custom_voice_prompt(talker, ids, **kw)
    if case["method"] == "voice_design":
        return voice_design_prompt(talker, ids, **kw)
    if case.get("ref_code") is not None:
        kw.update(ref_ids=enc(ref_text_template(case["ref_text"])), ref_codes=case["ref_code"])
    return voice_clone_prompt(talker, ids, case["xvector"], **kw)


class Variant:
    """A tiny checkpoint of one variant, its vocalis talker, and the official results."""

    def __init__(self, root: Path, variant: str, eos_scale: float = 1.0, dtype: str = "float32"):
        self.dir = root / f"{variant}-eos{eos_scale}-{dtype}"
        write_random_talker(self.dir, talker_config(variant, tiny=True), seed=VARIANTS.index(variant),
                            eos_scale=eos_scale)
        self.tok = write_tokenizer(self.dir / "tokenizer.json")
        self.talker = load_talker(self.dir, dtype=getattr(torch, dtype))
        self.prompts = prompt_cases(variant, self.talker)
        first = self.prompts[0]
        second = self.prompts[min(2, len(self.prompts) - 1)]
        self.frames = ref_code(6, seed=7)
        greedy = dict(do_sample=False, subtalker_dosample=False, max_new_tokens=FRAMES + 1)
        sampled = dict(max_new_tokens=FRAMES + 1)
        if variant == "1.7b-customvoice":  # every sampler stage switched on, off-default values
            sampled.update(top_p=0.7, subtalker_top_p=0.9, temperature=1.3, top_k=0, subtalker_top_k=20,
                           repetition_penalty=1.3)
        self.cases = ([dict(c, kind="prompt") for c in self.prompts]
                      + [dict(first, kind="logits", frames=self.frames)]
                      + [dict(first, kind="codes", kwargs={**first["kwargs"], **greedy})]
                      + [dict(second, kind="codes", seed=1234, kwargs={**second["kwargs"], **sampled})])
        self._official = None

    @property
    def official(self) -> dict[int, dict]:
        """Results of the official runner for ``self.cases`` (run once, on first use)."""
        if self._official is None:
            self._official = self._run_official()
        return self._official

    def _run_official(self) -> dict[int, dict]:
        dtype = str(self.talker.dtype).removeprefix("torch.")
        torch.save(self.cases, self.dir / "cases.pt")
        proc = subprocess.run([official_python(), str(SCRIPT), str(self.dir), str(self.dir / "cases.pt"),
                               str(self.dir / "official.pt"), dtype], capture_output=True, text=True, timeout=900,
                              env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                                   "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
        if proc.returncode != 0:
            pytest.fail(f"official talker_run.py failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        return dict(enumerate(torch.load(self.dir / "official.pt", weights_only=False)))

    def results(self, kind):
        return [(c, self.official[i]) for i, c in enumerate(self.cases) if c["kind"] == kind]


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("qwen3-talker")
    made: dict[tuple, Variant] = {}

    def get(name: str, eos_scale: float = 1.0, dtype: str = "float32") -> Variant:
        if (name, eos_scale, dtype) not in made:
            made[name, eos_scale, dtype] = Variant(root, name, eos_scale, dtype)
        return made[name, eos_scale, dtype]

    return get


@pytest.mark.slow  # one official subprocess per checkpoint (~1 min on 2 cores)
@pytest.mark.parametrize("variant", VARIANTS)
def test_prompt_embeddings_match_official(variants, variant):
    v = variants(variant)
    worst = 0.0
    for case, off in v.results("prompt"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mine = vocalis_prompt(v.talker, v.tok, case)
        dropped = variant == "0.6b-customvoice" and "instruct" in case["kwargs"]
        assert any("ignores instruct" in str(w.message) for w in caught) == dropped
        assert off["mask"].all(), "batch 1 has no padding"
        for name in ("prefill", "trailing", "tts_pad"):
            ref, got = off[name], getattr(mine, name)
            assert got.shape == ref.shape, (case["kwargs"], name, got.shape, ref.shape)
            assert (got - ref).abs().max().item() <= 1e-5, (case["kwargs"], name)
            worst = max(worst, (got - ref).abs().max().item())
    print(f"{variant}: prompt embeddings max diff {worst:.2e} over {len(v.results('prompt'))} modes")


@pytest.mark.slow  # one official subprocess per checkpoint (~1 min on 2 cores)
@pytest.mark.parametrize("variant", VARIANTS)
def test_teacher_forced_logits_match_official(variants, variant):
    """Prefill over prompt + 6 given frames, and the same by one-step decodes on the static
    cache, against the official talker's full forward."""
    v = variants(variant)
    (case, off), = v.results("logits")
    prompt = vocalis_prompt(v.talker, v.tok, case)
    n = prompt.prefill.shape[1]
    embeds = v.talker.frame_embed(v.frames[None])
    trailing = torch.cat([prompt.trailing[:, :6], prompt.tts_pad.expand(1, max(0, 6 - prompt.trailing.shape[1]), -1)], 1)
    seq = torch.cat([prompt.prefill, embeds + trailing], dim=1)
    with torch.no_grad():
        full, _ = v.talker.prefill(seq, v.talker.new_cache(1, 8))
        cache = v.talker.new_cache(1, 4)  # too small on purpose: the cache regrows
        first, _ = v.talker.prefill(prompt.prefill, cache)
        steps = [v.talker.decode(seq[:, n + i:n + i + 1], cache, n + i)[0] for i in range(6)]
    ref = off["logits"]
    assert full.shape == ref.shape
    print(f"{variant}: teacher-forced logits max diff prefill {(full - ref).abs().max().item():.2e}, "
          f"stepped {(torch.cat([first[:, -1:], torch.stack(steps, 1)[:, :-1]], 1) - ref[:, n - 1:-1]).abs().max().item():.2e}")
    assert (full - ref).abs().max().item() <= 1e-4
    stepped = torch.cat([first[:, -1:], torch.stack(steps, 1)[:, :-1]], 1)
    assert (stepped - ref[:, n - 1:-1]).abs().max().item() <= 1e-4


@pytest.mark.slow  # one official subprocess per checkpoint (~1 min on 2 cores)
@pytest.mark.parametrize("variant", VARIANTS)
def test_greedy_codes_match_official(variants, variant):
    v = variants(variant)
    (case, off), = v.results("codes")[:1]
    mine = run_case(v, case)
    assert 0 < off["codes"].shape[0] <= FRAMES and off["codes"].shape[1] == 16
    assert torch.equal(mine, off["codes"])
    assert torch.equal(traced(v.talker, lambda: run_case(v, case)), off["codes"])


def traced(talker, fn):
    """``fn()`` with the talker's TorchScript graphs in use (``Talker.trace``)."""
    talker.trace()
    try:
        return fn()
    finally:
        talker.untrace()


def assert_traced_equals_eager(talker, batch: int) -> None:
    """The traced talker step and predictor positions give the eager results bit for bit:
    logits, hidden states, the KV cache (grown past its first capacity on the way) and
    greedy codes, at ``batch`` rows (the graphs are recorded at one row)."""
    gen = torch.Generator().manual_seed(batch)
    h = talker.spec.talker.hidden_size
    emb = torch.randn(batch, 7, h, generator=gen)
    steps = [torch.randn(batch, 1, h, generator=gen) for _ in range(4)]
    hid = torch.randn(batch, 1, h, generator=gen)
    c0 = talker.codec_embed(torch.randint(0, talker.spec.predictor_vocab_size, (batch, 1),
                                          generator=gen))

    def run():
        cache = talker.new_cache(batch, 8)
        out = [talker.prefill(emb, cache)]
        out += [talker.decode(s, cache, 7 + i) for i, s in enumerate(steps)]  # slots 7..10
        cp = talker.code_predictor
        out.append(cp.prefill(torch.cat((hid, c0), dim=1), cp.new_cache(batch)))
        out.append(cp.predict(hid, c0, lambda logits: logits.argmax(-1)))
        return out, cache.k, cache.v

    with torch.inference_mode():
        eager = run()
        graph = traced(talker, run)
    flat = lambda r: [t for x in r[0] for t in (x if isinstance(x, tuple) else (x,))] + [r[1], r[2]]
    for a, b in zip(flat(eager), flat(graph), strict=True):
        assert a.shape == b.shape and torch.equal(a, b)
    assert not talker.traced and not talker.code_predictor.model.traced  # untraced again


def test_fused_rms_norm_and_rolled_rope_are_the_official_formulas_bit_for_bit():
    """The float32 RMSNorm (one ``F.rms_norm`` kernel) and RoPE (``roll`` with a signed sin)
    equal the official formulas (``modeling:596-610``, ``rotate_half`` at ``660-724``),
    written out here, bit for bit."""
    from vocalis.models.qwen3.talker import RMSNorm, _rope_apply, _signed_sin, rope_tables

    gen = torch.Generator().manual_seed(0)
    for dim, shape in ((1024, (3, 7, 1024)), (128, (2, 5, 16, 128))):
        norm = RMSNorm(dim, 1e-6)
        with torch.no_grad():
            norm.weight.copy_(torch.randn(dim, generator=gen))
        x = torch.randn(*shape, generator=gen) * 3
        h = x.to(torch.float32)
        want = norm.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)
        assert torch.equal(norm(x), want)
    q = torch.randn(2, 16, 5, 128, generator=gen)
    cos, sin = rope_tables(1e6, 128, torch.arange(3, 8), torch.float32)
    rotated = torch.cat((-q[..., 64:], q[..., :64]), dim=-1)
    assert torch.equal(_rope_apply(q, cos, _signed_sin(sin)), q * cos + rotated * sin)


@pytest.mark.parametrize("batch", [1, 3])
def test_traced_steps_equal_eager_bit_for_bit(variants, batch):
    assert_traced_equals_eager(variants("0.6b-customvoice").talker, batch)


def run_case(v: Variant, case: dict, seed: int | None = None) -> torch.Tensor:
    params = GenerationParams.resolve(json.loads((v.dir / "generation_config.json").read_text()),
                                      **{k: x for k, x in case["kwargs"].items() if k in HARD_DEFAULTS})
    gen = None if seed is None else seeded_generator(seed)
    return generate_codes(v.talker, vocalis_prompt(v.talker, v.tok, case), params, gen)


@pytest.mark.slow  # one official subprocess per checkpoint (~1 min on 2 cores)
def test_eos_ends_generation_as_official(variants):
    """A checkpoint whose EOS row is scaled up stops early: the frames before EOS, EOS
    itself never gets a frame, greedy and seeded."""
    v = variants("0.6b-customvoice", eos_scale=3.0)
    (greedy, off_greedy), (sampled, off_sampled) = v.results("codes")
    assert off_sampled["codes"].shape[0] < FRAMES, "EOS should come before the frame limit"
    assert torch.equal(run_case(v, greedy), off_greedy["codes"])
    assert torch.equal(run_case(v, sampled, sampled["seed"]), off_sampled["codes"])


@pytest.mark.slow  # one official subprocess per checkpoint (~1 min on 2 cores)
@pytest.mark.parametrize("variant", VARIANTS)
def test_seeded_sampled_codes_match_official(variants, variant):
    v = variants(variant)
    (case, off), = v.results("codes")[1:]
    mine = run_case(v, case, case["seed"])
    assert off["codes"].shape[1] == 16 and off["codes"].shape[0] > 0
    assert torch.equal(mine, off["codes"])
    assert torch.equal(traced(v.talker, lambda: run_case(v, case, case["seed"])), off["codes"])
    # The per-request generator is the whole RNG story: the global RNG is not consumed.
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    run_case(v, case, case["seed"])
    assert torch.equal(torch.rand(1), before)


def test_bad_input_is_refused(variants):
    v = variants("0.6b-customvoice")
    ids = torch.tensor([v.tok.encode(assistant_text(TEXT)).ids])
    with pytest.raises(InputError, match="unknown speaker 'nobody'.*ryan"):
        custom_voice_prompt(v.talker, ids, "nobody")
    with pytest.raises(InputError, match="unknown language 'klingon'.*english"):
        custom_voice_prompt(v.talker, ids, "ryan", "klingon")
    with pytest.raises(InputError, match="unknown language 'sichuan_dialect'"):  # dialects are not user languages
        build_prompt(v.talker, ids, language="sichuan_dialect", non_streaming_mode=True)
    with pytest.raises(InputError, match="needs a voice_design model"):
        voice_design_prompt(v.talker, ids, ids)
    vd = variants("1.7b-voicedesign")
    with pytest.raises(InputError, match="VoiceDesign needs an instruct"):
        voice_design_prompt(vd.talker, ids, None)
    base = variants("0.6b-base")
    with pytest.raises(InputError, match="needs both ref_text and the reference codes"):
        voice_clone_prompt(base.talker, ids, xvector(base.talker), ref_codes=ref_code(2))
    with pytest.raises(InputError, match="unknown speaker 'ryan'.*none"):  # Base has no built-in speakers
        build_prompt(base.talker, ids, speaker="ryan", non_streaming_mode=False)
    with pytest.raises(InputError, match="temperature must be > 0"):
        GenerationParams.resolve(temperature=0)
    with pytest.raises(InputError, match="unknown generation option"):
        GenerationParams.resolve(seed=3)


@pytest.mark.slow  # official subprocess (~40 s on 2 cores)
def test_real_configs_give_the_official_tensor_names_and_shapes(tmp_path):
    """The official classes built from each real-shape config (meta device, no weights)
    have exactly the talker tensors vocalis writes and loads: same names, same shapes."""
    from vocalis.models.qwen3.talker import Talker, TalkerSpec

    configs = {v: talker_config(v) for v in VARIANTS}
    (tmp_path / "configs.json").write_text(json.dumps(configs))
    proc = subprocess.run([official_python(), str(SCRIPT), "--shapes", str(tmp_path / "configs.json"),
                           str(tmp_path / "shapes.pt")], capture_output=True, text=True, timeout=600,
                          env={k: x for k, x in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    official = torch.load(tmp_path / "shapes.pt")
    for variant, cfg in configs.items():
        with torch.device("meta"):
            mine = {"talker." + k: tuple(x.shape) for k, x in Talker(TalkerSpec.from_config(cfg)).state_dict().items()}
        theirs = {k: x for k, x in official[variant].items() if k.startswith("talker.")}
        assert mine == theirs, variant
        others = {k.split(".")[0] for k in official[variant]} - {"talker"}
        assert others == ({"speaker_encoder"} if variant.endswith("base") else set()), variant


def test_real_configs_have_the_released_parameter_counts():
    """Real-shape configs give the talker sizes of the released bf16 files (HF sizes / 2
    bytes: 0.6B-CustomVoice 905.8 M, 0.6B-Base 914.6 M minus its 8.8 M speaker encoder,
    1.7B-VoiceDesign 1916.7 M), with 1.7B's small_to_mtp_projection and 0.6B's identity."""
    from vocalis.models.qwen3.talker import Talker, TalkerSpec

    for variant in VARIANTS:
        with torch.device("meta"):
            t = Talker(TalkerSpec.from_config(talker_config(variant)))
        n = sum(p.numel() for p in t.parameters())
        assert round(n / 1e6, 1) == (1916.7 if variant.startswith("1.7b") else 905.8), variant
        proj = [k for k in t.state_dict() if "small_to_mtp" in k]
        assert proj == (["code_predictor.small_to_mtp_projection.weight", "code_predictor.small_to_mtp_projection.bias"]
                        if variant.startswith("1.7b") else [])


@pytest.mark.slow  # one official subprocess per checkpoint (~1 min on 2 cores)
def test_bfloat16_follows_the_official_bfloat16_path(variants):
    """dtype=bfloat16: weights, activations and RoPE tables in bf16 as the official model
    loaded with ``dtype=torch.bfloat16``; prompts and logits stay close, codes are compared."""
    v = variants("1.7b-base", dtype="bfloat16")
    assert v.talker.dtype == torch.bfloat16
    for case, off in v.results("prompt"):
        mine = vocalis_prompt(v.talker, v.tok, case)
        assert mine.prefill.dtype == off["prefill"].dtype == torch.bfloat16
        assert torch.equal(mine.prefill, off["prefill"]), case["kwargs"]
    (case, off), = v.results("logits")
    prompt = vocalis_prompt(v.talker, v.tok, case)
    seq = torch.cat([prompt.prefill, v.talker.frame_embed(v.frames[None]) + prompt.trailing[:, :6]], dim=1)
    with torch.no_grad():
        logits, _ = v.talker.prefill(seq, v.talker.new_cache(1, 8))
    diff = (logits - off["logits"].float()).abs().max().item()
    print("bf16 logits max diff", diff)
    assert diff <= 0.05 * off["logits"].float().abs().max().item()
    (greedy, off_greedy), (sampled, off_sampled) = v.results("codes")
    g = run_case(v, greedy)
    print("bf16 greedy frames equal:", int((g == off_greedy["codes"]).all(1).sum()), "of", len(g))
    assert torch.equal(g, off_greedy["codes"])



def test_the_kv_cache_grows_in_steps_then_by_a_quarter_and_keeps_what_it_holds():
    """Capacity after ``ensure(n)``: the current one plus the next multiple of ``grow`` slots
    that holds n, or of a quarter of the capacity once that is larger (from 32 slots n = 33
    gives 64 and n = 200 gives 224; from 512 slots n = 513 gives 640, not 544); the keys and
    values already written stay in place and the new slots are zero."""
    from vocalis.models.qwen3.talker import DecoderSpec, KVCache

    spec = DecoderSpec(hidden_size=8, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=4,
                       intermediate_size=16, rms_norm_eps=1e-6, rope_theta=1e4)
    cache = KVCache(spec, batch=2, slots=32, dtype=torch.float32, grow=32)
    cache.k.normal_(), cache.v.normal_()
    k, v = cache.k.clone(), cache.v.clone()
    sizes = []
    for n in (32, 33, 64, 65, 200):
        cache.ensure(n)
        sizes.append(cache.slots)
    assert sizes == [32, 64, 64, 96, 224]
    assert torch.equal(cache.k[:, :, :32], k) and torch.equal(cache.v[:, :, :32], v)
    assert cache.k[:, :, 32:].abs().sum() == 0 and cache.v[:, :, 32:].abs().sum() == 0
    big = KVCache(spec, batch=1, slots=512, dtype=torch.float32, grow=32)
    big.ensure(513)
    assert big.slots == 640
