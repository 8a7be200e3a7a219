"""DeepSpeed ZeRO-3's per-module hooks (``rates.ZERO3_MODULE_FORWARD_HOST_S`` / ``ZERO3_MODULE_BACKWARD_HOST_S``,
measured on CPU, cited there): charged per hooked module (``training.zero3_hooked_modules``) in the training forward,
recompute and backward and in no-grad forwards, on one rank as on many (DeepSpeed registers them whatever the world
size: ``training.ZERO3_HOOKS_ON_ONE_RANK``); hidden where the device paces the pass."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import rates as rt
from trainfit.compute.collectives import slowest_rank_excess
from trainfit.compute.training import Parallel, forward_only_time, fsdp_units, train_step_time, zero3_hooked_modules

H100 = rt.default_rates(resolve_gpu("h100-sxm"))
SMALL = from_catalog("Qwen/Qwen2.5-0.5B")
BIG = from_catalog("Qwen/Qwen2-7B-Instruct")
ZERO3 = Parallel(strategy="zero3", ranks=8, gpus_per_node=8)
FSDP = Parallel(strategy="fsdp", ranks=8, gpus_per_node=8)


def test_hooked_modules_follow_transformers_module_tree():
    # Qwen2 layer: layer, self_attn, q/k/v/o, mlp, gate/up/down, act_fn, 2 norms = 13; Qwen3 adds q_norm, k_norm
    assert zero3_hooked_modules(SMALL) == SMALL.num_layers * 13 + rt.HF_ROOT_MODULES
    q3 = from_catalog("Qwen/Qwen3-8B")
    assert zero3_hooked_modules(q3) == q3.num_layers * 15 + rt.HF_ROOT_MODULES
    # Qwen3-MoE, transformers 5: mlp, gate, fused experts, experts.act_fn instead of the dense MLP's 5
    moe = from_catalog("Qwen/Qwen3-30B-A3B")
    assert zero3_hooked_modules(moe) == moe.num_layers * 14 + rt.HF_ROOT_MODULES
    # transformers < 5's loop: every expert's MLP (itself, 3 linears, act_fn) is hooked unless the block is a leaf
    e = moe.moe.num_experts
    assert zero3_hooked_modules(moe, expert_loop=True, leaf=False) == moe.num_layers * (10 + 2 + 5 * e) + 6
    assert zero3_hooked_modules(moe, expert_loop=True, leaf=True) == moe.num_layers * (10 + 1) + 6


def test_zero3_costs_more_host_per_layer_than_fsdp():
    per_layer_zero3 = 13 * rt.ZERO3_MODULE_FORWARD_HOST_S
    assert 5 < per_layer_zero3 / rt.FSDP_UNIT_FORWARD_HOST_S < 8  # measured in the same rounds: ~6x


def test_no_grad_forward_pays_every_module_hook_when_launch_bound():
    kw = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=4)
    single = forward_only_time(SMALL, **kw)
    zero3 = forward_only_time(SMALL, parallel=ZERO3, gathered_weight_bytes=0.0, **kw)
    fsdp = forward_only_time(SMALL, parallel=FSDP, hooked_units=SMALL.num_layers + 1, **kw)
    hooks_s = 4 * zero3_hooked_modules(SMALL) * rt.ZERO3_MODULE_FORWARD_HOST_S
    assert zero3.host_s - single.host_s == pytest.approx(hooks_s)
    assert single.bound == "launch"
    assert zero3.seconds - single.seconds == pytest.approx(hooks_s)
    assert zero3.host_s > fsdp.host_s
    # one rank: the same hooks (DeepSpeedZeRoOffload registers them whatever the world size), no gather
    one = forward_only_time(SMALL, parallel=Parallel(strategy="zero3", ranks=1), **kw)
    assert one.host_s - single.host_s == pytest.approx(hooks_s)


def test_no_grad_hooks_hide_under_a_device_bound_pass():
    kw = dict(rates=H100, micro_batch_size=16, seq_len=4096, micro_steps=2)
    single = forward_only_time(BIG, **kw)
    zero3 = forward_only_time(BIG, parallel=ZERO3, gathered_weight_bytes=0.0, **kw)
    assert single.bound != "launch"
    # the hooks hide; what the 8 ranks add over one is the end-of-pass wait for the slowest GPU that every pass over
    # several ranks pays (forward_only_time: sharded with no gathered bytes as unsharded; 11.5 % of the device time
    # here, 3.773 -> 4.206 s), the same as an unsharded pass over 8 ranks without hooks
    ddp = forward_only_time(BIG, parallel=Parallel(strategy="ddp", ranks=8, gpus_per_node=8), **kw)
    assert zero3.seconds == pytest.approx(ddp.seconds)
    assert zero3.seconds - single.seconds == pytest.approx(
        slowest_rank_excess(ranks=8) * (single.gemm_s + single.attention_s + single.memory_s))


def _host(t, name):
    return next(p for p in t.phases if p.name == name).terms["host_launch"]


def test_a_one_rank_zero3_training_step_pays_the_hooks_of_every_pass():
    # Qwen (1.0)'s finetune_ds.sh on one GPU: forward, recompute (the layers' modules) and backward hooks, no gather
    kw = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=1, trained_params=5e8, trained_tensors=290,
              gathered_weight_bytes=0.0, gradient_checkpointing=True)
    single = train_step_time(SMALL, **kw)
    one = train_step_time(SMALL, parallel=Parallel(strategy="zero3", ranks=1), **kw)
    modules = zero3_hooked_modules(SMALL)
    assert _host(one, "forward") - _host(single, "forward") == pytest.approx(modules * rt.ZERO3_MODULE_FORWARD_HOST_S)
    assert _host(one, "recompute") - _host(single, "recompute") == pytest.approx(
        (modules - rt.HF_ROOT_MODULES) * rt.ZERO3_MODULE_FORWARD_HOST_S)
    assert _host(one, "backward") - _host(single, "backward") == pytest.approx(
        modules * rt.ZERO3_MODULE_BACKWARD_HOST_S)


def test_training_forward_recompute_and_backward_pay_the_module_hooks():
    kw = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=1, trained_params=5e8, trained_tensors=290,
              gathered_weight_bytes=1e9, gradient_checkpointing=True)
    single = train_step_time(SMALL, **kw)
    zero3 = train_step_time(SMALL, parallel=ZERO3, **kw)
    fsdp = train_step_time(SMALL, parallel=FSDP, **kw)
    modules = zero3_hooked_modules(SMALL)
    assert _host(zero3, "forward") - _host(single, "forward") == pytest.approx(modules * rt.ZERO3_MODULE_FORWARD_HOST_S)
    # the recompute re-runs the decoder layers' modules, not the embedding, final norm and head
    assert _host(zero3, "recompute") - _host(single, "recompute") == pytest.approx(
        (modules - rt.HF_ROOT_MODULES) * rt.ZERO3_MODULE_FORWARD_HOST_S)
    assert _host(zero3, "backward") - _host(single, "backward") == pytest.approx(
        modules * rt.ZERO3_MODULE_BACKWARD_HOST_S)
    # FSDP: one unit per layer (and the root) in forward and recompute, and its backward hooks once per unit
    assert _host(fsdp, "backward") - _host(single, "backward") == pytest.approx(
        fsdp_units(SMALL) * rt.FSDP_UNIT_BACKWARD_HOST_S)
    assert _host(zero3, "backward") > _host(fsdp, "backward")
    assert _host(zero3, "forward") > _host(fsdp, "forward")
    for name in ("forward", "recompute", "backward"):
        assert next(p for p in zero3.phases if p.name == name).seconds > next(
            p for p in single.phases if p.name == name).seconds


def test_training_without_checkpointing_has_no_recompute_hooks():
    kw = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=1, trained_params=5e8, trained_tensors=290,
              gathered_weight_bytes=1e9)
    zero3 = train_step_time(SMALL, parallel=ZERO3, **kw)
    assert all(p.name != "recompute" or p.seconds == 0 for p in zero3.phases)
