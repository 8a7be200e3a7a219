"""Shared CLI plumbing: card loading with overrides, one-line errors, JSON output."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

DEFAULT_CARD = "default.yaml"


def default_card_dict() -> dict[str, Any]:
    """The embedded default card (``trainfit/cards/default.yaml``), parsed (see ``parse_yaml_kept``)."""
    card = resources.files("trainfit.cards").joinpath(DEFAULT_CARD)
    return parse_yaml_kept(card) if isinstance(card, Path) else _parse_yaml(card.read_text())


def _parse_yaml(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


def parse_yaml_kept(path: Path) -> Any:
    """``yaml.safe_load`` of the file at ``path``, without PyYAML when the file has not changed.

    Importing PyYAML and parsing costs a cold ``trainfit plan`` about 6% of its CPU, so what the default card
    parses to is kept beside it as JSON, the way Python keeps bytecode: ``__pycache__/<name>.json`` holds the
    YAML's exact text and its value, and is read only when that text is the file's text now. It is written
    (atomically; not under ``PYTHONDONTWRITEBYTECODE``; silently not where the folder is read-only) only when
    JSON gives back the same values of the same types."""
    text = path.read_text()
    cache = path.parent / "__pycache__" / f"{path.name}.json"
    try:
        kept = json.loads(cache.read_text())
        if isinstance(kept, dict) and kept.get("yaml") == text and "value" in kept:
            return kept["value"]
    except (OSError, ValueError):  # none yet, unreadable or torn: parse the YAML
        pass
    data = _parse_yaml(text)
    if not sys.dont_write_bytecode:
        try:
            blob = json.dumps({"yaml": text, "value": data})
        except (TypeError, ValueError):  # a date, a recursive alias: not JSON
            return data
        if _same(json.loads(blob)["value"], data):
            _write_atomic(cache, blob, mode=path.stat().st_mode & 0o666)
    return data


def _same(a: Any, b: Any) -> bool:
    """Equal values of identical types, all the way down (1 == 1.0 == True, but not here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _write_atomic(path: Path, text: str, *, mode: int) -> None:
    """Write ``text`` to ``path`` through a temporary file in its folder and a rename; on an OS error,
    nothing (a read-only install keeps parsing the YAML)."""
    import os
    import tempfile

    tmp = None
    try:
        path.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


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
        value = load_yaml_limited(raw, what=f"--set {key.strip()[:60]}", unique_keys=True)  # bounded: no alias bombs
    except YamlSyntaxError:
        value = raw  # not YAML: the text itself
    return key.strip(), value


def load_card(card: Path | None, overrides: dict[str, Any], sets: list[str]):
    """Read the card (or the embedded default), apply flag overrides, then the preset, validate (``resolve_card``)."""
    from trainfit.spec.card import read_card_file, resolve_card

    data = read_card_file(card) if card is not None else default_card_dict()
    for key, value in overrides.items():
        if value is not None:
            set_path(data, key, value)
    for item in sets:
        set_path(data, *parse_set(item))
    return resolve_card(data)


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
