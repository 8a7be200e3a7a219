"""Context parallel on a fake process group: per-rank bytes of rank 0 (needs torch, transformers).

Each rank holds ``seq / cp`` tokens of every sequence; only attention needs the others' keys and
values. Everything outside attention runs on the rank's local tokens as plain tensors, as
torch's ``context_parallel()`` runs it (it shards the input buffers in place and intercepts
``F.scaled_dot_product_attention`` alone). Two kinds:

* **ring** -- torch's own ring attention: ``_templated_ring_attention`` and
  ``_templated_ring_attention_backward`` from
  ``torch.distributed.tensor.experimental._context_parallel._attention``, with torch's default
  options (round-robin load balancing, fp32 merging, the K/V blocks all-gathered once in forward,
  the dK/dV accumulators passed on with all-to-all in backward). The public
  ``context_parallel()`` cannot run here: its DTensor handler dispatches only the CUDA flash,
  efficient and cuDNN SDPA ops and raises ``NotImplementedError`` for CPU's
  ``_scaled_dot_product_flash_attention_for_cpu``. So the trace does its dispatch itself: an
  autograd function around the same two templated functions, with the CPU flash kernel (same
  outputs: the attention output and an fp32 log-sum-exp) as the per-block op, saving q, k, v,
  out and lse as the SDPA op's autograd node does. What it leaves out is the DTensor wrapping
  (``DTensor.from_local`` views of q/k/v, no bytes).
* **ulysses** -- DeepSpeed-Ulysses as verl applies it to HF models
  (``verl/utils/ulysses.py`` ``SeqAllToAll`` / ``all_to_all_tensor`` and
  ``verl/models/transformers/monkey_patch.py`` ``_ulysses_flash_attention_forward``): q, k, v in
  (batch, seq, heads, dim) go through an all-to-all that gathers the sequence and scatters the heads
  (``tensor_split`` -> ``contiguous`` chunks, ``empty_like`` outputs, ``dist.all_to_all``,
  ``cat(...).contiguous()``), k and v first repeated to one head per rank when there are fewer KV
  heads than ranks; attention runs on the full sequence over ``heads / cp`` heads (SDPA here, flash
  attention in verl); its output goes back with the inverse all-to-all.

Data parallel: with more ranks than ``cp`` the model is FSDP2-sharded over all of them (the data x
context ranks, torchtitan's ``dp_shard_cp``); with exactly ``cp`` ranks every rank holds a replica.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from trainfit.trace.types import PHASES, PhaseTrace, Progress, TraceRequest, TraceResult, TraceUnsupported

KINDS = ("ring", "ulysses")
FAMILIES = frozenset({"llama", "mistral", "qwen2", "qwen3"})


def check(req: TraceRequest, *, context_parallel: int, kind: str) -> None:
    """Refuse what this trace does not cover (one line)."""
    if kind not in KINDS:
        raise TraceUnsupported(f"trace: context_parallel_kind '{kind}' is not one of {', '.join(KINDS)}")
    if context_parallel < 2:
        raise TraceUnsupported(f"trace: context_parallel must be >= 2, got {context_parallel}")
    if req.world_size % context_parallel:
        raise TraceUnsupported(f"trace: context_parallel {context_parallel} must divide world_size {req.world_size}")
    if req.seq_len % (2 * context_parallel if kind == "ring" else context_parallel):
        raise TraceUnsupported(f"trace: seq_len {req.seq_len} must divide into {context_parallel} ranks"
                               + (" x 2 load-balancing chunks" if kind == "ring" else ""))
    if (req.tensor_parallel > 1 or req.pipeline_parallel > 1 or req.micro_batches > 1 or req.mode != "fast"
            or req.pass_kind != "train_step" or req.scope != "full" or req.attention != "sdpa"
            or req.replay_allocator or req.selective_checkpointing != "none"):
        raise TraceUnsupported("trace: context parallel is traced alone (no tensor or pipeline parallel), scope 'full',"
                               " attention 'sdpa', mode 'fast', train step")


# --------------------------------------------------------------------------- ring (torch's ring attention)


def _cpu_flash(query, key, value, *, is_causal, scale=None, **_: Any):
    import torch

    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, 0.0, is_causal, scale=scale)


def _cpu_flash_backward(*, grad_out, query, key, value, out, logsumexp, is_causal, scale=None, **_: Any):
    import torch

    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out, query, key, value, out, logsumexp, 0.0, is_causal, scale=scale)


def _ring_function(group: Any) -> Callable:
    import torch
    from torch.distributed.tensor.experimental._context_parallel._attention import (
        _templated_ring_attention,
        _templated_ring_attention_backward,
    )

    class RingSDPA(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, scale):
            out, lse = _templated_ring_attention(group, 2, _cpu_flash, q, k, v, is_causal=True, scale=scale)[:2]
            ctx.save_for_backward(q, k, v, out, lse)
            ctx.scale = scale
            return out

        @staticmethod
        def backward(ctx, dout):
            q, k, v, out, lse = ctx.saved_tensors
            dq, dk, dv = _templated_ring_attention_backward(
                group, 2, _cpu_flash_backward, grad_out=dout, grad_out_name="grad_out", query=q, key=k, value=v,
                out=out, logsumexp=lse, is_causal=True, scale=ctx.scale)[:3]
            return dq, dk, dv, None

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
        if attn_mask is not None or not is_causal or dropout_p:
            raise TraceUnsupported("trace: ring attention is traced for causal attention without a mask or dropout")
        return RingSDPA.apply(query, key, value, scale)

    return sdpa


# --------------------------------------------------------------------------- Ulysses (verl's all-to-all)


def _ulysses_function(group: Any, orig_sdpa: Callable) -> Callable:
    import torch
    import torch.distributed as dist

    size = dist.get_world_size(group)

    def all_to_all_tensor(x, scatter_dim: int, gather_dim: int):
        inputs = [t.contiguous() for t in torch.tensor_split(x, size, scatter_dim)]
        outputs = [torch.empty_like(inputs[0]) for _ in range(size)]
        dist.all_to_all(outputs, inputs, group=group)
        return torch.cat(outputs, dim=gather_dim).contiguous()

    class SeqAllToAll(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scatter_dim, gather_dim):
            ctx.dims = (scatter_dim, gather_dim)
            return all_to_all_tensor(x, scatter_dim, gather_dim)

        @staticmethod
        def backward(ctx, grad):
            scatter_dim, gather_dim = ctx.dims
            return all_to_all_tensor(grad, gather_dim, scatter_dim), None, None

    def repeat_kv(x, n: int):
        if n == 1:
            return x
        b, s, h, d = x.shape
        return x[:, :, :, None, :].expand(b, s, h, n, d).reshape(b, s, h * n, d)

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
        if attn_mask is not None or not is_causal or dropout_p:
            raise TraceUnsupported("trace: Ulysses is traced for causal attention without a mask or dropout")
        # verl's layout: (batch, seq / cp, heads, dim); HF hands SDPA (batch, heads, seq / cp, dim)
        q, k, v = (t.transpose(1, 2) for t in (query, key, value))
        rep = max(size // k.shape[2], 1)
        k, v = repeat_kv(k, rep), repeat_kv(v, rep)
        q, k, v = (SeqAllToAll.apply(t, 2, 1) for t in (q, k, v))  # gather the sequence, scatter the heads
        out = orig_sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, scale=scale,
                        enable_gqa=q.shape[2] != k.shape[2])
        out = SeqAllToAll.apply(out.transpose(1, 2), 1, 2)  # gather the heads, scatter the sequence
        return out.transpose(1, 2)

    return sdpa


@contextlib.contextmanager
def patched_sdpa(kind: str, group: Any) -> Iterator[None]:
    """``F.scaled_dot_product_attention`` replaced for the duration (torch's own CP dispatch mode is
    this monkey patch too: ``_DispatchMode.MONKEY_PATCH``)."""
    import torch.nn.functional as F

    orig = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = _ring_function(group) if kind == "ring" else _ulysses_function(group, orig)
    try:
        yield
    finally:
        F.scaled_dot_product_attention = orig


def local_positions(seq_len: int, cp: int, kind: str, rank: int = 0):
    """Rank ``rank``'s positions: the round-robin chunks ``rank`` and ``2cp-1-rank`` for the ring
    (torch's ``_HeadTailLoadBalancer``), a contiguous block for Ulysses."""
    import torch

    if kind == "ring":
        c = seq_len // (2 * cp)
        return torch.cat([torch.arange(rank * c, (rank + 1) * c),
                          torch.arange((2 * cp - 1 - rank) * c, (2 * cp - rank) * c)]).unsqueeze(0)
    n = seq_len // cp
    return torch.arange(rank * n, (rank + 1) * n).unsqueeze(0)


# --------------------------------------------------------------------------- the traced step


def full_depth_meta(req: TraceRequest, depth: int, *, families: frozenset[str] | set[str], layout: str,
                    report: Callable[[str, float], None]) -> Any:
    """The model on meta at ``depth`` layers, refused in one line when its family has no ``layout`` tracer
    (the context- and expert-parallel tracers start alike)."""
    from trainfit.trace import build

    report("build", 0.0)
    meta = build.build_meta(req, depth)
    if meta.config.model_type not in families:
        raise TraceUnsupported(f"trace: {layout} is traced for {', '.join(sorted(families))},"
                               f" not {meta.config.model_type}")
    return meta


def traced_steady_step(model: Any, opt: Any, params: list, inputs: dict, report: Progress) -> tuple[PhaseTrace, ...]:
    """One untracked warm-up step, then the steady-state step tracked phase by phase (inside the caller's
    fake mode): ``loss = model(**inputs).loss`` (the Trainer keeps only the loss), backward, ``opt.step()``
    and ``zero_grad(set_to_none=True)``."""
    from trainfit.trace import build
    from trainfit.trace.regions import LayerRegions
    from trainfit.trace.step import _opt_state_tensors
    from trainfit.trace.tracker import FastTracker

    def step(phase: Callable[[str], Any], after_forward: Callable[[], None] = lambda: None,
             after_backward: Callable[[], None] = lambda: None) -> None:
        with phase("forward"):
            loss = model(**inputs).loss
            after_forward()
        with phase("backward"):
            loss.backward()
            after_backward()
        loss = None
        with phase("optimizer_step"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    report("warm-up", 0.1)
    step(lambda name: contextlib.nullcontext())
    report("trace", 0.5)
    regions = LayerRegions(build.decoder_layers(model))
    tr = FastTracker(regions)
    tr.add_existing(model)
    tr.add_existing(*_opt_state_tensors(opt), tag="optimizer_states")
    tr.add_existing(*inputs.values(), tag="activations")
    with tr:
        step(tr.phase, after_forward=tr.mark_activations,
             after_backward=lambda: tr.tag([p.grad for p in params if p.grad is not None], "gradients"))
    regions.remove()
    bds = tr.breakdowns()
    return tuple(PhaseTrace(n, tr.phases[n].peak_bytes, bds[n]) for n in PHASES)


def trace_context_parallel(req: TraceRequest, *, context_parallel: int, kind: str,
                           progress: Progress | None = None) -> TraceResult:
    """Trace one steady-state step of rank 0 at full depth under context parallel ``context_parallel``."""
    t0 = time.perf_counter()
    check(req, context_parallel=context_parallel, kind=kind)
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh

    from trainfit.trace import build
    from trainfit.trace.extrapolate import full_depth
    from trainfit.trace.fsdp import fake_process_group, shard
    from trainfit.trace.patches import torch_threads, unpacked_batches

    report = progress or (lambda label, frac: None)
    cp, world = context_parallel, req.world_size
    depth = full_depth(req.hf_config)
    meta = full_depth_meta(req, depth, families=FAMILIES, layout="context parallel", report=report)
    vocab = meta.get_input_embeddings().weight.shape[0]
    tokens = req.seq_len // cp
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch_threads(1))
        stack.enter_context(unpacked_batches())
        stack.enter_context(fake_process_group(world))
        if world == cp:
            fsdp_mesh, group = None, init_device_mesh("cpu", (cp,)).get_group()
        else:
            mesh = init_device_mesh("cpu", (world // cp, cp), mesh_dim_names=("dp", "cp"))
            group = mesh["cp"].get_group()
            fsdp_mesh = init_device_mesh("cpu", (world,))
        stack.enter_context(patched_sdpa(kind, group))
        stack.enter_context(FakeTensorMode())
        model = build.materialize_fake(meta)
        model.train()
        if req.gradient_checkpointing:
            build.enable_checkpointing(model)
        if fsdp_mesh is not None:
            shard(model, build.decoder_layers(model), fsdp_mesh)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = build.make_optimizer(req, params)
        ids = torch.randint(0, vocab, (req.micro_batch_size, tokens))
        pos = local_positions(req.seq_len, cp, kind).expand(req.micro_batch_size, -1)

        phases = traced_steady_step(model, opt, params, {"input_ids": ids, "labels": ids, "position_ids": pos}, report)
    total, trainable = build.count_params(meta)
    peak = max(phases, key=lambda p: p.peak_bytes)
    how = ("torch's ring attention (_templated_ring_attention[_backward], load-balanced, K/V all-gathered) with the"
           " CPU flash kernel per block" if kind == "ring" else
           "Ulysses all-to-all of q, k, v and the output around SDPA (verl's SeqAllToAll)")
    notes = (f"per-rank bytes of rank 0 of {world}: context parallel {cp} ({kind}): {how}; "
             + (f"FSDP2 over all {world} data x context ranks" if fsdp_mesh is not None else "a replica per rank")
             + " (fake process group)",
             "the model output is dropped before backward, as the HF Trainer and TRL do (`loss = model(...).loss`)")
    report("done", 1.0)
    return TraceResult(peak_bytes=peak.peak_bytes, peak_phase=peak.name, phases=phases, params_total=total,
                       params_trainable=trainable, seconds=time.perf_counter() - t0, layers_traced=(depth,),
                       extrapolated=False, notes=notes)
