"""Host seconds NeMo RL v0.3's colocated refit spends relaying CUDA-IPC handles through its driver, timed on this CPU.

NeMo RL v0.3.0 (NVIDIA-NeMo/RL @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf) refits a colocated vLLM one group of keys
at a time (``refit_policy_generation``, nemo_rl/algorithms/grpo.py l.419-433). Per group the driver runs
``ray.get`` over every training worker's ``get_weights_ipc_handles`` (nemo_rl/models/policy/lm_policy.py
l.511-526), each a ``{device_uuid: (False, [(key, reduce_tensor(tensor)), ...])}`` from the DTensor worker
(nemo_rl/models/policy/dtensor_policy_worker.py l.1188-1226), merges them, and sends each vLLM engine actor the
handles of its own GPUs (``update_weights_from_ipc_handles``, nemo_rl/models/generation/vllm.py l.1939-1978); an
engine of TP > 1 forwards each of its workers that GPU's list (l.1052-1081). So every handle of every training rank
is unpickled and pickled again in the one driver process, one after another: ``train_world x keys`` handles per
refit. This script times that serial step with ``pickle`` on tuples of the shape PyTorch's ``reduce_tensor`` returns
for a CUDA tensor (``rebuild_cuda_tensor`` and its 15 arguments: class, size, stride, offset, storage class, dtype,
device, the 64-byte memory handle, storage bytes and offset, ``requires_grad``, the ref-counter file name and offset,
the 64-byte event handle, ``event_sync_required``; torch/multiprocessing/reductions.py ``reduce_tensor`` @v2.7.0).
Ray's serializer is pickle protocol 5 for such objects; its object-store copies and RPCs are not timed, so this is a
lower bound of the relay.

    .venv/bin/python benchmarks/nemo_rl_v03_handle_relay_cpu.py

Prints only; pure Python.
"""

from __future__ import annotations

import os
import pickle
import platform
import time


class Tensor:  # stand-ins that pickle by reference, as torch's classes and dtypes do
    pass


class UntypedStorage:
    pass


class DType:
    def __reduce__(self):
        return "BFLOAT16"


BFLOAT16 = DType()


def rebuild_cuda_tensor(*args):  # noqa: ANN002, ANN201 - never called: pickled by reference
    return args


def handle(i: int) -> tuple:
    """One ``reduce_tensor`` result of a 2-D bf16 CUDA tensor."""
    return (rebuild_cuda_tensor, (Tensor, (4096, 14336), (14336, 1), 0, UntypedStorage, BFLOAT16, 0,
                                  os.urandom(64), 4096 * 14336 * 2, 0, False, f"/torch_{os.getpid()}_{i}".encode(),
                                  i * 8, os.urandom(64), True))


def worker_reply(keys: int, rank: int) -> dict:
    return {f"GPU-{rank:08x}": (False, [(f"model.layers.{k // 9}.mlp.proj{k % 9}.weight", handle(k))
                                        for k in range(keys)])}


def relay_seconds(*, train_world: int, keys: int, repeats: int = 3) -> float:
    """The driver's unpickle of every worker's reply and pickle of every engine's share, best of ``repeats``."""
    blobs = [pickle.dumps(worker_reply(keys, r), protocol=5) for r in range(train_world)]
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        merged: dict = {}
        for b in blobs:
            merged.update(pickle.loads(b))
        for uuid, share in merged.items():  # one engine share per GPU (TP 1) or grouped (TP > 1): the same bytes
            pickle.dumps({uuid: share}, protocol=5)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    print(f"CPU: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    for name, world, keys in (("Llama-3.1-8B DTensor, 8 ranks", 8, 291), ("Llama-3.1-70B DTensor, 64 ranks", 64, 723)):
        s = relay_seconds(train_world=world, keys=keys)
        print(f"{name}: {world * keys:,} handles through the driver, {s:.3f} s per refit "
              f"({s / (world * keys) * 1e6:.1f} us a handle)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
