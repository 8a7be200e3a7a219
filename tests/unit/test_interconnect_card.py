"""``hardware.interconnect`` on the card: an enum of the link between a node's GPUs; an inter-node network's name, an
unknown value and a link the GPU's catalog entry has no rate for are each refused in one line naming the field and
the allowed values; the strings existing cards and records hold still load."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Interconnect


def _card(link, gpu="h100-sxm"):
    return load_card_dict({"model": {"params": 1e9}, "hardware": {"gpu": gpu, "gpus_per_node": 2,
                                                                   "interconnect": link}})


@pytest.mark.parametrize(("given", "link"), [("nvlink", Interconnect.NVLINK), ("pcie", Interconnect.PCIE),
                                             ("pcie_no_p2p", Interconnect.PCIE_NO_P2P), ("PCIe", Interconnect.PCIE),
                                             ("pcie-no-p2p", Interconnect.PCIE_NO_P2P), (None, None)])
def test_link_names_load_as_the_enum(given, link):
    assert _card(given).hardware.interconnect is link


@pytest.mark.parametrize("network", ["infiniband", "InfiniBand", "roce", "ethernet", "efa"])
def test_an_inter_node_network_is_refused_pointing_to_the_nic_fields(network):
    with pytest.raises(CardError) as exc:
        _card(network)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg == (f"hardware.interconnect: '{network}' is a network between nodes, and this field the link between a"
                   " node's GPUs, allowed: nvlink, pcie, pcie_no_p2p or null (the GPU catalog's link); state the"
                   " network as hardware.nic_gbps_per_gpu or nic_gbps_per_node")


@pytest.mark.parametrize("bad", ["pci", "nvlink4", 3, True])
def test_any_other_value_is_refused_naming_the_allowed(bad):
    with pytest.raises(CardError) as exc:
        _card(bad)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith("hardware.interconnect: ") and msg.endswith(
        "is not allowed; allowed: nvlink, pcie, pcie_no_p2p or null (the GPU catalog's link)")


@pytest.mark.parametrize(("gpu", "link", "allowed"), [
    ("l40s", "nvlink", "pcie, pcie_no_p2p"), ("rtx4090", "nvlink", "pcie, pcie_no_p2p"),
    ("gb200", "pcie", "nvlink"), ("gh200", "pcie_no_p2p", "nvlink")])
def test_a_link_the_catalog_has_no_rate_for_is_refused_naming_the_gpu(gpu, link, allowed):
    with pytest.raises(CardError) as exc:
        _card(link, gpu=gpu)
    what = "NVLink" if link == "nvlink" else "PCIe"
    assert str(exc.value) == (f"hardware.interconnect: '{link}' on {gpu}, whose catalog entry has no {what} rate;"
                              f" allowed on {gpu}: {allowed} or null (the GPU catalog's link)")


def test_a_custom_gpu_takes_any_link():
    card = load_card_dict({"model": {"params": 1e9}, "hardware": {"gpu": "custom", "gpu_memory_gib": 24,
                                                                   "interconnect": "nvlink"}})
    assert card.hardware.interconnect is Interconnect.NVLINK


def test_the_card_writes_the_links_name():
    assert _card("pcie_no_p2p").hardware.model_dump(mode="json")["interconnect"] == "pcie_no_p2p"


@pytest.mark.parametrize("fabric", ["nvswitch", "NVSwitch", "nvlink-switch", "nvlinkswitch", "NVLink Switch", "xgmi",
                                    "xGMI", "infinity-fabric", "Infinity Fabric"])
def test_an_intra_node_fabric_name_is_refused_saying_to_state_nvlink(fabric):
    with pytest.raises(CardError) as exc:
        _card(fabric)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg == (f"hardware.interconnect: '{fabric}' is a fabric between a node's GPUs that this field states as"
                   " nvlink (NVSwitch, NVLink Switch, AMD xGMI / Infinity Fabric); allowed: nvlink, pcie, pcie_no_p2p"
                   " or null (the GPU catalog's link)")
