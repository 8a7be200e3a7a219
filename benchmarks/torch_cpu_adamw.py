"""One thread's ``torch.optim.AdamW.step()`` over host tensors, the CPU optimizer step of torch FSDP's CPU offload
(FSDP1 ``CPUOffload(offload_params=True)``, FSDP2 ``CPUOffloadPolicy``: the sharded parameters, their gradients and
the optimizer states live in host memory, so the step the training loop calls runs on the CPU), measured on this
machine's CPU (``trainfit.compute.offload.TORCH_CPU_ADAMW_S_PER_PARAM``).

Which implementation runs: ``torch.optim.AdamW`` built without ``foreach`` / ``fused`` (as SkyRL builds it,
marin-community/MarinSkyRL skyrl-train/skyrl_train/distributed/fsdp_strategy.py l.502-509
@a559688ccdfe65e44d9f13ddaaccb57aa8a3b0b9, ``optimizer_kwargs`` empty by default) picks its default from the
parameters: ``_default_to_fused_or_foreach`` takes foreach only for tensors on cuda / xpu / mtia (or other
foreach-capable devices) that are plain tensors (torch 2.13.0 ``torch/optim/optimizer.py`` l.161-186), so host
tensors (and FSDP's host DTensors) take ``_single_tensor_adam``, a Python loop over the parameters with ``mul_``,
``lerp_``, ``mul_`` + ``addcmul_``, ``sqrt``, ``div``, ``add_`` and ``addcdiv_`` per tensor
(``torch/optim/adam.py``). The states are ``zeros_like`` the parameter, so a bf16 shard has bf16 moments.

Why one thread: each op is a torch CPU op, whose intra-op pool has ``OMP_NUM_THREADS`` threads; Ray sets it to the
worker's CPU allotment, 1 when none is given (ray-project/ray python/ray/_private/utils.py
``set_omp_num_threads_if_unset`` @f0cfdad9e9d7823676609c680034903201203304), SkyRL's training actors ask for one
CPU per GPU (worker.py l.754-824 @a559688c), and torchrun sets it to 1 for more than one process a node
(torch 2.13.0 torch/distributed/run.py l.872-884).

The tensors are one rank's shards of ``--layers`` decoder layers of Qwen3-235B-A22B under FSDP over ``--ranks``
(64) GPUs with transformers v5's stacked experts: gate_up_proj 128 x 3,072 x 4,096 and down_proj 128 x 4,096 x 1,536
over the ranks, the four attention projections, the router and the two layer norms (9 tensors a layer, 36 over four
layers; Qwen3's per-head q_norm / k_norm, 128 elements each, are left out: two more tensors a layer, 0.002 % of the
elements, whose per-tensor launches this loop does not time). Times ``step()`` after a first step that creates the
states, best of ``--rounds``; prints nanoseconds per parameter and the bytes streamed per second at
``NOMINAL_ELEMENT_PASSES`` element reads and writes per parameter (the eight ops' passes listed there, temporaries
included: 20).

Run: ``python benchmarks/torch_cpu_adamw.py`` (needs torch only; about a minute).
"""

from __future__ import annotations

import argparse
import time

import torch

NOMINAL_ELEMENT_PASSES = 20
"""Element reads and writes per parameter of ``_single_tensor_adam`` (decoupled weight decay ``mul_`` 2, ``lerp_`` 3,
``mul_`` 2, ``addcmul_`` 3, ``sqrt`` 2, ``div`` 2, ``add_`` 2, ``addcdiv_`` 4), for the printed bytes/s only."""


FUSED_ELEMENT_PASSES = 7
"""Element reads and writes per parameter of the fused kernel (``fused=True``, torch's CPU ``_fused_adamw_``): the
parameter, gradient and two moments read, the parameter and moments written, for the printed bytes/s only."""


def layer_shard_elements(ranks: int) -> list[int]:
    """Element counts of one rank's shards of one Qwen3-235B-A22B decoder layer (hidden 4,096, 64 query heads and 4
    key/value heads of 128, 128 experts of intermediate 1,536) under FSDP over ``ranks`` GPUs."""
    full = [128 * 2 * 1536 * 4096, 128 * 4096 * 1536, 8192 * 4096, 512 * 4096, 512 * 4096, 4096 * 8192,
            128 * 4096, 4096, 4096]
    return [max(1, -(-n // ranks)) for n in full]


def step_seconds(dtype: torch.dtype, sizes: list[int], rounds: int, *, fused: bool) -> float:
    params = [torch.nn.Parameter(torch.randn(n, dtype=dtype) * 0.02) for n in sizes]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt = torch.optim.AdamW(params, lr=1e-6, betas=(0.9, 0.999), weight_decay=1e-2,
                            fused=fused or None)
    opt.step()  # creates the states (first touch)
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        opt.step()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    sizes = layer_shard_elements(args.ranks) * args.layers
    n = sum(sizes)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, {len(sizes)} tensors, {n / 1e6:.1f} M params")
    for fused in (False, True):
        for dtype in (torch.bfloat16, torch.float32):
            s = step_seconds(dtype, sizes, args.rounds, fused=fused)
            passes = FUSED_ELEMENT_PASSES if fused else NOMINAL_ELEMENT_PASSES
            nbytes = passes * torch.tensor([], dtype=dtype).element_size()
            print(f"{'fused' if fused else 'for_loop':8s} {str(dtype):15s} {s:.3f} s: {s / n * 1e9:.2f} ns per"
                  f" parameter ({n * nbytes / s / 1e9:.1f} GB/s at {nbytes} B a parameter)")


if __name__ == "__main__":
    main()
