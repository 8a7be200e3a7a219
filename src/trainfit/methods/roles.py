"""Which roles a method has, where each lives, and what it holds on a GPU.

Roles (PPO/GRPO as in TRL, verl and OpenRLHF; RM/DPO as in TRL's trainers):

actor / policy
    trained; its step is the SFT step over ``prompt_len + response_len`` tokens.
critic (PPO)
    trained; the actor's architecture with a scalar value head (no vocabulary logits).
reference
    frozen; on the GPU (sharded like the actor), offloaded to the CPU, absent when the KL
    coefficient is 0 (TRL's GRPO default ``beta=0.0``), or the LoRA-disabled actor (PEFT's
    ``disable_adapter()``: no extra weights). DPO may precompute its log-probs. NeMo RL keeps it in
    pinned host memory and swaps it into the policy's parameters for its pass (``host_swap``).
reward model
    frozen scalar-head model, or a rule-based function with no GPU cost.
rollout engine
    vLLM (or ``generate`` on the training model); see ``trainfit.rollout.vllm``.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.spec.card import RunCard
from trainfit.spec.enums import Method, Placement, RefPlacement, RolloutEngine, Scope


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    trained: bool
    placement: str
    """gpu, cpu, none, lora_disabled, precomputed, host_swap, colocate, split, rule."""
    gpus: int
    model: str


def kl_coef(card: RunCard) -> float:
    """The KL coefficient: the card's, else each method's default (TRL GRPO beta=0.0; PPO 0.05)."""
    if card.roles.kl_coef is not None:
        return card.roles.kl_coef
    return {Method.PPO: 0.05, Method.DPO: 0.1}.get(card.method, 0.0)


REFERENCE_SWAP_PRESETS = ("nemo-rl",)
"""Frameworks whose reference is a host copy swapped into the policy's own parameters for its pass
(``RefPlacement.HOST_SWAP``, ``trainfit.compute.reference_swap``): NeMo RL's Megatron and DTensor workers alike
(NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470 and @7ea279abfbeb698b092856d0dab61e7cf39bc909
``use_reference_model``), with or without LoRA (the whole state dict is swapped)."""


def reference_placement(card: RunCard) -> RefPlacement:
    """Where the reference lives when the card leaves it open (``roles.reference`` as set always wins)."""
    if card.roles.reference is not None:
        return card.roles.reference
    if card.method in (Method.SFT, Method.RM):
        return RefPlacement.NONE
    if card.method is Method.GRPO and kl_coef(card) == 0.0:
        return RefPlacement.NONE
    if card.preset in REFERENCE_SWAP_PRESETS:
        return RefPlacement.HOST_SWAP
    if card.scope is not Scope.FULL:
        return RefPlacement.LORA_DISABLED
    return RefPlacement.GPU


def critic_model(card: RunCard, actor: str) -> str | None:
    if card.method is not Method.PPO:
        return None
    c = card.roles.critic
    return actor if c in (None, "same_as_actor") else c


def reward_model(card: RunCard) -> str | None:
    """A model id when the reward is a frozen model; None for rule-based or none."""
    if card.method not in (Method.PPO, Method.GRPO):
        return None
    r = card.roles.reward_model
    return None if r in ("rule", "none") else r


def group_sizes(card: RunCard) -> tuple[int, int]:
    """(training GPUs, rollout GPUs), whole run. Colocated: both are every GPU."""
    world = card.world_size
    if card.method not in (Method.PPO, Method.GRPO) or card.rollout.placement is Placement.COLOCATE:
        return world, world
    if card.rollout.nodes is not None:  # whole nodes for the engine (NeMo RL's multi-node split)
        rollout = card.rollout.nodes * card.hardware.gpus_per_node
    else:
        rollout = (card.rollout.gpus or 0) * card.hardware.nodes
    return world - rollout, rollout


def train_nodes(card: RunCard) -> tuple[int, int]:
    """(nodes, GPUs per node) of the training group: every node with ``gpus_per_node − rollout.gpus`` each,
    or, when the engine has whole nodes (``rollout.nodes``), the other nodes whole."""
    train, _ = group_sizes(card)
    nodes = card.hardware.nodes
    if (card.method in (Method.PPO, Method.GRPO) and card.rollout.placement is Placement.SPLIT
            and card.rollout.nodes is not None):
        return nodes - card.rollout.nodes, card.hardware.gpus_per_node
    return nodes, max(1, train // nodes)


def rollout_nodes(card: RunCard) -> tuple[int, int]:
    """(nodes, GPUs per node) the rollout engines run on: colocated, every node whole; split, every node's
    ``rollout.gpus`` or ``rollout.nodes`` whole nodes."""
    ro = card.rollout
    if ro.placement is Placement.SPLIT and ro.nodes is not None:
        return ro.nodes, card.hardware.gpus_per_node
    if ro.placement is Placement.SPLIT:
        return card.hardware.nodes, ro.gpus or 1
    return card.hardware.nodes, card.hardware.gpus_per_node


def roles_of(card: RunCard, actor_name: str) -> list[Role]:
    train, roll = group_sizes(card)
    out = [Role("actor", True, "gpu", train, actor_name)]
    critic = critic_model(card, actor_name)
    if critic is not None:
        out.append(Role("critic", True, "gpu", train, critic))
    ref = reference_placement(card)
    if card.method in (Method.DPO, Method.PPO, Method.GRPO):
        gpus = train if ref in (RefPlacement.GPU, RefPlacement.LORA_DISABLED, RefPlacement.HOST_SWAP) else 0
        out.append(Role("reference", False, ref.value, gpus, actor_name))
    if card.method in (Method.PPO, Method.GRPO):
        rm = reward_model(card)
        out.append(Role("reward_model", False, "gpu" if rm else card.roles.reward_model, train if rm else 0, rm or "-"))
        placement = card.rollout.placement.value
        engine = card.rollout.engine
        out.append(Role("rollout", False, f"{placement} ({engine.value})", roll if engine is RolloutEngine.VLLM else train, actor_name))
    return out
