"""rollout.prompt_len_mean: time uses the mean prompt, memory keeps rollout.prompt_len (the longest)."""

from __future__ import annotations

import json
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.report.json_report import plan_to_dict
from trainfit.spec.card import load_card_dict

TIME_KEYS = ("step_seconds", "step_time_parts", "time", "cost", "assumptions", "card", "suggestions")
"""plan --json keys that may change with the mean prompt; every other key (memory, KV, rollout engine) may not."""
PHASE_TIME_KEYS = ("seconds", "bound")
"""The time fields of a plan --json memory phase."""


def _card(*, prompt_mean: int | None = None, preset: str | None = "verl", prompt_len: int = 2048) -> dict:
    ro = {"placement": "colocate", "prompts_per_step": 32, "num_generations": 8, "prompt_len": prompt_len,
          "response_len": 2048, "response_len_mean": 600, "mini_batches": 1}
    if prompt_mean is not None:
        ro["prompt_len_mean"] = prompt_mean
    card = {"model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp"}, "batch": {"micro_batch_size": 4}, "rollout": ro}
    if preset:
        card["preset"] = preset
    return card


@lru_cache(maxsize=32)
def _plan(prompt_mean: int | None, preset: str | None = "verl"):
    return make_plan(load_card_dict(_card(prompt_mean=prompt_mean, preset=preset)))


def _phase(plan, name: str) -> float:
    return next(p.seconds for p in plan.time.phases if p.name == name)


@pytest.mark.parametrize(("value", "match"), [
    (2049, r"rollout\.prompt_len_mean: 2049 is more than the longest prompt \(rollout\.prompt_len 2048\)"),
    (0, r"rollout\.prompt_len_mean"),
])
def test_a_bad_mean_is_refused_naming_the_field(value, match):
    with pytest.raises(CardError, match=match) as err:
        load_card_dict(_card(prompt_mean=value))
    assert "\n" not in str(err.value)


def test_the_mean_equal_to_the_max_is_todays_plan():
    assert _plan(2048).step_seconds == pytest.approx(_plan(None).step_seconds, rel=1e-12)


def test_packed_passes_and_generation_use_the_mean_memory_does_not_move():
    short, full = _plan(150), _plan(None)
    assert short.tokens_per_step == pytest.approx(32 * 8 * (150 + 600))
    assert full.tokens_per_step == pytest.approx(32 * 8 * (2048 + 600))
    for name in ("generation", "old_logprob", "actor_update"):
        assert _phase(short, name) < _phase(full, name), name
    a, b = plan_to_dict(short), plan_to_dict(full)
    for d in (a, b):  # a memory phase carries its timed phase's seconds and bound (old_logprob here): time fields
        d["phases"] = [{k: v for k, v in ph.items() if k not in PHASE_TIME_KEYS} for ph in d["phases"]]
    for key in a.keys() - set(TIME_KEYS):
        assert json.dumps(a[key], sort_keys=True) == json.dumps(b[key], sort_keys=True), key
    assert a["peak_gpu_bytes"] == b["peak_gpu_bytes"] and a["phases"]


def test_padded_trainer_keeps_the_max_for_its_passes():
    """Without a packing preset (TRL pads to prompt + max response) the log-prob and update passes do not change;
    the vLLM engine still prefills and attends to the real prompt."""
    short, full = _plan(150, None), _plan(None, None)
    assert _phase(short, "actor_update") == pytest.approx(_phase(full, "actor_update"), rel=1e-12)
    assert _phase(short, "generation") < _phase(full, "generation")


def test_the_assumption_is_stated_either_way():
    assert any("rollout.prompt_len_mean 150" in a and "rollout.prompt_len 2048" in a for a in _plan(150).assumptions)
    assert any("every prompt at rollout.prompt_len (2048" in a for a in _plan(None).assumptions)


def test_generation_time_refuses_a_mean_above_the_max():
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.catalog.models import from_catalog
    from trainfit.compute.flops import matmul_params
    from trainfit.compute.generation import generation_time
    from trainfit.compute.rates import default_rates

    spec = from_catalog("Qwen/Qwen2.5-0.5B")
    args = dict(spec=spec, matmul_params=matmul_params(spec), rates=default_rates(resolve_gpu("h100-sxm")), tp=1,
                prompts=16, samples_per_prompt=4, prompt_len=512, response_len_max=512, weight_bytes=1e9,
                kv_bytes_per_token=1e4, max_num_seqs=64)
    with pytest.raises(CardError, match="prompt_len_mean"):
        generation_time(**args, prompt_len_mean=513.0)
    same = generation_time(**args, prompt_len_mean=512.0)
    assert same.total_s == generation_time(**args).total_s
    assert generation_time(**args, prompt_len_mean=100.0).prefill_s < same.prefill_s


@settings(max_examples=6, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=2048), min_size=2, max_size=2, unique=True))
def test_step_time_is_monotone_in_the_mean_prompt(means):
    lo, hi = sorted(means)
    assert _plan(lo).step_seconds <= _plan(hi).step_seconds
