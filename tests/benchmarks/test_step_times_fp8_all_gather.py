"""benchmarks/step_times.py: rows whose command or config sets torchao's float8 FSDP2 all-gather
(``enable_fsdp_float8_all_gather``) carry ``precision.fp8_all_gather`` and map to a card with it; and the one
published pair that differs only by it (the AWS / Meta torchtitan SageMaker table: FP8 linear 8624 -> FP8 all-gather
8950 tokens/s per GPU) is reproduced by the mechanism (compute.float8_all_gather), not by a constant."""

from __future__ import annotations

import re

import pytest
from step_times_module import load_step_times

st = load_step_times("trainfit_bench_step_times_fp8_all_gather")
ENTRIES = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}
SAYS = re.compile(r"enable_fsdp_float8_all_gather|float8 all-gather|fp8 FSDP all-gather", re.I)
PAIR = ("titan-sagemaker-p5-h100-llama3-8b-32gpu-float8", "titan-sagemaker-p5-h100-llama3-8b-32gpu-float8-all-gather")


def test_every_keyed_row_states_it():
    keyed = {i for i, e in ENTRIES.items() if e["precision"].get("fp8_all_gather")}
    # torchtitan 405B on 512 GPUs (6) and 128 GPUs (1), Trainy's H200 runs (2), torchao README tensorwise (3),
    # accelerate fp8 (1), OLMo-core fp8 (4), the SageMaker FP8 all-gather row (1), torchtitan pull requests #833 and
    # #808's logged runs (2: published_train_times_firstcontact_2612k.json)
    assert len(keyed) == 20
    for i in keyed:
        e = ENTRIES[i]
        assert SAYS.search(e.get("note", "") + e.get("quote", "")), i
        assert e["precision"]["compute"] == "fp8"


@pytest.mark.parametrize("row_id", ["torchao-f8-2503-h100-llama3-8b-f8-tensorwise", PAIR[1]])
def test_mapped_card_has_it(row_id):
    card, notes = st.map_train(ENTRIES[row_id])
    assert card["precision"]["fp8_all_gather"] is True and card["precision"]["fp8_recipe"] == "current"
    assert any(n.startswith("torchao float8 FSDP2 all-gather") for n in notes)
    st.validate(card)


def test_the_published_pair_is_reproduced():
    """8624 -> 8950 tokens/s per GPU is +3.8 % throughput; the plans of the two cards differ by the float8
    all-gather alone and must give the same gain within 2 points."""
    (without, _), (with_, _) = (st.map_train(ENTRIES[i]) for i in PAIR)
    assert {k: v for k, v in with_["precision"].items() if k != "fp8_all_gather"} == without["precision"]
    t_without, t_with = st.plan_card(without).step_s, st.plan_card(with_).step_s
    published = 8950 / 8624 - 1
    assert t_without / t_with - 1 == pytest.approx(published, abs=0.02)
