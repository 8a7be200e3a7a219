"""RL actor sequences under sequence / context parallel are padded as verl's ``preprocess_packed_seqs`` pads them
(``plan.walk.rl_sequence_padding``), not refused: an SFT card states its own divisible ``batch.seq_len``, an RL card
gets its length from the rollout."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.plan.walk import rl_sequence_padding
from trainfit.spec.card import load_card_dict


def _card(method: str = "grpo", **parallel):
    d = {"model": "Qwen/Qwen3-8B", "method": method, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
         "parallel": {"strategy": "zero1", "tensor_parallel": 4, "sequence_parallel": True,
                      "tensor_parallel_impl": "megatron", **parallel},
         "precision": {"weights": "bf16", "master_weights": "fp32", "optimizer_states": "fp32", "grads": "fp32"},
         "batch": {"micro_batch_size": 1, "grad_accum": 4, "seq_len": 8345}, "attention": "flash"}
    if method == "grpo":
        d["rollout"] = {"tensor_parallel": 4, "num_generations": 8, "prompts_per_step": 32, "prompt_len": 153,
                        "response_len": 8192, "gpu_memory_utilization": 0.5}
        d["roles"] = {"kl_coef": 0.0}
    return load_card_dict(d)


def test_padding_rule():
    assert rl_sequence_padding(_card())[0] == 8348  # 8345 up to a multiple of tp 4
    assert rl_sequence_padding(_card(context_parallel=2))[0] == 8352  # tp 4 x cp 2 x 2 = 16
    assert rl_sequence_padding(_card(sequence_parallel=False, tensor_parallel=1)) == (8345, None)


def test_rl_card_is_planned_with_the_padding_named():
    plan = make_plan(_card())
    assert any("padded to 8348" in str(a) for a in plan.assumptions)


def test_sft_card_still_states_a_divisible_length():
    with pytest.raises(CardError, match="batch.seq_len"):
        make_plan(_card("sft"))
