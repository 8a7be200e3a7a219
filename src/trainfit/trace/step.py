"""Trace one steady-state training step at a given depth (needs torch, transformers, peft)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from trainfit.trace import build
from trainfit.trace.kernels import linear_attention_kernels
from trainfit.trace.patches import torch_threads, unpacked_batches
from trainfit.trace.types import PHASES, TraceRequest


@dataclass(frozen=True)
class DepthRun:
    """Per-phase peaks (bytes) and breakdowns of one traced depth."""

    depth: int
    peaks: dict[str, int]
    breakdowns: dict[str, dict[str, int]]
    regions: dict[str, dict[tuple, tuple[int, dict[str, int]]]]
    """Per phase: region -> (peak bytes, breakdown); layer regions renamed ("first"|"last", offset)."""
    notes: tuple[str, ...] = ()
    reserved: int | None = None
    """The caching allocator's reserved high-water, replayed from the step's allocation order
    (fast mode, one rank); None where it is not replayed."""
    params: tuple[int, int] | None = None
    """(total, trainable) parameters of the traced model, tied weights once (global shapes under
    FSDP2 and tensor parallel); None where the tracer does not count them."""


def region_namer(depth: int, window: int) -> Callable[[tuple], tuple | None]:
    """Map ("layer", j) to ("first", j) for j < window, ("last", depth - 1 - j) for the last
    ``window`` layers, and the middle layers to None."""

    def rename(key: tuple) -> tuple | None:
        if key[0] != "layer":
            return key
        j = key[1]
        if j < window:
            return ("first", j)
        if j >= depth - window:
            return ("last", depth - 1 - j)
        return None

    return rename


def _forward(model, ids, req: TraceRequest):  # noqa: ANN001, ANN202
    ctx = (
        torch.autocast("cpu", dtype=torch.bfloat16)
        if req.precision == "fp32_autocast"
        else contextlib.nullcontext()
    )
    with ctx:
        if req.tensor_parallel > 1:
            from trainfit.trace import tensor_parallel

            return tensor_parallel.forward(model, ids, req)
        if req.padding_mask:  # a padding collator's int64 mask (its values never reach the fake tensors)
            return model(input_ids=ids, labels=ids, attention_mask=torch.ones_like(ids))
        return model(input_ids=ids, labels=ids)


def _loss_and_output(model, ids, req: TraceRequest):
    """The loss and what the loop holds through backward (None: the output is dropped, as the Trainer does)."""
    if req.kept_output_dtype == "fp32":
        from trainfit.trace.loops import prime_rl_sft_loss

        return prime_rl_sft_loss(model, ids, req)
    out = _forward(model, ids, req)
    return out.loss, (out if req.keep_outputs else None)


def _warm_optimizer(model, opt) -> None:  # noqa: ANN001
    """The warm-up: create the optimizer states with one step on zero gradients (freed after). A full
    forward/backward/step warm-up leaves the same state: every traced phase's peak and breakdown, the
    allocator replay and MemTracker's categories are equal to the byte with either (checked on one rank,
    LoRA, fp32 autocast, FSDP2, tensor and sequence parallel and a hybrid), at half the cost."""
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)


def _opt_state_tensors(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [v for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor)]


def run_depth(
    req: TraceRequest, depth: int, *, window: int = 1, progress: Callable[[str, float], None]
) -> DepthRun:
    """Build ``depth`` layers, run a warm-up step, then trace the steady-state step per phase."""
    with warmed_up(req, depth, progress) as (model, opt, ids):
        params = build.count_params(model)
        progress("trace", 0.5)
        if req.mode == "memtracker":
            from trainfit.trace.memtrack import traced_step_memtracker

            reserved, notes = None, ()
            peaks, bds, regs = traced_step_memtracker(
                model, opt, ids, req, _forward, progress, region_namer(depth, window)
            )
        else:
            peaks, bds, regs, reserved, tr = _traced_step_fast(model, opt, ids, req, progress,
                                                               region_namer(depth, window))
            notes = tr.notes
    progress("done", 1.0)
    return DepthRun(depth, peaks, bds, regs, notes=notes, reserved=reserved, params=params)


def one_trace_supported(req: TraceRequest) -> bool:
    """Whether :func:`run_depth_pair` applies: the fast tracker on a training step, on one rank or FSDP2, in
    bf16 or (on one rank) fp32 with bf16 autocast. Else each depth is traced (tensor parallel, MemTracker, the
    RL passes; fp32 autocast under FSDP2, whose bf16 gathered copies (``fsdp.mixed_precision``) belong to no
    parameter and are not checked against the splice)."""
    return (req.mode == "fast" and req.pass_kind == "train_step" and req.tensor_parallel == 1
            and not req.replay_allocator and (req.precision == "bf16" or req.world_size == 1))


def run_depth_pair(
    req: TraceRequest, depth: int, period: int, *, window: int, progress: Callable[[str, float], None]
) -> tuple[DepthRun, DepthRun]:
    """The runs at ``depth - period`` and ``depth`` from one trace at ``depth``: the shallower step is the
    same step with the middle period (the ``period`` layers after the first ``window``) cut out of its time
    line and the storages around the cut spliced (``FastTracker.without_layers``). Equal to the two traces
    byte for byte (tests/trace/test_trace_extrapolation.py: peaks, breakdowns, region peaks and parameter
    counts), at the cost of the deeper one."""
    if depth < 2 * window + period:
        raise ValueError(f"no middle period at depth {depth} (window {window}, period {period})")
    middle = range(window, window + period)
    with warmed_up(req, depth, progress) as (model, opt, ids):
        total, trainable = build.count_params(model)
        progress("trace", 0.5)
        rename = region_namer(depth, window)
        peaks, bds, regs, _, tr = _traced_step_fast(model, opt, ids, req, progress, rename, middle=middle)
        mid = {id(p): p for j in middle for p in build.decoder_layers(model)[j].parameters()}.values()
        shallow_params = (total - sum(build.logical_numel(p) for p in mid),
                          trainable - sum(build.logical_numel(p) for p in mid if p.requires_grad))
        s_peaks, s_bds, s_regs = tr.without_layers(rename)
    progress("done", 1.0)
    return (DepthRun(depth - period, s_peaks, s_bds, s_regs, notes=tr.notes, params=shallow_params),
            DepthRun(depth, peaks, bds, regs, notes=tr.notes, params=(total, trainable)))


@contextlib.contextmanager
def warmed_up(
    req: TraceRequest, depth: int, progress: Callable[[str, float], None], *, gpu_kernels: bool = True
) -> Iterator[tuple[Any, torch.optim.Optimizer, torch.Tensor]]:
    """``(model, optimizer, input_ids)`` of a ``depth``-layer train step on fake ``cpu`` tensors, after
    an untracked warm-up (``_warm_optimizer``: the optimizer states exist). FSDP2-sharded on a fake process group
    when ``req.world_size > 1``. The fake mode (and one intra-op thread) stays active until exit."""
    from trainfit.trace.fsdp import fake_process_group, make_mesh, premade_mesh_concatenation, shard

    progress("build", 0.0)
    meta = build.build_meta(req, depth)
    vocab = int(_vocab(meta))
    tp = req.tensor_parallel
    if tp > 1:
        from trainfit.trace import tensor_parallel

        tensor_parallel.check(req, meta.config.model_type, meta.config.tie_word_embeddings)
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch_threads(1))
        stack.enter_context(unpacked_batches())
        if gpu_kernels:  # False: Gated DeltaNet runs transformers' torch path (its aten ops are counted)
            stack.enter_context(linear_attention_kernels())
        mesh = tp_mesh = None
        if req.world_size > 1:
            stack.enter_context(fake_process_group(req.world_size))
            mesh, tp_mesh = make_mesh(req.world_size, tp)
            if mesh is not None and tp_mesh is not None:
                stack.enter_context(premade_mesh_concatenation(mesh, tp_mesh))
        if tp > 1:
            from torch.distributed.tensor.parallel import loss_parallel

            stack.enter_context(loss_parallel())
        stack.enter_context(FakeTensorMode())
        model = build.materialize_fake(meta)
        if req.scope == "qlora":
            from trainfit.trace.qlora import quantize_fake

            quantize_fake(model, weight_dtype=build.param_dtype(req), double_quant=req.double_quant)
        model.train()
        if req.gradient_checkpointing or req.selective_checkpointing != "none":
            build.enable_checkpointing(model, selective=req.selective_checkpointing,
                                       every_n_layers=req.checkpoint_every_n_layers)
        if tp > 1:
            tensor_parallel.parallelize(model, tp_mesh, sequence_parallel=req.sequence_parallel)
        if mesh is not None:
            if req.fsdp_shard_embeddings:
                _shard_embeddings(model, mesh, req.precision)
            shard(model, build.decoder_layers(model), mesh, precision=req.precision)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = build.make_optimizer(req, tensor_parallel.param_groups(params) if tp > 1 else params)
        ids = torch.randint(0, vocab, (req.micro_batch_size, req.seq_len))
        progress("warm-up", 0.1)
        _warm_optimizer(model, opt)
        yield model, opt, ids


def _shard_embeddings(model: Any, mesh: Any, precision: str = "bf16") -> None:
    """torchtune's ``custom_sharded_layers: [tok_embeddings, output]``: the input embedding and the
    output head become FSDP2 units of their own (before the layers and the root are wrapped)."""
    from torch.distributed.fsdp import fully_shard

    from trainfit.trace.fsdp import mixed_precision

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    for module in (inner.get_input_embeddings(), inner.get_output_embeddings()):
        if module is not None:
            fully_shard(module, mesh=mesh, **mixed_precision(precision))


def steady_step(
    model: Any,
    opt: torch.optim.Optimizer,
    ids: torch.Tensor,
    req: TraceRequest,
    phase: Callable[[str], ContextManager[Any]],
    *,
    progress: Callable[[str, float], None],
    after_forward: Callable[[], None] = lambda: None,
    after_backward: Callable[[], None] = lambda: None,
) -> None:
    """The measured step, phase by phase (``phase(name)`` wraps each): forward (the output is dropped
    before backward unless ``req.keep_outputs``, as the Trainer keeps only the loss), backward, then
    ``opt.step()`` and ``zero_grad(set_to_none=True)``."""
    with phase("forward"):
        loss, out = _loss_and_output(model, ids, req)  # out None: the Trainer keeps only the loss
        after_forward()
    progress("backward", 0.65)
    with phase("backward"):
        loss.backward()
        after_backward()
    del out  # the traced loop drops what it kept after backward (GROUND_TRUTH's step); the plan's
    # loop.keeps_output_through_backward loops keep it bound through the optimizer step (memory.phases
    # StepTerms.kept_output), so with that flag the plan's optimizer step exceeds the trace's by the kept output
    loss = None
    progress("optimizer", 0.85)
    with phase("optimizer_step"):
        opt.step()
        opt.zero_grad(set_to_none=True)


def _vocab(model: Any) -> int:
    return model.get_input_embeddings().weight.shape[0]


def _traced_step_fast(model, opt, ids, req, progress, rename, *, middle=None):  # noqa: ANN001, ANN202
    """Trace the steady step with the fast tracker. ``middle`` (a range of decoder layers): also record what
    each layer owns (its weights, gradients and optimizer states) and when the middle layers run, for
    ``FastTracker.without_layers``."""
    from trainfit.trace.regions import LayerRegions
    from trainfit.trace.tracker import FastTracker

    layers = build.decoder_layers(model)
    regions = LayerRegions(layers)
    tr = FastTracker(regions)
    tr.add_existing(model)
    tr.add_existing(*_opt_state_tensors(opt), tag="optimizer_states")
    tr.add_existing(ids, tag="activations")
    grads = [p for p in model.parameters() if p.requires_grad]
    owned = [list(layer.parameters()) for layer in layers] if middle is not None else []
    if middle is not None:
        tr.record_samples(middle)
        for j, (layer, ps) in enumerate(zip(layers, owned)):
            tr.own([*ps, *layer.buffers()], j)
            tr.own([v for p in ps for v in opt.state.get(p, {}).values() if isinstance(v, torch.Tensor)], j)

    def after_backward() -> None:
        tr.tag([p.grad for p in grads if p.grad is not None], "gradients")
        for j, ps in enumerate(owned):
            tr.own([p.grad for p in ps if p.grad is not None], j)
    uncounted = contextlib.nullcontext()
    if req.tensor_parallel > 1:
        from trainfit.trace.tensor_parallel import propagation_uncounted

        uncounted = propagation_uncounted(tr)
    decomposed = contextlib.nullcontext()
    if req.scope == "qlora":
        from trainfit.trace.qlora import Gemm4bitDecomposed

        decomposed = Gemm4bitDecomposed()  # above the tracker: its steps are counted
    with uncounted, tr, decomposed:
        steady_step(model, opt, ids, req, tr.phase, progress=progress, after_forward=tr.mark_activations,
                    after_backward=after_backward)
    regions.remove()
    peaks = {name: tr.phases[name].peak_bytes for name in PHASES}
    reserved = tr.replay_reserved() if req.replay_allocator else None
    return peaks, tr.breakdowns(), tr.region_peaks(rename), reserved, tr
