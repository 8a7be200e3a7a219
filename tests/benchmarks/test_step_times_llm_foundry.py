"""benchmarks/step_times.py, llm-foundry's MPT rows: each row's inline MPT config (the yaml's shape with
max_seq_len = the row's sequence length) has exactly the table's NumParams, and the rows are planned (flash
attention, as the yamls' attn_impl)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit
from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.memory.params import param_breakdown

REPO = Path(trainfit.__file__).resolve().parents[2]


ST = load_step_times("trainfit_bench_step_times_foundry")
ENTRIES = [e for e in json.loads((REPO / "benchmarks" / "data" / "published_train_times.json").read_text())
           if e["framework"] == "llm-foundry"]


def test_all_twelve_rows_are_covered():
    assert len(ENTRIES) == 12


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_mapped_config_has_the_tables_num_params(entry):
    model, notes = ST.resolve_model(entry["model"], entry.get("model_config"), entry["batch"]["seq_len"])
    spec = spec_from_hf_config(model["config"], name=model["id"], source="test")
    assert param_breakdown(spec).total == int(entry["quote"].strip(" |").split("|")[-1])  # NumParams column
    size = entry["model"].split("mpt-")[1].split()[0]
    assert f"mpt-{size}.yaml@{ST.LLM_FOUNDRY_MPT[size][3]}" in notes[0]
    assert ST.LLM_FOUNDRY_MPT[size][3] in entry["note"]  # the commit the entry itself cites for the yaml


def test_rows_are_planned_with_a_fused_attention_kernel():
    """MPT's layer has an activation model now (memory.arch_activations._mpt_layer); the yamls' attn_impl is
    flash or triton, so the card's attention is flash."""
    entry = next(e for e in ENTRIES if e["id"] == "foundry-a100-125m-8gpu-2k")
    card, _ = ST.map_train(entry)
    assert card["attention"] == "flash"
    assert ST.plan_card(card) is not None


def test_unknown_size_or_missing_length_is_skipped():
    for size, seq in (("2b", 2048), ("7b", None)):
        with pytest.raises(ST.Unmapped) as err:
            ST.resolve_model(f"llm-foundry/mpt-{size} (yaml config, not an HF checkpoint)", {"gated_mlp": False}, seq)
        assert err.value.status == "skipped" and "no llm-foundry MPT yaml mapped" in err.value.reasons[0]
