"""verl's FSDP offload in the memory walk (``plan.walk.verl_fsdp_memory_card``): the update and the log-prob pass run
with the actor's shard (and, for the update, its optimizer state) back on the GPU (volcengine/verl
verl/workers/fsdp_workers.py l.893-898, l.928-932, l.993-994 @b178a3cd56f58b2d502255daba591e92833930a7); only around
a colocated engine does the state leave the GPU."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.plan.walk import verl_fsdp_memory_card
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Offload, Phase


def _card(offload: str, *, placement: str = "colocate", preset: str = "verl"):
    rollout = {"placement": placement, "tensor_parallel": 2, "prompts_per_step": 64, "num_generations": 8,
               "prompt_len": 1024, "response_len": 1024}
    if placement == "split":
        rollout["gpus"] = 4
    return load_card_dict({"model": "Qwen/Qwen3-8B", "method": "grpo", "preset": preset,
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
                           "parallel": {"strategy": "fsdp", "offload": offload, "gradient_checkpointing": True},
                           "rollout": rollout})


def _peaks(card) -> dict[Phase, float]:
    plan = make_plan(card)
    group = next(g for g in plan.groups if g.name in ("all", "train"))
    return {p.phase: p.device for p in group.phases}


@pytest.mark.parametrize("offload", ["params_and_optimizer", "optimizer"])
def test_the_update_holds_the_state_as_without_offload(offload):
    on, off = _peaks(_card(offload)), _peaks(_card("none"))
    assert on[Phase.ACTOR_OPTIMIZER_STEP] == pytest.approx(off[Phase.ACTOR_OPTIMIZER_STEP], rel=1e-9)
    assert on[Phase.ROLLOUT] < off[Phase.ROLLOUT]  # colocated: the state is away while the engine generates


def test_the_log_prob_pass_holds_the_shard_not_the_optimizer():
    full, none = _peaks(_card("params_and_optimizer")), _peaks(_card("none"))
    opt = _peaks(_card("optimizer"))
    # the shard is back for compute_log_prob, the optimizer state is not: the same pass under both offloads
    assert full[Phase.OLD_LOGPROB] == pytest.approx(opt[Phase.OLD_LOGPROB], rel=1e-9)
    assert full[Phase.OLD_LOGPROB] < none[Phase.OLD_LOGPROB]


def test_a_split_card_walks_without_the_offload_and_other_presets_keep_it():
    split = _card("params_and_optimizer", placement="split")
    assert verl_fsdp_memory_card(split).parallel.offload is Offload.NONE
    assert verl_fsdp_memory_card(split).rollout.trainer_offload is None
    colo = verl_fsdp_memory_card(_card("params_and_optimizer"))
    assert colo.parallel.offload is Offload.NONE and colo.rollout.trainer_offload is Offload.PARAMS_AND_OPTIMIZER
    other = _card("params_and_optimizer", preset="skyrl")
    assert verl_fsdp_memory_card(other) is other
    assert _peaks(split)[Phase.ACTOR_OPTIMIZER_STEP] == pytest.approx(
        _peaks(_card("none", placement="split"))[Phase.ACTOR_OPTIMIZER_STEP], rel=1e-9)


def test_the_split_actors_offloaded_state_is_counted_in_host_ram():
    split = make_plan(_card("params_and_optimizer", placement="split")).host_ram
    none = make_plan(_card("none", placement="split")).host_ram
    assert split.get("trainer_offloaded", 0.0) > 0 and "trainer_offloaded" not in none
    assert "gradients" not in split  # verl frees them after the update; nothing moves them to the host
