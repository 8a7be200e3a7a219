"""``hardware.nic_gbps_per_node``: a node with fewer NICs than GPUs (or one Ethernet port) shares what it has among
the ranks a collective has on it (``collectives.gpu_nic_bytes_per_s``); unset, every GPU keeps its own NIC and
nothing changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.compute import collectives
from trainfit.compute.rates import default_rates
from trainfit.catalog.gpus import resolve_gpu
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import RunCard, load_card_dict

NIC = 25e9  # one 200 Gb/s NIC per GPU


def _rates(node_nic_bytes_per_s: float | None = None):
    return replace(default_rates(resolve_gpu("a800-80gb")), node_nic_bytes_per_s=node_nic_bytes_per_s)


def test_unset_keeps_one_nic_per_gpu():
    r = _rates()
    assert collectives.gpu_nic_bytes_per_s(rates=r, nic_bytes_per_s=NIC, local_ranks=8) == NIC
    assert collectives.ring_bus_bytes_per_s(rates=r, crosses_nodes=True, nic_bytes_per_s=NIC, local_ranks=2) == (
        pytest.approx(2 * NIC * collectives.NIC_EFFICIENCY))


def test_a_node_cap_is_shared_by_the_collectives_ranks_on_the_node():
    """4 HDR cards for 8 GPUs (100 GB/s a node): a ring with 8 ranks a node crosses at the node's 100 GB/s, not
    8 x 25; a ring with one rank a node still has a whole NIC."""
    r = _rates(100e9)
    assert collectives.gpu_nic_bytes_per_s(rates=r, nic_bytes_per_s=NIC, local_ranks=8) == pytest.approx(12.5e9)
    assert collectives.gpu_nic_bytes_per_s(rates=r, nic_bytes_per_s=NIC, local_ranks=1) == NIC
    eight = collectives.ring_bus_bytes_per_s(rates=r, crosses_nodes=True, nic_bytes_per_s=NIC, local_ranks=8)
    assert eight == pytest.approx(min(r.intra_node_bus_bytes_per_s, 100e9 * collectives.NIC_EFFICIENCY))
    # a one-port node (16 Gb/s) binds even a single sender
    slow = _rates(16e9 / 8)
    one = collectives.ring_bus_bytes_per_s(rates=slow, crosses_nodes=True, nic_bytes_per_s=NIC, local_ranks=1)
    assert one == pytest.approx(2e9 * collectives.NIC_EFFICIENCY)
    # inside a node the cap does not apply
    assert collectives.ring_bus_bytes_per_s(rates=slow, crosses_nodes=False, nic_bytes_per_s=NIC,
                                            local_ranks=8) == slow.intra_node_bus_bytes_per_s


def test_all_to_all_takes_the_shared_nic():
    capped = collectives.all_to_all_bus_bytes_per_s(rates=_rates(50e9), ranks=16, ranks_in_node=8,
                                                    nic_bytes_per_s=NIC)
    free = collectives.all_to_all_bus_bytes_per_s(rates=_rates(), ranks=16, ranks_in_node=8, nic_bytes_per_s=NIC)
    assert capped == pytest.approx(free / 4)  # 50 GB/s over 8 GPUs against 25 GB/s each: the NIC term binds


def _card(node_gbps: float | None) -> dict:
    hw = {"gpu": "a800-80gb", "gpus_per_node": 8, "nodes": 2}
    if node_gbps is not None:
        hw["nic_gbps_per_node"] = node_gbps
    return {"model": {"id": "Qwen/Qwen3-8B"}, "hardware": hw, "parallel": {"strategy": "fsdp"},
            "batch": {"micro_batch_size": 1, "seq_len": 2048}}


def test_a_card_field_slows_a_cross_node_fsdp_step_and_changes_no_memory():
    free, slow = make_plan(RunCard.model_validate(_card(None))), make_plan(RunCard.model_validate(_card(16)))
    assert slow.step_seconds > free.step_seconds
    assert slow.peak.device == free.peak.device and slow.peak.allocated == free.peak.allocated


@pytest.mark.parametrize("bad", [0, -5])
def test_the_field_refuses_a_non_positive_rate_naming_it(bad):
    with pytest.raises(CardError, match="nic_gbps_per_node"):
        load_card_dict(_card(bad))
