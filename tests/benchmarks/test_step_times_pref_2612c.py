"""benchmarks/step_times.py, published_pref_times_firstcontact_2612c.json: the third set of DPO / reward-model
publications (open-instruct's OLMo-core DPO pull requests #1466 and #1467 and its backend comparison, NeMo RL #1225,
Liger-Kernel #768). The file is loaded after the first two (``PREF_FILES``), its entries sit in the "DPO / RM"
subset, the five PR #1466 rows are planned (one padded pair-row of 2 x 16,384 slots a rank, reference precomputed)
and record their first-contact error, the rest are recorded not representable with their reason, the published
figures are the sources' arithmetic, and no source is one the data already cites."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times, sources_cited_outside

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_pref_times_firstcontact_2612c.json"

st = load_step_times("trainfit_bench_step_times_pref_2612c")
ENTRIES = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}
SCORED = {k for k in ENTRIES if k.startswith("open-instruct-pr1466-")}
TP_ROWS = {k for k in ENTRIES if k.startswith("open-instruct-pr1467-")}
LEDGER_ONLY = set(ENTRIES) - SCORED - TP_ROWS


@pytest.fixture(scope="module")
def rows():
    ledger: list[dict] = []
    return {r.id: r for r in st.train_rows(st.load_entries(st.PREF_DATA_2612C), ledger)}, ledger


def test_the_file_is_loaded_after_the_first_two_and_is_no_training_companion() -> None:
    assert st.PREF_DATA_2612C == DATA and st.PREF_FILES == (st.PREF_DATA, st.PREF_DATA_2612B, DATA)
    for other in (st.TRAIN_DATA, st.PREF_DATA, st.PREF_DATA_2612B):
        assert DATA not in st.data_files(other)
    loaded = [e["id"] for e in st.pref_entries()]
    assert set(ENTRIES) <= set(loaded) and len(loaded) == len(set(loaded))
    assert len(ENTRIES) >= 12 and len(SCORED) == 5 and len(TP_ROWS) == 2


def test_scored_rows_plan_one_padded_pair_row_a_rank_with_the_reference_precomputed(rows) -> None:
    by_id, ledger = rows
    assert {r.id for r in by_id.values() if r.error is not None} == SCORED
    plans = set()
    for rid in SCORED:
        card, _ = st.map_train(ENTRIES[rid])
        st.validate(card)
        assert card["method"] == "dpo" and card["roles"]["reference"] == "precomputed"
        # the packing collator pads each side to max_seq_length whatever the bs (padding_free_collator.py l.104-110)
        assert card["batch"] == {"micro_batch_size": 1, "seq_len": 16384, "grad_accum": 1}
        assert card["parallel"]["strategy"] == "fsdp" and card["parallel"]["gradient_checkpointing"] is True
        r = by_id[rid]
        assert r.subset == st.PREF_SUBSET
        plans.add(round(r.trainfit_s, 9))
        # first contact recorded in the note, trainfit's and the rule's
        note = ENTRIES[rid]["note"]
        assert note.startswith("FIRST CONTACT (scored 2026-12-05 before any model change for them)")
        assert f"error {r.error:+.1%}".replace("%", " %") in note
        assert f"{r.rule_s / r.published_s - 1:+.1%}".replace("%", " %") in note
    assert len(plans) == 1  # one padded shape, one plan
    status = {x["id"]: x["status"] for x in ledger}
    assert all(status[k] == "mapped" for k in SCORED)
    assert all(status[k] == "not_representable" for k in TP_ROWS | LEDGER_ONLY)


def test_the_padded_step_holds_both_sides_of_one_pair_row_on_every_rank(rows) -> None:
    by_id, _ = rows
    r = by_id["open-instruct-pr1466-dpo-olmo2-7b-16xh100-packed16k-bs32"]
    e = ENTRIES[r.id]
    n, _ = st.rule_params(e["model"], e.get("model_config"))
    tokens = 2 * 16384 * 16  # chosen + rejected row, each padded to 16,384, on 16 data-parallel ranks
    assert tokens == e["measured"]["also"]["token_count"]  # the bs=32 run filled the budget
    # precomputed reference: 6·N per token, no reference forward
    assert r.rule_s == pytest.approx(6 * n * tokens / (16 * 989e12 * st.RULE_MFU), rel=1e-3)


def test_tp_rows_are_refused_by_the_card_and_keep_a_rule_time(rows) -> None:
    by_id, ledger = rows
    reasons = {x["id"]: x["reasons"] for x in ledger}
    for rid in TP_ROWS:
        r = by_id[rid]
        assert r.trainfit_s is None and r.error is None and r.rule_s is not None
        assert any("'hsdp' with tensor or pipeline parallel" in x for x in reasons[rid])
        assert ENTRIES[rid]["note"].startswith("NOT REPRESENTABLE")
        assert f"{r.rule_s / r.published_s - 1:+.1%}".replace("%", " %") in ENTRIES[rid]["note"]


def test_entries_the_card_cannot_state_make_no_row(rows) -> None:
    by_id, ledger = rows
    reasons = {x["id"]: x["reasons"] for x in ledger}
    for rid in LEDGER_ONLY:
        e = ENTRIES[rid]
        assert rid not in by_id
        assert e["note"].startswith("NOT REPRESENTABLE") and "FIRST CONTACT" not in e["note"]
        assert e["card_cannot_state"].endswith("(NOT REPRESENTABLE)") and e["card_cannot_state"] in reasons[rid]
        with pytest.raises(st.Unmapped, match="has no unambiguous step-time conversion"):
            st.published_train_seconds(e, 1.0)


def test_published_figures_are_the_sources_arithmetic() -> None:
    for rid in SCORED:
        m = ENTRIES[rid]["measured"]
        a = m["also"]
        # the PR's table: TPS x sec/step = Token Count, TPS / 16 = TPS/GPU
        assert a["tps_total"] * m["value"] == pytest.approx(a["token_count"], rel=0.003)
        assert a["tps_total"] / 16 == pytest.approx(a["tps_per_gpu"], abs=1)
        assert f"| bs={a['per_device_train_batch_size_pairs']} | {a['token_count']:,} |" in ENTRIES[rid]["quote"]
        assert f"| {m['value']}s |" in ENTRIES[rid]["quote"]
    for rid in TP_ROWS:
        m = ENTRIES[rid]["measured"]
        assert f"**{m['value']}s**" in ENTRIES[rid]["quote"]
        # real tokens a step (TPS/gpu x 16 x sec/step) below the 8 ranks' padded 2 x 16,384 slots
        assert m["also"]["tps_per_gpu"] * 16 * m["value"] < 8 * 2 * 16384
    nemo = ENTRIES["nemo-rl-pr1225-dpo-mistral-nemo-12b-1n8g-fsdp2tp8-actckpt-long-100-steps"]["measured"]
    assert nemo["value"] == 45 * 60 and nemo["also"]["steps"] == 100
    with_liger = ENTRIES["liger-issue768-trl-dpo-qwen2-0.5b-1xh100-estimate-with-liger-loss"]
    without = ENTRIES["liger-issue768-trl-dpo-qwen2-0.5b-1xh100-estimate-without-liger-loss"]
    assert (with_liger["measured"]["value"], without["measured"]["value"]) == (9 * 3600, 2.5 * 3600)
    assert "9 hours" in with_liger["quote"] and "2 hours 30 minutes" in without["quote"]
    for rid in (k for k in LEDGER_ONLY if k.startswith("open-instruct-backend-ab-")):
        v = ENTRIES[rid]["measured"]["value"]
        assert f"~{v:,} tok/s/GPU" in ENTRIES[rid]["quote"]


def test_sources_are_cited_and_new_to_the_data() -> None:
    cited = sources_cited_outside(DATA)
    for e in ENTRIES.values():
        s = e["source"]
        assert s.get("url") or re.fullmatch(r"[0-9a-f]{40}", s["commit"])
        assert s.get("commit") is None or re.fullmatch(r"[0-9a-f]{40}", s["commit"])
        assert "read 2026-12-05" in s["section"]
        assert (s.get("url") or s["path"]) not in cited, e["id"]
        if e["precision"].get("optimizer_impl"):
            assert f"AdamW {e['precision']['optimizer_impl']}:" in e["note"]


def _plan(card, e) -> float:
    cal, _ = st.hardware_calibration(e, card["hardware"]["gpu"])
    return st.plan_card(card, cal).step_s


def test_the_recorded_cancellation_is_what_the_card_plans() -> None:
    """The rows' ``checked``: the DPO card plans the pair as two 16,384-token rows (the same step as an SFT card of
    2 x 16,384), while open-instruct runs one 32,768-token row (padding_free_collator.concatenated_inputs cats on
    dim=-1; the model gets input_ids alone), which the same card plans at the figures the note records."""
    rid = "open-instruct-pr1466-dpo-olmo2-7b-16xh100-packed16k-bs32"
    e = ENTRIES[rid]
    card, _ = st.map_train(e)
    dpo_s = _plan(card, e)
    sft = {**card, "method": "sft", "batch": {**card["batch"], "micro_batch_size": 2}}
    sft.pop("roles")
    assert _plan(sft, e) == pytest.approx(dpo_s, rel=1e-9)
    one_row = {**sft, "batch": {**card["batch"], "seq_len": 32768}}
    one_row_s = _plan(one_row, e)
    published = e["measured"]["value"]
    assert one_row_s > published > dpo_s
    assert f"reads {one_row_s:.2f} s ({one_row_s / published - 1:+.1%}".replace("%", " %") in e["checked"]
