FUNCTION = "word_count"
PROMPT = "Implement word_count(text) in solution.py: a dict of lower-cased word -> count."
VISIBLE_TESTS = "def test_one(candidate):\n    assert candidate.call('word_count', 'a') == {'a': 1}\n"
HIDDEN_TESTS = '''
def test_one(candidate):
    assert candidate.call("word_count", "a") == {"a": 1}

def test_case(candidate):
    assert candidate.call("word_count", "The the THE") == {"the": 3}

def test_empty(candidate):
    assert candidate.call("word_count", "") == {}
'''
CORRECT = (
    "def word_count(text):\n"
    "    out = {}\n"
    "    for w in text.lower().split():\n"
    "        out[w] = out.get(w, 0) + 1\n"
    "    return out\n"
)
WRONG = (
    "def word_count(text):\n"
    "    out = {}\n"
    "    for w in text.split():\n"
    "        out[w] = out.get(w, 0) + 1\n"
    "    return out\n"
)
