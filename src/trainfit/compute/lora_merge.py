"""PEFT's ``merge_adapter`` / ``unmerge_adapter`` around a weight sync that sends merged weights: time.

Pure: no torch.

TRL's GRPO trainer with vLLM on a PEFT model sends the engine merged weights: each sync it calls
``self.model.merge_adapter()``, loads every base parameter (peft prefixes stripped, the ``lora_`` tensors skipped)
into vLLM one ``load_weights`` call per parameter, then ``self.model.unmerge_adapter()`` (huggingface/trl
trl/trainer/grpo_trainer.py ``_move_model_to_vllm`` l.897-945 @6adfd138d895b7ac257c4079eab7d519a0472aaa, tag
v0.23.0; the same lines at v0.23.1, c7a29304e7b46f4d9a356e2caf5a54eb7bc81dc2, whose grpo_trainer.py differs from
v0.23.0 only in ``get_high_entropy_mask``). For a plain LoRA ``Linear`` PEFT runs, per adapted module
(huggingface/peft src/peft/tuners/lora/layer.py @53c25fe4fdd7c6aa4b40db0560815ea570d32303, tag v0.17.1):

* merge (``Linear.merge`` l.677-679): ``delta_weight = self.get_delta_weight(adapter)``, ``base_layer.weight.data +=
  delta_weight``;
* unmerge (``Linear.unmerge`` l.699-702): ``delta_weight = self.get_delta_weight(adapter)``, ``weight.data -=
  delta_weight.to(orig_dtype)``;
* ``get_delta_weight`` (l.710-742): ``transpose(weight_B @ weight_A, fan_in_fan_out) * self.scaling[adapter]`` in
  the adapter's dtype (on a GPU no cast: ``cast_to_fp32`` only for a cpu device, l.724).

So each of the two calls runs one rank-r GEMM (out x r @ r x in) and one scaling multiply over the out x in delta in
the adapter's dtype (fp32 under PEFT's default ``autocast_adapter_dtype``), then the in-place update of the base
weight: the merge adds the adapter-dtype delta straight into the base weight (one kernel reading both, writing the
base), the unmerge first casts the delta to the base dtype (a kernel of its own when the dtypes differ) and then
subtracts it. Kernels are issued from Python, one module at a time; the GPU runs them in order, so the time is the
longer of the device's kernels and the host's launches.

Left out: ``check_adapters_to_merge`` and the module walk beyond the per-kernel host cost, and the transient delta's
memory (one module's out x in in the adapter dtype at a time).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.compute.gemm import gemm_seconds
from trainfit.compute.rates import DeviceRates
from trainfit.errors import CardError

MERGE_KERNELS_PER_MODULE = 3
"""B @ A, the scaling multiply, the in-place add (peft v0.17.1 layer.py l.679, l.733)."""
UNMERGE_KERNELS_PER_MODULE_SAME_DTYPE = 3
"""B @ A, the scaling multiply, the in-place subtract when the adapter has the base's dtype (``.to`` is then a no-op,
peft v0.17.1 layer.py l.702)."""


@dataclass(frozen=True, slots=True)
class AdaptedLinear:
    """``count`` identical LoRA-wrapped linears (``out_features`` x ``in_features`` base weight, rank ``rank``)."""

    out_features: int
    in_features: int
    rank: int
    count: int


@dataclass(frozen=True, slots=True)
class MergeTime:
    """One merge and one unmerge of every adapted module: ``total_s`` = max(device, host)."""

    device_s: float
    host_s: float
    kernels: int
    total_s: float


def _stream_s(*, bytes_moved: float, rates: DeviceRates) -> float:
    """A memory-bound elementwise kernel: its bytes at HBM bandwidth, at least one kernel's device floor."""
    return max(bytes_moved / rates.hbm_bytes_per_s, rates.device_s_per_kernel_min)


def module_merge_device_seconds(*, out_features: int, in_features: int, rank: int, adapter_dtype_bytes: float,
                                base_dtype_bytes: float, rates: DeviceRates) -> tuple[float, int]:
    """Device seconds and kernels of one merge plus one unmerge of one LoRA ``Linear`` (module docstring)::

        delta   = gemm(out, in, r) in the adapter dtype             (both calls)
        scale   = out x in x 2 x adapter bytes                      (both calls, read + write)
        add     = out x in x (2 x base + adapter) bytes             (merge: base += delta)
        cast    = out x in x (adapter + base) bytes                 (unmerge, adapter dtype != base dtype)
        sub     = out x in x 3 x base bytes                         (unmerge: base -= delta.to(base))"""
    if min(out_features, in_features, rank) < 1 or min(adapter_dtype_bytes, base_dtype_bytes) <= 0:
        raise CardError("lora merge: out_features, in_features and rank must be >= 1, dtype bytes > 0")
    elements = float(out_features) * in_features
    gemm = gemm_seconds(m=out_features, n=in_features, k=rank, rates=rates, dtype_bytes=adapter_dtype_bytes)
    scale = _stream_s(bytes_moved=elements * 2 * adapter_dtype_bytes, rates=rates)
    add = _stream_s(bytes_moved=elements * (2 * base_dtype_bytes + adapter_dtype_bytes), rates=rates)
    sub = _stream_s(bytes_moved=elements * 3 * base_dtype_bytes, rates=rates)
    casts = adapter_dtype_bytes != base_dtype_bytes
    cast = _stream_s(bytes_moved=elements * (adapter_dtype_bytes + base_dtype_bytes), rates=rates) if casts else 0.0
    kernels = MERGE_KERNELS_PER_MODULE + UNMERGE_KERNELS_PER_MODULE_SAME_DTYPE + (1 if casts else 0)
    return 2 * (gemm + scale) + add + sub + cast, kernels


def merge_unmerge_seconds(*, modules: tuple[AdaptedLinear, ...], adapter_dtype_bytes: float, base_dtype_bytes: float,
                          rates: DeviceRates, host_s_per_kernel: float) -> MergeTime:
    """One ``merge_adapter`` and one ``unmerge_adapter`` over every adapted module: the device's kernels
    (``module_merge_device_seconds``) against the host's launches (``host_s_per_kernel`` each, issued in order from
    Python), the longer of the two. No module: zero."""
    if host_s_per_kernel < 0:
        raise CardError("lora merge: host_s_per_kernel must be >= 0")
    device = 0.0
    kernels = 0
    for m in modules:
        s, k = module_merge_device_seconds(out_features=m.out_features, in_features=m.in_features, rank=m.rank,
                                           adapter_dtype_bytes=adapter_dtype_bytes,
                                           base_dtype_bytes=base_dtype_bytes, rates=rates)
        device += m.count * s
        kernels += m.count * k
    host = kernels * host_s_per_kernel
    return MergeTime(device_s=device, host_s=host, kernels=kernels, total_s=max(device, host))
