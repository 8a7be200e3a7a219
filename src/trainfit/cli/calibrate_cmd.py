"""`trainfit calibrate`: measurements or run records -> the calibration file plans read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from trainfit.cli.common import print_json


def calibrate(
    files: Annotated[list[Path], typer.Argument(help="`gpu_calibrate.py time` outputs, calibration files, run records (cards with record.step_s, RL record.phases_s.generation, or measured record.phases), or `gpu_calibrate.py measure` outputs.")],
    out: Annotated[Optional[Path], typer.Option("--out", help="Calibration file to write (merged over what is there). Default: $TRAINFIT_CALIBRATION, else $XDG_CONFIG_HOME/trainfit/calibration.json.")] = None,
    held_out: Annotated[Optional[list[Path]], typer.Option("--held-out", help="Records never fitted: a fitted constant that makes them worse is refused (not written). Repeat for several files.")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="Catalog GPU the measurements are of, when the output names none (a --dry-run) or an unknown one; refused when it disagrees with a known measured GPU.")] = None,
    allow_dry_run: Annotated[bool, typer.Option("--allow-dry-run", help="File a `gpu_calibrate.py time --dry-run` output (measured on the CPU) under --gpu as if it were GPU rates, and read a `measure --dry-run` output (its cases without reserved bytes skipped) (to test the pipeline; refused otherwise).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change; write nothing.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
) -> None:
    """Replace the plan's default rates and overhead constants with measured ones (per GPU kind), and
    print what changed: old -> new, the fits' residuals, what --held-out records refused. Plans pick
    the file up by default; see --calibration. Mechanism terms are never fitted."""
    from trainfit.calibration import calibrate as run, default_calibration_path

    if out is not None and not dry_run:  # refuse a folder, a missing folder or an input before any work
        from trainfit.fsio import check_output_path

        check_output_path(out, inputs=[*files, *(held_out or ())], what="--out")
    result = run(list(files), out=out if out is not None else default_calibration_path(), gpu=gpu, write=not dry_run,
                 held_out=tuple(held_out or ()), allow_dry_run=allow_dry_run)
    if json_:
        from trainfit.report.calibration import calibrate_to_dict

        print_json(calibrate_to_dict(result))
        return
    from rich.console import Console

    from trainfit.report.calibration import render_calibrate

    render_calibrate(result, Console(width=140))
