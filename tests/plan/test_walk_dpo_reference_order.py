"""``plan.walk.dpo_held_after_forward``: TRL runs the DPO policy's forward and log-softmax before the no-grad
reference forward, so the reference pass's peak stacks on the policy's saved activations and logits."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

BASE = {"model": "Qwen/Qwen3-8B", "method": "dpo", "scope": "lora", "hardware": {"gpu": "h100", "gpus_per_node": 1},
        "batch": {"micro_batch_size": 2, "seq_len": 2048}}


def _phases(**over):
    plan = make_plan(load_card_dict({**BASE, **over}))
    return {p.phase.value: p for p in plan.phases}, [p.phase.value for p in plan.phases]


def test_reference_pass_runs_after_the_policy_forward():
    phases, order = _phases()
    assert order == ["load", "forward", "ref_logprob", "backward", "optimizer_step"]
    ref, fwd = phases["ref_logprob"].components, phases["forward"].components
    # the policy's saved activations and its full logits (outputs.logits + saved log-softmax rows) are alive
    assert ref["activations"] == fwd["activations"] > 0
    assert ref["logits"] == fwd["logits"] > 0
    assert ref["logprob_pass"] > 0
    # so the reference pass is the step's peak here (Qwen3-8B LoRA, 2 x 2 sequences of 2048 tokens: ~26.3 GiB)
    assert phases["ref_logprob"].allocated > phases["forward"].allocated
    assert phases["ref_logprob"].allocated / 2**30 == pytest.approx(26.3, abs=0.3)


def test_precomputed_reference_has_no_reference_phase_and_the_same_policy_phases():
    live, _ = _phases()
    pre, order = _phases(roles={"reference": "precomputed"})
    assert order == ["load", "forward", "backward", "optimizer_step"]
    for name in order:
        assert pre[name].allocated == live[name].allocated


def test_full_scope_reference_holds_the_frozen_copy_and_the_policy_state():
    phases, _ = _phases(scope="full", hardware={"gpu": "h100", "gpus_per_node": 8}, parallel={"strategy": "zero3"})
    ref, fwd = phases["ref_logprob"].components, phases["forward"].components
    assert ref["reference_weights"] == fwd["reference_weights"] > 0
    assert ref["activations"] == fwd["activations"]
    assert ref["optimizer_states"] == fwd["optimizer_states"] > 0
