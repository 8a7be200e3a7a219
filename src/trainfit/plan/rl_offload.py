"""The trainer's state moves to host memory and back in an RL step: the per-step state offload of a colocated
trainer (verl, NeMo RL) and the reference model's host swap, at the node's host-copy rates (``compute.offload``).

Pure: no torch.
"""

from __future__ import annotations

import re

from trainfit.catalog.gpus import GpuSpec
from trainfit.compute.offload import (
    first_touch_copy_bytes_per_s,
    host_copy_bytes_per_s,
    pageable_copy_bytes_per_s,
    staging_bytes_per_s_of,
)
from trainfit.compute.rates import DeviceRates
from trainfit.compute.training import PhaseTime
from trainfit.memory.params import routed_expert_params
from trainfit.memory.weights import count_scale, total_params, weight_bytes
from trainfit.methods.roles import (
    old_logprob_pass,
    train_nodes,
)
from trainfit.plan.rl_common import rl_phase
from trainfit.plan.time import rank_spec
from trainfit.spec.card import RunCard, pin_before
from trainfit.spec.enums import (
    FSDP_STRATEGIES,
    ComputeDtype,
    Dtype,
    Strategy,
)
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import TrainableSpec
from trainfit.units import BYTES_PER_DTYPE

STATE_OFFLOAD_PRESETS = ("nemo-rl",)
"""Frameworks whose trainer moves its state to host memory and back every step when colocated with its engine
(NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470 ``nemo_rl/algorithms/grpo.py``
``refit_policy_generation`` lines 1004-1079: ``offload_before_refit`` and ``offload_after_refit`` around the
refit of a colocated engine only; ``prepare_for_lp_inference`` / ``prepare_for_training`` bring the state back)."""


ONE_WEIGHT_ROUND_TRIP_PRESETS = ("skyrl",)
"""Frameworks whose colocated trainer moves its weights to the host and back once per step, whatever passes the step
runs: SkyRL's ``WorkerDispatch`` (NovaSky-AI/SkyRL @2e9c89afceb3ef7963748224373ad88882322c99
skyrl/backends/skyrl_train/workers/worker_dispatch.py) tracks what is on the GPU (``GPUState``) and reloads only what
is missing: ``forward`` (the old log-prob pass, l.201-229) brings the weights back, ``forward_backward`` (l.311-351)
only the optimizer (the weights are there), ``_prepare_for_weight_sync`` (l.590-598) sends the optimizer to the host
and keeps the weights for the sync, ``_finish_weight_sync`` (l.600-604) sends the weights after it. Without the old
log-prob pass ``forward_backward`` brings both. The copies are verl's Megatron offload functions (SkyRL
skyrl/backends/skyrl_train/distributed/megatron/megatron_utils.py l.203-408: Megatron-Core's buffer
``offload_to_cpu`` for the bf16 parameters, the gradient buffer freed, not copied; the fp32 main parameters and
Adam's two moments with ``.to("cpu", non_blocking=True)``, ``STATE_OFFLOAD_OPTIMIZER_BYTES``, pinned) and, under
FSDP2, ``model.to("cpu", non_blocking=True)`` and the AdamW states likewise (distributed/fsdp_utils.py l.67-110):
non-blocking device-to-host copies land in pinned memory (``_to_copy``: ``pin_out`` when ``non_blocking`` and the
target is the CPU, pytorch/pytorch aten/src/ATen/native/TensorConversions.cpp
@fc9325ea0d1cae1bbff1b67e6962e66fe562b39a), from PyTorch's caching host allocator after the first step. A reference
model (a separate actor group under ``colocate_all``) makes its own round trip for its pass: a colocated
full-weight SkyRL card places it on the host (``methods.roles.reference_placement`` returns ``RefPlacement.CPU``,
``REFERENCE_OFFLOAD_PRESETS``) and ``_offloaded_reference_bytes`` prices its bf16 shard once each way per step."""


STATE_OFFLOAD_OPTIMIZER_BYTES = 12
"""verl's Megatron offload per parameter of the rank's data-parallel shard: the distributed optimizer's fp32 main
parameter (``offload_megatron_copy_params``) and Adam's two fp32 moments (``offload_megatron_optimizer``:
``exp_avg``, ``exp_avg_sq``), verl-project/verl verl/utils/megatron_utils.py lines 663-776
@b9873ee98f5ee513a460a7a41623262ac4a831e9."""


VERL_FSDP2_MODEL_CPU_SINCE = (0, 6)
"""The verl release whose FSDP2 weights offload runs ``model.cpu()`` (verl/utils/fsdp_utils.py
``offload_fsdp2_model_to_cpu``: verl-project/verl e68dcb788, #2843, 2025-08-01, first in v0.6.0; still so
@ea56e9ac47c3dfed65c028899012bb67f41f4c83): a synchronous copy into host memory allocated anew each call, and
``model.to(device)`` back from it (pageable). Before it, from db84a4007 (#1026, 2025-05-02, FSDP2 in the workers)
through v0.5.0, each parameter went ``param.data.to(torch.device("cpu"), non_blocking=True)`` and back
``.to(device, non_blocking=True)`` (fsdp_utils.py l.164-195 @94d681dce4911c3ad6abb011a2d03c62d318868d, verl
0.5.0.dev): non-blocking copies to the host land in pinned memory from PyTorch's caching host allocator (``_to_copy``
``pin_out``, the module docstring's SkyRL note), so both ways run at the pinned rate. c4b389ada (#7347, 2026-08-18)
went back to non-blocking copies, in no release yet: a pin from 0.6 on, or none, keeps ``model.cpu()``."""


VERL_MEGATRON_PINNED_REUSE_SINCE = (0, 8)
"""The verl release whose Megatron param offload copies each DDP buffer into one pinned host buffer kept across
offloads (``cpu_data.copy_(param_data, non_blocking=False)`` into a ``torch.empty(..., pin_memory=True)`` made once:
verl-project/verl 03bc8411c, #6193, 2026-04-30, first in v0.8.0; verl/utils/megatron_utils.py
``offload_megatron_model_to_cpu`` l.524-600 @b9873ee98f5ee513a460a7a41623262ac4a831e9). From cc8fca504 (#1162,
2025-04-27, first in v0.4.0) until then every offload ran ``buffer.param_data.cpu_data =
buffer.param_data.data.cpu().pin_memory()`` (volcengine/verl verl/utils/megatron_utils.py l.341
@c711dd74172514f33532c3a67016948b054a7d86 and l.426 @b178a3cd56f58b2d502255daba591e92833930a7): ``.cpu()`` is a
synchronous copy into host memory allocated anew each call (``compute.offload.PAGEABLE_FIRST_TOUCH_BYTES_PER_S``:
glibc maps the fresh pages, the kernel faults and zeroes them), then ``pin_memory()`` copies that into pinned memory.
The way back, ``param_data.copy_(cpu_data, non_blocking=True)`` (l.376 @c711dd74), reads pinned memory either way."""


VERL_MEGATRON_PARAM_OFFLOAD_SINCE = (0, 4)
"""The verl release whose Megatron actor offloads its parameters at all: verl-project/verl cc8fca504 (#1162,
2025-04-27, first in v0.4.0) added ``offload_megatron_model_to_cpu`` with the ``.cpu().pin_memory()`` copy
(``VERL_MEGATRON_PINNED_REUSE_SINCE``). Before it the Megatron worker offloads only the reference ("Currently, we only
support reference model param offload": volcengine/verl verl/workers/megatron_workers.py l.111-115 and l.423-437
@070ed6ac3f6aea13a916556794f34e8f2bde7dde, v0.3.0.post1), per parameter with ``param.data.to('cpu',
non_blocking=True)`` (verl/utils/megatron_utils.py ``offload_megatron_param_and_grad`` l.220-231, same commit): a
pin before 0.4 is not the fresh-pages path (``verl_megatron_fresh_host_weights`` False), and the actor's
``_is_offload_param``, ``_is_offload_grad`` and ``_is_offload_optimizer`` are set False whatever the config says (same
file and commit, l.111-115): a card with ``rollout.trainer_offload`` set under such a pin is refused
(``verl_megatron_offload_refusal``)."""


NEMO_RL_MEGATRON_OPTIMIZER_BYTES = 10
"""NeMo RL's Megatron worker per parameter of the rank's data-parallel shard. ``move_optimizer`` moves the tensors
of the inner optimizer's ``state`` (megatron_policy_worker.py lines 1500-1515 @9dbd9adc); the defaults set
``use_precision_aware_optimizer: true`` (examples/configs/grpo_math_1B.yaml l.156, and the DeepSeek-V3
performance recipe), so that inner optimizer is Transformer Engine's FusedAdam with ``master_weights=True``
(NVIDIA/Megatron-LM megatron/core/optimizer/__init__.py lines 365-387 @e2e5a6a11bcc517ebd9490f0df32686aaee19d78,
the Megatron-LM of the same date) and its state holds ``exp_avg`` and ``exp_avg_sq`` in fp32 (4 + 4 B,
``optimizer_config.py`` ``exp_avg_dtype`` / ``exp_avg_sq_dtype`` defaults) and ``master_param`` as the int16
remainder of the fp32 master beside the bf16 parameter (2 B: ``store_param_remainders: bool = True``, same file;
NVIDIA/TransformerEngine transformer_engine/pytorch/optimizers/fused_adam.py ``_initialize_state`` l.374-375 @v2.8.0,
the version NeMo RL pins). Not verl's 12 B: there the fp32 main parameter is a separate tensor."""


NEMO_RL_DTENSOR_PARAM_BYTES = 4
"""NeMo RL's DTensor (FSDP2) worker keeps its parameter shards in fp32 whatever ``policy.precision`` says
("Always load in float32 for master weights", nemo_rl/models/automodel/setup.py l.126 @9dbd9adc; FSDP2 casts to
bf16 only for compute, ``param_dtype=dtype`` l.272)."""


NEMO_RL_DTENSOR_OPTIMIZER_BYTES = 8
"""``torch.optim.AdamW`` (grpo_math_1B.yaml ``policy.optimizer.name``) over those fp32 shards: ``exp_avg`` and
``exp_avg_sq``, 4 B each (``step`` is a host scalar: ``foreach: False, fused: False``, NVIDIA-NeMo/RL
``examples/configs/grpo_math_1B.yaml`` l.78-88 @27d0af945b96c5bf9fa928bf45fd1a6ce016632d)."""


NEMO_RL_LOGPROB_OPTIMIZER_KEPT_SINCE = (0, 5)
"""The NeMo RL release whose ``prepare_for_lp_inference`` keeps the optimizer state on the GPU unless
``policy.offload_optimizer_for_logprob`` says otherwise (default false): NVIDIA-NeMo/RL
8615ee9ab9138febb79cb165a544c2e936cb80e0 ("fix: Make the optimizer offloading optional (#1404)", 2025-11-06, first in
v0.5.0). Before it, at v0.3.x and v0.4.0, both policy workers' ``prepare_for_lp_inference`` ends with
``self.offload_before_refit()`` in every placement, which moves the optimizer state to the host with ``v.to("cpu")``,
and ``prepare_for_training`` moves it back with ``v.to("cuda")`` before the update
(nemo_rl/models/policy/megatron_policy_worker.py l.2004-2029 and l.2034-2065, dtensor_policy_worker_v2.py
l.1759-1801, dtensor_policy_worker.py l.1798-1805 @c751f811217db7df0d4c94abdeaada6626cfc150, tag v0.4.0), and both
GRPO loops call the pair every step, ``grpo_train`` l.1114 / l.1127 and the one-step-off ``async_grpo_train``
l.1978 / l.1991 (nemo_rl/algorithms/grpo.py, same commit). Colocated, the refit's own ``offload_before_refit`` has
already moved the state, so the log-prob call's copy is a no-op (the Megatron loop tests ``v.is_cuda``) and the
colocated round trip is the one priced; not colocated, this is the state's only trip each step
(``nemo_rl_logprob_optimizer_trip``). The pull request times ``logprob_inference_prep`` + ``training_prep`` before
and after: Qwen3-235B 10 s -> 1 s, Qwen3-30B 13 s -> about 1 s (https://github.com/NVIDIA-NeMo/RL/pull/1404,
description of 2025-10-22; layouts not stated, so a check on the size, not a fit: the plan prices the trip at 15.5 s
and 15.8 s on NeMo RL v0.4's H100 1-step-off Qwen3-30B-A3B and Qwen3-235B rows)."""


def fsdp_offload_bytes(card: RunCard, spec: ModelSpec, *, shard_ranks: int) -> tuple[float, float, float]:
    """(weights, optimizer state, gradients) one FSDP rank moves to the host and back per offload round trip.

    verl's FSDP worker (volcengine/verl @2c8b2b99 verl/utils/fsdp_utils.py ``offload_fsdp_model_to_cpu``,
    ``offload_fsdp2_model_to_cpu``, ``offload_fsdp_optimizer``) moves each rank's *local shard* of the flat
    parameters, in the dtype the actor was built in (fsdp_workers.py l.178-180: fp32 for the actor unless
    ``model_dtype`` says otherwise: the card's master copy), and the optimizer's state tensors of that
    shard; gradients are not moved (``zero_grad`` has freed them). Not Megatron's layout (full bf16 weights
    of a model-parallel rank, a bf16 gradient buffer, the distributed optimizer's fp32 main copy)."""
    from trainfit.memory.lora import lora_trainable_params
    from trainfit.memory.optimizer import optimizer_state_bytes
    from trainfit.memory.params import param_tensors
    from trainfit.plan.resolve import trainable_spec
    from trainfit.plan.terms import lora_tensors, trained_dtype_bytes
    from trainfit.spec.enums import Optimizer

    train_bytes, _, use_master, state_bytes = trained_dtype_bytes(card)
    n = float(total_params(spec))
    lora = trainable_spec(card).lora
    opt = card.precision.optimizer
    if lora is None:
        weights = (4.0 if use_master else train_bytes) * n
        trained, tensors = n, param_tensors(spec)
    else:  # the frozen base in the weights' dtype, the adapter in its own
        weights = BYTES_PER_DTYPE[card.weights_dtype.value] * n
        trained, tensors = lora_trainable_params(spec, lora) * count_scale(spec), lora_tensors(spec, lora)
        weights += train_bytes * trained
    # the optimizer's own state bytes, as the memory terms count them (plan.terms.step_terms)
    optimizer = optimizer_state_bytes(optimizer=opt, params=trained, tensors=tensors, state_bytes=state_bytes)
    if lora is None and opt not in (Optimizer.ADAMW, Optimizer.PAGED_ADAMW):
        optimizer *= count_scale(spec)
    return weights / shard_ranks, optimizer / shard_ranks, 0.0


def nemo_rl_offload_bytes(card: RunCard, spec: ModelSpec, *, train_gpus: int) -> tuple[float, float]:
    """(pinned, pageable) bytes one training GPU of NeMo RL's colocated trainer copies to the host per step; the
    same bytes come back (NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470, ``nemo_rl/models/policy/workers/``).

    Megatron worker (``megatron_policy_worker.py`` lines 1360-1515): ``offload_before_refit`` frees the gradient
    buffers (``move_model(..., "cpu", move_params=False, move_grads=True)``) and moves the optimizer state with
    ``v.to("cpu")`` (pageable, ``NEMO_RL_MEGATRON_OPTIMIZER_BYTES`` per parameter of the rank's data-parallel
    shard, the experts' over the expert-data-parallel ranks); ``offload_after_refit`` moves the parameter buffers;
    ``prepare_for_lp_inference`` brings the parameters back, ``prepare_for_training`` the optimizer state.
    Megatron-Core's ``_ParamAndGradBuffer.offload_to_cpu`` copies ``param_data`` (the rank's bf16 parameters) into
    a pinned host buffer (``.cpu().pin_memory()`` once, then ``copy_``) and only frees ``grad_data``
    (``storage().resize_(0)``); ``reload_from_cpu`` re-allocates it and ``zero_()``s it on the device
    (NVIDIA/Megatron-LM megatron/core/distributed/param_and_grad_buffer.py @2ff0f099ffc30ffd152e3e29e921a1609d00855c
    l.780-805, the submodule of NeMo RL v0.3.1, unchanged @d98e8a64ddf34856e74b24714e3bedb2f5a39553): no gradient
    byte crosses the host link (the memset, 2 B per parameter at HBM speed, is not counted).

    DTensor (FSDP2) worker (``dtensor_policy_worker_v2.py`` lines 1399-1495): ``offload_after_refit`` runs
    ``model.to("cpu")``, the rank's shard of every parameter (fp32, ``NEMO_RL_DTENSOR_PARAM_BYTES``; FSDP shards over
    the data x context ranks and tensor parallel splits each shard again: 1 / world), and ``offload_before_refit``
    the AdamW states of that shard (``NEMO_RL_DTENSOR_OPTIMIZER_BYTES``), both pageable. ``model.to`` would also move
    each ``.grad``, but ``train`` ends with ``optimizer.zero_grad()`` ("release gradient memory before rollouts",
    l.596-597, since NVIDIA-NeMo/RL 43928aae, 2025-10-02): none are left. Earlier releases (v0.3.1) kept the fp32
    gradient shards, 4 B more per parameter of the shard each way; not modelled (the preset follows current code).
    At v0.3.0 the DTensor worker's ``train`` calls ``optimizer.zero_grad()`` only before each global batch
    (dtensor_policy_worker.py l.561 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf), so the last batch's gradient shards
    are still on the GPU when ``offload_after_refit`` runs ``model.to("cpu")``, which moves each ``.grad`` with its
    parameter (``nn.Module._apply``); 43928aae is in v0.4.0, not in v0.3.1. Counted for cards pinned before 0.4 it
    moves ten scored points: the four v0.3 DTensor step rows and both 70B DTensor refit rows closer (70B refit -16 ->
    +5 %, -37 -> -21 %), the two 8B DTensor refit rows further (+140 -> +212 %, +60 -> +108 %, out of 2x) and the
    B200 Qwen2.5-1.5B rows further (refit +15 -> +43 %). Not applied: the 8B and 70B refits already disagree on the
    host copy rate (the known gap below), and these bytes widen that disagreement.

    Not colocated, nothing moves from v0.5.0 on: ``prepare_for_lp_inference`` offloads the optimizer only with
    ``offload_optimizer_for_logprob`` (default false, grpo_math_1B.yaml l.83), and the Megatron worker's gradient
    buffers are freed, not copied. Before it (v0.3.x, v0.4.0) ``prepare_for_lp_inference`` called
    ``offload_before_refit`` in every placement (megatron_policy_worker.py l.2004-2007
    @c751f811217db7df0d4c94abdeaada6626cfc150), so a split trainer moved its optimizer state each step:
    ``nemo_rl_logprob_optimizer_trip`` (``NEMO_RL_LOGPROB_OPTIMIZER_KEPT_SINCE``), priced by
    ``trainer_state_offload_phase``.

    v0.3.0 (@b1c86a816c5e2b4ca41ece193624a38dc62e6fdf) moves the same state at the same places:
    ``offload_before_refit`` / ``offload_after_refit`` (dtensor_policy_worker.py l.1274-1310, megatron_policy_worker.py
    l.1547-1607) inside ``refit_policy_generation`` (grpo.py l.396-455, timer ``prepare_for_generation`` l.542); its
    ``prepare_for_lp_inference`` calls ``offload_before_refit`` again, a no-op by then (the states are on the host:
    ``v.to("cpu")`` of a host tensor, or the Megatron loop's ``v.is_cuda`` test), and ``prepare_for_training`` brings
    them back before each update, so each refit copies them out afresh.
    No configuration flag gates these copies at v0.3.0 (checked for the Llama-3.1-8B refit rows, a null result):
    neither worker's ``offload_before_refit`` reads one (dtensor_policy_worker.py l.1274-1285, megatron_policy_worker.py
    l.1547-1580), only the colocated branch of ``refit_policy_generation`` calls them (grpo.py l.411-413, l.453-455),
    and the blog's configs keep the state on the GPU between refits: examples/configs/grpo_math_8B.yaml sets
    ``fsdp_offload_enabled: false`` and inherits ``dtensor_cfg.cpu_offload: False`` (grpo_math_1B.yaml l.48), so
    ``prepare_for_training`` brings the AdamW states back to the GPU (dtensor_policy_worker.py l.1247-1272), and
    grpo_math_8B_megatron.yaml / grpo_math_1B_megatron.yaml set no CPU offload, while the Megatron
    ``prepare_for_training`` moves every host state tensor back unconditionally (megatron_policy_worker.py
    l.1527-1545). So the planned ``to_host`` runs inside the Refit timer in all four 8B rows.

    v0.4.0, v0.5.0 and v0.6.0 (@c751f811217db7df0d4c94abdeaada6626cfc150, @6c7089300fded94abfa49bb9cbf9eb357d862461,
    @5fb588932bf835506a8a5bac01de4f8c7ab0a065) run the same colocated sequence each step, read in full: grpo.py
    ``refit_policy_generation`` (l.759-830 / 904-977 / 1097-1191: ``offload_before_refit``, vLLM wakes its weights,
    the CUDA-IPC stream, ``offload_after_refit``, vLLM wakes its KV cache), vLLM ``sleep(level=1)`` after generation
    (vllm_worker.py l.804 / 820 / 1009), ``prepare_for_lp_inference`` and ``prepare_for_training`` (Megatron worker
    l.2004-2033 / 2220-2261 / 1112-1153; ``move_optimizer`` ``v.to("cpu")`` / ``v.to("cuda")``). Each copy is priced
    here, in ``rl_sync.sleep_wake_phase`` or in the sync; the rest is ``gc.collect`` and ``torch.cuda.empty_cache``
    calls.
    From v0.5.0 the colocated refit also ends with vLLM's ``process_weights_after_loading`` over the model
    (vllm_backend.py l.150 @6c708930, l.201 @5fb58893; the NCCL path does not call it), not priced. The 1-step-off
    rows of the same tables do not separate this from the trainer: their planned trainer (log-probs, update,
    reference swap) is hidden under generation with a margin of 1.6-2.4x (Qwen3-30B-A3B, H100), 3.5x (Qwen3-235B)
    and 5x (DeepSeek-V3), while the H100 on-policy MoE rows that plan short (-8 to -35 %) would be closed by a
    trainer 1.6-1.7x, 1.5-3.5x and 5-8x the plan; NeMo RL v0.3's published Qwen3-30B-A3B log-prob and update timers
    plan -61 / -69 % (``compute.moe_time``, per-token evidence).

    Known gap, the NeMo RL v0.3 blog's and NVIDIA-NeMo/RL issue #959's Llama-3.1-8B refit rows (one node, 8 GPUs):
    published 4 s (DTensor) and 5 s (Megatron), 6 s and 8 s in the reruns, while this phase's first-touch copies alone
    are 8.6 s (12 GB pageable per GPU) and 7.2 s (10 GB) at ``PAGEABLE_FIRST_TOUCH_BYTES_PER_S``. The 70B rows of the
    same code move about as much per GPU (11-13 GB) and are planned within 20 % of the blog. A copy into fresh pages
    measured on one core of a Sapphire Rapids-class CPU (``benchmarks/host_first_touch.py``: 2.4-2.5 GB/s for
    tensors of 28-256 MiB against 6-12 GB/s into pages already present) would put the blog's 8B rows at +12 / +48 %
    but its 70B rows at -24 / -43 % (the reruns' at -59 / -57 %) and NeMo RL's DeepSeek-V3 steps from -27 to -34 %,
    so the rate is not what separates them. It is not applied. Nothing read in v0.3.0 moves fewer bytes on one node
    than on eight. Since the 70B DTensor refit carries its two-stage ``full_tensor()`` (TP, then the FSDP ranks over
    the whole tensor on one NIC each: ``compute.sync.dtensor_full_tensor_gather_seconds``, 5.3 s more), that rate
    would put the two 70B DTensor refits at -8 / -31 % and the four 8B refits at +48 / -2 / +12 / -30 %, but the
    70B Megatron refits at -23 / -58 % and 38 scored points move, 30 of them further (the NeMo RL step rows, the B200
    Qwen2.5-1.5B refit +15 -> -22 %): still not one rate. The 8B rows' per-GPU tensors (fp32 shards of 2-29 MB, the
    embedding and head 263 MB) and the 70B's (0.5-15 MB, 66 MB) fall on the same sides of glibc's 32 MiB mmap
    ceiling, so the allocator does not separate them either.

    Checked and not the gap, the refit path itself (the Refit column's other terms). Of the 8B DTensor plan's
    9.59 s, the CUDA-IPC sync is 0.21 s (gather 0.085, copies 0.021, host per tensor 0.099) and vLLM's weight wake
    0.78 s; this phase's ``to_host`` is 8.60 s. Zeroing the whole sync moves the blog's 8B DTensor row from +140 to
    +135 % and its Megatron twin from +74 to +72 %, so a cheaper IPC path cannot close them. The ZMQ streaming
    refit with a pre-allocated buffer (``stream_weights_via_ipc_zmq``) is not in v0.3.0: it arrived in
    NVIDIA-NeMo/RL 3a69c2168 (#1267, 2025-10-22). v0.3.0 groups the keys by ``NRL_REFIT_BUFFER_MEMORY_RATIO``
    (0.8 of free memory, dtensor_policy_worker.py l.1176-1185; 0.2 in megatron_policy_worker.py l.1410-1414)
    measured after ``offload_before_refit`` (grpo.py l.411-430 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf). For the
    8B that leaves tens of GB, so the 16 GB bf16 model goes in one or two groups of per-tensor ``reduce_tensor``
    handles, as priced. Zeroing ``to_host`` instead gives -75 % (blog) and -84 % (rerun): the timer does run the
    copy. What the published rows leave for it, after the planned sync and wake, as a share of the planned
    ``to_host``: 8B DTensor 0.35 (blog) / 0.58 (rerun); 70B DTensor 0.70 / 1.22; 8B Megatron 0.53 / 0.91; 70B
    Megatron 0.94 / 2.28. On both clusters the 70B leaves about twice the 8B's share per byte moved (2.0x and 2.1x
    DTensor; 1.8x and 2.5x Megatron), for about the same bytes per GPU (12.0 and 13.2 GB, DTensor). Host bandwidth
    is one rate per cluster, so a rate cannot give that factor. Either the 70B's refit holds seconds this plan
    does not price (beyond its 6.45 s DTensor / 3.87 s Megatron gather), or the 8B's copy is cheaper per byte for a
    reason not found in v0.3.0's code. Not applied.
    One such cost read at v0.3.0 points the other way. The DTensor worker sends one CUDA-IPC handle per tensor,
    always: ``serialized = (False, all_handles)`` in ``get_weights_ipc_handles``, dtensor_policy_worker.py
    l.1188-1226. The Megatron worker packs a group of 32 tensors or more into one buffer per dtype
    (``NEMO_RL_MEGATRON_IPC_TENSOR_PACKING_THRESHOLD``, megatron_policy_worker.py l.1447-1453,
    @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf). Priced as ``compute.sync.S_PER_TENSOR_IPC`` (2.5 ms) instead of the
    bucketed 0.3 ms, the DTensor refits gain 291 x 2.2 ms = 0.64 s (8B) and 723 x 2.2 ms = 1.59 s (70B). That moves
    the 8B DTensor rows further out (+140 -> +156 %, +60 -> +71 %) and the 70B's to +30 / -3 %. Not applied: it
    raises the very rows that are already over.
    Nor do the averaged steps skip refits. After a validation step the validation runs the refit itself, so the
    next step's timer only wakes the engine (grpo.py l.675-688, ``POLICY_GENERATION_STALE = False``). With
    ``val_period`` 10 (grpo_math_1B.yaml l.9) and steps logged as ``step + 1`` (l.803-804), those are steps 11, 21
    and 31. Steps 22-29, the blog's average, hold none whether counted from 0 or 1.
    The 8B pair is also in the wrong order. Per GPU, the DTensor refit moves 12.05 GB pageable. The Megatron refit
    moves 10.04 GB pageable and 16.06 GB pinned (the full bf16 buffer: data parallel only). Its sync is also 0.11 s
    shorter. So with one pageable rate ``f`` and one pinned rate ``p``, Megatron minus DTensor is
    16.06 / p - 2.01 / f - 0.11 s: -0.90 s as planned (p 25, f 1.4 GB/s). Published it is +1 s (blog) and +2 s
    (rerun). Take ``f`` as the DTensor rows imply it, 4.0 and 2.4 GB/s. Then ``p`` must be 10 and 5.5 GB/s, not
    25. Or the Megatron refit holds 1.5-3 s that neither the bytes nor the sync account for.

    Checked, v0.3.0's lock-step refit groups (a null result; NVIDIA-NeMo/RL
    @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf). Every call of ``refit_policy_generation`` waits on all workers
    (``ray.get`` in lm_policy.py l.540-548 for the two offloads), so no copy leaves the Refit timer. The CUDA-IPC
    update runs one group of keys at a time: per group ``get_weights_ipc_handles`` on every worker, then
    ``update_weights_from_ipc_handles`` on every engine (grpo.py l.419-433). ``prepare_weights_for_ipc`` sizes the
    groups from the smallest NVML free memory over the workers, read after ``offload_before_refit`` and the vLLM
    weight wake (lm_policy.py l.468-509). The DTensor worker takes 0.8 of it and counts each key at its full fp32 size
    (dtensor_policy_worker.py l.1137-1146, l.1182). The Megatron worker takes 0.2 and counts the TP-gathered bf16
    size (megatron_policy_worker.py l.1393-1413, refit_utils.py ``get_param_info`` l.164-209). On an 80 GiB card,
    free memory is the card less the trainer's resident state (fp32 shard and v0.3.0's gradient shard, or the bf16
    buffer) and vLLM's woken bf16 weights; CUDA contexts and graphs are left out, so these counts are lower bounds.
    The groups below come from the driver's greedy split over the Llama keys in state-dict order (lm_policy.py
    l.491-509):
    * 8B DTensor: 32.1 GB of keys against 49.4 GB, 1 group;
    * 8B Megatron: 16.1 GB against 10.8 GB, 2 groups;
    * 70B DTensor: 282 GB against 33.4 GB, 9 groups (vLLM TP 4 holds 35.3 GB a GPU);
    * 70B Megatron: 141 GB against 8.4 GB, 18 groups.
    Replace ``PAGEABLE_FIRST_TOUCH_BYTES_PER_S`` with the rate measured on this project's CPU
    (2.45 GB/s, ``benchmarks/host_first_touch.py``). The published Refit columns minus this plan are then, in the
    same order: blog -1.9 / -0.6 / +1.2 / +3.2 s, rerun +0.1 / +2.4 / +6.2 / +15.2 s. On both clusters the
    residual grows with the group count. A line through the four points has a slope of 0.28 s a group (blog,
    intercept -1.6 s) and 0.84 s a group (rerun, intercept -0.3 s), and every row lies within 0.6 s (blog) or 1.1 s
    (rerun) of it. The rerun's cluster moved its one-node 8B refits by 2-3 s and its eight-node 70B refits by 5-12 s,
    which is what a cost per group round trip across nodes would do. So a fixed cost per lock-step group, with the
    host rate measured here, would account for all eight rows. Nothing read in the code prices it. Per group there
    is one Ray call per worker and one per engine. There is no device synchronisation or ``empty_cache`` per group
    (vllm_backend.py ``update_weights_from_local_ipc_handles`` l.125-187 ends with ``load_weights``). The per-key
    gathers, handles and loads are priced per key already. The one host step per group and worker besides the Ray
    calls is ``report_device_id`` (dtensor_policy_worker.py l.1216, megatron_policy_worker.py l.1443). It opens and
    closes NVML on every call: ``get_device_uuid`` runs ``pynvml.nvmlInit()`` and ``nvmlShutdown()`` around one
    UUID query (nemo_rl/utils/nvml.py l.21-36 and l.55-78). No source read times ``nvmlInit`` on an eight-GPU H100
    host, and no GPU is at hand here to time it. Nor is it the driver's relay of the handles (a null result): every
    training rank's ``reduce_tensor`` handles pass through the one driver process, unpickled from the ``ray.get``
    and pickled again to the engines (lm_policy.py l.511-526, vllm.py l.1939-1978), ``train_world x keys`` of them
    per refit, but ``benchmarks/nemo_rl_v03_handle_relay_cpu.py`` times that at 1-2 us a handle on this project's
    CPU (an AMD EPYC): 0.003 s for the 8B DTensor refit's 2,328 handles and 0.08-0.10 s for the 70B's 46,272,
    against the 70B DTensor refit's residual of 1.2 s (blog) and 6.2 s (rerun) at the host rate measured here
    (above). The Megatron worker packs its groups into one handle per dtype, so it relays fewer. The one public figure on the group count is the PR that
    set these ratios: doubling the Megatron ratio from 0.1 to 0.2 (half the groups, the same bytes) took a DeepSeek-V3
    refit (Megatron, vLLM TP 64) from 105 s to 55 s (NVIDIA-NeMo/RL pull request #638, description of 2025-07-10,
    https://github.com/NVIDIA-NeMo/RL/pull/638, read 2026-12-04). It states neither the group count nor the free
    memory, so it gives no cost per group. Not applied: no source measures a group's round trip, the slope would be
    read off these four rows, and the two clusters would need values 3x apart.

    Checked again for the three single-node Llama-3.1-8B refit rows beyond 50 % (2026-12-05, a null result; nothing
    changed). Bytes, read at v0.3.0 (@b1c86a816c5e2b4ca41ece193624a38dc62e6fdf): the code moves no fewer than
    planned. The DTensor worker moves the fp32 shard, ``exp_avg`` and ``exp_avg_sq`` (12 B a parameter over 8:
    12.05 GB), plus the fp32 gradient shards the last update left (16 B, 16.06 GB). The Megatron worker's state is
    10 B of its data-parallel shard: Megatron-LM's submodule commit 2ff0f099ffc30ffd152e3e29e921a1609d00855c passes
    ``master_weights=True`` and ``store_param_remainders`` (default True) to TE FusedAdam 2.3.0
    (megatron/core/optimizer/__init__.py l.338-350, optimizer_config.py l.57-71). Its bf16 buffer, pinned after the
    first step (``param_data_cpu.copy_``, param_and_grad_buffer.py l.789-792 at the same submodule commit), adds
    16.06 GB. The DTensor refit also runs ``gc.collect()`` and ``torch.cuda.empty_cache()`` five times a worker
    (dtensor_policy_worker.py l.1171, l.1283, l.1302, l.1327, l.1333): not priced, and pricing them would only
    lengthen these rows.
    What the rows imply, once the planned sync and wake (0.99 s) are taken out, is a copy into fresh pages of
    4.0 GB/s per GPU (blog) and 2.4 GB/s (#959 rerun) at 12.05 GB, or 5.3 and 3.2 GB/s at v0.3.0's 16.06 GB. The
    B200 Qwen2.5-1.5B row, on Google Cloud A4 virtual machines, implies 1.7 GB/s (2.3 GB) or 2.3 GB/s (3.1 GB).
    The same configuration's Refit also differs between the blog's cluster and the rerun's: 4 -> 6 s, 5 -> 8 s,
    15 -> 20 s and 14 -> 26 s. So the host moves the column by 1.3-1.9x, as much as the 8B rows' planned error.
    No card field names the host's fault path (bare metal or virtual machine, transparent huge pages).
    Full-benchmark sweeps of ``PAGEABLE_FIRST_TOUCH_BYTES_PER_S`` (1,373 rows; before: all 10.1 %, weight sync
    23.8 %, RL steps 14.6 %, 46 rows beyond 50 %, 54 of 62 weight syncs within 2x, NeMo RL rows 14.7 %):
    * 2.45 GB/s (``benchmarks/host_first_touch.py``): 10.2 / 24.4 / 14.5 %, 44 beyond 50 %, 54 within 2x (the
      blog's 8B DTensor refit +140 -> +48 % comes in; the rerun's 70B Megatron refit -44 -> -58 % goes out),
      NeMo RL rows 15.9 %;
    * 4.0 GB/s: 10.3 / 28.6 / 15.3 %, 45 beyond 50 %, 54 within 2x; the 8B refits go to 0 / -19 / -33 / -50 % and
      the 70B refits to -22 / -36 / -41 / -66 %;
    * v0.3.x gradient shards added (DTensor, ``software.nemo-rl`` before 0.4): 26.6 % weight sync and 53 within 2x
      at 1.4 GB/s; at 2.45 GB/s 10.2 / 24.4 / 14.3 %, 45 beyond 50 %, 54 within 2x.
    Each trades the 8B rows against the multi-node and B200 rows and worsens the weight-sync median by 0.6 points
    or more. Tensor size does not separate them either: ``benchmarks/host_first_touch.py`` copies 8 MiB tensors
    into fresh memory at 6.2 GB/s and 28-256 MiB ones at 2.45 GB/s. The 70B's shards (TP 8 x FSDP 8: 0.5-14 MiB,
    63 MiB embedding) are smaller than the 8B's (2-28 MiB, 250 MiB), so by that measurement the 70B would copy
    faster per byte, not slower. The rate stays at 1.4 GB/s."""
    from trainfit.memory.lora import lora_trainable_params
    from trainfit.plan.resolve import trainable_spec

    p = card.parallel
    if p.strategy in FSDP_STRATEGIES:  # the DTensor worker: no pipeline stages
        n = float(total_params(spec))
        lora = trainable_spec(card).lora
        trained = n if lora is None else lora_trainable_params(spec, lora) * count_scale(spec)
        shard = max(1, train_gpus)
        return 0.0, (NEMO_RL_DTENSOR_PARAM_BYTES * n + NEMO_RL_DTENSOR_OPTIMIZER_BYTES * trained) / shard
    weights, optimizer_params = _megatron_rank_state(card, spec, train_gpus=train_gpus)
    return weights, NEMO_RL_MEGATRON_OPTIMIZER_BYTES * optimizer_params


def nemo_rl_logprob_optimizer_trip(card: RunCard) -> bool:
    """Whether a NeMo RL trainer that is not colocated with its engine still moves its optimizer state to the host and
    back every step: the ``nemo-rl`` preset, a split placement, the state on the GPU (``parallel.offload`` none) and a
    ``software.nemo-rl`` pin before ``NEMO_RL_LOGPROB_OPTIMIZER_KEPT_SINCE`` (the log-prob call's
    ``offload_before_refit``). No pin, or one from 0.5 on: False (the current code keeps the state on the GPU)."""
    from trainfit.spec.enums import Offload, Placement

    return (card.preset in STATE_OFFLOAD_PRESETS and card.rollout.placement is not Placement.COLOCATE
            and card.parallel.offload is Offload.NONE
            and pin_before((card.software.model_extra or {}).get("nemo-rl"), NEMO_RL_LOGPROB_OPTIMIZER_KEPT_SINCE))


def nemo_rl_optimizer_bytes(card: RunCard, spec: ModelSpec, *, train_gpus: int) -> float:
    """Bytes of optimizer state one training GPU of NeMo RL's trainer holds, which ``offload_before_refit`` moves with
    ``v.to("cpu")`` (pageable): the Megatron worker's ``NEMO_RL_MEGATRON_OPTIMIZER_BYTES`` per parameter of the rank's
    data-parallel shard (the experts' over the expert-data-parallel ranks, ``_megatron_rank_state``), the DTensor
    worker's ``NEMO_RL_DTENSOR_OPTIMIZER_BYTES`` per trained parameter over the training GPUs."""
    from trainfit.memory.lora import lora_trainable_params
    from trainfit.plan.resolve import trainable_spec

    if card.parallel.strategy in FSDP_STRATEGIES:
        lora = trainable_spec(card).lora
        trained = float(total_params(spec)) if lora is None else lora_trainable_params(spec, lora) * count_scale(spec)
        return NEMO_RL_DTENSOR_OPTIMIZER_BYTES * trained / max(1, train_gpus)
    return NEMO_RL_MEGATRON_OPTIMIZER_BYTES * _megatron_rank_state(card, spec, train_gpus=train_gpus)[1]


def _megatron_rank_state(card: RunCard, spec: ModelSpec, *, train_gpus: int) -> tuple[float, float]:
    """(bf16 weight bytes, parameters its optimizer shard holds) of one Megatron-Core rank: its TP/PP/EP shard
    (``rank_spec``), the dense parameters over the data-parallel ranks and the experts over the
    expert-data-parallel group, world / (etp x ep x pp) (Megatron-Core's distributed optimizer,
    ``ParallelLayout.expert_data_group``)."""
    p = card.parallel
    shard = rank_spec(spec, tp=p.tensor_parallel, pp=p.pipeline_parallel, ep=p.expert_parallel,
                      etp=p.expert_tensor_parallel, first=p.pipeline_first_stage_layers,
                      last=p.pipeline_last_stage_layers, layout=p.pipeline_layout)
    params, expert = total_params(shard), routed_expert_params(shard)
    dp = max(1, train_gpus // max(1, p.tensor_parallel * p.pipeline_parallel))
    edp = max(1, train_gpus // max(1, p.expert_parallel * p.expert_tensor_parallel * p.pipeline_parallel))
    weights = weight_bytes(shard, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base
    return weights, (params - expert) / dp + expert / edp


def host_copy_rates(card: RunCard, r: DeviceRates, gpu: GpuSpec, *,
                     gpus_per_node: int | None = None) -> tuple[float, float, float]:
    """(pinned, pageable, pageable into freshly allocated host memory) bytes/s of one GPU's copies to or from host
    memory while every copying GPU of its node copies (``compute.offload``: ``host_copy_bytes_per_s``,
    ``pageable_copy_bytes_per_s``, ``first_touch_copy_bytes_per_s``). ``gpus_per_node``: the GPUs of a node that
    copy together; default the training GPUs (the trainer's offloads), the engine's for checkpoint-engine's H2D."""
    rates = {"pcie_bytes_per_s": r.pcie_bytes_per_s, "host_memory_bytes_per_s": r.host_memory_bytes_per_s,
             "gpus_per_node": gpus_per_node or train_nodes(card)[1]}
    coherent = gpu.host_link_bytes_per_s is not None
    pageable = pageable_copy_bytes_per_s(**rates,
                                         staging_bytes_per_s=staging_bytes_per_s_of(coherent_host_link=coherent))
    return (host_copy_bytes_per_s(**rates), pageable,
            first_touch_copy_bytes_per_s(pageable_bytes_per_s=pageable, coherent_host_link=coherent))


def _offloaded_reference_bytes(card: RunCard, spec: ModelSpec, *, megatron_weight_bytes: float,
                               shard_ranks: int) -> float:
    """Bytes of one GPU's share of a reference model that ``REFERENCE_OFFLOAD_PRESETS`` moves in for its pass and out
    after it, once each way per step: none without a reference pass. SkyRL builds it in bf16 (``trainer.bf16`` True,
    skyrl/train/config/config.py l.931 @2e9c89afceb3ef7963748224373ad88882322c99): under Megatron the rank's bf16
    shard of the card's layout (``megatron_weight_bytes``), under FSDP its bf16 shard over ``shard_ranks``
    (``fsdp_state_shard_ranks``: under ``hsdp`` the shard group, the memory plan's ``sharding.weights_divisor``)."""
    from trainfit.methods.roles import REFERENCE_OFFLOAD_PRESETS, reference_placement
    from trainfit.spec.enums import RefPlacement

    if card.preset not in REFERENCE_OFFLOAD_PRESETS or reference_placement(card) is not RefPlacement.CPU:
        return 0.0
    if card.parallel.strategy not in FSDP_STRATEGIES:
        return megatron_weight_bytes
    return weight_bytes(spec, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base / max(
        1, shard_ranks)


def fsdp_state_shard_ranks(card: RunCard, *, dp: int) -> int:
    """Ranks one FSDP parameter (and its optimizer state) is sharded over, whose local shard a rank offloads: the
    ``dp`` data x context ranks, or under ``hsdp`` its shard group (``parallel.hsdp_shard_size``, else a host's
    training GPUs, as the memory's ``sharding.shard_group`` and ``plan.time``'s step take it): each replica of the
    group holds the whole model (verl's ``actor.fsdp_config.fsdp_size`` below the world size builds that
    ``(world // fsdp_size, fsdp_size)`` mesh, volcengine/verl verl/workers/fsdp_workers.py ``create_device_mesh``
    l.84-91 @94d681dce4911c3ad6abb011a2d03c62d318868d)."""
    p = card.parallel
    if p.strategy is not Strategy.HSDP:
        return dp
    return max(1, min(dp, p.hsdp_shard_size or train_nodes(card)[1]))


def trainer_shard_ranks(card: RunCard, *, train_gpus: int) -> int:
    """``fsdp_state_shard_ranks`` of the training GPUs' data ranks, ``train_gpus / (tp x pp)``."""
    p = card.parallel
    return fsdp_state_shard_ranks(card, dp=max(1, train_gpus // max(1, p.tensor_parallel * p.pipeline_parallel)))


def verl_fsdp2_pinned_weights(card: RunCard) -> bool:
    """Whether verl's FSDP2 worker moves its weights with per-parameter non-blocking copies (pinned both ways,
    ``VERL_FSDP2_MODEL_CPU_SINCE``) rather than ``model.cpu()``: the verl preset on FSDP2 with a ``software.verl``
    pin before 0.6. No pin, a later one, or one that names no release: ``model.cpu()`` (False)."""
    return (card.preset == "verl" and card.parallel.strategy in FSDP_STRATEGIES and card.parallel.fsdp2
            and pin_before((card.software.model_extra or {}).get("verl"), VERL_FSDP2_MODEL_CPU_SINCE))


def verl_megatron_fresh_host_weights(card: RunCard) -> bool:
    """Whether verl's Megatron param offload copies the weights to freshly allocated host memory at every offload
    (``VERL_MEGATRON_PINNED_REUSE_SINCE``): the verl preset on a Megatron (not FSDP) trainer with a ``software.verl``
    pin before 0.8 (``spec.card.pin_before``) and not before 0.4 (``VERL_MEGATRON_PARAM_OFFLOAD_SINCE``: no actor
    offload before it). No pin, a later one, or one that names no release: the pinned buffer kept across offloads
    (False). A dev pin is read as its release (``0.8.0.dev`` as 0.8) although the dev builds before the gating commit
    (03bc8411c for 0.8) still run the old path; the plan notes which path it assumed (``verl_offload_pin_note``). Not
    priced either way: the ``pin_memory()`` host copy after the ``.cpu()`` one (no measured host-to-host rate here), so
    the pre-0.8 offload is a lower bound."""
    pin = (card.software.model_extra or {}).get("verl")
    return (card.preset == "verl" and card.parallel.strategy not in FSDP_STRATEGIES
            and pin_before(pin, VERL_MEGATRON_PINNED_REUSE_SINCE)
            and not pin_before(pin, VERL_MEGATRON_PARAM_OFFLOAD_SINCE))


_DEV_PIN = re.compile(r"v?(\d+)\.(\d+)(?:\.0)?[.-]?dev\d*")
"""A development pin of a minor release (``0.8.0.dev``, ``0.6.dev0``), read as that release by ``spec.card.pin_before``;
not ``0.4.1.dev``, which comes after the 0.4.0 release."""


def verl_megatron_offload_refusal(card: RunCard) -> str | None:
    """The one-line refusal of a verl card on a Megatron trainer with ``rollout.trainer_offload`` set (params,
    optimizer or both, as ``methods.rl.trainer_offload_of`` reads it) and a ``software.verl`` pin before 0.4: that
    worker offloads only the reference and sets the actor's param, grad and optimizer offload False whatever the
    config says (``VERL_MEGATRON_PARAM_OFFLOAD_SINCE``), so the card's actor round trips are not what it runs. None
    otherwise (no pin, a later one, an FSDP trainer, or no trainer offload)."""
    pin = (card.software.model_extra or {}).get("verl")
    if (card.preset != "verl" or card.parallel.strategy in FSDP_STRATEGIES
            or not pin_before(pin, VERL_MEGATRON_PARAM_OFFLOAD_SINCE)):
        return None
    from trainfit.methods.rl import trainer_offload_of  # the RL modules: not imported where no refusal can apply
    from trainfit.spec.enums import Offload

    mode = trainer_offload_of(card)[0]
    if mode is Offload.NONE:
        return None
    return (f"rollout.trainer_offload: {mode.value} is not run by verl {str(pin).strip()} on Megatron, which offloads"
            " only the reference (the actor's offload is off before verl 0.4); allowed: none")


def verl_offload_pin_note(card: RunCard) -> str | None:
    """A plan note for a verl card whose weights make offload round trips (``rollout.trainer_offload``
    params_and_optimizer) and whose ``software.verl`` pin is a dev build of a release that changes the offload path
    (0.4 and 0.8 on Megatron, ``VERL_MEGATRON_PARAM_OFFLOAD_SINCE`` / ``VERL_MEGATRON_PINNED_REUSE_SINCE``; 0.6 on
    FSDP2, ``VERL_FSDP2_MODEL_CPU_SINCE``): which path was assumed and what a dev build before the gating commit runs
    instead. None otherwise (a Megatron pin before 0.4 is refused: ``verl_megatron_offload_refusal``)."""
    from trainfit.methods.rl import trainer_offload_of
    from trainfit.spec.enums import Offload

    pin = (card.software.model_extra or {}).get("verl")
    if card.preset != "verl" or not pin or trainer_offload_of(card)[0] is not Offload.PARAMS_AND_OPTIMIZER:
        return None
    text = str(pin).strip()
    megatron = card.parallel.strategy not in FSDP_STRATEGIES
    m = _DEV_PIN.fullmatch(text)
    if m is None:
        return None
    release = (int(m.group(1)), int(m.group(2)))
    if megatron and release == VERL_MEGATRON_PINNED_REUSE_SINCE:
        return (f"software.verl {text}: read as the 0.8 release, the weights offloaded into one pinned host buffer"
                " kept across offloads (verl-project/verl 03bc8411c); a dev build before that commit copies them with"
                " .cpu().pin_memory() into fresh host pages every offload (slower to the host)")
    if megatron and release == VERL_MEGATRON_PARAM_OFFLOAD_SINCE:
        return (f"software.verl {text}: read as the 0.4 release, the actor's weights offloaded with .cpu().pin_memory()"
                " into fresh host pages (verl-project/verl cc8fca504); a dev build before that commit offloads only"
                " the reference")
    if not megatron and card.parallel.fsdp2 and release == VERL_FSDP2_MODEL_CPU_SINCE:
        return (f"software.verl {text}: read as the 0.6 release, FSDP2 weights offloaded with model.cpu() (pageable,"
                " verl-project/verl e68dcb788); a dev build before that commit moves each parameter with non-blocking"
                " copies (pinned both ways, faster)")
    return None


def verl_fsdp_actor_offload(card: RunCard) -> Offload:
    """The actor offload verl's FSDP workers run under ``parallel.offload`` (the actor's ``fsdp_config.param_offload``
    / ``optimizer_offload``) where ``methods.rl.trainer_offload_of`` reads none: a split placement (no engine shares
    the GPUs), or a colocated card that leaves ``rollout.trainer_offload`` unset. verl runs it all the same:
    ``update_actor`` loads the parameter shard and the optimizer state before ``update_policy`` and offloads them
    after it, ``compute_log_prob`` loads and offloads the shard (volcengine/verl verl/workers/fsdp_workers.py
    l.893-898, l.928-932, l.993-994, l.1033-1034 @b178a3cd56f58b2d502255daba591e92833930a7; the engine workers
    through ``BaseEngineCtx._context_switch``, verl-project/verl verl/workers/engine/base.py l.314-336
    @040a28659773fd58eac91cc006d255826c6da03a), and AdamW steps on the GPU (``plan.time.step_offload_of``).
    Offload.NONE for any other card, and where ``rollout.trainer_offload`` is set on a colocated card (it prices
    the trips then)."""
    from trainfit.plan.time import verl_fsdp_workers
    from trainfit.spec.enums import Offload, Placement

    if not verl_fsdp_workers(card):
        return Offload.NONE
    if card.rollout.placement is Placement.COLOCATE and card.rollout.trainer_offload is not None:
        return Offload.NONE
    return card.parallel.offload


def verl_lora_reference_trip(card: RunCard) -> bool:
    """Whether the step's reference pass makes its own round trip of the actor's parameter shard under verl's
    ``param_offload``: verl's FSDP worker runs a LoRA card's reference as the actor with its adapters disabled, by
    calling the actor's own ``compute_log_prob`` (``compute_ref_log_prob``: "if _is_lora, actor without lora applied
    is the ref", verl-project/verl verl/workers/fsdp_workers.py l.723-727 @7dc3ee7476c9af1042636f44bca9e412d1de1a6d,
    l.1041-1045 @b178a3cd56f58b2d502255daba591e92833930a7), and ``compute_log_prob`` loads the shard before its
    forward and offloads it after (``load_fsdp_model_to_gpu`` l.683-684, ``offload_fsdp_model_to_cpu`` l.715-716
    @7dc3ee74). So a LoRA step with a reference pass moves the weights four times a step (the sync's sharding
    manager, the old-policy pass, the reference pass, the update), where a full-weight reference is its own module
    with its own FSDP CPU offload (``methods.roles.reference_placement``). True for verl's FSDP workers, a reference
    that is the actor with its adapters disabled, and a reference pass in the step (KL coefficient above 0)."""
    from trainfit.methods.roles import kl_coef, reference_placement
    from trainfit.plan.time import verl_fsdp_workers
    from trainfit.spec.enums import RefPlacement

    return (verl_fsdp_workers(card) and reference_placement(card) is RefPlacement.LORA_DISABLED
            and kl_coef(card) > 0)


def verl_export_stages_shard(card: RunCard) -> bool:
    """Whether the weight sync's export streams an offloaded FSDP shard back from host memory itself
    (``compute.sync.export_staging_seconds``, priced by ``plan.rl_sync.sync_phase``): verl's checkpoint engine on a
    split placement (``FrameworkSync.broadcasts_whole_bucket``: not the fully-async trainer's own paths) through the
    framework's sync, on an FSDP strategy with ``parallel.offload: params_and_optimizer``. The one rule for the
    export's staging and for the state-offload phase, which then leaves out the sync's weights trip."""
    from trainfit.compute.sync import framework_sync_mechanism
    from trainfit.spec.enums import FSDP_STRATEGIES, Offload, WeightTransport

    ro = card.rollout
    if (card.preset != "verl" or ro.weight_transport is not WeightTransport.FRAMEWORK
            or card.parallel.strategy not in FSDP_STRATEGIES or card.parallel.offload is not Offload.PARAMS_AND_OPTIMIZER):
        return False
    chosen = ro.weight_sync if "weight_sync" in ro.model_fields_set else None
    fs = framework_sync_mechanism(card.preset, ro.placement.value, chosen, engine=ro.engine)
    return fs.framework == "verl" and fs.broadcasts_whole_bucket


def verl_fsdp_critic_offload_bytes(card: RunCard, spec: ModelSpec, *, shard_ranks: int) -> tuple[float, float]:
    """(pinned, pageable) bytes one training GPU of verl's FSDP PPO critic copies to the host per step; the same
    bytes come back. verl's export writes the critic's ``fsdp.param_offload`` / ``optimizer_offload`` from
    ``parallel.offload`` (``export.verl``), and its ``CriticWorker`` loads the shard before ``compute_values`` and
    offloads it after, and loads the shard and the optimizer state before ``update_critic`` and offloads both after
    (volcengine/verl verl/workers/fsdp_workers.py l.1540-1557, l.1560-1586
    @b178a3cd56f58b2d502255daba591e92833930a7): the shard twice each way, the optimizer state once, sized as the
    actor's (``fsdp_offload_bytes`` of the critic model; its ``model_dtype`` defaults to fp32 as the actor's,
    l.1289-1290), pinned or pageable as the actor's (FSDP2's ``model.cpu()``). (0, 0) for any other card: not PPO,
    not verl's FSDP workers, no offload."""
    from trainfit.methods.rl import critic_spec_of
    from trainfit.plan.time import verl_fsdp_workers
    from trainfit.spec.enums import Method, Offload

    off = card.parallel.offload
    if card.method is not Method.PPO or off is Offload.NONE or not verl_fsdp_workers(card):
        return 0.0, 0.0
    critic = critic_spec_of(card, spec)
    if critic is None:
        return 0.0, 0.0
    weights, optimizer, _ = fsdp_offload_bytes(card, critic, shard_ranks=shard_ranks)
    w = 2.0 * weights if off is Offload.PARAMS_AND_OPTIMIZER else 0.0  # compute_values and update_critic
    pageable = card.parallel.fsdp2 and not verl_fsdp2_pinned_weights(card)
    return optimizer + (0.0 if pageable else w), (w if pageable else 0.0)


def trainer_state_offload_phase(card: RunCard, spec: ModelSpec, r: DeviceRates, *, train_gpus: int) -> PhaseTime | None:
    """The trainer's per-step state moves to host memory and back, per training GPU.

    NeMo RL (``STATE_OFFLOAD_PRESETS``), colocated with the engine (``rollout.trainer_offload`` not none, its
    default under the preset there): the weights and the optimizer state, once each way per step
    (``nemo_rl_offload_bytes``); not colocated, the optimizer state alone under a ``software.nemo-rl`` pin before 0.5
    (``nemo_rl_logprob_optimizer_trip``: the log-prob call's ``offload_before_refit`` and ``prepare_for_training``),
    else nothing. The memory plan is not changed by that trip (its log-prob peak still holds the state; the update's,
    with the state back, is the same).

    SkyRL (``ONE_WEIGHT_ROUND_TRIP_PRESETS``), colocated: the weights and the optimizer state once each way per step,
    pinned, the optimizer state as verl's Megatron offload counts it (or the FSDP shard's, ``fsdp_offload_bytes``).

    Other frameworks, colocated with ``rollout.trainer_offload`` set (verl actor ``param_offload`` /
    ``optimizer_offload``, volcengine/verl @b178a3cd56f58b2d502255daba591e92833930a7
    verl/workers/megatron_workers.py): the optimizer state goes to the host after the update and comes back
    before the next (``update_actor`` lines 747-748, 778-779); with parameters, the weights make a round trip
    for each pass that needs them, the old-policy log-probs (``compute_log_prob`` lines 866-867, 902-903), the
    update (lines 744-745, 775-776) and the weight sync (``rollout_mode`` lines 681-682, 731-732). The gradient
    buffer is not copied: ``offload_megatron_model_to_cpu`` frees ``grad_data`` (``storage().resize_(0)``) and
    ``load_megatron_model_to_gpu`` re-allocates and zeroes it (verl/utils/megatron_utils.py lines 582-585 and
    629-633 @b9873ee98f5ee513a460a7a41623262ac4a831e9, lines 432-435 and 454-456 @b178a3cd).

    FSDP trainers (verl's FSDP worker) move each rank's local shard instead (``fsdp_offload_bytes``; under ``hsdp``
    the shard of its group, ``fsdp_state_shard_ranks``). On a split placement verl's FSDP actor makes the same trips
    under ``parallel.offload`` (``verl_fsdp_actor_offload``, as a colocated one without ``rollout.trainer_offload``
    does), less the sync's weights trip where the checkpoint engine's export staging prices it
    (``verl_export_stages_shard``, ``plan.rl_sync``; not on the fully-async trainer's own sync paths). A PPO card's
    FSDP critic on verl adds its own shard and optimizer trips (``verl_fsdp_critic_offload_bytes``).

    Every GPU of a node copies at once: a copy to or from pinned host memory runs at the smaller of the GPU's host
    link and its share of the node's host-memory bandwidth (``compute.offload.host_copy_bytes_per_s``), one to or
    from pageable memory at most at the driver's staging rate (``pageable_copy_bytes_per_s``); a pageable copy *to*
    the host lands in host tensors allocated anew each step (``v.to("cpu")``, ``model.cpu()``; freed when the state
    goes back), so it also takes the first-touch page faults (``first_touch_copy_bytes_per_s``,
    ``PAGEABLE_FIRST_TOUCH_BYTES_PER_S``: 1.4 GB/s behind PCIe). Pageable
    (``compute.offload``, "Pinned or pageable host memory"): verl's FSDP2 weights (``model.cpu()``; pinned under a
    ``software.verl`` pin before 0.6, ``verl_fsdp2_pinned_weights``), everything NeMo
    RL's DTensor worker moves, NeMo RL's Megatron optimizer states; the rest is pinned (verl's FSDP1 weights and FSDP
    optimizer states, both ``non_blocking=True``; verl's Megatron offload; Megatron-Core's DDP buffers), except the
    weights of verl's Megatron offload under a ``software.verl`` pin before 0.8 (``verl_megatron_fresh_host_weights``):
    to the host into fresh pages, back from pinned memory. None when nothing moves."""
    from trainfit.methods.rl import trainer_offload_of
    from trainfit.spec.enums import Offload

    mode, _ = trainer_offload_of(card)
    split_actor = False  # verl's split FSDP actor: the sync's weights trip is the export's staging (plan.rl_sync)
    if mode is Offload.NONE and (verl_actor := verl_fsdp_actor_offload(card)) is not Offload.NONE:
        mode = verl_actor
        split_actor = verl_export_stages_shard(card)
    if mode is Offload.NONE and nemo_rl_logprob_optimizer_trip(card):
        # not colocated, before NeMo RL 0.5: the log-prob call's offload_before_refit, back in prepare_for_training
        return _state_trip_phase(card, r, pinned_bytes=0.0,
                                 pageable_bytes=nemo_rl_optimizer_bytes(card, spec, train_gpus=train_gpus))
    p = card.parallel
    fsdp = p.strategy in FSDP_STRATEGIES
    shard_ranks = trainer_shard_ranks(card, train_gpus=train_gpus)
    # verl's FSDP PPO critic: its own shard and optimizer trips under parallel.offload, whatever the actor's
    critic = verl_fsdp_critic_offload_bytes(card, spec, shard_ranks=shard_ranks) if fsdp else (0.0, 0.0)
    if mode is Offload.NONE:  # the critic's trips alone, if any (None when nothing moves)
        return _state_trip_phase(card, r, pinned_bytes=critic[0], pageable_bytes=critic[1])
    fresh_weights = 0.0  # bytes copied to freshly allocated host memory and back from pinned memory
    if card.preset in STATE_OFFLOAD_PRESETS:  # (pinned, pageable) one-way bytes
        moved = nemo_rl_offload_bytes(card, spec, train_gpus=train_gpus)
    else:
        if fsdp:
            weights, optimizer, _ = fsdp_offload_bytes(card, spec, shard_ranks=shard_ranks)
        else:
            weights, optimizer_params = _megatron_rank_state(card, spec, train_gpus=train_gpus)
            optimizer = STATE_OFFLOAD_OPTIMIZER_BYTES * optimizer_params
        moved = (optimizer, 0.0)
        if mode is Offload.PARAMS_AND_OPTIMIZER and card.preset in ONE_WEIGHT_ROUND_TRIP_PRESETS:
            # once each way, pinned (ONE_WEIGHT_ROUND_TRIP_PRESETS); the offloaded reference's bf16 weights too when
            # the step runs its pass (methods.roles.REFERENCE_OFFLOAD_PRESETS), sharded as the policy (under hsdp over
            # its shard group, as the memory plan's reference: sharding.weights_divisor)
            moved = (optimizer + weights + _offloaded_reference_bytes(
                card, spec, megatron_weight_bytes=weights, shard_ranks=shard_ranks), 0.0)
        elif mode is Offload.PARAMS_AND_OPTIMIZER:
            # the update and the sync, and the old-policy log-probs where the step has that pass; on a split
            # placement the sync's trip is the export's staging (plan.rl_sync: compute.sync.export_staging_seconds);
            # a LoRA reference pass on verl's FSDP worker is the actor's own compute_log_prob: one more trip
            # (verl_lora_reference_trip)
            trips = (3 if old_logprob_pass(card) else 2) + (1 if verl_lora_reference_trip(card) else 0)
            w = weights * (trips - (1 if split_actor else 0))
            pageable = p.fsdp2 and not verl_fsdp2_pinned_weights(card)
            if not fsdp and verl_megatron_fresh_host_weights(card):
                fresh_weights = w  # to the host into fresh pages, back from pinned (VERL_MEGATRON_PINNED_REUSE_SINCE)
            else:
                moved = (optimizer + (0.0 if pageable else w), w if pageable else 0.0)
    moved = (moved[0] + critic[0], moved[1] + critic[1])
    if moved == (0.0, 0.0) and not fresh_weights:
        return None
    return _state_trip_phase(card, r, pinned_bytes=moved[0], pageable_bytes=moved[1], fresh_weight_bytes=fresh_weights)


def _state_trip_phase(card: RunCard, r: DeviceRates, *, pinned_bytes: float, pageable_bytes: float,
                      fresh_weight_bytes: float = 0.0) -> PhaseTime | None:
    """The ``state_offload`` phase of one training GPU's round trip: ``pinned_bytes`` to and from pinned host memory,
    ``pageable_bytes`` to host tensors allocated anew each step (first-touch page faults, ``host_copy_rates``) and back
    pageable, ``fresh_weight_bytes`` to fresh pages and back from pinned memory. None when nothing moves."""
    if pinned_bytes <= 0 and pageable_bytes <= 0 and fresh_weight_bytes <= 0:
        return None
    from trainfit.plan.resolve import gpu_of

    # the pageable copies go to host tensors allocated anew each step (compute.offload: first-touch page faults)
    pinned, pageable_rate, fresh_rate = host_copy_rates(card, r, gpu_of(card))
    to_host_s = pinned_bytes / pinned + pageable_bytes / fresh_rate + fresh_weight_bytes / fresh_rate
    to_device_s = pinned_bytes / pinned + pageable_bytes / pageable_rate + fresh_weight_bytes / pinned
    return rl_phase("state_offload", to_host_s + to_device_s, "offload", to_host=to_host_s, to_device=to_device_s)


def reference_swap_phase(card: RunCard, spec: ModelSpec, r: DeviceRates, *, train_gpus: int,
                         shard_ranks: int | None = None) -> PhaseTime:
    """``roles.reference: host_swap`` (NeMo RL's ``use_reference_model``, ``compute.reference_swap``): per reference
    pass each training GPU copies its policy state dict to pinned host memory, the reference's in and the policy's
    back, one tensor at a time. The rank's state dict: under Megatron the bf16 parameters of its TP/PP/EP shard
    (``Float16Module``), under FSDP (NeMo RL's DTensor worker) its local shard of every tensor, fp32 when the card's
    weights are (``methods.rl.reference_swap_state_bytes``), over ``shard_ranks`` ranks (HSDP: its shard group, each
    replica holding the whole model; None: ``train_gpus``). Tensors: the shard's Hugging Face tensor count
    (``compute.sync.hf_tensor_count``; Megatron fuses q/k/v and gate/up, so fewer: the per-tensor term is an upper
    bound)."""
    from trainfit.compute.reference_swap import reference_swap_seconds
    from trainfit.compute.sync import hf_tensor_count

    p = card.parallel
    if p.strategy in FSDP_STRATEGIES:
        dtype = Dtype.FP32 if card.weights_dtype is Dtype.FP32 else Dtype.BF16
        state_bytes = weight_bytes(spec, weights=dtype, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base / (
            shard_ranks or train_gpus)
        tensors = hf_tensor_count(spec)
    else:
        shard = rank_spec(spec, tp=p.tensor_parallel, pp=p.pipeline_parallel, ep=p.expert_parallel,
                          etp=p.expert_tensor_parallel, first=p.pipeline_first_stage_layers,
                          last=p.pipeline_last_stage_layers)
        state_bytes = weight_bytes(shard, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base
        tensors = hf_tensor_count(shard)
    t = reference_swap_seconds(state_bytes_per_gpu=state_bytes, tensors_per_gpu=tensors, pcie_bytes_per_s=r.pcie_bytes_per_s,
                               host_memory_bytes_per_s=r.host_memory_bytes_per_s, gpus_per_node=train_nodes(card)[1])
    return rl_phase("reference_swap", t.total_s, "offload", to_host=t.to_host_s, to_device=t.to_device_s,
                  per_tensor=t.per_tensor_s)
