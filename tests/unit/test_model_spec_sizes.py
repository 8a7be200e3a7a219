"""ModelSpec refuses negative and zero sizes whatever built it (the -768 MoE width planned -27.4e9 parameters)."""

from dataclasses import replace

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.errors import ConfigError

MOE = from_catalog("Qwen/Qwen3-30B-A3B")
DENSE = from_catalog("Qwen/Qwen3-0.6B")


@pytest.mark.parametrize(("change", "field"), [
    ({"hidden_size": -1024}, "hidden_size"), ({"hidden_size": 0}, "hidden_size"), ({"vocab_size": 0}, "vocab_size"),
    ({"num_attention_heads": -16}, "num_attention_heads"), ({"head_dim": 0}, "head_dim"),
    ({"intermediate_size": -3072}, "intermediate_size"), ({"num_layers": -1, "layer_types": ()}, "num_layers"),
    ({"params_override": -5}, "params"), ({"params_override": 0}, "params"), ({"hidden_size": 1.5}, "hidden_size"),
    ({"hidden_size": True}, "hidden_size"),
])
def test_dense_sizes(change, field):
    with pytest.raises(ConfigError, match=field):
        replace(DENSE, **change)


@pytest.mark.parametrize(("change", "field"), [
    ({"expert_intermediate_size": -768}, "moe_intermediate_size"), ({"num_experts": 0}, "num_experts"),
    ({"experts_per_token": 0}, "num_experts_per_tok"), ({"shared_expert_intermediate_size": -1}, "shared_expert"),
    ({"sparse_step": 0}, "decoder_sparse_step"),
])
def test_moe_sizes(change, field):
    with pytest.raises(ConfigError, match=field):
        replace(MOE, moe=replace(MOE.moe, **change))


def test_derived_specs_may_have_empty_parts():
    """A pipeline stage or a tensor-parallel shard may hold no layers or no expert width on a rank."""
    assert replace(DENSE, num_layers=0, layer_types=()).num_layers == 0
    assert replace(MOE, moe=replace(MOE.moe, expert_intermediate_size=0)).moe.expert_intermediate_size == 0
