"""benchmarks/step_times.py, the 13 Liger-Kernel Hugging Face Trainer rows of
published_train_times_firstcontact_2612e.json (examples/huggingface: FSDP1 on 4 A100, padded Alpaca micro-batches of
24-64 x <= 512 tokens under sdpa, transformers 4.43.3). What their cards carry from the code at the run's versions:

* the padding mask (TRL's completion-only collator pads each micro-batch; transformers 4.43.3 hands SDPA the 4-D mask,
  so the memory-efficient kernel runs every key block): ``batch.padding`` mask;
* the transformers pin of the example's requirements.txt: ``software.transformers`` 4.43.3;
* accelerate's FSDP upcast of the bf16-loaded FlatParameters under mixed precision (Llama and Qwen2 rows: the example
  loads in bf16, runs --bf16 under FSDP1 and pins no accelerate, and their peak-memory charts match fp32 weights):
  ``precision.weights`` fp32, AdamW moments in the weights' dtype; the Gemma rows keep bf16 states, because their own
  memory chart reads below what fp32 states alone would take (32,569 MiB a GPU against 25,849 MiB read off the chart for
  the Liger bs 32 bar: ``measured.also.peak_memory_chart_mib``);
* Liger applied after the model is built (Llama and Qwen2 at their commits): its class swaps miss the built layers,
  so no fused RMSNorm / SwiGLU (no ``compile``), only the fused linear cross-entropy (``loss.chunked``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612e.json"
st = load_step_times("trainfit_bench_step_times_liger_hf_trainer")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text()) if e["id"].startswith("liger-hf-")}
ACCELERATE_V033 = "28a3b985f0ff91ad6419d7af8b614b0d174c6a0e"


def _state_mib(e: dict, bytes_per_param: int) -> float:
    """Weights + gradients + two AdamW moments of the entry's model (the card's model spec), ``bytes_per_param`` in
    all, sharded over the entry's FSDP ranks, in MiB."""
    from trainfit.memory.weights import total_params
    from trainfit.plan.resolve import model_spec_of
    from trainfit.spec.card import load_card_dict

    card, _ = st.map_train(e)
    return total_params(model_spec_of(load_card_dict(card))) * bytes_per_param / e["gpus"] / 2**20


def test_thirteen_rows() -> None:
    assert len(ROWS) == 13


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_card_carries_the_padding_mask_and_the_transformers_pin(row_id: str) -> None:
    e = ROWS[row_id]
    card, notes = st.map_train(e)
    assert card["batch"]["padding"] == "mask"
    assert card["software"]["transformers"] == "4.43.3"
    assert e["source"]["commit"] in e["software"]["source"] and "requirements.txt" in e["software"]["source"]
    assert any(n.startswith("batch.padding mask") for n in notes)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_fp32_weights_as_the_code_at_the_runs_commit_reads(row_id: str) -> None:
    e = ROWS[row_id]
    card, notes = st.map_train(e)
    if "-gemma-" in row_id:
        # the run's chart: fp32 shards + grads + two moments of the model's parameters over 4 ranks exceed the
        # smallest peak it reads (the Liger bs 32 bar); the same states under bf16 sit below every bar
        fp32_states_mib, bf16_states_mib = _state_mib(e, 16), _state_mib(e, 8)
        charts = [r["measured"]["also"]["peak_memory_chart_mib"] for k, r in ROWS.items() if "-gemma-" in k]
        assert len(charts) == 4 and fp32_states_mib > min(charts)
        assert bf16_states_mib < e["measured"]["also"]["peak_memory_chart_mib"]
        assert "gemma_7b_mem.png" in e["measured"]["also"]["peak_memory_chart_reading"]
        assert "weights" not in card["precision"] and card["precision"]["optimizer_states"] == "bf16"
        assert "gemma_7b_mem.png" in e["precision"]["optimizer_states_source"]
        return
    assert card["precision"]["weights"] == "fp32" and "optimizer_states" not in card["precision"]
    assert ACCELERATE_V033 in e["precision"]["weights_source"]
    assert any(n.startswith("weights fp32 (precision.weights)") for n in notes)


@pytest.mark.parametrize("row_id", sorted(r for r in ROWS if r.endswith("-liger")))
def test_liger_fused_kernels_only_where_patched_before_the_model_is_built(row_id: str) -> None:
    card, _ = st.map_train(ROWS[row_id])
    assert card["loss"] == {"chunked": True, "kernel": "liger"}
    # AutoLigerKernelForCausalLM (Gemma) patches before instantiation; Llama / Qwen2 patch after from_pretrained
    assert bool(card["parallel"].get("compile")) == ("-gemma-" in row_id)


def test_entry_weights_reach_the_card_and_move_the_plan() -> None:
    """``map_train`` reads an entry's ``precision.weights``: fp32 parameter shards double the AdamW step's bytes."""
    e = ROWS["liger-hf-qwen2-7b-fsdp1-4xa100-b32-liger"]
    card, _ = st.map_train(e)
    fp32 = st.plan_card(card)
    bf16_entry = {**e, "precision": {k: v for k, v in e["precision"].items() if not k.startswith("weights")}}
    bf16 = st.plan_card(st.map_train(bf16_entry)[0])
    assert fp32.parts["optimizer_step"] > 1.5 * bf16.parts["optimizer_step"]
    assert fp32.step_s > bf16.step_s


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_the_first_contact_bf16_reading_is_marked_superseded(row_id: str) -> None:
    note = ROWS[row_id]["note"]
    word = "KEPT" if "-gemma-" in row_id else "SUPERSEDED"
    assert f"(no fp32 master copy) [{word} " in note
