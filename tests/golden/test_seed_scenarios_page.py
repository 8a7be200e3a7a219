"""docs/seed-scenarios.md is what tools/seed_scenarios.py writes from today's plans (the page that answers the
seeds must not drift from the planner: a reviewer found 1070 s on the page against 1045 s live)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_seed_scenarios_page_matches_live_plans():
    spec = importlib.util.spec_from_file_location("seed_scenarios", ROOT / "tools" / "seed_scenarios.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    committed = (ROOT / "docs" / "seed-scenarios.md").read_text()
    assert mod.render() == committed, "docs/seed-scenarios.md is stale: run .venv/bin/python tools/seed_scenarios.py"
