"""``benchmarks/gpu_calibrate.py time`` runs on the CPU (--dry-run) and writes the format the committed
fixture (tests/data/gpu_time_dry_run.json) has, which ``trainfit calibrate`` converts.

Regenerate the fixture after a format change:
    python benchmarks/gpu_calibrate.py time --dry-run --out tests/data/gpu_time_dry_run.json
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "gpu_time_dry_run.json"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_calibrate", ROOT / "benchmarks" / "gpu_calibrate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _shape(obj):
    """Keys all the way down (a list by its first item): the format, not the numbers."""
    if isinstance(obj, dict):
        return {k: _shape(v) for k, v in obj.items() if k not in ("method",)}
    if isinstance(obj, list):
        return [_shape(obj[0])] if obj else []
    return type(obj).__name__ if not isinstance(obj, (int, float)) or isinstance(obj, bool) else "number"


def _run(tmp_path, sections):
    out = tmp_path / "t.json"
    argv = ["time", "--dry-run", "--out", str(out)] + (["--only", ",".join(sections)] if sections else [])
    assert _script().main(argv) == 0
    return json.loads(out.read_text())


def test_fast_sections_match_the_fixture_format(tmp_path):
    data, fixture = _run(tmp_path, ["gemm", "hbm", "pcie"]), json.loads(FIXTURE.read_text())
    assert data["errors"] == [] and data["dry_run"] and data["device"] == "cpu"
    assert data["trainfit_gpu_time"] == 1 and set(data["versions"]) >= {"torch", "cuda", "driver", "gpu"}
    for section in ("gemm", "hbm", "pcie"):
        assert _shape(data[section]) == _shape(fixture[section]), section
    kinds = {p["kind"] for p in data["gemm"]["points"]}
    assert kinds == {"train", "lora", "decode"}


def test_full_shape_sweep_is_what_the_brief_lists():
    mod = importlib.util.module_from_spec(spec := importlib.util.spec_from_file_location("gpu_time", ROOT / "benchmarks" / "gpu_time.py"))
    spec.loader.exec_module(mod)
    shapes = mod.gemm_shapes(mod.FULL)
    train = [(m, n, k) for m, n, k, kind in shapes if kind == "train"]
    assert {m for m, _, _ in train} == {512, 2048, 8192, 16384}
    assert (8192, 14336, 4096) in train and (8192, 4096, 14336) in train and (16384, 8192, 8192) in train
    assert {n for _, n, _, kind in shapes if kind == "lora"} >= {8, 16, 64}
    assert {m for m, _, _, kind in shapes if kind == "decode"} == {1, 8, 64, 256}
    assert all(n % 128 == 0 and k % 128 == 0 for _, n, k in train)


def test_unknown_section_is_refused(tmp_path, capsys):
    assert _script().main(["time", "--dry-run", "--only", "gemm,tflops", "--out", str(tmp_path / "x.json")]) == 2
    assert "unknown section(s) ['tflops']" in capsys.readouterr().err


@pytest.mark.slow
def test_every_section_matches_the_fixture_format(tmp_path):
    data, fixture = _run(tmp_path, None), json.loads(FIXTURE.read_text())
    assert data["errors"] == []
    assert _shape({k: v for k, v in data.items() if k != "versions"}) == _shape({k: v for k, v in fixture.items() if k != "versions"})
