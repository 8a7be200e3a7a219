"""What would make a failing plan fit: single changes and pairs drawn from `fit`'s own space, each re-planned.

The candidate values are those ``trainfit fit`` searches (``search.SFT_FIT_SPACE`` with the
(micro-batch, accumulation) pairs that keep the global batch, or ``search.RL_SPACE``: placement,
engine tensor parallel, vLLM utilization, sleep level, weight sync...), plus more cards of the same
kind. A knob the card leaves unset is tried at every value, its default included: the plan may not
hold what the default says (an unset ``rollout.weight_sync`` under PEFT + FSDP is a full gather), so
stating it can change the plan. Every suggestion is a real plan of the changed card that fits; none
is a rule of thumb. They are ranked by the step time they cost (then by the memory they save), and
named in the framework's own knobs when the card has a preset.

Like ``fit``, the candidates are planned without the allocator replay first
(``overheads.replay_floor``: a lower bound on the replayed peak): one that cannot fit on that bound is
dropped, and the others are replanned with the replay only where the answer needs it (every single
change that may fit; the pairs and the greedy walk best first), so what is suggested is what
replanning every candidate with the replay gives.
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
    from trainfit.methods.presets import data_parallel_strategy_runs, offload_change
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
            if key == "parallel.strategy" and (card.world_size == 1 or not data_parallel_strategy_runs(
                    preset=card.preset, strategy=str(v))):
                continue
            if key == "parallel.offload":  # one GPU: with the strategy its framework offloads under
                change = offload_change(preset=card.preset, world_size=card.world_size,
                                        strategy=card.parallel.strategy, offload=str(v))
                if change is None:
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
    if _loop_quantizes_kept_experts(card):
        # the loop is transformers < 5's layout: a release change, offered only where the card allows that release
        from trainfit.spec.card import pin_before

        pin = card.software.transformers
        if not pin:
            out.append({"parallel.moe_experts": "loop", "software.transformers": "<5"})
        elif pin_before(pin, (5, 0)):
            out.append({"parallel.moe_experts": "loop"})
    if per_node < 8:
        out.append({"hardware.gpus_per_node": min(8, 2 * per_node)})
    else:
        out.append({"hardware.nodes": 2 * card.hardware.nodes})
    return out


def _loop_quantizes_kept_experts(card) -> bool:
    """A QLoRA MoE card whose routed experts stay in the compute dtype (transformers 5's fused 3-D parameters) and
    that transformers < 5's per-expert loop would store in NF4: ``parallel.moe_experts`` loop is a candidate (the
    plan's assumption line names the release it holds for, ``plan.assumptions.unquantized_experts_line``), with the
    pin ``<5`` on an unpinned card, and not at all on a card pinned to 5 or later or to something unread
    (``candidate_changes``)."""
    from trainfit.plan.resolve import model_spec_of
    from trainfit.plan.terms import loop_would_quantize_experts, unquantized_expert_params

    if not loop_would_quantize_experts(card):
        return False
    try:
        spec = model_spec_of(card)
    except TrainfitError:
        return False
    return unquantized_expert_params(card, spec) > 0


@dataclass(slots=True)
class _Tried:
    """A candidate's plan; ``floor``: made without the allocator replay where it would run, so its
    peak is a lower bound (``low_peak``) and ``exact`` replans it with the replay."""

    changes: dict[str, Any]
    plan: Any
    floor: bool

    @property
    def low_peak(self) -> float:
        from trainfit.search import PEAK_TIE_BYTES

        return self.plan.peak.device - (PEAK_TIE_BYTES if self.floor else 0)

    @property
    def may_fit(self) -> bool:
        """False only where the replayed plan cannot fit."""
        p = self.plan
        return p.fits or (self.floor and self.low_peak <= p.capacity_bytes and p.host_ram_fits
                          and (p.rollout is None or p.rollout.engine_fits))


def _try(base: dict[str, Any], changes: dict[str, Any], calibration) -> _Tried | None:
    from trainfit.plan.overheads import replay_floor

    with replay_floor() as floored:
        new = _replan(base, changes, calibration)
    return None if new is None else _Tried(changes, new, bool(floored))


def _exact(t: _Tried, base: dict[str, Any], calibration) -> _Tried:
    return t if not t.floor else _Tried(t.changes, _replan(base, t.changes, calibration), False)


def _best_first(items: list[_Tried], key, keep, base, calibration, k: int) -> list[_Tried]:
    """Up to ``k`` replayed items that ``keep`` accepts, in the order of ``key`` (ties: list order), as
    sorting every item replanned with the replay would give: ``key`` of a floor item is never above
    its replayed item's, and ``keep`` never refuses a floor item whose replayed one it accepts."""
    import heapq

    heap = [(key(t), i) for i, t in enumerate(items) if keep(t)]
    heapq.heapify(heap)
    out = []
    while heap and len(out) < k:
        _, i = heapq.heappop(heap)
        t = items[i]
        if not t.floor:
            out.append(t)
            continue
        items[i] = t = _exact(t, base, calibration)
        if keep(t):
            heapq.heappush(heap, (key(t), i))
    return out


def suggestions(card, plan, *, pairs: bool = True, limit: int = 5, calibration=None) -> tuple[list[Suggestion], list[Suggestion]]:
    """(single changes, pairs of changes) that make ``plan`` fit, best first; each re-planned with
    ``calibration`` (a ``trainfit.calibration.Calibration``, or None for the default rates)."""
    base = card.model_dump(mode="json", exclude_unset=True)
    cands = candidate_changes(card, base)

    def screened(changes: dict[str, Any]) -> _Tried | None:
        t = _try(base, changes, calibration)
        return t if t is not None and t.may_fit else None

    tried = [t for t in (screened(c) for c in cands) if t is not None]
    singles = [_suggestion(card, plan, t.changes, t.plan)
               for t in (_exact(t, base, calibration) for t in tried) if t.plan.fits]
    doubles: list[Suggestion] = []
    if pairs:
        fitting_alone = {k for s in singles for k in s.changes}
        both = []
        for c1, c2 in itertools.combinations(cands, 2):
            if set(c1) & set(c2) or (set(c1) | set(c2)) & fitting_alone:
                continue  # a pair only matters when neither change fits alone
            t = screened(c1 | c2)
            if t is not None:
                both.append(t)

        def key(t: _Tried) -> tuple:
            return _rank_key(_suggestion(card, plan, t.changes, t.plan, peak=t.low_peak))

        doubles = [_suggestion(card, plan, t.changes, t.plan)
                   for t in _best_first(both, key, lambda t: t.may_fit, base, calibration, limit)]
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
    fit`` searches the whole knob space exhaustively, every model-parallel layout included."""
    cands = [c for c in candidate_changes(card, base) if not ({"hardware.gpus_per_node", "hardware.nodes"} & set(c))]
    kept: dict[str, Any] = {}
    peak = plan.peak.device
    inf = float("inf")
    for _ in range(rounds):
        tried = []
        for c in cands:
            if set(c) & set(kept):
                continue
            t = _try(base, kept | c, calibration)
            if t is not None:
                tried.append(t)
        # the fastest that fits (then the smallest peak); else the smallest peak below the kept one's
        fitting = _best_first(tried, lambda t: (t.plan.step_seconds if t.plan.step_seconds is not None else inf,
                                                t.low_peak), lambda t: t.may_fit, base, calibration, 1)
        if fitting:
            return _suggestion(card, plan, fitting[0].changes, fitting[0].plan)
        lower = _best_first(tried, lambda t: t.low_peak, lambda t: t.low_peak < peak, base, calibration, 1)
        if not lower:
            return None
        kept = dict(lower[0].changes)
        peak = lower[0].plan.peak.device
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


def _suggestion(card, plan, changes: dict[str, Any], new, *, peak: float | None = None) -> Suggestion:
    """``peak``: the changed plan's peak, if not ``new.peak.device`` (a lower bound, ``_Tried.low_peak``)."""
    from trainfit.methods.presets import knob_name

    peak = new.peak.device if peak is None else peak
    return Suggestion(
        changes=changes, names={k: knob_name(card.preset, k) for k in changes},
        saving_bytes=plan.peak.device - peak, peak_device_bytes=peak,
        step_seconds=new.step_seconds,
        delta_seconds=None if new.step_seconds is None or plan.step_seconds is None
        else new.step_seconds - plan.step_seconds,
    )


def _rank_key(s: Suggestion) -> tuple:
    inf = float("inf")
    return (s.delta_seconds if s.delta_seconds is not None else inf, -s.saving_bytes, str(sorted(s.changes.items())))


def _rank(items: list[Suggestion]) -> list[Suggestion]:
    return sorted(items, key=_rank_key)
