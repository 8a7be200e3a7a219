"""benchmarks/gpu_calibrate.py is ready for a GPU: its dry run executes the same code on CPU."""

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_calibrate.py"


@pytest.mark.trace
def test_dry_run_writes_every_case(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_calibrate", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "r.json"
    assert mod.main(["--dry-run", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["dry_run"] and data["device"] == "cpu"
    assert len(data["cases"]) == len(mod.GRID)
    for case in data["cases"]:
        assert set(case["trainfit"]) == {"load", "forward", "backward", "optimizer_step"}
        assert case["measured"]["step_s"] > 0
