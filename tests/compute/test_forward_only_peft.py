"""PEFT in the no-grad forwards (``training.forward_only_time``: log-prob, reference and value passes): the
``ParamWrapper`` cycles around transformers v5's wrapped expert stacks and router weight, the merge's two evaluations
per forward, FSDP1's adapter units (``parallel.fsdp_adapter_units``) and a pass under PEFT's ``disable_adapter()``."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import rates as rt
from trainfit.compute.inventory import Adapter, peft_param_wrapper_calls, step_inventory
from trainfit.compute.training import Parallel, forward_only_time

DSV2 = from_catalog("deepseek-ai/DeepSeek-V2-Lite")
MISTRAL = from_catalog("mistralai/Mistral-7B-v0.1")
LORA = Adapter(rank=16, targets=("all-linear",), adapter_dtype_bytes=4)
ATTN = Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj"))
H200 = rt.default_rates(resolve_gpu("h200"))
A100 = rt.default_rates(resolve_gpu("a100-80gb"))


def _fwd(spec, rates, **kw):
    forward_only_time.cache_clear()
    return forward_only_time(spec, rates=rates, micro_batch_size=1, seq_len=1024, micro_steps=4, **kw)


def test_param_wrapper_cycles_in_every_no_grad_forward(monkeypatch):
    import trainfit.compute.training as tr

    with_ = _fwd(DSV2, H200, adapter=LORA)
    monkeypatch.setattr(tr, "PEFT_PARAM_WRAPPER_HOST_S", 0.0)
    without = _fwd(DSV2, H200, adapter=LORA)
    calls = peft_param_wrapper_calls(DSV2, adapter=LORA)  # 3 per MoE layer: 78
    assert with_.host_s - without.host_s == pytest.approx(
        4 * calls * rt.PEFT_PARAM_WRAPPER_HOST_S * rt.PEFT_PARAM_WRAPPER_NOGRAD_RATIO)
    assert 0.9 < rt.PEFT_PARAM_WRAPPER_NOGRAD_RATIO <= 1.0  # autograd's recording is all a no-grad cycle saves


def test_no_cycle_where_peft_does_not_own_the_stacks(monkeypatch):
    """Attention-only LoRA (no expert stack wrapped) and all-linear LoRA on Megatron-Core's experts: the host time
    does not move when the cycle's rate is set to zero, so no ParamWrapper cycle is charged."""
    import trainfit.compute.training as tr

    cases = (dict(adapter=ATTN), dict(adapter=ATTN, megatron_experts=True), dict(adapter=LORA, megatron_experts=True))
    priced = [_fwd(DSV2, H200, **kw).host_s for kw in cases]
    monkeypatch.setattr(tr, "PEFT_PARAM_WRAPPER_HOST_S", 0.0)
    assert [_fwd(DSV2, H200, **kw).host_s for kw in cases] == priced
    assert peft_param_wrapper_calls(DSV2, adapter=ATTN) == 0.0
    assert peft_param_wrapper_calls(DSV2, adapter=LORA, megatron_experts=True) == 0.0


def test_the_merge_is_evaluated_twice_in_the_no_grad_forward_too():
    """torch's parametrization check runs whatever the grad mode: the shared forward inventory holds the merge and
    its check evaluation for every wrapped stack."""
    inv = step_inventory(DSV2, micro_batch_size=1, seq_len=1024, adapter=LORA)
    names = [g.name for g in inv.layers_forward.gemms]
    for stack in ("gate_up_proj", "down_proj"):
        assert any(n.endswith(stack + ".BA") for n in names)
        assert any(n.endswith(stack + ".BA.check") for n in names)


def _units(units: bool, *, ranks: int = 2, hooked: int = 33, **kw):
    par = Parallel(strategy="fsdp", ranks=ranks, gpus_per_node=ranks, fsdp_adapter_units=units)
    return _fwd(MISTRAL, A100, adapter=ATTN, parallel=par, hooked_units=hooked, **kw)


def test_fsdp1_adapter_units_hook_every_no_grad_forward():
    more = _units(True, ranks=1).host_s - _units(False, ranks=1).host_s
    assert more == pytest.approx(4 * 2 * 4 * MISTRAL.num_layers * rt.FSDP_ADAPTER_UNIT_FORWARD_HOST_S)
    # unsharded (no layer units hooked), FSDP2 or no adapter: none
    assert _units(True, hooked=0).host_s == _units(False, hooked=0).host_s
    par2 = Parallel(strategy="fsdp", ranks=2, gpus_per_node=2, fsdp_adapter_units=True, fsdp2=True)
    assert (_fwd(MISTRAL, A100, adapter=ATTN, parallel=par2, hooked_units=33).host_s
            == _fwd(MISTRAL, A100, adapter=ATTN, parallel=Parallel(strategy="fsdp", ranks=2, gpus_per_node=2,
                                                                   fsdp2=True), hooked_units=33).host_s)


def test_the_rate_limiter_paces_the_adapted_projections_on_full_shard():
    on, off = _units(True), _units(False)
    one_rank = _units(True, ranks=1)
    assert on.sync_s > off.sync_s  # the limiter's wait, kept as synchronisation
    assert one_rank.sync_s == _units(False, ranks=1).sync_s  # one rank: NO_SHARD, nothing freed or waited on


def test_a_disabled_adapter_runs_its_base_layers_alone():
    """The reference pass of a LoRA policy under ``disable_adapter()``: the base model's forward, with no cycle and no
    adapter unit."""
    base = _fwd(DSV2, H200, adapter=None)
    off = _fwd(DSV2, H200, adapter=LORA, adapter_enabled=False)
    on = _fwd(DSV2, H200, adapter=LORA)
    assert off.seconds == pytest.approx(base.seconds)
    assert on.seconds > off.seconds
    par = Parallel(strategy="fsdp", ranks=2, gpus_per_node=2, fsdp_adapter_units=True)
    kw = dict(parallel=par, hooked_units=33)
    assert (_fwd(MISTRAL, A100, adapter=ATTN, adapter_enabled=False, **kw).seconds
            == pytest.approx(_fwd(MISTRAL, A100, adapter=None, **kw).seconds))
    # a 4-bit base is still dequantised with its adapter off
    nf4 = Adapter(rank=16, targets=("all-linear",), nf4_base=True)
    assert _fwd(MISTRAL, A100, adapter=nf4, adapter_enabled=False).seconds > _fwd(MISTRAL, A100).seconds


def test_the_rate_limiter_exposes_each_layer_gather_in_a_pass_that_runs_the_adapter_units():
    """FSDP1 queues a free event at every non-root FULL_SHARD unit's post-forward reshard, grad or not (the forward
    wrapper calls ``_post_forward(..., _post_forward_reshard, ...)`` unconditionally, torch/distributed/fsdp/
    fully_sharded_data_parallel.py l.841-859; ``_post_forward_reshard`` l.486-499 and ``_reshard`` l.320-326 of
    _runtime_utils.py, torch 2.13.0 @cf30153c4c131c8164ee7798e5022d810682e2cb), so an old-policy log-prob pass with
    the adapter units active waits on its ``lora_A`` frees before each layer's gather (``_unshard`` l.297-303) as the
    training forward does (collectives.rate_limiter_exposes_layer_gathers): every layer's gather exposed. Under
    ``disable_adapter()`` (the reference of a LoRA policy) no adapter unit runs, the queue holds the layers' frees
    alone, and the gathers stay behind the previous layer's compute (only the first shows)."""
    gathered = 2.0 * 7.2e9  # Mistral 7B's bf16 weights, gathered every micro-batch

    def added(**kw):
        return _units(True, gathered_weight_bytes=gathered, **kw).seconds - _units(True, **kw).seconds

    active, disabled = added(), added(adapter_enabled=False)
    assert disabled > 0
    assert active > 0.9 * MISTRAL.num_layers * disabled
    # without adapter units the limiter's queue holds the layers' frees alone: hidden as under disable_adapter()
    plain = (_units(False, gathered_weight_bytes=gathered).seconds - _units(False).seconds)
    assert plain == pytest.approx(disabled, rel=0.05)
