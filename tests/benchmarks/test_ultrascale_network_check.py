"""benchmarks/ultrascale_network_check.py ``--cluster``: the Ultra-Scale Playbook cluster's network rate comes from the
sweep's own all-reduce readings through trainfit's NCCL model, and every multi-node ``ups-*`` entry states that rate."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module(name: str):  # noqa: ANN202 - a benchmark script
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


UNC = _module("ultrascale_network_check")
ST = _module("step_times")
UPS = [e for e in ST.load_entries(ST.TRAIN_DATA) if e["id"].startswith("ups-")]


def test_cluster_rate_is_the_median_of_the_inverted_readings():
    rates = {n: UNC.fitted_nic_gbps(n, b, UNC.JOB_MESSAGE_BYTES)
             for n, b in UNC.HEALTHY_ALL_REDUCE_BUS_GB_PER_S.items()}
    assert sorted(rates) == [16, 32, 64]
    assert UNC.cluster_nic_gbps() == pytest.approx(sorted(rates.values())[1])
    assert UNC.cluster_nic_gbps() == pytest.approx(249, abs=0.5)  # below the default 400 Gb/s: the EFA fabric


def test_the_inversion_reproduces_the_reading_it_came_from():
    """At the fitted rate trainfit's NCCL model times the 1 GiB world all-reduce at the measured bus bandwidth; a
    higher rate plans it faster (the inversion is monotone)."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute import collectives as coll
    from trainfit.compute.rates import default_rates

    slow = UNC.fitted_nic_gbps(64, 176.04, UNC.JOB_MESSAGE_BYTES)
    fast = UNC.fitted_nic_gbps(64, 250.0, UNC.JOB_MESSAGE_BYTES)
    assert slow < fast < 400
    # time the 1 GiB world all-reduce at 64 nodes x 8 H100 at the fitted rate and read back nccl-tests' bus bandwidth
    ranks, size = 64 * 8, UNC.JOB_MESSAGE_BYTES
    bus = coll.ring_bus_bytes_per_s(rates=default_rates(resolve_gpu("h100-sxm")), crosses_nodes=True,
                                    nic_bytes_per_s=slow * 1e9 / 8, local_ranks=8)
    seconds = coll.nccl_collective_seconds(collective="all_reduce", total_bytes=size, ranks=ranks, nodes=64,
                                           bus_bytes_per_s=bus, intra_link=coll.IntraLink.NVLINK)
    bus_gb_per_s = 2 * (ranks - 1) / ranks * size / seconds / 1e9
    assert bus_gb_per_s == pytest.approx(176.04, rel=1e-3)


def test_every_multi_node_entry_states_the_cluster_rate():
    multi = [e for e in UPS if e["nodes"] > 1]
    assert len(multi) == 23
    assert {e["inter_node_gbps_per_gpu"] for e in multi} == {round(UNC.cluster_nic_gbps())}
    assert all(e["inter_node_gbps_per_gpu"] is None for e in UPS if e["nodes"] == 1)


def test_the_stated_rate_reaches_the_card():
    e = next(e for e in UPS if e["id"] == "ups-h100-80b-64n-dp32tp16pp1-z1")
    card, notes = ST.map_train(e)
    assert card["hardware"]["nic_gbps_per_gpu"] == 249
    assert not any("default NIC" in n for n in notes)
