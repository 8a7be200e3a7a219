"""benchmarks/step_times.py, the out-of-sample fine-tuning rows of published_train_times_firstcontact_2612l.json: NVIDIA
DGX Cloud's Hugging Face PEFT LoRA + FSDP recipes (NVIDIA/dgxc-benchmarking hf-llama2/README_70b.md, Llama 2 70B on 8-512
H100, and hf-mistral/README_7b.md, Mistral 7B on 8-256 H100), which run DHS-LLM-Workshop's train.py (transformers 4.40.0,
TRL 0.8.2, packed 2,048-token ultrachat_200k rows, LoRA r 8 on every linear, gradient checkpointing, flash attention).

The published rate is train_samples_per_second, whose runtime holds the Trainer's epoch-end evaluation of the packed test
split and a checkpoint save (--evaluation_strategy / --save_strategy epoch): every row is not representable
(card_cannot_state) and scored by the rule only. The rows themselves show it: every run does the same work a GPU a step
(8 or 16 sequences x 4 accumulations), yet the 70B step falls from 205 s on 8 GPUs to 86 s on 128-256, the extra time
shrinking about as 1 / GPUs, as a fixed evaluation spread over more GPUs does.

Three more rows, scored by trainfit: ms-swift's Megatron-SWIFT example headers (modelscope/ms-swift
examples/megatron/fp8/benchmark.sh, Qwen3-14B on 8 H20 in FP8 blockwise and BF16; examples/megatron/long_text.sh,
Qwen2.5-7B full SFT on 4 A100 at 32K packed rows). Their packed rows are planned full, the fill not being published.

Read for this file and not used (2026-12-05): AUGMXNT/speed-benchmarking train-bench (its Unsloth logs run unpacked,
padded Alpaca micro-batches whose lengths are not published; the torchtune and axolotl figures are in W&B only);
Scicom-AI-Enterprise-Organization/small-ablation's other ablations (W&B charts only); torchtune's docs tutorials
(progress bars on unnamed GPUs or padded Alpaca batches); the ROCm blogs' LoRA / QLoRA posts (MI250, not in the catalog);
huggingface/trl example notebooks (models outside the catalog); ms-swift's other header timings (examples/megatron/
lora/dense.sh: unpacked Alpaca micro-batches of unpublished length; the MoE, multimodal, DPO and sequence-classification
scripts: outside these fine-tuning rows); NVIDIA-NeMo/Automodel and NVIDIA-NeMo/RL guides (no
step times beyond the files already held)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612l.json"
DGXC_COMMIT = "e6afea3aea32cdbe8c7fdc4f5c385d11272152a3"
TABLES = {
    # model: (README, table line, GPUs -> train_samples_per_second, micro-batch, max_steps), as the README prints them
    "meta-llama/Llama-2-70b-hf": ("hf-llama2/README_70b.md", 20,
                                  {8: 1.247, 16: 3.664, 32: 9.432, 64: 21.905, 128: 47.342, 256: 95.339, 512: 154.931}, 8, 30),
    "mistralai/Mistral-7B-v0.1": ("hf-mistral/README_7b.md", 19,
                                  {8: 16.287, 16: 37.895, 32: 81.626, 64: 161.273, 128: 308.95, 256: 555.363}, 16, 100),
}
FIRST_CONTACT = re.compile(
    r"First-contact error: not representable \(card_cannot_state\), no trainfit figure; the 6N rule ([+-]\d+\.\d) %"
    r" \((\d+\.\d\d) s against (\d+\.\d\d) s\)")

st = load_step_times("trainfit_bench_step_times_firstcontact_2612l")
ALL = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}
ROWS = {i: e for i, e in ALL.items() if i.startswith("dgxc-hf-")}
SWIFT = {i: e for i, e in ALL.items() if i.startswith("msswift-")}
SWIFT_HEADERS = {
    # id: (path, commit, header line, the header's figure, s/it)
    "msswift-2512-h20-qwen3-14b-fp8-blockwise-tp4-8g":
        ("examples/megatron/fp8/benchmark.sh", "891a9ab3d437858d72860eb2cf7a397b66183c48", 2, "'# FP8: 8 * 58GiB 8s/it'", 8.0),
    "msswift-2512-h20-qwen3-14b-bf16-tp4-8g":
        ("examples/megatron/fp8/benchmark.sh", "891a9ab3d437858d72860eb2cf7a397b66183c48", 3, "'# BF16: 8 * 52GiB 13s/it'", 13.0),
    "msswift-2508-a100-qwen25-7b-full-packed32k-tp4-4g":
        ("examples/megatron/long_text.sh", "3bbc7fe43e6766561df1bff8295862e67a9c1cd8", 3,
         "'# GPU Memory: 4 * 50GB, Training Speed 23s/it'", 23.0),
}


def test_file_is_loaded_whole() -> None:
    assert_file_loaded_whole(st, st.TRAIN_DATA, DATA, ALL, 16, set())
    assert set(ALL) == set(ROWS) | set(SWIFT_HEADERS) and len(ROWS) == 13
    assert {e["kind"] for e in ROWS.values()} == {"sft_lora"} and {e["kind"] for e in SWIFT.values()} == {"sft_full"}
    assert sorted((e["model"], e["gpus"]) for e in ROWS.values()) == sorted(
        (model, gpus) for model, (_, _, rates, _, _) in TABLES.items() for gpus in rates)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_the_table_and_its_step_is_the_samples_a_step_over_the_rate(row_id: str) -> None:
    e = ROWS[row_id]
    readme, line, rates, micro, steps = TABLES[e["model"]]
    src = e["source"]
    assert (src["repo"], src["path"], src["commit"], src["line"]) == ("NVIDIA/dgxc-benchmarking", readme, DGXC_COMMIT, line)
    rate = rates[e["gpus"]]
    b, m = e["batch"], e["measured"]
    assert m["also"]["train_samples_per_second"] == rate and f"{rate}" in e["quote"]
    assert (b["micro_batch_size"], b["grad_accum"], b["seq_len"], b["packed"]) == (micro, 4, 2048, True)
    assert b["global_batch_size"] == micro * 4 * e["gpus"] == m["also"]["samples_per_step"]
    assert m["metric"] == "step_s" and m["value"] == pytest.approx(b["global_batch_size"] / rate, abs=1e-4)
    assert m["also"]["max_steps"] == steps and e["nodes"] * 8 == e["gpus"]


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_is_not_representable_for_its_timed_evaluation_and_records_the_rule(row_id: str) -> None:
    e = ROWS[row_id]
    assert "evaluation_strategy" in e["card_cannot_state"] and "l.2297-2298" in e["card_cannot_state"]
    with pytest.raises(st.Unmapped) as info:
        st.map_train(e)
    assert info.value.status == "not_representable"
    assert e["note"].startswith("FIRST CONTACT (scored 2026-12-05 before any model change for them)")
    match = FIRST_CONTACT.search(e["note"])
    assert match and len(FIRST_CONTACT.findall(e["note"])) == 1
    (row,) = st.train_rows([e], [])
    assert row.status == "not_representable" and row.trainfit_s is None
    assert row.rule_s == pytest.approx(float(match.group(2)), abs=0.006)
    assert row.published_s == pytest.approx(float(match.group(3)), abs=0.006)


def test_the_step_falls_with_gpus_at_a_fixed_work_a_gpu() -> None:
    """Weak scaling: the same sequences a GPU a step at every size, so a time that falls as GPUs are added is not the
    step's; the 70B step's excess over its 256-GPU time shrinks about as 1 / GPUs (a fixed evaluation spread)."""
    llama = {e["gpus"]: e["measured"]["value"] for e in ROWS.values() if "70b" in e["id"]}
    excess = {g: llama[g] - llama[256] for g in (8, 16, 32)}
    assert excess[8] > 100 and excess[16] / excess[8] == pytest.approx(0.5, abs=0.12)
    assert excess[32] / excess[16] == pytest.approx(0.5, abs=0.12)


def test_the_card_without_the_evaluation_maps_to_the_recipe() -> None:
    """What the card would state for the training steps alone (the notes' unscored 'for the record' figure): FSDP1 on
    the HF Trainer, fp32 frozen weights gathered in bf16, LoRA r 8 on every linear, full checkpointing, flash attention."""
    e = dict(ROWS["dgxc-hf-llama2-70b-lora-h100-256g"])
    e.pop("card_cannot_state")
    card, _ = st.map_train(e)
    st.validate(card)
    par = card["parallel"]
    assert (par["strategy"], par["fsdp_version"]) == ("fsdp", "fsdp1") and card["hardware"]["nodes"] == 32
    assert card["lora"]["rank"] == 8 and len(card["lora"]["targets"]) == 7 and card["attention"] == "flash"
    assert par["fsdp_adapter_units"] is True  # transformers 4.40.0 (hf_trainer_wraps_adapters)
    assert card["batch"] == {"micro_batch_size": 8, "seq_len": 2048, "grad_accum": 4}
    assert "for the record, not scored" in e["note"].lower()


@pytest.mark.parametrize(("release", "units"), [("4.40.0", True), ("4.39.0", True), ("4.38.2", False), (None, False)])
def test_hf_trainer_lora_on_fsdp1_has_adapter_units_from_transformers_4_39(release: str | None, units: bool) -> None:
    """transformers 4.39.0 added Trainer._fsdp_qlora_plugin_updates, which hands a LoRA model on FSDP PEFT's
    fsdp_auto_wrap_policy (each lora_A / lora_B its own FSDP1 unit; transformers/trainer.py l.4418-4425 in 4.40.0,
    absent from 4.38.2): the card states parallel.fsdp_adapter_units for the release the entry cites, not otherwise."""
    e = {**ROWS["dgxc-hf-mistral-7b-lora-h100-8g"]}
    e.pop("card_cannot_state")
    if release is None:
        e.pop("software")
    else:
        e["software"] = {**e["software"], "value": {**e["software"]["value"], "transformers": release}}
    card, notes = st.map_train(e)
    st.validate(card)
    assert bool(card["parallel"].get("fsdp_adapter_units")) is units
    assert any("_fsdp_qlora_plugin_updates" in n for n in notes) is units
    assert st.hf_trainer_wraps_adapters(e) is units


def test_hf_trainer_full_fine_tuning_on_fsdp1_has_no_adapter_units() -> None:
    """The adapter units are the LoRA linears': an HF Trainer full fine-tuning row on FSDP1 (Liger-Kernel's, transformers
    4.43.3) keeps none."""
    liger = next(e for e in st.load_entries(st.TRAIN_DATA) if e["id"] == "liger-hf-llama3-8b-fsdp1-4xa100-b32-hf")
    assert st.hf_trainer_wraps_adapters(liger)
    card, _ = st.map_train(liger)
    assert "fsdp_adapter_units" not in card["parallel"]


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_records_the_adapter_unit_figure_after_first_contact(row_id: str) -> None:
    e = {**ROWS[row_id]}
    match = re.search(r"the card without it now plans (\d+\.\d\d) s \(was (\d+\.\d\d) s\)", e["checked"])
    assert match and float(match.group(1)) > float(match.group(2))
    e.pop("card_cannot_state")
    (row,) = st.train_rows([e], [])
    assert row.trainfit_s == pytest.approx(float(match.group(1)), abs=0.006)
    assert f"plans {match.group(2)} s" in ROWS[row_id]["note"]


@pytest.mark.parametrize("row_id", sorted(SWIFT_HEADERS))
def test_swift_row_cites_its_header_and_records_its_first_contact(row_id: str) -> None:
    """ms-swift's Megatron-SWIFT example scripts: the header comment gives GPUs, memory and the progress bar's s/it (one
    optimizer step); the note records the first-contact error, and the harness still gives it (no model change since)."""
    e = SWIFT[row_id]
    path, commit, line, header, s_per_it = SWIFT_HEADERS[row_id]
    src = e["source"]
    assert (src["repo"], src["path"], src["commit"], src["line"]) == ("modelscope/ms-swift", path, commit, line)
    assert header in e["quote"] and e["measured"] == {**e["measured"], "metric": "step_s", "value": s_per_it}
    assert e["note"].startswith("FIRST CONTACT (scored 2026-12-05 before any model change for them)")
    match = re.search(r"First-contact error: trainfit ([+-]\d+\.\d) % \((\d+\.\d+) s planned vs (\d+\.\d+) s published", e["note"])
    assert match and float(match.group(3)) == s_per_it
    (row,) = st.train_rows([e], [])
    assert row.status == "mapped" and row.trainfit_s == pytest.approx(float(match.group(2)), abs=0.0006)


@pytest.mark.parametrize("row_id", sorted(SWIFT_HEADERS))
def test_swift_card_is_the_script(row_id: str) -> None:
    """TP 4 with sequence parallel under the distributed optimizer (planned as ZeRO-1 over the data-parallel ranks), one
    packed row a micro-batch, the global batch over DP micro-batches; FP8 blockwise only on the FP8 run."""
    e = SWIFT[row_id]
    card, _ = st.map_train(e)
    st.validate(card)
    par, b = card["parallel"], card["batch"]
    assert (par["strategy"], par["tensor_parallel"], par["sequence_parallel"]) == ("zero1", 4, True)
    dp = e["gpus"] // 4
    assert b["micro_batch_size"] == 1 and b["grad_accum"] * dp == e["batch"]["global_batch_size"]
    assert b["seq_len"] == (32768 if "32k" in row_id else 8192) and card["attention"] == "flash"
    fp8 = "-fp8-" in row_id
    assert (card["precision"].get("compute") == "fp8") is fp8
    assert (card["precision"].get("fp8_recipe") == "blockwise") is fp8
    assert (card["precision"].get("optimizer_states") == "bf16") is ("h20" in row_id)
