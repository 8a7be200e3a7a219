"""`trainfit import`: read a launch config (accelerate, DeepSpeed, TRL, verl, OpenRLHF, torchtitan, NeMo RL) back into a card."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer


def import_(
    file: Annotated[Path, typer.Argument(help="The launch config: accelerate YAML, DeepSpeed JSON, TRL train_config.py, verl or OpenRLHF script, torchtitan TOML, NeMo RL YAML.")],
    from_: Annotated[str, typer.Option("--from", help="accelerate | deepspeed | trl | verl | openrlhf | torchtitan | nemo-rl")],
    with_: Annotated[Optional[Path], typer.Option("--with", help="--from trl: the accelerate .yaml or DeepSpeed .json it launches with.")] = None,
    base: Annotated[Optional[Path], typer.Option("--base", help="A card that fills what the file does not carry (the file's settings win).")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="Card fields the file does not carry: KEY=VALUE. Repeatable.")] = [],
    out: Annotated[Optional[Path], typer.Option("--out", help="Write the card YAML here (default: stdout).")] = None,
    json_: Annotated[bool, typer.Option("--json", help="One JSON object: card, notes.")] = False,
) -> None:
    """Read a launch config back into a run card (YAML). Nothing in the file is run; what the file says that a
    card cannot, and what it leaves to the card's defaults, is listed."""
    import json

    import yaml

    from trainfit.cli.common import finite_json, parse_set
    from trainfit.export.importers import import_text, left_open_notes, missing_required
    from trainfit.fsio import check_output_path, write_text_atomic
    from trainfit.spec.card import load_card_dict
    from trainfit.spec.dotted import set_dotted
    from trainfit.spec.safe_yaml import read_text_limited

    if out is not None:
        check_output_path(out, inputs=(file, with_, base), what="--out")
    text = read_text_limited(file, what="FILE")
    companion = None
    if with_ is not None:
        kind = "deepspeed" if with_.suffix.lower() == ".json" else "accelerate"
        companion = (kind, read_text_limited(with_, what="--with"))
    imported = import_text(text, from_, companion=companion)
    data = imported.card
    if base is not None:
        from trainfit.spec.card import read_card_file
        from trainfit.spec.dotted import merge_under

        data = merge_under(_base_for(read_card_file(base), data), data)
    set_keys = []
    for item in set_:
        key, value = parse_set(item)
        set_dotted(data, key, value)
        set_keys.append(key)
    missing_required(imported, data)  # a model name the shell fills in: refused unless --set/--base gave it
    card = load_card_dict(data)  # validated: the card plans as written
    # a key the file leaves open (absent, or the HF Trainer's "auto"): said with the value taken and where from
    notes = imported.notes + left_open_notes(imported, data, card, set_keys=frozenset(set_keys))
    body = card.model_dump(mode="json", exclude_unset=True)
    if json_:
        payload = json.dumps(finite_json({"target": imported.target, "card": body, "notes": notes}),
                             indent=2, allow_nan=False) + "\n"  # strict JSON, as print_json: never NaN/Infinity
    else:
        header = f"# run card read by trainfit import from {from_} file {ascii(str(file))[1:-1]}\n"
        payload = header + "".join(f"# note: {ascii(n)[1:-1]}\n" for n in notes) + yaml.safe_dump(body, sort_keys=False)
    if out is not None:
        write_text_atomic(out, payload, inputs=(file, with_, base), what="--out")
        sys.stdout.write(f"wrote the card to {out}\n")
    else:
        sys.stdout.write(payload)


def _base_for(base: dict, imported: dict) -> dict:
    """The base card without the sections the imported settings replace as a whole (a LoRA section
    under a full-scope import, the rollout of another method)."""
    out = dict(base)
    if imported.get("scope") == "full":
        out.pop("lora", None)
    out.pop("preset", None)
    return out
