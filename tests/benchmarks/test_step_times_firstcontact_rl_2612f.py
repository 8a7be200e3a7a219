"""benchmarks/step_times.py, the out-of-sample RL rows of published_rl_times_firstcontact_2612f.json: twelve GRPO runs
from Unsloth's notebooks (unslothai/notebooks nb/*GRPO*.ipynb), saved with the outputs of their own single-GPU runs (T4,
L4, RTX 4090, A100-40GB), the first rows of that framework. Unsloth has no card preset, so every row is not
representable and scored by the rule only. Every row cites its notebook at a commit, its step is the trainer's elapsed
time over the steps it ran, its batch and lengths are the printed ones, and its note records the first-contact error.

First contact scored the rule only (no preset then). ``preset: unsloth`` now plans one GPU (trainfit.methods.unsloth,
the mechanisms cited to unslothai/unsloth @027b5100 and unslothai/unsloth-zoo @de3f00e0), and map_rl maps six rows with
it (``unsloth_section``); each note records that first planned figure ("FIRST CONTACT OF THE PLAN"). One model change
followed it: the QLoRA rows' engine decodes through bitsandbytes 4-bit linears that dequantise per call of more than
one row (trainfit.compute.bnb_decode, bitsandbytes pinned before 0.50 by the Unsloth release's date); each of those
notes records the figure after it ("AFTER THE 4-BIT DECODE"). Six stay not representable, each with its reason: two with gradient accumulation 4, where the
unprinted TRL release decides the generate calls; two load_in_fp8 rows (the fp8 sharing not read); Gemma 3 1B and
gpt-oss-20b (no vLLM engine). The rule
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

AFTER_BNB_DECODE = re.compile(
    r"AFTER THE 4-BIT DECODE: trainfit (\d+\.\d\d) s against (\d+\.\d\d) s on the step, error ([+-]\d+\.\d) %\.")
AFTER_RTX4090_RATE = re.compile(
    r"AFTER THE RTX 4090 BF16 RATE \(2026-12-05;[^)]*\): trainfit (\d+\.\d\d) s against (\d+\.\d\d) s on the step,"
    r" error ([+-]\d+\.\d) %\.")
"""The RTX 4090's measured bf16 rate (compute.rates ``_OTHER_MATMUL_FRACTION``), recorded after the 4-bit decode on the
one row that runs on that card."""
AFTER_OFFLOADED_CHECKPOINT = re.compile(
    r"AFTER THE OFFLOADED CHECKPOINT: trainfit (\d+\.\d\d) s against (\d+\.\d\d) s on the step, error ([+-]\d+\.\d) %\.")
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


MAPPED = {
    # id: (scope, the first planned step error recorded in the note, %)
    "unsloth-nb-grpo-qwen25-3b-qlora-gsm8k-t4-1g": ("qlora", -54.1),
    "unsloth-nb-grpo-phi4-14b-qlora-gsm8k-t4-1g": ("qlora", -65.9),
    "unsloth-nb-grpo-llama31-8b-qlora-gsm8k-t4-1g": ("qlora", -16.5),
    "unsloth-nb-grpo-mistral-7b-v03-qlora-gsm8k-rtx4090-1g": ("qlora", 34.2),
    "unsloth-nb-grpo-qwen3-4b-base-lora-dapomath-t4-1g": ("lora", -26.7),
    "unsloth-nb-grpo-dsr1-0528-qwen3-8b-qlora-dapomath-t4-1g": ("qlora", -35.3),
}
REFUSED = {
    # id: a phrase of the reason it stays not representable
    "unsloth-nb-grpo-llama32-3b-lora-gsm8k-t4-1g": "once per micro-batch or per step",
    "unsloth-nb-grpo-llama32-3b-lora-gsm8k-a100-40gb-1g": "once per micro-batch or per step",
    "unsloth-nb-grpo-llama32-1b-fp8-lora-dapomath-l4-1g": "load_in_fp8",
    "unsloth-nb-grpo-qwen3-8b-fp8-lora-dapomath-l4-1g": "load_in_fp8",
    "unsloth-nb-grpo-gemma3-1b-lora-gsm8k-t4-1g": "no vLLM engine",
    "unsloth-nb-grpo-gpt-oss-20b-qlora-t4": "no vLLM engine",
}
PLANNED = re.compile(
    r"FIRST CONTACT OF THE PLAN \(scored 2026-12-05 before any model change for them; preset unsloth,"
    r" benchmarks/step_times\.py on the tree of [0-9a-f]{8}[^)]*\): trainfit (\d+\.\d\d) s against (\d+\.\d\d) s on"
    r" the step, error ([+-]\d+\.\d) %; the 6N rule ([+-]\d+\.\d) % \((\d+\.\d\d) s\)\.")


def test_every_row_is_either_mapped_or_refused_with_its_reason() -> None:
    assert set(MAPPED) | set(REFUSED) == set(RUNS) and not set(MAPPED) & set(REFUSED)


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_row_records_the_rule_at_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    match = FIRST_CONTACT.search(e["note"])
    assert len(FIRST_CONTACT.findall(e["note"])) == 1 and match
    assert float(match.group(3)) == pytest.approx(e["measured"]["step_s"], abs=0.006)
    (row,) = st.rl_rows([e], [])
    recorded = float(match.group(2))
    if e["model"] in RESCORED:
        # first contact counted N from the name (nominal); since the Instruct alias the rule uses the aliased catalog
        # checkpoint's matmul parameters, and the rule is linear in N; the note records the re-scored figure
        n, how = st.rule_params(e["model"], None)
        assert st.MODEL_ALIASES[e["model"]] == RESCORED[e["model"]] and how.startswith("matmul")
        nominal = float(re.search(r"(\d+(?:\.\d+)?)B", e["model"]).group(1)) * 1e9
        recorded *= n / nominal
        assert f"the 6N rule {row.rule_s:.2f} s" in e["note"]
    assert row.rule_s == pytest.approx(recorded, abs=0.008)  # the note rounds to 0.01 s


RESCORED = {"mistralai/Mistral-7B-Instruct-v0.3": "mistralai/Mistral-7B-v0.3",
            "meta-llama/Llama-3.2-3B-Instruct": "meta-llama/Llama-3.2-3B",
            "meta-llama/Llama-3.2-1B-Instruct": "meta-llama/Llama-3.2-1B"}


@pytest.mark.parametrize("row_id", sorted(REFUSED))
def test_row_stays_not_representable_with_its_reason(row_id: str) -> None:
    e = ROWS[row_id]
    with pytest.raises(st.Unmapped) as info:
        st.map_rl(e)
    assert info.value.status == "not_representable"
    assert any(REFUSED[row_id] in r for r in info.value.reasons), info.value.reasons
    assert "FIRST CONTACT OF THE PLAN" not in e["note"]


@pytest.mark.parametrize("row_id", sorted(MAPPED))
def test_row_maps_to_preset_unsloth_and_records_its_first_planned_figure(row_id: str) -> None:
    """The row's card: preset unsloth, the notebook's adapter (qlora over a 4-bit base), the reference = the actor with
    its adapter disabled at TRL's beta 0.04 (every release before v0.19.0), fp16 where the card has no bf16; its note
    records the first planned figure, and the harness still gives it (no model change since)."""
    e = ROWS[row_id]
    card, _ = st.map_rl(e)
    scope, error = MAPPED[row_id]
    assert card["preset"] == "unsloth" and card["scope"] == scope
    assert card["roles"]["reference"] == "lora_disabled" and card["roles"]["kl_coef"] == 0.04
    assert card["lora"]["rank"] == e["train"]["lora"]["rank"]
    assert (card.get("precision", {}).get("compute") == "fp16") == (e["gpu"] == "t4")
    # the notebook's GRPOConfig optim, quoted from the cell at the read commit
    assert card["precision"]["optimizer"] == e["train"]["optimizer"] in ("adamw_8bit", "paged_adamw_8bit")
    assert f"optim = \"{e['train']['optimizer']}\"" in e["train"]["optimizer_source"]
    assert COMMIT in e["train"]["optimizer_source"] and e["source"]["path"] in e["train"]["optimizer_source"]
    match = PLANNED.search(e["note"])
    assert match and float(match.group(3)) == error
    assert float(match.group(2)) == pytest.approx(e["measured"]["step_s"], abs=0.006)
    # a QLoRA row's engine holds bitsandbytes 4-bit linears, pinned before 0.50 (the Unsloth release's date), so its
    # decode streams the dequantised weights (trainfit.compute.bnb_decode); its note records the figure after that
    after = AFTER_BNB_DECODE.search(e["note"])
    assert (card.get("software", {}).get("bitsandbytes") == st.UNSLOTH_ERA_BITSANDBYTES) == (scope == "qlora")
    assert (after is not None) == (scope == "qlora")
    rate = AFTER_RTX4090_RATE.search(e["note"])
    assert (rate is not None) == (e["gpu"] == "rtx4090")
    # since Unsloth's offloaded checkpointing is planned (methods.presets.unsloth_activation_offload, the copies timed by
    # compute.offload.offloaded_checkpoint_copy_seconds) every planned row's note records the figure after it
    copies = AFTER_OFFLOADED_CHECKPOINT.search(e["note"])
    assert copies is not None
    (row,) = st.rl_rows([e], [])
    assert row.status == "mapped" and row.trainfit_s == pytest.approx(float(copies.group(1)), abs=0.006)
    assert float(copies.group(3)) == pytest.approx(100 * (row.trainfit_s / row.published_s - 1), abs=0.06)
    if after is not None:
        assert float(after.group(1)) != float(copies.group(1))  # the copies moved the step
    assert row.rule_s == pytest.approx(float(match.group(5)), abs=0.006)


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
