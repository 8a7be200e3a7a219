"""Matrix-multiply time at a shape-dependent efficiency.

A GEMM ``(m, k) @ (k, n)`` does ``2·m·n·k`` FLOPs and moves at least ``(m·k + k·n + m·n)·bytes``.
Its time is the larger of the two roofs, each at what the card sustains (``rates.py``)::

    compute_s = flops / (matmul_flops_per_s · wave_efficiency · depth_efficiency)
    memory_s  = bytes / hbm_bytes_per_s
    seconds   = max(compute_s, memory_s, device_s_per_kernel_min)

* **Wave (tile) quantisation.** cuBLAS tiles the output in ``TILE_M × TILE_N`` blocks, one per SM at
  a time; ``tiles`` blocks on ``sm_count`` SMs run in ``ceil(tiles / sm_count)`` waves and the last
  wave is partly idle: ``wave_efficiency = tiles / (waves · sm_count)`` (NVIDIA, "Matrix
  Multiplication Background User's Guide", sections "Tile quantization" and "Wave quantization").
  Grouped GEMMs (MoE experts in one kernel) share the waves: ``groups`` multiplies the tiles.
* **Tile fill.** A tile is computed whole even where the output is narrower than it:
  ``tile_fill = m·n / (tiles' area)``; LoRA's rank-16 products fill an eighth of a tile.
* **Depth.** Each tile streams ``k`` in slices; the prologue/epilogue cost is fixed, so a short
  ``k`` runs below peak: ``depth_efficiency = k / (k + K_HALF)`` with ``K_HALF = 128`` (one tile
  width of pipeline fill; same guide, "Math and memory bounds").
* **Skinny shapes** (LoRA's rank-r products, decode at a small batch) fall on the memory roof when their k is short;
  a rank-r ``X @ A`` with a long k (m tokens, n = r, k = hidden) has fewer output tiles than SMs and is priced on the
  tile and wave roof, above its memory roof (no split-K). Split-K for those was tried and not taken (2026-12-05: it
  brings the RTX 5090 Unsloth rows in and moves the H100 / H200 rows and the LoRA median away; the numbers are in
  the rtx5090 catalog entry's notes).
* **fp8.** A GEMM with 1-byte operands (``dtype_bytes=1``: Transformer Engine / torchao float8 linears)
  runs at ``rates.fp8_matmul_flops_per_s`` under the same tile, wave and depth model (its tiles are
  128 wide on Hopper too: cuBLASLt / CUTLASS fp8 kernels); a card without an fp8 rate is an error. The
  casts that feed it are memory-bound kernels, counted in the op inventory. MXFP8 (1x32 E8M0 block scales) runs
  at the same rate: on Blackwell the block scales are operands of the tensor-core instruction itself
  (``tcgen05.mma ... .block_scale``), and NVIDIA's datasheets give one FP8 figure.
* **fp4.** A GEMM with half-byte operands (``dtype_bytes=0.5``: NVFP4 linears, E2M1 with E4M3 scales per 16) runs
  at ``rates.fp4_matmul_flops_per_s`` (the datasheet's dense FP4 rate at the card's fp8 fraction) under the same
  tile, wave and depth model; a card without an fp4 rate is an error.
* **Calibration.** When ``rates.gemm_points`` holds measurements, the model's time at the nearest
  measured shape (in log space) is corrected by measured/modelled there.

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import replace
from math import ceil, log

from trainfit.compute.rates import DeviceRates, GemmPoint
from trainfit.errors import CardError

TILE_M = 128
TILE_N = 128
FP32_TILE_M = 64
FP32_TILE_N = 32
"""SIMT (non-tensor-core) fp32 kernels tile smaller (cuBLAS's sgemm 64x32 / 32x32 families)."""
K_HALF = 128.0


def gemm_flops(*, m: float, n: float, k: float, groups: float = 1) -> float:
    """``2·m·n·k`` per group."""
    return 2.0 * m * n * k * groups


QUANTIZED_GEMM_OUTPUT_BYTES = 2.0
"""Bytes per output element of an fp8 / fp4 GEMM: the quantized linears write their output in the activation dtype,
bf16 (Transformer Engine ``general_gemm(..., out_dtype=activation_dtype)`` forward and dgrad,
transformer_engine/pytorch/module/linear.py l.536-540 and l.1086-1093 @d0067d0da6cb01811b8072a7d304f0e00344ce2b)."""
NVFP4_SCALE_BYTES_PER_ELEMENT = 1.0 / 16
"""NVFP4's block scale read with each operand element: one 1-B E4M3 scale per 16 elements (``memory.fp8``'s
``NVFP4_BLOCK``: cuDNN Block Scaling, https://docs.nvidia.com/cudnn/latest/operations/BlockScaling/llms.txt)."""


def gemm_bytes(*, m: float, n: float, k: float, groups: float = 1, dtype_bytes: float = 2.0) -> float:
    """Operands read once and the output written once (the memory-traffic lower bound). Operands at
    ``dtype_bytes`` (a 0.5-B fp4 operand with its NVFP4 block scales, ``NVFP4_SCALE_BYTES_PER_ELEMENT``); the output
    in ``dtype_bytes`` for a bf16 / fp16 / fp32 GEMM and in bf16 for an fp8 or fp4 one
    (``QUANTIZED_GEMM_OUTPUT_BYTES``). The fp8 operands' scales are left out: one fp32 per tensor for the per-tensor
    recipes, and the recipe (blockwise 4/128 B, MXFP8 1/32 B per element) is not known here."""
    fp4 = dtype_bytes <= 0.5
    operand = dtype_bytes + (NVFP4_SCALE_BYTES_PER_ELEMENT if fp4 else 0.0)
    output = max(dtype_bytes, QUANTIZED_GEMM_OUTPUT_BYTES)
    return ((m * k + k * n) * operand + m * n * output) * groups


def wave_efficiency(*, m: float, n: float, sm_count: int, groups: float = 1) -> float:
    """Fraction of SM slots busy over the waves the output tiles need."""
    tiles = ceil(max(m, 1) / TILE_M) * ceil(max(n, 1) / TILE_N) * max(groups, 1)
    waves = ceil(tiles / sm_count)
    return tiles / (waves * sm_count)


def tile_fill(*, m: float, n: float, tile_m: int = TILE_M, tile_n: int = TILE_N) -> float:
    """Share of the output tiles' area that is real output: ``m·n / (ceil(m/TM)·TM · ceil(n/TN)·TN)``
    (the guide's tile quantisation: an n = 16 product fills an eighth of a 128-wide tile)."""
    return (m * n) / (ceil(max(m, 1) / tile_m) * tile_m * ceil(max(n, 1) / tile_n) * tile_n)


def depth_efficiency(*, k: float) -> float:
    return k / (k + K_HALF)


def _model_compute_s(*, m: float, n: float, k: float, groups: float, rates: DeviceRates, fp32: bool = False,
                     peak: float | None = None) -> float:
    if fp32 and rates.tf32_matmul_flops_per_s:  # TF32 allowed (precision.tf32): tensor-core tiles at the TF32 rate
        peak = rates.tf32_matmul_flops_per_s
        fp32 = False
    if fp32:  # no tensor cores: SIMT fp32 at the card's fp32 rate (rates._FP32_MATMUL_FRACTION), in smaller tiles
        eff = tile_fill(m=m, n=n, tile_m=FP32_TILE_M, tile_n=FP32_TILE_N) * depth_efficiency(k=k)
        return gemm_flops(m=m, n=n, k=k, groups=groups) / ((rates.fp32_matmul_flops_per_s or rates.matmul_flops_per_s / 12) * eff)
    eff = wave_efficiency(m=m, n=n, sm_count=rates.sm_count, groups=groups) * depth_efficiency(k=k) * tile_fill(m=m, n=n)
    return gemm_flops(m=m, n=n, k=k, groups=groups) / ((peak or rates.matmul_flops_per_s) * eff)


def fp8_precise_rates(rates: DeviceRates) -> DeviceRates:
    """``rates`` for a pass whose fp8 GEMMs run at full precision (a backward; a blockwise recipe's forward too,
    ``float8_casts.CastTraffic.forward_split_accumulator``): a backward's fp8 GEMMs (Transformer Engine's dgrad and wgrad, torchao's
    ``grad_input`` and ``grad_weight``) accumulate at full precision, without cuBLASLt's fast accumulation, at
    ``rates.fp8_precise_matmul_flops_per_s`` where the card has one (``rates._FP8_PRECISE_ACCUMULATION_FRACTION``:
    Hopper), never above ``fp8_matmul_flops_per_s``; otherwise ``rates`` unchanged. The forward's fp8 GEMMs keep
    ``fp8_matmul_flops_per_s``."""
    if not rates.fp8_precise_matmul_flops_per_s or not rates.fp8_matmul_flops_per_s:
        return rates
    return replace(rates, fp8_matmul_flops_per_s=min(rates.fp8_precise_matmul_flops_per_s, rates.fp8_matmul_flops_per_s))


def _peak(rates: DeviceRates, fp8: bool, fp4: bool = False) -> float:
    if fp4:
        if not rates.fp4_matmul_flops_per_s:
            raise CardError(f"precision.compute: fp4 needs fp4 tensor cores; {rates.gpu_id} has no fp4 rate in the"
                            " catalog")
        return rates.fp4_matmul_flops_per_s
    if not fp8:
        return rates.matmul_flops_per_s
    if not rates.fp8_matmul_flops_per_s:
        raise CardError(f"precision.compute: fp8 needs fp8 tensor cores; {rates.gpu_id} has no fp8 rate in the catalog")
    return rates.fp8_matmul_flops_per_s


def _nearest(points: tuple[GemmPoint, ...], m: float, n: float, k: float) -> GemmPoint:
    def dist(p: GemmPoint) -> float:
        return sum((log(max(a, 1)) - log(max(b, 1))) ** 2 for a, b in ((p.m, m), (p.n, n), (p.k, k)))

    return min(points, key=dist)


def gemm_seconds(
    *, m: float, n: float, k: float, rates: DeviceRates, groups: float = 1, dtype_bytes: float = 2.0
) -> float:
    """Seconds of one GEMM (or one grouped GEMM of ``groups`` equal problems) on one GPU: its compute or memory
    roof, at least one kernel's fixed device cost (``rates.device_s_per_kernel_min``)."""
    if min(m, n, k) <= 0:
        return 0.0
    return max(_roof_seconds(m=m, n=n, k=k, rates=rates, groups=groups, dtype_bytes=dtype_bytes),
               rates.device_s_per_kernel_min)


def _roof_seconds(*, m: float, n: float, k: float, rates: DeviceRates, groups: float, dtype_bytes: float) -> float:
    """The larger of a GEMM's compute and memory seconds (``gemm_seconds`` without the kernel floor)."""
    fp32 = dtype_bytes >= 4
    fp8 = dtype_bytes <= 1
    fp4 = dtype_bytes <= 0.5
    compute = _model_compute_s(m=m, n=n, k=k, groups=groups, rates=rates, fp32=fp32, peak=_peak(rates, fp8, fp4))
    if rates.gemm_points and not fp32 and not fp8:  # measured points are bf16
        p = _nearest(rates.gemm_points, m, n, k)
        modelled = max(_model_compute_s(m=p.m, n=p.n, k=p.k, groups=1, rates=rates, peak=rates.matmul_flops_per_s),
                       gemm_bytes(m=p.m, n=p.n, k=p.k) / rates.hbm_bytes_per_s)
        measured = gemm_flops(m=p.m, n=p.n, k=p.k) / p.flops_per_s
        compute *= measured / modelled
    memory = gemm_bytes(m=m, n=n, k=k, groups=groups, dtype_bytes=dtype_bytes) / rates.hbm_bytes_per_s
    return max(compute, memory)


def multi_stream_grouped_gemm_seconds(
    *, m: float, n: float, k: float, rates: DeviceRates, groups: float = 1, dtype_bytes: float = 2.0
) -> float:
    """Seconds of a grouped GEMM that Transformer Engine's ``GroupedLinear`` runs as one cuBLAS GEMM per group
    (per local expert), round-robin over its compute streams: the groups' compute (or memory) at the grouped rate
    (``gemm_seconds``'s roof, without its one-kernel floor) plus one kernel's fixed device cost
    (``rates.device_s_per_kernel_min``) per group, so never less than ``gemm_seconds`` (groups <= 1: one kernel's
    cost on top of the roof), and ``groups`` kernels' fixed cost, not ``groups + 1``, where the roof is below one.

    The mechanism: TE's PyTorch grouped GEMM (``te_general_grouped_gemm``, ``transformer_engine/pytorch/csrc/
    extensions/gemm.cpp`` l.393-547) calls ``nvte_multi_tensor_gemm``, which on every GPU but Hopper with
    ``NVTE_USE_CUTLASS_GROUPED_GEMM=1`` (bf16/fp16 only) takes ``multi_stream_cublas_gemm``: a loop launching one
    ``nvte_cublas_gemm_v2`` per GEMM on ``detail::get_compute_stream(i % num_streams)``, 4 streams
    (NVIDIA/TransformerEngine ``transformer_engine/common/gemm/cublaslt_gemm.cu`` l.924-977 and l.1006-1026,
    ``transformer_engine/common/util/multi_stream.cpp`` l.52-54 @v2.9 70f536662ae10a62a54f4ed1ba92e3314c5cfd69; the
    same loop since pull request #853 "Grouped GEMM via multi-stream cuBLAS" (2024), still the default at v2.18
    27486e03cfc1fa41f6932dcecdc47c71c47eac3e, ``cublaslt_gemm.cu`` l.970-1011 and l.1052-1076). Megatron-Bridge's
    recipes do not set the CUTLASS switch (no ``NVTE_USE_CUTLASS_GROUPED_GEMM`` in NVIDIA-NeMo/Megatron-Bridge
    @067f987df03b8355b03192d88d70f1709fedf51a, @97ad8cc6fb27a58bb79ff51ce73897c3887aa2c6 or
    @fa0315ae2684693a666be9d247adf9baf1e30028), and it never covers fp8.

    Checked, not fitted, against TE's own measurement of ``general_grouped_gemm`` on Hopper (bf16, TE 2.7, CUDA 12.9;
    NVIDIA/TransformerEngine pull request #2045 "Add Cutlass GroupGEMM Support for fine-grained MoE Model", for
    "H100(SM90)", 2025-08-08, the maintainer's update to its description, read 2026-12-03): shape
    (groups, m, n, k) (8, 4096, 768, 2048) 627.9 TFLOPS and (16, 2048, 768, 2048) 553.9 TFLOPS, the same FLOPs in
    164.2 and 186.1 us: 2.7 us more per extra GEMM. This function gives 162.2 and 182.2 us (635 and 566 TFLOPS, within
    2%); ``gemm_seconds`` alone, 142.2 us for both (725 TFLOPS)."""
    if min(m, n, k) <= 0:
        return 0.0
    roof = _roof_seconds(m=m, n=n, k=k, rates=rates, groups=groups, dtype_bytes=dtype_bytes)
    return roof + max(groups, 1) * rates.device_s_per_kernel_min


def gemm_bound(*, m: float, n: float, k: float, rates: DeviceRates, groups: float = 1) -> str:
    """'compute' or 'memory': which roof the GEMM sits on."""
    compute = _model_compute_s(m=m, n=n, k=k, groups=groups, rates=rates, peak=rates.matmul_flops_per_s)
    memory = gemm_bytes(m=m, n=n, k=k, groups=groups) / rates.hbm_bytes_per_s
    return "compute" if compute >= memory else "memory"


GROUPED_MM_CEILING = 0.786
"""``torch._grouped_mm``'s SM90 large-shape rate as a share of the card's dense (cuBLAS) matmul rate. Fitted on the
half-0 (``int(sha1(id).hexdigest(), 16) % 2``) points of the published ``torch._grouped_mm`` measurements
(``tests/compute/test_grouped_gemm.py``): tile-ai/TileOPs pull request #1567's H200 sweep (bf16, kernel-only CUPTI
timing, GLM "up" shape N 4096, K 6144, 256 experts; ids ``tileops1567-h200-256x{rows}x4096x6144``) at 2,048 and 8,192
rows per expert, 624 and 597 TFLOPS, where the model at the dense rate gives 722 and 725: the mean of published over
modelled compute, 1.186 against a reference ceiling of 0.932, gives 0.786. Checked on the half-1 points: TileOPs at
1,024 and 4,096 rows (603, 617 TFLOPS) and pytorch/ao pull request #2490's two H100 Llama-4 points (524.6, 545.4 TFLOPS
on the published jagged groups), all within 2 %. Transformer Engine's own CUTLASS grouped kernel
(``NVTE_USE_CUTLASS_GROUPED_GEMM``, a different build that no card here enables) runs faster: its published H100
pair (``GROUPED_MM_S_PER_GROUP``) sits 15 % above this model."""
GROUPED_MM_CEILING_SM100 = 0.456
"""The same ceiling for PyTorch's SM100 (B200 / GB200) grouped kernel (256x256 over two SMs, ``grouped_mm_tile``),
which runs at about half the card's cuBLAS rate: pytorch/ao ``torchao/prototype/moe_training/README.md``
@ff163084ee0065663204e8be404670a0406e7ec3 (2025-10-14, "Autograd function" tables, B200, torch 2.10.0a0+gitf6de195,
``benchmark_scaled_grouped_mm_dq.py --compile``: ``torch._grouped_mm`` bf16 forward + backward, i.e. the output,
input-gradient and weight-gradient grouped GEMMs, on ``generate_jagged_offs`` groups) publishes 712-863 TFLOPS
where the model at the Hopper reference ceiling 0.932 gives 1,424-1,591. Fitted on that table's half-0 rows (ids
``ao-moe-readme-b200-{M}x{N}x{K}x{G}``: (128000, 8192, 5120) at G 1 and 8, (128000, 2048, 7168) at G 4 and 8; the mean
of published / modelled, 2.04), checked on its half-1 rows (``tests/compute/test_grouped_gemm.py``). No SM100 kernel
reason is read for it; a later PyTorch build may run faster."""
GROUPED_MM_S_PER_GROUP = 0.424e-6
"""Fixed device seconds per group of a CUTLASS ptr-array grouped kernel: the kernels rebuild their TMA descriptors for
each group a CTA moves to (CUTLASS ``sm90_gemm_array_tma_warpspecialized_cooperative.hpp``
``tensormaps_perform_update``) and read the group's problem shape. Measured, not fitted to a rate: Transformer
Engine's CUTLASS grouped GEMM on an H100 (NVIDIA/TransformerEngine pull request #2045, the maintainer's update to its
description, TE 2.7, CUDA 12.9, read 2026-12-03: https://github.com/NVIDIA/TransformerEngine/pull/2045) ran (groups, m, n, k) (8, 4096, 768, 2048) at 650.574 TFLOPS and
(16, 2048, 768, 2048) at 636.927: the same FLOPs and the same 768 output tiles of 128x256, 158.4 and 161.8 us, so the
3.4 us between them is 8 more groups' fixed cost."""


def grouped_mm_runs_cutlass(compute_capability: str | None) -> bool:
    """Whether ``torch._grouped_mm`` takes its CUTLASS grouped kernel on a card: bf16 inputs and output on compute
    capability 9.x or 10.x only. PyTorch's ``_grouped_mm_cuda`` sets ``use_fast_path =
    _scaled_mm_allowed_device(/*sm90_only*/true, /*sm100_only*/true) && a_b_and_out_are_bf16``, and that helper
    returns ``(sm90_only && dprops->major == 9) || (sm100_only && dprops->major == 10)``
    (pytorch/pytorch ``aten/src/ATen/native/cuda/GroupedBlas.cpp`` read at
    @00d4eaf9327928137f4cc437b17e5cf54623565f; the same test in every stored version of the file and of
    ``Blas.cpp`` / ``ScaledBlas.cpp`` that defines the helper). Every other CUDA card (SM80 / SM86 / SM89, the
    RTX 5090's SM120) runs ``_grouped_mm_fallback`` (``grouped_mm_seconds``). None (a card of unknown capability,
    ROCm): False."""
    if not compute_capability:
        return False
    return compute_capability.split(".")[0] in ("9", "10")


def grouped_mm_tile(*, m: float, n: float, compute_capability: str | None) -> tuple[int, int, int]:
    """(tile rows, tile columns, SMs per tile) of ``torch._grouped_mm``'s bf16 CUTLASS kernel: PyTorch's
    ``dispatch_bf16_grouped_kernel_on_tile_size`` (pytorch/pytorch ``aten/src/ATen/native/cuda/GroupMM.cu``
    @117b863359bf2941f50d404dc3172d1c46f92b41) takes ``small = M <= 128 or N <= 128`` on the mean per-group shape
    (``M / group_count`` for a 2-D input; for the weight gradient, both inputs 2-D, ``M`` and ``N`` are the feature
    sizes) and picks, SM90: 64x128x128 pingpong when small, else 128x256x64 cooperative (cluster 2x1); SM100:
    128x256x64 one-SM when small, else 256x256x64 over two SMs (``PONGOr2SM``)."""
    small = m <= 128 or n <= 128
    if compute_capability and compute_capability.startswith("10"):
        return (128, 256, 1) if small else (256, 256, 2)
    return (64, 128, 1) if small else (128, 256, 1)


def grouped_mm_seconds(
    *, m: float, n: float, k: float, rates: DeviceRates, groups: float = 1, dtype_bytes: float = 2.0,
    group_rows: tuple[float, ...] | None = None,
) -> float:
    """Seconds of one grouped GEMM run as a single CUTLASS grouped kernel (``torch._grouped_mm``: transformers v5
    ``grouped_mm``, torchtitan, prime-rl, NeMo Automodel's ``experts: torch_mm``), ``groups`` problems of
    ``(m, k) @ (k, n)`` (``group_rows``: the groups' own row counts, ragged; their mean is ``m``)::

        tiles   = sum over groups of ceil(m_g / TM) · ceil(n / TN)       (tile quantisation per group)
        waves   = ceil(tiles / (SMs / SMs per tile))                     (the persistent scheduler's waves)
        fill    = real output / (waves · slots · TM · TN)
        compute = flops / (matmul rate · ceiling · fill · depth_efficiency(k))   (GROUPED_MM_CEILING, SM100's)
                  + groups · GROUPED_MM_S_PER_GROUP
        seconds = max(compute, memory roof, one kernel) + one kernel (``prepare_grouped_gemm_data``, the
                  ``<<<1, group_count>>>`` launch that writes the per-group pointers and shapes, GroupMM.cu)

    The tile comes from ``grouped_mm_tile``: unlike cuBLAS's heuristic, a fixed shape, so 2,048-wide expert rows at
    768 columns fill 128x256 tiles in 3 columns and a per-group ``m`` below a tile multiple rounds up in every group.
    The weight gradient (``k`` = the group's rows) and the input gradient are the same kernel.

    Only compute capability 9.x / 10.x runs that kernel (``grouped_mm_runs_cutlass``). Any other CUDA card runs
    PyTorch's ``_grouped_mm_fallback``: ``offs.cpu()`` then, per group, ``at::mm_out`` on the group's slices (one
    cuBLAS GEMM per group; ``bmm_out`` for 3-D x 3-D), ``ATen/native/GroupedMMUtils.h`` l.124-173 of the torch
    2.13.0 wheel (pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb): priced as ``gemm_seconds`` per group
    (``group_rows``' own rows, else ``m``), each with its kernel floor. Its one device-to-host copy of the offsets
    and the per-group launches' host time are not in these device seconds. Non-bf16 GEMMs and cards of unknown
    capability: ``gemm_seconds`` of the whole group (no published grouped-kernel point to check them on)."""
    cc = rates.compute_capability
    if min(m, n, k) <= 0:
        return 0.0
    if dtype_bytes != 2.0 or groups < 1 or not cc:
        return gemm_seconds(m=m, n=n, k=k, rates=rates, groups=groups, dtype_bytes=dtype_bytes)
    if not grouped_mm_runs_cutlass(cc):
        rows = group_rows or (m,)
        per_group = sum(gemm_seconds(m=r, n=n, k=k, rates=rates, dtype_bytes=dtype_bytes) for r in rows) / len(rows)
        return groups * per_group
    tm, tn, per_tile = grouped_mm_tile(m=m, n=n, compute_capability=cc)
    rows = group_rows or (m,) * int(round(groups))
    tiles = sum(ceil(max(r, 1) / tm) for r in rows) * ceil(n / tn) * (groups / len(rows))
    slots = max(rates.sm_count // per_tile, 1)
    waves = ceil(tiles / slots)
    fill = (m * n * groups) / (waves * slots * tm * tn)
    flops = gemm_flops(m=m, n=n, k=k, groups=groups)
    ceiling = GROUPED_MM_CEILING_SM100 if cc.startswith("10") else GROUPED_MM_CEILING
    compute = (flops / (rates.matmul_flops_per_s * ceiling * fill * depth_efficiency(k=k))
               + groups * GROUPED_MM_S_PER_GROUP)
    memory = gemm_bytes(m=m, n=n, k=k, groups=groups, dtype_bytes=dtype_bytes) / rates.hbm_bytes_per_s
    return max(compute, memory, rates.device_s_per_kernel_min) + rates.device_s_per_kernel_min
