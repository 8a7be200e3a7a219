"""`trainfit compare RECORD`: planned vs measured per phase from a run record, and the verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainfit.cli.common import print_json


def compare(
    record: Annotated[Path, typer.Argument(help="A run record with measured phases (trainfit.watch or `trainfit record --measured`).")],
    memory_margin: Annotated[float | None, typer.Option("--memory-margin", min=0.0, help="Fraction a phase's memory may differ from the plan. Default: the record's, else 0.10.")] = None,
    time_margin: Annotated[float | None, typer.Option("--time-margin", min=0.0, help="Same for seconds (CUDA runs only). Default: the record's, else 0.30.")] = None,
    json_: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
) -> None:
    """Print the plan's and the run's memory and seconds for every phase, their errors and the
    verdict ('plan held' or 'plan off: <phases>'). Exit code 1 when the plan is off."""
    from trainfit.watch.compare import compare_record

    result = compare_record(record, memory_margin=memory_margin, time_margin=time_margin)
    if json_:
        print_json(result.to_dict())
    else:
        typer.echo("\n".join(result.lines()))
    if result.off:
        raise typer.Exit(1)
