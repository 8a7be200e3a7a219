"""benchmarks/step_times.py, Megatron-LM's README scaling tables (published_train_times_megatron_lm.json): each GPT
row's inline config has the table's parameter count, Megatron's --fp16 rows map to bf16 cards, and a pipeline row
without a published micro-batch is skipped with its reason instead of being planned with a guessed schedule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit
from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.memory.weights import total_params

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_megatron_lm.json"


st = load_step_times("trainfit_bench_step_times_megatron_lm")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}
MEGATRON = [i for i in ROWS if i.startswith("megatron-lm-")]


@pytest.mark.parametrize("row_id", MEGATRON)
def test_gpt_config_has_the_tables_parameter_count(row_id: str) -> None:
    e = ROWS[row_id]
    spec = spec_from_hf_config(e["model_config"], name=e["model"], source="test")
    cells = [c.strip() for c in e["quote"].strip("|").split("|")]
    if row_id.startswith("megatron-lm-2021"):
        published = float(cells[3]) * 1e9  # 'Number of parameters (billion)', one decimal
        assert total_params(spec) == pytest.approx(published, abs=0.06e9)
    else:  # the 2024 table names the size only ('1.7B' for 1.754B, '462B'): within 4 % of the label
        value = float(re.sub(r"[^\d.]", "", cells[0])) * 1e9
        assert total_params(spec) == pytest.approx(value, rel=0.04)


def test_fp16_megatron_row_maps_to_a_bf16_card() -> None:
    card, notes = st.map_train(ROWS["megatron-lm-2021-a100-gpt-530b-2520gpu"])
    assert card["precision"].get("compute", "bf16") == "bf16"
    assert any("--fp16" in n for n in notes)
    par = card["parallel"]
    assert (par["tensor_parallel"], par["pipeline_parallel"], par["virtual_stages"]) == (8, 35, 3)
    assert card["batch"] == {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 280}  # DP 2520 / 280 = 9, GA 2520 / 9
    assert card["attention"] == "eager" and par["gradient_checkpointing"] is True


def test_pipeline_row_without_a_micro_batch_is_skipped() -> None:
    with pytest.raises(st.Unmapped) as err:
        st.map_train(ROWS["megatron-lm-2024-h100-gpt-462b-6144gpu"])
    assert err.value.status == "skipped"
    assert "micro-batch size not published" in err.value.reasons[0]


@pytest.mark.parametrize("row_id", [i for i in MEGATRON if i.startswith("megatron-lm-2021")])
def test_the_2021_pipeline_rows_send_by_scatter_gather(row_id: str) -> None:
    # Megatron-LM @6985e589 (the SC21 replication commit) scatters each pipeline send over the tensor-parallel
    # ranks by default (Megatron-Core, behind the 2024 rows, has no such option); a row without pipeline or tensor
    # parallelism has nothing to scatter
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    p = e["parallel"]
    expected = row_id.startswith("megatron-lm-2021") and (p.get("tp") or 1) > 1 and (p.get("pp") or 1) > 1
    assert bool(e["parallel"].get("pipeline_scatter_gather")) == expected
    assert bool(card["parallel"].get("pipeline_scatter_gather")) == expected
    if expected:
        assert "6985e58938d40ad91ac07b0fddcfad8132e1447e" in e["note"] and "p2p_communication.py" in e["note"]
