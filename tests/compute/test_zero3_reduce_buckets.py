"""DeepSpeed ZeRO-3's gradient reduce buckets (``training.zero3_reduce_buckets``, DeepSpeed's flush rule, cited
there): each bucket beyond the first costs the backward's host ``rates.ZERO3_REDUCE_BUCKET_HOST_S`` (measured on CPU,
cited there), and the host may run only three buckets ahead of the device (``training.zero3_coupled_seconds``,
``max_param_reduce_events``); the card's ``deepspeed.reduce_bucket_size`` sets the buckets
(``plan.time.deepspeed_zero3_buckets``: the HF Trainer's auto, hidden^2, makes nearly every gradient its own)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import rates as rt
from trainfit.compute.training import Parallel, train_step_time, zero3_coupled_seconds, zero3_reduce_buckets
from trainfit.plan.time import zero3_grad_groups

H100 = rt.default_rates(resolve_gpu("h100-sxm"))
SMALL = from_catalog("Qwen/Qwen2.5-0.5B")
GROUPS = zero3_grad_groups(SMALL)
FLAT = tuple(n for g in GROUPS for n in g)


def test_flush_rule_is_deepspeeds():
    # a gradient that would take a non-empty bucket past the size flushes it first; one larger than the bucket goes
    # alone; the epilogue flushes what is left
    assert zero3_reduce_buckets(grad_numels=(10, 10, 10), bucket_numel=30) == 1
    assert zero3_reduce_buckets(grad_numels=(10, 10, 11), bucket_numel=30) == 2
    assert zero3_reduce_buckets(grad_numels=(100, 5, 100, 5), bucket_numel=30) == 4
    assert zero3_reduce_buckets(grad_numels=(), bucket_numel=30) == 0
    with pytest.raises(ValueError):
        zero3_reduce_buckets(grad_numels=(1,), bucket_numel=0)


def test_gradients_in_backward_order_and_auto_buckets():
    # tied head: the final norm first; per layer 2 norms, q/k/v and their 3 biases, o, 3 MLP linears; the embedding last
    assert GROUPS[0] == (SMALL.hidden_size,) and len(GROUPS) == SMALL.num_layers + 2
    assert all(len(g) == 12 for g in GROUPS[1:-1])
    assert GROUPS[-1] == (SMALL.vocab_size * SMALL.hidden_size,)
    h = SMALL.hidden_size
    assert zero3_reduce_buckets(grad_numels=FLAT, bucket_numel=500_000_000) == 1  # 0.5B fits DeepSpeed's default
    assert zero3_reduce_buckets(grad_numels=FLAT, bucket_numel=h * h) > 5 * SMALL.num_layers


def test_host_runs_at_most_three_buckets_ahead():
    # one GEMM-heavy gradient, then three host-only ones: the host's three buckets of slack hide them
    few = ((), *(((1000, 10, 10, 10),) * 8), ())
    assert zero3_coupled_seconds(grad_groups=few, bucket_numel=1, backward_host_s=3.2,
                                 backward_device_s=3.2) == pytest.approx(3.2, rel=0.05)
    layer = (1000, 10, 10, 10, 10, 10, 10, 10)  # ... seven: they do not
    groups = ((), *((layer,) * 8), ())
    kw = dict(grad_groups=groups, backward_host_s=3.2, backward_device_s=3.2)
    # one bucket for everything: host and device overlap freely (less the first gradient's issue)
    assert zero3_coupled_seconds(bucket_numel=10**9, **kw) == pytest.approx(3.2, rel=0.05)
    # a bucket per gradient: the host waits on the device three buckets back, so the small gradients' host time
    # cannot all hide behind the GEMM's device time
    coupled = zero3_coupled_seconds(bucket_numel=1, **kw)
    assert 3.2 * 1.2 < coupled <= 6.4
    # a host-bound backward stays host-bound
    assert zero3_coupled_seconds(bucket_numel=1, grad_groups=groups, backward_host_s=3.2,
                                 backward_device_s=0.01) == pytest.approx(3.2, rel=0.05)


def _phase(t, name):
    return next(p for p in t.phases if p.name == name)


def test_bucket_host_cost_and_coupling_reach_the_step():
    kw = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=2, trained_params=5e8, trained_tensors=290,
              gathered_weight_bytes=1e9, gradient_checkpointing=True)
    base = dict(strategy="zero3", ranks=8, gpus_per_node=8, zero3_grad_groups=GROUPS)
    one = train_step_time(SMALL, parallel=Parallel(**base, zero3_bucket_numel=500_000_000), **kw)
    many = train_step_time(SMALL, parallel=Parallel(**base, zero3_bucket_numel=1), **kw)
    buckets = zero3_reduce_buckets(grad_numels=FLAT, bucket_numel=1)
    host = _phase(many, "backward").terms["host_launch"] - _phase(one, "backward").terms["host_launch"]
    assert host == pytest.approx(2 * (buckets - 1) * rt.ZERO3_REDUCE_BUCKET_HOST_S)  # per micro-step, 2 here
    assert many.total_s > one.total_s
    # no ZeRO-3: neither is read
    ddp = train_step_time(SMALL, parallel=Parallel(strategy="ddp", ranks=8, gpus_per_node=8, zero3_grad_groups=GROUPS,
                                                   zero3_bucket_numel=1), **kw)
    ddp0 = train_step_time(SMALL, parallel=Parallel(strategy="ddp", ranks=8, gpus_per_node=8), **kw)
    assert ddp.total_s == pytest.approx(ddp0.total_s)


def test_one_rank_pays_the_module_hooks_but_no_bucket_flush():
    """The one-rank measurement (``training.ZERO3_HOOKS_ON_ONE_RANK``) timed the per-module hooks, not the
    reduce-bucket flush: a one-rank ZeRO-3 step is the same whatever its bucket size."""
    kw = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=2, trained_params=5e8, trained_tensors=290,
              gathered_weight_bytes=1e9, gradient_checkpointing=True)
    base = dict(strategy="zero3", ranks=1, gpus_per_node=1, zero3_grad_groups=GROUPS)
    one = train_step_time(SMALL, parallel=Parallel(**base, zero3_bucket_numel=500_000_000), **kw)
    many = train_step_time(SMALL, parallel=Parallel(**base, zero3_bucket_numel=1), **kw)
    plain = train_step_time(SMALL, parallel=Parallel(strategy="ddp", ranks=1, gpus_per_node=1), **kw)
    assert _phase(many, "backward").terms["host_launch"] == pytest.approx(_phase(one, "backward").terms["host_launch"])
    assert _phase(one, "forward").terms["host_launch"] > _phase(plain, "forward").terms["host_launch"]


def test_expert_loop_gives_every_expert_its_own_gradients():
    # transformers < 5 (parallel.moe_experts loop / loop_all): each expert is a Qwen3MoeMLP of three nn.Linear, so a
    # MoE layer's gradients are the router and 3 x num_experts expert linears, not one tensor per projection
    moe = from_catalog("Qwen/Qwen3-30B-A3B")
    e, h, inter = moe.moe.num_experts, moe.hidden_size, moe.moe.expert_intermediate_size
    grouped, loop = zero3_grad_groups(moe), zero3_grad_groups(moe, expert_loop=True)
    assert sum(map(sum, grouped)) == sum(map(sum, loop))  # the same elements
    # per layer: 2 norms, q/k/v/o, q_norm and k_norm, the router, and the experts (2 fused tensors, or 3 per expert)
    assert all(len(g) == 9 + 2 for g in grouped[1:-1])
    assert all(len(g) == 9 + 3 * e for g in loop[1:-1])
    assert loop[1][:3] == (inter * h, h * inter, h * inter)  # the last expert's down, up, gate first
    assert loop[1].count(moe.head_dim) == 2  # Qwen3's q_norm and k_norm over head_dim


def test_loop_cards_get_per_expert_buckets():
    from trainfit.plan.time import deepspeed_zero3_buckets
    from trainfit.spec.card import RunCard

    moe = from_catalog("Qwen/Qwen3-30B-A3B")
    base = {"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}, "parallel": {"strategy": "zero3"}}
    card = RunCard.model_validate(base)
    loop = RunCard.model_validate({**base, "parallel": {"strategy": "zero3", "moe_experts": "loop_all"}})
    g0 = deepspeed_zero3_buckets(card, moe, params=1e9, tensors=100)["zero3_grad_groups"]
    g1 = deepspeed_zero3_buckets(loop, moe, params=1e9, tensors=100)["zero3_grad_groups"]
    assert len(g1[1]) - len(g0[1]) == 3 * moe.moe.num_experts - 2
