"""precision.fp8_attention through the targets: verl writes Megatron's TransformerConfig.fp8_dot_product_attention
(+override_transformer_config.fp8_dot_product_attention=True) and reads it back; the other targets say in one note
that attention runs bf16."""

from __future__ import annotations

import pytest

from trainfit.export import export
from trainfit.export.importers import import_text
from trainfit.spec.card import load_card_dict


def _card():
    return load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron"},
        "precision": {"compute": "fp8", "fp8_recipe": "current", "fp8_attention": True}})


def test_verl_writes_fp8_dot_product_attention():
    e = export(_card(), "verl")
    assert "override_transformer_config.fp8_dot_product_attention=True" in e.text
    assert "precision.fp8_attention" not in e.lost
    assert import_text(e.text, "verl").card["precision"]["fp8_attention"] is True


@pytest.mark.parametrize("target", ["nemo-rl", "accelerate"])
def test_other_targets_say_it(target):
    e = export(_card(), target)
    said = [n for n in e.notes if n.startswith("precision.fp8_attention")]
    assert len(said) == 1 and "not written" in said[0]
    assert e.lost["precision.fp8_attention"] == {"card": True, "file": False}
