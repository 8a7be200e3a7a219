"""nanotron's ZeRO-1 parameter all-gather copies every (rank, tensor) slice back one by one
(``collectives.nanotron_zero1_gather_copies_seconds``), priced for the runs that set
``parallel.grad_reduce_after_backward`` (nanotron's ZeRO-1)."""

from __future__ import annotations

import pytest

from trainfit.compute import collectives as coll
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

HOST = coll.NANOTRON_ZERO1_GATHER_COPY_HOST_S


def test_copies_are_ranks_times_tensors_past_the_gather():
    f = coll.nanotron_zero1_gather_copies_seconds
    assert f(ranks=1, tensors=200, gather_s=0.0, device_s_per_copy=2.5e-6) == 0.0
    # host-bound: the host's issue time beyond the gather it overlaps
    assert f(ranks=128, tensors=170, gather_s=0.02, device_s_per_copy=2.5e-6) == pytest.approx(128 * 170 * HOST - 0.02)
    # a long gather hides the host's issue time, never the copies' kernels, which run after it
    assert f(ranks=128, tensors=170, gather_s=10.0, device_s_per_copy=2.5e-6) == pytest.approx(128 * 170 * 2.5e-6)
    # twice the ranks, twice the copies
    assert f(ranks=64, tensors=50, gather_s=0.0, device_s_per_copy=0.0) * 2 == pytest.approx(
        f(ranks=128, tensors=50, gather_s=0.0, device_s_per_copy=0.0))


def _card(parallel: dict, nodes: int) -> dict:
    return {"model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8,
                                                                             "nodes": nodes},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": False, "tensor_parallel": 4, **parallel},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 1}}


def test_plan_adds_the_copies_to_nanotron_zero1_only():
    def comm(parallel: dict, nodes: int) -> float:
        plan = make_plan(load_card_dict(_card(parallel, nodes)))
        return plan.time_parts["communication"], plan.assumptions

    for nodes in (8, 32):
        plain, notes = comm({}, nodes)
        assert not any("slice copies" in a for a in notes)
        after = comm({"grad_reduce_after_backward": True}, nodes)
        assert any(f"{nodes * 2} x" in a and "slice copies" in a for a in after[1])
    # the copies grow with the data-parallel ranks: more at 64 ranks than at 16, beyond the all-reduce's own growth
    small = comm({"grad_reduce_after_backward": True}, 8)[0] - comm({}, 8)[0]
    large = comm({"grad_reduce_after_backward": True}, 32)[0] - comm({}, 32)[0]
    assert large > small > 0
