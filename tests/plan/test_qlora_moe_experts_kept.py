"""QLoRA on a MoE model: transformers 5's fused 3-D expert parameters are not nn.Linear and bitsandbytes' loader
replaces nn.Linear modules only (transformers 5.24.0 wheel integrations/bitsandbytes.py replace_with_bnb_linear
l.184-228), so the routed experts stay bf16 (memory.weights). The plan says so in an assumption (text and --json)
with the count, and its fix suggestions try parallel.moe_experts loop, transformers < 5's per-expert nn.Linear
experts (transformers 4.48.1 models/mixtral/modeling_mixtral.py l.73-75), which bitsandbytes quantizes."""

import json

from trainfit.api import load_card
from trainfit.cli.main import main
from trainfit.plan import make_plan
from trainfit.suggest import suggestions

_MOE = {"model": "Qwen/Qwen3-30B-A3B", "scope": "qlora", "hardware.gpus_per_node": 1, "parallel.strategy": "single"}


def _line(plan):
    return [a for a in plan.assumptions if "routed experts'" in a]


def test_assumption_names_the_bf16_experts_and_the_loop_release(capsys):
    rc = main(["plan", "--model", "Qwen/Qwen3-30B-A3B", "--scope", "qlora", "--gpu", "rtx4090", "--gpus", "1",
               "--strategy", "single", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc in (0, 1)
    [line] = [a for a in data["assumptions"] if "routed experts'" in a]
    # 48 layers x 128 experts x 3 x 2048 x 768 = 28.99 B (Qwen3-30B-A3B config.json)
    assert "28.99 B parameters stay bf16" in line and "not nn.Linear" in line
    assert "transformers < 5" in line and "parallel.moe_experts loop: base weights 15.57 GiB instead of 55.62 GiB" in line


def test_no_line_when_the_experts_are_quantized_or_the_model_is_dense():
    assert not _line(make_plan(load_card(None, {**_MOE, "hardware.gpu": "l40s", "parallel.moe_experts": "loop"})))
    assert not _line(make_plan(load_card(None, {**_MOE, "hardware.gpu": "l40s", "scope": "lora"})))
    assert not _line(make_plan(load_card(None, {"scope": "qlora", "hardware.gpus_per_node": 1,
                                                "parallel.strategy": "single"})))


def test_fix_suggestions_try_the_loop():
    card = load_card(None, {**_MOE, "hardware.gpu": "l40s"})  # 44.4 GiB: 55.62 GiB of bf16 experts do not fit
    plan = make_plan(card)
    assert not plan.fits
    singles, _pairs = suggestions(card, plan, pairs=False)
    assert {"parallel.moe_experts": "loop", "software.transformers": "<5"} in [s.changes for s in singles]


# The loop is transformers < 5's layout: offered as that release change, never to a card pinned to 5 or later, and a
# card that states it under a >= 5 pin is refused (loop_v5 is v5's eager loop; transformers 5.0 builds the experts as
# fused 3-D parameters, the 4.x per-expert nn.Linear modules are gone: the module docstring's sources)

def _singles(overrides):
    card = load_card(None, {**_MOE, "hardware.gpu": "l40s", **overrides})
    plan = make_plan(card)
    assert not plan.fits
    singles, _pairs = suggestions(card, plan, pairs=False)
    return [s.changes for s in singles]


def test_unpinned_card_is_offered_the_loop_as_a_release_change():
    assert {"parallel.moe_experts": "loop", "software.transformers": "<5"} in _singles({})


def test_card_pinned_to_transformers_5_is_not_offered_the_loop():
    # the reviewer's reproducer (Qwen3-30B-A3B QLoRA, software.transformers 5.0.0) was offered it
    assert not [c for c in _singles({"software.transformers": "5.0.0"}) if "parallel.moe_experts" in c]


def test_loop_refused_under_a_transformers_5_pin():
    import pytest
    from trainfit.errors import CardError

    for loop in ("loop", "loop_all"):
        with pytest.raises(CardError, match="^parallel.moe_experts: ") as exc:
            load_card(None, {**_MOE, "parallel.moe_experts": loop, "software.transformers": "5.0.0"})
        assert "\n" not in str(exc.value) and "loop_v5" in str(exc.value)
    load_card(None, {**_MOE, "parallel.moe_experts": "loop_v5", "software.transformers": "5.0.0"})
    load_card(None, {**_MOE, "parallel.moe_experts": "loop", "software.transformers": "4.57.6"})
