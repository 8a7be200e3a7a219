"""One thread's in-place add of two host tensors, the host side of FSDP2's CPU-offload gradient accumulation
(``trainfit.compute.offload.fsdp2_offload_accumulation_seconds``: ``grad._local_tensor += new_sharded_grad``),
measured on this machine's CPU.

Why one thread: the add is a torch CPU op, whose intra-op pool has ``OMP_NUM_THREADS`` threads. Ray sets it for a
worker that has none to the floor of the worker's CPU allotment, 1 when none is given (ray-project/ray
python/ray/_private/utils.py ``set_omp_num_threads_if_unset`` @f0cfdad9e9d7823676609c680034903201203304), and
SkyRL's training actors ask for one CPU per GPU (``num_cpus=num_gpus_per_actor``, 1 for the policy on its own GPUs:
marin-community/MarinSkyRL skyrl-train/skyrl_train/workers/worker.py l.754-824, trainer.py l.818
@a559688ccdfe65e44d9f13ddaaccb57aa8a3b0b9); torchrun sets it to 1 for more than one process a node
(torch 2.13.0 torch/distributed/run.py l.872-884).

Times ``a += b`` of two contiguous tensors of ``--mib`` MiB each (bf16 and fp32), ``torch.set_num_threads(1)``, best
of ``--rounds``; prints the bytes streamed per second, three per element (two reads, one write).

Run: ``python benchmarks/fsdp2_host_add_cpu.py`` (needs torch only; a few seconds).
"""

from __future__ import annotations

import argparse
import time

import torch


def add_bytes_per_s(dtype: torch.dtype, mib: int, rounds: int) -> float:
    n = mib * 2**20 // torch.tensor([], dtype=dtype).element_size()
    a, b = torch.ones(n, dtype=dtype), torch.full((n,), 0.5, dtype=dtype)
    a += b  # first touch
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        a += b
        best = min(best, time.perf_counter() - t)
    return 3 * n * a.element_size() / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    for dtype in (torch.bfloat16, torch.float32):
        rate = add_bytes_per_s(dtype, args.mib, args.rounds)
        print(f"{str(dtype):15s} {args.mib} MiB: {rate / 1e9:.2f} GB/s (3 B read/written per byte of the shard)")


if __name__ == "__main__":
    main()
