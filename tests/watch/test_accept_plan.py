"""`run_accept(plan_check=True)`: the closed loop prints predicted vs measured for every phase and
fails the check when the plan is off (slow: a full GRPO acceptance run on the CPU, ~90 s)."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")


@pytest.mark.slow
def test_accept_plan_check_prints_every_phase_and_judges_it():
    from trainfit.accept.run import run_accept

    record = run_accept(only=("trajectories",), plan_check=True)
    (check,) = [c for c in record["checks"] if c["name"] == "plan_vs_measured"]
    table = check["evidence"].splitlines()
    assert table[1].split()[:3] == ["phase", "plan", "tensors"]
    phases = {ln.split()[0] for ln in table[2:]}
    assert {"rollout", "forward", "backward", "optimizer_step", "update", "step"} <= phases
    off = check["evidence"].startswith("plan off")
    assert check["status"] == ("fail" if off else "pass")
    assert {r["phase"] for r in record["phases"]} == phases
