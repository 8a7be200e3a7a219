"""benchmarks/step_times.py, torchao's MXFP8 B200 rows (pytorch/ao torchao/prototype/mx_formats/README.md
@d8bb51f63143188272e116c820d5f303c7017781): their casts are timed at torchao's published cast bandwidth
(``float8_casts.TORCHAO_MXFP8_CAST_BYTES_PER_S``), and the table's four mapped rows re-run the cuDNN attention
forward under torchtitan's per-op policy (``parallel.sac_saves_attention`` false)."""

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
    monkeypatch.setattr(fc, "TORCHAO_MXFP8", replace(fc.TORCHAO_MXFP8, cast_bytes_per_s=None))
    streaming = _step(MX)
    assert _step(BF16) == bf16  # no casts, no change
    # about 9 ms of 0.39 s: the casts' bytes at 5.5 TB/s instead of the card's 7.2 TB/s streaming rate
    assert slow - streaming == pytest.approx(0.009, abs=0.003)
    published = 8192 / ENTRIES[MX]["measured"]["value"]
    assert abs(slow / published - 1) < abs(streaming / published - 1)


@pytest.mark.parametrize("row_id", [BF16, MX, MX + "-rceil", "torchao-mx-2508-b200-750w-llama3-8b-f8-tensorwise"])
def test_b200_rows_recompute_the_cudnn_attention(row_id):
    """torchtitan @6fc499f6 prefers cuDNN SDPA on compute capability >= 10.0 and its per-op save list lacks the cuDNN
    op (the entries' ``sac_attention_recomputed``): the card says so and the recompute phase re-runs attention."""
    e = ENTRIES[row_id]
    assert "b39377f9fe33865fefb9bf64a33f6d74a598be87" in e["sac_attention_recomputed"]
    card, notes = st.map_train(e)
    assert card["parallel"]["sac_saves_attention"] is False
    assert any(n.startswith("parallel.sac_saves_attention false") for n in notes)
    cal, _ = st.hardware_calibration(e, card["hardware"]["gpu"])
    planned = st.plan_card(card, cal)
    assert planned.phase_terms["recompute"]["attention"] == pytest.approx(planned.phase_terms["forward"]["attention"])
    saved = st.plan_card({**card, "parallel": {**card["parallel"], "sac_saves_attention": True}}, cal)
    assert saved.phase_terms["recompute"].get("attention", 0.0) == 0.0
    published = 8192 / e["measured"]["value"]
    assert abs(planned.step_s / published - 1) < abs(saved.step_s / published - 1)


def test_hopper_rows_keep_the_saved_attention():
    """The H100 table of the same benchmark script (torchtitan 0da8901b, flash SDPA on Hopper) has no such key."""
    for row_id, e in ENTRIES.items():
        if row_id.startswith("torchao-f8-2503-h100"):
            assert "sac_attention_recomputed" not in e
