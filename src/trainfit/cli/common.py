"""Shared CLI plumbing: card loading with overrides, one-line errors, JSON output."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

DEFAULT_CARD = "default.yaml"


def default_card_dict() -> dict[str, Any]:
    import yaml

    return yaml.safe_load(resources.files("trainfit.cards").joinpath(DEFAULT_CARD).read_text())


def set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested card dict (see ``trainfit.spec.dotted.set_dotted``)."""
    from trainfit.spec.dotted import set_dotted

    set_dotted(data, dotted, value)


def parse_set(item: str) -> tuple[str, Any]:
    import yaml

    from trainfit.errors import CardError

    if "=" not in item:
        raise CardError(f"--set: expected KEY=VALUE (e.g. parallel.strategy=zero3), got '{item}'")
    key, raw = item.split("=", 1)
    try:
        value = yaml.safe_load(raw)
    except Exception:  # noqa: BLE001
        value = raw
    return key.strip(), value


def load_card(card: Path | None, overrides: dict[str, Any], sets: list[str]):
    """Read the card (or the embedded default), apply flag overrides, validate."""
    from trainfit.spec.card import load_card_dict, read_card_file

    data = read_card_file(card) if card is not None else default_card_dict()
    for key, value in overrides.items():
        if value is not None:
            set_path(data, key, value)
    for item in sets:
        set_path(data, *parse_set(item))
    if data.get("preset"):
        from trainfit.methods.presets import apply_preset

        data = apply_preset(data, str(data["preset"]))
    return load_card_dict(data)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")
