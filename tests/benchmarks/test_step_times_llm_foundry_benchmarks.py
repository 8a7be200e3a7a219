"""benchmarks/step_times.py, held-out training rows of published_train_times_llm_foundry_benchmarks.json (llm-foundry's single-node
MPT throughput rows not recorded before: every 8-GPU row at 4096 and 16384 tokens of the 'H100 80GB BF16' and
'A100 80GB' tables of scripts/train/benchmarking/README.md): the file is picked up, its ids are unique across the
training files, every figure is in its quote, the batch multiplies out, each row's inline MPT config has the
table's NumParams, and the rows map to the card their columns state."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit
from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.memory.params import param_breakdown

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_llm_foundry_benchmarks.json"
st = load_step_times("trainfit_bench_step_times_llm_foundry_benchmarks")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def _cells(e: dict) -> list[str]:
    return [c.strip() for c in e["quote"].strip().strip("|").split("|")]


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 24
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_figure_source_batch_and_num_params(row_id: str) -> None:
    e = ROWS[row_id]
    c = _cells(e)
    src, b, m = e["source"], e["batch"], e["measured"]
    assert src["repo"] == "mosaicml/llm-foundry" and src["path"] == "scripts/train/benchmarking/README.md"
    assert re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    assert m["metric"] == "tokens_per_s_per_gpu" and c[12] == f"{m['value']}" and c[11] == f"{m['also']['tokens_per_s_total']}"
    assert e["gpus"] == int(c[2]) == 8 and b["seq_len"] == int(c[1]) in (4096, 16384)
    assert (b["micro_batch_size"], b["grad_accum"], b["global_batch_size"]) == (int(c[7]), int(c[8]), int(c[9]))
    assert b["micro_batch_size"] * e["gpus"] * b["grad_accum"] == b["global_batch_size"]
    assert e["activation_checkpointing"] == {"True": "full", "False": "none"}[c[17]] and c[16] == "FULL_SHARD"
    assert e["gpu"] == {"h100_80gb": "h100-sxm", "a100_80gb": "a100-80gb"}[c[3]]
    model, notes = st.resolve_model(e["model"], e.get("model_config"), b["seq_len"])
    spec = spec_from_hf_config(model["config"], name=model["id"], source="test")
    assert param_breakdown(spec).total == int(c[-1])  # NumParams column
    size = e["model"].split("mpt-")[1].split()[0]
    assert st.LLM_FOUNDRY_MPT[size][3] in e["note"] and c[0] == size


def test_rows_map_to_fsdp1_amp_bf16_with_a_fused_attention_kernel() -> None:
    for row_id in ("foundry-h100-13b-8gpu-16k", "foundry-a100-350m-8gpu-4k"):
        card, _ = st.map_train(ROWS[row_id])
        assert card["attention"] == "flash" and card["parallel"]["fsdp_version"] == "fsdp1"
        assert card["precision"]["weights"] == "fp32" and card["precision"]["grads"] == "fp32"
        assert st.plan_card(card).step_s > 0
    card, _ = st.map_train(ROWS["foundry-h100-13b-8gpu-16k"])
    assert card["parallel"]["gradient_checkpointing"] and card["batch"]["seq_len"] == 16384
