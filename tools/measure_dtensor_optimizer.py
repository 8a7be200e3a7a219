"""Measure the host seconds torch's per-parameter ("for-loop") AdamW adds when its parameters are DTensors, as FSDP2's
``fully_shard`` leaves them: ``rates.DTENSOR_OP_HOST_S``.

``torch.optim.AdamW(foreach=False, fused=False)`` runs ``_single_tensor_adam``, which walks the parameters in Python
and issues each update op on the parameter and its state one by one (``param.mul_`` for the decoupled weight decay,
``exp_avg.lerp_``, ``exp_avg_sq.mul_().addcmul_()``, ``exp_avg_sq.sqrt()``, the division by the bias correction,
``.add_(eps)``, ``param.addcdiv_``: 8 ops, the ``step`` counter a CPU scalar; torch 2.13.0
``torch/optim/adam.py`` l.414-546). Under FSDP2 the parameters, gradients and states are DTensors, so every one of
those ops goes through DTensor's dispatch (unwrap, sharding propagation from its cache, wrap) before the local
kernel. With ``foreach=True`` one ``_foreach_*`` call covers a list of tensors, so the dispatch is paid once per op.

A fake process group of 8 ranks (collectives are no-ops: host work only); a stack of ``nn.Linear(64, 64)`` (a
weight and a bias each: ``NT`` parameter tensors), each layer and the root ``fully_shard``-ed on a 1-D mesh of the 8
ranks, against the same model plain; zero gradients set, three warm-up steps. Timed in interleaved rounds: in each,
for each of (for-loop, foreach) x (plain, FSDP2), the best of 5 ``optimizer.step()`` calls; the best over ``ROUNDS``
rounds is kept. Printed: seconds per step and the FSDP2 - plain difference per parameter tensor and per op (8 ops a
tensor).

Usage::

    ROUNDS=25 NT=128 .venv/bin/python tools/measure_dtensor_optimizer.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.update(LOCAL_RANK="0", RANK="0", WORLD_SIZE="8", MASTER_ADDR="127.0.0.1", MASTER_PORT="29575")

import torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

OPS_PER_TENSOR = 8


def build(tensors: int, sharded: bool, foreach: bool):  # a torch optimizer
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(tensors // 2)])
    if sharded:
        mesh = init_device_mesh("cpu", (8,))
        for layer in model:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, foreach=foreach, fused=False)
    for _ in range(3):
        opt.step()
    return opt


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    rounds = int(os.environ.get("ROUNDS", "25"))
    tensors = int(os.environ.get("NT", "128"))
    opts = {(impl, sharded): build(tensors, sharded, impl == "foreach")
            for impl in ("for_loop", "foreach") for sharded in (False, True)}
    best: dict[tuple, float] = {}
    for _ in range(rounds):
        for key, opt in opts.items():
            for _ in range(5):
                t = time.perf_counter()
                opt.step()
                best[key] = min(best.get(key, 1e9), time.perf_counter() - t)
    print(f"torch {torch.__version__} ({torch.version.git_version}), {tensors} parameter tensors, best of {rounds}"
          " rounds")
    for impl in ("for_loop", "foreach"):
        plain, fsdp2 = best[(impl, False)], best[(impl, True)]
        extra = (fsdp2 - plain) / tensors
        print(f"{impl}: plain {plain * 1e3:.3f} ms, FSDP2 {fsdp2 * 1e3:.3f} ms per step; FSDP2 - plain"
              f" {extra * 1e6:.1f} us per parameter tensor, {extra / OPS_PER_TENSOR * 1e6:.1f} us per op")


if __name__ == "__main__":
    main()
