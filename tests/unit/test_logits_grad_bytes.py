"""The logits' gradient before the output projection's backward (``plan.terms.logits_grad_bytes``) is in the head
output's dtype: 2 B per logit under 16-bit compute, 4 B for an fp32 model."""

from __future__ import annotations

from trainfit.catalog.models import resolve_model
from trainfit.memory.sharding import Sharding
from trainfit.plan.terms import logits_grad_bytes, step_terms
from trainfit.spec.card import load_card_dict


def _card(weights: str, compute: str) -> dict:
    return {"model": "Qwen/Qwen3-0.6B", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
            "parallel": {"strategy": "single"}, "batch": {"micro_batch_size": 1, "seq_len": 1024},
            "precision": {"optimizer": "adamw", "weights": weights, "compute": compute}}


def test_logits_gradient_in_the_activation_dtype():
    card = load_card_dict(_card("fp32", "fp32"))
    assert logits_grad_bytes(card, tokens=1024, width=151_936, dtype_bytes=4) == 4.0 * 1024 * 151_936
    assert logits_grad_bytes(card, tokens=1024, width=151_936, dtype_bytes=2) == 2.0 * 1024 * 151_936


def test_fp32_step_terms_hold_a_4_byte_logits_gradient():
    """The fp32 card's step terms hold a 4-byte logits gradient, the bf16 card's a 2-byte one (tokens x vocabulary)."""
    for weights, per_logit in (("fp32", 4.0), ("bf16", 2.0)):
        card = load_card_dict(_card(weights, weights))
        spec = resolve_model(card.model)
        terms, _, _ = step_terms(card, spec, Sharding(strategy=card.parallel.strategy, world_size=1, shard_group=1))
        assert terms.logits_grad_bf16 == per_logit * 1024 * 151_936
