"""A published step timer that also holds the run's validation (``timer_scope.step.validation``,
``step_times.validation_in_step``): NeMo RL validates inside ``total_step_time`` every ``val_period`` steps, and the
v0.5 DAPO DeepSeek-V3 recipe validates every 5 steps of a 10-step run whose table step is a 5-step mean."""

from __future__ import annotations

import copy

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_validation_in_step")
ENTRIES = {e["id"]: e for e in S.load_entries(S.RL_DATA)}
DAPO = "nemorl-v05-dapo-dsv3-h100-bf16-512g-onpol"


def _step_row(e: dict):
    rows = [r for r in S.rl_rows([e], []) if r.quantity == "step"]
    assert len(rows) == 1 and rows[0].status == "mapped"
    return rows[0]


def test_the_dapo_row_states_one_validation_in_five_steps() -> None:
    val = ENTRIES[DAPO]["timer_scope"]["step"]["validation"]
    assert (val["period_steps"], val["window_steps"], val["prompts"]) == (5, 5, 256)
    assert "dapo-deepseek-v3-64n8g.yaml" in ENTRIES[DAPO]["timer_scope"]["step"]["why"]


def test_the_step_adds_a_fifth_of_one_validation_generation_and_sleep_wake() -> None:
    e = ENTRIES[DAPO]
    card, _ = S.map_rl(e)
    seconds, note = S.validation_in_step(e, card)
    val_card = copy.deepcopy(card)
    val_card["rollout"].update(prompts_per_step=256, num_generations=1)
    val_card["rollout"].pop("generated_prompts_per_step", None)
    planned = S.plan_card(val_card)
    expected = (planned.parts["time.generation"] + planned.parts["time.sleep_wake"]) / 5
    assert seconds == pytest.approx(expected)
    bare = copy.deepcopy(e)
    del bare["timer_scope"]
    assert _step_row(e).trainfit_s == pytest.approx(_step_row(bare).trainfit_s + seconds)
    assert "1 of every 5 steps validates" in note


def test_entries_without_the_scope_add_nothing() -> None:
    e = ENTRIES["nemorl-v06-grpo-dsv3-h100-bf16-512g-onpol"]
    card, _ = S.map_rl(e)
    assert S.validation_in_step(e, card) is None


def test_a_window_that_may_or_may_not_hold_a_validation_is_refused() -> None:
    e = copy.deepcopy(ENTRIES[DAPO])
    e["timer_scope"]["step"]["validation"]["period_steps"] = 10  # a 5-step mean holds 0 or 1 of them
    card, _ = S.map_rl(e)
    with pytest.raises(ValueError, match="the count varies"):
        S.validation_in_step(e, card)
