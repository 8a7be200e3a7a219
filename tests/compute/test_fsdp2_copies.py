"""FSDP2's copy-out / copy-in on the compute stream (``training.fsdp2_copy_seconds``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute.rates import default_rates
from trainfit.compute.training import OptimizerSpec, Parallel, fsdp2_copy_seconds, train_step_time

H100 = default_rates(resolve_gpu("h100-sxm"))
LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
PARAMS, TENSORS = 8.03e9, 291


def test_llama3_8b_bf16_gathers_fp32_reduce_bytes():
    s = fsdp2_copy_seconds(gathered_weight_bytes=2 * PARAMS, root_share=0.08, trained_params=PARAMS, grad_bytes=4.0,
                           hbm_bytes_per_s=1e12)
    # forward gathers every unit, the backward all but the root: 2 x 16.06 GB x 1.92; chunk_cat 2 B in, 4 B out
    assert s == pytest.approx((2 * 2 * PARAMS * 1.92 + PARAMS * 6.0) / 1e12)
    assert s * 1e12 == pytest.approx(109.8e9, rel=1e-3)


def test_no_reshard_after_forward_and_micro_steps():
    kw = dict(gathered_weight_bytes=2e9, root_share=0.0, trained_params=1e9, grad_bytes=2.0, hbm_bytes_per_s=1e12)
    assert fsdp2_copy_seconds(**kw, reshard_after_forward=False) == pytest.approx((2 * 2e9 + 4e9) / 1e12)
    assert fsdp2_copy_seconds(**kw, micro_steps=3) == pytest.approx(3 * fsdp2_copy_seconds(**kw))


def _step(strategy: str, copies: bool):
    return train_step_time(LLAMA8, rates=H100, micro_batch_size=1, seq_len=4096, trained_params=PARAMS,
                           trained_tensors=TENSORS, gathered_weight_bytes=2 * PARAMS,
                           optimizer=OptimizerSpec(weight_bytes=4.0, grad_bytes=4.0, state_bytes=4.0),
                           parallel=Parallel(strategy=strategy, ranks=8, gpus_per_node=8), fsdp2_copies=copies)


def test_train_step_adds_the_copies_only_when_asked_and_only_under_fsdp():
    off, on = _step("fsdp", False), _step("fsdp", True)
    assert "fsdp_copies" not in {p.name for p in off.phases}
    copies = next(p for p in on.phases if p.name == "fsdp_copies").seconds
    # FSDP2's root (verl apply_fsdp2: the untied embedding a unit of its own) is Llama-3.1-8B's head and final norm,
    # 128,256 x 4,096 + 4,096 = 525,340,672 of 8,030,261,248 parameters
    root = 525_340_672 / 8_030_261_248
    assert copies == pytest.approx(fsdp2_copy_seconds(gathered_weight_bytes=2 * PARAMS, root_share=root,
                                                      trained_params=PARAMS, grad_bytes=4.0,
                                                      hbm_bytes_per_s=H100.hbm_bytes_per_s))
    # the rest moves only by the embedding's gather leaving the root (gathered once a step, exposed) for a unit of its
    # own, hidden behind compute like a layer's: a little less exposed communication, under 3 %
    assert 0.97 * off.total_s < on.total_s - copies < off.total_s
    assert 0.02 < copies < 0.06  # ~110 GB at H100's HBM rate
    ddp = _step("ddp", True)
    assert "fsdp_copies" not in {p.name for p in ddp.phases}
