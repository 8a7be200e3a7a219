"""Time and cost, one mechanism per module (the time twin of ``trainfit.memory``).

* ``rates``: what a GPU kind sustains (matmul, HBM, host cost per kernel, NCCL bus, PCIe, host memory);
* ``flops``: FLOPs per token by pass; ``inventory``: the kernels of a micro-step (GEMM shapes, attention,
  memory-bound bytes, kernel counts), checked against ``trainfit trace --time``;
* ``gemm``, ``attention_time``, ``optimizer_time``: seconds of each kind of kernel;
* ``collectives``, ``offload``: NCCL collectives with the framework's overlap, PCIe and the CPU optimizer;
* ``training``: a training step assembled from the above; ``generation``, ``sync``: the RL rollout
  engine (decode with a response-length distribution, sleep/wake) and trainer -> engine weight sync;
* ``cost``: price per GPU-hour and per run.

Pure Python: no torch import.
"""

from trainfit.compute.cost import EXCLUDES, Cost, Price, cost_per_hour, parse_price, price_preset, run_cost
from trainfit.compute.flops import TrainingFlops, matmul_params, training_flops_per_token
from trainfit.compute.rates import DeviceRates, default_rates
from trainfit.compute.training import PhaseTime, TrainStepTime, train_step_time

__all__ = [
    "EXCLUDES", "PRESETS", "Cost", "DeviceRates", "PhaseTime", "Price", "TrainStepTime", "TrainingFlops",
    "cost_per_hour", "default_rates", "matmul_params", "parse_price", "price_preset", "run_cost",
    "train_step_time", "training_flops_per_token",
]


def __getattr__(name: str):
    # ``PRESETS`` is read on first use, as in ``trainfit.compute.cost``: importing it here made every import of
    # the package (every plan) read the price table and resolve each of its GPUs
    if name == "PRESETS":
        from trainfit.compute import cost

        return cost.PRESETS
    raise AttributeError(f"module 'trainfit.compute' has no attribute '{name}'")
