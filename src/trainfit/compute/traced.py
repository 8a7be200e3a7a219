"""Seconds of a traced step: the same rates and kernel models as the planner, applied op by op to
what ``trainfit trace --time`` recorded (every aten op with its shapes, bytes and launches).

The planner times its own op inventory (``inventory.py``); timing the traced ops with the same
mechanisms shows how much of a difference comes from the inventory and how much from the kernel
models. Per phase::

    device_s = Σ GEMM (gemm.py, the traced (b, m, n, k) and dtype) + Σ attention kernels at their
               architecture's efficiency (causal FLOPs) + Σ memory-bound bytes / HBM
    host_s   = launches × host seconds per kernel (forward or backward)
    seconds  = max(device_s, host_s)

Records are read duck-typed (``phase, recompute, category, dtype, shape, flops_causal, bytes_read,
bytes_written, launches, calls``): this module does not import the trace package. Pure Python.
"""

from __future__ import annotations

from typing import Any, Collection, Iterable

from trainfit.compute.attention_time import attention_efficiency
from trainfit.compute.gemm import gemm_seconds
from trainfit.compute.rates import DeviceRates
from trainfit.compute.training import PassTime

_BYTES = {"float32": 4, "float64": 8, "bfloat16": 2, "float16": 2}


def traced_phase_seconds(records: Iterable[Any], *, rates: DeviceRates, sliding_layers: Collection[int] = (),
                         sliding_window: int | None = None) -> dict[str, PassTime]:
    """Seconds per traced phase (``forward``, ``backward`` incl. recompute, ``optimizer_step``), by phase name.
    ``sliding_layers`` / ``sliding_window``: the model's windowed layers (``ModelSpec``); their attention records
    whose keys exceed the window are priced without the exponential-unit factor (``exp_bound=False``, as
    ``training.pass_seconds`` prices the windowed share)."""
    acc: dict[str, list[float]] = {}
    for r in records:
        a = acc.setdefault(r.phase, [0.0, 0.0, 0.0, 0.0])
        calls = r.calls
        if r.category == "gemm" and len(r.shape) == 4:
            b, m, n, k = r.shape
            a[0] += calls * gemm_seconds(m=m, n=n, k=k, groups=b, rates=rates, dtype_bytes=_BYTES.get(r.dtype, 2))
        elif r.category == "attention" and len(r.shape) == 7:
            backward = r.phase == "backward" and not r.recompute
            windowed = (sliding_window is not None and r.layer in sliding_layers and r.shape[4] > sliding_window)
            eff = attention_efficiency(compute_capability=rates.compute_capability, seq_len=r.shape[4],
                                       backward=backward, exp_bound=not windowed)
            a[1] += calls * r.flops_causal / (rates.matmul_flops_per_s * eff)
        elif r.category == "memory":
            a[2] += calls * (r.bytes_read + r.bytes_written) / rates.hbm_bytes_per_s
        python = r.phase == "forward" or r.recompute  # module code; backward and the optimizer dispatch from C++
        a[3] += calls * r.launches * (rates.host_s_per_forward_kernel if python else rates.host_s_per_backward_kernel)
    return {phase: PassTime(max(g + at + mem, host), g, at, mem, host) for phase, (g, at, mem, host) in acc.items()}
