"""docs/calibration.md's RL example: its records are "the planner's own at twice the default constants" and
`trainfit calibrate rl.yaml --out cal.json` prints the medians the page shows. A reviewer found the page stale
(it showed 65.0% -> 0.0% where the command printed 64.3% -> 0.3%): the records are recomputed here, and the
example is run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trainfit.calibration.apply import rates_for
from trainfit.calibration.engine import ENGINE_FIELDS, planned_generation_s
from trainfit.calibration.records import _with_device, records_from_data
from trainfit.catalog.gpus import resolve_gpu

DOC = Path(__file__).resolve().parents[2] / "docs" / "calibration.md"


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _records_yaml() -> str:
    text = _text()
    start = text.index("```yaml", text.index("Example: two records on H100")) + len("```yaml\n")
    return text[start:text.index("```", start)]


def _shown_medians() -> list[tuple[str, str]]:
    text = _text()
    shown = text[text.index("$ trainfit calibrate rl.yaml --out cal.json"):]
    shown = shown[:shown.index("```")]
    return re.findall(r"median generation error (\d+\.\d)% -> (\d+\.\d)%", shown)


def test_records_are_the_planners_own_at_twice_the_default_constants():
    records = records_from_data(yaml.safe_load(_records_yaml()), where="rl.yaml")
    gpu = resolve_gpu("h100-sxm")
    start = rates_for(gpu, None)
    doubled = _with_device(None, gpu.id, {f: getattr(start, f) * 2 for f in ENGINE_FIELDS})
    assert len(records) == 2
    for r in records:  # written to 3 decimals
        assert r.generation_s == pytest.approx(planned_generation_s(r.card, doubled), abs=5e-4)


def test_calibrate_prints_the_medians_the_doc_shows(tmp_path):
    (tmp_path / "rl.yaml").write_text(_records_yaml())
    p = subprocess.run([sys.executable, "-m", "trainfit", "calibrate", "rl.yaml", "--out", "cal.json"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    printed = re.findall(r"median generation error (\d+\.\d)% -> (\d+\.\d)%", p.stdout + p.stderr)
    assert printed and printed == _shown_medians()
    assert "x2.000" in p.stdout + p.stderr
