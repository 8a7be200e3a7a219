"""benchmarks/host_rate_fit.py --h200-grid: which H200 rows the host-rate refit scores, and one real worker run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from step_times_module import load_benchmark

fit = load_benchmark("host_rate_fit.py", "host_rate_fit_under_test")


def test_h200_errors_scores_mapped_training_steps_per_set_only():
    rows = [
        {"subset": "H200 default", "quantity": "step", "status": "mapped", "trainfit_s": 1.1, "published_s": 1.0},
        {"subset": "H200 default", "quantity": "logprob", "status": "mapped", "trainfit_s": 3.0, "published_s": 1.0},
        {"subset": "H200 default", "quantity": "step", "status": "unmapped", "trainfit_s": 2.0, "published_s": 1.0},
        {"subset": "H200 heldout", "quantity": "step", "status": "mapped", "trainfit_s": 0.9, "published_s": 1.0},
        {"subset": "H200 heldout", "quantity": "step", "status": "mapped", "trainfit_s": None, "published_s": 1.0},
    ]
    by = fit._h200_errors(rows)
    assert by.keys() == {"H200 default", "H200 heldout"}
    assert by["H200 default"] == [pytest.approx(0.1)] and by["H200 heldout"] == [pytest.approx(-0.1)]


def test_grid_holds_the_defaults_so_the_refit_can_keep_them():
    assert fit.DEFAULT_FORWARD_US in fit.GRID_FORWARD_US and fit.DEFAULT_BACKWARD_US in fit.GRID_BACKWARD_US


@pytest.mark.slow
def test_h200_worker_plans_the_fit_set_at_the_given_rates(tmp_path):
    out = tmp_path / "w.json"
    subprocess.run([sys.executable, fit.__file__, "--h200-worker", "65e-6", "12e-6", str(out)], check=True)
    by = fit._h200_errors(json.loads(out.read_text()))
    assert len(by["H200 default"]) == 15
