"""benchmarks/step_times.py, published fine-tuning times on inference-class and consumer-class cards
(published_train_times_consumer_gpus.json): Phil Schmid's QLoRA table on NVIDIA L4 (philschmid/
deep-learning-pytorch-huggingface training/fine-tune-llms-in-2025.ipynb @59b37973, l.314-319) and the ROCm blog's
Llama-2-7B LoRA / full runs on one MI300X (ROCm/rocm-blogs blogs/artificial-intelligence/llama-lora/README.md
@c9a603f2, l.273 and l.371). The file is picked up with every row; each row's figure is its quoted time over its quoted
steps; the L4 rows' batches agree with one packed set of 1,024-token chunks; every L4 row maps to a card that
validates (one GPU single, more on ZeRO-3, QLoRA r16 all-linear with the trained embedding and head, non-reentrant
checkpointing, liger loss where the table says Liger); the MI300X fp32 rows are recorded and skipped, with their
reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_consumer_gpus.json"
PS_COMMIT = "59b37973074de90004d10e5ff636f98160c9743a"
RB_COMMIT = "c9a603f2d10700ba973a4a4150374c6979a8f9d2"
PACKED_CHUNKS = 5408
"""1,024-token chunks in one epoch of the 10,000 packed samples: 1352 steps x 2 x 2 (the table's l.315)."""

st = load_step_times("trainfit_bench_step_times_consumer_gpus")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}
L4 = sorted(i for i in ROWS if ROWS[i]["gpu"] == "l4")
MI300X = sorted(i for i in ROWS if ROWS[i]["gpu"] == "mi300x")


def _cells(e: dict) -> list[str]:
    return [c.strip() for c in e["quote"].strip("|").split("|")]


def test_file_is_loaded_with_every_row() -> None:
    assert DATA in st.data_files(st.TRAIN_DATA)
    loaded = [e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == DATA.name]
    assert sorted(loaded) == sorted(ROWS) and (len(L4), len(MI300X)) == (6, 2)


@pytest.mark.parametrize("row_id", L4)
def test_l4_row_is_its_table_line(row_id: str) -> None:
    e = ROWS[row_id]
    assert (e["source"]["repo"], e["source"]["commit"]) == ("philschmid/deep-learning-pytorch-huggingface", PS_COMMIT)
    assert 314 <= e["source"]["line"] <= 319
    model, samples, hw, method, seq, mbs, ga, packing, fa, liger, steps, minutes = _cells(e)
    gpus = int(re.match(r"(\d+)x L4", hw).group(1))
    assert (model, samples, method, seq) == ("Llama-3.1-8B", "10,000", "Q-LoRA", "1024")
    assert (e["gpus"], e["batch"]["micro_batch_size"], e["batch"]["grad_accum"]) == (gpus, int(mbs), int(ga))
    assert e["batch"]["global_batch_size"] == gpus * int(mbs) * int(ga)
    assert e["measured"]["value"] == pytest.approx(int(minutes.strip("~ min")) * 60 / int(steps), rel=1e-4)
    assert e["batch"]["packed"] == (packing == "✅") and (e["attention"] == "flash") == (fa == "✅")
    assert (e.get("loss_kernel") == "liger") == (liger == "✅")
    if e["batch"]["packed"]:
        # one packed set: every row's steps x its global batch is the same chunk count (the last partial step dropped)
        assert 0 <= PACKED_CHUNKS - int(steps) * e["batch"]["global_batch_size"] < e["batch"]["global_batch_size"]
        assert e["batch"]["seq_len"] == 1024
    else:
        # unpacked batch 1: every sample one step's micro-batch; the mean length is the packed tokens over the samples
        assert int(steps) * e["batch"]["global_batch_size"] == 10000
        assert e["batch"]["seq_len"] == round(PACKED_CHUNKS * 1024 / 10000)


@pytest.mark.parametrize("row_id", L4)
def test_l4_row_maps_to_a_card_that_validates(row_id: str) -> None:
    e = ROWS[row_id]
    card, notes = st.map_train(e)
    st.validate(card)
    assert card["parallel"]["strategy"] == ("single" if e["gpus"] == 1 else "zero3")
    assert card["scope"] == "qlora" and card["lora"]["rank"] == 16 and card["lora"]["targets"] == "all-linear"
    assert card["lora"]["modules_to_save"] == ["lm_head", "embed_tokens"]
    assert card["loop"] == {"checkpoint_reentrant": False}
    assert card.get("loss", {}).get("kernel") == e.get("loss_kernel")


@pytest.mark.parametrize("row_id", MI300X)
def test_mi300x_row_is_its_trainoutput_and_is_skipped_as_fp32(row_id: str) -> None:
    e = ROWS[row_id]
    assert (e["source"]["repo"], e["source"]["commit"]) == ("ROCm/rocm-blogs", RB_COMMIT)
    runtime = float(re.search(r"'train_runtime': ([0-9.]+)", e["quote"]).group(1))
    flos = float(re.search(r"'total_flos': ([0-9.e+]+)", e["quote"]).group(1))
    assert e["measured"]["value"] == pytest.approx(runtime / 250, rel=1e-6)
    # seq_len from total_flos: 6 x padded tokens x non-embedding parameters (+ the adapter's) over 1,000 samples
    params = 6_738_415_616 - 32_000 * 4_096 + (4_194_304 if e["kind"] == "sft_lora" else 0)
    assert flos / (6 * params * 1000) == pytest.approx(e["batch"]["seq_len"], abs=0.5)
    assert e["precision"]["compute"] == "fp32"
    with pytest.raises(st.Unmapped) as u:
        st.map_train(e)
    assert (u.value.status, u.value.reasons) == ("skipped", ["fp32 compute not modelled for hf-trainer"])
