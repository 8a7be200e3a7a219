"""A run under CUDA_LAUNCH_BLOCKING=1 (``loop.launch_blocking``, ``training.launch_blocking_syncs``): every kernel
launch waits for its kernel, so a pass costs its host and device seconds one after the other."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.inventory import PassInventory
from trainfit.compute.rates import default_rates
from trainfit.compute.training import (SYNC_ROUND_TRIP_S, _with_host_seconds, launch_blocking_syncs, pass_seconds,
                                       synced_seconds)
from trainfit.errors import CardError
from trainfit.export.common import plan_facts
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))

CARD = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "scope": "full", "attention": "flash",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1}, "parallel": {"strategy": "single"},
        "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 2}}


def test_one_sync_after_every_kernel_but_the_last_never_fewer_than_the_pass_has():
    assert launch_blocking_syncs(kernels=100, host_syncs=0) == 99
    assert launch_blocking_syncs(kernels=100, host_syncs=150) == 150
    assert launch_blocking_syncs(kernels=1, host_syncs=0) == 0


def test_serial_pass_is_host_plus_device_plus_a_round_trip_per_kernel():
    k, h, g = 1000, 1000 * 20e-6, 1000 * 50e-6  # 20 us to issue, 50 us to run each kernel
    overlapped = synced_seconds(host_s=h, device_s=g, kernels=k, syncs=0)
    serial = synced_seconds(host_s=h, device_s=g, kernels=k, syncs=launch_blocking_syncs(kernels=k, host_syncs=0))
    assert overlapped == pytest.approx(g)
    # the first kernel's issue is the only host time overlapped (the two-machine flow shop of synced_seconds)
    assert serial == pytest.approx(h + g - 20e-6 + (k - 1) * SYNC_ROUND_TRIP_S, rel=1e-9)


def test_pass_seconds_only_changes_with_the_flag():
    inv = PassInventory((), 0.0, 0.0, 4e9, 400.0)  # 4 GB of elementwise traffic in 400 kernels, no GEMM
    a = pass_seconds(inv, rates=H100, seq_len=4096, backward=False)
    b = pass_seconds(inv, rates=H100, seq_len=4096, backward=False, launch_blocking=True)
    first = min(a.memory_s, a.host_s) / 400  # the first kernel's issue or run, overlapped
    assert b.seconds == pytest.approx(a.memory_s + a.host_s - first + 399 * SYNC_ROUND_TRIP_S, rel=1e-6)
    assert b.seconds > a.seconds and (b.gemm_s, b.memory_s, b.host_s) == (a.gemm_s, a.memory_s, a.host_s)


def test_hooks_add_in_full_when_serial():
    inv = PassInventory((), 0.0, 0.0, 4e11, 400.0)  # device-bound: 400 GB of traffic
    t = pass_seconds(inv, rates=H100, seq_len=4096, backward=False)
    assert _with_host_seconds(t, hooks_s=1e-3).seconds == pytest.approx(t.seconds)  # hidden behind the device
    s = pass_seconds(inv, rates=H100, seq_len=4096, backward=False, launch_blocking=True)
    assert _with_host_seconds(s, hooks_s=1e-3, serial=True).seconds == pytest.approx(s.seconds + 1e-3)


def test_card_flag_slows_the_step_and_leaves_memory_alone():
    plain = make_plan(load_card_dict(CARD))
    blocking = make_plan(load_card_dict({**CARD, "loop": {"launch_blocking": True}}))
    assert blocking.step_seconds > plain.step_seconds
    assert blocking.peak.device == plain.peak.device  # time only


def test_flag_is_a_plan_fact_and_must_be_a_bool():
    card = load_card_dict({**CARD, "loop": {"launch_blocking": True}})
    assert plan_facts(card)["loop.launch_blocking"] is True
    with pytest.raises(CardError):
        load_card_dict({**CARD, "loop": {"launch_blocking": "sometimes"}})


def test_every_export_names_the_flag_it_cannot_carry():
    from trainfit.export import TARGETS, export

    card = load_card_dict({**CARD, "loop": {"launch_blocking": True}})
    for target in TARGETS:
        assert "loop.launch_blocking" in export(card, target).lost, target


def _comm_phases(data: dict) -> dict:
    return {p.name: p for p in make_plan(load_card_dict(data)).time.phases}


def test_data_parallel_reduction_is_not_hidden_when_every_launch_waits():
    """DDP's bucketed all-reduce hides behind the backward; under CUDA_LAUNCH_BLOCKING=1 each NCCL launch returns
    only when the collective ends, so the whole reduction is exposed."""
    ddp = {**CARD, "model": "Qwen/Qwen2.5-1.5B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
           "parallel": {"strategy": "ddp"}}
    plain = _comm_phases(ddp)["communication"]
    blocking = _comm_phases({**ddp, "loop": {"launch_blocking": True}})["communication"]
    assert plain.seconds < plain.terms["total"]
    assert blocking.seconds == pytest.approx(blocking.terms["total"])
    assert blocking.terms["total"] == pytest.approx(plain.terms["total"])


def test_model_parallel_traffic_is_exposed_in_full_when_every_launch_waits():
    from trainfit.compute.model_parallel import model_parallel_comm

    kw = {"tokens": 4096, "hidden": 4096, "q_dim": 4096, "kv_dim": 1024, "layers": 8, "attention_layers": 8,
          "moe_layers": 0, "top_k": 0, "tp": 4, "cp": 1, "ulysses": False, "ep": 1, "pp": 4, "recompute": False,
          "tp_bus_bytes_per_s": 200e9, "cp_bus_bytes_per_s": 1e9, "ep_bus_bytes_per_s": 1e9, "pp_bytes_per_s": 50e9,
          "tp_comm_overlap": True, "gemm_forward_s": 1.0, "gemm_backward_s": 2.0}
    overlapped = model_parallel_comm(**kw)
    plain_tp = model_parallel_comm(**{**kw, "tp_comm_overlap": False})
    blocking = model_parallel_comm(**kw, launch_blocking=True)
    assert overlapped.tensor_s == 0.0 < plain_tp.tensor_s == pytest.approx(blocking.tensor_s)  # no TP overlap
    assert blocking.pipeline_p2p_s == pytest.approx(2 * overlapped.pipeline_p2p_s)  # sends not half hidden
