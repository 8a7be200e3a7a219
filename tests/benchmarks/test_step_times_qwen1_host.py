"""benchmarks/step_times.py, the Qwen (1.0) README's single-A100 LoRA / Q-LoRA cells at 256-1,024 tokens, which are
host-bound: every Qwen-1 entry maps to its remote code's layout (model_type qwen: fused ``c_attn``, flash-attn's
rotary) and to torch 2.0's re-entrant checkpoint (``loop.checkpoint_reentrant``), and the short cells plan within 50 %
of their published step (they planned 2.0-2.8x it with the Qwen2 layout, a non-re-entrant checkpoint and a 3-kernel
dropout)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data"
st = load_step_times("trainfit_bench_step_times_qwen1_host")
ROWS = {e["id"]: e for f in ("published_train_times.json", "published_train_times_qwen_foundry_torchtune.json",
                             "published_train_times_qwen_vectorlm.json")
        for e in json.loads((DATA / f).read_text()) if e["id"].startswith("qwen1-")}


def test_every_qwen1_row_maps_to_its_layout_and_re_entrant_checkpoint() -> None:
    assert len(ROWS) == 81
    for row_id, e in ROWS.items():
        card, _ = st.map_train(e)
        assert card["loop"]["checkpoint_reentrant"] is True, row_id
        model = card["model"]
        if isinstance(model, dict):
            assert model["config"]["model_type"] == "qwen", row_id


@pytest.mark.parametrize("row_id", ["qwen1-a100-1.8b-lora-256", "qwen1-a100-7b-lora-256", "qwen1-a100-14b-lora-256",
                                    "qwen1-a100-1.8b-qlora-256"])
def test_host_bound_short_cells_within_half_of_published(row_id: str) -> None:
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    planned = st.plan_card(card)
    assert abs(planned.step_s / e["measured"]["value"] - 1.0) <= 0.5, planned.step_s


def test_qwen1_zero3_fetches_c_attn_as_one_module() -> None:
    """ZeRO-3 fetches Qwen (1.0)'s c_attn as one module (``plan.terms._layer_modules``), as its weight sync sends one
    c_attn weight and bias (``compute.sync.hf_tensors``), not q / k / v."""
    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.compute.sync import hf_tensors
    from trainfit.plan.terms import _layer_modules

    card, _ = st.map_train(ROWS["qwen1-a100x2-7b-full-zero3-512"])
    spec = spec_from_hf_config(card["model"]["config"], name="Qwen/Qwen-7B", source="test")
    h, i = 4096, 11008
    assert _layer_modules(spec, 0) == (h * 3 * h, h * h, h * i, h * i, i * h)
    names = [n for n, _ in hf_tensors(spec)]
    assert "qkv_proj" in names and "qkv_proj.bias" in names and "q_proj" not in names


@pytest.mark.slow
def test_every_qwen1_row_plans_within_half_of_published() -> None:
    for row_id, e in ROWS.items():
        card, _ = st.map_train(e)
        planned = st.plan_card(card)
        assert abs(planned.step_s / e["measured"]["value"] - 1.0) <= 0.5, (row_id, planned.step_s)
