"""FSDP2 on a fake process group: deterministic per-rank bytes of rank 0 (GROUND_TRUTH §4)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from torch import nn

from trainfit.trace.types import TraceUnsupported


@contextmanager
def fake_process_group(world_size: int) -> Iterator[None]:
    """``init_process_group("fake")`` for the duration; always destroyed afterwards."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if not dist.is_available():
        raise TraceUnsupported("trace: world_size > 1 needs torch.distributed, which this torch build lacks")
    if dist.is_initialized():
        raise TraceUnsupported("trace: a process group is already initialised in this process; world_size > 1 "
                               "needs to create its own fake one")
    dist.init_process_group("fake", rank=0, world_size=world_size, store=FakeStore())
    try:
        yield
    finally:
        dist.destroy_process_group()


def make_mesh(world_size: int, tensor_parallel: int = 1):  # noqa: ANN201
    """The FSDP mesh (None when every rank is tensor-parallel) and the tensor-parallel mesh (None
    without TP): a 1-D cpu mesh, or a 2-D (dp, tp) one sliced by name. Build it outside
    ``FakeTensorMode`` (the mesh reads its rank map's values)."""
    from torch.distributed.device_mesh import init_device_mesh

    if tensor_parallel == 1:
        return init_device_mesh("cpu", (world_size,)), None
    dp = world_size // tensor_parallel
    if dp == 1:
        return None, init_device_mesh("cpu", (tensor_parallel,))
    mesh = init_device_mesh("cpu", (dp, tensor_parallel), mesh_dim_names=("dp", "tp"))
    return mesh["dp"], mesh["tp"]


@contextmanager
def premade_mesh_concatenation(dp_mesh, tp_mesh) -> Iterator[None]:  # noqa: ANN001
    """FSDP2 over tensor-parallel parameters concatenates the dp and tp meshes while sharding, which
    reads the rank map inside ``FakeTensorMode`` and fails; concatenate them here, outside, and hand
    that mesh back for the duration."""
    from torch.distributed.device_mesh import DeviceMesh

    orig = DeviceMesh._concatenate
    done = orig([dp_mesh, tp_mesh])

    def concatenate(meshes):  # noqa: ANN001, ANN202
        if len(meshes) == 2 and meshes[0] == dp_mesh and meshes[1] == tp_mesh:
            return done
        return orig(meshes)

    DeviceMesh._concatenate = staticmethod(concatenate)  # type: ignore[method-assign]
    try:
        yield
    finally:
        DeviceMesh._concatenate = staticmethod(orig)  # type: ignore[method-assign]


def mixed_precision(precision: str) -> dict:
    """``fully_shard``'s mixed-precision keyword for a traced precision: fp32 parameters with bf16 compute are
    gathered in bf16 (``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``, as torchtitan's
    ``mixed_precision_param``, NeMo RL's DTensor policy and accelerate set it), so autocast finds bf16 weights."""
    if precision != "fp32_autocast":
        return {}
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy

    return {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)}


def shard(model: nn.Module, layers: nn.ModuleList, mesh, *, precision: str = "bf16") -> None:  # noqa: ANN001
    """``fully_shard`` each decoder layer, then the root (embedding, final norm and lm_head stay in one unit)."""
    from torch.distributed.fsdp import fully_shard

    mp = mixed_precision(precision)
    for layer in layers:
        fully_shard(layer, mesh=mesh, **mp)
    fully_shard(model, mesh=mesh, **mp)
