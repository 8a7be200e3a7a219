"""benchmarks/step_times.py: a Transformer Engine fp8 row on H100 plans its backward's fp8 GEMMs without fast
accumulation (compute/rates.py ``_fp8_precise_fraction``): the fp8/bf16 step ratio moves toward the
published one, the bf16 twin does not move."""

from __future__ import annotations

import pytest
from step_times_module import load_step_times

import trainfit.compute.rates as rates_mod

st = load_step_times("trainfit_bench_step_times_fp8_accumulation")
ENTRIES = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}
FP8, BF16 = "dgxc2504-h100-llama3-8b-sft-fp8-8g", "dgxc2504-h100-llama3-8b-sft-bf16-8g"


def _step(row_id: str) -> float:
    card, _ = st.map_train(ENTRIES[row_id])
    return st.plan_card(card).step_s


def test_fp8_sft_pair_ratio_moves_toward_the_published_one(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ENTRIES[FP8]["measured"]["metric"] == ENTRIES[BF16]["measured"]["metric"] == "step_s"
    published = ENTRIES[FP8]["measured"]["value"] / ENTRIES[BF16]["measured"]["value"]  # 0.95 / 1.32 s
    fp8, bf16 = _step(FP8), _step(BF16)
    # no full-precision-accumulation rate at all (not just no measured row: compute capability 9.x falls back to
    # the measured precise/fast ratio, rates._fp8_precise_fraction)
    monkeypatch.setattr(rates_mod, "_fp8_precise_fraction", lambda gpu, fp8_fraction: None)
    fp8_fast, bf16_fast = _step(FP8), _step(BF16)
    assert bf16 == pytest.approx(bf16_fast)
    assert fp8 > fp8_fast * 1.03  # backward fp8 GEMMs at 70.9 % instead of 80.3 % of the fp8 peak
    assert abs(fp8 / bf16 / published - 1) < abs(fp8_fast / bf16_fast / published - 1)
