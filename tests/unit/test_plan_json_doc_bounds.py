"""docs/plan-json.md names every value ``time.phases[].bound`` can take (compute.training.BOUNDS)."""

from pathlib import Path

from trainfit.compute.training import BOUNDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "plan-json.md"


def test_every_training_bound_is_documented():
    row = next(line for line in DOC.read_text().splitlines() if line.startswith("| `time.phases[].bound`"))
    missing = [b for b in BOUNDS if f"`{b}`" not in row]
    assert not missing, missing
