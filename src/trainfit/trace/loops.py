"""Training loops other than the transformers Trainer's, as the fake-tensor trace runs them (``TraceRequest``
options). Imported by ``trainfit.trace.step`` and ``trainfit.trace.memtrack``."""

from __future__ import annotations

import contextlib
from typing import Any

import torch


def prime_rl_sft_loss(model: Any, ids: torch.Tensor, req: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """prime-rl's SFT micro-step up to ``.backward()`` (PrimeIntellect-ai/prime-rl
    @d8f290ef0358a804f1912bd29ea1b37cc56894b4): ``forward`` (src/prime_rl/trainer/model.py l.481-494) returns
    ``cast_float_and_contiguous(out)`` (models/layers/lm_head.py l.21-32: ``tensor.float().contiguous()``), so the
    model's bf16 logits go when it returns; sft/train.py l.246-272 scores ``CrossEntropyLoss(reduction="none")``
    (l.165-168, the default ``loss_impl: torch``) on ``logits.view(-1, V)`` and keeps ``out`` (the fp32 copy)
    through backward. The masked mean ``loss[loss_mask].mean()`` is taken as ``loss.mean()`` (the benchmark's
    mask is all ones; a boolean index has no fake-tensor shape). Returns (loss, the kept fp32 logits)."""
    with (torch.autocast("cpu", dtype=torch.bfloat16) if req.precision == "fp32_autocast" else contextlib.nullcontext()):
        out = model(input_ids=ids)
    logits = out.logits.float().contiguous()
    del out
    b, s, v = logits.shape
    loss = torch.nn.CrossEntropyLoss(reduction="none")(logits.view(-1, v), ids.view(-1)).view(b, s)
    return loss.mean(), logits
