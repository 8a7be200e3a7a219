"""rollout.generated_prompts_per_step: DAPO dynamic sampling generates whole batches and trains prompts_per_step of
them (NeMo RL grpo.batch_multiplier); the generation and reward phases time the generated prompts, the log-prob and
update passes the trained ones, and memory does not move."""

from __future__ import annotations

from functools import lru_cache

import pytest

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _card(generated: int | None = None) -> dict:
    ro = {"placement": "colocate", "prompts_per_step": 32, "num_generations": 8, "prompt_len": 512,
          "response_len": 2048, "response_len_mean": 600, "mini_batches": 1, "reward_seconds_per_sample": 0.5,
          "reward_workers": 16}
    if generated is not None:
        ro["generated_prompts_per_step"] = generated
    return {"model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "scope": "full", "preset": "nemo-rl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp"}, "batch": {"micro_batch_size": 4}, "rollout": ro}


@lru_cache(maxsize=8)
def _phases(generated: int | None) -> dict[str, float]:
    p = make_plan(load_card_dict(_card(generated)))
    return {ph.name: ph.seconds for ph in p.time.phases}


def test_default_generates_the_trained_prompts():
    assert _phases(None) == _phases(32)


def test_three_times_the_prompts_generated_only_the_generation_side_grows():
    base, dapo = _phases(None), _phases(96)
    assert dapo["generation"] > base["generation"]
    assert dapo["reward"] == pytest.approx(3 * base["reward"])  # one grading per generated completion
    for name in set(base) - {"generation", "reward"}:
        assert dapo[name] == pytest.approx(base[name]), name  # log-prob, update, sync: the 32 x 8 trained


def test_memory_does_not_move():
    a = make_plan(load_card_dict(_card(None)))
    b = make_plan(load_card_dict(_card(96)))
    assert a.peak == b.peak


def test_fewer_generated_than_trained_is_refused():
    with pytest.raises(CardError, match="generated_prompts_per_step"):
        load_card_dict(_card(16))


def _phases_of(card: dict) -> dict[str, float]:
    return {ph.name: ph.seconds for ph in make_plan(load_card_dict(card)).time.phases}


def test_a_reward_model_scores_every_generated_group():
    """The reward model's forward runs on every generated completion (the groups dynamic sampling drops are known
    only from their rewards); the log-prob and update passes keep the trained ones."""
    def card(generated):
        d = _card(generated)
        d["roles"] = {"reward_model": "Qwen/Qwen2.5-0.5B"}
        d["rollout"].update(reward_seconds_per_sample=0.0)
        return d

    base, dapo = _phases_of(card(None)), _phases_of(card(96))
    assert dapo["reward_model"] > 2 * base["reward_model"]
    assert dapo["old_logprob"] == pytest.approx(base["old_logprob"])
    assert dapo["actor_update"] == pytest.approx(base["actor_update"])


def test_the_hybrid_engine_generates_the_generated_prompts():
    """DeepSpeed's Hybrid Engine generates on the training GPUs: the generated prompts, not the trained ones."""
    def card(generated):
        ro = {"engine": "deepspeed_hybrid", "tensor_parallel": 1, "max_num_seqs": 32, "prompts_per_step": 256,
              "num_generations": 1, "prompt_len": 256, "response_len": 256, "response_len_shape": "fixed"}
        if generated:
            ro["generated_prompts_per_step"] = generated
        return {"model": "facebook/opt-1.3b", "method": "ppo", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8},
                "parallel": {"strategy": "zero3"}, "batch": {"micro_batch_size": 8},
                "roles": {"critic": "facebook/opt-350m", "reward_model": "facebook/opt-350m"}, "rollout": ro}

    base, more = _phases_of(card(None)), _phases_of(card(512))
    assert more["generation"] > 1.5 * base["generation"]
    assert more["actor_update"] == pytest.approx(base["actor_update"])
