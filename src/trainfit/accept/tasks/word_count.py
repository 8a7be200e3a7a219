"""Public part of the task; its hidden tests and reference solutions are in ``hidden.sealed``."""

FUNCTION = "word_count"
PROMPT = "Implement word_count(text) in solution.py: a dict of lower-cased word -> count."
VISIBLE_TESTS = "def test_one(candidate):\n    assert candidate.call('word_count', 'a') == {'a': 1}\n"
