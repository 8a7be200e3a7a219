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
    from trainfit.errors import CardError

    if "=" not in item:
        raise CardError(f"--set: expected KEY=VALUE (e.g. parallel.strategy=zero3), got '{item}'")
    from trainfit.spec.safe_yaml import YamlSyntaxError, load_yaml_limited

    key, raw = item.split("=", 1)
    try:
        value = load_yaml_limited(raw, what=f"--set {key.strip()[:60]}")  # bounded: no alias bombs
    except YamlSyntaxError:
        value = raw  # not YAML: the text itself
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
    from trainfit.spec.card import check_sections

    check_sections(data)  # a preset merges sections: each must be a mapping first
    if data.get("preset"):
        from trainfit.methods.presets import apply_preset

        data = apply_preset(data, str(data["preset"]))
    return load_card_dict(data)


def finite_json(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by null: the output is always valid JSON."""
    import math

    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def print_json(obj: Any) -> None:
    """Valid JSON on stdout (never NaN or Infinity: ``allow_nan=False`` after ``finite_json``)."""
    try:
        text = json.dumps(obj, indent=2, allow_nan=False)
    except ValueError:
        text = json.dumps(finite_json(obj), indent=2, allow_nan=False)
    sys.stdout.write(text + "\n")
