"""`trainfit record`: write the run record (card + audit + git commit + timestamp) next to the run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trainfit.cli.common import load_card, print_json


def record(
    card: Annotated[Path, typer.Argument(help="Run card (YAML/JSON).")],
    out: Annotated[Optional[Path], typer.Option("--out", help="Record file. Default: <card stem>.record.yaml beside the card.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing record.")] = False,
    audit: Annotated[Optional[Path], typer.Option("--audit", help="A `trainfit audit --json` file; default: audit this machine now.")] = None,
    timeout: Annotated[float, typer.Option(min=0.1, help="Seconds each external command may take.")] = 10.0,
    measured: Annotated[Optional[Path], typer.Option("--measured", help="A watch record (trainfit.watch(card, record=PATH)): its planned vs measured phases, step time and versions go into this record.")] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the record as JSON too.")] = False,
) -> None:
    """Fill the card's software and hardware from the audit, add the recipe's git commit and a UTC
    timestamp, and write the record; with --measured, also planned vs measured per phase (memory
    and time) from a watch record. Never overwrites without --force."""
    from trainfit.preflight.record import build_record, default_record_path, git_state, write_record

    run_card = load_card(card, {}, [])
    target = out if out is not None else default_record_path(card)
    from trainfit.fsio import check_output_path

    inputs = [card, audit, measured]
    check_output_path(target, inputs=inputs, what="record")  # an input is never overwritten, even with --force
    if target.exists() and not force:  # refuse before spending time on the audit
        from trainfit.errors import TrainfitError

        raise TrainfitError(f"record: '{target}' already exists; pass --force to overwrite it")
    if audit is not None:
        from trainfit.cli.check_cmd import load_audit

        report = load_audit(audit)
    else:
        from trainfit.preflight.audit import run_audit

        report = run_audit(checkpoint_path=run_card.checkpoint.path or ".", timeout_s=timeout)
    recipe = Path(run_card.recipe.path) if run_card.recipe.path else Path.cwd()
    data = build_record(run_card, report, card_path=card, git=git_state(recipe, timeout_s=timeout))
    if measured is not None:
        from trainfit.preflight.record import add_measured
        from trainfit.spec.safe_yaml import load_mapping_file

        data = add_measured(data, load_mapping_file(measured, what="--measured"))
    write_record(data, target, force=force, inputs=inputs)
    if json_:
        print_json({"path": str(target), "record": data})
        return
    typer.echo(f"wrote {target}")
    for note in data["record"]["notes"]:
        typer.echo(f"note: {note}")
