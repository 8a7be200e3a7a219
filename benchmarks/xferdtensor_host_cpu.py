"""Host seconds per ``xferdtensor`` call of NeMo RL's NCCL reshard refit (``compute.sync.nccl_reshard_seconds``).

NeMo RL's reshard refit sends the FFN projections by one ``xferdtensor`` call per HF parameter on every training and
every vLLM rank (the grouped experts one call per projection and layer). Without nccl4py's ``nccl.m2n.reshard`` the
call runs ``xferdtensor_python_impl`` (NVIDIA-NeMo/RL ``nemo_rl/weight_sync/xferdtensor_python.py``
@7ea279abfbeb698b092856d0dab61e7cf39bc909, the "fallback path" NeMo RL pull request #2971 lists its Qwen3-30B-A3B
rows under): the plan-cache key (the two meshes' rank lists and placements), the cached plan, the local-input
checks, one view (and ``record_stream``) per transfer the rank takes part in, one nccl4py group of sends and
receives, and with replicas one all-gather. This script runs that very file on meta tensors of the ranks' shard
shapes (every view, packing ``contiguous()`` and staging buffer goes through PyTorch's dispatcher with no data moved:
on the GPU those are kernels enqueued on the stream, not host time), with the NCCL calls, the CUDA stream and
device contexts and ``record_stream`` stubbed out, and times one call per role, steady state (the plan and the split
communicator cached, as from the second refit on):

* Qwen3-4B, DP8 -> TP8 (one vLLM instance: the generic exact plan, training rank 0 sends every region);
* Qwen3-30B-A3B, EP8 x PP2 -> TP8 x DP2 (two instances: striped receives, then the replica all-gather).

Not timed, so a lower bound: the nccl4py calls themselves (ctypes into NCCL, one per send / receive, the group
start / end), ``record_stream``, the vLLM side's ``pre`` / ``post`` hooks (a receive buffer and its copy into the fused
parameter) and the Python of the callers' loops.
Run: ``python benchmarks/xferdtensor_host_cpu.py PATH/TO/xferdtensor_python.py`` (that file at the commit above).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
import types

import torch
from torch.distributed.tensor import Replicate, Shard


class _Mesh:
    def __init__(self, ranks: torch.Tensor) -> None:
        self.mesh = ranks
        self._mesh = ranks


class _Comm:
    """nccl4py communicator stand-in: every call returns at once."""

    def send(self, *a, **k) -> None: ...
    def recv(self, *a, **k) -> None: ...
    def allgather(self, *a, **k) -> None: ...
    def broadcast(self, *a, **k) -> None: ...
    def split(self, *a, **k) -> "_Comm":
        return _Comm()


class _Group:
    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.nccl_communicator = _Comm()


class _Ref:
    """``DTensorRef``: the global shape beside the rank's local tensor."""

    def __init__(self, local: torch.Tensor, global_shape: tuple[int, ...]) -> None:
        self._local_tensor, self.shape = local, torch.Size(global_shape)
        self.dtype, self.device = local.dtype, local.device


class _Stream:
    cuda_stream = 0


def load(path: str) -> types.ModuleType:
    nccl = types.ModuleType("nccl")
    core = types.ModuleType("nccl.core")
    core.group_start = core.group_end = lambda: None
    nccl.core = core
    sys.modules.update({"nccl": nccl, "nccl.core": core})
    torch.cuda.device = lambda *a, **k: contextlib.nullcontext()  # type: ignore[assignment]
    torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()  # type: ignore[assignment]
    torch.cuda.synchronize = lambda *a, **k: None  # type: ignore[assignment]
    spec = importlib.util.spec_from_file_location("xferdtensor_python", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def local_shape(region) -> tuple[int, ...]:
    return tuple(stop - start for start, stop in region)


def time_role(mod, *, rank: int, src_mesh, src_pl, dst_mesh, dst_pl, shape, repeat: int = 2000) -> float:
    """Seconds of one steady-state call on ``rank`` (a source rank, a destination rank, or both)."""
    regions_src = mod._rank_regions(src_mesh, src_pl, shape)
    regions_dst = mod._rank_regions(dst_mesh, dst_pl, shape)
    def local(region) -> _Ref:
        return _Ref(torch.empty(local_shape(region), dtype=torch.bfloat16, device="meta"), shape)

    src = local(regions_src[rank]) if rank in regions_src else None
    dst = local(regions_dst[rank]) if rank in regions_dst else None
    group, stream = _Group(rank), _Stream()

    def call() -> None:
        mod.xferdtensor_python_impl(src, src_mesh, src_pl, dst, dst_mesh, dst_pl, group, stream)

    for _ in range(20):
        call()
    t0 = time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - t0) / repeat


def main(argv: list[str]) -> int:
    mod = load(argv[1])
    rows = []
    # Qwen3-4B (hidden 2560, intermediate 9728), DP8 -> TP8: training ranks 0-7, vLLM ranks 8-15
    src, dst = _Mesh(torch.arange(0, 8)), _Mesh(torch.arange(8, 16))
    for name, shape, dim in (("gate/up", (9728, 2560), 0), ("down", (2560, 9728), 1)):
        for role, rank in (("training rank 0 (sends all 8)", 0), ("training rank 1 (idle)", 1), ("vLLM rank", 8)):
            rows.append(("Qwen3-4B DP8->TP8", name, role,
                         time_role(mod, rank=rank, src_mesh=src, src_pl=[Replicate()], dst_mesh=dst,
                                   dst_pl=[Shard(dim)], shape=shape)))
    # Qwen3-30B-A3B grouped experts (128 x 768 x 2048), one PP stage: EP8 on ranks 0-7 -> vLLM TP8 x DP2 on 8-23
    src, dst = _Mesh(torch.arange(0, 8)), _Mesh(torch.arange(8, 24).reshape(2, 8))
    for name, shape, dim in (("experts gate/up", (128, 768, 2048), 1), ("experts down", (128, 2048, 768), 2)):
        for role, rank in (("training rank (EP)", 0), ("vLLM rank", 8)):
            rows.append(("Qwen3-30B-A3B EP8xPP2->TP8xDP2", name, role,
                         time_role(mod, rank=rank, src_mesh=src, src_pl=[Shard(0)], dst_mesh=dst,
                                   dst_pl=[Replicate(), Shard(dim)], shape=shape)))
    for layout, name, role, s in rows:
        print(f"{layout:32s} {name:16s} {role:30s} {s * 1e6:8.1f} us per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
