"""loss.kernel te: Megatron-Core's Transformer Engine cross-entropy (memory.logits.te_parallel_ce_bytes,
plan.rank_buffers.loss_region): the compute-dtype logits only, the gradient written into them in place."""

from __future__ import annotations

import pytest

from trainfit.memory.logits import megatron_vocab_parallel_ce_bytes, te_parallel_ce_bytes


def _card(impl: str = "megatron", **loss):
    from trainfit.spec.card import load_card_dict

    d = {"model": "Qwen/Qwen3-8B", "method": "sft", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
         "parallel": {"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True,
                      "tensor_parallel_impl": impl, "gradient_checkpointing": False},
         "batch": {"micro_batch_size": 1, "seq_len": 4096}, "loss": loss}
    return load_card_dict(d)


def test_te_ce_bytes_by_hand():
    T, V = 4096, 75968
    te = te_parallel_ce_bytes(tokens=T, local_vocab=V)
    assert te.forward_peak == te.retained == te.backward_peak == 2 * T * V
    # Megatron-Core's own vocab_parallel_cross_entropy keeps an fp32 copy beside the bf16 logits
    meg = megatron_vocab_parallel_ce_bytes(tokens=T, local_vocab=V)
    assert meg.forward_peak - te.forward_peak == 4 * T * V


def test_plan_holds_the_bf16_logits_only():
    from trainfit.plan import make_plan

    def logits(card):
        return next(p for p in make_plan(card).phases if p.phase.value == "forward").components["logits"]

    local = 4096 * (151936 // 2)  # Qwen3-8B's vocabulary over tp 2
    assert logits(_card()) - logits(_card(kernel="te")) == pytest.approx(4 * local)


@pytest.mark.parametrize(("impl", "loss", "match"), [
    ("dtensor", {"kernel": "te"}, "read with tensor_parallel_impl megatron"),
    ("megatron", {"kernel": "te", "chunked": True}, "scores the full logits"),
])
def test_te_kernel_refused_outside_megatron_full_logits(impl, loss, match):
    with pytest.raises(Exception, match=match):
        _card(impl, **loss)
