"""benchmarks/step_times.py, the out-of-sample LoRA / QLoRA rows of published_train_times_firstcontact_2612j.json:
the 'Unsloth NF4' and 'Unsloth BF16' columns of Surogate's speed benchmark (invergent-ai/surogate
docs/reference/benchmarks.md @524fb776007222cfc306b5f067e8430643cf2339): Unsloth's LoRA (bf16 base) and QLoRA (NF4 base)
of Qwen3 0.6B-32B on one RTX 5090, H100, H200 or B200, r 16 on every linear, 2 x 2048 packed tokens x 4 accumulation
steps. Each row cites its source and quotes its table row, its note records the first-contact error, and the step the
row holds is the table's own formula (batch x accumulation x max length / tokens per second). And three full-parameter
rows: Qwen3-0.6B-Base trained with DDP on 4 H200, H100 or L40S (Scicom-AI-Enterprise-Organization/small-ablation
simple-throughput-multigpus), 524,288 packed tokens a step, the README's average tokens per second."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612j.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
SOURCE = ("invergent-ai/surogate", "docs/reference/benchmarks.md", "524fb776007222cfc306b5f067e8430643cf2339")
FULL_SOURCE = ("Scicom-AI-Enterprise-Organization/small-ablation", "simple-throughput-multigpus/README.md",
               "9d56463016e381f0116b6c01db1a8c89901c800c")

st = load_step_times("trainfit_bench_step_times_firstcontact_2612j")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
FULL = sorted(i for i in ROWS if i.startswith("scicom-throughput-"))
UNSLOTH = sorted(i for i in ROWS if i.startswith("surogate-bench-"))


def _cell_tokens_per_s(cell: str) -> float:
    # the table writes thousands with a decimal comma or point and a 'k' / 'K' suffix: '19,1k', '6.1k', '20,3K', '12k'
    return float(cell.rstrip("kK").replace(",", ".")) * 1000


def test_file_is_loaded_whole() -> None:
    assert_file_loaded_whole(st, st.TRAIN_DATA, DATA, ROWS, 41, set())
    kinds = [e["kind"] for e in ROWS.values()]
    assert kinds.count("sft_lora") == 20 and kinds.count("sft_qlora") == 18 and kinds.count("sft_full") == 3
    assert len(UNSLOTH) == 38 and len(FULL) == 3
    assert {ROWS[i]["gpu"] for i in UNSLOTH} == {"rtx5090", "h100-sxm", "h200", "b200"}
    assert {ROWS[i]["gpu"] for i in FULL} == {"h100-sxm", "h200", "l40s"}


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_a_commit_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    assert (src["repo"], src["path"], src["commit"]) == (FULL_SOURCE if row_id in FULL else SOURCE)
    assert HEX40.match(src["commit"])
    assert e["note"].startswith("FIRST CONTACT (scored 2026-12-05 before any model change for them)")
    assert "PENDING" not in e["note"]
    assert len(re.findall(r"First-contact error: trainfit [+-]\d+\.\d %", e["note"])) == 1


@pytest.mark.parametrize("row_id", UNSLOTH)
def test_step_is_the_tables_formula_over_the_quoted_cell(row_id: str) -> None:
    # 'Tokens/sec = Batch Size x Grad Accum Steps x Max Seq Length x Num GPUs / sec/iter' (the file's 'Formulas used')
    e = ROWS[row_id]
    b, m = e["batch"], e["measured"]
    column = "Unsloth NF4" if e["kind"] == "sft_qlora" else "Unsloth BF16"
    cell = re.search(rf"column '{column}': ([0-9.,]+[kK]?)\)", e["quote"]).group(1)
    assert f"| **Qwen3 {e['model'].split('-')[-1]}**" in e["quote"]
    assert m["metric"] == "tokens_per_s_total" and m["value"] == pytest.approx(_cell_tokens_per_s(cell))
    assert (b["micro_batch_size"], b["grad_accum"], b["seq_len"], e["gpus"]) == (2, 4, 2048, 1) and b["packed"]
    assert st.published_train_seconds(e, 2 * 4 * 2048) == pytest.approx(16384 / m["value"])


@pytest.mark.parametrize("row_id", UNSLOTH)
def test_card_is_unsloths_lora_run(row_id: str) -> None:
    # benchmarks/run-unsloth.py: r 16, alpha 32 on all seven linears, optim adamw_8bit; Unsloth's get_peft_model
    # defaults use_gradient_checkpointing 'unsloth' (recomputed layers); its loss is chunked over the vocabulary
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    st.validate(card)
    assert card["scope"] == {"sft_lora": "lora", "sft_qlora": "qlora"}[e["kind"]]
    assert card["parallel"]["strategy"] == "single" and card["parallel"]["gradient_checkpointing"] is True
    assert card["precision"]["optimizer"] == "adamw_8bit"
    assert card["lora"]["rank"] == 16 and card["lora"]["alpha"] == 32 and len(card["lora"]["targets"]) == 7
    assert card["loss"] == {"chunked": True, "kernel": "liger"}
    assert card["hardware"]["gpu"] == e["gpu"] and card["attention"] == "sdpa"
    if card["scope"] == "qlora":
        assert card["lora"]["dequant"] == "bitsandbytes" and card["precision"]["nf4_compute_dtype"] == "bf16"
        assert "prepare_kbit" not in card["lora"]


@pytest.mark.parametrize("row_id", FULL)
def test_full_rows_step_is_the_scripts_tokens_over_the_readmes_rate(row_id: str) -> None:
    # each script: 4 GPUs x per-device batch x accumulation = 32 blocks of 4096 tokens a GPU ('131072 token batch size')
    e = ROWS[row_id]
    b, m = e["batch"], e["measured"]
    assert b["micro_batch_size"] * b["grad_accum"] == 32 and b["seq_len"] == 4096 and e["gpus"] == 4
    assert f"--per_device_train_batch_size {b['micro_batch_size']}" in e["quote"]
    assert f"--gradient_accumulation_steps {b['grad_accum']}" in e["quote"]
    assert f"average {round(m['value'] / 1000)}k tokens per second" in e["quote"]
    assert m["metric"] == "tokens_per_s_total"
    assert st.published_train_seconds(e, 524288) == pytest.approx(524288 / m["value"])


@pytest.mark.parametrize("row_id", FULL)
def test_full_rows_card_is_the_scripts_ddp_run(row_id: str) -> None:
    # train.py: bf16 model under the Trainer (adamw_torch_fused, transformers 4.57.1 with torch 2.8), re-entrant HF
    # checkpointing, Liger RoPE / SwiGLU / RMSNorm and fused linear cross-entropy; FA3 on Hopper, FA2 on the L40S
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    st.validate(card)
    assert card["scope"] == "full" and card["parallel"]["strategy"] == "ddp"
    assert card["parallel"]["gradient_checkpointing"] is True and card["loop"] == {"checkpoint_reentrant": True}
    assert card["precision"]["optimizer_impl"] == "fused" and "AdamW fused:" in e["note"]
    assert card["loss"] == {"chunked": True, "kernel": "liger"}
    assert card["attention"] == "flash"
    assert card["attention_kernel"] == ("fa2" if e["gpu"] == "l40s" else "fa3")
    assert card["model"]["config"]["tie_word_embeddings"] is True


@pytest.mark.parametrize("row_id", UNSLOTH)
def test_unsloth_fused_lora_runs_its_adapter_gemms_in_bf16(row_id: str) -> None:
    # unslothai/unsloth @c80faef72223fb12e84fb8ac84d8ab2e18ef5a4a unsloth/kernels/utils.py l.1027-1031: matmul_lora
    # multiplies X @ A.to(dtype) and adds (.) @ B.to(dtype) with out.addmm_; fast_lora.py l.138-145 / l.443-450 / l.614
    # cast A and B to the activations' dtype in the backwards. Taken with lora_dropout 0 only (llama.py l.3248).
    e = ROWS[row_id]
    card, notes = st.map_train(e)
    assert card["lora"]["adapter_dtype"] == "bf16"
    assert st.UNSLOTH_FUSED_LORA in notes
    with_dropout = {**e, "lora": {**e["lora"], "dropout": 0.05}}
    card_d, notes_d = st.map_train(with_dropout)
    assert "adapter_dtype" not in card_d["lora"] and st.UNSLOTH_FUSED_LORA not in notes_d


def test_unsloth_bf16_adapters_shorten_the_planned_step_on_an_h100() -> None:
    # fp32 adapters would cost SIMT fp32 GEMMs and activation-sized fp32 casts (compute.inventory's FP32_LORA_* terms)
    e = ROWS["surogate-bench-2602-unsloth-bf16-qwen3-8b-h100-sxm"]
    card, _ = st.map_train(e)
    fp32 = json.loads(json.dumps(card))
    fp32["lora"].pop("adapter_dtype")
    bf16_s, fp32_s = st.plan_card(card).step_s, st.plan_card(fp32).step_s
    assert bf16_s < 0.85 * fp32_s


def test_unsloth_fused_lora_follows_the_base_bias_per_module_group() -> None:
    # unslothai/unsloth @c80faef72223fb12e84fb8ac84d8ab2e18ef5a4a unsloth/models/llama.py l.3261-3334: MLP, QKV and O
    # are patched only when every member has lora_A and a base layer with bias None; Qwen2.5's q/k/v have a bias
    # (attention_bias), so they keep PEFT's path with fp32 adapters, and the card (one adapter_dtype) plans PEFT's
    e = ROWS[UNSLOTH[0]]
    qwen25 = {**e, "model": "Qwen/Qwen2.5-7B", "model_config": None}
    assert st.unsloth_peft_path_modules(e["lora"], "Qwen/Qwen2.5-7B") == ["q_proj", "k_proj", "v_proj"]
    assert st.unsloth_peft_path_modules(e["lora"], e["model"]) == []
    card, notes = st.map_train(qwen25)
    assert "adapter_dtype" not in card["lora"] and st.UNSLOTH_FUSED_LORA not in notes
    assert any("Unsloth leaves q_proj, k_proj, v_proj on PEFT's path" in n for n in notes)
    # Qwen2.5 with adapters on o and the MLP only: every targeted group is patched
    mlp_o = {**e["lora"], "targets": ["o_proj", "gate_proj", "up_proj", "down_proj"]}
    assert st.unsloth_fused_lora(mlp_o, "unsloth", model="Qwen/Qwen2.5-7B")
    # a group not wholly targeted (q and v without k) is not patched either
    assert st.unsloth_peft_path_modules({**e["lora"], "targets": "qv"}, "meta-llama/Llama-3.1-8B") == [
        "q_proj", "v_proj"]
