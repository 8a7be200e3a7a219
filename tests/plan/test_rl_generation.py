"""rollout.generation_calls: TRL before 0.17 generates inside every gradient-accumulation micro-batch, so a step's
prompts go to the engine in several sequential calls, each ending with its own longest completion (huggingface/trl
trl/trainer/grpo_trainer.py compute_loss @29de6eec, v0.14.0). The generation phase is the calls' sum; the weights reach
the engine once, the training passes and memory do not move."""

from __future__ import annotations

from functools import lru_cache

import pytest

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.plan.rl_generation import generation_calls
from trainfit.spec.card import load_card_dict


def _card(calls: int | None = None, prompts: int = 24) -> dict:
    ro = {"placement": "split", "gpus": 1, "prompts_per_step": prompts, "num_generations": 8, "prompt_len": 256,
          "response_len": 1024, "response_len_mean": 400}
    if calls is not None:
        ro["generation_calls"] = calls
    return {"model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "scope": "full", "preset": "trl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 4, "nodes": 1},
            "parallel": {"strategy": "zero3"}, "batch": {"micro_batch_size": 8}, "rollout": ro}


@lru_cache(maxsize=8)
def _plan(calls: int | None):
    return make_plan(load_card_dict(_card(calls)))


def _phases(calls: int | None) -> dict[str, float]:
    return {ph.name: ph.seconds for ph in _plan(calls).time.phases}


def test_default_is_one_call():
    assert load_card_dict(_card()).rollout.generation_calls == 1
    assert _phases(None) == _phases(1)


def test_eight_calls_of_three_prompts_cost_more_than_one_call_of_twenty_four():
    one, eight = _phases(1), _phases(8)
    # each call's batch ends with its own longest completion: eight of them take longer than one batch of all
    assert eight["generation"] > 1.5 * one["generation"]
    for name in set(one) - {"generation"}:
        assert eight[name] == pytest.approx(one[name]), name  # log-prob, update, weight sync: once per step


def test_the_calls_add_up_one_call_of_the_smaller_batch_each():
    # eight calls of 3 prompts are eight times one step of 3 prompts, generation for generation
    small = {ph.name: ph.seconds for ph in make_plan(load_card_dict(_card(1, prompts=3))).time.phases}
    assert _phases(8)["generation"] == pytest.approx(8 * small["generation"])


def test_memory_does_not_move():
    assert _plan(1).peak == _plan(8).peak


def test_more_calls_than_prompts_is_refused_naming_the_field():
    with pytest.raises(CardError, match=r"rollout\.generation_calls: 25 .*allowed: 1 to 24"):
        load_card_dict(_card(25))


def test_the_plan_says_so():
    notes = " ".join(_plan(8).time.assumptions)
    assert "8 sequential calls of 3 prompts x 8" in notes and "rollout.generation_calls" in notes
    assert generation_calls(load_card_dict(_card(8))) == 8
