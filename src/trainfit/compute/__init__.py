"""Time and cost: FLOPs per token, step and generation time (a roofline), price per GPU-hour.

Pure Python: no torch import.
"""

from trainfit.compute.cost import EXCLUDES, PRESETS, Cost, Price, cost_per_hour, parse_price, price_preset, run_cost
from trainfit.compute.flops import TrainingFlops, matmul_params, training_flops_per_token
from trainfit.compute.step_time import (
    DEFAULT_MFU,
    GenTime,
    PhaseTime,
    StepTime,
    generation_time,
    sft_step_time,
    sum_phases,
    weight_sync_seconds,
)

__all__ = [
    "DEFAULT_MFU", "EXCLUDES", "PRESETS", "Cost", "GenTime", "PhaseTime", "Price", "StepTime", "TrainingFlops",
    "cost_per_hour", "generation_time", "matmul_params", "parse_price", "price_preset", "run_cost",
    "sft_step_time", "sum_phases", "training_flops_per_token", "weight_sync_seconds",
]
