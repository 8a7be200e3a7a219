"""Megatron-Core's unfused bshd RoPE under a YaRN concentration factor (``compute.inventory.megatron_rope_work``): its
eager bytes and kernels replace the fused rotary's, on Megatron-Core cards, bshd rows only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute import inventory as inv
from trainfit.compute.inventory import step_inventory

OSS = from_catalog("openai/gpt-oss-20b")
KW = dict(micro_batch_size=2, seq_len=1024, expert_parallel=1)


def test_traced_counts():
    assert (inv.MEGATRON_ROPE_FORWARD_BYTES, inv.MEGATRON_ROPE_FORWARD_KERNELS) == (24.0, 12)
    assert (inv.MEGATRON_ROPE_BACKWARD_BYTES, inv.MEGATRON_ROPE_BACKWARD_KERNELS) == (28.0, 7)
    f, b = inv.megatron_rope_work(rotated_elements=100.0, positions=10.0, rotary_dim=4.0, layers=3.0)
    assert f.memory_bytes == pytest.approx(24.0 * 100 * 3 + 48.0 * 10 * 4 * 6) and f.kernels == 12 * 6
    assert b.memory_bytes == pytest.approx(28.0 * 100 * 3) and b.kernels == 7 * 6
    # eager bare aten calls: outside the compile factors, at the backward's per-kernel host rate (as thd_rope_loop's)
    assert (f.fused_bytes, f.fused_kernels, b.fused_bytes, b.fused_kernels) == (
        f.memory_bytes, f.kernels, b.memory_bytes, b.kernels)
    assert (f.bare_kernels, b.bare_kernels) == (f.kernels, b.kernels)
    # the broadcast multiplies: the non-vectorised loop's rate, compiled card or not
    assert f.strided_bytes == f.fused_strided_bytes == b.strided_bytes == pytest.approx(8.0 * 100 * 3)


def test_replaces_the_fused_rotary_on_bshd_rows():
    plain = step_inventory(OSS, **KW)
    mega = step_inventory(OSS, megatron_rope=True, **KW)
    t, layers = 2 * 1024, OSS.num_layers
    e = t * (OSS.q_dim + OSS.kv_dim)
    rope_f, rope_b = inv.megatron_rope_work(rotated_elements=e, positions=1024, rotary_dim=OSS.head_dim,
                                            layers=layers)
    fused_rotary = inv.ROTARY_BYTES * e * layers
    assert mega.layers_forward.memory_bytes - plain.layers_forward.memory_bytes == pytest.approx(
        rope_f.memory_bytes - fused_rotary)
    assert mega.layers_forward.fused_bytes - plain.layers_forward.fused_bytes == pytest.approx(rope_f.memory_bytes)
    assert mega.layers_forward.kernels - plain.layers_forward.kernels == pytest.approx(
        rope_f.kernels - 2 * inv.ROTARY_KERNELS * layers)
    assert mega.layers_backward.fused_bytes - plain.layers_backward.fused_bytes == pytest.approx(rope_b.memory_bytes)
    # a whole-layer recompute re-runs it; the packed thd rows keep their per-sample loop's count
    assert mega.layers_recompute_whole.fused_bytes - plain.layers_recompute_whole.fused_bytes == pytest.approx(
        rope_f.memory_bytes)
    thd = dict(KW, rope_loop_samples=4.0)
    assert step_inventory(OSS, megatron_rope=True, **thd) == step_inventory(OSS, **thd)


def test_only_a_yarn_concentration_on_megatron_layers():
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import default_rates
    from trainfit.compute.training import train_step_time

    rates = default_rates(resolve_gpu("h100-sxm"))
    from trainfit.plan.time import COMPILE_KERNEL_FACTOR, COMPILE_MEMORY_FACTOR

    # as the plan times a Megatron-Core card (its TE fused kernels planned as compile)
    kw = dict(rates=rates, micro_batch_size=1, seq_len=2048, micro_steps=1, trained_params=2e10,
              trained_tensors=400, gathered_weight_bytes=0.0, memory_factor=COMPILE_MEMORY_FACTOR,
              kernel_factor=COMPILE_KERNEL_FACTOR)
    no_yarn = replace(OSS, rotary_concentration=1.0)

    def memory_s(t):
        return sum(p.terms.get("memory_bound", 0.0) for p in t.phases)

    # the eager bytes replace the fused rotary's, on Megatron-Core's layers only
    assert memory_s(train_step_time(OSS, te_layers=True, **kw)) > memory_s(
        train_step_time(no_yarn, te_layers=True, **kw))
    assert train_step_time(OSS, **kw).total_s == train_step_time(no_yarn, **kw).total_s
