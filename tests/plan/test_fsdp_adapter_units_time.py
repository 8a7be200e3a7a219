"""parallel.fsdp_adapter_units in the plan: PEFT's adapter units under FSDP1 cost the step time of their hooks and of
the rate limiter's pacing (compute.collectives.rate_limited_adapter_units_seconds), and no memory."""

from __future__ import annotations

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _plan(units: bool, micro_batch_size: int = 2):
    return make_plan(load_card_dict({
        "model": "mistralai/Mistral-7B-v0.1", "scope": "lora", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 2},
        "lora": {"rank": 16, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"], "dropout": 0.1},
        "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp1", "gradient_checkpointing": True,
                     "fsdp_adapter_units": units},
        "batch": {"micro_batch_size": micro_batch_size, "seq_len": 4096}}))


def test_adapter_units_add_time_not_memory():
    off, on = _plan(False), _plan(True)
    assert 0.01 < on.step_seconds - off.step_seconds < 0.1 * off.step_seconds
    assert on.peak.device == off.peak.device


def test_trl_preset_plans_adapter_units_by_default():
    """The HF Trainer (TRL) wraps a PEFT model's adapters as FSDP1 units: a trl card with the field null plans as
    true, and an explicit false is kept."""
    def plan(**kw):
        d = {"model": "mistralai/Mistral-7B-v0.1", "scope": "lora", "preset": "trl",
             "hardware": {"gpu": "a100-80gb", "gpus_per_node": 2},
             "lora": {"rank": 16, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"], "dropout": 0.1},
             "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp1", "gradient_checkpointing": True, **kw},
             "batch": {"micro_batch_size": 2, "seq_len": 4096}}
        return make_plan(load_card_dict(d))
    default, on, off = plan(), plan(fsdp_adapter_units=True), plan(fsdp_adapter_units=False)
    assert default.step_seconds == on.step_seconds > off.step_seconds
