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
from trainfit.plan.time import nemo_rl_dtensor
from trainfit.spec.card import load_card_dict

T, H, L, V = 4096, 4096, 32, 128256


def test_layer_casts_every_output_and_every_input_but_the_first() -> None:
    assert layer_cast_count(sharded_layers=32) == 63
    assert layer_cast_count(sharded_layers=1) == 1
    assert layer_cast_count(sharded_layers=0) == 0


def test_forward_bytes_are_the_layer_casts_only() -> None:
    f = fp32_output_cast_bytes(tokens=T, hidden_size=H, sharded_layers=L, logits_per_token=V, sliced_sequences=4,
                               backward=False)
    assert f == pytest.approx(63 * 6.0 * T * H)  # 6.3 GB for Llama-3.1-8B at 4096 tokens
    assert f / 1e9 == pytest.approx(6.34, abs=0.01)


def test_backward_adds_the_wider_slice_backward_per_sequence() -> None:
    for k in (0, 1, 4, 8):
        b = fp32_output_cast_bytes(tokens=T, hidden_size=H, sharded_layers=L, logits_per_token=V, sliced_sequences=k,
                                   backward=True)
        # zero tensor + sum: 4 widths of 4 B instead of 2 B per logit per sequence
        assert b == pytest.approx(63 * 6.0 * T * H + 8.0 * k * T * V)


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
    h, v, n = spec.hidden_size, spec.vocab_size, spec.num_layers
    assert cast.head_forward.memory_bytes - plain.head_forward.memory_bytes == pytest.approx(
        (2 * n - 1) * 6.0 * T * h)
    assert cast.head_backward.memory_bytes - plain.head_backward.memory_bytes == pytest.approx(
        (2 * n - 1) * 6.0 * T * h + 8.0 * 4 * T * v)
    assert cast.head_forward.kernels - plain.head_forward.kernels == pytest.approx(2 * n - 1 + 1 - 4)


def test_only_nemo_rl_fsdp_cards_take_it() -> None:
    base = {"model": "meta-llama/Llama-3.1-8B", "method": "grpo",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1}}
    fsdp2 = {"strategy": "fsdp", "fsdp_version": "fsdp2"}
    assert nemo_rl_dtensor(load_card_dict({**base, "preset": "nemo-rl", "parallel": fsdp2}))
    assert not nemo_rl_dtensor(load_card_dict({**base, "preset": "nemo-rl", "parallel": {"strategy": "zero1"}}))
    assert not nemo_rl_dtensor(load_card_dict({**base, "preset": "verl", "parallel": fsdp2}))
