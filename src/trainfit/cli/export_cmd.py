"""`trainfit export`: the launch config for accelerate, DeepSpeed, TRL, verl, OpenRLHF, torchtitan or NeMo RL."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainfit.cli.common import load_card, print_json


def _lost_lines(result) -> list[str]:
    import shlex

    if not result.lost:
        return []
    sets = [
        "--set " + shlex.quote(f"{key}={_value(v['card'])}")
        for key, v in result.lost.items()
        if v["card"] is not None and key != "model" and not key.startswith("(")
    ]
    if "preset" in result.lost and result.lost["preset"]["card"] is None:
        sets.append("--set preset=null")  # the card plans with no framework preset; the import names the file's
    with_ = " --with accelerate.yaml" if result.target == "trl" else ""
    how = (f"--set ... ({len(sets)} keys; --json lists them with their values)" if len(sets) > 8 else " ".join(sets))
    return [
        f"not carried by the {result.target} file ({len(result.lost)}): {', '.join(result.lost)}",
        f"  to plan the file with this card's other settings: trainfit import FILE --from {result.target}{with_} --base CARD",
        *([f"  to plan the imported file as this card: trainfit import FILE --from {result.target}{with_} {how}"] if sets else []),
    ]


def _value(v) -> str:
    """``v`` as a ``--set`` value that reads back as itself (``common.parse_set`` reads it as YAML): a string YAML
    would read as another type (a version "0.13" as the number 0.13, "true", "null", "8") is written JSON-quoted
    ("0.13", a YAML double-quoted string); any other value as JSON (YAML's flow style reads it)."""
    import json

    if not isinstance(v, str):
        return json.dumps(v)
    from trainfit.cli.common import parse_set

    return v if parse_set(f"k={v}")[1] == v else json.dumps(v)


def export(
    card: Annotated[Optional[Path], typer.Argument(help="Run card (YAML/JSON). Default: the embedded Qwen3-8B full SFT card.")] = None,
    to: Annotated[str, typer.Option("--to", help="accelerate | deepspeed | trl | verl | openrlhf | torchtitan | nemo-rl")] = "accelerate",
    out: Annotated[Optional[Path], typer.Option("--out", help="Write the config here (default: stdout).")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="Any card field: KEY=VALUE. Repeatable.")] = [],
    json_: Annotated[bool, typer.Option("--json", help="One JSON object: target, data, notes, lost, text.")] = False,
) -> None:
    """Write the launch config for the card. Settings the target cannot express are listed (notes, and the
    card keys the file does not carry) before anything is written."""
    from trainfit.export import export as do_export
    from trainfit.fsio import check_output_path, write_text_atomic

    if out is not None:
        check_output_path(out, inputs=(card,), what="--out")
    run_card = load_card(card, {}, set_)
    result = do_export(run_card, to)
    if json_:
        import json

        text = json.dumps(result.to_dict(), indent=2) + "\n"
        if out is not None:
            write_text_atomic(out, text, inputs=(card,), what="--out")
        else:
            print_json(result.to_dict())
        return
    # what the file cannot say comes first, before the file is written
    stream = sys.stderr if out is None else sys.stdout
    if result.notes:
        stream.write(f"notes ({len(result.notes)}): settings {result.target} does not take as given\n")
        for n in result.notes:
            stream.write(f"  - {n}\n")
    for line in _lost_lines(result):
        stream.write(line + "\n")
    if out is not None:
        write_text_atomic(out, result.text, inputs=(card,), what="--out")
        sys.stdout.write(f"wrote {result.target} config to {out}\n")
    else:
        sys.stdout.write(result.text)
