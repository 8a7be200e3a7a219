"""trace/ has no import cycle: shared types live in ``trainfit.trace.types`` and nothing imports upward."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import trainfit.trace

PKG = Path(trainfit.trace.__file__).parent
MODULES = sorted(p.stem for p in PKG.glob("*.py") if p.stem != "__init__")


def _edges() -> dict[str, set[str]]:
    """Module -> trace modules it imports, at module level or inside functions (lazy imports count)."""
    out: dict[str, set[str]] = {}
    for name in MODULES:
        deps: set[str] = set()
        for node in ast.walk(ast.parse((PKG / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith("trainfit.trace."):
                    deps.add(node.module.split(".")[2])
                elif node.module == "trainfit.trace":
                    deps.update(a.name for a in node.names if a.name in MODULES)
            elif isinstance(node, ast.Import):
                deps.update(a.name.split(".")[2] for a in node.names if a.name.startswith("trainfit.trace."))
        out[name] = deps - {name}
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> list[str] | None:
        state[n] = 1
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state and (c := visit(m, path + [m])):
                return c
        state[n] = 2
        return None

    for n in graph:
        if n not in state and (c := visit(n, [n])):
            return c
    return None


def test_no_import_cycle_even_counting_lazy_imports():
    graph = _edges()
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))
    assert graph["types"] == set()
    assert all("api" not in deps for name, deps in graph.items()), "only the package __init__ may import api"


def test_shared_types_are_re_exported_from_api():
    from trainfit.trace import api, types

    for name in ("TraceRequest", "TraceResult", "PhaseTrace", "TraceUnsupported", "PHASES", "PASS_PHASES"):
        assert getattr(api, name) is getattr(types, name)


def test_types_module_does_not_import_torch():
    code = "import sys, trainfit.trace.types; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.trace
def test_every_module_imports_first_in_a_fresh_package():
    """Import each trace module first, with no trainfit module loaded (torch stays cached): a partial-import
    cycle would fail here for some entry point."""
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    code = (
        "import importlib, sys, torch, transformers, peft\n"
        f"for m in {MODULES!r}:\n"
        "    for k in [k for k in sys.modules if k == 'trainfit' or k.startswith('trainfit.')]:\n"
        "        del sys.modules[k]\n"
        "    importlib.import_module('trainfit.trace.' + m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
