"""DeepSpeed ZeRO's optimizer step over flat fp32 partitions (``compute.optimizer_time.deepspeed_flat_partitions``)
and ZeRO-1/2's per-gradient norm loop (``deepspeed_zero12_grad_norm_kernels``): the wrapped optimizer's launches do
not grow with the number of trained tensors, the norm's do."""

from __future__ import annotations

import pytest

from trainfit.compute.optimizer_time import (HF_PARAM_GROUPS, deepspeed_flat_partitions,
                                             deepspeed_zero12_grad_norm_kernels)
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_stage_1_and_2_step_one_flat_partition_per_group() -> None:
    for stage in (1, 2):
        assert deepspeed_flat_partitions(params=4e9, stage=stage, sub_group_numel=1e9) == HF_PARAM_GROUPS == 2


def test_stage_3_steps_sub_groups_of_sub_group_size() -> None:
    # 2.5e9 elements of the decayed group in sub-groups of 1e9: 3, plus the no-decay group
    assert deepspeed_flat_partitions(params=2.5e9, stage=3, sub_group_numel=1e9) == 4
    assert deepspeed_flat_partitions(params=6e7, stage=3, sub_group_numel=1e9) == 2
    with pytest.raises(ValueError):
        deepspeed_flat_partitions(params=1.0, stage=0, sub_group_numel=1e9)


def test_zero12_norm_loops_over_the_partition() -> None:
    assert deepspeed_zero12_grad_norm_kernels(tensors=100) == 2 * 100 + 4 * 2 + 2
    with pytest.raises(ValueError):
        deepspeed_zero12_grad_norm_kernels(tensors=-1)


def _card(strategy: str, impl: str, targets: list[str] | str) -> dict:
    return {"model": "Qwen/Qwen3-8B", "method": "sft", "scope": "lora", "lora": {"targets": targets},
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": strategy, "gradient_checkpointing": True},
            "precision": {"optimizer_impl": impl},
            "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 1}}


def _opt_kernels(d: dict) -> float:
    return {p.name: p for p in make_plan(load_card_dict(d)).time_phases}["optimizer_step"].terms["kernels"]


def test_deepspeed_zero2_for_loop_step_does_not_grow_with_trained_tensors() -> None:
    """torch's for-loop AdamW launches 8 ops per tensor it is given; under DeepSpeed those tensors are the two flat
    partitions, so all-linear (7 adapted linears a layer) and q_proj alone differ only in the norm's loop over the
    rank's gradients (2 kernels a gradient), not in the optimizer's 8 per tensor."""
    wide, narrow = _opt_kernels(_card("zero2", "for_loop", "all-linear")), _opt_kernels(_card("zero2", "for_loop", ["q_proj"]))
    # Qwen3-8B: 36 layers; all-linear 7 x 2 tensors a layer, q_proj 1 x 2; over 8 ranks
    grown = 2 * (36 * 14 - 36 * 2) / 8
    assert wide - narrow == pytest.approx(grown)
