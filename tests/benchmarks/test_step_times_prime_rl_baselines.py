"""benchmarks/step_times.py, held-out training rows of published_train_times_prime_rl_baselines.json (prime-rl's trainer
benchmark baselines, PrimeIntellect-ai/prime-rl benchmarks/baselines/*.json, the figures benchmarks/results/BENCHMARKS.md
compares against, and NeMo Automodel's 1024-GPU DeepSeek-V3 row): the file is picked up, ids are unique across files,
every row's figure is in its quote, the layouts multiply out (prime-rl: 2 micro-batches of one sequence per rank), and the
RL rows' chunked LM head, the 'Offload' rows' activation offloading and prime-rl's bf16 LoRA adapters reach the card."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_prime_rl_baselines.json"
st = load_step_times("trainfit_bench_step_times_prime_rl_baselines")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
PRIME = sorted(i for i, e in ROWS.items() if e["framework"] == "prime-rl")


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 47 and len(PRIME) == 46
    assert not loaded & others
    assert sum(1 for e in ROWS.values() if e.get("card_cannot_state")) == 4


@pytest.mark.parametrize("row_id", PRIME)
def test_prime_rl_row_figures_layout_and_mapping(row_id: str) -> None:
    e = ROWS[row_id]
    assert e["measured"]["metric"] == "step_s" and str(e["measured"]["value"]) in e["quote"]
    assert f"S = {e['batch']['seq_len']}" in e["note"] and str(e["batch"]["seq_len"]) in e["source"]["path"]
    p, b = e["parallel"], e["batch"]
    dp = e["gpus"] // (p["tp"] * p["pp"] * p["cp"])
    assert dp * p["tp"] * p["pp"] * p["cp"] == e["gpus"] == e["gpus_per_node"] * e["nodes"]
    assert b["micro_batch_size"] * dp * b["grad_accum"] == b["global_batch_size"] == 2 * e["gpus"]
    assert re.fullmatch(r"[0-9a-f]{40}", e["source"]["commit"]) and e["source"]["repo"] == "PrimeIntellect-ai/prime-rl"
    assert e["source"]["path"].startswith("benchmarks/baselines/")
    if e.get("card_cannot_state"):  # B200 MoE LoRA: adapters looped over the experts off Hopper
        assert e["gpu"] == "b200" and e["kind"] == "sft_lora" and "multi_moe.py" in e["card_cannot_state"]
        with pytest.raises(st.Unmapped):
            st.map_train(e)
        return
    card, _ = st.map_train(e)
    assert card["batch"]["seq_len"] == b["seq_len"] and card["batch"]["grad_accum"] == 2
    assert card["parallel"]["gradient_checkpointing"] is True and card["parallel"]["compile"] is True
    assert card["precision"]["optimizer_impl"] == "foreach"
    rl = "-rl-" in row_id
    assert card.get("loss", {}).get("chunked", False) is rl
    # the RL trainer's head is prime-rl's vocabulary-chunked log-prob head, not Liger's (lm_head.py @d8f290ef)
    assert card.get("loss", {}).get("kernel") == ("prime_rl" if rl else None)
    assert card["parallel"].get("activation_offload", False) is ("-offload-" in row_id)
    if e["kind"] == "sft_lora":
        assert card["lora"]["rank"] == 16 and card["lora"]["alpha"] == 32 and card["lora"]["adapter_dtype"] == "bf16"
    # fully_shard over every rank, one GPU included (setup_fsdp runs whatever the world size)
    assert card["parallel"]["strategy"] == "fsdp" and card["parallel"]["fsdp_version"] == "fsdp2"
    # fp32 parameter shards (optimization_dtype float32) under MixedPrecisionPolicy(bf16, reduce float32)
    assert card["precision"]["weights"] == "fp32"
    assert card["precision"].get("grads") == ("fp32" if e["kind"] == "sft_full" else None)


def test_prime_rl_fp32_shards_reach_the_plan_with_their_citation() -> None:
    """The fp32 parameter shards and fp32 gradients are what the optimizer steps: the planned optimizer step moves
    more bytes than the same card at the default bf16 weights, and the rule cites the trainer's lines."""
    e = ROWS["primerl-q3-0.6b-sft-full-8k-recompute-fa3-1xh100-sxm"]
    assert st.PRIME_RL_SETTINGS_COMMIT in e["note"]
    grads, note = st.grad_dtype_of(e)
    assert grads == "fp32" and "model.py l.428" in note and "config.py l.216-221" in note
    assert st.PRIME_RL_SETTINGS_COMMIT in note
    card, _ = st.map_train(e)
    bf16 = {**card, "precision": {k: v for k, v in card["precision"].items() if k not in ("weights", "grads")}}
    fp32_opt = st.plan_card(card).parts["time.optimizer_step"]
    bf16_opt = st.plan_card(bf16).parts["time.optimizer_step"]
    assert fp32_opt > 1.5 * bf16_opt


def test_automodel_deepseek_1024_row_layout() -> None:
    e = ROWS["automodel-2861-h100-deepseek-v3-1024gpu"]
    assert str(e["measured"]["value"]) in e["quote"] and str(e["measured"]["also"]["step_s"]) in e["quote"]
    p, b = e["parallel"], e["batch"]
    dp = e["gpus"] // (p["tp"] * p["pp"] * p["cp"])
    assert dp == 256 and e["gpus"] == e["gpus_per_node"] * e["nodes"]
    card, _ = st.map_train(e)
    assert card["batch"]["grad_accum"] * b["micro_batch_size"] * dp == b["global_batch_size"] == 8192
    assert card["parallel"]["pipeline_parallel"] == 4 and card["parallel"]["expert_parallel"] == 64
