"""``rollout.engine: hf`` under a sharded trainer: TRL generates on ``self.model_wrapped`` inside
``unwrap_model_for_generation`` and ``summon_full_params(self.model_wrapped, recurse=False)`` (trl 1.16.0,
trl/trainer/grpo_trainer.py l.1861-1875). Under FSDP1 that gathers the root unit alone, under FSDP2 nothing
(trl/distributed.py l.74-91); only ZeRO-3 with ``ds3_gather_for_generation`` (its default) gathers the whole model,
once per call (trl/models/utils.py l.141-150). So under FULL_SHARD / HYBRID_SHARD every prefill and decode forward
runs each decoder layer unit's pre-forward all-gather and hooks (``compute.static_generation``)."""

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute import collectives as coll
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.compute.static_generation import static_batch_generation_time
from trainfit.plan import make_plan
from trainfit.scenarios import ppo_tier
from trainfit.spec.card import load_card_dict
from trainfit.spec.dotted import merge_under


def _phases(card_dict):
    p = make_plan(load_card_dict(card_dict))
    return {ph.name: ph for ph in p.time.phases}


def test_every_forward_pays_the_layer_gathers_its_compute_does_not_hide():
    spec = resolve_model("Qwen/Qwen3-8B")
    r = default_rates(resolve_gpu("a100-40gb"))
    kw = dict(spec=spec, matmul_params=matmul_params(spec), rates=r, calls=1, prompt_len_padded=512,
              weight_bytes=16e9, kv_bytes_per_token=147456.0, batch_sequences=8, response_len_longest=1024)
    plain = static_batch_generation_time(**kw)
    # a slow ring: every layer's gather outlasts the layer's compute, so most of it is exposed
    gathers = dict(layers=spec.num_layers, layer_weight_bytes=16e9 / spec.num_layers, layer_grad_bytes=0.0,
                   root_weight_bytes=0.0, root_grad_bytes=0.0, ranks=8, bus_bytes_per_s=20e9, micro_steps=1)
    g = static_batch_generation_time(layer_gathers=gathers, **kw)
    one_step_floor = coll.exposed_forward_gathers(**gathers, layer_forward_s=1e9)  # the first layer's, never hidden
    assert g.gathers_s >= (1024 + 1) * one_step_floor
    assert g.total_s == pytest.approx(plain.total_s + g.gathers_s)
    assert plain.gathers_s == 0.0


def test_fsdp_generation_gathers_per_forward_and_the_sync_gathers_nothing():
    fsdp2 = _phases(ppo_tier("fsdp_ckpt"))
    assert fsdp2["generation"].terms["layer_gathers"] > 0.0
    assert fsdp2["generation"].terms["fsdp_hooks"] > 0.0
    assert fsdp2["weight_sync"].seconds == 0.0  # FSDP2: summon_full_params is a no-op, no whole-model gather
    fsdp1 = _phases(merge_under(ppo_tier("fsdp_ckpt"), {"parallel": {"fsdp_version": "fsdp1"}}))
    assert fsdp1["weight_sync"].seconds == 0.0
    assert fsdp1["generation"].terms["root_gather"] > 0.0  # summon_full_params(recurse=False): the root unit


def test_the_calls_note_says_where_the_gathers_are():
    card = merge_under(ppo_tier("fsdp_ckpt"), {"rollout": {"generation_calls": 2}})
    notes = " ".join(make_plan(load_card_dict(card)).time.assumptions)
    assert "gathered in every forward of every call" in notes and "gathers its weights for every call" not in notes


@pytest.mark.parametrize("strategy", ["zero3", "fsdp_grad_op"])
def test_a_model_gathered_once_per_call_pays_no_gather_per_forward(strategy):
    ph = _phases(merge_under(ppo_tier("fsdp_ckpt"), {"parallel": {"strategy": strategy}}))
    assert ph["generation"].terms.get("layer_gathers", 0.0) == 0.0
    assert ph["weight_sync"].terms["gather"] > 0.0


def test_an_unsharded_model_gathers_nothing():
    ph = _phases(ppo_tier("unoptimised"))
    assert ph["generation"].terms.get("layer_gathers", 0.0) == 0.0
    assert ph["generation"].terms.get("fsdp_hooks", 0.0) == 0.0
    assert ph["weight_sync"].seconds == 0.0
