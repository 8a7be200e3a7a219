"""Static training state (weights + gradients + optimizer) under the conventions people quote.

The seeds and the tools disagree on what "Adam in mixed precision" costs per parameter. Each
convention here is built from the same term functions the planner uses, so the table of
conventions is a consequence of the mechanisms, not a second set of constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from trainfit.memory.optimizer import adamw_state_bytes, master_weight_bytes


class Convention(StrEnum):
    SEED_8B = "seed"
    """Seed 001 §2.1: bf16 weights 16 GB + bf16 grads 16 GB + Adam 32 GB (4 B/param in all)."""
    TORCH_ADAMW_BF16 = "torch_adamw_bf16"
    """torch AdamW on bf16 parameters: states in the parameter dtype (2 x 2 B)."""
    FP32_STATES = "fp32_states"
    """bf16 weights and grads, fp32 Adam states (2 x 4 B)."""
    FP32_MASTER = "fp32_master"
    """Mixed precision: bf16 weights and grads, fp32 master copy, fp32 states (seed 000 §3: 16 B/param)."""


@dataclass(frozen=True, slots=True)
class StaticState:
    weights: float
    gradients: float
    master_weights: float
    optimizer_states: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.master_weights + self.optimizer_states


def static_state(*, params: float, convention: Convention) -> StaticState:
    """Bytes of weights, gradients, master copy and Adam states for ``params`` parameters."""
    weights = grads = 2.0 * params
    if convention in (Convention.SEED_8B, Convention.TORCH_ADAMW_BF16):
        return StaticState(weights, grads, 0.0, adamw_state_bytes(params=params, state_bytes=2))
    if convention is Convention.FP32_STATES:
        return StaticState(weights, grads, 0.0, adamw_state_bytes(params=params, state_bytes=4))
    return StaticState(weights, grads, master_weight_bytes(params=params), adamw_state_bytes(params=params, state_bytes=4))
