"""The fp8 matmul rate: the FP8 (float8_e4m3fn) MAMF table's fraction of the dense fp8 datasheet peak where the table
has the card (stas00/ml-engineering compute/accelerator/README.md @744d01e1), else the card's bf16 fraction."""

from __future__ import annotations

import inspect

import pytest

from trainfit.catalog.gpus import gpu_ids, resolve_gpu
from trainfit.compute import rates as rates_mod
from trainfit.compute.gemm import gemm_seconds
from trainfit.compute.rates import default_rates

# (card, FP8 row's efficiency, the row's MAMF and Theory TFLOP/s, the row text cited in the docstring)
FP8_ROWS = [
    ("h100-sxm", 0.709, 1402.6, 1979, "NVIDIA H100 SXM | 1402.6 | 1979 | 70.9% | 1024x9216x14336 | 2.7.0+cu126"),
    ("h200", 0.734, 1453.4, 1979, "NVIDIA H200 SXM | 1453.4 | 1979 | 73.4% | 1280x4096x12032 | 2.7.1+cu128"),
    ("b200", 0.763, 3432.5, 4500, "NVIDIA B200 SXM | 3432.5 | 4500 | 76.3% | 15360x4096x3072 | 2.7.1+cu128"),
    ("gb200", 0.723, 3615.6, 5000,
     "NVIDIA GB200 SXM | 3615.6 | 5000 | 72.3% | 19456x5120x1536 | 2.10.0.dev20250916+cu130"),
]


@pytest.mark.parametrize("gpu_id,frac,mamf_tflops,theory_tflops,row", FP8_ROWS)
def test_fp8_rate_is_the_fp8_table_row(gpu_id, frac, mamf_tflops, theory_tflops, row):
    gpu = resolve_gpu(gpu_id)
    r = default_rates(gpu)
    assert r.fp8_matmul_flops_per_s == pytest.approx(gpu.fp8_dense_flops_per_s * frac, rel=1e-9)
    assert frac == pytest.approx(mamf_tflops / theory_tflops, abs=5e-4)  # the row's own arithmetic
    assert gpu.fp8_dense_flops_per_s == pytest.approx(theory_tflops * 1e12, rel=1e-3)  # same datasheet peak
    source = " ".join(inspect.getsource(rates_mod).split())  # the docstring's row text, line breaks folded
    assert f'"{row}"' in source
    assert "744d01e18b79512572f64a6bbd8b5f4a725203a7" in source


def test_bf16_rates_unchanged_and_fp8_differs_from_the_bf16_rule():
    for gpu_id, frac, *_ in FP8_ROWS:
        gpu = resolve_gpu(gpu_id)
        r = default_rates(gpu)
        bf16_frac = r.matmul_flops_per_s / gpu.half_dense_flops_per_s
        assert bf16_frac == pytest.approx({"h100-sxm": 0.803, "h200": 0.803, "b200": 0.776, "gb200": 0.729}[gpu_id],
                                          rel=1e-9)
        assert abs(r.fp8_matmul_flops_per_s / gpu.fp8_dense_flops_per_s - bf16_frac) > 1e-3


def test_cards_without_an_fp8_row_keep_their_bf16_fraction():
    seen = 0
    for gpu_id in gpu_ids():
        gpu = resolve_gpu(gpu_id)
        if gpu_id in rates_mod._FP8_MAMF_FRACTION or not gpu.fp8_dense_flops_per_s or not gpu.half_dense_flops_per_s:
            continue
        if not gpu.hbm_bytes_per_s:
            continue
        r = default_rates(gpu)
        assert r.fp8_matmul_flops_per_s / gpu.fp8_dense_flops_per_s == pytest.approx(
            r.matmul_flops_per_s / gpu.half_dense_flops_per_s, rel=1e-9), gpu_id
        seen += 1
    assert seen >= 3  # e.g. h20, h800, l40, mi300x


def test_a_large_fp8_gemm_runs_near_the_fp8_row_rate():
    # a big square fp8 GEMM on H100 at most the fp8 MAMF (1402.6 TFLOP/s), more than the old bf16-fraction rule allows
    r = default_rates(resolve_gpu("h100-sxm"))
    m = n = k = 8192
    s = gemm_seconds(m=m, n=n, k=k, rates=r, dtype_bytes=1)
    rate = 2 * m * n * k / s
    assert rate <= r.fp8_matmul_flops_per_s * (1 + 1e-9)
    assert rate < 0.803 * resolve_gpu("h100-sxm").fp8_dense_flops_per_s
