"""The DPO step under tensor parallel on a fake process group (needs torch, transformers).

The policy and a frozen bf16 reference copy each get torch's tensor-parallel plan (``trainfit.trace.tensor_parallel``:
column/row-parallel decoder layers and a vocabulary-parallel embedding) on one ``tp`` mesh, with the head TRL runs
under transformers' ``tp_plan``: column-parallel with its output gathered on every rank (``colwise_gather_output``,
``parallelize(gather_head=True)``; ``plan.dpo_ranks.gathered_head``), so each rank holds the whole vocabulary's bf16
logits and takes TRL's row-wise log-probs on them (``trainfit.trace.rl_passes.selective_log_softmax`` over
``logits[:, :-1]``, summed per sequence), as one GPU does. The step follows TRL's ``_compute_loss`` order
(``trainfit.trace.rl_passes._traced_dpo``): the policy's concatenated forward and log-probs with ``outputs`` kept,
the no-grad reference forward (phase ``ref_logprob``), the sigmoid loss, backward, optimizer step. One rank per
tensor-parallel group (no FSDP), scope full, mode fast. NeMo RL's vocabulary-parallel log-probs (``host_swap``) are
not traced here: its reference runs before the step, and only its policy phases are compared
(tests/trace/test_dpo_model_parallel_trace.py).

One untracked warm-up step (against precomputed zero reference log-probs) creates the optimizer states first.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from trainfit.trace import build
from trainfit.trace.patches import torch_threads, unpacked_batches
from trainfit.trace.rl_passes import _dpo_sigmoid, selective_log_softmax
from trainfit.trace.step import DepthRun, _opt_state_tensors, _vocab, region_namer
from trainfit.trace.types import TraceRequest


def gathered_logps(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """Summed token log-probs per sequence, ``(b,)``, over a gathered head: TRL's ``selective_log_softmax`` on the
    whole vocabulary's logits (the reference's no-grad pass: ``outputs`` not kept)."""
    pos = torch.arange(ids.shape[1]).unsqueeze(0)  # the whole sequence's positions (sequence parallel shards it)
    logits = model(input_ids=ids, position_ids=pos).logits
    return _logps_of(logits, ids)


def _logps_of(logits: Any, ids: torch.Tensor) -> torch.Tensor:
    return selective_log_softmax(logits[:, :-1, :], ids[:, 1:]).sum(dim=1)


def run_depth(req: TraceRequest, depth: int, *, window: int = 1, progress: Callable[[str, float], None]) -> DepthRun:
    """Build ``depth`` layers of the policy and its reference, tensor-parallel, and trace the DPO step per phase."""
    from torch.distributed.device_mesh import init_device_mesh

    from trainfit.trace import tensor_parallel
    from trainfit.trace.fsdp import fake_process_group
    from trainfit.trace.regions import LayerRegions
    from trainfit.trace.tracker import FastTracker

    progress("build", 0.0)
    meta = build.build_meta(req, depth)
    tensor_parallel.check(req, meta.config.model_type, meta.config.tie_word_embeddings)
    params = build.count_params(meta)  # the trained model's (the reference copy is not counted)
    ref_meta = build.build_meta(req, depth, scope="full") if req.dpo_reference else None
    vocab = int(_vocab(meta))
    rename = region_namer(depth, window)
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch_threads(1))
        stack.enter_context(unpacked_batches())
        stack.enter_context(fake_process_group(req.world_size))
        mesh = init_device_mesh("cpu", (req.tensor_parallel,))  # outside fake mode: it reads its rank map
        stack.enter_context(FakeTensorMode())
        model = build.materialize_fake(meta)
        model.train()
        if req.gradient_checkpointing:
            build.enable_checkpointing(model)
        tensor_parallel.parallelize(model, mesh, sequence_parallel=req.sequence_parallel, gather_head=True)
        ref_model = None
        if ref_meta is not None:
            ref_model = build.materialize_fake(ref_meta).eval()
            for p in ref_model.parameters():
                p.requires_grad_(False)
            tensor_parallel.parallelize(ref_model, mesh, sequence_parallel=req.sequence_parallel,
                                          gather_head=True)
        trained = [p for p in model.parameters() if p.requires_grad]
        opt = build.make_optimizer(req, tensor_parallel.param_groups(trained))
        ids = torch.randint(0, vocab, (2 * req.micro_batch_size, req.seq_len))
        zeros = tuple(torch.zeros(req.micro_batch_size) for _ in range(2))  # precomputed (inputs)
        progress("warm-up", 0.1)
        loss = _dpo_sigmoid(gathered_logps(model, ids), zeros, req.dpo_beta)
        loss.backward()
        del loss
        opt.step()
        opt.zero_grad(set_to_none=True)
        progress("trace", 0.5)
        regions = LayerRegions(build.decoder_layers(model))
        if ref_model is not None:
            regions.attach(build.decoder_layers(ref_model))
        tr = FastTracker(regions)
        tr.add_existing(model)
        if ref_model is not None:
            tr.add_existing(ref_model)
        tr.add_existing(*_opt_state_tensors(opt), tag="optimizer_states")
        tr.add_existing(ids, tag="activations")
        if ref_model is None:
            tr.add_existing(*zeros, tag="activations")
        with tensor_parallel.propagation_uncounted(tr), tr:
            _traced_step(req, model, ref_model, opt, ids, zeros, tr, progress)
        regions.remove()
        phases = req.phase_names
        peaks = {name: tr.phases[name].peak_bytes for name in phases}
        bds = tr.breakdowns()
        regs = tr.region_peaks(rename)
    progress("done", 1.0)
    return DepthRun(depth, peaks, {n: bds[n] for n in phases}, {n: regs[n] for n in phases}, params=params)


def _traced_step(req, model, ref_model, opt, ids, ref_logps, tr, progress) -> None:  # noqa: ANN001
    """TRL's ``_compute_loss`` order (``trainfit.trace.rl_passes._traced_dpo``) on gathered logits."""
    grads = [p for p in model.parameters() if p.requires_grad]
    pos = torch.arange(ids.shape[1]).unsqueeze(0)
    with tr.phase("forward"):
        outputs = model(input_ids=ids, position_ids=pos)
        logps = _logps_of(outputs.logits, ids)
        tr.mark_activations()
    if ref_model is not None:
        with tr.phase("ref_logprob"), torch.no_grad():
            ref = gathered_logps(ref_model, ids)
            ref_logps = ref.chunk(2, dim=0)
            tr.tag(ref_logps, "activations")
            del ref
    loss = _dpo_sigmoid(logps, ref_logps, req.dpo_beta)
    del outputs, logps
    progress("backward", 0.65)
    with tr.phase("backward"):
        loss.backward()
        tr.tag([p.grad for p in grads if p.grad is not None], "gradients")
    loss = None
    progress("optimizer", 0.85)
    with tr.phase("optimizer_step"):
        opt.step()
        opt.zero_grad(set_to_none=True)
