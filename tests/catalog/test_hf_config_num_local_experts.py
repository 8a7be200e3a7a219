"""A config that transformers 5 saves for Qwen3-MoE names its experts ``num_local_experts``
(``Qwen3MoeConfig.attribute_map = {'num_experts': 'num_local_experts'}`` in transformers 5.24.0), not ``num_experts``
as the published checkpoints do: both spellings parse to the same model; two different counts are refused."""

import json
from pathlib import Path

import pytest

import trainfit
from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.errors import ConfigError

CATALOG = Path(trainfit.__file__).parent / "catalog" / "data" / "models"


def _config(name: str) -> dict:
    return dict(json.loads((CATALOG / name).read_text())["config"])


def test_a_transformers_5_qwen3_moe_config_parses_as_the_published_one():
    published = _config("Qwen_Qwen3-30B-A3B.json")
    resaved = dict(published)
    resaved["num_local_experts"] = resaved.pop("num_experts")
    assert spec_from_hf_config(resaved, name="resaved", source="test") == spec_from_hf_config(published, name="resaved", source="test")
    assert spec_from_hf_config(resaved, name="resaved", source="test").moe.num_experts == 128


def test_mixtral_under_either_name():
    published = _config("mistralai_Mixtral-8x7B-v0.1.json")
    other = dict(published)
    other["num_experts"] = other.pop("num_local_experts")
    assert spec_from_hf_config(other, name="m", source="test") == spec_from_hf_config(published, name="m", source="test")


def test_two_different_counts_are_refused_in_one_line():
    cfg = _config("Qwen_Qwen3-30B-A3B.json")
    cfg["num_local_experts"] = 64
    with pytest.raises(ConfigError, match=r"'num_experts' = 128 and 'num_local_experts' = 64 differ") as e:
        spec_from_hf_config(cfg, name="x", source="test")
    assert "\n" not in str(e.value)


def test_a_missing_count_is_named_by_the_family_s_own_field():
    cfg = _config("mistralai_Mixtral-8x7B-v0.1.json")
    del cfg["num_local_experts"]
    with pytest.raises(ConfigError, match="missing required field 'num_local_experts'"):
        spec_from_hf_config(cfg, name="x", source="test")
