"""parallel.overlap_param_gather (Megatron-Core's distributed optimizer, planned as zero1) and parallel.moe_dispatcher
allgather: the card fields, their one-line errors, and the planned step."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import MoeDispatcher


def _dense(parallel: dict, *, nodes: int = 6) -> dict:
    # GPT-32B-like shape of the Megatron-LM scaling table on 48 GPUs: tp 8, 6 data-parallel ranks across nodes
    return {"model": "Qwen/Qwen2.5-32B", "method": "sft",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": nodes},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": False, "tensor_parallel": 8,
                         "sequence_parallel": True, "tensor_parallel_impl": "megatron", **parallel},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 4}}


def test_default_off_and_refused_outside_zero1():
    assert load_card_dict(_dense({})).parallel.overlap_param_gather is False
    with pytest.raises(CardError) as exc:
        load_card_dict(_dense({"strategy": "fsdp", "overlap_param_gather": True}))
    assert str(exc.value) == ("parallel.overlap_param_gather: needs strategy zero1 (Megatron-Core's distributed"
                              " optimizer), not fsdp; allowed otherwise: false")


def test_overlap_shortens_only_the_communication_part(monkeypatch):
    from trainfit.compute import collectives, training

    windows: list[float] = []
    real = collectives.exposed_data_parallel

    def spy(**kw):
        windows.append(kw["forward_s"])
        return real(**kw)

    monkeypatch.setattr(collectives, "exposed_data_parallel", spy)
    training.train_step_time.cache_clear()  # a cached step would not call the collectives again
    off = make_plan(load_card_dict(_dense({})))
    on = make_plan(load_card_dict(_dense({"overlap_param_gather": True})))
    assert on.time_parts["communication"] < off.time_parts["communication"]
    assert off.step_seconds - on.step_seconds == pytest.approx(
        off.time_parts["communication"] - on.time_parts["communication"], rel=1e-6)
    # what it hides is at most one micro-batch's forward window: its compute stream, the forward and the forward's
    # TP collectives it waits on (compute.training.data_parallel_window_s), as handed to the collectives
    window = windows[-1]
    assert windows and all(w == pytest.approx(window, rel=1e-12) for w in windows)
    assert off.time_parts["forward"] / 4 <= window < (off.time_parts["forward"] + off.time_parts["tensor_parallel"]) / 4
    assert off.time_parts["communication"] - on.time_parts["communication"] <= window * (1 + 1e-9)
    assert any("overlap_param_gather" in a for a in on.assumptions)


def _moe(parallel: dict, nodes: int = 2) -> dict:
    return {"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": nodes},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": False, **parallel},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 4}}


def test_allgather_dispatcher_moves_every_token_to_every_rank():
    # the same routing for both (balanced: the mean rank's bytes); a trained router below
    bal = {"moe_router_load": "balanced"}
    card = load_card_dict(_moe({"expert_parallel": 16, "moe_dispatcher": "allgather", **bal}))
    assert card.parallel.moe_dispatcher is MoeDispatcher.ALLGATHER
    gather = make_plan(card).time_parts["expert_parallel"]
    a2a = make_plan(load_card_dict(_moe({"expert_parallel": 16, **bal}))).time_parts["expert_parallel"]
    # inside one node (ep 8, top-k 8) both move 7 rows per token over NVLink
    one_gather = make_plan(load_card_dict(_moe({"expert_parallel": 8, "moe_dispatcher": "allgather", **bal}, 1)))
    one_a2a = make_plan(load_card_dict(_moe({"expert_parallel": 8, **bal}, 1)))
    # (the same bytes; the ring all-gather / reduce-scatter pay 7 ring steps of latency where NCCL's grouped
    # send / receive all-to-all pays one p2p round: collectives.grouped_p2p_latency_s)
    one_g, one_a = one_gather.time_parts["expert_parallel"], one_a2a.time_parts["expert_parallel"]
    assert one_a < one_g < 1.15 * one_a
    # across two nodes the all-to-all's cross-node rows (half of 8 per token) leave through each GPU's own NIC,
    # while the all-gather's ring enters the other node once per NCCL channel, over all 8 NICs of a node
    assert gather < a2a
    # a trained router: the all-to-all waits for the busiest rank's larger receive; the all-gather moves every rank's
    # rows whatever the routing (compute.model_parallel.model_parallel_comm)
    trained_gather = make_plan(load_card_dict(_moe({"expert_parallel": 8, "moe_dispatcher": "allgather"}, 1)))
    trained_a2a = make_plan(load_card_dict(_moe({"expert_parallel": 8}, 1)))
    assert trained_gather.time_parts["expert_parallel"] == one_g
    assert trained_a2a.time_parts["expert_parallel"] > one_a


def test_allgather_refuses_the_ep_overlap():
    with pytest.raises(CardError) as exc:
        load_card_dict(_moe({"expert_parallel": 16, "moe_dispatcher": "allgather", "moe_comm_overlap": True}))
    assert str(exc.value) == ("parallel.moe_comm_overlap: needs moe_dispatcher alltoall or deepep, not allgather;"
                              " allowed with allgather: false")
