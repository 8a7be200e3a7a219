"""Tiny real models for the watch tests: a 2-layer Qwen3 built from a config (random weights)."""

from __future__ import annotations

import pytest

HIDDEN, LAYERS, VOCAB, SEQ, BATCH = 64, 2, 512, 32, 2


def tiny_config() -> dict:
    return {"model_type": "qwen3", "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": 128,
            "num_hidden_layers": LAYERS, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "max_position_embeddings": 2048, "tie_word_embeddings": False}


def tiny_card(**over) -> dict:
    """The card of the tiny run: fp32 weights and compute, AdamW, one replica, no checkpointing."""
    card = {"model": {"id": "tiny-qwen3", "config": tiny_config()}, "method": "sft", "scope": "full",
            "precision": {"weights": "fp32", "compute": "fp32", "optimizer_impl": "foreach"},
            "hardware": {"gpu": "h200", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": BATCH, "seq_len": SEQ}}
    for k, v in over.items():
        card[k] = {**card[k], **v} if isinstance(v, dict) and isinstance(card.get(k), dict) else v
    return card


@pytest.fixture
def tiny_model():
    return build_tiny_model()


def build_tiny_model():
    """The tiny Qwen3 of ``tiny_config``, seeded random weights, fp32."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = {k: v for k, v in tiny_config().items() if k != "model_type"}
    return Qwen3ForCausalLM(Qwen3Config(**cfg))
