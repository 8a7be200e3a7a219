"""The DPO step under tensor parallel on a fake process group (needs torch, transformers).

The policy and a frozen bf16 reference copy each get torch's tensor-parallel plan (``trainfit.trace.tensor_parallel``:
column/row-parallel decoder layers and a vocabulary-parallel embedding) on one ``tp`` mesh, with the head TRL runs
under transformers' ``tp_plan``: column-parallel with its output gathered on every rank (``colwise_gather_output``,
``parallelize(gather_head=True)``; ``plan.dpo_ranks.gathered_head``), so each rank holds the whole vocabulary's bf16
logits and takes TRL's row-wise log-probs on them (``trainfit.trace.rl_passes.selective_log_softmax`` over
``logits[:, :-1]``, summed per sequence), as one GPU does. The step follows TRL's ``_compute_loss`` order
(``trainfit.trace.dpo_step.traced_dpo_step``, which the one-GPU trace runs too): the policy's concatenated forward
and log-probs with ``outputs`` kept, the no-grad reference forward (phase ``ref_logprob``), the sigmoid loss,
backward, optimizer step. One rank per tensor-parallel group (no FSDP), scope full, mode fast. NeMo RL's
vocabulary-parallel log-probs (``host_swap``) are not traced here: its reference runs before the step, and only
its policy phases are compared (tests/trace/test_dpo_model_parallel_trace.py).

One untracked warm-up step (against precomputed zero reference log-probs) creates the optimizer states first.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from trainfit.trace import build
from trainfit.trace.dpo_step import depth_run, start_tracker, traced_dpo_step, warm_up_dpo
from trainfit.trace.patches import torch_threads, unpacked_batches
from trainfit.trace.rl_passes import selective_log_softmax
from trainfit.trace.step import DepthRun, _vocab, region_namer
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
        warm_up_dpo(opt=opt, summed_logps=lambda: gathered_logps(model, ids), ref_logps=zeros, beta=req.dpo_beta)
        progress("trace", 0.5)
        regions, tr = start_tracker(model=model, ref_model=ref_model, opt=opt, ids=ids,
                                    precomputed_ref_logps=zeros if ref_model is None else None)
        with tensor_parallel.propagation_uncounted(tr), tr:
            _traced_step(req, model, ref_model, opt, ids, zeros, tr, progress)
        regions.remove()
        run = depth_run(req=req, depth=depth, tr=tr, rename=rename, params=params)
    progress("done", 1.0)
    return run


def _traced_step(req, model, ref_model, opt, ids, zeros, tr, progress) -> None:  # noqa: ANN001
    """The DPO step (``trainfit.trace.dpo_step.traced_dpo_step``) on gathered logits: the whole sequence's
    positions passed (sequence parallel shards the activations, not the ids); the reference copy is resident."""
    pos = torch.arange(ids.shape[1]).unsqueeze(0)

    def policy_forward() -> tuple[Any, torch.Tensor]:
        outputs = model(input_ids=ids, position_ids=pos)
        return outputs, _logps_of(outputs.logits, ids)

    traced_dpo_step(tr=tr, model=model, opt=opt, beta=req.dpo_beta, policy_forward=policy_forward,
                    reference_logps=(lambda: _no_grad_logps(ref_model, ids)) if ref_model is not None else None,
                    precomputed_ref_logps=zeros if ref_model is None else None, progress=progress)


def _no_grad_logps(model: Any, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return gathered_logps(model, ids)
