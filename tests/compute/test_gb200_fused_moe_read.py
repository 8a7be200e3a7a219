"""GB200 engines read bf16 routed experts through vLLM's Triton ``fused_moe`` at its default tiles, at the rate a
published B200 kernel benchmark measured, not at the card's HBM rate
(``decode_step.FUSED_MOE_UNTUNED_READ_BYTES_PER_S``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import decode_step as ds
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params

GB200 = default_rates(resolve_gpu("gb200"))
H100 = default_rates(resolve_gpu("h100-sxm"))
QWEN3_30B_A3B = from_catalog("Qwen/Qwen3-30B-A3B")
LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")


def _step(spec, rates, *, batch=64, **kw):
    return ds.decode_step_seconds(spec=spec, matmul_params=matmul_params(spec), rates=rates, tp=1, batch=batch,
                                  context_tokens=batch * 1000.0, weight_bytes=total_params(spec) * 2.0,
                                  kv_bytes_per_token=2.0 * spec.num_layers * spec.kv_dim * 2, **kw)


def test_the_rate_is_the_published_b200_default_config_kernel_time():
    """vllm-project/vllm PR #31448: E=128, N=768, bf16, default config, 4 tokens: 73.18 us for the experts that top-8
    of 128 touch, 3 x 768 x 2048 bf16 weights each."""
    experts = 128 * (1 - (120 / 128) ** 4)
    rate = experts * 3 * 768 * 2048 * 2 / 73.18e-6
    assert ds.FUSED_MOE_UNTUNED_READ_BYTES_PER_S["gb200"] == pytest.approx(rate, rel=1e-3)
    assert rate < 0.5 * resolve_gpu("gb200").hbm_bytes_per_s < GB200.hbm_bytes_per_s


def test_only_bf16_experts_on_gb200_take_it():
    assert ds.fused_moe_read_bytes_per_s(GB200) == ds.FUSED_MOE_UNTUNED_READ_BYTES_PER_S["gb200"]
    assert ds.fused_moe_read_bytes_per_s(GB200, expert_bytes_per_param=1.03) == GB200.hbm_bytes_per_s  # fp8 + scales
    assert ds.fused_moe_read_bytes_per_s(H100) == H100.hbm_bytes_per_s
    assert ds.fused_moe_read_bytes_per_s(default_rates(resolve_gpu("b200"))) == default_rates(
        resolve_gpu("b200")).hbm_bytes_per_s


def test_a_slower_calibrated_hbm_stays_the_bound():
    slow = GB200.with_overrides({"hbm_bytes_per_s": 2.0e12}, source="test")
    assert ds.fused_moe_read_bytes_per_s(slow) == 2.0e12


def test_the_gb200_moe_step_reads_its_experts_at_that_rate(monkeypatch):
    batch = 64
    with_cap = _step(QWEN3_30B_A3B, GB200, batch=batch)
    monkeypatch.setattr(ds, "FUSED_MOE_UNTUNED_READ_BYTES_PER_S", {})
    without = _step(QWEN3_30B_A3B, GB200, batch=batch)
    experts, miss = ds.routed_expert_bytes(QWEN3_30B_A3B, weight_bytes=total_params(QWEN3_30B_A3B) * 2.0)
    touched = experts * (1 - miss ** batch)
    cap = 3.756e12
    assert with_cap.bandwidth_s - without.bandwidth_s == pytest.approx(
        touched / cap - touched / GB200.hbm_bytes_per_s, rel=1e-6)
    assert with_cap.total_s > without.total_s


def test_dense_models_and_h100_engines_do_not_move(monkeypatch):
    dense = _step(LLAMA8, GB200)
    h100 = _step(QWEN3_30B_A3B, H100)
    monkeypatch.setattr(ds, "FUSED_MOE_UNTUNED_READ_BYTES_PER_S", {})
    assert _step(LLAMA8, GB200) == dense
    assert _step(QWEN3_30B_A3B, H100) == h100
