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


# the no-grad forwards (RL log-prob / reference / value passes, compute.training.forward_only_time) under fp8 primary
# weights: no weight casts either (the weights already are fp8) and no transpose (a forward has no wgrad/dgrad GEMM)

def _fwd(**kw):
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import default_rates
    from trainfit.compute.training import forward_only_time

    args = dict(rates=default_rates(resolve_gpu("h100-sxm")), micro_batch_size=2, seq_len=2048, micro_steps=4)
    return forward_only_time(LLAMA8, **(args | kw))


@pytest.mark.parametrize("cache", [False, True])
def test_no_grad_forward_with_fp8_params_casts_no_weights(monkeypatch, cache):
    import trainfit.compute.training as training

    seen = []
    real = training.step_inventory

    def spy(*a, **k):
        seen.append(inv := real(*a, **k))
        return inv

    monkeypatch.setattr(training, "step_inventory", spy)
    training.forward_only_time.cache_clear()
    on = _fwd(fp8=True, fp8_weight_cache=cache, fp8_params=True)
    off = _fwd(fp8=True, fp8_weight_cache=cache)
    training.forward_only_time.cache_clear()
    inv_on, inv_off = seen
    casts = 0.25 if cache else 1.0  # TE's weight cache over the 4 micro-batches, else every forward
    assert inv_off.layers_forward.kernels - inv_on.layers_forward.kernels == pytest.approx(
        FP8_WEIGHT_FORWARD_KERNELS * casts * N)
    assert inv_off.layers_forward.memory_bytes - inv_on.layers_forward.memory_bytes == pytest.approx(
        FP8_CAST_BYTES * casts * W, rel=1e-12)
    assert inv_on.layers_forward.kernels == _inv(fp8_weight_casts=0.0).layers_forward.kernels  # no weight casts
    assert on.memory_s < off.memory_s and on.host_s <= off.host_s and on.seconds <= off.seconds
    assert on.gemm_s == off.gemm_s and on.attention_s == off.attention_s


def test_no_grad_forward_without_fp8_params_is_unchanged():
    for fp8, cache in ((True, False), (True, True), (False, False)):
        assert _fwd(fp8=fp8, fp8_weight_cache=cache, fp8_params=False) == _fwd(fp8=fp8, fp8_weight_cache=cache)
    assert _fwd(fp8_params=True) == _fwd()  # only read with fp8 compute


def _rl_card(fp8_params: bool):
    from trainfit.spec.card import load_card_dict

    return load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "grpo", "preset": "nemo-rl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero1", "compile": True},
        "precision": {"compute": "fp8", "fp8_recipe": "blockwise", "fp8_params": fp8_params},
        "batch": {"micro_batch_size": 3},
        "rollout": {"placement": "split", "nodes": 1, "gpu_memory_utilization": 0.8, "prompts_per_step": 64,
                    "num_generations": 32, "prompt_len": 128, "response_len": 4096, "response_len_mean": 1100,
                    "async_mode": "one_step_off", "logprob_micro_batch_size": 6},
    })


def test_rl_logprob_passes_with_fp8_params(monkeypatch):
    import trainfit.plan.rl_passes as rl_passes
    from trainfit.plan import make_plan

    seen = []
    real = rl_passes.forward_only_time

    def spy(*a, **k):
        seen.append((a, k, t := real(*a, **k)))
        return t

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    off = {p.name: p.seconds for p in make_plan(_rl_card(False)).time.phases}
    assert seen and all(k["fp8_params"] is False for _, k, _ in seen)
    for a, k, t in seen:  # the card without fp8_params: the pass is the one planned before fp8_params was read
        assert real(*a, **{n: v for n, v in k.items() if n != "fp8_params"}) == t
    seen.clear()
    on = {p.name: p.seconds for p in make_plan(_rl_card(True)).time.phases}
    assert seen and all(k["fp8_params"] is True for _, k, _ in seen)
    assert on["old_logprob"] < off["old_logprob"]


# Megatron-FSDP (strategy fsdp on Megatron-Core layers) with fp8 primary weights: the per-layer all-gather moves the
# uint8 buffer (1 B per linear weight), no weight casts, and on Hopper the transpose every micro-step (built after each
# backward all-gather and dropped with the unit, memory.fp8 megatron_fsdp_fp8_unit_bytes)

def _fsdp_card(fp8_params: bool, gpu: str):
    from trainfit.spec.card import load_card_dict

    return load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": gpu, "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "fsdp", "tensor_parallel_impl": "megatron"},
        "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 4},
        "precision": {"compute": "fp8", "fp8_recipe": "current", "fp8_params": fp8_params}})


@pytest.mark.parametrize("gpu,transpose", [("h100-sxm", True), ("b200", False)])
def test_megatron_fsdp_gathers_fp8_and_transposes_every_micro_step(monkeypatch, gpu, transpose):
    import trainfit.plan.time as plan_time
    from trainfit.plan import make_plan

    seen = []
    real = plan_time.train_step_time

    def spy(*a, **k):
        seen.append(k)
        return real(*a, **k)

    monkeypatch.setattr(plan_time, "train_step_time", spy)
    off, on = make_plan(_fsdp_card(False, gpu)), make_plan(_fsdp_card(True, gpu))
    k_off, k_on = seen[0], seen[-1]
    assert k_off["gathered_weight_bytes"] - k_on["gathered_weight_bytes"] == pytest.approx(1.0 * W, rel=1e-9)
    assert k_on["fp8_params"] and k_on["fp8_param_transpose_every_micro"]
    assert k_on["fp8_param_transpose"] is transpose  # Blackwell runs non-TN fp8 GEMMs: no transpose
    assert not k_off["fp8_param_transpose_every_micro"]
    assert on.step_seconds < off.step_seconds


def test_megatron_fsdp_transposes_every_micro_step_on_hopper_only():
    every = _inv(fp8_weight_casts=0.0, fp8_weight_transposes=1.0)
    once = _inv(fp8_weight_casts=0.0, fp8_weight_transposes=0.25)
    assert every.layers_backward.memory_bytes - once.layers_backward.memory_bytes == pytest.approx(
        FP8_TRANSPOSE_BYTES * 0.75 * W, rel=1e-12)
