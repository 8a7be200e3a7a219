"""Trace the RL passes that run on CPU fake tensors (needs torch, transformers, peft).

Each pass is traced as its trainer runs it, with the fast byte tracker of the SFT step
(``trainfit.trace.step``), per phase and per layer region, so ``trainfit.trace.extrapolate`` reaches
full depth the same way:

``logprob`` (policy, reference or old-policy log-probs over G completions; GRPO/PPO)
    ``torch.no_grad()``; ``logits = model(input_ids).logits`` (bf16, every position; with
    ``TraceRequest.logits_to_keep`` the last ``logits_to_keep + 1`` only, as TRL's GRPO asks), then TRL's
    ``_get_per_token_logps_and_entropies`` (trl <= 0.2x grpo_trainer.py; TRL 1.16 still ships the
    same ``selective_log_softmax`` in trl/trainer/utils.py:538-601)::

        logits = logits[:, :-1, :]            # a view
        logits = logits / self.temperature    # a new bf16 tensor; the full logits die after it
        logps = selective_log_softmax(logits, input_ids[:, 1:])

    and for bf16 logits ``selective_log_softmax`` loops over the rows (utils.py:588-594)::

        for row_logits, row_labels in zip(logits, index):
            row_logps = F.log_softmax(row_logits, dim=-1)
            per_token_logps.append(row_logps.gather(dim=-1, index=row_labels))

    (``row_logps`` of row i is still bound while row i+1's log-softmax is written: two rows live).
``value`` (PPO critic values; also a reward model's scores)
    ``torch.no_grad()``; TRL's ``get_reward`` (trl/experimental/utils.py:746-786): the backbone
    (``model.model``) over the sequences, then ``model.score(last_hidden_state)``, one value per token.
``dpo_step``
    the policy's training step over ``2 * micro_batch_size`` sequences (chosen and rejected
    concatenated, as TRL's DPOTrainer does: ``chosen_logps, rejected_logps = logps.chunk(2)``),
    per-token log-probs as above (with grad; ``temperature`` 1: no division), summed per sequence,
    the sigmoid loss ``-logsigmoid(beta * ((c - c_ref) - (r - r_ref))).mean()`` against
    precomputed reference log-probs, or, with ``dpo_reference``, a live reference pass traced
    after the policy's forward with its outputs kept, as TRL's ``_compute_loss`` runs it (phase ``ref_logprob``:
    a no-grad ``logprob`` pass over the same batch, on a frozen bf16 copy for scope ``full`` or on the policy with
    ``disable_adapter()`` for LoRA). The step itself (warm-up, tracker, phases, loss) is
    ``trainfit.trace.dpo_step``'s, which the tensor-parallel DPO trace runs too.

One untracked warm-up step creates the optimizer states first (steady state), as for SFT.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

from trainfit.trace import build
from trainfit.trace.dpo_step import depth_run, start_tracker, traced_dpo_step, warm_up_dpo
from trainfit.trace.kernels import linear_attention_kernels
from trainfit.trace.patches import torch_threads, unpacked_batches
from trainfit.trace.step import DepthRun, _vocab, region_namer
from trainfit.trace.types import TraceRequest


def selective_log_softmax(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """TRL's ``selective_log_softmax`` (trl/trainer/utils.py:538-601, TRL 1.16), CPU branch.

    Re-implemented here (the trace extra does not depend on TRL); the memory-relevant structure is
    kept line for line: fp32 logits use ``logsumexp`` row by row, bf16 logits a row-wise
    ``log_softmax`` followed by ``gather``.
    """
    index = index.unsqueeze(-1)
    if logits.dtype in (torch.float32, torch.float64):
        selected_logits = torch.gather(logits, dim=-1, index=index)
        logsumexp_values = torch.stack([torch.logsumexp(lg, dim=-1) for lg in logits])
        per_token_logps = selected_logits - logsumexp_values.unsqueeze(-1)
    else:
        per_token_logps = []
        for row_logits, row_labels in zip(logits, index, strict=True):
            row_logps = F.log_softmax(row_logits, dim=-1)
            row_per_token_logps = row_logps.gather(dim=-1, index=row_labels)
            per_token_logps.append(row_per_token_logps)
        per_token_logps = torch.stack(per_token_logps)
    return per_token_logps.squeeze(-1)


def per_token_logps(model: Any, ids: torch.Tensor, temperature: float | None, logits_to_keep: int = 0) -> torch.Tensor:
    """GRPO's ``_get_per_token_logps``: logits shifted, divided, selected.

    ``temperature=None`` skips the division (DPO's policy and reference passes). ``logits_to_keep`` (the completion's
    length; 0: every position): TRL's GRPO from v0.14 asks the model for the last ``logits_to_keep + 1`` positions
    only and scores the last ``logits_to_keep`` tokens (huggingface/trl v0.15.0
    @00e58893809af89d07c2ff9c582ac5060888363c trl/trainer/grpo_trainer.py l.478-487)::

        logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=logits_to_keep + 1).logits
        logits = logits[:, :-1, :]
        input_ids = input_ids[:, -logits_to_keep:]
        logits = logits[:, -logits_to_keep:]
    """
    if logits_to_keep:
        logits = model(input_ids=ids, logits_to_keep=logits_to_keep + 1).logits
        logits = logits[:, :-1, :][:, -logits_to_keep:]
        labels = ids[:, -logits_to_keep:]
    else:
        logits = model(input_ids=ids).logits  # the output object is not kept
        logits = logits[:, :-1, :]
        labels = ids[:, 1:]
    if temperature is not None:
        logits = logits / temperature
    return selective_log_softmax(logits, labels)


def value_pass(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """TRL's ``get_reward``: backbone, then the score head on the last hidden state (b, s, 1)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    backbone = getattr(base, base.base_model_prefix)
    out = backbone(input_ids=ids, use_cache=False, return_dict=True, output_hidden_states=False)
    return base.score(out.last_hidden_state)


def _autocast(req: TraceRequest):  # noqa: ANN202
    if req.precision == "fp32_autocast":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _ref_context(req: TraceRequest, model: Any):  # noqa: ANN202
    if req.scope != "full" and hasattr(model, "disable_adapter"):
        return model.disable_adapter()
    return contextlib.nullcontext()


def run_depth(
    req: TraceRequest, depth: int, *, window: int = 1, progress: Callable[[str, float], None]
) -> DepthRun:
    """Build ``depth`` layers and trace the pass of ``req.pass_kind`` per phase."""
    progress("build", 0.0)
    meta = build.build_meta(req, depth)
    params = build.count_params(meta)  # the trained model's (the reference copy is not counted)
    ref_meta = build.build_meta(req, depth, scope="full") if req.dpo_reference and req.scope == "full" else None
    vocab = int(_vocab(meta))
    rename = region_namer(depth, window)
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch_threads(1))
        stack.enter_context(unpacked_batches())
        stack.enter_context(linear_attention_kernels())
        stack.enter_context(FakeTensorMode())
        model = build.materialize_fake(meta)
        ref_model = None
        if ref_meta is not None:
            ref_model = build.materialize_fake(ref_meta).eval()
            for p in ref_model.parameters():
                p.requires_grad_(False)
        seqs = 2 * req.micro_batch_size if req.pass_kind == "dpo_step" else req.micro_batch_size
        ids = torch.randint(0, vocab, (seqs, req.seq_len))
        opt = None
        ref_logps = None
        if req.pass_kind == "dpo_step":
            model.train()
            if req.gradient_checkpointing:
                build.enable_checkpointing(model)
            opt = build.make_optimizer(req, [p for p in model.parameters() if p.requires_grad])
            ref_logps = tuple(torch.zeros(req.micro_batch_size) for _ in range(2))  # precomputed (inputs)
            progress("warm-up", 0.1)
            warm_up_dpo(opt=opt, summed_logps=lambda: per_token_logps(model, ids, None).sum(dim=1),
                        ref_logps=ref_logps, beta=req.dpo_beta, loss_context=lambda: _autocast(req))
        else:
            model.eval()
        progress("trace", 0.5)
        precomputed = ref_logps if not req.dpo_reference else None
        regions, tr = start_tracker(model=model, ref_model=ref_model, opt=opt, ids=ids,
                                precomputed_ref_logps=precomputed)
        with tr:
            if req.pass_kind == "logprob":
                with tr.phase("logprob"), torch.no_grad(), _autocast(req):
                    out = per_token_logps(model, ids, req.temperature, req.logits_to_keep)
                del out
            elif req.pass_kind == "value":
                with tr.phase("value"), torch.no_grad(), _autocast(req):
                    out = value_pass(model, ids)
                del out
            else:
                _traced_dpo(req, model, ref_model, opt, ids, precomputed, tr, progress)
        regions.remove()
        run = depth_run(req=req, depth=depth, tr=tr, rename=rename, params=params)
    progress("done", 1.0)
    return run


def _traced_dpo(req, model, ref_model, opt, ids, precomputed, tr, progress) -> None:  # noqa: ANN001
    """One GPU's DPO step (``trainfit.trace.dpo_step.traced_dpo_step``): the policy's forward under the request's
    autocast; the live reference on the frozen bf16 copy (scope ``full``) or on the policy with
    ``disable_adapter()`` (LoRA)."""

    def policy_forward() -> tuple[Any, torch.Tensor]:
        with _autocast(req):
            outputs = model(input_ids=ids)
            logps = selective_log_softmax(outputs.logits[:, :-1, :], ids[:, 1:]).sum(dim=1)
        return outputs, logps

    def reference_logps() -> torch.Tensor:
        with torch.no_grad(), _ref_context(req, model), _autocast(req):
            return per_token_logps(ref_model if ref_model is not None else model, ids, None).sum(dim=1)

    traced_dpo_step(tr=tr, model=model, opt=opt, beta=req.dpo_beta, policy_forward=policy_forward,
                    reference_logps=reference_logps if req.dpo_reference else None,
                    precomputed_ref_logps=precomputed, progress=progress)


def pass_notes(req: TraceRequest) -> list[str]:
    """What the traced pass is, for :attr:`trainfit.trace.types.TraceResult.notes`."""
    if req.pass_kind == "logprob":
        return [
            f"no-grad log-prob pass over {req.micro_batch_size} x {req.seq_len} tokens: bf16 logits of "
            + (f"the last {req.logits_to_keep + 1} positions (TRL logits_to_keep)" if req.logits_to_keep
               else "every position")
            + f", logits[:, :-1] / {req.temperature:g}, TRL selective_log_softmax (row-wise log_softmax for bf16)"
        ]
    if req.pass_kind == "value":
        return [
            f"no-grad value pass over {req.micro_batch_size} x {req.seq_len} tokens: backbone + scalar score head"
            " (TRL get_reward), no vocabulary logits"
        ]
    ref = (
        "live reference pass after the policy's forward (phase ref_logprob; "
        + ("frozen bf16 copy resident)" if req.scope == "full" else "policy with its adapter disabled)")
        if req.dpo_reference
        else "reference log-probs precomputed"
    )
    return [
        f"DPO step over 2 x {req.micro_batch_size} sequences (chosen+rejected concatenated) of {req.seq_len} tokens,"
        f" sigmoid loss on summed per-token log-probs (TRL selective_log_softmax); {ref}"
    ]
