"""HSDP on bridged PCIe cards (``compute.training.hsdp_links``): a shard group of consecutive ranks that fits one
bridge group runs on the bridge (``rates.group_rates``, the pairing of NVIDIA/nccl-tests issue #178: GPU0-1, 2-3);
only the replica group, one rank from each bridge group, crosses PCIe at the node ring's rate."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates, group_rates
from trainfit.compute.training import Parallel, hsdp_links, replica_link_text
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _card(shard: int) -> dict:
    return {"model": "Qwen/Qwen2.5-0.5B", "hardware": {"gpu": "h100-nvl", "gpus_per_node": 4},
            "parallel": {"strategy": "hsdp", "hsdp_shard_size": shard},
            "batch": {"micro_batch_size": 1, "seq_len": 1024}}


def test_a_shard_pair_runs_on_its_bridge_and_the_replicas_cross_pcie():
    rates = default_rates(resolve_gpu("h100-nvl"), node_gpus=4)
    assert rates.bridge_group_gpus == 2 and rates.bridge_bus_bytes_per_s > 4 * rates.intra_node_bus_bytes_per_s
    links = hsdp_links(Parallel(strategy="hsdp", ranks=4, gpus_per_node=4, hsdp_shard=2), rates)
    bridge = group_rates(rates, ranks=2).intra_node_bus_bytes_per_s
    assert links.shard_bus_bytes_per_s == pytest.approx(bridge)
    assert links.replica_bus_bytes_per_s == pytest.approx(rates.intra_node_bus_bytes_per_s)
    assert replica_link_text(links, rates) == "over PCIe between bridge groups"
    wide = hsdp_links(Parallel(strategy="hsdp", ranks=4, gpus_per_node=4, hsdp_shard=4), rates)
    assert wide.shard_bus_bytes_per_s == pytest.approx(rates.intra_node_bus_bytes_per_s)  # beyond one bridge


def test_the_plan_times_and_names_the_bridge_for_the_shard_group():
    plan = make_plan(load_card_dict(_card(2)))
    (coll,) = [a for a in plan.assumptions if "collectives at" in a]
    (hsdp,) = [a for a in plan.assumptions if "hsdp: shard groups" in a]
    assert "collectives at 247 GB/s" in coll
    assert "over PCIe between bridge groups (52 GB/s bus)" in hsdp and "NVLink" not in hsdp
    assert plan.step_seconds < make_plan(load_card_dict(_card(4))).step_seconds
