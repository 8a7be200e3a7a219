"""Expert parallel on a fake process group: per-rank bytes of rank 0 (needs torch, transformers).

Every MoE layer of a Qwen3-MoE-style model (Mixtral's are the same fused experts) keeps its router whole (all
experts scored) and only ``num_experts / ep`` experts: the fused ``gate_up_proj`` / ``down_proj`` parameters are
built with that many rows. Tokens travel as in torchtitan's and Megatron-Core's all-to-all token dispatcher:

1. the rank's ``T x top_k`` (token, expert) pairs are sorted by expert, so by destination rank, and
   gathered (``hidden[perm // top_k]``), as transformers' ``grouped_mm`` experts forward does;
2. dispatch: ``all_to_all_single`` of those rows (dropless routing, balanced load: the rank receives
   ``T x top_k`` rows, ``1 / ep`` from each rank);
3. the received rows are sorted by local expert (a gather), run through the local experts with
   transformers' own grouped linear (``_grouped_linear``, the activation gate ``_apply_gate``), and
   scattered back to arrival order (torchtitan's ``_permute`` / ``_unpermute``);
4. combine: the inverse ``all_to_all_single``; then transformers' tail: routing weights, inverse
   permutation and the sum over ``top_k``.

This is an emulation (transformers' own expert parallel replicates the tokens and all-reduces
instead; torch has no expert-parallel API): the collectives and the permutations are the
dispatcher's, the expert math is transformers'. The dense weights are replicated on the ``ep``
ranks (data parallel without sharding).
"""

from __future__ import annotations

import contextlib
import time
import types
from typing import Any

from trainfit.trace.types import Progress, TraceRequest, TraceResult, TraceUnsupported

FAMILIES = frozenset({"qwen3_moe", "mixtral"})


def check(req: TraceRequest, *, expert_parallel: int) -> None:
    """Refuse what this trace does not cover (one line)."""
    if expert_parallel < 2:
        raise TraceUnsupported(f"trace: expert_parallel must be >= 2, got {expert_parallel}")
    if req.world_size != expert_parallel:
        raise TraceUnsupported(f"trace: expert parallel is traced with world_size = expert_parallel"
                               f" ({expert_parallel}), got {req.world_size}")
    if (req.tensor_parallel > 1 or req.pipeline_parallel > 1 or req.micro_batches > 1 or req.mode != "fast"
            or req.pass_kind != "train_step" or req.scope != "full" or req.replay_allocator
            or req.selective_checkpointing != "none"):
        raise TraceUnsupported("trace: expert parallel is traced alone (no tensor or pipeline parallel), scope 'full',"
                               " mode 'fast', train step")


def _all_to_all(group: Any):
    import torch
    import torch.distributed as dist

    class AllToAll(torch.autograd.Function):
        """Equal splits (balanced load); the gradient goes back the same way."""

        @staticmethod
        def forward(ctx, x):
            out = torch.empty_like(x)
            dist.all_to_all_single(out, x.contiguous(), group=group)
            return out

        @staticmethod
        def backward(ctx, grad):
            out = torch.empty_like(grad)
            dist.all_to_all_single(out, grad.contiguous(), group=group)
            return out

    return AllToAll.apply


def ep_experts_forward(self: Any, hidden_states: Any, top_k_index: Any, top_k_weights: Any) -> Any:
    """transformers' ``grouped_mm_experts_forward`` with the dispatch and combine all-to-alls around
    the local experts (see the module docstring)."""
    import torch
    from transformers.integrations.moe import _grouped_linear

    num_top_k = top_k_index.size(-1)
    num_tokens, hidden_dim = hidden_states.shape
    sample_weights = top_k_weights.reshape(-1)
    expert_ids = top_k_index.reshape(-1)
    expert_ids_g, perm = torch.sort(expert_ids)  # by expert, so by destination rank
    selected = hidden_states[perm // num_top_k]
    sample_weights_g = sample_weights[perm]
    received = self._ep_all_to_all(selected)  # dispatch
    local_ids = expert_ids_g % self.num_experts  # the received rows' local experts (shape only under fake)
    local_sorted, local_perm = torch.sort(local_ids)
    rows = received[local_perm]
    tokens_per_expert = torch.histc(local_sorted.float(), bins=self.num_experts, min=0, max=self.num_experts - 1)
    offsets = torch.cumsum(tokens_per_expert, dim=0, dtype=torch.int32)
    proj = _grouped_linear(rows, self.gate_up_proj, offsets, is_transposed=self.is_transposed)
    proj = self._apply_gate(proj)
    proj = _grouped_linear(proj, self.down_proj, offsets, is_transposed=self.is_transposed)
    arrived = proj.new_empty(proj.shape)
    arrived[local_perm] = proj  # back to arrival order
    back = self._ep_all_to_all(arrived)  # combine
    weighted = back * sample_weights_g.unsqueeze(-1)
    inv_perm = torch.empty_like(perm)
    inv_perm[perm] = torch.arange(perm.size(0))
    weighted = weighted[inv_perm]
    return weighted.view(num_tokens, num_top_k, hidden_dim).sum(dim=1).to(hidden_states.dtype)


def shard_experts(model: Any, ep: int, group: Any) -> int:
    """Cut every MoE layer's experts to ``num_experts / ep`` (on meta, before materialising) and route
    their forward through ``ep_experts_forward``. Returns the number of MoE layers."""
    import torch
    from torch import nn

    n = 0
    a2a = _all_to_all(group)
    for layer in model.model.layers:
        experts = getattr(getattr(layer, "mlp", None), "experts", None)
        if experts is None or not hasattr(experts, "gate_up_proj"):
            continue
        total = experts.num_experts
        if total % ep:
            raise TraceUnsupported(f"trace: expert_parallel {ep} does not divide the {total} experts")
        local = total // ep
        for name in ("gate_up_proj", "down_proj"):
            p = getattr(experts, name)
            setattr(experts, name, nn.Parameter(torch.empty((local, *p.shape[1:]), dtype=p.dtype, device="meta"),
                                                requires_grad=p.requires_grad))
        experts.num_experts = local
        experts._ep_all_to_all = a2a
        experts.forward = types.MethodType(ep_experts_forward, experts)
        n += 1
    return n


def trace_expert_parallel(req: TraceRequest, *, expert_parallel: int, progress: Progress | None = None) -> TraceResult:
    """Trace one steady-state step of rank 0 at full depth under expert parallel ``expert_parallel``."""
    t0 = time.perf_counter()
    check(req, expert_parallel=expert_parallel)
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh

    from trainfit.trace import build
    from trainfit.trace.context_parallel import full_depth_meta, traced_steady_step
    from trainfit.trace.extrapolate import full_depth
    from trainfit.trace.fsdp import fake_process_group
    from trainfit.trace.patches import torch_threads, unpacked_batches

    report = progress or (lambda label, frac: None)
    depth = full_depth(req.hf_config)
    meta = full_depth_meta(req, depth, families=FAMILIES, layout="expert parallel", report=report)
    vocab = meta.get_input_embeddings().weight.shape[0]
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch_threads(1))
        stack.enter_context(unpacked_batches())
        stack.enter_context(fake_process_group(req.world_size))
        group = init_device_mesh("cpu", (expert_parallel,)).get_group()
        if not shard_experts(meta, expert_parallel, group):
            raise TraceUnsupported("trace: the model has no fused-expert MoE layers to shard")
        stack.enter_context(FakeTensorMode())
        model = build.materialize_fake(meta)
        model.train()
        if req.gradient_checkpointing:
            build.enable_checkpointing(model)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = build.make_optimizer(req, params)
        ids = torch.randint(0, vocab, (req.micro_batch_size, req.seq_len))
        phases = traced_steady_step(model, opt, params, {"input_ids": ids, "labels": ids}, report)
    total, trainable = build.count_params(meta)
    peak = max(phases, key=lambda p: p.peak_bytes)
    notes = ((f"per-rank bytes of rank 0 of {req.world_size}: expert parallel {expert_parallel}, each rank holds"
              f" 1/{expert_parallel} of the experts; all-to-all token dispatch and combine (balanced, dropless) around"
              " transformers' grouped experts; dense weights replicated (fake process group)"),
             "the model output is dropped before backward, as the HF Trainer and TRL do (`loss = model(...).loss`)")
    report("done", 1.0)
    return TraceResult(peak_bytes=peak.peak_bytes, peak_phase=peak.name, phases=phases, params_total=total,
                       params_trainable=trainable, seconds=time.perf_counter() - t0, layers_traced=(depth,),
                       extrapolated=False, notes=notes)
