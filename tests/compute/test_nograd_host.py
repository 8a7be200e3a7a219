"""A no-grad forward's host cost (``compute.training.forward_only_time``): the training steps' forward-plus-backward
host sum per forward kernel split by the measured per-op ratios (``rates.nograd_forward_host_s_per_kernel``), plus
the host time of the FSDP units whose forward hooks run in every micro-batch of a sharded model
(``rates.NOGRAD_FORWARD_OP_RATIO``, ``rates.BACKWARD_OP_RATIO``, ``rates.FSDP_UNIT_FORWARD_HOST_S``: measured on CPU,
cited there); the training forward pays the grad-mode hook rate (``rates.FSDP_UNIT_GRAD_FORWARD_HOST_S``)."""

from __future__ import annotations

import pytest

import trainfit.plan.rl_passes as rl_passes
from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import rates as rt
from trainfit.compute.inventory import BACKWARD_KERNEL_FACTOR, step_inventory
from trainfit.compute.training import forward_only_time
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

H100 = rt.default_rates(resolve_gpu("h100-sxm"))
SMALL = from_catalog("Qwen/Qwen2.5-0.5B")
BIG = from_catalog("Qwen/Qwen2-7B-Instruct")


def test_no_grad_kernels_cost_the_identified_sum_split_by_the_measured_ratios():
    t = forward_only_time(SMALL, rates=H100, micro_batch_size=1, seq_len=256, micro_steps=1)
    inv = step_inventory(SMALL, micro_batch_size=1, seq_len=256)
    kernels = inv.layers_forward.kernels + inv.head_forward.kernels
    per_kernel = t.host_s / kernels
    total = rt.HOST_S_PER_FORWARD_KERNEL + BACKWARD_KERNEL_FACTOR * rt.HOST_S_PER_BACKWARD_KERNEL
    assert per_kernel == pytest.approx(total * rt.NOGRAD_FORWARD_OP_RATIO
                                       / (1 + BACKWARD_KERNEL_FACTOR * rt.BACKWARD_OP_RATIO))
    assert per_kernel == pytest.approx(27.7e-6, abs=0.05e-6)  # the docstring's default figure


def test_no_grad_rate_follows_the_sum_not_the_split():
    """Any forward/backward split with the same per-forward-kernel sum (the quantity the H200 steps fix) prices a
    no-grad kernel the same; a calibrated faster host (both rates halved) halves it."""
    f = rt.nograd_forward_host_s_per_kernel
    base = f(host_s_per_forward_kernel=65e-6, host_s_per_backward_kernel=12e-6, backward_kernel_factor=1.9)
    even = f(host_s_per_forward_kernel=43.1e-6, host_s_per_backward_kernel=23.526315789e-6, backward_kernel_factor=1.9)
    assert even == pytest.approx(base)
    half = f(host_s_per_forward_kernel=32.5e-6, host_s_per_backward_kernel=6e-6, backward_kernel_factor=1.9)
    assert half == pytest.approx(base / 2)
    # a no-grad kernel costs less than a grad forward kernel at any split the fit allows (30/30 .. 65/12)
    assert base < 30e-6


def test_fsdp_unit_hooks_add_host_time_per_micro_batch():
    kw = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=4)
    plain = forward_only_time(SMALL, **kw)
    hooked = forward_only_time(SMALL, hooked_units=SMALL.num_layers + 1, **kw)
    hooks_s = 4 * (SMALL.num_layers + 1) * rt.FSDP_UNIT_FORWARD_HOST_S
    assert hooked.host_s - plain.host_s == pytest.approx(hooks_s)
    assert plain.bound == "launch"  # a 0.5B model's short micro-batch: the host paces it, every hook second shows
    assert hooked.seconds - plain.seconds == pytest.approx(hooks_s)


def test_fsdp_unit_hooks_hide_under_device_bound_passes():
    kw = dict(rates=H100, micro_batch_size=16, seq_len=4096, micro_steps=2)
    plain = forward_only_time(BIG, **kw)
    hooked = forward_only_time(BIG, hooked_units=BIG.num_layers + 1, **kw)
    assert plain.bound != "launch"
    assert hooked.seconds == pytest.approx(plain.seconds)


def _units_seen(monkeypatch, **card) -> set[int]:
    seen = []
    real = rl_passes.forward_only_time

    def spy(*args, **kwargs):
        seen.append(kwargs["hooked_units"])
        return real(*args, **kwargs)

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    make_plan(load_card_dict({
        "model": "Qwen/Qwen2.5-0.5B", "method": "grpo",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
        "rollout": {"prompts_per_step": 16, "num_generations": 4, "prompt_len": 256, "response_len": 512},
        **card,
    }))
    return set(seen)


def test_verl_fsdp_log_prob_passes_run_every_units_hooks(monkeypatch):
    layers = SMALL.num_layers
    assert _units_seen(monkeypatch, preset="verl", parallel={"strategy": "fsdp"}) == {layers + 1}


def test_nemo_rl_layers_reshard_after_every_log_prob_forward(monkeypatch):
    """NeMo RL's ``unshard_fsdp2_model`` unshards before the loop, but its layers keep FSDP2's default
    ``reshard_after_forward=True``, so every micro-batch runs the units' hooks (``rl_passes._fsdp_hooked_units``)."""
    layers = SMALL.num_layers
    assert _units_seen(monkeypatch, preset="nemo-rl", parallel={"strategy": "fsdp"}) == {layers + 1}


def test_nemo_rl_log_prob_pass_copies_out_every_micro_batch(monkeypatch):
    seen = []
    real = rl_passes.forward_only_time

    def spy(*args, **kwargs):
        seen.append((kwargs.get("unshard_once", False), kwargs.get("fsdp2_copies", False)))
        return real(*args, **kwargs)

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    make_plan(load_card_dict({
        "model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "preset": "nemo-rl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1}, "parallel": {"strategy": "fsdp"},
        "rollout": {"prompts_per_step": 16, "num_generations": 4, "prompt_len": 256, "response_len": 512},
    }))
    assert seen and set(seen) == {(False, True)}


def test_unsharded_models_have_no_unit_hooks(monkeypatch):
    assert _units_seen(monkeypatch, preset="verl", parallel={"strategy": "ddp"}) == {0}


def test_training_forward_and_recompute_pay_the_fsdp_unit_hooks():
    """``train_step_time``: torch FSDP's per-unit forward hooks run in the training forward and again in the
    recompute; a launch-bound small model shows every hook second, a single GPU none."""
    from trainfit.compute.training import Parallel, train_step_time

    kw = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=1, trained_params=5e8, trained_tensors=290,
              gathered_weight_bytes=1e9, gradient_checkpointing=True)

    def host(t, name):
        return next(p for p in t.phases if p.name == name).terms["host_launch"]

    single = train_step_time(SMALL, **kw)
    sharded = train_step_time(SMALL, parallel=Parallel(strategy="fsdp", ranks=8, gpus_per_node=8), **kw)
    zero3 = train_step_time(SMALL, parallel=Parallel(strategy="zero3", ranks=8, gpus_per_node=8), **kw)
    hooks_s = (SMALL.num_layers + 1) * rt.FSDP_UNIT_GRAD_FORWARD_HOST_S  # FSDP1 (compute's default), grad mode
    assert host(sharded, "forward") - host(single, "forward") == pytest.approx(hooks_s)
    fsdp2 = train_step_time(SMALL, parallel=Parallel(strategy="fsdp", ranks=8, gpus_per_node=8, fsdp2=True), **kw)
    assert host(fsdp2, "forward") - host(single, "forward") == pytest.approx(
        (SMALL.num_layers + 1) * rt.FSDP2_UNIT_GRAD_FORWARD_HOST_S)
    assert host(zero3, "forward") > host(sharded, "forward")  # DeepSpeed hooks every module (test_zero3_hooks.py)


def test_fully_shard_over_one_rank_still_pays_the_unit_hooks():
    """A card that states fsdp on one GPU (a trainer that wraps with fully_shard whatever the world size, prime-rl)
    pays the units' forward hooks like a sharded model, and no collective; the single-GPU card pays none."""
    from trainfit.compute.training import Parallel, train_step_time

    kw = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=1, trained_params=5e8, trained_tensors=290,
              gathered_weight_bytes=1e9, gradient_checkpointing=True)

    def host(t, name):
        return next(p for p in t.phases if p.name == name).terms["host_launch"]

    single = train_step_time(SMALL, parallel=Parallel(strategy="single", ranks=1, gpus_per_node=1), **kw)
    one_rank = train_step_time(SMALL, parallel=Parallel(strategy="fsdp", ranks=1, gpus_per_node=1), **kw)
    hooks_s = (SMALL.num_layers + 1) * rt.FSDP_UNIT_GRAD_FORWARD_HOST_S
    assert host(one_rank, "forward") - host(single, "forward") == pytest.approx(hooks_s)
    assert host(one_rank, "recompute") - host(single, "recompute") == pytest.approx(hooks_s)
    assert not {p.name for p in one_rank.phases} & {"communication", "fsdp_copies", "slowest_rank"}
