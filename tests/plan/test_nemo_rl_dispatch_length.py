"""NeMo RL's single-controller transfer prices the batch the driver sends: right-padded to its longest prompt +
response (``batched_message_log_to_flat_message``), planned at the card's longest prompt + longest response, so
the mean prompt (``rollout.prompt_len_mean``) does not change it."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _plan(prompt_mean: int | None):
    ro = {"placement": "colocate", "prompts_per_step": 32, "num_generations": 8, "prompt_len": 2048,
          "response_len": 2048, "response_len_mean": 600, "mini_batches": 1}
    if prompt_mean is not None:
        ro["prompt_len_mean"] = prompt_mean
    return make_plan(load_card_dict({
        "model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "scope": "full", "preset": "nemo-rl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
        "parallel": {"strategy": "fsdp"}, "batch": {"micro_batch_size": 4}, "rollout": ro}))


def test_the_sent_batch_is_padded_to_the_longest_prompt_not_the_mean():
    short, full = _plan(150), _plan(None)
    terms = {p.name: p.terms.get("controller_transfer") for p in short.time.phases}
    assert terms["actor_update"] and terms["old_logprob"]
    for p in full.time.phases:
        if p.name in ("actor_update", "old_logprob"):
            assert terms[p.name] == pytest.approx(p.terms["controller_transfer"], rel=1e-12)
    assert any("x 4096-token batch" in a for a in short.time.assumptions)
