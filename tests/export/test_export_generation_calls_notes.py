"""``rollout.generation_calls``: only TRL before 0.17 splits a step's generation into several calls; the RL exporters
whose frameworks generate the step's prompts in one call say that the field is not written, once, by its dotted key."""

from __future__ import annotations

import pytest

from trainfit.export import export
from trainfit.spec.card import load_card_dict


def _card(target: str, calls: int):
    return load_card_dict({
        "model": "Qwen/Qwen3-8B", "method": "grpo", "preset": target,
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
        "rollout": {"tensor_parallel": 2, "prompts_per_step": 16, "num_generations": 4, "prompt_len": 256,
                    "response_len": 2048, "generation_calls": calls}})


@pytest.mark.parametrize("target", ["verl", "nemo-rl", "openrlhf"])
def test_several_generation_calls_are_named_as_not_written(target):
    notes = export(_card(target, 4), target).notes
    named = [n for n in notes if "rollout.generation_calls" in n]
    assert len(named) == 1, notes
    assert "one call" in named[0] and "not written" in named[0]


@pytest.mark.parametrize("target", ["verl", "nemo-rl", "openrlhf"])
def test_one_generation_call_needs_no_note(target):
    assert not any("generation_calls" in n for n in export(_card(target, 1), target).notes)
