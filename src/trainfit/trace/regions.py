"""Which part of the step is running: before the layers, decoder layer j, or after them (needs torch).

Trackers record a peak per (phase, region), so extrapolation can follow each region on its own
(see ``trainfit.trace.extrapolate``). Forward: a pre-hook on layer j sets ``("layer", j)``, its
post-hook ``("post",)``. Backward: a gradient hook on layer j's output sets ``("layer", j)`` when
its backward starts, one on layer 0's input sets ``("pre",)`` when the layers are done. Forward
hooks during backward (checkpoint recomputation) set the layer only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

PRE: tuple = ("pre",)
POST: tuple = ("post",)
ENTRY: tuple = ("entry",)
OPT: tuple = ("opt",)
FORWARD_PHASES = frozenset({"forward", "logprob", "value", "ref_logprob"})
"""Phases that run the layers forward only (the training forward and the no-grad RL passes)."""


def _first_tensor(x: Any) -> torch.Tensor | None:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (tuple, list)) and x:
        return _first_tensor(x[0])
    return None


class LayerRegions:
    """Tracks the current region of the step through hooks on the decoder layers."""

    def __init__(self, layers: nn.ModuleList) -> None:
        self.phase = ""
        self.region: tuple = PRE
        self._handles: list[Any] = []
        self.attach(layers)

    def attach(self, layers: nn.ModuleList) -> None:
        """Follow another stack too (a DPO reference model's layers: same regions, own pass)."""
        for j, layer in enumerate(layers):
            self._handles.append(layer.register_forward_pre_hook(self._pre_hook(j), with_kwargs=True))
            self._handles.append(layer.register_forward_hook(self._post_hook(j), with_kwargs=True))

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self.region = PRE if phase in FORWARD_PHASES else POST if phase == "backward" else OPT

    def _set(self, region: tuple) -> None:
        self.region = region

    def _pre_hook(self, j: int):  # noqa: ANN202
        def hook(mod: nn.Module, args: Any, kwargs: Any) -> None:
            self.region = ("layer", j)
            if self.phase == "forward" and j == 0:
                x = _first_tensor(args) if args else _first_tensor(kwargs.get("hidden_states"))
                if x is not None and x.requires_grad:
                    x.register_hook(lambda g: self._set(PRE))

        return hook

    def _post_hook(self, j: int):  # noqa: ANN202
        def hook(mod: nn.Module, args: Any, kwargs: Any, out: Any) -> None:
            if self.phase not in FORWARD_PHASES:
                return
            self.region = POST
            y = _first_tensor(out)
            if y is not None and y.requires_grad:
                y.register_hook(lambda g: self._set(("layer", j)))

        return hook

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
