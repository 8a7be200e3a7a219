"""RL passes on packed sequences of varied lengths: each sequence attends alone, so the attention work is
``Σ len_i²`` = ``n · mean² · (1 + cv²)``, not ``n · mean²`` (``plan.rl_passes.packed_span_factor``)."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.plan.rl_batches import rl_batch, sequence_token_spread
from trainfit.plan.rl_passes import packed_span_factor
from trainfit.plan.resolve import model_spec_of
from trainfit.spec.card import load_card_dict


def _card(mean: int | None = 4000, packed: bool = True, response_len: int = 16384) -> dict:
    rollout = {"placement": "colocate", "prompts_per_step": 64, "num_generations": 8, "prompt_len": 512,
               "response_len": response_len, "mini_batches": 4, "packed_sequences": packed}
    if mean is not None:
        rollout["response_len_mean"] = mean
    return {"model": "Qwen/Qwen2.5-1.5B", "method": "grpo", "scope": "full", "preset": "verl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1}, "attention": "flash",
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True}, "batch": {"micro_batch_size": 2},
            "rollout": rollout, "roles": {"kl_coef": 0.0}}


def _factor(d: dict) -> float:
    card = load_card_dict(d)
    spec = model_spec_of(card)
    return packed_span_factor(card, spec, rl_batch(card, spec, train_gpus=8), eager=False)


def test_the_span_is_one_plus_the_squared_spread_of_a_sequences_tokens():
    card = load_card_dict(_card())
    spec = model_spec_of(card)
    batch = rl_batch(card, spec, train_gpus=8)
    cv = sequence_token_spread(card, spec) / batch.seq_len
    assert 0.3 < cv < 1.0  # a truncated exponential of mean 4,000 of at most 16,384, behind a 512-token prompt
    assert _factor(_card()) == pytest.approx(1 + cv * cv, rel=1e-9)


def test_no_span_for_padded_sequences_eager_attention_or_a_guessed_mean():
    assert _factor(_card(packed=False)) == 1.0
    assert _factor(_card(mean=None)) == 1.0
    card = load_card_dict(_card())
    spec = model_spec_of(card)
    assert packed_span_factor(card, spec, rl_batch(card, spec, train_gpus=8), eager=True) == 1.0


def test_the_span_never_passes_the_longest_sequence():
    # responses capped near their mean: the spread is small and the cap binds neither way
    assert 1.0 <= _factor(_card(mean=1000, response_len=1024)) <= (512 + 1024) / (512 + 1000)


def test_the_attention_of_the_passes_follows_the_span():
    plan = make_plan(load_card_dict(_card()))
    phases = {p.name: p for p in plan.time.phases}
    assert any("packed sequences attend alone" in a for a in plan.time.assumptions)
    # the same lengths with no spread (every response the mean): less attention in the log-prob pass and the update
    fixed = _card()
    fixed["rollout"]["response_len_shape"] = "fixed"
    flat = {p.name: p for p in make_plan(load_card_dict(fixed)).time.phases}
    assert phases["old_logprob"].terms["attention"] > flat["old_logprob"].terms["attention"] * 1.2
    assert phases["actor_update"].seconds > flat["actor_update"].seconds
