"""`trainfit fit`: search the knobs the card leaves open; rank the answers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trainfit.cli.common import print_json


def fit(
    card: Annotated[Optional[Path], typer.Argument(help="Run card. Default: the embedded default card.")] = None,
    gpu: Annotated[str, typer.Option(help="Comma-separated GPU catalog ids to consider.")] = "rtx4090,a100-40gb,a100-80gb,h100-sxm",
    max_gpus: Annotated[int, typer.Option(help="Most cards to consider (1, 2, 4, 8, 16, 32, 64).")] = 64,
    price: Annotated[list[str], typer.Option(help="GPU=PRICE with a currency, e.g. rtx4090=1.98CNY or rtx4090=rtx4090-pro. Repeatable.")] = [],
    set_: Annotated[list[str], typer.Option("--set", help="Pin any card field: KEY=VALUE. Repeatable.")] = [],
    steps: Annotated[Optional[int], typer.Option(help="Optimizer steps in the run, for the cost per run.")] = None,
    global_batch: Annotated[Optional[int], typer.Option(help="Sequences per optimizer step, kept fixed (default: the card's micro-batch x accumulation x GPUs).")] = None,
    json_: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    html: Annotated[Optional[Path], typer.Option(help="Also write an HTML report: ranked table and cost-against-time chart.")] = None,
    calibration: Annotated[Optional[Path], typer.Option("--calibration", help="Calibration file of measured rates (`trainfit calibrate`). Default: $TRAINFIT_CALIBRATION, else $XDG_CONFIG_HOME/trainfit/calibration.json, when it exists.")] = None,
) -> None:
    """Fewest cards of each type that fit, the knobs that make them fit, step time and cost; Pareto front marked."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.cli.common import default_card_dict, parse_set, set_path
    from trainfit.compute.cost import parse_price
    from trainfit.errors import CardError
    from trainfit.search import fit as run_fit
    from trainfit.search import flat_keys
    from trainfit.spec.card import load_card_dict, read_card_file

    data = read_card_file(card) if card is not None else default_card_dict()
    pinned = set(flat_keys(data)) if card is not None else {"model", "method"}
    for item in set_:
        key, value = parse_set(item)
        set_path(data, key, value)
        pinned.add(key)
    load_card_dict(data)  # one clear line for a bad card before searching
    from trainfit.calibration import load_found_calibration

    cal = load_found_calibration(calibration)
    from trainfit.search import GPU_COUNTS

    if global_batch is not None and global_batch < 1:
        raise CardError(f"--global-batch: must be at least 1, got {global_batch}")
    if max_gpus < 1:
        raise CardError(f"--max-gpus: must be at least 1 (counts tried: {', '.join(map(str, GPU_COUNTS))}), got {max_gpus}")
    gpus = [resolve_gpu(g.strip()).id for g in gpu.split(",") if g.strip()]
    if not gpus:
        raise CardError("--gpu: no card type left after the filters; name at least one, e.g. --gpu rtx4090")
    prices = {}
    for item in price:
        if "=" not in item:
            raise CardError(f"--price: expected GPU=PRICE with a currency (e.g. rtx4090=1.98CNY), got '{item}'")
        g, text = item.split("=", 1)
        prices[resolve_gpu(g.strip()).id] = parse_price(text.strip())
    from rich.console import Console as _Console
    from rich.progress import Progress

    import sys

    # the bar draws on an interactive stderr only, so pipes and error lines stay clean
    with Progress(transient=True, disable=json_ or not sys.stderr.isatty(), console=_Console(stderr=True)) as bar:
        task = bar.add_task("searching", total=1.0)
        result = run_fit(data, gpus=gpus, max_gpus=max_gpus, prices=prices, pinned=frozenset(pinned),
                         progress=lambda f: bar.update(task, completed=f), global_batch=global_batch,
                         calibration=cal)
    if html is not None:
        from trainfit.report.html import write_fit_html

        write_fit_html(result, html, title=f"trainfit fit: {', '.join(gpus)}")
    rows = [
        {
            "gpu": r.gpu, "gpus": r.gpus, "fits": r.fits, "peak_gpu_bytes": int(r.peak_device_bytes),
            "headroom_bytes": int(r.headroom_bytes), "peak_phase": r.peak_phase,
            "host_ram_bytes": int(r.host_ram_bytes),
            "tokens_per_s": r.tokens_per_s,
            "cost_per_step": r.cost_per_step,
            "cost_per_run": r.cost_per_step * steps if (steps and r.cost_per_step is not None) else None,
            "step_seconds": r.step_seconds, "cost_per_hour": r.cost_per_hour, "currency": r.currency,
            "pareto": r.pareto, "knobs": {k: v for k, v in r.knobs.items() if k not in ("hardware.gpu", "gpus")},
        }
        for r in result.rows
    ]
    if json_:
        print_json({"evaluated": result.evaluated, "invalid": result.invalid, "seconds": result.seconds, "rows": rows})
        return
    from rich.console import Console
    from rich.table import Table

    from trainfit.report.fmt import gib

    c = Console(width=160)
    t = Table(title=f"trainfit fit: {result.evaluated:,} configurations in {result.seconds:.1f} s"
                    f" ({result.evaluated / max(result.seconds, 1e-9):,.0f}/s); * = Pareto front (time vs cost)")
    for col in ("", "GPU", "cards", "fits", "peak (device)", "headroom", "host RAM/node", "step s", "tokens/s", "cost/h",
                "cost/run" if steps else "cost/step", "knobs"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            "*" if r["pareto"] else "", r["gpu"], str(r["gpus"]), "yes" if r["fits"] else "no",
            gib(r["peak_gpu_bytes"]), gib(r["headroom_bytes"]), gib(r["host_ram_bytes"], 0),
            f"{r['step_seconds']:.2f}" if r["step_seconds"] else "-",
            f"{r['tokens_per_s']:,.0f}" if r["tokens_per_s"] else "-",
            f"{r['cost_per_hour']:.2f} {r['currency']}" if r["cost_per_hour"] is not None else "-",
            _money(r["cost_per_run"] if steps else r["cost_per_step"], r["currency"]),
            ", ".join(f"{k}={v}" for k, v in sorted(r["knobs"].items())),
        )
    c.print(t)
    c.print("Each GPU type stops at the fewest cards that fit; rows that do not fit show the best attempt at that count.")
    c.print("Host RAM counts toward 'fits' only when the card states hardware.host_ram_gib.")


def _money(amount: float | None, currency: str | None) -> str:
    return "-" if amount is None else f"{amount:.4g} {currency}"
