"""benchmarks/step_times.py, published_pref_times_firstcontact_2612.json: DPO and reward-model step times. The file is
loaded beside the training entries, its entries' ``method`` reaches the card, its rows are scored in their own
subset ("DPO / RM", every other subset unchanged), each row records its first-contact error, the published figures
are the sources' arithmetic, and the entries that cannot be planned are recorded with their reason and not scored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_pref_times_firstcontact_2612.json"

st = load_step_times("trainfit_bench_step_times_pref_2612")
ENTRIES = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}
SCORED = {"dschat-step2-rm-opt-350m-v100-32gb-16g-zero0", "dschat-step2-rm-opt-350m-rtx-a6000-1g-e2e"}


@pytest.fixture(scope="module")
def rows():
    ledger: list[dict] = []
    return {r.id: r for r in st.train_rows(st.load_entries(st.PREF_DATA), ledger)}, ledger


def test_file_is_its_own_set_and_not_a_training_companion() -> None:
    assert st.PREF_DATA == DATA and DATA not in st.data_files(st.TRAIN_DATA)
    assert st.PREF_SUBSET in st.SUBSETS
    assert all(e["method"] in st.PREF_METHODS for e in ENTRIES.values())
    assert all(e["note"].startswith(("FIRST CONTACT", "NOT REPRESENTABLE")) for e in ENTRIES.values())


def test_scored_rows_plan_their_method_in_their_own_subset(rows) -> None:
    by_id, ledger = rows
    assert {r.id for r in by_id.values() if r.error is not None} == SCORED
    assert all(r.subset == st.PREF_SUBSET and r.published_s > 0 for r in by_id.values())
    for rid in SCORED:
        card, _ = st.map_train(ENTRIES[rid])
        assert card["method"] == "rm" and card["precision"]["compute"] == "fp16"
        assert card["precision"]["master_weights"] == "fp32" and card["batch"]["padding"] == "mask"
        # DeepSpeed without ZeRO all-reduces once after the backward (the entry cites engine.py at v0.9.0)
        assert card["parallel"].get("grad_reduce_after_backward", False) is (ENTRIES[rid]["gpus"] > 1)
        st.validate(card)
        # first contact, and the error after any change, are recorded in the note
        assert f"{by_id[rid].error:+.1%}".replace("%", " %") in ENTRIES[rid]["note"]
    status = {x["id"]: x["status"] for x in ledger}
    assert {k for k, v in status.items() if v == "not_representable"} == set(ENTRIES) - SCORED


def test_published_figures_are_the_sources_arithmetic() -> None:
    v100 = ENTRIES["dschat-step2-rm-opt-350m-v100-32gb-16g-zero0"]["measured"]
    # wall time of the logged steps 10 -> 1840 (03:36:02.683 -> 03:45:02.752)
    assert v100["value"] == pytest.approx(540.069 / 1830, rel=1e-4)
    assert 64 / v100["also"]["running_avg_samples_per_s_at_step_1840"] == pytest.approx(v100["value"], rel=0.01)
    a6000 = ENTRIES["dschat-step2-rm-opt-350m-rtx-a6000-1g-e2e"]
    # 20 % of rm-static's 76,256 training pairs (data_split 6,2,2), 16 pairs a micro-batch, 2 micro-batches a step
    pairs = round(0.2 * 76256)
    steps = -(-(-(-pairs // 16)) // 2)
    assert (pairs, steps) == (a6000["measured"]["also"]["pairs"], a6000["measured"]["also"]["optimizer_steps"])
    assert a6000["measured"]["value"] == pytest.approx(670 / steps, rel=1e-4)


def test_pair_rows_count_both_sequences_in_tokens_and_the_rule(rows) -> None:
    by_id, _ = rows
    r = by_id["dschat-step2-rm-opt-350m-v100-32gb-16g-zero0"]
    e = ENTRIES[r.id]
    n, _ = st.rule_params(e["model"], e.get("model_config"))
    tokens = 2 * 64 * 512  # chosen + rejected of 64 pairs, each padded to 512
    assert r.rule_s == pytest.approx(6 * n * tokens / (16 * 125e12 * st.RULE_MFU), rel=1e-6)
    dpo = dict(e, method="dpo")
    assert st.pref_rule_seconds("dpo", n, tokens, dpo) == pytest.approx(r.rule_s * 8 / 6, rel=1e-9)
    assert st.pref_rule_seconds("dpo", n, tokens, dict(dpo, reference="precomputed")) == pytest.approx(r.rule_s)


def test_an_unknown_method_is_refused() -> None:
    e = dict(ENTRIES["dschat-step2-rm-opt-350m-v100-32gb-16g-zero0"], method="ppo")
    with pytest.raises(st.Unmapped, match="method 'ppo'"):
        st.map_train(e)


def _dpo_entry(**over):
    e = dict(ENTRIES["dschat-step2-rm-opt-350m-rtx-a6000-1g-e2e"], method="dpo", id="dpo-probe")
    return {**e, **over}


def test_a_dpo_entrys_reference_reaches_the_card_and_the_rule() -> None:
    card, notes = st.map_train(_dpo_entry(reference="precomputed"))
    assert card["roles"]["reference"] == "precomputed"
    assert any("roles.reference precomputed" in n for n in notes)
    st.validate(card)
    assert "roles" not in st.map_train(_dpo_entry())[0]  # unstated: the method's default placement


@pytest.mark.parametrize(("over", "why"), [
    (dict(reference="offloaded"), "reference 'offloaded' is not allowed; allowed: gpu, cpu, none"),
    (dict(method="rm", reference="precomputed"), "reference is read for method dpo only"),
])
def test_a_reference_the_card_cannot_take_is_refused_in_one_line(over, why) -> None:
    with pytest.raises(ValueError, match=why) as e:
        st.map_train(_dpo_entry(**over))
    assert "\n" not in str(e.value)


def test_master_weights_pass_through_only_for_deepspeed_fp16_frameworks() -> None:
    nemo = [e for e in st.load_entries(st.TRAIN_DATA) if e["id"] == "nemo-h100-nemotron-340b-pretrain-fp8-2407"]
    assert nemo and nemo[0]["precision"]["master_weights"] == "none"
    card, notes = st.map_train(nemo[0])
    assert "master_weights" not in card["precision"]
    assert not any("(precision.master_weights)" in n for n in notes)
    rm, _ = st.map_train(ENTRIES["dschat-step2-rm-opt-350m-rtx-a6000-1g-e2e"])
    assert rm["precision"]["master_weights"] == "fp32"


def test_the_framework_lists_keep_their_own_docstrings() -> None:
    import ast

    tree = ast.parse(Path(st.__file__).read_text())
    body = tree.body
    docs = {}
    for i, node in enumerate(body[:-1]):
        nxt = body[i + 1]
        if isinstance(node, ast.Assign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            docs[node.targets[0].id] = nxt.value.value
    assert "transformers' Trainer" in docs["HF_TRAINER_FRAMEWORKS"] and "the only" not in docs["HF_TRAINER_FRAMEWORKS"]
    assert "DeepSpeed config" in docs["DEEPSPEED_FP16_FRAMEWORKS"]
    assert docs["PREF_METHODS"].startswith("The card methods")
