"""``--preset trl --method ppo`` is refused in one line (exit 2): TRL's PPO is trl/experimental/ppo/ppo_trainer.py
(HF generate, ``batch_generation`` l.115; policy and value in one ``PolicyAndValueWrapper`` l.275) and trl/__init__.py
exports no PPOTrainer (huggingface/trl @f2cd57710ae345ea6428ae95363267fcf38a3dc8); the preset's colocated vLLM engine
is GRPOTrainer's."""

import pytest

from trainfit.api import load_card
from trainfit.cli.main import main
from trainfit.errors import TrainfitError


def test_cli_refuses_ppo_under_the_trl_preset_in_one_line(capsys):
    rc = main(["plan", "--method", "ppo", "--preset", "trl", "--gpus", "8", "--gpu", "a100-80gb"])
    out, err = capsys.readouterr()
    assert rc == 2
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err
    assert "preset: 'trl' with method ppo" in lines[0] and "verl or openrlhf" in lines[0]


def test_api_refuses_it_too_and_keeps_grpo_and_other_presets():
    with pytest.raises((TrainfitError, ValueError)):
        load_card(None, {"method": "ppo", "preset": "trl"})
    assert load_card(None, {"method": "grpo", "preset": "trl"}).preset == "trl"
    assert load_card(None, {"method": "ppo", "preset": "verl"}).method.value == "ppo"
