"""compute.moe_dispatch: expected destination nodes / GPUs of a routed token (checked against simulation), the bytes
Megatron-Core's all-to-all and DeepEP / HybridEP move per GPU, and their seconds inside model_parallel_comm."""

from __future__ import annotations

import random
from fractions import Fraction
from itertools import combinations
from math import comb, gcd, log, sqrt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute import collectives as coll
from trainfit.compute.model_parallel import model_parallel_comm
from trainfit.compute.moe_dispatch import ep_dispatch_bytes, ep_dispatch_seconds, expected_distinct_bins
from trainfit.compute.rates import default_rates
from trainfit.spec.enums import MoeDispatcher

H100 = default_rates(resolve_gpu("h100-sxm"))
NIC = 50e9


def _simulate(*, experts: int, top_k: int, bins: int, groups: int, groups_per_token: int, draws: int,
              seed: int) -> float:
    """Sample mean of the distinct bins hit: pick groups, then experts, uniformly."""
    rng = random.Random(seed)
    size, per_bin = experts // groups, experts // bins
    hits = 0
    for _ in range(draws):
        chosen = rng.sample(range(groups), groups_per_token)
        picked = rng.sample([g * size + i for g in chosen for i in range(size)], top_k)
        hits += len({e // per_bin for e in picked})
    return hits / draws


def _exact_moments(*, experts: int, top_k: int, bins: int, groups: int,
                   groups_per_token: int) -> tuple[Fraction, Fraction]:
    """Mean and variance of the distinct bins hit, exactly, by enumerating the equally likely sets of chosen groups:
    with ``c`` candidate experts of which ``m_b`` lie in bin ``b``, the ``top_k`` drawn miss bin ``b`` with probability
    ``C(c − m_b, k) / C(c, k)`` and miss both ``b`` and ``b'`` with ``C(c − m_b − m_b', k) / C(c, k)``. The count is
    ``D = Σ_b 1[b hit]``, so ``E[D] = Σ_b P(b hit)`` and ``E[D²] = Σ_{b, b'} P(b hit and b' hit)``."""
    size, per_bin = experts // groups, experts // bins
    subsets = list(combinations(range(groups), groups_per_token))
    mean = second = Fraction(0)
    for chosen in subsets:
        in_bin = [0] * bins
        for e in (g * size + i for g in chosen for i in range(size)):
            in_bin[e // per_bin] += 1
        c = len(chosen) * size
        draws = comb(c, top_k)
        miss = [Fraction(comb(c - m, top_k), draws) for m in in_bin]
        mean += sum(1 - q for q in miss)
        for b in range(bins):
            for b2 in range(bins):
                both = miss[b] if b == b2 else Fraction(comb(c - in_bin[b] - in_bin[b2], top_k), draws)
                second += 1 - miss[b] - miss[b2] + both
    mean, second = mean / len(subsets), second / len(subsets)
    return mean, second - mean * mean


SIMULATION_FAILURE_PROBABILITY = 1e-6
"""Per example: the chance that a correct expectation falls outside ``_bernstein_half_width`` of the sample mean."""


def _bernstein_half_width(*, variance: float, spread: float, draws: int,
                          delta: float = SIMULATION_FAILURE_PROBABILITY) -> float:
    """``t`` with ``P(|sample mean − mean| ≥ t) ≤ delta`` for ``draws`` independent draws that lie within ``spread`` of
    their mean and have this ``variance``: Bernstein's inequality, ``P ≤ 2·exp(−n·t² / (2σ² + 2·M·t / 3))``, solved
    for ``t``. Sound for any distribution, a rare outcome that the draws never show included (a sampled standard
    deviation is then 0, and a bound built on it fails a correct expectation)."""
    big_l = log(2.0 / delta)
    a = spread * big_l / 3.0
    return (a + sqrt(a * a + 2.0 * draws * variance * big_l)) / draws


@st.composite
def _layouts(draw):
    groups = draw(st.sampled_from([1, 2, 3, 4, 8]))
    bins = draw(st.sampled_from([1, 2, 3, 4, 6, 8, 16]))
    # experts divisible by both (contiguous groups and bins need not align: 12 experts, 4 bins, 3 groups)
    lcm = groups * bins // gcd(groups, bins)
    experts = lcm * draw(st.integers(1, max(1, 64 // lcm)))
    groups_per_token = draw(st.integers(1, groups))
    top_k = draw(st.integers(1, min(8, groups_per_token * experts // groups)))
    return {"experts": experts, "top_k": top_k, "bins": bins, "groups": groups, "groups_per_token": groups_per_token}


@settings(max_examples=25, deadline=None)
@given(layout=_layouts(), seed=st.integers(0, 2**16))
def test_expected_distinct_bins_matches_simulation(layout, seed):
    draws = 3000
    exact = expected_distinct_bins(**layout)
    true_mean, variance = _exact_moments(**layout)
    most = min(layout["top_k"], layout["bins"])
    spread = float(max(true_mean - 1, most - true_mean))  # D lies in [1, min(top_k, bins)]
    sample = _simulate(**layout, draws=draws, seed=seed)
    assert abs(exact - sample) <= _bernstein_half_width(variance=float(variance), spread=spread, draws=draws) + 1e-9
    assert 1.0 - 1e-9 <= exact <= most + 1e-9


@settings(max_examples=50, deadline=None)
@given(layout=_layouts())
def test_expected_distinct_bins_is_the_enumerated_mean(layout):
    mean, variance = _exact_moments(**layout)
    assert expected_distinct_bins(**layout) == pytest.approx(float(mean), rel=1e-12, abs=1e-12)
    assert variance >= 0


def test_a_rare_outcome_the_draws_never_show_passes():
    # 16 experts, 2 bins, top-8: one bin only with probability 2 / C(16, 8) = 1.6e-4, so 3000 draws usually show
    # none (a sampled standard deviation of 0 failed this correct expectation on 13 of seeds 0-19)
    layout = {"experts": 16, "top_k": 8, "bins": 2, "groups": 1, "groups_per_token": 1}
    mean, variance = _exact_moments(**layout)
    assert mean == 2 - Fraction(2, comb(16, 8))
    width = _bernstein_half_width(variance=float(variance), spread=float(mean - 1), draws=3000)
    for seed in range(20):
        assert abs(expected_distinct_bins(**layout) - _simulate(**layout, draws=3000, seed=seed)) <= width


def test_expected_distinct_bins_closed_form_without_groups():
    # E = 128 experts over 2 nodes, top-8: 2 (1 - C(64, 8) / C(128, 8)) nodes per token
    assert expected_distinct_bins(experts=128, top_k=8, bins=2) == pytest.approx(2 * (1 - comb(64, 8) / comb(128, 8)))
    # one expert per bin: every routed expert is its own bin
    assert expected_distinct_bins(experts=64, top_k=8, bins=64) == pytest.approx(8.0)


def test_node_limited_routing_caps_the_nodes_per_token():
    # DeepSeek-V3: 256 experts in 8 groups, 4 groups per token; EP 64 on 8 nodes puts one group on each node
    limited = expected_distinct_bins(experts=256, top_k=8, bins=8, groups=8, groups_per_token=4)
    assert limited == pytest.approx(4 * (1 - comb(96, 8) / comb(128, 8)))
    assert limited < 4 < expected_distinct_bins(experts=256, top_k=8, bins=8)


def test_expected_distinct_bins_refuses_layouts_it_cannot_split():
    with pytest.raises(ValueError, match="must divide"):
        expected_distinct_bins(experts=100, top_k=8, bins=3)
    with pytest.raises(ValueError, match="exceeds"):
        expected_distinct_bins(experts=16, top_k=8, bins=2, groups=8, groups_per_token=2)


def test_alltoall_bytes_are_the_old_all_to_all():
    # every routed copy: (ep - l)/ep of them over the NIC, (l - 1)/ep over NVLink; the old seconds are their max
    t, h, k, ep, local = 4096.0, 2048, 8, 16, 8
    b = ep_dispatch_bytes(dispatcher=MoeDispatcher.ALLTOALL, tokens=t, hidden=h, top_k=k, experts=128, ep=ep,
                          ranks_per_node=local)
    assert b.nic_bytes == pytest.approx(t * k * h * 2 * 8 / 16)
    assert b.nvlink_bytes == pytest.approx(t * k * h * 2 * 7 / 16)
    bus = coll.all_to_all_bus_bytes_per_s(rates=H100, ranks=ep, ranks_in_node=local, nic_bytes_per_s=NIC)
    old = coll.all_to_all_seconds(total_bytes=t * k * h * 2, ranks=ep, bus_bytes_per_s=bus, latency_s=0.0)
    new = ep_dispatch_seconds(traffic=b, nic_bytes_per_s=NIC * coll.NIC_EFFICIENCY,
                              nvlink_bytes_per_s=H100.intra_node_bus_bytes_per_s, latency_s=0.0)
    assert new == pytest.approx(old)


def test_deepep_sends_one_copy_per_destination_node():
    # Qwen3-30B-A3B, EP 16 over two 8-GPU nodes: ~2 nodes per token, half of them remote -> ~1 row on the NIC
    t, h = 4096.0, 2048
    a2a = ep_dispatch_bytes(dispatcher=MoeDispatcher.ALLTOALL, tokens=t, hidden=h, top_k=8, experts=128, ep=16,
                            ranks_per_node=8)
    dedup = ep_dispatch_bytes(dispatcher=MoeDispatcher.DEEPEP, tokens=t, hidden=h, top_k=8, experts=128, ep=16,
                              ranks_per_node=8)
    nodes = expected_distinct_bins(experts=128, top_k=8, bins=2)
    gpus = expected_distinct_bins(experts=128, top_k=8, bins=16)
    assert dedup.nic_bytes == pytest.approx(t * h * 2 * nodes / 2)
    assert dedup.nvlink_bytes == pytest.approx(t * h * 2 * gpus * 7 / 8)
    assert dedup.nic_bytes < a2a.nic_bytes / 3
    # inside one node: nothing on the NIC, one copy per distinct other GPU on NVLink
    one = ep_dispatch_bytes(dispatcher=MoeDispatcher.DEEPEP, tokens=t, hidden=h, top_k=8, experts=128, ep=8,
                            ranks_per_node=8)
    assert one.nic_bytes == 0.0
    assert one.nvlink_bytes == pytest.approx(t * h * 2 * expected_distinct_bins(experts=128, top_k=8, bins=8) * 7 / 8)
    with pytest.raises(ValueError, match="divide"):
        ep_dispatch_bytes(dispatcher=MoeDispatcher.DEEPEP, tokens=t, hidden=h, top_k=8, experts=120, ep=12,
                          ranks_per_node=8)


@settings(max_examples=30, deadline=None)
@given(nodes=st.sampled_from([1, 2, 4, 8]), local=st.sampled_from([2, 4, 8]), k=st.integers(1, 8))
def test_deepep_never_sends_more_over_the_network_than_alltoall(nodes, local, k):
    ep = nodes * local
    kw = {"tokens": 1024.0, "hidden": 1024, "top_k": k, "experts": ep * 8, "ep": ep, "ranks_per_node": local}
    a2a = ep_dispatch_bytes(dispatcher=MoeDispatcher.ALLTOALL, **kw)
    dedup = ep_dispatch_bytes(dispatcher=MoeDispatcher.DEEPEP, **kw)
    assert dedup.nic_bytes <= a2a.nic_bytes + 1e-6
    if k == 1 and nodes > 1:
        # one expert per token: nothing to deduplicate, and the row bound for another node's GPU takes a second
        # (NVLink) hop from the same-index GPU that received it: more NVLink bytes than the direct all-to-all
        assert dedup.nic_bytes == pytest.approx(a2a.nic_bytes)
        assert dedup.nvlink_bytes > a2a.nvlink_bytes


def _expert_s(**kw) -> float:
    return model_parallel_comm(
        tokens=4096, hidden=2048, q_dim=4096, kv_dim=512, layers=4, attention_layers=4, moe_layers=4, top_k=8,
        tp=1, cp=1, ulysses=False, ep=16, pp=1, recompute=False, latency_s=1e-5, tp_bus_bytes_per_s=1e11,
        cp_bus_bytes_per_s=1e11, pp_bytes_per_s=1e11, experts=128,
        ep_bus_bytes_per_s=coll.all_to_all_bus_bytes_per_s(rates=H100, ranks=16, ranks_in_node=8,
                                                            nic_bytes_per_s=NIC), **kw).expert_s


def test_model_parallel_comm_charges_the_dispatcher():
    old = _expert_s(ep_ranks_per_node=8)  # the group's nodes set NCCL's latencies; the NIC rate is DeepEP's alone
    assert _expert_s(moe_dispatcher=MoeDispatcher.ALLTOALL, ep_ranks_per_node=8, ep_nic_bytes_per_s=1.0) == old
    rates = {"ep_ranks_per_node": 8, "ep_nic_bytes_per_s": NIC * coll.NIC_EFFICIENCY,
             "ep_nvlink_bytes_per_s": H100.intra_node_bus_bytes_per_s}
    dedup = _expert_s(moe_dispatcher=MoeDispatcher.DEEPEP, **rates)
    assert dedup < old / 2
