"""fp8 GEMMs by accumulation: Transformer Engine's and torchao's forward GEMMs with fast accumulation, their dgrad /
wgrad GEMMs (and every GEMM of TE's blockwise recipe) with the split (fp32-promoting) accumulator. Rates: Hopper fast at
the bf16 MAMF rate x TE's measured fp8 / bf16 speedup, split at the FP8 MAMF row (stas00/ml-engineering
compute/accelerator/README.md @744d01e1); Blackwell both at the row (cuBLAS: the flag only acts on Ada and Hopper)."""

from __future__ import annotations

import inspect

import pytest

from trainfit.catalog.gpus import gpu_ids, resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute import rates as rates_mod
from trainfit.compute.gemm import gemm_seconds
from trainfit.compute.inventory import step_inventory
from trainfit.compute.rates import HOPPER_FP8_FAST_ACCUM_SPEEDUP, default_rates, power_limited_rates
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

# (card, FP8 row's efficiency, the row's MAMF and Theory TFLOP/s, the row text cited in the docstring)
FP8_ROWS = [
    ("h100-sxm", 0.709, 1402.6, 1979, "NVIDIA H100 SXM | 1402.6 | 1979 | 70.9% | 1024x9216x14336 | 2.7.0+cu126"),
    ("h200", 0.734, 1453.4, 1979, "NVIDIA H200 SXM | 1453.4 | 1979 | 73.4% | 1280x4096x12032 | 2.7.1+cu128"),
    ("b200", 0.763, 3432.5, 4500, "NVIDIA B200 SXM | 3432.5 | 4500 | 76.3% | 15360x4096x3072 | 2.7.1+cu128"),
    ("gb200", 0.723, 3615.6, 5000,
     "NVIDIA GB200 SXM | 3615.6 | 5000 | 72.3% | 19456x5120x1536 | 2.10.0.dev20250916+cu130"),
]


def _split_rate(r):
    return r.fp8_matmul_flops_per_s * r.fp8_split_accumulator_share


def test_te_speedup_is_the_published_totals():
    # gemm_profiling.rst, H200 NVL, pre-quantized: "Total GEMM time (ms): 767.242 402.838", "FP8Current vs BF16: 1.90x"
    assert HOPPER_FP8_FAST_ACCUM_SPEEDUP == pytest.approx(1.905, abs=5e-4)
    per_layer = (10.632 + 10.747 + 10.530) / (5.577 + 5.661 + 5.547)  # fprop + dgrad + wgrad rows
    assert per_layer == pytest.approx(HOPPER_FP8_FAST_ACCUM_SPEEDUP, rel=3e-3)
    source = " ".join(inspect.getsource(rates_mod).split())
    assert "d0067d0da6cb01811b8072a7d304f0e00344ce2b" in source and "use_split_accumulator=False" in source


@pytest.mark.parametrize("gpu_id,frac,mamf_tflops,theory_tflops,row", FP8_ROWS)
def test_split_accumulator_rate_is_the_fp8_table_row(gpu_id, frac, mamf_tflops, theory_tflops, row):
    gpu = resolve_gpu(gpu_id)
    r = default_rates(gpu)
    assert _split_rate(r) == pytest.approx(gpu.fp8_dense_flops_per_s * frac, rel=1e-9)
    assert frac == pytest.approx(mamf_tflops / theory_tflops, abs=5e-4)  # the row's own arithmetic
    assert gpu.fp8_dense_flops_per_s == pytest.approx(theory_tflops * 1e12, rel=1e-3)  # same datasheet peak
    source = " ".join(inspect.getsource(rates_mod).split())
    assert f'"{row}"' in source and "744d01e18b79512572f64a6bbd8b5f4a725203a7" in source


@pytest.mark.parametrize("gpu_id", ["h100-sxm", "h200"])
def test_hopper_fast_accumulation_is_bf16_times_te_speedup(gpu_id):
    r = default_rates(resolve_gpu(gpu_id))
    assert r.fp8_matmul_flops_per_s == pytest.approx(r.matmul_flops_per_s * HOPPER_FP8_FAST_ACCUM_SPEEDUP, rel=1e-12)
    # 80.3 % x 1.905 / 2 = 76.5 % of the fp8 peak: faster than the split row, slower than twice bf16
    assert _split_rate(r) < r.fp8_matmul_flops_per_s < 2 * r.matmul_flops_per_s
    assert r.fp8_split_accumulator_share == pytest.approx({"h100-sxm": 0.709, "h200": 0.734}[gpu_id] / (0.803 * 0.9523),
                                                          rel=1e-3)


@pytest.mark.parametrize("gpu_id", ["b200", "gb200"])
def test_blackwell_accumulation_costs_nothing(gpu_id):
    r = default_rates(resolve_gpu(gpu_id))
    assert r.fp8_split_accumulator_share == 1.0
    assert r.fp8_matmul_flops_per_s == pytest.approx(resolve_gpu(gpu_id).fp8_dense_flops_per_s
                                                     * dict((g, f) for g, f, *_ in FP8_ROWS)[gpu_id], rel=1e-9)


def test_cards_without_a_row():
    seen = set()
    for gpu_id in gpu_ids():
        gpu = resolve_gpu(gpu_id)
        if gpu_id in rates_mod._FP8_MAMF_FRACTION or not gpu.fp8_dense_flops_per_s:
            continue
        if not gpu.half_dense_flops_per_s or not gpu.hbm_bytes_per_s:
            continue
        r = default_rates(gpu)
        assert r.fp8_split_accumulator_share == 1.0, gpu_id  # no split measurement: the fast rate
        hopper = (gpu.compute_capability or "").startswith("9.")
        bf16_frac = r.matmul_flops_per_s / gpu.half_dense_flops_per_s
        expected = (r.matmul_flops_per_s * HOPPER_FP8_FAST_ACCUM_SPEEDUP if hopper
                    else gpu.fp8_dense_flops_per_s * bf16_frac)
        assert r.fp8_matmul_flops_per_s == pytest.approx(expected, rel=1e-9), gpu_id
        seen.add("hopper" if hopper else "other")
    assert seen == {"hopper", "other"}  # e.g. h800, h20 / l40s, rtx4090, mi300x


def test_split_accumulator_only_slows_fp8_gemms():
    r = default_rates(resolve_gpu("h100-sxm"))
    kw = dict(m=16384, n=4096, k=4096, rates=r)
    assert gemm_seconds(**kw, split_accumulator=True) == gemm_seconds(**kw)  # bf16: no such flag
    fast = gemm_seconds(**kw, dtype_bytes=1)
    split = gemm_seconds(**kw, dtype_bytes=1, split_accumulator=True)
    assert split == pytest.approx(fast / r.fp8_split_accumulator_share, rel=1e-9)
    b200 = default_rates(resolve_gpu("b200"))
    assert gemm_seconds(m=16384, n=4096, k=4096, rates=b200, dtype_bytes=1, split_accumulator=True) == gemm_seconds(
        m=16384, n=4096, k=4096, rates=b200, dtype_bytes=1)


def test_calibration_and_power_limit_keep_the_split_share():
    r = default_rates(resolve_gpu("h100-sxm"))
    cal = r.with_overrides({"fp8_matmul_flops_per_s": 1.0e15}, source="test")
    assert _split_rate(cal) == pytest.approx(1.0e15 * r.fp8_split_accumulator_share)
    low = power_limited_rates(r, power_limit_w=400, rated_power_w=700)
    assert low.fp8_split_accumulator_share == r.fp8_split_accumulator_share


def _linear_gemms(inv_pass):
    return [g for g in inv_pass.gemms if g.dtype_bytes == 1]


def test_inventory_marks_dgrad_and_wgrad_split():
    spec = resolve_model("meta-llama/Llama-3.1-8B")
    inv = step_inventory(spec, micro_batch_size=1, seq_len=2048, fp8=True)
    fwd, bwd = _linear_gemms(inv.layers_forward), _linear_gemms(inv.layers_backward)
    assert fwd and bwd and len(bwd) == 2 * len(fwd)
    assert not any(g.split_accumulator for g in fwd)
    assert all(g.split_accumulator for g in bwd) and {g.name.rsplit(".", 1)[1] for g in bwd} == {"dX", "dW"}
    assert not any(g.split_accumulator for g in inv.recompute().gemms)  # the re-run forward: fprop again
    assert not any(g.split_accumulator for g in inv.head_forward.gemms + inv.head_backward.gemms)  # bf16 head
    blockwise = step_inventory(spec, micro_batch_size=1, seq_len=2048, fp8=True, fp8_split_fprop=True)
    assert all(g.split_accumulator for g in _linear_gemms(blockwise.layers_forward))
    bf16 = step_inventory(spec, micro_batch_size=1, seq_len=2048, fp8_split_fprop=True)
    assert not any(g.split_accumulator for g in bf16.layers_forward.gemms + bf16.layers_backward.gemms)


def _card(gpu, recipe):
    return {"model": {"id": "meta-llama/Llama-3.1-8B"}, "method": "sft",
            "hardware": {"gpu": gpu, "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": "selective"},
            "batch": {"micro_batch_size": 2, "seq_len": 8192},
            "precision": {"compute": "fp8", "fp8_recipe": recipe}}


def test_blockwise_forward_pays_the_split_accumulator_on_hopper_only():
    # delayed and blockwise are both TE (same weight cache, same casts in the inventory): the time differs only by
    # the forward GEMMs' accumulation; memory is the recipe's own and does not depend on it
    h_dly, h_blk = (make_plan(load_card_dict(_card("h100-sxm", r))) for r in ("delayed", "blockwise"))
    assert h_blk.step_seconds > h_dly.step_seconds
    b_dly, b_blk = (make_plan(load_card_dict(_card("b200", r))) for r in ("delayed", "blockwise"))
    assert b_blk.step_seconds == pytest.approx(b_dly.step_seconds, rel=1e-12)
