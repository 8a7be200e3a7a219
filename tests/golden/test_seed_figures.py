"""The seeds' figures, reproduced. Each test cites its seed line.

Seed 000 (../shared/seeds/000_77aaf3458488dc94.txt) is one line; sections are cited by heading.
Seed 001 (../shared/seeds/001_f9a12ffe68d29793.txt) is cited by line number.
Convention: GB = 10^9 B, GiB = 2^30 B; "8B" nominal = 8e9 parameters where the seed rounds.
"""

import pytest

from trainfit.catalog.bare import spec_from_param_count
from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.memory.conventions import Convention, static_state
from trainfit.memory.params import param_breakdown
from trainfit.memory.quant import payload_bytes
from trainfit.memory.weights import base_weight_bytes
from trainfit.spec.enums import ComputeDtype, Dtype
from trainfit.units import GB, GIB

QWEN3_8B = from_catalog("Qwen/Qwen3-8B")


def test_qwen3_8b_total_and_non_embedding_counts():
    # seed 001 line 9: "总参数量约82亿（8.2B），核心网络参数量（不含词嵌入层）约69.5亿"
    pb = param_breakdown(QWEN3_8B)
    assert pb.total == 8_190_735_360
    assert round(pb.total / 1e9, 1) == 8.2
    assert pb.without_embeddings == 6_946_075_648
    assert round(pb.without_embeddings / 1e9, 2) == 6.95


@pytest.mark.parametrize(("dtype", "seed_gb"), [(Dtype.BF16, 16), (Dtype.FP32, 32.8)])
def test_qwen3_8b_weights_by_precision(dtype, seed_gb):
    # seed 001 lines 12-13: "FP32 ~32.8 GB", "FP16/BF16 ~16 GB"
    b = base_weight_bytes(QWEN3_8B, weights=dtype, compute=ComputeDtype.BF16)
    assert b == 8_190_735_360 * (4 if dtype is Dtype.FP32 else 2)
    assert abs(b / GB - seed_gb) / seed_gb < 0.025


@pytest.mark.parametrize(
    ("dtype", "gb", "gib"),
    [(Dtype.BF16, 54.0, 50.3), (Dtype.INT8, 27.0, 25.1), (Dtype.NF4, 13.5, 12.6)],
)
def test_27b_weight_payload(dtype, gb, gib):
    # seed 000 §二 table: 270亿 x 2 B = 54GB (约 50.3GiB); x 1 B = 27GB (25.1GiB); x 0.5 B = 13.5GB (12.6GiB)
    b = payload_bytes(params=27e9, dtype=dtype)
    assert b / GB == pytest.approx(gb)
    assert round(b / GIB, 1) == gib


def test_27b_mixed_precision_adam_16_bytes_per_param():
    # seed 000 §三: "BF16 参数 2 + BF16 梯度 2 + FP32 主权重 4 + FP32 一阶、二阶状态 8 = 16 字节/参数 ... 432GB（约 402.3GiB）"
    s = static_state(params=27e9, convention=Convention.FP32_MASTER)
    assert (s.weights, s.gradients, s.master_weights, s.optimizer_states) == (54e9, 54e9, 108e9, 216e9)
    assert s.total / GB == pytest.approx(432)
    assert round(s.total / GIB, 1) == 402.3


def test_24gb_cards_cannot_hold_27b():
    # seed 000 §二 and §四: one 24GB card cannot hold BF16 weights; two are still below the 54 GB floor;
    # eight (192GB) cannot hold the 432GB full mixed-precision Adam state.
    card = resolve_gpu("rtx4090").memory_bytes
    weights = payload_bytes(params=27e9, dtype=Dtype.BF16)
    assert 1 * card < weights
    assert 2 * card < weights
    assert 4 * card > weights  # 96 GB total exceeds the floor, which proves nothing about training
    assert 8 * card < static_state(params=27e9, convention=Convention.FP32_MASTER).total
    assert 8 * 24 * GB == 192 * GB


def test_bare_27b_model_weights_exact_from_count():
    # seed 000 §二: a bare 27e9 count; weights need no architecture, so they are exact.
    spec = spec_from_param_count(27e9)
    assert spec.assumed_shape
    assert base_weight_bytes(spec, weights=Dtype.BF16, compute=ComputeDtype.BF16) == pytest.approx(54e9)


@pytest.mark.parametrize(
    ("convention", "bytes_per_param"),
    [
        (Convention.SEED_8B, 8),
        (Convention.TORCH_ADAMW_BF16, 8),
        (Convention.FP32_STATES, 12),
        (Convention.FP32_MASTER, 16),
    ],
)
def test_qwen3_8b_static_state_conventions(convention, bytes_per_param):
    # seed 001 lines 26-32: weights ~16 GB + grads ~16 GB + Adam ~32 GB = "合计已达64GB" (8B nominal).
    nominal = static_state(params=8e9, convention=convention)
    assert nominal.total == bytes_per_param * 8e9
    if convention is Convention.SEED_8B:
        assert (nominal.weights, nominal.gradients, nominal.optimizer_states) == (16e9, 16e9, 32e9)
        assert nominal.total / GB == 64
    exact = static_state(params=8_190_735_360, convention=convention)
    assert exact.total == bytes_per_param * 8_190_735_360


def test_64gb_static_state_does_not_fit_one_a100_40gb():
    # seed 001 line 32: "单张A100 40GB无法承载"
    assert static_state(params=8_190_735_360, convention=Convention.SEED_8B).total > resolve_gpu("a100-40gb").memory_bytes
