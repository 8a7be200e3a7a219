"""plan.time.model_parallel_of: a tensor (or tensor x context, expert-tensor x expert) parallel ring over
consecutive ranks that spans nodes leaves each node through the NICs of its GPUs in that node, one NCCL channel
per NIC (compute.collectives.ring_bus_bytes_per_s with local_ranks); a pipeline send crosses on one GPU's NIC."""

from __future__ import annotations

import pytest

from trainfit.compute import collectives as coll
from trainfit.compute.rates import default_rates
from trainfit.plan.resolve import gpu_of, model_spec_of
from trainfit.plan.time import model_parallel_of, nic_bytes_per_s
from trainfit.spec.card import load_card_dict


def _card(tp: int, *, pp: int = 1, nodes: int = 2) -> dict:
    return {"model": "meta-llama/Llama-3.1-70B", "method": "sft",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": nodes},
            "parallel": {"strategy": "zero1", "tensor_parallel": tp, "sequence_parallel": True,
                         "pipeline_parallel": pp, "tensor_parallel_impl": "megatron"},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 8}}


def _parts(card_dict: dict):
    card = load_card_dict(card_dict)
    rates = default_rates(gpu_of(card))
    return card, rates, model_parallel_of(card, model_spec_of(card), rates, gpus_per_node=8)


def test_a_ring_across_two_nodes_uses_every_local_nic():
    card, rates, mp = _parts(_card(16))
    nic = nic_bytes_per_s(card) * coll.NIC_EFFICIENCY
    assert mp.tp_bus_bytes_per_s == pytest.approx(min(rates.intra_node_bus_bytes_per_s, 8 * nic))
    assert mp.tp_bus_bytes_per_s > 4 * nic


def test_a_ring_inside_a_node_is_nvlink_and_a_pipeline_send_is_one_nic():
    card, rates, mp = _parts(_card(8, pp=2))
    assert mp.tp_bus_bytes_per_s == rates.intra_node_bus_bytes_per_s
    assert mp.pp_bytes_per_s == pytest.approx(nic_bytes_per_s(card) * coll.NIC_EFFICIENCY)
