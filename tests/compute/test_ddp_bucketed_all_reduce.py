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


def test_the_input_embeddings_bucket_is_reduced_after_the_backward():
    # 1.34B nanotron shape at TP 2: a 65,536 x 2,048 embedding shard, reduced in fp32 (537 MB), far above the mean
    # 50 MB bucket of 1.34 GB of bf16 gradients in 25 MiB buckets
    emb = 65536 * 2048 * 4.0
    kw = dict(grad_bytes=2.7e9, bucketed_bytes=1.35e9, **KW)
    plain = coll.ddp_bucketed_all_reduce(**kw)
    last = coll.ddp_bucketed_all_reduce(last_tensor_bytes=emb, **kw)
    assert last.total_s == pytest.approx(plain.total_s)  # the same buckets move the same bytes
    assert last.exposed_s == pytest.approx(coll.all_reduce_seconds(total_bytes=emb, **KW))
    assert last.exposed_s > 5 * plain.exposed_s
    # a tensor smaller than the mean bucket leaves the mean bucket exposed
    assert coll.ddp_bucketed_all_reduce(last_tensor_bytes=1e6, **kw).exposed_s == pytest.approx(plain.exposed_s)
    # exposed_data_parallel passes it to the dense buckets (the backward hides every other bucket here)
    common = dict(grad_bytes=2.7e9, weight_bytes=1.35e9, backward_s=10.0, micro_steps=1, zero_stage=0,
                  ddp_bucket_bytes=coll.DDP_BUCKET_BYTES, **KW)
    assert coll.exposed_data_parallel(ddp_last_tensor_bytes=emb, **common).exposed_s == pytest.approx(last.exposed_s)
    assert coll.exposed_data_parallel(**common).exposed_s == pytest.approx(plain.exposed_s)


def test_input_embedding_grad_bytes_of_a_rank_shard():
    from trainfit.compute.training import input_embedding_grad_bytes
    from trainfit.plan.time import rank_spec
    from trainfit.spec.model import ModelSpec

    spec = ModelSpec(name="t", source="test", family="llama", head_dim=64, hidden_size=2048, intermediate_size=8192, num_layers=16, num_attention_heads=32,
                     num_kv_heads=32, vocab_size=131072, tie_word_embeddings=True)
    shard = rank_spec(spec, tp=2, pp=1, ep=1, etp=1)
    assert input_embedding_grad_bytes(shard, grad_bytes=4.0) == 65536 * 2048 * 4.0
    assert input_embedding_grad_bytes(shard, grad_bytes=4.0, trained=False) == 0.0


def test_ddp_plan_exposes_the_embedding_bucket():
    # Llama-3.1-8B at TP 8 on 2 nodes (a data-parallel pair, one rank a node): the embedding shard's bf16 gradient
    # (16,032 x 4,096) crosses the NIC once after the backward; at 400 Gb/s that alone is over 2.6 ms (the mean
    # 25 MiB bucket's all-reduce, exposed before, was 0.7 ms)
    plan = make_plan(load_card_dict(_card(2, None)))
    emb_bytes = 128256 / 8 * 4096 * 2
    assert plan.time_parts["communication"] > emb_bytes / 50e9


def test_lora_with_a_saved_embedding_exposes_its_bucket():
    # PEFT's modules_to_save copy of embed_tokens is trained in full: its gradient is still the backward's last, so
    # its bucket is exposed as a full fine-tune's is; plain LoRA's embedding is frozen and reduces nothing
    def comm(saved: list[str] | None) -> float:
        card = _card(2, None)
        card["scope"] = "lora"
        card["lora"] = {"rank": 16, "targets": ["q_proj", "v_proj"], **({"modules_to_save": saved} if saved else {})}
        return make_plan(load_card_dict(card)).time_parts["communication"]

    emb_bytes = 128256 / 8 * 4096 * 2
    assert comm(["embed_tokens"]) > comm(None) + 0.8 * emb_bytes / 50e9
