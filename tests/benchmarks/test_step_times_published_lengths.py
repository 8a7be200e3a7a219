"""benchmarks/step_times.py: RL rows whose source publishes the share cut at the cap and/or the batch's longest
response beside the mean response (verl's ``response_length/clip_ratio`` and ``response_length/max``) carry them as
``data.response_clip_ratio`` / ``data.response_len_batch_max``, quote the log line in
``data.response_lengths_source``, and map to the card fields ``rollout.response_clip_ratio`` /
``rollout.response_len_batch_max`` (``compute.response_lengths.fit_published_lengths``)."""

from __future__ import annotations

import json

import pytest
from step_times_module import load_step_times

st = load_step_times("trainfit_bench_step_times_published_lengths")
ROWS = {e["id"]: e for e in st.load_entries(st.RL_DATA)
        if e["data"].get("response_clip_ratio") is not None and e["data"].get("response_len_mean")
        or e["data"].get("response_len_batch_max")}


def test_the_verl_data_lora_rows_carry_them():
    assert {"verldata-grpo-lora-qwen25-7b-gsm8k-8g", "verldata-grpo-lora-qwen25-72b-gsm8k-8g"} <= set(ROWS)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_each_row_quotes_its_log_line_and_maps_to_the_card_fields(row_id):
    e = ROWS[row_id]
    d = e["data"]
    src = d["response_lengths_source"]
    assert e["source"]["repo"] in src and (e["source"].get("commit", "")[:8] in src)
    if d.get("response_len_batch_max"):
        assert f"{d['response_len_batch_max']:g}" in src or f"{d['response_len_batch_max']:.1f}" in src
        assert d["response_len_mean"] <= d["response_len_batch_max"] <= d["response_len_max"]
    card, notes = st.map_rl(e)
    st.validate(card)
    ro = card["rollout"]
    assert ro.get("response_clip_ratio") == d.get("response_clip_ratio")
    assert ro.get("response_len_batch_max") == d.get("response_len_batch_max")
    assert any(n.startswith("published beside the mean") for n in notes)


def test_the_implied_length_diagnostic_drops_them_with_the_mean_it_replaces():
    e = json.loads(json.dumps(ROWS["verldata-grpo-lora-qwen25-7b-gsm8k-8g"]))
    assert st.implied_sequence_tokens(e, "generation", 34.35) is not None
