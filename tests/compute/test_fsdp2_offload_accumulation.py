"""FSDP2 CPU offload with gradient accumulation (``compute.offload.fsdp2_offload_accumulation_seconds``): after the
first micro-batch of a step, torch's ``foreach_reduce`` copies each unit's reduce-scattered shard to the host with a
blocking ``.to("cpu")`` and adds it there, inside the post-backward hook, so every later micro-batch pays the whole
reduce-scatter, the copy into pageable memory (first-touch above glibc's mmap ceiling) and the host add."""

from __future__ import annotations

import inspect

import pytest

from trainfit.compute import collectives as coll
from trainfit.compute.offload import (
    GLIBC_MMAP_THRESHOLD_MAX_BYTES,
    PAGEABLE_FIRST_TOUCH_BYTES_PER_S,
    PAGEABLE_STAGING_BYTES_PER_S,
    fsdp2_offload_accumulation_seconds,
)
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

GB = 1e9
KW = dict(pageable_bytes_per_s=PAGEABLE_STAGING_BYTES_PER_S, first_touch_bytes_per_s=PAGEABLE_FIRST_TOUCH_BYTES_PER_S,
          host_add_bytes_per_s=25 * GB, reduce_scatter_s=1.5)


def test_one_micro_batch_accumulates_nothing():
    assert fsdp2_offload_accumulation_seconds(grad_bytes_per_rank=7 * GB, unit_grad_bytes_per_rank=0.1 * GB,
                                              micro_steps=1, **KW) == 0.0


def test_every_later_micro_batch_pays_reduce_scatter_copy_and_add():
    # 7.3 GB a rank in 78 MB units (above glibc's 32 MiB mmap ceiling: fresh pages at 1.4 GB/s), 25 GB/s for the add,
    # 1.5 s of reductions, 64 micro-batches: 63 x (1.5 + 7.3 / 1.4 + 3 x 7.3 / 25) = 63 x (1.5 + 5.2143 + 0.876)
    # = 63 x 7.5903 = 478.19 s
    s = fsdp2_offload_accumulation_seconds(grad_bytes_per_rank=7.3 * GB, unit_grad_bytes_per_rank=78e6, micro_steps=64,
                                           **KW)
    assert s == pytest.approx(478.19, abs=0.01)


def test_units_below_the_mmap_ceiling_copy_at_the_pageable_rate():
    g = 2 * GB
    small = fsdp2_offload_accumulation_seconds(grad_bytes_per_rank=g, unit_grad_bytes_per_rank=GLIBC_MMAP_THRESHOLD_MAX_BYTES,
                                               micro_steps=2, **KW)
    large = fsdp2_offload_accumulation_seconds(grad_bytes_per_rank=g,
                                               unit_grad_bytes_per_rank=GLIBC_MMAP_THRESHOLD_MAX_BYTES + 1,
                                               micro_steps=2, **KW)
    # 2 GB: 1.5 + 2 / 10 + 3 x 2 / 25 = 1.94 s at the staging rate; 1.5 + 2 / 1.4 + 0.24 = 3.169 s into fresh pages
    assert small == pytest.approx(1.94, abs=1e-3)
    assert large == pytest.approx(3.169, abs=1e-3)


def test_rejects_bad_input():
    with pytest.raises(ValueError):
        fsdp2_offload_accumulation_seconds(grad_bytes_per_rank=1.0, unit_grad_bytes_per_rank=1.0, micro_steps=0, **KW)
    with pytest.raises(ValueError):
        fsdp2_offload_accumulation_seconds(grad_bytes_per_rank=1.0, unit_grad_bytes_per_rank=1.0, micro_steps=2,
                                           **{**KW, "host_add_bytes_per_s": 0.0})


def _card(fsdp_version: str, offload: str, grad_accum: int) -> dict:
    return {"model": "Qwen/Qwen2.5-7B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp", "fsdp_version": fsdp_version, "offload": offload},
            "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": grad_accum}}


def _offload_s(card: dict) -> float:
    plan = make_plan(load_card_dict(card))
    return next((p.seconds for p in plan.time.phases if p.name == "offload"), 0.0)


def test_plan_charges_it_only_to_fsdp2_cpu_offload_with_accumulation():
    base = _offload_s(_card("fsdp2", "params_and_optimizer", 1))
    accumulated = _offload_s(_card("fsdp2", "params_and_optimizer", 4))
    # three later micro-batches, each at least its copy of the rank's bf16/fp32 gradient shard (7.6e9 / 8 params)
    assert accumulated - base > 3 * 7.6e9 / 8 * 2 / PAGEABLE_STAGING_BYTES_PER_S
    # FSDP1's CPUOffload keeps its own path (no host-side accumulation term)
    fsdp1 = _offload_s(_card("fsdp1", "params_and_optimizer", 4)) - _offload_s(_card("fsdp1", "params_and_optimizer", 1))
    assert fsdp1 < accumulated - base


def test_copy_rates_are_host_copy_rates_and_only_for_fsdp2_cpu_offload():
    from trainfit.compute.rates import default_rates
    from trainfit.plan import gpu_of
    from trainfit.plan.time import fsdp2_offload_copy_rates

    card = load_card_dict(_card("fsdp2", "params_and_optimizer", 4))
    r = default_rates(gpu_of(card))
    # H100 SXM, 8 GPUs of a node copying at once: pinned min(PCIe 51.2, host 200 / 8 = 25) = 25 GB/s; pageable
    # min(25, the driver's 10 GB/s staging copy) = 10 GB/s; into fresh pages min(10, 1.4 first touch) = 1.4 GB/s
    assert (r.pcie_bytes_per_s, r.host_memory_bytes_per_s) == (51.2 * GB, 200 * GB)
    assert fsdp2_offload_copy_rates(card, r, gpus_per_node=8) == pytest.approx((10 * GB, 1.4 * GB), rel=1e-12)
    # one GPU of the node copying: pinned min(51.2, 200) = 51.2 GB/s, the staging and first-touch rates still bind
    assert fsdp2_offload_copy_rates(card, r, gpus_per_node=1) == pytest.approx((10 * GB, 1.4 * GB), rel=1e-12)
    for other in (_card("fsdp1", "params_and_optimizer", 4), _card("fsdp2", "optimizer", 4),
                  {**_card("fsdp2", "params_and_optimizer", 4), "parallel": {"strategy": "zero3",
                                                                             "offload": "params_and_optimizer"}}):
        assert fsdp2_offload_copy_rates(load_card_dict(other), r, gpus_per_node=8) is None


def test_verls_fsdp2_actor_is_not_under_torchs_cpu_offload():
    # verl never wraps its actor with CPUOffloadPolicy unless fsdp_config.offload_policy is set, which a card cannot
    # state: its param / optimizer offload moves the state between phases (plan.time.torch_fsdp_cpu_offload)
    from trainfit.compute.rates import default_rates
    from trainfit.plan import gpu_of
    from trainfit.plan.time import fsdp2_offload_copy_rates

    card = load_card_dict({"model": "Qwen/Qwen3-8B", "method": "grpo", "preset": "verl",
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
                           "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp2",
                                        "offload": "params_and_optimizer"}})
    assert fsdp2_offload_copy_rates(card, default_rates(gpu_of(card)), gpus_per_node=8) is None


@pytest.mark.parametrize(("weights", "grads", "element_bytes"),
                         [("bf16", None, 2), ("fp32", None, 4), ("fp32", "bf16", 4)])
def test_host_gradient_is_in_the_sharded_parameters_dtype(weights, grads, element_bytes):
    # foreach_reduce casts the reduce-scatter output to the sharded parameter's dtype before the host copy and add:
    # Qwen2.5-7B, 7.616e9 parameters over 8 ranks = 0.952e9 a rank: 1.90 GB in bf16, 3.81 GB in fp32, whatever the
    # card's gradient (reduce) dtype
    card = _card("fsdp2", "params_and_optimizer", 4)
    card["precision"] = {"weights": weights, **({"grads": grads} if grads else {})}
    notes = [a for a in make_plan(load_card_dict(card)).time.assumptions if "FSDP2 CPU offload" in a]
    assert len(notes) == 1
    assert f"{element_bytes} B an element, the sharded parameters' dtype" in notes[0]
    assert f"({0.952 * element_bytes:.2f} GB a micro-batch" in notes[0]


def test_reductions_one_after_another_include_experts_and_the_hsdp_all_reduce():
    # 1 ms fixed latency, ring wire times. Per layer: dense reduce-scatter 8 GB over 8 ranks at 100 GB/s
    # 0.001 + 8 x 7/8 / 100 = 0.071 s; experts 4 GB over 4 ranks at 50 GB/s 0.001 + 4 x 3/4 / 50 = 0.061 s; HSDP
    # all-reduce 1 GB over 2 replicas at 25 GB/s 0.001 + 2 x 1 x 1/2 / 25 = 0.041 s: 0.173 s, two layers 0.346 s.
    # Root: 0.001 + 1 x 7/8 / 100 = 0.00975 s and its all-reduce 0.001 + 0.5 / 25 = 0.021 s. In all 0.37675 s
    kw = dict(layers=2, layer_grad_bytes=8e9, root_grad_bytes=1e9, ranks=8, bus_bytes_per_s=100e9, latency_s=1e-3,
              expert_layer_grad_bytes=4e9, expert_ranks=4, expert_bus_bytes_per_s=50e9, replica_layer_grad_bytes=1e9,
              replica_root_grad_bytes=0.5e9, replica_ranks=2, replica_bus_bytes_per_s=25e9)
    assert coll.sharded_reductions_seconds(**kw) == pytest.approx(0.37675, abs=1e-9)
    assert coll.sharded_reductions_seconds(**{**kw, "replica_ranks": 1}) == pytest.approx(0.37675 - 2 * 0.041 - 0.021)


def test_later_micro_batches_reductions_leave_the_communication_phase():
    # the accumulation term pays micro-batches 2..m's reductions whole; the communication phase no longer counts the
    # part of them it had exposed (same card without the CPU offload keeps it)
    def phases(offload: str) -> tuple[float, list[str]]:
        plan = make_plan(load_card_dict(_card("fsdp2", offload, 4)))
        comm = next(p.seconds for p in plan.time.phases if p.name == "communication")
        return comm, list(plan.time.assumptions)

    kept, _ = phases("none")
    moved, notes = phases("params_and_optimizer")
    note = next(n for n in notes if "FSDP2 CPU offload" in n)
    removed = float(note.split("; the ")[1].split(" s ")[0])
    assert removed > 0
    assert kept - moved == pytest.approx(removed, abs=0.006)


def test_host_add_runs_on_one_thread():
    from trainfit.compute.offload import ONE_THREAD_ADD_BYTES_PER_S, fsdp2_host_add_bytes_per_s

    # 8 ranks of a 200 GB/s host: 25 GB/s each, below one thread's bf16 add (29.9 GB/s measured): the share binds
    assert fsdp2_host_add_bytes_per_s(rank_share_bytes_per_s=25 * GB, element_bytes=2, one_thread=True) == 25 * GB
    # 2 ranks (100 GB/s each): one thread binds. A 1 GB gradient shard, one later micro-batch, no reductions, small
    # units (the 10 GB/s staging copy): bf16 1 / 10 + 3 x 1 / 29.9 = 0.1 + 0.100334 = 0.200334 s; fp32
    # 0.1 + 3 / 45.4 = 0.1 + 0.066079 = 0.166079 s
    for element_bytes, seconds in ((2, 0.200334), (4, 0.166079)):
        add = fsdp2_host_add_bytes_per_s(rank_share_bytes_per_s=100 * GB, element_bytes=element_bytes,
                                         one_thread=True)
        s = fsdp2_offload_accumulation_seconds(
            grad_bytes_per_rank=1 * GB, unit_grad_bytes_per_rank=GLIBC_MMAP_THRESHOLD_MAX_BYTES, micro_steps=2,
            pageable_bytes_per_s=10 * GB, first_touch_bytes_per_s=1.4 * GB, host_add_bytes_per_s=add,
            reduce_scatter_s=0.0)
        assert s == pytest.approx(seconds, abs=1e-6)
    assert set(ONE_THREAD_ADD_BYTES_PER_S) == {2.0, 4.0}
    # a launcher that leaves torch's default pool (torchrun with one process a node): the share alone
    assert fsdp2_host_add_bytes_per_s(rank_share_bytes_per_s=100 * GB, element_bytes=2, one_thread=False) == 100 * GB
    with pytest.raises(ValueError):
        fsdp2_host_add_bytes_per_s(rank_share_bytes_per_s=0.0, element_bytes=2, one_thread=True)


def test_sharded_reductions_take_explicit_keywords_only():
    # the keywords a caller holding exposed_sharded's passes on are the function's own; a misspelt one raises
    params = inspect.signature(coll.sharded_reductions_seconds).parameters
    assert tuple(params) == coll.SHARDED_REDUCTION_KEYWORDS
    assert set(params) <= set(inspect.signature(coll.exposed_sharded).parameters)
    with pytest.raises(TypeError):
        coll.sharded_reductions_seconds(layers=2, layer_grad_bytes=8e9, root_grad_bytes=1e9, ranks=8,
                                        bus_bytes_per_s=100e9, replica_rank=2)


def test_one_unit_terms_serve_both_schedules():
    # the per-unit terms of the test above (1 ms latency, ring wire times): exposed_sharded with no gathers, one
    # micro-batch and a backward long enough to hide the layers' reductions exposes the last layer's and the root's
    kw = dict(layer_grad_bytes=8e9, root_grad_bytes=1e9, ranks=8, bus_bytes_per_s=100e9, latency_s=1e-3,
              expert_layer_grad_bytes=4e9, expert_ranks=4, expert_bus_bytes_per_s=50e9, replica_layer_grad_bytes=1e9,
              replica_root_grad_bytes=0.5e9, replica_ranks=2, replica_bus_bytes_per_s=25e9)
    unit = coll.sharded_unit_seconds(**kw)
    assert unit.reduce_scatter_s == pytest.approx(0.071 + 0.061, abs=1e-12)
    assert unit.all_reduce_s == pytest.approx(0.041, abs=1e-12)
    assert (unit.root_reduce_scatter_s, unit.root_all_reduce_s) == pytest.approx((0.00975, 0.021), abs=1e-12)
    assert unit.all_gather_s == unit.root_all_gather_s == 0.0
    exposed = coll.exposed_sharded(layers=2, layer_weight_bytes=0.0, root_weight_bytes=0.0, layer_forward_s=1.0,
                                   layer_backward_s=1.0, micro_steps=1, **kw)
    assert exposed.exposed_s == pytest.approx(0.173 + 0.00975 + 0.021, abs=1e-12)
