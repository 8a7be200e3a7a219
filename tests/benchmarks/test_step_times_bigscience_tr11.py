"""benchmarks/step_times.py, held-out pretraining rows of published_train_times_bigscience_tr11.json (BLOOM-176B's
production step on 384 A100 80GB and the 48-node topology search of its chronicles, Megatron-DeepSpeed): the file is
picked up, its ids are unique across the training files, every figure is in its quote, the batch multiplies out,
the published TFLOPs follow from Sec/it with Megatron-DeepSpeed's factor-4 count, and the rows map to the card
their tables state."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_bigscience_tr11.json"
st = load_step_times("trainfit_bench_step_times_bigscience_tr11")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def _tflops(e: dict, vocab: int = 250_000) -> float:
    """Megatron-DeepSpeed's logged TFLOPs (megatron/training.py l.756-765: 24 x 4 x B s l h^2 (1 + s/(6h) + V/(16lh)))."""
    c, b = e["model_config"], e["batch"]
    h, l, s = c["hidden_size"], c["num_hidden_layers"], b["seq_len"]
    flops = 24 * 4 * b["global_batch_size"] * s * l * h * h * (1 + s / (6 * h) + vocab / (16 * l * h))
    return flops / (e["measured"]["value"] * e["gpus"] * 1e12)


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 44
    assert not loaded & others


HANG = sorted(r for r in ROWS if "-h14400-" in r)
"""The CUDA_LAUNCH_BLOCKING A/B rows: the table gives the calculator's TFLOPs of before its fix, not Sec/it."""


def _old_tflops(e: dict) -> float:
    """The chronicles' calculator before 'TFLOPs calculation improved': non-embedding parameters x 8 x tokens / (t x GPUs)."""
    c, b = e["model_config"], e["batch"]
    h, l = c["hidden_size"], c["num_hidden_layers"]
    return l * (12 * h * h + 13 * h) * 8 * b["global_batch_size"] * b["seq_len"] / (e["measured"]["value"] * e["gpus"] * 1e12)


@pytest.mark.parametrize("row_id", HANG)
def test_launch_blocking_ab_rows(row_id: str) -> None:
    e = ROWS[row_id]
    cells = [x.strip() for x in e["quote"].strip().strip("|").split("|")]
    b, p, m = e["batch"], e["parallel"], e["measured"]
    assert int(cells[0]) == e["gpus"] and int(cells[2]) == b["global_batch_size"]
    assert float(cells[3]) == m["also"]["tflops_per_gpu_logged"]
    assert abs(_old_tflops(e) - m["also"]["tflops_per_gpu_logged"]) < 0.01
    assert e["loop"]["value"] == {"launch_blocking": cells[1] == "no"} and row_id.endswith("blocking" if cells[1] == "no" else "async")
    dp = e["gpus"] // 80
    assert e["precision"]["compute"] == "fp16" and "Rebalancing layers" in e["note"]
    assert (p["tp"], p["pp"]) == (8, 10) and b["micro_batch_size"] * dp * b["grad_accum"] == b["global_batch_size"]


@pytest.mark.parametrize("row_id", sorted(set(ROWS) - set(HANG)))
def test_row_figures_source_and_batch(row_id: str) -> None:
    e = ROWS[row_id]
    src, b, m, p = e["source"], e["batch"], e["measured"], e["parallel"]
    assert src["repo"] == "bigscience-workshop/bigscience" and re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    assert m["metric"] == "step_s" and f"{m['value']:.2f}" in e["quote"] and f"{m['also']['tflops_per_gpu']:.2f}" in e["quote"]
    assert abs(_tflops(e) - m["also"]["tflops_per_gpu"]) < 0.02
    assert p["tp"] * p["pp"] * (e["gpus"] // (p["tp"] * p["pp"])) == e["gpus"] == 384 == e["nodes"] * 8
    dp = e["gpus"] // (p["tp"] * p["pp"])
    assert b["micro_batch_size"] * dp * b["grad_accum"] == b["global_batch_size"] and b["seq_len"] == 2048
    assert b["global_batch_size"] == 2048 or row_id.endswith(("-gbs1568-0225", "-gbs2016-0225"))
    # the production run's BF16 optimizer; the search before 'Rebalancing layers' ran fp16
    assert e["activation_checkpointing"] == "full"
    assert e["precision"]["compute"] == ("fp16" if "tr11pre" in row_id else "bf16")
    if "tr11pre" in row_id:
        c = e["model_config"]
        cells = [x.strip() for x in e["quote"].strip().strip("|").split("|")]
        assert (int(cells[2]), int(cells[3]), int(cells[4]), int(cells[5])) == (dp, p["tp"], p["pp"], b["micro_batch_size"])
        assert int(cells[6]) == b["global_batch_size"]
        assert f"h{c['hidden_size']}-l{c['num_hidden_layers']}" in row_id and c["num_attention_heads"] == 64


def test_bloom_row_maps_to_its_pipeline_split_and_plans() -> None:
    card, _ = st.map_train(ROWS["bigsci-tr11-a100-bloom176b-384g-tp4pp12dp8-mbs2"])
    par = card["parallel"]
    assert (par["tensor_parallel"], par["pipeline_parallel"]) == (4, 12)
    assert card["loop"] == {"launch_blocking": True}  # the slurm script's CUDA_LAUNCH_BLOCKING=1
    assert st.plan_card(card).step_s > 0


def test_every_row_states_cuda_launch_blocking_as_its_scripts_set() -> None:
    for rid, e in ROWS.items():
        assert e["loop"]["value"] == {"launch_blocking": not rid.endswith("-async")}
        assert "export CUDA_LAUNCH_BLOCKING=1" in e["loop"]["source"]
    assert sum(r.endswith("-async") for r in ROWS) == 3
