"""The verdict's rules, as plain arithmetic (no torch): the CUDA-only segment floor, the figure judged
when a record holds no reserved bytes, and a planned 0 with measured memory."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.watch.verdict import MEMORY_FLOOR_BYTES, judge, judge_row, memory_off

MIB = 2.0**20
GIB = 2.0**30


def test_the_segment_floor_applies_on_cuda_only():
    # +110 % of a 4 MiB plan: 4.4 MiB over, under one 20 MiB CUDA segment
    row = {"phase": "forward", "planned": {"tensor_bytes": 4 * MIB, "reserved_bytes": 4 * MIB},
           "measured": {"tensor_bytes": 8.4 * MIB, "reserved_bytes": 8.4 * MIB}}
    cpu = judge_row(row, device="cpu")
    assert cpu.verdict == "over"
    assert cpu.reason == "memory +110.0% (beyond the 10% margin)"
    cuda = judge_row(row, device="cuda")
    assert cuda.verdict == "ok"
    assert cuda.reason == ("memory +110.0% is beyond the 10% margin but only 4.4 MiB, within one 20 MiB CUDA"
                           " allocator segment")
    assert memory_off(8.4 * MIB, 4 * MIB, 0.1, device="cpu") and not memory_off(8.4 * MIB, 4 * MIB, 0.1, device="cuda")
    assert memory_off(4 * MIB + MEMORY_FLOOR_BYTES + 1, 4 * MIB, 0.1, device="cuda")


def test_the_reason_names_the_rule_that_decided():
    over = judge_row({"phase": "forward", "planned": {"reserved_bytes": 10 * GIB, "seconds": 1.0},
                      "measured": {"reserved_bytes": 12 * GIB, "seconds": 1.1}}, device="cuda")
    assert over.verdict == "over"
    assert over.reason == ("memory +20.0% (beyond the 10% margin and one 20 MiB CUDA allocator segment);"
                           " time +10.0% within the 30% margin")
    ok = judge_row({"phase": "forward", "planned": {"tensor_bytes": 10 * MIB}, "measured": {"tensor_bytes": 10.5 * MIB}},
                   device="cpu")
    assert (ok.verdict, ok.reason) == ("ok", "memory +5.0% within the 10% margin")


def test_a_cuda_record_with_allocated_only_is_judged_on_allocated():
    """A record measuring allocated_bytes alone (no reserved) was 'plan held' at +100 %."""
    rows = [{"phase": "forward", "planned": {"allocated_bytes": 8 * GIB, "reserved_bytes": 10 * GIB, "seconds": 0.2},
             "measured": {"allocated_bytes": 16 * GIB, "seconds": 0.21}}]
    judged, verdict = judge(rows, device="cuda")
    assert judged[0].memory_field == "allocated_bytes" and judged[0].memory_error == pytest.approx(1.0)
    assert judged[0].verdict == "over" and verdict == "plan off: forward"


def test_a_cuda_row_without_memory_says_so():
    row = {"phase": "forward", "planned": {"reserved_bytes": 10 * GIB, "seconds": 0.2}, "measured": {"seconds": 0.21}}
    j = judge_row(row, device="cuda")
    assert j.verdict == "ok" and j.reason == "memory not measured; time +5.0% within the 30% margin"


def test_a_planned_zero_with_measured_memory_is_a_miss():
    rows = [{"phase": "weight_sync", "planned": {"reserved_bytes": 0.0}, "measured": {"reserved_bytes": 2 * GIB}}]
    judged, verdict = judge(rows, device="cuda")
    assert judged[0].verdict == "over" and verdict == "plan off: weight_sync"
    assert judged[0].reason == "memory 2048.0 MiB measured where the plan has 0"
    # within one segment of 0 on CUDA: not a miss
    assert judge_row({"phase": "x", "planned": {"reserved_bytes": 0.0}, "measured": {"reserved_bytes": 2 * MIB}},
                     device="cuda").verdict == "ok"


def test_compare_judges_a_planned_zero_instead_of_refusing(tmp_path):
    import yaml

    from trainfit.watch.compare import compare_record

    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"model": "Qwen/Qwen3-0.6B", "record": {
        "watch": {"device": "cuda"},
        "phases": [{"phase": "weight_sync", "planned": {"reserved_bytes": 0}, "measured": {"reserved_bytes": 2 * 2**30}}]}}))
    c = compare_record(path)
    assert c.off and c.verdict == "plan off: weight_sync"
    empty = tmp_path / "e.yaml"
    empty.write_text(yaml.safe_dump({"model": "Qwen/Qwen3-0.6B", "record": {
        "watch": {"device": "cuda"}, "phases": [{"phase": "x", "measured": {"reserved_bytes": 2 * 2**30}}]}}))
    with pytest.raises(CardError, match="nothing to judge"):
        compare_record(empty)
