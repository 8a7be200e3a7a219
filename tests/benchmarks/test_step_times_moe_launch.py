"""benchmarks/step_times.py, parallel.moe_launch: the Megatron-Bridge gpt-oss H100 verification cards and the
Qwen3-30B-A3B 32K SFT card, whose recipes set cuda_graph_impl "none" and moe_router_fusion False, map with eager
router and dispatcher launches (compute/moe_time.py "Eager router and dispatcher launches"), which adds host time on
those cards only; so do NeMo RL v0.3's Megatron policy and ms-swift's Megatron-SWIFT row."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_megatron_bridge_verification.json"
st = load_step_times("trainfit_bench_step_times_moe_launch")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
EAGER = ("mbvc-gpt-oss-20b-pretrain-h100-16g", "mbvc-gpt-oss-20b-sft-h100-8g", "mbvc-gpt-oss-20b-lora-h100-1g",
         "mbvc-gpt-oss-120b-pretrain-h100-64g", "mbvc-gpt-oss-120b-sft-h100-32g",
         "mbvc-qwen3-30b-a3b-sft32k-h100-16g")


@pytest.mark.parametrize("row_id", EAGER)
def test_gpt_oss_cards_map_eager_with_their_recipe_cited(row_id: str) -> None:
    e = ROWS[row_id]
    assert e["parallel"]["moe_launch"] == "eager"
    assert 'cuda_graph_impl = \\"none\\"' in json.dumps(e["note"]) and "moe_router_fusion = False" in e["note"]
    card, _ = st.map_train(e)
    assert card["parallel"]["moe_launch"] == "eager"


def test_megatron_bridge_moe_rows_map_fused_and_others_resolve_eager() -> None:
    # the Qwen3-30B-A3B 16-GPU recipes fuse the router (and the pretraining one graphs it): Megatron-Bridge's MoE
    # recipes map fused (step_times.MOE_LAUNCH_FUSED); a Megatron-LM MoE row states nothing and resolves to
    # Megatron-Core's defaults, eager
    for row_id in ("mbvc-qwen3-30b-a3b-pretrain-h100-16g", "mbvc-qwen3-30b-a3b-sft-h100-16g",
                   "mbvc-qwen3-30b-a3b-pretrain-perf-h100-16g"):
        card, _ = st.map_train(ROWS[row_id])
        assert card["parallel"]["moe_launch"] == "fused"
    train = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}
    card, _ = st.map_train(train["xtuner-h800-qwen3-235b-tp4-ep8-pp8-vpp4"])
    assert "moe_launch" not in card["parallel"]
    assert st.validate(card).parallel.resolved_moe_launch.value == "eager"


@pytest.mark.parametrize("row_id", ["moezoo-h100-qwen3-235b-deepep-tp4-ep8-pp8-vpp4", "dgxc2505-gb200-grok1-314b-pt-fp8-128g",
                                    "nemo2502-b200-mixtral-8x7b-pt-fp8-64g", "nemo2504-gb200-mixtral-8x7b-pt-fp8-64g"])
def test_rows_whose_recipe_fuses_or_graphs_the_router_state_fused(row_id: str) -> None:
    train = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA)}
    e = train[row_id]
    assert e["parallel"]["moe_launch"] == "fused" and "Router and dispatcher launches: fused" in e["note"]
    card, _ = st.map_train(e)
    assert card["parallel"]["moe_launch"] == "fused"


def test_verl_megatron_moe_rows_map_eager_with_their_script_cited() -> None:
    rl = {e["id"]: e for e in st.load_entries(st.RL_DATA)}
    for row_id in ("verl-fully-async-grpo-qwen3-30b-a3b-h20-colocate-128g",
                   "verl-fully-async-grpo-qwen3-30b-a3b-h20-async-96-32", "verl-grpo-deepseek-v3-671b-h20-96g"):
        e = rl[row_id]
        assert e["train"]["moe_launch"] == "eager" and "overrides neither moe_router_fusion" in e["note"]
    # the async 96/32 row is unmapped (its samples per step are not pinned); the two others map eager
    for row_id in ("verl-fully-async-grpo-qwen3-30b-a3b-h20-colocate-128g", "verl-grpo-deepseek-v3-671b-h20-96g"):
        card, _ = st.map_rl(rl[row_id])
        assert card["parallel"]["moe_launch"] == "eager"


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


def test_nemo_rl_v03_megatron_policy_maps_eager_and_its_update_grows() -> None:
    from trainfit.plan import make_plan

    rl = {e["id"]: e for e in st.load_entries(st.RL_DATA)}
    e = rl["nemorl-v03blog-grpo-qwen3-30b-a3b-megatron-h100-64g"]
    assert e["train"]["moe_launch"] == "eager" and "@2ff0f099ffc30ffd152e3e29e921a1609d00855c" in e["note"]
    card, _ = st.map_rl(e)
    assert card["parallel"]["moe_launch"] == "eager"
    fused = copy.deepcopy(card)
    fused["parallel"]["moe_launch"] = "fused"

    def update_s(c: dict) -> float:
        time = make_plan(st.validate(c)).time
        return next(p.seconds for p in time.phases if p.name == "actor_update")

    # 15.8 s -> 19.0 s against 50 s published (2026-12-03); the log-prob passes are device-bound in the plan
    assert update_s(fused) < update_s(card) < e["measured"]["phases_s"]["actor_update"]


def test_nemo_rl_performance_rows_with_expert_parallel_map_eager_with_their_release_cited() -> None:
    rl = [e for e in st.load_entries(st.RL_DATA) if str(e["id"]).startswith(("nemorl-v04", "nemorl-v05", "nemorl-v06"))
          and e["train"].get("strategy") == "megatron" and (e["train"].get("ep") or 1) > 1]
    assert len(rl) == 39
    for e in rl:
        assert e["train"]["moe_launch"] == "eager"
        assert "transformer_config.py" in e["note"] and "moe_router_fusion False" in e["note"]
    card, _ = st.map_rl(next(e for e in rl if e["id"] == "nemorl-v04-grpo-qwen3-30b-a3b-h100-bf16-32g-onpol"))
    assert card["parallel"]["moe_launch"] == "eager"
