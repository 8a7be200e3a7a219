"""benchmarks/step_times.py, held-out Megatron-Bridge rows on Blackwell Ultra of published_train_times_megatron_bridge_perf_bf16_fp8.json
(DGX-GB300 and DGX-B300 rows of the performance summary archive, BF16 and FP8 current scaling): the file is picked
up, its ids are unique across the training files, each quote is a row of its table whose cells give the card's
layout, batch and measured figures, and the rows map to their presets (no recompute and the alltoall or HybridEP
dispatcher for GPT-OSS 120B; FP8 current scaling for the Llama rows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_megatron_bridge_perf_bf16_fp8.json"
st = load_step_times("trainfit_bench_step_times_megatron_bridge_perf_bf16_fp8")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 18
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_quote_cells_give_the_row(row_id: str) -> None:
    e = ROWS[row_id]
    cells = [x.strip() for x in e["quote"].strip().strip("|").split("|")]
    system = {"gb300": "DGX-GB300", "b300": "DGX-B300"}[e["gpu"]]
    b, p, m = e["batch"], e["parallel"], e["measured"]
    if e["source"]["section"].startswith("25.11"):  # tables by system: model first, a GA column before the figures
        assert "System: " + system in e["note"] and cells[2] == "FP8-CS" and int(cells[-3]) == b["grad_accum"]
        cells = [system, *cells[1:2], "FP8", *cells[3:-3], *cells[-2:]]
    assert cells[0] == system and int(cells[1]) == e["gpus"]
    assert cells[2] == ("FP8" if e["precision"]["compute"] == "fp8" else "BF16")
    assert int(cells[3]) == b["global_batch_size"] and int(cells[4]) == b["micro_batch_size"] and int(cells[5]) == b["seq_len"]
    layout = cells[6:-2]
    if len(layout) == 6:  # FSDP column (releases before 26.06)
        fsdp = int(layout.pop(0))
        assert (fsdp == e["gpus"]) == (p["strategy"] == "fsdp")
    tp, pp, cp, vp, ep = layout
    assert (int(tp), int(pp), int(cp)) == (p["tp"], p["pp"], p["cp"])
    assert (None if vp == "n/a" else int(vp)) == p.get("vpp") or (vp == "1" and p.get("vpp") is None)
    assert (1 if ep == "n/a" else int(ep)) == p["ep"]
    assert int(cells[-2]) == m["value"] and int(cells[-1]) == m["also"]["tflops_per_gpu"]
    dp = e["gpus"] // (p["tp"] * p["pp"] * p["cp"])
    assert b["micro_batch_size"] * dp * b["grad_accum"] == b["global_batch_size"]
    assert e["gpus_per_node"] == (4 if e["gpu"] == "gb300" else 8) and e["nodes"] * e["gpus_per_node"] == e["gpus"]
    assert e["source"]["commit"] == "067f987df03b8355b03192d88d70f1709fedf51a"


@pytest.mark.parametrize("row_id", sorted(r for r in ROWS if "gpt-oss" in r))
def test_gpt_oss_rows_follow_their_presets(row_id: str) -> None:
    e = ROWS[row_id]
    p = e["parallel"]
    assert e["activation_checkpointing"] == "none" and "moe_comm_overlap" not in p
    assert p["moe_dispatcher"] == ("deepep" if e["gpu"] == "b300" and p["ep"] == 8 else "alltoall")


@pytest.mark.parametrize("row_id", sorted(r for r in ROWS if "llama" in r))
def test_llama_rows_are_fp8_current_scaling(row_id: str) -> None:
    # the FP8 preset sets fp8_param_gather (fp8 primary weights); the card models it on the distributed optimizer
    # and on Megatron-FSDP (uint8 weight shards and gathered units)
    assert ROWS[row_id]["parallel"]["strategy"] in ("megatron-dist-opt", "fsdp")
    assert ROWS[row_id]["precision"] == {"compute": "fp8", "optimizer": "adamw", "optimizer_in_backward": False,
                                         "fp8_recipe": "current", "fp8_params": True}
