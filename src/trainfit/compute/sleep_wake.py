"""vLLM sleep mode between rollouts: the weights offloaded (level 1) or dropped (level 2), the KV cache released;
SGLang's memory release.

Sleep mode (``sleep_wake_seconds``) follows vLLM ``docs/features/sleep_mode.md``
(vllm-project/vllm, commit 01181ddf28bd580c33348055f9cd45ddfe9cdcec): level 1 offloads the weights to
CPU memory and discards the KV cache; level 2 discards both ("good for ... RLHF weight update").

SGLang (``rollout.engine: sglang``) releases through torch_memory_saver, which, like vLLM's CuMemAllocator, allocates
with cuMemCreate + cuMemMap, frees the physical memory on pause (keeping the virtual address) and maps fresh memory
on resume, the content thrown away unless CPU backup is asked for (reyoung/torch_memory_saver README.md and
csrc core.cpp ``malloc``), so the same re-map constant applies. What differs is
what is released and where it goes: ``release_memory_occupation`` pauses each tagged region, keeping only the
model's buffers (``_export_static_state``), no copy of the weights to host memory (sgl-project/sglang
python/sglang/srt/managers/scheduler_update_weights_mixin.py @018c9109680f6f5b0654114b9159101256e1e18b); verl
releases the KV cache alone at its level 1 (a LoRA adapter synced) and the KV cache and the weights at level 2
(verl-project/verl verl/workers/rollout/sglang_rollout/sglang_rollout.py ``release`` @b9873ee98f5ee513a460a7a41623262ac4a831e9).

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.compute.offload import host_copy_bytes_per_s
from trainfit.compute.rates import DeviceRates
from trainfit.errors import CardError

KV_REMAP_S_PER_BYTE = 3e-3 / 1e9
"""Wake-up: re-creating and mapping discarded memory (vLLM's CuMemAllocator, cuMemCreate + cuMemMap),
3 ms per GB. Fitted on vLLM's sleep-mode blog (blog.vllm.ai 2025-10-26, A100, vLLM 0.11): level-1
wake of Qwen3-0.6B 0.26 s, of which the weight copy over PCIe is 0.05 s and the rest re-maps ~68 GB
of KV cache (gpu_memory_utilization 0.9 of 80 GB); the same constant gives Phi-3-vision 0.51 s
against the published 0.82 s."""


@dataclass(frozen=True, slots=True)
class SleepWakeTime:
    """vLLM sleep mode around a training phase, per GPU (all GPUs do theirs in parallel)."""

    sleep_s: float
    wake_s: float
    total_s: float
    assumptions: tuple[str, ...]


def sleep_wake_seconds(*, level: int, weight_bytes_per_gpu: float, kv_cache_bytes_per_gpu: float,
                       rates: DeviceRates, remap_s_per_byte: float = KV_REMAP_S_PER_BYTE,
                       host_backup: bool = True, gpus_per_node: int = 1) -> SleepWakeTime:
    """vLLM sleep before a training phase and wake-up after it, per GPU.

    Level 1 (vLLM ``docs/features/sleep_mode.md``: "offload the model weights and discard the KV
    cache"): sleep copies the weights to pinned CPU memory (``CuMemAllocator.sleep``: a pinned backup tensor and a
    ``cudaMemcpy`` per weight allocation, vllm-project/vllm vllm/device_allocator/cumem.py
    @9ac9658813add86b01198b8204d02e245daddb2a); wake copies them back and
    re-maps the released memory (weights + KV pool, ``remap_s_per_byte``). Every engine GPU of a node
    (``gpus_per_node``) sleeps and wakes at once, so each copies at the smaller of its host link and its share of
    the node's host-memory bandwidth (``compute.offload.host_copy_bytes_per_s``, as the trainer's own offload).
    Level 2 ("discard both the model weights and the KV cache", the RLHF weight-update case): sleep only
    releases; wake re-maps the memory, and the weights' content arrives with the trainer's sync (``sync.py``),
    not here. The first level-1 sleep also pins the host buffer (not timed: once per run).

    ``host_backup`` False: SGLang's ``release_memory_occupation`` / ``resume_memory_occupation`` as verl calls them
    (module docstring): no weight copy at either level; level 1 re-maps the KV cache only (the weights stay),
    level 2 the weights and the KV cache as vLLM's level 2.
    """
    if level not in (0, 1, 2):
        raise CardError(f"sleep level: 0, 1 or 2, got {level}")
    if level == 0:
        return SleepWakeTime(sleep_s=0.0, wake_s=0.0, total_s=0.0, assumptions=("no sleep mode",))
    if not host_backup:
        remap = (kv_cache_bytes_per_gpu + (weight_bytes_per_gpu if level == 2 else 0.0)) * remap_s_per_byte
        notes = (f"SGLang release level {level}: " + ("KV cache freed, weights kept" if level == 1
                                                      else "weights and KV cache freed, weights reloaded by the sync"),
                 f"resume re-maps them at {remap_s_per_byte * 1e12:.1f} ms per GB (vLLM sleep-mode blog, A100)")
        return SleepWakeTime(sleep_s=0.0, wake_s=remap, total_s=remap, assumptions=notes)
    remap = (weight_bytes_per_gpu + kv_cache_bytes_per_gpu) * remap_s_per_byte
    rate = host_copy_bytes_per_s(pcie_bytes_per_s=rates.pcie_bytes_per_s,
                                 host_memory_bytes_per_s=rates.host_memory_bytes_per_s, gpus_per_node=gpus_per_node)
    copy = weight_bytes_per_gpu / rate if level == 1 else 0.0
    notes = (
        f"sleep level {level}: " + ("weights to CPU and back over PCIe" if level == 1
                                    else "weights discarded, reloaded by the weight sync"),
        f"wake re-maps weights + KV at {remap_s_per_byte * 1e12:.1f} ms per GB (vLLM sleep-mode blog, A100)",
    )
    return SleepWakeTime(sleep_s=copy, wake_s=copy + remap, total_s=2 * copy + remap, assumptions=notes)
