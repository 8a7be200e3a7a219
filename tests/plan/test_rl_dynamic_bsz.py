"""verl's dynamic batching as a card field (rollout.max_tokens_per_micro_batch, logprob_max_tokens_per_micro_batch):
the micro-batch count of plan.rl_batches.dynamic_micro_batches, the card's refusals, the memory of one packed row of the
budget, and the verl export / import of use_dynamic_bsz."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.plan.rl_batches import dynamic_micro_batches
from trainfit.spec.card import load_card_dict

GRPO = {
    "model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "preset": "verl",
    "hardware": {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8},
    "rollout": {"prompt_len": 512, "response_len": 1536, "prompts_per_step": 64, "num_generations": 8,
                "response_len_mean": 700, "prompt_len_mean": 200},
}


def _card(**rollout):
    return load_card_dict({**GRPO, "rollout": {**GRPO["rollout"], **rollout}})


def _peak(card) -> float:
    return make_plan(card).peak.device


# --- the count ---------------------------------------------------------------------------------------------------

def test_no_spread_is_ceildiv_of_the_rank_tokens():
    # verl: ceildiv(total_seqlen, max_token_len) (seqlen_balancing.py rearrange_micro_batches)
    assert dynamic_micro_batches(sequences=40, token_mean=281, token_std=0, budget_tokens=12000,
                                 data_parallel=8) == ((1, 1.0),)
    assert dynamic_micro_batches(sequences=64, token_mean=244, token_std=0, budget_tokens=8000,
                                 data_parallel=8) == ((2, 1.0),)


def test_count_is_at_most_the_sequences():
    assert dynamic_micro_batches(sequences=3, token_mean=4000, token_std=0, budget_tokens=4096,
                                 data_parallel=1) == ((3, 1.0),)


def test_the_largest_rank_sets_the_count():
    # 15.6k tokens a rank against 2 x 8000: one rank alone mostly fits two micro-batches, eight ranks mostly need three
    one = dynamic_micro_batches(sequences=64, token_mean=244, token_std=50, budget_tokens=8000, data_parallel=1)
    eight = dynamic_micro_batches(sequences=64, token_mean=244, token_std=50, budget_tokens=8000, data_parallel=8)
    assert abs(sum(p for _, p in eight) - 1) < 1e-9
    mean1, mean8 = (sum(k * p for k, p in c) for c in (one, eight))
    assert 2 <= mean1 < mean8 <= 3
    assert min(k for k, _ in eight) >= 2


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 2000), mu=st.floats(50, 8000), cv=st.floats(0, 1.5), dp=st.integers(1, 512),
       budget=st.floats(8000, 200000))
def test_expected_count_covers_the_mean_rank(n, mu, cv, dp, budget):
    # the normal approximation of a rank's tokens must stay within the physical cap (every sequence fits the budget,
    # so a rank never holds more than n budgets): beyond it, the count's cap at n makes E[count] < E[tokens]/budget
    assume(n * mu + 3 * n ** 0.5 * cv * mu <= n * budget)
    counts = dynamic_micro_batches(sequences=n, token_mean=mu, token_std=cv * mu, budget_tokens=budget,
                                   data_parallel=dp)
    assert abs(sum(p for _, p in counts) - 1) < 1e-9
    assert all(1 <= k <= n for k, _ in counts)
    expected = sum(k * p for k, p in counts)
    assert expected >= min(n, n * mu / budget) * (1 - 1e-3)


# --- the card ----------------------------------------------------------------------------------------------------

def test_budget_below_the_longest_sequence_is_refused():
    with pytest.raises(CardError, match=r"rollout.max_tokens_per_micro_batch: 1024 tokens is less than one sequence"
                                        r" \(rollout.prompt_len \+ response_len = 2048\)"):
        _card(max_tokens_per_micro_batch=1024)
    with pytest.raises(CardError, match="logprob_max_tokens_per_micro_batch"):
        _card(logprob_max_tokens_per_micro_batch=2000)


def test_budget_counts_the_ulysses_group():
    # verl multiplies the per-GPU budget by the Ulysses size (dp_actor.py)
    d = {**GRPO, "parallel": {"context_parallel": 2, "context_parallel_kind": "ulysses"},
         "rollout": {**GRPO["rollout"], "max_tokens_per_micro_batch": 1024}}
    assert load_card_dict(d).rollout.max_tokens_per_micro_batch == 1024


@pytest.mark.parametrize("extra, match", [
    ({"packed_sequences": False}, "packed_sequences false"),
    ({"packed_row_tokens": 8192}, "packed_row_tokens"),
    ({"logprob_max_tokens_per_micro_batch": 4096, "logprob_micro_batch_size": 4}, "give one of them"),
])
def test_contradictions_are_refused(extra, match):
    with pytest.raises(CardError, match=match):
        _card(max_tokens_per_micro_batch=8192, **extra)


def test_sft_refuses_the_budget():
    with pytest.raises(CardError, match="a token budget for the RL log-prob and update passes"):
        load_card_dict({"model": "Qwen/Qwen2.5-0.5B", "method": "sft",
                        "rollout": {"max_tokens_per_micro_batch": 8192}})


# --- memory ------------------------------------------------------------------------------------------------------

def test_one_sequence_budget_is_one_padded_sequence():
    # a budget of exactly the longest sequence holds one sequence: the memory of micro_batch_size 1
    seq = GRPO["rollout"]["prompt_len"] + GRPO["rollout"]["response_len"]
    assert _peak(_card(max_tokens_per_micro_batch=seq)) == _peak(_card())
    # and the budget, not batch.micro_batch_size, sizes the micro-batch
    wide = load_card_dict({**GRPO, "batch": {"micro_batch_size": 16},
                           "rollout": {**GRPO["rollout"], "max_tokens_per_micro_batch": seq}})
    assert _peak(wide) == _peak(_card())


def test_budget_replaces_micro_batches_at_the_maximum_length():
    # 14 sequences of the mean length fit 14 x 900 = 12.6k tokens; a fixed micro_batch_size of 14 plans them at the
    # maximum (14 x 2048 = 28.7k): the budget plans 12.6k
    fixed = load_card_dict({**GRPO, "batch": {"micro_batch_size": 14}})
    budget = _card(max_tokens_per_micro_batch=12600)
    assert _peak(budget) < _peak(fixed)


@settings(max_examples=8, deadline=None)
@given(a=st.integers(2048, 40000), b=st.integers(2048, 40000))
def test_memory_is_monotone_in_the_budget(a, b):
    lo, hi = sorted((a, b))
    assert _peak(_card(max_tokens_per_micro_batch=lo)) <= _peak(_card(max_tokens_per_micro_batch=hi))


def test_budget_above_the_rank_share_leaves_the_peak_unchanged():
    # 32 x 4 sequences over 8 GPUs: 16 per rank, 4 per mini-batch (mini_batches 4), each at most 512 + 1024 tokens;
    # verl's micro-batch is cut from the rank's share (6144 tokens for the update, 24576 for the log-prob passes),
    # so a larger budget plans the same peak (plan.walk.rl_rank_sequences)
    small = {"prompt_len": 512, "response_len": 1024, "prompts_per_step": 32, "num_generations": 4,
             "mini_batches": 4, "response_len_mean": 700, "prompt_len_mean": 200}

    def peak(budget):
        return _peak(load_card_dict({**GRPO, "rollout": {**small, "max_tokens_per_micro_batch": budget}}))

    share = 16 * (512 + 1024)
    assert peak(share) == peak(share + 1) == peak(4 * share) == peak(100_000)
    assert peak(6144) < peak(share)  # the update's share reached, the log-prob passes' not yet
    plan = make_plan(load_card_dict({**GRPO, "rollout": {**small, "max_tokens_per_micro_batch": 100_000}}))
    text = " ".join(plan.assumptions)
    assert "at most 24576 tokens per GPU (dynamic batching, the rank's whole share under the budget of 100000)" in text
    assert "one packed row of 6144 tokens, the rank's whole share of a mini-batch (4 sequence(s) at the longest)" in text


# --- time and plan -----------------------------------------------------------------------------------------------

def test_a_card_with_the_budget_plans_and_says_so():
    p = make_plan(_card(max_tokens_per_micro_batch=8192))
    assert p.fits and p.step_seconds > 0
    text = " ".join(p.assumptions)
    assert "update: dynamic batching" in text and "log-prob passes: dynamic batching" in text


def test_smaller_budget_more_micro_batches_no_faster():
    fast = make_plan(_card(max_tokens_per_micro_batch=32768))
    slow = make_plan(_card(max_tokens_per_micro_batch=2048))
    t = {p.name: p.seconds for p in fast.time_phases}
    u = {p.name: p.seconds for p in slow.time_phases}
    assert u["actor_update"] > t["actor_update"] and u["old_logprob"] > t["old_logprob"]


def test_cards_without_the_field_are_unchanged_by_it():
    base = _card()
    assert base.rollout.max_tokens_per_micro_batch is None and base.rollout.logprob_max_tokens_per_micro_batch is None
    assert "dynamic batching" not in " ".join(make_plan(base).assumptions)


# --- verl export / import ----------------------------------------------------------------------------------------

def test_verl_export_writes_use_dynamic_bsz_and_reads_it_back():
    from trainfit.export import export, read_back
    from trainfit.methods.rl import logprob_token_budget

    card = _card(max_tokens_per_micro_batch=8192, logprob_max_tokens_per_micro_batch=16384)
    e = export(card, "verl")
    text = e.text
    assert "actor_rollout_ref.actor.use_dynamic_bsz=True" in text
    assert "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192" in text
    assert "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=16384" in text
    back = read_back(card, e)
    assert back.rollout.max_tokens_per_micro_batch == 8192
    assert back.rollout.logprob_max_tokens_per_micro_batch == 16384
    # the log-prob budget follows the update's by default (verl interpolates it)
    same = read_back(_card(max_tokens_per_micro_batch=8192), export(_card(max_tokens_per_micro_batch=8192), "verl"))
    assert same.rollout.max_tokens_per_micro_batch == 8192
    assert logprob_token_budget(same) == 8192
    # fixed log-prob micro-batches under a dynamic update: verl's switch written off, the count read back
    fixed = _card(max_tokens_per_micro_batch=8192, logprob_micro_batch_size=4)
    e = export(fixed, "verl")
    assert "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=False" in e.text
    back = read_back(fixed, e)
    assert logprob_token_budget(back) is None and back.rollout.logprob_micro_batch_size == 4


def test_verl_import_takes_verl_default_budget():
    # use_dynamic_bsz without ppo_max_token_len_per_gpu: verl's default 16384 (ppo_trainer.yaml l.38
    # @e0d035cd4a6a5c29835516a58d78710a28e73b18)
    from trainfit.export import export
    from trainfit.export.importers import import_text
    from trainfit.methods.rl import logprob_token_budget

    text = export(_card(max_tokens_per_micro_batch=8192), "verl").text
    text = re.sub(r"\S+max_token_len_per_gpu=8192", "", text)
    card = load_card_dict(import_text(text, "verl").card)
    assert card.rollout.max_tokens_per_micro_batch == 16384 and logprob_token_budget(card) == 16384


def test_diagnose_halves_the_budget_not_the_count():
    from trainfit.preflight.diagnose import _variants

    names = [n for n, _ in _variants(_card(max_tokens_per_micro_batch=8192))]
    assert "rollout.max_tokens_per_micro_batch 8192 -> 4096" in names
    assert not any(n.startswith(("batch.micro_batch_size", "rollout.logprob_micro_batch_size")) for n in names)
    # never below the longest sequence (2048), the card's floor
    floor = dict(_variants(_card(max_tokens_per_micro_batch=3000)))
    assert floor["rollout.max_tokens_per_micro_batch 3000 -> 2048"] == {"rollout.max_tokens_per_micro_batch": 2048}
    assert not any("max_tokens" in n for n, _ in _variants(_card(max_tokens_per_micro_batch=2048)))


def test_cli_plans_a_card_with_the_budget_and_refuses_a_short_one(tmp_path, capsys):
    import json

    import yaml

    from trainfit.cli.main import main

    card = tmp_path / "card.yaml"
    card.write_text(yaml.safe_dump({**GRPO, "rollout": {**GRPO["rollout"], "max_tokens_per_micro_batch": 8192}}))
    assert main(["plan", str(card), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["card"]["rollout"]["max_tokens_per_micro_batch"] == 8192
    card.write_text(yaml.safe_dump({**GRPO, "rollout": {**GRPO["rollout"], "max_tokens_per_micro_batch": 1000}}))
    assert main(["plan", str(card)]) != 0
    err = capsys.readouterr().err
    assert "rollout.max_tokens_per_micro_batch: 1000 tokens is less than one sequence" in err and "Traceback" not in err
