"""benchmarks/step_times.py, held-out training rows of published_train_times_fsdp_qlora_peft_torchtitan.json (torchtitan's own published
throughput rows not recorded before: the Llama 2 13B selective-AC rows on 64 A100, the Llama 3.1 405B 2D rows on 128 H100
of the 2024-08 performance page, the float8 tensorwise vanilla-TP rows of the June 2025 async-TP benchmark, and the
Llama 3 8B rows of the AWS/Meta torchtitan-on-SageMaker post on 32 H100): the file
is picked up, its ids are unique across the training files, every figure is in its quote, the source is a commit, the
layouts multiply out, and the rows map to the card their source states."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_fsdp_qlora_peft_torchtitan.json"
st = load_step_times("trainfit_bench_step_times_fsdp_qlora_peft_torchtitan")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 33  # 32, and the SageMaker table's FP8 all-gather row
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_figure_source_and_layout(row_id: str) -> None:
    e = ROWS[row_id]
    value = e["measured"]["value"]
    src = e["source"]
    if src.get("repo") == "huggingface/peft":  # the sum of the result file's 250-step 'train time' blocks per step
        also = e["measured"]["also"]
        assert e["measured"]["metric"] == "step_s" and len(also["train_time_blocks_s"]) == also["steps"] // 250
        assert value == pytest.approx(sum(also["train_time_blocks_s"]) / also["steps"], rel=1e-5)
        assert f"first block \"train time\": {also['train_time_blocks_s'][0]}" in e["quote"]
        assert also["train_total_tokens"] / also["train_samples"] == pytest.approx(e["batch"]["seq_len"], abs=0.5)
        assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]) and src["path"].startswith("method_comparison/MetaMathQA/")
        return
    if src.get("repo") == "AnswerDotAI/fsdp_qlora":  # 1024 dummy samples of exactly context_length tokens, cut to a
        # multiple of batch x accumulation, over the CUDA-event time of the loop
        b, also = e["batch"], e["measured"]["also"]
        assert also["samples"] == 1024 - 1024 % (b["micro_batch_size"] * b["grad_accum"])
        assert value == pytest.approx(also["samples"] * b["seq_len"] / also["time_s"], rel=1e-6)
        assert f"{also['time_s']:,}" in e["quote"] and re.fullmatch(r"[0-9a-f]{40}", src["commit"])
        assert b["global_batch_size"] == b["micro_batch_size"] * e["gpus"] * b["grad_accum"]
        return
    assert e["measured"]["metric"] == "tokens_per_s_per_gpu"
    if "url" in src:  # a blog post: its URL and the date it was read
        assert src["url"].startswith("https://") and re.fullmatch(r"\d{4}-\d{2}-\d{2}", src["date"])
        assert f"| {value:g}" in e["quote"] and re.search(r"@[0-9a-f]{40}", e["note"])
    else:
        assert f"| {value:g} |" in e["quote"]
        assert src["repo"] == "pytorch/torchtitan" and re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    p, b = e["parallel"], e["batch"]
    dp = e["gpus"] // (p["tp"] * p["pp"] * p["cp"])
    assert dp * p["tp"] * p["pp"] * p["cp"] == e["gpus"] == e["gpus_per_node"] * e["nodes"]
    assert b["micro_batch_size"] * dp * b["grad_accum"] == b["global_batch_size"]


def test_rows_map_with_their_stated_layout_and_precision() -> None:
    card, _ = st.map_train(ROWS["titan-h100-405b-128gpu-fsdp16-tp8-bf16"])
    assert card["parallel"]["tensor_parallel"] == 8 and card["parallel"]["compile"] is False
    assert card["precision"].get("compute", "bf16") == "bf16" and card["precision"]["optimizer_impl"] == "foreach"
    card, _ = st.map_train(ROWS["titan-h100-405b-128gpu-fsdp16-tp8-float8"])
    assert card["precision"]["compute"] == "fp8" and card["precision"]["fp8_recipe"] == "current"
    assert card["parallel"]["compile"] is True
    for row_id in ("titan-h100-70b-256gpu-fsdp32-tp8-float8-tensorwise-2506",
                   "titan-h100-8b-64gpu-fsdp8-tp8-float8-tensorwise-2506"):
        card, _ = st.map_train(ROWS[row_id])
        assert card["precision"]["compute"] == "fp8" and "optimizer_impl" not in card["precision"]
    card, _ = st.map_train(ROWS["titan-sagemaker-p5-h100-llama3-8b-32gpu-bf16"])
    assert card["parallel"]["compile"] is False and card["batch"]["micro_batch_size"] == 1
    card, _ = st.map_train(ROWS["titan-sagemaker-p5-h100-llama3-8b-32gpu-float8"])
    assert card["parallel"]["compile"] is True and card["precision"]["compute"] == "fp8"
    card, _ = st.map_train(ROWS["titan-a100-llama2-13b-sel-op"])
    assert card["batch"]["seq_len"] == 4096 and card["hardware"]["gpus_per_node"] * card["hardware"]["nodes"] == 64


def test_peft_method_rows_map_to_their_card_scope() -> None:
    card, notes = st.map_train(ROWS["peft-mmqa-l40s-llama32-3b-dora-r32-qv"])
    assert card["scope"] == "dora" and card["lora"]["rank"] == 32 and "adapter_dtype" not in card["lora"]
    card, _ = st.map_train(ROWS["peft-mmqa-l40s-llama32-3b-ia3"])
    assert card["scope"] == "ia3" and "lora" not in card and card["ia3"]["feedforward"] == ["down_proj"]
    card, _ = st.map_train(ROWS["peft-mmqa-l40s-llama32-3b-prompt-tuning-200"])
    assert card["scope"] == "prompt_tuning" and card["prompt_tuning"] == {"num_virtual_tokens": 200}
    for row_id in ("peft-mmqa-l40s-llama32-3b-dora-r32-qv", "peft-mmqa-l40s-llama32-3b-ia3",
                   "peft-mmqa-l40s-llama32-3b-prompt-tuning-200"):
        assert st.plan_card(st.map_train(ROWS[row_id])[0]).step_s > 0
    card, _ = st.map_train(ROWS["peft-mmqa-l40s-llama32-3b-lora-r32-qv"])  # fp32 adapters: PEFT, no autocast
    assert card["scope"] == "lora" and "adapter_dtype" not in card["lora"]


def test_fsdp_qlora_rows_map_to_fsdp1_bf16_adapters_and_their_offload() -> None:
    card, notes = st.map_train(ROWS["fsdpqlora-2x4090-llama2-7b-qlora-fsdp-offload-bs12"])
    par = card["parallel"]
    assert card["scope"] == "qlora" and par["fsdp_version"] == "fsdp1" and par["offload"] == "params_and_optimizer"
    assert card["lora"]["adapter_dtype"] == "bf16" and card["lora"]["rank"] == 64 and par["gradient_checkpointing"]
    card, _ = st.map_train(ROWS["fsdpqlora-2x3090-llama2-7b-lora-ddp-bs4"])
    assert card["parallel"]["strategy"] == "ddp" and card["scope"] == "lora"
    assert ROWS["fsdpqlora-2x3090-llama2-7b-lora-ddp-bs4"]["hardware_rates"]["power_limit_w"] == 280
    for i in ("fsdpqlora-2x3090-llama2-7b-lora-ddp-bs4", "fsdpqlora-2x3090-llama2-7b-qlora-ddp-bs8"):
        # 'two 3090s (without NVLink)': the entry states the link the card carries, not the catalog's bridge
        assert st.map_train(ROWS[i])[0]["hardware"]["interconnect"] == "pcie_no_p2p"  # no P2P on the stock driver
        assert "cannot state the missing NVLink bridge" not in ROWS[i]["note"]
    card, _ = st.map_train(ROWS["fsdpqlora-2xa100-40gb-llama2-70b-qlora-fsdp-bs1"])
    assert card["batch"]["grad_accum"] == 16
