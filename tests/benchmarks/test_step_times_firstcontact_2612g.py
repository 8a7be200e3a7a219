"""benchmarks/step_times.py, the out-of-sample rows of published_train_times_firstcontact_2612g.json:
Transformer Engine's Hugging Face Llama tutorial (Llama 2 7B / Llama 3 8B full fine-tuning on one H100, HF
baseline, TE TransformerLayer bf16 and FP8, two published runs), Colossal-AI's LLaMA-2 example README (7B,
Gemini, 32 A800), a ROCm blog's QLoRA of Llama-2-7B on one MI300X (fp32 activations: 4-bit GEMMs in fp32) and,
not representable, ms-swift 1.x's training-speed benchmark, TRL's QLoRA notebook on a T4 and axolotl's Colab
T4 and Llama 4 Scout QLoRA examples. Each row cites its source and quotes it, its note records the
first-contact error, and the step the row holds is the one its quote gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612g.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
SOURCES = {"NVIDIA/TransformerEngine": {"docs/examples/te_llama/tutorial_accelerate_hf_llama_with_te.ipynb"},
           "hpcaitech/ColossalAI": {"examples/language/llama2/README.md"},
           "modelscope/ms-swift": {"docs/source/LLM/Benchmark.md"},
           "huggingface/trl": {"examples/notebooks/sft_trl_lora_qlora.ipynb"},
           "ROCm/rocm-blogs": {"blogs/artificial-intelligence/llama-Qlora/README.md"},
           "axolotl-ai-cloud/axolotl": {"examples/colab-notebooks/colab-axolotl-example.ipynb",
                                        "examples/llama-4/README.md"}}

st = load_step_times("trainfit_bench_step_times_firstcontact_2612g")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
TE = sorted(i for i in ROWS if i.startswith("te-llama-tutorial-"))


def test_file_is_loaded_whole() -> None:
    assert DATA in st.data_files(st.TRAIN_DATA)
    loaded = [e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == DATA.name]
    assert sorted(loaded) == sorted(ROWS) and len(ROWS) == 18
    assert sum(bool(e.get("card_cannot_state")) for e in ROWS.values()) == 7


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_a_commit_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    assert e["source"]["path"] in SOURCES[e["source"]["repo"]] and HEX40.match(e["source"]["commit"])
    assert e["note"].startswith("FIRST CONTACT") and "PENDING" not in e["note"]
    if e.get("card_cannot_state"):
        assert "NOT REPRESENTABLE" in e["note"] and "First-contact error" not in e["note"]
    else:
        assert e["note"].count("First-contact error: trainfit ") == 1


@pytest.mark.parametrize("row_id", TE)
def test_te_tutorial_step_is_the_printed_milliseconds(row_id: str) -> None:
    # 'Average time taken per step: N milliseconds' (or the table's N): elapsed / 10 timed steps,
    # each of batch 8 x 256
    e = ROWS[row_id]
    ms = e["measured"]["also"]["ms_per_step"]
    assert f"| {ms} |" in e["quote"] or f"{ms} milliseconds" in e["quote"]
    assert e["measured"]["value"] == pytest.approx(ms / 1000)
    assert (e["batch"]["micro_batch_size"], e["batch"]["seq_len"], e["batch"]["grad_accum"]) == (8, 256, 1)
    assert e["gpu"] == "h100-sxm" and e["gpus"] == 1


@pytest.mark.parametrize("row_id", TE)
def test_te_tutorial_rows_map_to_their_kernels(row_id: str) -> None:
    e = ROWS[row_id]
    card, notes = st.map_train(e)
    st.validate(card)
    fp8, hf = row_id.endswith("-te-fp8"), row_id.endswith("-hf-bf16")
    assert card["precision"].get("compute", "bf16") == ("fp8" if fp8 else "bf16")  # bf16: the card's default
    if fp8:  # accelerate's FP8RecipeKwargs(backend='te') builds TE's DelayedScaling
        assert card["precision"]["fp8_recipe"] == "delayed"
    assert card["attention_kernel"] == ("fa2" if hf else "cudnn")
    assert card["parallel"]["compile"] is (not hf)  # TE's fused LayerNormLinear / LayerNormMLP: fused kernels
    # the 2024-03 run's AdamW had neither fused= nor foreach= (foreach on CUDA), the 2024-05 run's fused=True
    assert card["precision"]["optimizer_impl"] == ("foreach" if "-2403-" in row_id else "fused")


def test_colossalai_step_is_global_batch_over_samples_per_second() -> None:
    e = ROWS["colossalai-llama2-readme-2309-7b-gemini-32xa800-b16-s4096-gc"]
    assert e["batch"]["global_batch_size"] == 32 * 16 == e["gpus"] * e["batch"]["micro_batch_size"]
    assert e["measured"]["value"] == pytest.approx(512 / 24.26, abs=1e-5) and "24.26 samples/s" in e["quote"]
    card, _ = st.map_train(e)
    st.validate(card)
    assert card["parallel"]["strategy"] == "zero3" and card["hardware"]["nodes"] == 4


def test_rocm_qlora_tokens_come_from_total_flos_and_run_fp32() -> None:
    # the HF Trainer's total_flos = 6 x padded tokens x num_parameters(exclude_embeddings=True); this 4-bit
    # model counts its Params4bit at their packed numel: 3,373,535,232; 1,000 samples -> 428.8 padded tokens
    e = ROWS["rocmblog-2404-mi300x-llama2-7b-qlora-fp32-mb4"]
    also = e["measured"]["also"]
    tokens = also["total_flos"] / (6 * 3_373_535_232)
    assert round(tokens / 1000) == e["batch"]["seq_len"] == 429
    assert e["measured"]["value"] == pytest.approx(also["train_runtime_s"] / also["global_step"], abs=1e-6)
    card, _ = st.map_train(e)
    st.validate(card)
    # no autocast over an fp32 load: Linear4bit computes in its input's fp32 (spec.enums.Nf4ComputeDtype)
    assert card["precision"]["nf4_compute_dtype"] == "fp32" and card["scope"] == "qlora"
    assert card["batch"]["padding"] == "mask" and "prepare_kbit" not in card["lora"]


@pytest.mark.parametrize("row_id", sorted(i for i in ROWS if ROWS[i].get("card_cannot_state")))
def test_rows_without_published_sample_lengths_stay_not_representable(row_id: str) -> None:
    with pytest.raises(st.Unmapped) as got:
        st.map_train(ROWS[row_id])
    assert got.value.status == "not_representable"
    reason = got.value.reasons[0]
    assert ("lengths are not published" in reason) if not row_id.startswith("axolotl-") else (
        "no card field states" in reason)
