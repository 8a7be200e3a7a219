"""parallel.fsdp_version (fsdp1 | fsdp2): validated like the rest of the card, never rewritten, read only under FSDP."""

from __future__ import annotations

import pytest

from trainfit.cli.main import main
from trainfit.errors import CardError
from trainfit.methods.presets import apply_preset
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import FsdpVersion


def test_default_is_fsdp2_as_the_trace_and_the_torchtitan_export():
    assert load_card_dict({}).parallel.fsdp_version is FsdpVersion.FSDP2


@pytest.mark.parametrize("strategy", ["fsdp", "fsdp_grad_op", "hsdp", "zero3", "ddp"])
def test_a_user_value_is_kept_whatever_the_strategy(strategy):
    card = load_card_dict({"hardware": {"nodes": 2}, "parallel": {"strategy": strategy, "fsdp_version": "fsdp1"}})
    assert card.parallel.fsdp_version is FsdpVersion.FSDP1


def test_a_preset_fills_it_under_the_card():
    assert load_card_dict(apply_preset({"method": "grpo"}, "verl")).parallel.fsdp_version is FsdpVersion.FSDP1
    mine = apply_preset({"method": "grpo", "parallel": {"fsdp_version": "fsdp2"}}, "verl")
    assert load_card_dict(mine).parallel.fsdp_version is FsdpVersion.FSDP2


def test_a_bad_value_names_the_field_and_the_allowed_values(capsys):
    with pytest.raises(CardError) as exc:
        load_card_dict({"parallel": {"fsdp_version": "2"}})
    assert str(exc.value) == "parallel.fsdp_version: '2' is not allowed; allowed: fsdp1 or fsdp2"
    assert main(["plan", "--set", "parallel.fsdp_version=fsdp3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "parallel.fsdp_version" in err and "fsdp1 or fsdp2" in err and "Traceback" not in err
