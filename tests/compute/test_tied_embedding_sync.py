"""Tied word embeddings under pipeline parallel: the first and last stages all-reduce the embedding's gradient once per
step, after the data-parallel reduction (``model_parallel.tied_embedding_grad_sync_s``; nanotron's
``sync_tied_weights_gradients``, Megatron-Core's ``_allreduce_word_embedding_grads``)."""

from __future__ import annotations

import pytest

from trainfit.compute import collectives as coll
from trainfit.compute.model_parallel import tied_embedding_grad_sync_s
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

LLAMA_1B = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
            "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 131072, "head_dim": 64}


def test_two_rank_all_reduce_of_the_rank_vocabulary_shard():
    kw = {"vocab_rows": 65536, "hidden": 2048, "grad_bytes": 4.0, "bytes_per_s": 40e9}
    assert tied_embedding_grad_sync_s(pp=1, crosses_nodes=False, **kw) == 0.0
    across = tied_embedding_grad_sync_s(pp=2, crosses_nodes=True, **kw)
    assert across == pytest.approx(coll.all_reduce_seconds(total_bytes=65536 * 2048 * 4.0, ranks=2,
                                                           bus_bytes_per_s=40e9, nodes=2))
    # two ranks: each sends and receives half the buffer twice, S / bus in all
    assert across == pytest.approx(65536 * 2048 * 4.0 / 40e9, rel=0.01)
    # more pipeline stages do not widen the group: still the two end stages
    assert tied_embedding_grad_sync_s(pp=8, crosses_nodes=True, **kw) == across


def _plan(tied: bool, pp: int, *, lora: bool = False, nodes: int = 2):
    card = {"model": {"id": "llama-1b-shape", "config": {**LLAMA_1B, "tie_word_embeddings": tied}},
            "method": "sft", "scope": "lora" if lora else "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": nodes},
            "parallel": {"strategy": "ddp", "gradient_checkpointing": False, "pipeline_parallel": pp},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 8}}
    return make_plan(load_card_dict(card))


def test_the_plan_times_it_only_for_tied_trained_embeddings_under_a_pipeline():
    tied = _plan(True, 2)
    assert tied.time_parts["tied_embedding_sync"] > 0
    assert any("tied embeddings under 2 pipeline stages" in a for a in tied.assumptions)
    assert "tied_embedding_sync" not in _plan(False, 2).time_parts
    assert "tied_embedding_sync" not in _plan(True, 1).time_parts
    assert "tied_embedding_sync" not in _plan(True, 2, lora=True).time_parts  # adapters: the embedding is frozen
    # the end stages of 16 ranks in two stages sit in different nodes: one NIC, slower than inside one node
    assert tied.time_parts["tied_embedding_sync"] > _plan(True, 2, nodes=1).time_parts["tied_embedding_sync"]
