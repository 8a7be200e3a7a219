"""torch._grouped_mm's CUTLASS grouped kernel (compute.gemm.grouped_mm_seconds): fixed tile shape, tile quantisation
per group, wave quantisation over the SMs, a per-group fixed cost and a large-shape ceiling below cuBLAS.

The published points, each with the model's error (published time / model time - 1; positive: the kernel ran slower
than the model). Only half-0 points (``int(sha1(id).hexdigest(), 16) % 2``) set a constant: the per-group cost from
Transformer Engine's CUTLASS pair, the SM90 ceiling from TileOPs' H200 half-0 rows, the SM100 ceiling from torchao's
B200 half-0 rows; every half-1 point is a check."""

from hashlib import sha1

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute.gemm import (
    gemm_flops,
    gemm_seconds,
    grouped_mm_runs_cutlass,
    grouped_mm_seconds,
    grouped_mm_tile,
)
from trainfit.compute.inventory import step_inventory
from trainfit.compute.rates import default_rates

H100 = default_rates(resolve_gpu("h100-sxm"))


def _sizes(offs):
    return tuple(b - a for a, b in zip((0, *offs[:-1]), offs))


# (id, groups, m per group, n, k, group rows or None, published TFLOPS, model error, role)
POINTS = [
    # NVIDIA/TransformerEngine pull request #2045 "Add Cutlass GroupGEMM Support for fine-grained MoE Model", the
    # maintainer's update to its description (general_grouped_gemm, TE 2.7, CUDA 12.9, bf16, H100 SM90), read
    # 2026-12-03: the "Cutlass (TFLOPs)" column. TE's own CUTLASS build, not torch._grouped_mm: the pair's difference
    # sets GROUPED_MM_S_PER_GROUP (same FLOPs, same tiles); that kernel runs 15 % faster than torch's model.
    ("te2045-h100-8x4096x768x2048", 8, 4096, 768, 2048, None, 650.574, -0.152, "per-group"),
    ("te2045-h100-16x2048x768x2048", 16, 2048, 768, 2048, None, 636.927, -0.149, "per-group"),
    # pytorch/ao pull request #2490 "[moe training] add benchmarking script for grouped mm" (2025-07-03), its
    # description's results: bench_grouped_mm.py on "NVIDIA H100", torch._grouped_mm bf16, (M, K) @ (E, K, N) with
    # the printed jagged offs; the script's "tops" counts E x the FLOPs, so the rate is 2*M*K*N / time_sec.
    # M 8192, K 5120, N 8192, E 16: 1.31e-3 s (524.6 TFLOPS).
    ("ao2490-h100-16x512x8192x5120", 16, 512, 8192, 5120,
     _sizes([272, 832, 1744, 2288, 2768, 3056, 4160, 4352, 4544, 4800, 5056, 5360, 6432, 7760, 7872, 8192]),
     2 * 8192 * 5120 * 8192 / 1.31e-3 / 1e12, -0.006, "check"),
    # same: M 8192, K 8192, N 5120, E 16: 1.26e-3 s (545.4 TFLOPS).
    ("ao2490-h100-16x512x5120x8192", 16, 512, 5120, 8192,
     _sizes([464, 1008, 1664, 2608, 2912, 3296, 3584, 3968, 4960, 5024, 5232, 5952, 7440, 7760, 7984, 8192]),
     2 * 8192 * 8192 * 5120 / 1.26e-3 / 1e12, -0.013, "check"),
]
# tile-ai/TileOPs pull request #1567 (read 2026-12-03), its framework sweep: H200, bf16, kernel-only CUPTI timing, the
# "torch" column (torch._grouped_mm), GLM "up" shape: M total routed rows, N 4096, K 6144, E 256 (the PR notes its H200
# held ~1.4 GHz under the power wall). Half-0 rows set GROUPED_MM_CEILING, half-1 rows check it.
H200 = default_rates(resolve_gpu("h200"))
TILEOPS = [
    ("tileops1567-h200-256x1024x4096x6144", 1024, 603, 0.005, "check"),
    ("tileops1567-h200-256x2048x4096x6144", 2048, 624, -0.024, "fit"),
    ("tileops1567-h200-256x4096x4096x6144", 4096, 617, -0.010, "check"),
    ("tileops1567-h200-256x8192x4096x6144", 8192, 597, 0.024, "fit"),
]


def _half(pid: str) -> int:
    return int(sha1(pid.encode()).hexdigest(), 16) % 2


@pytest.mark.parametrize(("pid", "groups", "m", "n", "k", "rows", "tflops", "error", "role"), POINTS)
def test_published_grouped_mm_points(pid, groups, m, n, k, rows, tflops, error, role):
    assert role == "check" or _half(pid) == 0  # only half-0 points set a constant
    s = grouped_mm_seconds(m=m, n=n, k=k, groups=groups, rates=H100, group_rows=rows)
    published_s = gemm_flops(m=m, n=n, k=k, groups=groups) / (tflops * 1e12)
    assert published_s / s - 1 == pytest.approx(error, abs=0.01)


@pytest.mark.parametrize(("pid", "rows", "tflops", "error", "role"), TILEOPS)
def test_tileops_h200_torch_grouped_mm(pid, rows, tflops, error, role):
    assert (_half(pid) == 0) == (role == "fit")
    s = grouped_mm_seconds(m=rows, n=4096, k=6144, groups=256, rates=H200)
    published_s = gemm_flops(m=rows, n=4096, k=6144, groups=256) / (tflops * 1e12)
    assert published_s / s - 1 == pytest.approx(error, abs=0.01)


def test_checks_closer_than_the_batched_pricing():
    # the shared-wave batched pricing (gemm_seconds with groups) gave 752 and 759 TFLOPS at the pytorch/ao points
    for pid, groups, m, n, k, rows, tflops, _, role in POINTS:
        if role != "check":
            continue
        old = gemm_seconds(m=m, n=n, k=k, groups=groups, rates=H100)
        new = grouped_mm_seconds(m=m, n=n, k=k, groups=groups, rates=H100, group_rows=rows)
        published_s = gemm_flops(m=m, n=n, k=k, groups=groups) / (tflops * 1e12)
        assert abs(published_s / new - 1) < abs(published_s / old - 1)


def test_tile_choice_follows_pytorch_dispatch():
    # aten/src/ATen/native/cuda/GroupMM.cu @117b8633: small = M <= 128 or N <= 128
    assert grouped_mm_tile(m=2048, n=768, compute_capability="9.0") == (128, 256, 1)
    assert grouped_mm_tile(m=128, n=768, compute_capability="9.0") == (64, 128, 1)
    assert grouped_mm_tile(m=2048, n=768, compute_capability="10.0") == (256, 256, 2)
    assert grouped_mm_tile(m=64, n=768, compute_capability="10.0") == (128, 256, 1)


def test_qwen3_30b_a3b_expert_shapes_on_h100():
    # prime-rl's gate_up at 1,024 rows per expert: 128 x (1024 x 2048) @ (2048 x 1536); was 741 TFLOPS
    f = gemm_flops(m=1024, n=1536, k=2048, groups=128)
    fwd = f / grouped_mm_seconds(m=1024, n=1536, k=2048, groups=128, rates=H100) / 1e12
    assert 540 < fwd < 570
    # wgrad (k = rows per expert) and dgrad run the same kernel; a short k costs depth: at 256 rows per expert the
    # weight gradient is slower per FLOP than the forward
    wgrad = f / grouped_mm_seconds(m=2048, n=1536, k=1024, groups=128, rates=H100) / 1e12
    assert 500 < wgrad < fwd
    short = gemm_flops(m=2048, n=1536, k=256, groups=128) / grouped_mm_seconds(
        m=2048, n=1536, k=256, groups=128, rates=H100) / 1e12
    assert short < 0.7 * fwd


def test_other_dtypes_keep_the_batched_pricing():
    assert grouped_mm_seconds(m=1024, n=1536, k=2048, groups=128, rates=H100, dtype_bytes=1) == gemm_seconds(
        m=1024, n=1536, k=2048, groups=128, rates=H100, dtype_bytes=1)
    assert grouped_mm_seconds(m=0, n=1536, k=2048, groups=128, rates=H100) == 0.0


def test_only_sm90_and_sm100_take_the_cutlass_kernel():
    """PyTorch's _grouped_mm_cuda: the CUTLASS kernel when the device's major is 9 or 10 (and bf16)."""
    assert grouped_mm_runs_cutlass("9.0") and grouped_mm_runs_cutlass("10.0")
    for cc in ("8.0", "8.6", "8.9", "12.0", None):
        assert not grouped_mm_runs_cutlass(cc), cc
    assert resolve_gpu("rtx5090").compute_capability == "12.0"


@pytest.mark.parametrize("gpu", ["a100", "rtx4090", "rtx5090"])
def test_other_cards_run_the_per_group_mm_fallback(gpu):
    """_grouped_mm_fallback: one at::mm_out per group, so per-group gemm_seconds (each with its kernel floor)."""
    r = default_rates(resolve_gpu(gpu))
    one = gemm_seconds(m=1024, n=1536, k=2048, rates=r)
    assert grouped_mm_seconds(m=1024, n=1536, k=2048, groups=128, rates=r) == pytest.approx(128 * one, rel=1e-12)
    rows = (512.0, 1536.0)
    ragged = grouped_mm_seconds(m=1024, n=1536, k=2048, groups=2, rates=r, group_rows=rows)
    assert ragged == pytest.approx(sum(gemm_seconds(m=x, n=1536, k=2048, rates=r) for x in rows), rel=1e-12)
    # tiny groups pay a kernel each, unlike one batched roof
    tiny = grouped_mm_seconds(m=8, n=256, k=256, groups=64, rates=r)
    assert tiny >= 64 * r.device_s_per_kernel_min
    assert tiny > gemm_seconds(m=8, n=256, k=256, groups=64, rates=r)


def test_only_non_megatron_routed_gemms_take_the_grouped_kernel():
    qwen = resolve_model("Qwen/Qwen3-30B-A3B")
    kw = {"micro_batch_size": 1, "seq_len": 1024, "expert_parallel": 8}
    plain = step_inventory(qwen, **kw)
    one = [g.name for g in plain.layers_forward.gemms + plain.layers_backward.gemms if g.grouped_kernel]
    assert sorted(one) == sorted(["gate_up_proj", "down_proj", "gate_up_proj.dX", "down_proj.dX",
                                  "gate_up_proj.dW", "down_proj.dW"])
    mega = step_inventory(qwen, megatron_experts=True, **kw)
    assert not any(g.grouped_kernel for g in mega.layers_forward.gemms + mega.layers_backward.gemms)
    loop = step_inventory(qwen, expert_loop=True, **kw)
    assert not any(g.grouped_kernel for g in loop.layers_forward.gemms + loop.layers_backward.gemms)


def test_grouped_gemm_gmm_is_a_per_expert_cublas_loop():
    # grouped_gemm's ops.gmm (NeMo Automodel experts gmm): CublasGroupedGemm over 4 streams on any build but SM80
    # (fanshiqing/grouped_gemm csrc/grouped_gemm.cu l.399-401 @172fada89fa7364fe5d026b3a0dfab58b591ffdd)
    qwen = resolve_model("Qwen/Qwen3-30B-A3B")
    kw = {"micro_batch_size": 1, "seq_len": 1024, "expert_parallel": 8}
    gmm = step_inventory(qwen, expert_streams=True, **kw)
    gemms = gmm.layers_forward.gemms + gmm.layers_backward.gemms
    assert sorted(g.name for g in gemms if g.launch_per_group) == sorted(
        ["gate_up_proj", "down_proj", "gate_up_proj.dX", "down_proj.dX", "gate_up_proj.dW", "down_proj.dW"])
    assert not any(g.grouped_kernel for g in gemms)


def test_grouped_streams_card_value():
    from trainfit.spec.enums import MoeExperts

    assert not MoeExperts.GROUPED_STREAMS.is_loop
    assert MoeExperts.LOOP.is_loop and MoeExperts.LOOP_ALL.is_loop and not MoeExperts.GROUPED.is_loop


B200 = default_rates(resolve_gpu("b200"))
# pytorch/ao torchao/prototype/moe_training/README.md @ff163084ee0065663204e8be404670a0406e7ec3 (2025-10-14), "Autograd
# function" tables: B200, torch 2.10.0a0+gitf6de195, bf16_fwd_bwd_us of torch._grouped_mm (A (M, K) @ B (G, K, N),
# forward + backward: output, input-gradient and weight-gradient grouped GEMMs) on jagged groups of M / G mean rows.
# (M, N, K, G, published us, model error, role): half-0 rows set GROUPED_MM_CEILING_SM100, half-1 rows check it.
B200_POINTS = [
    (128000, 8192, 5120, 1, 43140.20, 0.035, "fit"),
    (128000, 8192, 5120, 2, 39487.60, -0.053, "check"),
    (128000, 8192, 5120, 4, 39189.20, -0.052, "check"),
    (128000, 8192, 5120, 8, 37700.70, -0.093, "fit"),
    (128000, 2048, 7168, 1, 13064.80, -0.192, "check"),
    (128000, 2048, 7168, 2, 14900.20, -0.032, "check"),
    (128000, 2048, 7168, 4, 15823.60, 0.053, "fit"),
    (128000, 2048, 7168, 8, 14966.80, 0.005, "fit"),
]


@pytest.mark.parametrize(("M", "N", "K", "G", "us", "error", "role"), B200_POINTS)
def test_b200_grouped_mm_forward_and_backward(M, N, K, G, us, error, role):
    assert (_half(f"ao-moe-readme-b200-{M}x{N}x{K}x{G}") == 0) == (role == "fit")
    m = M / G
    s = sum(grouped_mm_seconds(m=a, n=b, k=c, groups=G, rates=B200) for a, b, c in ((m, N, K), (m, K, N), (K, N, m)))
    assert us * 1e-6 / s - 1 == pytest.approx(error, abs=0.01)
