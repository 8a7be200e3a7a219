"""The RL no-grad passes of a LoRA policy (plan.rl_passes): PEFT's FSDP1 adapter units reach the log-prob passes, and
the reference pass runs under ``disable_adapter()`` (compute.training.forward_only_time ``adapter_enabled``)."""

from __future__ import annotations

import trainfit.plan.rl_passes as rl_passes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _seen(monkeypatch, units: bool):
    seen = {}
    real = rl_passes.forward_only_time

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.setdefault(kwargs.get("adapter_enabled", True), []).append(
            (kwargs["parallel"].fsdp_adapter_units, kwargs["adapter"] is not None, out.seconds))
        return out

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    make_plan(load_card_dict({
        "model": "Qwen/Qwen2.5-7B", "method": "grpo", "preset": "verl", "scope": "lora",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
        "lora": {"rank": 32, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]},
        "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp1", "fsdp_adapter_units": units},
        "rollout": {"prompts_per_step": 16, "num_generations": 4, "prompt_len": 256, "response_len": 512},
        "roles": {"kl_coef": 0.001},
    }))
    return seen


def test_adapter_units_reach_the_policy_passes_and_the_reference_runs_disabled(monkeypatch):
    on, off = _seen(monkeypatch, True), _seen(monkeypatch, False)
    # the old policy's pass: the adapter enabled, the card's adapter units, and their hooks cost time
    assert on[True][0][:2] == (True, True) and off[True][0][:2] == (False, True)
    assert on[True][0][2] > off[True][0][2]
    # the reference (the policy under disable_adapter()): handed the adapter, run without it, no adapter unit runs
    assert on[False][0][1] and on[False][0][2] == off[False][0][2]
