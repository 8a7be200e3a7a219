"""Host <-> device copies run at the card's host link: PCIe, or GB200's share of NVLink-C2C."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import PCIE_EFFICIENCY, default_rates


def test_gb200_copies_to_its_grace_host_over_nvlink_c2c():
    gb200 = resolve_gpu("gb200")
    assert gb200.pcie_bytes_per_s is None and gb200.host_link_bytes_per_s == pytest.approx(225e9)
    assert default_rates(gb200).pcie_bytes_per_s == pytest.approx(225e9 * PCIE_EFFICIENCY)


def test_pcie_cards_keep_their_pcie_rate():
    h100 = resolve_gpu("h100-sxm")
    assert h100.host_link_bytes_per_s is None
    assert default_rates(h100).pcie_bytes_per_s == pytest.approx(h100.pcie_bytes_per_s * PCIE_EFFICIENCY)


def test_gh200_copies_to_its_grace_host_over_its_own_nvlink_c2c():
    gh200 = resolve_gpu("gh200")
    assert gh200.pcie_bytes_per_s is None and gh200.host_link_bytes_per_s == pytest.approx(450e9)
    assert default_rates(gh200).pcie_bytes_per_s == pytest.approx(450e9 * PCIE_EFFICIENCY)
