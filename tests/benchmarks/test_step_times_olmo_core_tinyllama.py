"""benchmarks/step_times.py, two pretraining throughput publications: allenai/OLMo-core's README table (H100,
OLMo 2 1B / 7B / 13B and a Llama-3-8B shape, bf16 and torchao float8; published_train_times_olmo_core.json) and
TinyLlama's README figure (A100-40G, 1.1B; published_train_times_tinyllama.json). The files are picked up, every
row's figure is its quote's, the FFN widths are OLMo-core's ``llama_like`` rule applied to the builders' arguments,
and the rows map to cards with the scripts' accumulation, precision, attention and optimizer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
OLMO = REPO / "benchmarks" / "data" / "published_train_times_olmo_core.json"
TINY = REPO / "benchmarks" / "data" / "published_train_times_tinyllama.json"

st = load_step_times("trainfit_bench_step_times_olmo_core_tinyllama")
OLMO_ROWS = {e["id"]: {**e, "_file": OLMO.name} for e in json.loads(OLMO.read_text())}
TINY_ROWS = {e["id"]: {**e, "_file": TINY.name} for e in json.loads(TINY.read_text())}


def test_files_are_loaded_with_every_row() -> None:
    files = st.data_files(st.TRAIN_DATA)
    assert OLMO in files and TINY in files
    loaded = {e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] in (OLMO.name, TINY.name)}
    assert loaded == set(OLMO_ROWS) | set(TINY_ROWS) and (len(OLMO_ROWS), len(TINY_ROWS)) == (8, 1)


@pytest.mark.parametrize("row_id", sorted(OLMO_ROWS))
def test_olmo_row_is_its_quote(row_id: str) -> None:
    e = OLMO_ROWS[row_id]
    (tps,) = re.findall(r"\| ([\d,]+) TPS \|", e["quote"])
    assert e["measured"] == {"metric": "tokens_per_s_per_gpu", "value": int(tps.replace(",", ""))}
    assert ("float8_config.enabled=true" in e["quote"]) == (e["precision"]["compute"] == "fp8")
    assert e["batch"]["seq_len"] == 4096 and "| 4096 |" in e["quote"]


def _llama_like_ffn(d_model: int, multiplier: float | None, multiple_of: int) -> int:
    """allenai/OLMo-core src/olmo_core/nn/transformer/config.py llama_like @4f2c8ef59f92: int(8 d / 3), times the
    multiplier (int), rounded up to a multiple."""
    hidden = int(8 * d_model / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


@pytest.mark.parametrize("row_id", sorted(OLMO_ROWS))
def test_olmo_ffn_width_is_llama_likes_rule(row_id: str) -> None:
    c = OLMO_ROWS[row_id]["model_config"]
    llama3 = "llama3-8b" in row_id  # llama3_8B: hidden_size_multiplier 1.3, hidden_size_multiple_of 1024
    expected = _llama_like_ffn(c["hidden_size"], 1.3 if llama3 else None, 1024 if llama3 else 256)
    assert c["intermediate_size"] == expected
    assert c["vocab_size"] == 100352  # dolma2's 100278 padded to a multiple of 128


@pytest.mark.parametrize("row_id", sorted(OLMO_ROWS))
def test_olmo_rows_map_to_compiled_fsdp_cards_with_the_scripts_accumulation(row_id: str) -> None:
    e = OLMO_ROWS[row_id]
    card, _ = st.map_train(e)
    b = e["batch"]
    assert card["batch"]["grad_accum"] == b["global_batch_size"] // (b["micro_batch_size"] * 8)
    assert card["parallel"]["strategy"] == "fsdp" and card["parallel"]["compile"] is True
    assert card["parallel"]["gradient_checkpointing"] is False and card["attention"] == "sdpa"
    if e["precision"]["compute"] == "fp8":
        assert (card["precision"]["compute"], card["precision"]["fp8_recipe"]) == ("fp8", "current")
    else:
        assert "compute" not in card["precision"]
    seconds = st.published_train_seconds(e, st.train_tokens_per_step(e))
    assert seconds == pytest.approx(b["global_batch_size"] * 4096 / (e["measured"]["value"] * 8))


def test_olmo_7b_bf16_step_is_the_tables_arithmetic() -> None:
    e = OLMO_ROWS["olmocore-2411-h100-olmo2-7b-bf16-8g"]
    # 1024 x 4096 tokens per step at 10,000 tokens/s on each of 8 GPUs
    assert st.published_train_seconds(e, st.train_tokens_per_step(e)) == pytest.approx(1024 * 4096 / 80_000)


def test_tinyllama_row_is_its_quote_and_maps_to_its_script() -> None:
    (e,) = TINY_ROWS.values()
    assert "**24k** tokens per second per A100-40G GPU" in e["quote"] and e["measured"]["value"] == 24_000
    assert "2048 * 1024" in e["quote"] and e["batch"]["global_batch_size"] * e["batch"]["seq_len"] == 2048 * 1024
    card, _ = st.map_train(e)
    # pretrain/tinyllama.py: 512 sequences per node over 8 GPUs in micro-batches of 8; AdamW(foreach=False)
    assert card["batch"]["grad_accum"] == 512 // 8 // 8
    assert card["precision"]["optimizer_impl"] == "for_loop"
    assert card["attention"] == "flash" and card["parallel"]["compile"] is True  # fused kernels planned as compile
    assert st.published_train_seconds(e, st.train_tokens_per_step(e)) == pytest.approx(1024 * 2048 / (24_000 * 16))
