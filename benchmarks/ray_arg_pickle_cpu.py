"""Host cost of sending a NeMo RL batch shard to a Ray actor as a task argument, measured on this machine's CPU.

NeMo RL's ``RayWorkerGroup.run_all_workers_sharded_data`` calls ``worker.<method>.remote(data=shard, ...)`` once per
worker that receives data, so Ray serializes the shard once per call: a data-parallel shard is serialized again for
every tensor-, pipeline- and context-parallel replica (NVIDIA-NeMo/RL nemo_rl/distributed/worker_groups.py
``run_all_workers_sharded_data`` @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf, v0.3.0; the same loop at v0.5.0
6c7089300fded94abfa49bb9cbf9eb357d862461 l.912; ``ray.put`` once per shard only from ad0f56d06, PR #1944). Ray's
default serializer pickles a CPU torch tensor through ``Tensor.__reduce_ex__``, whose storage reduces with
``torch.save(..., BytesIO)`` and ``getvalue()`` (torch/storage.py ``TypedStorage.__reduce__``); Ray's zero-copy
tensor reducer is opt-in (``RAY_ENABLE_ZERO_COPY_TORCH_TENSORS``, off by default). The worker unpickles with
``torch.load`` of those bytes.

This script times ``pickle.dumps`` (protocol 5, what Ray's cloudpickle path uses) and ``pickle.loads`` of a dict
shaped as NeMo RL's training data (``input_ids`` and ``token_mask`` int64, ``advantages``, ``generation_logprobs``,
``prev_logprobs``, ``reference_policy_logprobs`` float32, all ``[rows, seq]``; ``input_lengths`` int64 and
``sample_mask`` float32 ``[rows]``), one thread, best of 3. It does not time Ray's copy of the pickled bytes into its
object store or the transfer between nodes (both add to it).

Run: ``/work/main/.venv/bin/python benchmarks/ray_arg_pickle_cpu.py`` (about 5 s).

Measured 2026-12-03 (torch 2.13.0+cpu, Python 3.11.7; a 2-vCPU KVM guest on an Intel Xeon with AMX and AVX512-FP16,
the CPU family of NVIDIA's DGX H100, shared with other jobs), best of 3 each, two runs::

      64 x 4096:     8.0 MiB  dumps  0.95 / 1.05 GB/s  loads  1.58 / 1.88 GB/s
     256 x 4096:    32.0 MiB  dumps  0.83 / 0.85 GB/s  loads  2.26 / 2.33 GB/s
     512 x 4096:    64.0 MiB  dumps  1.05 / 0.99 GB/s  loads  2.55 / 1.69 GB/s

Medians 0.97 GB/s (dumps) and 2.07 GB/s (loads): ``trainfit.compute.driver_dispatch`` takes 1.0 and 2.0 GB/s.
"""

from __future__ import annotations

import gc
import pickle
import sys
import time

import torch


def batch(rows: int, seq: int) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.randint(0, 128000, (rows, seq), dtype=torch.int64),
        "input_lengths": torch.full((rows,), seq, dtype=torch.int64),
        "advantages": torch.randn(rows, seq),
        "generation_logprobs": torch.randn(rows, seq),
        "token_mask": torch.ones(rows, seq, dtype=torch.int64),
        "sample_mask": torch.ones(rows),
        "prev_logprobs": torch.randn(rows, seq),
        "reference_policy_logprobs": torch.randn(rows, seq),
    }


def best(fn, n: int = 3) -> float:
    out = []
    for _ in range(n):
        gc.collect()
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def main() -> int:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}")
    for rows, seq in ((64, 4096), (256, 4096), (512, 4096)):
        d = batch(rows, seq)
        nbytes = sum(v.numel() * v.element_size() for v in d.values())
        blob = pickle.dumps(d, protocol=5)
        dumps_s = best(lambda d=d: pickle.dumps(d, protocol=5))
        loads_s = best(lambda blob=blob: pickle.loads(blob))
        print(f"{rows:4d} x {seq}: {nbytes / 2**20:7.1f} MiB  dumps {nbytes / dumps_s / 1e9:5.2f} GB/s"
              f"  loads {nbytes / loads_s / 1e9:5.2f} GB/s  (pickled {len(blob) / nbytes:.3f} x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
