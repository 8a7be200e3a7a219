"""docs/python-api.md: every example in it runs (doctest) and prints what the page says."""

import doctest
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def test_python_api_doc_examples_run():
    result = doctest.testfile(str(DOC), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 30
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {DOC.name} failed (see the output above)"
