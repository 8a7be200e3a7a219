"""Megatron-Core's gradient buffer in the RL phases (methods.rl.grad_buffer_held).

The buffer is made when DistributedDataParallel wraps the model and only zeroed each iteration
(plan.ranks.megatron_grad_buffer_held), so outside the update it is on the GPU unless the framework frees it:
verl frees it only under param_offload (offload_megatron_model_to_cpu; the log-prob pass and the sync reload the
parameters with load_grad=False), NeMo RL before every log-prob pass (prepare_for_lp_inference) and before a
colocated refit (offload_before_refit). A DTensor / FSDP trainer has no such buffer."""

from __future__ import annotations

import pytest

from trainfit.methods.presets import apply_preset
from trainfit.methods.rl import GRAD_BUFFER_PHASES, grad_buffer_held
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Offload

OUTSIDE_UPDATE = ("load", "rollout", "old_logprob", "critic_value", "weight_sync")


def _card(preset: str = "verl", *, offload: str | None = None, placement: str = "colocate", impl: str = "megatron",
          method: str = "ppo") -> dict:
    card = {"model": "Qwen/Qwen2.5-1.5B", "method": method, "preset": preset,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True,
                         "tensor_parallel_impl": impl, "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 2},
            "precision": {"grads": "fp32"},
            "rollout": {"placement": placement, "prompt_len": 512, "response_len": 512, "prompts_per_step": 64,
                        "num_generations": 4 if method == "grpo" else 1, "tensor_parallel": 2},
            "roles": {"kl_coef": 0.0}}
    if placement == "split":
        card["rollout"]["gpus"] = 4
    if offload is not None:
        card["rollout"]["trainer_offload"] = offload
    return card


def _plan(card: dict):
    return make_plan(load_card_dict(apply_preset(card, card["preset"])))


def _phases(plan) -> dict:
    return {p.phase.value: p.components for g in plan.groups if g.name != "rollout" for p in g.phases}


def _actor_buffer(plan) -> float:
    return _phases(plan)["actor_forward"]["gradients"]


def test_verl_without_offload_holds_both_buffers_in_every_phase():
    plan = _plan(_card())
    ph = _phases(plan)
    grads = _actor_buffer(plan)
    assert grads > 0
    for name in OUTSIDE_UPDATE:
        assert ph[name]["gradients"] == pytest.approx(grads), name
    # the critic's own fp32 buffer is held with its state; the actor's through the critic's update
    critic_grads = ph["critic_forward"]["gradients"]
    assert ph["rollout"]["critic_state"] == pytest.approx(
        ph["critic_forward"]["weights"] + ph["critic_forward"]["master_weights"]
        + ph["critic_forward"]["optimizer_states"] + critic_grads)
    actor_keep = sum(ph["actor_optimizer_step"].get(k, 0.0) for k in ("weights", "master_weights", "optimizer_states"))
    assert ph["critic_forward"]["actor_state"] == pytest.approx(actor_keep + grads)


def test_verl_optimizer_offload_keeps_the_buffer():
    ph = _phases(_plan(_card(offload="optimizer")))
    assert ph["rollout"]["gradients"] > 0 and ph["rollout"].get("optimizer_states", 0.0) == 0


def test_verl_param_offload_frees_it_outside_the_update():
    plan = _plan(_card(offload="params_and_optimizer"))
    ph = _phases(plan)
    assert _actor_buffer(plan) > 0
    for name in OUTSIDE_UPDATE:
        assert ph[name].get("gradients", 0.0) == 0.0, name


def test_nemo_rl_frees_it_before_the_log_probs_and_a_colocated_refit():
    colocated = _phases(_plan(_card("nemo-rl", method="grpo")))
    for name in ("load", "rollout", "old_logprob", "ref_logprob", "weight_sync"):
        if name in colocated:
            assert colocated[name].get("gradients", 0.0) == 0.0, name
    split = _plan(_card("nemo-rl", method="grpo", placement="split"))
    ph = _phases(split)
    assert ph["old_logprob"].get("gradients", 0.0) == 0.0
    assert ph["weight_sync"]["gradients"] == pytest.approx(_actor_buffer(split))


def test_dtensor_trainer_holds_no_buffer_outside_the_update():
    ph = _phases(_plan(_card(impl="dtensor")))
    for name in OUTSIDE_UPDATE:
        assert ph[name].get("gradients", 0.0) == 0.0, name


def test_rule_table():
    verl = load_card_dict(apply_preset(_card(), "verl"))
    assert all(grad_buffer_held(verl, Offload.NONE, phase=p) for p in GRAD_BUFFER_PHASES)
    assert all(grad_buffer_held(verl, Offload.OPTIMIZER, phase=p) for p in GRAD_BUFFER_PHASES)
    assert not any(grad_buffer_held(verl, Offload.PARAMS_AND_OPTIMIZER, phase=p) for p in GRAD_BUFFER_PHASES)
    with pytest.raises(ValueError):
        grad_buffer_held(verl, Offload.NONE, phase="update")


def test_verl_megatron_weights_are_bf16_with_an_fp32_master():
    """The verl preset's fp32 parameters are its FSDP actor's; the Megatron backend's Float16Module keeps bf16 ones
    and the distributed optimizer the fp32 main copy."""
    mega = load_card_dict(apply_preset(_card(), "verl"))
    assert mega.weights_dtype.value == "bf16"
    fsdp = _card()
    fsdp["parallel"] = {"strategy": "fsdp", "gradient_checkpointing": True}
    assert load_card_dict(apply_preset(fsdp, "verl")).weights_dtype.value == "fp32"
    stated = _card()
    stated["precision"]["weights"] = "fp32"
    assert load_card_dict(apply_preset(stated, "verl")).weights_dtype.value == "fp32"


def _sft(impl: str, *, tp: int = 1) -> dict:
    return {"model": "Qwen/Qwen2.5-1.5B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"strategy": "zero1", "tensor_parallel_impl": impl, "gradient_checkpointing": True,
                         **({"tensor_parallel": tp, "sequence_parallel": True} if tp > 1 else {})},
            "batch": {"micro_batch_size": 2, "seq_len": 1024},
            "precision": {"optimizer": "adamw", "grads": "fp32"}}


def test_no_model_parallel_megatron_card_holds_the_buffer_at_forward():
    """Without tensor / pipeline parallelism Megatron-Core's DDP still makes the buffer at wrap time: the forward of a
    one-micro-batch step holds every fp32 gradient, as the TP 2 rank does; a DTensor card holds none."""
    plan = make_plan(load_card_dict(_sft("megatron")))
    fwd = next(p for p in plan.phases if p.phase.value == "forward")
    assert fwd.components["gradients"] == pytest.approx(4 * plan.params_total, rel=0.01)
    dtensor = make_plan(load_card_dict(_sft("dtensor")))
    assert next(p for p in dtensor.phases if p.phase.value == "forward").components.get("gradients", 0.0) == 0.0


def test_no_model_parallel_rl_card_holds_the_buffer_outside_the_update():
    card = _card()
    card["parallel"] = {"strategy": "zero1", "tensor_parallel_impl": "megatron", "gradient_checkpointing": True}
    plan = _plan(card)
    ph = _phases(plan)
    assert ph["rollout"]["gradients"] == pytest.approx(_actor_buffer(plan)) and _actor_buffer(plan) > 0


def test_nemo_rl_phases_as_the_docstring_says():
    """Split: held at load, the weight sync and the other role's update; colocated: in no phase, load included."""
    split = load_card_dict(apply_preset(_card("nemo-rl", method="grpo", placement="split"), "nemo-rl"))
    held = {p for p in GRAD_BUFFER_PHASES if grad_buffer_held(split, Offload.NONE, phase=p)}
    assert held == {"load", "weight_sync", "other_update"}
    colocated = load_card_dict(apply_preset(_card("nemo-rl", method="grpo"), "nemo-rl"))
    assert not any(grad_buffer_held(colocated, Offload.NONE, phase=p) for p in GRAD_BUFFER_PHASES)
