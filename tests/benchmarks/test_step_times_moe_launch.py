"""benchmarks/step_times.py, parallel.moe_launch: the Megatron-Bridge gpt-oss H100 verification cards, whose recipes
set cuda_graph_impl "none" and moe_router_fusion False, map with eager router and dispatcher launches
(compute/moe_time.py "Eager router and dispatcher launches"), which adds host time on those cards only."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_new_s15.json"
st = load_step_times("trainfit_bench_step_times_moe_launch")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
EAGER = ("mbvc-gpt-oss-20b-pretrain-h100-16g", "mbvc-gpt-oss-20b-sft-h100-8g", "mbvc-gpt-oss-20b-lora-h100-1g",
         "mbvc-gpt-oss-120b-pretrain-h100-64g", "mbvc-gpt-oss-120b-sft-h100-32g")


@pytest.mark.parametrize("row_id", EAGER)
def test_gpt_oss_cards_map_eager_with_their_recipe_cited(row_id: str) -> None:
    e = ROWS[row_id]
    assert e["parallel"]["moe_launch"] == "eager"
    assert 'cuda_graph_impl = \\"none\\"' in json.dumps(e["note"]) and "moe_router_fusion = False" in e["note"]
    card, _ = st.map_train(e)
    assert card["parallel"]["moe_launch"] == "eager"


def test_other_megatron_moe_rows_keep_the_default() -> None:
    card, _ = st.map_train(ROWS["mbvc-qwen3-30b-a3b-pretrain-h100-16g"])
    assert "moe_launch" not in card["parallel"]


def test_eager_launches_lengthen_the_host_bound_sft_card_toward_its_published_step() -> None:
    from trainfit.plan import make_plan

    e = ROWS["mbvc-gpt-oss-20b-sft-h100-8g"]
    card, _ = st.map_train(e)
    fused = copy.deepcopy(card)
    fused["parallel"]["moe_launch"] = "fused"
    t_eager = make_plan(st.validate(card)).time.total_s
    t_fused = make_plan(st.validate(fused)).time.total_s
    published = e["measured"]["value"]
    assert t_fused < t_eager < published
    # 2.70 s -> 3.34 s against 6.62 s published (2026-12-03)
    assert t_eager / published - 1 == pytest.approx(-0.496, abs=0.02)
