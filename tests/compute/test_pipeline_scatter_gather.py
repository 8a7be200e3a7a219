"""Megatron-LM's scatter/gather pipeline sends (``model_parallel_comm(pp_scatter_gather=True)``): without sequence
parallel each tensor-parallel rank sends its 1/tp slice of the stage's activation and the receiver all-gathers the
slices over the tensor-parallel group (NVIDIA/Megatron-LM megatron/p2p_communication.py l.61-66, 88-94, 133-141
@6985e58938d40ad91ac07b0fddcfad8132e1447e)."""

from __future__ import annotations

import pytest

from trainfit.compute import collectives as coll
from trainfit.compute.model_parallel import model_parallel_comm
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

BASE = dict(tokens=8192.0, hidden=8192, q_dim=8192, kv_dim=1024, layers=20, attention_layers=20, moe_layers=0,
            top_k=0, cp=1, ulysses=False, ep=1, latency_s=30e-6, tp_bus_bytes_per_s=360e9,
            cp_bus_bytes_per_s=360e9, ep_bus_bytes_per_s=360e9, pp_bytes_per_s=40e9)


def test_the_send_is_a_tensor_parallel_slice_plus_an_all_gather():
    full = model_parallel_comm(**BASE, tp=8, pp=4, recompute=True, virtual_stages=2)
    sg = model_parallel_comm(**BASE, tp=8, pp=4, recompute=True, virtual_stages=2, pp_scatter_gather=True)
    act = BASE["tokens"] * BASE["hidden"] * 2
    gather = coll.all_gather_seconds(total_bytes=act, ranks=8, bus_bytes_per_s=BASE["tp_bus_bytes_per_s"])
    v = 2  # 0.5 x 2 directions x v chunks
    assert full.pipeline_p2p_s == pytest.approx(v * (act / BASE["pp_bytes_per_s"] + BASE["latency_s"]))
    assert sg.pipeline_p2p_s == pytest.approx(v * (act / 8 / BASE["pp_bytes_per_s"] + BASE["latency_s"] + gather))
    assert sg.pipeline_p2p_s < full.pipeline_p2p_s
    assert sg.tensor_s == full.tensor_s


def test_it_changes_nothing_under_sequence_parallel_or_without_tensor_parallel():
    sp = model_parallel_comm(**BASE, tp=8, pp=4, recompute=False, sequence_parallel=True)
    sp_sg = model_parallel_comm(**BASE, tp=8, pp=4, recompute=False, sequence_parallel=True, pp_scatter_gather=True)
    assert sp_sg == sp
    one = model_parallel_comm(**BASE, tp=1, pp=4, recompute=False)
    assert model_parallel_comm(**BASE, tp=1, pp=4, recompute=False, pp_scatter_gather=True) == one


def _plan(sg: bool):
    card = {"model": "Qwen/Qwen2.5-32B", "method": "sft",
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 4},
            "parallel": {"strategy": "ddp", "gradient_checkpointing": True, "tensor_parallel": 8,
                         "pipeline_parallel": 4, "tensor_parallel_impl": "megatron",
                         "pipeline_scatter_gather": sg},
            "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 16}}
    return make_plan(load_card_dict(card))


def test_the_card_field_reaches_the_pipeline_send():
    off, on = _plan(False), _plan(True)
    assert on.time_parts["pipeline_p2p"] < 0.5 * off.time_parts["pipeline_p2p"]
    for part in ("forward", "backward", "tensor_parallel"):
        assert on.time_parts[part] == off.time_parts[part]
