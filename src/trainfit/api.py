"""trainfit's Python API: ``trainfit.plan``, ``trainfit.fit``, ``trainfit.trace``, ``trainfit.size``.

Thin wrappers over the same core the CLI calls, so a notebook gets the CLI's numbers:

* ``plan(card)`` -> :class:`trainfit.plan.result.Plan` (``make_plan``); ``Plan.to_dict()`` is the
  object ``trainfit plan --json`` prints (docs/plan-json.md), and a notebook shows the plan's chart;
* ``fit(card, ...)`` -> ``trainfit.search.FitResult`` (``trainfit.search.fit``, as ``trainfit fit``);
* ``trace(card, ...)`` -> ``trainfit.trace.TraceResult`` (needs the ``trace`` extra: torch);
* ``size(model)`` -> ``trainfit.size.ModelSize`` (as ``trainfit size``).

A card is ``None`` (the embedded default card), a dict (what a card file holds), a path to a
YAML/JSON card file, or a validated ``RunCard``. ``overrides`` sets dotted card keys, as ``--set``
does: ``{"hardware.gpus_per_node": 8}``. Bad input raises ``trainfit.errors.TrainfitError`` (a
``CardError``, ``CatalogError``...) whose message is the CLI's one line.

Importing this module (or ``trainfit``) imports no torch; the planning path never does.
"""

from __future__ import annotations

import operator
import os
from numbers import Integral
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from trainfit.plan.result import Plan
    from trainfit.search import FitResult
    from trainfit.size import ModelSize
    from trainfit.spec.card import RunCard

DEFAULT_FIT_GPUS = ("rtx4090", "a100-40gb", "a100-80gb", "h100-sxm")
"""The GPU kinds ``trainfit fit`` searches by default."""


def card_data(card: Any = None, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The card as a plain dict (before validation): the default card, a dict, a file, or a RunCard's set fields."""
    import copy

    from trainfit.errors import CardError

    if card is None:
        from trainfit.cli.common import default_card_dict

        data = default_card_dict()
    elif isinstance(card, Mapping):
        data = copy.deepcopy(dict(card))
    elif isinstance(card, (str, Path)):
        from trainfit.spec.card import read_card_file

        data = read_card_file(Path(card))
    elif hasattr(card, "model_dump"):
        data = card.model_dump(mode="json", exclude_unset=True)
    else:
        raise CardError(f"card: expected None, a dict, a path or a RunCard, got {type(card).__name__}")
    if overrides:
        from trainfit.spec.dotted import set_dotted

        if not isinstance(overrides, Mapping):
            raise CardError("overrides: expected a mapping of dotted card keys to values, e.g. {'hardware.gpus_per_node': 8}")
        for key, value in overrides.items():
            set_dotted(data, str(key), value)
    return data


def load_card(card: Any = None, overrides: Mapping[str, Any] | None = None) -> RunCard:
    """A validated ``RunCard`` from any card form (framework ``preset`` applied, as the CLI does)."""
    from trainfit.spec.card import resolve_card

    return resolve_card(card_data(card, overrides))


def _calibration(calibration: Any):
    """A ``Calibration``: given one, read a path, or find the user's file as the CLI does (None)."""
    from trainfit.calibration import Calibration

    if isinstance(calibration, Calibration):
        return calibration
    if calibration is not None and not isinstance(calibration, (str, os.PathLike)):
        from trainfit.errors import CardError

        raise CardError(f"calibration: a path, a Calibration (trainfit.calibration.load_calibration) or None, got"
                        f" {type(calibration).__name__} {str(calibration)[:40]!r}")
    from trainfit.calibration import load_found_calibration

    return load_found_calibration(None if calibration is None else Path(calibration))


def plan(card: Any = None, *, overrides: Mapping[str, Any] | None = None, calibration: Any = None) -> Plan:
    """The plan of a card: memory per phase on the worst GPU, verdict, step time (``trainfit plan``)."""
    from trainfit.plan import make_plan

    return make_plan(load_card(card, overrides), calibration=_calibration(calibration))


def fit(
    card: Any = None,
    *,
    gpus: list[str] | tuple[str, ...] = DEFAULT_FIT_GPUS,
    max_gpus: int = 64,
    objective: str | None = None,
    steps: int | None = None,
    tokens: float | None = None,
    budget: str | None = None,
    deadline_s: float | None = None,
    prices: Mapping[str, Any] | None = None,
    price_table: str | Path | None = None,
    market: str | None = None,
    fx: Mapping[tuple[str, str], float] | list[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    global_batch: int | None = None,
    calibration: Any = None,
    search_scope: bool = False,
) -> FitResult:
    """The best plan of each GPU kind and card count, ranked by ``objective`` (``trainfit fit``).

    As on the command line and the web API (``fit_search.fit_start``: the card's ``preset`` filled after the pins are
    taken, as starting values), model, method and scope are held, with a card or the
    default one (``search_scope``: scope searched, the result's warnings say so); a given card's other fields are
    pinned too (its hardware section is where the search starts; its ``batch.grad_accum`` is chosen per row to
    hold the global batch) and so is every ``overrides`` key.
    ``gpus``: catalog ids, a list or one comma-separated string (``"rtx4090,h100-sxm"``, as ``--gpu`` takes them).
    ``prices``: GPU id -> a price with a currency (``"1.98CNY"``), a price-table id (``"rtx4090-pro"``)
    or a ``Price``; ``price_table`` (a file in the catalog's shape) and ``market`` (``cn-rental``,
    ``cloud-on-demand``: the catalog's table in that market) price the other kinds, each row by the entry that rents
    its card count cheapest (a whole-instance entry bills every GPU of the instance: ``Row.billed_gpus``), as
    ``--price-table`` / ``--market`` do. ``budget``: an amount with a currency (``"300CNY"``). ``fx``: ``{("USD", "CNY"): 7.2}``
    or ``["USD:CNY=7.2"]`` (a list or tuple; one such string alone is one item, as one ``--fx``).
    ``steps``: optimizer steps for sft / rm / dpo, RL steps for ppo / grpo (the result's ``step_unit`` and
    ``optimizer_steps_per_step`` say which, ``fit_search.run_step_unit``).
    """
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.cost import for_gpu, parse_price
    from trainfit.errors import CardError
    from trainfit.fit_search import card_on_a_kind, fit_start
    from trainfit.objective import Goal, Objective
    from trainfit.search import fit as search_fit

    # the preset filled under the card and the overrides, pins taken before it (fit_start: as `trainfit fit` and the
    # web API)
    data, pinned = fit_start(card_data(card), card_file=card is not None, search_scope=search_scope,
                             overrides=overrides)
    if isinstance(gpus, str):  # one string is the command line's comma-separated list, never its characters
        gpus = [g for g in gpus.split(",") if g.strip()]
    if not isinstance(gpus, (list, tuple)) or not all(isinstance(g, str) for g in gpus):
        raise CardError(f"gpus: a list of GPU catalog ids, e.g. ['rtx4090', 'h100-sxm'], got {str(gpus)[:60]!r}")
    if isinstance(max_gpus, bool) or not isinstance(max_gpus, Integral):  # a NumPy integer is a whole number too
        raise CardError(f"max_gpus: a whole number of cards >= 1, got {max_gpus!r}")
    max_gpus = operator.index(max_gpus)
    if max_gpus < 1:
        raise CardError(f"max_gpus: a whole number of cards >= 1, got {max_gpus}")
    if global_batch is not None and (isinstance(global_batch, bool) or not isinstance(global_batch, Integral)
                                     or global_batch < 1):
        raise CardError(f"global_batch: a whole number of sequences per optimizer step >= 1, got {global_batch!r}")
    if global_batch is not None:
        global_batch = operator.index(global_batch)
    for name, value in (("budget", budget), ("market", market)):
        if value is not None and not isinstance(value, str):
            raise CardError(f"{name}: a string ({'an amount with a currency, e.g. 300CNY' if name == 'budget' else 'a market of the price table, e.g. cn-rental'}),"
                            f" got {type(value).__name__} {str(value)[:40]!r}")
    if price_table is not None and not isinstance(price_table, (str, os.PathLike)):
        raise CardError(f"price_table: a path to a price table file, got {type(price_table).__name__} {str(price_table)[:40]!r}")
    if prices is not None and not isinstance(prices, Mapping):
        raise CardError(f"prices: a mapping of GPU id to a price, e.g. {{'rtx4090': '1.98CNY'}}, got {str(prices)[:60]!r}")
    kinds = [resolve_gpu(g).id for g in gpus]
    if not kinds:
        raise CardError("gpus: name at least one GPU kind, e.g. ['rtx4090']")
    # one clear error for a bad card before searching, on a kind that can run it (the search skips the others)
    card_on_a_kind(data, kinds, frozenset(pinned), load=load_card)
    if objective is not None and objective not in tuple(Objective):
        raise CardError(f"objective: '{objective}' is not one of cost, time, cards")
    amount = currency = None
    if budget is not None:
        b = parse_price(budget)
        if b.gpu is not None:
            raise CardError(f"budget: an amount with a currency, e.g. 300CNY, got '{budget}'")
        amount, currency = b.per_gpu_hour, b.currency
    if isinstance(fx, str):  # one string is one --fx item, never its characters
        fx = [fx]
    if fx is None or isinstance(fx, Mapping):
        rates = _fx_rates(fx or {})
    elif isinstance(fx, (list, tuple)):
        from trainfit.catalog.prices import exchange_rates

        rates = exchange_rates(list(fx), flag="fx")
    else:
        raise CardError(f"fx: a mapping {{('USD', 'CNY'): 7.2}}, a list of 'FROM:TO=RATE' strings or None, got"
                        f" {type(fx).__name__} {str(fx)[:40]!r}")
    try:
        goal = Goal(objective=Objective(objective or "cost"), steps=steps, tokens=tokens, budget=amount,
                    budget_currency=currency, deadline_s=deadline_s, fx=rates)
    except CardError as exc:  # Goal speaks the command line's flags; here they are fit's arguments
        raise CardError(_argument_names(str(exc))) from None
    table = {}
    source = None
    if price_table is not None or market is not None:
        from trainfit.catalog.prices import catalog_price_table, load_price_table

        source = load_price_table(price_table, what="price_table") if price_table is not None else catalog_price_table()
        if market is not None and market not in source.markets:
            raise CardError(f"market: '{market}' is not in the price table; allowed: {', '.join(source.markets)}")
        for gid in kinds:
            found = source.candidates(gid, market=market)
            if found:  # each row pays the entry that rents its card count cheapest (fit_search.price_for_count)
                table[gid] = found
    from trainfit.compute.cost import Price

    from trainfit.catalog.prices import add_priced_kind, named_price

    named_as: dict[str, str] = {}  # GPU id -> the key that priced it ('h100' and 'h100-sxm' are one kind)
    for g, p in (prices or {}).items():
        if not isinstance(g, str) or not isinstance(p, (str, Price)):
            raise CardError(f"prices[{g!r}]: a price with a currency ('1.98CNY'), a price-table id ('rtx4090-pro') or"
                            f" a Price, got {str(p)[:40]!r}")
        gid = resolve_gpu(g).id
        add_priced_kind(named_as, gid, searched=kinds, where=f"prices[{g!r}]", search_arg="gpus")
        if isinstance(p, str):
            p = named_price(source, p) or parse_price(p)
        table[gid] = for_gpu(p, gid)
    try:
        result = search_fit(data, gpus=kinds, max_gpus=max_gpus, prices=table, pinned=frozenset(pinned),
                            global_batch=global_batch, calibration=_calibration(calibration), goal=goal)
    except CardError as exc:  # the command line's flag named as this function's argument
        if str(exc).startswith("--global-batch:"):
            raise CardError("global_batch:" + str(exc).removeprefix("--global-batch:")) from None
        if str(exc).startswith("--steps:"):
            raise CardError(_argument_names(str(exc))) from None
        raise
    if "scope" not in pinned:
        from trainfit.fit_search import with_scope_note

        result = with_scope_note(result, data)
    return result


GOAL_ARGUMENTS = {"--steps": "steps", "--tokens": "tokens", "--deadline": "deadline_s", "--budget": "budget"}
"""``trainfit fit``'s flag -> ``trainfit.fit``'s argument, for the run's length and limits (``objective.Goal``)."""


def _argument_names(message: str) -> str:
    """A ``Goal`` message with the command line's flags named as ``fit``'s arguments."""
    import re

    return re.sub(r"--(steps|tokens|deadline|budget)\b", lambda m: GOAL_ARGUMENTS[m.group(0)], message)


def _fx_rates(fx: Mapping[Any, Any]) -> dict[tuple[str, str], float]:
    """``fit``'s ``fx`` mapping checked: ``(FROM, TO)`` pairs of 3-letter codes to a finite rate > 0 (a string key such
    as ``"USD:CNY"`` would split into its characters)."""
    import math

    from numbers import Real

    from trainfit.catalog.prices import add_rate, rate_ok
    from trainfit.errors import CardError

    rates: dict[tuple[str, str], float] = {}  # as given: one direction per pair (the command line adds the way back)
    for k, v in fx.items():
        pair = tuple(k) if isinstance(k, (tuple, list)) else None
        if pair is None or len(pair) != 2 or not all(isinstance(c, str) and len(c) == 3 and c.isalpha() for c in pair):
            raise CardError(f"fx: keys are (FROM, TO) pairs of 3-letter codes, e.g. {{('USD', 'CNY'): 7.2}} (or"
                            f" fx=['USD:CNY=7.2']), got {k!r}")
        try:  # an int beyond float's range (10**400) overflows in float() and in math.isfinite
            rate = float(v) if isinstance(v, Real) and not isinstance(v, bool) else None
        except OverflowError:
            rate = None
        if rate is None or not (math.isfinite(rate) and rate_ok(rate)):
            raise CardError(f"fx[{k!r}]: a finite rate > 0 whose reverse (1/rate) is finite (1 {pair[0]} = RATE"
                            f" {pair[1]}), got {str(v)[:40]!r}")
        if pair[0].upper() == pair[1].upper():
            raise CardError(f"fx[{k!r}]: FROM and TO are the same currency; give two, e.g. ('USD', 'CNY')")
        add_rate({}, rates, pair[0].upper(), pair[1].upper(), rate, where=f"fx[{k!r}]")
    return rates


def trace(card: Any = None, *, overrides: Mapping[str, Any] | None = None, layers: int | None = None,
          mode: str = "fast", reserved: bool = False):
    """The real PyTorch peak of the card's step on fake CPU tensors (``trainfit trace``; needs torch).

    Returns ``trainfit.trace.TraceResult``; ``trainfit.report.trace_report.trace_to_dict(result, plan)``
    gives the CLI's JSON beside the plan."""
    from trainfit.cli.trace_cmd import hf_config_for, trace_request_kwargs
    from trainfit.errors import TrainfitError
    from trainfit.plan import make_plan

    if layers is not None and (isinstance(layers, bool) or not isinstance(layers, Integral) or layers < 1):
        raise TrainfitError(f"trace: layers must be a whole number >= 1 or None, got {layers!r}")
    if layers is not None:
        layers = operator.index(layers)

    run_card = load_card(card, overrides)
    kwargs = trace_request_kwargs(run_card, hf_config_for(run_card), layouts=True)
    layout = {k: kwargs.pop(k) for k in ("context_parallel", "context_parallel_kind", "expert_parallel") if k in kwargs}
    if layout and (layout["context_parallel"] > 1 or layout["expert_parallel"] > 1) and (
            layers is not None or mode != "fast" or reserved):
        which = "context" if layout["context_parallel"] > 1 else "expert"
        raise TrainfitError(f"layers/mode/reserved: {which} parallel is traced at full depth, memory only, mode 'fast'")
    planned = make_plan(run_card)
    try:
        from trainfit.trace.api import TraceRequest, trace_step
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise TrainfitError(f"trace needs the trace extra: pip install -c constraints.txt 'trainfit[trace]' ({exc})") from exc
    if planned.worst_rank is not None and kwargs.get("pipeline_parallel", 1) > 1:
        kwargs["pipeline_stage"] = planned.worst_rank.pp
    return trace_step(TraceRequest(**kwargs, layers=layers, mode=mode, replay_allocator=reserved), **layout)


def size(model: str, *, tokens: int = 4096, batch: int = 1, gpu: str = "h100-sxm", kv_dtype: str = "bf16") -> ModelSize:
    """Parameter counts, weights per dtype, inference and one-GPU training memory (``trainfit size``)."""
    from trainfit.errors import CardError
    from trainfit.size import model_size

    counts = {}
    for name, value, top in (("tokens", tokens, "10,000,000"), ("batch", batch, "1,000,000")):  # size.model_size's limits
        # as fit's max_gpus: a whole number (a NumPy integer too), never a bool, a float or a numeric string
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise CardError(f"{name}: a whole number from 1 to {top}, got {repr(value)[:40]}")
        counts[name] = operator.index(value)
    for name, value in (("gpu", gpu), ("kv_dtype", kv_dtype)):  # model: resolve_model says what it takes
        if not isinstance(value, str):
            raise CardError(f"{name}: a string, got {type(value).__name__} {str(value)[:40]!r}")
    if isinstance(model, os.PathLike):  # a local config.json or model folder, as a pathlib.Path
        model = os.fspath(model)
    try:
        return model_size(model, gpu=gpu, kv_dtype=kv_dtype, **counts)
    except CardError as exc:  # the command line's flags named as this function's arguments
        raise CardError(str(exc).replace("--tokens", "tokens").replace("--batch", "batch")
                        .replace("--kv-dtype", "kv_dtype")) from None
