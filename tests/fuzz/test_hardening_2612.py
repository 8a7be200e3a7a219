"""Failure classes a hardening pass over the CLI and the Python API found (December 2026), as explicit cases.

Each case runs the CLI in-process (``fuzzlib.run_cli``) and asserts what the product rule asks: one line naming the
field and the allowed values, exit code 2, no traceback, no output file; or, for the Python API, a ``TrainfitError``
instead of a ``TypeError`` / ``AttributeError`` from deep inside."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzzlib import check_run, run_cli

LINKS = "allowed: nvlink, pcie, pcie_no_p2p or null (the GPU catalog's link)"


# ------------------------------------------------------------------------------------------------
# hardware.interconnect given a list or a section: TypeError (unhashable) in the field's validator, on every reader
# of a card (plan, fit, check, export, calibrate, compare) and in trainfit.plan(dict)

@pytest.mark.parametrize(("value", "shown"), [("[nvlink]", "a list"), ("{a: 1}", "a section"), ("[]", "a list")])
@pytest.mark.parametrize("command", [["plan"], ["fit", "--gpu", "h100", "--max-gpus", "1"], ["export", "--to", "trl"]])
def test_interconnect_that_is_not_text(command, value, shown):
    run = run_cli([*command, "--set", f"hardware.interconnect={value}"])
    check_run(run)
    assert run.rc == 2
    assert run.stderr.rstrip() == f"trainfit: error: hardware.interconnect: {shown} is not allowed; {LINKS}"


def test_interconnect_list_in_a_card_file(tmp_path: Path):
    card = tmp_path / "card.yaml"
    card.write_text("hardware:\n  gpu: h100\n  interconnect:\n    - pcie\n")
    run = run_cli(["plan", str(card), "--json"])
    check_run(run, json_out=True)
    assert run.rc == 2 and f"hardware.interconnect: a list is not allowed; {LINKS}" in run.stderr


def test_interconnect_list_through_the_python_api():
    import trainfit
    from trainfit.errors import CardError

    with pytest.raises(CardError, match="hardware.interconnect: a list is not allowed; allowed: nvlink"):
        trainfit.plan({"hardware": {"interconnect": ["pcie"]}})
