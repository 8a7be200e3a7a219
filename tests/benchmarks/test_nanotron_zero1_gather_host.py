"""benchmarks/nanotron_zero1_gather_host.py replays nanotron's ZeRO-1 gather path on the CPU (the GPU figure is for
a session with one): it runs and returns positive host and wall seconds, the host's no longer than the wall's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module():  # noqa: ANN202 - a benchmark script
    spec = importlib.util.spec_from_file_location("nanotron_zero1_gather_host",
                                                  ROOT / "benchmarks" / "nanotron_zero1_gather_host.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["nanotron_zero1_gather_host"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_replay_times_the_path_on_the_cpu():
    host_s, wall_s = _module().replay(ranks=4, tensors=3, elements=8, device="cpu")
    assert 0 < host_s <= wall_s < 5.0
