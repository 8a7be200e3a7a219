"""benchmarks/step_times.py, the rows of published_train_times_litgpt_confighub_2612.json: LitGPT's config-hub
fine-tuning table (config_hub/finetune/README.md) on AWS A10G. Every row cites the table's commit and quotes its line,
converts the published total runtime to seconds per optimizer step from the steps its config runs, and is listed as
not representable: LitGPT pads each micro-batch to its longest Alpaca-2k sample and that mean length is not published.
The note records trainfit's step at the 512-token ceiling and the mean length at which it meets the published time."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_litgpt_confighub_2612.json"
COMMIT = "00af8b0d9b43eaa3f8c812e3e8bd53ef38cbb49d"

st = load_step_times("trainfit_bench_step_times_litgpt_confighub_2612")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_file_is_loaded_whole_on_the_a10g() -> None:
    assert DATA in st.data_files(st.TRAIN_DATA)
    loaded = [e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == DATA.name]
    assert sorted(loaded) == sorted(ROWS) and len(ROWS) == 46
    assert {e["gpu"] for e in ROWS.values()} == {"a10g"}
    assert st.resolve_gpu_id("a10g") == ("a10g", [])


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_the_table_and_converts_runtime_to_a_step(row_id: str) -> None:
    e = ROWS[row_id]
    src, also = e["source"], e["measured"]["also"]
    assert (src["repo"], src["path"], src["commit"]) == ("Lightning-AI/litgpt", "config_hub/finetune/README.md", COMMIT)
    assert f"{also['training_runtime_min']:.2f} min" in e["quote"] and "A10G" in e["quote"]
    b = e["batch"]
    assert b["grad_accum"] * b["micro_batch_size"] * e["gpus"] == b["global_batch_size"]
    # epochs x ceil(samples / ranks / micro-batch) + 1 iterations (CycleIterator), whole optimizer steps
    per_epoch = math.ceil(math.ceil(also["train_samples"] / e["gpus"]) / b["micro_batch_size"])
    assert also["optimizer_steps"] <= (also["epochs"] * per_epoch + 1) // b["grad_accum"]
    assert e["measured"]["metric"] == "step_s"
    assert e["measured"]["value"] == pytest.approx(also["training_runtime_min"] * 60 / also["optimizer_steps"], rel=1e-4)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_is_not_representable_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    assert e["note"].startswith("FIRST CONTACT") and "NOT REPRESENTABLE" in e["note"]
    assert "mean padded micro-batch length" in e["card_cannot_state"] and e["batch"]["seq_len"] == 512
    with pytest.raises(st.Unmapped) as got:
        st.map_train(e)
    assert got.value.status == "not_representable"
    planned = re.search(r"trainfit plans ([0-9.]+) s against ([0-9.]+) s published \(([+-][0-9.]+) %", e["note"])
    if planned:
        t, pub, err = (float(x) for x in planned.groups())
        assert pub == pytest.approx(e["measured"]["value"], abs=1e-3) and err == pytest.approx((t / pub - 1) * 100, abs=0.2)
    else:  # the non-gated models (Falcon, Phi-2, StableLM-Alpha) are not in the model catalog
        assert "not in the catalog" in e["note"]
