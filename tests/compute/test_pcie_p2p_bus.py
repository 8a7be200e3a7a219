"""Intra-node bus fractions are the published nccl-tests plateaus (``rates`` constants' docstrings), and a ring
without peer-to-peer (NCCL's SHM transport through host memory) is slower than one with it by their ratio."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute import collectives as coll
from trainfit.compute.rates import (NVLINK_BUS_FRACTION, PCIE_NO_P2P_BUS_FRACTION, PCIE_P2P_BUS_FRACTION,
                                    default_rates)

GIB = 1 << 30


def test_cited_fractions():
    assert NVLINK_BUS_FRACTION == pytest.approx(370 / 450)  # H100 SXM ring busbw 370 of 450 GB/s (nccl-tests #212)
    assert PCIE_P2P_BUS_FRACTION == pytest.approx(25.95 / 32)  # 4 x RTX 4090 with P2P, Gen4 x16 (tinygrad #36)
    assert PCIE_NO_P2P_BUS_FRACTION == pytest.approx(4.00 / 16)  # 2 x 2080 Ti via SHM, Gen3 x16 (all_reduce plateau)


def test_default_bus_rates_follow_the_measurements():
    assert default_rates(resolve_gpu("h100-sxm")).intra_node_bus_bytes_per_s == pytest.approx(370e9)
    r4090 = default_rates(resolve_gpu("rtx4090"))
    assert not r4090.p2p
    assert r4090.intra_node_bus_bytes_per_s == pytest.approx(32e9 * 0.25)
    l40s = default_rates(resolve_gpu("l40s"))
    assert l40s.p2p and l40s.intra_node_bus_bytes_per_s == pytest.approx(25.95e9)


def test_no_p2p_four_gpu_all_reduce_is_slower_by_the_measured_ratio():
    gpu = resolve_gpu("rtx4090")
    shm = default_rates(gpu)
    p2p = default_rates(replace(gpu, id="rtx4090-p2p-enabled"))  # not on the GeForce no-P2P list: P2P fraction
    assert p2p.p2p and not shm.p2p

    def ar(rates):
        return coll.all_reduce_seconds(total_bytes=GIB, ranks=4, bus_bytes_per_s=rates.intra_node_bus_bytes_per_s,
                                       intra_link=coll.IntraLink.PCIE)

    ratio = ar(shm) / ar(p2p)
    assert ratio == pytest.approx((25.95 / 32) / (4.00 / 16), rel=0.01)  # 3.24x at a 1 GiB buffer
    assert 3.1 < ratio < 3.4
