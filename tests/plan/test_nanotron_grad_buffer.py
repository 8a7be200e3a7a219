"""nanotron's FP32GradientAccumulator in memory (``parallel.grad_accumulation_pass`` with ``precision.grads`` fp32): one
fp32 buffer of every parameter the rank holds, made at init and kept (ZeRO-1 too); autograd's bf16 ``.grad`` tensors
live only until ``loss.backward()`` returns; a DDP wrapper (ZeRO-0 over more than one data-parallel rank only) buckets
the bf16 gradients (huggingface/nanotron src/nanotron/optim/gradient_accumulator.py l.77-80, 163-173, 204-223,
src/nanotron/trainer.py l.786-788, 847-852 @c252843039cc167ff8d6894b87172af4637eb14b)."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Phase

GIB = 1024**3


def _plan(strategy: str, *, tp: int, nodes: int = 1, accumulator: bool = True, grad_accum: int = 1):
    card = {"model": "meta-llama/Llama-3.1-8B", "method": "sft", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": nodes},
            "parallel": {"strategy": strategy, "gradient_checkpointing": False, "tensor_parallel": tp,
                         "sequence_parallel": True, "grad_accumulation_pass": accumulator},
            "precision": {"grads": "fp32", "master_weights": "fp32"},
            "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": grad_accum}}
    return make_plan(load_card_dict(card))


def _phase(plan, phase: Phase):
    return next(p for p in plan.stage_phases[0] if p.phase is phase)


@pytest.mark.parametrize("strategy", ["ddp", "zero1"])
def test_the_fp32_buffer_is_held_from_the_forward_to_the_step(strategy):
    plan = _plan(strategy, tp=4)
    fwd, opt = _phase(plan, Phase.FORWARD), _phase(plan, Phase.OPTIMIZER_STEP)
    weights = fwd.components["weights"]
    # bf16 weights, every parameter's fp32 gradient in the buffer, whole under ZeRO-1 as under ZeRO-0
    assert fwd.components["gradients"] == pytest.approx(2 * weights, rel=1e-6)
    assert opt.components["gradients"] == pytest.approx(2 * weights, rel=1e-6)


def test_bf16_grads_join_the_buffer_in_backward_only():
    plan = _plan("ddp", tp=4)
    bwd, fwd = _phase(plan, Phase.BACKWARD), _phase(plan, Phase.FORWARD)
    buffer = fwd.components["gradients"]
    # never less than the buffer, at most the buffer plus every bf16 .grad (half its bytes)
    assert buffer <= bwd.components["gradients"] <= 1.5 * buffer + 1


def test_ddp_buckets_bf16_at_zero0_over_data_parallel_ranks_only():
    two_dp = _phase(_plan("ddp", tp=4), Phase.OPTIMIZER_STEP).components
    assert two_dp["ddp_buckets"] == pytest.approx(two_dp["weights"], rel=1e-6)  # bf16, not fp32
    one_dp = _phase(_plan("ddp", tp=8), Phase.OPTIMIZER_STEP).components
    assert one_dp.get("ddp_buckets", 0.0) == 0.0  # dp 1: nanotron builds no DDP
    zero1 = _phase(_plan("zero1", tp=4), Phase.OPTIMIZER_STEP).components
    assert zero1.get("ddp_buckets", 0.0) == 0.0  # ZeRO-1 with fp32 accumulation: no DDP


def test_optimizer_phase_bytes_per_parameter_at_zero0():
    # 2 (bf16 weights) + 4 (fp32 master) + 8 (fp32 AdamW moments) + 4 (fp32 buffer) at dp 1, + 2 (DDP's bf16 bucket)
    # at dp > 1: the 18.1-18.2 and 20.2-20.6 B/param the Ultra-Scale Playbook sweep logs in its optimizer phase
    for tp, per_param in ((8, 18.0), (4, 20.0)):
        c = _phase(_plan("ddp", tp=tp), Phase.OPTIMIZER_STEP).components
        params = c["weights"] / 2
        persistent = sum(c[k] for k in ("weights", "master_weights", "optimizer_states", "gradients")) + c.get(
            "ddp_buckets", 0.0)
        assert persistent / params == pytest.approx(per_param, rel=1e-6)


def test_without_the_accumulator_nothing_changes_shape():
    # torch DDP without the accumulator: its gradients appear in backward, its bucket copy in precision.grads
    off = _phase(_plan("ddp", tp=4, accumulator=False), Phase.FORWARD).components
    assert off.get("gradients", 0.0) == 0.0


def test_one_replica_per_gpu_plans_the_same_buffer():
    # tensor parallel 1: the single-replica planner (plan/terms.py) holds the same fp32 buffer and bf16 bucket
    card = {"model": "meta-llama/Llama-3.2-1B", "method": "sft", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "ddp", "gradient_checkpointing": False, "grad_accumulation_pass": True},
            "precision": {"grads": "fp32", "master_weights": "fp32"},
            "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 2}}
    plan = make_plan(load_card_dict(card))
    fwd = next(p for p in plan.phases if p.phase is Phase.FORWARD).components
    opt = next(p for p in plan.phases if p.phase is Phase.OPTIMIZER_STEP).components
    assert fwd["gradients"] == pytest.approx(2 * fwd["weights"], rel=1e-6)
    assert opt["gradients"] == pytest.approx(2 * opt["weights"], rel=1e-6)
    assert opt["ddp_buckets"] == pytest.approx(opt["weights"], rel=1e-6)
