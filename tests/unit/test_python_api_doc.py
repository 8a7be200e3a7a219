"""docs/python-api.md: every example in it runs (doctest) and prints what the page says.

Run in a fresh interpreter: the page shows that ``import trainfit`` loads no torch, which only a
process that has not imported torch yet (unlike the test session) can show."""

import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"

_RUN = """
import doctest, sys
r = doctest.testfile(sys.argv[1], module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False)
print(f"attempted={r.attempted} failed={r.failed}")
"""


def test_python_api_doc_examples_run():
    out = subprocess.run([sys.executable, "-c", _RUN, str(DOC)], capture_output=True, text=True, timeout=300)
    last = out.stdout.strip().splitlines()[-1]
    attempted, failed = (int(x.split("=")[1]) for x in last.split())
    assert attempted > 30
    assert failed == 0, f"{failed} of {attempted} examples in {DOC.name} failed:\n{out.stdout[-4000:]}"
