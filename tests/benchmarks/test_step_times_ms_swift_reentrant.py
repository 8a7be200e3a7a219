"""benchmarks/step_times.py, ms-swift's DeepSpeed rows (swift sft): ms-swift's Trainer forces its own use_reentrant on
every torch checkpoint call, True under DeepSpeed (``plan.checkpointing.REENTRANT_CHECKPOINT_PRESETS``), so each row
maps to a re-entrant checkpoint, which re-runs the whole layer in backward (a longer step than the non-re-entrant
one); the two dense rows stay within 50 % of their published step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data"
st = load_step_times("trainfit_bench_step_times_ms_swift_reentrant")
ROWS = {e["id"]: e for f in ("published_train_times.json", "published_train_times_ms_swift_megatron.json")
        for e in json.loads((DATA / f).read_text()) if e["framework"] == "ms-swift-deepspeed"}


def test_every_ms_swift_deepspeed_row_maps_to_a_re_entrant_checkpoint() -> None:
    assert len(ROWS) == 3
    for row_id, e in ROWS.items():
        card, _ = st.map_train(e)
        assert card["loop"]["checkpoint_reentrant"] is True, row_id


@pytest.mark.parametrize("row_id", ["swift-a800-qwen2.5-14b-zero2", "swift-a800-qwen2.5-14b-zero3"])
def test_dense_rows_within_half_and_slower_than_non_reentrant(row_id: str) -> None:
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    planned = st.plan_card(card)
    assert abs(planned.step_s / e["measured"]["value"] - 1.0) <= 0.5, planned.step_s
    plain = st.plan_card({**card, "loop": {**card["loop"], "checkpoint_reentrant": False}})
    assert planned.step_s > plain.step_s
