"""What the plan promises for each phase the watch measures.

The watch names the phases a training loop runs (``forward``, ``backward``, ``optimizer_step``;
for RL also ``rollout``, ``logprob``, ``reward``, ``weight_sync``); the plan names its own
(``actor_forward``, ``ref_logprob``...) and times coarser units (``generation``,
``actor_update``). This module maps one onto the other. Pure: no torch.

Memory (bytes, per GPU): ``allocated``, ``reserved`` and ``device`` are the plan's figures for
the phase (``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` / nvidia-smi);
``tensor_bytes`` is ``allocated`` without the cuBLAS workspaces, which is what PyTorch's
MemTracker counts on the CPU (it sees tensors, not workspaces).

A reward computed by a function (``roles.reward_model: rule``, TRL's ``reward_funcs``) runs no
model, so the plan has no reward phase; the watch still measures it, and its planned memory is what
stays resident while it runs: the log-prob phase's state without the log-prob pass (else the weight
sync's without its buffer), with the reserved and device figures of that phase (the cache keeps its
blocks). The plan does not time a reward function.

Time (seconds per optimizer step): ``forward`` <- plan ``forward``; ``backward`` <- plan
``recompute + backward`` (checkpoint recompute runs inside backward); ``optimizer_step`` <- the
same; ``rollout`` <- ``generation``; ``logprob`` <- ``ref_logprob + old_logprob``;
``weight_sync`` <- the same. The RL plan times the actor's forward, backward and step together
(``actor_update``): the watch then compares their sum as the row ``update``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainfit.spec.enums import Method, Phase

WATCH_PHASES = ("rollout", "weight_sync", "logprob", "reward", "forward", "backward", "optimizer_step")
"""Phases the watch records, in the order tables list them."""
UPDATE_ROW = "update"
"""forward + backward + optimizer_step, for plans that time them together (RL: actor_update)."""
STEP_ROW = "step"
"""The whole optimizer step (wall time only)."""

_SFT_MEMORY = {"forward": (Phase.FORWARD,), "backward": (Phase.BACKWARD,), "optimizer_step": (Phase.OPTIMIZER_STEP,)}
_RL_MEMORY = {
    "rollout": (Phase.ROLLOUT,), "weight_sync": (Phase.WEIGHT_SYNC,), "reward": (Phase.REWARD,),
    "logprob": (Phase.REF_LOGPROB, Phase.OLD_LOGPROB),
    "forward": (Phase.ACTOR_FORWARD,), "backward": (Phase.ACTOR_BACKWARD,), "optimizer_step": (Phase.ACTOR_OPTIMIZER_STEP,),
}
_TIME = {"forward": ("forward",), "backward": ("recompute", "backward"), "optimizer_step": ("optimizer_step",),
         "rollout": ("generation",), "logprob": ("ref_logprob", "old_logprob"), "weight_sync": ("weight_sync",),
         UPDATE_ROW: ("actor_update",)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Planned:
    """The plan's figures for one watch phase (bytes per GPU; seconds per optimizer step)."""

    phase: str
    allocated_bytes: float | None = None
    reserved_bytes: float | None = None
    device_bytes: float | None = None
    tensor_bytes: float | None = None
    seconds: float | None = None
    plan_phases: tuple[str, ...] = ()
    """The plan's phase names behind the memory figures."""


def planned_phases(plan: Any) -> dict[str, Planned]:
    """Watch phase -> what the plan says for it (phases the plan does not have are absent), plus
    ``update`` (RL) and ``step`` rows for time."""
    rl = plan.card.method in (Method.PPO, Method.GRPO)
    by_phase = {p.phase: p for p in plan.phases}
    times = {t.name: t.seconds for t in plan.time.phases} if plan.time is not None else {}
    out: dict[str, Planned] = {}
    for name, phases in (_RL_MEMORY if rl else _SFT_MEMORY).items():
        present = [by_phase[p] for p in phases if p in by_phase]
        if not present:
            continue
        worst = max(present, key=lambda r: r.allocated)
        tensor = worst.allocated - worst.components.get("cublas_workspace", 0.0)
        out[name] = Planned(phase=name, allocated_bytes=worst.allocated, reserved_bytes=max(r.reserved for r in present),
                            device_bytes=max(r.device for r in present), tensor_bytes=tensor,
                            seconds=_seconds(times, name), plan_phases=tuple(r.phase.value for r in present))
    if rl and "reward" not in out:
        resident = _resident_during_reward(by_phase)
        if resident is not None:
            out["reward"] = resident
    update_s = _seconds(times, UPDATE_ROW)
    if update_s is not None:
        out[UPDATE_ROW] = Planned(phase=UPDATE_ROW, seconds=update_s, plan_phases=("actor_update",))
    if plan.step_seconds is not None:
        out[STEP_ROW] = Planned(phase=STEP_ROW, seconds=plan.step_seconds)
    return out


def _resident_during_reward(by_phase: dict[Any, Any]) -> Planned | None:
    """A reward function's phase (module docstring): a log-prob phase or the weight sync, without the
    pass or buffer that phase adds; None when the plan has neither."""
    for phase, extra in ((Phase.REF_LOGPROB, "logprob_pass"), (Phase.OLD_LOGPROB, "logprob_pass"),
                         (Phase.WEIGHT_SYNC, "weight_sync_buffer")):
        r = by_phase.get(phase)
        if r is not None:
            allocated = r.allocated - r.components.get(extra, 0.0)
            return Planned(phase="reward", allocated_bytes=allocated, reserved_bytes=r.reserved, device_bytes=r.device,
                           tensor_bytes=allocated - r.components.get("cublas_workspace", 0.0),
                           plan_phases=(f"{phase.value} without {extra}",))
    return None


def _seconds(times: dict[str, float], name: str) -> float | None:
    parts = [times[t] for t in _TIME.get(name, ()) if t in times]
    return sum(parts) if parts else None


def capacity_bytes(plan: Any) -> float:
    """The planned GPU's memory (bytes): what a forecast on the CPU is measured against, the plan's own capacity
    (the CUDA total where the catalog has it, ``Plan.capacity_bytes``)."""
    return float(plan.capacity_bytes)
