"""benchmarks/step_times.py, the out-of-sample rows of published_train_times_firstcontact_2612c.json (prime-rl trainer
baselines not scored before: the 2026-02-07 pull-request sweeps of Llama-3.2-1B / 3B, Llama-3.1-8B, Qwen3, SmolLM3 and
OLMo-3 on 1-8 H100 with FlashAttention-3 and on 8 B200 with FlashAttention-4, and the 2026-01-15 INTELLECT-3 run on 8
H200) and published_train_times_firstcontact_2612d.json (AMD's MLPerf Training v5.1 llama2_70b_lora on MI300X / MI325X /
MI355X and llama31_8b pretraining on MI355X). Each row cites its file at a commit, its figure is what that file
reports, its note records the first-contact error, and every row maps to a card that validates, except the two whose
reason the entry states (an olmo3 model, Megatron's 21-of-80-layer block recompute)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
PRIME = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612c.json"
MLPERF = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612d.json"
NOT_REPRESENTABLE = {"primerl-2602-olmo3-7b-rl-lora-16k-recompute-fa3-1xh100-sxm", "mlperf51-amd-llama2-70b-lora-mi300x-1x8"}
HEX40 = re.compile(r"^[0-9a-f]{40}$")

st = load_step_times("trainfit_bench_step_times_firstcontact_2612c")
ROWS = {e["id"]: e for f in (PRIME, MLPERF) for e in json.loads(f.read_text())}


def test_both_files_are_loaded_whole() -> None:
    assert PRIME in st.data_files(st.TRAIN_DATA) and MLPERF in st.data_files(st.TRAIN_DATA)
    loaded = {e["id"]: e["_file"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] in (PRIME.name, MLPERF.name)}
    assert sorted(loaded) == sorted(ROWS) and len(ROWS) == 20
    assert sum(f == PRIME.name for f in loaded.values()) == 16


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_a_commit_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    assert HEX40.match(e["source"]["commit"]) and e["source"]["repo"] and e["source"]["path"]
    assert e["note"].count("First-contact error") == 1
    if e["source"]["repo"] == "PrimeIntellect-ai/prime-rl":
        # the figure is the baseline JSON's metrics.step_time.mean, quoted
        mean = float(re.search(r'"mean": ([0-9.]+)', e["quote"]).group(1))
        assert e["measured"]["value"] == pytest.approx(mean, rel=1e-12)
        assert e["batch"]["global_batch_size"] == 2 * e["gpus"] and e["batch"]["grad_accum"] == 2
    else:
        # the figure is the global batch over the median of the ten runs' mean tracked_stats throughput
        runs = e["measured"]["also"]["runs"]
        assert len(runs) == 10
        assert e["measured"]["value"] == pytest.approx(e["batch"]["global_batch_size"] / statistics.median(runs.values()),
                                                       rel=2e-4)


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
