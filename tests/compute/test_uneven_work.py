"""Unequal work across lockstep ranks: variable-length RL micro-batches (compute.collectives, compute.training)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import collectives as coll
from trainfit.compute.rates import default_rates
from trainfit.compute.training import Parallel, train_step_time
from trainfit.memory.weights import total_params
from trainfit.plan import make_plan
from trainfit.plan.rl_batches import update_work_cv
from trainfit.plan.resolve import model_spec_of
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))
QWEN7 = from_catalog("Qwen/Qwen2.5-7B")
QWEN05 = from_catalog("Qwen/Qwen2.5-0.5B")
FSDP8 = Parallel(strategy="fsdp", ranks=8, gpus_per_node=8)


def test_micro_batch_spread_falls_as_the_square_root_of_its_sequences():
    assert coll.micro_batch_token_cv(sequence_tokens_cv=0.6, sequences=1) == pytest.approx(0.6)
    assert coll.micro_batch_token_cv(sequence_tokens_cv=0.6, sequences=36) == pytest.approx(0.1)
    assert coll.micro_batch_token_cv(sequence_tokens_cv=0.0, sequences=36) == 0.0


@given(st.integers(1, 1024), st.floats(0.0, 1.0))
def test_lockstep_excess_is_the_speed_spread_without_uneven_work_and_grows_with_it(ranks, cv):
    speed = coll.slowest_rank_excess(ranks=ranks)
    assert coll.lockstep_excess(ranks=ranks, data_ranks=ranks, work_cv=0.0) == pytest.approx(speed)
    both = coll.lockstep_excess(ranks=ranks, data_ranks=ranks, work_cv=cv)
    assert both >= speed - 1e-12
    # independent spreads: never more than the two excesses added
    assert both <= speed + coll.slowest_rank_excess(ranks=ranks, sigma=cv) + 1e-12


def _step(spec, work_cv: float, tokens: int):
    return train_step_time(spec, rates=H100, micro_batch_size=tokens // 256, seq_len=256, micro_steps=2,
                           parallel=FSDP8, trained_params=float(total_params(spec)), trained_tensors=339,
                           gathered_weight_bytes=2.0 * total_params(spec), gradient_checkpointing=True, work_cv=work_cv)


def test_uneven_micro_batches_slow_a_compute_bound_step_by_the_slowest_ranks_extra_tokens():
    even, uneven = _step(QWEN7, 0.0, 16384), _step(QWEN7, 0.15, 16384)
    wait_even = next(p for p in even.phases if p.name == "slowest_rank")
    wait = next(p for p in uneven.phases if p.name == "slowest_rank")
    assert wait.seconds > wait_even.seconds
    assert uneven.total_s - even.total_s == pytest.approx(wait.terms["uneven_work"])
    # compute-bound: the extra is the device time times the excess added beyond the speed spread
    compute = sum(p.seconds for p in even.phases if p.name in ("forward", "recompute", "backward"))
    extra = (coll.lockstep_excess(ranks=8, data_ranks=8, work_cv=0.15) - coll.slowest_rank_excess(ranks=8))
    assert wait.terms["uneven_work"] == pytest.approx(extra * compute, rel=0.15)


def test_a_launch_bound_step_hides_the_slowest_ranks_extra_tokens():
    # a 0.5B model on a few hundred tokens: the host's launches set the pace, more tokens stay under them
    even, uneven = _step(QWEN05, 0.0, 512), _step(QWEN05, 0.3, 512)
    assert uneven.total_s == pytest.approx(even.total_s)


def _verl(padded: bool = False, preset: str = "verl") -> dict:
    rollout = {"placement": "colocate", "prompts_per_step": 256, "num_generations": 5, "prompt_len": 93,
               "response_len": 1024, "response_len_mean": 1024 if padded else 188, "mini_batches": 16}
    return {"model": "Qwen/Qwen2.5-7B", "method": "grpo", "scope": "full", "preset": preset,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True}, "batch": {"micro_batch_size": 10},
            "rollout": rollout}


def test_verl_update_carries_the_response_length_spread_and_padded_sequences_none():
    card = load_card_dict(_verl())
    spec = model_spec_of(card)
    cv = update_work_cv(card, spec, micro_batch_sequences=10)
    # a truncated exponential of mean 188 (of at most 1024) spreads about as much as its mean: ~188 / 281 / sqrt(10)
    assert 0.15 < cv < 0.25
    assert update_work_cv(card, spec, micro_batch_sequences=40) == pytest.approx(cv / 2)
    padded = load_card_dict(_verl(padded=True))
    assert update_work_cv(padded, model_spec_of(padded), micro_batch_sequences=10) == 0.0
    trl = load_card_dict(_verl(preset="trl"))
    assert update_work_cv(trl, model_spec_of(trl), micro_batch_sequences=10) == 0.0


def test_verl_actor_update_is_slower_with_uneven_micro_batches_than_their_mean():
    plan = make_plan(load_card_dict(_verl()))
    update = next(p for p in plan.time.phases if p.name == "actor_update")
    assert update.terms["slowest_rank"] > 0
    assert any("unequal micro-batches" in a for a in plan.time.assumptions)


def _fwd(work_cv: float, data_ranks: int = 0):
    from trainfit.compute.training import forward_only_time

    return forward_only_time(QWEN7, rates=H100, micro_batch_size=16, seq_len=1024, micro_steps=4, parallel=FSDP8,
                             gathered_weight_bytes=2.0 * total_params(QWEN7), work_cv=work_cv, data_ranks=data_ranks)


def test_a_sharded_log_prob_pass_runs_at_the_pace_of_the_rank_with_the_most_tokens():
    from trainfit.compute.training import forward_only_time

    even, uneven = _fwd(0.0), _fwd(0.2)
    # the pass's own layers and head, without the gathers: the same inventory unsharded
    bare = forward_only_time(QWEN7, rates=H100, micro_batch_size=16, seq_len=1024, micro_steps=4)
    # by hand: Blom's expected maximum of 8 is z = inv_cdf(7.625 / 8.25) = 1.4342; the speed spread alone gives
    # 0.08 z = 0.11474, with the tokens' 0.2 z = 0.28684 added in quadrature 0.30894: 0.19420 more of the pass,
    # charged on the pass as the speed spread is
    assert (uneven.seconds - even.seconds) / bare.seconds == pytest.approx(0.19420, rel=1e-4)
    # fewer data-parallel ranks (a sequence-parallel group shares its data): a smaller expected maximum
    assert even.seconds < _fwd(0.2, data_ranks=2).seconds < uneven.seconds


def _verl_logprob_card(logprob_mbs: int | None) -> dict:
    d = _verl()
    if logprob_mbs is not None:
        d["rollout"]["logprob_micro_batch_size"] = logprob_mbs
    return d


def test_verl_fixed_log_prob_micro_batches_carry_the_length_spread_a_count_from_the_update_none():
    def logprob(d):
        return next(p for p in make_plan(load_card_dict(d)).time.phases if p.name == "old_logprob").seconds

    fixed, fallback = logprob(_verl_logprob_card(10)), logprob(_verl_logprob_card(None))
    # the same 10 sequences a micro-batch; only the stated fixed count (verl's log_prob_micro_batch_size_per_gpu,
    # batch.split in batch order) is charged the spread
    assert fixed > fallback
    padded = _verl(padded=True)
    padded["rollout"]["logprob_micro_batch_size"] = 10
    no_spread = dict(padded, rollout=dict(padded["rollout"]))
    no_spread["rollout"].pop("logprob_micro_batch_size")
    assert logprob(padded) == pytest.approx(logprob(no_spread))
