"""benchmarks/step_times.py, the out-of-sample rows of published_train_times_firstcontact_2612h.json: DeepSpeed-Chat's
step-1 SFT log (OPT-1.3B, ZeRO-2 fp16 on 16 V100-32GB), EasyContext's speed table (continued pretraining of
Llama-2-7B to 64K-512K tokens on 8 A100, ZeRO-3 with CPU offload, zigzag ring attention), ms-swift example scripts'
seconds per iteration (Qwen2.5-7B packed 16K full fine-tuning on 4 A100 and 4 H20, QwQ-32B LoRA at 512K with Ulysses
8 and ZeRO-3 offload, Qwen2.5-7B packed 16K / 64K with Ulysses 4) and, not representable, a NeMo RL issue's Qwen3-30B-A3B SFT timings (sample lengths
unpublished), a SkyRL pull request's packed SFT benchmark and an ms-swift cached-dataset script (GPU unstated). Each row cites its source and quotes it, its note records the first-contact error, and
the step the row holds is the one its quote gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612h.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
SOURCES = {"deepspeedai/DeepSpeedExamples": {"applications/DeepSpeed-Chat/training/step1_supervised_finetuning/"
                                             "training_log_output/opt-1.3b-globalBatchSize128.log"},
           "jzhang38/EasyContext": {"README.md"},
           "modelscope/ms-swift": {"examples/train/long_text/liger_kernel.sh", "examples/train/fa3/transformers.sh",
                                   "examples/train/long_text/sequence_parallel_512k.sh",
                                   "examples/train/long_text/sequence_parallel.sh",
                                   "examples/train/cached_dataset/sft.sh"}}
URLS = {"https://github.com/NVIDIA-NeMo/RL/issues/966", "https://github.com/NovaSky-AI/SkyRL/pull/1734"}

st = load_step_times("trainfit_bench_step_times_firstcontact_2612h")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
EASYCONTEXT = sorted(i for i in ROWS if i.startswith("easycontext-"))
MSSWIFT = sorted(i for i in ROWS if i.startswith("msswift-") and not ROWS[i].get("card_cannot_state"))


def test_file_is_loaded_whole() -> None:
    assert DATA in st.data_files(st.TRAIN_DATA)
    loaded = [e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == DATA.name]
    assert sorted(loaded) == sorted(ROWS) and len(ROWS) == 16
    assert sum(bool(e.get("card_cannot_state")) for e in ROWS.values()) == 5


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_its_source_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    if "url" in src:
        assert src["url"] in URLS and src["date"] == "2026-12-05"
    else:
        assert src["path"] in SOURCES[src["repo"]] and HEX40.match(src["commit"])
    assert e["note"].startswith("FIRST CONTACT") and "PENDING" not in e["note"]
    if e.get("card_cannot_state"):
        assert "NOT REPRESENTABLE" in e["note"] and "First-contact error" not in e["note"]
    else:
        assert e["note"].count("First-contact error: trainfit ") == 1


@pytest.mark.parametrize("row_id", EASYCONTEXT)
def test_easycontext_step_is_tokens_over_the_published_throughput(row_id: str) -> None:
    # 'Throughput on 8 A100' in tokens/s; one step = 1 sequence x grad accumulation (x 8 ranks without ring)
    e = ROWS[row_id]
    tps = e["measured"]["also"]["tokens_per_s_8_gpus"]
    assert f"{tps} tokens/s" in e["quote"]
    b, ring = e["batch"], e["parallel"]["cp"] == 8
    tokens = b["seq_len"] * b["grad_accum"] * (1 if ring else 8)
    assert e["measured"]["value"] == pytest.approx(tokens / tps, abs=1e-3)
    card, _ = st.map_train(e)
    st.validate(card)
    assert card["parallel"]["strategy"] == "zero3" and card["parallel"].get("context_parallel", 1) == (8 if ring else 1)


def test_dschat_step_is_the_log_span_over_its_steps() -> None:
    # rank-0 'step=10' at 01:46:59.142 and 'step=460' at 01:52:34.866: 335.724 s over 450 steps of 128 samples
    e = ROWS["dschat-step1-sft-opt-1.3b-v100-32gb-16g-zero2-mb8"]
    assert e["measured"]["value"] == pytest.approx(335.724 / 450, abs=1e-6)
    assert "step=10, skipped=6" in e["quote"] and "step=460, skipped=6" in e["quote"]
    assert e["batch"]["global_batch_size"] == e["gpus"] * e["batch"]["micro_batch_size"] == 128
    card, _ = st.map_train(e)
    st.validate(card)
    assert card["parallel"]["strategy"] == "zero2" and card["precision"]["compute"] == "fp16"


@pytest.mark.parametrize("row_id", sorted(i for i in ROWS if ROWS[i].get("card_cannot_state")))
def test_rows_without_lengths_or_gpu_stay_not_representable(row_id: str) -> None:
    with pytest.raises(st.Unmapped) as got:
        st.map_train(ROWS[row_id])
    assert got.value.status == "not_representable"
    reason = got.value.reasons[0]
    assert ("lengths are not published" in reason) if row_id.startswith("nemorl-") else ("GPU is not stated" in reason)


@pytest.mark.parametrize("row_id", MSSWIFT)
def test_msswift_step_is_the_commented_seconds_per_iteration(row_id: str) -> None:
    # the HF Trainer's tqdm counts optimizer steps: 's/it' is one step of micro-batch 1 x grad accumulation
    e = ROWS[row_id]
    s = e["measured"]["value"]
    assert f"{s:g}s/it" in e["quote"] and e["measured"]["also"]["s_per_it"] == s
    card, _ = st.map_train(e)
    st.validate(card)
    assert card["parallel"]["strategy"] == "zero3" and e["batch"]["packed"] and e["parallel"]["overlap_comm"] is False
    uly = e["parallel"].get("sequence_parallel_ulysses", 1)
    assert e["batch"]["global_batch_size"] == e["gpus"] // uly * e["batch"]["grad_accum"]


ULYSSES = sorted(i for i in MSSWIFT if ROWS[i]["parallel"].get("sequence_parallel_ulysses", 1) > 1)


@pytest.mark.parametrize("row_id", ULYSSES)
def test_ulysses_ranks_are_not_data_parallel_ranks(row_id: str) -> None:
    # Ulysses splits one sequence over its ranks (DeepSpeed-Ulysses, arXiv:2309.14509 section 3): the grad
    # accumulation derived from the global batch divides by GPUs / Ulysses ranks, and so do the rule's tokens
    e = ROWS[row_id]
    card, notes = st.map_train(e)
    assert card["batch"]["grad_accum"] == e["batch"]["grad_accum"] and not any("from the global batch" in n for n in notes)
    assert card["parallel"]["context_parallel_kind"] == "ulysses"
    unpublished = {**e, "batch": {**e["batch"], "global_batch_size": None}}
    assert st.train_tokens_per_step(unpublished) == st.train_tokens_per_step(e) == (
        e["batch"]["global_batch_size"] * e["batch"]["seq_len"])
