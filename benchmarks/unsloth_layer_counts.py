"""The planner's eager kernel inventory of one Qwen3 decoder layer with LoRA, the denominator of Unsloth's kernel factor.

    .venv/bin/python benchmarks/unsloth_layer_counts.py

Prints the kernels per layer of ``trainfit.compute.inventory.step_inventory`` for Qwen/Qwen3-0.6B (LoRA rank 16 on
q/k/v/o/gate/up/down, bf16 adapters, SDPA, micro-batch 2 x 2,048 tokens) in the forward, the recompute and the
backward, beside Unsloth's counted layer (``trainfit.compute.unsloth_layers``) and their ratio. Pure Python, no torch.
"""

from __future__ import annotations

from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import Adapter, step_inventory
from trainfit.compute.unsloth_layers import (UNSLOTH_BACKWARD_KERNELS, UNSLOTH_FORWARD_KERNELS,
                                             UNSLOTH_OFFLOAD_COPY_KERNELS, unsloth_kernel_factor)

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def eager_layer_kernels() -> tuple[float, float, float]:
    """(forward, recompute, backward) kernels per decoder layer of the planner's eager inventory (module docstring)."""
    spec = from_catalog("Qwen/Qwen3-0.6B")
    inv = step_inventory(spec, micro_batch_size=2, seq_len=2048,
                         adapter=Adapter(rank=16, targets=TARGETS, adapter_dtype_bytes=2))
    n = inv.num_layers
    return (inv.layers_forward.kernels / n, inv.recompute("none").kernels / n, inv.layers_backward.kernels / n)


def main() -> None:
    fwd, rec, bwd = eager_layer_kernels()
    print(f"eager inventory per layer: forward {fwd:.1f}, recompute {rec:.1f}, backward {bwd:.1f}")
    print(f"Unsloth per layer: forward {UNSLOTH_FORWARD_KERNELS + UNSLOTH_OFFLOAD_COPY_KERNELS},"
          f" recompute {UNSLOTH_FORWARD_KERNELS}, backward {UNSLOTH_BACKWARD_KERNELS}")
    print(f"factor {unsloth_kernel_factor():.3f}")


if __name__ == "__main__":
    main()
