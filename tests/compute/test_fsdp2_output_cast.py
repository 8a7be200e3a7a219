"""FSDP2 modules with ``output_dtype=float32`` (``compute.fsdp2_output_cast``; NeMo RL's DTensor policy,
nemo_rl/models/dtensor/parallelize.py l.464-488 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf): ``2L - 1`` bf16 <-> fp32
casts of the hidden states each pass, the root's logits cast in place of the loss's own, and the per-sequence slices'
backward in fp32 (8 B per logit per sequence more)."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.fsdp2_output_cast import (
    fp32_output_cast_bytes,
    fp32_output_cast_kernels,
    layer_cast_count,
)
from trainfit.compute.inventory import step_inventory
from trainfit.plan.time import nemo_rl_dtensor, nemo_rl_dtensor_packed
from trainfit.spec.card import load_card_dict

T, H, L, V = 4096, 4096, 32, 128256


def test_layer_casts_every_output_and_every_input_but_the_first() -> None:
    assert layer_cast_count(sharded_layers=32) == 63
    assert layer_cast_count(sharded_layers=1) == 1
    assert layer_cast_count(sharded_layers=0) == 0


def test_forward_bytes_are_the_layer_casts_only() -> None:
    # T = 2 tokens, h = 3, L = 2 layers: 2L - 1 = 3 casts of 2 * 3 = 6 elements, 2 B + 4 B each: 3 * 6 * 6 = 108 B
    assert fp32_output_cast_bytes(tokens=2, hidden_size=3, sharded_layers=2, logits_per_token=5, sliced_sequences=4,
                                  backward=False) == pytest.approx(108.0)
    # Llama-3.1-8B at 4096 tokens: 63 * 6 * 4096 * 4096 = 6,341,787,648 B
    f = fp32_output_cast_bytes(tokens=T, hidden_size=H, sharded_layers=L, logits_per_token=V, sliced_sequences=4,
                               backward=False)
    assert f == pytest.approx(6_341_787_648.0)


@pytest.mark.parametrize(("k", "expected"), [(0, 108.0), (1, 188.0), (4, 428.0)])
def test_backward_adds_the_wider_slice_backward_per_sequence(k: int, expected: float) -> None:
    # the 108 B of layer casts (above) plus, per sliced sequence, 4 widths * (4 B - 2 B) = 8 B per logit over
    # T * V = 2 * 5 = 10 logits: 80 B a sequence (k = 1: 188; k = 4: 108 + 320 = 428)
    b = fp32_output_cast_bytes(tokens=2, hidden_size=3, sharded_layers=2, logits_per_token=5, sliced_sequences=k,
                               backward=True)
    assert b == pytest.approx(expected)


def test_kernels_one_root_cast_in_place_of_the_loss_casts() -> None:
    assert fp32_output_cast_kernels(sharded_layers=L, cast_calls=1) == 63
    assert fp32_output_cast_kernels(sharded_layers=L, cast_calls=4) == 60


def test_step_inventory_adds_them_to_the_head_not_the_recompute() -> None:
    spec = from_catalog("meta-llama/Llama-3.1-8B")
    kw = dict(micro_batch_size=1, seq_len=T, nemo_rl_loss="dtensor", loss_sequences=4)
    plain = step_inventory(spec, **kw)
    cast = step_inventory(spec, **kw, fsdp2_fp32_outputs=True)
    assert cast.layers_forward == plain.layers_forward and cast.layers_backward == plain.layers_backward
    assert cast.recompute() == plain.recompute() and cast.layers_recompute == plain.layers_recompute
    # 32 layers, h 4096, V 128,256 at T 4096: 63 * 6 * 4096 * 4096 = 6,341,787,648 B forward; backward adds
    # 8 * 4 sequences * 4096 * 128,256 = 16,810,770,432 B: 23,152,558,080 B
    assert cast.head_forward.memory_bytes - plain.head_forward.memory_bytes == pytest.approx(6_341_787_648.0)
    assert cast.head_backward.memory_bytes - plain.head_backward.memory_bytes == pytest.approx(23_152_558_080.0)
    # 63 layer casts + the root's logits cast - the 4 per-sequence casts the loss no longer runs
    assert cast.head_forward.kernels - plain.head_forward.kernels == pytest.approx(60.0)


def test_only_nemo_rl_fsdp_cards_take_it() -> None:
    base = {"model": "meta-llama/Llama-3.1-8B", "method": "grpo",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1}}
    fsdp2 = {"strategy": "fsdp", "fsdp_version": "fsdp2"}
    assert nemo_rl_dtensor(load_card_dict({**base, "preset": "nemo-rl", "parallel": fsdp2}))
    assert not nemo_rl_dtensor(load_card_dict({**base, "preset": "nemo-rl", "parallel": {"strategy": "zero1"}}))
    assert not nemo_rl_dtensor(load_card_dict({**base, "preset": "verl", "parallel": fsdp2}))
    # FSDP1 has no output_dtype (MixedPrecision casts inputs only): a nemo-rl card on fsdp1 pays no fp32 outputs
    fsdp1 = {"strategy": "fsdp", "fsdp_version": "fsdp1"}
    assert not nemo_rl_dtensor(load_card_dict({**base, "preset": "nemo-rl", "parallel": fsdp1}))
    assert not nemo_rl_dtensor_packed(load_card_dict({**base, "preset": "nemo-rl", "parallel": fsdp1,
                                                      "attention": "flash"}))
