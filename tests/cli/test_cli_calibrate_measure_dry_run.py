"""`trainfit calibrate` on a `benchmarks/gpu_calibrate.py measure --dry-run` output (measured on the CPU:
``dry_run: true``, ``device: cpu``, phases without ``reserved``): refused in one line unless
--allow-dry-run, as a `gpu_calibrate.py time --dry-run` output is (docs/calibration.md); with it, the
cases whose phases lack reserved bytes are skipped with a note. Was a KeyError 'reserved' traceback."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from trainfit.calibration.build import GPU_RAW, split_records
from trainfit.cli.main import main

RAW = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu_raw" / "heldout2.json"


def _dry(raw: dict) -> dict:
    """What `measure --dry-run` writes (benchmarks/gpu_calibrate.py): CPU torch, no cuda, empty phase mappings."""
    out = copy.deepcopy(raw)
    out.update(dry_run=True, device="cpu")
    out["versions"].update(cuda=None)
    out["versions"].pop("gpu", None)
    for case in out["cases"]:
        if case.get("measured"):
            case["measured"]["phases"] = {p: {} for p in case["measured"]["phases"]}
    return out


def test_a_measure_dry_run_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "mdry.json").write_text(json.dumps(_dry(json.loads(RAW.read_text()))))
    assert main(["calibrate", str(tmp_path / "mdry.json"), "--out", str(tmp_path / "o.json"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"trainfit: error: {tmp_path / 'mdry.json'}: measured on cpu (a --dry-run), "
                                "not on a GPU: a CPU measurement calibrates no GPU constant; pass --allow-dry-run to "
                                "read it anyway"]
    assert not (tmp_path / "o.json").exists()


def test_with_allow_dry_run_cases_without_reserved_are_skipped(tmp_path, capsys):
    (tmp_path / "mdry.json").write_text(json.dumps(_dry(json.loads(RAW.read_text()))))
    assert main(["calibrate", str(tmp_path / "mdry.json"), "--out", str(tmp_path / "o.json"), "--allow-dry-run"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("trainfit: error: calibrate: no record left to fit: ")
    assert "no reserved bytes in its phases (skipped)" in err and "Traceback" not in err


def test_a_gpu_case_without_reserved_is_skipped_with_a_note():
    raw = json.loads(RAW.read_text())
    train = [i for i, c in enumerate(raw["cases"]) if c.get("measured") and c.get("pass_kind") == "train_step"]
    del raw["cases"][train[0]]["measured"]["phases"]["backward"]["reserved"]
    times, mems, notes = split_records(raw, GPU_RAW, "raw.json")
    assert len(mems) == len(train) - 1 and len(notes) == 1
    assert notes[0].startswith("raw.json: ") and notes[0].endswith(": no reserved bytes in its phases (skipped)")
