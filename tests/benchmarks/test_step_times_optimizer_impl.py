"""benchmarks/step_times.py: a training entry's ``precision.optimizer_impl`` (the AdamW implementation its framework
ran at the cited commit, where that is not fused) reaches the card; entries without it keep the card's fused default,
and every entry that states one cites it in its note."""

from __future__ import annotations

import pytest
from step_times_module import load_step_times

st = load_step_times("trainfit_bench_step_times_optimizer_impl")
ENTRIES = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}


def test_stated_impls_are_card_values_and_cited():
    stated = {i: e["precision"]["optimizer_impl"] for i, e in ENTRIES.items() if e["precision"].get("optimizer_impl")}
    assert set(stated.values()) <= {"fused", "foreach", "for_loop", "apex_distributed"}
    for i, impl in stated.items():
        assert f"AdamW {impl}:" in ENTRIES[i]["note"], i


@pytest.mark.parametrize(("row_id", "impl"), [
    ("torchao-f8nc-2502-h100-llama3-8b-4k-noac-bf16-eager", "foreach"),  # torchtitan --optimizer.fused default False
    ("titan-a100-8b-sel-layer", "foreach"),  # torchtitan 2024-04: foreach=True
    ("foundry-h100-7b-8gpu-2k", "for_loop"),  # Composer DecoupledAdamW's per-parameter loop
    ("automodel-h100-qwen2.5-32b-lora-8gpu", "for_loop"),  # Automodel: foreach=False with TP > 1
])
def test_mapped_card_has_the_entry_impl(row_id, impl):
    card, notes = st.map_train(ENTRIES[row_id])
    assert card["precision"]["optimizer_impl"] == impl
    assert any(n.startswith(f"AdamW {impl}") for n in notes)


@pytest.mark.parametrize("row_id", [
    "torchao-f8-2503-h100-llama3-8b-bf16",  # torchtitan after --optimizer.implementation (default fused)
    "automodel-h100-llama3-70b-pretrain-64gpu",  # Transformer Engine FusedAdam
])
def test_fused_rows_keep_the_default(row_id):
    card, _ = st.map_train(ENTRIES[row_id])
    assert "optimizer_impl" not in card["precision"]
