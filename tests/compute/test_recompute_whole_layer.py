"""Full recompute by a re-entrant checkpoint re-runs the whole layer (``StepInventory.layers_recompute_whole``).

Megatron's ``CheckpointFunction`` (NVIDIA/Megatron-LM megatron/core/tensor_parallel/random.py l.600-674
@d98e8a64ddf34856e74b24714e3bedb2f5a39553) calls ``run_function`` once, to its end, in its backward: the layer's
last linear (fc2 / down_proj) and the residual add after it run again. torch's non-re-entrant checkpoint stops at
the last saved tensor instead (``layers_recompute``).
"""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import inventory as I
from trainfit.compute.inventory import step_inventory
from trainfit.compute.rates import default_rates
from trainfit.compute.training import train_step_time

H200 = default_rates(resolve_gpu("h200"))
QWEN8 = from_catalog("Qwen/Qwen3-8B")


def test_whole_layer_recompute_is_the_early_stop_recompute_plus_the_last_linear_and_its_add():
    b, s = 1, 4096
    inv = step_inventory(QWEN8, micro_batch_size=b, seq_len=s)
    early, whole = inv.layers_recompute, inv.layers_recompute_whole
    L, t, h = QWEN8.num_layers, float(b * s), float(QWEN8.hidden_size)
    assert {g.name for g in whole.gemms} - {g.name for g in early.gemms} == {"down_proj"}
    # every GEMM of the layer forward runs again
    assert whole.gemm_flops == pytest.approx(inv.layers_forward.gemm_flops)
    assert whole.memory_bytes - early.memory_bytes == pytest.approx(I.RESIDUAL_BYTES * t * h * L)
    down = next(g for g in whole.gemms if g.name == "down_proj")
    assert whole.kernels - early.kernels == pytest.approx(down.count + L)
    assert whole.attention_forward_flops == early.attention_forward_flops
    assert inv.recompute("none", whole_layer=True) is whole
    assert inv.recompute("none") is early
    # selective checkpointing is unchanged by it
    assert inv.recompute("core_attention", whole_layer=True) is inv.layers_recompute_core_attention


def test_sequence_parallel_add_is_the_rank_shard():
    a = step_inventory(QWEN8, micro_batch_size=1, seq_len=4096, sequence_shards=4)
    t, h, L = 4096.0, float(QWEN8.hidden_size), QWEN8.num_layers
    diff = a.layers_recompute_whole.memory_bytes - a.layers_recompute.memory_bytes
    assert diff == pytest.approx(I.RESIDUAL_BYTES * t * h * L / 4)


def _rec_s(**kw) -> float:
    r = train_step_time(QWEN8, rates=H200, micro_batch_size=1, seq_len=8192, trained_params=8.19e9,
                        trained_tensors=399, gathered_weight_bytes=16.4e9, gradient_checkpointing=True, **kw)
    return next(p for p in r.phases if p.name == "recompute").seconds, r.total_s


def test_reentrant_recompute_costs_about_one_more_down_proj():
    early_s, early_total = _rec_s()
    whole_s, whole_total = _rec_s(recompute_whole_layer=True)
    fwd = train_step_time(QWEN8, rates=H200, micro_batch_size=1, seq_len=8192, trained_params=8.19e9,
                          trained_tensors=399, gathered_weight_bytes=16.4e9)
    layers_fwd = next(p for p in fwd.phases if p.name == "forward").seconds
    assert whole_s > early_s and whole_total > early_total
    # down_proj is a third of a SwiGLU MLP's GEMM FLOPs: the whole-layer recompute is near the layers' forward
    assert whole_s == pytest.approx(layers_fwd, rel=0.15)
    assert early_s < 0.9 * whole_s


def _plan(impl: str):
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    card = {"model": "Qwen/Qwen2.5-32B", "method": "sft",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": True, "tensor_parallel": 8,
                         "sequence_parallel": True, "tensor_parallel_impl": impl},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 4}}
    return make_plan(load_card_dict(card))


def test_a_megatron_card_recomputes_the_whole_layer_a_dtensor_card_stops_early():
    meg, dt = _plan("megatron"), _plan("dtensor")
    # Megatron's re-entrant checkpoint: the recompute is (nearly) the forward of the layers; torch's stops short of it
    assert meg.time_parts["recompute"] > 1.1 * dt.time_parts["recompute"]
    assert meg.time_parts["recompute"] == pytest.approx(meg.time_parts["forward"], rel=0.15)


def test_card_chooses_the_re_entrant_checkpoint():
    """``plan.time.checkpoint_reentrant``: the card's loop.checkpoint_reentrant as set, else Megatron-Core layers and
    LLaMA-Factory's presets (use_reentrant_gc True by default) re-entrant, other cards not; the re-entrant recompute
    is the slower one."""
    from trainfit.methods.presets import apply_preset
    from trainfit.plan import make_plan
    from trainfit.plan.time import checkpoint_reentrant
    from trainfit.spec.card import load_card_dict

    base = {"model": "Qwen/Qwen3-8B", "method": "sft", "scope": "full",
            "hardware": {"gpu": "h200", "gpus_per_node": 8},
            "parallel": {"strategy": "zero2", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": 4096}}
    plain = load_card_dict(base)
    lf = load_card_dict(apply_preset(base, "llamafactory-z2"))
    assert not checkpoint_reentrant(plain) and checkpoint_reentrant(lf)
    assert not checkpoint_reentrant(load_card_dict(apply_preset({**base, "loop": {"checkpoint_reentrant": False}},
                                                                "llamafactory-z2")))
    set_true = load_card_dict({**base, "loop": {"checkpoint_reentrant": True}})
    assert checkpoint_reentrant(set_true)

    def recompute_s(card):
        return next(p.seconds for p in make_plan(card).time.phases if p.name == "recompute")

    assert recompute_s(set_true) > recompute_s(plain)


def test_whole_layer_recompute_re_runs_the_last_linears_nf4_dequantisation_too():
    """QLoRA (bitsandbytes): the re-entrant recompute's down_proj dequantises its weight again (MatMul4Bit.forward,
    bitsandbytes 0.43.3 bitsandbytes/autograd/_functions.py l.509); the early-stop recompute skips both the GEMM and
    its dequantisation. So the whole-layer recompute carries every linear's dequantisation, as the forward does."""
    b, s = 1, 4096
    q = I.Adapter(rank=16, targets=("q_proj", "v_proj"), nf4_base=True)
    inv = step_inventory(QWEN8, micro_batch_size=b, seq_len=s, adapter=q)
    plain = step_inventory(QWEN8, micro_batch_size=b, seq_len=s, adapter=I.Adapter(rank=16, targets=("q_proj", "v_proj")))
    L, h, f = QWEN8.num_layers, QWEN8.hidden_size, QWEN8.intermediate_size
    down = I.NF4_DEQUANT_BYTES_PER_WEIGHT * f * h * L
    extra_whole = inv.layers_recompute_whole.memory_bytes - plain.layers_recompute_whole.memory_bytes
    extra_early = inv.layers_recompute.memory_bytes - plain.layers_recompute.memory_bytes
    extra_fwd = inv.layers_forward.memory_bytes - plain.layers_forward.memory_bytes
    assert extra_whole == pytest.approx(extra_fwd)
    assert extra_whole - extra_early == pytest.approx(down)
    assert inv.layers_recompute_whole.fused_bytes - plain.layers_recompute_whole.fused_bytes == pytest.approx(extra_fwd)
