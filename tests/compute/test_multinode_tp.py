"""A rollout engine whose tensor-parallel group spans nodes: the card's rule, the NIC-bound all-reduce link,
and the planned generation phase that pays for it."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import collectives
from trainfit.compute import generation as gen
from trainfit.compute.decode_step import tp_all_reduce, tp_link
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))
NIC = 400e9 / 8
LLAMA70 = from_catalog("meta-llama/Llama-3.1-70B")


def _grpo(**rollout) -> dict:
    return {"model": "meta-llama/Llama-3.1-70B", "method": "grpo",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": rollout.pop("nodes", 2)},
            "rollout": {"prompt_len": 256, "response_len": 1024, "response_len_mean": 400, **rollout}}


def test_card_accepts_an_engine_over_whole_nodes():
    card = load_card_dict(_grpo(tensor_parallel=16))
    assert card.rollout.tensor_parallel == 16


@pytest.mark.parametrize(("rollout", "needle"), [
    ({"tensor_parallel": 12}, "a multiple of 8 dividing 16"),
    ({"tensor_parallel": 16, "nodes": 3}, "a multiple of 8 dividing 24"),
    ({"tensor_parallel": 6, "placement": "split", "gpus": 4}, "a multiple of 4 dividing 8"),
])
def test_card_refuses_an_engine_that_does_not_take_whole_nodes(rollout, needle):
    with pytest.raises(Exception) as exc:
        load_card_dict(_grpo(**rollout))
    msg = str(exc.value)
    assert "rollout.tensor_parallel" in msg and needle in msg


def test_link_inside_one_node_is_none_and_an_nvlink_domain_stays_on_nvlink():
    assert tp_link(rates=H100, tp=8, engine_gpus_per_node=8, nic_bytes_per_s=NIC, gpu_id="h100-sxm") is None
    gb = default_rates(resolve_gpu("gb200"))
    assert tp_link(rates=gb, tp=4, engine_gpus_per_node=4, nic_bytes_per_s=NIC, gpu_id="gb200") is None
    # GB200 NVL72: 32 GPUs over 8 trays (hosts) of one NVLink domain: one NCCL node at the NVLink bus
    rack = tp_link(rates=gb, tp=32, engine_gpus_per_node=4, nic_bytes_per_s=NIC, gpu_id="gb200")
    assert (rack.nodes, rack.hosts, rack.bus_bytes_per_s) == (1, 8, gb.intra_node_bus_bytes_per_s)
    assert tp_link(rates=gb, tp=128, engine_gpus_per_node=4, nic_bytes_per_s=NIC, gpu_id="gb200").nodes == 32


def test_link_across_nodes_is_nic_bound():
    link = tp_link(rates=H100, tp=32, engine_gpus_per_node=8, nic_bytes_per_s=NIC, gpu_id="h100-sxm")
    assert (link.nodes, link.hosts) == (4, 4)
    assert link.bus_bytes_per_s == pytest.approx(min(H100.intra_node_bus_bytes_per_s,
                                                     NIC * collectives.NIC_EFFICIENCY * 8))


def test_an_engine_across_nodes_all_reduces_through_nccls_tuner():
    """TP 32 over 4 H100 nodes, 64 sequences of DeepSeek-V3 (hidden 7168, bf16): 917,504 bytes per all-reduce.
    No custom all-reduce across hosts; NCCL's cheapest choice over 4 nodes is a tree (tuning.cc), each network step
    plus the measured excess (collectives.NCCL_NET_STEP_EXCESS_S)."""
    link = tp_link(rates=H100, tp=32, engine_gpus_per_node=8, nic_bytes_per_s=NIC, gpu_id="h100-sxm")
    ar = tp_all_reduce(rates=H100, tp=32, link=link)
    assert ar.kind == "nccl"
    size = 64 * 7168 * 2
    best = collectives.nccl_all_reduce(total_bytes=size, ranks=32, nodes=4, bus_bytes_per_s=link.bus_bytes_per_s,
                                       net_step_excess_s=collectives.NCCL_NET_STEP_EXCESS_S)
    assert best.algorithm == "tree"
    assert ar.seconds(size) == pytest.approx(best.seconds(size))


def test_an_nvlink_domain_over_hosts_runs_nccl_not_the_custom_all_reduce():
    gb = default_rates(resolve_gpu("gb200"))
    rack = tp_link(rates=gb, tp=8, engine_gpus_per_node=4, nic_bytes_per_s=NIC, gpu_id="gb200")
    ar = tp_all_reduce(rates=gb, tp=8, link=rack)
    assert ar.kind == "nccl"
    assert tp_all_reduce(rates=gb, tp=4, link=None).kind == "custom"
    size = 32 * 4096 * 2
    assert ar.seconds(size) == pytest.approx(collectives.nccl_all_reduce_seconds(
        total_bytes=size, ranks=8, nodes=1, bus_bytes_per_s=gb.intra_node_bus_bytes_per_s))


def test_generation_across_nodes_pays_more_all_reduce_than_inside_one():
    slow_nic = tp_link(rates=H100, tp=16, engine_gpus_per_node=8, nic_bytes_per_s=100e9 / 8, gpu_id="h100-sxm")
    args = dict(spec=LLAMA70, matmul_params=matmul_params(LLAMA70), rates=H100, tp=16, prompts=64,
                samples_per_prompt=8, prompt_len=256, response_len_max=1024, response_len_mean=400.0,
                weight_bytes=total_params(LLAMA70) * 2.0, kv_bytes_per_token=2.0 * LLAMA70.num_layers * LLAMA70.kv_dim * 2,
                max_num_seqs=256)
    inside = gen.generation_time(**args)
    across = gen.generation_time(**args, tp_link=slow_nic)
    assert across.tp_comm_s > inside.tp_comm_s
    assert across.total_s > inside.total_s
    assert across.total_s - inside.total_s <= across.tp_comm_s - inside.tp_comm_s + 1e-9
    assert any("spans 2 nodes" in a for a in across.assumptions)


def test_plan_of_a_two_node_engine_prices_the_nic():
    from trainfit.plan import make_plan

    def gen_phase(nodes_nic_gbps: float | None):
        d = _grpo(tensor_parallel=16)
        if nodes_nic_gbps:
            d["hardware"]["nic_gbps_per_gpu"] = nodes_nic_gbps
        plan = make_plan(load_card_dict(d))
        return next(p for p in plan.time.phases if p.name == "generation")

    fast, slow = gen_phase(400), gen_phase(25)
    assert slow.terms["tp_all_reduce"] > fast.terms["tp_all_reduce"] > 0
    assert slow.seconds > fast.seconds


def test_rack_scale_nvlink_is_one_node_for_the_training_collectives():
    from trainfit.plan.time import nvlink_gpus_per_node

    assert nvlink_gpus_per_node("h100-sxm", 8, 32) == 8
    assert nvlink_gpus_per_node("gb200", 4, 16) == 16
    assert nvlink_gpus_per_node("gb200", 4, 144) == 72


def test_gb200_trays_train_as_one_nvlink_domain():
    """16 GB200s on 4 trays of 4 run their FSDP collectives on NVLink: the RL step equals the same card
    written as one 16-GPU node."""
    from trainfit.plan import make_plan

    def step(gpn: int, nodes: int) -> dict:
        d = {"model": "Qwen/Qwen3-8B", "method": "grpo", "parallel": {"strategy": "fsdp"},
             "hardware": {"gpu": "gb200", "gpus_per_node": gpn, "nodes": nodes},
             "rollout": {"prompt_len": 256, "response_len": 1024, "response_len_mean": 400, "prompts_per_step": 64}}
        plan = make_plan(load_card_dict(d))
        return {p.name: p.seconds for p in plan.time.phases if p.name != "weight_sync"}

    trays, one = step(4, 4), step(16, 1)
    assert trays == pytest.approx(one, rel=1e-9)


def test_nemo_rl_moves_trainer_state_to_host_and_back():
    """NeMo RL (offload_before_refit / offload_after_refit / prepare_for_lp_inference / prepare_for_training):
    colocated, the weights and the optimizer state go to the host and back every step; split, nothing (the
    optimizer stays without offload_optimizer_for_logprob; Megatron's gradient buffer is freed, not copied);
    other frameworks none."""
    from trainfit.methods.presets import apply_preset
    from trainfit.plan import make_plan

    def offload(preset: str | None, placement: str) -> float:
        d = {"model": "Qwen/Qwen3-8B", "method": "grpo", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
             "rollout": {"placement": placement, "prompt_len": 256, "response_len": 1024, "response_len_mean": 400,
                         **({"gpus": 4} if placement == "split" else {})}}
        if preset:
            d = apply_preset({**d, "preset": preset}, preset)
        plan = make_plan(load_card_dict(d))
        return sum(p.seconds for p in plan.time.phases if p.name == "state_offload")

    coloc, split = offload("nemo-rl", "colocate"), offload("nemo-rl", "split")
    assert coloc > 0 and split == 0
    assert offload("verl", "colocate") == 0 and offload(None, "colocate") == 0
    # colocated Qwen3-8B on 8 GPUs: the card's default strategy (fsdp) is NeMo RL's DTensor worker: 2 x (fp32
    # parameter shard + fp32 AdamW moments) = 2 x 12 B/param / 8 per GPU, no gradients (zero_grad after training);
    # its model.to("cpu") and v.to(device) copies are pageable:
    # <= 25 GB/s pinned, capped by the driver's staging copy (compute.offload.pageable_copy_bytes_per_s), and the
    # copy out into host tensors allocated anew by the first-touch rate (PAGEABLE_FIRST_TOUCH_BYTES_PER_S)
    from trainfit.compute.offload import PAGEABLE_FIRST_TOUCH_BYTES_PER_S, PAGEABLE_STAGING_BYTES_PER_S

    n = total_params(from_catalog("Qwen/Qwen3-8B"))
    rate = min(H100.pcie_bytes_per_s, 200e9 / 8, PAGEABLE_STAGING_BYTES_PER_S)
    assert coloc == pytest.approx((12 * n / 8) * (1 / rate + 1 / PAGEABLE_FIRST_TOUCH_BYTES_PER_S), rel=0.02)
