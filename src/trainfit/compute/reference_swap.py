"""Reference swap: the reference weights wait in pinned host memory and are copied into the policy's own
parameters for the reference log-prob pass (NeMo RL, ``roles.reference: host_swap``).

What NVIDIA-NeMo/RL does (the same at @9dbd9adc95a10f5946cceb36e1d5b31e2429e470 and
@7ea279abfbeb698b092856d0dab61e7cf39bc909), per training rank and RL step:

Megatron backend
    set-up: ``nemo_rl/models/megatron/setup.py`` ``setup_reference_model_state`` (lines 831-906 @9dbd9adc,
    2039-2175 @7ea279abfbeb698b092856d0dab61e7cf39bc909) builds the reference model on the GPU and keeps its
    ``state_dict()`` as host copies,
    one ``item.detach().to(device="cpu", non_blocking=True, copy=True)`` per tensor (line 897 / 2162-2164);
    PyTorch's ``_to_copy`` allocates a non-blocking CUDA->CPU copy in pinned memory (pytorch/pytorch
    aten/src/ATen/native/TensorConversions.cpp ``_to_copy``: ``pin_out = non_blocking && self.is_cuda() &&
    options.device().is_cpu()``, @00faeaed23ee6728a03d806ae7a3186e08b39cbc). The reference model itself is
    dropped: no reference weights stay on the GPU.
    each reference pass: ``megatron_policy_worker.py`` ``use_reference_model`` (lines 675-722 @9dbd9adc,
    1971-2035 @7ea279abfbeb698b092856d0dab61e7cf39bc909), entered by ``get_reference_policy_logprobs``
    (``base_policy_worker.py`` line 142
    @9dbd9adc; ``megatron_policy_worker.py`` line 1151 @7ea279abfbeb698b092856d0dab61e7cf39bc909):
    1. the policy's ``state_dict()`` to the host, one non-blocking (pinned) D2H copy per tensor (lines 688-694 /
       1985-1989);
    2. the reference into the policy's parameters: ``self.model.load_state_dict(self.reference_state_dict)``
       (line 696) / ``_apply_state_dict_to_model`` (``param_or_buf.copy_(source_value)``, line 1953): one H2D
       ``copy_`` per tensor, blocking (no ``non_blocking``), ordered after the D2H copies on the same stream;
    3. the reference log-prob pass on the policy's own storage;
    4. the policy back: the same per-tensor H2D ``copy_`` from the saved host copy (line 711 / 2026).
DTensor (FSDP2) backend
    the same three copies of each rank's local shards: ``dtensor_policy_worker.py`` ``get_cpu_state_dict``
    (``torch.empty(..., pin_memory=True)`` + ``copy_(non_blocking=True)`` per tensor, then
    ``torch.cuda.synchronize()``; lines 103-133 @9dbd9adc) keeps the reference at set-up (lines 394-397) and
    saves the policy in ``use_reference_model`` (lines 1607-1633: ``val.copy_(self.reference_model_state_dict[k])``
    per tensor in, ``val.copy_(curr_state_dict[k])`` back); ``dtensor_policy_worker_v2.py`` lines 304-305 and
    1208-1234 @9dbd9adc (its reference from ``nemo_rl/models/automodel/setup.py`` ``setup_reference_model_state``,
    ``get_cpu_state_dict(..., pin_memory=True)``: line 219 @9dbd9adc, line 432
    @7ea279abfbeb698b092856d0dab61e7cf39bc909).

Nothing is bucketed: every copy is one tensor. Per step and training GPU that is ``3 x`` the rank's
state-dict bytes over PCIe (one D2H, two H2D), serialized on one stream, plus a per-tensor cost for the
blocking H2D copies (a launch and a stream synchronization each; the non-blocking D2H copies queue behind
their own transfers). Every GPU of a node copies at once, so the rate is the smaller of the GPU's host link
and the node's host-memory bandwidth shared by its GPUs (as ``plan.rl_offload.trainer_state_offload_phase``).

Host memory: the reference's pinned copy, and the saved policy copy (pinned; PyTorch's caching host
allocator keeps the blocks for the next step), both the rank's state-dict bytes.

Pure: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.compute.offload import host_copy_bytes_per_s

S_PER_BLOCKING_COPY = 15e-6
"""Host seconds of one blocking ``Tensor.copy_`` from pinned host memory into a GPU tensor beyond its bytes:
PyTorch's dispatch, the ``cudaMemcpyAsync`` launch and the stream synchronization that a blocking copy waits
on. Assumption, not measured here: the order of CUDA's small-copy latency (~10 us) plus the copy's dispatch."""

COPIES_PER_SWAP = 3
"""D2H of the policy, H2D of the reference, H2D of the policy (module docstring): NVIDIA-NeMo/RL
``nemo_rl/models/policy/workers/megatron_policy_worker.py`` ``use_reference_model`` l.675-722
@9dbd9adc95a10f5946cceb36e1d5b31e2429e470 (``to(device="cpu", non_blocking=True, copy=True)`` per tensor, then
``load_state_dict(self.reference_state_dict)`` and, after the pass, ``load_state_dict(model_state_dict)``)."""
BLOCKING_COPIES_PER_SWAP = 2
"""The two H2D rounds copy tensor by tensor with a synchronization each; the D2H round does not wait (its copies
are ``non_blocking=True``; the two ``load_state_dict`` rounds pass none): NVIDIA-NeMo/RL
``nemo_rl/models/policy/workers/megatron_policy_worker.py`` l.675-722 @9dbd9adc95a10f5946cceb36e1d5b31e2429e470."""


@dataclass(frozen=True, slots=True)
class ReferenceSwapTime:
    to_host_s: float
    """The policy's state dict D2H."""
    to_device_s: float
    """The reference and then the policy back H2D, bytes only."""
    per_tensor_s: float
    """The blocking copies' per-tensor cost."""

    @property
    def total_s(self) -> float:
        return self.to_host_s + self.to_device_s + self.per_tensor_s


def reference_swap_seconds(*, state_bytes_per_gpu: float, tensors_per_gpu: int, pcie_bytes_per_s: float,
                           host_memory_bytes_per_s: float, gpus_per_node: int,
                           s_per_blocking_copy: float = S_PER_BLOCKING_COPY) -> ReferenceSwapTime:
    """Seconds one training GPU spends swapping the reference in and the policy back for one reference pass
    (module docstring): ``state_bytes_per_gpu`` the rank's state-dict bytes (the reference's equal the
    policy's), ``tensors_per_gpu`` the tensors of that state dict, every GPU of the node copying at once."""
    if state_bytes_per_gpu < 0 or tensors_per_gpu < 0:
        raise ValueError("reference_swap_seconds: bytes and tensors must be >= 0")
    if pcie_bytes_per_s <= 0 or host_memory_bytes_per_s <= 0 or gpus_per_node < 1:
        raise ValueError("reference_swap_seconds: rates must be > 0 and gpus_per_node >= 1")
    rate_bytes_per_s = host_copy_bytes_per_s(pcie_bytes_per_s=pcie_bytes_per_s,
                                             host_memory_bytes_per_s=host_memory_bytes_per_s, gpus_per_node=gpus_per_node)
    one_way_s = state_bytes_per_gpu / rate_bytes_per_s
    return ReferenceSwapTime(
        to_host_s=one_way_s,
        to_device_s=(COPIES_PER_SWAP - 1) * one_way_s,
        per_tensor_s=BLOCKING_COPIES_PER_SWAP * tensors_per_gpu * s_per_blocking_copy,
    )


def reference_swap_host_bytes(*, state_bytes_per_gpu: float, gpus_per_node: int) -> tuple[float, float]:
    """(pinned reference copy, saved policy copy) in one node's host memory: each GPU's state-dict bytes, twice."""
    node_bytes = state_bytes_per_gpu * gpus_per_node
    return node_bytes, node_bytes
