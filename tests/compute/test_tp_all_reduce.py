"""The rollout engine's tensor-parallel all-reduce: vLLM's custom all-reduce (one / two stages) where vLLM runs it,
NCCL's tuner (ring / tree x LL / LL128 / Simple on NVLink, PCIe or the NIC) elsewhere, in the decode step and
the prefill."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import collectives as coll
from trainfit.compute import generation as gen
from trainfit.compute.decode_step import TpLink, tp_all_reduce
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params

H100 = default_rates(resolve_gpu("h100-sxm"))
L40S = default_rates(resolve_gpu("l40s"))
RTX4090 = default_rates(resolve_gpu("rtx4090"))
H100_PCIE = default_rates(resolve_gpu("h100-pcie"))
KIB = 1024


# ------------------------------------------------------------------------------------------------
# vLLM's custom all-reduce (csrc/custom_all_reduce.cuh; constants fitted on sglang PR #2904's H100 table)
# ------------------------------------------------------------------------------------------------


# the published H100 table (sglang PR #2904), its sizes float32 elements (test_trt_reduce.py @4fd490c1): 4 bytes each
PUBLISHED_ELEMENTS = (512, 4096, 32768, 262144, 524288, 1048576)
PUBLISHED_US = {2: (9.5, 8.8, 8.7, 12.9, 17.7, 26.6), 4: (9.1, 8.5, 9.2, 20.6, 26.9, 40.2),
                8: (10.1, 9.3, 11.8, 24.1, 30.4, 45.0)}


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_custom_all_reduce_matches_the_published_table_at_4_bytes_per_element(ranks):
    for elements, us in zip(PUBLISHED_ELEMENTS, PUBLISHED_US[ranks]):
        t = coll.custom_all_reduce_seconds(total_bytes=4 * elements, ranks=ranks)
        assert t == pytest.approx(us * 1e-6, abs=1.8e-6), (ranks, elements)


def test_custom_all_reduce_is_not_priced_above_nccl_for_decode_buffers():
    """The first fit read the table's element counts as bytes (reads at 62 GB/s): NCCL's tuner then beat vLLM's custom
    kernel from 64 KiB on 4 GPUs, the reverse of vLLM's own in-graph benchmark (PR #24532: 0.5 MiB ca_2stage 17 us,
    pynccl 21 us; 4 MiB 42 / 39 us)."""
    for size in (8 * KIB, 64 * KIB, 4 * 2**20):
        nccl = coll.nccl_all_reduce_seconds(total_bytes=size, ranks=4, nodes=1,
                                            bus_bytes_per_s=H100.intra_node_bus_bytes_per_s)
        assert coll.custom_all_reduce_seconds(total_bytes=size, ranks=4) < nccl
    # in-graph two-stage points (vLLM PR #24111 on 6 H100, #24532 on 4 GPUs): the eager fit within 25 % above them
    for ranks, size, us in ((6, 2**19, 15.0), (6, 2**22, 37.0), (4, 2**19, 17.0), (4, 2**22, 42.0)):
        t = coll.custom_all_reduce_seconds(total_bytes=size, ranks=ranks) * 1e6
        assert 0.9 * us <= t <= 1.25 * us, (ranks, size, t)


def test_custom_all_reduce_one_stage_below_256_kib_on_8_gpus():
    # one stage: every rank reads its 7 peers' whole 32 KiB buffers after 8.8 us
    t = coll.custom_all_reduce_seconds(total_bytes=32 * KIB, ranks=8)
    assert t == pytest.approx(coll.CUSTOM_AR_ONE_STAGE_LATENCY_S + 7 * 32 * KIB / coll.CUSTOM_AR_READ_BYTES_PER_S)


def test_custom_all_reduce_two_stages_from_256_kib_on_8_gpus():
    t = coll.custom_all_reduce_seconds(total_bytes=256 * KIB, ranks=8)
    assert t == pytest.approx(coll.CUSTOM_AR_TWO_STAGE_LATENCY_S + 2 * 7 / 8 * 256 * KIB / coll.CUSTOM_AR_READ_BYTES_PER_S)


def test_custom_all_reduce_thresholds_follow_the_world_size():
    # up to 4 GPUs: one stage below 512 KiB; 2 GPUs: always one stage
    one, two, rate = coll.CUSTOM_AR_ONE_STAGE_LATENCY_S, coll.CUSTOM_AR_TWO_STAGE_LATENCY_S, coll.CUSTOM_AR_READ_BYTES_PER_S
    assert coll.custom_all_reduce_seconds(total_bytes=300 * KIB, ranks=4) == pytest.approx(one + 3 * 300 * KIB / rate)
    assert coll.custom_all_reduce_seconds(total_bytes=600 * KIB, ranks=4) == pytest.approx(
        two + 2 * 3 / 4 * 600 * KIB / rate)
    assert coll.custom_all_reduce_seconds(total_bytes=4096 * KIB, ranks=2) == pytest.approx(one + 4096 * KIB / rate)
    # a PCIe pair reads at the smaller of the kernel's rate and the bus
    assert coll.custom_all_reduce_seconds(total_bytes=1024 * KIB, ranks=2, full_nvlink=False,
                                          bus_bytes_per_s=24e9) == pytest.approx(one + 1024 * KIB / 24e9)


@settings(max_examples=60)
@given(a=st.floats(1.0, 8 * 2**20), b=st.floats(1.0, 8 * 2**20), n=st.sampled_from([2, 4, 6, 8]))
def test_custom_all_reduce_has_a_latency_floor_and_grows_within_a_kernel(a, b, n):
    lo, hi = min(a, b), max(a, b)
    t_lo = coll.custom_all_reduce_seconds(total_bytes=lo, ranks=n)
    t_hi = coll.custom_all_reduce_seconds(total_bytes=hi, ranks=n)
    assert t_lo >= coll.CUSTOM_AR_ONE_STAGE_LATENCY_S
    one_below = 512 * KIB if n <= 4 else 256 * KIB
    if n == 2 or hi < one_below or lo >= one_below:  # same kernel: never cheaper for more bytes
        assert t_hi >= t_lo


def test_custom_all_reduce_is_free_for_one_rank_or_no_bytes():
    assert coll.custom_all_reduce_seconds(total_bytes=1e6, ranks=1) == 0.0
    assert coll.custom_all_reduce_seconds(total_bytes=0.0, ranks=8) == 0.0


# ------------------------------------------------------------------------------------------------
# NCCL over PCIe (tuning.cc PCI hop row, LL128 off)
# ------------------------------------------------------------------------------------------------


def test_nccl_over_pcie_has_no_ll128_and_pci_hops():
    choices = coll.nccl_all_reduce_choices(ranks=4, nodes=1, bus_bytes_per_s=24e9, intra_link=coll.IntraLink.PCIE)
    keys = {(c.algorithm, c.protocol) for c in choices}
    assert keys == {("ring", "ll"), ("ring", "simple"), ("tree", "ll"), ("tree", "simple")}
    ring_ll = next(c for c in choices if (c.algorithm, c.protocol) == ("ring", "ll"))
    assert ring_ll.latency_s == pytest.approx((6.6 + 6 * 1.0) * 1e-6)  # base + 2(n-1) PCI hops of 1.0 us
    ring_simple = next(c for c in choices if (c.algorithm, c.protocol) == ("ring", "simple"))
    assert ring_simple.latency_s == pytest.approx((8.4 + 6 * 5.7) * 1e-6)


@settings(max_examples=60)
@given(a=st.floats(1.0, 2.0**31), b=st.floats(1.0, 2.0**31), n=st.sampled_from([2, 4, 8, 16, 32]),
       link=st.sampled_from(list(coll.IntraLink)))
def test_nccl_all_reduce_is_monotone_in_bytes_with_a_latency_floor(a, b, n, link):
    nodes = max(1, n // 8)
    kw = dict(ranks=n, nodes=nodes, bus_bytes_per_s=100e9, intra_link=link)
    lo, hi = sorted((a, b))
    floor = min(c.latency_s for c in coll.nccl_all_reduce_choices(**kw))
    assert floor <= coll.nccl_all_reduce_seconds(total_bytes=lo, **kw) <= coll.nccl_all_reduce_seconds(
        total_bytes=hi, **kw)


# ------------------------------------------------------------------------------------------------
# which all-reduce vLLM runs (cuda_communicator.py / custom_all_reduce.py should_custom_ar)
# ------------------------------------------------------------------------------------------------


def test_vllm_runs_its_custom_all_reduce_inside_one_nvlink_node_under_8_mib():
    ar = tp_all_reduce(rates=H100, tp=8)
    assert ar.kind == "custom"
    assert ar.seconds(32 * KIB) == pytest.approx(coll.custom_all_reduce_seconds(total_bytes=32 * KIB, ranks=8))
    assert ar.seconds(1024 * KIB) == pytest.approx(coll.custom_all_reduce_seconds(total_bytes=1024 * KIB, ranks=8))
    # from 8 MiB on: NCCL's cheapest choice
    big = 16 * 2**20
    assert ar.seconds(big) == pytest.approx(coll.nccl_all_reduce_seconds(
        total_bytes=big, ranks=8, nodes=1, bus_bytes_per_s=H100.intra_node_bus_bytes_per_s))


@pytest.mark.parametrize(("rates", "tp", "kind"), [
    (H100, 3, "nccl"),        # world size outside 2, 4, 6, 8
    (H100, 2, "custom"),
    (L40S, 2, "custom"),      # two PCIe GPUs with peer-to-peer
    (L40S, 4, "nccl"),        # more than two PCIe-only GPUs
    (H100_PCIE, 4, "nccl"),   # NVLink bridges in pairs: not fully connected
    (RTX4090, 2, "nccl"),     # no peer-to-peer access
])
def test_custom_all_reduce_runs_where_vllm_enables_it(rates, tp, kind):
    assert tp_all_reduce(rates=rates, tp=tp).kind == kind


def test_pcie_groups_use_the_pci_hops():
    ar = tp_all_reduce(rates=L40S, tp=4)
    size = 64 * KIB
    assert ar.seconds(size) == pytest.approx(coll.nccl_all_reduce_seconds(
        total_bytes=size, ranks=4, nodes=1, bus_bytes_per_s=L40S.intra_node_bus_bytes_per_s,
        intra_link=coll.IntraLink.PCIE))
    # a PCIe pair: one stage, read at the PCIe bus rate (under the kernel's 244.5 GB/s)
    pair = tp_all_reduce(rates=L40S, tp=2)
    assert pair.seconds(size) == pytest.approx(coll.CUSTOM_AR_ONE_STAGE_LATENCY_S
                                               + size / L40S.intra_node_bus_bytes_per_s)


def test_a_group_over_hosts_runs_nccl_over_the_nic():
    link = TpLink(bus_bytes_per_s=160e9, nodes=4, hosts=4)
    ar = tp_all_reduce(rates=H100, tp=32, link=link)
    assert ar.kind == "nccl"
    size = 917_504
    assert ar.seconds(size) == pytest.approx(coll.nccl_all_reduce_seconds(
        total_bytes=size, ranks=32, nodes=4, bus_bytes_per_s=160e9, net_step_excess_s=coll.NCCL_NET_STEP_EXCESS_S))
    # the measured excess per network step is on top of NCCL's tuner
    assert ar.seconds(size) > coll.nccl_all_reduce_seconds(total_bytes=size, ranks=32, nodes=4, bus_bytes_per_s=160e9)


def test_a_given_latency_prices_the_ring():
    ar = tp_all_reduce(rates=H100, tp=4, latency_s=20e-6)
    bus = H100.intra_node_bus_bytes_per_s
    assert ar.kind == "ring"
    assert ar.seconds(1e6) == pytest.approx(coll.all_reduce_seconds(total_bytes=1e6, ranks=4, bus_bytes_per_s=bus,
                                                                    latency_s=20e-6))


@settings(max_examples=60)
@given(size=st.floats(1.0, 2.0**30), tp=st.sampled_from([2, 4, 8]))
def test_the_engine_all_reduce_never_beats_its_cheapest_latency(size, tp):
    ar = tp_all_reduce(rates=H100, tp=tp)
    assert ar.seconds(size) >= min(p[2] for p in ar.pieces) > 0
    assert tp_all_reduce(rates=H100, tp=1).seconds(size) == 0.0


# ------------------------------------------------------------------------------------------------
# wired into the decode step and the prefill
# ------------------------------------------------------------------------------------------------

QWEN235 = from_catalog("Qwen/Qwen3-235B-A22B")


def _step(tp: int, link: TpLink | None = None, rates=H100):
    spec = QWEN235
    return gen._step_model(spec=spec, matmul_params=matmul_params(spec), rates=rates, tp=tp,
                           weight_bytes=total_params(spec) * 2.0, kv_bytes_per_token=0.0, cuda_graphs=True,
                           engine_s_per_step=0.0, tp_all_reduce_latency_s=None, link=link)


def test_decode_step_pays_two_engine_all_reduces_per_layer():
    """Qwen3-235B-A22B at TP 8 on H100, 32 sequences: 32 x 4096 x 2 = 256 KiB per all-reduce, the custom
    kernel's two stages (14.9 us + 2 x 7/8 x 256 KiB / 244.5 GB/s = 16.8 us), 2 x 94 layers per step."""
    step = _step(8)
    per = 14.9e-6 + 2 * 7 / 8 * 32 * 4096 * 2 / 244.5e9
    assert step.comm(32) == pytest.approx(2 * 94 * per)
    assert step.parts(32, 0)[2] == step.comm(32)
    assert _step(1).comm(32) == 0.0


@settings(max_examples=40, deadline=None)
@given(a=st.floats(1.0, 512.0), b=st.floats(1.0, 512.0))
def test_decode_all_reduce_over_the_nic_grows_with_the_batch(a, b):
    step = _step(32, TpLink(bus_bytes_per_s=160e9, nodes=4, hosts=4))
    lo, hi = sorted((a, b))
    assert 0 < step.comm(lo) <= step.comm(hi)


def test_prefill_all_reduces_a_pass_through_nccl():
    """A prefill pass of 8192 tokens of Llama-3.1-70B (hidden 8192): 128 MiB per all-reduce, above the custom
    kernel's 8 MiB: NCCL ring/Simple at the NVLink bus."""
    spec = from_catalog("meta-llama/Llama-3.1-70B")
    total, comm = gen.prefill_seconds(spec=spec, matmul_params=matmul_params(spec), rates=H100, tp=8, sequences=32,
                                      context_tokens=32 * 256)
    size = 8192 * 8192 * 2
    per = coll.nccl_all_reduce_seconds(total_bytes=size, ranks=8, nodes=1, bus_bytes_per_s=H100.intra_node_bus_bytes_per_s)
    assert comm == pytest.approx(2 * spec.num_layers * per)
    assert total > comm > 0


def test_the_rates_say_which_cards_are_fully_nvlinked():
    assert H100.nvlink and H100.p2p
    assert not L40S.nvlink and L40S.p2p
    assert not RTX4090.nvlink and not RTX4090.p2p
    assert not H100_PCIE.nvlink  # bridges in pairs
