"""roles.reward_model_dtype, precision.autocast and precision.tf32 (plan-relevant: an fp32 reward model's 4 B weights and, without
autocast, its fp32 GEMMs) are among the fields an export compares: a target file that does not carry them names them
in its notes, and a card at their defaults needs no note."""

from __future__ import annotations

import pytest

from trainfit.export import export
from trainfit.spec.card import load_card_dict


def _card(target: str, stated: bool):
    return load_card_dict({
        "model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "preset": target,
        "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1, "nodes": 1},
        "roles": {"reward_model": "google/gemma-2b", **({"reward_model_dtype": "fp32"} if stated else {})},
        **({"precision": {"autocast": False, "tf32": True}} if stated else {}),
        "rollout": {"prompts_per_step": 16, "num_generations": 4, "prompt_len": 256, "response_len": 256}})


@pytest.mark.parametrize("target", ["trl", "verl"])
def test_the_stated_fields_are_named_when_the_file_drops_them(target):
    notes = " ".join(export(_card(target, True), target).notes)
    # the exporter groups a section's lost fields: "precision.* (2: autocast, tf32)"
    assert "roles.reward_model_dtype" in notes and "precision.* (2: autocast, tf32)" in notes, notes


@pytest.mark.parametrize("target", ["trl", "verl"])
def test_the_defaults_need_no_note(target):
    notes = " ".join(export(_card(target, False), target).notes)
    assert not any(k in notes for k in ("reward_model_dtype", "autocast", "tf32")), notes
