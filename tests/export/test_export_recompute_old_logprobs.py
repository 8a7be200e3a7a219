"""``rollout.recompute_old_logprobs`` through the exporters: no target has a setting for the old policy's log-prob
pass (verl, OpenRLHF and NeMo RL always run it, TRL with vLLM's importance-sampling correction or num_iterations > 1:
``methods.roles.trl_old_logprob_pass``), so every RL target names the field among what it loses, saying what the
framework does instead."""

import pytest
from export_cards import GRPO_LORA, _card, assert_lost_fields_named

from trainfit.export import TARGETS, export

FIELD = "rollout.recompute_old_logprobs"


@pytest.mark.parametrize("value", [True, False])
@pytest.mark.parametrize("target", TARGETS)
def test_every_target_carries_or_names_the_field(target, value):
    assert_lost_fields_named(_card(GRPO_LORA, rollout__recompute_old_logprobs=value), target, (FIELD,))


@pytest.mark.parametrize("target", ["verl", "openrlhf", "nemo-rl"])
def test_frameworks_that_always_recompute_say_so(target):
    e = export(_card(GRPO_LORA, rollout__recompute_old_logprobs=False), target)
    assert any(n.startswith(FIELD) and "every step" in n for n in e.notes), e.notes


@pytest.mark.parametrize("engine,iterations,does", [("hf", 1, "does not"), ("hf", 2, "it does"), ("vllm", 1, "it does")])
def test_trl_recomputes_with_vllm_or_several_iterations(engine, iterations, does):
    e = export(_card(GRPO_LORA, rollout__recompute_old_logprobs=True, rollout__num_iterations=iterations,
                     rollout__engine=engine), "trl")
    assert any(n.startswith(FIELD) and does in n for n in e.notes), e.notes


def test_unset_field_adds_no_note():
    for target in ("trl", "verl"):
        assert not any(n.startswith(FIELD) for n in export(_card(GRPO_LORA), target).notes)
