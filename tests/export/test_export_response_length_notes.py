"""The RL exporters' note for the task's response lengths spells the full dotted keys, so the generic 'reads back as'
line (``export.export``) does not repeat it for ``rollout.response_clip_ratio``."""

from __future__ import annotations

import pytest

from trainfit.export import export
from trainfit.spec.card import load_card_dict


@pytest.mark.parametrize("target", ["verl", "nemo-rl"])
def test_a_clip_ratio_is_named_once_by_its_dotted_key(target):
    card = load_card_dict({
        "model": "Qwen/Qwen3-8B", "method": "grpo", "preset": target,
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
        "rollout": {"tensor_parallel": 2, "prompts_per_step": 16, "num_generations": 4, "prompt_len": 256,
                    "response_len": 2048, "response_clip_ratio": 0.4}})
    notes = export(card, target).notes
    assert any("rollout.response_clip_ratio" in n and "a property of the task" in n for n in notes)
    assert not any("response_clip_ratio" in n and "reads back as" in n for n in notes)


@pytest.mark.parametrize("target", ["verl", "nemo-rl"])
def test_a_batchs_longest_response_is_named_once_by_its_dotted_key(target):
    card = load_card_dict({
        "model": "Qwen/Qwen3-8B", "method": "grpo", "preset": target,
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
        "rollout": {"tensor_parallel": 2, "prompts_per_step": 16, "num_generations": 4, "prompt_len": 256,
                    "response_len": 2048, "response_len_mean": 300, "response_clip_ratio": 0.0,
                    "response_len_batch_max": 900}})
    notes = export(card, target).notes
    assert any("rollout.response_len_batch_max" in n and "a property of the task" in n for n in notes)
    assert not any("response_len_batch_max" in n and "reads back as" in n for n in notes)
