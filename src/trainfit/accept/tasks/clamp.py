FUNCTION = "clamp"
PROMPT = "Implement clamp(x, lo, hi) in solution.py: return x limited to the range [lo, hi]."
VISIBLE_TESTS = "def test_inside(candidate):\n    assert candidate.call('clamp', 5, 0, 10) == 5\n"
HIDDEN_TESTS = '''
def test_inside(candidate):
    assert candidate.call("clamp", 5, 0, 10) == 5

def test_below(candidate):
    assert candidate.call("clamp", -3, 0, 10) == 0

def test_above(candidate):
    assert candidate.call("clamp", 12, 0, 10) == 10

def test_edges(candidate):
    assert candidate.call("clamp", 10, 0, 10) == 10
'''
CORRECT = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
WRONG = "def clamp(x, lo, hi):\n    return min(x, hi)\n"
