"""rollout.gpu_memory_utilization left null takes the framework's default for the preset and placement; a stated
value is kept. Sources: huggingface/trl trl/trainer/grpo_config.py l.646-647 (0.3, colocate) and
trl/scripts/vllm_serve.py l.248-249 (0.9, the server) @f2cd57710ae345ea6428ae95363267fcf38a3dc8; unslothai/unsloth
unsloth/models/loader.py l.78 @027b5100c7492bce025fe2f03681f440843e4666 (0.5); OpenRLHF/OpenRLHF
openrlhf/cli/train_ppo_ray.py l.250-254 (0.95) and README.md l.459, l.766 (0.5, hybrid engine)
@3c3be6234e0cb353e76bb8019947db9dfe99fca7."""

from __future__ import annotations

import pytest

from trainfit.api import load_card
from trainfit.plan import make_plan
from trainfit.spec.card import RunCard

_SPLIT = {"method": "grpo", "rollout.placement": "split", "rollout.gpus": 2}


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"method": "grpo"}, 0.3),
    (_SPLIT, 0.9),
    ({**_SPLIT, "preset": "trl"}, 0.9),
    ({"method": "grpo", "preset": "trl"}, 0.3),
    ({"method": "grpo", "preset": "unsloth", "hardware.gpus_per_node": 1, "scope": "qlora"}, 0.5),
    ({"method": "grpo", "preset": "verl"}, 0.5),
    ({"method": "grpo", "preset": "nemo-rl"}, 0.6),
    ({"method": "grpo", "preset": "openrlhf"}, 0.5),
    ({**_SPLIT, "preset": "openrlhf"}, 0.95),
    ({**_SPLIT, "preset": "verl"}, 0.5),
    ({**_SPLIT, "rollout.gpu_memory_utilization": 0.3}, 0.3),
    ({"method": "grpo", "preset": "unsloth", "hardware.gpus_per_node": 1, "scope": "qlora",
      "rollout.gpu_memory_utilization": 0.3}, 0.3),
])
def test_default_follows_framework_and_placement(overrides, expected):
    assert load_card(None, overrides).rollout.gpu_memory_utilization == expected


def test_resolved_value_is_not_marked_set_so_a_variant_resolves_afresh():
    card = load_card(None, {"method": "grpo"})
    data = card.model_dump(mode="json", exclude_unset=True)
    assert "gpu_memory_utilization" not in data.get("rollout", {})
    data.setdefault("rollout", {}).update(placement="split", gpus=2)
    assert RunCard.model_validate(data).rollout.gpu_memory_utilization == 0.9


def test_assumption_line_names_the_source_only_when_defaulted():
    defaulted = make_plan(load_card(None, _SPLIT))
    stated = make_plan(load_card(None, {**_SPLIT, "rollout.gpu_memory_utilization": 0.9}))
    line = next(a for a in defaulted.assumptions if a.startswith("rollout:"))
    assert "gpu_memory_utilization 0.9 (TRL trl vllm-serve default, split engine)" in line
    assert not any("vllm-serve default" in a for a in stated.assumptions)


def test_explicit_null_is_resolved_but_not_kept_as_set():
    # an explicit null (a YAML `gpu_memory_utilization: null`, or --set ...=null) is the same as leaving it out: the
    # resolved default must not be dumped as stated, or a re-validated colocate variant keeps the split engine's 0.9
    card = load_card(None, {**_SPLIT, "rollout.gpu_memory_utilization": None})
    assert card.rollout.gpu_memory_utilization == 0.9
    data = card.model_dump(mode="json", exclude_unset=True)
    assert "gpu_memory_utilization" not in data.get("rollout", {})
    data["rollout"].update(placement="colocate")
    data["rollout"].pop("gpus", None)
    assert RunCard.model_validate(data).rollout.gpu_memory_utilization == 0.3  # TRL GRPOConfig, colocate


def test_explicit_null_keeps_the_assumption_source():
    plan = make_plan(load_card(None, {**_SPLIT, "rollout.gpu_memory_utilization": None}))
    line = next(a for a in plan.assumptions if a.startswith("rollout:"))
    assert "gpu_memory_utilization 0.9 (TRL trl vllm-serve default, split engine)" in line
