"""Megatron-Core's DeepSeek-V3 blocks (``memory.arch_activations.megatron_mla_bytes`` / ``megatron_deepseek_moe_bytes``)
against the per-op figure they replace on a Megatron rank, and ``mla_up_proj`` on a card."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.errors import CardError
from trainfit.memory.activations import _Ctx, _dense_mlp, _norm, activation_bytes
from trainfit.memory.arch_activations import (deepseek_moe_block_bytes, megatron_deepseek_moe_bytes,
                                              megatron_mla_bytes, mla_bytes)
from trainfit.memory.parallel import shard_spec
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Attention
from trainfit.spec.training import TrainableSpec

T, TP = 4096, 2
t = T // TP


@pytest.fixture(scope="module")
def ss():
    return shard_spec(resolve_model("deepseek-ai/DeepSeek-V3"), TP, 1)


def test_blocks_reproduce_the_per_op_layers(ss):
    """mla_bytes and deepseek_moe_block_bytes are the per-op layer figure's parts (sequence parallel: the two
    residual norms on t tokens)."""
    act = activation_bytes(ss, micro_batch_size=1, seq_len=T, attention=Attention.SDPA, trainable=TrainableSpec(),
                           sequence_shards=TP)
    ctx = _Ctx(T=T, b=1, s=T, a=2, full=True, targets={}, attention=Attention.SDPA, T_seq=t)
    norm = _norm(ctx, width=ss.hidden_size, rows=1, zero_centred=False, x_rg=True, const_width=ss.hidden_size,
                 residual=True)[0]
    dense = _dense_mlp(ctx, ss, ss.intermediate_size, True)[0]
    assert act.per_layer[0] == 2 * norm + mla_bytes(ss, tokens=T) + dense
    assert act.per_layer[3] == 2 * norm + mla_bytes(ss, tokens=T) + deepseek_moe_block_bytes(ss, tokens=T)


def test_megatron_mla_by_hand(ss):
    """64 heads per rank, qk 192, v 128, q / kv ranks 1536 / 512, rope 64, h 7168, bf16."""
    H, a, h = 64, 2, 7168
    out = T * (a * H * 128 + 4 * H)  # attention output (= linear_proj's input) and fp32 softmax stats
    rec = t * a * h + t * a * (1536 + 512) + T * a * 64 + out
    assert megatron_mla_bytes(ss, tokens=T, sequence_shards=TP, recompute_up_proj=True) == rec
    norms = sum(t * (4 * r + 4) + t * a * r + t * a * r for r in (1536, 512))  # per-op norm + up-proj input
    assert megatron_mla_bytes(ss, tokens=T, sequence_shards=TP) == (
        t * a * h + norms + T * a * H * (192 + 192 + 128) + out)


def test_megatron_moe_by_hand(ss):
    """The routed experts on the sequence shard's t·k rows (fused weighted SwiGLU, no expert output kept by the
    combine), the shared expert on all T tokens with its fc1 input sharded."""
    a, h, k, w, ws = 2, 7168, 8, 2048, 1024
    rows = t * k
    routed_rows = rows * a * (h + 2 * w + w)
    shared = t * a * h + T * a * (2 * ws + ws)  # fc1 input shard, fused SwiGLU input (gate, up), fc2 input
    got = megatron_deepseek_moe_bytes(ss, tokens=T, sequence_shards=TP)
    routing = got - routed_rows - shared
    assert 0 < routing < t * 4 * (h + 256 + 40 * k)  # router's fp32 input, scores, indices, weights: per token
    assert deepseek_moe_block_bytes(ss, tokens=T) - got > T * k * a * (h + 2 * w + w)  # half the rows, and more


def _card(model: str, selective: str, tp: int = 2) -> dict:
    return {"model": {"id": model}, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 64},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": "selective",
                         "selective_checkpointing": selective, "tensor_parallel": tp, "sequence_parallel": True,
                         "pipeline_parallel": 8, "pipeline_first_stage_layers": 7, "pipeline_last_stage_layers": 6,
                         "expert_parallel": 64, "tensor_parallel_impl": "megatron"},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 128}}


def test_mla_up_proj_frees_query_key_value():
    """Each DeepSeek-V3 layer on the worst rank keeps the up projections' query / key / value less; the layers are
    not checkpointed (the walk stays a plain one)."""
    up = load_card_dict(_card("deepseek-ai/DeepSeek-V3", "mla_up_proj"))
    assert not up.parallel.checkpoints_layers
    plain = load_card_dict({**_card("deepseek-ai/DeepSeek-V3", "none"),
                            "parallel": {**_card("deepseek-ai/DeepSeek-V3", "none")["parallel"],
                                         "gradient_checkpointing": False}})
    act = lambda p: max(ph.components.get("activations", 0.0) for ph in p.phases)  # noqa: E731
    assert act(make_plan(up)) < act(make_plan(plain))


def test_mla_up_proj_needs_mla():
    with pytest.raises(CardError, match="mla_up_proj"):
        make_plan(load_card_dict({**_card("Qwen/Qwen3-30B-A3B", "mla_up_proj"),
                                  "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 8},
                                  "parallel": {**_card("Qwen/Qwen3-30B-A3B", "mla_up_proj")["parallel"],
                                               "pipeline_parallel": 1, "pipeline_first_stage_layers": None,
                                               "pipeline_last_stage_layers": None, "expert_parallel": 8}}))
