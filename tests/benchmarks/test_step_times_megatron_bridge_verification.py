"""benchmarks/step_times.py, held-out training rows of published_train_times_megatron_bridge_verification.json (Megatron-Bridge's model
verification cards for Qwen3-8B, Qwen3-30B-A3B, gpt-oss-20b and gpt-oss-120b on H100: pretraining, full SFT at 2K
and 32K, LoRA, and the tuned Qwen3-30B-A3B performance item): the file is picked up, its ids are unique across the training files, every figure is
in its quote (the card's milliseconds), the layouts multiply out, the published tokens/s agree with the step time, and
the rows map to the card with the layout their recipe states."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_megatron_bridge_verification.json"
st = load_step_times("trainfit_bench_step_times_megatron_bridge_verification")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 14
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_figures_layout_and_rate(row_id: str) -> None:
    e = ROWS[row_id]
    assert f"last_10_steps_step_time_ms_avg: {e['measured']['value'] * 1000:.3f}" in e["quote"]
    assert f"--seq_length {e['batch']['seq_len']}" in e["quote"] or f"seq {e['batch']['seq_len']}" in e["note"]
    p, b = e["parallel"], e["batch"]
    dp = e["gpus"] // (p["tp"] * p["pp"] * p["cp"])
    assert dp * p["tp"] * p["pp"] * p["cp"] == e["gpus"] == e["gpus_per_node"] * e["nodes"]
    assert b["micro_batch_size"] * dp * b["grad_accum"] == b["global_batch_size"]
    # the card's tokens/s/GPU is the global batch's tokens over the step and the GPUs
    rate = b["global_batch_size"] * b["seq_len"] / (e["measured"]["value"] * e["gpus"])
    assert rate == pytest.approx(e["measured"]["also"]["tokens_per_s_per_gpu"], rel=2e-3)
    src = e["source"]
    assert src["repo"] == "NVIDIA-NeMo/Megatron-Bridge" and re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    assert src["path"].startswith("examples/model_verification_cards/")


def test_rows_map_with_their_recipe_layout() -> None:
    card, _ = st.map_train(ROWS["mbvc-qwen3-30b-a3b-pretrain-perf-h100-16g"])
    par = card["parallel"]
    assert par["expert_parallel"] == 16 and par["moe_dispatcher"] == "deepep" and par["moe_comm_overlap"] is True
    card, _ = st.map_train(ROWS["mbvc-qwen3-30b-a3b-sft32k-h100-16g"])
    par = card["parallel"]
    assert (par["tensor_parallel"], par["context_parallel"], par["expert_parallel"]) == (8, 2, 8)
    assert par["gradient_checkpointing"] is True
    card, _ = st.map_train(ROWS["mbvc-qwen3-8b-lora-h100-1g"])
    assert card["scope"] == "lora" and card["lora"]["rank"] == 8 and card["hardware"]["gpus_per_node"] == 1


def test_lora_on_expert_parallel_experts_is_refused_by_the_planner() -> None:
    card, _ = st.map_train(ROWS["mbvc-qwen3-30b-a3b-lora-h100-4g"])
    with pytest.raises(st.Unmapped) as got:
        st.plan_card(card)
    assert got.value.status == "not_representable" and "LoRA on expert-parallel experts" in got.value.reasons[0]


def test_a2a_context_parallel_maps_to_ulysses_and_recipe_gradient_dtypes_are_carried() -> None:
    card, notes = st.map_train(ROWS["mbvc-qwen3-8b-sft32k-h100-8g"])
    par = card["parallel"]
    assert (par["context_parallel"], par["context_parallel_kind"]) == (2, "ulysses")
    assert any("cp_comm_type a2a" in n for n in notes)
    card, _ = st.map_train(ROWS["mbvc-qwen3-30b-a3b-sft32k-h100-16g"])  # p2p: the ring
    assert card["parallel"]["context_parallel_kind"] == "ring"
    fp32 = {"mbvc-qwen3-8b-sft-h100-4g", "mbvc-qwen3-8b-sft32k-h100-8g", "mbvc-qwen3-30b-a3b-sft-h100-16g",
            "mbvc-qwen3-30b-a3b-sft32k-h100-16g", "mbvc-gpt-oss-20b-pretrain-h100-16g",
            "mbvc-gpt-oss-120b-pretrain-h100-64g"}
    for row_id in fp32 | {"mbvc-gpt-oss-20b-sft-h100-8g", "mbvc-gpt-oss-120b-sft-h100-32g"}:
        card, notes = st.map_train(ROWS[row_id])
        grads = "fp32" if row_id in fp32 else "bf16"
        assert card["precision"]["grads"] == grads, row_id
        src = ROWS[row_id]["precision"]["grads_source"]
        assert re.search(r"l\.\d+", src) and re.search(r"@[0-9a-f]{40}", src) and any(src in n for n in notes)


def test_packed_rows_carry_the_sample_mean_and_the_recipes_rope_loop() -> None:
    loop = {"mbvc-qwen3-8b-sft-h100-4g", "mbvc-qwen3-8b-sft32k-h100-8g", "mbvc-qwen3-8b-lora-h100-1g",
            "mbvc-qwen3-30b-a3b-sft32k-h100-16g", "mbvc-gpt-oss-20b-sft-h100-8g", "mbvc-gpt-oss-20b-lora-h100-1g",
            "mbvc-gpt-oss-120b-sft-h100-32g"}
    for row_id in loop | {"mbvc-qwen3-30b-a3b-sft-h100-16g"}:
        e = ROWS[row_id]
        card, _ = st.map_train(e)
        assert card["batch"]["packed_sample_tokens"] == 392, row_id
        assert "83.333" in e["batch"]["packed_sample_tokens_source"]
        assert card["batch"].get("packed_rope_loop", False) is (row_id in loop), row_id
        assert re.search(r"@[0-9a-f]{40}", e["batch"]["packed_rope_loop_source"])
    for e in ROWS.values():  # pretraining reads megatron-indexed rows: no packed samples
        if e["kind"] == "pretrain":
            card, _ = st.map_train(e)
            assert "packed_sample_tokens" not in card["batch"] and "packed_rope_loop" not in card["batch"]


def _bridge_gqa_moe_flops_per_token(cfg: dict, *, seq_len: int, padded_vocab: int) -> float:
    """Megatron-Bridge's FLOPs per token for a GQA model with GLU experts in every layer and window attention on
    all but every second layer (src/megatron/bridge/training/utils/flop_utils.py l.775, 1068-1130, 1245-1284
    @6799f099712c961f15cf92d6bd88998f029d672d), bias-free as the formula is."""
    h, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    q = cfg["num_attention_heads"] * cfg["head_dim"]
    kv = cfg["num_key_value_heads"] * cfg["head_dim"]
    proj = h * (q + 2 * kv) + q * h
    window = cfg["sliding_window"] + 1  # window_size (128, 0): W = 128 + 0 + 1
    swa_context = window - window * (window - 1) / (2 * seq_len)
    full = sum(1 for i in range(layers) if (i + 1) % 2 == 0)
    attn = 6 * (full * (proj + q * seq_len) + (layers - full) * (proj + 2 * q * swa_context))
    mlp = 6 * h * cfg["intermediate_size"] * cfg["num_experts_per_tok"] * 3 * layers
    return mlp + attn + 6 * h * padded_vocab


@pytest.mark.parametrize("row_id", ["mbvc-gpt-oss-20b-pretrain-h100-16g", "mbvc-gpt-oss-120b-pretrain-h100-64g"])
def test_gpt_oss_pretraining_rows_carry_the_tokenizers_vocabulary(row_id: str) -> None:
    """The from-scratch pretraining recipes size the embedding and output layer from the 32,000-entry tokenizer: the
    card's model TFLOP/s over its tokens/s is Megatron-Bridge's FLOP count with that vocabulary, not with gpt-oss's."""
    e = ROWS[row_id]
    cfg = e["model_config"]
    assert cfg["vocab_size"] == 32000 and cfg["model_type"] == "gpt_oss" and "use_tokenizer_vocab_size=True" in e["note"]
    also = e["measured"]["also"]
    implied = also["tflops_per_gpu"] * 1e12 / also["tokens_per_s_per_gpu"]
    seq = e["batch"]["seq_len"]
    assert implied == pytest.approx(_bridge_gqa_moe_flops_per_token(cfg, seq_len=seq, padded_vocab=32000), rel=1e-3)
    assert implied < 0.93 * _bridge_gqa_moe_flops_per_token(cfg, seq_len=seq, padded_vocab=201216)
    card, notes = st.map_train(e)
    assert card["model"]["config"]["vocab_size"] == 32000 and any("inline model_config" in n for n in notes)
