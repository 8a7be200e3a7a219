"""benchmarks/step_times.py, torchao's MXFP8 B200 rows (pytorch/ao torchao/prototype/mx_formats/README.md
@d8bb51f63143188272e116c820d5f303c7017781): their casts are timed at torchao's published cast bandwidth
(``float8_casts.TORCHAO_MXFP8_CAST_BANDWIDTH_FRACTION``), which lengthens the planned step over the streaming-rate
casts by the cast bytes' extra time and leaves the bf16 row of the same table alone."""

from __future__ import annotations

from dataclasses import replace

import pytest
from step_times_module import load_step_times

import trainfit.compute.float8_casts as fc

st = load_step_times("trainfit_bench_step_times_torchao_mxfp8_casts")
ENTRIES = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}
MX = "torchao-mx-2508-b200-750w-llama3-8b-mxfp8-cublas"
BF16 = "torchao-mx-2508-b200-750w-llama3-8b-bf16"


def _step(row_id: str) -> float:
    e = ENTRIES[row_id]
    card, _ = st.map_train(e)
    cal, _ = st.hardware_calibration(e, card["hardware"]["gpu"])
    return st.plan_card(card, cal).step_s


def test_published_cast_rate_lengthens_the_mxfp8_step_only(monkeypatch):
    slow = _step(MX)
    bf16 = _step(BF16)
    monkeypatch.setattr(fc, "TORCHAO_MXFP8", replace(fc.TORCHAO_MXFP8, cast_bandwidth_fraction=None))
    streaming = _step(MX)
    assert _step(BF16) == bf16  # no casts, no change
    # about 9 ms of 0.39 s: the casts' bytes at 0.6875 instead of 0.90 of the datasheet rate
    assert slow - streaming == pytest.approx(0.009, abs=0.003)
    published = 8192 / ENTRIES[MX]["measured"]["value"]
    assert abs(slow / published - 1) < abs(streaming / published - 1)
