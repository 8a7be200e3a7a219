"""A plan whose rollout engine cannot start has no step time: its generation has none, and the other phases
alone are not the step (plan.rl_time, StepTiming.unavailable). ``--json`` gives ``step_seconds`` null and
``step_unavailable`` the reason; the text says ``step time: not available: <reason>``; fit's rows carry the same
(search.Row.step_unavailable). Whole-output field list: docs/plan-json.md ``step_unavailable``."""

import json

from trainfit.cli.main import main
from trainfit.plan import make_plan
from trainfit.scenarios import ppo_tier
from trainfit.search import search
from trainfit.spec.card import load_card_dict
from trainfit.spec.dotted import merge_under

ARGS = ["plan", "--method", "grpo", "--preset", "trl", "--gpus", "8"]
"""TRL colocates vLLM at 0.3 of a 40 GB card: too small for Qwen3-8B's weights (tests/cli/test_cli_suggest.py)."""


def test_json_step_is_null_with_the_reason(capsys):
    assert main([*ARGS, "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["rollout"]["engine_fits"] is False
    assert obj["step_seconds"] is None and obj["time"] is None
    assert obj["step_unavailable"].startswith("the rollout engine cannot start (")
    assert obj["rollout"]["reason"] in obj["step_unavailable"]


def test_text_says_not_available(capsys):
    main(ARGS)
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("step time:")]
    assert len(lines) == 1 and lines[0].startswith("step time: not available: the rollout engine cannot start (")
    assert "tokens/s" not in lines[0]


def test_a_fitting_engine_keeps_its_step():
    p = make_plan(load_card_dict(ppo_tier("lora_fsdp_vllm")))
    assert p.rollout.engine_fits and p.step_unavailable is None and p.step_seconds > 0


def test_fit_rows_carry_the_same():
    base = merge_under(ppo_tier("fsdp_ckpt"), {"rollout": {"engine": "vllm"}})
    rows = search(base, {"rollout.gpu_memory_utilization": [0.3, 0.9]}, workers=1).rows
    by = {r.knobs["rollout.gpu_memory_utilization"]: r for r in rows}
    assert by[0.3].step_seconds is None
    assert by[0.3].step_unavailable.startswith("the rollout engine cannot start (")
