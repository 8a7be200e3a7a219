"""A split placement that gives the rollout engine whole nodes (``rollout.nodes``, NeMo RL's multi-node
split): the card's rules, the group sizes, and a training group whose expert all-to-all stays in a node."""

from __future__ import annotations

import pytest

from trainfit.methods.roles import group_sizes, rollout_nodes, train_nodes
from trainfit.spec.card import load_card_dict


def _card(**rollout) -> dict:
    return {"model": "Qwen/Qwen3-30B-A3B", "method": "grpo",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 4},
            "parallel": {"expert_parallel": 8},
            "rollout": {"placement": "split", "prompt_len": 128, "response_len": 1024, "response_len_mean": 400,
                        "prompts_per_step": 16, "num_generations": 8, "tensor_parallel": 2, "gpu_memory_utilization": 0.8,
                        **rollout}}


def test_whole_nodes_split_the_groups_by_node():
    card = load_card_dict(_card(nodes=1))
    assert group_sizes(card) == (24, 8)
    assert train_nodes(card) == (3, 8)
    assert rollout_nodes(card) == (1, 8)
    per_gpu = load_card_dict(_card(gpus=2))
    assert group_sizes(per_gpu) == (24, 8)
    assert train_nodes(per_gpu) == (4, 6)
    assert rollout_nodes(per_gpu) == (4, 2)


@pytest.mark.parametrize(("rollout", "needle"), [
    ({"nodes": 4}, "rollout.nodes: 4 whole nodes"),
    ({"nodes": 1, "gpus": 2}, "not both"),
    ({}, "rollout.gpus: a split placement needs"),
    ({"nodes": 1, "tensor_parallel": 16}, "a multiple of 8 dividing 8"),
])
def test_card_refuses(rollout, needle):
    with pytest.raises(Exception) as exc:
        load_card_dict(_card(**rollout))
    assert needle in str(exc.value)


def test_whole_nodes_keep_the_expert_all_to_all_on_nvlink():
    """The same 24 training GPUs with EP 8: three whole nodes run each expert group inside a node; six GPUs in
    each of four nodes spread it over the NIC, so their update is slower."""
    from trainfit.plan import make_plan

    whole = make_plan(load_card_dict(_card(nodes=1)))
    spread = make_plan(load_card_dict(_card(gpus=2)))

    def phase(plan, name):
        return next(p.seconds for p in plan.time.phases if p.name == name)

    assert phase(whole, "actor_update") < phase(spread, "actor_update")
    assert phase(whole, "generation") == pytest.approx(phase(spread, "generation"), rel=0.05)



def test_actor_shards_over_the_training_nodes_only():
    """The training group is its own nodes: 16 GPUs on 2 nodes whether the engine takes 1 of 3 nodes or 2 of 4,
    so its FSDP layout (and peak) is the same; the actor was once laid out as train_gpus // all nodes per node."""
    from trainfit.plan import make_plan

    def train_peak(nodes: int, rollout_nodes: int) -> int:
        card = {"model": "Qwen/Qwen3-8B", "method": "grpo",
                "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": nodes},
                "parallel": {"strategy": "fsdp"},
                "rollout": {"placement": "split", "nodes": rollout_nodes, "prompt_len": 128, "response_len": 1024,
                            "response_len_mean": 400, "prompts_per_step": 16, "num_generations": 8,
                            "tensor_parallel": 1, "gpu_memory_utilization": 0.8}}
        train = next(g for g in make_plan(load_card_dict(card)).to_dict()["groups"] if g["name"] == "train")
        assert train["gpus"] == 16
        return train["peak_device_bytes"]

    assert train_peak(3, 1) == train_peak(4, 2)
