"""torchao's float8 FSDP2 all-gather (precision.fp8_all_gather): each gathered layer unit holds its linears' weights
as fp8 (1 B) plus one fp32 scale per linear, its norms in param_dtype (memory.fp8.torchao_fp8_gather_unit_bytes).
Hand counts for Llama-3.1-8B on 8 GPUs."""

from __future__ import annotations

import pytest

from trainfit.memory.fp8 import torchao_fp8_gather_unit_bytes

GIB = 2**30
# one Llama-3.1-8B decoder layer: 218,103,808 linear weights in 7 linears, 2 x 4,096 norm weights
LINEAR, NORMS = 218_103_808, 8_192


def test_unit_bytes_hand_counted():
    assert torchao_fp8_gather_unit_bytes(unit_params=100.0, unit_linear_params=90.0, unit_linears=7,
                                         other_bytes_per_param=2.0) == 90.0 + 28.0 + 20.0
    unit = torchao_fp8_gather_unit_bytes(unit_params=LINEAR + NORMS, unit_linear_params=LINEAR, unit_linears=7,
                                         other_bytes_per_param=2.0)
    assert unit == LINEAR + 7 * 4 + 2 * NORMS  # against 2 * (LINEAR + NORMS) gathered in bf16


def _fsdp_peak(all_gather: bool) -> float:
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    plan = make_plan(load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": {"strategy": "fsdp", "compile": True, "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 1, "seq_len": 8192, "grad_accum": 1},
        "precision": {"compute": "fp8", "fp8_recipe": "current", "fp8_all_gather": all_gather}}))
    return max(p.components.get("fsdp_buffers", 0.0) for p in plan.phases)


def test_gathered_units_shrink_by_the_linears_second_byte():
    saved = _fsdp_peak(False) - _fsdp_peak(True)
    one_unit = LINEAR * (2 - 1) - 7 * 4  # bf16 -> fp8 linears, plus the scales
    # at least the unit in flight; at most the current + prefetched pair
    assert one_unit * 0.999 <= saved <= 2 * one_unit * 1.001


def _grad_op_peak(all_gather: bool) -> float:
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    plan = make_plan(load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": {"strategy": "fsdp_grad_op", "compile": True, "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 1, "seq_len": 8192, "grad_accum": 1},
        "precision": {"compute": "fp8", "fp8_recipe": "current", "fp8_all_gather": all_gather}}))
    return max(p.components.get("fsdp_buffers", 0.0) for p in plan.phases)


def test_grad_op_keeps_the_whole_gathered_model_in_fp8():
    """Not resharded after forward, FSDP2 keeps every layer's unsharded weights (Float8Tensors) to the end of
    backward: the non-local 7/8 of all 32 x 7 linears' weights lose their second byte, 224 fp32 scales come in."""
    saved = _grad_op_peak(False) - _grad_op_peak(True)
    assert saved == pytest.approx(32 * LINEAR * (2 - 1) * 7 / 8 - 32 * 7 * 4, rel=1e-9)
    assert _grad_op_peak(False) / GIB == pytest.approx(13.09, abs=0.01)
