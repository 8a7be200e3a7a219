"""FSDP's hook host seconds per unit by version and mode (``rates.FSDP_HOOK_RATIOS``, measured with
``tools/measure_fsdp_backward_hooks.py``): FSDP1 or FSDP2 (``parallel.fsdp_version``), a forward that records autograd
(training, recompute) or not (log-prob passes), and the backward."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import rates as rt
from trainfit.compute.training import (
    Parallel,
    forward_only_time,
    fsdp_unit_host_seconds,
    fsdp_units,
    train_step_time,
)
from trainfit.spec.card import load_card_dict

H100 = rt.default_rates(resolve_gpu("h100-sxm"))
SMALL = from_catalog("Qwen/Qwen2.5-0.5B")


def test_the_rates_are_the_measured_ratios_to_the_fsdp1_no_grad_forward():
    us = {k: round(v * 355) for k, v in rt.FSDP_HOOK_RATIOS.items()}
    assert us == {"fsdp1_grad_forward": 443, "fsdp1_backward": 394, "fsdp2_forward": 411, "fsdp2_grad_forward": 559,
                  "fsdp2_backward": 629}
    assert fsdp_unit_host_seconds(fsdp2=False, grad=False) == (rt.FSDP_UNIT_FORWARD_HOST_S, rt.FSDP_UNIT_BACKWARD_HOST_S)
    assert fsdp_unit_host_seconds(fsdp2=False, grad=True)[0] == rt.FSDP_UNIT_GRAD_FORWARD_HOST_S
    assert fsdp_unit_host_seconds(fsdp2=True, grad=False) == (rt.FSDP2_UNIT_FORWARD_HOST_S,
                                                              rt.FSDP2_UNIT_BACKWARD_HOST_S)
    assert fsdp_unit_host_seconds(fsdp2=True, grad=True)[0] == rt.FSDP2_UNIT_GRAD_FORWARD_HOST_S
    for v in (False, True):  # grad mode costs more than no-grad; FSDP2 more than FSDP1 in every mode
        assert fsdp_unit_host_seconds(fsdp2=v, grad=True)[0] > fsdp_unit_host_seconds(fsdp2=v, grad=False)[0]
    for g in (False, True):
        assert all(a > b for a, b in zip(fsdp_unit_host_seconds(fsdp2=True, grad=g),
                                         fsdp_unit_host_seconds(fsdp2=False, grad=g)))


KW = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=1, trained_params=5e8, trained_tensors=290,
          gathered_weight_bytes=1e9, gradient_checkpointing=True)


def _host(t, name):
    return next(p for p in t.phases if p.name == name).terms["host_launch"]


@pytest.mark.parametrize("fsdp2", [False, True])
def test_training_pays_its_version_grad_forward_and_backward_hooks(fsdp2):
    single = train_step_time(SMALL, **KW)
    t = train_step_time(SMALL, parallel=Parallel(strategy="fsdp", ranks=8, gpus_per_node=8, fsdp2=fsdp2), **KW)
    fwd_s, bwd_s = fsdp_unit_host_seconds(fsdp2=fsdp2, grad=True)
    units = fsdp_units(SMALL)
    assert _host(t, "forward") - _host(single, "forward") == pytest.approx(units * fwd_s)
    assert _host(t, "recompute") - _host(single, "recompute") == pytest.approx(units * fwd_s)
    assert _host(t, "backward") - _host(single, "backward") == pytest.approx(units * bwd_s)


@pytest.mark.parametrize("fsdp2", [False, True])
def test_log_prob_passes_pay_the_no_grad_rate_of_their_version(fsdp2):
    kw = dict(rates=H100, micro_batch_size=1, seq_len=256, micro_steps=3)
    plain = forward_only_time(SMALL, **kw)
    hooked = forward_only_time(SMALL, **kw, hooked_units=25, parallel=Parallel(strategy="fsdp", ranks=1, fsdp2=fsdp2))
    assert hooked.host_s - plain.host_s == pytest.approx(3 * 25 * fsdp_unit_host_seconds(fsdp2=fsdp2, grad=False)[0])


@pytest.mark.parametrize("version", ["fsdp1", "fsdp2"])
def test_the_plans_pass_the_card_version(monkeypatch, version):
    import trainfit.plan.rl_passes as rl_passes
    import trainfit.plan.time as plan_time
    from trainfit.plan import make_plan

    seen = []
    real_train, real_fwd = plan_time.train_step_time, rl_passes.forward_only_time

    def spy_train(*a, **k):
        seen.append(k["parallel"].fsdp2)
        return real_train(*a, **k)

    def spy_fwd(*a, **k):
        seen.append(k["parallel"].fsdp2)
        return real_fwd(*a, **k)

    monkeypatch.setattr(plan_time, "train_step_time", spy_train)
    monkeypatch.setattr(rl_passes, "forward_only_time", spy_fwd)
    make_plan(load_card_dict({
        "model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": {"strategy": "fsdp", "fsdp_version": version},
        "roles": {"kl_coef": 0.001},
        "rollout": {"num_generations": 4, "prompts_per_step": 16, "prompt_len": 128, "response_len": 512}}))
    assert len(seen) >= 2 and set(seen) == {version == "fsdp2"}
