"""MoE parallel folding: the expert grid (expert x expert-tensor parallel) only has to divide the tensor x
context x data ranks of a pipeline stage (Megatron-Core parallel_state), not data x context alone."""

from __future__ import annotations

import pytest

from trainfit.spec.card import load_card_dict


def _card(**parallel) -> dict:
    return {"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
            "parallel": {"strategy": "zero1", **parallel}, "batch": {"seq_len": 2048, "grad_accum": 4}}


@pytest.mark.parametrize("parallel", [
    {"tensor_parallel": 2, "expert_parallel": 16},  # EP folds the TP ranks in: 2 x 8 = 16
    {"tensor_parallel": 2, "pipeline_parallel": 2, "expert_parallel": 8},
    {"tensor_parallel": 4, "context_parallel": 2, "expert_parallel": 8},
])
def test_folded_expert_grids_are_accepted_and_plan(parallel):
    from trainfit.plan import make_plan

    card = load_card_dict(_card(**parallel))
    plan = make_plan(card)
    assert plan.step_seconds and plan.step_seconds > 0
    assert any(f"expert parallel {parallel['expert_parallel']}:" in a for a in plan.assumptions)


@pytest.mark.parametrize(("parallel", "grid", "ranks"), [
    ({"tensor_parallel": 2, "expert_parallel": 32}, 32, 16),
    ({"pipeline_parallel": 2, "expert_parallel": 16}, 16, 8),
    ({"expert_parallel": 8, "expert_tensor_parallel": 4}, 32, 16),
])
def test_an_expert_grid_that_does_not_divide_a_stage_is_refused(parallel, grid, ranks):
    with pytest.raises(Exception) as exc:
        load_card_dict(_card(**parallel))
    msg = str(exc.value)
    assert "parallel.expert_parallel" in msg and f"= {grid} must divide" in msg and f"= {ranks}" in msg
