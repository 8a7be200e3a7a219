"""A plan whose rollout engine cannot start says its step time leaves generation out (plan.rl_time)."""

import json

from trainfit.cli.main import main


def test_engine_that_does_not_fit_is_named_in_the_step_notes(capsys):
    # TRL colocates vLLM at 0.3 of a 40 GB card: too small for Qwen3-8B's weights (tests/cli/test_cli_suggest.py)
    assert main(["plan", "--method", "grpo", "--preset", "trl", "--gpus", "8", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["rollout"]["engine_fits"] is False
    text = json.dumps(obj)
    assert "the rollout engine does not fit (memory): the step time leaves generation out" in text
    timed = [p["name"] for p in obj["time"]["phases"]]
    assert "generation" not in timed and "actor_update" in timed
