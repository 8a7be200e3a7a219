FUNCTION = "is_palindrome"
PROMPT = "Implement is_palindrome(s) in solution.py, ignoring case and non-alphanumeric characters."
VISIBLE_TESTS = "def test_simple(candidate):\n    assert candidate.call('is_palindrome', 'abba') is True\n"
HIDDEN_TESTS = '''
def test_simple(candidate):
    assert candidate.call("is_palindrome", "abba") is True

def test_not(candidate):
    assert candidate.call("is_palindrome", "abc") is False

def test_case_and_punctuation(candidate):
    assert candidate.call("is_palindrome", "A man, a plan, a canal: Panama") is True
'''
CORRECT = (
    "def is_palindrome(s):\n"
    "    t = [c.lower() for c in s if c.isalnum()]\n"
    "    return t == t[::-1]\n"
)
WRONG = "def is_palindrome(s):\n    return s == s[::-1]\n"
