"""``hardware.interconnect``: the node link's bus bandwidth, peer-to-peer and NVLink flags (``compute.rates``
``catalog_link`` / ``link_rates`` / ``stated_link_rates``), taken with the fractions the catalog's link takes, and
applied in ``plan.time.rates_of`` only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.gpus import gpu_ids, resolve_gpu
from trainfit.compute.rates import (NVLINK_BUS_FRACTION, PCIE_NO_P2P_BUS_FRACTION, PCIE_P2P_BUS_FRACTION,
                                    allowed_links, catalog_link, default_rates, link_rates, stated_link_rates)
from trainfit.errors import CardError
from trainfit.plan.time import link_note, rates_of
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Interconnect


def _card(gpu: str, link: str | None, gpus: int = 2):
    hw = {"gpu": gpu, "gpus_per_node": gpus}
    if link is not None:
        hw["interconnect"] = link
    card = {"model": {"params": 1e9}, "hardware": hw}
    if not resolve_gpu(gpu).bf16_dense_flops_per_s:  # T4, V100: no bf16 tensor cores
        card["precision"] = {"weights": "fp16", "compute": "fp16"}
    return load_card_dict(card)


@pytest.mark.parametrize("gpu", gpu_ids())
def test_stating_the_catalogs_own_link_changes_no_rate(gpu):
    """Every catalog GPU: a card stating its catalog's link times at exactly the rates of a card that leaves it
    unset (the same fractions, the same bridged-pair flag)."""
    spec = resolve_gpu(gpu)
    link = catalog_link(spec)
    assert link in allowed_links(spec)
    assert stated_link_rates(default_rates(spec), spec, link=link) == default_rates(spec)
    assert rates_of(_card(gpu, link.value), spec, None) == rates_of(_card(gpu, None), spec, None)


# (GPU, link) -> (bus bytes/s, p2p, nvlink): a GeForce without P2P in its driver, a PCIe data-center card, a bridged
# PCIe card (NVLink pairs) and an SXM card on an NVSwitch
EXPECTED = {
    ("rtx4090", "pcie"): (32e9 * PCIE_P2P_BUS_FRACTION, True, False),  # the patched-driver P2P of the measurement
    ("rtx4090", "pcie_no_p2p"): (32e9 * PCIE_NO_P2P_BUS_FRACTION, False, False),
    ("l40s", "pcie"): (32e9 * PCIE_P2P_BUS_FRACTION, True, False),
    ("l40s", "pcie_no_p2p"): (32e9 * PCIE_NO_P2P_BUS_FRACTION, False, False),
    ("a100-pcie-80gb", "nvlink"): (600e9 / 2 * NVLINK_BUS_FRACTION, True, False),  # bridges join pairs only
    ("a100-pcie-80gb", "pcie"): (32e9 * PCIE_P2P_BUS_FRACTION, True, False),
    ("a100-pcie-80gb", "pcie_no_p2p"): (32e9 * PCIE_NO_P2P_BUS_FRACTION, False, False),
    ("rtx3090", "pcie"): (32e9 * PCIE_P2P_BUS_FRACTION, True, False),
    ("rtx3090", "pcie_no_p2p"): (32e9 * PCIE_NO_P2P_BUS_FRACTION, False, False),
    ("h100-sxm", "nvlink"): (900e9 / 2 * NVLINK_BUS_FRACTION, True, True),
    ("h100-sxm", "pcie"): (64e9 * PCIE_P2P_BUS_FRACTION, True, False),
    ("h100-sxm", "pcie_no_p2p"): (64e9 * PCIE_NO_P2P_BUS_FRACTION, False, False),
}


@pytest.mark.parametrize(("gpu", "link"), sorted(EXPECTED))
def test_a_stated_link_replaces_the_catalogs(gpu, link):
    spec = resolve_gpu(gpu)
    r = rates_of(_card(gpu, link), spec, None)
    bus, p2p, nvlink = EXPECTED[(gpu, link)]
    assert (r.intra_node_bus_bytes_per_s, r.p2p, r.nvlink) == (pytest.approx(bus), p2p, nvlink)
    assert link_rates(spec, link=Interconnect(link)) == (pytest.approx(bus), p2p, nvlink)
    # nothing but the link (and the catalog fabric's caveat in the sources) moves
    base = default_rates(spec)
    assert replace(r, intra_node_bus_bytes_per_s=base.intra_node_bus_bytes_per_s, p2p=base.p2p,
                   nvlink=base.nvlink, sources=base.sources) == base
    assert set(r.sources) <= set(base.sources)


def test_links_the_catalog_has_no_rate_for_are_refused():
    assert allowed_links(resolve_gpu("l40s")) == (Interconnect.PCIE, Interconnect.PCIE_NO_P2P)
    assert allowed_links(resolve_gpu("gb200")) == (Interconnect.NVLINK,)  # Grace superchips: no PCIe between GPUs
    with pytest.raises(CardError, match=r"^hardware.interconnect: 'nvlink' on l40s, whose catalog entry has no NVLink"
                                        r" rate; allowed on l40s: pcie, pcie_no_p2p or null"):
        link_rates(resolve_gpu("l40s"), link=Interconnect.NVLINK)


def test_a_calibrated_bus_bandwidth_is_kept_and_the_flags_follow_the_stated_link():
    spec = resolve_gpu("rtx3090")
    measured = default_rates(spec).with_overrides({"intra_node_bus_bytes_per_s": 20e9}, source="test calibration")
    r = rates_of(_card("rtx3090", "pcie_no_p2p"), spec, measured)
    assert (r.intra_node_bus_bytes_per_s, r.p2p, r.nvlink) == (20e9, False, False)
    note = link_note(_card("rtx3090", "pcie_no_p2p"), spec, r, calibration=measured)
    assert "stated (hardware.interconnect)" in note and "20 GB/s (the calibration's measurement)" in note
    # a calibration that left the bus alone: the stated link's own fraction
    other = default_rates(spec).with_overrides({"matmul_flops_per_s": 50e12}, source="test calibration")
    assert rates_of(_card("rtx3090", "pcie_no_p2p"), spec, other).intra_node_bus_bytes_per_s == pytest.approx(8e9)


def test_the_link_note_says_which_link_and_why():
    spec = resolve_gpu("rtx3090")
    unset = _card("rtx3090", None)
    assert link_note(unset, spec, rates_of(unset, spec, None)) == (
        "node link: nvlink (NVLink, bridged in pairs), the GPU catalog's link for rtx3090 (hardware.interconnect"
        " unset); NCCL bus bandwidth in a node 46 GB/s")
    stated = _card("rtx3090", "pcie_no_p2p")
    assert link_note(stated, spec, rates_of(stated, spec, None)) == (
        "node link: pcie_no_p2p (PCIe without peer-to-peer, through host memory), stated (hardware.interconnect);"
        " NCCL bus bandwidth in a node 8 GB/s")
    assert link_note(_card("rtx3090", "pcie", gpus=1), spec, default_rates(spec)) is None  # one GPU: no collectives


@pytest.mark.parametrize(("gpu", "link"), [("rtx3090", "pcie_no_p2p"), ("h100-nvl", "pcie"), ("mi300x", "pcie")])
def test_a_link_other_than_the_catalogs_drops_the_catalog_fabric_caveat(gpu, link):
    """The bridged-pairs and Infinity Fabric caveats describe the catalog's fabric, not a stated PCIe link."""
    g = resolve_gpu(gpu)
    catalog = default_rates(g)
    caveat = [s for s in catalog.sources if "NVLink bridges" in s or "Infinity Fabric" in s]
    assert caveat
    stated = stated_link_rates(catalog, g, link=Interconnect(link))
    assert not set(caveat) & set(stated.sources)
    assert stated_link_rates(catalog, g, link=catalog_link(g)).sources == catalog.sources


def test_the_stock_driver_refuses_pcie_peer_to_peer_on_geforce_cards_the_3090_included():
    from trainfit.compute.rates import stock_driver_refuses_pcie_p2p

    assert stock_driver_refuses_pcie_p2p(resolve_gpu("rtx3090")) and stock_driver_refuses_pcie_p2p(resolve_gpu("rtx4090"))
    assert not stock_driver_refuses_pcie_p2p(resolve_gpu("l40s"))
    assert not stock_driver_refuses_pcie_p2p(resolve_gpu("rtx-a6000"))
    assert catalog_link(resolve_gpu("rtx3090")) is Interconnect.NVLINK  # its catalog link stays the bridged pair
