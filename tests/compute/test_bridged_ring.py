"""Bridged PCIe cards (``compute.rates.BRIDGE_GROUP_GPUS``): an NVLink bridge joins 2 cards (4 on the H200 NVL), the
groups reach each other over PCIe, so a ring over more of a node's GPUs than one group runs at the PCIe hop's rate
(NVIDIA/nccl-tests issue #178: bridged A100 pairs, all-reduce bus bandwidth 208 GB/s on 2 GPUs, 20 GB/s on 3), while
a tensor-parallel group inside one bridge group keeps the bridge (``compute.rates.group_rates``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.decode_step import tp_all_reduce
from trainfit.compute.rates import (BRIDGE_GROUP_GPUS, NVLINK_BUS_FRACTION, PCIE_NO_P2P_BUS_FRACTION,
                                    PCIE_P2P_BUS_FRACTION, default_rates, group_rates, link_rates)
from trainfit.plan import make_plan
from trainfit.plan.resolve import gpu_of, model_spec_of
from trainfit.plan.time import link_note, model_parallel_of, rates_of
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Interconnect


def _card(gpu: str, gpus: int, *, link: str | None = None, **parallel) -> dict:
    hw = {"gpu": gpu, "gpus_per_node": gpus}
    if link is not None:
        hw["interconnect"] = link
    return {"model": "Qwen/Qwen2.5-0.5B", "hardware": hw, "parallel": {"strategy": "fsdp", **parallel},
            "batch": {"micro_batch_size": 1, "seq_len": 1024}}


@pytest.mark.parametrize("gpu", sorted(BRIDGE_GROUP_GPUS))
def test_a_ring_beyond_one_bridge_group_runs_at_the_pcie_hop(gpu):
    spec = resolve_gpu(gpu)
    group = BRIDGE_GROUP_GPUS[gpu]
    bridge = spec.nvlink_bytes_per_s / 2 * NVLINK_BUS_FRACTION
    refused = gpu == "rtx3090"  # no PCIe peer-to-peer on the stock driver (stock_driver_refuses_pcie_p2p)
    pcie = spec.pcie_bytes_per_s * (PCIE_NO_P2P_BUS_FRACTION if refused else PCIE_P2P_BUS_FRACTION)
    for n in range(1, group + 1):
        assert link_rates(spec, link=Interconnect.NVLINK, node_gpus=n) == (pytest.approx(bridge), True, False)
    for n in range(group + 1, 9):
        assert link_rates(spec, link=Interconnect.NVLINK, node_gpus=n) == (pytest.approx(pcie), not refused, False)
        r = default_rates(spec, node_gpus=n)
        assert r.intra_node_bus_bytes_per_s == pytest.approx(pcie) and r.bridge_group_gpus == group
        assert r.bridge_bus_bytes_per_s == pytest.approx(bridge)


def test_the_node_ring_of_eight_bridged_a100s_is_timed_as_pcie_and_the_plan_says_so():
    """a100-pcie-80gb x8: 247 GB/s before (the bridge), now the PCIe peer-to-peer ring, the same as stating pcie."""
    bridged = make_plan(load_card_dict(_card("a100-pcie-80gb", 8)))
    pcie = make_plan(load_card_dict(_card("a100-pcie-80gb", 8, link="pcie")))
    pair = make_plan(load_card_dict(_card("a100-pcie-80gb", 2)))
    assert bridged.step_seconds == pytest.approx(pcie.step_seconds)
    (line,) = [a for a in bridged.assumptions if "node link:" in a]
    assert line.endswith("NCCL bus bandwidth in a node 26 GB/s") and "crossing PCIe" in line
    assert any("runs at its slowest hop, PCIe peer-to-peer, 26 GB/s" in a and "nccl-tests/issues/178" in a
               for a in bridged.assumptions)
    (pair_line,) = [a for a in pair.assumptions if "node link:" in a]
    assert pair_line.endswith("NCCL bus bandwidth in a node 247 GB/s")


def test_eight_rtx3090s_ring_without_peer_to_peer():
    card = load_card_dict(_card("rtx3090", 8))
    spec = gpu_of(card)
    r = rates_of(card, spec, None)
    assert (r.intra_node_bus_bytes_per_s, r.p2p) == (pytest.approx(32e9 * PCIE_NO_P2P_BUS_FRACTION), False)
    assert "crossing PCIe without peer-to-peer" in link_note(card, spec, r)


def test_the_catalog_link_stated_on_eight_bridged_cards_plans_the_same():
    for gpu in ("a100-pcie-80gb", "h200-nvl", "rtx3090"):
        unset = make_plan(load_card_dict(_card(gpu, 8)))
        stated = make_plan(load_card_dict(_card(gpu, 8, link="nvlink")))
        assert stated.step_seconds == unset.step_seconds and stated.time_parts == unset.time_parts


def test_a_stated_pcie_link_drops_the_bridge_note_at_any_count():
    for n in (2, 8):
        plan = make_plan(load_card_dict(_card("a100-pcie-80gb", n, link="pcie_no_p2p")))
        assert not any("NVLink bridges" in a for a in plan.assumptions)


def test_a_tensor_parallel_pair_keeps_the_bridge_and_vllms_custom_all_reduce():
    r = default_rates(resolve_gpu("rtx3090"), node_gpus=8)
    pair, four = group_rates(r, ranks=2), group_rates(r, ranks=4)
    assert pair.intra_node_bus_bytes_per_s == pytest.approx(112.5e9 / 2 * NVLINK_BUS_FRACTION) and pair.p2p
    assert four == r
    assert tp_all_reduce(rates=pair, tp=2).kind == "custom"
    assert tp_all_reduce(rates=r, tp=2).kind == "nccl"  # the node ring's rates: no peer-to-peer
    h200nvl = default_rates(resolve_gpu("h200-nvl"), node_gpus=8)
    assert group_rates(h200nvl, ranks=4).intra_node_bus_bytes_per_s == pytest.approx(900e9 / 2 * NVLINK_BUS_FRACTION)


def test_megatron_tensor_parallel_inside_a_bridge_group_rides_the_bridge():
    def tp_bus(tp: int) -> float:
        card = load_card_dict({**_card("a100-pcie-80gb", 8, strategy="zero1", tensor_parallel=tp,
                                       tensor_parallel_impl="megatron"), "model": "meta-llama/Llama-3.1-8B"})
        r = rates_of(card, gpu_of(card), None)
        return model_parallel_of(card, model_spec_of(card), r, gpus_per_node=8).tp_bus_bytes_per_s

    assert tp_bus(2) == pytest.approx(600e9 / 2 * NVLINK_BUS_FRACTION)
    assert tp_bus(4) == pytest.approx(32e9 * PCIE_P2P_BUS_FRACTION)


def test_a_calibration_of_a_bridged_card_is_restated_for_the_jobs_gpus_unless_it_measured_the_bus():
    spec = resolve_gpu("a100-pcie-80gb")
    card = load_card_dict(_card("a100-pcie-80gb", 8))
    other = default_rates(spec).with_overrides({"matmul_flops_per_s": 200e12}, source="test calibration")
    r = rates_of(card, spec, other)
    assert r.intra_node_bus_bytes_per_s == pytest.approx(32e9 * PCIE_P2P_BUS_FRACTION) and r.bridge_group_gpus == 2
    assert r.matmul_flops_per_s == 200e12
    measured = default_rates(spec).with_overrides({"intra_node_bus_bytes_per_s": 100e9}, source="test calibration")
    kept = rates_of(card, spec, measured)
    assert (kept.intra_node_bus_bytes_per_s, kept.bridge_bus_bytes_per_s) == (100e9, None)
    assert group_rates(kept, ranks=2) == kept  # the measurement stands for every collective of the node


def test_a_measured_bus_is_what_the_bridge_line_names():
    """The bridge line of a card whose calibration measured the bus names the measured rate for every collective and
    the job's real GPUs in a node, not 'fit one group, collectives at the bridge's 247 GB/s'."""
    spec = resolve_gpu("a100-pcie-80gb")
    card = load_card_dict(_card("a100-pcie-80gb", 8))
    measured = default_rates(spec).with_overrides({"intra_node_bus_bytes_per_s": 30e9}, source="test calibration")
    kept = rates_of(card, spec, measured)
    (line,) = [s for s in kept.sources if s.startswith("NVLink bridges join a100-pcie-80gb")]
    assert "measured 30 GB/s bus bandwidth times every collective of the job's 8 GPUs in a node" in line
    assert "fit one group" not in line and "at most 2" not in line


def test_an_expert_group_inside_a_bridge_group_exchanges_over_the_bridge():
    """Expert parallel 2 on 8 bridged A100s: the pair's all-to-all stays on its bridge (ranks 0-1, the pairing of
    nccl-tests #178); expert parallel 4 crosses the PCIe hop between pairs."""
    def ep_bus(ep: int) -> float:
        card = load_card_dict({**_card("a100-pcie-80gb", 8, strategy="zero1", tensor_parallel_impl="megatron",
                                       expert_parallel=ep), "model": "Qwen/Qwen3-30B-A3B"})
        r = rates_of(card, gpu_of(card), None)
        mp = model_parallel_of(card, model_spec_of(card), r, gpus_per_node=8)
        return mp.ep_nvlink_bytes_per_s

    assert ep_bus(2) == pytest.approx(600e9 / 2 * NVLINK_BUS_FRACTION)
    assert ep_bus(4) == pytest.approx(32e9 * PCIE_P2P_BUS_FRACTION)


def test_an_export_gather_inside_a_bridge_group_rides_the_bridge():
    """NeMo RL's Megatron refit gathers (compute.sync._group_bus): a tp group of 2 consecutive ranks on its bridge,
    a group of 2 ranks 2 apart (one from each pair) over the PCIe hop."""
    from trainfit.compute.sync import _group_bus

    r = default_rates(resolve_gpu("a100-pcie-80gb"), node_gpus=8)
    kw = dict(rates=r, node_gpus=8, nic_bytes_per_s=12.5e9)
    assert _group_bus(ranks=2, stride=1, **kw)[0] == pytest.approx(600e9 / 2 * NVLINK_BUS_FRACTION)
    assert _group_bus(ranks=2, stride=2, **kw)[0] == pytest.approx(32e9 * PCIE_P2P_BUS_FRACTION)
