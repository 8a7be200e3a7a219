"""benchmarks/step_times.py, xtuner's long-context speed benchmark (published_train_times_xtuner_long_context.json:
A100-80GB full fine-tuning at 8k-1M tokens with Ulysses sequence parallel): the file is picked up, every row's numbers
are its quote's, the page's TFLOPs / TGS ratio recomputed with xtuner's FLOP formula from the entry's model shape and
recompute setting matches the row (so the shape, checkpointing and sequence parallel degree are the ones that ran), and
the rows map to Ulysses context parallel cards with the config's accumulation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit
from trainfit.catalog.models import resolve_model

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_xtuner_long_context.json"

st = load_step_times("trainfit_bench_step_times_xtuner_long_context")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}
LABEL = {"8k": 8192, "32k": 32768, "128k": 131072, "256k": 262144, "1M": 1048576}


def test_file_is_loaded_with_every_row() -> None:
    assert DATA in st.data_files(st.TRAIN_DATA)
    loaded = {e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == DATA.name}
    assert loaded == set(ROWS) and len(ROWS) == 13


def _shape(e: dict) -> tuple[int, int, int, int]:
    """(hidden, intermediate, layers, vocab) of the entry's model."""
    if e["model_config"]:
        c = e["model_config"]
        return c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    spec = resolve_model(e["model"])
    return spec.hidden_size, spec.intermediate_size, spec.num_layers, spec.vocab_size


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_is_its_quote_and_its_tflops_match_xtuners_formula(row_id: str) -> None:
    e = ROWS[row_id]
    cells = [c.strip(" -`") for c in e["quote"].split("/")]
    gpus, label, tgs, tflops, config = int(cells[1]), cells[2], float(cells[3]), float(cells[4]), cells[5]
    sp = e["parallel"]["sequence_parallel_ulysses"]
    assert (e["gpus"], e["batch"]["seq_len"], e["measured"]["value"]) == (gpus, LABEL[label], tgs)
    assert e["measured"]["also"]["tflops_per_gpu"] == tflops
    assert config.endswith(f"_{label.lower() if label != '1M' else '1M'}_sp{sp}.py")
    assert e["batch"]["grad_accum"] == sp  # the configs scale accumulative_counts by the SP degree
    # xtuner ThroughputHook (xtuner/engine/hooks/throughput_hook.py): per local token and layer 8h^2 (q/k/v/o as MHA)
    # + 2*s*h (causal attention over the whole packed row) + 6*I*h (gated MLP), x (3 + 1 recompute), + 6*h*V head
    h, inter, layers, vocab = _shape(e)
    s = e["batch"]["seq_len"]
    recompute = 1 if e["activation_checkpointing"] == "full" else 0
    per_token = (3 + recompute) * layers * (8 * h * h + 2 * s * h + 6 * inter * h) + 6 * h * vocab
    assert per_token == pytest.approx(tflops * 1e12 / tgs, rel=0.012)


def test_rows_map_to_ulysses_zero3_cards_with_the_configs_accumulation() -> None:
    card, notes = st.map_train(ROWS["xtuner-bench-a100-llama2-7b-1m-sp16-32g"])
    par = card["parallel"]
    assert (par["context_parallel"], par["context_parallel_kind"]) == (16, "ulysses")
    assert par["strategy"] == "zero3" and par["gradient_checkpointing"] is True
    assert card["attention"] == "flash" and card["hardware"] == {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 4}
    assert card["batch"] == {"micro_batch_size": 1, "seq_len": 1048576, "grad_accum": 16}
    assert any("context_parallel_kind ulysses" in n for n in notes)


def test_step_seconds_count_every_sequence_of_the_step() -> None:
    # 128k on 8 GPUs at SP 8: one Ulysses group, 8 accumulation steps -> 8 sequences of 131072 tokens per step
    rows = {r.id: r for r in st.train_rows([ROWS["xtuner-bench-a100-llama2-7b-128k-sp8-8g"]], [])}
    row = rows["xtuner-bench-a100-llama2-7b-128k-sp8-8g"]
    assert row.status == "mapped"
    assert row.published_s == pytest.approx(8 * 131072 / (948.6 * 8))
