"""Offload: PCIe transfers and the CPU optimizer step (ZeRO-Offload / FSDP CPU offload).

Optimizer offload (Ren et al. 2021, "ZeRO-Offload", §4): gradients go down to host memory during
backward (overlapped with it as far as it lasts), the CPU runs Adam on the fp32 master
states, and the updated 16-bit parameters go back up before the next forward (exposed).

CPU Adam is bound by host memory bandwidth: it streams the fp32 parameter, gradient and two
moments in and the parameter, moments and a 16-bit copy out (``CPU_ADAM_BYTES_PER_PARAM``,
``rates.py``). Every rank of a node shares the node's host bandwidth, and a rank streams at most the NUMA node
its pinned buffers lie on (``rank_host_memory_bytes_per_s``, below).

Parameter offload also streams each rank's weight shard up for the forward, the backward and the
recompute; prefetch hides it behind the compute of the pass.

DeepSpeed ZeRO-1/2 with ``offload_optimizer`` (``deepspeed_zero12_offload_seconds``) does more than that, read in
deepspeedai/DeepSpeed ``deepspeed/runtime/zero/stage_1_and_2.py`` @1d7b90adc48d57c2283e8825f5c668a3730ff899
(``contiguous_gradients`` is forced on with CPU offload, l.236, so stage 1 and 2 share the path):

* At the accumulation boundary ``reduce_ipg_grads`` loops over the rank's partition one parameter tensor at a time
  (l.1489-1510 -> ``copy_grads_in_partition`` l.1415-1425): a norm in fp64 (``set_norm_for_param_grad_in_gpu``,
  l.1352), an inf/nan check whose Python truth test (``update_offload_overflow_tracker`` l.1261-1263 on
  ``_has_inf_or_nan`` l.2154-2159) waits for the GPU, and the gradient cast to fp32 and copied into the pinned host
  partition (``async_inplace_copy_grad_to_fp32_buffer_from_gpu`` l.1354-1369: 4 bytes per parameter over PCIe).
  Without ``overlap_comm`` (its default below stage 3) the copies run on the compute stream (l.1475-1483, "TODO:
  copy_grad_stream is disabled because of race with reduce. This hurts perf"); with it they run on the reduction
  stream, but that stream waits for the compute stream (``average_tensor`` l.1135) and each parameter's truth test waits for
  the copies before it, so the host launches nothing more of the backward until the loop ends: the copies are
  exposed either way.
* The step reads each parameter's norm back with one ``.item()`` per tensor
  (``complete_grad_norm_calculation_for_cpu_offload`` l.1386): a second round trip per tensor.
* Host passes besides CPU Adam (l.1995-2013): ``unscale_and_clip_grads`` multiplies the whole fp32 gradient
  partition on the CPU every step (l.2099-2114: read and write, 8 bytes per parameter), and the fp32 partition is
  converted to the 16-bit buffer on the CPU (l.2011-2012: its fp32 read, 4 bytes; the 2-byte write is the 16-bit
  copy already in ``CPU_ADAM_BYTES_PER_PARAM``) before the 16-bit copy goes up (l.2013). ``DeepSpeedCPUAdam.step``
  at that commit (``deepspeed/ops/adam/cpu_adam.py`` l.110-) takes no 16-bit output buffer.

Where a rank's host buffers lie (``rank_host_memory_bytes_per_s``). The fp32 parameter, gradient and 16-bit
partitions are pinned (``get_accelerator().pin_memory``, ``stage_1_and_2.py`` l.441-451, l.754 @1d7b90ad), allocated
by the rank's main thread; ``cudaMallocHost`` has no NUMA awareness and the pages land on the node of the thread
that first touches them (ai-dynamo/dynamo PR #3700, 2025-10-17; pytorch/pytorch PR #197868 reads the placement from
``/proc/self/numa_maps``). ``--bind_cores_to_rank`` adds ``numactl -m`` only when the rank's cores lie in one NUMA
node (``deepspeed/utils/numa.py`` ``get_numactl_cmd`` @1d7b90ad: ``if set(core_list_for_rank) <=
set(numa_cores[i])``, else only ``-C``), so on a host with more NUMA nodes than ranks each rank's CPU optimizer (its
OpenMP threads over all of its cores) streams one node's memory: at most ``host_memory_bytes_per_s /
host_numa_nodes``, not the node's bandwidth divided among the ranks. The rates' ``host_numa_nodes`` is 1 unless the
card states the host's layout (``hardware.host_numa_nodes``), which keeps the shared-node model. Check, the
DeepSpeed ZenFlow core-binding blog (``blogs/zenflow-corebinding/README.md``
@2b68bbc59476f0a7d85ce9a6ae0a74a057a4b7d2: 2 A100-SXM4-40GB of a DGX A100, 2x EPYC 7742, 64 physical cores a rank
when bound, so four NUMA nodes a rank): its ZeRO-2 offload steps (Qwen2.5-3B 2.497 s bound / 2.887 s unbound, 1.5B
1.365 s bound), less what this model times on the GPU and over PCIe, leave 1.78 / 2.17 / 0.97 s for the host's 42
B/param (CPU Adam 30 + 12 above) over a rank's 1.54e9 / 0.77e9 parameters: 30-37 GB/s a rank, about one NUMA node of
that host (STREAM 37 GB/s with 8 threads on one node's cores, 148 GB/s with 32 over a socket's four:
gist.github.com/v0dro/0559e1d9b205ca9ac0ad1a29fe10377b, read 2026-12-02). A DGX A100 has eight NUMA nodes of 16
cores (``nvidia-smi topo -m``: GPU NUMA affinity 3, 1, 7, 5 over cores 48-63, 16-31, 112-127, 80-95;
gengwg/cheatsheets gpu.md@37dd04a5f11c10ce07931f102b92e66ebe9fceab); with the catalog's node bandwidth (200 GB/s,
half the DDR4-3200 peak) that is 25 GB/s a rank, below the 37 GB/s STREAM above, so those rows now plan 16-34 % slow
instead of 44-52 % fast. Not modelled: ranks whose buffers land on the same node (an unbound run's main threads may
share one), which would halve each one's share again.

ZeRO-3 offload is a different path (``stage3.py``: ``partition_grads`` copies on the reduce-and-partition stream,
the inf/nan flag accumulates on the device, l.2232-2243, read once per step) and keeps the general terms.

Pinned or pageable host memory (``host_copy_bytes_per_s`` / ``pageable_copy_bytes_per_s``). PyTorch's
``tensor.to("cpu", non_blocking=True)`` from a CUDA tensor allocates its output pinned (``_to_copy``: ``pin_out =
non_blocking && self.is_cuda() && options.device().is_cpu()``, pytorch/pytorch
aten/src/ATen/native/TensorConversions.cpp @00faeaed23ee6728a03d806ae7a3186e08b39cbc); ``.cpu()``,
``module.cpu()`` and ``.to("cpu")`` allocate it pageable, and the copy back reads from wherever it lies. So:

* pinned: DeepSpeed's offload buffers (``stage_1_and_2.py`` above); vLLM's sleep level 1 backup
  (``torch.empty(..., pin_memory=is_pin_memory_available())``, vllm-project/vllm vllm/device_allocator/cumem.py
  @9ac9658813add86b01198b8204d02e245daddb2a); NeMo RL's reference swap (``get_cpu_state_dict(..., pin_memory=True)``);
  verl's FSDP1 model offload (``handle.flat_param_to(cpu, non_blocking=True)``) and its FSDP optimizer offload
  (``value.to("cpu", non_blocking=True)``, verl-project/verl verl/utils/fsdp_utils.py lines 169-250
  @b9873ee98f5ee513a460a7a41623262ac4a831e9); verl's Megatron offload (one ``pin_memory=True`` buffer per DDP buffer,
  the optimizer states with ``non_blocking=True``, verl/utils/megatron_utils.py lines 525-590 and 745-776, same
  commit); Megatron-Core's DDP buffer ``offload_to_cpu`` (``.cpu().pin_memory()`` then ``copy_`` into it,
  NVIDIA/Megatron-LM megatron/core/distributed/param_and_grad_buffer.py @d98e8a64ddf34856e74b24714e3bedb2f5a39553),
  which NeMo RL's Megatron worker calls for the weights.
* pageable: verl's FSDP2 model offload (``offload_fsdp2_model_to_cpu``: ``model.cpu()``; back with
  ``model.to(device)`` or, for a weight sync's export, ``param.to(device, non_blocking=True)`` per parameter,
  fsdp_utils.py lines 196-226); NeMo RL's DTensor worker (``model.to("cpu")`` and ``v.to(device)`` for the optimizer
  states) and its Megatron worker's optimizer states (``v.to("cpu")`` / ``v.to("cuda")``) (NVIDIA-NeMo/RL
  nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py lines 1440-1500, megatron_policy_worker.py lines
  1500-1515 @9dbd9adc95a10f5946cceb36e1d5b31e2429e470).

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.compute.rates import CPU_ADAM_BYTES_PER_PARAM, DeviceRates


DS_GRAD_COPY_BYTES_PER_PARAM = 4.0
"""PCIe bytes per parameter of DeepSpeed ZeRO-1/2's gradient copy to the host: cast to fp32 on the GPU first
(``stage_1_and_2.py`` l.1365-1366 @1d7b90ad, ``src_tensor.float()`` unless fp16 master weights)."""
DS_HOST_EXTRA_BYTES_PER_PARAM = 12.0
"""Host-memory bytes per parameter of DeepSpeed ZeRO-1/2's step beyond CPU Adam's: the unscale/clip multiply of
the fp32 gradient partition (read + write, 8; ``unscale_and_clip_grads`` l.2099-2114 @1d7b90ad, applied every step)
and the fp32 read of the partition's conversion to 16 bits (4; l.2011-2012): deepspeedai/DeepSpeed
``deepspeed/runtime/zero/stage_1_and_2.py`` @1d7b90adc48d57c2283e8825f5c668a3730ff899."""
DS_BOUNDARY_HBM_BYTES_PER_PARAM = 52.0
"""GPU-memory bytes per bf16 parameter of the per-tensor work at the boundary (``stage_1_and_2.py`` @1d7b90ad):
the fp64 norm (``.double()`` 2 read + 8 written, ``norm`` 8 read: 18), ``_has_inf_or_nan`` (``.float()`` 2 + 4,
``isnan`` 4 + 1, ``isinf`` 4 + 1, ``logical_or`` 2 + 1, ``.float()`` 1 + 4, ``max`` 4: 28) and the copy's
``.float()`` (2 + 4: 6)."""
DS_BOUNDARY_KERNELS_PER_TENSOR = 8
"""Kernels per parameter tensor at the boundary: ``double``, ``norm``; ``float``, ``isnan``, ``isinf``,
``logical_or``, ``float``, ``max``; the copy's ``float`` (its device-to-host copy is timed as bytes)."""
DS_SYNCS_PER_TENSOR = 2
"""Host round trips per parameter tensor of the partition: the inf/nan truth test at the boundary (l.1262) and
the norm's ``.item()`` in the step (l.1386): deepspeedai/DeepSpeed ``deepspeed/runtime/zero/stage_1_and_2.py``
@1d7b90adc48d57c2283e8825f5c668a3730ff899."""


@dataclass(frozen=True, slots=True)
class OffloadTime:
    cpu_step_s: float
    transfer_s: float
    exposed_s: float


PAGEABLE_STAGING_BYTES_PER_S = 10.0e9
"""One process's copy between pageable host memory and its GPU. The DMA engine reads and writes page-locked memory
only, so for a pageable buffer the CUDA driver copies the data through a pinned staging buffer of its own with the
CPU ("the CUDA driver must first allocate a temporary page-locked, or 'pinned', host array, copy the host data to
the pinned array, and then transfer the data from the pinned array to device memory", M. Harris, "How to Optimize
Data Transfers in CUDA C/C++", NVIDIA developer blog, https://developer.nvidia.com/blog/how-optimize-data-transfers-cuda-cc/,
read 2026-12-02); the copy is synchronous and the CPU copy bounds it. Measured with NVIDIA's cuda-samples
``bandwidthTest`` (32 MB, one GPU) on a DGX A100 (A100-SXM4-80GB): pageable 10.0 GB/s host to device and 10.8 GB/s
device to host against 25.7 / 25.8 GB/s pinned on the same machine (gengwg/gpu ``nvda_gpu_benchmark.md``
@f1ce2499ef5f317f60068cbee22ed8f12e9b65a5); the host-to-device figure is taken. A PCIe A100 server in the same
file measured 3.3 / 8.5 GB/s pageable (17.3 / 24.6 pinned): the rate is the host CPU's, so a slower host is slower.

A copy *into* freshly allocated pageable memory (``tensor.cpu()`` / ``.to("cpu")`` without ``non_blocking``) also
takes the first-touch page faults of the new pages: ``PAGEABLE_FIRST_TOUCH_BYTES_PER_S``."""

PAGEABLE_FIRST_TOUCH_BYTES_PER_S = 1.4e9
"""One process's device-to-host copy into *freshly allocated* pageable memory: the staging copy above plus the
kernel's first-touch fault and zeroing of every new 4 KiB page. PyTorch measured about 1.4 GB/s for ``Memcpy DtoH
(Device -> Pageable)`` against about 12.6 GB/s into pinned memory on an A100, ``torch.save`` of a llama-style
state dict, whose ``storage.cpu()`` allocates each tensor's host copy anew (pytorch/pytorch PR #138018,
https://github.com/pytorch/pytorch/pull/138018, 2024-10-15, read 2026-12-02). The per-step offloads that copy this
way allocate a new host tensor each step and free it when the state comes back (``state[k] = v.to("cpu")`` then
``state[k] = v.to("cuda")``): glibc serves an allocation above its mmap threshold (at most 32 MiB,
``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit) with a new ``mmap`` and returns it with ``munmap``, and trims a freed
heap top larger than its trim threshold (twice the mmap threshold) back to the kernel, so every step faults the
pages in again. The rate is per process (each rank faults its own pages on its own thread); behind PCIe only:
a coherent NVLink-C2C host link has no measurement here and keeps its pinned rate. The copy back reads pages
already present (``pageable_copy_bytes_per_s``)."""


def host_copy_bytes_per_s(*, pcie_bytes_per_s: float, host_memory_bytes_per_s: float, gpus_per_node: int) -> float:
    """One GPU's host <-> device copy rate from or to *pinned* host memory while every GPU of its node copies at
    once: its own link (``pcie_bytes_per_s``: PCIe or the host link) or its share of the host's memory bandwidth,
    whichever is lower."""
    return min(pcie_bytes_per_s, host_memory_bytes_per_s / gpus_per_node)


def pageable_copy_bytes_per_s(*, pcie_bytes_per_s: float, host_memory_bytes_per_s: float, gpus_per_node: int,
                              staging_bytes_per_s: float | None = PAGEABLE_STAGING_BYTES_PER_S) -> float:
    """One GPU's host <-> device copy rate from or to *pageable* host memory while every GPU of its node copies at
    once: the pinned rate (``host_copy_bytes_per_s``, the link and the node's host-memory share) or the driver's
    staging copy through its pinned buffer (``PAGEABLE_STAGING_BYTES_PER_S``), whichever is lower. Each process's
    staging copy runs on its own CPU thread, so the staging rate is per GPU; what the GPUs of a node share is the
    host-memory bandwidth, as for pinned copies.

    ``staging_bytes_per_s=None``: no staging, the pinned rate. A GPU on a cache-coherent NVLink-C2C host link
    (GH200, GB200) reads pageable memory directly: ``cuMemcpyHtoD`` of 1 GiB ran at 93.0 GiB/s from pageable and
    97.4 GiB/s from pinned memory on a GH200 (vortex-data/vortex PR #7815, 2026-05-06)."""
    pinned = host_copy_bytes_per_s(pcie_bytes_per_s=pcie_bytes_per_s, host_memory_bytes_per_s=host_memory_bytes_per_s,
                                   gpus_per_node=gpus_per_node)
    if staging_bytes_per_s is None:
        return pinned
    if staging_bytes_per_s <= 0:
        raise ValueError("staging_bytes_per_s must be > 0 (None: no staging)")
    return min(pinned, staging_bytes_per_s)


def first_touch_copy_bytes_per_s(*, pageable_bytes_per_s: float, coherent_host_link: bool) -> float:
    """One GPU's copy to the host into pageable memory allocated for it (``PAGEABLE_FIRST_TOUCH_BYTES_PER_S``):
    the pageable rate ``pageable_bytes_per_s`` capped by the first-touch rate behind PCIe; on a coherent host link,
    ``pageable_bytes_per_s`` unchanged.

    Known gap, coherent host links (GB200): the coherent branch is probably a lower bound on the time. The kernel
    maps and zero-fills each fresh anonymous page on its first write, so a copy engine writing through NVLink-C2C
    would still leave that part to the host, as the staging memcpy does behind PCIe (the driver's path there is not
    read). NeMo RL's ten GB200
    colocated steps (v0.5 / v0.6 performance summary; ``move_optimizer`` runs ``v.to("cpu")`` each refit) all plan
    short, -6 to -50 %; capping their fresh-page copies at ``PAGEABLE_FIRST_TOUCH_BYTES_PER_S`` moves all ten closer
    (DeepSeek-V3 128 GPUs v0.6 -44 % -> -7 %, Qwen3-235B 64 GPUs v0.6 -6 % -> +3 %, Llama-3.1-8B -19 % -> -11 %) and no
    other scored row. Not applied: no measurement on a Grace host (a 64 KiB-page kernel takes a sixteenth of the
    faults), and the fault-and-zero part alone timed on an x86 guest (``benchmarks/host_first_touch.py``
    ``fault-only``) ranged from 3 to over 30 GB/s between runs."""
    if coherent_host_link:
        return pageable_bytes_per_s
    return min(pageable_bytes_per_s, PAGEABLE_FIRST_TOUCH_BYTES_PER_S)


def staging_bytes_per_s_of(*, coherent_host_link: bool) -> float | None:
    """The pageable staging rate of a GPU: none on a coherent NVLink-C2C host link (``GpuSpec.host_link_bytes_per_s``
    set), ``PAGEABLE_STAGING_BYTES_PER_S`` behind PCIe."""
    return None if coherent_host_link else PAGEABLE_STAGING_BYTES_PER_S


def rank_host_memory_bytes_per_s(*, host_memory_bytes_per_s: float, ranks_per_node: int,
                                 host_numa_nodes: float = 1) -> float:
    """Host-memory bandwidth one rank's CPU optimizer streams at while every rank of the node steps at once: its share
    of the node's ``host_memory_bytes_per_s``, and at most one NUMA node's share, where its pinned buffers lie (module
    docstring): ``host_memory_bytes_per_s / max(ranks_per_node, host_numa_nodes)``."""
    if host_memory_bytes_per_s <= 0 or ranks_per_node < 1 or host_numa_nodes < 1:
        raise ValueError("rank_host_memory_bytes_per_s: host_memory_bytes_per_s > 0, ranks_per_node >= 1, "
                         "host_numa_nodes >= 1")
    return host_memory_bytes_per_s / max(ranks_per_node, host_numa_nodes)


def cpu_adam_seconds(*, params_per_rank: float, ranks_per_node: int, rates: DeviceRates,
                     host_extra_bytes_per_param: float = 0.0) -> float:
    """Host seconds of one Adam step over each rank's ``params_per_rank`` (all ranks of a node at once, each at
    ``rank_host_memory_bytes_per_s``): ``CPU_ADAM_BYTES_PER_PARAM`` streamed per parameter, plus
    ``host_extra_bytes_per_param`` for the host passes a framework runs beside the step (DeepSpeed's clip and
    conversion, ``DS_HOST_EXTRA_BYTES_PER_PARAM``)."""
    per_rank = rank_host_memory_bytes_per_s(host_memory_bytes_per_s=rates.host_memory_bytes_per_s,
                                            ranks_per_node=ranks_per_node, host_numa_nodes=rates.host_numa_nodes)
    return params_per_rank * (CPU_ADAM_BYTES_PER_PARAM + host_extra_bytes_per_param) / per_rank


TORCH_CPU_ADAMW_S_PER_PARAM = {2.0: 3.2e-9, 4.0: 5.4e-9}
"""Seconds per parameter of one thread's ``torch.optim.AdamW.step()`` over host tensors on the single-tensor path
(``_single_tensor_adam``: eight ops a tensor, each its own pass), by element bytes (bf16, fp32: the parameter's, its
gradient's and its ``zeros_like`` moments'), torch 2.13.0+cpu, Python 3.11.7, ``torch.set_num_threads(1)``, on this
project's shared 2-vCPU AMD EPYC VM, 2026-12-04, one rank's shards of four Qwen3-235B-A22B decoder layers over 64
FSDP ranks (155.5 M parameters, 36 tensors), best of 5 rounds, five runs (benchmarks/torch_cpu_adamw.py): bf16
2.67-3.34 ns, median 3.2; fp32 5.24-7.57 ns, median 5.4 (12-15 GB/s at 20 element reads and writes a parameter).
The medians as measured; this VM's CPU, not the run's host (a dedicated server core streams at least as fast).
The fused CPU kernel (``fused=True``) ran at 0.6-1.3 ns a parameter on the same machine, within the DeepSpeed CPU
Adam share ``cpu_adam_seconds`` prices, so it keeps that price."""
TORCH_CPU_ADAMW_ELEMENT_PASSES = 20
"""Element reads and writes per parameter of ``_single_tensor_adam`` (torch 2.13.0 ``torch/optim/adam.py``):
decoupled weight decay ``mul_`` 2, ``lerp_`` 3, ``mul_`` 2, ``addcmul_`` 3, ``sqrt`` 2, the division 2, ``add_`` 2,
``addcdiv_`` 4."""


def torch_cpu_adamw_s_per_param(element_bytes: float) -> float:
    """One thread's seconds per parameter of torch's single-tensor AdamW step (``TORCH_CPU_ADAMW_S_PER_PARAM``) for
    ``element_bytes`` elements: the bf16 figure for 2 B and below, the fp32 one otherwise."""
    return TORCH_CPU_ADAMW_S_PER_PARAM[2.0 if element_bytes <= 2.0 else 4.0]


def torch_cpu_adamw_seconds(*, params_per_rank: float, element_bytes: float, ranks_per_node: int,
                            rates: DeviceRates, one_thread: bool) -> float:
    """Host seconds of one ``torch.optim.AdamW`` step on the single-tensor path over each rank's ``params_per_rank``
    host-resident parameters (torch FSDP's CPU offload: FSDP1 ``CPUOffload(offload_params=True)``, FSDP2
    ``CPUOffloadPolicy`` keep the sharded parameters, gradients and states on the host, so the optimizer the
    training loop built steps there). torch takes that path for host tensors unless ``fused=True`` is passed:
    ``_default_to_fused_or_foreach`` picks foreach only for plain tensors on foreach devices (cuda, xpu, mtia), and
    FSDP2's DTensors are not plain tensors (torch 2.13.0 ``torch/optim/optimizer.py`` l.161-186,
    ``torch/utils/_foreach_utils.py`` ``_foreach_supported_types = [torch.Tensor]``); ``foreach=True`` on host tensors
    runs the same per-tensor ops behind the list API.

    ``element_bytes``: the bytes of the elements the step streams, the parameter's, its gradient's and its moments'
    (4 where an fp32 master copy is stepped). ``one_thread``: each rank's step runs on one thread, as the launcher
    sets ``OMP_NUM_THREADS`` (``plan.time.host_one_thread_per_rank``): ``torch_cpu_adamw_s_per_param``, and no
    faster than ``TORCH_CPU_ADAMW_ELEMENT_PASSES`` element passes at the rank's share of its host's memory bandwidth
    (``rank_host_memory_bytes_per_s``). Otherwise the rank has torch's default pool (the host's cores): the memory
    share alone.

    The same gap was reported against FSDP's CPU offload itself: "using CPUOffload creates 3-10x slowdown due to
    slow cpu optimizer step/update", DeepSpeed's CPU Adam "5-7x faster vs torch.optim.Adam" (pytorch/pytorch issue
    #74588, 2022-03-22, the optimizer step and not the copies in its profile); the measured one-thread loop here is
    2.7x the CPU Adam share ``cpu_adam_seconds`` gives an H100 node's rank (3.2 against 1.2 ns a parameter)."""
    if params_per_rank < 0 or element_bytes <= 0 or ranks_per_node < 1:
        raise ValueError("torch_cpu_adamw_seconds: params_per_rank >= 0, element_bytes > 0, ranks_per_node >= 1")
    share = rank_host_memory_bytes_per_s(host_memory_bytes_per_s=rates.host_memory_bytes_per_s,
                                         ranks_per_node=ranks_per_node, host_numa_nodes=rates.host_numa_nodes)
    memory_s = params_per_rank * TORCH_CPU_ADAMW_ELEMENT_PASSES * element_bytes / share
    if not one_thread:
        return memory_s
    return max(memory_s, params_per_rank * torch_cpu_adamw_s_per_param(element_bytes))


def offload_seconds(
    *, params_per_rank: float, ranks_per_node: int, grad_bytes: float, weight_bytes: float,
    params_offloaded: bool, weight_shard_bytes: float, passes: int, backward_s: float, compute_s: float,
    rates: DeviceRates, cpu_step_s: float | None = None,
) -> OffloadTime:
    """Exposed seconds per optimizer step on one GPU. ``cpu_step_s``: the host optimizer step's seconds where the
    optimizer is not a CPU Adam kernel (``torch_cpu_adamw_seconds``); None: ``cpu_adam_seconds``."""
    cpu = cpu_adam_seconds(params_per_rank=params_per_rank, ranks_per_node=ranks_per_node,
                           rates=rates) if cpu_step_s is None else cpu_step_s
    down = params_per_rank * grad_bytes / rates.pcie_bytes_per_s
    up = params_per_rank * weight_bytes / rates.pcie_bytes_per_s
    exposed = cpu + up + max(0.0, down - backward_s)
    transfer = down + up
    if params_offloaded:
        stream = passes * weight_shard_bytes / rates.pcie_bytes_per_s
        transfer += stream
        exposed += max(0.0, stream - compute_s)
    return OffloadTime(cpu, transfer, exposed)


def deepspeed_zero12_offload_seconds(
    *, params_per_rank: float, tensors_per_rank: float, ranks_per_node: int, weight_bytes: float,
    sync_round_trip_s: float, rates: DeviceRates,
) -> OffloadTime:
    """Exposed seconds per optimizer step on one GPU of DeepSpeed ZeRO-1/2 with ``offload_optimizer`` (module
    docstring): the boundary's per-tensor loop (norm and inf/nan kernels over ``DS_BOUNDARY_HBM_BYTES_PER_PARAM``, a
    host round trip per tensor, ``sync_round_trip_s`` each, a lower bound) and its fp32 gradient copy down, both
    exposed; CPU Adam plus the host's clip and conversion passes, all ranks of the node at once, each at
    ``rank_host_memory_bytes_per_s``; the 16-bit weights back up. The copies of a node's ranks run at once
    (``host_copy_bytes_per_s``).
    ``tensors_per_rank``: parameter tensors in the rank's partition."""
    cpu = cpu_adam_seconds(params_per_rank=params_per_rank, ranks_per_node=ranks_per_node, rates=rates,
                           host_extra_bytes_per_param=DS_HOST_EXTRA_BYTES_PER_PARAM)
    copy_rate = host_copy_bytes_per_s(pcie_bytes_per_s=rates.pcie_bytes_per_s,
                                      host_memory_bytes_per_s=rates.host_memory_bytes_per_s,
                                      gpus_per_node=ranks_per_node)
    down = params_per_rank * DS_GRAD_COPY_BYTES_PER_PARAM / copy_rate
    up = params_per_rank * weight_bytes / copy_rate
    loop = (params_per_rank * DS_BOUNDARY_HBM_BYTES_PER_PARAM / rates.hbm_bytes_per_s
            + tensors_per_rank * (DS_BOUNDARY_KERNELS_PER_TENSOR * rates.device_s_per_kernel_min
                                  + DS_SYNCS_PER_TENSOR * sync_round_trip_s))
    return OffloadTime(cpu, down + up, cpu + down + up + loop)


def layer_offload_stall_seconds(*, layers: int, offloaded_layers: int, forward_s_per_layer: float,
                                backward_s_per_layer: float, copy_s_per_layer: float) -> tuple[float, float]:
    """Seconds the compute stream waits in one micro-batch's forward and in its backward under Transformer Engine's
    default partial activation offload of the first ``offloaded_layers`` = N of ``layers`` = L decoder layers
    (Megatron-Core ``cpu_offloading`` with ``cpu_offloading_num_layers`` N; the schedule is
    ``DefaultOffloadSynchronizer``, transformer_engine/pytorch/cpu_offload.py l.602-647, and ``OffloadableLayerState``
    l.259-364, NVIDIA/TransformerEngine @e7c550c5f80636cf841a8204b1d6f85a5f3f28b7, the TE Megatron-Bridge
    @067f987df03b8355b03192d88d70f1709fedf51a locks; ``memory.phases.partial_offload_alive_below`` has the memory
    side). One side stream carries every copy, one after another, and each layer's copy takes ``copy_s_per_layer``
    (its saved bytes over ``host_copy_bytes_per_s``):

    - forward: layer r's copy to the host starts when its tensors are ready (taken here as the end of its forward;
      TE records an event per tensor, so the first tensors may start a little earlier) and the stream is free; before
      layer L - N + r's forward the compute stream waits for it (``release_activation_forward_gpu_memory``);
    - backward: layer r's copy back is queued at layer L - 1 - N + r's backward, after all compute queued so far
      (``offload_stream.wait_stream(current_stream)``), and layer r's backward waits for it (``pop_tensor``; taken
      here as waiting for the whole layer at its start).

    Layers are taken as equal (``forward_s_per_layer``, ``backward_s_per_layer``). The copies' HBM traffic beside the
    compute is not charged. Returns (forward wait, backward wait), each >= 0."""
    n, L = offloaded_layers, layers
    if not 0 <= n < L or min(forward_s_per_layer, backward_s_per_layer, copy_s_per_layer) < 0:
        raise ValueError("layer_offload_stall_seconds: 0 <= offloaded_layers < layers, seconds >= 0")
    if n == 0:
        return 0.0, 0.0
    t = stream = forward_wait = 0.0
    done: dict[int, float] = {}
    for j in range(L):
        if 0 <= j - 1 < n:  # fwd_step(j): layer j - 1's copy starts
            stream = max(stream, t) + copy_s_per_layer
            done[j - 1] = stream
        r = j - (L - n)
        if 0 <= r < n and done[r] > t:  # finish_offload_map[j]: the compute stream waits for layer r's copy
            forward_wait += done[r] - t
            t = done[r]
        t += forward_s_per_layer
    t = stream = backward_wait = 0.0
    ready: dict[int, float] = {}
    for j in range(L - 1, -1, -1):
        r = j - (L - 1 - n)
        if 0 <= r < n:  # start_reload_map[j]: layer r's copy back
            stream = max(stream, t) + copy_s_per_layer
            ready[r] = stream
        if j < n and ready[j] > t:  # pop_tensor: layer j's backward waits for its copy back
            backward_wait += ready[j] - t
            t = ready[j]
        t += backward_s_per_layer
    return forward_wait, backward_wait


def offloaded_checkpoint_copy_seconds(*, layers: int, layer_input_bytes: float, copy_bytes_per_s: float) -> float:
    """Seconds one micro-batch's compute stream spends on Unsloth's offloaded checkpoint copies as the ``unsloth``
    preset's release runs them (Unsloth 2025.2.4 with unslothai/unsloth-zoo @de3f00e0c1078d4a9db2c9f81e63aa4a0c9146de,
    ``methods.unsloth``): ``Unsloth_Offloaded_Gradient_Checkpointer.forward`` copies each decoder layer's input to the
    host with ``hidden_states.to("cpu", non_blocking = True)`` before running the layer (unsloth_zoo/
    gradient_checkpointing.py l.145-147) and its backward copies it back with ``.to("cuda:0", non_blocking = True)``
    before the recompute (l.158-161). Both are issued on the current stream, the one the layer's kernels run on, so
    each copy runs in that stream's order, after the kernels before it and before the kernels after it (CUDA C++
    Programming Guide, "Streams": "commands ... in a stream ... execute in order",
    https://docs.nvidia.com/cuda/cuda-c-programming-guide/, read 2026-12-05): ``non_blocking`` frees the host, not the
    stream. One copy a layer each way: 2 x ``layers`` x ``layer_input_bytes`` / ``copy_bytes_per_s``.

    The rate is the pinned one (``host_copy_bytes_per_s``): a non_blocking device-to-host ``.to`` allocates its output
    in pinned memory (pytorch/pytorch aten/src/ATen/native/TensorConversions.cpp ``_to_copy``: ``pin_out =
    (non_blocking && ... options.device().is_cpu() ...)``, ``options.pinned_memory(pin_out)``
    @fc9325ea0d1cae1bbff1b67e6962e66fe562b39a), and the copy back reads that tensor.

    At 2026.1.3 (unsloth-zoo @fd50fb1c950594249e54d46066bcae46c888e62f, ``UnslothCheckpointFunction``) the copies run on
    a side stream: the forward's beside the layer (the compute stream waits at the layer's end, l.470-472, l.500), the
    backward's still before the recompute (``EXTRA_STREAM.wait_stream(MAIN_STREAM)`` then ``MAIN_STREAM.wait_stream(
    EXTRA_STREAM)``, l.530-532, l.582); that release is not what the preset reads and is not priced here."""
    if layers < 0 or layer_input_bytes < 0 or copy_bytes_per_s <= 0:
        raise ValueError("offloaded_checkpoint_copy_seconds: layers, bytes >= 0 and a copy rate > 0")
    return 2.0 * layers * layer_input_bytes / copy_bytes_per_s


FSDP2_CPU_ACCUMULATE_BYTES_PER_GRAD_BYTE = 3.0
"""Host-memory bytes per gradient byte of FSDP2's host-side accumulation ``grad._local_tensor += new_sharded_grad``
(``fsdp2_offload_accumulation_seconds``): the accumulated shard and the new one read, the sum written."""
GLIBC_MMAP_THRESHOLD_MAX_BYTES = 32 * 2**20
"""glibc's ceiling on its dynamic mmap threshold, ``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit (32 MiB): an allocation
above it is always a fresh ``mmap``, returned with ``munmap`` when freed (``PAGEABLE_FIRST_TOUCH_BYTES_PER_S``).
glibc ``malloc/malloc.c`` r1.162, 2006-08-22: "(DEFAULT_MMAP_THRESHOLD_MAX): ... For 64-bit platforms as 32MB"
(https://sourceware.org/ml/glibc-cvs/2006-q3/msg00288.html); mallopt(3): "4*1024*1024*sizeof(long) on 64-bit
systems", the threshold rising to a freed block's size up to it (read 2026-12-04)."""


ONE_THREAD_ADD_BYTES_PER_S = {2.0: 29.9e9, 4.0: 45.4e9}
"""Host-memory bytes per second (three per gradient byte: two reads, one write) of one thread's in-place add
``a += b`` of two host tensors, by element bytes (bf16, fp32), torch 2.13.0+cpu, Python 3.11.7,
``torch.set_num_threads(1)`` on this project's shared 2-vCPU AMD EPYC VM, 2026-12-03, best of 5-7 rounds of 128 and
512 MiB tensors over seven runs (benchmarks/fsdp2_host_add_cpu.py): bf16 15.9-33.1 GB/s, median 29.9; fp32
28.3-47.9 GB/s, median 45.4 (bf16 converts each element through fp32, so it streams slower). The medians as
measured. A floor: a shared 2-vCPU VM, whose neighbours take memory bandwidth and whose runs spread by 2x; the
run's host CPU is not this one, and a dedicated server core streams at least as fast. Not the H100 host's own
figure."""


def fsdp2_host_add_bytes_per_s(*, rank_share_bytes_per_s: float, element_bytes: float, one_thread: bool) -> float:
    """Bytes/s of FSDP2's host-side gradient add (``fsdp2_offload_accumulation_seconds``) on one rank: at most the
    rank's share of its host's memory bandwidth (``rank_host_memory_bytes_per_s``), and where ``one_thread`` no faster
    than one thread (``ONE_THREAD_ADD_BYTES_PER_S``, the bf16 rate for any element but fp32).

    ``one_thread``: the add is a torch CPU op, whose intra-op pool has ``OMP_NUM_THREADS`` threads, which the
    launcher sets (``plan.time.host_one_thread_per_rank``: Ray to the worker's CPU allotment, 1 when none is given,
    ray-project/ray python/ray/_private/utils.py ``set_omp_num_threads_if_unset``
    @f0cfdad9e9d7823676609c680034903201203304, and SkyRL's training actors ask for one CPU per GPU,
    ``num_cpus=num_gpus_per_actor``: marin-community/MarinSkyRL skyrl-train/skyrl_train/workers/worker.py
    l.754-824, trainer.py l.818 @a559688ccdfe65e44d9f13ddaaccb57aa8a3b0b9; torchrun to 1 when a node runs more than
    one process, torch 2.13.0 torch/distributed/run.py l.872-884); otherwise torch's default pool, the share alone."""
    if rank_share_bytes_per_s <= 0 or element_bytes <= 0:
        raise ValueError("fsdp2_host_add_bytes_per_s: rates and element bytes > 0")
    if not one_thread:
        return rank_share_bytes_per_s
    thread_bytes_per_s = ONE_THREAD_ADD_BYTES_PER_S.get(float(element_bytes), ONE_THREAD_ADD_BYTES_PER_S[2.0])
    return min(rank_share_bytes_per_s, thread_bytes_per_s)


def fsdp2_offload_accumulation_seconds(*, grad_bytes_per_rank: float, unit_grad_bytes_per_rank: float,
                                       micro_steps: int, pageable_bytes_per_s: float,
                                       first_touch_bytes_per_s: float, host_add_bytes_per_s: float,
                                       reduce_scatter_s: float) -> float:
    """Exposed seconds per optimizer step of FSDP2's CPU offload (``CPUOffloadPolicy``) accumulating gradients over
    ``micro_steps`` micro-batches, beyond the one overlapped gradient copy per step that ``offload_seconds`` prices.

    torch's ``foreach_reduce`` (pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb, the torch 2.13.0 wheel,
    ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py`` l.710-745) copies each unit's reduce-scattered
    gradient shard to the host with ``non_blocking = fsdp_param.pin_memory and not to_accumulate_grad and not
    has_post_acc_grad_hook`` ("Accumulating grads: the CPU add kernel depends on the copy result and we cannot run
    the add as a callback") and then, when the shard already holds a gradient, adds it on the host
    (``fsdp_param.sharded_param.grad._local_tensor += new_sharded_grad``), all inside the unit's post-backward hook
    on the training thread. So in the first micro-batch of a step (gradients set to None by ``zero_grad``) the copy
    goes to pinned memory behind the backward; in each later one the hook's ``.to("cpu")`` is blocking: the host waits
    for the unit's reduce-scatter (``reduce_scatter_s``, the whole model's per micro-batch: nothing more of the
    backward is launched meanwhile, so it is not hidden), copies the shard into pageable memory allocated for it
    (``_to_copy`` pins only a non-blocking copy, module docstring), and adds it before the next unit's backward is
    launched. A unit's shard above ``GLIBC_MMAP_THRESHOLD_MAX_BYTES`` is a fresh mapping every time, so its copy
    faults its pages in (``first_touch_bytes_per_s``); a smaller one may reuse heap pages (``pageable_bytes_per_s``).
    The add streams ``FSDP2_CPU_ACCUMULATE_BYTES_PER_GRAD_BYTE`` per gradient byte at ``host_add_bytes_per_s`` (at
    most the rank's share of its host's memory bandwidth, and one thread's rate where the launcher sets one:
    ``fsdp2_host_add_bytes_per_s``).

    ``grad_bytes_per_rank``: the rank's gradient shard in its parameters' dtype (the reduce-scatter output is cast
    back to it); ``unit_grad_bytes_per_rank``: one FSDP unit's part of it. Returns 0 for one micro-batch."""
    if micro_steps < 1 or min(grad_bytes_per_rank, unit_grad_bytes_per_rank, reduce_scatter_s) < 0 \
            or min(pageable_bytes_per_s, first_touch_bytes_per_s, host_add_bytes_per_s) <= 0:
        raise ValueError("fsdp2_offload_accumulation_seconds: micro_steps >= 1, bytes and seconds >= 0, rates > 0")
    fresh = unit_grad_bytes_per_rank > GLIBC_MMAP_THRESHOLD_MAX_BYTES
    copy_s = grad_bytes_per_rank / (first_touch_bytes_per_s if fresh else pageable_bytes_per_s)
    add_s = grad_bytes_per_rank * FSDP2_CPU_ACCUMULATE_BYTES_PER_GRAD_BYTE / host_add_bytes_per_s
    return (micro_steps - 1) * (reduce_scatter_s + copy_s + add_s)
