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


def _entry(point_id):
    return next(e for e in ST.load_entries(REPO / "benchmarks" / "data" / "published_train_times.json")
                if e["id"] == point_id)


@pytest.mark.parametrize("point_id", ["foundry-h100-7b-128gpu", "foundry-h100-1b-512gpu-zero2", "foundry-a100-3b-8gpu-2k"])
def test_amp_bf16_default_rows_keep_fp32_shards_and_reduce_in_fp32(point_id):
    """Composer's FSDP mixed_precision DEFAULT (the MP Mode column) reduce-scatters fp32 gradients into the fp32
    parameter shards of the amp_bf16 model: precision.weights fp32, grads fp32 (the gathered copy stays bf16)."""
    entry = _entry(point_id)
    assert "| amp_bf16 | DEFAULT |" in entry["quote"]
    card, notes = ST.map_train(entry)
    assert card["precision"]["weights"] == "fp32" and card["precision"]["grads"] == "fp32"
    assert ST.LLM_FOUNDRY_DEFAULT_MP in notes
    planned = ST.plan_card(card)
    assert planned.fits and planned.step_s > 0


def test_bf16_pure_rows_keep_the_cards_default_precision():
    entry = _entry("foundry-a100-70b-64gpu")
    assert "| bf16 | PURE |" in entry["quote"]
    card, notes = ST.map_train(entry)
    assert "weights" not in card["precision"] and "grads" not in card["precision"]
    assert ST.LLM_FOUNDRY_DEFAULT_MP not in notes


def test_fp32_reduce_scatter_is_slower_than_bf16_across_nodes():
    """The fp32 reduce-scatter moves twice the bytes of a bf16 one: at 512 GPUs the planned step is longer than
    the same card with the gradients left bf16."""
    card, _ = ST.map_train(_entry("foundry-h100-7b-512gpu"))
    bf16 = {**card, "precision": {k: v for k, v in card["precision"].items() if k != "grads"} | {"grads": "bf16"}}
    assert ST.plan_card(card).step_s > ST.plan_card(bf16).step_s


def test_the_large_scale_sweep_rows_carry_its_attn_impl():
    """The 'Large Scale' table ran sweep.py @5e85bd62: --attn_impl flash for 1b/3b/7b/70b (their entries' attention
    flash, planned with flash_attn_fn's unpad / pad copies: ModelSpec.unpadded_attention), triton for 13b/30b
    (unset: the default, planned with the Triton kernel's rates, attention_kernel triton_fa); the older tables' rows
    stay unset."""
    entries = [e for e in ST.load_entries(REPO / "benchmarks" / "data" / "published_train_times.json")
               if e["framework"] == "llm-foundry"]
    large = [e for e in entries if "Large Scale, >= 128 GPUs" in e["note"]]
    assert len(large) == 18
    for e in entries:
        size = e["model"].split("mpt-")[1].split()[0]
        flash = e in large and size in ("1b", "3b", "7b", "70b")
        assert e.get("attention") == ("flash" if flash else None), e["id"]
        assert ("sweep.py @5e85bd62d4ec9e13353ca95877477602ab538e5b" in e["note"]) == (e in large), e["id"]
        model, _ = ST.resolve_model(e["model"], e.get("model_config"), e["batch"]["seq_len"], e.get("attention"))
        spec = spec_from_hf_config(model["config"], name=model["id"], source="test")
        assert spec.unpadded_attention is flash, e["id"]
        card, _ = ST.map_train(e)
        assert card["attention"] == "flash"


def test_the_large_scale_rows_ran_llm_foundry_main_before_precomputed_padding():
    """sweep.py @5e85bd62 installed llm-foundry main ('0.4.0', before 6dcc0d84b): the card pins it, and on a flash row
    the per-call unpad syncs make the planned step longer than the same card without the pin."""
    card, notes = ST.map_train(_entry("foundry-h100-3b-128gpu-zero2"))
    assert card["software"] == {"llm-foundry": "0.4.0"} and ST.LLM_FOUNDRY_SWEEP_2401_NOTE in notes
    unpinned = {k: v for k, v in card.items() if k != "software"}
    assert ST.plan_card(card).step_s > ST.plan_card(unpinned).step_s
    older, _ = ST.map_train(_entry("foundry-h100-7b-8gpu-2k"))  # the Oct-2023 table: no sweep citation, no pin
    assert "software" not in older
