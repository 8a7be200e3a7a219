"""Tensor (+ sequence) parallel on a fake process group with torch's own API (GROUND_TRUTH §11).

The decoder layers get torch's plan for a Llama-style block, the one torchtitan applies:
``ColwiseParallel`` on q/k/v/gate/up, ``RowwiseParallel`` on o/down; the embedding is
vocabulary-parallel (``RowwiseParallel(input_layouts=Replicate())``) and the head column-parallel with
its output left sharded on the vocabulary for ``loss_parallel()``. With sequence parallel the norms
(``SequenceParallel``) and the residual stream hold ``seq / tp`` tokens, the row-parallel outputs are
reduce-scattered on the sequence (``Shard(1)``), and attention and the MLP all-gather their input
(``PrepareModuleInput``).

Two things make the measurement exact:

* HF computes rotary positions from the embedding output's length, which sequence parallel shards:
  the trace passes ``position_ids`` for the whole sequence (what a real sequence-parallel forward does).
* DTensor propagates shapes by running each op on *global-shape* fake tensors
  (``ShardingPropagator._propagate_tensor_meta_non_cached``; with a fake mode active torch skips its
  cache). On a GPU they are meta tensors and cost nothing; :func:`propagation_uncounted` keeps the
  byte tracker from counting them.

Families: llama, mistral, qwen2, qwen3 (q/k norms act on local heads, replicated). MoE, Gemma-2 and
the hybrid linear-attention models are refused, as are LoRA and tied embeddings.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
from torch import nn

from trainfit.trace.types import TraceRequest, TraceUnsupported

FAMILIES = frozenset({"llama", "mistral", "qwen2", "qwen3"})


def check(req: TraceRequest, model_type: str, tied: bool) -> None:
    """Refuse what this trace does not parallelise (one line)."""
    if model_type not in FAMILIES:
        raise TraceUnsupported(f"trace: tensor parallel is traced for {', '.join(sorted(FAMILIES))}, not {model_type}")
    if req.scope != "full":
        raise TraceUnsupported("trace: tensor parallel is traced for scope 'full' only")
    if tied:
        raise TraceUnsupported("trace: tensor parallel with tied embeddings is not traced (vocab-parallel embedding"
                               " and head would shard one matrix twice)")
    if req.mode != "fast":
        raise TraceUnsupported("trace: tensor parallel is traced in mode 'fast' only")


def parallelize(model: nn.Module, mesh: Any, *, sequence_parallel: bool, gather_head: bool = False) -> None:
    """torch's tensor-parallel plan on the decoder layers, the embedding and the head: the head's output sharded on
    the vocabulary (``loss_parallel``'s input), or with ``gather_head`` replicated on every rank as transformers'
    ``colwise_gather_output`` leaves it (``ColwiseParallel(output_layouts=Replicate())``, transformers 5.24.0
    src/transformers/distributed/tensor_parallel.py l.603), a plain local tensor of the whole vocabulary."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    sp = sequence_parallel
    out = Shard(1) if sp else Replicate()
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    for layer in base.model.layers:
        plan: dict[str, Any] = {
            "self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(output_layouts=out),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel(output_layouts=out),
        }
        if sp:
            plan.update({
                "input_layernorm": SequenceParallel(use_local_output=True),
                "post_attention_layernorm": SequenceParallel(use_local_output=True),
                "self_attn": PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)},
                                                desired_input_kwarg_layouts={"hidden_states": Replicate()},
                                                use_local_output=True),
                "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),),
                                          use_local_output=True),
            })
        parallelize_module(layer, mesh, plan)
    top: dict[str, Any] = {
        "model.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=out),
        "lm_head": (ColwiseParallel(input_layouts=out, output_layouts=Replicate(), use_local_output=True) if gather_head
                    else ColwiseParallel(input_layouts=out, output_layouts=Shard(-1), use_local_output=False)),
    }
    if sp:
        top["model.norm"] = SequenceParallel(use_local_output=True)
    parallelize_module(base, mesh, top)


def param_groups(params: list[nn.Parameter]) -> list[dict[str, Any]]:
    """DTensor and plain parameters in separate groups: a fused/foreach AdamW group cannot mix them
    (the replicated norms stay plain tensors without sequence parallel)."""
    from torch.distributed.tensor import DTensor

    dt = [p for p in params if isinstance(p, DTensor)]
    plain = [p for p in params if not isinstance(p, DTensor)]
    return [{"params": g} for g in (dt, plain) if g]


def forward(model: nn.Module, ids: torch.Tensor, req: TraceRequest):  # noqa: ANN201
    """``model(input_ids, labels)`` with the whole sequence's positions (the caller holds ``loss_parallel``)."""
    return model(input_ids=ids, labels=ids, position_ids=torch.arange(ids.shape[1]).unsqueeze(0))


@contextlib.contextmanager
def propagation_uncounted(tracker: Any) -> Iterator[None]:
    """While DTensor propagates shapes on global-shape fake tensors, the tracker counts nothing."""
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    orig = ShardingPropagator._propagate_tensor_meta_non_cached

    def wrapped(self, op_schema):  # noqa: ANN001, ANN202
        tracker.paused += 1
        try:
            return orig(self, op_schema)
        finally:
            tracker.paused -= 1

    ShardingPropagator._propagate_tensor_meta_non_cached = wrapped  # type: ignore[method-assign]
    try:
        yield
    finally:
        ShardingPropagator._propagate_tensor_meta_non_cached = orig  # type: ignore[method-assign]
