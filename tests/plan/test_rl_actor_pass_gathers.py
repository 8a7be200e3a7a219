"""The no-grad passes that run the actor's own sharded parameters (the old policy's log-probs, a ``lora_disabled``
reference) all-gather them in the dtype they are stored in, as the training pass does: a QLoRA actor's nf4 shards
plus its adapters, not a bf16 copy of the model (plan.rl_passes._runs_actor_weights,
plan.time.gathered_weight_bytes_of). Reproducer: seed 000's GRPO 27B on 4 RTX 4090s, QLoRA, with the old-policy
pass and a KL-weighted reference as the adapters-disabled actor."""

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.plan import make_plan
from trainfit.plan import rl_passes
from trainfit.plan.rl_common import bf16_engine_weight_bytes
from trainfit.plan.time import gathered_weight_bytes_of
from trainfit.scenarios import grpo_27b
from trainfit.spec.card import load_card_dict
from trainfit.units import GIB


def _card(scope: str):
    d = grpo_27b(gpus=4, scope=scope, placement="colocate", loss={"chunked": True},
                 parallel={"offload": "params_and_optimizer"},
                 rollout={"gpu_memory_utilization": 0.7, "sleep_level": 1, "weight_sync": "per_parameter",
                          "recompute_old_logprobs": True},
                 roles={"reference": "lora_disabled", "kl_coef": 0.04})
    return load_card_dict(d)


@pytest.fixture
def gathered(monkeypatch):
    seen: list[float] = []
    real = rl_passes.forward_only_time

    def spy(*args, **kw):
        seen.append(kw["gathered_weight_bytes"])
        return real(*args, **kw)

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    return seen


def test_qlora_actor_passes_gather_the_nf4_shards(gathered):
    card = _card("qlora")
    spec = resolve_model(card.model)
    p = make_plan(card)
    names = [ph.name for ph in p.time.phases]
    assert "old_logprob" in names and "ref_logprob" in names
    w = gathered_weight_bytes_of(card, spec)
    stored = w.base + w.adapter
    # 26.9B parameters: ~16.4 GiB in nf4 (+ adapters) against ~50.1 GiB in bf16
    assert stored < 0.4 * bf16_engine_weight_bytes(spec)
    assert 15 * GIB < stored < 19 * GIB
    assert gathered and all(g == pytest.approx(stored) for g in gathered)


def test_qlora_old_logprob_pass_is_faster_than_a_bf16_gather(monkeypatch):
    card = _card("qlora")
    fast = {ph.name: ph.seconds for ph in make_plan(card).time.phases}
    spec = resolve_model(card.model)
    bf16 = bf16_engine_weight_bytes(spec)
    monkeypatch.setattr(rl_passes, "gathered_weight_bytes_of",
                        lambda card_, spec_: type(gathered_weight_bytes_of(card_, spec_))(base=bf16, adapter=0.0))
    slow = {ph.name: ph.seconds for ph in make_plan(card).time.phases}
    # 33.7 GiB less per pass over 4090s' PCIe (no P2P): tens of seconds
    assert slow["old_logprob"] - fast["old_logprob"] > 10.0
    assert slow["ref_logprob"] - fast["ref_logprob"] > 10.0


def _sync_gather_s(scope: str) -> float:
    d = grpo_27b(gpus=4, scope=scope, placement="colocate", loss={"chunked": True},
                 parallel={"offload": "params_and_optimizer"},
                 rollout={"gpu_memory_utilization": 0.7, "sleep_level": 1, "weight_sync": "per_parameter"})
    p = make_plan(load_card_dict(d))
    return next(ph for ph in p.time.phases if ph.name == "weight_sync").terms["gather"]


def test_trl_weight_sync_gathers_the_stored_nf4_shards():
    # TRL's _iter_named_params gathers the PEFT model's own (packed 4-bit) parameters before merging
    # (trl/generation/vllm_generation.py l.443-469, trl 1.16.0): the gather moves nf4 + adapters, a third of bf16
    card = load_card_dict(grpo_27b(gpus=4, scope="qlora", placement="colocate"))
    spec = resolve_model(card.model)
    w = gathered_weight_bytes_of(card, spec)
    ratio = (w.base + w.adapter) / bf16_engine_weight_bytes(spec)
    assert _sync_gather_s("qlora") == pytest.approx(ratio * _sync_gather_s("lora"), rel=0.05)
