"""benchmarks/gpu_calibrate.py ``measure --snapshot``: the allocator trace it writes (format only: the
snapshot itself needs a CUDA device)."""

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_calibrate.py"


def test_snapshot_keeps_segments_blocks_and_the_event_trace(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_calibrate", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fake = {"segments": [{"address": 4096, "total_size": 20 << 20, "segment_type": "large", "stream": 0,
                          "blocks": [{"size": 2 << 20, "state": "active_allocated", "frames": []},
                                     {"size": 18 << 20, "state": "inactive", "frames": []}]}],
            "device_traces": [[{"action": "segment_alloc", "addr": 4096, "size": 20 << 20, "stream": 0, "frames": []},
                               {"action": "alloc", "addr": 4096, "size": 2 << 20, "stream": 0, "frames": []}]]}
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", lambda *a, **k: fake)
    path = tmp_path / "s.json.gz"
    mod.write_snapshot(path)
    with gzip.open(path, "rt") as f:
        got = json.load(f)
    assert got["segments"] == [{"address": 4096, "total_size": 20 << 20, "segment_type": "large",
                                "blocks": [[2 << 20, "active_allocated"], [18 << 20, "inactive"]]}]
    assert got["trace"] == [["segment_alloc", 4096, 20 << 20], ["alloc", 4096, 2 << 20]]
    assert got["phases"][0] == "build" and got["phase_mark_bytes"] == mod.PHASE_MARK_BYTES
