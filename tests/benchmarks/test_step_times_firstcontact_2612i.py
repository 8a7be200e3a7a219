"""benchmarks/step_times.py, the out-of-sample pretraining rows of published_train_times_firstcontact_2612i.json:
FlagPerf's Megatron-Core Llama-3 8B case (one A800 node in seven TP/PP layouts; H100 on 8, 16 and 440 GPUs, bf16
and FP8), its Llama-3 70B case on 64 H100, its Llama-2 70B case on 32 H800 (FlagScale, three TP/PP/batch layouts)
and FlashAttention's GPT3 125M-2.7B training table on 8 A100 80GB; and,
not representable, FlagPerf's Mixtral 8x7B case (its expert layout is published two ways). Each row cites its
source and quotes it, its note records the first-contact error, and the step the row holds is the one its quote
gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612i.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
SOURCES = {"FlagOpen/FlagPerf": {"training/nvidia/llama3_8B-megatron/README.md",
                                 "training/nvidia/llama2_70B-megatron/README.md",
                                 "training/nvidia/llama3_70B-megatron/README.md",
                                 "training/nvidia/mixtral_8x7B-megatron/README.md"},
           "Dao-AILab/flash-attention": {"training/README.md"}}

st = load_step_times("trainfit_bench_step_times_firstcontact_2612i")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
FLAGPERF = sorted(i for i in ROWS if i.startswith("flagperf-") and not ROWS[i].get("card_cannot_state"))
FLASH = sorted(i for i in ROWS if i.startswith("flash-attn-training-"))


def test_file_is_loaded_whole() -> None:
    assert DATA in st.data_files(st.TRAIN_DATA)
    loaded = [e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == DATA.name]
    assert sorted(loaded) == sorted(ROWS) and len(ROWS) == 22
    assert len(FLAGPERF) == 16 and len(FLASH) == 5
    assert [i for i in ROWS if ROWS[i].get("card_cannot_state")] == ["flagperf-2405-mixtral-8x7b-megatron-h100-32g-tp8-pp2"]
    assert all(e["kind"] == "pretrain" for e in ROWS.values())


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_a_commit_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    assert e["source"]["path"] in SOURCES[e["source"]["repo"]] and HEX40.match(e["source"]["commit"])
    assert e["note"].startswith("FIRST CONTACT") and "PENDING" not in e["note"]
    if e.get("card_cannot_state"):
        assert "NOT REPRESENTABLE" in e["note"] and "First-contact error" not in e["note"]
    else:
        assert len(re.findall(r"First-contact error(?: \([^)]*\))?: trainfit ", e["note"])) == 1


@pytest.mark.parametrize("row_id", FLAGPERF)
def test_flagperf_step_is_the_scripts_tokens_over_token_per_gpu(row_id: str) -> None:
    # run_pretraining.py: whole_tps = GBS x seq / time_per_step; chip_tps = whole_tps / GPUs (the table's token/p/s)
    e = ROWS[row_id]
    b, p = e["batch"], e["parallel"]
    assert f"| {e['measured']['value']} " in e["quote"]
    assert e["measured"]["metric"] == "tokens_per_s_per_gpu" and b["micro_batch_size"] == 1
    if "-llama2-70b-" in row_id:  # Llama-2: seq 4096, GBS = 44 micro-batches at DP 1 unless GAS=1024
        assert b["seq_len"] == 4096 and b["global_batch_size"] == (1024 if "GAS=1024" in e["quote"] else 44)
    else:
        assert b["seq_len"] == 8192 and b["global_batch_size"] == (1760 if row_id.endswith("-gbs1760") else 512)
    dims = {k: int(v) for k, v in re.findall(r"(PP|DP|TP)(\d+)", e["quote"])}
    assert (dims["PP"], dims["TP"]) == (p["pp"], p["tp"]) and dims["DP"] * p["pp"] * p["tp"] == e["gpus"]


@pytest.mark.parametrize("row_id", FLAGPERF)
def test_flagperf_rows_map_without_overlap_flags(row_id: str) -> None:
    # the FlagPerf scripts pass neither --overlap-grad-reduce nor --overlap-param-gather: no overlapped gather planned
    e = ROWS[row_id]
    card, notes = st.map_train(e)
    st.validate(card)
    assert "overlap_param_gather" not in card["parallel"]
    assert not any("overlap_param_gather" in n for n in notes)
    assert card["parallel"]["strategy"] == "zero1" and card["parallel"]["tensor_parallel_impl"] == "megatron"
    assert card["hardware"]["gpu"] == {"a800": "a800-80gb", "h800": "h800"}.get(e["gpu"], "h100-sxm")
    # TE's DotProductAttention: FlashAttention-2 on sm80, cuDNN on Hopper; FlagScale's legacy model: flash-attn's FA2
    assert card["attention_kernel"] == ("cudnn" if e["gpu"] == "h100-sxm" else "fa2")
    assert card["precision"].get("compute", "bf16") == ("fp8" if row_id.endswith("-fp8") else "bf16")
    if "-llama3-" in row_id:  # the FlagPerf Llama-3 scripts leave the embedding tied to the output layer
        assert isinstance(card["model"], dict) and card["model"]["config"]["tie_word_embeddings"] is True
    else:
        assert card["model"] == "meta-llama/Llama-2-70b-hf"


@pytest.mark.parametrize("row_id", FLASH)
def test_flash_attn_step_is_the_tables_batch_over_node_throughput(row_id: str) -> None:
    e = ROWS[row_id]
    b = e["batch"]
    assert e["measured"]["metric"] == "tokens_per_s_total" and e["gpus"] == 8 and e["gpu"] == "a100-80gb"
    assert f"{round(e['measured']['value'] / 1000)}k" in e["quote"]
    assert ("0.5M" in e["quote"]) == (b["global_batch_size"] == 256)
    # accumulate_grad_batches = div_up(global batch, 8 x per-GPU batch)
    assert b["grad_accum"] * 8 * b["micro_batch_size"] == b["global_batch_size"]
    card, notes = st.map_train(e)
    st.validate(card)
    assert card["parallel"]["strategy"] == ("ddp" if b["global_batch_size"] == 256 and b["micro_batch_size"] == 32
                                            else "zero1")
    assert card["precision"]["weights"] == "fp32" and card["parallel"]["compile"] is True
    # flash_attn 0.2.2 at the commit: with attention dropout on, MHA runs the CUDA FlashAttention-1 kernels
    assert card["attention_kernel"] == "fa1" and card["attention"] == "flash"
    assert card["parallel"].get("gradient_checkpointing", "none") in ("none", None, False)


def test_mixtral_row_stays_not_representable() -> None:
    with pytest.raises(st.Unmapped) as got:
        st.map_train(ROWS["flagperf-2405-mixtral-8x7b-megatron-h100-32g-tp8-pp2"])
    assert got.value.status == "not_representable" and "expert parallelism" in got.value.reasons[0]
