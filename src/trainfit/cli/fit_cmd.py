"""`trainfit fit`: search every GPU kind, card count and open knob; rank by cost, time or cards."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from trainfit.cli.common import print_json

DEFAULT_GPUS = "rtx4090,a100-40gb,a100-80gb,h100-sxm"


def fit(
    card: Annotated[Path | None, typer.Argument(help="Run card. Default: the embedded default card.")] = None,
    gpu: Annotated[str, typer.Option(help="Comma-separated GPU catalog ids to consider.")] = DEFAULT_GPUS,
    max_gpus: Annotated[int, typer.Option(help="Most cards: every count 1-8 on one node, then 16, 32, 64.")] = 64,
    objective: Annotated[str | None, typer.Option(help="cost | time | cards. Default: cost (per run with --steps/--tokens, else per step, time breaking ties).")] = None,
    steps: Annotated[int | None, typer.Option(help="Steps in the run: ranks by cost per run. Optimizer steps for SFT, RM and DPO, each of the global batch every row holds (--global-batch), so the same samples on every row; RL steps for PPO/GRPO (one rollout batch and its rollout.mini_batches x num_iterations optimizer steps, as verl's trainer.total_training_steps counts; TRL's max_steps counts optimizer steps: divide it by those).")] = None,
    tokens: Annotated[float | None, typer.Option(help="Tokens in the run (steps = tokens / tokens per step, per row; RL steps for PPO/GRPO).")] = None,
    budget: Annotated[str | None, typer.Option(help="Most to spend, with a currency (e.g. 300CNY): per run with --steps/--tokens, else per hour.")] = None,
    deadline: Annotated[str | None, typer.Option(help="Longest run wall-clock, e.g. 12h, 90m, 2d (needs --steps or --tokens).")] = None,
    price: Annotated[list[str], typer.Option(help="GPU=PRICE with a currency, or GPU=<price table id>, e.g. rtx4090=1.98CNY or rtx4090=rtx4090-pro. Repeatable. An amount is per GPU, single GPUs rented (a whole instance's price: a --price-table entry with gpus_per_instance; a card's own hardware.price_per_gpu_hour takes hardware.price_gpus_per_instance); a table id bills by its entry's rentable unit (aws-p5-h100-sxm: the whole 8-GPU p5.48xlarge, so 1 card pays for 8).")] = [],
    price_table: Annotated[Path | None, typer.Option(help="Your own price table (JSON/YAML, the catalog's shape): each row pays the entry of its GPU kind that rents its card count cheapest, billed by the entry's gpus_per_instance.")] = None,
    market: Annotated[str | None, typer.Option(help="Price every GPU kind from the catalog's table in this market (cn-rental, cloud-on-demand): each row pays the entry that rents its card count cheapest, a whole-instance entry billing every GPU of the instance.")] = None,
    fx: Annotated[list[str], typer.Option(help="Exchange rate FROM:TO=RATE (1 FROM = RATE TO), e.g. USD:CNY=7.2. Repeatable. Without one, currencies are ranked apart.")] = [],
    set_: Annotated[list[str], typer.Option("--set", help="Pin any card field: KEY=VALUE (hardware.gpus_per_node pins the count). Repeatable.")] = [],
    global_batch: Annotated[int | None, typer.Option(help="Sequences per optimizer step, held fixed on every row (default: the card's micro-batch x accumulation x data-parallel ranks, as written); each row picks its accumulation (and micro-batch, unless pinned) to train exactly that many, and a card count that cannot split it is listed as skipped. With batch.micro_batch_size and batch.grad_accum both pinned by --set, and no --global-batch, rows are ranked per token instead (--steps refused; give --tokens).")] = None,
    search_scope: Annotated[bool, typer.Option("--search-scope", help="Also search scope (full, lora, qlora): without it the card's scope is held, the default card's full SFT included; the output warns that rows may train another scope.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    html: Annotated[Path | None, typer.Option(help="Also write an HTML report: ranked table and cost-against-time chart.")] = None,
    calibration: Annotated[Path | None, typer.Option("--calibration", help="Calibration file of measured rates (`trainfit calibrate`). Default: $TRAINFIT_CALIBRATION, else $XDG_CONFIG_HOME/trainfit/calibration.json, when it exists.")] = None,
) -> None:
    """The best plan of each GPU kind and card count, ranked by the objective; Pareto front marked.

    Model, method and scope (what to train) are held as the card states them, with a card file or the default card
    alike (--search-scope opens scope). What a card file writes is pinned too, except its hardware section (where the
    search starts) and batch.grad_accum (chosen per row to hold the global batch); with no CARD the default card's
    other fields are starting values the search varies. --set pins more, hardware.* and batch.grad_accum included."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.cli.common import default_card_dict, parse_set
    from trainfit.errors import CardError
    from trainfit.fit_search import card_on_a_kind, fit_start, with_scope_note
    from trainfit.search import GPU_COUNTS
    from trainfit.search import fit as run_fit
    from trainfit.spec.card import load_card_dict, read_card_file

    # the preset filled under the card and --set, pins taken before it (fit_start: as trainfit.fit and the web API)
    data, pinned = fit_start(read_card_file(card) if card is not None else default_card_dict(),
                             card_file=card is not None, search_scope=search_scope,
                             sets=tuple(parse_set(item) for item in set_))
    from trainfit.plan import check_model_options

    gpus = [resolve_gpu(g.strip()).id for g in gpu.split(",") if g.strip()]
    if not gpus:
        raise CardError("--gpu: no card type left after the filters; name at least one, e.g. --gpu rtx4090")
    card_ = card_on_a_kind(data, gpus, frozenset(pinned), load=load_card_dict)
    if card_ is not None:  # else every kind refuses the card: the search says why, once per kind
        check_model_options(card_)  # one clear line for a bad card before searching
    if global_batch is not None and global_batch < 1:
        raise CardError(f"--global-batch: must be at least 1, got {global_batch}")
    if max_gpus < 1:
        raise CardError(f"--max-gpus: must be at least 1 (counts tried: {', '.join(map(str, GPU_COUNTS))}), got {max_gpus}")
    if html is not None:  # refuse a bad output path before searching (a folder, a missing folder, an input)
        from trainfit.fsio import check_output_path

        check_output_path(html, inputs=[card, calibration, price_table], what="--html")
    goal = _goal(objective, steps, tokens, budget, deadline, fx)
    prices = _prices(price, price_table, market, gpus)
    from trainfit.calibration import load_found_calibration

    cal = load_found_calibration(calibration)
    import sys

    from rich.console import Console as _Console
    from rich.progress import Progress

    # the bar draws on an interactive stderr only, so pipes and error lines stay clean
    with Progress(transient=True, disable=json_ or not sys.stderr.isatty(), console=_Console(stderr=True)) as bar:
        task = bar.add_task("searching", total=1.0)
        result = run_fit(data, gpus=gpus, max_gpus=max_gpus, prices=prices, pinned=frozenset(pinned),
                         progress=lambda f: bar.update(task, completed=f), global_batch=global_batch,
                         calibration=cal, goal=goal)
    if "scope" not in pinned:
        result = with_scope_note(result, data)
    if html is not None:  # atomic: a full disk leaves no half-written report
        from trainfit.fsio import write_text_atomic
        from trainfit.report.html import fit_html

        write_text_atomic(html, fit_html(result, title=f"trainfit fit: {', '.join(gpus)}"),
                          inputs=[card, calibration, price_table], what="--html")
    rows = [_row(r, result.optimizer_steps_per_step) for r in result.rows]
    if json_:
        from trainfit.fit_search import basis_dict
        from trainfit.report.html import skipped_of

        print_json({"evaluated": result.evaluated, "invalid": result.invalid, "seconds": result.seconds,
                    "objective": goal.objective.value, "run_steps": goal.steps, "run_tokens": goal.tokens,
                    "run_step_unit": result.step_unit.value, "optimizer_steps_per_run_step": result.optimizer_steps_per_step,
                    "run_optimizer_steps": (None if goal.steps is None
                                            else goal.steps * result.optimizer_steps_per_step),
                    "batch_basis": basis_dict(result),
                    "warnings": list(result.warnings), "card_stack": result.stack.value if result.stack else None,
                    "calibration": _calibration(cal, gpus, card_, result.rows),
                    "rows": rows,
                    "skipped": skipped_of(result)})
        return
    if cal is not None:
        from rich.console import Console as _Header
        from rich.markup import escape

        _Header(width=160).print(escape(_calibration_text(_calibration(cal, gpus, card_, result.rows))), soft_wrap=True)
    _render(result, rows, goal)


def _calibration(cal, gpus: list[str], card, rows) -> dict | None:
    """The file the search's plans read, the kinds it holds, and per searched kind what its plans apply: the rates
    (only for a kind with a row that has a step time), the engine host constants the card's rollout engine reads
    (``plan.rl_common.engine_host_fields_read``: none for hf or a card that generates nothing; ``engine`` names
    the engine), the memory constants (each row's plan applies the one its layout's reserved holds: ``trainfit plan
    --json`` on the row's card says which). ``card``: the searched card as loaded (None: no kind could load it)."""
    if cal is None:
        return None
    from trainfit.calibration.apply import ENGINE_HOST_FIELDS, applied_to_dict
    from trainfit.calibration.memory import MEMORY_FIELDS
    from trainfit.plan.rl_common import engine_host_fields_read, engine_label

    reads = set(engine_host_fields_read(card)) if card is not None else set()
    timed = {r.gpu for r in rows if r.step_seconds is not None}
    applied = {}
    for g in gpus:
        entry = cal.device(g)
        if entry is None:
            continue
        applied[g] = applied_to_dict({k: v for k, v in entry.rates if k in MEMORY_FIELDS or (
            g in timed and (k in reads and v is not None if k in ENGINE_HOST_FIELDS else True))})
    engine = engine_label(card) if card is not None and reads else None
    return {"path": cal.path, "gpus": list(cal.gpu_ids), "engine": engine, "applied": applied}


def _calibration_text(obj: dict) -> str:
    from trainfit.calibration.apply import ENGINE_HOST_FIELDS

    def fields(applied: dict) -> str:
        rates = [k for k in applied if k not in ENGINE_HOST_FIELDS]
        engine = [k for k in applied if k in ENGINE_HOST_FIELDS]
        parts = ([", ".join(rates)] if rates else []) + ([f"{obj.get('engine')} engine host {', '.join(engine)}"]
                                                           if engine else [])
        return "; ".join(parts) or "nothing"

    kinds = "; ".join(f"{g}: {fields(applied)}" for g, applied in obj["applied"].items())
    return (f"calibration: {obj['path'] or '(in memory)'} ({', '.join(obj['gpus']) or 'no GPU'}); "
            + (f"applied on {kinds}" if kinds else "no searched GPU kind is in it: default rates"))


def _goal(objective, steps, tokens, budget, deadline, fx):
    from trainfit.catalog.prices import exchange_rates
    from trainfit.compute.cost import parse_price
    from trainfit.errors import CardError
    from trainfit.objective import Goal, Objective

    if objective is not None and objective not in tuple(Objective):
        raise CardError(f"--objective: '{objective}' is not one of cost, time, cards")
    amount = cur = None
    if budget is not None:
        try:
            b = parse_price(budget)
        except CardError as exc:  # the price parser speaks of a price per GPU-hour; this is the run's budget
            why = "no currency" if "no currency" in str(exc) else "not an amount"
            raise CardError(f"--budget: an amount with a currency, e.g. 300CNY, got '{budget}' ({why})") from exc
        if b.gpu is not None:
            raise CardError(f"--budget: an amount with a currency, e.g. 300CNY, got '{budget}'")
        amount, cur = b.per_gpu_hour, b.currency
    return Goal(objective=Objective(objective or "cost"), steps=steps, tokens=tokens, budget=amount,
                budget_currency=cur, deadline_s=_seconds(deadline) if deadline is not None else None,
                fx=exchange_rates(fx))


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d)?\s*$", re.IGNORECASE)


def _seconds(text: str) -> float:
    from trainfit.errors import CardError

    m = _DURATION.match(text)
    if not m or not float(m.group(1)) > 0:
        raise CardError(f"--deadline: expected a duration like 12h, 90m, 2d or 3600s, got '{text}'")
    unit = (m.group(2) or "h").lower()
    return float(m.group(1)) * {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}[unit]


def _prices(items, table_path, market, gpus):
    """GPU id -> Price: --price first, then --price-table / --market: a tuple of the kind's entries, of which each row
    pays the one that rents its card count cheapest (``fit_search.price_for_count``)."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.catalog.prices import add_priced_kind, catalog_price_table, load_price_table, named_price
    from trainfit.compute.cost import for_gpu, parse_price
    from trainfit.errors import CardError

    out = {}
    given: dict[str, str] = {}  # GPU id -> the --price item that priced it (add_priced_kind)
    table = load_price_table(table_path) if table_path is not None else None
    if market is not None:
        table = table or catalog_price_table()
        if market not in table.markets:
            raise CardError(f"--market: '{market}' is not in the price table; allowed: {', '.join(table.markets)}")
    if table is not None:
        for g in gpus:
            entries = table.candidates(g, market=market)
            if entries:
                out[g] = entries
    for item in items:
        if "=" not in item:
            raise CardError(f"--price: expected GPU=PRICE with a currency (e.g. rtx4090=1.98CNY), got '{item}'")
        g, text = item.split("=", 1)
        gid = resolve_gpu(g.strip()).id
        add_priced_kind(given, gid, searched=gpus, where=f"--price {item}", search_arg="--gpu")
        try:
            out[gid] = for_gpu(named_price(table, text) or parse_price(text.strip()), gid)
        except CardError as exc:
            raise CardError(f"--price {item}: {exc}") from None
    return out


def _row(r, optimizer_steps_per_step: int = 1) -> dict:
    """A row as JSON; ``run_optimizer_steps``: its run's steps x ``optimizer_steps_per_step`` (``FitResult``)."""
    return {
        "gpu": r.gpu, "gpus": r.gpus, "fits": r.fits, "within_limits": r.within_limits,
        "peak_gpu_bytes": round(r.peak_device_bytes), "headroom_bytes": round(r.peak_device_bytes + r.headroom_bytes) - round(r.peak_device_bytes), "peak_phase": r.peak_phase,
        "host_ram_bytes": int(r.host_ram_bytes), "tokens_per_s": r.tokens_per_s,
        "step_seconds": r.step_seconds, "step_unavailable": r.step_unavailable, "cost_per_hour": r.cost_per_hour, "currency": r.currency, "price_id": r.price_id,
        "billed_gpus": r.billed_gpus, "billing_note": r.billing_note,
        "cost_per_step": r.cost_per_step, "run_steps": r.run_steps,
        "run_optimizer_steps": None if r.run_steps is None else r.run_steps * optimizer_steps_per_step,
        "run_seconds": r.run_seconds,
        "cost_per_run": r.cost_per_run, "rank_cost": r.rank_cost, "rank_currency": r.rank_currency,
        "pareto": r.pareto, "knobs": {k: v for k, v in r.knobs.items() if k not in ("hardware.gpu", "gpus")},
        "parallel": dict(r.parallel), "stack": r.stack.value if r.stack is not None else None,
    }


def _render(result, rows, goal) -> None:
    from rich.console import Console
    from rich.table import Table

    from trainfit.fit_search import LAYOUT_KEYS, STACK_KEY, basis_note, stack_note
    from trainfit.report.fmt import gib
    from trainfit.search import layout_text

    c = Console(width=160)
    run = goal.has_run
    per_token = result.goal is not None and result.goal.per_token and not run
    step_by = ("cost per token (then time per token)", "time per token") if per_token else (
        "cost per step (then step time)", "step time")
    by = {"cost": "cost per run" if run else step_by[0], "time": "run time" if run else step_by[1],
          "cards": "fewest cards (then cost, time)"}[goal.objective.value]
    priced = any(r.cost_per_hour is not None for r in result.rows if r.fits)
    unpriced = goal.objective.value == "cost" and not priced  # objective.rank_key falls to time: say so, as the HTML
    if unpriced:  # caption does
        by = "run time" if run else step_by[1]
    why = " (no row has a price, so cost cannot rank)" if unpriced else ""
    t = Table(title=f"trainfit fit: {result.evaluated:,} configurations in {result.seconds:.1f} s"
                    f" ({result.evaluated / max(result.seconds, 1e-9):,.0f}/s); ranked by {by}{_run_text(result, goal)}{why}"
                    f"; {basis_note(result)}; * = Pareto front (time vs cost)")
    from trainfit.objective import StepUnit

    step_col = "RL step s" if result.step_unit is StepUnit.RL_STEP else "step s"
    for col in ("", "GPU", "cards", "fits", "peak (device)", "headroom", "host RAM/node", step_col, "tokens/s", "cost/h",
                "cost/run" if run else "cost/step", "run h" if run else "", "stack", "tp/pp/cp/ep", "knobs"):
        t.add_column(col, overflow="fold")
    for r in rows:
        flag = "*" if r["pareto"] else ("!" if r["fits"] and not r["within_limits"] else "")
        t.add_row(
            flag, r["gpu"], str(r["gpus"]), "yes" if r["fits"] else "no",
            gib(r["peak_gpu_bytes"]), gib(r["headroom_bytes"]), gib(r["host_ram_bytes"], 0),
            f"{r['step_seconds']:.2f}" if r["step_seconds"] else "n/a" if r["step_unavailable"] else "-",
            f"{r['tokens_per_s']:,.0f}" if r["tokens_per_s"] else "-",
            (f"{r['cost_per_hour']:.2f} {r['currency']}"
             + (f" (billed {r['billed_gpus']} GPUs)" if r["billing_note"] else "")) if r["cost_per_hour"] is not None else "-",
            _money(r["cost_per_run"] if run else r["cost_per_step"], r["currency"]),
            (f"{r['run_seconds'] / 3600:.1f}" if r["run_seconds"] else "-") if run else "",
            r["stack"] or "-", layout_text(tuple(r["parallel"].items())),
            ", ".join(_knob(k, v) for k, v in sorted(r["knobs"].items())
                      if k not in LAYOUT_KEYS.values() and k != STACK_KEY),
        )
    c.print(t)
    best = result.best
    if best is not None:
        figure = _per_million_tokens(best) if per_token else (
            f"{best.step_seconds:.3g} s/step" if not priced and not run and best.step_seconds is not None else
            f"{_money(best.cost_per_run if run else best.cost_per_step, best.currency)}{'' if run else '/step'}"
            f"{f', {best.run_seconds / 3600:.1f} h' if run and best.run_seconds else ''}")
        c.print(f"best by {by}: {best.gpus} x {best.gpu} ({layout_text(best.parallel)}, {best.stack.value if best.stack else '-'}),"
                f" {figure}", markup=False)
    else:
        c.print("no plan fits within the limits; the rows show the closest attempts", markup=False)
    for w in result.warnings:
        c.print(f"[yellow]warning[/yellow]: {w}")
    for r in rows:  # a row that pays for idle GPUs of a whole instance says so
        if r["billing_note"]:
            c.print(f"billed {r['gpus']} x {r['gpu']} ({r['price_id'] or 'price'}): {r['billing_note']}", markup=False)
    for k in result.skipped:
        c.print(f"skipped {k.gpu}{'' if k.gpus is None else f' at {k.gpus} cards'}: {k.reason}", markup=False)
    unpriced = sorted({r["gpu"] for r in rows if r["cost_per_hour"] is None})
    if unpriced and goal.objective.value != "time":
        c.print(f"no price for {', '.join(unpriced)}: those rows rank after priced ones; give --price GPU=AMOUNTCUR,"
                " a price table id (`--price a100-80gb=lambda-a100-80gb-8x`), --price-table or --market", markup=False)
    c.print("Every GPU kind is tried at every card count up to --max-gpus; each row is the best plan at that count"
            " (rows that do not fit show the closest attempt). ! = fits but breaks --budget/--deadline.")
    c.print("Model parallel sizes the card leaves open (TP within a node, PP, CP from 8k tokens, EP) are searched at"
            " every count, every layout with every knob; pin them with --set parallel.tensor_parallel=8 to compare.",
            markup=False)
    c.print(stack_note(result.stack), markup=False)
    c.print("Rows without a price rank after priced ones on cost; host RAM counts toward 'fits' only when the card"
            " states hardware.host_ram_gib.")


def _knob(key: str, value) -> str:
    """One knob as the table shows it; the (micro-batch, accumulation) pair as ``batch=1x8``."""
    if key == "batch" and isinstance(value, dict):
        return f"batch={value.get('micro_batch_size')}x{value.get('grad_accum')} (micro x accum)"
    return f"{key}={value}"


def _run_text(result, goal) -> str:
    """The run's length with its unit (``FitResult.step_unit``): " of 200 RL steps (800 optimizer steps, ...)",
    " of 1,000 optimizer steps", " of 1e+09 tokens (RL steps = tokens / tokens per RL step, per row)"; empty
    without a run length."""
    from trainfit.objective import StepUnit

    rl = result.step_unit is StepUnit.RL_STEP
    k = result.optimizer_steps_per_step
    if goal.steps is not None:
        if not rl:
            return f" of {goal.steps:,} optimizer steps"
        return (f" of {goal.steps:,} RL steps ({goal.steps * k:,} optimizer steps, {k} per RL step:"
                " rollout.mini_batches x num_iterations)")
    if goal.tokens is not None:
        return f" of {goal.tokens:.4g} tokens ({'RL' if rl else 'optimizer'} steps = tokens / tokens per step, per row)"
    return ""


def _per_million_tokens(row) -> str:
    """The per-token figures a per-token ranking compares (``objective.Goal.per_token``): cost and step time over
    the row's own tokens per step, per million tokens (a step there carries its own batch)."""
    tokens = row.tokens_per_step
    if not tokens or row.step_seconds is None:
        return "-"
    cost = None if row.cost_per_step is None else row.cost_per_step / tokens * 1e6
    return f"{_money(cost, row.currency)}/1M tokens, {row.step_seconds / tokens * 1e6:.4g} s/1M tokens"


def _money(amount: float | None, currency: str | None) -> str:
    return "-" if amount is None else f"{amount:.4g} {currency}"
