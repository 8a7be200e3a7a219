"""What would make a failing plan fit: the smallest single changes and pairs, each re-planned.

Every suggestion is a real plan of the changed card that fits; none is a rule of thumb. They are
ranked by the step time they cost (then by how much memory they save), and named in the
framework's own knobs when the card has a preset.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from trainfit.errors import TrainfitError
from trainfit.spec.dotted import deep_copy, set_dotted


@dataclass(frozen=True, slots=True)
class Suggestion:
    changes: dict[str, Any]
    """Card key -> new value."""
    names: dict[str, str]
    """Card key -> the framework's knob name (the key itself without a preset)."""
    saving_bytes: float
    """Worst-GPU device peak saved against the original plan."""
    peak_device_bytes: float
    step_seconds: float | None
    delta_seconds: float | None


def _candidates(card) -> list[tuple[str, Any]]:
    """Single changes worth trying for this card (only those that change something)."""
    c = card
    out: list[tuple[str, Any]] = []
    if not c.parallel.gradient_checkpointing:
        out.append(("parallel.gradient_checkpointing", True))
    if c.batch.micro_batch_size > 1:
        out.append(("batch.micro_batch_size", max(1, c.batch.micro_batch_size // 2)))
    if not c.loss.chunked:
        out.append(("loss.chunked", True))
    if c.attention.value == "eager":
        out.append(("attention", "sdpa"))
    if c.parallel.strategy.value in ("single", "ddp", "zero1", "zero2", "fsdp_grad_op") and c.world_size > 1:
        out.append(("parallel.strategy", "fsdp"))
    if c.parallel.offload.value == "none":
        out.append(("parallel.offload", "optimizer"))
    if c.parallel.offload.value != "params_and_optimizer":
        out.append(("parallel.offload", "params_and_optimizer"))
    if c.precision.optimizer.value == "adamw":
        out.append(("precision.optimizer", "adamw_8bit"))
    if c.scope.value == "full":
        out.append(("scope", "lora"))
    if c.scope.value in ("full", "lora"):
        out.append(("scope", "qlora"))
    if c.method.value in ("ppo", "grpo"):
        ro = c.rollout
        if ro.sleep_level == 0:
            out.append(("rollout.sleep_level", 1))
        if ro.weight_sync.value != "per_parameter":
            out.append(("rollout.weight_sync", "per_parameter"))
        for tp in (2 * ro.tensor_parallel, 4 * ro.tensor_parallel):
            out.append(("rollout.tensor_parallel", tp))
        for u in (0.3, 0.5, 0.7, 0.9):
            if u != ro.gpu_memory_utilization:
                out.append(("rollout.gpu_memory_utilization", u))
        if c.roles.reference is None or c.roles.reference.value == "gpu":
            out.append(("roles.reference", "cpu"))
    out.append(("hardware.gpus_per_node", min(8, 2 * c.hardware.gpus_per_node)) if c.hardware.gpus_per_node < 8
               else ("hardware.nodes", 2 * c.hardware.nodes))
    return out


def suggestions(card, plan, *, pairs: bool = True, limit: int = 5, calibration=None) -> tuple[list[Suggestion], list[Suggestion]]:
    """(single changes, pairs of changes) that make ``plan`` fit, best first; each re-planned with
    ``calibration`` (a ``trainfit.calibration.Calibration``, or None for the default rates)."""
    from trainfit.methods.presets import knob_name
    from trainfit.plan import make_plan
    from trainfit.spec.card import RunCard

    base = card.model_dump(mode="json", exclude_unset=True)
    cands = _candidates(card)

    def attempt(changes: dict[str, Any]) -> Suggestion | None:
        data = deep_copy(base)
        if "batch.micro_batch_size" in changes:
            # keep the global batch: halve the micro-batch, double the accumulation
            set_dotted(data, "batch.grad_accum", card.batch.grad_accum * card.batch.micro_batch_size // changes["batch.micro_batch_size"])
        for k, v in changes.items():
            set_dotted(data, k, v)
        try:
            new = make_plan(RunCard.model_validate(data), calibration=calibration)
        except (TrainfitError, ValueError):
            return None
        if not new.fits:
            return None
        delta = None
        if new.step_seconds is not None and plan.step_seconds is not None:
            delta = new.step_seconds - plan.step_seconds
        return Suggestion(
            changes=changes,
            names={k: knob_name(card.preset, k) for k in changes},
            saving_bytes=plan.peak.device - new.peak.device,
            peak_device_bytes=new.peak.device,
            step_seconds=new.step_seconds,
            delta_seconds=delta,
        )

    singles = [s for s in (attempt({k: v}) for k, v in cands) if s is not None]
    doubles: list[Suggestion] = []
    if pairs:
        fitting_alone = {next(iter(s.changes)) for s in singles}
        for (k1, v1), (k2, v2) in itertools.combinations(cands, 2):
            if k1 == k2 or k1 in fitting_alone or k2 in fitting_alone:
                continue  # a pair only matters when neither change fits alone
            s = attempt({k1: v1, k2: v2})
            if s is not None:
                doubles.append(s)
    return _rank(singles)[:limit], _rank(doubles)[:limit]


def _rank(items: list[Suggestion]) -> list[Suggestion]:
    inf = float("inf")
    return sorted(
        items,
        key=lambda s: (s.delta_seconds if s.delta_seconds is not None else inf, -s.saving_bytes, str(sorted(s.changes.items()))),
    )
