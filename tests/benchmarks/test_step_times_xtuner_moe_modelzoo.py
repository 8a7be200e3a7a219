"""benchmarks/step_times.py, held-out training rows of published_train_times_xtuner_moe_modelzoo.json (XTuner's Megatron MoE
benchmark of Qwen3-235B-A22B on 256 H800, Megatron-MoE-ModelZoo's Qwen3-235B-A22B H100 table, NeMo Automodel's
pipeline-parallel LoRA rows at c0e4fe1b, Megatron-Bridge 26.02 GPT-OSS 120B rows): the file is picked up, every
row's figure is in its quote, the layouts multiply out to the GPU count and the global batch, and the run flags the
rows state reach the card (distributed-optimizer overlap only where the row or its config sets it, the dispatcher,
Megatron-Core's embedding / loss pipeline split)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_xtuner_moe_modelzoo.json"
st = load_step_times("trainfit_bench_step_times_xtuner_moe_modelzoo")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 26
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_figures_and_layout(row_id: str) -> None:
    e = ROWS[row_id]
    assert str(e["measured"]["value"]) in e["quote"]
    p, b = e["parallel"], e["batch"]
    dp = e["gpus"] // (p["tp"] * p["pp"] * p["cp"])
    assert dp * p["tp"] * p["pp"] * p["cp"] == e["gpus"] == e["gpus_per_node"] * e["nodes"]
    assert b["micro_batch_size"] * dp * b["grad_accum"] == b["global_batch_size"]
    assert re.fullmatch(r"[0-9a-f]{40}", e["source"]["commit"]) and e["source"]["repo"] and e["source"]["path"]


def test_distributed_optimizer_overlap_only_where_the_row_or_its_config_sets_it() -> None:
    def overlapped(row_id: str) -> bool:
        return bool(st.map_train(ROWS[row_id])[0]["parallel"].get("overlap_param_gather"))

    assert overlapped("xtuner-h800-qwen3-235b-tp2-ep8-pp8-select-zero-overlap")
    assert overlapped("xtuner-h800-qwen3-235b-tp2-ep8-pp8-select-zero-tp-overlap")
    assert not overlapped("xtuner-h800-qwen3-235b-tp2-ep8-pp8-select")
    assert not overlapped("xtuner-h800-qwen3-235b-tp1-ep8-pp32-vpp3-mbs4-full")
    assert overlapped("moezoo-h100-qwen3-235b-deepep-tp4-ep8-pp8-vpp4")  # the model config's --overlap-param-gather


def test_tp_overlap_dispatcher_and_pipeline_split_reach_the_card() -> None:
    card, _ = st.map_train(ROWS["xtuner-h800-qwen3-235b-tp2-ep8-pp8-select-zero-tp-overlap"])
    assert card["parallel"]["tp_comm_overlap"] is True
    assert "tp_comm_overlap" not in st.map_train(ROWS["xtuner-h800-qwen3-235b-tp2-ep8-pp8-select"])[0]["parallel"]
    card, _ = st.map_train(ROWS["xtuner-h800-qwen3-235b-tp2-ep32-deepep-pp8-vpp4-select"])
    assert card["parallel"]["moe_dispatcher"] == "deepep"
    card, _ = st.map_train(ROWS["xtuner-h800-qwen3-235b-tp1-ep8-pp32-vpp3-mbs4-full"])
    layout = card["parallel"]["pipeline_layout"]  # 94 layers + embedding + loss over 32 x 3 chunks
    assert len(layout) == 96 and sum(layout) == 94 and layout[0] == layout[-1] == 0
    card, _ = st.map_train(ROWS["xtuner-h800-qwen3-235b-tp2-ep8-pp8-select"])
    assert card["parallel"]["pipeline_layout"] == [11, 12, 12, 12, 12, 12, 12, 11]


def test_rows_the_card_cannot_state_are_listed_with_their_reason() -> None:
    for row_id in ("xtuner-h800-qwen3-235b-tp4-ep8-deepep-pp8-vpp4-capacity1",):
        with pytest.raises(st.Unmapped) as got:
            st.map_train(ROWS[row_id])
        assert got.value.status == "not_representable" and got.value.reasons == [ROWS[row_id]["card_cannot_state"]]


def test_megatron_recompute_modules_rows_reach_the_card_and_are_planned() -> None:
    """recompute=select ('--recompute-modules moe_act layernorm') and recompute=moe ('--recompute-modules moe
    layernorm') on Qwen3-235B-A22B: Megatron-Core's module recompute of any MoE model
    (plan.ranks.megatron_recompute_freed), planned, not refused."""
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    select = [i for i, e in ROWS.items() if e["activation_checkpointing"] == "selective_layernorm_moe_act"
              and "qwen3-235b" in i]
    assert len(select) == 9
    for row_id in (*select, "xtuner-h800-qwen3-235b-tp1-ep8-pp32-vpp3-moe"):
        card, _ = st.map_train(ROWS[row_id])
        par = card["parallel"]
        assert (par.get("selective_checkpointing") == "layernorm_moe_act" if row_id in select
                else par["recompute_modules"] == ["moe", "layernorm"])
        make_plan(load_card_dict(card))  # no refusal


def test_automodel_lora_rows_flush_the_pipeline_once_per_local_batch() -> None:
    for row_id, flushes in (("automodel-c0e4-h100-qwen2.5-32b-lora-pp4-8gpu", 2),
                            ("automodel-c0e4-h100-qwen2.5-32b-lora-pp4-16gpu", 1),
                            ("automodel-c0e4-h100-llama3-70b-lora-pp4-16gpu", 2)):
        e = ROWS[row_id]
        dp = e["gpus"] // (e["parallel"]["tp"] * e["parallel"]["pp"])
        assert e["parallel"]["pipeline_flushes_per_step"] == flushes == e["batch"]["global_batch_size"] // (8 * dp)
