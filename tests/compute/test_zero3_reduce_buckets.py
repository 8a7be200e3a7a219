"""DeepSpeed ZeRO-3's gradient reduce buckets (``training.zero3_reduce_buckets``, DeepSpeed's flush rule, cited
there): each bucket beyond the first costs the backward's host ``rates.ZERO3_REDUCE_BUCKET_HOST_S`` (measured on CPU,
cited there); the card's ``deepspeed.reduce_bucket_size`` sets the count (``plan.time.deepspeed_zero3_reduce_buckets``:
the HF Trainer's auto, hidden^2, makes nearly every weight its own bucket)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import rates as rt
from trainfit.compute.training import Parallel, train_step_time, zero3_reduce_buckets
from trainfit.plan.time import zero3_grad_numels

H100 = rt.default_rates(resolve_gpu("h100-sxm"))
SMALL = from_catalog("Qwen/Qwen2.5-0.5B")


def test_flush_rule_is_deepspeeds():
    # a gradient that would take a non-empty bucket past the size flushes it first; one larger than the bucket goes
    # alone; the epilogue flushes what is left
    assert zero3_reduce_buckets(grad_numels=(10, 10, 10), bucket_numel=30) == 1
    assert zero3_reduce_buckets(grad_numels=(10, 10, 11), bucket_numel=30) == 2
    assert zero3_reduce_buckets(grad_numels=(100, 5, 100, 5), bucket_numel=30) == 4
    assert zero3_reduce_buckets(grad_numels=(), bucket_numel=30) == 0
    with pytest.raises(ValueError):
        zero3_reduce_buckets(grad_numels=(1,), bucket_numel=0)


def test_auto_bucket_makes_every_weight_a_bucket_and_the_default_few():
    g = zero3_grad_numels(SMALL)
    # the embedding (tied head), per layer 2 norms, q/k/v and their 3 biases, o, 3 MLP linears; the final norm
    assert len(g) == 1 + SMALL.num_layers * 12 + 1
    assert g[-1] == SMALL.vocab_size * SMALL.hidden_size  # the input embedding finishes last
    h = SMALL.hidden_size
    auto = zero3_reduce_buckets(grad_numels=g, bucket_numel=h * h)
    default = zero3_reduce_buckets(grad_numels=g, bucket_numel=500_000_000)
    assert default == 1  # a 0.5B model fits DeepSpeed's 5e8-element bucket
    assert auto > 5 * SMALL.num_layers


def _host(t, name):
    return next(p for p in t.phases if p.name == name).terms["host_launch"]


def test_each_bucket_beyond_the_first_costs_the_backward_host():
    kw = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=2, trained_params=5e8, trained_tensors=290,
              gathered_weight_bytes=1e9, gradient_checkpointing=True)
    one = train_step_time(SMALL, parallel=Parallel(strategy="zero3", ranks=8, gpus_per_node=8,
                                                   zero3_reduce_buckets=1), **kw)
    many = train_step_time(SMALL, parallel=Parallel(strategy="zero3", ranks=8, gpus_per_node=8,
                                                    zero3_reduce_buckets=101), **kw)
    # per micro-step (2 here)
    assert _host(many, "backward") - _host(one, "backward") == pytest.approx(2 * 100 * rt.ZERO3_REDUCE_BUCKET_HOST_S)
    assert _host(many, "forward") == pytest.approx(_host(one, "forward"))
    assert many.total_s > one.total_s  # a small model at 256 tokens: launch-bound, so the host time shows
    # no ZeRO-3: the count is not read
    ddp = train_step_time(SMALL, parallel=Parallel(strategy="ddp", ranks=8, gpus_per_node=8,
                                                   zero3_reduce_buckets=101), **kw)
    ddp0 = train_step_time(SMALL, parallel=Parallel(strategy="ddp", ranks=8, gpus_per_node=8), **kw)
    assert ddp.total_s == pytest.approx(ddp0.total_s)
