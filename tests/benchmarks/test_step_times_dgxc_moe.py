"""benchmarks/step_times.py, NVIDIA/dgxc-benchmarking v25.05.05 MoE pre-training rows (DeepSeek-V3, Llama 4
Maverick, NeMo's Grok-1 314B shape; H100 and GB200; published_train_times_dgxc_moe.json) and the dense Llama 3.1 405B
BF16 rows (published_train_times_dgxc_llama31_405b.json): the files are picked up, every row's step time is in its quote, the layouts multiply out to the GPU count and the global batch, and DeepSeek-V3's
recipe (use_mtp) maps to a card with model.mtp and Megatron-Core's uneven end stages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_dgxc_moe.json"
DENSE = REPO / "benchmarks" / "data" / "published_train_times_dgxc_llama31_405b.json"
st = load_step_times("trainfit_bench_step_times_dgxc_moe")
MOE_ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
ROWS = {**MOE_ROWS, **{e["id"]: e for e in json.loads(DENSE.read_text())}}


def test_files_are_loaded_with_every_row() -> None:
    files = st.data_files(st.TRAIN_DATA)
    assert DATA in files and DENSE in files
    loaded = {e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] in (DATA.name, DENSE.name)}
    assert loaded == set(ROWS) and len(MOE_ROWS) == 12 and len(ROWS) == 14


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_figures_and_layout(row_id: str) -> None:
    e = ROWS[row_id]
    value = e["measured"]["value"]
    assert str(value) in e["quote"] and str(e["measured"]["also"]["tokens_per_s_total"]) in e["quote"]
    p, b = e["parallel"], e["batch"]
    dp = e["gpus"] // (p["tp"] * p["pp"] * p["cp"])
    assert dp * p["tp"] * p["pp"] * p["cp"] == e["gpus"]
    assert b["micro_batch_size"] * dp * b["grad_accum"] == b["global_batch_size"]
    assert e["source"]["repo"] == "NVIDIA/dgxc-benchmarking" and len(e["source"]["commit"]) == 40


def test_deepseek_rows_train_the_mtp_module() -> None:
    e = ROWS["dgxc2505-h100-deepseek-v3-pt-bf16-512g"]
    card, notes = st.map_train(e)
    assert card["model"] == {"id": "deepseek-ai/DeepSeek-V3", "mtp": True}
    assert card["parallel"]["pipeline_first_stage_layers"] == 7 and card["parallel"]["pipeline_last_stage_layers"] == 6
    assert "model.mtp: the recipe trains the MTP module" in notes
    st.validate(card)


def test_rows_without_mtp_keep_the_plain_model() -> None:
    card, notes = st.map_train(ROWS["dgxc2505-gb200-grok1-314b-pt-bf16-128g"])
    assert "mtp" not in card["model"] and not any(n.startswith("model.mtp") for n in notes)


def test_deepseek_on_gb200_runs_unfused_attention_and_h100_the_fused_kernel() -> None:
    """NeMo 25.04's Transformer Engine (bee4649c) has no fused or flash backend for MLA's 192 / 128 heads on sm100:
    the GB200 rows are entered as eager (the S x S scores materialised), the H100 rows keep the fused kernel, and the
    other GB200 MoE rows (head dim 128) too."""
    for row_id in ("dgxc2505-gb200-deepseek-v3-pt-bf16-128g", "dgxc2505-gb200-deepseek-v3-pt-bf16-512g"):
        e = ROWS[row_id]
        card, _ = st.map_train(e)
        assert card["attention"] == "eager"
        assert "bee4649c15a79ffcb9689ca7c0c963f5febaa28a" in e["note"] and "head_dim_qk > 128" in e["note"]
    for row_id in ("dgxc2505-h100-deepseek-v3-pt-bf16-512g", "dgxc2505-gb200-llama4-maverick-pt-bf16-128g",
                   "dgxc2505-gb200-grok1-314b-pt-bf16-128g"):
        card, _ = st.map_train(ROWS[row_id])
        assert card["attention"] == "flash"
    unfused = st.plan_card(st.map_train(ROWS["dgxc2505-gb200-deepseek-v3-pt-bf16-128g"])[0])
    fused_e = json.loads(json.dumps(ROWS["dgxc2505-gb200-deepseek-v3-pt-bf16-128g"]))
    fused_e["attention"] = None
    fused = st.plan_card(st.map_train(fused_e)[0])
    assert unfused.step_s > 1.3 * fused.step_s
