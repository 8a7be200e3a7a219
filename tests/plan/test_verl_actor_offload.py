"""verl's FSDP actor offload (``parallel.offload`` on a verl FSDP card): ``update_actor`` loads the parameter shard
and the optimizer state before ``update_policy`` and offloads them after it (volcengine/verl
verl/workers/fsdp_workers.py l.893-898, l.928-932 @b178a3cd56f58b2d502255daba591e92833930a7), so AdamW steps on the
GPU (``plan.time.step_offload_of``) and the state's trips are priced once, by ``plan.rl_offload``
(``verl_fsdp_actor_offload``: a split placement, or a colocated card without ``rollout.trainer_offload``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.compute.rates import default_rates
from trainfit.methods.roles import old_logprob_pass
from trainfit.plan import make_plan
from trainfit.plan.resolve import gpu_of
from trainfit.plan.rl_offload import (
    fsdp_offload_bytes,
    host_copy_rates,
    trainer_state_offload_phase,
    verl_fsdp_actor_offload,
)
from trainfit.plan.time import step_offload_of
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Offload

MODEL = "Qwen/Qwen3-8B"


def _card(offload: str, *, preset: str = "verl", strategy: str = "fsdp", placement: str = "split",
          trainer_offload: str | None = None):
    par = {"strategy": strategy, "offload": offload, "gradient_checkpointing": True}
    if strategy == "fsdp":
        par["fsdp_version"] = "fsdp2"
    else:
        par["tensor_parallel"] = 2
    rollout = {"placement": placement, "tensor_parallel": 8, "prompts_per_step": 64, "num_generations": 8,
               "prompt_len": 512, "response_len": 2048}
    rollout |= {"nodes": 1} if placement == "split" else {"gpu_memory_utilization": 0.5}
    if trainer_offload is not None:
        rollout["trainer_offload"] = trainer_offload
    return load_card_dict({
        "model": MODEL, "method": "grpo", "scope": "full", "preset": preset,
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 3 if placement == "split" else 2},
        "parallel": par, "batch": {"micro_batch_size": 1}, "rollout": rollout,
    })


def _update_terms(plan) -> dict[str, float]:
    return next(p.terms for p in plan.time.phases if p.name == "actor_update")


def test_verls_fsdp_actor_offload_steps_adamw_on_the_gpu_with_no_host_step():
    off, none = make_plan(_card("params_and_optimizer")), make_plan(_card("none"))
    terms = _update_terms(off)
    assert "offload" not in terms and terms["optimizer_step"] > 0
    assert terms == pytest.approx(_update_terms(none), rel=1e-12)
    assert not any(n.startswith("offload: ") for n in off.time.assumptions)
    assert step_offload_of(_card("optimizer")) is Offload.NONE


def test_the_split_actor_makes_its_state_trips_once():
    card = _card("params_and_optimizer")
    r = default_rates(gpu_of(card))
    spec = resolve_model(MODEL)
    assert verl_fsdp_actor_offload(card) is Offload.PARAMS_AND_OPTIMIZER
    weights, optimizer, _ = fsdp_offload_bytes(card, spec, shard_ranks=16)
    # the update's and the old-policy log-probs' weights trips; the sync's is the export's staging (plan.rl_sync)
    w = weights * (2 if old_logprob_pass(card) else 1)
    pinned, pageable, _ = host_copy_rates(card, r, gpu_of(card))
    t = trainer_state_offload_phase(card, spec, r, train_gpus=16)
    assert t.terms["to_device"] == pytest.approx(optimizer / pinned + w / pageable, rel=1e-9)
    opt_only = trainer_state_offload_phase(_card("optimizer"), spec, r, train_gpus=16)
    assert opt_only.terms["to_device"] == pytest.approx(optimizer / pinned, rel=1e-9)
    assert trainer_state_offload_phase(_card("none"), spec, r, train_gpus=16) is None


def test_other_offload_cards_keep_their_host_step():
    # torch FSDP's own CPU offload (another preset) and verl's Megatron (Megatron-Core's optimizer_cpu_offload)
    assert "offload" in _update_terms(make_plan(_card("params_and_optimizer", preset="skyrl")))
    assert step_offload_of(_card("params_and_optimizer", strategy="zero1")) is Offload.PARAMS_AND_OPTIMIZER
    assert verl_fsdp_actor_offload(_card("params_and_optimizer", preset="skyrl")) is Offload.NONE
    # colocated with rollout.trainer_offload set, that field prices the trips (trainer_state_offload_phase)
    card = _card("params_and_optimizer", placement="colocate", trainer_offload="params_and_optimizer")
    assert verl_fsdp_actor_offload(card) is Offload.NONE


def test_a_colocated_actor_without_trainer_offload_makes_the_same_trips_as_with_it():
    # parallel.offload alone on a colocated verl FSDP card: the sync's weights trip too, once, as trainer_offload
    spec = resolve_model(MODEL)
    alone = _card("params_and_optimizer", placement="colocate")
    both = _card("params_and_optimizer", placement="colocate", trainer_offload="params_and_optimizer")
    assert verl_fsdp_actor_offload(alone) is Offload.PARAMS_AND_OPTIMIZER
    r = default_rates(gpu_of(alone))
    a = trainer_state_offload_phase(alone, spec, r, train_gpus=16)
    b = trainer_state_offload_phase(both, spec, r, train_gpus=16)
    assert a.seconds == pytest.approx(b.seconds, rel=1e-12) and a.seconds > 0


def _ppo(offload: str, *, placement: str = "colocate"):
    card = _card(offload, placement=placement).model_dump(mode="json", exclude_unset=True)
    card["method"] = "ppo"
    card["rollout"]["num_generations"] = 1
    return load_card_dict(card)


def test_a_ppo_critic_on_verls_fsdp_workers_makes_its_own_state_trips():
    # CriticWorker.compute_values loads / offloads the shard, update_critic the shard and the optimizer state
    # (volcengine/verl verl/workers/fsdp_workers.py l.1540-1586 @b178a3cd56f58b2d502255daba591e92833930a7)
    from trainfit.methods.rl import critic_spec_of
    from trainfit.plan.rl_offload import verl_fsdp_critic_offload_bytes

    spec = resolve_model(MODEL)
    card = _ppo("params_and_optimizer")
    weights, optimizer, _ = fsdp_offload_bytes(card, critic_spec_of(card, spec), shard_ranks=16)
    pinned, pageable = verl_fsdp_critic_offload_bytes(card, spec, shard_ranks=16)
    assert pinned == pytest.approx(optimizer, rel=1e-12) and pageable == pytest.approx(2 * weights, rel=1e-12)
    opt_only = verl_fsdp_critic_offload_bytes(_ppo("optimizer"), spec, shard_ranks=16)
    assert opt_only == pytest.approx((optimizer, 0.0), rel=1e-12)
    assert verl_fsdp_critic_offload_bytes(_card("params_and_optimizer"), spec, shard_ranks=16) == (0.0, 0.0)  # grpo
    # the PPO step's state_offload phase carries the critic's trips beside the actor's
    r = default_rates(gpu_of(card))
    ppo = trainer_state_offload_phase(card, spec, r, train_gpus=16)
    grpo = trainer_state_offload_phase(_card("params_and_optimizer", placement="colocate"), spec, r, train_gpus=16)
    assert ppo.seconds > grpo.seconds > 0
    # and a PPO card with no actor trips (colocated, rollout.trainer_offload none) still prices the critic's
    none_actor = _ppo("params_and_optimizer").model_dump(mode="json", exclude_unset=True)
    none_actor["rollout"]["trainer_offload"] = "none"
    t = trainer_state_offload_phase(load_card_dict(none_actor), spec, r, train_gpus=16)
    assert t is not None and t.seconds > 0


def test_the_fully_async_split_path_keeps_the_syncs_weights_trip():
    # verl's checkpoint engine stages the shard for the export (plan.rl_sync); the fully-async trainer's own paths
    # (rollout.weight_sync per_parameter / bucketed) do not, so the state-offload phase keeps the sync's trip
    from trainfit.plan.rl_offload import verl_export_stages_shard

    spec = resolve_model(MODEL)
    default = _card("params_and_optimizer")
    r = default_rates(gpu_of(default))
    base = trainer_state_offload_phase(default, spec, r, train_gpus=16)
    assert verl_export_stages_shard(default)
    for sync in ("per_parameter", "bucketed"):
        d = default.model_dump(mode="json", exclude_unset=True)
        d["rollout"]["weight_sync"] = sync
        card = load_card_dict(d)
        assert not verl_export_stages_shard(card)
        t = trainer_state_offload_phase(card, spec, r, train_gpus=16)
        assert t.seconds > base.seconds
        assert _staging(card) == 0.0
    assert _staging(default) > 0


def _staging(card) -> float:
    return next(p for p in make_plan(card).time.phases if p.name == "weight_sync").terms.get("staging", 0.0)
