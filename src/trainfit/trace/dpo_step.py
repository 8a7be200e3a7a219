"""The DPO step's tail, one implementation for every DPO trace (needs torch).

Both DPO tracers build their models their own way (``trainfit.trace.rl_passes``: one GPU, LoRA or full;
``trainfit.trace.dpo_tensor_parallel``: a tensor-parallel rank with a gathered head) and hand the same pieces here:

* ``warm_up_dpo``: the untracked warm-up step against precomputed reference log-probs (it creates the optimizer
  states, so the traced step is the steady state);
* ``start_tracker``: the byte tracker over the policy's (and the resident reference copy's) decoder layers,
  with what exists before the step registered (weights, optimizer states, input ids, precomputed reference
  log-probs);
* ``traced_dpo_step``: TRL's ``_compute_loss`` order: the policy's concatenated forward and its summed log-probs
  with ``outputs`` kept, then (live reference) the no-grad reference pass (phase ``ref_logprob``), then the sigmoid
  loss; ``outputs`` dies before the backward (huggingface/trl trl/trainer/dpo_trainer.py l.1340-1382
  @f2cd57710ae345ea6428ae95363267fcf38a3dc8); backward, optimizer step;
* ``depth_run``: the traced phases' peaks, breakdowns and region peaks as a ``DepthRun``.

What differs between the tracers (the forward's arguments, autocast, the head, where the reference's weights come
from) stays in the callables they pass.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
import torch.nn.functional as F

from trainfit.trace import build
from trainfit.trace.step import DepthRun, _opt_state_tensors
from trainfit.trace.types import TraceRequest

RefLogps = tuple[torch.Tensor, torch.Tensor]
"""The reference's summed log-probs of the chosen and of the rejected sequences, ``(b,)`` each."""


def dpo_sigmoid(logps: torch.Tensor, ref: RefLogps, beta: float) -> torch.Tensor:
    """The sigmoid loss on the policy's summed log-probs of [chosen; rejected] and the reference's:
    ``-logsigmoid(beta * ((c - c_ref) - (r - r_ref))).mean()``."""
    chosen, rejected = logps.chunk(2, dim=0)
    ref_chosen, ref_rejected = ref
    logits = (chosen - ref_chosen) - (rejected - ref_rejected)
    return -F.logsigmoid(beta * logits).mean()


def warm_up_dpo(*, opt: Any, summed_logps: Callable[[], torch.Tensor], ref_logps: RefLogps, beta: float,
                loss_context: Callable[[], Any] = contextlib.nullcontext) -> None:
    """One untracked step against ``ref_logps`` (precomputed): loss (inside ``loss_context()``), backward,
    optimizer step, gradients dropped."""
    with loss_context():
        loss = dpo_sigmoid(summed_logps(), ref_logps, beta)
    loss.backward()
    del loss
    opt.step()
    opt.zero_grad(set_to_none=True)


def start_tracker(*, model: Any, ref_model: Any | None, opt: Any | None, ids: torch.Tensor,
                      precomputed_ref_logps: RefLogps | None) -> tuple[Any, Any]:
    """The regions over the policy's (and a resident reference copy's) decoder layers and a ``FastTracker`` with
    the tensors that exist before the step registered; ``precomputed_ref_logps`` (None with a live reference) are
    inputs, counted as activations. Returns ``(regions, tracker)``; the caller removes the regions."""
    from trainfit.trace.regions import LayerRegions
    from trainfit.trace.tracker import FastTracker

    regions = LayerRegions(build.decoder_layers(model))
    if ref_model is not None:
        regions.attach(build.decoder_layers(ref_model))
    tr = FastTracker(regions)
    tr.add_existing(model)
    if ref_model is not None:
        tr.add_existing(ref_model)
    if opt is not None:
        tr.add_existing(*_opt_state_tensors(opt), tag="optimizer_states")
    tr.add_existing(ids, tag="activations")
    if precomputed_ref_logps is not None:
        tr.add_existing(*precomputed_ref_logps, tag="activations")
    return regions, tr


def traced_dpo_step(*, tr: Any, model: Any, opt: Any, beta: float,
                    policy_forward: Callable[[], tuple[Any, torch.Tensor]],
                    reference_logps: Callable[[], torch.Tensor] | None, precomputed_ref_logps: RefLogps | None,
                    progress: Callable[[str, float], None]) -> None:
    """TRL's ``_compute_loss`` order, phase by phase, on the tracker ``tr`` (already entered).

    ``policy_forward()`` returns ``(outputs, summed_logps)`` of the concatenated [chosen; rejected] batch with grad
    (``outputs`` is kept until the loss exists, as TRL keeps it); ``reference_logps()`` (a live reference) returns
    the reference's summed log-probs of the same batch, run under its own ``torch.no_grad()``; with None the
    ``precomputed_ref_logps`` are used."""
    grads = [p for p in model.parameters() if p.requires_grad]
    with tr.phase("forward"):
        outputs, logps = policy_forward()
        tr.mark_activations()
    ref_logps = precomputed_ref_logps
    if reference_logps is not None:
        with tr.phase("ref_logprob"):
            ref = reference_logps()
            ref_logps = ref.chunk(2, dim=0)
            tr.tag(ref_logps, "activations")
            del ref
    loss = dpo_sigmoid(logps, ref_logps, beta)
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


def depth_run(*, req: TraceRequest, depth: int, tr: Any, rename: Callable[..., Any],
              params: tuple[int, int] | None) -> DepthRun:
    """The traced phases of ``req`` as a ``DepthRun``: per phase its peak, breakdown and region peaks."""
    phases = req.phase_names
    peaks = {name: tr.phases[name].peak_bytes for name in phases}
    bds = tr.breakdowns()
    regs = tr.region_peaks(rename)
    return DepthRun(depth, peaks, {n: bds[n] for n in phases}, {n: regs[n] for n in phases}, params=params)
