"""The compiled eager loss in the time model (``loss.compiled``; ``inventory.COMPILED_CE_*``).

torchtitan compiles ``F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))`` with ``training.compile``
(pytorch/torchtitan torchtitan/components/loss.py l.17-29 @bbb1b616ef4d01b0ea745c13b03c192910a166c9). Inductor's code
for it (``benchmarks/compiled_ce_kernels.py``): forward three loop nests reading each bf16 logit once on CUDA (online
softmax), backward two, one reading the logits and writing their bf16 gradient: 2 and 4 B per logit, counted as
already fused (the compile factors do not scale them).
"""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute import inventory as I
from trainfit.compute.inventory import step_inventory
from trainfit.compute.rates import default_rates
from trainfit.compute.training import pass_seconds
from trainfit.plan import make_plan
from trainfit.spec.card import RunCard

MB, SEQ = 2, 2048
T = MB * SEQ


def _spec():
    return resolve_model("Qwen/Qwen3-0.6B")


def test_constants_read_off_the_generated_code():
    """One read of the bf16 logits forward; a read and the bf16 gradient's write backward; 3 + 2 loop nests."""
    assert (I.COMPILED_CE_FORWARD_BYTES, I.COMPILED_CE_BACKWARD_BYTES) == (2.0, 4.0)
    assert (I.COMPILED_CE_FORWARD_KERNELS, I.COMPILED_CE_BACKWARD_KERNELS) == (3, 2)


def test_inventory_swaps_the_eager_loss_for_the_compiled_one():
    spec = _spec()
    v = spec.vocab_size
    eager = step_inventory(spec, micro_batch_size=MB, seq_len=SEQ)
    comp = step_inventory(spec, micro_batch_size=MB, seq_len=SEQ, compiled_cross_entropy=True)
    assert comp.layers_forward == eager.layers_forward and comp.layers_backward == eager.layers_backward
    assert comp.head_forward.gemms == eager.head_forward.gemms
    assert eager.head_forward.memory_bytes - comp.head_forward.memory_bytes == pytest.approx(
        (I.LOSS_FORWARD_BYTES - I.COMPILED_CE_FORWARD_BYTES) * T * v)
    assert eager.head_backward.memory_bytes - comp.head_backward.memory_bytes == pytest.approx(
        (I.LOSS_BACKWARD_BYTES - I.COMPILED_CE_BACKWARD_BYTES) * T * v)
    assert eager.head_forward.kernels - comp.head_forward.kernels == I.LOSS_FORWARD_KERNELS - I.COMPILED_CE_FORWARD_KERNELS
    assert eager.head_backward.kernels - comp.head_backward.kernels == (
        I.LOSS_BACKWARD_KERNELS - I.COMPILED_CE_BACKWARD_KERNELS)
    # the compiled loss is already fused: counted in fused_bytes / fused_kernels, the eager one is not
    assert comp.head_forward.fused_bytes == pytest.approx(I.COMPILED_CE_FORWARD_BYTES * T * v)
    assert comp.head_backward.fused_bytes == pytest.approx(I.COMPILED_CE_BACKWARD_BYTES * T * v)
    assert (comp.head_forward.fused_kernels, comp.head_backward.fused_kernels) == (3, 2)
    assert eager.head_forward.fused_bytes == eager.head_backward.fused_bytes == 0.0


def test_flash_attn_kernel_wins_over_the_flag():
    spec = _spec()
    flash = step_inventory(spec, micro_batch_size=MB, seq_len=SEQ, fused_cross_entropy=True)
    both = step_inventory(spec, micro_batch_size=MB, seq_len=SEQ, fused_cross_entropy=True, compiled_cross_entropy=True)
    assert both == flash


def test_compile_factor_leaves_the_compiled_loss_alone():
    """Under ``memory_factor`` 0.5 the compiled loss still moves its 6 B per logit at the streaming rate; the eager
    loss's 36.5 B are halved (the compile factors stand for fusion Inductor does on the model, not on this loss)."""
    spec = _spec()
    v = spec.vocab_size
    rates = default_rates(resolve_gpu("h100-sxm"))
    comp = step_inventory(spec, micro_batch_size=MB, seq_len=SEQ, compiled_cross_entropy=True)
    for inv, bwd in ((comp.head_forward, False), (comp.head_backward, True)):
        full = pass_seconds(inv, rates=rates, seq_len=SEQ, backward=bwd, memory_factor=1.0)
        half = pass_seconds(inv, rates=rates, seq_len=SEQ, backward=bwd, memory_factor=0.5)
        rest = inv.memory_bytes - inv.fused_bytes
        # the strided / L2-chained norm reads are priced apart at factor 1: compare the unscaled share only
        assert half.memory_s == pytest.approx((rest * 0.5 + inv.fused_bytes) / rates.hbm_bytes_per_s)
        assert full.memory_s >= inv.fused_bytes / rates.hbm_bytes_per_s
    per_logit = (I.COMPILED_CE_FORWARD_BYTES + I.COMPILED_CE_BACKWARD_BYTES)
    assert per_logit < 0.5 * (I.LOSS_FORWARD_BYTES + I.LOSS_BACKWARD_BYTES)
    assert comp.head_forward.fused_bytes + comp.head_backward.fused_bytes == pytest.approx(per_logit * T * v)


def _card(**extra) -> RunCard:
    return RunCard.model_validate({"model": "Qwen/Qwen3-0.6B", "scope": "full",
                                   "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
                                   "batch": {"micro_batch_size": MB, "seq_len": SEQ}, **extra})


def test_plan_reads_loss_compiled():
    """A card with loss.compiled plans a faster step than the same card without it, compiled model or not."""
    for par in ({}, {"parallel": {"compile": True}}):
        eager = make_plan(_card(**par)).step_seconds
        comp = make_plan(_card(loss={"compiled": True}, **par)).step_seconds
        assert comp < eager
