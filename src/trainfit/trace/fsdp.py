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


def make_mesh(world_size: int):  # noqa: ANN201
    """A 1-D cpu mesh; build it outside ``FakeTensorMode`` (the mesh reads its rank map's values)."""
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (world_size,))


def shard(model: nn.Module, layers: nn.ModuleList, mesh) -> None:  # noqa: ANN001
    """``fully_shard`` each decoder layer, then the root (embedding, final norm and lm_head stay in one unit)."""
    from torch.distributed.fsdp import fully_shard

    for layer in layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
