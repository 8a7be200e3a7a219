"""Consecutive routing (NeMo Automodel's FakeBalancedGate) in DeepEP's per-node rows, and the flex dispatcher's
missing chunk sort (Megatron-Core's MoEFlexTokenDispatcher permutes once; the all-to-all dispatcher sorts twice)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.compute.moe_dispatch import ep_dispatch_bytes, expected_consecutive_bins, expected_distinct_bins
from trainfit.compute.moe_time import CHUNK_SORT_KERNELS, chunk_sort_bytes, moe_layer_work
from trainfit.errors import CardError
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import MoeDispatcher, MoeRouting


def _fake_gate_bins(*, experts: int, top_k: int, bins: int, tokens: int) -> float:
    """FakeBalancedGate's indices (``arange(tokens·k).view(-1, k) % E``), their distinct bins per token, averaged."""
    per_bin = experts // bins
    hits = [len({((i * top_k + u) % experts) // per_bin for u in range(top_k)}) for i in range(tokens)]
    return sum(hits) / tokens


@settings(max_examples=40, deadline=None)
@given(bins=st.sampled_from([1, 2, 4, 8, 16, 64]), per_bin=st.integers(1, 8), top_k=st.integers(1, 12))
def test_consecutive_bins_match_the_fake_gate_over_a_whole_period(bins, per_bin, top_k):
    experts = bins * per_bin
    if top_k > experts:
        return
    exact = expected_consecutive_bins(experts=experts, top_k=top_k, bins=bins)
    assert exact == pytest.approx(_fake_gate_bins(experts=experts, top_k=top_k, bins=bins, tokens=experts * top_k))
    assert 1.0 <= exact <= min(top_k, bins)


def test_qwen3_30b_on_8_gpus_sends_each_token_to_one_gpu_and_gpt_oss_120b_to_one_node():
    # 128 experts, 8 per token, 16 per GPU: 8 aligned consecutive experts sit on one GPU (uniform: about 5.3 GPUs)
    assert expected_consecutive_bins(experts=128, top_k=8, bins=8) == 1.0
    assert expected_distinct_bins(experts=128, top_k=8, bins=8) > 5
    # gpt-oss-120b, EP 64 over 8 nodes: 4 consecutive of 128 experts, 2 per GPU: two GPUs of one node
    assert expected_consecutive_bins(experts=128, top_k=4, bins=64) == 2.0
    assert expected_consecutive_bins(experts=128, top_k=4, bins=8) == 1.0


def test_consecutive_routing_shrinks_deepep_rows_but_not_the_all_to_all():
    kw = dict(tokens=4096, hidden=2880, top_k=4, experts=128, ep=64, ranks_per_node=8)
    uni = ep_dispatch_bytes(dispatcher=MoeDispatcher.DEEPEP, **kw)
    con = ep_dispatch_bytes(dispatcher=MoeDispatcher.DEEPEP, routing=MoeRouting.CONSECUTIVE, **kw)
    # one node per token: 7/8 of a row over the NIC (own node 1/8 of the time); two GPUs: 2 x 7/8 over NVLink
    assert con.nic_bytes == pytest.approx(4096 * 7 / 8 * 2880 * 2)
    assert con.nvlink_bytes == pytest.approx(4096 * 2 * 7 / 8 * 2880 * 2)
    assert con.nic_bytes < uni.nic_bytes / 3
    a2a = ep_dispatch_bytes(dispatcher=MoeDispatcher.ALLTOALL, **kw)
    assert ep_dispatch_bytes(dispatcher=MoeDispatcher.ALLTOALL, routing=MoeRouting.CONSECUTIVE, **kw) == a2a


def test_flex_dispatcher_has_no_chunk_sort():
    kw = dict(rows=8192 * 8, hidden=2048, local_experts=16, ep=8)
    assert chunk_sort_bytes(**kw) == 2 * 2 * 8192 * 8 * 2048 * 2
    assert chunk_sort_bytes(**kw, dispatcher=MoeDispatcher.DEEPEP) == 0.0
    work = dict(tokens=8192, hidden=2048, experts=128, local_experts=16, top_k=8, ep=8)
    a2a = moe_layer_work(**work)
    flex = moe_layer_work(**work, dispatcher=MoeDispatcher.DEEPEP)
    assert a2a.forward_bytes - flex.forward_bytes == pytest.approx(chunk_sort_bytes(**kw))
    assert a2a.backward_bytes - flex.backward_bytes == pytest.approx(chunk_sort_bytes(**kw))
    assert a2a.forward_kernels - flex.forward_kernels == CHUNK_SORT_KERNELS
    assert (a2a.backward_kernels, flex.backward_kernels) == (CHUNK_SORT_KERNELS, 0.0)


def _card(parallel: dict) -> dict:
    return {"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": False, "expert_parallel": 8, **parallel},
            "batch": {"micro_batch_size": 1, "seq_len": 4096}}


def test_card_routing_defaults_to_uniform_and_a_bad_value_is_one_line():
    assert load_card_dict(_card({})).parallel.moe_routing is MoeRouting.UNIFORM
    assert load_card_dict(_card({"moe_routing": "consecutive"})).parallel.moe_routing is MoeRouting.CONSECUTIVE
    with pytest.raises(CardError) as exc:
        load_card_dict(_card({"moe_routing": "random"}))
    assert str(exc.value) == "parallel.moe_routing: 'random' is not allowed; allowed: uniform or consecutive"
