"""Optimizer states, fp32 master weights and the temporaries of the optimizer step.

* **AdamW (torch)** keeps ``exp_avg`` and ``exp_avg_sq`` in the parameter's dtype
  (``torch.zeros_like(p)``): bf16 parameters give 4 B/param, fp32 give 8 B/param
  (GROUND_TRUTH.md §2). ``optimizer_states: fp32`` means 8 B/param whatever the weights.
* **Paged AdamW (bitsandbytes, 32-bit)**: fp32 states (8 B/param) whatever the weights.
* **8-bit AdamW (bitsandbytes, paged or not)**: two uint8 states (2 B/param) plus an fp32
  absmax per 256-element block for each state; tensors under ``min_8bit_size`` = 4096
  elements keep 32-bit states (bitsandbytes ``Optimizer2State.init_state``).
* **SGD** (torch default momentum 0): no state.
* **Adafactor (transformers)**: no first moment (beta1=None); a factored second moment for
  tensors of rank ≥ 2 (row + column vectors), a full one for vectors; state dtype follows the
  gradient.

Step temporaries (bytes live on top of the states during ``opt.step()``):

* ``fused`` (``AdamW(fused=True)``, the transformers Trainer default on torch ≥ 2.8): the
  kernel updates in place; no tensor-sized temporaries.
* ``foreach`` (torch's default when every param is on CUDA): ``_foreach_sqrt(exp_avg_sq)``
  materialises one tensor list the size of all parameters in the group (state dtype), then
  divides and adds eps in place.
* ``for_loop`` (``foreach=False``): per parameter, ``exp_avg_sq.sqrt()`` and the division by
  the bias correction are two temporaries of that parameter's size: 2 × the largest tensor
  (GROUND_TRUTH.md §2: 2.32 GiB for Qwen3-8B's 1.16 GiB embedding).
"""

from __future__ import annotations

from math import ceil

from trainfit.memory.params import TensorGroup
from trainfit.spec.enums import Optimizer, OptimizerImpl

BNB_BLOCK = 256
"""bitsandbytes blockwise optimizer quantization block (elements per fp32 absmax): ``blocks = n // 256`` in
``Optimizer2State.init_state`` / ``Optimizer1State.init_state`` (bitsandbytes-foundation/bitsandbytes
``bitsandbytes/optim/optimizer.py`` @51294d909e914f80d2f2c85f9e9229dd4386ef85)."""
BNB_MIN_8BIT_SIZE = 4096
"""bitsandbytes: tensors with fewer elements keep 32-bit optimizer states (``min_8bit_size=4096`` default, ``if
p.numel() < config["min_8bit_size"]: dtype = torch.float32``; ``bitsandbytes/optim/optimizer.py``
@51294d909e914f80d2f2c85f9e9229dd4386ef85, the same file)."""


PAGED = frozenset({Optimizer.PAGED_ADAMW, Optimizer.PAGED_ADAMW_8BIT})
"""bitsandbytes paged optimizers: states in CUDA managed memory (cudaMallocManaged), outside torch's allocator."""


def adamw_state_bytes(*, params: float, state_bytes: float) -> float:
    """exp_avg + exp_avg_sq."""
    return 2 * params * state_bytes


def adamw_8bit_state_bytes(*, tensors: list[TensorGroup]) -> float:
    """Two uint8 states + two fp32 absmax per 256-block; small tensors stay fp32 (8 B/elem)."""
    total = 0.0
    for t in tensors:
        n = t.numel
        if n < BNB_MIN_8BIT_SIZE:
            total += t.count * 8 * n
        else:
            total += t.count * (2 * n + 2 * 4 * ceil(n / BNB_BLOCK))
    return total


def adafactor_state_bytes(*, tensors: list[TensorGroup], state_bytes: float) -> float:
    """Factored second moment (rows + cols) for matrices, full for vectors; no first moment."""
    total = 0.0
    for t in tensors:
        if len(t.shape) >= 2:
            rows = t.numel // t.shape[-1]
            cols = t.numel // t.shape[-2]
            total += t.count * (rows + cols) * state_bytes
        else:
            total += t.count * t.numel * state_bytes
    return total


def optimizer_state_bytes(
    *, optimizer: Optimizer, params: float, tensors: list[TensorGroup], state_bytes: float
) -> float:
    """Persistent optimizer state for ``params`` trainable parameters (split into ``tensors``)."""
    if optimizer is Optimizer.ADAMW:
        return adamw_state_bytes(params=params, state_bytes=state_bytes)
    if optimizer is Optimizer.PAGED_ADAMW:
        return adamw_state_bytes(params=params, state_bytes=4)  # bnb 32-bit optimizers keep fp32 states
    if optimizer in (Optimizer.ADAMW_8BIT, Optimizer.PAGED_ADAMW_8BIT):
        return adamw_8bit_state_bytes(tensors=tensors)
    if optimizer is Optimizer.SGD:
        return 0.0
    if optimizer is Optimizer.ADAFACTOR:
        return adafactor_state_bytes(tensors=tensors, state_bytes=state_bytes)
    raise ValueError(optimizer)


def master_weight_bytes(*, params: float) -> float:
    """An fp32 copy of the trainable parameters (mixed precision with low-precision params)."""
    return 4.0 * params


def step_temporary_bytes(
    *, optimizer: Optimizer, impl: OptimizerImpl, params: float, largest_tensor: float, state_bytes: float
) -> float:
    """Peak temporaries of one optimizer step (see module docstring)."""
    if optimizer is not Optimizer.ADAMW or impl in (OptimizerImpl.FUSED, OptimizerImpl.APEX_DISTRIBUTED):
        return 0.0
    if impl is OptimizerImpl.FOREACH:
        return params * state_bytes
    return 2 * largest_tensor * state_bytes
