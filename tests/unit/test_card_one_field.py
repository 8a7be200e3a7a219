"""One field per fact: generation lengths live in rollout.* only; other spellings are refused with a pointer."""

import pytest

from trainfit.cli.main import main
from trainfit.errors import CardError
from trainfit.spec.card import MOVED_KEYS, RunCard, load_card_dict


def test_the_card_has_no_generation_section():
    assert "generation" not in RunCard.model_fields
    rollout = RunCard.model_fields["rollout"].annotation.model_fields
    assert set(MOVED_KEYS.values()) <= {f"rollout.{k}" for k in rollout}


@pytest.mark.parametrize("old", sorted(MOVED_KEYS))
def test_every_other_spelling_is_refused_with_a_pointer(old, capsys):
    section, key = old.split(".")
    with pytest.raises(CardError) as exc:
        load_card_dict({"method": "grpo", section: {key: 2048}})
    assert str(exc.value) == f"{old}: not a card field; generation lengths live in rollout.*: use {MOVED_KEYS[old]}"
    assert main(["plan", "--method", "grpo", "--set", f"{old}=2048"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and MOVED_KEYS[old] in err and "Traceback" not in err


def test_an_empty_or_unknown_generation_section_is_refused_too():
    for section in ({}, {"temperature": 1.0}):
        with pytest.raises(CardError, match=r"^generation: not a card section; generation settings live in rollout\.\*"):
            load_card_dict({"generation": section})


def test_rollout_response_len_is_what_the_plan_uses():
    from trainfit.plan import make_plan

    short = make_plan(load_card_dict({"method": "grpo", "scope": "lora", "rollout": {"response_len": 512}}))
    long = make_plan(load_card_dict({"method": "grpo", "scope": "lora", "rollout": {"response_len": 4096}}))
    assert long.rollout.demand_tokens > short.rollout.demand_tokens
    assert long.tokens_per_step > short.tokens_per_step


def test_record_writes_the_length_once(tmp_path):
    from trainfit.preflight.record import card_to_dict

    data = card_to_dict(load_card_dict({"method": "grpo", "rollout": {"response_len": 2048, "prompt_len": 256}}))
    assert "generation" not in data
    assert (data["rollout"]["response_len"], data["rollout"]["prompt_len"]) == (2048, 256)
    assert load_card_dict(data).rollout.response_len == 2048
