"""RL update and log-prob passes: a rollout batch splits into balanced micro-batches (plan.rl_batches).

verl's dynamic batching (``rearrange_micro_batches``) takes the micro-batch count from the token budget
and spreads the sequences evenly; a fixed micro-batch leaves the last one short. Either way the work is
the sequences there are, not whole micro-batches of padding sequences.
"""

from math import ceil

from hypothesis import given
from hypothesis import strategies as st

from trainfit.plan import make_plan
from trainfit.plan.rl_batches import balanced_micro_batches
from trainfit.spec.card import load_card_dict


@given(st.integers(1, 100_000), st.integers(1, 10_000))
def test_balanced_micro_batches_cover_the_sequences_without_a_padded_tail(sequences, mbs):
    micro, per = balanced_micro_batches(sequences, mbs)
    assert micro == ceil(sequences / mbs)  # the count the budget gives
    assert per <= mbs  # never above the budget
    assert micro * per >= sequences  # every sequence is computed
    assert micro * per - sequences < micro  # at most one rounding sequence per micro-batch


def _card(mbs: int) -> dict:
    return {"model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "scope": "full", "preset": "verl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp"}, "batch": {"micro_batch_size": mbs},
            "rollout": {"placement": "colocate", "prompts_per_step": 32, "num_generations": 8, "prompt_len": 256,
                        "response_len": 1024, "response_len_mean": 512, "mini_batches": 1}}


def _phase(plan, name: str) -> float:
    return next(p.seconds for p in plan.time.phases if p.name == name)


def test_actor_update_counts_the_sequences_not_a_padded_last_micro_batch():
    # 32 prompts x 8 = 256 sequences on 8 GPUs: 32 per GPU. A budget of 15 sequences is 3 micro-batches
    # of 11 (rounded up from 32/3), as a budget of 11 is: the same plan; padding the last micro-batch to
    # 15 would charge 45 sequences (+40 % compute).
    t15 = _phase(make_plan(load_card_dict(_card(15))), "actor_update")
    t11 = _phase(make_plan(load_card_dict(_card(11))), "actor_update")
    t32 = _phase(make_plan(load_card_dict(_card(32))), "actor_update")
    assert t15 == t11
    assert t32 < t11  # one micro-batch: fewer per-micro-batch gathers and launches


def test_logprob_pass_counts_the_sequences_not_a_padded_last_micro_batch():
    def logprob(lp_mbs: int) -> float:
        card = _card(4)
        card["rollout"]["logprob_micro_batch_size"] = lp_mbs
        return _phase(make_plan(load_card_dict(card)), "old_logprob")

    assert logprob(15) == logprob(11)
