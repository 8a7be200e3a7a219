"""Random-weight routers (``RunCard.parallel.moe_experts_hit``, ``compute.expert_loop.hit_experts``): the per-expert
loops run, launch and sync only the experts that get tokens, the routed rows spread over them; the grouped GEMMs and
the default card are unchanged; the field is refused, in one line naming it and what is allowed, where no loop over
the hit experts runs."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute import expert_loop as L
from trainfit.compute.inventory import Adapter, step_inventory
from trainfit.errors import CardError
from trainfit.plan import check_model_options, make_plan
from trainfit.spec.card import load_card_dict

MOE = from_catalog("Qwen/Qwen3-30B-A3B")
T = 2048


def _n_moe(spec):
    return sum(1 for i in range(spec.num_layers) if spec.moe.is_moe_layer(i))


def _expert_gemms(inv):
    return [g for g in inv.gemms if g.name in ("gate_up_proj", "down_proj")]


def test_hit_experts_is_the_share_of_the_local_experts_at_least_one():
    assert L.hit_experts(local_experts=128, hit_share=None) == 128.0
    assert L.hit_experts(local_experts=128, hit_share=0.25) == 32.0
    assert L.hit_experts(local_experts=8, hit_share=0.01) == 1.0


@pytest.mark.parametrize("stacked", [False, True])
def test_loop_runs_only_the_hit_experts_with_their_rows_and_the_same_flops(stacked):
    kw = dict(micro_batch_size=1, seq_len=T, expert_loop=True, expert_loop_stacked=stacked)
    every = step_inventory(MOE, **kw)
    quarter = step_inventory(MOE, expert_hit_share=0.25, **kw)
    e, n, k = MOE.moe.num_experts, _n_moe(MOE), MOE.moe.experts_per_token
    per_expert = L.LOOP_V5_EXPERT_LINEARS if stacked else L.LOOP_EXPERT_LINEARS
    gq = _expert_gemms(quarter.layers_forward)
    assert sum(g.count for g in gq) == pytest.approx(per_expert * e / 4 * n)
    assert all(g.m == pytest.approx(T * k / (e / 4)) for g in gq)  # four times the rows each

    def flops(inv):
        return sum(2 * g.m * g.n * g.k * g.count * g.groups for g in _expert_gemms(inv))

    assert flops(quarter.layers_forward) == pytest.approx(flops(every.layers_forward))
    syncs = L.loop_v5_forward_syncs if stacked else L.loop_forward_syncs
    assert quarter.layers_forward.host_syncs == pytest.approx(syncs(local_experts=e / 4) * n)
    assert every.layers_forward.host_syncs == pytest.approx(syncs(local_experts=e) * n)
    assert quarter.layers_forward.kernels < every.layers_forward.kernels
    assert quarter.layers_backward.memory_bytes < every.layers_backward.memory_bytes  # the per-expert input grads


def test_stacked_gradient_fills_follow_the_hit_experts():
    lora = Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj"))
    kw = dict(micro_batch_size=1, seq_len=T, expert_loop=True, expert_loop_stacked=True, adapter=lora)
    every = step_inventory(MOE, **kw)
    quarter = step_inventory(MOE, expert_hit_share=0.25, **kw)
    # the fills and adds of the whole stack per hit expert dominate the loop's backward bytes
    assert quarter.layers_backward.memory_bytes < 0.4 * every.layers_backward.memory_bytes


def test_v4_lora_per_expert_adapter_calls_follow_the_hit_experts():
    lora = Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj", "gate"),
                   transformers_v4=True)
    kw = dict(micro_batch_size=1, seq_len=T, expert_loop=True, adapter=lora)
    every = step_inventory(MOE, **kw)
    half = step_inventory(MOE, expert_hit_share=0.5, **kw)
    a_every = sum(g.count for g in every.layers_forward.gemms if g.name in ("gate_up_proj.A", "down_proj.A"))
    a_half = sum(g.count for g in half.layers_forward.gemms if g.name in ("gate_up_proj.A", "down_proj.A"))
    assert a_every > 0 and a_half == pytest.approx(a_every / 2)


def test_grouped_and_loop_all_ignore_the_share():
    assert (step_inventory(MOE, micro_batch_size=1, seq_len=T, expert_hit_share=0.25)
            == step_inventory(MOE, micro_batch_size=1, seq_len=T))
    kw = dict(micro_batch_size=1, seq_len=T, expert_loop=True, expert_loop_every=True)
    assert step_inventory(MOE, expert_hit_share=0.25, **kw) == step_inventory(MOE, **kw)


def _card(model="Qwen/Qwen3-30B-A3B", **par):
    return load_card_dict({"model": model, "method": "sft", "scope": "lora", "attention": "sdpa",
                           "hardware": {"gpu": "h200", "gpus_per_node": 1},
                           "parallel": {"strategy": "single", "gradient_checkpointing": True, **par},
                           "batch": {"micro_batch_size": 1, "seq_len": 2048}})


@pytest.mark.parametrize("experts", ["loop", "loop_v5"])
def test_card_share_shortens_the_loop_step_and_leaves_memory_alone(experts):
    every = make_plan(_card(moe_experts=experts))
    part = make_plan(_card(moe_experts=experts, moe_experts_hit=0.4))
    assert part.step_seconds < 0.8 * every.step_seconds
    assert part.peak.allocated == every.peak.allocated


def _one_line(exc) -> str:
    text = str(exc.value).strip()
    assert "\n" not in text and "parallel.moe_experts_hit" in text
    return text


@pytest.mark.parametrize("par", [{"moe_experts": "grouped"}, {"moe_experts": "loop_all"},
                                 {"moe_experts": "loop", "strategy": "zero3"}])
def test_refused_where_no_loop_over_the_hit_experts_runs(par):
    with pytest.raises(CardError) as exc:
        _card(moe_experts_hit=0.5, **par)
    assert "allowed: moe_experts loop or loop_v5" in _one_line(exc)


@pytest.mark.parametrize("share", [0.0, 1.5, -0.1])
def test_refused_outside_the_unit_interval(share):
    with pytest.raises(CardError) as exc:
        _card(moe_experts="loop", moe_experts_hit=share)
    _one_line(exc)


def test_refused_on_a_dense_model():
    card = _card(model="Qwen/Qwen3-8B", moe_experts="loop", moe_experts_hit=0.5)
    for call in (make_plan, check_model_options):
        with pytest.raises(CardError) as exc:
            call(card)
        assert "allowed for it: null" in _one_line(exc)
