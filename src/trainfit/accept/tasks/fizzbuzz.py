FUNCTION = "fizzbuzz"
PROMPT = "Implement fizzbuzz(n) in solution.py: 'Fizz' for multiples of 3, 'Buzz' of 5, 'FizzBuzz' of both, else str(n)."
VISIBLE_TESTS = "def test_plain(candidate):\n    assert candidate.call('fizzbuzz', 1) == '1'\n"
HIDDEN_TESTS = '''
def test_plain(candidate):
    assert candidate.call("fizzbuzz", 7) == "7"

def test_fizz(candidate):
    assert candidate.call("fizzbuzz", 9) == "Fizz"

def test_buzz(candidate):
    assert candidate.call("fizzbuzz", 10) == "Buzz"

def test_fizzbuzz(candidate):
    assert candidate.call("fizzbuzz", 30) == "FizzBuzz"
'''
CORRECT = (
    "def fizzbuzz(n):\n"
    "    return 'Fizz' * (n % 3 == 0) + 'Buzz' * (n % 5 == 0) or str(n)\n"
)
WRONG = (
    "def fizzbuzz(n):\n"
    "    if n % 3 == 0:\n        return 'Fizz'\n"
    "    if n % 5 == 0:\n        return 'Buzz'\n"
    "    return str(n)\n"
)
