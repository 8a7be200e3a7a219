"""benchmarks/step_times.py, first-contact rows of published_train_times_firstcontact_2612.json: every line of
fms-acceleration's GraniteCausalLM reference benchmark (foundation-model-stack/fms-acceleration
scripts/benchmarks/refs/a100_80gb_granite.csv @fc78b55b, ibm/PowerLM-3b on one or two A100-80GB). The file is picked up
with every row, each row cites its CSV line and its figure is that line's train_runtime over the benchmark's 100 steps,
the batch is the line's per-device batch of packed 4,096-token chunks, the inline model is the paper's PowerLM-3B shape,
and every row maps to a card that validates (one GPU without FSDP, two on FSDP1, foreach AdamW, reentrant
checkpointing, the QLoRA preparation each framework_config runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import assert_fms_hf_tuning_card, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612.json"
COMMIT = "fc78b55b65446fbade0306ac2e619a6182bfea47"
CSV_HEADER = ("bf16,epoch,fp16,framework_config,learning_rate,lora_alpha,lora_dropout,mem_nvidia_mem_reserved,"
              "mem_peak_torch_mem_alloc_in_bytes,mem_torch_mem_alloc_in_bytes,model_name_or_path,num_gpus,peft_method,"
              "per_device_train_batch_size,r,target_modules,torch_dtype,train_loss,train_runtime,"
              "train_samples_per_second,train_steps_per_second,train_tokens_per_second").split(",")
"""The CSV's header line at the commit (l.1)."""

st = load_step_times("trainfit_bench_step_times_firstcontact_2612")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}
QLORA = {"baseline-peft-bnb", "accelerated-peft-bnb", "accelerated-peft-bnb-foak"}


def _fields(e: dict) -> dict[str, str]:
    return dict(zip(CSV_HEADER, e["quote"].split(","), strict=True))


def test_file_is_loaded_with_every_csv_line() -> None:
    assert DATA in st.data_files(st.TRAIN_DATA)
    loaded = [e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == DATA.name]
    assert sorted(loaded) == sorted(ROWS) and len(ROWS) == 28
    # lines 2-29 of the CSV, each once: the whole table, no row picked by its score
    assert sorted(e["source"]["line"] for e in ROWS.values()) == list(range(2, 30))


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_its_csv_line_and_its_figure_is_the_lines(row_id: str) -> None:
    e = ROWS[row_id]
    assert (e["source"]["repo"], e["source"]["path"], e["source"]["commit"]) == (
        "foundation-model-stack/fms-acceleration", "scripts/benchmarks/refs/a100_80gb_granite.csv", COMMIT)
    f = _fields(e)
    # max_steps 100 (scripts/benchmarks/defaults.yaml): one optimizer step is train_runtime / 100
    assert e["measured"]["metric"] == "step_s"
    assert e["measured"]["value"] == pytest.approx(float(f["train_runtime"]) / 100, rel=1e-6)
    effective = int(f["per_device_train_batch_size"]) * int(f["num_gpus"])
    assert float(f["train_samples_per_second"]) == pytest.approx(100 * effective / float(f["train_runtime"]), rel=0.01)
    assert (e["batch"]["micro_batch_size"], e["gpus"], e["batch"]["global_batch_size"]) == (
        int(f["per_device_train_batch_size"]), int(f["num_gpus"]), effective)
    # packed 4,096-token chunks: the per-device token rate x runtime / 100 steps is one device's batch of chunks
    tokens = float(f["train_tokens_per_second"]) * float(f["train_runtime"]) / 100
    assert tokens == pytest.approx(e["batch"]["micro_batch_size"] * 4096, rel=0.01)
    assert e["model"] == f["model_name_or_path"] == "ibm/PowerLM-3b"
    fc = f["framework_config"]
    assert e["kind"] == ("sft_qlora" if fc in QLORA else "sft_lora" if f["peft_method"] == "lora" else "sft_full")
    assert bool(e.get("fused_kernels")) == (fc in ("foak-fast-kernels", "accelerated-peft-bnb-foak"))
    # the QLoRA preparation: TRL's casts on the single-GPU baseline only, the plugin's cast-free one otherwise
    want = {"baseline-peft-bnb": "trl" if e["gpus"] == 1 else None}.get(
        fc, "none" if fc.startswith("accelerated-peft-bnb") else None)
    assert (e.get("prepare_kbit") or {}).get("value") == want
    assert "AdamW foreach:" in e["note"]


def test_inline_model_is_the_papers_powerlm_3b() -> None:
    """arXiv 2408.13359 Table 4: PowerLM-3B, embedding 2304, 40 layers, 36 heads of 64, 36 KV heads, MLP 9216,
    3.5B parameters: the inline config (vocabulary 49,152, tied) resolves to that count."""
    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.memory.weights import total_params

    e = next(iter(ROWS.values()))
    assert all(r["model_config"] == e["model_config"] for r in ROWS.values())
    model, _ = st.resolve_model(e["model"], e["model_config"], 4096)
    spec = spec_from_hf_config(model["config"], name=model["id"], source="arXiv 2408.13359 Table 4")
    assert (spec.hidden_size, spec.num_layers, spec.num_attention_heads, spec.num_kv_heads) == (2304, 40, 36, 36)
    assert (spec.head_dim, spec.intermediate_size, spec.family) == (64, 9216, "granite") and spec.scalar_multipliers
    assert spec.tie_word_embeddings and round(total_params(spec) / 1e8) == 35


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_maps_to_a_card_that_validates(row_id: str) -> None:
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    st.validate(card)
    assert_fms_hf_tuning_card(e, card)


def test_two_gpu_adapter_rows_state_peft_adapter_units_unless_foak_takes_them_out_of_fsdp() -> None:
    """fms-hf-tuning wraps each lora_A / lora_B as an FSDP1 unit (parallel.fsdp_adapter_units); fms-acceleration's
    fused-ops-and-kernels plugin ignores a quantized model's adapters in FSDP (accelerated-peft-bnb-foak)."""
    for rid, e in ROWS.items():
        card, notes = st.map_train(e)
        units = card["parallel"].get("fsdp_adapter_units", False)
        config = _fields(e)["framework_config"]
        expected = e["gpus"] > 1 and e["kind"] != "sft_full" and not (config in QLORA and "foak" in config)
        assert units is expected, rid
        if e["gpus"] > 1 and config == "accelerated-peft-bnb-foak":
            assert st.FMS_ADAPTERS_OUTSIDE_FSDP in notes
