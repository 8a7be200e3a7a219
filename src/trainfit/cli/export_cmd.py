"""`trainfit export`: the launch config for accelerate, DeepSpeed, TRL, verl or OpenRLHF."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainfit.cli.common import load_card, print_json


def export(
    card: Annotated[Optional[Path], typer.Argument(help="Run card (YAML/JSON). Default: the embedded Qwen3-8B full SFT card.")] = None,
    to: Annotated[str, typer.Option("--to", help="accelerate | deepspeed | trl | verl | openrlhf")] = "accelerate",
    out: Annotated[Optional[Path], typer.Option("--out", help="Write the config here (default: stdout).")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="Any card field: KEY=VALUE. Repeatable.")] = [],
    json_: Annotated[bool, typer.Option("--json", help="One JSON object: target, data, notes, text.")] = False,
) -> None:
    """Write the launch config for the card; settings the target cannot express are listed as notes."""
    from trainfit.export import export as do_export

    run_card = load_card(card, {}, set_)
    result = do_export(run_card, to)
    if json_:
        if out is not None:
            import json

            out.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
        else:
            print_json(result.to_dict())
        return
    if out is not None:
        out.write_text(result.text)
        sys.stdout.write(f"wrote {result.target} config to {out}\n")
    else:
        sys.stdout.write(result.text)
    if result.notes:
        stream = sys.stderr if out is None else sys.stdout
        stream.write(f"notes ({len(result.notes)}): settings {result.target} does not take as given\n")
        for n in result.notes:
            stream.write(f"  - {n}\n")
