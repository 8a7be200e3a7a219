"""benchmarks/step_times.py, fms-acceleration's A100-80GB reference benchmarks (foundation-model-stack/fms-acceleration
scripts/benchmarks/refs/a100_80gb.csv @24bdadb2, published_train_times_fms_acceleration_a100.json; and its Liger run,
a100_80gb_liger.csv @733992ae, published_train_times_fms_acceleration_liger_a100.json): the files are picked up with
every row, each row cites its CSV line and its figure is that line's train_runtime over the benchmark's 100 steps, the
batch is the line's per-device batch of packed 4,096-token chunks, the Liger rows state the chunked (liger) loss, and
every row maps to a card that validates (one GPU without FSDP, more on FSDP1, the HF Trainer's foreach AdamW,
reentrant checkpointing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import assert_fms_hf_tuning_card, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_fms_acceleration_a100.json"
LIGER = REPO / "benchmarks" / "data" / "published_train_times_fms_acceleration_liger_a100.json"
COMMIT = "24bdadb228e2d55bc0c69deec034b86a73da6917"
LIGER_COMMIT = "733992ae7355567805de92eacf4a9973c8fd4164"
CSV_HEADER = ("bf16,epoch,fp16,framework_config,learning_rate,lora_alpha,lora_dropout,mem_nvidia_mem_reserved,"
              "mem_peak_torch_mem_alloc_in_bytes,mem_torch_mem_alloc_in_bytes,model_name_or_path,num_gpus,peft_method,"
              "per_device_train_batch_size,r,target_modules,torch_dtype,train_loss,train_runtime,"
              "train_samples_per_second,train_steps_per_second,train_tokens_per_second").split(",")
"""The CSV's header line at the commit (l.1)."""

st = load_step_times("trainfit_bench_step_times_fms_acceleration_a100")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}
LIGER_ROWS = {e["id"]: {**e, "_file": LIGER.name} for e in json.loads(LIGER.read_text())}
"""The Liger benchmark's rows (scripts/benchmarks/refs/a100_80gb_liger.csv, the same 22 columns as CSV_HEADER)."""
ALL = {**ROWS, **LIGER_ROWS}


def _fields(e: dict) -> dict[str, str]:
    return dict(zip(CSV_HEADER, e["quote"].split(","), strict=True))


def test_files_are_loaded_with_every_row() -> None:
    assert DATA in st.data_files(st.TRAIN_DATA) and LIGER in st.data_files(st.TRAIN_DATA)
    loaded = [e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] in (DATA.name, LIGER.name)]
    assert sorted(loaded) == sorted(ALL) and (len(ROWS), len(LIGER_ROWS)) == (29, 11)


@pytest.mark.parametrize("row_id", sorted(ALL))
def test_row_cites_its_csv_line_and_its_figure_is_the_lines(row_id: str) -> None:
    e = ALL[row_id]
    src = e["source"]
    assert (src["repo"], src["path"], src["commit"]) == (
        ("foundation-model-stack/fms-acceleration", "scripts/benchmarks/refs/a100_80gb.csv", COMMIT)
        if row_id in ROWS else
        ("foundation-model-stack/fms-acceleration", "scripts/benchmarks/refs/a100_80gb_liger.csv", LIGER_COMMIT))
    assert isinstance(src["line"], int) and src["line"] > 1
    f = _fields(e)
    # max_steps 100 (scripts/benchmarks/defaults.yaml): one optimizer step is train_runtime / 100
    assert e["measured"] == {**e["measured"], "metric": "step_s"}
    assert e["measured"]["value"] == pytest.approx(float(f["train_runtime"]) / 100, rel=1e-6)
    # the samples rate is 100 steps x the effective batch over the runtime: the batch the row states
    effective = int(f["per_device_train_batch_size"]) * int(f["num_gpus"])
    assert float(f["train_samples_per_second"]) == pytest.approx(100 * effective / float(f["train_runtime"]), rel=0.01)
    assert (e["batch"]["micro_batch_size"], e["gpus"], e["batch"]["global_batch_size"]) == (
        int(f["per_device_train_batch_size"]), int(f["num_gpus"]), effective)
    # packed 4,096-token chunks: the per-device token rate x runtime / 100 steps is one device's batch of chunks
    tokens = float(f["train_tokens_per_second"]) * float(f["train_runtime"]) / 100
    assert tokens == pytest.approx(e["batch"]["micro_batch_size"] * 4096, rel=0.01)
    assert e["model"] == f["model_name_or_path"]
    assert e["kind"] == {"baseline-peft-bnb": "sft_qlora"}.get(
        f["framework_config"], "sft_lora" if f["peft_method"] == "lora" else "sft_full")
    assert bool(e.get("fused_kernels")) == f["framework_config"].startswith("foak-fast-kernels")
    # fast_loss fused_ce_liger: Liger's fused linear cross-entropy, the card's chunked loss with kernel liger
    liger = f["framework_config"] == "foak-fast-kernels-liger"
    assert (bool(e.get("loss_chunked")), e.get("loss_kernel")) == ((True, "liger") if liger else (False, None))


@pytest.mark.parametrize("row_id", sorted(ALL))
def test_row_maps_to_a_card_that_validates(row_id: str) -> None:
    e = ALL[row_id]
    card, notes = st.map_train(e)
    st.validate(card)
    assert_fms_hf_tuning_card(e, card)
    assert card["parallel"]["gradient_checkpointing"] is not False
    if row_id in LIGER_ROWS:
        assert card["loss"] == {"chunked": True, "kernel": "liger"}


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_mixtral_rows_run_transformers_448s_expert_loop(row_id: str) -> None:
    """transformers 4.48.1 (the run's pin) loops over every Mixtral expert by index (modeling_mixtral.py l.135-147 in
    its wheel): the Mixtral cards state moe_experts loop_all; the dense cards state no expert setting."""
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    if "Mixtral" in e["model"]:
        assert card["parallel"]["moe_experts"] == "loop_all" and "loop_all" in e["note"]
    else:
        assert "moe_experts" not in card["parallel"]


def test_mixtral_qlora_row_pays_every_experts_dequantisation() -> None:
    """bitsandbytes 0.43.3 (the run's pin) dequantises each expert's whole Linear4bit weight in every call and in its
    backward (bitsandbytes/autograd/_functions.py l.509, l.540 in its wheel; compute.expert_loop): the 2-GPU QLoRA b4
    row's forward carries the 45.1e9 expert weights' dequantisation on top of the LoRA twin's: by hand, 2.53125 B per
    weight (0.5 packed + 1/32 absmax read, 2 bf16 written) x (45,097,156,608 expert + 1,342,177,280 attention weights)
    = 117,549,563,904 B at the A100's rate (0.06 s), where it carried only the attention's
    before (2026-12-04: 3.967 s planned against the LoRA twin's 3.961 s; then 4.140 s, published 5.185 s). Since the
    hidden collectives' HBM contention (2026-12-05) the LoRA twin's bf16 gathers slow its compute more than QLoRA's
    packed ones (exposed communication 0.379 s against 0.100 s): 4.205 s against 4.119 s. Since FSDP1's rate limiter
    leaves the layer gathers unhidden with PEFT's adapter units (compute.collectives.rate_limiter_exposes_layer_gathers,
    2026-12-05) the LoRA twin's 0.379 s of bf16 gathers are exposed in full (4.341 s against 4.264 s; published
    5.185 s for QLoRA, 5.214 s for the LoRA twin): the dequantisation is checked on the step less its exposed
    communication, 4.164 s against 3.963 s."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import default_rates

    planned = {}
    for kind in ("lora", "qlora"):
        e = ROWS[f"fmsacc-a100-mixtral8x7b-instruct-{kind}-2g-b4"]
        card, _ = st.map_train(e)
        planned[kind] = st.plan_card(card)
    fwd = {k: p.phase_terms["forward"]["memory_bound"] for k, p in planned.items()}
    rate = default_rates(resolve_gpu("a100-80gb")).hbm_bytes_per_s
    assert fwd["qlora"] - fwd["lora"] == pytest.approx(117_549_563_904 / rate, rel=0.05)
    compute = {k: p.step_s - p.parts.get("communication", 0.0) for k, p in planned.items()}
    assert compute["qlora"] > compute["lora"] + 0.05


@pytest.mark.parametrize("row_id", sorted(r for r in ALL if ALL[r].get("fused_kernels")))
def test_fused_kernel_rows_are_worded_by_framework(row_id: str) -> None:
    """FOAK's Triton kernels are fms-acceleration's, not Megatron-Core's; the foak-fast-kernels rows (not the Liger
    ones, whose loss is the card's liger) state that fast_loss has no matching loss setting."""
    _, notes = st.map_train(ALL[row_id])
    text = " ".join(notes)
    assert "Megatron-Core" not in text and "fused-ops-and-kernels plugin" in text
    assert ("FastForCausalLMLoss" in text) is (row_id in ROWS)
