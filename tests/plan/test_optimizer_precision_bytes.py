"""The optimizer step's dtypes a card's precision section gives the time model (``plan.time._trained``), read from the
same fields as the memory terms (``compute.optimizer_time`` module docstring): FSDP over fp32 weights with bf16
compute (torchtitan's ``training.dtype float32`` + ``mixed_precision_param bfloat16``) steps the fp32 shard with fp32
gradients and states and no master copy; DeepSpeed ZeRO and the Megatron-Core distributed optimizer keep bf16
parameters with an fp32 master and fp32 states; an FSDP card left at bf16 weights is pure bf16."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.optimizer_time import optimizer_bytes_per_param
from trainfit.plan.time import _trained
from trainfit.spec.card import load_card_dict


def _card(strategy: str, **precision) -> dict:
    card = {"model": "Qwen/Qwen3-8B", "method": "sft",
            "hardware": {"gpu": "h200", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": strategy},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 1}}
    if precision:
        card["precision"] = precision
    return card


def _step_bytes(card: dict) -> tuple[tuple[float, float, float, bool], float]:
    c = load_card_dict(card)
    _, _, opt = _trained(c, from_catalog(c.model))
    per = optimizer_bytes_per_param(optimizer=opt.name, weight_bytes=opt.weight_bytes, grad_bytes=opt.grad_bytes,
                                    state_bytes=opt.state_bytes, master=opt.master, clip=False)
    return (opt.weight_bytes, opt.grad_bytes, opt.state_bytes, opt.master), per


@pytest.mark.parametrize("strategy", ["fsdp", "hsdp", "fsdp_grad_op"])
def test_fsdp_over_fp32_weights_steps_the_fp32_shard(strategy):
    assert _step_bytes(_card(strategy, weights="fp32", compute="bf16")) == ((4.0, 4.0, 4.0, False), 28.0)


def test_fsdp_left_at_bf16_weights_is_pure_bf16():
    assert _step_bytes(_card("fsdp")) == ((2.0, 2.0, 2.0, False), 14.0)


@pytest.mark.parametrize("strategy", ["zero1", "zero2", "zero3"])
def test_zero_keeps_bf16_parameters_with_an_fp32_master(strategy):
    assert _step_bytes(_card(strategy)) == ((2.0, 2.0, 4.0, True), 28.0)


def test_megatron_fp32_main_grads():
    assert _step_bytes(_card("zero1", grads="fp32")) == ((2.0, 4.0, 4.0, True), 30.0)


def _megatron_card(**precision) -> dict:
    card = _card("zero1", **precision)
    card["parallel"] = {"strategy": "zero1", "tensor_parallel_impl": "megatron"}
    return card


def test_megatron_precision_aware_optimizer_keeps_bf16_moments():
    """Megatron-Core's precision-aware optimizer (exp_avg_dtype / exp_avg_sq_dtype bf16, main params fp32), as
    Megatron-Bridge's DeepSeek-V3 recipe sets it: 2-byte moments on the distributed optimizer's shard, in the time
    model and in the rank's memory; DeepSpeed ZeRO (the same strategy without the Megatron implementation) and a
    Megatron card that does not state its states stay fp32."""
    assert _step_bytes(_megatron_card(optimizer_states="bf16")) == ((2.0, 2.0, 2.0, True), 20.0)
    assert _step_bytes(_card("zero1", optimizer_states="bf16")) == ((2.0, 2.0, 4.0, True), 28.0)
    assert _step_bytes(_megatron_card()) == ((2.0, 2.0, 4.0, True), 28.0)
    from trainfit.plan import make_plan

    plans = [make_plan(load_card_dict(_megatron_card(**p))) for p in ({}, {"optimizer_states": "bf16"})]
    fp32, bf16 = (max(ph.components.get("optimizer_states", 0.0) for ph in p.phases) for p in plans)
    assert bf16 == pytest.approx(fp32 / 2)


def test_apex_distributed_fused_adam_at_the_model_dtype_keeps_no_master():
    """NeMo's distributed_fused_adam with ``dtype: bf16`` on a bf16 model: Apex keeps bf16 moments and no parameter
    shard (store_params False, NeMo megatron_base_model.py l.805-807 @8e3d65dc): a Megatron card with
    optimizer_impl apex_distributed and optimizer_states bf16 plans no master copy; at fp32 states it keeps one. A
    Megatron card that only states master_weights none (the built-in default card writes it) keeps Megatron's fp32
    master, and a DeepSpeed ZeRO card keeps its fp32 master whatever it states."""
    apex = {"optimizer_impl": "apex_distributed"}
    assert _step_bytes(_megatron_card(optimizer_states="bf16", **apex)) == ((2.0, 2.0, 2.0, False), 14.0)
    assert _step_bytes(_megatron_card(optimizer_states="fp32", **apex))[0][3] is True
    assert _step_bytes(_megatron_card(optimizer_states="bf16"))[0][3] is True
    assert _step_bytes(_megatron_card(optimizer_states="bf16", master_weights="none"))[0][3] is True
    assert _step_bytes(_card("zero1", optimizer_states="bf16", master_weights="none"))[0][3] is True
    from trainfit.plan import make_plan

    plans = [make_plan(load_card_dict(_megatron_card(**p)))
             for p in ({"optimizer_states": "bf16"}, {"optimizer_states": "bf16", **apex})]
    kept, none = (max(ph.components.get("master_weights", 0.0) for ph in p.phases) for p in plans)
    assert kept > 0 and none == 0.0


@pytest.mark.parametrize("optimizer", ["sgd", "adafactor"])
def test_megatron_bf16_moments_are_adam_only(optimizer):
    """Megatron-Core's precision-aware moments are Adam's (exp_avg / exp_avg_sq handed to TE's FusedAdam): another
    optimizer on a Megatron card is refused bf16 states with one line, and its fp32 states stay 4 bytes."""
    from trainfit.errors import CardError

    with pytest.raises(CardError, match=r"precision.optimizer_states: .*optimizer " + optimizer):
        load_card_dict(_megatron_card(optimizer=optimizer, optimizer_states="bf16"))
    assert _step_bytes(_megatron_card(optimizer=optimizer, optimizer_states="fp32"))[0][2] == 4.0


@pytest.mark.parametrize("precision, parallel, named", [
    ({"optimizer": "sgd"}, {"tensor_parallel_impl": "megatron"}, "precision.optimizer adamw (is 'sgd')"),
    ({}, {}, "parallel.tensor_parallel_impl megatron (is 'dtensor')"),
])
def test_apex_distributed_needs_adamw_on_megatron(precision, parallel, named):
    card = _card("zero1", optimizer_impl="apex_distributed", **precision)
    card["parallel"].update(parallel)
    from trainfit.errors import CardError

    with pytest.raises(CardError) as e:
        load_card_dict(card)
    assert "precision.optimizer_impl: apex_distributed" in str(e.value) and named in str(e.value)


def test_default_card_on_megatron_keeps_the_fp32_master():
    """The built-in default card writes ``master_weights: none`` itself; set onto Megatron-Core's distributed
    optimizer with fp32 states it keeps Megatron's fp32 master (4 B a parameter over the 8 data ranks: 3.81 GiB
    for Qwen3-8B's 8.19e9 parameters)."""
    from trainfit.cli.common import load_card
    from trainfit.plan import make_plan
    from trainfit.units import GIB

    card = load_card(None, {}, ["parallel.strategy=zero1", "parallel.tensor_parallel_impl=megatron",
                                "precision.optimizer_states=fp32", "hardware.gpu=h100-sxm"])
    assert card.precision.master_weights.value == "none"
    master = max(ph.components.get("master_weights", 0.0) for ph in make_plan(card).phases)
    assert master / GIB == pytest.approx(3.81, abs=0.01)
