"""Rollout engines: the memory a generation engine holds on each GPU during RL post-training.

Pure functions over :class:`trainfit.spec.model.ModelSpec`; no torch or vLLM import.
"""

from trainfit.rollout.vllm import (
    EngineConfig,
    EngineMemory,
    RolloutDemand,
    activation_bytes_per_token,
    engine_memory,
    kv_bytes_per_token,
    linear_state_bytes_per_seq,
    sleep_resident_bytes,
    wake_host_bytes,
    weights_per_gpu_bytes,
)

__all__ = [
    "EngineConfig",
    "EngineMemory",
    "RolloutDemand",
    "activation_bytes_per_token",
    "engine_memory",
    "kv_bytes_per_token",
    "linear_state_bytes_per_seq",
    "sleep_resident_bytes",
    "wake_host_bytes",
    "weights_per_gpu_bytes",
]
