"""docs/plan-json.md names every value ``time.phases[].bound`` can take (compute.training.BOUNDS)."""

from pathlib import Path

from trainfit.compute.training import BOUNDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "plan-json.md"


def test_every_training_bound_is_documented():
    row = next(line for line in DOC.read_text().splitlines() if line.startswith("| `time.phases[].bound`"))
    missing = [b for b in BOUNDS if f"`{b}`" not in row]
    assert not missing, missing


def test_seconds_never_print_in_exponent_form():
    from trainfit.report.fmt import seconds

    assert seconds(1045.2) == "1,045" and seconds(38.93) == "38.9" and seconds(0.0146) == "0.0146"
