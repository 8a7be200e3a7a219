"""step_times: the ms-swift rows that pack LongAlpaca-12k into 64K and 512K rows are planned with the dataset's token
statistic ms-swift publishes (benchmarks/data/packed_sample_lengths.json ``published``: modelscope/ms-swift
docs/source/LLM/支持的模型和数据集.md l.278 @939a22139c6ea0caace9271b85a3dbcbaf8542d1, '9619.0±8295.8, min=36,
max=78925' over all 11,998 samples), so attention runs per sample as ms-swift's varlen flash attention runs it; the
16K rows, where max_length drops the longer samples, and every other row are left alone."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import sys

import pytest
from step_times_module import REPO, load_step_times

st = load_step_times("step_times_packed_longalpaca")
DATA = json.loads((REPO / "benchmarks" / "data" / "packed_sample_lengths.json").read_text())
PUB = {x["dataset"]: x for x in DATA["published"]}

_spec = importlib.util.spec_from_file_location("packed_sample_lengths_la",
                                               REPO / "benchmarks" / "packed_sample_lengths.py")
assert _spec is not None and _spec.loader is not None
psl = importlib.util.module_from_spec(_spec)
sys.modules["packed_sample_lengths_la"] = psl
_spec.loader.exec_module(psl)

APPLIED = {"msswift-2505-qwq-32b-lora-8xa100-zero3off-ulysses8-packed512k",
           "msswift-250513-qwen25-7b-instruct-full-4xa100-zero3-ulysses4-packed64k"}
SIXTEEN_K = {"msswift-2505-qwen25-7b-full-4xa100-zero3-packed16k-liger",
             "msswift-2508-qwen25-7b-full-4xh20-zero3-packed16k-liger-fa2",
             "msswift-2508-qwen25-7b-full-4xh20-zero3-packed16k-liger-fa3",
             "msswift-250508-qwen25-7b-full-4xa100-zero3-ulysses4-packed16k"}


def _train() -> dict[str, dict]:
    return {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}


def test_the_published_statistic_is_quoted_and_consistent():
    x = PUB["LongAlpaca-12k"]
    src = x["source"]
    assert src["repo"] == "modelscope/ms-swift" and re.fullmatch(r"[0-9a-f]{40}", src["commit"]) and src["line"] > 0
    # the quoted table cell is the stored figures
    assert f"|{x['samples']}|0|{x['mean_tokens']}±{x['std_tokens']}, min={x['min_tokens']}, max={x['max_tokens']}|" \
        in src["quote"]
    mean, cv = x["mean_tokens"], x["cv"]
    assert cv == round(x["std_tokens"] / mean, 3) and x["min_tokens"] <= mean <= x["max_tokens"]
    assert x["mean_sq_tokens"] == pytest.approx(mean * mean * (1 + cv * cv), rel=1e-3)
    assert x["context_tokens"] == pytest.approx(x["mean_sq_tokens"] / mean, rel=1e-3)
    assert all(s["url"].startswith("https://arxiv.org/abs/") and s["date"] for s in x["tokenizer_sources"])
    assert re.fullmatch(r"[0-9a-f]{40}", x["not_used"]["commit"]) and "first 5,000 rows" in x["not_used"]["why"]


def test_applied_row_lengths_hold_the_span_and_the_16k_row_is_refused():
    x = PUB["LongAlpaca-12k"]
    for tokens, row in x["pack_tokens"].items():
        # a row length is admitted only where the card's own check passes: mean (1 + cv^2) fits the row
        assert row["applied"] == (x["context_tokens"] <= int(tokens)), tokens
        assert row["why"]
    assert not x["pack_tokens"]["16384"]["applied"] and "NOT APPLIED" in x["pack_tokens"]["16384"]["why"]


@pytest.mark.parametrize("row_id", sorted(APPLIED))
def test_the_longalpaca_rows_get_the_published_lengths(row_id: str):
    e = _train()[row_id]
    x = PUB["LongAlpaca-12k"]
    card, notes = st.map_train(e)
    assert card["batch"]["packed_sample_tokens"] == round(x["mean_tokens"]) == 9619
    assert card["batch"]["packed_sample_length_cv"] == x["cv"] == 0.862
    note = next(n for n in notes if n.startswith("packed LongAlpaca-12k: 9619.0 tokens per sample, cv 0.862"))
    assert "ulysses.py" in note and "packing_row" in note  # ms-swift's varlen path, cited
    st.validate(card)


@pytest.mark.parametrize("row_id", sorted(APPLIED))
def test_the_lengths_shorten_the_planned_step(row_id: str):
    """Attention per ~9.6K-token sample (a causal span of ~16.8K keys) instead of the 64K / 512K row."""
    card, _ = st.map_train(_train()[row_id])
    whole = copy.deepcopy(card)
    del whole["batch"]["packed_sample_tokens"], whole["batch"]["packed_sample_length_cv"]
    ratio = st.plan_card(card).step_s / st.plan_card(whole).step_s
    assert ratio < (0.3 if card["batch"]["seq_len"] == 512000 else 0.8), ratio


@pytest.mark.parametrize("row_id", sorted(SIXTEEN_K))
def test_the_16k_rows_name_the_dataset_but_are_left_alone(row_id: str):
    e = _train()[row_id]
    assert e["batch"]["packed_dataset"] == "LongAlpaca-12k"
    assert st.packed_published(e) == ({}, [])
    card, _ = st.map_train(e)
    assert "packed_sample_tokens" not in card["batch"]


def test_other_rows_are_left_alone():
    rows = _train()
    for rid, e in rows.items():
        if rid not in APPLIED:
            assert st.packed_published(e) == ({}, []), rid
    row = copy.deepcopy(rows["msswift-250513-qwen25-7b-instruct-full-4xa100-zero3-ulysses4-packed64k"])
    row["model"] = "meta-llama/Llama-3.1-8B"  # another tokenizer: the statistic is the Qwen tokenizer's
    assert st.packed_published(row) == ({}, [])
    row = copy.deepcopy(rows["msswift-250513-qwen25-7b-instruct-full-4xa100-zero3-ulysses4-packed64k"])
    row["batch"]["packed_dataset"] = "LongAlign-10k"  # no published statistic
    assert st.packed_published(row) == ({}, [])
    row = copy.deepcopy(rows["msswift-250513-qwen25-7b-instruct-full-4xa100-zero3-ulysses4-packed64k"])
    row["batch"]["seq_len"] = 32768  # a row length the data does not admit
    assert st.packed_published(row) == ({}, [])


def test_the_measuring_script_keeps_the_published_list(tmp_path):
    stored = tmp_path / "lengths.json"
    stored.write_text(json.dumps({"entries": [], "published_note": "n", "published": [{"dataset": "d"}]}))
    assert psl.kept_published(stored) == {"published_note": "n", "published": [{"dataset": "d"}]}
    assert psl.kept_published(tmp_path / "absent.json") == {}
    assert psl.kept_published(psl.OUT)["published"] == DATA["published"]
