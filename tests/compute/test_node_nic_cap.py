"""``hardware.nic_gbps_per_node``: a node with fewer NICs than GPUs (or one Ethernet port) shares what it has among
the ranks a collective has on it (``collectives.gpu_nic_bytes_per_s``); unset, every GPU keeps its own NIC and
nothing changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.compute import collectives
from trainfit.compute.rates import default_rates
from trainfit.catalog.gpus import resolve_gpu
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import RunCard, load_card_dict

NIC = 25e9  # one 200 Gb/s NIC per GPU


def _rates(node_nic_bytes_per_s: float | None = None):
    return replace(default_rates(resolve_gpu("a800-80gb")), node_nic_bytes_per_s=node_nic_bytes_per_s)


def test_unset_keeps_one_nic_per_gpu():
    r = _rates()
    assert collectives.gpu_nic_bytes_per_s(rates=r, nic_bytes_per_s=NIC, local_ranks=8) == NIC
    assert collectives.ring_bus_bytes_per_s(rates=r, crosses_nodes=True, nic_bytes_per_s=NIC, local_ranks=2) == (
        pytest.approx(2 * NIC * collectives.NIC_EFFICIENCY))


def test_a_node_cap_is_shared_by_the_collectives_ranks_on_the_node():
    """4 HDR cards for 8 GPUs (100 GB/s a node): a ring with 8 ranks a node crosses at the node's 100 GB/s, not
    8 x 25; a ring with one rank a node still has a whole NIC."""
    r = _rates(100e9)
    assert collectives.gpu_nic_bytes_per_s(rates=r, nic_bytes_per_s=NIC, local_ranks=8) == pytest.approx(12.5e9)
    assert collectives.gpu_nic_bytes_per_s(rates=r, nic_bytes_per_s=NIC, local_ranks=1) == NIC
    eight = collectives.ring_bus_bytes_per_s(rates=r, crosses_nodes=True, nic_bytes_per_s=NIC, local_ranks=8)
    assert eight == pytest.approx(min(r.intra_node_bus_bytes_per_s, 100e9 * collectives.NIC_EFFICIENCY))
    # a one-port node (16 Gb/s) binds even a single sender
    slow = _rates(16e9 / 8)
    one = collectives.ring_bus_bytes_per_s(rates=slow, crosses_nodes=True, nic_bytes_per_s=NIC, local_ranks=1)
    assert one == pytest.approx(2e9 * collectives.NIC_EFFICIENCY)
    # inside a node the cap does not apply
    assert collectives.ring_bus_bytes_per_s(rates=slow, crosses_nodes=False, nic_bytes_per_s=NIC,
                                            local_ranks=8) == slow.intra_node_bus_bytes_per_s


def test_all_to_all_takes_the_shared_nic():
    capped = collectives.all_to_all_bus_bytes_per_s(rates=_rates(50e9), ranks=16, ranks_in_node=8,
                                                    nic_bytes_per_s=NIC)
    free = collectives.all_to_all_bus_bytes_per_s(rates=_rates(), ranks=16, ranks_in_node=8, nic_bytes_per_s=NIC)
    assert capped == pytest.approx(free / 4)  # 50 GB/s over 8 GPUs against 25 GB/s each: the NIC term binds


def _card(node_gbps: float | None) -> dict:
    hw = {"gpu": "a800-80gb", "gpus_per_node": 8, "nodes": 2}
    if node_gbps is not None:
        hw["nic_gbps_per_node"] = node_gbps
    return {"model": {"id": "Qwen/Qwen3-8B"}, "hardware": hw, "parallel": {"strategy": "fsdp"},
            "batch": {"micro_batch_size": 1, "seq_len": 2048}}


def test_a_card_field_slows_a_cross_node_fsdp_step_and_changes_no_memory():
    free, slow = make_plan(RunCard.model_validate(_card(None))), make_plan(RunCard.model_validate(_card(16)))
    assert slow.step_seconds > free.step_seconds
    assert slow.peak.device == free.peak.device and slow.peak.allocated == free.peak.allocated


@pytest.mark.parametrize("bad", [0, -5])
def test_the_field_refuses_a_non_positive_rate_naming_it(bad):
    with pytest.raises(CardError, match="nic_gbps_per_node"):
        load_card_dict(_card(bad))


def test_a_pipeline_send_shares_the_node_cap_with_the_stages_other_senders():
    """collectives.p2p_bytes_per_s: one GPU to one GPU across nodes at its NIC; on a node of 4 HDR cards (100 GB/s)
    the stage's 8 tensor-parallel ranks send together, 12.5 GB/s each; unset, the rate is ring_bus_bytes_per_s's with
    one rank a node (what pipeline sends were priced at before)."""
    free = _rates()
    assert collectives.p2p_bytes_per_s(rates=free, crosses_nodes=True, nic_bytes_per_s=NIC, senders_per_node=8) == (
        collectives.ring_bus_bytes_per_s(rates=free, crosses_nodes=True, nic_bytes_per_s=NIC))
    capped = _rates(100e9)
    assert collectives.p2p_bytes_per_s(rates=capped, crosses_nodes=True, nic_bytes_per_s=NIC,
                                       senders_per_node=8) == pytest.approx(12.5e9 * collectives.NIC_EFFICIENCY)
    assert collectives.p2p_bytes_per_s(rates=capped, crosses_nodes=True, nic_bytes_per_s=NIC,
                                       senders_per_node=1) == pytest.approx(NIC * collectives.NIC_EFFICIENCY)
    assert collectives.p2p_bytes_per_s(rates=capped, crosses_nodes=False, nic_bytes_per_s=NIC,
                                       senders_per_node=8) == capped.intra_node_bus_bytes_per_s


def _pipeline_card(node_gbps: float | None) -> RunCard:
    hw = {"gpu": "a800-80gb", "gpus_per_node": 8, "nodes": 2}
    if node_gbps is not None:
        hw["nic_gbps_per_node"] = node_gbps
    return load_card_dict({"model": {"id": "Qwen/Qwen3-8B"}, "hardware": hw,
                           "parallel": {"strategy": "ddp", "tensor_parallel": 8, "pipeline_parallel": 2,
                                        "tensor_parallel_impl": "megatron"},
                           "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 8}})


def test_a_cross_node_pipeline_link_takes_the_node_cap():
    """tp 8 x pp 2 on two 8-GPU nodes: each stage is a node, and its 8 ranks cross at once. A 800 Gb/s node (100 GB/s)
    gives each 12.5 GB/s, half its own 200 Gb/s NIC: the pipeline link halves (it kept the whole NIC before)."""
    from trainfit.catalog.models import resolve_model
    from trainfit.plan.time import model_parallel_of, rates_of

    spec = resolve_model("Qwen/Qwen3-8B")
    gpu = resolve_gpu("a800-80gb")
    links = {}
    for gbps in (None, 800):
        card = _pipeline_card(gbps)
        links[gbps] = model_parallel_of(card, spec, rates_of(card, gpu, None), gpus_per_node=8).pp_bytes_per_s
    assert links[None] == pytest.approx(NIC * collectives.NIC_EFFICIENCY)
    assert links[800] == pytest.approx(links[None] / 2)


def _hybrid_card(node_gbps: float | None, tp: int = 2) -> RunCard:
    hw = {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 2}
    if node_gbps is not None:
        hw["nic_gbps_per_node"] = node_gbps
    ro = {"engine": "deepspeed_hybrid", "tensor_parallel": tp, "max_num_seqs": 32, "prompts_per_step": 1024,
          "num_generations": 1, "prompt_len": 256, "response_len": 256, "response_len_shape": "fixed"}
    return load_card_dict({"model": "facebook/opt-13b", "method": "ppo", "hardware": hw,
                           "parallel": {"strategy": "zero3"}, "batch": {"micro_batch_size": 16},
                           "roles": {"critic": "facebook/opt-350m", "reward_model": "facebook/opt-350m"},
                           "rollout": ro})


def _generation_terms(card: RunCard) -> dict:
    plan = make_plan(card)
    return next(p for p in plan.time.phases if p.name == "generation").terms


def test_the_hybrid_engines_gather_and_cross_node_tp_take_the_node_cap():
    """DeepSpeed's hybrid engine over 16 ZeRO-3 ranks on two nodes: the gather's 8 ranks a node share a 100 GB/s node
    (12.5 GB/s each, half the A100's 200 Gb/s NIC), so the exposed gather grows; an inference TP group of 16 spans
    both nodes and its all-reduce shares the node's NICs the same way, so the prefill's all-reduces slow (the decode's
    small ones stay latency- and launch-bound)."""
    free, capped = _generation_terms(_hybrid_card(None)), _generation_terms(_hybrid_card(800))
    assert capped["zero3_gather"] > free["zero3_gather"] * 1.5
    assert capped["decode"] == pytest.approx(free["decode"])  # TP 2 stays on one node
    wide_free, wide_capped = (_generation_terms(_hybrid_card(g, tp=16)) for g in (None, 800))
    assert wide_capped["prefill"] > wide_free["prefill"] * 1.5


def _pp_link(card: RunCard) -> float:
    from trainfit.catalog.models import resolve_model
    from trainfit.plan.time import model_parallel_of, rates_of

    gpu = resolve_gpu(card.hardware.gpu)
    return model_parallel_of(card, resolve_model("Qwen/Qwen3-8B"), rates_of(card, gpu, None),
                             gpus_per_node=8).pp_bytes_per_s


@pytest.mark.parametrize("tp", [8, 2])
def test_a_pipeline_send_shares_the_node_with_the_stages_data_parallel_replicas(tp):
    """plan.time.pipeline_senders_per_node: tp 2 x dp 4 x pp 2 on two 8-GPU nodes puts each stage on one node as
    tp 8 does, and all 8 of its ranks (4 data-parallel replicas of 2) send to the other node at once: a 800 Gb/s node
    halves the link for both (tp 2 kept 4 senders' worth before, 20 GB/s)."""
    base = _pipeline_card(800).model_dump(mode="json", exclude_unset=True)
    base["parallel"]["tensor_parallel"] = tp
    capped = _pp_link(load_card_dict(base))
    free = _pp_link(_pipeline_card(None))
    assert capped == pytest.approx(free / 2)


def test_pipeline_senders_per_node_counts_the_ranks_whose_next_stage_is_off_node():
    from trainfit.plan.time import pipeline_senders_per_node

    assert pipeline_senders_per_node(world_size=16, pp=2, gpus_per_node=8) == 8  # a stage a node: all of it
    assert pipeline_senders_per_node(world_size=16, pp=4, gpus_per_node=8) == 4  # two stages a node: the second
    assert pipeline_senders_per_node(world_size=64, pp=2, gpus_per_node=8) == 8  # a stage over 4 nodes
    assert pipeline_senders_per_node(world_size=8, pp=8, gpus_per_node=8) == 1
