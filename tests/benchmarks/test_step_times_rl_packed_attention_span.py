"""Long chain-of-thought RL rows: packed sequences of varied lengths attend alone, so the passes' attention follows
``Σ len_i²`` (``plan.rl_passes.packed_span_factor``). The RLinf comparison rows (R1-Distill-Qwen-1.5B, responses up to
27,648 tokens, published means 13,975 and 14,255 tokens) were planned at the mean sequence's span: RLinf's update
-14 %, log-prob pass -39 %; verl v0.5.0's update -10 %, log-prob pass -16 %. At the spread of their lengths: -0 %,
-31 %, +3 %, -7 %."""

from __future__ import annotations

import copy

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_rl_packed_attention_span")
RL = {e["id"]: e for e in S.load_entries(S.RL_DATA)}
RLINF = "rlinf-rlinf-compare-grpo-r1distill-qwen15b-boba-h100-8g"
VERL = "verl-v050-rlinf-compare-grpo-r1distill-qwen15b-boba-h100-8g"


def _phases(card: dict) -> dict[str, float]:
    return {k.removeprefix("time."): v for k, v in S.plan_card(card).parts.items() if k.startswith("time.")}


@pytest.mark.parametrize("rid", [RLINF, VERL])
def test_the_spread_of_lengths_brings_the_update_and_log_prob_pass_to_the_published(rid):
    e = RL[rid]
    card, _ = S.map_rl(e)
    assert card["rollout"]["response_len_mean"]  # a published mean: the span is charged
    flat_card = copy.deepcopy(card)
    flat_card["rollout"]["response_len_shape"] = "fixed"  # every response the mean: the mean sequence's span
    spread, flat = _phases(card), _phases(flat_card)
    published = e["measured"]["phases_s"]
    for phase in ("actor_update", "old_logprob"):
        before = abs(flat[phase] / published[phase] - 1)
        after = abs(spread[phase] / published[phase] - 1)
        assert after < before
    assert abs(spread["actor_update"] / published["actor_update"] - 1) < 0.05
