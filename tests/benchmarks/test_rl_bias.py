"""benchmarks/rl_bias.py: the RL rows' signed-error tables count every scored RL point once per table, and the
published residual is the step less the published phases it names (docs/rl-step-bias.md holds its output)."""

from __future__ import annotations

import json

from step_times_module import REPO, load_benchmark

rb = load_benchmark("rl_bias.py", "rl_bias_under_test")


def _point(pid: str, quantity: str, published: float, trainfit: float, subset: str = "RL step",
           config: str = "8\u00d7 h100-sxm, fsdp") -> dict:
    return {"id": pid, "quantity": quantity, "published_s": published, "trainfit_s": trainfit, "subset": subset,
            "config": config, "model": "Qwen/Qwen3-8B"}


def test_group_table_signed_median_and_share_under():
    pts = [_point("a", "step", 100.0, 80.0), _point("b", "step", 100.0, 90.0), _point("c", "step", 100.0, 130.0)]
    lines = rb.group_table(pts, lambda p: p["quantity"], "quantity")
    assert lines[2] == "| step | 3 | -10.0 % | 20.0 % | 67 % |"


def test_residual_is_step_less_the_published_phases():
    pts = [_point("x", "step", 100.0, 90.0), _point("x", "generation", 50.0, 45.0),
           _point("x", "logprob", 10.0, 10.0), _point("x", "actor_update", 30.0, 30.0),
           # no update published: not a residual row
           _point("y", "step", 10.0, 10.0), _point("y", "generation", 5.0, 5.0)]
    rows = rb.residual_rows(pts)
    assert [r["id"] for r in rows] == ["x"]
    assert rows[0]["published_residual_s"] == 10.0 and rows[0]["plan_residual_s"] == 5.0
    assert rows[0]["phases"] == ["generation", "logprob", "actor_update"]


def test_every_table_counts_each_committed_rl_point_once():
    res = json.loads((REPO / "benchmarks" / "step_times.json").read_text())
    rl = [p for p in rb.scored(res["points"]) if p["subset"].startswith("RL")]
    entries = rb.rl_entries()
    assert {p["id"] for p in rl} <= set(entries)  # every RL point has its entry (framework, strategy, placement)
    lines = rb.report(res, entries, lambda model: None)
    tables: dict[str, int] = {}
    title = None
    for line in lines:
        if line.startswith("### "):
            title = line if line.startswith("### By ") else None
            if title:
                tables[title] = 0
        elif title and line.startswith("| ") and " | rows |" not in line:
            tables[title] += int(line.split("|")[2])
    rl_tables = {t: n for t, n in tables.items() if "non-RL" not in t}
    assert len(rl_tables) == 9 and set(rl_tables.values()) == {len(rl)}
