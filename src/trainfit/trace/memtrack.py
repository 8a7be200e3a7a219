"""torch's MemTracker / FSDPMemTracker with per-phase, per-region peaks and frozen parameters.

``MemTracker`` registers gradient hooks on every parameter and fails on frozen ones (LoRA):
installing them only where ``requires_grad`` fixes it (GROUND_TRUTH §9). Per-phase peaks come
from resetting the tracker's private peak fields at each phase start (torch 2.13), per-region
peaks from an override of ``_update_peak_stats`` that also files the current snapshot under
the region of ``trainfit.trace.regions.LayerRegions``.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any, Callable

import torch
from torch import nn
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed._tools.mem_tracker import _MemRefType, MemTracker

from trainfit.trace.regions import LayerRegions

_TOTAL = "Total"
_CATEGORY = {
    _MemRefType.PARAM: "weights",
    _MemRefType.BUFFER: "weights",
    _MemRefType.GRAD: "gradients",
    _MemRefType.OPT: "optimizer_states",
    _MemRefType.ACT: "activations",
    _MemRefType.TEMP: "temporaries",
    _MemRefType.OTH: "activations",  # the input ids
}


class _RegionPeaks:
    """Mixin: file the snapshot at each new (phase, region) peak."""

    regions: LayerRegions | None = None
    region_snaps: dict[str, dict[tuple, tuple[int, dict]]]

    def _update_peak_stats(self, peak_state: Any) -> None:
        super()._update_peak_stats(peak_state)  # type: ignore[misc]
        if self.regions is None:
            return
        cur = self._curr_mem_snap  # type: ignore[attr-defined]
        total = sum(s[_TOTAL] for s in cur.values())
        per = self.region_snaps.setdefault(self.regions.phase, {})
        old = per.get(self.regions.region)
        if old is None or total > old[0]:
            per[self.regions.region] = (total, deepcopy(cur))


class FrozenAwareMemTracker(_RegionPeaks, MemTracker):
    """MemTracker that tolerates frozen parameters (gradient hooks only where requires_grad)."""

    def _track_module_params_and_buffers(self, module: nn.Module, install_grad_hooks: bool = True):  # noqa: ANN201
        out = super()._track_module_params_and_buffers(module, install_grad_hooks=False)
        if install_grad_hooks:

            def _grad_hook(grad: torch.Tensor) -> None:
                self._update_and_maybe_create_winfos(grad, _MemRefType.GRAD)

            for p in module.parameters():
                if p.requires_grad and self._param_to_grad_hook_handles.get(p) is None:
                    self._param_to_grad_hook_handles[p] = (
                        p.register_hook(_grad_hook),
                        p.register_post_accumulate_grad_hook(lambda q: _grad_hook(q.grad)),
                    )
        return out


class RegionFSDPMemTracker(_RegionPeaks, FSDPMemTracker):
    """FSDPMemTracker with per-region peaks."""


def _categories(snap: dict, opt_state_bytes: int) -> dict[str, int]:
    cats = dict.fromkeys(("weights", "gradients", "optimizer_states", "activations", "temporaries"), 0)
    for dev_snap in snap.values():
        for ref, nbytes in dev_snap.items():
            if ref != _TOTAL:
                cats[_CATEGORY.get(ref, "temporaries")] += nbytes
    # MemTracker files the optimizer step's temporaries under Optstate: split them out.
    extra = cats["optimizer_states"] - opt_state_bytes
    if extra > 0:
        cats["optimizer_states"] -= extra
        cats["temporaries"] += extra
    return cats


def _start_phase(mt: Any, name: str) -> None:
    mt._peak_mem_snap = deepcopy(mt._curr_mem_snap)
    mt._peak_mem = {dev: snap[_TOTAL] for dev, snap in mt._peak_mem_snap.items()}
    mt.regions.set_phase(name)
    total = sum(s[_TOTAL] for s in mt._curr_mem_snap.values())
    mt.region_snaps[name] = {("entry",): (total, deepcopy(mt._curr_mem_snap))}


def _local_nbytes(t: torch.Tensor) -> int:
    t = t.to_local() if hasattr(t, "to_local") else t
    return t.untyped_storage().nbytes()


def traced_step_memtracker(model, opt, ids, req, forward: Callable[..., Any], progress, rename):  # noqa: ANN001, ANN201
    """The tracked step under (FSDP)MemTracker: per-phase peaks, categories, region peaks."""
    from trainfit.trace.build import decoder_layers

    if req.world_size > 1:
        mt: Any = RegionFSDPMemTracker(model, opt)
        mt.track_external(ids)
    else:
        mt = FrozenAwareMemTracker()
        mt.track_external(model, opt, ids)
    mt.region_snaps = {}
    opt_bytes = sum(_local_nbytes(v) for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor))
    peaks: dict[str, int] = {}
    bds: dict[str, dict[str, int]] = {}

    def finish(name: str) -> None:
        snap = mt.get_tracker_snapshot("peak")
        peaks[name] = sum(s[_TOTAL] for s in snap.values())
        bds[name] = _categories(snap, opt_bytes)

    mt.regions = LayerRegions(decoder_layers(model))
    try:
        with mt:
            _start_phase(mt, "forward")
            if req.kept_output_dtype == "fp32":  # prime-rl's SFT loop: the fp32 logits kept
                from trainfit.trace.loops import prime_rl_sft_loss

                loss, out = prime_rl_sft_loss(model, ids, req)
            else:
                out = forward(model, ids, req)
                loss = out.loss
                if not req.keep_outputs:
                    del out
            finish("forward")
            progress("backward", 0.65)
            _start_phase(mt, "backward")
            loss.backward()
            finish("backward")
            out = loss = None
            progress("optimizer", 0.85)
            _start_phase(mt, "optimizer_step")
            opt.step()
            opt.zero_grad(set_to_none=True)
            finish("optimizer_step")
    finally:
        mt.regions.remove()
    regs = {
        ph: {rename(k): (b, _categories(s, opt_bytes)) for k, (b, s) in per.items() if rename(k) is not None}
        for ph, per in mt.region_snaps.items()
    }
    return peaks, bds, regs
