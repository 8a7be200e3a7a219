"""benchmarks/step_times.py maps ``parallel.fsdp_adapter_units`` for the frameworks whose FSDP1 wrap policy makes each
PEFT lora_A / lora_B a unit of its own (FSDP1_ADAPTER_UNIT_FRAMEWORKS): Answer.AI's fsdp_qlora (train types lora /
qlora) and VectorLM with LoRA, beside fms-hf-tuning; not on their DDP, one-GPU or full fine-tuning rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
FILES = ("published_train_times_fsdp_qlora_peft_torchtitan.json", "published_train_times_qwen_vectorlm.json")
st = load_step_times("trainfit_bench_step_times_adapter_units")
ROWS = {e["id"]: e for f in FILES for e in json.loads((REPO / "benchmarks" / "data" / f).read_text())
        if e["framework"] in ("fsdp_qlora", "vectorlm")}


def test_both_frameworks_are_mapped_with_their_citation() -> None:
    assert "AnswerDotAI/fsdp_qlora train.py l.442-477" in st.FSDP1_ADAPTER_UNIT_FRAMEWORKS["fsdp_qlora"]
    assert "vectorlm/utils/model_utils.py l.154-169" in st.FSDP1_ADAPTER_UNIT_FRAMEWORKS["vectorlm"]


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_fsdp1_adapter_rows_state_adapter_units(row_id: str) -> None:
    e = ROWS[row_id]
    card, notes = st.map_train(e)
    fsdp_adapter = card["parallel"]["strategy"] == "fsdp" and card["scope"] in ("lora", "qlora")
    assert card["parallel"].get("fsdp_adapter_units", False) is fsdp_adapter, row_id
    said = f"parallel.fsdp_adapter_units: {st.FSDP1_ADAPTER_UNIT_FRAMEWORKS[e['framework']]}"
    assert (said in notes) is fsdp_adapter


def test_the_rows_cover_both_frameworks_on_fsdp() -> None:
    on = [k for k, e in ROWS.items() if st.map_train(e)[0]["parallel"].get("fsdp_adapter_units")]
    assert sum(k.startswith("fsdpqlora-") for k in on) == 13 and sum(k.startswith("vectorlm-") for k in on) == 6
