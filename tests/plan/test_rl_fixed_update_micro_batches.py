"""verl's fixed update micro-batches carry one micro-batch's response-length spread across the FSDP ranks
(plan.rl_passes.fixed_update_micro_batches)."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.plan.rl_passes import fixed_update_micro_batches
from trainfit.spec.card import load_card_dict


def _verl(*, logprob_mbs: int | None = 10, budget: int | None = None, padded: bool = False,
          logprob_budget: int | None = None, preset: str = "verl") -> dict:
    rollout = {"placement": "colocate", "prompts_per_step": 256, "num_generations": 5, "prompt_len": 93,
               "response_len": 1024, "response_len_mean": 1024 if padded else 188, "mini_batches": 4}
    if logprob_mbs is not None:
        rollout["logprob_micro_batch_size"] = logprob_mbs
    if budget is not None:
        rollout["max_tokens_per_micro_batch"] = budget
    if logprob_budget is not None:
        rollout["logprob_max_tokens_per_micro_batch"] = logprob_budget
    return {"model": "Qwen/Qwen2.5-7B", "method": "grpo", "scope": "full", "preset": preset,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True}, "batch": {"micro_batch_size": 8},
            "rollout": rollout}


def _update(d: dict):
    return next(p for p in make_plan(load_card_dict(d)).time.phases if p.name == "actor_update")


def test_only_a_stated_fixed_count_without_a_token_budget_is_a_fixed_update_split():
    assert fixed_update_micro_batches(load_card_dict(_verl()), packed=True)
    # the count alone may stand for a token budget: not taken
    assert not fixed_update_micro_batches(load_card_dict(_verl(logprob_mbs=None)), packed=True)
    # dynamic batching balances the micro-batches inside the rank
    assert not fixed_update_micro_batches(load_card_dict(_verl(budget=16384)), packed=True)
    assert not fixed_update_micro_batches(load_card_dict(_verl()), packed=False)


def test_fixed_update_micro_batches_wait_for_the_rank_with_the_most_tokens_in_each():
    fixed, share = _update(_verl()), _update(_verl(logprob_mbs=None))
    # 256 x 5 sequences / 4 optimizer steps / 8 ranks = 40 a rank and step, 5 micro-batches of 8: one micro-batch
    # spreads sqrt(5) x as much as the rank's step share, so its slowest rank waits longer
    assert fixed.terms["slowest_rank"] > share.terms["slowest_rank"]
    assert fixed.seconds - share.seconds == pytest.approx(fixed.terms["slowest_rank"] - share.terms["slowest_rank"],
                                                          rel=1e-6)
    # nothing else in the update moves
    for k in ("forward", "recompute", "backward", "optimizer_step"):
        if k in share.terms:
            assert fixed.terms[k] == pytest.approx(share.terms[k])


def test_padded_sequences_pay_no_length_spread_either_way():
    assert _update(_verl(padded=True)).seconds == pytest.approx(_update(_verl(padded=True, logprob_mbs=None)).seconds)


def test_a_log_prob_token_budget_without_an_update_budget_is_a_fixed_update_split():
    # verl's importer writes this card for actor.use_dynamic_bsz false, rollout.log_prob_use_dynamic_bsz true
    assert fixed_update_micro_batches(load_card_dict(_verl(logprob_mbs=None, logprob_budget=16384)), packed=True)
    assert not fixed_update_micro_batches(load_card_dict(_verl(logprob_mbs=None, logprob_budget=16384,
                                                               budget=16384)), packed=True)


def test_other_frameworks_keep_the_share_spread():
    # the split in batch order and _balance_batch are verl's code; an OpenRLHF card stating its log-prob count is not
    assert not fixed_update_micro_batches(load_card_dict(_verl(preset="openrlhf")), packed=True)


def test_the_verl_importers_card_takes_it():
    # the card read_verl writes (with verl's preset since importers apply FRAMEWORK_PRESETS) for
    # actor.use_dynamic_bsz false + log_prob_use_dynamic_bsz true
    from trainfit.export.importers import import_text

    script = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=256"
              " data.max_prompt_length=512 data.max_response_length=1024 actor_rollout_ref.model.path=Qwen/Qwen2.5-7B"
              " actor_rollout_ref.actor.ppo_mini_batch_size=64 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8"
              " actor_rollout_ref.actor.use_dynamic_bsz=False actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True"
              " actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=16384 actor_rollout_ref.rollout.n=5"
              " actor_rollout_ref.model.use_remove_padding=True trainer.n_gpus_per_node=8 trainer.nnodes=1\n")
    d = import_text(script, "verl").card
    assert d.get("preset") == "verl" and d["rollout"]["logprob_max_tokens_per_micro_batch"] == 16384
    d["hardware"] = {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1}
    assert fixed_update_micro_batches(load_card_dict(d), packed=True)
