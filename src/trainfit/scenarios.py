"""The seeds' RL scenarios as run cards (used by the golden tests and docs/seed-scenarios.md).

Seed 001 (PPO, Qwen3-8B, 8x A100 40GB) gives three tiers of a "theoretical" total without
stating its assumptions: about 109.6 GB unoptimised, 53.6 GB with FSDP and checkpointing,
27.4 GB with LoRA + FSDP + vLLM. Seed 000 (GRPO, a 27B dense model, RTX 4090 24 GB) gives
verdicts: 1 and 2 cards cannot hold bf16 weights; full-parameter GRPO with Adam in mixed
precision does not fit the 192 GB of 8 cards; 4 or 8 cards are candidates to verify.
"""

from __future__ import annotations

from typing import Any

from trainfit.spec.dotted import merge_under

PPO_SEED_GB = {"unoptimised": 109.6, "fsdp_ckpt": 53.6, "lora_fsdp_vllm": 27.4}
"""Seed 001 section 2.3 / table 4.3 (GB, assumptions not stated)."""

_PPO_BASE: dict[str, Any] = {
    "model": "Qwen/Qwen3-8B",
    "method": "ppo",
    "hardware": {"gpu": "a100-40gb", "gpus_per_node": 8},
    "batch": {"micro_batch_size": 1},
    "rollout": {"prompt_len": 512, "response_len": 1024, "num_generations": 1, "prompts_per_step": 64},
    "roles": {"reference": "gpu", "reward_model": "Qwen/Qwen3-8B", "critic": "same_as_actor"},
}


def ppo_tier(tier: str) -> dict[str, Any]:
    """The seed's PPO tiers as cards (our reading of them, stated in docs/seed-scenarios.md)."""
    if tier == "unoptimised":
        top = {"parallel": {"strategy": "ddp", "gradient_checkpointing": False}, "rollout": {"engine": "hf"}}
    elif tier == "fsdp_ckpt":
        top = {"parallel": {"strategy": "fsdp", "gradient_checkpointing": True}, "rollout": {"engine": "hf"}}
    elif tier == "lora_fsdp_vllm":
        top = {
            "scope": "lora",
            "lora": {"rank": 16, "alpha": 32, "targets": "all-linear"},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
            "rollout": {"engine": "vllm", "placement": "colocate", "gpu_memory_utilization": 0.5,
                        "tensor_parallel": 1, "sleep_level": 1},
            "roles": {"reference": "lora_disabled"},
        }
    else:
        raise KeyError(tier)
    return merge_under(_PPO_BASE, top)


def grpo_27b(*, gpus: int, scope: str, placement: str, model: Any = "Qwen/Qwen3.5-27B", **extra: Any) -> dict[str, Any]:
    """Seed 000's GRPO case on RTX 4090 24GB cards: 16 prompts x 8 generations x (1024 + 4096) tokens."""
    rollout: dict[str, Any] = {
        "engine": "vllm", "placement": placement, "prompt_len": 1024, "response_len": 4096,
        "num_generations": 8, "prompts_per_step": 16, "gpu_memory_utilization": 0.9,
        "tensor_parallel": max(1, gpus // 2) if placement == "split" else gpus,
    }
    if placement == "split":
        rollout["gpus"] = max(1, gpus // 2)
    card: dict[str, Any] = {
        "model": model,
        "method": "grpo",
        "scope": scope,
        "hardware": {"gpu": "rtx4090", "gpus_per_node": gpus, "price_preset": "rtx4090-pro"},
        "parallel": {"strategy": "fsdp" if gpus > 1 else "single", "gradient_checkpointing": True},
        "rollout": rollout,
    }
    return merge_under(card, extra)


GRPO_SPACE: dict[str, list[Any]] = {
    "scope": ["full", "lora", "qlora"],
    "parallel.offload": ["none", "optimizer", "params_and_optimizer"],
    "rollout.placement": ["colocate", "split"],
    "rollout.tensor_parallel": [1, 2, 4, 8],
    "rollout.gpu_memory_utilization": [0.3, 0.5, 0.7, 0.9],
    "rollout.sleep_level": [0, 1],
    "loss.chunked": [False, True],
    "rollout.weight_sync": ["per_parameter", "full_gather"],
}
"""Knobs the seed leaves open for the 27B GRPO question."""
