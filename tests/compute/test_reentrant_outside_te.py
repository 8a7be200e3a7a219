"""``training.outside_te_kernel_share``: a re-entrant checkpoint's no-grad forward saves autograd recording only on
the kernels launched outside Transformer Engine's autograd Functions (TE's linears and fused attention run with grad
mode off either way); transformers' eager layers get the saving on every kernel."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import step_inventory
from trainfit.compute.rates import default_rates
from trainfit.compute.te_host import FORWARD_KERNELS_PER_CALL, te_forward_kernels, te_linear_calls
from trainfit.compute.training import outside_te_kernel_share, train_step_time

QWEN8 = from_catalog("Qwen/Qwen3-8B")
H200 = default_rates(resolve_gpu("h200"))


def test_te_forward_kernels_count_each_linear_calls_kernels():
    calls = te_linear_calls(QWEN8)
    # a dense layer: qkv and fc1 are LayerNormLinear (norm + GEMM), proj and fc2 Linear (GEMM)
    assert calls.layernorm_linear == 2 * QWEN8.num_layers and calls.linear == 2 * QWEN8.num_layers
    assert te_forward_kernels(calls=calls, quantized=False) == pytest.approx(
        QWEN8.num_layers * 2 * (FORWARD_KERNELS_PER_CALL["linear"] + FORWARD_KERNELS_PER_CALL["layernorm_linear"]))


def test_eager_layers_get_the_whole_saving_te_layers_only_the_rest():
    inv = step_inventory(QWEN8, micro_batch_size=1, seq_len=4096).layers_forward
    calls = te_linear_calls(QWEN8)
    assert outside_te_kernel_share(inv, calls=calls, quantized=False, casts=None, te_layers=False) == 1.0
    te = outside_te_kernel_share(inv, calls=calls, quantized=False, casts=None, te_layers=True)
    # the elementwise ops around TE's calls (rotary, activation) remain: some, not all
    assert 0.2 < te < 0.9
    # Megatron-Core's bias-dropout-adds run under torch.enable_grad: two kernels a layer fewer saved
    bda = outside_te_kernel_share(inv, calls=calls, quantized=False, casts=None, te_layers=True,
                                  layers=QWEN8.num_layers)
    assert te - bda == pytest.approx(2 * QWEN8.num_layers / inv.kernels)


def _forward_s(**kw) -> float:
    r = train_step_time(QWEN8, rates=H200, micro_batch_size=1, seq_len=1024, trained_params=8.19e9,
                        trained_tensors=399, gathered_weight_bytes=16.4e9, gradient_checkpointing=True, **kw)
    return next(p for p in r.phases if p.name == "forward").seconds


def test_te_layers_reentrant_forward_is_discounted_less_than_eager_layers():
    te_plain, te_reent = _forward_s(te_layers=True), _forward_s(te_layers=True, recompute_whole_layer=True)
    eager_plain, eager_reent = _forward_s(), _forward_s(recompute_whole_layer=True)
    assert eager_reent < eager_plain
    assert te_reent < te_plain
    assert (te_plain - te_reent) < (eager_plain - eager_reent)


@pytest.mark.parametrize("glue", ["ring", "a2a"])
def test_context_parallel_glue_inside_te_functions_gets_no_saving(glue):
    # ring: AttnFuncWithCP's copies and merges; a2a: AttnFuncWithCPAndQKVOA2A's thd reorders. Both run inside
    # TE's autograd Functions, so the kernels outside them are the same with and without the glue
    kw = {"ring": {"te_ring_context_parallel": 4},
          "a2a": {"a2a_thd_sequences": 4.0, "rope_loop_context_parallel": 4}}[glue]
    calls = te_linear_calls(QWEN8)
    plain = step_inventory(QWEN8, micro_batch_size=1, seq_len=8192, sequence_shards=4).layers_forward
    glued = step_inventory(QWEN8, micro_batch_size=1, seq_len=8192, sequence_shards=4, **kw).layers_forward
    assert glued.te_function_kernels > 0 and glued.kernels - plain.kernels >= glued.te_function_kernels
    outside = [outside_te_kernel_share(inv, calls=calls, quantized=False, casts=None, te_layers=True,
                                       layers=QWEN8.num_layers) * inv.kernels for inv in (plain, glued)]
    assert outside[1] == pytest.approx(outside[0], rel=1e-9, abs=1e-6)


def test_megatron_ring_cp_reentrant_forward_saves_nothing_on_the_ring_glue():
    # Megatron-Core TE layers under ring context parallel 4: the re-entrant checkpoint's no-grad saving on the
    # forward is the same with and without the glue's kernels
    plain = _forward_s(te_layers=True) - _forward_s(te_layers=True, recompute_whole_layer=True)
    ring = (_forward_s(te_layers=True, te_ring_context_parallel=4)
            - _forward_s(te_layers=True, te_ring_context_parallel=4, recompute_whole_layer=True))
    assert plain > 0
    assert ring == pytest.approx(plain, rel=1e-9)
