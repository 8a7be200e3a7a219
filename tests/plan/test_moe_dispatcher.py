"""parallel.moe_dispatcher: the card field, its one-line error, and the planned step (DeepEP / HybridEP send one
copy per destination node, compute.moe_dispatch)."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import MoeDispatcher


def _card(parallel: dict, *, gpus_per_node: int = 8, nodes: int = 2) -> dict:
    return {"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": gpus_per_node, "nodes": nodes},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": False, **parallel},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 4}}


def test_default_is_alltoall_and_a_bad_value_is_one_line():
    assert load_card_dict(_card({"expert_parallel": 16})).parallel.moe_dispatcher is MoeDispatcher.ALLTOALL
    with pytest.raises(CardError) as exc:
        load_card_dict(_card({"expert_parallel": 16, "moe_dispatcher": "nccl"}))
    assert str(exc.value) == "parallel.moe_dispatcher: 'nccl' is not allowed; allowed: alltoall, deepep or allgather"


def test_deepep_shortens_the_expert_parallel_part_across_nodes():
    base = make_plan(load_card_dict(_card({"expert_parallel": 16})))
    same = make_plan(load_card_dict(_card({"expert_parallel": 16, "moe_dispatcher": "alltoall"})))
    dedup = make_plan(load_card_dict(_card({"expert_parallel": 16, "moe_dispatcher": "deepep"})))
    assert same.time_parts == base.time_parts
    assert dedup.time_parts["expert_parallel"] < base.time_parts["expert_parallel"] / 2
    # the flex dispatcher permutes once by local expert: no chunk sort after the dispatch (compute.moe_time)
    assert dedup.time_parts["forward"] < base.time_parts["forward"]


def test_deepep_needs_whole_nodes_per_expert_group():
    # 6-GPU nodes cannot hold an expert-parallel group of 8 as whole nodes
    plan = make_plan(load_card_dict(_card({"expert_parallel": 8, "moe_dispatcher": "deepep"}, gpus_per_node=6,
                                          nodes=4)))
    assert plan.step_seconds is None
    assert any("time: not estimated: parallel.moe_dispatcher: deepep needs the expert-parallel group to fill whole"
               " nodes" in a and "allowed: alltoall" in a for a in plan.assumptions)
