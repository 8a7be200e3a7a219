"""What one GPU kind actually sustains: the rates every time term divides by.

The catalog (``catalog/gpus.py``) gives datasheet peaks. A time model needs what kernels reach:
the largest matmul rate a brute-force shape search finds (MAMF), the bandwidth a streaming kernel
sees, what eager PyTorch costs on the host per kernel, the bus bandwidth NCCL reaches. This module
turns a ``GpuSpec`` into those rates from published measurements, and lets a calibration file
(``trainfit calibrate``) replace any of them with the user's own.

Sources of the defaults (each is listed in the plan's assumptions when used):

* Matmul: "Maximum Achievable Matmul FLOPS comparison table", stas00/ml-engineering
  ``compute/accelerator/README.md`` @744d01e18b79512572f64a6bbd8b5f4a725203a7 (BF16 table): MAMF / datasheet =
  86.9 % A100 SXM, 81.1 % A100 PCIe, 80.3 % H100 SXM ("H200 is the same"), 83.8 % GH200, 77.6 % B200, 72.9 % GB200,
  51.4 % MI300X (``_MAMF_FRACTION``). The RTX 4090 its published torch.mm rate (101.2 %,
  ``_OTHER_MATMUL_FRACTION``). Other NVIDIA cards take 80 % (about the H100 ratio), stated.
* FP8 matmul: the catalog's dense fp8 peak (datasheet, without sparsity) at the card's bf16 MAMF
  fraction (no published fp8 MAMF table covers every card; assumed, and listed when used), except where a
  card's own fp8 GEMM measurement is published (``_FP8_MATMUL_FRACTION``: MI300X 44.3 %, B300 74.5 %). The same
  table's FP8 half also measures torch ``_scaled_mm`` at 70.9 % (H100 SXM), 73.4 % (H200), 77.6 % (GH200), 76.3 %
  (B200) and 72.3 % (GB200) of the fp8 peak (l.370-376). Not taken: Transformer Engine's fp8 GEMMs (cuBLASLt with
  its own heuristics and fused epilogues) are not the kernel measured, and at these fractions 105 published
  Megatron/NeMo fp8 rows move with the all-rows median 10.0 -> 10.2 % (pretrain 8.6 -> 8.9 %, SFT 9.3 -> 8.1 %),
  so the bf16 fraction stays the stated assumption for them. That table times ``_scaled_mm`` without fast
  accumulation, which is what Transformer Engine and torchao run in the backward (dgrad, wgrad) and not in the
  forward: on Hopper the backward's fp8 GEMMs take it (``_FP8_PRECISE_ACCUMULATION_FRACTION``), the forward's keep
  the bf16 fraction. Against the rates before, 37 same-layout bf16 / fp8 published pairs' fp8/bf16 step ratio goes
  from a median -6.2 % below the published one (30 of 37 below) to -2.2 % (27 below); all rows 10.2 -> 9.9 %
  (pretrain 9.0 -> 8.6 %, SFT 8.8 -> 8.0 %, LoRA 8.4 -> 8.5 %). Every fp8 GEMM at the 70.9 % instead (forward too)
  gives the pairs -0.1 % but LoRA 8.4 -> 9.2 % (its frozen base has no wgrad; its bf16 rows run 8-13 % slow already).
* FP32 matmul (SIMT, TF32 off): the datasheet FP32 rate, except where a card's torch.mm fp32 is published
  (``_FP32_MATMUL_FRACTION``: every catalog card the torch-performance-test-data database measures in fp32, 51-98 %
  of the datasheet rate, e.g. RTX PRO 6000 Blackwell 61.7 %, H100 SXM 77.7 %, A100 SXM4 80GB 98.4 %).
* HBM: a streaming copy reaches about 90 % of the datasheet bandwidth on A100/H100 (NVIDIA's
  ``nvbandwidth`` / STREAM-style results); assumed for every card without a measurement of its own
  (``_HBM_FRACTION``: MI300X 77.5 %).
* Host cost per kernel: the H200 step times of small models in ``benchmarks/results/gpu_raw``
  (``benchmarks/gpu_calibration.md``) are 4-25x their FLOPs; eager PyTorch + HF modules spend tens
  of microseconds of CPU per kernel. The two constants are fitted on the 15 "default" cases only;
  ``benchmarks/step_times.py`` scores the three held-out sets separately.
* Collectives: NCCL ring bus bandwidth 370 of 450 GB/s of one direction of NVLink (H100 SXM, NCCL's maintainer and a
  published 2-8 GPU ``NCCL_ALGO=RING`` all_reduce_perf; ``NVLINK_BUS_FRACTION``), 0.81 of the PCIe x16 rate with
  peer-to-peer (4 x RTX 4090 on Gen4 with P2P enabled, ``PCIE_P2P_BUS_FRACTION``), and 0.25 of it through host memory
  for cards without P2P (GeForce RTX 4090/5090: NCCL falls back to SHM; measured all-reduce plateau of 2 GPUs on Gen3
  x16, ``PCIE_NO_P2P_BUS_FRACTION``): a ring without P2P runs 3.2x slower than one with it. Each constant's docstring
  gives the measurement and its hardware. Latency: the training step's collectives take NCCL's own tuner
  (``collectives.nccl_collective_seconds``, tuning.cc's latencies, checked against published nccl-tests rows in the
  ``collectives`` docstring), the weight sync's broadcasts too (``collectives.nccl_broadcast``, ``compute.sync``).
  The unsourced 30 us + 8 us per ring step the first time model charged every collective are gone.
* vLLM engine host work (``ENGINE_S_PER_STEP``, ``ENGINE_S_PER_SEQUENCE``, ``ENGINE_V0_S_PER_SEQUENCE``,
  ``FRONTEND_S_PER_STEP``, ``FRONTEND_S_PER_SEQUENCE``, ``FRONTEND_CUMULATIVE_S_PER_SEQUENCE``): the sources are in the
  ``compute.decode_step`` module docstring ("The host constants, per path"). They are ``DeviceRates`` fields (same
  names, lower case) because they depend on the host CPU and the vLLM release (published and fitted per-sequence
  figures run 19-80 us): ``trainfit calibrate`` fits one factor on the fitted ones from RL runs' measured generation
  phases (``trainfit.calibration.engine``).
* Power limit: a card run below its rated board power (``nvidia-smi -pl``, or a server's default) holds a
  lower tensor-core clock. Dynamic power is ``C·V²·f`` and in the DVFS range the voltage tracks the
  clock, so power goes as ``f³`` and the sustained clock as ``(limit / rated)^(1/3)``
  (``power_limited_rates``). Check against two datasheets of the same GH100 die with the same 132 SMs:
  H100 NVL at 400 W is rated 835 dense bf16 TFLOP/s, H100 SXM at 700 W 989.4: ``(400/700)^(1/3) = 0.830``
  against the ratio 0.844. Memory bandwidth is set by the HBM clock and is not scaled.
* Host optimizer (offload): DeepSpeed's CPU Adam streams p, g, m, v (fp32) in and p, m, v out,
  plus a 16-bit copy of p: about 30 bytes per parameter, bound by host memory bandwidth (ZeRO-Offload,
  Ren et al. 2021, §4.1: CPU-Adam is vectorised and bandwidth-bound). 200 GB/s per node assumed: half
  the peak of a two-socket server with 8 channels of DDR4-3200 per socket (409.6 GB/s), the host of the
  8-GPU reference systems (DGX A100: two AMD EPYC 7742).

Pure Python: no torch import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

from trainfit.catalog.gpus import GpuSpec
from trainfit.errors import CardError
from trainfit.spec.enums import Interconnect

_MAMF_FRACTION = {"a100-40gb": 0.869, "a100-80gb": 0.869, "a800-80gb": 0.869, "h100-sxm": 0.803, "h200": 0.803,
                  "h800": 0.803, "mi300x": 0.514, "gb200": 0.729, "b200": 0.776,
                  "a100-pcie-40gb": 0.811, "a100-pcie-80gb": 0.811, "b300": 0.786, "mi325x": 0.600, "mi355x": 0.626,
                  "gb300": 0.729, "gh200": 0.838, "h100-sxm-hbm2e-96gb": 0.803}
"""BF16 MAMF / datasheet peak, the "Maximum Achievable Matmul FLOPS comparison table" of stas00/ml-engineering
``compute/accelerator/README.md`` @744d01e18b79512572f64a6bbd8b5f4a725203a7 (its mamf-finder v2 rows;
https://github.com/stas00/ml-engineering/blob/744d01e18b79512572f64a6bbd8b5f4a725203a7/compute/accelerator/README.md#L348-L361). A100 (40 and
80 GB SXM, and the A800): row "NVIDIA A100 SXM | 271.2 | 312 | 86.9% | 1024x10240x5120 | 2.6.0+cu126" (the 86.9 %
since commit 16c2d5a06f09e084f114d68e4bb1f99b63b5bb9f, 2025-01-04), not the 85.9 % (267.9, CUDA-12.1) of the v1
table, which the README removed in commit e695968eb26fbebaa1fa93af1b67b1d07bf83b74 (2025-09-02). H100 SXM: row
"NVIDIA H100 SXM | 794.5 | 989 | 80.3% | 2048x2048x13312 | 2.7.0+cu126 | H200 is the same" (the 80.3 % since commit
37acbf201610aa792f9db4857b5df7f5c19bddf7, 2025-01-05), not the v1 table's 80.1 % (792.1, CUDA-12.1).
H200 and H800 share the H100 SXM die and power class: its measured ratio (the H20, a cut-down die, has a measurement
of its own, ``_OTHER_MATMUL_FRACTION``); the A800 the A100's. MI300X
its own: 668.4 of 1,300 TFLOP/s = 51.4 % (row "AMD MI300X", best shape 10240x15360x8192, torch 2.5.1 + ROCm 6.3,
PYTORCH_TUNABLEOP_ENABLED=1; the table's current, mamf-finder v2 rows, which reset the caches between iterations;
668.4 since stas00/ml-engineering commit faa7ddf8b82dcc9e9bb696ad72c4bcd86ea8afa4, 2025-01-06, still there
@744d01e18b79512572f64a6bbd8b5f4a725203a7), not the 60.1 % (781.9, ROCm 6.2) it took before: that was the v1
table's row, measured without the cache reset ("in theory should have given higher scores"), and the README
removed that table in commit e695968eb26fbebaa1fa93af1b67b1d07bf83b74 (2025-09-02). GB200 its own: 1,822.0 of
2,500 TFLOP/s = 72.9 % (row "NVIDIA GB200 SXM", best shape 4096x9728x2048, torch 2.10.0.dev20250916+cu130; added
in stas00/ml-engineering commit 68cd2e59331e7ea901d6a5dbf20e55309dce32d6, 2025-09-17, still there @744d01e18b79512572f64a6bbd8b5f4a725203a7),
not the 80 % default it took before. B200 its own too: the same table's row "NVIDIA B200 SXM", 1,745.0 of
2,250 TFLOP/s = 77.6 % (same commit).

The same table @744d01e18b79512572f64a6bbd8b5f4a725203a7 (l.348-361) also measures the cards below; each fraction is
the measured MAMF over the catalog's dense bf16 peak, so the sustained rate is the one measured:
A100 PCIe (both memory sizes, the same GA100 at 312 TFLOP/s): row "NVIDIA A100 PCIe | 252.9 | 312 | 81.1% |
2048x5120x6144 | 2.5.1+cu124" (the row does not say 40 or 80 GB). B300: row "NVIDIA B300 SXM | 1769.0 | 2250 | 78.6% |
12288x18432x1024 | 2.9.1+cu130 | same as B200, newer torch/cuda". MI325X: row "AMD MI325X | 784.9 | 1300 | 60.4% |
13312x10240x8192 | 2.6.0+6.2.4 | PYTORCH_TUNABLEOP_ENABLED=1, 1000W": 784.9 / 1,307.4 = 60.0 %. MI355X: row "AMD
MI355X | 1565.0 | 2300 | 68.0% | 12288x8192x8192 | 2.8.0+rocm7.0.2.git245bf6ed | PYTORCH_TUNABLEOP_ENABLED=0": the
row's 2,300 'Theory' is not the MI355X's dense bf16 peak (AMD: 2.5 PFLOPS; the same README's TFLOPS table and its
clock formula, 2,400 MHz x 512 x 2 x 1,024 = 2,516.6), so 1,565.0 / 2,500 = 62.6 % (MAMF, not the row's percentage).
GB300: no row of its own; the GB200's 72.9 %, the same NVL72 superchip form with the same 2,500 TFLOP/s dense bf16
rating (the README's note 24: GB300 NVL72 is GB200 NVL72 with faster fp4 and more memory), not the HGX B300's 78.6 %
(1,769 of 2,250 in a 1,100 W HGX board). Its attention kernels do differ (``attention_time.exp_unit_time_factor``:
the doubled exponential unit). Tried and not taken: the GB300's 1,400 W against the GB200's 1,200 W at
``power_limited_rates``' law, (1,400 / 1,200)^(1/3) = 1.053 on the matmul rates. On the GB300 Megatron-Bridge rows
(after the exponential-unit factor) the signed median goes fp8 current +23.9 -> +18.7 %, MXFP8 +15.3 -> +10.2 %,
NVFP4 +16.1 -> +12.6 %, bf16 -14.8 -> -17.5 %. No measurement supports it: the burst MAMF rates of Blackwell cards of
different board power grow less than the law (GB200 / B200 1,822 / 1,745 = 1.044 at 1.2x the power, 1.017 per SM
with 152 against 148 SMs; B300 / B200 1.014 at 1.1x). The one sustained pair (MSMF, below: B300 / B200 1.056) was
measured with the B300's siblings idle and the B200's busy. The GB300 keeps the GB200's fraction: same-layout
GB300 / GB200 rows publish 1.05-1.27x (12 pairs), and this model now gives 1.00-1.05x (1.03 for most).
GH200: row "NVIDIA GH200 SXM | 828.6 | 989 | 83.8% | 1024x15360x4096 | 2.6.0+cu126 | 900W 141GiB HBM3e version" (l.352):
the same Hopper die and module power as the catalog's 96 GB HBM3 GH200, so its ratio. The H100 SXM 96GB HBM2e (Meta's
Grand Teton variant, catalog h100-sxm-hbm2e-96gb) is the H100 SXM's die and 700 W TDP with other memory: the H100 SXM's
ratio (a run at its default 500 W limit states it: ``power_limited_rates``).
Cards with no row keep the default, stated in the plan: the other Ada cards (L4, RTX 6000 Ada, as the L40S and L40),
A40 (as the RTX A6000), H200 NVL (as the H100 NVL), T4 and V100 (fp16).

Not taken, sustained matmul rates (MSMF). A later version of the same README (stas00/ml-engineering
``compute/accelerator/README.md`` @0359db89793c313e90e4f8a8bc8a2b1514ba00ae, "Maximum Achievable and Sustainable
Matmul FLOPS comparison table", mamf-finder v4) adds MSMF: the rate a shape holds over a 2 s window with the board at
its power limit, the node's other GPUs running matmuls too ("Siblings yes"), which it calls the one to use for
training. BF16: H200 755 (76.3 %; MAMF 850), ~685-688 W at 1,860-1,918 MHz (note 3); B200 1,439 (64.0 %; MAMF 1,737),
~978-987 W at 1,399-1,443 MHz of its 1,965 MHz boost (note 6). FP8: H200 1,354 (68.4 %), B200 2,788 (62.0 %) (notes
11-12). B300 1,519 / 2,969 measured alone (siblings idle); no H100, GB200 or GB300 row. A B200 held at its power cap
keeps 0.83 of its burst rate, an H200 0.89: Blackwell loses more under sustained load. Tried on the step-time rows
together with the Blackwell cuDNN attention rates (``attention_time``, "Known gap, Blackwell"), against those rows
before either: each card's own MSMF (B200, H200, B300, MI300X, A100 PCIe) moves the B200 Transformer Engine rows'
median |error| 11.8 -> 8.4 %, but the GB200 rows (no MSMF; median error already -10.5 % before either change) stay
13.8 % and the held-out half of the Blackwell rows goes 12.8 -> 14.1 %; the H200's MSMF for the H100 too (the same die
and 700 W) moves all 894 rows 10.1 -> 10.4 % (LoRA 7.7 -> 10.3 %; held-out half 10.15 -> 10.73 %), so on Hopper the
burst MAMF is what this model reproduces. Each card's loss relative to the H200's instead (the MSMF / MAMF ratio over
0.888: B200 0.93, GB200 0.94 from the B200's MSMF at (1,200 / 1,000)^(1/3) as in ``power_limited_rates``) gives the
Blackwell held-out half 12.8 -> 13.1 % and the B200 rows 11.8 -> 14.9 %, and the same rule speeds the MI300X by 1.10
(its MAMF is already capped at 750 W, note 9), whose rows are too fast already (torchao Llama3-8B -33 -> -38 %).
None is taken; the MAMF fractions above stay."""
_MAMF_SOURCE = "stas00/ml-engineering compute/accelerator/README.md (MAMF table)"
_OTHER_MATMUL_FRACTION = {
    "rtx4090": (167.21 / 165.2, "torch.mm bf16, the best of square 1,024-10,240 (test.py), 170.06, 173.31, 162.39 and"
                                " 163.09 TFLOP/s on four RTX 4090 named 24GB (l.21, l.24, l.27, l.33; the lines"
                                " _FP32_MATMUL_FRACTION reads): github.com/zzc0721/torch-performance-test-data"
                                " database.md @9d82827637262c4351e3f9483f96b8cff57a601f; mean 167.21, 101.2 % of the"
                                " datasheet's 165.2 (FP32 accumulate, at the 2,520 MHz rated boost clock)"),
    "rtx3090": (76.53 / 71.0, "torch.mm bf16, the best of square 1,024-10,240 (test.py), 76.58 TFLOP/s on an RTX 3090"
                              " (bare metal), 76.34 (bare metal, torch 2.6) and 76.68 (a cloud instance, torch 2.8) on"
                              " two others: github.com/zzc0721/torch-performance-test-data database.md"
                              " @078586871da31ad6aaaf6fa43bc4ec3f284b151d; mean 76.53, 107.8 % of the datasheet's 71.0"
                              " (FP32 accumulate, at the 1,695 MHz rated boost clock): the clock the card holds"),
    "l4": (0.586, "torch.mm bf16, the best of square 1,024-10,240 (test.py), 70.89 TFLOP/s on an L4 (bare metal):"
                  " github.com/zzc0721/torch-performance-test-data database.md @9d82827637262c4351e3f9483f96b8cff57a601f;"
                  " 58.6 % of the datasheet's 121 (dense)"),
    "t4": (0.645, "torch.mm fp16, the best of square 1,024-10,240 (test.py), 41.91 (Colab, torch 2.8), 42.71 and 41.93"
                  " (Kaggle, torch 2.6) TFLOP/s on three Tesla T4s: github.com/zzc0721/torch-performance-test-data"
                  " database.md @9d82827637262c4351e3f9483f96b8cff57a601f; the median, 41.93, is 64.5 % of the"
                  " datasheet's 65 (fp16, FP32 accumulate)"),
    "rtx5090": (234.98 / 209.5, "torch.mm bf16, the best of square 1,024-10,240 (test.py), 236.03, 242.18, 221.65 and"
                                " 240.05 TFLOP/s on four RTX 5090 32GB (l.28, l.45, l.88, l.103; the same lines give the"
                                " card's fp32 rate): github.com/zzc0721/torch-performance-test-data database.md"
                                " @9d82827637262c4351e3f9483f96b8cff57a601f; mean 234.98, 112.2 % of the datasheet's"
                                " 209.5 (FP32 accumulate, at the 2,407 MHz rated boost clock): the clock the card holds"),
    "rtx-pro-6000": (0.827, "torch.mm bf16, the best of square 1,024-10,240 (test.py), 417.98 TFLOP/s on an RTX PRO 6000"
                            " Blackwell Workstation Edition (bare metal, torch 2.8.0) and 409.42 on a Server Edition"
                            " (docker): github.com/zzc0721/torch-performance-test-data database.md"
                            " @9d82827637262c4351e3f9483f96b8cff57a601f; their mean, 413.7, is 82.7 % of the 500 dense"),
    "h20": (0.960, "torch.mm bf16, the best of square 1,024-10,240 (test.py), 141.86 TFLOP/s on an H20 96GB (docker,"
                   " torch 2.8.0 + CUDA 12.8) and 142.25 on another (a cloud instance): github.com/zzc0721/"
                   "torch-performance-test-data database.md @9d82827637262c4351e3f9483f96b8cff57a601f (l.15, l.85);"
                   " their mean, 142.06, is 96.0 % of the datasheet's 148 dense (a 78-SM Hopper at 500 W holds its"
                   " clock; the same database measures an H200 at 790.29, 79.9 %, as the MAMF table's 80.3 %)"),
    "l20": (0.955, "torch.mm bf16, the best of square 1,024-10,240 (test.py), 114.14 TFLOP/s on an L20 (a cloud"
                   " instance): github.com/zzc0721/torch-performance-test-data database.md"
                   " @9d82827637262c4351e3f9483f96b8cff57a601f (l.111); 95.5 % of the datasheet's 119.5 dense"),
    "v100-sxm2-16gb": (0.759, "torch.mm fp16, the best of square 1,024-10,240 (test.py), 94.84 TFLOP/s on a Tesla"
                              " V100-SXM2-16GB (bare metal, torch 2.7.1 + CUDA 12.8): github.com/zzc0721/"
                              "torch-performance-test-data database.md @9d82827637262c4351e3f9483f96b8cff57a601f;"
                              " 75.9 % of the datasheet's 125"),
}
"""Cards outside the MAMF table with a published large-matmul measurement: (fraction of the datasheet bf16 peak,
source). A GeForce card holds a clock above the boost clock its datasheet rate is computed at (RTX 4090: 2,520 MHz;
RTX 3090: 1,695 MHz; RTX 5090: 2,407 MHz), so it sustains about its whole datasheet rate or more, not the H100's 80 %.
Where the measured rate is above the datasheet's (RTX 3090 107.8 %, RTX 5090 112.2 %, RTX 4090 101.2 %) it is planned as measured, like
every other card's measured fraction: the datasheet figure is ``SMs x FLOP per clock x rated boost clock``, and 234.98
TFLOP/s on a 170-SM RTX 5090 at the GeForce 512 dense bf16 FLOP per clock per SM with FP32 accumulate (209.5 / 170 /
2.407 GHz) needs 2.70 GHz, the clock GPU Boost holds under the matmul, not an error in the datasheet. Until 2026-12-05
both were held at the datasheet rate ("a sustained rate is never planned above it"), which planned the RTX 5090's
GEMMs 11 % slower than the card's four measurements; the Surogate Unsloth RTX 5090 rows were +23 to +45 % then.
The RTX 5090 took the 80 % default until Unsloth's LoRA / QLoRA rows on it (Surogate's speed benchmark,
published_train_times_firstcontact_2612j.json) planned +42 to +75 % at first contact, where the same rows on an H100
planned -25 to +32 %: its bf16 lines in the database were read then (l.47 / l.99 "RTX 5090 D" are another card). The low-power
data-center cards do the opposite: the L4 (72 W) and the T4 (70 W) are rated at a boost clock their board power does
not sustain under a large matmul, and the same benchmark measures 58.6 % and 64.5 % of their datasheet rates. The
same database measures an A100-PCIE-40GB at 234.14 TFLOP/s bf16 (75.0 %): the A100 PCIe entries keep the MAMF table's
81.1 % (a search over shapes, ``_MAMF_FRACTION``). The V100 measurement is an SXM2 16 GB card's; the 32 GB entry keeps
the default, its fp16 timing pinned by tests/cli/test_cli_no_bf16_gpu.py (the same die and clock: a follow-up).
This database reads at or below the MAMF table on the cards both measure (H200 790.29 = 79.9 % against 80.3 %, B200
1,696.03 = 75.4 % against 77.6 %, A100 40GB 246.33 = 79.0 % against 86.9 %: one shape sweep, no search), so its
figure is a floor. The H20's 96.0 % and the L20's 95.5 % are taken: far above the 80 % either card took before, and
a floor. The L40S's 269.15 TFLOP/s (74.3 %, database.md l.55) is within that offset of the 80 % default and is not
taken.

RTX 4090 (2026-12-05): the same database's four lines of cards named 'RTX 4090 24GB' (the lines its fp32 entry in
``_FP32_MATMUL_FRACTION`` reads), 167.21 TFLOP/s, in place of one 8192^3 torch.matmul report (issue #78 of the same
repository, 160.17, 97.0 %): the best-of-sweep figure every other GeForce entry here takes. Lines 64 and 89 ('NVIDIA
GeForce RTX 4090', 165.71 and 164.81) name no memory size (a 48 GB board prints the same name) and are left out; with
them the mean is 166.56 (100.8 %). The 20 RTX 4090 step rows plan 1-4 % faster: the 11 fsdp_qlora 2 x 4090 rows
+22..+44 % -> +19..+41 % (that file's median 22.5 -> 19.7 %), torchtune's file median 5.2 -> 5.0 % (its three
4090 rows planned too fast, full fine-tuning and FSDP, move 1-2 points further: -31.6 -> -32.6, -18.7 -> -20.3,
-7.3 -> -9.6 %), the Unsloth Mistral GRPO row +64.1 -> +63.1 %; LoRA / QLoRA median 9.54 -> 9.61 %, all training
8.85 -> 8.86 %, no H200 row moves.

Not taken: the 48 GB RTX 4090 (``rtx4090-48gb``) keeps the 80 % default although the database measures three such
cards (l.9, l.31, l.53: 160.53, 162.43, 167.71, mean 163.56 = 99.0 %; its fp32 entry reads them). Its one step row,
verl issue #7412's GRPO on 4 such cards, is planned 2x too fast already (step -52 %, generation -57 %, actor update
-54 %, log-prob -26 %; no P2P, a modified board, and a verl update whose fixed cost is open: compute/sync.py and
plan/rl_passes.py), and at 99.0 % it goes step -55.6 %, log-prob -35.5 %, actor update -59.8 % (checked 2026-12-05):
the faster GEMMs are not what that row misses, and no other row is on this card to check them."""
_FP32_DB = "github.com/zzc0721/torch-performance-test-data database.md @9d82827637262c4351e3f9483f96b8cff57a601f"


def _fp32_measured(tflops: tuple[float, ...], lines: tuple[int, ...], datasheet_tflops: float,
                   card: str) -> tuple[float, str]:
    """(mean of a card's torch.mm fp32 lines / its datasheet fp32 rate, source) for ``_FP32_MATMUL_FRACTION``."""
    mean = sum(tflops) / len(tflops)
    figures = " / ".join(f"{t:.2f}" for t in tflops)
    where = ", ".join(f"l.{n}" for n in lines)
    return (round(mean / datasheet_tflops, 4),
            f"torch.mm fp32 with TF32 off, the best of square 1,024-10,240 (test.py l.223-225), {figures} TFLOP/s on"
            f" {card}: {_FP32_DB} ({where}); mean {mean:.2f} of the datasheet's {datasheet_tflops:g} FP32")


_FP32_MATMUL_FRACTION = {
    "rtx-pro-6000": _fp32_measured((77.24, 77.01), (35, 56), 125.0,
                                   "an RTX PRO 6000 Blackwell Workstation Edition and a Server Edition"),
    "h100-sxm": _fp32_measured((51.88, 52.11), (34, 52), 66.9, "two H100 80GB HBM3"),
    "h100-pcie": _fp32_measured((36.95,), (101,), 51.2, "an H100 PCIe"),
    "h200": _fp32_measured((51.34,), (57,), 66.9, "an H200 (torch's name of the SXM card; the NVL reads 'H200 NVL')"),
    "h20": _fp32_measured((31.95, 31.99), (15, 85), 44.0, "two H20"),
    "b200": _fp32_measured((66.24,), (3,), 75.0, "a B200 180GB (GCP a4-highgpu-8g)"),
    "a100-80gb": _fp32_measured((19.18,), (13,), 19.5, "an A100 SXM4 80GB"),
    "a100-pcie-40gb": _fp32_measured((17.56,), (112,), 19.5, "an A100-PCIE-40GB"),
    "a800-80gb": _fp32_measured((19.08,), (14,), 19.5, "an A800 SXM4 80GB"),
    "v100-sxm2-16gb": _fp32_measured((14.06,), (65,), 15.7, "a Tesla V100-SXM2-16GB"),
    "l40s": _fp32_measured((46.88,), (55,), 91.6, "an L40S"),
    "l20": _fp32_measured((37.27,), (111,), 59.35, "an L20"),
    "l4": _fp32_measured((15.38,), (124,), 30.3, "an L4"),
    "t4": _fp32_measured((4.17, 4.43, 4.35), (6, 39, 68), 8.1, "three Tesla T4 16GB"),
    "rtx-a6000": _fp32_measured((23.92,), (58,), 38.7, "an RTX A6000"),
    "rtx3090": _fp32_measured((24.46, 24.84, 24.79), (16, 29, 54), 35.6, "three RTX 3090 24GB"),
    "rtx4090": _fp32_measured((55.01, 54.77, 46.48, 54.67), (21, 24, 27, 33), 82.6,
                              "four RTX 4090 named 24GB"),
    "rtx4090-48gb": _fp32_measured((54.69, 53.79, 56.01), (9, 31, 53), 82.6, "three RTX 4090 48GB"),
    "rtx4090d": _fp32_measured((50.07,), (32,), 73.5, "an RTX 4090D 24GB"),
    "rtx5090": _fp32_measured((69.16, 67.57, 63.99, 70.47), (28, 45, 88, 103), 104.8, "four RTX 5090 (32GB)"),
}
"""Cards whose SIMT fp32 GEMM (TF32 off: ``torch.backends.cuda.matmul.allow_tf32`` False, torch's default since 1.12)
is measured apart from the datasheet FP32 rate: (fraction of ``GpuSpec.fp32_flops_per_s``, source). The fraction scales
``DeviceRates.fp32_matmul_flops_per_s``, the rate of the fp32 GEMMs (``gemm._model_compute_s``: a QLoRA base
dequantised to fp32, ``precision.nf4_compute_dtype`` fp32; fp32 compute). Cards not listed keep the datasheet rate.

RTX PRO 6000 Blackwell: the datasheet's 125 TFLOPS counts one FFMA per CUDA core per clock on all 24,064 cores at the
2,617 MHz boost; cuBLAS's SGEMM reaches 61.7 % of it on both 600 W editions in the same database that gives the card's
bf16 rate (``_OTHER_MATMUL_FRACTION``), and two later submissions of the same script agree (github.com/zzc0721/
torch-performance-test-data issues #160 and #161, torch 2.7.0: 74.03 on a Workstation Edition, 78.99 on a Server
Edition, read 2026-12-03). At 125 the card's fp32 GEMMs ran 1.87x an H100 SXM's (66.9 datasheet); the
universal-llm-trainer QLoRA rows (fp32 base GEMMs) publish the RTX PRO 6000 at 1.18-1.21x the H100's step
(Llama-3.1-8B 30.7 / 26.1 s, Llama-2-13B 52.0 / 43.0, Phi-3-mini 20.7 / 17.6), where trainfit planned 0.77-0.88x.

One rule for every catalog card: each database line (the fp32 column is test.py's "FP32" pass, TF32 disabled,
l.225) whose device name identifies exactly one catalog entry is taken, and a card with several lines takes their
mean over the catalog's datasheet fp32 rate. Lines left out, and why: l.7 "A100 40GB" (18.11) names no form factor
(SXM4 40GB or PCIe; the catalog's a100-40gb keeps the datasheet rate); l.64 and l.89 "NVIDIA GeForce RTX 4090" (51.57,
53.84) are torch's device name, which the 48 GB board reports too (rtx4090-48gb's notes), so either entry (with them
the 24 GB mean is 52.72 instead of 52.73: no difference); l.116 "H800 PCIe" is not the catalog's H800 (SXM5); l.26 /
l.30 "RTX 4090D 48GB", l.5 "V100S", l.47 / l.99 "RTX 5090 D" and the laptop / other cards have no catalog entry.
Read off the entries: GeForce and workstation cards run their SGEMM at 62-69 % of the datasheet's
one-FFMA-per-core-per-clock count, the L4, L40S and T4 lower (50.8 %, 51.2 %, 53.3 %), the Hopper cards at 72-78 %,
the B200 at 88.3 %, the A100 / A800 / V100 at 90-98 %."""
_FP8_MATMUL_FRACTION = {
    "mi300x": (0.443, "hipBLASLt fp8 e4m3fnuz GEMM 1,159.2 TFLOP/s at 8192^3 on an Azure ND MI300X v5 (hipblaslt-bench,"
                      " default heuristic, no TunableOp): samuel-bohman/AI-benchmarking-guide"
                      " Azure_Results/ND_MI300X_v5_results.md @3de0c294"),
    "b300": (0.745, "fp8 MAMF 3,353.3 of 4,500 TFLOP/s on a B300 SXM (torch 2.9.1+cu130, best shape 3072x6144x7168):"
                    " stas00/ml-engineering compute/accelerator/README.md l.373 @744d01e1"),
}
"""Cards whose fp8 GEMM rate is published apart from the bf16 MAMF: (fraction of the datasheet dense fp8 peak, source).
MI300X: the bf16 MAMF table's FP8 half leaves the MI300X row empty (stas00/ml-engineering
``compute/accelerator/README.md`` l.377 @744d01e18b79512572f64a6bbd8b5f4a725203a7), so 2 x the bf16 rate was assumed
(1,344 TFLOP/s). The Azure AI benchmarking guide's MI300X table (repository samuel-bohman/AI-benchmarking-guide, a
fork of Azure/AI-benchmarking-guide, ``Azure_Results/ND_MI300X_v5_results.md`` @3de0c294fd1059a91a2c158712c4a078619d73e8;
its header: HIP 6.2.41133, VBIOS 113-MI3SRIOV-001, an SR-IOV VM; hipBLASLt built at ROCm/hipBLASLt
a11ccf64efcd818106dbe37768f69dfcc0a7ff22 per ``Benchmarks/AMD/GEMMHipblasLt.py``
@24febecd11cb4fba043c113cddd4540252c0ece6) measures hipBLASLt fp8 (``f8_r``, e4m3fnuz on gfx942) in, fp16 out, fp32
accumulate: 1,159.23 TFLOP/s at 8192x8192x8192 and 1,159.54 at 6144x12288x12288, falling to 1,015-1,029 at
16384^3 and 32768^3. The command (``Benchmarks/AMD/hipBLASLt_runner.sh`` @2b25b6966d7a14de809214e8b37b1b1e74d4e0e0):
``hipblaslt-bench --flush ... rotating: 512, iters: 2000, cold_iters: 100``, no ``--algo_method``, so hipBLASLt's
default heuristic picks the kernel (no TunableOp / offline tuning), with a 512 MB rotating buffer and the cache
flushed (cold operands, as in the MAMF v2 rows). 1,159.5 / 2,614.9 = 44.3 %, the best large-shape value (as the
MAMF is). A torch ``_scaled_mm`` on ROCm calls this library (hipBLASLt), so the same rate holds for torchao's float8
linears; it is 0.86x the assumed 2 x bf16, i.e. fp8 GEMMs are 1.72x (not 2x) the bf16 MAMF. The bf16 rate keeps
the MAMF table's TunableOp row: no published untuned (default-heuristic) MI300X bf16 large-shape rate was found.
B300: the MAMF README's fp8 table (stas00/ml-engineering ``compute/accelerator/README.md`` l.367-377
@744d01e18b79512572f64a6bbd8b5f4a725203a7) has a B300 row, "NVIDIA B300 SXM | 3353.3 | 4500 | 74.5% | 3072x6144x7168 |
2.9.1+cu130": its own fp8 rate, below its bf16 fraction (78.6 %). The B200's fp8 row (76.3 %) is not used for the
B200, which keeps its bf16 fraction as before. MI325X and MI355X have no fp8 row and no published fp8 GEMM
measurement: their bf16 fraction, assumed (the MI300X's hipBLASLt figure is not carried over to the MI325X: its bf16
MAMF was measured with TunableOp and differs from the MI300X's)."""
_FP8_PRECISE_ACCUMULATION_FRACTION = {"h100-sxm": 0.709, "h800": 0.709, "h200": 0.734, "gh200": 0.776,
                                      "h100-sxm-hbm2e-96gb": 0.709}
"""Hopper fp8 GEMMs with full-precision accumulation (cuBLASLt ``CUBLASLT_MATMUL_DESC_FAST_ACCUM`` = 0), as a fraction
of the datasheet dense fp8 peak: the FP8 half of the MAMF table (stas00/ml-engineering ``compute/accelerator/README.md``
l.365-376 @744d01e18b79512572f64a6bbd8b5f4a725203a7, https://github.com/stas00/ml-engineering/blob/744d01e18b79512572f64a6bbd8b5f4a725203a7/compute/accelerator/README.md#L365-L377): "NVIDIA H100 SXM | 1402.6 | 1979 | 70.9%", "NVIDIA H200 SXM |
1453.4 | 1979 | 73.4%", "NVIDIA GH200 SXM | 1535.0 | 1979 | 77.6%" (the H800 and the H100 SXM 96GB HBM2e share the
H100's die and clock). Its finder
The GH200 rows (bf16 l.352, fp8 l.370) were measured on the "900W 141GiB HBM3e version"; the catalog's ``gh200`` is
the 96 GB HBM3 part: its rates here are that variant's fractions, not a measurement of the 96 GB card. Its finder
times ``torch._scaled_mm(A, B, scale, scale, out=C)`` (``compute/accelerator/benchmarks/mamf-finder.py`` l.329-349, same
commit), whose ``use_fast_accum`` defaults to False (``aten::_scaled_mm`` schema): the accumulate-in-fp32 kernels.

Which fp8 GEMMs run that way: Transformer Engine's dgrad and wgrad, not its fprop (``_2X_ACC_FPROP = False``,
``_2X_ACC_DGRAD = True``, ``_2X_ACC_WGRAD = True``, NVIDIA/TransformerEngine ``transformer_engine/pytorch/module/base.py``
l.83-85; ``use_split_accumulator`` sets ``fastAccuMode = 0``, ``transformer_engine/common/gemm/cublaslt_gemm.cu``
l.478-480, both @d0067d0da6cb01811b8072a7d304f0e00344ce2b); torchao's float8 linears the same
(``gemm_config_output = Float8GemmConfig(use_fast_accum=True)``, ``gemm_config_grad_input`` / ``gemm_config_grad_weight``
default False, pytorch/ao ``torchao/float8/config.py`` l.137, 215-217 @36027d82d1ad9949597ea16002ff4940374b1b94). So the
backward's fp8 GEMMs take this rate (``gemm.fp8_precise_rates``), the forward's (fast accumulation, no published
sweep) keep the fp8 rate at the bf16 MAMF fraction (module docstring). On Hopper the gap is the fp8 tensor cores'
reduced-precision accumulator, whose partial sums the precise mode promotes to fp32 registers in the main loop: the
same table's fp8 / bf16 fractions are 0.88 (H100), 0.91 (H200), 0.93 (GH200). Blackwell accumulates in fp32 tensor
memory and its rows show no such gap (B200 76.3 % fp8 against 77.6 % bf16), so no Blackwell card is listed: the
fp8 rows there keep their rate."""
HOPPER_FP8_PRECISE_OVER_FAST = 0.709 / 0.803
"""A Hopper card (compute capability 9.x) without a measured full-precision fp8 row: its fp8 rate times the H100
SXM's measured precise / fast ratio, 1,402.6 / (1,979 x 80.3 %) = 0.883 (the MAMF table's FP8 row over the fp8
peak at the bf16 MAMF fraction, stas00/ml-engineering ``compute/accelerator/README.md`` l.354 and l.376
@744d01e18b79512572f64a6bbd8b5f4a725203a7; https://github.com/stas00/ml-engineering/blob/744d01e18b79512572f64a6bbd8b5f4a725203a7/compute/accelerator/README.md#L354 and #L376). The H100 PCIe, H100 NVL, H200 NVL and H20 share the 9.0 tensor cores and
their reduced-precision fp8 accumulator (``_FP8_PRECISE_ACCUMULATION_FRACTION``); no precise row is published for
them. The measured cards' ratios span 0.883 (H100 SXM) to 0.914 (H200) and 0.926 (GH200): the H100 SXM's, the
lowest, is taken (the H20's cut-down die and the PCIe / NVL parts' lower power sit nearer it than the GH200's)."""
_HBM_FRACTION = {
    "mi300x": (0.775, ("STREAM Copy 4.11 TB/s of 5.3 on an Azure ND MI300X v5 (Triad 4.09, Mul 4.26):"
                       " samuel-bohman/AI-benchmarking-guide Azure_Results/ND_MI300X_v5_results.md @3de0c294")),
}
"""Cards whose streaming bandwidth is published apart from the 90 % assumed: (fraction of the datasheet HBM rate,
source). MI300X: the same Azure MI300X table as ``_FP8_MATMUL_FRACTION`` ('HBM Bandwidth': Copy 4.11, Mul 4.26,
Add 4.14, Triad 4.09, Dot 3.87 TB/s; repository samuel-bohman/AI-benchmarking-guide,
``Azure_Results/ND_MI300X_v5_results.md`` @3de0c294fd1059a91a2c158712c4a078619d73e8): a copy kernel reaches
4.11 / 5.3 = 77.5 % of the datasheet 5.3 TB/s, not 90 % (4.77 TB/s)."""
DEFAULT_MAMF_FRACTION = 0.80
"""MAMF / datasheet bf16 rate for an NVIDIA card without a published MAMF row: the H100 SXM's 80.3 % rounded
(stas00/ml-engineering ``compute/accelerator/README.md`` @744d01e18b79512572f64a6bbd8b5f4a725203a7, BF16 table l.354:
https://github.com/stas00/ml-engineering/blob/744d01e18b79512572f64a6bbd8b5f4a725203a7/compute/accelerator/README.md#L354; module docstring); the same table's other NVIDIA rows run 72.9-86.9 %. Stated in the plan's assumptions when used."""
_FABRIC_NOTES = {
    "mi300x": "intra-node collectives on AMD Infinity Fabric (xGMI: 7 links x 128 GB/s, a full mesh; kept in the"
              " catalog's nvlink fields), RCCL assumed to reach NCCL's NVLink bus fraction; the 896 GB/s aggregate"
              " holds for a full 8-GPU node only",
    "mi325x": "intra-node collectives on AMD Infinity Fabric (xGMI: 7 links x 128 GB/s, a full mesh; kept in the"
              " catalog's nvlink fields), RCCL assumed to reach NCCL's NVLink bus fraction; the 896 GB/s aggregate"
              " holds for a full 8-GPU node only",
    "mi355x": "intra-node collectives on AMD Infinity Fabric (xGMI: 7 links x 153.6 GB/s, a full mesh; kept in the"
              " catalog's nvlink fields), RCCL assumed to reach NCCL's NVLink bus fraction; the 1,075 GB/s aggregate"
              " holds for a full 8-GPU node only",
    "h100-nvl": "NVLink bridges join the cards in pairs: collectives over more than 2 GPUs also cross PCIe and run"
                " slower than the bridge rate assumed",
}
XGMI_GPUS = ("mi300x", "mi325x", "mi355x")
"""AMD Instinct kinds whose GPUs are joined by Infinity Fabric (xGMI) links, kept in the catalog's NVLink fields
(``_FABRIC_NOTES``): their ``nvlink`` link is labelled xGMI in the plan (``link_label``). A tuple of ids rather than
a catalog field: ``GpuSpec`` has no vendor or fabric field, and adding one changes the catalog's schema and every
entry, which is a catalog change of its own (the ids are the catalog's three AMD Instinct entries)."""


def link_label(gpu: GpuSpec) -> str:
    """What the ``nvlink`` link is on this kind: "xGMI (Infinity Fabric)" on AMD Instinct, else "NVLink"."""
    return "xGMI (Infinity Fabric)" if gpu.id in XGMI_GPUS else "NVLink"


_FABRIC_NOTES.pop("h100-nvl")  # bridged cards: ``bridge_note``, which depends on the job's GPUs in a node
"""Said in the plan's assumptions where a card's GPU-to-GPU fabric is not an NVSwitch (catalog notes give the sources)."""
BRIDGE_GROUP_GPUS = {"h100-nvl": 2, "h100-pcie": 2, "rtx-a6000": 2, "rtx3090": 2, "a100-pcie-40gb": 2,
                     "a100-pcie-80gb": 2, "a40": 2, "h200-nvl": 4}
"""GPUs one NVLink bridge joins on the bridged PCIe cards: 2-card bridges (the catalog entries' notes: "NVLink here is
the 2-card NVLink bridge ... between the pair"), H200 NVL's "2- or 4-way NVIDIA NVLink bridge" (catalog source,
https://www.nvidia.com/en-us/data-center/h200/), taken at its 4-way bridge. Not every pair of a node's GPUs is on
NVLink: the bridge groups reach each other over PCIe, so a collective over more of a node's GPUs than one group holds
runs at the PCIe rate (``link_rates``)."""
_BRIDGED_PAIRS = tuple(BRIDGE_GROUP_GPUS)
BRIDGED_RING_SOURCE = ("NVIDIA/nccl-tests issue #178, https://github.com/NVIDIA/nccl-tests/issues/178, 2023-11-17, read"
                       " 2026-12-05: A100s bridged in NV12 pairs, all_reduce_perf bus bandwidth 208 GB/s on 2 GPUs,"
                       " 20 GB/s on 3")
"""A ring over more GPUs than one bridge group runs at its slowest link, a PCIe hop between groups: on a node whose
A100s are bridged in pairs (``nvidia-smi topo``: NV12 within a pair, NODE / SYS between pairs), ``all_reduce_perf -t 2``
reaches a bus bandwidth of 208 GB/s and ``-t 3`` (a ring through one PCIe hop) 20 GB/s. NCCL's ring bandwidth is that of
its slowest link (nccl-tests ``doc/PERFORMANCE.md``). The PCIe hop is timed at ``PCIE_P2P_BUS_FRACTION`` of the
card's slot rate (26 GB/s on Gen4 x16; the issue's 20 GB/s crosses the PCIe host bridges, NODE), or at
``PCIE_NO_P2P_BUS_FRACTION`` where the stock driver refuses PCIe peer-to-peer (``stock_driver_refuses_pcie_p2p``)."""


def bridge_note(gpu: GpuSpec, *, node_gpus: int, link: Interconnect | None = None,
                measured_bus_bytes_per_s: float | None = None) -> str | None:
    """The plan's assumption line of a bridged PCIe card (``BRIDGE_GROUP_GPUS``) on its NVLink bridge, with the bus
    bandwidth its collectives are timed at for ``node_gpus`` of the job's GPUs in a node; None on other cards or
    another link. ``measured_bus_bytes_per_s``: a calibration file measured the node's bus bandwidth, and that rate
    times every collective of the node (``stated_link_rates``), so the line names it instead of a bridge split."""
    group = BRIDGE_GROUP_GPUS.get(gpu.id)
    if group is None or (link or catalog_link(gpu)) is not Interconnect.NVLINK:
        return None
    bridge = nvlink_bus_bytes_per_s(gpu)
    head = (f"NVLink bridges join {gpu.id} cards {'in pairs' if group == 2 else f'in groups of {group}'}, the"
            f" {'pairs' if group == 2 else 'groups'} reach each other over PCIe")
    if measured_bus_bytes_per_s is not None:
        return (f"{head}: the calibration's measured {measured_bus_bytes_per_s / 1e9:.0f} GB/s bus bandwidth times"
                f" every collective of the job's {node_gpus} GPUs in a node, bridge group or not (no split at the"
                f" bridge's {bridge / 1e9:.0f} GB/s)")
    if node_gpus <= group:
        return (f"{head}: the job's GPUs in a node (at most {group}) fit one group, collectives at the bridge's"
                f" {bridge / 1e9:.0f} GB/s; more GPUs in a node would run at the PCIe hop's rate")
    pcie = bridged_ring_bus_bytes_per_s(gpu)
    how = "PCIe without peer-to-peer, the stock driver refuses it" if stock_driver_refuses_pcie_p2p(gpu) else "PCIe peer-to-peer"
    return (f"{head}: a ring over the job's {node_gpus} GPUs in a node runs at its slowest hop, {how}, {pcie / 1e9:.0f}"
            f" GB/s bus bandwidth ({BRIDGED_RING_SOURCE}); a tensor-parallel group of up to {group} GPUs is assumed"
            f" placed on one bridge group (consecutive ranks on bridged cards), at the bridge's {bridge / 1e9:.0f} GB/s")
DEFAULT_SM_COUNT = 108
"""SMs assumed for a card the catalog gives no ``sm_count`` for (the GPU catalog carries it, with sources): the
A100's 108 (NVIDIA A100 Tensor Core GPU Architecture whitepaper, "A100: 108 SMs", as cited in
``catalog/data/gpus/a100-80gb.json``; CUDA samples' deviceQuery on an A100-SXM4-80GB, "(108) Multiprocessors":
thamada/nvidia-smi ``gls/A100SXMx4_deviceQuery.py`` @b09ef139265ffc7e3c78006346981de8e4d70499)."""
HBM_FRACTION = 0.90
"""Streaming bandwidth / datasheet HBM rate for a card without ``_HBM_FRACTION`` entry: an assumption, not read
from a measurement. Published STREAM-style rows run lower (samuel-bohman/AI-benchmarking-guide ``Azure_Results/``, the
source of the MI300X entry): ND H100 v5 Copy 2.90 / Triad 2.97 TB/s of 3.35 (86.6 / 88.7 %; ``ND_H100_v5_results.md``
@a6533f14ab325f14a5ff87666ee92436be22881f), ND H200 v5 Copy 4.01 / Triad 4.15 of 4.8 (83.5 / 86.5 %;
``ND_H200_v5_results.md`` @5e2c4e5581b534ececa93041d7d67168065fc07b), ND A100 v4 (A100-SXM4-80GB) Copy 1.61 / Triad
1.70 of 2.039 (79.0 / 83.4 %; ``ND_A100_v4_results.md`` @26d18e9458bb07bd43e3eda7aec8653aa592f2ec). Checked with the
Copy fractions as ``_HBM_FRACTION`` entries for h100-sxm, h200 and a100-80gb (step-time benchmark): the A100 QLoRA
rows move toward the published ones (Qwen-72B-Chat-Int4 QLoRA on one A100-80GB, QwenLM/Qwen README.md: -9 -> -1 %),
but generation 17.2 -> 19.5 %, pretrain 8.6 -> 9.1 %, RL step 13.4 -> 14.0 %, the H200 held-out sets
4.7 / 4.1 / 3.2 -> 5.8 / 5.9 / 4.7 %, all rows 10.2 -> 10.5 % (LoRA 10.4 -> 9.5 %, H200 default 7.0 -> 6.1 %,
beyond 50 % unchanged). The model charges these bytes to decode weight reads and fused pointwise kernels, which a
copy kernel's rate does not bound; not applied, so 0.90 stays the stated assumption."""
HOST_S_PER_FORWARD_KERNEL = 65e-6
"""Host seconds per kernel of an eager forward through transformers' modules (Python module calls,
the views and casts around each kernel, dispatch, autograd recording, launch). Fitted on the 15
H200 "default" cases only (grid 30-70 us x 8-20 us; the fit set's median |error| 8%, worst 21%);
the held-out sets score 8, 9 and 9% (``benchmarks/step_times.md``).

Checked against the published rows from other hosts (``benchmarks/host_rate_fit.py``, 2026-12-03, trees 782102d
and 503b68e, the second with the L2 residency of RMSNorm chains): the same 86 of 742 scored rows owe at least 15 % of
their planned time to the host's issue rate (52 published, 20 with the mean response not published, 14 H200).
Scaling this rate and ``HOST_S_PER_BACKWARD_KERNEL`` together (a faster or slower host) and fitting on the 16
published half-0 rows among them gives 65 us (782102d: median |log error| 0.213; 0.216-0.231 anywhere in 45-70 us,
0.41 at 25) or 50 us (503b68e: 0.193 against 0.197 at 65), a flat valley; the 36 held-out rows read 0.212 at 65 us
on both trees and worsen below it (0.260-0.282 at 50, 0.300 at 40, 0.388 at 25). This rate alone fits 70 or 65 us;
at 70 the worst rows move further (B200 NeMo RL log-prob +285 -> +309 %, DeepSpeed-Chat OPT-30B +91 -> +101 %).
The rows that want a faster host (the L40S PEFT LoRA steps, B200 NeMo RL log-prob passes and update, play-verl's eager
Qwen2-7B generation, DeepSpeed-Chat OPT-30B) are matched by as many that want a slower one (play-verl's Qwen2.5-0.5B
steps, eager DeepSeek-V3 and Qwen3.5-9B generation, most Megatron-Bridge SFT steps), so no lower default is
supported; the L40S LoRA rows stay +20..+31 % and the B200 log-prob passes +96 % even at 25 us (782102d).
Checked again with the held-out fine-tuning rows of ``published_train_times_qwen_vectorlm.json`` (tree 9b67d9a, 967 scored
rows, 123 launch-sensitive: 89 published): the Qwen (1.0) README's single-A100 LoRA cells at 256-1,024 tokens (torch
2.0, Qwen's own modeling code, 2023) plan 2.5-2.8x their published step at every model size (1.8B 2.51 s vs 1.0,
7B 3.35 vs 1.2, 14B 4.19 vs 1.6, all launch-bound), i.e. about 25 us per forward kernel on that host. The half-0 fit
now lands at 30 us (median |log error| 0.162 against 0.231 at 65; 25 and 35 us read 0.209, so the valley is
narrow), the held-out half reads 0.239 against 0.252, and the project's own H200 steps (not fitted) go from 0.084 /
0.063 to 0.294 / 0.513: one rate cannot serve both hosts, so the default stays and these rows stay over-planned
(a per-host rate is a calibration: ``trainfit calibrate``, not this default). The same cells were then found to
owe the excess to their code path, not the host: Qwen-1's remote code checkpoints re-entrantly under torch 2.0 (the
first forward at the no-grad rate, ``training.checkpointed_forward_host_s_per_kernel``), runs one fused ``c_attn`` and
flash-attn's rotary kernel (``ModelSpec.fused_qkv`` / ``fused_rotary``), and CUDA's dropout is one kernel
(``inventory.LORA_DROPOUT_KERNELS``): 87 -> 57 forward kernels per layer, and the 256-1,024-token cells plan
+3..+37 % of their published step at this default rate. Nor is it the older
software stack: measured on one CPU with compute made negligible (``benchmarks/host_stack_cpu.py``, data in
``benchmarks/data/host_stack_cpu.json``, 2026-12-03), a transformers Llama step on torch 2.0.1 / transformers 4.32.1
/ PEFT 0.5.0 (that README's era) costs 1.3x the current stack's host seconds per op on the grad forward, 1.05x on
the backward and 1.2x / 0.9x on the LoRA forward / backward (whole pass, median of 3 rounds), and dispatches more
ops per layer (54 against 41 forward); torch 2.3 and 2.5 stacks read 1.3-1.65x. An older stack adds host time per
kernel, so a stack factor would move these rows further from their published steps; none is applied.

The H200 steps fix the host seconds per forward kernel of a training step, this rate + 1.9 x the backward's
(``inventory.BACKWARD_KERNEL_FACTOR``) = 88 us, not the split: 30/30, 50/20 and 65/12 us score the default set
within a point of each other (8.9, 8.4, 8.1 %). On a CPU the backward's ops cost 0.58-0.59 of the grad forward's
per op and the no-grad forward's 0.65-0.69 (``benchmarks/host_fwd_bwd_cpu.py``: a transformers 5.24 Qwen2, SDPA, 38
forward and 72 backward non-view ops per layer, torch 2.13.0+cpu, one thread of a shared Intel Xeon VM core,
2026-12-03: 9.7-10.1 / 6.6 / 5.8 us per op), and a GPU adds its launch to both, so on that host the split lies
between 41/24 (this ratio) and 30/30 (equal), not at 65/12 (0.18). It is kept: the backward rate also prices bare
aten calls from Python loops (``PassInventory.bare_kernels``), optimizer for-loops and per-tensor host loops, and on
782102d 40/25 moves the launch-sensitive published rows from 0.213 / 0.212 to 0.252 / 0.249 (half 0 / half 1),
the generation subset from 17 to 22 % and the Megatron-Bridge Qwen3-8B 32k SFT step from +27 to +146 %. A
no-grad forward (log-prob, reference and value passes) is priced from the identified sum, not from this side of the
split (``nograd_forward_host_s_per_kernel``, 27.7 us at the defaults)."""
NOGRAD_FORWARD_OP_RATIO = 0.71
"""Host seconds per dispatched op of a no-grad forward over a grad forward's, the same transformers layers on the same
CPU (autograd recording: grad_fn nodes, saved tensors, version counters, absent under ``torch.no_grad``). Measured,
not fitted: ``benchmarks/host_fwd_bwd_cpu.py`` (a transformers 5.24 Qwen2, hidden 64, SDPA, 16 tokens, 38 forward
and 72 backward non-view aten ops per decoder layer, the per-layer slope from 4 to 8 layers; torch 2.13.0+cpu, one
thread of a shared Intel Xeon VM core, best of 15 interleaved rounds of 10), three runs on 2026-12-03: no-grad /
grad forward 0.70, 0.81, 0.71 (the median taken), backward / grad forward 0.65, 0.77, 0.66
(``BACKWARD_OP_RATIO``); over the whole pass (embedding, head and loss included) 0.71 / 0.75 / 0.72 and 0.59 /
0.62 / 0.59. The same script's earlier run on that VM read 0.65-0.69 and 0.58-0.59; a separate forward-only
measurement on an AMD EPYC VM (2026-12-02: 330 ops, outputs kept alive) read 6.74 us per op with grad and 5.47
without, 0.81. Used by ``nograd_forward_host_s_per_kernel``."""
BACKWARD_OP_RATIO = 0.66
"""Host seconds per dispatched op of ``loss.backward()`` over the grad forward's, same runs as
``NOGRAD_FORWARD_OP_RATIO`` (``benchmarks/host_fwd_bwd_cpu.py``; the median of 0.65, 0.77, 0.66).
Measured, not fitted."""


def nograd_forward_host_s_per_kernel(*, host_s_per_forward_kernel: float, host_s_per_backward_kernel: float,
                                     backward_kernel_factor: float) -> float:
    """Host seconds per kernel of a no-grad forward through transformers' modules (log-prob, reference and value
    passes: ``training.forward_only_time``), from what the training steps identify.

    The H200 training steps fix one quantity, the host seconds a forward kernel brings into a step:
    ``host_s_per_forward_kernel + backward_kernel_factor x host_s_per_backward_kernel`` (65 + 1.9 x 12 = 88 us by
    default), not the split between forward and backward (30/30, 50/20 and 65/12 score the fit set within a point:
    ``HOST_S_PER_FORWARD_KERNEL``). A no-grad pass pays neither side of that split: it pays the grad forward's
    work less autograd recording. Split the identified sum by the measured per-op ratios instead: with the grad
    forward at ``a`` per kernel, the backward at ``BACKWARD_OP_RATIO x a`` and the no-grad forward at
    ``NOGRAD_FORWARD_OP_RATIO x a``, ``a (1 + F x BACKWARD_OP_RATIO)`` is the sum, so the no-grad kernel costs
    ``sum x NOGRAD_FORWARD_OP_RATIO / (1 + F x BACKWARD_OP_RATIO)``: 27.7 us by default (the whole-pass ratios
    give 29.8). A per-kernel part ``L`` that all three pay alike (the launch, the caching allocator) barely moves
    it: ``NOGRAD_FORWARD_OP_RATIO x (sum - L (1 + F)) / (1 + F x BACKWARD_OP_RATIO) + L`` is 28.1 us at L = 5 us,
    28.5 at 10 and 29.4 at 20. Before, the no-grad kernel was priced at the 65 us side of an unidentified split
    less 1.3 us of autograd recording (63.7 us). Neither figure below set it, and both agree with it: gpt-fast's eager
    Llama-2-7B decode step under ``torch.no_grad`` issues a kernel every 21.6 us, and play-verl's eager vLLM 0.8.3
    Qwen2-7B step of one sequence on an H100 (8.3 +- 0.4 ms, the slope of ``timing_s/gen`` over
    ``response_length/max`` in logs/verl_qwen2_7b_min.log) is 280 kernels at 28 us with its 5.1 ms weight read
    hidden under them (``tests/compute/test_eager_decode_evidence.py``); ``decode_step`` still prices an eager
    engine kernel at the training figure (its module docstring: the engines' per-phase costs that figure offsets).

    Check on published runs that time both launch-bound phases on one host (the host's own speed cancels): the log
    error of the log-prob passes less that of the actor update, NVIDIA-NeMo/RL v0.3.1 Qwen2.5-1.5B on 8 B200s
    (AI-Hypercomputer/gpu-recipes RL/nemoRL/a4/qwen2.5-1.5b/README.md @22d106b61788e60f8b4a99291dc3629387ff6df5)
    0.73 -> 0.16 (log-prob +289 -> +118 %, update +87 %), play-verl's Qwen2.5-0.5B GRPO 0.43 -> 0.11 (log-prob +12 ->
    -35 %, update -27 %) and PPO 0.34 -> 0.21 (+23 -> -29 %, update -12 %) (dingxianzhong/play-verl logs
    @7716a615fc4b68961f2bb7716c9aadcd65ca28d2); the other 26 runs publishing both move by at most 0.03 (their
    passes are device-bound). The play-verl passes move away from their published seconds: at 63.7 us their no-grad
    kernels offset a host that runs those runs' training slower than the H200 reference (their updates read -12 and
    -27 %); the B200 host runs it faster (+87 %). Neither host's rate is published, so no per-host factor is carried
    (a calibration record sets ``host_s_per_forward_kernel`` / ``host_s_per_backward_kernel``, and this follows
    them)."""
    per_forward_kernel_s = host_s_per_forward_kernel + backward_kernel_factor * host_s_per_backward_kernel
    return per_forward_kernel_s * NOGRAD_FORWARD_OP_RATIO / (1.0 + backward_kernel_factor * BACKWARD_OP_RATIO)


FSDP_UNIT_FORWARD_HOST_S = 355e-6
"""Host seconds one FSDP unit's forward hooks take when the unit is sharded (all-gather issue, copy-in/out, stream
waits, ``_pre_forward``/``_post_forward``, reshard), per no-grad forward call: FSDP1 ``FullyShardedDataParallel``
with flat parameters (``use_orig_params=False``) on a fake process group of 8 ranks, a Qwen2 of 8 decoder-layer
units + the root (hidden 64, 16 tokens, no-grad forward; torch 2.13.0+cpu, one thread, AMD EPYC VM, 2026-12-02):
1.78 ms plain, 4.98 ms wrapped, 355 us per unit (FSDP1 ``use_orig_params=True`` 462, FSDP2 ``fully_shard`` 372; each
unit adds 10-13 dispatched aten ops, the rest is Python). Measured, not fitted. The FSDP1 no-grad rate (the log-prob
passes, ``training.forward_only_time``); the other FSDP hook rates below are measured ratios to it
(``FSDP_HOOK_RATIOS``)."""
FSDP_HOOK_RATIOS = {"fsdp1_grad_forward": 1.248, "fsdp1_backward": 1.110, "fsdp2_forward": 1.159,
                    "fsdp2_grad_forward": 1.575, "fsdp2_backward": 1.773}
"""Host seconds of FSDP's hooks per unit, over FSDP1's no-grad forward hooks (``FSDP_UNIT_FORWARD_HOST_S``), measured
in the same interleaved rounds, not fitted: ``tools/measure_fsdp_backward_hooks.py`` (a fake process group of 8
ranks, so collectives are no-ops and only the host's work is timed; a transformers 5.24 Qwen2 of hidden 64, 16
tokens, fp32, eager attention, at 4 and 8 decoder layers; FSDP1 ``FullyShardedDataParallel`` with flat parameters
and ``transformer_auto_wrap_policy`` on the decoder layer, FSDP2 ``fully_shard`` on every layer and the root, each
against the same model unwrapped; torch 2.13.0+cpu (cf30153c4c131c8164ee7798e5022d810682e2cb), one thread of a
shared AMD EPYC VM core, 2026-12-03; five runs, each best of 20 interleaved rounds of 10 calls). On the forward
constant's footing, (wrapped - plain) / 9 at 8 layers (8 layer units and the root), in us per unit, runs 1-5:
FSDP1 no-grad forward 507 / 470 / 489 / 504 / 479, grad forward (autograd recording: the hooks' outputs go through
the backward-hook autograd Functions) 624 / 617 / 605 / 615 / 593, ``loss.backward()`` (``_pre_backward_hook``,
``_post_backward_hook``, the final callback) 567 / 526 / 537 / 537 / 551; FSDP2 no-grad forward 554 / 563 / 579 /
554 / 584, grad forward 718 / 797 / 780 / 790 / 766, backward (``FSDPParamGroup.pre_backward`` /
``post_backward``: ``foreach_reduce``'s copy-in, reduce-scatter issue and the sharded gradient's accumulation)
887 / 831 / 878 / 874 / 870. The ratios are the five runs' means of each run's ratio (spread: FSDP1 grad forward
1.22-1.31, backward 1.07-1.15; FSDP2 forward 1.09-1.22, grad forward 1.42-1.70, backward 1.73-1.82); the slope from
4 to 8 layers (the root's cost dropped) gives 1.25, 1.10, 1.22, 1.63 and 1.85. (The forward constant's own day
put FSDP2's no-grad forward at 372 us, 1.05; these rounds put it higher in every run.) The VM's rate that day (about 490 us
for FSDP1's no-grad forward) was not the forward constant's day's (355), so the ratios, not the seconds, carry over.
CPU lower bounds: on a GPU the hooks also record and wait on stream events and go through the CUDA caching
allocator."""
FSDP_UNIT_GRAD_FORWARD_HOST_S = FSDP_HOOK_RATIOS["fsdp1_grad_forward"] * FSDP_UNIT_FORWARD_HOST_S
"""FSDP1's forward hooks per unit in a forward that records autograd (training, and its recompute), 443 us."""
FSDP_UNIT_BACKWARD_HOST_S = FSDP_HOOK_RATIOS["fsdp1_backward"] * FSDP_UNIT_FORWARD_HOST_S
"""Host seconds one FSDP1 unit's backward hooks take per backward, 394 us: ``_pre_backward_hook`` (unshard, the
``BACKWARD_PRE`` prefetch of the next unit, stream waits) and ``_post_backward_hook`` (the gradient's reduce-dtype
cast and pre-divide, ``reduce_scatter_tensor``, the sharded gradient's accumulation, ``record_stream``, reshard), all
Python run from the autograd engine's thread, and ``_post_backward_final_callback`` once (pytorch/pytorch
@cf30153c4c131c8164ee7798e5022d810682e2cb, the torch 2.13.0 wheel, ``torch/distributed/fsdp/_runtime_utils.py``
``_pre_backward_hook`` l.630-700, ``_post_backward_hook`` l.701-776, ``_reduce_grad`` l.831-905,
``_post_backward_final_callback`` l.1084). Measured, not fitted (``FSDP_HOOK_RATIOS``)."""
FSDP_ADAPTER_UNIT_FORWARD_HOST_S = 290e-6
"""Host seconds the FSDP1 hooks of one PEFT adapter linear wrapped as its own unit (PEFT's ``fsdp_auto_wrap_policy``:
``parallel.fsdp_adapter_units``) add to a no-grad forward (the first forward under a re-entrant checkpoint). Measured,
not fitted: ``benchmarks/measure_fsdp_adapter_units.py`` (a fake process group of 8 ranks; a transformers 5.24 Qwen2
of hidden 64 with LoRA r 8 on q/k/v/o_proj, peft 0.21.2, FSDP1 ``use_orig_params=True`` wrapped by PEFT's policy
against the decoder layers alone, per adapter unit at 4 / 8 layers; torch 2.13.0+cpu, one thread of a shared AMD EPYC
VM core, 2026-12-04, best of 12 interleaved rounds of 10 calls). Four runs read no-grad forward 406 / 396, 286 / 294,
466 / 509, 560 / 310 us, grad forward 577 / 580, 348 / 338, 420 / 546, 360 / 427 us, backward 629 / 532, 399 / 420,
506 / 480, 561 / 391 us; the host was loaded by other work during all but the second (load average above 4 on its two
cores), whose 4- and 8-layer figures agree within 5 %: its means are taken (290, 343, 410 us). The same order as a
decoder-layer unit's (``FSDP_UNIT_FORWARD_HOST_S`` and its ratios: 355, 443, 394 us)."""
FSDP_ADAPTER_UNIT_GRAD_FORWARD_HOST_S = 343e-6
"""An adapter unit's FSDP1 hooks in a forward that records autograd (the recompute), the same second run
(``FSDP_ADAPTER_UNIT_FORWARD_HOST_S``; benchmarks/measure_fsdp_adapter_units.py)."""
FSDP_ADAPTER_UNIT_BACKWARD_HOST_S = 410e-6
"""An adapter unit's FSDP1 hooks in a backward, the same second run (``FSDP_ADAPTER_UNIT_FORWARD_HOST_S``;
benchmarks/measure_fsdp_adapter_units.py)."""
PEFT_PARAM_WRAPPER_HOST_S = 245e-6
"""Host seconds of one PEFT ``ParamWrapper`` forward beyond the aten ops it dispatches: the parametrization registered
on the wrapped module and removed again around every call (peft 0.21.2 peft/tuners/lora/layer.py
``ParamWrapper._activate_lora`` l.2572-2601; ``inventory.peft_param_wrapper_calls``). Measured by
benchmarks/measure_peft_param_wrapper_host.py (torch 2.13.0+cpu, transformers 5.24.0, peft 0.21.2, one thread of the
shared VM, 2026-12-04): the whole register / remove cycle less its own ops run bare, per wrapped parameter of a tiny
DeepSeek-V2 MoE layer (down_proj stack, gate_up_proj stack nested in it, router weight), three runs: 341 / 322 / 277,
317 / 233 / 181 and 420 / 210 / 184 us. The quietest run (the lowest sum) is taken: its mean, 244 us. Same footing as
the FSDP adapter-unit hooks (Python on the host, read on this VM)."""
PEFT_PARAM_WRAPPER_NOGRAD_RATIO = 0.95
"""Host seconds of a ``ParamWrapper`` cycle under ``torch.no_grad()`` (the log-prob, reference and value passes:
``training.forward_only_time``) over the same cycle with grad mode on (``PEFT_PARAM_WRAPPER_HOST_S``). A no-grad
forward still registers and removes the parametrization around every call, and still evaluates the merge twice
(torch's ``ParametrizationList.__init__`` runs its ``Z = self()`` check whatever the grad mode, then the cached
evaluation: two ``baddbmm`` per wrapped 3-D stack and forward, counted on a tiny Qwen3-MoE with and without grad
alike); only autograd's recording of those ops is skipped. Measured, not fitted: benchmarks/measure_peft_param_wrapper_host.py
(torch 2.13.0+cpu, transformers 5.24.0, peft 0.21.2, one thread of the shared VM, 2026-12-04; each module's grad
rounds run first, then its no-grad rounds): bookkeeping no-grad / grad 132.9 / 139.7, 129.7 / 138.3, 110.8 / 116.4 us
and 132.6 / 140.2, 132.7 / 136.8, 110.3 / 115.3 us in two runs, the sums' ratios 0.947 and 0.957 (that day's VM ran
the cycle at about half the constant's day's seconds, so the ratio, not the seconds, carries over). Rerun with the
modes alternating within every round, the first mode swapped from round to round (the script as it is now, ROUNDS=6,
same versions and host, 2026-12-04): 140.2 / 143.8, 132.6 / 138.1, 109.1 / 115.3 us (ratio 0.962) and 135.1 / 140.1,
131.2 / 137.3, 110.1 / 116.8 us (0.955): within the first runs' spread, so the constant stays 0.95."""
FSDP2_UNIT_FORWARD_HOST_S = FSDP_HOOK_RATIOS["fsdp2_forward"] * FSDP_UNIT_FORWARD_HOST_S
"""FSDP2's (``fully_shard``) forward hooks per unit in a no-grad forward, 411 us (``FSDP_HOOK_RATIOS``)."""
FSDP2_UNIT_GRAD_FORWARD_HOST_S = FSDP_HOOK_RATIOS["fsdp2_grad_forward"] * FSDP_UNIT_FORWARD_HOST_S
"""FSDP2's forward hooks per unit in a forward that records autograd, 559 us (``FSDP_HOOK_RATIOS``)."""
FSDP2_UNIT_BACKWARD_HOST_S = FSDP_HOOK_RATIOS["fsdp2_backward"] * FSDP_UNIT_FORWARD_HOST_S
"""FSDP2's backward hooks per unit per backward, 629 us (``FSDP_HOOK_RATIOS``)."""
DTENSOR_OP_HOST_S = 12.5e-6
"""Host seconds DTensor's dispatch adds to one op on a DTensor, over the same op on a plain tensor: what a
per-parameter ("for-loop") optimizer pays per update op when FSDP2 (``fully_shard``) holds its parameters,
gradients and states as DTensors (``optimizer_time.optimizer_seconds`` ``dtensor_params``). ``torch.optim.AdamW``
with ``foreach=False, fused=False`` runs ``_single_tensor_adam``, 8 ops a parameter (pytorch/pytorch
``torch/optim/adam.py`` l.414-546 @cf30153c4c131c8164ee7798e5022d810682e2cb, the torch 2.13.0 wheel), each its own
DTensor dispatch; a ``_foreach_*`` op dispatches once for its whole list. Measured, not fitted:
``tools/measure_dtensor_optimizer.py`` (a fake process group of 8 ranks, 128 parameter tensors of ``nn.Linear(64,
64)`` layers, each layer and the root ``fully_shard``-ed, against the same model plain; torch 2.13.0+cpu, one thread
of a shared Intel Xeon VM core, 2026-12-03, best of 25 interleaved rounds of 5 steps, three runs): for-loop AdamW
4.06-4.13 ms plain, 16.91-17.03 ms FSDP2, 100.1-100.8 us more per parameter tensor, 12.5-12.6 us per op; foreach
2.3-2.5 us per tensor (0.3 us per op), not priced. A CPU lower bound of the device-independent work, as the FSDP hook
rates above, and a lower bound for older torch too: torch 2.13 dispatches DTensor through a C++ fast path (its
``torch/distributed/tensor/_api.py`` ``__torch_dispatch__`` l.427-432: 'Base DTensor is normally dispatched via a C++
fast path (see #167051)'), which pytorch/pytorch pull request #166371 (2025-10-28,
https://github.com/pytorch/pytorch/pull/166371, read 2026-12-03) reports cut DTensor's dispatch of ``detach()``
from 36-40 to 24-26 us on a Skylake host; the Python dispatch before it (torch 2.7, NeMo RL v0.3's pin) costs
more per op."""
ZERO3_MODULE_FORWARD_HOST_S = 175e-6
"""Host seconds DeepSpeed ZeRO-3's hooks take per module per forward (grad or no-grad): ZeRO-3 hooks EVERY submodule,
not one unit per decoder layer (deepspeed 0.19.8 from PyPI, deepspeed/runtime/zero/parameter_offload.py
``_register_deepspeed_module`` l.337-528: pre/post-forward hooks calling partitioned_param_coordinator.py
``fetch_sub_module`` l.310 / ``release_sub_module`` l.494 with the trace-based prefetch bookkeeping, and the outputs
wrapped in autograd Functions for the backward hooks). Measured on the same footing as ``FSDP_UNIT_FORWARD_HOST_S``:
a fake process group of 8 ranks (collectives are no-ops: host work only), a transformers 5.24 Qwen2 (hidden 64,
16 tokens, fp32, linear weights partitioned, norms and biases persistent: ``stage3_param_persistence_threshold``
100), ``deepspeed.initialize`` ZeRO-3 engine vs the plain model, torch 2.13.0+cpu, one thread of a shared AMD EPYC
VM core, 2026-12-02, best of 15 interleaved rounds of 10: 8 layers (111 modules, 13 per decoder layer) grad forward
5.63 ms plain, 25.09 ms ZeRO-3, 175 us per module (no-grad 178; from 4 to 8 layers 190 per module, so almost no
fixed part); FSDP1 units in the same rounds 327-384 us each (one per layer), so ZeRO-3 costs ~6x FSDP per decoder
layer. A CPU lower bound of the device-independent Python/C++ work: on a GPU the coordinator also records and waits
on stream events (skipped on CPU, ``is_synchronized_device``). Measured, not fitted."""
ZERO3_MODULE_BACKWARD_HOST_S = 160e-6
"""Host seconds DeepSpeed ZeRO-3's backward hooks take per module (pre-backward re-fetch, post-backward release, the
per-parameter gradient reduce-and-partition hooks of deepspeed/runtime/zero/stage3.py): same measurement as
``ZERO3_MODULE_FORWARD_HOST_S``, ``engine.backward(loss)`` vs ``loss.backward()``: 4.13 ms plain, 21.73 ms ZeRO-3,
159 us per module (166 from 4 to 8 layers). Measured, not fitted."""
ZERO3_REDUCE_BUCKET_HOST_S = 77e-6
"""Host seconds DeepSpeed ZeRO-3's backward takes per gradient reduce bucket beyond the first: each flush of the IPG
bucket (``reduce_independent_p_g_buckets_and_remove_grads`` when the next gradient would pass
``reduce_bucket_size`` elements) runs ``__reduce_and_partition_ipg_grads`` on the host (reduce-event bookkeeping,
the bucket's ``reduce_scatter_coalesced``: flatten, pad, one collective; ``partition_grads`` into the fp32 gradient
partitions, an event record; deepspeed 0.19.8 from PyPI, deepspeed/runtime/zero/stage3.py l.1569-1590,
1646-1694). Same footing as ``ZERO3_MODULE_BACKWARD_HOST_S`` (a fake process group of 8 ranks, a transformers 5.24
Qwen2 of 8 layers, hidden 64, 16 tokens, fp32, ``stage3_param_persistence_threshold`` 100, torch 2.13.0+cpu, one
thread of a shared AMD EPYC VM core, 2026-12-03, best of 25 interleaved rounds of 5; the CPU accelerator's
``device_count``, which forks ``numactl`` on every call (deepspeed/utils/numa.py) where CUDA's is cached, pinned to
its first value): ``engine.backward`` at ``reduce_bucket_size`` 5e8 / 65536 / 16384 / 8192 / 4096 / 1 flushes
1 / 6 / 23 / 43 / 75 / 99 buckets in 17.03 / 18.19 / 20.27 / 21.91 / 24.37 / 24.54 ms: 77 us per bucket (least
squares; 96 us over the first five). ``tools/measure_zero3_reduce_buckets.py``. A CPU lower bound as its sibling
rates (a GPU adds the NCCL launch and the stream switches). ``ZERO3_MODULE_BACKWARD_HOST_S``'s measurement sets only
the persistence threshold, so DeepSpeed's default ``reduce_bucket_size`` 5e8 held and its model (under a million
elements) flushed one bucket, as this measurement's 5e8 point (17.0 ms here, 21.7 there): only buckets beyond the
first are added. Measured, not fitted."""
HF_ROOT_MODULES = 6
"""Modules outside the decoder layers whose forward runs in a transformers causal LM (the ``*ForCausalLM``, its
``model``, ``embed_tokens``, ``rotary_emb``, the final ``norm``, ``lm_head``; the ``layers`` ModuleList never runs):
transformers 5.24 Qwen2ForCausalLM has 111 modules at 8 layers = 8 x 13 + 7."""
HOST_S_PER_BACKWARD_KERNEL = 12e-6
"""Autograd engine (C++) seconds per kernel of a backward; fitted with the forward figure on the 15 H200 "default"
cases measured on an H200 host (``benchmarks/gpu_calibration.md``, ``benchmarks/results/gpu_raw``; grid 8-20 us,
``HOST_S_PER_FORWARD_KERNEL``)."""
DEVICE_S_PER_KERNEL_MIN = 2.5e-6
"""Shortest kernel on the device (launch latency + a small grid)."""
NVLINK_BUS_FRACTION = 370.0 / 450.0
"""NCCL ring bus bandwidth / one direction of NVLink: 370 of 450 GB/s on H100 SXM. NCCL's maintainer: "450GB/s is the
line rate. With the protocol overhead (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s, which you can
observe as "BusBw" when running non-allreduce operations, or when running with NCCL_ALGO=RING" (NVIDIA/nccl-tests issue
#212, https://github.com/NVIDIA/nccl-tests/issues/212, comment of 2024-05-06, read 2026-12-03); measured on 8 x H100
SXM with ``NCCL_ALGO=RING ./all_reduce_perf -b 2G -e 4G``: busbw 365-370 GB/s at 2 to 8 GPUs, "about 80% of 450GBps"
(NVIDIA/nccl issue #1455, https://github.com/NVIDIA/nccl/issues/1455, 2024-09-19, read 2026-12-03). NVLS (NVLink SHARP)
all-reduce on 5-8 H100 reads higher (420-480 GB/s, same issue) and is not modelled. Applied to every NVLink generation
(and to MI300X's xGMI, ``_FABRIC_NOTES``); no A100 (NVLink3) ring plateau was checked. Was 0.80, unsourced."""
PCIE_P2P_BUS_FRACTION = 25.95e9 / 32e9
"""NCCL ring bus bandwidth with PCIe peer-to-peer / the catalog's PCIe x16 rate: 4 x GeForce RTX 4090 (PCIe Gen4 x16,
host ``7773x``, an AMD EPYC 7773X) with P2P enabled by tinygrad's patched open kernel modules, ``all_reduce_perf -b 256M
-e 2G -f 2 -g 4``: busbw 25.72 / 25.82 / 25.95 GB/s at 256 MB / 512 MB / 1 GB (tinygrad/open-gpu-kernel-modules issue
#36, https://github.com/tinygrad/open-gpu-kernel-modules/issues/36, ChihayaK's all_reduce_perf comment, read
2026-12-03); 25.95 / 32 = 0.81 (the 1 GB plateau). One host; a PCIe switch or a cross-socket path changes it. Was 0.75,
unsourced."""
PCIE_NO_P2P_BUS_FRACTION = 4.00e9 / 16e9
"""NCCL ring bus bandwidth without peer-to-peer (NCCL's SHM transport: every byte staged through pinned host memory)
/ the catalog's PCIe x16 rate. 2 x GeForce RTX 2080 Ti, PCIe Gen3 x16 behind one PCIe switch (``nvidia-smi topo``
PIX, peer access "NS"), driver 550.90.07: ``all_reduce_perf -b 8 -e 1024M -f 2 -g2`` busbw plateau 4.00 GB/s
(16 MB-1 GB), ``all_gather_perf`` 3.79-3.84 GB/s, while the one-directional ``broadcast_perf`` / ``reduce_perf`` reach
11.09 / 11.14 GB/s (Anthony-Hoo/Anthony-Hoo.github.io ``posts/AutoDL_Multi-GPU_Interconnection_Test.md``
@37e805e8e56f839f6557756d76503d45af6ab47e, measured 2025-06-05). Independently, 2 GPUs on PCIe Gen3 x16 with
``NCCL_P2P_DISABLE=1``: all-reduce 3.9, all-gather 3.17, broadcast 10.31 GB/s (NVIDIA/nccl issue #384,
https://github.com/NVIDIA/nccl/issues/384, 2020-09-07, read 2026-12-03; one channel). 4.00 / 16 = 0.25. The maintainer's
reason for the gap between the bidirectional ring and broadcast: "Some components (in particular some CPUs) do not
handle bidirectional traffic well" (same issue, 2020-09-09), and on PCIe systems "the performance you get is usually
determined by the bandwidth your CPU and memory can deliver" (NVIDIA/nccl issue #1639, 2025-03-14, read 2026-12-03): a
host-dependent rate, taken here as a fraction of the card's PCIe rate for want of a published SHM table at 4 and 8
GPUs on one host. Was 0.33, unsourced."""
NVLINK_DOMAIN_GPUS = {"gb200": 72, "gb300": 72}
"""GPUs one NVLink domain spans where it is larger than a node (GB200 NVL72 and GB300 NVL72: 72 GPUs over 18 trays of
4; https://www.nvidia.com/en-us/data-center/gb300-nvl72/, read 2026-12-03)."""
HOST_MEMORY_BYTES_PER_S = 200e9
"""Host DRAM bytes per second a node's CPU work (CPU Adam, host passes) and its GPUs' concurrent pinned copies share
(``compute.offload.rank_host_memory_bytes_per_s``, ``host_copy_bytes_per_s``: 200 / 8 = 25 GB/s a GPU on an 8-GPU
node). The value is one socket's DDR peak on a DGX A100 host, half the node's: a DGX A100 carries two AMD EPYC 7742
(https://www.microway.com/hpc-tech-tips/dgx-a100-review-throughput-and-hardware-summary/, read 2026-12-04), each with
8 channels of DDR4-3200, 8 x 25.6 = 204.8 GB/s a socket, 409.6 GB/s the node (the arithmetic for the same Rome
platform, 2 x EPYC 7H12: https://orfeo-doc.areasciencepark.it/examples/STREAM/, read 2026-12-04). It is a sustained-
rate assumption, not a measurement of this quantity. Checks: STREAM on an EPYC 7742 host reaches 148 GB/s over one
socket's four NUMA nodes (``compute.offload`` module docstring, gist.github.com/v0dro/0559e1d9b205ca9ac0ad1a29fe10377b),
about 296 GB/s for two sockets if they add. Checked with that figure (296e9, step-time benchmark): the ZenFlow
core-binding DeepSpeed offload rows on the DGX A100 host go +33 / +25 % -> -1 / -6 % (Qwen2.5-3B / 1.5B), but
torchtune's Llama-3.1-70B full fine-tune with FSDP CPU offload on 8 x A100-80GB
(pytorch/torchtune README.md) +3 -> -14 %, the checkpoint-engine broadcast weight syncs on H800 / H20 hosts -15 / -7 /
-5 / -14 % -> -28 / -19 / -11 / -19 %, NeMo RL's DeepSeek-V3 GRPO step on 256 GB200
(NVIDIA-NeMo/RL docs/about/performance-summary.md, bf16, on-policy) -49.7 -> -51.3 % (a Grace
host), the RL step median 13.4 -> 14.2 % (beyond 50 %: 2 -> 3), weight sync 23.6 -> 24.1 %, generation 17.2 ->
17.5 %, all rows 10.2 -> 10.3 % (44 -> 45 beyond 50 %). The hosts of the H100 / H800 / H20 / GB200 rows are not the
EPYC 7742 (no published STREAM or all-GPU pinned-copy result for them found), so one node-wide figure from the A100
host does not transfer, and the value stands. A calibration file or ``hardware.host_memory_gbps`` replaces it per host."""
CPU_ADAM_BYTES_PER_PARAM = 30.0
"""Host-memory bytes one CPU Adam step moves per parameter: DeepSpeed's ``Adam_Optimizer::Step_AVX``
(deepspeedai/DeepSpeed ``csrc/includes/cpu_adam.h`` @14e1981a4dc49c2d68f474523d2994f3a3ca3820) loads the fp32
gradient, ``exp_avg``, ``exp_avg_sq`` and parameter (``simd_load`` x 4: 16 B) and stores the parameter and both
moments (``simd_store`` x 3: 12 B) per element, 28 B; ZeRO-1/2 then writes the 16-bit copy on the CPU (2 B,
``stage_1_and_2.py`` l.2011-2012 @1d7b90adc48d57c2283e8825f5c668a3730ff899, ``compute.offload`` module docstring):
30 B. A byte count read from the code, no rate: the time is these bytes over the rank's share of
``HOST_MEMORY_BYTES_PER_S``. Not counted: the write-allocate read of the 16-bit buffer's lines (+2 B on a cache
without non-temporal stores) and the AVX arithmetic (``sqrt``, ``div``: memory-bound at 8+ threads)."""
PCIE_EFFICIENCY = 0.80
"""Host <-> device copy rate over the link's per-direction rate (``DeviceRates.pcie_bytes_per_s``; NVLink-C2C too).
Published pinned-copy measurements with NVIDIA's nvbandwidth: PCIe Gen4 x16 (32 GB/s): 8 x GeForce RTX 4090,
``host_to_device_memcpy_ce`` 23.90-26.38 GB/s (0.75-0.82), ``device_to_host_memcpy_ce`` 26.25-27.11 GB/s (0.82-0.85)
(NVIDIA/nvbandwidth issue #15, https://github.com/NVIDIA/nvbandwidth/issues/15, 2024-01-06); A100-SXM4-40GB
``host_to_device_memcpy_sm`` 25.13 GB/s at 512 MiB-1 GiB (0.785; issue #42, 2025-07-05); 8 x A100-SXM4-80GB
device to host ~25 GB/s (0.78; issue #53 title, 2025-11-21). NVLink-C2C (GH200, 450 GB/s a direction):
host to device CE 346 GB/s (0.77; issue #23, 2024-08-23). All read 2026-12-04. PCIe Gen5 x16 (64 GB/s): an H100 VM's
host-to-device copies 56.68-57.07 GB/s on three of four GPUs (0.89; issue #6, 2023-07-11), an 8 x H100 host's
``host_to_device_memcpy_sm`` 35.2 / ``device_to_host_memcpy_sm`` 52.8 GB/s (0.55 / 0.82; issue #24, 2024-09-11).
Azure's nvbandwidth rows on 8-GPU hosts (samuel-bohman/AI-benchmarking-guide ``Azure_Results/``): ND H100 v5 host to
device 51 / device to host 52 GB/s (0.80 / 0.81 of Gen5 x16; ``ND_H100_v5_results.md``
@a6533f14ab325f14a5ff87666ee92436be22881f), ND H200 v5 52 / 52 (0.81; ``ND_H200_v5_results.md``
@5e2c4e5581b534ececa93041d7d67168065fc07b), ND A100 v4 host to device 26.28 GB/s (0.82 of Gen4 x16; its device to host
6.27 is an outlier; ``ND_A100_v4_results.md`` @26d18e9458bb07bd43e3eda7aec8653aa592f2ec). 0.80 stands for every link:
at 0.89 for Gen5 cards (NVIDIA and AMD, host-link cards excepted) one published row moves
(verl's DeepSeek-V3 671B GRPO step on 96 H20, volcengine/verl docs/perf/dpsk.md: -16 -> -18 %), every subset median
unchanged, and the Azure Gen5 rows give 0.80-0.81, so the single 0.89 VM is not taken."""

# vLLM engine host constants (``compute.decode_step``): defaults of the DeviceRates fields of the same names in
# lower case, so that a calibration file (``trainfit calibrate`` on RL run records with generation times) can
# replace them per GPU kind: they differ by host CPU and vLLM release, which a card does not say.
ENGINE_S_PER_STEP = 0.58e-3
"""Engine seconds per decode step outside the kernels (``compute.decode_step`` module docstring: the residual of one
published TPOT once the weight read and the kernel gaps, ``GRAPH_KERNEL_GAP_S``, are taken out)."""
ENGINE_S_PER_SEQUENCE = 80e-6
"""A vLLM V1 engine core's host seconds per running sequence per step, serial with the GPU in both engine modes
(scheduler, input preparation, sampling bookkeeping, ``update_from_output``). Fitted on the fit half of the benchmark
(``compute.decode_step`` module docstring, "The host constants, per path": the published V1 gap gives 19.2 us, which
the RTX 4090 offline batches of ``tests/compute/test_rtx4090_decode_evidence.py`` and the RL steps contradict, so it
is not used)."""
ENGINE_V0_S_PER_SEQUENCE = 80e-6
"""A vLLM V0 ``LLMEngine``'s host seconds per running sequence per step (scheduler, ``SequenceGroup`` bookkeeping,
output processing and detokenization in the one process, all serial with the GPU): inside the 61-123 us per token that
verl's per-step logs of V0 engines give (``compute.decode_step`` module docstring, "The host constants, per path")."""
FRONTEND_S_PER_STEP = 2.0e-3
"""A V1 in-process engine's constant host seconds per step beside the core's (NeMo RL's synchronous ``LLM.generate``
path; refitted on the fit half of ``benchmarks/step_times.py`` with the other host constants as they are, no mechanism
found: ``compute.decode_step`` module docstring, "The host constants, per path")."""
FRONTEND_S_PER_SEQUENCE = 1.5e-6
"""A V1 frontend's host seconds per running sequence per step when it returns final outputs only (``LLM.generate``):
stats, incremental detokenization and the stop check, the sampled token's ``Logprob``. A CPU lower bound measured by
``benchmarks/engine_frontend_cpu.py`` (``compute.decode_step`` module docstring)."""
FRONTEND_CUMULATIVE_S_PER_SEQUENCE = 3.9e-6
"""What a V1 frontend adds per running sequence per step when it streams cumulative outputs (``AsyncLLM.generate``'s
default): the ``CompletionOutput`` / ``RequestOutput`` and the wake-up of the request's ``generate()`` coroutine. CPU
lower bound, ``benchmarks/engine_frontend_cpu.py``. Nothing grows with the tokens generated so far: with a fast
tokenizer the output hands back the detokenizer's own token list (``compute.decode_step`` module docstring)."""
GPT2_DECODE_FORWARD_KERNELS = 12 * 11 + 8
"""Kernels of one eager GPT-2 decode forward in vLLM and in SGLang (both ``GPT2Block.forward`` issue the same 11 per
layer: ``ln_1``, ``c_attn`` GEMM with its bias, the KV-cache write and the attention kernel, ``c_proj``, the residual
add, ``ln_2``, ``c_fc``, the GELU, ``c_proj``, the residual add; outside the 12 layers ``wte``, ``wpe``, their add,
``ln_f``, the last-row gather and ``lm_head``, sampling, ~8). vllm-project/vllm ``vllm/model_executor/models/gpt2.py``
@017689429418547490506c3bf52419a806c115d7 and sgl-project/sglang ``python/sglang/srt/models/gpt2.py``
@00b08c497f0735678e084ae5e3dd88ca06b46627 (``GPT2Block.forward``, ``GPT2Model.forward``: the same modules; SGLang's
``RadixAttention`` writes the cache and runs the decode kernel, its ``LogitsProcessor`` gathers the last row and
multiplies by the tied ``wte``)."""
EAGER_DECODE_FORWARDS_PER_REQUEST = 32
"""Forwards of one DeepSpeed PR #8352 request that a CUDA graph replaces: its 32 decode steps. SGLang captures decode
batches only (``disable_cuda_graph`` leaves the prefill eager in both columns). vLLM's V1 piecewise graphs would also
cover a 128-token prefill (a captured size) but still run its attention eagerly; the PR does not give the vLLM
release, so both engines are read over the 32 decode forwards (over 33, vLLM's figure is 24.3 us)."""
SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED = ((156.0e-3 - 33.2e-3) / EAGER_DECODE_FORWARDS_PER_REQUEST
                                             / GPT2_DECODE_FORWARD_KERNELS)
"""Host seconds SGLang spends per kernel of an eager decode forward, 27.4 us: deepspeedai/DeepSpeed pull request #8352
(https://github.com/deepspeedai/DeepSpeed/pull/8352, comment "Controlled Rollout Performance Attribution on NVIDIA
H200", 2026-09-22, read 2026-12-03) times GPT-2 in bf16 on one H200, batch 1, 128 prompt + 32 greedy tokens, mean
request latency over 5 runs after 2 warm-ups: "slime / SGLang" 156.0 ms eager and 33.2 ms with "SGLang CUDA Graph";
the difference over the 32 graphed decode forwards (``EAGER_DECODE_FORWARDS_PER_REQUEST``) of
``GPT2_DECODE_FORWARD_KERNELS`` kernels. The default SGLang price within the measurement's scope
(``decode_step.measured_eager_s_per_kernel``); ``DeviceRates.sglang_eager_s_per_kernel`` overrides it."""
VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED = ((154.1e-3 - 41.8e-3) / EAGER_DECODE_FORWARDS_PER_REQUEST
                                           / GPT2_DECODE_FORWARD_KERNELS)
"""Host seconds vLLM spends per kernel of an eager decode forward, 25.1 us: the same comment, "verl / vLLM" 154.1 ms
eager and 41.8 ms with the "vLLM non-eager path" (CUDA graphs and its compiled forward), same arithmetic. The
default V1 price within the measurement's scope (``decode_step.measured_eager_s_per_kernel``);
``DeviceRates.vllm_eager_s_per_kernel`` overrides it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GemmPoint:
    """One measured matmul: ``(m, k) @ (k, n)`` in bf16 at ``flops_per_s``."""

    m: int
    n: int
    k: int
    flops_per_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class DeviceRates:
    """Sustained rates of one GPU kind (and its host), each with units in its name."""

    gpu_id: str
    matmul_flops_per_s: float
    """Largest sustained dense 16-bit matmul rate (large aligned shapes): bf16, or fp16 on a card without bf16
    tensor cores (V100), where the card validator admits only fp16 / fp32 compute."""
    hbm_bytes_per_s: float
    """Sustained device-memory bandwidth of a streaming kernel."""
    sm_count: int
    host_s_per_forward_kernel: float = HOST_S_PER_FORWARD_KERNEL
    host_s_per_backward_kernel: float = HOST_S_PER_BACKWARD_KERNEL
    device_s_per_kernel_min: float = DEVICE_S_PER_KERNEL_MIN
    engine_s_per_step: float = ENGINE_S_PER_STEP
    """vLLM engine host seconds per decode step outside the kernels at batch 1 (``ENGINE_S_PER_STEP``)."""
    engine_s_per_sequence: float = ENGINE_S_PER_SEQUENCE
    """vLLM V1 engine core host seconds per running sequence per decode step (``ENGINE_S_PER_SEQUENCE``)."""
    engine_v0_s_per_sequence: float = ENGINE_V0_S_PER_SEQUENCE
    """vLLM V0 engine host seconds per running sequence per decode step (``ENGINE_V0_S_PER_SEQUENCE``)."""
    frontend_s_per_step: float = FRONTEND_S_PER_STEP
    """vLLM V1 in-process frontend host seconds per decode step (``FRONTEND_S_PER_STEP``)."""
    frontend_s_per_sequence: float = FRONTEND_S_PER_SEQUENCE
    """vLLM V1 frontend host seconds per running sequence per step, final outputs (``FRONTEND_S_PER_SEQUENCE``)."""
    frontend_cumulative_s_per_sequence: float = FRONTEND_CUMULATIVE_S_PER_SEQUENCE
    """What cumulative outputs add per running sequence per step (``FRONTEND_CUMULATIVE_S_PER_SEQUENCE``)."""
    vllm_eager_s_per_kernel: float | None = None
    """vLLM's host seconds per kernel of an eager decode step (``enforce_eager``); None: the published
    ``VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED`` within its scope (V1, a dense softmax-attention model), else
    ``host_s_per_forward_kernel`` (``compute.decode_step.measured_eager_s_per_kernel``)."""
    sglang_eager_s_per_kernel: float | None = None
    """SGLang's host seconds per kernel of an eager decode step (``disable_cuda_graph``, or a batch above the largest
    captured); None: the published ``SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED`` on a dense softmax-attention model,
    else ``host_s_per_forward_kernel`` (``compute.decode_step.measured_eager_s_per_kernel``)."""
    intra_node_bus_bytes_per_s: float
    """NCCL bus bandwidth inside a node (per direction), of a ring over the job's GPUs in a node: on bridged PCIe cards
    whose job has more GPUs in a node than one bridge group, the PCIe rate (``link_rates``)."""
    bridge_group_gpus: int = 0
    """GPUs of one NVLink bridge group where the node's ring runs slower than the bridge (``BRIDGE_GROUP_GPUS``); 0:
    no such split, every collective of the node at ``intra_node_bus_bytes_per_s``."""
    bridge_bus_bytes_per_s: float | None = None
    """NCCL bus bandwidth of a collective whose ranks fit one bridge group (``group_rates``), set with
    ``bridge_group_gpus``."""
    p2p: bool = True
    nvlink: bool = True
    """Every pair of a node's GPUs on NVLink (an NVSwitch or a full mesh; False: PCIe, or bridges in pairs);
    picks NCCL's hop latencies and whether vLLM's custom all-reduce runs on more than two GPUs
    (``compute.decode_step``)."""
    pcie_bytes_per_s: float
    """Sustained host <-> device copy rate per direction (pinned memory)."""
    node_nic_bytes_per_s: float | None = None
    """Inter-node bytes per second per direction of a whole node, shared by its GPUs (``hardware.nic_gbps_per_node``):
    None, the rail-optimised server, one NIC per GPU and no cap beyond them (``collectives.ring_bus_bytes_per_s``)."""
    host_memory_bytes_per_s: float = HOST_MEMORY_BYTES_PER_S
    """Host DRAM bandwidth per node that a CPU optimizer step streams at."""
    host_numa_nodes: int = 1
    """NUMA nodes of the host (all sockets), each with an equal share of ``host_memory_bytes_per_s``. A rank's pinned
    host buffers lie on one of them, so its CPU optimizer streams at most one node's share
    (``compute.offload.rank_host_memory_bytes_per_s``); 1: one memory domain, the node's ranks share it all."""
    fp32_matmul_flops_per_s: float | None = None
    """fp32 matmul without tensor cores (None: 1/12 of the bf16 rate)."""
    tf32_matmul_flops_per_s: float | None = None
    """fp32 matmul on the TF32 tensor cores, set only where the card allows TF32 (``precision.tf32``, applied by
    ``plan.time.rates_of``): the catalog's dense TF32 peak at the card's bf16 tensor-core fraction; None: fp32 GEMMs
    on the CUDA cores (``fp32_matmul_flops_per_s``), PyTorch's default."""
    fp8_matmul_flops_per_s: float | None = None
    """Sustained dense fp8 (E4M3/E5M2) matmul rate; None on cards without fp8 tensor cores (Ampere, Turing,
    Volta), where ``precision.compute: fp8`` is refused."""
    fp8_precise_matmul_flops_per_s: float | None = None
    """Sustained dense fp8 matmul rate with full-precision accumulation (no cuBLASLt fast accumulation), the rate of
    the backward's fp8 GEMMs (``_FP8_PRECISE_ACCUMULATION_FRACTION``); None: ``fp8_matmul_flops_per_s``."""
    fp4_matmul_flops_per_s: float | None = None
    """Sustained dense fp4 (NVFP4 block-scaled) matmul rate: the catalog's dense fp4 peak at the card's fp8
    fraction (no published fp4 GEMM sweep of these cards is read; assumed, not fitted: ``FP4_MATMUL_ASSUMPTION``, in
    the plan's assumptions of an fp4 card). None on cards without fp4 tensor cores (everything before Blackwell),
    where ``precision.compute: fp4`` is refused."""
    gemm_points: tuple[GemmPoint, ...] = ()
    """Measured matmuls (a calibration); when given they replace the shape model near their shapes."""
    compute_capability: str | None = None
    l2_read_bytes_per_s: float | None = None
    """Measured L2 read bandwidth (catalog ``l2_read_bytes_per_s``); None: no L2 residency priced
    (``training.pass_seconds``)."""
    l2_resident_bytes: float = 0.0
    """Largest data set read at that rate (catalog ``l2_resident_bytes``)."""
    sources: tuple[str, ...] = field(default_factory=tuple)

    def with_overrides(self, overrides: dict[str, Any], *, source: str) -> "DeviceRates":
        """A copy with calibrated fields replaced; unknown names are refused. ``source`` joins ``sources`` (the
        ``time: rates:`` line) only when a field it lists is replaced: not for engine host constants alone."""
        known = {f.name for f in fields(DeviceRates)} - {"gpu_id", "sources"}
        bad = set(overrides) - known
        if bad:
            raise CardError(f"calibration: unknown rate(s) {sorted(bad)}; allowed: {', '.join(sorted(known))}")
        data = dict(overrides)
        if "gemm_points" in data:
            data["gemm_points"] = tuple(p if isinstance(p, GemmPoint) else GemmPoint(**p) for p in data["gemm_points"])
        for k, v in data.items():
            if k in ("gemm_points", "p2p", "nvlink", "compute_capability"):
                continue
            positive = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
            if k in _OPTIONAL_RATES:  # None: not measured (no fp8 tensor cores, no L2 residency priced)
                if v is not None and not positive:
                    raise CardError(f"calibration: {k} must be a positive number or null, got {v!r}")
            elif not (isinstance(v, (int, float)) and v > 0):
                raise CardError(f"calibration: {k} must be a positive number, got {v!r}")
        if "l2_resident_bytes" in data and data["l2_resident_bytes"] is None:
            data["l2_resident_bytes"] = 0.0  # the field's own 'none': no L2 residency priced
        fp8 = data.get("fp8_matmul_flops_per_s", self.fp8_matmul_flops_per_s)
        precise = data.get("fp8_precise_matmul_flops_per_s", self.fp8_precise_matmul_flops_per_s)
        if ("fp8_matmul_flops_per_s" in data and "fp8_precise_matmul_flops_per_s" not in data and precise
                and fp8 and self.fp8_matmul_flops_per_s):
            precise = fp8_precise_from_calibrated(fp8_matmul_flops_per_s=fp8,
                                                  default_fp8_matmul_flops_per_s=self.fp8_matmul_flops_per_s,
                                                  default_fp8_precise_matmul_flops_per_s=precise)
            data["fp8_precise_matmul_flops_per_s"] = precise
        if precise and fp8 and precise > fp8:  # full-precision accumulation is never faster than fast accumulation
            data["fp8_precise_matmul_flops_per_s"] = fp8
        replaced = set(data)
        kept = tuple(s for s in self.sources
                     if not any(s.startswith(_DEFAULT_SOURCE_PREFIX[k]) for k in replaced if k in _DEFAULT_SOURCE_PREFIX))
        said = ", ".join(_override_text(k, data[k], derived=k not in overrides) for k in sorted(data)
                         if k not in ENGINE_HOST_FIELDS)
        # a file that replaces no rate the line lists (only engine host or memory constants) is no rate source
        return replace(self, **data, sources=kept + ((f"{source}: {said}",) if said else ()))


ENGINE_HOST_FIELDS = ("engine_s_per_step", "engine_s_per_sequence", "engine_v0_s_per_sequence", "frontend_s_per_step",
                      "frontend_s_per_sequence", "frontend_cumulative_s_per_sequence", "vllm_eager_s_per_kernel",
                      "sglang_eager_s_per_kernel")
"""The rollout engines' host constants (``compute.decode_step``) a calibration may set: a plan's calibration
assumption names them when its rollout engine reads them (``calibration.apply``), so the rates line leaves them out
(an SFT plan reads none)."""
_DEFAULT_SOURCE_PREFIX = {"matmul_flops_per_s": "matmul ", "fp8_matmul_flops_per_s": "fp8 matmul ",
                          "fp8_precise_matmul_flops_per_s": "fp8 backward GEMMs", "fp32_matmul_flops_per_s": "fp32 matmul ",
                          "hbm_bytes_per_s": "HBM "}
"""The start of ``default_rates``'s source line for a field: dropped when a calibration replaces the field (the
line would describe a rate the plan no longer uses)."""


def _override_text(name: str, value: Any, *, derived: bool) -> str:
    """One replaced field as a source says it: the value in its field's unit, gemm_points as a count."""
    if name == "gemm_points":
        text = f"gemm_points {len(value)} shapes"
    elif isinstance(value, float):
        text = f"{name} {value:.4g}"
    else:
        text = f"{name} {value}"
    return text + (" (from the calibrated fp8 rate)" if derived else "")


def fp8_precise_from_calibrated(*, fp8_matmul_flops_per_s: float, default_fp8_matmul_flops_per_s: float,
                                default_fp8_precise_matmul_flops_per_s: float) -> float:
    """The full-precision-accumulation fp8 GEMM rate of a card whose fp8 rate was calibrated and whose precise rate
    was not: the calibrated rate times the card's published precise / fast ratio, capped at the calibrated rate.

    The ratio is the default rates' own: the MAMF table's FP8 row (``torch._scaled_mm`` without fast accumulation,
    ``_FP8_PRECISE_ACCUMULATION_FRACTION``) over the default fp8 rate (the datasheet fp8 peak at the bf16 MAMF
    fraction, ``_MAMF_FRACTION``), both from stas00/ml-engineering ``compute/accelerator/README.md``
    @744d01e18b79512572f64a6bbd8b5f4a725203a7: H100 SXM 1,402.6 / (1,979 x 80.3 % = 1,589.1) TFLOP/s = 0.883 (the H800
    the same), H200 1,453.4 / 1,589.1 = 0.914, GH200 1,535.0 / (1,979 x 83.8 % = 1,658.4) = 0.926.
    Without it a calibrated fp8 rate of 500 TFLOP/s on an H100 SXM left the backward's fp8 GEMMs at the default
    1,403 TFLOP/s, 2.8 x the calibrated forward."""
    ratio = default_fp8_precise_matmul_flops_per_s / default_fp8_matmul_flops_per_s
    return fp8_matmul_flops_per_s * min(ratio, 1.0)


FP4_MATMUL_ASSUMPTION = (
    "fp4 GEMM rate ASSUMED, not fitted: the catalog's dense FP4 peak at the card's fp8 matmul fraction"
    " (compute.rates fp4_matmul_flops_per_s; no fp4 GEMM sweep of the card is read). One published B200 NVFP4 GEMM"
    " check: torchao's benchmarks/float8/bench_matmul.py --recipe nvfp4 on an NVIDIA B200 reads 5.37 PFLOPS at"
    " 8192x8192x8192 (https://github.com/pytorch/ao/pull/2427, 2025-06-23, read 2026-12-03), 0.79 of the 6.8 PFLOPS"
    " this rate gives the B200 there: fp4 GEMM time may be planned up to about a fifth short")
"""The plan's assumption line for a ``precision.compute: fp4`` card (``plan.assumptions``): the fp4 matmul rate is
not fitted, and the one published B200 NVFP4 GEMM measurement read runs below it (not taken as a fit: one shape, one
card, an early torchao/cuBLAS pairing)."""

_OPTIONAL_RATES = ("fp32_matmul_flops_per_s", "fp8_matmul_flops_per_s", "fp4_matmul_flops_per_s", "l2_read_bytes_per_s",
                   "l2_resident_bytes", "vllm_eager_s_per_kernel", "sglang_eager_s_per_kernel",
                   "fp8_precise_matmul_flops_per_s")
"""Calibrated rates that may be null (not measured; ``l2_resident_bytes`` null is its 0: no L2 residency); any other
value a positive number."""


def _fp8_precise_fraction(gpu: GpuSpec, fp8_fraction: float) -> float | None:
    """Full-precision-accumulation fp8 GEMM rate as a fraction of the datasheet fp8 peak: Hopper's (compute
    capability 9.x) measured row (``_FP8_PRECISE_ACCUMULATION_FRACTION``), else ``fp8_fraction`` (the card's fast
    fp8 fraction) x ``HOPPER_FP8_PRECISE_OVER_FAST``; None off Hopper (no reduced-precision fp8 accumulator)."""
    if gpu.id in _FP8_PRECISE_ACCUMULATION_FRACTION:
        return _FP8_PRECISE_ACCUMULATION_FRACTION[gpu.id]
    if (gpu.compute_capability or "").partition(".")[0] == "9":
        return fp8_fraction * HOPPER_FP8_PRECISE_OVER_FAST
    return None


def default_rates(gpu: GpuSpec, *, node_gpus: int = 1) -> DeviceRates:
    """Published-measurement defaults for a catalog card (module docstring), for a job with ``node_gpus`` GPUs in a
    node (the node link's bus bandwidth depends on it on bridged PCIe cards: ``link_rates``)."""
    half = gpu.half_dense_flops_per_s
    if not half or not gpu.hbm_bytes_per_s:
        raise CardError(f"gpu '{gpu.id}': the catalog has no bf16/fp16 peak or memory bandwidth; time cannot be estimated")
    other = _OTHER_MATMUL_FRACTION.get(gpu.id)
    frac = other[0] if other else _MAMF_FRACTION.get(gpu.id, DEFAULT_MAMF_FRACTION)
    peak = "bf16" if gpu.bf16_dense_flops_per_s else "fp16 (no bf16 tensor cores)"
    src = [f"matmul {frac:.1%} of the datasheet {peak} peak ("
           + (other[1] if other else _MAMF_SOURCE if gpu.id in _MAMF_FRACTION else "default, the H100 MAMF ratio") + ")"]
    fp8 = _FP8_MATMUL_FRACTION.get(gpu.id)
    fp8_frac = fp8[0] if fp8 else frac
    if fp8 and gpu.fp8_dense_flops_per_s:
        src.append(f"fp8 matmul {fp8_frac:.1%} of the datasheet fp8 peak ({fp8[1]})")
    precise = _fp8_precise_fraction(gpu, fp8_frac) if gpu.fp8_dense_flops_per_s else None
    if precise and gpu.id in _FP8_PRECISE_ACCUMULATION_FRACTION:
        src.append(f"fp8 backward GEMMs (full-precision accumulation) {precise:.1%} of the datasheet fp8 peak"
                   " (stas00/ml-engineering compute/accelerator/README.md, MAMF table FP8 half"
                   + (", measured on the 900 W 141 GB HBM3e GH200" if gpu.id == "gh200" else "") + ")")
    elif precise:
        src.append(f"fp8 backward GEMMs (full-precision accumulation) {precise:.1%} of the datasheet fp8 peak: Hopper"
                   f" (compute capability {gpu.compute_capability}), the fp8 rate x the H100 SXM's measured precise/fast"
                   f" ratio {HOPPER_FP8_PRECISE_OVER_FAST:.3f} (stas00/ml-engineering compute/accelerator/README.md,"
                   " MAMF table)")
    fp32 = _FP32_MATMUL_FRACTION.get(gpu.id)
    if fp32 and gpu.fp32_flops_per_s:
        src.append(f"fp32 matmul {fp32[0]:.1%} of the datasheet FP32 rate ({fp32[1]})")
    hbm = _HBM_FRACTION.get(gpu.id)
    hbm_frac = hbm[0] if hbm else HBM_FRACTION
    if hbm:
        src.append(f"HBM {hbm_frac:.1%} of the datasheet bandwidth ({hbm[1]})")
    if gpu.id in _FABRIC_NOTES:
        src.append(_FABRIC_NOTES[gpu.id])
    bus, p2p, nvlink = link_rates(gpu, link=catalog_link(gpu), node_gpus=node_gpus)
    if (note := bridge_note(gpu, node_gpus=node_gpus)) is not None:
        src.append(note)
    return DeviceRates(
        gpu_id=gpu.id,
        matmul_flops_per_s=half * frac,
        hbm_bytes_per_s=gpu.hbm_bytes_per_s * hbm_frac,
        sm_count=gpu.sm_count or DEFAULT_SM_COUNT,
        intra_node_bus_bytes_per_s=bus,
        p2p=p2p,
        nvlink=nvlink,
        **_bridge_fields(gpu, link=catalog_link(gpu), node_gpus=node_gpus),
        pcie_bytes_per_s=(gpu.host_link_bytes_per_s or gpu.pcie_bytes_per_s or 32e9) * PCIE_EFFICIENCY,
        compute_capability=gpu.compute_capability,
        fp32_matmul_flops_per_s=(gpu.fp32_flops_per_s * fp32[0] if fp32 and gpu.fp32_flops_per_s
                                 else gpu.fp32_flops_per_s),
        fp8_matmul_flops_per_s=gpu.fp8_dense_flops_per_s * fp8_frac if gpu.fp8_dense_flops_per_s else None,
        fp4_matmul_flops_per_s=gpu.fp4_dense_flops_per_s * fp8_frac if gpu.fp4_dense_flops_per_s else None,
        fp8_precise_matmul_flops_per_s=gpu.fp8_dense_flops_per_s * precise if precise else None,
        l2_read_bytes_per_s=gpu.l2_read_bytes_per_s if gpu.l2_resident_bytes else None,
        l2_resident_bytes=float(gpu.l2_resident_bytes or 0),
        sources=tuple(src),
    )


def catalog_link(gpu: GpuSpec) -> Interconnect:
    """The GPU catalog's link between a node's GPUs of this kind: NVLink where the catalog gives an NVLink rate
    (bridged PCIe cards included: the RTX 3090's pairs on their bridge), else PCIe, without peer-to-peer on the
    GeForce cards whose driver refuses it (``_geforce_without_p2p``). Raises ``CardError`` for a card with neither rate."""
    if gpu.nvlink and gpu.nvlink_bytes_per_s:
        return Interconnect.NVLINK
    if gpu.pcie_bytes_per_s:
        return Interconnect.PCIE_NO_P2P if _geforce_without_p2p(gpu) else Interconnect.PCIE
    raise CardError(f"gpu '{gpu.id}': the catalog has no NVLink or PCIe bandwidth; time cannot be estimated")


def allowed_links(gpu: GpuSpec) -> tuple[Interconnect, ...]:
    """The links ``hardware.interconnect`` may state for this kind: NVLink where the catalog gives an NVLink rate,
    PCIe (with or without peer-to-peer) where it gives a PCIe rate (a Grace superchip's GPUs have no PCIe slot
    between them: NVLink-C2C to the host, NVLink to each other)."""
    out = [Interconnect.NVLINK] if gpu.nvlink and gpu.nvlink_bytes_per_s else []
    if gpu.pcie_bytes_per_s:
        out += [Interconnect.PCIE, Interconnect.PCIE_NO_P2P]
    return tuple(out)


def link_refusal(gpu: GpuSpec, *, link: Interconnect) -> str | None:
    """The one-line refusal of ``hardware.interconnect: link`` on this kind (a link ``allowed_links`` does not
    list: the catalog gives no rate for it), naming the GPU and the links allowed on it; None when allowed."""
    allowed = allowed_links(gpu)
    if link in allowed:
        return None
    return (f"hardware.interconnect: '{link.value}' on {gpu.id}, whose catalog entry has no"
            f" {'NVLink' if link is Interconnect.NVLINK else 'PCIe'} rate; allowed on {gpu.id}:"
            f" {', '.join(x.value for x in allowed)} or null (the GPU catalog's link)")


def link_rates(gpu: GpuSpec, *, link: Interconnect, node_gpus: int = 1) -> tuple[float, bool, bool]:
    """(NCCL bus bytes per second of a ring over the job's ``node_gpus`` GPUs in a node, peer-to-peer, every pair of
    the node's GPUs on NVLink) over ``link``: NVLink at ``NVLINK_BUS_FRACTION`` of one direction of the catalog's
    NVLink rate (``nvlink`` False on the cards whose bridges join groups of 2 or 4 only, ``BRIDGE_GROUP_GPUS``); on
    those cards, when ``node_gpus`` exceeds one bridge group, the ring crosses PCIe between the groups and runs at
    that hop's rate (``bridged_ring_bus_bytes_per_s``, ``BRIDGED_RING_SOURCE``), peer-to-peer where the stock driver
    allows it; PCIe at ``PCIE_P2P_BUS_FRACTION`` of the slot's rate with peer-to-peer, ``PCIE_NO_P2P_BUS_FRACTION``
    without (NCCL's SHM transport). ``default_rates`` takes the catalog's link (``catalog_link``); a card's
    ``hardware.interconnect`` another (``plan.time.rates_of``), with the same fractions, so a card stating its
    catalog's own link plans the same. A link the catalog gives no rate for is refused (``allowed_links``)."""
    if (refused := link_refusal(gpu, link=link)) is not None:
        raise CardError(refused)
    if link is Interconnect.NVLINK:
        group = BRIDGE_GROUP_GPUS.get(gpu.id)
        if group is not None and node_gpus > group:
            return bridged_ring_bus_bytes_per_s(gpu), not stock_driver_refuses_pcie_p2p(gpu), False
        return nvlink_bus_bytes_per_s(gpu), True, group is None
    p2p = link is Interconnect.PCIE
    return gpu.pcie_bytes_per_s * (PCIE_P2P_BUS_FRACTION if p2p else PCIE_NO_P2P_BUS_FRACTION), p2p, False


def nvlink_bus_bytes_per_s(gpu: GpuSpec) -> float:
    """NCCL ring bus bandwidth on the card's NVLink (or bridge): ``NVLINK_BUS_FRACTION`` of one direction."""
    return gpu.nvlink_bytes_per_s / 2 * NVLINK_BUS_FRACTION


def bridged_ring_bus_bytes_per_s(gpu: GpuSpec) -> float:
    """NCCL ring bus bandwidth over more GPUs than one NVLink bridge group (``BRIDGED_RING_SOURCE``): the PCIe hop
    between groups, at ``PCIE_NO_P2P_BUS_FRACTION`` of the slot rate where the stock driver refuses PCIe peer-to-peer
    (``stock_driver_refuses_pcie_p2p``: the RTX 3090), else ``PCIE_P2P_BUS_FRACTION``."""
    refused = stock_driver_refuses_pcie_p2p(gpu)
    return gpu.pcie_bytes_per_s * (PCIE_NO_P2P_BUS_FRACTION if refused else PCIE_P2P_BUS_FRACTION)


def _bridge_fields(gpu: GpuSpec, *, link: Interconnect, node_gpus: int) -> dict[str, Any]:
    """``DeviceRates``' bridge-group fields: the group and its bridge's bus rate where the node's ring runs at the PCIe
    hop's (``link_rates``), else the defaults (no split)."""
    group = BRIDGE_GROUP_GPUS.get(gpu.id)
    if link is not Interconnect.NVLINK or group is None or node_gpus <= group:
        return {"bridge_group_gpus": 0, "bridge_bus_bytes_per_s": None}
    return {"bridge_group_gpus": group, "bridge_bus_bytes_per_s": nvlink_bus_bytes_per_s(gpu)}


def group_rates(rates: DeviceRates, *, ranks: int) -> DeviceRates:
    """``rates`` for a collective over ``ranks`` consecutive GPUs of a node (a tensor-parallel group): on bridged PCIe
    cards whose node ring crosses PCIe (``bridge_group_gpus``), a group that fits one bridge group runs on the bridge,
    at ``bridge_bus_bytes_per_s`` with peer-to-peer. Assumed: the layout places it on one bridge group (frameworks
    give a tensor-parallel group consecutive ranks, and consecutive CUDA devices are taken to share a bridge, as the
    ``nvidia-smi topo`` of NVIDIA/nccl-tests issue #178 pairs GPU0-1, 2-3, 4-5, 6-7). Else ``rates`` unchanged."""
    if rates.bridge_bus_bytes_per_s is None or ranks > rates.bridge_group_gpus:
        return rates
    return replace(rates, intra_node_bus_bytes_per_s=rates.bridge_bus_bytes_per_s, p2p=True,
                   bridge_group_gpus=0, bridge_bus_bytes_per_s=None)


def stated_link_rates(rates: DeviceRates, gpu: GpuSpec, *, link: Interconnect, node_gpus: int = 1,
                      calibrated_bus: bool = False) -> DeviceRates:
    """``rates`` over a node link (``hardware.interconnect``, or the catalog's) for a job with ``node_gpus`` GPUs in a
    node: the bus bandwidth, peer-to-peer and NVLink flags of ``link_rates`` and the bridge-group fields
    (``group_rates``). ``calibrated_bus``: a calibration file measured ``intra_node_bus_bytes_per_s`` for this kind;
    the measurement stays, for every collective of the node, and only the flags (NCCL's transport and hop latencies,
    vLLM's custom all-reduce) follow the link. A link other than the catalog's drops the catalog fabric's caveat
    (``_FABRIC_NOTES``: Infinity Fabric) from ``rates.sources``: it describes a fabric the stated link does not use;
    a bridged card's caveat (``bridge_note``) is restated for ``node_gpus`` on its bridge, dropped on another link."""
    stale = {bridge_note(gpu, node_gpus=n) for n in (1, node_gpus)}
    if link is not catalog_link(gpu):
        stale.add(_FABRIC_NOTES.get(gpu.id))
    # a measured rate stands for every collective of the node: no bridge-group split (the flags of a one-group node)
    split_gpus = 1 if calibrated_bus else node_gpus
    bus, p2p, nvlink = link_rates(gpu, link=link, node_gpus=split_gpus)
    if calibrated_bus:
        bus = rates.intra_node_bus_bytes_per_s
    note = bridge_note(gpu, node_gpus=node_gpus, link=link,
                       measured_bus_bytes_per_s=bus if calibrated_bus else None)
    sources = tuple(x for x in (note if s in stale else s for s in rates.sources) if x is not None)
    if note is not None and note not in sources:
        sources = sources + (note,)
    return replace(rates, intra_node_bus_bytes_per_s=bus, p2p=p2p, nvlink=nvlink, sources=sources,
                   **_bridge_fields(gpu, link=link, node_gpus=split_gpus))


POWER_CLOCK_EXPONENT = 1.0 / 3.0
"""Sustained clock ∝ power^(1/3) (module docstring: dynamic power ∝ V²·f with V ∝ f)."""


def power_limited_rates(rates: DeviceRates, *, power_limit_w: float, rated_power_w: float,
                        hbm_bytes_per_s: float | None = None) -> DeviceRates:
    """``rates`` of a card held at ``power_limit_w`` of its ``rated_power_w`` (the catalog's ``tdp_w``): the
    bf16 and fp8 matmul rates (and the attention kernels, which divide by the matmul rate) scale by
    ``(limit / rated)^(1/3)``; a limit at or above the rating changes nothing. ``hbm_bytes_per_s``: the
    datasheet bandwidth of a memory variant (e.g. HBM2e instead of HBM3), at the same sustained fraction."""
    if power_limit_w <= 0 or rated_power_w <= 0:
        raise CardError(f"power limit: both the limit and the rated power must be > 0 W, got {power_limit_w} / {rated_power_w}")
    f = min(1.0, power_limit_w / rated_power_w) ** POWER_CLOCK_EXPONENT
    data: dict[str, Any] = {"matmul_flops_per_s": rates.matmul_flops_per_s * f}
    if rates.fp8_matmul_flops_per_s:
        data["fp8_matmul_flops_per_s"] = rates.fp8_matmul_flops_per_s * f
    if rates.fp4_matmul_flops_per_s:
        data["fp4_matmul_flops_per_s"] = rates.fp4_matmul_flops_per_s * f
    if rates.fp8_precise_matmul_flops_per_s:
        data["fp8_precise_matmul_flops_per_s"] = rates.fp8_precise_matmul_flops_per_s * f
    if hbm_bytes_per_s:
        # the card's own sustained fraction (``_HBM_FRACTION``; else the 90 % assumed)
        data["hbm_bytes_per_s"] = hbm_bytes_per_s * _HBM_FRACTION.get(rates.gpu_id, (HBM_FRACTION,))[0]
    note = f"power limit {power_limit_w:g} W of {rated_power_w:g} W: matmul x{f:.3f} (clock ~ power^(1/3))"
    if hbm_bytes_per_s:
        note += f", HBM {hbm_bytes_per_s / 1e12:.2f} TB/s datasheet"
    return replace(rates, **data, sources=rates.sources + (note,))


def _geforce_without_p2p(gpu: GpuSpec) -> bool:
    """GeForce Ada/Blackwell cards have no peer-to-peer over PCIe (the stock driver refuses it) and no NVLink, so their
    catalog link is pcie_no_p2p; NCCL goes through host shared memory. The RTX 3090 is not listed because its catalog
    link is its NVLink bridge (``_BRIDGED_PAIRS``), not because it has PCIe peer-to-peer: on the stock driver it has
    none either (``stock_driver_refuses_pcie_p2p``)."""
    return gpu.id in ("rtx4090", "rtx4090d", "rtx4090-48gb", "rtx5090")


def stock_driver_refuses_pcie_p2p(gpu: GpuSpec) -> bool:
    """Whether NVIDIA's stock driver refuses peer-to-peer over PCIe between two cards of this kind: the GeForce cards.
    RTX 3090: an 8 x RTX 3090 PCIe 3.0 server on the stock driver reports "Device=0 CANNOT Access Peer Device=1" for
    every pair in p2pBandwidthLatencyTest (https://github.com/NVIDIA/nccl/issues/1127, 2023-12-26), while two RTX 3090
    read "CAN Access Peer" only under the patched open kernel modules that map peers through BAR1
    (https://github.com/aikitoria/open-gpu-kernel-modules/issues/3, 2025-09-01; the same patch enables the RTX 4090s,
    https://github.com/tinygrad/open-gpu-kernel-modules). Peer-to-peer between a bridged pair runs over the NVLink
    bridge, not PCIe. A card stating pcie on such a kind is planned as stated, and the plan's link line says it
    assumes a patched driver (``plan.time.link_note``)."""
    return gpu.id == "rtx3090" or _geforce_without_p2p(gpu)
