"""PPO/GRPO under model parallel: the frozen copies laid out like the actor (``plan.stages.frozen_share``) hold the
rank's resident share, dense and routed-expert parameters each by their own divisor. Before, the dense
data-parallel divisor was applied to the experts too: Qwen3-30B-A3B's reference under FSDP with EP 4 on 8 GPUs was
planned at 2.05 GiB per rank beside the policy's 7.11 GiB shard."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.memory.params import param_breakdown, routed_expert_params
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

MOE = "Qwen/Qwen3-30B-A3B"
BF16 = 2


def _plan(*, model: str = MOE, nodes: int = 1, method: str = "grpo", roles: dict | None = None,
          preset: str | None = None, **parallel):
    return make_plan(load_card_dict({
        "model": model, "method": method, "scope": "full", **({"preset": preset} if preset else {}),
        "hardware": {"gpu": "h100", "gpus_per_node": 8, "nodes": nodes},
        "parallel": parallel, "roles": {"reference": "gpu", "kl_coef": 0.001, **(roles or {})},
        "rollout": {"prompts_per_step": 16, "num_generations": 4, "prompt_len": 256, "response_len": 512},
    }))


def _components(plan) -> dict[str, dict[str, float]]:
    (group,) = plan.groups
    return {p.phase.value: p.components for p in group.phases}


@pytest.mark.parametrize("ep, nodes", [(4, 1), (8, 2)])
def test_fsdp_expert_parallel_reference_is_the_actor_shard(ep, nodes):
    """FSDP over all the ranks, experts split ``ep`` ways and sharded over the ``world / ep`` expert-data ranks:
    each rank keeps 1/world of every parameter, the reference as the policy."""
    comps = _components(_plan(nodes=nodes, expert_parallel=ep))
    world = 8 * nodes
    total = param_breakdown(resolve_model(MOE)).total
    for name, c in comps.items():
        assert c["reference_weights"] == pytest.approx(c["weights"], rel=1e-12), name
        assert c["reference_weights"] == pytest.approx(BF16 * total / world, rel=1e-12), name


def test_megatron_expert_parallel_reference_keeps_the_dense_part_whole():
    """Megatron's distributed optimizer shards no weights: the reference holds the dense part whole and its
    ``1 / ep`` of the routed experts (unchanged by the exact share; pinned)."""
    comps = _components(_plan(strategy="zero1", expert_parallel=4))
    spec = resolve_model(MOE)
    experts = routed_expert_params(spec)
    dense = param_breakdown(spec).total - experts
    assert comps["load"]["reference_weights"] == pytest.approx(BF16 * (dense + experts / 4), rel=1e-12)
    assert comps["load"]["reference_weights"] == pytest.approx(comps["load"]["weights"], rel=1e-12)


def test_dense_tensor_parallel_reference_is_unchanged():
    comps = _components(_plan(model="Qwen/Qwen3-8B", tensor_parallel=4))
    assert comps["load"]["reference_weights"] == pytest.approx(comps["load"]["weights"], rel=1e-12)
    assert comps["load"]["reference_weights"] == pytest.approx(2047915008.0, rel=1e-12)  # 1.907 GiB, as before


def test_reward_model_is_its_own_shard_on_the_actor_grid():
    """A dense reward model on the MoE actor's FSDP + EP grid: no experts to split, each rank keeps 1/8 of it (not
    the actor's expert-parallel fraction of it)."""
    comps = _components(_plan(method="ppo", expert_parallel=4, roles={"reward_model": "Qwen/Qwen3-0.6B"}))
    from dataclasses import replace

    rm_total = param_breakdown(replace(resolve_model("Qwen/Qwen3-0.6B"), head_outputs=1)).total
    assert comps["load"]["reward_model_weights"] == pytest.approx(BF16 * rm_total / 8, rel=1e-12)


def test_host_swap_reference_is_the_actor_shard_per_rank():
    """NeMo RL's reference state dict, swapped into the policy's own parameters: each rank's pinned host copy is its
    policy shard (FSDP + EP 4 on 8 GPUs: 1/8 of the model per rank, the whole model per node)."""
    plan = _plan(preset="nemo-rl", roles={"reference": "host_swap"}, strategy="fsdp", expert_parallel=4)
    shard = _components(plan)["actor_forward"]["weights"]
    assert plan.host_ram["reference_weights"] == pytest.approx(8 * shard, rel=1e-12)
    assert plan.host_ram["reference_weights"] == pytest.approx(BF16 * param_breakdown(resolve_model(MOE)).total,
                                                               rel=1e-12)


def test_offloaded_reference_brought_in_for_its_pass_is_the_actor_shard():
    """SkyRL's host-offloaded reference, brought to the GPU for its own pass, as the actor's layout shards it."""
    comps = _components(_plan(preset="skyrl", roles={"reference": "cpu"}, strategy="fsdp", expert_parallel=4))
    assert comps["ref_logprob"]["reference_weights"] == pytest.approx(comps["actor_forward"]["weights"], rel=1e-12)


def test_reward_model_of_another_depth_splits_its_own_layers_over_the_pipeline():
    """The card's per-stage split counts the actor's layers (36 for Qwen3-8B); a 28-layer reward model on that grid
    splits its own layers evenly: the actor's worst (last) stage rank holds layers 14-27, the final norm and the
    tied embedding's copy as the head. (It raised IndexError when the actor's split was applied to it.)"""
    from dataclasses import replace

    plan = _plan(model="Qwen/Qwen3-8B", method="ppo", roles={"reward_model": "Qwen/Qwen3-0.6B"}, strategy="zero1",
                 pipeline_parallel=2, pipeline_layout=[10, 26])
    rm = replace(resolve_model("Qwen/Qwen3-0.6B"), head_outputs=1)
    pb = param_breakdown(rm)
    last_stage = sum(pb.per_layer[14:28]) + (pb.lm_head or pb.embedding) + rm.hidden_size
    assert _components(plan)["load"]["reward_model_weights"] == pytest.approx(BF16 * last_stage, rel=1e-12)
