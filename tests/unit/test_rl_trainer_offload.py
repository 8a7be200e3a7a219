"""rollout.trainer_offload: verl's / NeMo RL's phase-by-phase offload of the trainer's state around a
colocated engine (methods/rl.py: the engine-start, rollout and weight-sync peaks; plan/rl_offload.py: the
state_offload phase's PCIe copies)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute.offload import PAGEABLE_FIRST_TOUCH_BYTES_PER_S, PAGEABLE_STAGING_BYTES_PER_S
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params
from trainfit.methods.rl import trainer_offload_of
from trainfit.plan import make_plan
from trainfit.plan.rl_offload import (
    NEMO_RL_MEGATRON_OPTIMIZER_BYTES,
    STATE_OFFLOAD_OPTIMIZER_BYTES,
    fsdp_offload_bytes,
    trainer_state_offload_phase,
)
from trainfit.spec.card import load_card_dict
from trainfit.plan.terms import trained_dtype_bytes
from trainfit.spec.enums import Offload

MODEL = "Qwen/Qwen2.5-7B"


def _card(trainer_offload: str | None = None, **rollout) -> dict:
    ro = {"tensor_parallel": 2, "gpu_memory_utilization": 0.5, "prompts_per_step": 32, "num_generations": 4,
          "prompt_len": 256, "response_len": 512, "sleep_level": 1} | rollout
    if trainer_offload is not None:
        ro["trainer_offload"] = trainer_offload
    return {"model": MODEL, "method": "grpo", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp"}, "batch": {"micro_batch_size": 1}, "rollout": ro}


def _phases(plan) -> dict:
    return {p.phase.value: p for g in plan.groups for p in g.phases}


@pytest.fixture(scope="module")
def plans():
    return {m: make_plan(load_card_dict(_card(m))) for m in ("none", "optimizer", "params_and_optimizer")}


def test_rollout_phase_of_an_offloading_card_excludes_the_optimizer_states(plans):
    kept, opt, both = (_phases(plans[m]) for m in ("none", "optimizer", "params_and_optimizer"))
    def c(phases, phase, key):
        return phases[phase].components.get(key, 0.0)

    states = c(kept, "rollout", "optimizer_states") + c(kept, "rollout", "master_weights")
    assert c(kept, "rollout", "optimizer_states") > 0
    for phase in ("load", "rollout", "weight_sync"):
        assert c(opt, phase, "optimizer_states") == 0.0 and c(opt, phase, "master_weights") == 0.0
        assert c(opt, phase, "weights") == c(kept, phase, "weights") > 0
    assert opt["rollout"].allocated == pytest.approx(kept["rollout"].allocated - states)
    # parameters too while generating; back on the GPU while they are sent to the engine
    assert c(both, "rollout", "weights") == 0.0 and c(both, "load", "weights") == 0.0
    assert c(both, "weight_sync", "weights") == c(kept, "weight_sync", "weights") > 0
    # the update has its state back: training phases are the same as without the offload
    for phase in ("actor_forward", "actor_backward", "actor_optimizer_step"):
        assert both[phase].components == kept[phase].components
    assert max(p.device for p in both.values()) < max(p.device for p in kept.values())
    assert "trainer_offloaded" in plans["optimizer"].host_ram and "trainer_offloaded" not in plans["none"].host_ram


def test_timing_includes_the_pcie_transfer(plans):
    def step(m):
        return {p.name: p for p in plans[m].time.phases}

    assert "state_offload" not in step("none")
    moved = step("optimizer")["state_offload"]
    card = load_card_dict(_card("optimizer"))
    spec = resolve_model(MODEL)
    r = default_rates(resolve_gpu("h100-sxm"))
    # FSDP (verl fsdp_utils offload_fsdp_optimizer): Adam's two moments of each rank's shard, in the card's
    # state dtype (this card: pure bf16, no master copy)
    state_bytes = trained_dtype_bytes(card)[3]
    one_way = 2 * state_bytes * total_params(spec) / 8  # 8 data-parallel ranks
    rate = min(r.pcie_bytes_per_s, r.host_memory_bytes_per_s / 8)
    assert moved.bound == "offload"
    assert moved.terms["to_host"] == pytest.approx(one_way / rate, rel=1e-6)
    assert moved.seconds == pytest.approx(2 * one_way / rate, rel=1e-6)
    assert trainer_state_offload_phase(card, spec, r, train_gpus=8).seconds == pytest.approx(moved.seconds)
    # parameters add the weights' round trips (update, sync, the old log-probs where the step has them)
    assert step("params_and_optimizer")["state_offload"].seconds > moved.seconds
    assert plans["optimizer"].step_seconds == pytest.approx(plans["none"].step_seconds + moved.seconds, rel=1e-6)


def test_defaults_by_preset_and_placement():
    nemo = load_card_dict(_card() | {"preset": "nemo-rl"})
    assert trainer_offload_of(nemo)[0] is Offload.PARAMS_AND_OPTIMIZER
    assert trainer_offload_of(load_card_dict(_card()))[0] is Offload.NONE
    assert trainer_offload_of(load_card_dict(_card("none") | {"preset": "nemo-rl"}))[0] is Offload.NONE
    split = load_card_dict(_card("params_and_optimizer", placement="split", gpus=4))
    assert trainer_offload_of(split)[0] is Offload.NONE  # the engine has its own GPUs: nothing moves


def test_bad_value_names_the_field():
    from trainfit.errors import CardError

    with pytest.raises(CardError, match="trainer_offload"):
        load_card_dict(_card("gpu"))


def test_fsdp_moves_its_local_shard_megatron_its_model_parallel_rank():
    """verl's FSDP worker moves each rank's fp32 flat-parameter shard and its Adam moments, no gradients
    (verl fsdp_utils ``offload_fsdp_model_to_cpu`` / ``offload_fsdp_optimizer``); Megatron moves the rank's
    bf16 weights and the distributed optimizer's 12 B per parameter; its gradient buffer is freed and re-zeroed,
    never copied (verl megatron_utils ``offload_megatron_model_to_cpu``: ``grad_data.storage().resize_(0)``)."""
    spec = resolve_model(MODEL)
    n = total_params(spec)
    # no preset plans TRL, whose vLLM importance-sampling correction runs an old-policy pass
    # (methods.roles.trl_old_logprob_pass); these cards turn it off, as a card for TRL before v0.23.0 does
    off = {"recompute_old_logprobs": False}
    fsdp = load_card_dict(_card("params_and_optimizer", **off) | {"precision": {"master_weights": "fp32"}})
    weights, optimizer, grads = fsdp_offload_bytes(fsdp, spec, shard_ranks=8)
    assert (weights, optimizer, grads) == pytest.approx((4 * n / 8, 8 * n / 8, 0.0))  # fp32 shard, fp32 moments
    pure = load_card_dict(_card("params_and_optimizer"))
    assert fsdp_offload_bytes(pure, spec, shard_ranks=8) == pytest.approx((2 * n / 8, 4 * n / 8, 0.0))
    r = default_rates(resolve_gpu("h100-sxm"))
    rate = min(r.pcie_bytes_per_s, r.host_memory_bytes_per_s / 8)
    pageable = min(rate, PAGEABLE_STAGING_BYTES_PER_S)
    moved = trainer_state_offload_phase(fsdp, spec, r, train_gpus=8)
    # the update and the sync each take the weights in and out (one iteration, no old-policy pass);
    # FSDP2 (the card's default) offloads them with model.cpu() into pageable memory, the optimizer states with
    # non_blocking=True into pinned memory; model.cpu() allocates its host tensors anew each time, so the copy out
    # runs at the first-touch rate, the copy back at the staging rate
    fresh = min(pageable, PAGEABLE_FIRST_TOUCH_BYTES_PER_S)
    assert moved.seconds == pytest.approx(2 * optimizer / rate + 2 * weights * (1 / fresh + 1 / pageable), rel=1e-6)
    verl = load_card_dict(_card("params_and_optimizer") | {"precision": {"master_weights": "fp32"}, "preset": "verl"})
    assert trainer_state_offload_phase(verl, spec, r, train_gpus=8).seconds == pytest.approx(
        2 * optimizer / rate + 3 * weights * (1 / fresh + 1 / pageable), rel=1e-6)  # verl always recomputes the old log-probs
    fsdp1 = load_card_dict(_card("params_and_optimizer", **off) | {"precision": {"master_weights": "fp32"},
                                                            "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp1"}})
    # FSDP1's flat_param_to(cpu, non_blocking=True) lands in pinned memory: every byte at the pinned rate
    assert trainer_state_offload_phase(fsdp1, spec, r, train_gpus=8).seconds == pytest.approx(
        2 * (optimizer + 2 * weights) / rate, rel=1e-6)
    megatron = load_card_dict(_card("params_and_optimizer", **off) | {"parallel": {"strategy": "zero1"},
                                                               "precision": {"master_weights": "fp32"}})
    # more bytes than the FSDP shard (all pinned, so not necessarily more seconds than FSDP2's pageable copies)
    assert STATE_OFFLOAD_OPTIMIZER_BYTES * n / 8 + 2 * 2 * n > optimizer + 2 * weights
    assert STATE_OFFLOAD_OPTIMIZER_BYTES * n / 8 > optimizer
    # bf16 weights twice (update, sync) and the optimizer shard, all pinned; no gradient bytes
    assert trainer_state_offload_phase(megatron, spec, r, train_gpus=8).seconds == pytest.approx(
        2 * (STATE_OFFLOAD_OPTIMIZER_BYTES * n / 8 + 2 * 2 * n) / rate, rel=1e-3)


def test_megatron_expert_states_shard_over_the_expert_data_parallel_ranks():
    """Megatron-Core's distributed optimizer shards the experts over world / (etp x ep x pp) ranks, not the
    dense dp: under expert parallel 8 on 8 GPUs each NeMo RL rank offloads its whole expert shard's optimizer
    state (10 B per parameter: fp32 moments and the int16 master remainder), its dense share divided by 8."""
    from trainfit.compute.offload import host_copy_bytes_per_s, pageable_copy_bytes_per_s
    from trainfit.memory.weights import weight_bytes
    from trainfit.plan.time import rank_spec
    from trainfit.spec.enums import ComputeDtype, Dtype
    from trainfit.spec.training import TrainableSpec

    spec = resolve_model("Qwen/Qwen3-30B-A3B")
    r = default_rates(resolve_gpu("h100-sxm"))
    base = {"model": "Qwen/Qwen3-30B-A3B", "method": "grpo", "preset": "nemo-rl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1}, "batch": {"micro_batch_size": 1},
            "rollout": {"tensor_parallel": 2, "gpu_memory_utilization": 0.5, "prompts_per_step": 32,
                        "num_generations": 4, "prompt_len": 256, "response_len": 512, "sleep_level": 1,
                        "trainer_offload": "params_and_optimizer"}}
    ep8 = load_card_dict(base | {"parallel": {"strategy": "zero1", "expert_parallel": 8}})
    assert ep8.preset == "nemo-rl"
    shard = rank_spec(spec, tp=1, pp=1, ep=8, etp=1)
    moe = shard.moe
    expert = sum(moe.num_experts * 3 * shard.hidden_size * moe.expert_intermediate_size
                 for i in range(shard.num_layers) if moe.is_moe_layer(i))
    n = total_params(shard)
    assert 0 < expert < n
    t = trainer_state_offload_phase(ep8, spec, r, train_gpus=8)
    kw = dict(pcie_bytes_per_s=r.pcie_bytes_per_s, host_memory_bytes_per_s=r.host_memory_bytes_per_s, gpus_per_node=8)
    optimizer = NEMO_RL_MEGATRON_OPTIMIZER_BYTES * ((n - expert) / 8 + expert / 1)
    weights = weight_bytes(shard, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base
    # NeMo RL: the bf16 parameter buffers pinned (Megatron-Core offload_to_cpu), the optimizer state pageable
    # (v.to("cpu")); the gradient buffers are freed, not copied
    # (v.to("cpu") into host tensors allocated anew: the first-touch rate out, the staging rate back)
    assert t.terms["to_host"] == pytest.approx(weights / host_copy_bytes_per_s(**kw)
                                               + optimizer / PAGEABLE_FIRST_TOUCH_BYTES_PER_S, rel=1e-3)
    assert t.terms["to_device"] == pytest.approx(weights / host_copy_bytes_per_s(**kw)
                                                 + optimizer / pageable_copy_bytes_per_s(**kw), rel=1e-3)
    # a dense-dp division (every state / 8) would move less than the experts' own states
    assert NEMO_RL_MEGATRON_OPTIMIZER_BYTES * n / 8 < NEMO_RL_MEGATRON_OPTIMIZER_BYTES * expert


def _preset_plan(preset: str | None, offload: str, **card):
    from trainfit.methods.presets import apply_preset

    d = _card(offload) | card
    return make_plan(load_card_dict(apply_preset(d, preset) if preset else d))


@pytest.mark.parametrize("preset", ["verl", "nemo-rl"])
def test_verl_and_nemo_rl_log_prob_passes_leave_the_optimizer_on_the_host(preset):
    """verl's compute_log_prob and NeMo RL's prepare_for_lp_inference bring back the parameters only; the optimizer
    comes back for the update (methods.rl.LOGPROB_OPTIMIZER_AWAY_PRESETS)."""
    for offload in ("optimizer", "params_and_optimizer"):
        ph = _phases(_preset_plan(preset, offload))
        old = ph["old_logprob"].components
        assert old.get("optimizer_states", 0.0) == 0.0 and old.get("master_weights", 0.0) == 0.0
        assert old["weights"] > 0  # the pass runs on the actor's weights
        assert ph["actor_optimizer_step"].components["optimizer_states"] > 0


def test_unread_frameworks_keep_the_optimizer_through_the_log_prob_passes():
    """miles' wake_up() resumes the whole training state before its log-prob passes; a card without a preset keeps
    the state counted."""
    for preset in ("miles", None):
        plan = _preset_plan(preset, "params_and_optimizer", rollout=_card()["rollout"]
                            | {"trainer_offload": "params_and_optimizer", "recompute_old_logprobs": True})
        old = _phases(plan)["old_logprob"].components
        assert old["optimizer_states"] > 0 and old["weights"] > 0


def test_verl_standalone_reference_pass_runs_without_the_offloaded_actor():
    """verl's compute_ref_log_prob (standalone reference) never loads the actor: under param_offload its weights
    stay in host RAM too; the old-policy pass has them back."""
    ph = _phases(_preset_plan("verl", "params_and_optimizer", method="ppo",
                              roles={"reference": "gpu"}))
    ref, old = ph["ref_logprob"].components, ph["old_logprob"].components
    assert ref.get("weights", 0.0) == 0.0 and ref.get("optimizer_states", 0.0) == 0.0
    assert ref["reference_weights"] > 0 and old["weights"] > 0
    assert ph["critic_value"].components.get("weights", 0.0) == 0.0
