"""MXFP8 / NVFP4 cards export without crashing: Megatron-Core targets write fp8_recipe mxfp8 (read back), or fp4 /
fp4_recipe with the bf16 layer counts; the other targets say what they cannot write."""

from __future__ import annotations

import pytest

from trainfit.export import TARGETS, export, lost_settings
from trainfit.export.parallel import megatron_fp8
from trainfit.spec.card import load_card_dict


def _card(method: str, impl: str, **precision):
    return load_card_dict({"model": "Qwen/Qwen3-8B", "method": method,
                           "hardware": {"gpu": "gb200", "gpus_per_node": 4, "nodes": 2},
                           "parallel": {"strategy": "zero1" if impl == "megatron" else "fsdp",
                                        "tensor_parallel_impl": impl}, "precision": precision})


@pytest.mark.parametrize("precision", [{"compute": "fp8", "fp8_recipe": "mxfp8"},
                                       {"compute": "fp4", "fp4_recipe": "nvfp4", "bf16_last_layers": 2}])
@pytest.mark.parametrize("impl", ["megatron", "dtensor"])
def test_every_target_exports(precision, impl):
    card = _card("sft", impl, **precision)
    for t in TARGETS:
        e = export(card, t)
        assert e is not None


def test_megatron_keys():
    assert megatron_fp8(_card("grpo", "megatron", compute="fp8", fp8_recipe="mxfp8")) == {
        "fp8": "e4m3", "fp8_recipe": "mxfp8"}
    assert megatron_fp8(_card("grpo", "megatron", compute="fp4", fp4_recipe="nvfp4", bf16_first_layers=1,
                              bf16_last_layers=2)) == {
        "fp4": "e2m1", "fp4_recipe": "nvfp4", "first_last_layers_bf16": "True", "num_layers_at_start_in_bf16": "1",
        "num_layers_at_end_in_bf16": "2"}
    card = _card("grpo", "megatron", compute="fp8", fp8_recipe="mxfp8")
    for t in ("verl", "nemo-rl"):
        lost = lost_settings(card, export(card, t))
        assert "precision.fp8_recipe" not in lost and "precision.compute" not in lost


def test_fp4_primary_weights_are_written_or_listed_lost():
    """precision.fp4_params: Megatron-Core's TransformerConfig.fp4_param (transformer_config.py l.683-688 @d98e8a64)
    in the verl overrides; never dropped silently: a target that does not carry it lists it as lost."""
    card = _card("grpo", "megatron", compute="fp4", fp4_recipe="nvfp4", fp4_params=True)
    assert megatron_fp8(card) == {"fp4": "e2m1", "fp4_recipe": "nvfp4", "fp4_param": "True"}
    assert "fp4_param=True" in export(card, "verl").text
    for t in ("accelerate", "deepspeed", "trl", "verl", "openrlhf", "nemo-rl"):
        e = export(card, t)
        if "(read back)" in e.lost:
            continue
        assert "precision.fp4_params" in e.lost and "fp4_params" in " ".join(e.notes), t
