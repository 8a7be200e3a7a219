"""torch DDP all-reduces its gradient bucket by bucket (``collectives.ddp_bucketed_all_reduce``): every bucket pays
NCCL's latency; Megatron's DDP (tensor_parallel_impl megatron) stays one collective."""

from __future__ import annotations

import pytest

from trainfit.compute import collectives as coll
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

KW = dict(ranks=128, bus_bytes_per_s=80e9, nodes=64)


def test_buckets_by_the_parameters_bytes_each_paying_latency():
    cap = coll.DDP_BUCKET_BYTES
    one = coll.all_reduce_seconds(total_bytes=8e9, **KW)
    # bf16 gradients (4 GB in 25 MiB buckets), reduced as fp32 buffers (8 GB): 153 all-reduces of 8e9 / 153 bytes
    t = coll.ddp_bucketed_all_reduce(grad_bytes=8e9, bucketed_bytes=4e9, bucket_bytes=cap, **KW)
    n = -(-4e9 // cap)
    assert t.total_s == pytest.approx(n * coll.all_reduce_seconds(total_bytes=8e9 / n, **KW))
    assert t.exposed_s == pytest.approx(coll.all_reduce_seconds(total_bytes=8e9 / n, **KW))
    assert t.total_s > one  # the latency is paid per bucket, the bandwidth the same
    assert coll.ddp_bucketed_all_reduce(grad_bytes=0.0, bucketed_bytes=0.0, **KW).total_s == 0.0
    # exposed_data_parallel: ZeRO-0 with ddp_bucket_bytes prices the buckets, without it one collective
    common = dict(grad_bytes=8e9, weight_bytes=4e9, backward_s=0.0, micro_steps=1, zero_stage=0, **KW)
    assert coll.exposed_data_parallel(ddp_bucket_bytes=cap, **common).total_s == pytest.approx(t.total_s)
    assert coll.exposed_data_parallel(**common).total_s == pytest.approx(one)


def _card(nodes: int, impl: str | None) -> dict:
    par = {"strategy": "ddp", "gradient_checkpointing": True, "tensor_parallel": 8}
    if impl:
        par["tensor_parallel_impl"] = impl
    return {"model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8,
                                                                             "nodes": nodes},
            "parallel": par, "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 1}}


def test_torch_ddp_pays_more_latency_than_megatrons_one_collective():
    torch_ddp = make_plan(load_card_dict(_card(64, None))).time_parts["communication"]
    megatron = make_plan(load_card_dict(_card(64, "megatron"))).time_parts["communication"]
    assert torch_ddp > megatron > 0
