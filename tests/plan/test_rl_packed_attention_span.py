"""RL passes on packed sequences of varied lengths: each sequence attends alone, so the attention work is
``Σ len_i²`` = ``n · mean² · (1 + cv²)``, not ``n · mean²`` (``plan.rl_passes.packed_span_factor``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.plan import make_plan
from trainfit.plan.rl_batches import rl_batch
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


def test_the_span_of_uniform_responses_is_hand_computed():
    """Responses uniform on [1, 8191] (mean 4,096) behind a 512-token prompt: a sequence's tokens have the mean 4,608
    and the standard deviation 8,190 / sqrt(12) = 2,364.25, so the span is 1 + (2,364.25 / 4,608)^2 = 1.2632 (the
    discrete bins of the length groups shave a little off the continuous variance)."""
    d = _card(mean=4096, response_len=8191)
    d["rollout"]["response_len_shape"] = "uniform"
    assert _factor(d) == pytest.approx(1.2632, rel=2e-3)


def test_no_span_for_padded_sequences_or_eager_attention():
    assert _factor(_card(packed=False)) == 1.0
    card = load_card_dict(_card())
    spec = model_spec_of(card)
    assert packed_span_factor(card, spec, rl_batch(card, spec, train_gpus=8), eager=True) == 1.0


def test_a_length_profile_spreads_the_span_too():
    """Without a stated mean the length profile's shape gives the spread: the span is charged as with a mean."""
    assert _factor(_card(mean=None)) > 1.05


def test_the_span_never_passes_the_longest_sequence():
    """A spread as large as the mean (1 + cv^2 = 2) on sequences of 512 + 1,000 tokens of at most 512 + 1,024: the
    span stops at the longest, 1,536 / 1,512 = 1.01587."""
    card = load_card_dict(_card(mean=1000, response_len=1024))
    spec = model_spec_of(card)
    batch = rl_batch(card, spec, train_gpus=8)
    assert batch.seq_len == 1512
    wide = replace(batch, token_spread=1512.0)
    assert packed_span_factor(card, spec, wide, eager=False) == pytest.approx(1536 / 1512, rel=1e-9)


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
