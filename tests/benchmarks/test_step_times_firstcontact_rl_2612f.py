"""benchmarks/step_times.py, the out-of-sample RL rows of published_rl_times_firstcontact_2612f.json: twelve GRPO runs
from Unsloth's notebooks (unslothai/notebooks nb/*GRPO*.ipynb), saved with the outputs of their own single-GPU runs (T4,
L4, RTX 4090, A100-40GB), the first rows of that framework. Unsloth has no card preset, so every row is not
representable and scored by the rule only. Every row cites its notebook at a commit, its step is the trainer's elapsed
time over the steps it ran, its batch and lengths are the printed ones, and its note records the first-contact error.

No model change followed first contact: trainfit gives these rows no figure, so there is no trainfit miss to explain.
``preset: unsloth`` is now known and refused with its reason (trainfit.methods.unsloth, the mechanisms cited to
unslothai/unsloth @027b5100 and unslothai/unsloth-zoo @de3f00e0), and map_rl refuses these rows with that reason.
Two things stand between them and a plan, both outside the time model: no card preset states Unsloth's trainer (its vLLM
engine in the training process over the same base weights, the LoRA adapter handed over each step, Unsloth's offloaded
checkpointing), and map_rl maps train.lora on RL entries for verl only ('only verl's LoRA actor is mapped'). The rule
misses every row by -81 to -100 %: a step of 2 to 32 sequences on one GPU is bound by decoding (the weights read once a
token), which a FLOP count at 40 % of the peak does not see.

Read for this file and not used (2026-12-05): huggingface/blog vllm-colocate.md and TRL's docs (throughput as charts
only); huggingface/trl examples/notebooks/grpo_trl_lora_qlora.ipynb @7f8fbf04 (Qwen2-7B-Instruct QLoRA on a T4,
'[500/500 13:05:04, Epoch 0/1]', but its table logs no completion length and no prompt cap is set); inclusionAI/AReaL
benchmark/verl_v0_3_0_post1_312a8cb/README.md (a figure only); OpenRLHF's docs and README tables beyond the rows already
held (no further timings); NVIDIA-NeMo/RL docs/about/performance-summary.md (every release's table already held);
radixark/miles docs/models (Qwen3-8 already held; GLM-5.2, Kimi K3 and the agentic examples name models outside the
catalog or include evaluation and environment time)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_rl_times_firstcontact_2612f.json"
COMMIT = "8081c7e480275013fa38cf2bfbaf902af5ccf589"
RUNS = {
    # id: (steps the progress bar counts, its elapsed time, prompts x generations an optimizer step)
    "unsloth-nb-grpo-qwen25-3b-qlora-gsm8k-t4-1g": (250, "1:40:29", 1, 8),
    "unsloth-nb-grpo-phi4-14b-qlora-gsm8k-t4-1g": (100, "2:38:49", 1, 6),
    "unsloth-nb-grpo-llama31-8b-qlora-gsm8k-t4-1g": (250, "3:47:51", 1, 6),
    "unsloth-nb-grpo-mistral-7b-v03-qlora-gsm8k-rtx4090-1g": (250, "42:26", 1, 6),
    "unsloth-nb-grpo-qwen3-4b-base-lora-dapomath-t4-1g": (100, "2:54:46", 1, 4),
    "unsloth-nb-grpo-dsr1-0528-qwen3-8b-qlora-dapomath-t4-1g": (100, "1:30:34", 1, 4),
    "unsloth-nb-grpo-llama32-3b-lora-gsm8k-t4-1g": (500, "6:57:24", 4, 4),
    "unsloth-nb-grpo-llama32-3b-lora-gsm8k-a100-40gb-1g": (294, "1:30:03", 4, 8),
    "unsloth-nb-grpo-llama32-1b-fp8-lora-dapomath-l4-1g": (100, "50:36", 1, 4),
    "unsloth-nb-grpo-qwen3-8b-fp8-lora-dapomath-l4-1g": (100, "2:43:09", 1, 4),
    "unsloth-nb-grpo-gemma3-1b-lora-gsm8k-t4-1g": (14, "13:12", 1, 4),
    "unsloth-nb-grpo-gpt-oss-20b-qlora-t4": (100, "12:44:02", 1, 2),
}
FIRST_CONTACT = re.compile(
    r"FIRST CONTACT \(scored 2026-12-05 before any model change for them; benchmarks/step_times\.py on the tree of"
    r" [0-9a-f]{8}[^)]*\): step not representable, no trainfit figure \(Unsloth has no card preset\); the 6N rule"
    r" ([+-]\d+\.\d) % on the step \((\d+\.\d\d) s against (\d+\.\d\d) s\)\.")

st = load_step_times("trainfit_bench_step_times_firstcontact_rl_2612f")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def seconds(clock: str) -> int:
    parts = [int(x) for x in clock.split(":")]
    return parts[0] * 3600 + parts[1] * 60 + parts[2] if len(parts) == 3 else parts[0] * 60 + parts[1]


def test_file_is_loaded_whole_and_its_ids_are_new() -> None:
    assert_file_loaded_whole(st, st.RL_DATA, DATA, ROWS, 12, set(RUNS))


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_row_cites_its_notebook_and_its_step_is_the_elapsed_time_over_the_steps(row_id: str) -> None:
    e = ROWS[row_id]
    steps, clock, prompts, generations = RUNS[row_id]
    src = e["source"]
    assert src["repo"] == "unslothai/notebooks" and src["commit"] == COMMIT and src["read"] == "2026-12-05"
    assert src["path"].startswith("nb/") and src["path"].endswith(".ipynb") and "GRPO" in src["path"]
    assert f"{steps}/" in e["quote"] and f" {clock}" in e["quote"]
    assert e["measured"]["step_s"] == pytest.approx(seconds(clock) / steps, abs=1e-3)
    assert (e["data"]["prompts_per_step"], e["data"]["n_per_prompt"]) == (prompts, generations)
    assert f"= {prompts * generations}" in e["quote"] or "Total batch size = 1" in e["quote"]
    assert e["gpus"] == 1 and e["framework"] == "unsloth" and e["rollout"]["placement"] == "colocate"


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_row_is_not_representable_and_records_the_rule_at_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    assert "Unsloth's GRPO trainer" in e["card_cannot_state"]
    with pytest.raises(st.Unmapped) as info:
        st.map_rl(e)
    assert info.value.status == "not_representable"
    match = FIRST_CONTACT.search(e["note"])
    assert e["note"].count("FIRST CONTACT") == 1 and match
    assert float(match.group(3)) == pytest.approx(e["measured"]["step_s"], abs=0.006)
    (row,) = st.rl_rows([e], [])
    assert row.status == "not_representable" and row.trainfit_s is None
    assert row.rule_s == pytest.approx(float(match.group(2)), abs=0.006)


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_the_row_is_refused_by_the_products_own_unsloth_preset_reason(row_id: str) -> None:
    """map_rl refuses a framework the card's preset field refuses (trainfit.methods.unsloth REFUSED_PRESETS) with that
    reason, entry's own card_cannot_state or not: without it the row fell to the LoRA check and was 'skipped'."""
    from trainfit.methods.unsloth import UNSLOTH_PRESET_REFUSAL

    e = {k: v for k, v in ROWS[row_id].items() if k != "card_cannot_state"}
    with pytest.raises(st.Unmapped) as info:
        st.map_rl(e)
    assert info.value.status == "not_representable"
    assert f"preset unsloth refused: {UNSLOTH_PRESET_REFUSAL}" in info.value.reasons


def test_the_rl_rule_uses_the_fp16_peak_on_a_card_without_bf16() -> None:
    """The T4 has no bf16 (the runs' banners print 'Bfloat16 = FALSE'): the rule scores its RL rows at the fp16 peak
    (rule_peak_rl) where the bf16 peak alone left them without a rule figure."""
    from trainfit.catalog.gpus import resolve_gpu

    t4 = resolve_gpu("t4")
    assert not t4.bf16_dense_flops_per_s and t4.fp16_dense_flops_per_s
    assert st.rule_peak("t4") in (None, 0, 0.0) and st.rule_peak_rl("t4") == t4.fp16_dense_flops_per_s
    assert st.rule_peak_rl("h100-sxm") == st.rule_peak("h100-sxm")
    e = ROWS["unsloth-nb-grpo-qwen25-3b-qlora-gsm8k-t4-1g"]
    n, _ = st.rule_params(e["model"], e.get("model_config"))
    assert st.rl_rule_figures(e, n)["step"] is not None


@pytest.mark.parametrize(("alias", "catalog_id"), [("Qwen/Qwen3-4B-Base", "Qwen/Qwen3-4B"),
                                                   ("deepseek-ai/DeepSeek-R1-0528-Qwen3-8B", "Qwen/Qwen3-8B")])
def test_the_rows_models_resolve_to_the_catalog_shapes(alias: str, catalog_id: str) -> None:
    assert st.MODEL_ALIASES[alias] == catalog_id
    n_alias, how = st.rule_params(alias, None)
    assert n_alias == st.rule_params(catalog_id, None)[0] and how.startswith("matmul")
