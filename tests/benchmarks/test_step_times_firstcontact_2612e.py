"""benchmarks/step_times.py, the out-of-sample rows of published_train_times_firstcontact_2612e.json: Liger-Kernel's
Hugging Face Trainer benchmarks (full fine-tuning of Llama-3-8B, Qwen2-7B and Gemma-7B on 4 A100 with FSDP1, with and
without Liger's kernels, examples/huggingface charts) and the README's end-to-end chart (Llama-3-8B on 8 A100), which the
publication does not state well enough for a card. Each row cites its chart at a commit, its figure is what the chart
shows (the Qwen2 bars' own data labels; the other bars read off the pixel grid, the reading in ``measured.also``), its
note records the first-contact error, and the rows whose strategy reads ``fsdp1`` are planned on FSDP1."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612e.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
QWEN_LABELS = {32: 9047.21, 48: 10353.76, 64: 11912.43}  # the Liger bars; without Liger only batch 32 ran: 8387.79

st = load_step_times("trainfit_bench_step_times_firstcontact_2612e")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_file_is_loaded_whole() -> None:
    assert DATA in st.data_files(st.TRAIN_DATA)
    loaded = [e["id"] for e in st.load_entries(st.TRAIN_DATA) if e["_file"] == DATA.name]
    assert sorted(loaded) == sorted(ROWS) and len(ROWS) == 20
    assert sum(bool(e.get("card_cannot_state")) for e in ROWS.values()) == 7


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_a_commit_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    assert e["source"]["repo"] == "linkedin/Liger-Kernel" and HEX40.match(e["source"]["commit"])
    assert e["source"]["path"].endswith(".png") and e["note"].count("First-contact error") == 1
    assert e["kind"] == "sft_full" and e["gpu"] == "a100-80gb"
    if "qwen2" in row_id:  # the chart labels its bars: the figure is the label, quoted
        bs = e["batch"]["micro_batch_size"]
        assert e["measured"]["value"] == (8387.79 if row_id.endswith("-hf") else QWEN_LABELS[bs])
        assert str(e["measured"]["value"]) in e["quote"]
    # the HF example's rate counts every rank's padded tokens: all GPUs, global batch = 4 x the per-device batch
    if row_id.startswith("liger-hf-"):
        assert e["measured"]["metric"] == "tokens_per_s_total"
        assert e["batch"]["global_batch_size"] == 4 * e["batch"]["micro_batch_size"] and e["gpus"] == 4


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_maps_to_a_valid_fsdp1_card_or_states_why_not(row_id: str) -> None:
    e = ROWS[row_id]
    if e.get("card_cannot_state"):
        with pytest.raises(st.Unmapped) as got:
            st.map_train(e)
        assert got.value.status == "not_representable"
        return
    card, notes = st.map_train(e)
    st.validate(card)
    assert card["parallel"]["strategy"] == "fsdp" and card["parallel"]["fsdp_version"] == "fsdp1"
    assert "FSDP API: fsdp1 (hf-trainer)" in notes
    assert (card.get("loss") or {}).get("kernel") == ("liger" if row_id.endswith("-liger") else None)


def test_fsdp1_strategy_is_fsdp1_whatever_the_framework() -> None:
    # an entry that names FSDP1 is planned on it even where its framework has no FSDP mapping (hf-trainer), while an
    # unnamed fsdp under such a framework keeps the card's default
    assert st.fsdp_version_of("hf-trainer", "fsdp1")[0] == "fsdp1"
    assert st.fsdp_version_of("hf-trainer", "fsdp")[0] is None
    assert st.STRATEGIES["fsdp1"] == "fsdp"


def test_hf_trainer_zero2_rows_stay_deepspeed() -> None:
    # FSDP_VERSIONS membership turns a recorded zero2 into FSDP SHARD_GRAD_OP; the HF Trainer's zero2 rows are
    # DeepSpeed ZeRO-2, so hf-trainer must stay out of it (the FSDP1 rows state their API through the strategy)
    assert "hf-trainer" not in st.FSDP_VERSIONS
    zero2 = next(e for e in st.load_entries(st.TRAIN_DATA)
                 if e["framework"] == "hf-trainer" and e["parallel"]["strategy"] == "zero2")
    card, _ = st.map_train(zero2)
    assert card["parallel"]["strategy"] == "zero2"
