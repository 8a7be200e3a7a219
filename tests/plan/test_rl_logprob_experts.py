"""The RL log-prob passes route tokens through the experts as the training pass does (compute.moe_time)."""

from __future__ import annotations

import trainfit.plan.rl_passes as rl_passes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_logprob_passes_get_the_expert_parallel_routing_of_the_card(monkeypatch):
    seen = []
    real = rl_passes.forward_only_time

    def spy(*args, **kwargs):
        seen.append((kwargs["expert_parallel"], kwargs["expert_token_shards"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    card = load_card_dict({
        "model": "Qwen/Qwen3-30B-A3B", "method": "grpo", "preset": "verl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
        "parallel": {"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True, "expert_parallel": 4},
        "rollout": {"tensor_parallel": 2, "prompts_per_step": 16, "num_generations": 4, "prompt_len": 256,
                    "response_len": 512},
    })
    plan = make_plan(card)
    assert "old_logprob" in {p.name for p in plan.time.phases}
    # each rank routes its sequence-parallel shard (tp / etp = 2) over the 4 expert-parallel ranks
    assert seen and set(seen) == {(4, 2.0)}
