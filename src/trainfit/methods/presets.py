"""Framework presets: the documented defaults of TRL, verl, OpenRLHF and NeMo RL, as card values.

A preset fills what the card leaves open; anything the card sets wins. Each preset names its
source and maps trainfit's card keys to the framework's own knob names, so suggestions can be
written in the user's vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainfit.errors import CardError
from trainfit.spec.dotted import merge_under


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    source: str
    card: dict[str, Any]
    knobs: dict[str, str] = field(default_factory=dict)
    """trainfit card key -> the framework's knob name, only where the framework takes the card's value as
    written (a suggestion prints ``knob=value``); keys whose value the framework spells another way (offload,
    reference placement, sleep level, scope) keep the card key. tests/export/test_presets_knobs.py checks each
    knob against the exporter's output."""


PRESETS: dict[str, Preset] = {
    "trl": Preset(
        name="trl",
        source="TRL 1.16 GRPOConfig (trl/trainer/grpo_config.py): vllm_mode colocate uses "
        "vllm_gpu_memory_utilization=0.3, beta=0.0 (no reference model), gradient_checkpointing=True; "
        "transformers Trainer default optim adamw_torch_fused; GRPO/DPO compute log-probs with a fused, tiled "
        "lm_head (add_fused_lm_head, trl/trainer/utils.py; kernels/chunked_logprob.py): no full logits",
        card={
            "loss": {"chunked": True},
            "rollout": {"engine": "vllm", "placement": "colocate", "gpu_memory_utilization": 0.3, "sleep_level": 0},
            "roles": {"kl_coef": 0.0},
            "parallel": {"gradient_checkpointing": True},
            "precision": {"optimizer_impl": "fused"},
        },
        knobs={
            "rollout.gpu_memory_utilization": "vllm_gpu_memory_utilization",
            "rollout.tensor_parallel": "vllm_tensor_parallel_size",
            "rollout.num_generations": "num_generations",
            "rollout.response_len": "max_completion_length",
            "roles.kl_coef": "beta",
            "batch.micro_batch_size": "per_device_train_batch_size",
            "batch.grad_accum": "gradient_accumulation_steps",
        },
    ),
    "verl": Preset(
        name="verl",
        source="verl trainer/config/ppo_trainer.yaml (actor_rollout_ref.rollout.gpu_memory_utilization: 0.5; "
        "ref.fsdp_config.param_offload: True for the reference under FSDP; FSDP actor keeps fp32 parameters "
        "with bf16 mixed precision); verl-project/verl v0.9.0 (483b8a009ba3a97563edee3a19887e4862b8094a) "
        "verl/trainer/config/rollout/rollout.yaml free_cache_engine: True, and "
        "verl/workers/rollout/vllm_rollout/vllm_async_server.py _sleep_hybrid: vLLM sleeps at level 2 between "
        "rollouts (level 1 when only a LoRA adapter is synced)",
        card={
            "rollout": {"engine": "vllm", "placement": "colocate", "gpu_memory_utilization": 0.5, "sleep_level": 2},
            "roles": {"reference": "cpu"},
            "precision": {"weights": "fp32", "compute": "bf16"},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
        },
        knobs={
            "rollout.gpu_memory_utilization": "actor_rollout_ref.rollout.gpu_memory_utilization",
            "rollout.tensor_parallel": "actor_rollout_ref.rollout.tensor_model_parallel_size",
            "rollout.num_generations": "actor_rollout_ref.rollout.n",
            "rollout.response_len": "data.max_response_length",
            "rollout.prompt_len": "data.max_prompt_length",
            "parallel.gradient_checkpointing": "actor_rollout_ref.model.enable_gradient_checkpointing",
            "batch.micro_batch_size": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
            "rollout.logprob_micro_batch_size": "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
        },
    ),
    "openrlhf": Preset(
        name="openrlhf",
        source="OpenRLHF 0.11 (OpenRLHF/OpenRLHF README.md at 3c3be6234e0cb353e76bb8019947db9dfe99fca7, "
        "version.txt 0.11.0; the flags trainfit exports, recorded from openrlhf 0.11.2 argparse): hybrid engine "
        "--train.colocate_all --vllm.enable_sleep --ds.enable_sleep (vLLM sleep level 1, "
        "openrlhf/trainer/ray/vllm_engine.py), --vllm.gpu_memory_utilization 0.5 in the 8x A100 quick start",
        card={
            "rollout": {"engine": "vllm", "placement": "colocate", "gpu_memory_utilization": 0.5, "sleep_level": 1},
            "parallel": {"strategy": "zero3", "gradient_checkpointing": True},
        },
        knobs={
            "rollout.gpu_memory_utilization": "--vllm.gpu_memory_utilization",
            "rollout.tensor_parallel": "--vllm.tensor_parallel_size",
            "rollout.num_generations": "--rollout.n_samples_per_prompt",
            "rollout.response_len": "--rollout.max_new_tokens",
            "rollout.prompts_per_step": "--rollout.batch_size",
            "batch.micro_batch_size": "--train.micro_batch_size",
        },
    ),
    "nemo-rl": Preset(
        name="nemo-rl",
        source="NeMo RL examples/configs/grpo_math_1B.yaml (policy.generation.colocated.enabled: true, "
        "vllm_cfg.gpu_memory_utilization: 0.6)",
        card={
            "rollout": {"engine": "vllm", "placement": "colocate", "gpu_memory_utilization": 0.6},
            "parallel": {"gradient_checkpointing": True},
        },
        knobs={
            "rollout.gpu_memory_utilization": "policy.generation.vllm_cfg.gpu_memory_utilization",
            "rollout.tensor_parallel": "policy.generation.vllm_cfg.tensor_parallel_size",
            "rollout.num_generations": "grpo.num_generations_per_prompt",
            "rollout.response_len": "policy.max_total_sequence_length",
            "parallel.gradient_checkpointing": "policy.dtensor_cfg.activation_checkpointing",
            "batch.micro_batch_size": "policy.train_micro_batch_size",
        },
    ),
}


def preset(name: str) -> Preset:
    if name not in PRESETS:
        raise CardError(f"preset: '{name}' is not known; allowed: {', '.join(PRESETS)}")
    return PRESETS[name]


def apply_preset(card_data: dict[str, Any], name: str) -> dict[str, Any]:
    """Card data with the preset's defaults filled in under what the card sets."""
    merged = merge_under(preset(name).card, card_data)
    if name == "verl" and merged.get("scope", "full") != "full" and "sleep_level" not in (card_data.get("rollout") or {}):
        merged["rollout"] = {**merged["rollout"], "sleep_level": 1}  # verl sleeps at level 1 when it syncs an adapter
    merged["preset"] = name
    return merged


def knob_name(name: str | None, key: str) -> str:
    """The framework's name for a card key (the key itself without a preset)."""
    if name is None:
        return key
    return preset(name).knobs.get(key, key)
