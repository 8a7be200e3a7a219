"""parallel.hsdp_shard_size: HSDP's shard group as a card states it (verl fsdp_size, torchtitan
data_parallel_shard_degree, accelerate parallelism_config dp_shard_size).

Memory: each rank holds 1/n of the model states, n the shard group, as FSDP over n GPUs does (the closed form), and
as FSDP2 on a 2-D (replicate, shard) mesh shards a parameter (fake process group). Time: the shard group's collectives
over NVLink when it fits in a node, the NICs when it spans nodes; the replica all-reduce over the rest. Without the
field nothing moves (a node's GPUs, as before)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainfit import api
from trainfit.compute import collectives as coll
from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates
from trainfit.compute.training import Parallel, hsdp_links
from trainfit.errors import CardError
from trainfit.export import export, read_back
from trainfit.memory.sharding import make_sharding
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Strategy


def _card(nodes: int = 2, gpus_per_node: int = 8, **parallel) -> dict:
    return {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": gpus_per_node, "nodes": nodes},
            "batch": {"micro_batch_size": 1, "seq_len": 2048}, "parallel": parallel}


# -- validation ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("parallel, message", [
    ({"strategy": "fsdp", "hsdp_shard_size": 2},
     "parallel.hsdp_shard_size: 2 is only read with parallel.strategy: hsdp (strategy is 'fsdp'); allowed with it: null"),
    ({"strategy": "hsdp", "hsdp_shard_size": 3},
     "parallel.hsdp_shard_size: 3 does not divide the 16 data x context ranks; allowed: 1, 2, 4, 8, 16 or null"),
    ({"strategy": "hsdp", "hsdp_shard_size": 0}, "parallel.hsdp_shard_size"),
])
def test_invalid_shard_sizes_are_refused_naming_the_field(parallel, message):
    with pytest.raises(CardError) as exc:
        load_card_dict(_card(**parallel))
    assert message in str(exc.value)


def test_cli_refuses_a_shard_size_that_does_not_divide_the_ranks_one_line_exit_2(capsys):
    from trainfit.cli.main import main

    try:
        rc = main(["plan", "--strategy", "hsdp", "--set", "hardware.nodes=2", "--set", "parallel.hsdp_shard_size=5"])
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "trainfit: error: parallel.hsdp_shard_size: 5 does not divide the 16 data x context ranks" in err


def test_a_split_rl_card_counts_its_training_gpus():
    rl = dict(_card(strategy="hsdp"), method="grpo",
              rollout={"placement": "split", "gpus": 2, "engine": "vllm"})
    with pytest.raises(CardError, match="8 does not divide the 12 data x context ranks"):
        load_card_dict(dict(rl, parallel={"strategy": "hsdp", "hsdp_shard_size": 8}))  # 6 training GPUs x 2 nodes
    load_card_dict(dict(rl, parallel={"strategy": "hsdp", "hsdp_shard_size": 6}))


# -- memory ----------------------------------------------------------------------------------------------------------

def test_default_is_a_node_and_stating_it_changes_nothing():
    default, stated = api.plan(_card(strategy="hsdp")), api.plan(_card(strategy="hsdp", hsdp_shard_size=8))
    assert default.sharding.shard_group == stated.sharding.shard_group == 8
    assert default.peak.device == stated.peak.device
    assert default.step_seconds == stated.step_seconds


def test_shard_size_2_holds_half_the_model_states_as_fsdp_over_2_gpus():
    hsdp = api.plan(_card(strategy="hsdp", hsdp_shard_size=2))
    fsdp2 = api.plan(_card(nodes=1, gpus_per_node=2, strategy="fsdp"))
    assert hsdp.sharding.shard_group == 2 and hsdp.sharding.world_size == 16
    for key in ("weights", "gradients", "optimizer_states"):
        assert hsdp.peak.components[key] == fsdp2.peak.components[key]
    # closed form: bf16 weights / 2 ranks
    assert hsdp.peak.components["weights"] == pytest.approx(hsdp.params_total * 2 / 2, rel=1e-9)


def test_a_shard_group_of_every_rank_is_fsdp():
    hsdp, fsdp = api.plan(_card(strategy="hsdp", hsdp_shard_size=16)), api.plan(_card(strategy="fsdp"))
    assert hsdp.peak.device == fsdp.peak.device
    assert hsdp.step_seconds == pytest.approx(fsdp.step_seconds, rel=1e-12)


def test_make_sharding_divisors():
    s = make_sharding(strategy=Strategy.HSDP, gpus_per_node=8, nodes=4, hsdp_shard_size=4)
    assert (s.weights_divisor, s.grads_divisor, s.optimizer_divisor, s.world_size) == (4, 4, 4, 32)
    assert make_sharding(strategy=Strategy.HSDP, gpus_per_node=8, nodes=4).shard_group == 8


@pytest.mark.trace
def test_fsdp2_on_a_2d_mesh_shards_each_parameter_over_the_inner_dimension():
    """torch 2.13 ``fully_shard`` on a (replicate 8, shard 2) mesh of 16 fake ranks: rank 0 holds half of every
    parameter, ``(Replicate(), Shard(0))``, the divisor ``make_sharding`` applies."""
    pytest.importorskip("torch")
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from trainfit.trace.fsdp import fake_process_group

    with fake_process_group(16):
        mesh = init_device_mesh("cpu", (8, 2), mesh_dim_names=("replicate", "shard"))
        model = nn.Sequential(nn.Linear(64, 128), nn.Linear(128, 64))
        total = sum(p.numel() for p in model.parameters())
        for layer in model:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        local = sum(p.to_local().numel() for p in model.parameters())
        placements = {str(p.placements) for p in model.parameters()}
    divisor = make_sharding(strategy=Strategy.HSDP, gpus_per_node=8, nodes=2, hsdp_shard_size=2).weights_divisor
    assert local * divisor == total
    assert placements == {"(Replicate(), Shard(dim=0))"}


# -- time ------------------------------------------------------------------------------------------------------------

RATES = default_rates(resolve_gpu("h100-sxm"))


def test_links_default_is_the_old_node_group():
    links = hsdp_links(Parallel(strategy="hsdp", ranks=16, gpus_per_node=8, nic_bytes_per_s=50e9), RATES)
    assert (links.shard, links.replicas, links.shard_crosses_nodes, links.replica_crosses_nodes) == (8, 2, False, True)
    assert links.shard_bus_bytes_per_s == RATES.intra_node_bus_bytes_per_s
    assert links.replica_bus_bytes_per_s == pytest.approx(50e9 * coll.NIC_EFFICIENCY)


def test_links_follow_the_shard_group():
    par = dict(strategy="hsdp", gpus_per_node=8, nic_bytes_per_s=50e9)
    in_node = hsdp_links(Parallel(ranks=8, hsdp_shard=2, **par), RATES)  # one node: both groups on NVLink
    assert (in_node.shard, in_node.replicas, in_node.shard_crosses_nodes, in_node.replica_crosses_nodes) == (2, 4, False, False)
    assert in_node.replica_bus_bytes_per_s == RATES.intra_node_bus_bytes_per_s
    two = hsdp_links(Parallel(ranks=16, hsdp_shard=2, **par), RATES)  # replicas: 4 per node, through their 4 NICs
    assert (two.replicas, two.shard_crosses_nodes, two.replica_crosses_nodes) == (8, False, True)
    assert two.replica_bus_bytes_per_s == pytest.approx(4 * 50e9 * coll.NIC_EFFICIENCY)
    wide = hsdp_links(Parallel(ranks=32, hsdp_shard=16, **par), RATES)  # shard group over 2 nodes' NICs
    assert (wide.shard_crosses_nodes, wide.replica_crosses_nodes) == (True, True)
    assert wide.shard_bus_bytes_per_s == pytest.approx(8 * 50e9 * coll.NIC_EFFICIENCY)
    assert wide.replica_bus_bytes_per_s == pytest.approx(50e9 * coll.NIC_EFFICIENCY)


def test_collectives_on_one_link_add_up_per_layer():
    kw = dict(layers=4, layer_weight_bytes=1e9, layer_grad_bytes=1e9, root_weight_bytes=0.0, root_grad_bytes=0.0,
              ranks=2, bus_bytes_per_s=100e9, latency_s=0.0, layer_forward_s=1.0, layer_backward_s=0.012,
              micro_steps=1, replica_layer_grad_bytes=0.5e9, replica_ranks=4, replica_bus_bytes_per_s=100e9)
    apart, shared = coll.exposed_sharded(**kw), coll.exposed_sharded(**kw, replica_shares_link=True)
    assert apart.total_s == shared.total_s
    ag = rs = coll.all_gather_seconds(total_bytes=1e9, ranks=2, bus_bytes_per_s=100e9, latency_s=0.0)
    ar = coll.all_reduce_seconds(total_bytes=0.5e9, ranks=4, bus_bytes_per_s=100e9, latency_s=0.0)
    layer = kw["layer_backward_s"]  # the 3 layers behind which the next unit's collectives run
    assert shared.exposed_s - apart.exposed_s == pytest.approx(
        3 * (max(0.0, ag + rs + ar - layer) - max(0.0, max(ag + rs, ar) - layer)))
    assert shared.exposed_s > apart.exposed_s


def test_a_node_sized_shard_group_prices_the_replica_all_reduce_and_a_small_one_gathers_on_nvlink():
    """16 GPUs, 2 nodes: shard 2 gathers over 2 NVLink ranks where shard 16 (FSDP) crosses the NICs, so the no-grad
    passes get faster; the update adds the all-reduce of half the gradients over 8 replicas."""
    small, full = api.plan(_card(strategy="hsdp", hsdp_shard_size=2)), api.plan(_card(strategy="hsdp", hsdp_shard_size=16))
    assert any("shard groups of 2 ranks (in a node)" in a and "8 replicas through the NICs" in a for a in small.assumptions)
    assert small.step_seconds != full.step_seconds


# -- export / import -------------------------------------------------------------------------------------------------

def _export_card(shard: int | None, version: str = "fsdp2"):
    par = {"strategy": "hsdp", "fsdp_version": version, **({"hsdp_shard_size": shard} if shard else {})}
    return load_card_dict({"method": "sft", "hardware": {"nodes": 4}, "parallel": par})


@pytest.mark.parametrize("shard", [2, 4, 16, None])
def test_torchtitan_writes_the_shard_degree_and_reads_it_back(shard):
    import tomllib

    card = _export_card(shard)
    e = export(card, "torchtitan")
    para = tomllib.loads(e.text)["parallelism"]
    group = shard or 8
    assert (para["data_parallel_shard_degree"], para["data_parallel_replicate_degree"]) == (group, 32 // group)
    back = read_back(card, e)
    assert back.parallel.strategy is Strategy.HSDP and back.parallel.hsdp_shard_size == shard


@pytest.mark.parametrize("shard", [2, 16, None])
def test_accelerate_writes_dp_shard_size_and_reads_it_back(shard):
    card = _export_card(shard)
    e = export(card, "accelerate")
    group = shard or 8
    assert e.data["parallelism_config"] == {"parallelism_config_dp_replicate_size": 32 // group,
                                            "parallelism_config_dp_shard_size": group}
    back = read_back(card, e)
    assert back.parallel.strategy is Strategy.HSDP and back.parallel.hsdp_shard_size == shard


def test_accelerate_fsdp1_hybrid_shard_says_it_cannot_take_a_shard_size():
    e = export(_export_card(2, version="fsdp1"), "accelerate")
    assert e.data["fsdp_config"]["fsdp_sharding_strategy"] == "HYBRID_SHARD"
    assert any("parallel.hsdp_shard_size 2" in n for n in e.notes)


@pytest.mark.parametrize("shard", [2, 4, None])
def test_verl_writes_fsdp_size_and_reads_it_back(shard):
    card = load_card_dict({"method": "grpo", "hardware": {"nodes": 2},
                           "parallel": {"strategy": "hsdp", **({"hsdp_shard_size": shard} if shard else {})}})
    e = export(card, "verl")
    assert f"actor_rollout_ref.actor.fsdp_config.fsdp_size={shard or 8}" in e.text
    back = read_back(card, e)
    assert back.parallel.strategy is Strategy.HSDP and back.parallel.hsdp_shard_size == shard


# -- RL: the weight-sync gather, the reference swap and a GB200 NVL72 card use the shard group ---------------------

def _rl_card(gpu: str = "h100-sxm", gpus_per_node: int = 8, nodes: int = 2, preset: str = "verl", **parallel) -> dict:
    return {"model": "Qwen/Qwen2.5-1.5B", "method": "grpo", "preset": preset,
            "hardware": {"gpu": gpu, "gpus_per_node": gpus_per_node, "nodes": nodes},
            "batch": {"micro_batch_size": 1}, "parallel": parallel, "roles": {"kl_coef": 0.04},
            "rollout": {"engine": "vllm", "prompts_per_step": 32, "num_generations": 4, "prompt_len": 256,
                        "response_len": 512}}


def _captured(monkeypatch, module, name: str, card: dict) -> dict:
    """The keyword arguments the plan passes to ``module.name`` (the real function still runs)."""
    from trainfit.methods.presets import apply_preset

    real, seen = getattr(module, name), {}

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    api.plan(load_card_dict(apply_preset(card, card["preset"])))
    return seen


@pytest.mark.parametrize("parallel, shards", [
    ({"strategy": "hsdp", "hsdp_shard_size": 2}, 2),  # verl fsdp_size 2: full_tensor() gathers over the shard dim
    ({"strategy": "hsdp"}, 8),                        # a node's GPUs
    ({"strategy": "fsdp"}, 16),                       # every rank
])
def test_weight_sync_gathers_each_tensor_over_the_shard_group_only(monkeypatch, parallel, shards):
    from trainfit.compute import sync

    seen = _captured(monkeypatch, sync, "weight_sync_seconds", _rl_card(**parallel))
    assert seen["train_shards"] == shards


@pytest.mark.parametrize("parallel, ranks", [
    ({"strategy": "hsdp", "hsdp_shard_size": 2}, 2), ({"strategy": "hsdp"}, 8), ({"strategy": "fsdp"}, 16)])
def test_reference_swap_moves_the_ranks_shard_of_the_model(monkeypatch, parallel, ranks):
    from trainfit.compute import reference_swap
    from trainfit.memory.weights import weight_bytes
    from trainfit.spec.enums import ComputeDtype, Dtype
    from trainfit.catalog.models import resolve_model
    from trainfit.spec.training import TrainableSpec

    card = dict(_rl_card(preset="nemo-rl", **parallel), roles={"kl_coef": 0.04, "reference": "host_swap"})
    seen = _captured(monkeypatch, reference_swap, "reference_swap_seconds", card)
    whole = weight_bytes(resolve_model("Qwen/Qwen2.5-1.5B"), weights=Dtype.BF16, compute=ComputeDtype.BF16,
                         trainable=TrainableSpec()).base
    assert seen["state_bytes_per_gpu"] == pytest.approx(whole / ranks)


def _gb200(rl: bool, **parallel):
    from trainfit.methods.presets import apply_preset

    if rl:
        d = _rl_card(gpu="gb200", gpus_per_node=4, nodes=4, strategy="hsdp", **parallel)
        return load_card_dict(apply_preset(d, d["preset"]))
    return load_card_dict(_card(strategy="hsdp", **parallel) | {"hardware": {"gpu": "gb200", "gpus_per_node": 4,
                                                                              "nodes": 4}})


@pytest.mark.parametrize("rl", [False, True])
def test_gb200_default_shard_group_is_a_host_in_memory_and_time(rl):
    """GB200 NVL72: 4 GPUs a host, the time model's collectives see the 72-GPU NVLink domain. Without the field the
    shard group is a host's 4 GPUs (memory), so stating 4 changes nothing in time either; 16 is a different plan."""
    default, host, domain = (api.plan(_gb200(rl, **p)) for p in ({}, {"hsdp_shard_size": 4}, {"hsdp_shard_size": 16}))
    assert default.sharding.shard_group == host.sharding.shard_group == 4
    assert default.step_seconds == host.step_seconds
    assert default.step_seconds != domain.step_seconds


def test_gb200_training_step_prices_a_host_sized_shard_group(monkeypatch):
    from trainfit.plan import time as plan_time

    seen = _captured_sft(monkeypatch, plan_time)
    assert seen["parallel"].hsdp_shard == 4 and seen["parallel"].gpus_per_node == 16  # the domain, 16 GPUs here


def _captured_sft(monkeypatch, plan_time) -> dict:
    real, seen = plan_time.train_step_time, {}

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_time, "train_step_time", spy)
    api.plan(_gb200(False))
    return seen
