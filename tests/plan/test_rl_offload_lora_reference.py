"""verl's FSDP worker runs a LoRA card's reference pass as the actor's own ``compute_log_prob`` with the adapters
disabled (verl-project/verl verl/workers/fsdp_workers.py l.723-727 @7dc3ee7476c9af1042636f44bca9e412d1de1a6d:
"if _is_lora, actor without lora applied is the ref"), and ``compute_log_prob`` loads the parameter shard before its
forward and offloads it after (l.683-684, l.715-716). Under ``param_offload`` the step therefore moves the shard four
times (sync, old-policy pass, reference pass, update), not three (``plan.rl_offload.verl_lora_reference_trip``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute.rates import default_rates
from trainfit.plan.rl_offload import fsdp_offload_bytes, trainer_state_offload_phase, verl_lora_reference_trip
from trainfit.spec.card import load_card_dict

MODEL = "Qwen/Qwen2.5-7B"
H100 = default_rates(resolve_gpu("h100-sxm"))


def _card(*, kl: float, scope: str = "lora", preset: str = "verl", reference: str | None = "lora_disabled") -> object:
    """The verl GRPO-LoRA baseline's shape (eric-haibin-lin/verl-data logs): colocated vLLM, FSDP1 actor with
    param_offload and optimizer_offload, no rollout.trainer_offload (the plan reads parallel.offload then)."""
    d = {"model": MODEL, "method": "grpo", "preset": preset, "scope": scope,
         "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
         "parallel": {"offload": "params_and_optimizer", "strategy": "fsdp", "fsdp_version": "fsdp1"},
         "batch": {"micro_batch_size": 8},
         "rollout": {"placement": "colocate", "tensor_parallel": 2, "prompt_len": 118, "response_len": 512,
                     "prompts_per_step": 64, "num_generations": 5, "gpu_memory_utilization": 0.2},
         "roles": {"kl_coef": kl}}
    if scope == "lora":
        d["lora"] = {"rank": 32, "alpha": 32, "targets": "all-linear"}
    if reference is not None:
        d["roles"]["reference"] = reference
    return load_card_dict(d)


def test_a_verl_lora_reference_pass_adds_one_weights_round_trip() -> None:
    spec = resolve_model(MODEL)
    with_ref, without = _card(kl=0.001), _card(kl=0.0)
    assert verl_lora_reference_trip(with_ref) and not verl_lora_reference_trip(without)
    weights, optimizer, _ = fsdp_offload_bytes(with_ref, spec, shard_ranks=8)
    t4 = trainer_state_offload_phase(with_ref, spec, H100, train_gpus=8)
    t3 = trainer_state_offload_phase(without, spec, H100, train_gpus=8)
    # pinned both ways (verl's FSDP1 weights and optimizer states): one trip of the shard each way more
    assert t4.seconds / t3.seconds == pytest.approx((optimizer + 4 * weights) / (optimizer + 3 * weights), rel=1e-9)
    assert t4.seconds > t3.seconds


@pytest.mark.parametrize("kwargs", [{"scope": "full", "reference": None}, {"preset": "openrlhf"}])
def test_no_extra_trip_for_a_full_weight_reference_or_another_framework(kwargs: dict) -> None:
    """A full-weight verl reference is its own module under FSDP's CPU offload (roles.reference_placement); the rule
    is verl's FSDP worker's, not another framework's."""
    assert not verl_lora_reference_trip(_card(kl=0.001, **kwargs))
