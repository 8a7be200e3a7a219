"""Megatron-Core's expert-parallel all-to-all overlap (overlap_moe_expert_parallel_comm, the combined 1F1B schedule):
the exposed all-to-all per micro-step, the card field and its one-line errors, and the planned step."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.compute.model_parallel import ep_overlap_exposed, model_parallel_comm
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_no_compute_hides_nothing():
    a = ep_overlap_exposed(forward_a2a_s=3.0, backward_a2a_s=2.0, forward_s=0.0, backward_s=0.0, micro_steps=16)
    assert a == pytest.approx(5.0)


def test_only_the_unpaired_first_forward_and_last_backward_show_when_compute_covers_the_all_to_alls():
    # no pipeline: one forward alone, one backward alone out of 8 micro-steps
    a = ep_overlap_exposed(forward_a2a_s=1.0, backward_a2a_s=1.0, forward_s=5.0, backward_s=5.0, micro_steps=8)
    assert a == pytest.approx(2.0 / 8)


def test_paired_micro_step_hides_each_direction_behind_the_other_directions_compute():
    # forward a2a 3 behind backward compute 2 (1 left), backward a2a 2 behind forward compute 1 (1 left)
    a = ep_overlap_exposed(forward_a2a_s=3.0, backward_a2a_s=2.0, forward_s=1.0, backward_s=2.0, micro_steps=1001)
    assert a == pytest.approx((1 * 5.0 + 1000 * 2.0) / 1001)


def test_interleaved_warm_up_counts_the_last_stages_virtual_micro_batches():
    # pp 8, v 4: (v - 1)·p + 1 = 25 virtual micro-batches alone = 6.25 micro-steps of 128
    a = ep_overlap_exposed(forward_a2a_s=1.0, backward_a2a_s=1.0, forward_s=9.0, backward_s=9.0, micro_steps=128,
                           pp=8, virtual_stages=4)
    assert a == pytest.approx(6.25 * 2.0 / 128)
    # fewer micro-batches than the warm-up: all alone, as without overlap
    few = ep_overlap_exposed(forward_a2a_s=1.0, backward_a2a_s=1.0, forward_s=9.0, backward_s=9.0, micro_steps=4,
                             pp=8, virtual_stages=4)
    assert few == pytest.approx(2.0)


@settings(max_examples=60, deadline=None)
@given(fa=st.floats(0, 10), ba=st.floats(0, 10), f=st.floats(0, 10), b=st.floats(0, 10), m=st.integers(1, 512),
       pp=st.sampled_from([1, 2, 4, 8]), v=st.integers(1, 8), more=st.floats(0, 5))
def test_overlap_never_exposes_more_than_the_serial_all_to_alls_and_more_compute_never_exposes_more(
        fa, ba, f, b, m, pp, v, more):
    kw = dict(forward_a2a_s=fa, backward_a2a_s=ba, micro_steps=m, pp=pp, virtual_stages=v)
    a = ep_overlap_exposed(forward_s=f, backward_s=b, **kw)
    assert -1e-12 <= a <= fa + ba + 1e-9
    assert ep_overlap_exposed(forward_s=f + more, backward_s=b + more, **kw) <= a + 1e-9


def _expert_s(**kw) -> float:
    return model_parallel_comm(
        tokens=4096, hidden=4096, q_dim=4096, kv_dim=512, layers=4, attention_layers=4, moe_layers=4, top_k=8,
        tp=1, cp=1, ulysses=False, ep=8, pp=1, recompute=False, latency_s=0.0, tp_bus_bytes_per_s=1e11,
        cp_bus_bytes_per_s=1e11, ep_bus_bytes_per_s=1e11, pp_bytes_per_s=1e11, experts=128, **kw).expert_s


def test_model_parallel_comm_without_overlap_is_unchanged_and_with_it_hides_behind_compute():
    serial = _expert_s()
    assert _expert_s(ep_comm_overlap=False, compute_forward_s=1.0, compute_backward_s=2.0, micro_steps=8) == serial
    # no compute to hide behind: the same seconds
    assert _expert_s(ep_comm_overlap=True, micro_steps=8) == pytest.approx(serial)
    # ample compute: only the first forward's and the last backward's all-to-alls, 1/8 of the step's
    assert _expert_s(ep_comm_overlap=True, compute_forward_s=10.0, compute_backward_s=10.0, micro_steps=8) == \
        pytest.approx(serial / 8)


def _card(parallel: dict) -> dict:
    return {"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": False, "expert_parallel": 16, **parallel},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 8}}


def test_card_field_defaults_off_and_refuses_what_megatron_core_refuses_in_one_line():
    assert load_card_dict(_card({})).parallel.moe_comm_overlap is False
    with pytest.raises(CardError) as exc:
        load_card_dict(_card({"moe_comm_overlap": True, "expert_parallel": 1}))
    assert "parallel.moe_comm_overlap: needs parallel.expert_parallel > 1" in str(exc.value)
    assert "\n" not in str(exc.value)
    with pytest.raises(CardError) as exc:
        load_card_dict(_card({"moe_comm_overlap": True, "gradient_checkpointing": True}))
    assert "parallel.moe_comm_overlap: refused with full recompute" in str(exc.value)
    with pytest.raises(CardError) as exc:
        load_card_dict(_card({"moe_comm_overlap": True, "pipeline_parallel": 2, "expert_parallel": 8}))
    assert "needs virtual_stages > 1" in str(exc.value)
    # selective recompute and the interleaved schedule are allowed
    load_card_dict(_card({"moe_comm_overlap": True, "gradient_checkpointing": "selective"}))
    load_card_dict(_card({"moe_comm_overlap": True, "pipeline_parallel": 2, "pipeline_schedule": "interleaved",
                          "virtual_stages": 2, "expert_parallel": 8}))


def test_overlap_shortens_only_the_expert_parallel_part_of_the_plan():
    base = make_plan(load_card_dict(_card({})))
    over = make_plan(load_card_dict(_card({"moe_comm_overlap": True})))
    assert 0 < over.time_parts["expert_parallel"] < base.time_parts["expert_parallel"]
    assert over.time_parts["forward"] == base.time_parts["forward"]
    assert over.time_parts["backward"] == base.time_parts["backward"]
    assert over.step_seconds < base.step_seconds
