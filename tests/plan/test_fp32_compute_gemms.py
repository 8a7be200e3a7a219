"""precision.compute fp32: a model trained in fp32 without autocast runs its forward and backward GEMMs in fp32 at the
card's CUDA-core fp32 rate (the A100: 19.5 TFLOP/s against 312 bf16, its datasheet), or at the TF32 tensor rate with
precision.tf32 (156 TFLOP/s); fp32 weights under a 16-bit compute (autocast) keep the 16-bit GEMMs."""

from __future__ import annotations

from functools import lru_cache

import pytest

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


@lru_cache(maxsize=8)
def _gemm_s(weights: str, compute: str, tf32: bool = False) -> dict[str, float]:
    card = {"model": "Qwen/Qwen2-0.5B", "method": "sft", "scope": "full",
            "hardware": {"gpu": "a100-40gb", "gpus_per_node": 1, "nodes": 1}, "parallel": {"strategy": "single"},
            "batch": {"micro_batch_size": 4, "seq_len": 1024},
            "precision": {"weights": weights, "compute": compute, "tf32": tf32}}
    return {ph.name: ph.terms.get("gemm", 0.0) for ph in make_plan(load_card_dict(card)).time.phases}


def test_fp32_compute_prices_fp32_gemms_forward_and_backward():
    bf16, fp32 = _gemm_s("bf16", "bf16"), _gemm_s("fp32", "fp32")
    for name in ("forward", "backward"):
        assert fp32[name] > 8 * bf16[name], name


def test_fp32_weights_under_bf16_compute_keep_the_bf16_gemms():
    assert _gemm_s("fp32", "bf16") == _gemm_s("bf16", "bf16")


def test_tf32_halves_the_bf16_rate_instead():
    bf16, tf32 = _gemm_s("bf16", "bf16"), _gemm_s("fp32", "fp32", True)
    for name in ("forward", "backward"):
        assert tf32[name] == pytest.approx(2 * bf16[name], rel=0.05), name
