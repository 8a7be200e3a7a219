"""``benchmarks/preemption_fluid_vs_steps.py`` prints a markdown table: a separator row under the header, and one
header per column (the cap comparisons and the preemption counts included) on every row."""

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "preemption_fluid_vs_steps.py"


def _module():
    spec = importlib.util.spec_from_file_location("preemption_fluid_vs_steps", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_table_has_a_separator_and_a_header_for_every_column(monkeypatch, capsys):
    mod = _module()
    small = [(f"exponential S=32 slots=8 max={top} kv=1200", "exponential", 32, 8, 50.0, 50.0, 30.0 * top / 96,
              top, 1200.0) for top in (96, 128)]
    monkeypatch.setattr(mod, "cases", lambda: iter(small))
    monkeypatch.setattr(sys, "argv", ["preemption_fluid_vs_steps.py", "--orders", "1"])
    mod.main()
    lines = capsys.readouterr().out.strip().splitlines()
    assert set(lines[1].replace("|", "").replace("-", "")) == set()
    cells = [line.count("|") for line in lines]
    assert len(lines) == 4 and len(set(cells)) == 1, lines
