"""One pipeline stage under its schedule, on fake tensors (needs torch, transformers).

The stage is the model cut to its layers: the first keeps the embedding (its final norm and head
become identities), the last the final norm, head and loss (its embedding an identity, its input a
received ``inputs_embeds`` that needs a gradient), middle stages neither. Its micro-batches run in the
order Megatron-Core's 1F1B gives pipeline rank ``s`` of ``pp`` with ``m`` micro-batches
(``get_pp_rank_microbatches``: ``min(pp - s - 1, m)`` warm-up forwards, then one forward and one
backward in turn, then the remaining backwards), with what torch's ``torch.distributed.pipelining``
stage keeps between them: the received input (stages after the first) and the stage output until
their backward. Received tensors (inputs, output gradients) are made where the step receives them.
The gradients of the micro-batches accumulate; one optimizer step follows. A warm-up step creates
the optimizer states first, as for every trace.

Each forward and backward is a phase of its own; a phase's peak is the largest over its
occurrences. Full depth of the stage only (no extrapolation); one rank, no process group (the
point-to-point transfers only move tensors that are modelled as made or kept here).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from trainfit.trace import build
from trainfit.trace.kernels import linear_attention_kernels
from trainfit.trace.patches import torch_threads, unpacked_batches
from trainfit.trace.types import TraceRequest, TraceUnsupported


def schedule(pp: int, stage: int, micro_batches: int) -> list[tuple[str, int]]:
    """Megatron-Core's non-interleaved 1F1B order on pipeline rank ``stage``: ("F"|"B", micro-batch)."""
    warmup = min(pp - stage - 1, micro_batches)
    order = [("F", i) for i in range(warmup)]
    for i in range(micro_batches - warmup):
        order += [("F", warmup + i), ("B", i)]
    order += [("B", i) for i in range(micro_batches - warmup, micro_batches)]
    return order


def _cut(model: nn.Module, *, first: bool, last: bool) -> None:
    """Drop what the stage does not hold: embedding unless first, final norm and head unless last."""
    base = model.model
    if not first:
        base.embed_tokens = nn.Identity()
    if not last:
        base.norm = nn.Identity()
        model.lm_head = nn.Identity()


def stage_depth(req: TraceRequest) -> int:
    """Decoder layers of the traced stage: ``num_layers / pp``, the uneven split's share
    (``trainfit.memory.pipeline.stage_layer_counts``, Megatron-Core's first/last stage sizes), or the stage's
    entry of ``pipeline_layout`` (one per stage: the interleaved schedule is not traced)."""
    from trainfit.memory.pipeline import layout_problem, split_problem, stage_layer_counts
    from trainfit.trace.extrapolate import full_depth

    layers = full_depth(req.hf_config)
    first, last = req.pipeline_first_stage_layers, req.pipeline_last_stage_layers
    if req.pipeline_layout is not None:
        layout = tuple(req.pipeline_layout)
        if len(layout) != req.pipeline_parallel:
            raise TraceUnsupported(f"trace: pipeline_layout has {len(layout)} stages for pipeline_parallel"
                                   f" {req.pipeline_parallel}; one stage per rank is traced (no virtual stages)")
        why = layout_problem(layers, layout, req.pipeline_parallel)
        if why:
            raise TraceUnsupported(f"trace: parallel.pipeline_layout: {why}")
        return layout[req.pipeline_stage]
    why = split_problem(layers, req.pipeline_parallel, 1, first=first, last=last)
    if why:
        raise TraceUnsupported(f"trace: pipeline_parallel {req.pipeline_parallel}: {why}")
    return stage_layer_counts(layers, req.pipeline_parallel, first=first, last=last)[req.pipeline_stage]


def build_stage(req: TraceRequest) -> nn.Module:
    """The stage's model on meta: its decoder layers (``stage_depth``) and its ends."""
    meta = build.build_meta(req, stage_depth(req))
    if getattr(meta.config, "tie_word_embeddings", False) and req.pipeline_parallel > 1:
        raise TraceUnsupported("trace: pipeline stages of a tied-embedding model are not traced")
    if not hasattr(meta, "model") or not hasattr(meta.model, "layers"):
        raise TraceUnsupported("trace: pipeline stages are traced for decoder-only causal LMs with model.layers")
    _cut(meta, first=req.pipeline_stage == 0, last=req.pipeline_stage == req.pipeline_parallel - 1)
    return meta


class _Stage:
    """Runs the stage's forwards and backwards, keeping what a pipeline stage keeps between them."""

    def __init__(self, model: nn.Module, req: TraceRequest, vocab: int) -> None:
        self.model, self.req = model, req
        self.first = req.pipeline_stage == 0
        self.last = req.pipeline_stage == req.pipeline_parallel - 1
        self.ids = torch.randint(0, vocab, (req.micro_batch_size, req.seq_len))
        self.hidden = model.config.hidden_size
        self.dtype = build.param_dtype(req) if req.precision == "bf16" else torch.bfloat16
        self.kept: dict[int, tuple[Any, Any]] = {}

    def forward(self, mb: int) -> None:
        b, s = self.req.micro_batch_size, self.req.seq_len
        x = None if self.first else torch.empty(b, s, self.hidden, dtype=self.dtype, requires_grad=True)
        kw: dict[str, Any] = {"input_ids": self.ids} if self.first else {"inputs_embeds": x}
        if self.last:
            out = self.model(labels=self.ids, **kw).loss
        else:
            out = self.model.model(**kw).last_hidden_state
        self.kept[mb] = (out, x)

    def backward(self, mb: int) -> None:
        out, x = self.kept.pop(mb)
        if self.last:
            out.backward()
        else:
            out.backward(torch.empty(out.shape, dtype=out.dtype))  # the output gradient, as received
        del out, x  # the input gradient is sent on; nothing of this micro-batch stays

    def step(self, order: list[tuple[str, int]], phase: Callable[[str], Any], tracker: Any = None) -> None:
        grads = [p for p in self.model.parameters() if p.requires_grad]
        for k, (kind, mb) in enumerate(order):
            name = f"{'forward' if kind == 'F' else 'backward'}#{k}"
            with phase(name):
                (self.forward if kind == "F" else self.backward)(mb)
                if tracker is not None and kind == "F":
                    for info in tracker.live_infos():  # what this forward made and keeps: activations
                        if info.phase == name and not info.tag:
                            info.tag = "activations"
                elif tracker is not None:
                    tracker.tag([p.grad for p in grads if p.grad is not None], "gradients")


def trace_stage(req: TraceRequest, progress: Callable[[str, float], None]):  # noqa: ANN201
    """Per-phase peaks (the largest over each phase's occurrences) and breakdowns of the stage's step."""
    from trainfit.trace.regions import LayerRegions
    from trainfit.trace.step import _opt_state_tensors
    from trainfit.trace.tracker import FastTracker

    if req.precision != "bf16":
        raise TraceUnsupported("trace: pipeline stages are traced in bf16 only")
    progress("build", 0.0)
    meta = build_stage(req)
    vocab = int(req.hf_config.get("vocab_size") or meta.config.vocab_size)
    order = schedule(req.pipeline_parallel, req.pipeline_stage, req.micro_batches)
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch_threads(1))
        stack.enter_context(unpacked_batches())
        stack.enter_context(linear_attention_kernels())
        stack.enter_context(FakeTensorMode())
        model = build.materialize_fake(meta)
        model.train()
        if req.gradient_checkpointing or req.selective_checkpointing != "none":
            build.enable_checkpointing(model, selective=req.selective_checkpointing)
        opt = build.make_optimizer(req, [p for p in model.parameters() if p.requires_grad])
        stage = _Stage(model, req, vocab)
        progress("warm-up", 0.1)
        stage.step(order, lambda name: contextlib.nullcontext())
        opt.step()
        opt.zero_grad(set_to_none=True)
        regions = LayerRegions(build.decoder_layers(model))
        tr = FastTracker(regions)
        tr.add_existing(model)
        tr.add_existing(*_opt_state_tensors(opt), tag="optimizer_states")
        tr.add_existing(stage.ids, tag="activations")
        progress("trace", 0.5)
        with tr:
            stage.step(order, tr.phase, tr)
            with tr.phase("optimizer_step"):
                opt.step()
                opt.zero_grad(set_to_none=True)
        regions.remove()
    progress("done", 1.0)
    bds = tr.breakdowns()
    peaks: dict[str, int] = {}
    breakdowns: dict[str, dict[str, int]] = {}
    for name, ph in tr.phases.items():
        kind = name.split("#")[0]
        if ph.peak_bytes > peaks.get(kind, -1):
            peaks[kind], breakdowns[kind] = ph.peak_bytes, bds[name]
    return peaks, breakdowns, order
