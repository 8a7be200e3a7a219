"""A policy trained under FSDP's parameter offload keeps its shards on the host, so its old log-prob pass copies
each unit's shard to the GPU before the unit's all-gather, every micro-batch
(``plan.rl_passes._policy_host_shard_bytes_per_s``, FSDP2 ``FSDPParam.all_gather_inputs``)."""

from __future__ import annotations

import pytest

import trainfit.plan.rl_passes as rl_passes
from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

RATES = default_rates(resolve_gpu("h100-sxm"))


def _card(offload: str = "params_and_optimizer", strategy: str = "fsdp", weights: str | None = None):
    return load_card_dict({
        "model": "Qwen/Qwen3-8B", "method": "grpo", "preset": "skyrl",
        "roles": {"kl_coef": 0.0},  # no KL term: the old log-prob pass alone (SkyRL's default has one)
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 3},
        "parallel": {"strategy": strategy, **({"fsdp_version": "fsdp2"} if strategy == "fsdp" else {}),
                     "offload": offload},
        **({"precision": {"weights": weights}} if weights else {}),
        "batch": {"micro_batch_size": 1},
        "rollout": {"placement": "split", "nodes": 1, "tensor_parallel": 8, "prompts_per_step": 64,
                    "num_generations": 8, "prompt_len": 512, "response_len": 2048},
    })


def test_the_rate_is_the_pinned_copy_of_every_training_gpu_of_the_node():
    # 8 training GPUs a node: min(PCIe 51 GB/s, 200 GB/s / 8) = 25 GB/s of bf16 shards
    assert rl_passes._policy_host_shard_bytes_per_s(_card(), RATES) == pytest.approx(25e9)
    # fp32 shards move twice the bytes of the 16-bit gather the pass counts
    assert rl_passes._policy_host_shard_bytes_per_s(_card(weights="fp32"), RATES) == pytest.approx(12.5e9)


@pytest.mark.parametrize(("offload", "strategy"), [("optimizer", "fsdp"), ("none", "fsdp"),
                                                   ("params_and_optimizer", "zero3")])
def test_no_copies_without_fsdps_parameter_offload(offload, strategy):
    assert rl_passes._policy_host_shard_bytes_per_s(_card(offload, strategy), RATES) == 0.0


def test_the_old_logprob_pass_gets_them(monkeypatch):
    seen = {}
    real = rl_passes.forward_only_time

    def spy(*args, **kwargs):
        seen[len(seen)] = kwargs["host_shard_bytes_per_s"]
        return real(*args, **kwargs)

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    off = make_plan(_card())
    assert "old_logprob" in {p.name for p in off.time.phases}
    assert seen and all(v == pytest.approx(25e9) for v in seen.values())
    monkeypatch.setattr(rl_passes, "forward_only_time", real)
    # the same card with the copies' rate set to 0: only the term moves
    monkeypatch.setattr(rl_passes, "_policy_host_shard_bytes_per_s", lambda card, r: 0.0)
    kept = make_plan(_card())
    lp = {p.name: p.seconds for p in off.time.phases}
    without = {p.name: p.seconds for p in kept.time.phases}
    assert lp["old_logprob"] > without["old_logprob"]
    assert {k: v for k, v in lp.items() if k != "old_logprob"} == {
        k: v for k, v in without.items() if k != "old_logprob"}


def test_verls_fsdp_actor_copies_nothing():
    # verl's FSDP workers never wrap the actor with FSDP's CPU offload (plan.time.torch_fsdp_cpu_offload)
    card = load_card_dict({**_card().model_dump(mode="json", exclude_unset=True), "preset": "verl"})
    assert rl_passes._policy_host_shard_bytes_per_s(card, RATES) == 0.0


def test_a_lora_policys_disabled_adapter_reference_pass_copies_them_too(monkeypatch):
    # the reference of a LoRA policy is the policy module under disable_adapter(): the same host shards
    card = load_card_dict({**_card().model_dump(mode="json", exclude_unset=True), "scope": "lora",
                           "roles": {"reference": "lora_disabled", "kl_coef": 0.001}})
    seen = []
    real = rl_passes.forward_only_time

    def spy(*args, **kwargs):
        seen.append(kwargs["host_shard_bytes_per_s"])
        return real(*args, **kwargs)

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    phases = {p.name for p in make_plan(card).time.phases}
    assert {"old_logprob", "ref_logprob"} <= phases
    assert len(seen) == 2 and all(v == pytest.approx(25e9) for v in seen)
