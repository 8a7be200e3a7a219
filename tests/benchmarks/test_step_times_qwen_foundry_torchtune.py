"""benchmarks/step_times.py, held-out training rows of published_train_times_qwen_foundry_torchtune.json (the Qwen (1.0) README's
'Profiling of Memory and Speed' cells at 4096 / 8192 tokens not yet in the benchmark, and its 2-GPU full-parameter
1024 cell; llm-foundry's 'H100 80GB BF16 (Large Scale, >= 128 GPUs)' rows not yet in the benchmark; torchtune's
'Optimization flags' Llama 3.2 3B full-finetune rows not yet in it): the file is picked up, every row's figure is in
its quote, the layouts multiply out, and an entry's PEFT modules_to_save (the Qwen table's 'LoRA (emb)' rows) and
activation offloading (torchtune enable_activation_offloading) reach the card."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_qwen_foundry_torchtune.json"
st = load_step_times("trainfit_bench_step_times_qwen_foundry_torchtune")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 45
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_figures_layout_and_mapping(row_id: str) -> None:
    e = ROWS[row_id]
    assert str(e["measured"]["value"]) in e["quote"]
    assert str(e["batch"]["seq_len"]) in e["quote"] + e["note"]
    p, b = e["parallel"], e["batch"]
    dp = e["gpus"] // (p["tp"] * p["pp"] * p["cp"])
    assert dp * p["tp"] * p["pp"] * p["cp"] == e["gpus"] == e["gpus_per_node"] * e["nodes"]
    assert b["micro_batch_size"] * dp * b["grad_accum"] == b["global_batch_size"]
    assert re.fullmatch(r"[0-9a-f]{40}", e["source"]["commit"]) and e["source"]["repo"] and e["source"]["path"]
    card, _ = st.map_train(e)
    assert card["batch"]["seq_len"] == b["seq_len"] and card["batch"]["grad_accum"] == b["grad_accum"]


def test_modules_to_save_reaches_the_card_only_where_the_entry_states_it() -> None:
    assert st.lora_section({"rank": 8, "alpha": 16})  # unchanged without it
    assert "modules_to_save" not in st.lora_section({"rank": 8, "alpha": 16})
    card, _ = st.map_train(ROWS["qwen1-a100-7b-lora-emb-4k"])
    assert card["lora"]["modules_to_save"] == ["embed_tokens", "lm_head"]
    card, _ = st.map_train(ROWS["qwen1-a100-14b-lora-4k"])
    assert "modules_to_save" not in card["lora"]


def test_activation_offload_reaches_the_card_only_where_the_entry_states_it() -> None:
    card, _ = st.map_train(ROWS["tune-a100-3b-act-offload"])
    assert card["parallel"]["activation_offload"] is True
    card, _ = st.map_train(ROWS["tune-a100-3b-optim-in-bwd"])
    assert "activation_offload" not in card["parallel"] and card["precision"]["optimizer_in_backward"] is True
    card, _ = st.map_train(ROWS["tune-a100-3b-paged-adamw8bit"])
    assert card["precision"]["optimizer"] == "paged_adamw_8bit" and card["parallel"]["activation_offload"] is True


def test_deepspeed_config_reaches_the_card_only_where_the_entry_states_it() -> None:
    # finetune/ds_config_zero3.json: HF-Trainer 'auto' buckets; finetune/ds_config_zero2.json: 2e8-element buckets
    card, notes = st.map_train(ROWS["qwen1-a100x2-7b-full-zero3-1k"])
    assert card["deepspeed"]["reduce_bucket_size"] == "auto" and card["deepspeed"]["overlap_comm"] is True
    assert card["deepspeed"]["stage3_param_persistence_threshold"] == "auto"
    assert any(n.startswith("deepspeed: ") for n in notes)
    card, _ = st.map_train(ROWS["qwen1-a100x4-7b-lora-2x2-zero2-4k"])
    assert card["deepspeed"]["reduce_bucket_size"] == 200_000_000
    card, _ = st.map_train(ROWS["qwen1-a100-7b-lora-8k"])
    assert "deepspeed" not in card
    st.validate(st.map_train(ROWS["qwen1-a100x4-72b-lora-zero3-4k"])[0])  # the card accepts the section


def test_deepspeed_on_one_rank_keeps_its_stage() -> None:
    # the 1.8B full-parameter cell ran finetune/finetune_ds.sh (ZeRO-3) on one GPU: the card keeps zero3 (fp32 master
    # weights and moments), where a one-GPU entry without a deepspeed section is planned single
    card, notes = st.map_train(ROWS["qwen1-a100-1.8b-full-4k"])
    assert card["parallel"]["strategy"] == "zero3" and card["deepspeed"]["overlap_comm"] is True
    assert any(n.startswith("DeepSpeed zero3 on one rank") for n in notes)
    card, _ = st.map_train(ROWS["qwen1-a100-7b-lora-8k"])
    assert card["parallel"]["strategy"] == "single"


def test_deepspeed_cells_plan_the_models_own_compute_dtype_loss() -> None:
    # every cell that ran under DeepSpeed (accelerate keeps autocast off there) states loss_upcast false, cited, and the
    # card plans loss.upcast false; the single-GPU Q-LoRA cells ran ZeRO-2 on one rank (finetune_qlora_single_gpu.sh)
    for row_id, e in ROWS.items():
        if not row_id.startswith("qwen1"):
            continue
        card, notes = st.map_train(e)
        if e.get("deepspeed") is not None:
            assert e["loss_upcast"]["value"] is False and "accelerator.py" in e["loss_upcast"]["source"], row_id
            assert card["loss"]["upcast"] is False, row_id
            assert any(n.startswith("loss.upcast false") for n in notes), row_id
        else:
            assert "loss_upcast" not in e and "upcast" not in card.get("loss", {}), row_id
        if "Int4" in e["model"]:
            assert card["parallel"]["strategy"] == "zero2" and card["deepspeed"]["reduce_bucket_size"] == 200_000_000
