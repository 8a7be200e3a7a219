"""parallel.tensor_parallel_impl nanotron: nanotron's tensor-parallel layers in memory (sequence-shard inputs of the
column-parallel linears, the vocab-parallel embedding's own rows, _ShardedCrossEntropy), the per-op model in time
(no Transformer Engine terms) (huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py l.31-107,
213-216, nn.py l.277-299 @c252843039cc167ff8d6894b87172af4637eb14b)."""

from __future__ import annotations

import pytest

from trainfit.memory.logits import megatron_vocab_parallel_ce_bytes, nanotron_sharded_ce_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Phase


def test_sharded_cross_entropy_bytes_per_local_logit():
    n = nanotron_sharded_ce_bytes(tokens=1000, local_vocab=100, compute_dtype_bytes=2)
    # the fp32 logits and their max-subtracted copy at the forward's peak, the softmax saved, the bf16 gradient beside it
    assert (n.forward_peak, n.retained, n.backward_peak) == (8e5, 4e5, 6e5)
    m = megatron_vocab_parallel_ce_bytes(tokens=1000, local_vocab=100, compute_dtype_bytes=2)
    # Megatron-Core subtracts in place: the same except the forward's second fp32 tensor
    assert (m.retained, m.backward_peak) == (n.retained, n.backward_peak) and m.forward_peak < n.forward_peak


def _plan(impl: str, tp: int = 4):
    card = {"model": "meta-llama/Llama-3.1-8B", "method": "sft", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "ddp", "gradient_checkpointing": False, "tensor_parallel": tp,
                         "sequence_parallel": True, "tensor_parallel_impl": impl},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 1}}
    return make_plan(load_card_dict(card))


def _forward(plan):
    return next(p for p in plan.stage_phases[0] if p.phase is Phase.FORWARD).components


def test_memory_as_megatron_linears_time_as_the_per_op_model():
    dt, nt, mg = _plan("dtensor"), _plan("nanotron"), _plan("megatron")
    # sequence-shard inputs: fewer saved bytes than the DTensor plan; a per-op MLP: more than Megatron-Core's fused one
    assert _forward(mg)["activations"] < _forward(nt)["activations"] < _forward(dt)["activations"]
    # the vocab-parallel loss, not DTensor's loss_parallel
    assert _forward(nt)["logits"] < _forward(dt)["logits"]
    # no Transformer Engine terms: the step time is the per-op model's
    assert nt.step_seconds == pytest.approx(dt.step_seconds, rel=1e-12)


def test_its_own_loss_refuses_another_loss_kernel():
    from trainfit.errors import CardError

    card = {"model": "meta-llama/Llama-3.1-8B", "method": "sft", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "ddp", "tensor_parallel": 2, "tensor_parallel_impl": "nanotron"},
            "loss": {"kernel": "flash_attn"},
            "batch": {"micro_batch_size": 1, "seq_len": 1024, "grad_accum": 1}}
    with pytest.raises(CardError) as exc:
        load_card_dict(card)
    assert "loss.kernel: flash_attn is not nanotron's loss" in str(exc.value)
