"""Which training collective groups run on NVLink: a group whose GPUs all lie in one NVLink domain (a host, or the
job's share of a GB200 NVL72 rack) runs at the card's NVLink rate even when it spans hosts; a group spanning domains
leaves each through its GPUs' NICs (``collectives.domain_ranks``, ``plan.time.nvlink_gpus_per_node``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute import collectives as coll
from trainfit.compute.rates import default_rates
from trainfit.plan.time import model_parallel_of, nic_bytes_per_s, nvlink_gpus_per_node
from trainfit.spec.card import RunCard


def test_a_group_fits_a_domain_when_its_block_divides_it():
    assert coll.domain_ranks(ranks=8, domain_gpus=8) == 8  # TP 8 in an 8-GPU host
    assert coll.domain_ranks(ranks=64, stride=1, domain_gpus=64) == 64  # EP 64 in one 64-GPU rack share
    assert coll.domain_ranks(ranks=16, stride=2, domain_gpus=64) == 16  # a DP group of 16, TP 2 apart
    assert coll.domain_ranks(ranks=32, stride=4, domain_gpus=64) == 16  # spans two domains: 16 ranks in each
    assert coll.domain_ranks(ranks=4, stride=4, domain_gpus=8) == 2  # ranks 0, 4 | 8, 12: two per host
    assert coll.domain_ranks(ranks=4, stride=8, domain_gpus=8) == 1  # TP 8 inside each host: one rank per host
    # 4 consecutive ranks over hosts of 6: the group 4..7 straddles two hosts, 2 ranks on each side
    assert coll.domain_ranks(ranks=4, domain_gpus=6) == 2
    assert coll.domain_ranks(ranks=2, domain_gpus=6) == 2  # groups of 2 tile a host of 6


def test_the_nvlink_domain_is_the_jobs_share_of_a_rack():
    assert nvlink_gpus_per_node("h100-sxm", 8, 64) == 8
    assert nvlink_gpus_per_node("gb200", 4, 8) == 8
    assert nvlink_gpus_per_node("gb200", 4, 64) == 64  # 16 trays in one rack
    assert nvlink_gpus_per_node("gb200", 4, 72) == 72
    assert nvlink_gpus_per_node("gb200", 4, 128) == 64  # 32 trays: two segments of 16 (Slurm --segment)
    assert nvlink_gpus_per_node("gb200", 4, 96) == 48  # 24 trays: two of 12
    assert nvlink_gpus_per_node("gb200", 4, 144) == 72


def _mp(*, gpus: int, ep: int, tp: int = 1):
    card = RunCard.model_validate({
        "model": "Qwen/Qwen3-235B-A22B", "parallel": {"strategy": "zero1", "tensor_parallel": tp,
                                                      "sequence_parallel": tp > 1, "expert_parallel": ep},
        "hardware": {"gpu": "gb200", "gpus_per_node": 4, "nodes": gpus // 4},
        "batch": {"micro_batch_size": 1, "seq_len": 4096}})
    r = default_rates(resolve_gpu("gb200"))
    domain = nvlink_gpus_per_node("gb200", 4, gpus)
    return model_parallel_of(card, resolve_model("Qwen/Qwen3-235B-A22B"), r, gpus_per_node=domain), r, card


def test_an_expert_group_inside_one_rack_runs_on_nvlink_across_trays():
    mp, r, _ = _mp(gpus=64, ep=64)  # 16 trays of one NVL72 rack
    assert mp.ep_bus_bytes_per_s == r.intra_node_bus_bytes_per_s
    assert mp.ep_ranks_per_node == 64


def test_an_expert_group_spanning_two_racks_uses_the_nic():
    mp, r, card = _mp(gpus=256, ep=128)  # two 64-GPU rack shares per group
    nic = nic_bytes_per_s(card) * coll.NIC_EFFICIENCY
    assert mp.ep_ranks_per_node == 64
    # half the all-to-all stays in the rack (NVLink), the other half leaves through each GPU's NIC
    assert mp.ep_bus_bytes_per_s == pytest.approx(127 / 128 / (64 / 128 / nic))
    assert mp.ep_bus_bytes_per_s < r.intra_node_bus_bytes_per_s / 5


def test_a_ring_spanning_racks_leaves_through_the_nics_of_its_gpus_in_each_rack():
    r = default_rates(resolve_gpu("gb200"))
    inside = coll.domain_ranks(ranks=64, domain_gpus=64)
    across = coll.domain_ranks(ranks=128, domain_gpus=64)
    assert (inside, across) == (64, 64)
    nic = 50e9
    assert coll.ring_bus_bytes_per_s(rates=r, crosses_nodes=inside < 64, nic_bytes_per_s=nic,
                                     local_ranks=inside) == r.intra_node_bus_bytes_per_s
    # a ring of 128 with one GPU per rack share (TP 64 inside each): one NIC per crossing
    one = coll.domain_ranks(ranks=2, stride=64, domain_gpus=64)
    assert one == 1
    assert coll.ring_bus_bytes_per_s(rates=r, crosses_nodes=True, nic_bytes_per_s=nic, local_ranks=one) == \
        pytest.approx(nic * coll.NIC_EFFICIENCY)
