"""benchmarks/step_times.py, the out-of-sample rows of published_train_times_issue_logs_2612.json: step times read
from training logs pasted in GitHub issues (Stanford Alpaca's FSDP1 run of LLaMA-7B, a LLaMA-Factory LoRA run of
Qwen2-72B under ZeRO-3, ColossalAI's Gemini benchmark of a 13B Llama at 4096 and 2048 tokens). Each row cites its thread, records its
first-contact error, maps to a card that validates, and its published figure is the arithmetic its note states on the
logged numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit
from trainfit.catalog.models import from_catalog

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_issue_logs_2612.json"

st = load_step_times("trainfit_bench_step_times_train_issue_logs_2612")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
ALPACA = "issue-alpaca170-llama7b-full-fsdp1-8xa100-mb4-ga8"
LLAMAFACTORY = "issue-llamafactory5398-qwen2-72b-lora-qv-r8-pt8000-zero3-8xa100"
COLOSSAL = "issue-colossalai4551-llama2-13b-gemini-8xa100-b8-s4096-gc"
COLOSSAL_2K = "issue-colossalai4744-llama2-13b-gemini-8xa100-b8-s2048-gc"


def test_the_file_is_loaded_whole() -> None:
    assert DATA in st.data_files(st.TRAIN_DATA)
    loaded = [e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == DATA.name]
    assert sorted(loaded) == sorted(ROWS) == sorted([ALPACA, LLAMAFACTORY, COLOSSAL, COLOSSAL_2K])


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_its_thread_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    assert e["source"]["url"].startswith("https://github.com/") and "/issues/" in e["source"]["url"]
    assert e["quote"] and e["note"].count("First-contact error") == 1


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_maps_to_a_valid_card(row_id: str) -> None:
    card, _ = st.map_train(ROWS[row_id])
    st.validate(card)


def test_alpaca_step_is_the_runtime_over_the_trainers_max_steps() -> None:
    e = ROWS[ALPACA]
    also = e["measured"]["also"]
    per_rank = math.ceil(52_002 / 8)  # DistributedSampler pads the 52,002 samples to 8 x 6,501
    steps_per_epoch = math.ceil(per_rank / 4) // 8  # 1,626 micro-batches of 4 // accumulation 8
    max_steps = 15 * steps_per_epoch
    assert max_steps == also["optimizer_steps_derived"] == 3045
    assert e["measured"]["value"] == pytest.approx(also["train_runtime_s"] / max_steps, abs=1e-4)
    # the run stops at max_steps x 8 micro-batches a rank, inside the 15th epoch: the last logged epoch, 14.98
    stop = max_steps * 8 - 14 * math.ceil(per_rank / 4)
    assert round(14 + stop / math.ceil(per_rank / 4), 2) == also["last_logged_epoch"]


def test_alpaca_sequence_is_the_padded_tokens_total_flos_counts() -> None:
    e = ROWS[ALPACA]
    also = e["measured"]["also"]
    # total_flos sums 6 x input_ids.numel() x (the rank's 1/8 FSDP1 flat shard of 6,738,415,616 parameters) over ranks
    tokens = also["total_flos"] * 8 / (6 * 6_738_415_616)
    samples = 8 * (14 * 6_501 + 1_596 * 4)
    assert tokens / samples == pytest.approx(also["mean_padded_tokens_per_sample_derived"], abs=0.05)
    assert e["batch"]["seq_len"] == round(tokens / samples)
    # samples/s x runtime is the whole dataset 15 times: the epochs are the run's
    assert also["train_samples_per_second"] * also["train_runtime_s"] == pytest.approx(52_002 * 15, rel=1e-3)


def test_llamafactory_rate_is_samples_per_second_times_the_packed_block() -> None:
    e = ROWS[LLAMAFACTORY]
    also = e["measured"]["also"]
    assert e["measured"]["metric"] == "tokens_per_s_total"
    assert e["measured"]["value"] == pytest.approx(also["train_samples_per_second"] * e["batch"]["seq_len"])
    assert also["train_runtime_s"] == pytest.approx(86_400 + 8 * 3600 + 57 * 60 + 44.99)
    # the stated accumulation reproduces the rounded steps/s: 974 micro-batches a rank an epoch // GA x 6 epochs
    steps = (math.ceil(7_792 / 8) // e["batch"]["grad_accum"]) * 6
    assert round(steps / also["train_runtime_s"], 3) == also["train_steps_per_second"]
    # the card's LoRA (rank 8 on q_proj and v_proj) of the catalog's Qwen2-72B is the logged trainable-parameter count
    assert e["lora"] == {"rank": 8, "alpha": 16, "dropout": 0.0, "targets": "qv"}
    spec = from_catalog(e["model"])
    q_out, kv_out = spec.num_attention_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    adapters = (spec.hidden_size + q_out) + (spec.hidden_size + kv_out)  # A (in x r) + B (r x out) of q and v
    assert spec.num_layers * e["lora"]["rank"] * adapters == also["trainable_params_logged"] == 16_384_000


def test_colossal_batch_is_per_rank_at_the_fixed_length() -> None:
    e = ROWS[COLOSSAL]
    assert e["batch"]["micro_batch_size"] * e["gpus"] == e["batch"]["global_batch_size"] == 64
    card, _ = st.map_train(e)
    assert card["batch"]["seq_len"] == 4096 and card["parallel"]["strategy"] == "zero3"
    assert card["attention"] == "flash"


def test_colossal_2k_step_is_what_the_printed_tflops_imply() -> None:
    e = ROWS[COLOSSAL_2K]
    # PerformanceEvaluator: TFLOPS per GPU = rank batch x seq x model_numel x 2 x (3 + grad_checkpoint) / step
    numel = 13_015_864_320
    assert e["measured"]["value"] == pytest.approx(8 * 2048 * numel * 2 * 4 / 175e12, abs=1e-3)
    # the author's fwd+bwd time (~9.5 s) is below the full step, never above it
    assert e["measured"]["also"]["step_time_to_backward_end_s_approx"] < e["measured"]["value"]
    card, _ = st.map_train(e)
    assert card["batch"]["seq_len"] == 2048 and card["batch"]["micro_batch_size"] == 8


def test_alpaca_plans_the_fp32_weights_its_train_py_loads() -> None:
    # stanford_alpaca train.py loads the model with no torch_dtype: fp32 shards, gradients and AdamW moments
    e = ROWS[ALPACA]
    assert e["precision"]["weights"] == "fp32" and "c8ea92b1" in e["precision"]["weights_source"]
    card, _ = st.map_train(e)
    assert card["precision"]["weights"] == "fp32"
