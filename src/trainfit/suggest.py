"""What would make a failing plan fit: single changes and pairs drawn from `fit`'s own space, each re-planned.

The candidate values are those ``trainfit fit`` searches (``search.SFT_FIT_SPACE`` with the
(micro-batch, accumulation) pairs that keep the global batch, or ``search.RL_SPACE``: placement,
engine tensor parallel, vLLM utilization, sleep level, weight sync...), plus more cards of the same
kind. A knob the card leaves unset is tried at every value, its default included: the plan may not
hold what the default says (an unset ``rollout.weight_sync`` under PEFT + FSDP is a full gather), so
stating it can change the plan. Every suggestion is a real plan of the changed card that fits; none
is a rule of thumb. They are ranked by the step time they cost (then by the memory they save), and
named in the framework's own knobs when the card has a preset.
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


def _get(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


_MISSING = object()


def candidate_changes(card, base: dict[str, Any]) -> list[dict[str, Any]]:
    """Single changes from ``fit``'s space for this card (``base``: the card as set, defaults unset);
    each a dict of the keys it sets (a split placement sets its engine GPUs with it)."""
    from trainfit.search import RL_SPACE, SFT_FIT_SPACE

    rl = card.method.value in ("ppo", "grpo")
    space = RL_SPACE if rl else SFT_FIT_SPACE
    per_node = card.hardware.gpus_per_node
    out: list[dict[str, Any]] = []
    for key, values in space.items():
        now = _get(base, key)
        for v in values:
            if now is not _MISSING and now == v:
                continue  # stated already: no change
            change = {key: v}
            if key == "parallel.strategy" and card.world_size == 1:
                continue
            if key == "rollout.placement" and v == "split":
                if per_node < 2:
                    continue
                change["rollout.gpus"] = max(1, per_node // 2)
            out.append(change)
    if not rl:
        dp = 1 if card.parallel.strategy.value == "single" else card.world_size
        mbs, ga = card.batch.micro_batch_size, card.batch.grad_accum
        total = mbs * ga
        for m in (1, 2, 4, 8):
            if m != mbs and total % m == 0:
                out.append({"batch.micro_batch_size": m, "batch.grad_accum": total // m})  # the global batch kept
        del dp
    if per_node < 8:
        out.append({"hardware.gpus_per_node": min(8, 2 * per_node)})
    else:
        out.append({"hardware.nodes": 2 * card.hardware.nodes})
    return out


def suggestions(card, plan, *, pairs: bool = True, limit: int = 5, calibration=None) -> tuple[list[Suggestion], list[Suggestion]]:
    """(single changes, pairs of changes) that make ``plan`` fit, best first; each re-planned with
    ``calibration`` (a ``trainfit.calibration.Calibration``, or None for the default rates)."""
    base = card.model_dump(mode="json", exclude_unset=True)
    cands = candidate_changes(card, base)

    def attempt(changes: dict[str, Any]) -> Suggestion | None:
        new = _replan(base, changes, calibration)
        return _suggestion(card, plan, changes, new) if new is not None and new.fits else None

    singles = [s for s in (attempt(c) for c in cands) if s is not None]
    doubles: list[Suggestion] = []
    if pairs:
        fitting_alone = {k for s in singles for k in s.changes}
        for c1, c2 in itertools.combinations(cands, 2):
            if set(c1) & set(c2) or (set(c1) | set(c2)) & fitting_alone:
                continue  # a pair only matters when neither change fits alone
            s = attempt(c1 | c2)
            if s is not None:
                doubles.append(s)
        if not singles and not doubles:
            combo = best_combination(card, base, plan, calibration=calibration)
            if combo is not None:
                doubles.append(combo)
    return _rank(singles)[:limit], _rank(doubles)[:limit]


def best_combination(card, base: dict[str, Any], plan, *, calibration=None, rounds: int = 8) -> Suggestion | None:
    """When no single change or pair fits: a greedy walk through the same candidate changes. Each
    round re-plans every remaining change on top of those kept so far; when some fit, the fastest of
    them ends the walk; otherwise the change that lowers the worst GPU's peak most is kept. Bounded
    (``rounds`` x candidates plans, about a second) so that ``plan`` stays interactive; ``trainfit
    fit`` searches the whole knob space exhaustively, and the model-parallel layouts tier by tier."""
    cands = [c for c in candidate_changes(card, base) if not ({"hardware.gpus_per_node", "hardware.nodes"} & set(c))]
    kept: dict[str, Any] = {}
    peak = plan.peak.device
    for _ in range(rounds):
        tried = []
        for c in cands:
            if set(c) & set(kept):
                continue
            new = _replan(base, kept | c, calibration)
            if new is not None:
                tried.append((c, new))
        fitting = [(c, n) for c, n in tried if n.fits]
        if fitting:
            inf = float("inf")
            c, new = min(fitting, key=lambda cn: (cn[1].step_seconds if cn[1].step_seconds is not None else inf,
                                                  cn[1].peak.device))
            return _suggestion(card, plan, kept | c, new)
        lower = [(c, n) for c, n in tried if n.peak.device < peak]
        if not lower:
            return None
        c, new = min(lower, key=lambda cn: cn[1].peak.device)
        kept |= c
        peak = new.peak.device
    return None


def _replan(base: dict[str, Any], changes: dict[str, Any], calibration):
    """The plan of ``base`` with ``changes`` set, or None when the changed card is refused."""
    from trainfit.plan import make_plan
    from trainfit.spec.card import RunCard

    data = deep_copy(base)
    for k, v in changes.items():
        set_dotted(data, k, v)
    try:
        return make_plan(RunCard.model_validate(data), calibration=calibration)
    except (TrainfitError, ValueError):
        return None


def _suggestion(card, plan, changes: dict[str, Any], new) -> Suggestion:
    from trainfit.methods.presets import knob_name

    return Suggestion(
        changes=changes, names={k: knob_name(card.preset, k) for k in changes},
        saving_bytes=plan.peak.device - new.peak.device, peak_device_bytes=new.peak.device,
        step_seconds=new.step_seconds,
        delta_seconds=None if new.step_seconds is None or plan.step_seconds is None
        else new.step_seconds - plan.step_seconds,
    )


def _rank(items: list[Suggestion]) -> list[Suggestion]:
    inf = float("inf")
    return sorted(
        items,
        key=lambda s: (s.delta_seconds if s.delta_seconds is not None else inf, -s.saving_bytes, str(sorted(s.changes.items()))),
    )
