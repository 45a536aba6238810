"""The released Pocket TTS configs (pocket-tts 4.0.1), by name.

Each config is built from one of a few architectures plus the facts that vary
per release: weight bundles with pinned hub revisions, tokenizer file, and the
text-preparation rules. ``tests/pocket/test_registry.py`` checks every entry against
the YAML files shipped in the official wheel.
"""

from __future__ import annotations

import copy

from vocalis.models.pocket.config import PocketConfig, parse_config

DEFAULT_CONFIG = "english"

_GATED = "hf://kyutai/pocket-tts"
_OPEN = "hf://kyutai/pocket-tts-without-voice-cloning"

# Revisions of the weight bundles (gated repo with voice cloning, open repo without).
_REV_EN = ("db04f0e653473e5c7333c69686ac92b7460b0c1d", "a7056f505a4a8ca72d8b5fb1440071d6f1a35739")
_REV_LANG = ("3e82814a68665eec246ff649b14c71331f955c06", "1e08e6a23401048648a9fdcfde2f89348215c2a7")
_REV_LANG24 = ("2dd944b099d06bb9edbd221fef138685711d9bf0", "4e1e0a3e611c51c0b4ed8174fc10f32a54644303")
_TOK_EN = "00eac05ed3d16bdc3f6b5d598874019c34a89214"
_TOK_SP = "08ffc58775e62aad9409511b9591c9af626270f3"
_TOK_LANG = "4e1e0a3e611c51c0b4ed8174fc10f32a54644303"
_TOK_FR = "8843db76457a91db32077edf8dfcd1c0e3e755fd"


def _seanet(dimension: int, n_filters: int, kernel: int, last_kernel: int) -> dict:
    return {
        "dimension": dimension, "channels": 1, "n_filters": n_filters, "n_residual_layers": 1,
        "ratios": [6, 5, 4], "kernel_size": kernel, "residual_kernel_size": 3,
        "last_kernel_size": last_kernel, "dilation_base": 2, "pad_mode": "constant", "compress": 2,
    }


def _codec_transformer(d: int, heads: int, layers: int, context: int, ffn: int) -> dict:
    return {
        "d_model": d, "num_heads": heads, "num_layers": layers, "layer_scale": 0.01,
        "context": context, "dim_feedforward": ffn, "input_dimension": d, "output_dimensions": [d],
    }


def _mimi(inner_dim: int = 32, small_decoder: tuple[int, int] | None = None) -> dict:
    m = {
        "dtype": "float32", "sample_rate": 24000, "inner_dim": inner_dim, "outer_dim": 512,
        "channels": 1, "frame_rate": 12.5, "seanet": _seanet(512, 64, 7, 3),
        "transformer": _codec_transformer(512, 8, 2, 250, 2048),
        "quantizer": {"dimension": 32, "output_dimension": 512},
    }
    if small_decoder is not None:  # (n_filters, transformer layers)
        n_filters, layers = small_decoder
        m["outer_dim"] = 128
        m["quantizer"]["output_dimension"] = 128
        m["decoder_seanet"] = _seanet(128, n_filters, 3, 3)
        m["decoder_transformer"] = _codec_transformer(128, 4, layers, 50, 384)
    return m


def _big(tokenizer_path: str, layers: int = 6, head: str = "lsd", bos: bool = True) -> dict:
    return {
        "insert_bos_before_voice": bos, "dtype": "float32",
        "flow": {"depth": 6, "dim": 512, "type": head},
        "transformer": {"d_model": 1024, "hidden_scale": 4, "max_period": 10000,
                        "num_heads": 16, "num_layers": layers},
        "lookup_table": {"dim": 1024, "n_bins": 4000, "tokenizer": "tokenizers",
                         "tokenizer_path": tokenizer_path},
    }


def _small(name: str, d: int, heads: int, attn_dim, kv_heads, rank, head: str, head_dim: int,
           ffn: int | None) -> dict:
    t = {"d_model": d, "hidden_scale": 1, "max_period": 10000, "num_heads": heads,
         "num_layers": 8, "attn_dim": attn_dim, "num_kv_heads": kv_heads}
    if ffn is not None:
        t["dim_feedforward"] = ffn
    return {
        "insert_bos_before_voice": True, "dtype": "float32",
        "flow": {"depth": 4, "dim": head_dim, "type": head},
        "transformer": t,
        "lookup_table": {"dim": d, "n_bins": 4000, "tokenizer": "sentencepiece",
                         "tokenizer_path": f"{_OPEN}/languages/{name}/tokenizer.model@{_TOK_SP}",
                         "rank": rank},
        "z_dim": 64,
    }


def _weights(name: str, revs: tuple[str, str]) -> dict:
    return {
        "weights_path": f"{_GATED}/languages/{name}/model.safetensors@{revs[0]}",
        "weights_path_without_voice_cloning": f"{_OPEN}/languages/{name}/model.safetensors@{revs[1]}",
    }


def _tok(dirname: str, rev: str = _TOK_EN) -> str:
    return f"{_OPEN}/languages/{dirname}/tokenizer.json@{rev}"


_EN_REPLACE = {"\u2019": "'", "\u2018": "'"}
_SMALL_REPLACE = {"\u2013": ",", "\u2014": ",", "\u2019": "'", "\u2018": "'"}
_QUOTES = {'"': "", "\u201c": "", "\u201d": "", "\u201e": "", "\u00ab": "", "\u00bb": "",
           "\u2019": "'", "\u2018": "'"}
_BRACKETS = {"(": "", ")": "", "[": "", "]": ""}


def _lang_replace(language: str) -> dict:
    r = dict(_QUOTES)
    if language == "french":
        r[":"] = ","
    r.update(_BRACKETS)
    if language == "spanish":
        r.update({"\u00a1": "", "\u00bf": ""})
    r["\u2013"] = ","
    if language == "german":
        r["\u2014"] = ","
    return r


def _build() -> dict[str, dict]:
    out: dict[str, dict] = {}

    def en(name: str, revs: tuple[str, str], tok_dir: str, **kw) -> None:
        out[name] = {**_weights(name, revs), "default_temperature": 0.3,
                     "replace_characters": _EN_REPLACE,
                     "flow_lm": _big(_tok(tok_dir), **kw), "mimi": _mimi()}

    en("english", _REV_EN, "english")
    en("english_2026-10", _REV_EN, "english_2026-09")
    en("english_2026-09_2", ("7f364c05d1be3faf2b234cdbe4cbb68a026d4218",
                             "575d14372df89a4534bcb989870a34e77544b09f"), "english_2026-09")
    rev_09 = ("983151f13aaeab1b13c1e5e3c2c383d49a9edf3f", "e7205b6ee50e654a5ea19f0e9df2b0813b05e921")
    en("english_2026-09", rev_09, "english_2026-09")
    en("english_2026-09_24l", rev_09, "english_2026-09_24l", layers=24)
    en("english_2026-04", ("19f95fe2df36e79fbd9f10008595cc4c977a0fcc",
                           "d29db7978e464fb90cb3359ee0c69a273b9142cc"), "english_2026-04")
    en("english_2026-04_24l", ("492522650173a0653b7575cdc25ae09810e5d741",
                               "e81d79e8194ad4c7ce879c87a4258ef20cbf2487"), "english_2026-04_24l",
       layers=24)
    en("english_drifting_26-09", ("75cfe24e3142233bb81887fed3482e9652bb4a6e",
                                  "a5ce31f3eba7a3b0cb9c24ba2015b098f278eaae"), "english_2026-09",
       head="drifting")
    out["english_2026-01"] = {
        **_weights("english_2026-01", ("39592ff23c9ef80098bb74895d104c26275fe2c9",
                                       "d29db7978e464fb90cb3359ee0c69a273b9142cc")),
        "pad_with_spaces_for_short_inputs": True, "replace_characters": _EN_REPLACE,
        "flow_lm": _big(f"{_OPEN}/tokenizer.json@{_TOK_EN}", bos=False),
        "mimi": _mimi(inner_dim=512),
    }
    smalls = {  # name: (d, heads, attn_dim, kv_heads, rank, head, head dim, ffn, decoder)
        "english_18m": (512, 8, None, None, None, "drifting", 192, None, (32, 12)),
        "english_7m": (224, 8, 512, 2, 64, "drifting", 192, None, (32, 12)),
        "english_2m": (112, 3, 192, 1, 32, "pointwise", 64, 96, (24, 4)),
    }
    for stem, (d, h, ad, kv, rank, head, hd, ffn, dec) in smalls.items():
        for variant in ("", "_refl"):
            name = f"{stem}{variant}_2026-10"
            out[name] = {
                **_weights(name, _REV_EN), "default_temperature": 0.3,
                "replace_characters": _SMALL_REPLACE,
                "flow_lm": _small(name, d, h, ad, kv, rank, head, hd, ffn),
                "mimi": _mimi(small_decoder=dec), "default_eos_threshold": -1.0,
            }
    for language in ("french", "german", "italian", "portuguese", "spanish", "dutch"):
        tok_rev = _TOK_FR if language == "french" else _TOK_LANG
        for variant, layers in (("", 6), ("_24l", 24)):
            name = f"{language}{variant}"
            revs = _REV_LANG
            if variant and language in ("german", "portuguese", "spanish", "dutch"):
                revs = _REV_LANG24
            cfg = {**_weights(name, revs), "replace_characters": _lang_replace(language),
                   "flow_lm": _big(_tok(name, tok_rev), layers=layers), "mimi": _mimi()}
            if language in ("french", "german"):
                cfg["remove_semicolons"] = True
            out[name] = cfg
    return out


_RELEASED = _build()

# FlowLM heads (layer, head) whose attention follows the word being spoken, for word
# timestamps (vocalis.timing), per released config: the heads the public fork
# dpm63/pocket-tts-timestamped chose for the very same weights (its config files at the
# commits named, whose weight revisions equal the ones pinned above), by word-edge error
# against CrisperWhisper on 500 samples (its README: 38-72 ms mean absolute error by
# config). Configs not listed read every head of every layer.
_TIMESTAMP_HEADS: dict[str, tuple[tuple[int, int], ...]] = {
    "english_2026-01": ((3, 8),),                                  # fork 2ce2d043
    "english_2026-04": ((3, 8),),                                  # 2ce2d043
    "english_2026-04_24l": ((14, 10),),                            # 2ce2d043
    "english_2026-09": ((3, 8), (2, 0)),                           # 8bdfd327
    "english_2026-09_24l": ((14, 10),),                            # 09aa8e07
    "english_drifting_26-09": ((2, 15),),                          # 8bdfd327
    "french": ((3, 9),),                                           # be529702
    "french_24l": ((17, 13), (20, 12), (17, 11), (18, 5)),         # be529702
    "german": ((3, 14), (2, 0)),                                   # be529702
    "german_24l": ((17, 11), (15, 4)),                             # 8bdfd327
    "italian": ((3, 9), (4, 5), (3, 10)),                          # 0f1e4843
    "italian_24l": ((17, 13), (13, 10), (18, 5), (14, 10)),        # 0f1e4843
    "portuguese": ((3, 9), (4, 2), (4, 5), (3, 10)),               # be529702
    "spanish": ((3, 9), (4, 2), (4, 5), (3, 10)),                  # 0f1e4843
    "spanish_24l": ((17, 13), (17, 11), (18, 1)),                  # 8bdfd327
    "dutch": ((3, 14), (4, 5), (5, 4)),                            # be529702
    "dutch_24l": ((17, 13), (17, 11)),                             # 8bdfd327
}


def timestamp_heads(name: str) -> dict[int, tuple[int, ...]] | None:
    """The FlowLM heads read for word timestamps of released config ``name``, by layer
    (None: not chosen for it; every head is read)."""
    pairs = _TIMESTAMP_HEADS.get(name)
    if pairs is None:
        return None
    out: dict[int, tuple[int, ...]] = {}
    for layer, head in pairs:
        out[layer] = out.get(layer, ()) + (head,)
    return out


def config_names() -> list[str]:
    """Names of the released configs, default first."""
    return [DEFAULT_CONFIG] + sorted(n for n in _RELEASED if n != DEFAULT_CONFIG)


def released_config(name: str) -> PocketConfig:
    """The released config `name` (raises KeyError if unknown)."""
    return parse_config(copy.deepcopy(_RELEASED[name]), name)


# Voices the official package ships as precomputed voice states, per config
# (hf://kyutai/pocket-tts-without-voice-cloning/languages/<config>/embeddings/<name>.safetensors).
PREDEFINED_VOICES = (
    "alba", "anna", "azelma", "bill_boerst", "caro_davy", "charles", "cosette", "daan", "estelle",
    "eponine", "eve", "fantine", "george", "giovanni", "jane", "javert", "jean", "juergen", "lola",
    "marius", "mary", "michael", "paul", "peter_yearsley", "rafael", "stuart_bell", "vera",
)
VOICE_REVISION = "a7056f505a4a8ca72d8b5fb1440071d6f1a35739"

DEFAULT_VOICE_BY_LANGUAGE = {
    "italian": "giovanni", "spanish": "lola", "german": "juergen", "portuguese": "rafael",
    "french": "estelle", "dutch": "daan",
}


def predefined_voice_ref(config_name: str, voice: str) -> str:
    return f"{_OPEN}/languages/{config_name}/embeddings/{voice}.safetensors@{VOICE_REVISION}"


def default_voice(config_name: str) -> str:
    for language, voice in DEFAULT_VOICE_BY_LANGUAGE.items():
        if language in config_name:
            return voice
    return "alba"
