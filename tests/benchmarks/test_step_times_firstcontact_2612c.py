"""benchmarks/step_times.py, the out-of-sample rows of published_train_times_firstcontact_2612c.json (prime-rl trainer
baselines not scored before: the 2026-02-07 pull-request sweeps of Llama-3.2-1B / 3B, Llama-3.1-8B, Qwen3, SmolLM3 and
OLMo-3 on 1-8 H100 with FlashAttention-3 and on 8 B200 with FlashAttention-4, and the 2026-01-15 INTELLECT-3 run on 8
H200). Each row cites its file at a commit, its figure is what that file reports, its note records the first-contact
error, and every row maps to a card that validates, except the one whose reason the entry states (an olmo3 model)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
PRIME = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612c.json"
NOT_REPRESENTABLE = {"primerl-2602-olmo3-7b-rl-lora-16k-recompute-fa3-1xh100-sxm"}
HEX40 = re.compile(r"^[0-9a-f]{40}$")

st = load_step_times("trainfit_bench_step_times_firstcontact_2612c")
ROWS = {e["id"]: e for e in json.loads(PRIME.read_text())}


def test_file_is_loaded_whole() -> None:
    assert PRIME in st.data_files(st.TRAIN_DATA)
    loaded = [e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == PRIME.name]
    assert sorted(loaded) == sorted(ROWS) and len(ROWS) == 16


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_a_commit_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    assert HEX40.match(e["source"]["commit"]) and e["source"]["repo"] and e["source"]["path"]
    assert e["note"].count("First-contact error") == 1
    # the figure is the baseline JSON's metrics.step_time.mean, quoted
    mean = float(re.search(r'"mean": ([0-9.]+)', e["quote"]).group(1))
    assert e["measured"]["value"] == pytest.approx(mean, rel=1e-12)
    assert e["batch"]["global_batch_size"] == 2 * e["gpus"] and e["batch"]["grad_accum"] == 2


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_maps_to_a_valid_card_or_states_why_not(row_id: str) -> None:
    e = ROWS[row_id]
    if row_id in NOT_REPRESENTABLE:
        assert e.get("card_cannot_state")
        with pytest.raises(st.Unmapped) as got:
            st.map_train(e)
        assert got.value.status == "not_representable"
        return
    card, _ = st.map_train(e)
    st.validate(card)
    path = e["source"]["path"]
    if "flash_attention_4" in path:
        assert card["attention_kernel"] == "fa4" and e["gpu"] == "b200"
    elif "flash_attention_3" in path:
        assert card["attention_kernel"] == "fa3"


def test_smollm3_row_is_planned_on_its_own_layout() -> None:
    card, notes = st.map_train(ROWS["primerl-2602-smollm3-3b-rl-lora-16k-recompute-fa3-8xh100-sxm"])
    assert card["model"]["config"]["model_type"] == "smollm3"
    assert any("smollm3 layout" in n for n in notes)
