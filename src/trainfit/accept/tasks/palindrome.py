"""Public part of the task; its hidden tests and reference solutions are in ``hidden.sealed``."""

FUNCTION = "is_palindrome"
PROMPT = "Implement is_palindrome(s) in solution.py, ignoring case and non-alphanumeric characters."
VISIBLE_TESTS = "def test_simple(candidate):\n    assert candidate.call('is_palindrome', 'abba') is True\n"
