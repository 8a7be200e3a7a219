"""Mixtral (``mixtral``): parsed as a sparse MoE in every layer; what it cannot model yet is refused."""

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import from_catalog
from trainfit.errors import ConfigError
from trainfit.memory.params import active_params, param_breakdown

SMALL = {"model_type": "mixtral", "hidden_size": 256, "intermediate_size": 384, "num_hidden_layers": 2,
         "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 1000, "num_local_experts": 8,
         "num_experts_per_tok": 2}


def test_every_layer_is_moe_with_fp32_routing_weights():
    spec = spec_from_hf_config(SMALL, name="m", source="t")
    m = spec.moe
    assert (m.num_experts, m.experts_per_token, m.expert_intermediate_size) == (8, 2, 384)
    assert m.shared_expert_intermediate_size == 0 and m.norm_topk_prob and m.routing_weights_fp32
    assert spec.num_moe_layers == 2 and not spec.qk_norm and not spec.attention_bias


@pytest.mark.parametrize(("model_id", "total", "active"), [
    # Mixtral of Experts (arXiv 2401.04088): 47B parameters, 13B active per token; Mistral AI's Mixtral 8x22B
    # release (mistral.ai/news/mixtral-8x22b, read 2026-12-03): 141B, 39B active
    ("mistralai/Mixtral-8x7B-v0.1", 46_702_792_704, 12_879_925_248),
    ("mistralai/Mixtral-8x22B-Instruct-v0.1", 140_630_071_296, 39_161_468_928),
])
def test_catalog_counts(model_id, total, active):
    spec = from_catalog(model_id)
    assert param_breakdown(spec).total == total
    assert active_params(spec) == active


@pytest.mark.parametrize(("field", "value"), [("router_jitter_noise", 0.01), ("output_router_logits", True)])
def test_unmodelled_training_options_are_refused(field, value):
    with pytest.raises(ConfigError, match=field):
        spec_from_hf_config(dict(SMALL, **{field: value}), name="m", source="t")
