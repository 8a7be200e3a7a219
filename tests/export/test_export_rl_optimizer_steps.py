"""An RL export trains what the card plans: ``rollout.mini_batches`` optimizer steps per rollout batch (the plan's
optimizer_steps_per_run_step, x num_iterations). The launch's step count was derived from micro-batch x accumulation
x data-parallel ranks instead, so a GRPO card of 16 prompts x 8 generations on 8 GPUs, micro-batch 1, mini_batches 1
was written as verl ``ppo_mini_batch_size=1``: 16 optimizer steps per rollout where the plan has 1.

- verl counts ppo_mini_batch_size in prompts before n: the FSDP worker multiplies it by rollout.n and divides by the
  data-parallel ranks (volcengine/verl verl/workers/fsdp_workers.py l.241-242
  @b178a3cd56f58b2d502255daba591e92833930a7), the actor splits the batch into mini-batches of that size, one
  optimizer step each (verl/workers/actor/dp_actor.py l.541): steps = data.train_batch_size / ppo_mini_batch_size.
- OpenRLHF: rollout.batch_size x n_samples_per_prompt / train.batch_size (train.batch_size counts samples).
- NeMo RL: num_prompts_per_step x num_generations_per_prompt / train_global_batch_size.
- TRL GRPO: one optimizer step per gradient_accumulation_steps micro-batches, one generation per steps_per_generation
  = generation_batch_size / (per_device_train_batch_size x processes) micro-batches (huggingface/trl
  trl/trainer/grpo_config.py l.1077-1091 @f2cd57710ae345ea6428ae95363267fcf38a3dc8).
Each is checked by reading the file back: the imported card has the card's steps per rollout."""

from __future__ import annotations

import pytest
from export_cards import GRPO_LORA

from trainfit.export import export
from trainfit.export.importers import import_text
from trainfit.spec.card import load_card_dict


def _card(mini_batches: int | None = None, **batch):
    d = {**GRPO_LORA, "rollout": dict(GRPO_LORA["rollout"]), "batch": {"micro_batch_size": 1, **batch}}
    d["parallel"] = {**GRPO_LORA["parallel"], "offload": "none"}
    if mini_batches is not None:
        d["rollout"]["mini_batches"] = mini_batches
    return load_card_dict(d)


def _override(text: str, key: str) -> str:
    return next(w.split("=", 1)[1] for w in text.split() if w.startswith(key + "="))


def _flag(text: str, flag: str) -> str:
    words = text.split()
    return words[words.index(flag) + 1]


@pytest.mark.parametrize("mini_batches, expected", [(None, 16), (1, 16), (4, 4), (16, 1)])
def test_verl_ppo_mini_batch_size_is_prompts_over_mini_batches(mini_batches, expected):
    card = _card(mini_batches)
    e = export(card, "verl")
    assert int(_override(e.text, "actor_rollout_ref.actor.ppo_mini_batch_size")) == expected
    assert not any("optimizer steps per rollout batch" in n for n in e.notes), e.notes


@pytest.mark.parametrize("target", ["verl", "openrlhf", "nemo-rl"])
@pytest.mark.parametrize("mini_batches", [1, 4])
def test_export_then_import_gives_the_cards_steps_per_rollout(target, mini_batches):
    card = _card(mini_batches, grad_accum=2)
    back = import_text(export(card, target).text, target).card
    assert back["rollout"].get("mini_batches", 1) == card.rollout.optimizer_steps_per_rl_step


def test_openrlhf_train_batch_size_is_the_rollouts_samples_over_mini_batches():
    e = export(_card(4), "openrlhf")
    assert int(_flag(e.text, "--train.batch_size")) == 16 * 8 // 4


def test_nemo_rl_train_global_batch_size_is_the_rollouts_samples_over_mini_batches():
    e = export(_card(2), "nemo-rl")
    assert e.data["config"]["policy"]["train_global_batch_size"] == 16 * 8 // 2


@pytest.mark.parametrize("mini_batches", [1, 2])
def test_trl_accumulates_the_rollouts_micro_batches_per_optimizer_step(mini_batches):
    card = _card(mini_batches)
    e = export(card, "trl")
    args = e.data["args"]
    # 128 completions in micro-batches of 1 x 8 processes: 16 micro-batches a generation
    assert args["generation_batch_size"] == 128
    assert args["gradient_accumulation_steps"] == 16 // mini_batches
    acc = export(card, "accelerate").text
    back = import_text(e.text, "trl", companion=("accelerate", acc)).card
    assert back["rollout"].get("mini_batches", 1) == mini_batches


def test_trl_generation_calls_with_mini_batches_write_one_call_and_say_so():
    d = {**GRPO_LORA, "rollout": {**GRPO_LORA["rollout"], "generation_calls": 2, "mini_batches": 2},
         "parallel": {**GRPO_LORA["parallel"], "offload": "none"}}
    e = export(load_card_dict(d), "trl")
    assert "steps_per_generation" not in e.data["args"] and e.data["args"]["gradient_accumulation_steps"] == 8
    assert any("generation_batch_size kept at one call per step (128)" in n for n in e.notes), e.notes
