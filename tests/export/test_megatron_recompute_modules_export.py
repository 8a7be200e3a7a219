"""The Megatron exporters write the card's Megatron-Core module recompute as its recompute_modules list
(``export.parallel.megatron_recompute``), in Megatron-Core's order (transformer_config.py l.374-389)."""

from __future__ import annotations

import pytest

from trainfit.export.parallel import megatron_recompute
from trainfit.spec.card import load_card_dict


@pytest.mark.parametrize(("par", "expected"), [
    ({"recompute_modules": ["moe", "layernorm"]}, ["layernorm", "moe"]),
    ({"gradient_checkpointing": "selective", "selective_checkpointing": "layernorm_moe_act"}, ["moe_act", "layernorm"]),
    ({"gradient_checkpointing": "selective", "selective_checkpointing": "core_attention"}, ["core_attn"]),
])
def test_module_recompute_is_exported_as_its_list(par, expected):
    card = load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "parallel": {"tensor_parallel_impl": "megatron", **par}})
    notes: list[str] = []
    assert megatron_recompute(card, notes, "NeMo RL") == {"recompute_granularity": "selective",
                                                           "recompute_modules": expected}
    assert notes == []
