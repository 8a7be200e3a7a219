"""The PPO critic's own token budget (rollout.critic_max_tokens_per_micro_batch, verl critic.ppo_max_token_len_per_gpu
and critic.forward_max_token_len_per_gpu): it moves only the critic's phases, memory and time; null plans the actor's
budget as before; the verl export writes it and the import reads it back; bad values are refused in one line."""

from __future__ import annotations

import re

import pytest

from trainfit.errors import CardError
from trainfit.export import export
from trainfit.export.importers import import_text
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

PPO = {
    "model": "Qwen/Qwen2.5-0.5B", "method": "ppo", "preset": "verl",
    "hardware": {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8},
    "rollout": {"prompt_len": 512, "response_len": 1536, "prompts_per_step": 64, "num_generations": 8,
                "response_len_mean": 700, "prompt_len_mean": 200, "max_tokens_per_micro_batch": 4096},
}
CRITIC = ("critic_values", "critic_update")
CRITIC_MEMORY = ("critic_value", "critic_forward", "critic_backward", "critic_optimizer_step")


def _card(**rollout):
    return load_card_dict({**PPO, "rollout": {**PPO["rollout"], **rollout}})


def _memory(plan) -> dict[str, float]:
    return {f"{g.name}:{p.phase.value}": p.device for g in plan.groups for p in g.phases}


def _time(plan) -> dict[str, float]:
    return {p.name: p.seconds for p in plan.time.phases}


def test_null_is_the_actors_budget():
    a, b = make_plan(_card()), make_plan(_card(critic_max_tokens_per_micro_batch=4096))
    assert _time(a) == pytest.approx(_time(b))
    assert _memory(a) == pytest.approx(_memory(b))


def test_a_larger_critic_budget_moves_only_the_critic():
    a, b = make_plan(_card()), make_plan(_card(critic_max_tokens_per_micro_batch=16384))
    ta, tb = _time(a), _time(b)
    assert set(ta) == set(tb)
    moved = {k for k in ta if abs(ta[k] - tb[k]) > 1e-9}
    assert moved and moved <= set(CRITIC), moved
    ma, mb = _memory(a), _memory(b)
    assert set(ma) == set(mb)
    moved = {k for k in ma if abs(ma[k] - mb[k]) > 1.0}
    assert moved and all(k.split(":")[1] in CRITIC_MEMORY for k in moved), moved
    # a larger packed row: more activation in the critic's passes
    assert all(mb[k] > ma[k] for k in moved)
    assert any("critic_max_tokens_per_micro_batch 16384" in n for n in b.assumptions)
    assert any("critic_max_tokens_per_micro_batch" in n for n in b.time.assumptions)


def test_verl_export_writes_it_and_import_reads_it():
    card = _card(critic_max_tokens_per_micro_batch=16384)
    text = export(card, "verl").text
    assert "critic.ppo_max_token_len_per_gpu=16384" in text
    assert "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096" in text
    back = load_card_dict(import_text(text, "verl").card)
    assert back.rollout.critic_max_tokens_per_micro_batch == 16384
    assert back.rollout.max_tokens_per_micro_batch == 4096
    # null: the actor's budget written for the critic, read back as null
    text = export(_card(), "verl").text
    assert "critic.ppo_max_token_len_per_gpu=4096" in text
    assert load_card_dict(import_text(text, "verl").card).rollout.critic_max_tokens_per_micro_batch is None
    # verl's default 32768 where the critic's key is not stated (ppo_trainer.yaml l.160 @e0d035cd)
    bare = re.sub(r"\S*critic\.ppo_max_token_len_per_gpu=\S+", "", text)
    assert load_card_dict(import_text(bare, "verl").card).rollout.critic_max_tokens_per_micro_batch == 32768


@pytest.mark.parametrize("rollout, method, match", [
    ({"critic_max_tokens_per_micro_batch": 1024}, "ppo",
     r"rollout.critic_max_tokens_per_micro_batch: 1024 tokens is less than one sequence"),
    ({"critic_max_tokens_per_micro_batch": 16384, "max_tokens_per_micro_batch": None}, "ppo",
     r"rollout.critic_max_tokens_per_micro_batch: .*max_tokens_per_micro_batch null; allowed: that budget set as well, or this one null"),
    ({"critic_max_tokens_per_micro_batch": 16384}, "grpo",
     r"rollout.critic_max_tokens_per_micro_batch: the PPO critic's token budget; method is 'grpo'"),
    ({"critic_max_tokens_per_micro_batch": 0}, "ppo", r"critic_max_tokens_per_micro_batch"),
])
def test_bad_values_refused_in_one_line(rollout, method, match):
    with pytest.raises(CardError, match=match) as e:
        load_card_dict({**PPO, "method": method, "rollout": {**PPO["rollout"], **rollout}})
    assert "\n" not in str(e.value).strip() or len(str(e.value).strip().splitlines()) <= 2
