"""benchmarks/step_times.py, a launch-bound tensor-parallel card: Megatron-Bridge's Qwen3-8B SFT on 4 H100 (TP 4,
sequence parallel) is host-paced, so its sequence-parallel collectives run in the GPU's slack
(compute/model_parallel.py ``host_slack_exposed_s``) and add nothing to the step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_megatron_bridge_verification.json"
st = load_step_times("trainfit_bench_step_times_tp_host_slack")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_launch_bound_tp_card_charges_no_exposed_tensor_parallel_time() -> None:
    from trainfit.plan import make_plan

    e = ROWS["mbvc-qwen3-8b-sft-h100-4g"]
    card, _ = st.map_train(e)
    plan = make_plan(st.validate(card))
    assert card["parallel"]["tensor_parallel"] == 4
    fwd = next(p for p in plan.time.phases if p.name == "forward")
    assert fwd.terms["host_launch"] > fwd.terms["gemm"] + fwd.terms["attention"] + fwd.terms["memory_bound"]
    assert "tensor_parallel" not in plan.time.parts
    # 6.39 s (0.45 s of it exposed TP collectives) -> 5.94 s against 7.42 s published (2026-12-03): the miss is the
    # host's, not the collectives'
    assert plan.time.total_s / e["measured"]["value"] - 1 == pytest.approx(-0.20, abs=0.02)
