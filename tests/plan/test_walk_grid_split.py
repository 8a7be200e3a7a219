"""A reward model (and a critic of its own) laid out on the actor's tensor- and expert-parallel grid must split on it
as the actor must (``plan.walk.check_grid_split``, the divisibility of ``memory.parallel.tensor_split_refusal`` /
``expert_split_refusal``): Megatron-Core refuses a 14-head model at tensor parallel 4 and 60 experts over 8
expert-parallel ranks. Before, both were planned, the first with fractional head shards."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

DENSE = "Qwen/Qwen3-8B"            # 32 heads, 8 KV heads
MOE = "Qwen/Qwen3-30B-A3B"         # 128 experts
SMALL = "Qwen/Qwen2.5-0.5B"        # 14 heads, 2 KV heads
MOE_60 = "Qwen/Qwen1.5-MoE-A2.7B"  # 60 experts


def _plan(model: str, roles: dict, **parallel):
    return make_plan(load_card_dict({
        "model": model, "method": "ppo", "scope": "full",
        "hardware": {"gpu": "h100", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero1", **parallel},
        "roles": {"reference": "gpu", "kl_coef": 0.001, **roles},
        "rollout": {"prompts_per_step": 16, "num_generations": 4, "prompt_len": 256, "response_len": 512},
    }))


@pytest.mark.parametrize("tp", [4, 8])
def test_reward_model_heads_must_split_over_the_actors_tensor_parallel(tp):
    with pytest.raises(CardError) as e:
        _plan(DENSE, {"reward_model": SMALL}, tensor_parallel=tp)
    msg = str(e.value)
    assert msg.startswith(f"roles.reward_model: the actor's parallel.tensor_parallel {tp} does not divide the 14"
                          f" attention heads of {SMALL}")
    assert msg.endswith("allowed: 1, 2, 7, 14") and "\n" not in msg


@pytest.mark.parametrize("ep", [8, 16])
def test_reward_model_experts_must_split_over_the_actors_expert_parallel(ep):
    with pytest.raises(CardError) as e:
        _plan(MOE, {"reward_model": MOE_60}, expert_parallel=ep)
    msg = str(e.value)
    assert msg.startswith(f"roles.reward_model: the actor's parallel.expert_parallel {ep} does not divide the 60"
                          f" experts of {MOE_60}")
    assert msg.endswith("allowed: 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60") and "\n" not in msg


def test_reward_model_that_splits_is_planned():
    assert _plan(DENSE, {"reward_model": SMALL}, tensor_parallel=2).groups
    assert _plan(MOE, {"reward_model": MOE_60}, expert_parallel=4).groups
    # a dense reward model on an expert-parallel grid holds no experts to split
    assert _plan(MOE, {"reward_model": "Qwen/Qwen3-0.6B"}, expert_parallel=8).groups


def test_critic_of_its_own_is_refused_by_its_role():
    with pytest.raises(CardError, match=r"^roles\.critic: the actor's parallel\.tensor_parallel 4 does not divide the"
                                        r" 14 attention heads of Qwen/Qwen2\.5-0\.5B; allowed: 1, 2, 7, 14$"):
        _plan(DENSE, {"critic": SMALL}, tensor_parallel=4)
