"""What `fit` ranks by: an objective (cost, time or cards), the run's length and the limits (pure).

* ``cost``: the rental cost of the run when its length is known (``steps`` or ``tokens``), else the
  cost per step (cost per hour x step time: every row trains the same global batch, so the cheapest step is the
  cheapest run of any length; the cost per hour alone would rank fewest cards first) with the step time as the
  tie-break;
* ``time``: the run's wall-clock (or the step time), then cost;
* ``cards``: fewest GPUs, then cost, then time.

Costs in different currencies are converted with the given exchange rates into one ranking currency;
a row whose currency cannot be converted is ranked in a group of its own currency (after the ranking
currency's group), never interleaved, and a warning says so. Limits: ``budget`` (per run when the
length is known, else per hour, in its own currency) and ``deadline_s`` (the run's wall-clock).
"""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass, field, replace
from enum import StrEnum
from math import ceil, inf
from numbers import Integral, Real
from typing import Any

from trainfit.errors import CardError

MAX_RUN_STEPS = 10**12
"""Most steps in a run (``Goal.steps``; larger counts overflow the float cost and time of the run)."""
MAX_RUN_TOKENS = 1e16
"""Most tokens in a run: 10 quadrillion, ~250x the largest published pre-training runs (~40e12)."""


class Objective(StrEnum):
    COST = "cost"
    TIME = "time"
    CARDS = "cards"


class StepUnit(StrEnum):
    """What one of ``Goal.steps`` (and a row's ``step_seconds``) is: an optimizer step (SFT, RM, DPO) or an RL step
    (PPO, GRPO: one rollout batch and its optimizer steps; ``fit_search.run_step_unit``)."""

    OPTIMIZER_STEP = "optimizer_step"
    RL_STEP = "rl_step"


@dataclass(frozen=True, kw_only=True, slots=True)
class Goal:
    objective: Objective = Objective.COST
    steps: int | None = None
    """Steps in the run, each a row's ``step_seconds``: optimizer steps for SFT, RM and DPO; RL steps for PPO and
    GRPO (one rollout batch and its ``rollout.optimizer_steps_per_rl_step`` optimizer steps), as verl counts
    ``trainer.total_training_steps`` (``fit_search.run_step_unit``)."""
    tokens: float | None = None
    """Tokens in the run (steps = ceil(tokens / tokens per step), per row: RL steps for PPO and GRPO)."""
    budget: float | None = None
    budget_currency: str | None = None
    deadline_s: float | None = None
    fx: dict[tuple[str, str], float] = field(default_factory=dict)
    """(from, to) -> units of ``to`` per unit of ``from``."""
    per_token: bool = False
    """Rank without a run length by cost and time per token, not per step: the rows' steps carry different
    batches (``fit_search.BatchBasis.PER_TOKEN``). With ``tokens`` the run's cost is already per token's worth."""

    def __post_init__(self) -> None:
        if self.steps is not None and (isinstance(self.steps, bool) or not isinstance(self.steps, Integral)):
            raise CardError(f"--steps: a whole number of steps, got {str(self.steps)[:40]!r}")
        if self.steps is not None and type(self.steps) is not int:  # a NumPy integer is a whole number too
            object.__setattr__(self, "steps", operator.index(self.steps))
        if self.steps is not None and not 1 <= self.steps <= MAX_RUN_STEPS:
            got = str(self.steps) if len(str(self.steps)) <= 24 else f"a {len(str(self.steps))}-digit number"
            raise CardError(f"--steps: must be in 1..{MAX_RUN_STEPS:,}, got {got}")
        if self.tokens is not None and (isinstance(self.tokens, bool) or not isinstance(self.tokens, Real)):
            raise CardError(f"--tokens: a number of tokens > 0, got {str(self.tokens)[:40]!r}")
        if self.tokens is not None and not 0 < self.tokens <= MAX_RUN_TOKENS:  # also refuses nan and inf
            raise CardError(f"--tokens: must be a finite number > 0 and at most {MAX_RUN_TOKENS:.0e}, got {self.tokens:.4g}")
        if self.steps is not None and self.tokens is not None:
            raise CardError("--steps and --tokens: give one, not both")
        if self.deadline_s is not None and (isinstance(self.deadline_s, bool) or not isinstance(self.deadline_s, (int, float))
                                            or not 0 < self.deadline_s < inf):
            raise CardError(f"--deadline: a finite duration > 0, got {str(self.deadline_s)[:40]!r} seconds")
        if self.deadline_s is not None and not self.has_run:
            raise CardError("--deadline: needs the run's length, --steps or --tokens")
        if (self.budget is None) != (self.budget_currency is None):
            raise CardError("--budget: an amount with a currency, e.g. 300CNY")
        if self.budget is not None and not 0 < self.budget < inf:  # also refuses nan: no plan could keep it
            raise CardError(f"--budget: must be a finite amount > 0 with a currency, e.g. 300CNY, got {self.budget:g}"
                            f" {self.budget_currency}")

    @property
    def has_run(self) -> bool:
        return self.steps is not None or self.tokens is not None


def run_steps(goal: Goal, *, tokens_per_step: float | None) -> int | None:
    if goal.steps is not None:
        return goal.steps
    if goal.tokens is None or not tokens_per_step:
        return None
    return ceil(goal.tokens / tokens_per_step)


def convert(amount: float | None, currency: str | None, to: str | None, fx: dict[tuple[str, str], float]) -> float | None:
    """``amount`` in ``to``; None when it has no price or no rate links the two currencies."""
    if amount is None or currency is None or to is None:
        return None
    if currency == to:
        return amount
    rate = fx.get((currency, to))
    return None if rate is None else amount * rate


def ranking_currency(currencies: list[str], goal: Goal) -> str | None:
    """The currency costs are ranked in: the budget's, else the one every rate leads to, else the most
    common among the rows (ties: alphabetical)."""
    if goal.budget_currency:
        return goal.budget_currency
    if goal.fx:
        targets = Counter(to for (_, to) in goal.fx)
        present = [c for c in currencies if c]
        for cur, _ in Counter(present).most_common():
            if all(convert(1.0, c, cur, goal.fx) is not None for c in set(present)):
                return cur
        return sorted(targets)[0]
    present = [c for c in currencies if c]
    if not present:
        return None
    counts = Counter(present)
    return sorted(counts, key=lambda c: (-counts[c], c))[0]


def annotate(rows: list[Any], goal: Goal, *, currencies: list[str] | None = None) -> tuple[list[Any], list[str]]:
    """Each row with its run figures, its cost in the ranking currency and whether it keeps the
    limits; plus warnings (currencies ranked apart). ``currencies``: the priced rows' currencies the
    ranking currency is chosen from (``ranking_currency``), where ``rows`` are some of them; default:
    those of ``rows``."""
    if currencies is None:
        currencies = [r.currency for r in rows if r.cost_per_hour is not None]
    cur = ranking_currency(currencies, goal)
    out = []
    for r in rows:
        steps = run_steps(goal, tokens_per_step=r.tokens_per_step)
        run_s = steps * r.step_seconds if (steps is not None and r.step_seconds is not None) else None
        per_run = r.cost_per_hour * run_s / 3600 if (run_s is not None and r.cost_per_hour is not None) else None
        own = per_run if goal.has_run else r.cost_per_hour  # the budget's unit: per run, else per hour
        ranked = per_run if goal.has_run else _step_figure(r.cost_per_step, r, goal)
        ok = True
        if goal.budget is not None:
            spent = convert(own, r.currency, goal.budget_currency, goal.fx)
            ok = spent is not None and spent <= goal.budget
        if goal.deadline_s is not None:
            ok = ok and run_s is not None and run_s <= goal.deadline_s
        out.append(replace(r, run_steps=steps, run_seconds=run_s, cost_per_run=per_run, within_limits=ok,
                           rank_currency=cur,
                           rank_cost=convert(ranked, r.currency, cur, goal.fx),
                           rank_cost_per_step=convert(r.cost_per_step, r.currency, cur, goal.fx)))
    apart = sorted({r.currency for r in out if r.cost_per_hour is not None and r.currency
                    and convert(r.cost_per_hour, r.currency, cur, goal.fx) is None})
    warnings = []
    if apart:
        fx = " ".join(f"--fx {c}:{cur}=RATE" for c in apart)
        warnings.append(
            f"rows priced in {', '.join(apart)} are ranked on cost apart from the {cur} rows (after them);"
            f" give an exchange rate to rank them together: {fx}"
        )
    return out, warnings


def rank_key(r: Any, goal: Goal) -> tuple:
    """Fitting rows within the limits first, then by the objective; rows that do not fit last, the
    smallest peak first (the closest attempt)."""
    from trainfit.search import knob_text

    if not r.fits:
        return (2, 0, 0, r.gpus, r.peak_device_bytes, 0.0, knob_text(r.knobs))
    step_s = _step_figure(r.step_seconds, r, goal)
    time = r.run_seconds if r.run_seconds is not None else (step_s if step_s is not None else inf)
    cost = r.rank_cost if r.rank_cost is not None else inf
    # a cost that cannot be ranked in the ranking currency sorts in its own currency's group
    group = "" if (r.cost_per_hour is None
                   or convert(r.cost_per_hour, r.currency, r.rank_currency, goal.fx) is not None) else r.currency
    unpriced = r.cost_per_hour is None
    limits = 0 if r.within_limits else 1
    if goal.objective is Objective.TIME:
        return (limits, 0, "", time, cost, r.gpus, knob_text(r.knobs))
    if goal.objective is Objective.CARDS:
        per = cost if goal.has_run else _step_figure(r.rank_cost_per_step, r, goal)
        return (limits, 0, "", r.gpus, per if per is not None else inf, time, knob_text(r.knobs))
    own = (r.cost_per_run if goal.has_run else _step_figure(r.cost_per_step, r, goal)) if group else cost
    return (limits, int(unpriced), group, own if own is not None else inf, time, r.gpus, knob_text(r.knobs))


def ranking_text(goal: Goal, *, priced: bool) -> str:
    """What ``rank_key`` orders the fitting rows within the limits by, in words (the fit report's caption,
    ``report.html.fit_ranking_caption``). ``priced``: some fitting row has a price; without one the cost objective
    cannot rank on cost and ``rank_key`` falls to its time, then its cards."""
    run = goal.has_run
    per_token = goal.per_token and not run
    time = "run time" if run else "time per token" if per_token else "step time"
    cost = "cost per run" if run else "cost per token" if per_token else "cost per step"
    if goal.objective is Objective.TIME:
        return f"{time} (then cost, fewest cards)"
    if goal.objective is Objective.CARDS:
        return f"fewest cards (then {cost}, {time})"
    if not priced:
        return f"{time} (no row has a price, so cost cannot rank; then fewest cards)"
    return f"{cost} (then {time}, fewest cards)"


def _step_figure(value: float | None, r: Any, goal: Goal) -> float | None:
    """A row's per-step ``value`` (cost or seconds) as ranked without a run length: per step, or per token under
    ``Goal.per_token`` (None where the row carries no token count)."""
    if value is None or not goal.per_token or goal.has_run:
        return value
    return value / r.tokens_per_step if r.tokens_per_step else None


def beats(a: Any, b: Any, goal: Goal) -> bool:
    """``a`` is strictly better than ``b`` on the objective (both fit and keep the limits)."""
    ka, kb = rank_key(a, goal)[:-1], rank_key(b, goal)[:-1]
    return ka < kb
