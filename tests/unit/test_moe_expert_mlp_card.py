"""``parallel.moe_expert_mlp: te_ops`` (Megatron-Core's Transformer Engine op fuser for the routed experts) is refused,
in one line naming the field and what is allowed, where Megatron-Core's ``TEGroupedMLP`` asserts
``_is_fused_impl_supported()`` (core_v0.18.0): expert tensor parallelism above 1, experts that are not
TEGroupedMLP's grouped linears, a Megatron-Core older than the field (probabilities multiplied at the unpermute), and
experts whose activation the op fuser does not fuse."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.errors import CardError
from trainfit.plan import dense_model_refusal
from trainfit.spec.card import load_card_dict


def _card(**par):
    return load_card_dict({
        "model": "openai/gpt-oss-20b", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron", "expert_parallel": 8,
                     "moe_expert_mlp": "te_ops", **par},
        "batch": {"micro_batch_size": 1, "seq_len": 2048}})


def _one_line(exc) -> str:
    text = str(exc.value).strip()
    assert "\n" not in text
    return text


def test_te_ops_accepted_on_grouped_experts_without_expert_tensor_parallel():
    assert _card().parallel.moe_expert_mlp.value == "te_ops"
    assert _card(tensor_parallel=2, expert_parallel=4).parallel.expert_tensor_parallel == 1


@pytest.mark.parametrize(("par", "words"), [
    ({"tensor_parallel": 2, "expert_parallel": 4, "expert_tensor_parallel": 2},
     "needs expert tensor parallelism 1 (got expert_tensor_parallel 2); allowed here: unfused"),
    ({"moe_experts": "grouped_streams"}, "(moe_experts grouped; got grouped_streams); allowed here: unfused"),
    ({"moe_probs_in_experts": False}, "needs Megatron-Core >= 0.18"),
])
def test_te_ops_refused_where_megatron_core_asserts(par, words):
    with pytest.raises((CardError, ValueError)) as exc:
        _card(**par)
    text = _one_line(exc)
    assert text.startswith("parallel.moe_expert_mlp: 'te_ops'") and words in text and "allowed here: unfused" in text
    par.pop("moe_experts", None)
    par.pop("moe_probs_in_experts", None)
    assert _card(**{**par, "moe_expert_mlp": "unfused"}).parallel.moe_expert_mlp.value == "unfused"


def test_te_ops_refused_on_an_activation_the_op_fuser_does_not_fuse():
    card = _card()
    gpt_oss = from_catalog("openai/gpt-oss-20b")
    assert dense_model_refusal(card, gpt_oss) is None  # the clamped quick GEGLU
    assert dense_model_refusal(card, from_catalog("Qwen/Qwen3-30B-A3B")) is None  # SwiGLU
    assert dense_model_refusal(card, replace(gpt_oss, mlp_gated=False, hidden_act="relu2")) is None
    why = dense_model_refusal(card, replace(gpt_oss, hidden_act="gelu_pytorch_tanh"))
    assert why == ("parallel.moe_expert_mlp: 'te_ops' fuses SwiGLU, gpt-oss's quick GEGLU or squared-ReLU experts;"
                   " openai/gpt-oss-20b's are gated gelu_pytorch_tanh; allowed for it: unfused")
    unfused = card.model_copy(update={"parallel": card.parallel.model_copy(update={"moe_expert_mlp": "unfused"})})
    assert dense_model_refusal(unfused, replace(gpt_oss, hidden_act="gelu_pytorch_tanh")) is None
