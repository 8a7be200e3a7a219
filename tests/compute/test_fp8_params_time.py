"""fp8 primary weights in the time model (precision.fp8_params): no per-step weight casts (the optimizer step writes
the fp8 weights), their transpose once per step only where TE keeps one (Hopper), and the data-parallel parameter
all-gather / optimizer write at 1 B per linear weight."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import (
    FP8_CAST_BYTES,
    FP8_TRANSPOSE_BYTES,
    FP8_WEIGHT_BACKWARD_KERNELS,
    FP8_WEIGHT_FORWARD_KERNELS,
    step_inventory,
)
from trainfit.memory.params import linear_groups

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
DENSE = [g for g in linear_groups(LLAMA8) if not g.is_fused_experts]
W = sum(g.in_features * g.out_features * g.count for g in DENSE)  # every decoder layer's dense linear weights
N = sum(g.count for g in DENSE)


def _inv(**kw):
    return step_inventory(LLAMA8, micro_batch_size=1, seq_len=1024, fp8=True, **kw)


def test_default_transposes_follow_the_casts():
    for casts in (1.0, 0.25):
        a, b = _inv(fp8_weight_casts=casts), _inv(fp8_weight_casts=casts, fp8_weight_transposes=casts)
        assert a.layers_backward.memory_bytes == b.layers_backward.memory_bytes
        assert a.layers_backward.kernels == b.layers_backward.kernels


def test_fp8_params_drop_the_weight_casts_and_keep_one_transpose_on_hopper():
    te = _inv(fp8_weight_casts=0.25)  # TE's weight cache over 4 micro-steps
    hopper = _inv(fp8_weight_casts=0.0, fp8_weight_transposes=0.25)
    blackwell = _inv(fp8_weight_casts=0.0, fp8_weight_transposes=0.0)
    fwd_less = te.layers_forward.memory_bytes - hopper.layers_forward.memory_bytes
    assert fwd_less == pytest.approx(FP8_CAST_BYTES * 0.25 * W, rel=1e-12)
    assert te.layers_forward.kernels - hopper.layers_forward.kernels == pytest.approx(FP8_WEIGHT_FORWARD_KERNELS * 0.25 * N)
    # the transpose stays once per step on Hopper, goes on Blackwell
    assert te.layers_backward.memory_bytes == pytest.approx(hopper.layers_backward.memory_bytes, rel=1e-12)
    assert hopper.layers_backward.memory_bytes - blackwell.layers_backward.memory_bytes == pytest.approx(
        FP8_TRANSPOSE_BYTES * 0.25 * W, rel=1e-12)
    assert hopper.layers_backward.kernels - blackwell.layers_backward.kernels == pytest.approx(
        FP8_WEIGHT_BACKWARD_KERNELS * 0.25 * N)


def _card(fp8_params: bool, gpu: str = "b200"):
    from trainfit.spec.card import load_card_dict

    return load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": gpu, "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron", "overlap_param_gather": False},
        "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 4},
        "precision": {"compute": "fp8", "fp8_recipe": "delayed", "fp8_params": fp8_params}})


@pytest.mark.parametrize("gpu", ["h100-sxm", "b200"])
def test_plan_step_is_shorter_and_the_all_gather_smaller(gpu):
    from trainfit.plan import make_plan

    off, on = make_plan(_card(False, gpu)), make_plan(_card(True, gpu))
    assert on.step_seconds < off.step_seconds
    comm = {p.name: p.seconds for p in on.time.phases}, {p.name: p.seconds for p in off.time.phases}
    assert comm[0]["communication"] < comm[1]["communication"]
    assert comm[0]["optimizer_step"] < comm[1]["optimizer_step"]  # writes 1 B fp8 weights, not 2 B
