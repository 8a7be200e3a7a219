"""benchmarks/step_times.py, published_pref_times_firstcontact_2612b.json: the second set of DPO / reward-model
publications. The file is loaded beside the first (``PREF_FILES``, ``pref_entries``), its entries sit in the "DPO / RM"
subset, none of them can be planned (each states why in ``card_cannot_state`` and its note), so none gets a trainfit
time or a rule time, the published figures are the sources' arithmetic, and no source is one the data already cites."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times, sources_cited_outside

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_pref_times_firstcontact_2612b.json"

st = load_step_times("trainfit_bench_step_times_pref_2612b")
ENTRIES = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}
STEP_S = {k for k, e in ENTRIES.items() if e["measured"]["metric"] == "step_s"}
TOTALS = {k for k, e in ENTRIES.items() if e["measured"]["metric"] == "total_s"}


@pytest.fixture(scope="module")
def rows():
    ledger: list[dict] = []
    return {r.id: r for r in st.train_rows(st.load_entries(st.PREF_DATA_2612B), ledger)}, ledger


def test_the_file_is_loaded_with_the_first_and_is_no_training_companion() -> None:
    assert st.PREF_DATA_2612B == DATA and st.PREF_FILES[:2] == (st.PREF_DATA, DATA)
    assert DATA not in st.data_files(st.TRAIN_DATA) and DATA not in st.data_files(st.PREF_DATA)
    loaded = [e["id"] for e in st.pref_entries()]
    assert set(ENTRIES) <= set(loaded) and len(loaded) == len(set(loaded))
    assert len(ENTRIES) >= 12


def test_every_entry_is_recorded_not_representable_with_its_reason(rows) -> None:
    by_id, ledger = rows
    status = {x["id"]: x for x in ledger}
    for rid, e in ENTRIES.items():
        assert e["method"] in st.PREF_METHODS
        assert e["note"].startswith("NOT REPRESENTABLE") and "FIRST CONTACT" not in e["note"]
        assert e["card_cannot_state"].endswith("(NOT REPRESENTABLE)")
        assert status[rid]["status"] == "not_representable"
        assert e["card_cannot_state"] in status[rid]["reasons"]
    # a per-step figure over unknown tokens is listed as a row without a plan or a rule; a total is in the ledger only
    assert set(by_id) == STEP_S and STEP_S | TOTALS == set(ENTRIES)
    for rid in STEP_S:
        r = by_id[rid]
        assert r.subset == st.PREF_SUBSET and r.published_s == ENTRIES[rid]["measured"]["value"]
        assert r.trainfit_s is None and r.rule_s is None and r.error is None


def test_totals_over_unknown_steps_or_tokens_make_no_row_and_no_rule(rows) -> None:
    by_id, _ = rows
    for rid in TOTALS:
        assert rid not in by_id
        with pytest.raises(st.Unmapped, match="metric 'total_s'"):
            st.published_train_seconds(ENTRIES[rid], 1.0)


def test_published_figures_are_the_sources_arithmetic() -> None:
    for rid in STEP_S:
        e = ENTRIES[rid]
        assert re.search(rf"{e['measured']['value']:g}s/it", e["quote"]) or f"Training Speed {e['measured']['value']:g}s/it" in e["quote"]
    zephyr = ENTRIES["unsloth-zephyr-7b-dpo-qlora-t4-notebook"]
    m, b = zephyr["measured"], zephyr["batch"]
    # HF Trainer: ceil(309 / 2) = 155 micro-batches an epoch, 155 // 4 = 38 optimizer steps, 3 epochs = 114 (logged)
    assert (-(-m["also"]["pairs"] // b["micro_batch_size"]) // b["grad_accum"]) * m["also"]["epochs"] == m["also"]["steps"] == 114
    assert m["value"] / m["also"]["steps"] == pytest.approx(m["also"]["per_step_s"], abs=1e-3)
    assert "'train_runtime': 4017.5003" in zephyr["quote"] and "global_step=114" in zephyr["quote"]
    orpo = ENTRIES["unsloth-llama3-8b-orpo-qlora-t4-notebook"]["measured"]
    assert orpo["value"] / orpo["also"]["steps"] == pytest.approx(orpo["also"]["per_step_s"], abs=1e-3)
    for rid in ("openrlhf-issue354-rm-llama3-8b-lora-6x4090-remaining-estimate",
                "openrlhf-issue354-rm-llama3-8b-example-8xa100-about-1-day"):
        b, e = ENTRIES[rid]["batch"], ENTRIES[rid]
        # train_batch_size = micro_train_batch_size x grad accumulation x data-parallel ranks (ZeRO-3, one node)
        assert b["global_batch_size"] == b["micro_batch_size"] * b["grad_accum"] * e["gpus"]


def test_sources_are_cited_and_new_to_the_data() -> None:
    cited = sources_cited_outside(DATA)
    for e in ENTRIES.values():
        s = e["source"]
        assert s.get("url") or re.fullmatch(r"[0-9a-f]{40}", s["commit"])
        assert "read 2026-12-05" in s["section"]
        assert (s.get("url") or s["path"]) not in cited, e["id"]


def test_the_orpo_entry_plans_no_reference_pass_for_the_rule() -> None:
    # ORPO has no reference model: recorded as the card's dpo shape with the reference precomputed (no reference
    # forward), which is what the rule would count were the tokens known
    e = ENTRIES["unsloth-llama3-8b-orpo-qlora-t4-notebook"]
    assert e["reference"] == "precomputed" and "no reference forward" in e["note"]
    assert st.pref_rule_seconds("dpo", 8e9, 1e4, e) == pytest.approx(st.pref_rule_seconds("rm", 8e9, 1e4, e))
