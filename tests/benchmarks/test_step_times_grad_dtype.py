"""benchmarks/step_times.py: each Megatron-family full-scope row states the gradient dtype its framework's config
reduces in (precision.grads), with a note citing the config line: fp32 for Megatron-LM with bf16 (forced), for the
NeMo 24.07 scripts that leave Apex's grad_sync_dtype at its fp32 default and for NeMo 2.0's DeepSeek-V3 performance
script (no performance_mode: bf16_mixed's grad_reduce_in_fp32 True stands); bf16 for the other DGX Cloud NeMo 2.0
scripts, the Megatron-Bridge and NeMo 2.0 performance recipes (grad_reduce_in_fp32 = False), the NeMo 24.07 scripts
that pass grad_sync_dtype=bf16 and its SFT yaml; fp32 for nanotron's Ultra-Scale Playbook rows (accumulate_grad_in_fp32);
fp32 for prime-rl's FSDP2 trainer (reduce_dtype float32 over fp32 parameter shards); LoRA rows and other frameworks are
left to the card's default."""

from __future__ import annotations

import re

import pytest
from step_times_module import load_step_times

st = load_step_times("trainfit_bench_step_times_grad_dtype")
ENTRIES = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}

FP32 = {"megatron-lm-2024-h100-gpt-1.7b-48gpu", "megatron-lm-2024-h100-gpt-7.1b-96gpu",
        "megatron-lm-2024-h100-gpt-16b-192gpu", "megatron-lm-2024-h100-gpt-32b-384gpu",
        "megatron-lm-2024-h100-gpt-462b-6144gpu",
        "nemo-h100-nemotron-8b-pretrain-fp8-2407", "nemo-h100-nemotron-22b-pretrain-fp8-2407",
        "dgxc2505-h100-deepseek-v3-pt-bf16-512g", "dgxc2505-gb200-deepseek-v3-pt-bf16-128g"}
BF16 = {"megatron-lm-2021-a100-gpt-1.7b-32gpu", "mbridge-2606-h100-llama3-70b-sft-fp8-32g",
        "mbridge-2511-h100-llama31-405b-pt-fp8-1024g", "mbridge-h100-gpt-oss-120b-bf16",
        "nemo-h100-gpt3-20b-pretrain-fp8-2407", "nemo-h100-llama2-70b-pretrain-fp8-2407",
        "nemo-h100-nemotron-340b-pretrain-fp8-2407", "nemo-h100-llama2-13b-sft-fp8-2407",
        "nemo-h100-llama2-7b-sft-fp8", "dgxc2504-h100-llama31-70b-pt-bf16-64g", "dgxc2504-h100-llama3-70b-sft-bf16-32g",
        "dgxc2505-h100-llama31-405b-pt-bf16-512g", "dgxc2505-gb200-llama4-maverick-pt-bf16-128g",
        "dgxc2505-h100-grok1-314b-pt-bf16-512g", "dgxc2505-h100-grok1-314b-pt-fp8-512g"}
COMMIT = re.compile(r"@[0-9a-f]{40}")


@pytest.mark.parametrize("row_id", sorted(FP32 | BF16))
def test_the_stated_gradient_dtype_and_its_citation(row_id: str) -> None:
    grads, note = st.grad_dtype_of(ENTRIES[row_id])
    assert grads == ("fp32" if row_id in FP32 else "bf16")
    assert f"precision.grads {grads}" in note or "planned as bf16" in note
    assert COMMIT.search(note) and re.search(r"l\.\d+", note)


def test_every_megatron_family_full_row_states_it_and_the_card_carries_it() -> None:
    mapped = 0
    for e in ENTRIES.values():
        grads, note = st.grad_dtype_of(e)
        if e["framework"] in ("megatron", "megatron-bridge") and e["kind"] in ("pretrain", "sft_full"):
            assert grads in ("fp32", "bf16"), e["id"]
        if e["framework"] == "llm-foundry":  # Composer FSDP mixed_precision DEFAULT (the table's MP Mode) reduces fp32
            assert grads == ("fp32" if "| amp_bf16 | DEFAULT |" in e["quote"] else None), e["id"]
        elif e["framework"] == "prime-rl":  # FSDP2 reduce_dtype float32 over fp32 parameter shards
            assert grads == ("fp32" if st.PRIME_RL_SETTINGS_COMMIT in e["note"] else None), e["id"]
        elif e["framework"] == "torchtitan":  # FSDP2 reduce_dtype float32 over fp32 parameter shards
            assert (grads, note) == ("fp32", st.TORCHTITAN_FP32_PRECISION), e["id"]
        elif e["framework"] not in st.MEGATRON_FRAMEWORKS and e["framework"] != "nanotron":
            assert grads is None, e["id"]
        try:
            card, notes = st.map_train(e)
        except st.Unmapped:
            continue
        if e["kind"] in ("sft_lora", "sft_qlora"):
            assert "grads" not in card["precision"], e["id"]  # the adapters' dtype stays the card's
        elif grads:
            mapped += 1
            assert card["precision"]["grads"] == grads and note in notes, e["id"]
        else:
            assert "grads" not in card["precision"], e["id"]
    assert mapped >= 30


def test_megatron_lm_fp32_rows_plan_a_larger_gradient_reduce() -> None:
    e = ENTRIES["megatron-lm-2024-h100-gpt-32b-384gpu"]
    card, _ = st.map_train(e)
    fp32 = st.plan_card(card)
    card["precision"]["grads"] = "bf16"
    bf16 = st.plan_card(card)
    assert fp32.parts["time.communication"] > bf16.parts["time.communication"]
    assert fp32.parts["time.forward"] == bf16.parts["time.forward"]


def test_nanotron_playbook_rows_reduce_fp32_gradients() -> None:
    rows = [e for e in ENTRIES.values() if e["framework"] == "nanotron"]
    assert len(rows) == 26
    for e in rows:
        grads, note = st.grad_dtype_of(e)
        assert grads == "fp32" and "accumulate_grad_in_fp32" in note, e["id"]
        assert COMMIT.search(note) and re.search(r"l\.\d+", note)
