"""Public part of the task; its hidden tests and reference solutions are in ``hidden.sealed``."""

FUNCTION = "clamp"
PROMPT = "Implement clamp(x, lo, hi) in solution.py: return x limited to the range [lo, hi]."
VISIBLE_TESTS = "def test_inside(candidate):\n    assert candidate.call('clamp', 5, 0, 10) == 5\n"
