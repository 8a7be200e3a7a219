"""DeepSpeed ZeRO's own buffers, as DeepSpeed 0.19.8 allocates them (stages 1, 2 and 3, with and
without CPU offload). Pure: no torch, no deepspeed import; element counts in, bytes out.

Every buffer below is read from the pinned source (``deepspeed==0.19.8``, paths relative to the
``deepspeed`` package); ``tests/unit/test_deepspeed_zero.py`` runs DeepSpeed itself on the CPU
(gloo, world size 1) and compares the sizes it allocates with these functions.

Stage 1 and 2 (``runtime/zero/stage_1_and_2.py``)
    * bit16 parameters: every trainable parameter, flattened into one buffer per group, on every
      rank (``bit16_groups_flat``, l.505); frozen parameters stay where the model put them.
    * fp32 master partition: ``weights_partition = ....clone().to(master_weights_and_grads_dtype)``
      (l.560), 4 B per trainable element / dp, *whatever the card's precision says*: DeepSpeed's
      bf16/fp16 modes always keep it, and the optimizer steps it, so AdamW's two states are fp32
      (8 B / element / dp).
    * IPG bucket: ``setup_buckets`` (l.3256) allocates ``reduce_bucket_size`` elements of the
      gradient dtype at the first backward, a second one with ``overlap_comm`` (l.3273); released
      at the end of backward (``_release_ipg_buffers``, l.924 via l.1061).
    * contiguous gradients (stage 2): ``grads_in_partition``, the rank's own gradient partition in
      the gradient dtype (l.2192), filled during backward, alive until the step frees the
      parameters' gradients (``free_grad_in_param_list``, l.3128). Stage 1 keeps every full
      gradient until the epilogue reduces it (as DDP would), then the same partition.
    * the gradient partition at the step: ``flat_grad_partition = self.flatten(...)`` (l.3117, a
      copy in the gradient dtype) then ``single_grad_partition = flat_grad_partition.to(fp32)``
      (l.3118): 2 + 4 B / element / dp live at once beside the gradient partition, the fp32 one
      held through ``_optimizer_step`` (l.3137). This is the allocation an out-of-memory report
      names: 13.9 B parameters x 4 B / 4 ranks = 12.94 GiB.
    * the optimizer steps ONE flat fp32 tensor per group: a for-loop/foreach torch AdamW's
      temporaries are sized by the whole partition, not by the largest parameter.
    * ``allgather_bucket_size`` only splits the all-gather of the updated partitions into the flat
      bit16 buffer in place (``runtime/utils.py`` l.1033): no allocation.
    * CPU offload: the fp32 partition, its gradient and the optimizer states live in pinned host
      memory (l.563, l.937); the GPU keeps the bit16 parameters, the IPG bucket(s) and a gradient
      staging buffer of the largest parameter (``temp_grad_buffer_for_gpu_offload``, l.659); the
      gradient partition never forms on the GPU (l.2172-2178 copy each reduced slice to the host).

Stage 3 (``runtime/zero/stage3.py``, ``partitioned_param_coordinator.py``, ``parameter_offload.py``)
    * every parameter, trainable or frozen, is partitioned: 1/dp of its low-precision bytes per rank.
    * persistent parameters: any parameter of at most ``stage3_param_persistence_threshold``
      elements stays gathered on every rank (``parameter_offload.py`` l.317-327), up to
      ``model_persistence_threshold`` elements in all.
    * fp32 partitions of the trainable parameters in sub-groups of ``sub_group_size`` elements
      (stage3.py l.1213-1231); AdamW states fp32.
    * IPG bucket: ``reduce_bucket_size`` elements of the gradient dtype, allocated at init (l.782).
    * gradient partitions: one flat buffer of the rank's gradient partition, allocated at init
      (``grad_partitions_flat_buffer``, l.791), on the host with optimizer offload (l.333).
    * the step, per sub-group: ``self.flatten(averaged_gradients).to(fp32)`` (l.2686): a flat copy
      in the gradient dtype and the fp32 gradient of one sub-group at once.
    * gathered parameters: the coordinator fetches each submodule's parameters, prefetches up to
      ``stage3_prefetch_bucket_size`` elements ahead (bounded by ``stage3_max_live_parameters``,
      l.452-454), and on release keeps any parameter used again within ``stage3_max_reuse_distance``
      elements of the trace (l.634-666). With the default 1e9 the last layers and the head stay
      gathered from the end of forward into backward: ``gathered_params`` simulates it.
    * parameter offload: the partitions live in pinned host memory (l.906); the GPU holds what is
      gathered plus the persistent parameters.

Which optimizer steps the fp32 partitions (``runtime/engine.py``): a client optimizer handed to
``deepspeed.initialize`` (the HF Trainer's when the config has no ``optimizer`` section, mmengine's)
is stepped as it is (``_configure_optimizer`` l.2328-2339); an ``optimizer`` section of type
Adam/AdamW builds torch's AdamW only with ``torch_adam: true`` (l.2378-2382), DeepSpeedCPUAdam under
optimizer offload (l.2384-2400), else FusedAdam (l.2402-2409), whose ``multi_tensor_applier`` updates
in place (``ops/adam/fused_adam.py`` l.179-193): no temporaries, ``precision.optimizer_impl: fused``.
Whichever it is, each call sees one flat fp32 tensor (stages 1-2: a group's partition; stage 3: one
sub-group, ``stage3.py`` l.1235-1262, 2909-2927), so torch foreach / for-loop temporaries are sized
by ``ZeroBuffers.optimizer_flat_numel``.

"auto" values (``transformers/integrations/deepspeed.py``, HfTrainerDeepSpeedConfig): the HF
Trainer (and so LLaMA-Factory and ms-swift) fills ``reduce_bucket_size`` = hidden², 
``stage3_prefetch_bucket_size`` = 0.9 hidden² and ``stage3_param_persistence_threshold`` = 10 hidden.
A config handed to ``deepspeed.initialize`` directly (OpenRLHF) drops "auto" keys
(``runtime/config_utils.py`` l.56) and gets DeepSpeed's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

DEEPSPEED_VERSION = "0.19.8"

AUTO = "auto"

DEFAULTS: dict[str, int | bool | None] = {
    "reduce_bucket_size": 500_000_000,
    "allgather_bucket_size": 500_000_000,
    "stage3_prefetch_bucket_size": 50_000_000,
    "stage3_max_live_parameters": 1_000_000_000,
    "stage3_max_reuse_distance": 1_000_000_000,
    "stage3_param_persistence_threshold": 100_000,
    "model_persistence_threshold": 2**63 - 1,
    "sub_group_size": 1_000_000_000,
    "contiguous_gradients": True,
    "overlap_comm": None,
}
"""``runtime/zero/config.py`` (DeepSpeedZeroConfig) field defaults at 0.19.8: l.102, 113, 132, 222,
228, 235, 245, 251, 182; ``overlap_comm`` None means True for stage 3 and False otherwise (l.384-386)."""


@dataclass(frozen=True, slots=True)
class ZeroConfig:
    """The ZeRO settings that size buffers, resolved to numbers (elements)."""

    stage: int
    reduce_bucket_size: int = 500_000_000
    allgather_bucket_size: int = 500_000_000
    prefetch_bucket_size: int = 50_000_000
    max_live_parameters: int = 1_000_000_000
    max_reuse_distance: int = 1_000_000_000
    param_persistence_threshold: int = 100_000
    model_persistence_threshold: int = 2**63 - 1
    sub_group_size: int = 1_000_000_000
    contiguous_gradients: bool = True
    overlap_comm: bool = False
    offload_optimizer: bool = False
    offload_param: bool = False


def resolve_zero_config(
    *, stage: int, hidden_size: int, offload_optimizer: bool = False, offload_param: bool = False,
    **settings: float | str | bool | None,
) -> ZeroConfig:
    """Settings as a card or a DeepSpeed JSON gives them (None: DeepSpeed's default; "auto": what the
    HF Trainer fills in) resolved to numbers."""
    unknown = set(settings) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown ZeRO settings: {sorted(unknown)}")
    hf_auto = {"reduce_bucket_size": hidden_size * hidden_size,
               "stage3_prefetch_bucket_size": int(0.9 * hidden_size * hidden_size),
               "stage3_param_persistence_threshold": 10 * hidden_size}

    def value(key: str):
        v = settings.get(key)
        if v is None:
            return DEFAULTS[key]
        if v == AUTO:
            # keys the HF Trainer does not fill are dropped by DeepSpeed: its default
            return hf_auto.get(key, DEFAULTS[key])
        return v

    overlap = value("overlap_comm")
    return ZeroConfig(
        stage=stage,
        reduce_bucket_size=int(value("reduce_bucket_size")),
        allgather_bucket_size=int(value("allgather_bucket_size")),
        prefetch_bucket_size=int(value("stage3_prefetch_bucket_size")),
        max_live_parameters=int(value("stage3_max_live_parameters")),
        max_reuse_distance=int(value("stage3_max_reuse_distance")),
        param_persistence_threshold=int(value("stage3_param_persistence_threshold")),
        model_persistence_threshold=int(value("model_persistence_threshold")),
        sub_group_size=int(value("sub_group_size")),
        contiguous_gradients=bool(value("contiguous_gradients")),
        overlap_comm=(stage == 3) if overlap is None else bool(overlap),
        offload_optimizer=offload_optimizer,
        offload_param=offload_param,
    )


# --------------------------------------------------------------------------------------------
# stage 1 / 2
# --------------------------------------------------------------------------------------------


def ipg_bucket_bytes(cfg: ZeroConfig, *, grad_bytes: float) -> float:
    """The IPG bucket(s) alive during backward. Stages 1-2: ``setup_buckets`` allocates one (two
    with overlap_comm) only with contiguous gradients (stage_1_and_2.py l.3260-3278); stage 3: one
    at init with contiguous gradients (stage3.py l.780-784). A bucket never needs to be larger than
    what it holds, but DeepSpeed allocates the configured size."""
    if not cfg.contiguous_gradients:
        return 0.0
    count = 2 if (cfg.overlap_comm and cfg.stage < 3) else 1
    return count * cfg.reduce_bucket_size * grad_bytes


def partition_numel(numel: float, dp: int) -> float:
    """Elements of one rank's partition: DeepSpeed pads the flat group to a multiple of dp (and of
    the NCCL alignment, 2 x 4 B): the ceiling."""
    return -(-numel // dp) if dp > 1 else numel


def sub_group_numel(cfg: ZeroConfig, partition: float) -> float:
    """Elements of the largest fp32 sub-group the stage-3 optimizer steps at once (stage3.py
    l.1213-1231: parameters are accumulated until a sub-group reaches ``sub_group_size``); stages
    1-2 step the whole partition of a parameter group at once."""
    if cfg.stage < 3:
        return partition
    return min(partition, float(cfg.sub_group_size))


@dataclass(frozen=True, slots=True)
class ZeroBuffers:
    """Bytes per GPU of ZeRO's own buffers (the model's weights, fp32 partitions and optimizer
    states are the planner's ordinary terms, divided as ``trainfit.memory.sharding`` says)."""

    ipg_buckets: float
    """Reduce bucket(s): stages 1-2 during backward only, stage 3 from init on."""
    grad_partition: float
    """The rank's gradient partition in the gradient dtype (stage 2: filled in backward and freed at
    the step; stage 3: allocated at init). 0 on the GPU with optimizer offload."""
    step_cast: float
    """At the step: the flat copy (gradient dtype) and the fp32 gradient of one group / sub-group,
    live together beside ``grad_partition``."""
    step_fp32_grad: float
    """The fp32 gradient held through the optimizer step (the flat copy freed)."""
    optimizer_flat_numel: float
    """Elements of the flat fp32 tensor one optimizer call steps (sizes torch AdamW's temporaries)."""
    offload_grad_staging: float = 0.0
    """Stage 1-2 offload: the GPU staging buffer of the largest parameter's gradient (l.659)."""
    persistent_params: float = 0.0
    """Stage 3: parameters below the persistence threshold, kept gathered on every rank (bytes)."""
    step_frees_grad_partition: bool = True
    """Stage 2: the gradient partition is freed before the optimizer runs (l.3128)."""


def zero_buffers(
    cfg: ZeroConfig, *, dp: int, trainable_numel: float, grad_bytes: float, largest_param: int,
    persistent_numel: float = 0.0, param_bytes: float = 2.0,
) -> ZeroBuffers:
    """ZeRO's own buffers for ``trainable_numel`` trained elements over ``dp`` ranks."""
    part = partition_numel(trainable_numel, dp)
    sub = sub_group_numel(cfg, part)
    buckets = ipg_bucket_bytes(cfg, grad_bytes=grad_bytes)
    if cfg.offload_optimizer:
        # the gradient partition, its fp32 form and the step are on the host
        staging = largest_param * grad_bytes if cfg.stage < 3 else 0.0
        return ZeroBuffers(ipg_buckets=buckets, grad_partition=0.0, step_cast=0.0, step_fp32_grad=0.0,
                           optimizer_flat_numel=0.0, offload_grad_staging=staging,
                           persistent_params=persistent_numel * param_bytes if cfg.stage == 3 else 0.0)
    return ZeroBuffers(
        ipg_buckets=buckets,
        grad_partition=part * grad_bytes,
        step_cast=sub * (grad_bytes + 4.0),
        step_fp32_grad=sub * 4.0,
        optimizer_flat_numel=sub,
        persistent_params=persistent_numel * param_bytes if cfg.stage == 3 else 0.0,
        step_frees_grad_partition=cfg.stage < 3,
    )


def persistent_numel(cfg: ZeroConfig, tensor_sizes: tuple[tuple[int, int], ...]) -> float:
    """Elements stage 3 keeps gathered: every parameter of at most the persistence threshold, in
    module order, up to the model threshold (parameter_offload.py l.317-327). ``tensor_sizes`` is
    ((numel, count), ...)."""
    total = 0.0
    for numel, count in tensor_sizes:
        if numel > cfg.param_persistence_threshold:
            continue
        room = cfg.model_persistence_threshold - total
        take = min(count, int(room // numel)) if numel else 0
        total += take * numel
    return total


# --------------------------------------------------------------------------------------------
# stage 3: the parameter coordinator
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GatheredParams:
    """Elements gathered (unsharded) by the stage-3 coordinator, beyond the persistent ones."""

    forward_peak: int
    """Most elements gathered at once in forward."""
    at_loss: int
    """Gathered when forward ends (kept for reuse: the head and the last layers)."""
    backward_peak: int
    """Most elements gathered at once in backward."""
    at_head: int = 0
    """Gathered while the last forward module (the head) runs, its own elements included."""


@lru_cache(maxsize=512)
def gathered_params(
    layers: tuple[tuple[int, ...], ...], *, embedding: int, head: int, tied: bool,
    prefetch_bucket_size: int, max_live_parameters: int, max_reuse_distance: int,
    recompute: bool, forward_only: bool = False,
) -> GatheredParams:
    """Simulate ``PartitionedParameterCoordinator`` over one training step.

    ``layers`` holds, per decoder layer, the element counts of its non-persistent submodules in
    forward order (q, k, v, o, gate, up, down, ...). The trace is: embedding, every layer's
    submodules, the head (the embedding's parameters again when tied); then backward: the head,
    each layer from last to first (its forward again first under checkpointing, then its submodules
    in reverse), the embedding. At each submodule the coordinator

    * gathers the submodule's parameters if they are not (fetch_sub_module),
    * prefetches the next parameters in the trace not yet gathered, up to
      min(max_live - gathered, prefetch_bucket) elements (l.452-488),
    * on release keeps the submodule's parameters when they occur again before
      ``max_reuse_distance`` elements of later submodules have been traversed (l.634-666).

    ``forward_only``: a no-grad forward (a frozen engine's pass, or the trained engine's log-prob pass): the trace
    ends at the head, no backward follows; ``forward_peak`` is the most it holds at once.
    """
    head_key = "embed" if tied else "head"
    trace: list[tuple[str, int]] = [("embed", embedding)]
    for i, mods in enumerate(layers):
        trace += [(f"{i}.{j}", n) for j, n in enumerate(mods)]
    fwd_end = len(trace) + (1 if head else 0)
    if head:
        trace.append((head_key, head))
        if not forward_only:
            trace.append((head_key, head))  # its backward
    for i in (() if forward_only else range(len(layers) - 1, -1, -1)):
        mods = layers[i]
        if recompute:
            trace += [(f"{i}.{j}", n) for j, n in enumerate(mods)]
        trace += [(f"{i}.{j}", n) for j in range(len(mods) - 1, -1, -1) for n in (mods[j],)]
    if not forward_only:
        trace.append(("embed", embedding))

    gathered: dict[str, int] = {}
    live = 0
    fetched_for: dict[str, int] = {}
    queue = 1
    fwd_peak = bwd_peak = at_loss = at_head = 0
    n = len(trace)
    for step, (key, numel) in enumerate(trace):
        if key not in gathered:
            gathered[key] = numel
            live += numel
        # prefetch ahead in the trace
        budget = min(max_live_parameters - live, prefetch_bucket_size)
        queue = max(queue, step + 1)
        pre = 0
        while queue < n and pre < budget:
            k2, n2 = trace[queue]
            fetched_for[k2] = max(fetched_for.get(k2, -1), queue)
            if k2 not in gathered:
                gathered[k2] = n2
                live += n2
                pre += n2
            queue += 1
        if step == fwd_end - 1:
            at_head = live
        if step < fwd_end:
            fwd_peak = max(fwd_peak, live)
        else:
            bwd_peak = max(bwd_peak, live)
        # release unless reused within the distance, or prefetched for a later use
        keep = fetched_for.get(key, -1) > step
        traversed = 0
        for k2, n2 in trace[step + 1:]:
            if keep or traversed >= max_reuse_distance:
                break
            if k2 == key:
                keep = True
            traversed += n2
        if not keep:
            live -= gathered.pop(key)
        if step == fwd_end - 1:
            at_loss = live
    return GatheredParams(forward_peak=fwd_peak, at_loss=at_loss, backward_peak=bwd_peak, at_head=at_head)
