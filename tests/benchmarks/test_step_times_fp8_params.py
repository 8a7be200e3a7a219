"""benchmarks/step_times.py: rows whose configs state fp8 primary weights (NeMo 25.02 bf16_with_fp8_mixed
``fp8_params True``; the NeMo 24.07 fine-tuning scripts' ``fp8_params=true``) carry ``precision.fp8_params`` and
map to a card with it; every row that says it in its note has the key, and no other row does."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
st = load_step_times("trainfit_bench_step_times_fp8_params")
ENTRIES = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}
SAYS = re.compile(r"fp8_params(=| )[Tt]rue|with fp8_params\b")


def test_the_key_is_where_the_config_states_it():
    stated = {i for i, e in ENTRIES.items() if SAYS.search(e.get("note") or "")}
    keyed = {i for i, e in ENTRIES.items() if e["precision"].get("fp8_params")}
    # 31 NeMo / DGX Cloud entries, the 154 Megatron-Bridge MXFP8 and FP8-CS rows of
    # published_train_times_megatron_bridge_perf_lowp.json (their configs set fp8_param_gather), and the 50 older Megatron-Bridge
    # FP8 rows on the distributed optimizer (megatron_bridge, megatron_bridge_perf_releases, megatron_bridge_perf_bf16_fp8: the FP8 presets set it too), and
    # the 14 Megatron-Bridge FP8 rows on Megatron-FSDP (same presets; parallel.strategy fsdp), and the 21 MLPerf
    # Training llama2_70b_lora rows (FP8=True: their NeMo yaml sets fp8_params = FP8; the notes say "with fp8_params"),
    # and AMD's MLPerf v5.1 llama31_8b row (FP8_PARAMS=1: "fp8_params True"), and the 19 MLPerf v5.0 llama2_70b_lora
    # partner rows whose published config sets FP8 (published_train_times_firstcontact_2612o.json: the NeMo yaml's
    # fp8_params = FP8; the six without a published run config are not keyed), and the 23 MLPerf v5.1 partner rows of
    # published_train_times_firstcontact_2612q.json whose config sets FP8: AMD's recipes (FP8=True / FP8_PARAMS=1),
    # Krai's and Cisco's runs of NVIDIA's 24.09 recipe (its yaml's fp8_params: ${FP8}), and the six rows of NVIDIA's
    # 25.09 recipe (custom_llama.py builds the model under te.fp8_model_init; the llama31_8b B300 row, not keyed, is
    # NVIDIA's 8B pretraining recipe), and the five 2612p rows kept after its deduplication whose config sets FP8 (QCT's two
    # have no published run config)
    assert stated == keyed and len(keyed) == 31 + 154 + 50 + 14 + 21 + 1 + 19 + 23 + 5


@pytest.mark.parametrize("row_id", ["nemo2502-b200-llama3-405b-pt-fp8-128g", "nemo-h100-llama2-7b-lora-fp8-2407"])
def test_mapped_card_has_fp8_params(row_id):
    card, notes = st.map_train(ENTRIES[row_id])
    assert card["precision"]["fp8_params"] is True and card["precision"]["compute"] == "fp8"
    assert any(n.startswith("fp8 primary weights") for n in notes)
    st.validate(card)  # the card takes it (Megatron distributed optimizer / DDP, TE delayed scaling)

