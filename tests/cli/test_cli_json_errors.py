"""``--json`` is JSON on every path, errors included: a refusal under ``--json`` prints one JSON object on stdout,
``{"error": "<the line>"}`` (the shape the web API answers a refused card with, docs/api.md "Limits and errors"),
beside the usual one line on stderr and exit code 2. Before, stdout was empty, so ``trainfit plan card.yaml --json |
jq .`` read nothing and a caller parsing stdout got a JSON decode error instead of the reason."""

from __future__ import annotations

import json

import pytest

from trainfit.cli.main import main


def _strict(text: str):
    def bad(name: str):
        raise AssertionError(f"JSON output holds {name}")

    return json.loads(text, parse_constant=bad)


def _bad_card(tmp_path):
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-0.6B\nprecision: {tf32: maybe}\n")
    return card


CASES = [
    # (argv builder, fragment of the one line)
    (lambda d: ["plan", str(_bad_card(d)), "--json"], "precision.tf32: input should be a valid boolean"),
    (lambda d: ["plan", "--model", "nope/nope", "--json"], "model: 'nope/nope' is not in the catalog"),
    (lambda d: ["fit", str(_bad_card(d)), "--json"], "precision.tf32: input should be a valid boolean"),
    (lambda d: ["size", "Qwen/Qwen3-0.6B", "--kv-dtype", "int4", "--json"], "--kv-dtype: 'int4' is not allowed"),
    (lambda d: ["check", str(_bad_card(d)), "--json"], "precision.tf32: input should be a valid boolean"),
    (lambda d: ["export", str(_bad_card(d)), "--to", "trl", "--json"], "precision.tf32: input should be a valid boolean"),
    (lambda d: ["compare", str(d / "missing.yaml"), "--json"], "missing.yaml"),
    (lambda d: ["diagnose", "oom-load", "--card", str(_bad_card(d)), "--json"], "precision.tf32: input should be a valid boolean"),
]


@pytest.mark.parametrize(("argv", "fragment"), CASES, ids=[f"{i}" for i in range(len(CASES))])
def test_a_refusal_under_json_is_one_json_object_on_stdout(tmp_path, capsys, argv, fragment):
    rc = main(argv(tmp_path))
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert err.startswith("trainfit: error: ") and err.count("\n") == 1 and fragment in err, err
    obj = _strict(out)
    assert obj == {"error": err[len("trainfit: error: "):].rstrip("\n")}


def test_a_usage_error_under_json_is_one_json_object_on_stdout(capsys):
    rc = main(["size", "Qwen/Qwen3-0.6B", "--tokens", "nan", "--json"])
    out, err = capsys.readouterr()
    assert rc == 2 and "Invalid value for '--tokens'" in err
    obj = _strict(out)
    assert set(obj) == {"error"} and "Invalid value for '--tokens'" in obj["error"] and "\n" not in obj["error"]


def test_without_json_a_refusal_prints_nothing_on_stdout(tmp_path, capsys):
    rc = main(["plan", str(_bad_card(tmp_path))])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and "precision.tf32" in err


def test_json_as_a_value_is_not_the_flag(tmp_path, capsys):
    """``--json`` given as another option's value (a model named so) is not the flag: stdout stays empty."""
    rc = main(["plan", "--model", "--json"])
    out, err = capsys.readouterr()
    assert rc == 2 and "model: '--json'" in err and err.count("\n") == 1 and out == ""


def test_an_unknown_option_before_json_still_gets_the_json_error(capsys):
    rc = main(["plan", "--bogus", "--json"])
    out, err = capsys.readouterr()
    assert rc == 2 and "No such option: --bogus" in err
    assert "No such option: --bogus" in _strict(out)["error"]
