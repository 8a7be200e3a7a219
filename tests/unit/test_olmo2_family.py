"""OLMo 2 (``olmo2``) outside the activation model: its whole-width q/k norm weights in the weight-sync tensor walk
and in a vLLM TP rank's share (vllm-project/vllm vllm/model_executor/models/olmo2.py
@028aedf62adee9d2a1e99d4cda7c1ce1c997c8cc: q_norm / k_norm whole on every rank, q and k all-gathered for them)."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute import sync
from trainfit.memory.params import param_breakdown
from trainfit.rollout.vllm import weights_per_gpu_params

IDS = ("allenai/OLMo-2-0425-1B", "allenai/OLMo-2-1124-7B", "allenai/OLMo-2-1124-13B")


@pytest.mark.parametrize("model_id", IDS)
def test_sync_walk_sums_to_the_parameter_count(model_id):
    spec = from_catalog(model_id)
    assert spec.family == "olmo2" and spec.qk_norm_full_width and spec.post_block_norms
    walk = sync.hf_tensors(spec)
    assert ("q_norm", spec.q_dim) in walk and ("k_norm", spec.kv_dim) in walk
    assert sum(n for _, n in walk) == param_breakdown(spec).total


def test_vllm_rank_keeps_the_whole_qk_norms():
    spec = from_catalog("allenai/OLMo-2-1124-7B")
    total = param_breakdown(spec).total
    assert weights_per_gpu_params(spec, tp=1) == total
    # what stays whole on each of 2 ranks: 2 norms per layer + the final norm, and both 4096-wide q/k norms
    replicated = 2 * 4096 * 32 + 4096 + (4096 + 4096) * 32
    assert weights_per_gpu_params(spec, tp=2) == pytest.approx((total - replicated) / 2 + replicated)
