"""The released-config registry against the YAML files in the official wheel."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vocalis.models.pocket import registry
from vocalis.models.pocket.config import PocketConfig, dump_config, parse_config

pocket_tts = pytest.importorskip("pocket_tts")
CONFIG_DIR = Path(pocket_tts.__file__).parent / "config"
OFFICIAL = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def test_same_set_of_configs():
    assert sorted(registry.config_names()) == OFFICIAL
    assert registry.config_names()[0] == "english"


@pytest.mark.parametrize("name", OFFICIAL)
def test_config_equals_official_yaml(name):
    official = PocketConfig(**yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text("utf-8")))
    assert registry.released_config(name).model_dump() == official.model_dump()


@pytest.mark.parametrize("name", ["english", "english_7m_2026-10", "french_24l"])
def test_dumped_yaml_loads_in_official_schema(name):
    from pocket_tts.utils.config import Config

    text = dump_config(registry.released_config(name))
    assert Config(**yaml.safe_load(text)).model_dump() == Config(
        **yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text("utf-8"))).model_dump()
    assert parse_config(yaml.safe_load(text)) == registry.released_config(name)


def test_unknown_field_is_rejected():
    from vocalis.errors import InputError

    data = yaml.safe_load((CONFIG_DIR / "english.yaml").read_text("utf-8"))
    data["flow_lm"]["transformer"]["num_layerz"] = 3
    with pytest.raises(InputError, match="num_layerz"):
        parse_config(data, "bad.yaml")
