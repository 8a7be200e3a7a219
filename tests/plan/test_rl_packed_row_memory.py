"""rollout.packed_row_tokens / packed_logprob_row_tokens bound the RL passes' memory: NeMo RL packs whole sequences
into bins of at most train_mb_tokens / logprob_mb_tokens tokens, one packed row per micro-batch (plan.walk.rl_packed_row,
methods.rl.rl_groups), so a micro-batch never holds micro_batch_size sequences at the longest."""

from __future__ import annotations

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _card(**rollout):
    return {"model": {"id": "meta-llama/Llama-3.1-8B"}, "method": "grpo", "preset": "nemo-rl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": 4},
            "rollout": {"placement": "colocate", "prompt_len": 132, "response_len": 3964, "prompts_per_step": 64,
                        "num_generations": 32, "mini_batches": 4, "response_len_mean": 795,
                        "logprob_micro_batch_size": 17, **rollout}}


def _phase(plan, name):
    return next(p for p in plan.phases if p.phase.value == name)


def test_packed_rows_bound_update_and_logprob_memory():
    wide = make_plan(load_card_dict(_card()))
    rows = make_plan(load_card_dict(_card(packed_row_tokens=4096, packed_logprob_row_tokens=16384)))
    # 4 sequences at the longest (16384 tokens) against one row of 4096: a quarter of the activations
    assert rows.peak.device < wide.peak.device
    assert _phase(rows, "actor_backward").components["activations"] < 0.3 * _phase(wide, "actor_backward").components["activations"]
    assert _phase(rows, "old_logprob").components["logprob_pass"] < _phase(wide, "old_logprob").components["logprob_pass"]
    assert any("plan.walk.rl_packed_row" in a for a in rows.assumptions)
    assert any("rollout.packed_logprob_row_tokens" in a for a in rows.assumptions)


def test_packed_rows_leave_time_alone_without_pipeline_parallel():
    wide = make_plan(load_card_dict(_card()))
    rows = make_plan(load_card_dict(_card(packed_row_tokens=4096, packed_logprob_row_tokens=16384)))
    assert rows.step_seconds == wide.step_seconds


def test_packed_sequences_false_ignores_the_capacity():
    a = make_plan(load_card_dict(_card(packed_sequences=False)))
    b = make_plan(load_card_dict(_card(packed_sequences=False, packed_row_tokens=4096)))
    assert a.peak.device == b.peak.device
