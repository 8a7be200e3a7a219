"""docs/python-api.md's table of calls states each function's signature: parameter names in order, where the
keyword-only ones start, and every default it shows, as ``inspect.signature`` gives them (before, ``trainfit.fit``
lacked ``search_scope`` and ``make_plan``'s first parameter was written ``run_card``; it is ``card``)."""

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def _documented() -> list[tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("| call | returns | same as |"):text.index("A **card** is")]
    return re.findall(r"^\| `(trainfit(?:\.\w+)+)\(([^`]*)\)` \|", table, flags=re.M)


def _function(dotted: str):
    """``trainfit.plan``/``size``/``trace`` are also subpackages made callable (``trainfit/__init__.py``): their
    signature is the API function's, ``trainfit.api``."""
    module, _, name = dotted.rpartition(".")
    if module == "trainfit":
        return getattr(importlib.import_module("trainfit.api"), name)
    return getattr(importlib.import_module(module), name)


def test_the_table_lists_the_calls():
    assert {d for d, _ in _documented()} >= {"trainfit.plan", "trainfit.fit", "trainfit.size", "trainfit.trace",
                                            "trainfit.load_card", "trainfit.plan.make_plan"}


@pytest.mark.parametrize("dotted,args", _documented(), ids=[d for d, _ in _documented()])
def test_documented_signature_matches_the_function(dotted, args):
    params = list(inspect.signature(_function(dotted)).parameters.values())
    parts = [a.strip() for a in args.split(",") if a.strip()]
    keyword_only = False
    names = []
    for part in parts:
        if part == "*":
            keyword_only = True
            continue
        name, eq, default = part.partition("=")
        names.append(name)
        p = next((q for q in params if q.name == name), None)
        assert p is not None, f"{dotted}: the doc names '{name}', the function has no such parameter"
        assert (p.kind is inspect.Parameter.KEYWORD_ONLY) == keyword_only, f"{dotted}: '{name}' keyword-only?"
        if eq:
            assert ast.literal_eval(default) == p.default, f"{dotted}: '{name}' default {default} != {p.default!r}"
    assert names == [p.name for p in params], f"{dotted}: documented {names}, actual {[p.name for p in params]}"
