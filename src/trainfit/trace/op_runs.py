"""Run :class:`~trainfit.trace.opcount.OpCounter` over the traced train step (needs torch, transformers, peft).

The step is the memory trace's (``trainfit.trace.step``: same build, same warm-up, same phases);
only the dispatch mode differs. The optimizer step can also be counted alone at any depth, with
gradients set directly: it sees the same parameter and gradient lists, and is cheap at full depth.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from trainfit.trace import build
from trainfit.trace.inventory import OpRecord
from trainfit.trace.opcount import OpCounter
from trainfit.trace.patches import torch_threads
from trainfit.trace.regions import LayerRegions
from trainfit.trace.step import steady_step, warmed_up
from trainfit.trace.types import TraceRequest


def _host_tensors(req: TraceRequest, opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    """AdamW's step counters: CPU tensors on a GPU run unless fused (torch/optim/adamw.py ``_init_group``)."""
    if req.optimizer_impl == "fused":
        return []
    return [st["step"] for st in opt.state.values() if isinstance(st.get("step"), torch.Tensor)]


def _phases(regions: LayerRegions) -> Callable[[str], Any]:
    @contextlib.contextmanager
    def phase(name: str) -> Iterator[None]:
        regions.set_phase(name)
        yield

    return phase


def count_step(req: TraceRequest, depth: int, *, progress: Callable[[str, float], None]) -> list[OpRecord]:
    """Every op of the steady-state step of a ``depth``-layer model (after one warm-up step)."""
    # the emulated DeltaNet GPU kernels allocate but compute nothing: the op inventory counts the torch path
    with warmed_up(req, depth, progress, gpu_kernels=False) as (model, opt, ids):
        progress("trace", 0.5)
        regions = LayerRegions(build.decoder_layers(model))
        counter = OpCounter(regions, host=_host_tensors(req, opt))
        try:
            with counter:
                steady_step(model, opt, ids, req, _phases(regions), progress=progress)
        finally:
            regions.remove()
    progress("done", 1.0)
    return counter.records()


def count_optimizer(req: TraceRequest, depth: int) -> list[OpRecord]:
    """The ops of ``opt.step(); opt.zero_grad(set_to_none=True)`` for a ``depth``-layer model, steady
    state (a first step creates the states), with each gradient an uninitialised tensor like its parameter."""
    meta = build.build_meta(req, depth)
    with torch_threads(1), FakeTensorMode():
        model = build.materialize_fake(meta)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = build.make_optimizer(req, params)
        _fake_grads(params)
        opt.step()
        opt.zero_grad(set_to_none=True)
        _fake_grads(params)
        regions = LayerRegions(nn.ModuleList())
        regions.set_phase("optimizer_step")
        counter = OpCounter(regions, host=_host_tensors(req, opt))
        with counter:
            opt.step()
            opt.zero_grad(set_to_none=True)
    return counter.records()


def _fake_grads(params: list[nn.Parameter]) -> None:
    for p in params:
        p.grad = torch.empty_like(p)
