"""benchmarks/gpu_watch.py, the device script of the watch, runs end to end on the CPU (--dry-run):
the records it writes are the ones `trainfit compare` and `trainfit calibrate` read (slow: three
TRL/Trainer runs and the overhead timing, ~1-2 min on two cores)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("trl")
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_watch.py"


@pytest.mark.slow
def test_gpu_watch_dry_run_writes_both_records_and_the_overhead_table(tmp_path):
    res = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--device", "cpu", "--dry-run"],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    sft = {r["phase"] for r in yaml.safe_load((tmp_path / "sft.record.yaml").read_text())["record"]["phases"]}
    assert {"forward", "backward", "optimizer_step", "step"} <= sft
    grpo = {r["phase"]: r for r in yaml.safe_load((tmp_path / "grpo.record.yaml").read_text())["record"]["phases"]}
    for name in ("rollout", "logprob", "reward", "forward", "backward", "optimizer_step"):
        assert grpo[name]["planned"] and grpo[name]["measured"].get("tensor_bytes"), name
    table = (tmp_path / "overhead.md").read_text()
    assert "| sft | none |" in table and "| sft | trainfit.watch(card) |" in table
    from trainfit.cli.main import main

    assert main(["compare", str(tmp_path / "grpo.record.yaml")]) in (0, 1)
