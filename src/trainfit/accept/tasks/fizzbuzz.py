"""Public part of the task; its hidden tests and reference solutions are in ``hidden.sealed``."""

FUNCTION = "fizzbuzz"
PROMPT = "Implement fizzbuzz(n) in solution.py: 'Fizz' for multiples of 3, 'Buzz' of 5, 'FizzBuzz' of both, else str(n)."
VISIBLE_TESTS = "def test_plain(candidate):\n    assert candidate.call('fizzbuzz', 1) == '1'\n"
