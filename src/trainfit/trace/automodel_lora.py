"""NeMo Automodel's LoRA wrapper, as its unfused path runs it, for traces and saved-tensor measurements.

NeMo Automodel (NVIDIA-NeMo/Automodel ``nemo_automodel/components/_peft/lora.py``
@2861c4143cd335539213b1b6d0c890cb17682444) does not use PEFT: ``LinearLoRA`` keeps the frozen base weight and
adds ``lora_A`` (in -> dim) and ``lora_B`` (dim -> out), both ``nn.Linear`` without bias in the base weight's dtype
unless ``lora_dtype`` says otherwise (l.203, l.213-214), ``scale = alpha / dim`` (l.188). Its
``forward`` (l.252-316) runs ``res = F.linear(x, weight, bias)``, then with ``dropout_position == "pre"``
``x = F.dropout(x)``, ``lora_res = lora_B(lora_A(x) * scale)``, with ``"post"`` (``PeftConfig`` default, l.53)
``lora_res = F.dropout(lora_res)``, and returns ``res + lora_res``. This module replays that unfused path
(``use_memory_efficient_lora`` False, no Triton kernel); the memory-efficient autograd function saves the input
and the two weights instead of ``lora_A``'s output, a rank-r tensor per module.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

POSITIONS = ("pre", "post")


class AutomodelLinearLoRA(nn.Module):
    """``base`` (frozen) plus an Automodel-style adapter with dropout ``p`` at ``position``."""

    def __init__(self, base: nn.Linear, *, dim: int, alpha: float, dropout: float, position: str,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        if position not in POSITIONS:
            raise ValueError(f"dropout position must be one of {POSITIONS}, got {position!r}")
        self.base = base
        base.requires_grad_(False)
        dt = dtype or base.weight.dtype
        dev = base.weight.device
        self.lora_A = nn.Linear(base.in_features, dim, bias=False, dtype=dt, device=dev)
        self.lora_B = nn.Linear(dim, base.out_features, bias=False, dtype=dt, device=dev)
        if dev.type != "meta":
            nn.init.xavier_normal_(self.lora_A.weight)
            nn.init.zeros_(self.lora_B.weight)
        self.scale = alpha / dim
        self.dropout_p = dropout
        self.position = position

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        res = self.base(x)
        if self.position == "pre":
            x = F.dropout(x, p=self.dropout_p, training=self.training)
        lora_res = self.lora_B(self.lora_A(x) * self.scale)
        if self.position == "post":
            lora_res = F.dropout(lora_res, p=self.dropout_p, training=self.training)
        return res + lora_res


def apply_automodel_lora(model: nn.Module, *, targets: tuple[str, ...], dim: int, alpha: float, dropout: float,
                         position: str, dtype: torch.dtype | None = None) -> nn.Module:
    """Freeze ``model`` and wrap its ``targets`` linear layers (short names; ``all-linear``: every ``nn.Linear``
    but the output head) in ``AutomodelLinearLoRA``, in place; returns ``model``."""
    model.requires_grad_(False)
    every = "all-linear" in targets
    wanted: list[tuple[nn.Module, str, nn.Linear]] = []
    for name, mod in model.named_modules():
        for child_name, child in mod.named_children():
            if not isinstance(child, nn.Linear) or child_name in ("lm_head", "score"):
                continue
            if every or child_name in targets:
                wanted.append((mod, child_name, child))
    if not wanted:
        raise ValueError(f"lora targets {targets} match no linear layer")
    for parent, child_name, child in wanted:
        wrapped: Any = AutomodelLinearLoRA(child, dim=dim, alpha=alpha, dropout=dropout, position=position,
                                           dtype=dtype)
        setattr(parent, child_name, wrapped)
    return model
