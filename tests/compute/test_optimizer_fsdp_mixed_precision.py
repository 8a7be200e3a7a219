"""AdamW's bytes per parameter of the rank's shard (``compute.optimizer_time`` module docstring): FSDP mixed precision
steps the fp32 shard with fp32 gradients and writes no 16-bit copy back (28 B fused, x 40 / 14 foreach); DeepSpeed ZeRO
and Megatron-Core keep bf16 parameters with an fp32 master (28 B, 30 B with Megatron's fp32 main_grad); pure bf16 14 B."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.optimizer_time import optimizer_bytes_per_param, optimizer_seconds
from trainfit.compute.rates import default_rates

FSDP_MIXED = dict(weight_bytes=4.0, grad_bytes=4.0, state_bytes=4.0, master=False)
ZERO_BF16 = dict(weight_bytes=2.0, grad_bytes=2.0, state_bytes=4.0, master=True)
MEGATRON_FP32_GRADS = dict(weight_bytes=2.0, grad_bytes=4.0, state_bytes=4.0, master=True)
PURE_BF16 = dict(weight_bytes=2.0, grad_bytes=2.0, state_bytes=2.0, master=False)


@pytest.mark.parametrize(("dtypes", "step_bytes"), [
    (FSDP_MIXED, (4 + 4 + 4 + 4) + (4 + 4 + 4)),          # w g m v in; w m v out
    (ZERO_BF16, (4 + 2 + 4 + 4) + (4 + 4 + 4 + 2)),        # master g m v in; master m v + bf16 write-back out
    (MEGATRON_FP32_GRADS, (4 + 4 + 4 + 4) + (4 + 4 + 4 + 2)),
    (PURE_BF16, (2 + 2 + 2 + 2) + (2 + 2 + 2)),
])
def test_step_bytes_per_parameter(dtypes, step_bytes):
    assert optimizer_bytes_per_param(optimizer="adamw", clip=False, **dtypes) == step_bytes
    # clipping reads the gradients for the norm, then reads and writes them for the scale
    assert optimizer_bytes_per_param(optimizer="adamw", clip=True, **dtypes) == step_bytes + 3 * dtypes["grad_bytes"]


@pytest.mark.parametrize(("impl", "per_param"), [("fused", 28.0), ("foreach", 28.0 * 40 / 14), ("for_loop", 28.0 * 40 / 14)])
def test_fsdp_mixed_precision_fused_and_foreach(impl, per_param):
    n = 1e9
    t = optimizer_seconds(params=n, tensors=291, optimizer="adamw", impl=impl, rates=default_rates(resolve_gpu("h200")),
                          clip=False, **FSDP_MIXED)
    assert t.bytes_moved / n == pytest.approx(per_param)
