"""benchmarks/step_times.py, the out-of-sample rows of published_train_times_firstcontact_2612f.json: LitGPT's Thunder
pre-training benchmark (TinyLlama-1.1B on A100-SXM4-40GB, eager ZeRO-3 / DDP / one GPU, two measurements of the README
table; the Thunder-compiled rows not representable) and fms-acceleration's L40 reference CSV of 2024-05 (Mistral-7B full,
LoRA and bitsandbytes QLoRA, Mixtral-8x7B QLoRA, fp16, 1-2 GPUs; the AutoGPTQ rows not representable). Each row cites a
commit and quotes its line, its note records the first-contact error, and the fp16 rows plan the card's own
``precision.compute: fp16``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612f.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
SOURCES = {"Lightning-AI/litgpt": "extensions/thunder/README.md",
           "foundation-model-stack/fms-acceleration": "scripts/benchmarks/refs/l40_40gb.csv"}

st = load_step_times("trainfit_bench_step_times_firstcontact_2612f")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
FMS = sorted(i for i in ROWS if i.startswith("fmsacc-l40-"))


def test_file_is_loaded_whole() -> None:
    assert DATA in st.data_files(st.TRAIN_DATA)
    loaded = [e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == DATA.name]
    assert sorted(loaded) == sorted(ROWS) and len(ROWS) == 32
    assert sum(bool(e.get("card_cannot_state")) for e in ROWS.values()) == 13


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_a_commit_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    assert SOURCES[e["source"]["repo"]] == e["source"]["path"] and HEX40.match(e["source"]["commit"])
    assert e["note"].startswith("FIRST CONTACT")
    if e.get("card_cannot_state"):
        assert "NOT REPRESENTABLE" in e["note"] and "First-contact error" not in e["note"]
    else:
        assert e["note"].count("First-contact error: trainfit ") == 1


@pytest.mark.parametrize("row_id", FMS)
def test_fms_l40_step_is_runtime_over_the_csvs_own_twenty_steps(row_id: str) -> None:
    # the committed defaults say max_steps 100; the CSV's samples and per-device tokens both count 20 steps
    e, also = ROWS[row_id], ROWS[row_id]["measured"]["also"]
    runtime, batch = also["train_runtime_s"], e["batch"]
    assert round(also["train_samples_per_second"] * runtime / batch["global_batch_size"]) == 20
    assert abs(also["train_tokens_per_second"] * runtime / (batch["micro_batch_size"] * 4096) - 20) < 0.05
    assert e["measured"]["value"] == pytest.approx(runtime / 20, abs=1e-6)
    assert str(runtime) in e["quote"] and e["gpu"] == "l40"


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_maps_to_a_valid_card_or_states_why_not(row_id: str) -> None:
    e = ROWS[row_id]
    if e.get("card_cannot_state"):
        with pytest.raises(st.Unmapped) as got:
            st.map_train(e)
        assert got.value.status == "not_representable"
        return
    card, notes = st.map_train(e)
    st.validate(card)
    assert card["batch"]["grad_accum"] == 1
    if e["precision"]["compute"] == "fp16":  # the run's float16 model: the card's own fp16 compute, its source noted
        assert card["precision"]["compute"] == "fp16"
        assert any(n.startswith("precision.compute fp16: scripts/benchmarks/scenarios.yaml") for n in notes)
    if card["parallel"]["strategy"] == "fsdp":  # Lightning Fabric's FSDPStrategy and accelerate's FSDP: FSDP1
        assert card["parallel"]["fsdp_version"] == "fsdp1"


def test_fp16_without_a_cited_source_stays_skipped() -> None:
    # the harness plans fp16 only where the entry cites the run's float16 model; an uncited fp16 row is skipped as before
    e = json.loads(json.dumps(ROWS["fmsacc-l40-2405-mistral7b-lora-1g-b4"]))
    del e["precision"]["fp16_source"]
    with pytest.raises(st.Unmapped) as got:
        st.map_train(e)
    assert got.value.status == "skipped" and "fp16 compute not modelled" in got.value.reasons[0]


def test_fp16_rule_is_the_hf_trainer_familys_only() -> None:
    # the cited float16 model plans fp16 for transformers' Trainer family alone (HF_TRAINER_FRAMEWORKS); every fp16 row
    # of the file is fms-hf-tuning's, and the same row under another framework stays skipped
    assert {e["framework"] for e in ROWS.values() if e["precision"].get("fp16_source")} == {"fms-hf-tuning"}
    assert "fms-hf-tuning" in st.HF_TRAINER_FRAMEWORKS
    assert not set(st.HF_TRAINER_FRAMEWORKS) & set(st.MEGATRON_FRAMEWORKS)
    for fw in ("torchtune", "lit-gpt"):
        e = json.loads(json.dumps(ROWS["fmsacc-l40-2405-mistral7b-lora-1g-b4"]))
        e["framework"] = fw
        with pytest.raises(st.Unmapped) as got:
            st.map_train(e)
        assert got.value.status == "skipped" and f"fp16 compute not modelled for {fw}" in got.value.reasons[0]
