"""--json output of import and accept is strict JSON: a NaN or infinite value prints as null, never NaN/Infinity
(issue 17: they called json.dumps without allow_nan=False)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from trainfit.cli.main import main


def _strict(text: str):
    def bad(name: str):
        raise AssertionError(f"JSON output holds {name}")

    return json.loads(text, parse_constant=bad)


def test_import_json_is_strict(tmp_path, capsys, monkeypatch):
    from trainfit.export import importers

    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\nmethod: grpo\nscope: lora\n")
    script = tmp_path / "run_verl.sh"
    assert main(["export", str(card), "--to", "verl", "--out", str(script)]) == 0
    real = importers.import_text

    def with_nan(*args, **kwargs):
        imported = real(*args, **kwargs)
        imported.notes.append(float("nan"))  # a non-finite value anywhere in the payload
        return imported

    monkeypatch.setattr(importers, "import_text", with_nan)
    capsys.readouterr()
    assert main(["import", str(script), "--from", "verl", "--json"]) == 0
    obj = _strict(capsys.readouterr().out)
    assert obj["target"] == "verl" and obj["notes"][-1] is None and obj["card"]["method"] == "grpo"


def test_accept_json_is_strict(capsys, monkeypatch):
    from trainfit.cli.accept_cmd import ACCEPT_MODULES

    if any(importlib.util.find_spec(m) is None for m in ACCEPT_MODULES):
        pytest.skip("the 'accept' extra is not installed")
    from trainfit.accept import run

    record = {"ok": True, "wall_s": float("nan"), "checks": [], "peak_ratio": float("inf"), "runs": [-float("inf"), 1.5]}
    monkeypatch.setattr(run, "run_accept", lambda *a, **k: dict(record))
    assert main(["accept", "--json"]) == 0
    obj = _strict(capsys.readouterr().out)
    assert obj == {"ok": True, "wall_s": None, "checks": [], "peak_ratio": None, "runs": [None, 1.5]}
