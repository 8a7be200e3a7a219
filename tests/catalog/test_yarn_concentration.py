"""YaRN's concentration factor on cos and sin (``ModelSpec.rotary_concentration``), as Megatron-Core computes it."""

from __future__ import annotations

import math

import pytest

from trainfit.catalog.hf_config import yarn_concentration
from trainfit.catalog.models import from_catalog


def test_megatron_cores_formula():
    # no mscale / mscale_all_dim (gpt-oss): 0.1 ln(factor) + 1
    assert yarn_concentration({"rope_type": "yarn", "factor": 32.0}) == pytest.approx(0.1 * math.log(32) + 1)
    # both set: their ratio (DeepSeek-V3's 1.0 / 1.0 cancels)
    assert yarn_concentration({"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0}) == 1.0
    assert yarn_concentration({"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 0.5}) == pytest.approx(
        (0.1 * math.log(40) + 1) / (0.05 * math.log(40) + 1))
    for other in (None, {}, {"rope_type": "linear", "factor": 4.0}, {"rope_type": "yarn"},
                  {"rope_type": "yarn", "factor": "32"}, {"rope_type": "yarn", "factor": 1.0}):
        assert yarn_concentration(other) == 1.0


def test_catalog_models():
    assert from_catalog("openai/gpt-oss-120b").rotary_concentration == pytest.approx(1.3466, abs=1e-4)
    assert from_catalog("openai/gpt-oss-20b").rotary_concentration == pytest.approx(1.3466, abs=1e-4)
    assert from_catalog("deepseek-ai/DeepSeek-V3").rotary_concentration == 1.0
    assert from_catalog("Qwen/Qwen3-30B-A3B").rotary_concentration == 1.0


def test_a_transformers_5_config_reads_rope_parameters():
    """transformers 5 writes the RoPE scaling as ``rope_parameters`` (and reads ``rope_scaling`` first when both are
    given): gpt-oss saved in that form keeps its YaRN concentration."""
    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.catalog.models import hf_config_of

    cfg = hf_config_of("openai/gpt-oss-20b")
    v5 = {k: v for k, v in cfg.items() if k != "rope_scaling"} | {"rope_parameters": {**cfg["rope_scaling"],
                                                                                       "rope_theta": 150000.0}}
    spec = spec_from_hf_config(v5, name="openai/gpt-oss-20b", source="test")
    assert spec.rotary_concentration == pytest.approx(1.3466, abs=1e-4)
    both = cfg | {"rope_parameters": {"rope_type": "default", "rope_theta": 150000.0}}
    assert spec_from_hf_config(both, name="x", source="test").rotary_concentration == pytest.approx(1.3466, abs=1e-4)
