"""The gathered parameters under the no-grad passes of DPO and RL plans (``methods.rl.pass_gathered``,
``plan.terms.frozen_pass_gathered_bytes``, ``plan.walk.dpo_held_after_forward``).

Under ZeRO-3 the trained engine's FSDP unit fields are 0 (``plan.terms._deepspeed_terms`` keeps its gathered bytes
in ``gathered_forward`` / ``gathered_backward``), so a pass that read those fields gathered nothing. TRL runs the
DPO reference forward after the policy's (huggingface/trl trl/trainer/dpo_trainer.py l.1340-1382
@f2cd57710ae345ea6428ae95363267fcf38a3dc8), the reference being its own ZeRO-3 engine (``prepare_deepspeed``,
trl/models/utils.py l.236-273 at the same commit): the policy's kept parameters and the reference's own gathered
modules are both alive under the reference's pass."""

from __future__ import annotations

import pytest

import trainfit
from trainfit.memory.deepspeed import gathered_params
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

GIB = 2**30
DPO_Z3 = {"model": "Qwen/Qwen3-8B", "method": "dpo", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
          "parallel": {"strategy": "zero3"}}


def _dpo(**over):
    plan = make_plan(load_card_dict({**DPO_Z3, **over}))
    return {p.phase.value: p.components for p in plan.phases}


def test_dpo_zero3_reference_pass_keeps_the_policys_gathered_parameters():
    phases = _dpo()
    fwd, ref = phases["forward"], phases["ref_logprob"]
    # the policy's coordinator holds what it kept at the end of its forward (gathered_forward) under the reference
    assert fwd["fsdp_buffers"] > 1.0 * GIB
    assert ref["fsdp_buffers"] == fwd["fsdp_buffers"]


def test_dpo_zero3_reference_pass_gathers_its_own_modules():
    from trainfit.methods.rl import forward_only_transient
    from trainfit.methods.roles import resolve_role_model

    ref = _dpo()["ref_logprob"]
    spec = resolve_role_model("Qwen/Qwen3-8B", field="model")
    bare = forward_only_transient(spec, sequences=2, seq_len=2048, chunked=False, gathered_units=0.0,
                                  divides_by_temperature=False)
    # at the head its own lm_head (151936 x 4096 bf16, 1.16 GiB) is gathered beside the logits
    assert ref["logprob_pass"] - bare >= 151936 * 4096 * 2


def test_grpo_zero3_reward_pass_gathers_the_reward_models_modules():
    d = trainfit.plan({}, overrides={"method": "grpo", "hardware.gpu": "h100-sxm", "hardware.gpus_per_node": 8,
                                     "model": "Qwen/Qwen3-8B", "roles.reward_model": "Qwen/Qwen3-0.6B",
                                     "parallel.strategy": "zero3", "rollout.sleep_level": 1}).to_dict()
    reward = {p["name"]: p for p in d["phases"]}["reward"]["components"]
    # the reward model's embedding (151936 x 1024 bf16) is gathered at the start of its forward
    assert reward["reward_pass"] >= 151936 * 1024 * 2


def test_forward_only_trace_ends_at_the_head():
    layers = ((4_000_000, 1_000_000, 1_000_000, 4_000_000, 12_000_000, 12_000_000, 12_000_000),) * 4
    kw = dict(embedding=150_000_000, head=150_000_000, tied=False, prefetch_bucket_size=15_000_000,
              max_live_parameters=1_000_000_000, max_reuse_distance=1_000_000_000, recompute=False)
    train, fwd = gathered_params(layers, **kw), gathered_params(layers, forward_only=True, **kw)
    # in training the modules reused in backward within the reuse distance are kept; in a forward alone none recur
    assert fwd.forward_peak < train.forward_peak
    assert fwd.backward_peak == 0
    # no backward follows: the head is released, nothing is kept at the end; while it runs it is gathered
    assert fwd.at_loss == 0 < train.at_loss
    assert fwd.at_head >= 150_000_000
    assert fwd.at_head < fwd.forward_peak


def _reward_pass(actor: str, rm: str, strategy: str) -> float:
    d = trainfit.plan({}, overrides={"method": "grpo", "hardware.gpu": "h100-sxm", "hardware.gpus_per_node": 8,
                                     "model": actor, "roles.reward_model": rm, "parallel.strategy": strategy,
                                     "rollout.sleep_level": 1}).to_dict()
    return {p["name"]: p for p in d["phases"]}["reward"]["components"]["reward_pass"]


@pytest.mark.parametrize("strategy", ["fsdp", "zero3"])
def test_reward_pass_gathers_the_reward_models_own_units_whatever_the_actor(strategy):
    # the reward model's pass gathers its own layer and root units (embedding, score head), not the actor's
    small_rm = _reward_pass("Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B", strategy)
    assert small_rm == pytest.approx(_reward_pass("Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B", strategy), rel=1e-9)
    # the bigger reward model: its own root unit (151936 x 4096 bf16 embedding) and 8B layer units
    assert _reward_pass("Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", strategy) > small_rm + 151936 * 4096 * 2 / 8


def test_verl_fsdp_cpu_reference_runs_its_pass_on_the_gpu():
    # verl's FSDP reference under CPUOffload(offload_params=True) (volcengine/verl verl/workers/fsdp_workers.py
    # l.260-262 @e0d035cd4a6a5c29835516a58d78710a28e73b18): host-resident shards, a forward on the GPU
    d = trainfit.plan({}, overrides={"preset": "verl", "method": "grpo", "hardware.gpu": "h100-sxm",
                                     "hardware.gpus_per_node": 8, "model": "Qwen/Qwen3-8B",
                                     "roles.kl_coef": 0.001}).to_dict()
    phases = {p["name"]: p["components"] for p in d["phases"]}
    assert "ref_logprob" in phases
    ref, old = phases["ref_logprob"], phases["old_logprob"]
    assert ref.get("reference_weights", 0.0) == 0.0  # no resident copy
    # the same architecture on the same mesh as the policy: its gathered units and log-prob transient
    assert ref["logprob_pass"] == pytest.approx(old["logprob_pass"], rel=1e-9)
    assert ref["logprob_pass"] > 151936 * 4096 * 2 / 8
    assert ref["weights"] == old["weights"] > 0
