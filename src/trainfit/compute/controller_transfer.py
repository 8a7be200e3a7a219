"""Single-controller batch transfer: the host time a single-controller RL trainer's driver spends serialising each
worker call's batch (and deserialising the results), while its receivers deserialise their shares.

The mechanism (``controller_transfer_s``): one driver process serialises every byte it sends to a call's workers,
once per worker that is handed its own copy (``replicas``), and deserialises everything the workers return, one
after the other; the ``receivers`` (the data-parallel ranks, each with its own shard) deserialise their shares and
serialise their results at the same time, so one receiver's share is on the path. The driver's part is the step's
whole batch whatever the GPU count: a host cost per step that does not shrink with more GPUs. Two frameworks pay it,
each through its own serialisation path, so each has its own byte count and its own measured rates; the plan adds
both as the phase term ``controller_transfer`` (``plan.rl_controller.verl_controller_phases``,
``plan.rl_controller.nemo_rl_dispatched``).

verl (every verl card; ``verl_call_row_bytes``, ``DATAPROTO_*`` rates), read at volcengine/verl
@94d681dce4911c3ad6abb011a2d03c62d318868d (the fully-async recipe's colocated runs; the same ``DataProto`` path from
verl v0.3 on):

* The trainer (``RayPPOTrainer.fit``, ``verl/trainer/ppo/ray_trainer.py`` l.1103-1271) calls
  ``generate_sequences(gen_batch)`` (the prompts' ``input_ids``, ``attention_mask``, ``position_ids``, repeated
  ``rollout.n`` times, l.1103-1118), then ``compute_log_prob(batch)``, ``compute_ref_log_prob(batch)``,
  ``compute_values(batch)``, ``update_critic(batch)`` and ``update_actor(batch)`` (l.1174-1271), each inside its own
  timer (``gen``, ``old_log_prob``, ``ref``, ``values``, ``update_critic``, ``update_actor``): ``VerlCall``.
* Each call splits the ``DataProto`` into one chunk per data-parallel rank (``dispatch_dp_compute_data_proto``,
  ``verl/single_controller/base/decorator.py`` l.341-351; Megatron: ``ray.put`` once per data-parallel chunk "to avoid
  duplicate serialization cost", l.149-153: one replica) and Ray serialises each chunk in the driver's thread.
  ``DataProto.__getstate__`` makes the bytes: ``contiguous()``, ``consolidate()``, ``torch.save`` into an
  ``io.BytesIO``, ``getvalue()``; ``__setstate__`` ``torch.load``s them (``verl/protocol.py`` l.267-289). The driver
  collects the results the same way and concatenates them.
* The tensors are padded to the step's maxima: the vLLM rollout pads every response to ``response_length``
  (``pad_2d_list_to_length(..., max_length=self.config.response_length)``) and returns ``prompts``, ``responses``,
  ``input_ids``, ``attention_mask``, ``position_ids`` (int64, ``verl/workers/rollout/vllm_rollout/
  vllm_rollout_spmd.py`` l.341, l.370-378); the trainer adds ``response_mask`` (int64, l.1150), the old log-prob
  pass returns ``old_log_probs`` and ``entropys`` (fp32, l.1175-1183), the reference ``ref_log_prob``, the critic
  ``values``, and the advantage step writes ``token_level_scores``, ``token_level_rewards``, ``advantages`` and
  ``returns`` (fp32, l.1229-1241; ``verl/trainer/ppo/core_algos.py`` l.256-257), all shipped with the update.
* The fully-async doc's colocated 7B runs (docs/advance/fully_async.md @df340d703292538fafc1439b4aa9f1f226ccadc5)
  spend 107.7 / 70.3 / 53.9 s in ``old_log_prob`` on 32 / 64 / 128 GPUs, about 33 s + 2,400 GPU-s / GPUs.
* A faster host serialises faster: play-verl's Qwen2-7B 'recommended' PPO run (8 H100, one node) leaves 0.38 s of its
  33.5 s ``update_actor`` outside ``update_policy`` (verl's own MFU timer, ``plan.rl_passes``), where the ``DATAPROTO_*``
  rates put this call at 0.91 s, so that host ran the serialisation at least 2.4x faster than the measuring VM; the
  multi-node H20 runs above also move the batch across nodes, which is not priced. Not counted: the Python pickling of
  the non-tensor batch (per-row objects), the driver's ``union`` / ``concat`` copies outside the timed calls. verl's
  engine workers (``trainer.use_legacy_worker_impl: disable``, the default from verl-project/verl
  63e8a0d1617b209284011e0fcf1796574f372ffd of 2026-03-26) ship the trainer's calls without the padding
  (``left_right_2_no_padding``): the planner prices those at the mean prompt and response
  (``rollout.controller_padded_batches`` false, ``plan.rl_controller.verl_controller_phases``).

NeMo RL (``preset: nemo-rl``; ``nemo_rl_batch_bytes``, ``RAY_*`` rates), read in NVIDIA-NeMo/RL
``nemo_rl/models/policy/lm_policy.py`` and ``nemo_rl/distributed/worker_groups.py``:

* The policy's ``get_logprobs``, ``get_reference_policy_logprobs`` and ``train`` (``NemoRlCall``) each shard the
  step's batch over the data-parallel ranks (``BatchedDataDict.shard_by_batch_size``) and call
  ``run_all_workers_sharded_data`` with ``in_sharded_axes=["data_parallel"]`` and
  ``replicate_on_axes=["context_parallel", "tensor_parallel", "pipeline_parallel"]`` (lm_policy.py l.224-230,
  l.286-292, l.353-359 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf, v0.3.0; l.310-316, l.372-378, l.511-517
  @6c7089300fded94abfa49bb9cbf9eb357d862461, v0.5.0; l.408-414, l.483-489, l.636-642
  @5fb588932bf835506a8a5bac01de4f8c7ab0a065, v0.6.0). The workers are laid out ``[pp, dp, cp, tp]`` (lm_policy.py
  l.94-108 @b1c86a81), so every data-parallel shard goes to ``tp x cp x pp`` workers.
* The worker group loops over the workers and calls ``getattr(worker, method_name).remote(data=shard, ...)`` for each
  one (worker_groups.py l.862 @b1c86a81, l.912 @6c708930, l.932 @5fb58893): Ray serializes a task's arguments in the
  caller, once per call, so the driver pickles each shard once per replica, one after the other. Only from
  NVIDIA-NeMo/RL ad0f56d06 (PR #1944 "use ray.put to reduce overhead of repeated arguments", 2026-05-07; first in
  v0.7.0) does the worker group ``ray.put`` each shard once when it is replicated (worker_groups.py l.936-958
  @7ea279abfbeb698b092856d0dab61e7cf39bc909): ``NEMO_RL_PUT_ONCE_SINCE``.
* Ray's default serializer pickles a CPU torch tensor through ``Tensor.__reduce_ex__``: its storage reduces with
  ``torch.save(..., BytesIO)`` and ``getvalue()`` (pytorch torch/storage.py ``TypedStorage.__reduce__``); Ray's
  zero-copy tensor reducer is opt-in (``RAY_ENABLE_ZERO_COPY_TORCH_TENSORS``, "Default: False", ray-project/ray
  python/ray/_private/ray_constants.py @56b106df62c5c53ae5954147ab57f192db8ae51c) and NeMo RL sets it nowhere (no
  match at v0.3.0, v0.5.0, v0.6.0 or 7ea279abfbeb698b092856d0dab61e7cf39bc909; its pins are ray 2.46.0, 2.49.2 and
  2.54.0). Each worker unpickles its own shard (``torch.load`` of those bytes) before it starts; the step's first
  collective (the ``train`` all-reduce of the batch size, the log-prob passes' first forward) waits for the last
  worker, so the driver's whole loop and one worker's unpickling are on the step's path.
* What the batch holds (``nemo_rl/algorithms/grpo.py`` l.611-640 @b1c86a81, l.1276-1331 @6c708930): every tensor is
  ``[sequences, longest]``, right-padded to the batch's longest sequence (``batched_message_log_to_flat_message``):
  ``input_ids`` and ``token_mask`` (``torch.ones_like`` of the int64 token ids) 8 bytes a token each,
  ``advantages`` and ``generation_logprobs`` float32 (4 + 4): 24 bytes a token for the two log-prob calls;
  ``prev_logprobs`` and ``reference_policy_logprobs`` (float32) are added before ``train``: 32 bytes a token.
* Not counted: the results the workers return (the log-prob calls' log-probabilities, ``train``'s metrics): the
  plan prices NeMo RL's sends only (``returned_bytes`` 0).

Why the two paths' rates differ. Both serialise through ``torch.save`` into a ``BytesIO`` and Ray's pickling, but
verl's ``DataProto.__getstate__`` first copies the whole batch into one storage (``consolidate()``) and then writes
the zipfile format, whose writer computes a CRC-32 over every byte (torch 2.13's default,
``torch.utils.serialization.config.save.compute_crc32``), and its receiver ``pickle.loads`` the whole blob before
``torch.load`` copies it into a storage again; Ray's pickling of NeMo RL's plain tensors reduces each storage with
the legacy format (``_use_new_zipfile_serialization=False``, no CRC) and makes no consolidating copy. ``getvalue()``
is no copy in either (CPython's ``BytesIO`` hands over its buffer: 0 ms). Side by side on one CPU
(``benchmarks/controller_transfer_cpu.py steps``: both paths on the same dicts, verl's shapes at 64 rows, 0.078 GB,
and NeMo RL's at 512 x 4096, 0.067 GB; five runs on 2026-12-03, one thread of a shared 2-vCPU Intel Xeon VM whose
load moved the absolute rates 2-3x between runs, so only the ratios within a run are read): NeMo RL's pickling ran
1.7-3.3x faster than verl's serialising path, whose ``torch.save`` took 2.2-3.3x its time without the CRC and whose
consolidate took about as long as its pickling; NeMo RL's unpickling ran 1.0-3.6x faster than verl's two copies
(``pickle.loads`` and ``torch.load``, about equal). The two measured pairs below (0.44 vs 1.0 GB/s, 2.3x; 0.74 vs
2.0 GB/s, 2.7x) fall inside those ranges; both pairs were measured on the same 2-vCPU Intel Xeon VM (verl's with torch's default two
threads, NeMo RL's on one). They are the measurements as taken, neither scaled nor fitted.

Pure: no torch, no I/O.
"""

from __future__ import annotations

from enum import StrEnum

DATAPROTO_SERIALIZE_BYTES_PER_S = 0.44e9
"""verl's driver-side bytes per second of ``DataProto.__getstate__`` + Ray's pickling of it: consolidate (one copy),
``torch.save`` into ``BytesIO`` (zipfile format, CRC-32), ``getvalue``, ``pickle.dumps``. Measured with
``benchmarks/controller_transfer_cpu.py verl`` (named ``benchmarks/verl_dataproto_cpu.py`` when it was
run; the same code), torch 2.13.0+cpu, torch's default two threads of a shared 2-vCPU Intel Xeon VM (its large-buffer ``clone`` runs
at 3.8 GB/s), 2026-12-03, best of 5 rounds of 0.31 GB; no Ray object-store copy and no network transfer from the
driver's node. Not fitted."""
DATAPROTO_DESERIALIZE_BYTES_PER_S = 0.74e9
"""verl's receiver-side bytes per second of ``pickle.loads`` + ``DataProto.__setstate__`` (``torch.load`` from
``BytesIO``). Same measurement as ``DATAPROTO_SERIALIZE_BYTES_PER_S`` (``benchmarks/controller_transfer_cpu.py verl``,
its docstring's "deserialise 0.74 GB/s"), not fitted."""

RAY_PICKLE_BYTES_PER_S = 1.0e9
"""NeMo RL's driver-side bytes per second: Ray's ``pickle.dumps`` of a batch shard of CPU torch tensors (each storage
through ``torch.save``'s legacy format), one thread. Measured with ``benchmarks/controller_transfer_cpu.py
nemo-rl`` (named ``benchmarks/ray_arg_pickle_cpu.py`` when it was run; the same code), torch 2.13.0+cpu,
a 2-vCPU Intel Xeon VM (the CPU family of NVIDIA's DGX H100), 2026-12-03: 0.83-1.05 GB/s over 8-64 MiB shards,
median 0.97. Ray's copy into its object store and the transfer to a worker on another node are not counted.
Not fitted."""
RAY_UNPICKLE_BYTES_PER_S = 2.0e9
"""NeMo RL's worker-side ``pickle.loads`` of the same: measured 1.58-2.55 GB/s, median 2.07 (same measurement as
``RAY_PICKLE_BYTES_PER_S``: ``benchmarks/controller_transfer_cpu.py nemo-rl``, its docstring's table), not fitted."""

NEMO_RL_PUT_ONCE_SINCE = (0, 7)
"""The NeMo RL release whose worker group ``ray.put``s a replicated shard once (ad0f56d06, PR #1944; in v0.7.0,
not in v0.6.0 5fb588932bf835506a8a5bac01de4f8c7ab0a065): "feat: use ray.put to reduce overhead of repeated arguments
(#1944)", https://github.com/NVIDIA-NeMo/RL/commit/ad0f56d0641f78635bb29ee778ea2fc1471b8665 (2026-05-07; the oldest
release tag containing it is v0.7.0)."""

INT64_BYTES = 8
FP32_BYTES = 4


def controller_transfer_s(*, sent_bytes: float, returned_bytes: float, receivers: int, replicas: int = 1,
                          serialize_bytes_per_s: float, deserialize_bytes_per_s: float) -> float:
    """Seconds one single-controller call spends moving its batch on the hosts: the driver serialises the
    ``sent_bytes`` once per replica (``replicas``: workers handed their own copy of each shard; 1 when each shard is
    serialised once) and deserialises the ``returned_bytes``, one after the other; the ``receivers`` (data-parallel
    ranks, one shard each) deserialise and serialise their shares at the same time. The rates are the framework's
    path's (module docstring: ``DATAPROTO_*`` for verl, ``RAY_*`` for NeMo RL). Raises ValueError for negative bytes
    or fewer than one receiver or replica."""
    if sent_bytes < 0 or returned_bytes < 0 or receivers < 1 or replicas < 1:
        raise ValueError(f"controller transfer needs bytes >= 0 and receivers, replicas >= 1; got sent {sent_bytes},"
                         f" returned {returned_bytes}, receivers {receivers}, replicas {replicas}")
    return (sent_bytes * replicas / serialize_bytes_per_s + returned_bytes / deserialize_bytes_per_s
            + sent_bytes / receivers / deserialize_bytes_per_s + returned_bytes / receivers / serialize_bytes_per_s)


class VerlCall(StrEnum):
    """The verl worker calls whose batch the driver ships (module docstring, ``ray_trainer.py`` l.1103-1271)."""

    GENERATION = "generation"
    OLD_LOGPROB = "old_logprob"
    REF_LOGPROB = "ref_logprob"
    CRITIC_VALUES = "critic_values"
    ACTOR_UPDATE = "actor_update"
    CRITIC_UPDATE = "critic_update"


def verl_call_row_bytes(*, call: VerlCall, prompt_tokens: int, response_tokens: int, entropy: bool = False,
                        reference: bool = False, critic: bool = False) -> tuple[int, int]:
    """(bytes sent, bytes returned) per sequence of one verl worker call, the tensors padded to ``prompt_tokens`` +
    ``response_tokens`` (the run's maxima, or the means for the engine workers' unpadded calls). ``entropy``: the old
    log-prob pass also returns the entropy; ``reference`` / ``critic``: the step has a reference pass / a critic,
    whose outputs ride along afterwards. Fields as listed in the module docstring
    (verl @94d681dce4911c3ad6abb011a2d03c62d318868d). Raises TypeError when ``call`` is not a ``VerlCall``."""
    if not isinstance(call, VerlCall):
        raise TypeError(f"call must be a VerlCall ({', '.join(c.value for c in VerlCall)}), not {call!r}")
    p, r = prompt_tokens, response_tokens
    # prompts, responses, input_ids / attention_mask / position_ids over prompt + response, response_mask
    trained = INT64_BYTES * (p + r + 3 * (p + r) + r)
    match call:
        case VerlCall.GENERATION:
            return INT64_BYTES * 3 * p, INT64_BYTES * (p + r + 3 * (p + r))
        case VerlCall.OLD_LOGPROB:
            return trained, FP32_BYTES * r * (2 if entropy else 1)
        case VerlCall.REF_LOGPROB:
            return trained + FP32_BYTES * r, FP32_BYTES * r
        case VerlCall.CRITIC_VALUES:
            return trained + FP32_BYTES * r * (2 if reference else 1), FP32_BYTES * r
        case VerlCall.ACTOR_UPDATE | VerlCall.CRITIC_UPDATE:
            # old_log_probs, token_level_scores, token_level_rewards, advantages, returns (+ ref_log_prob, values)
            extra = 5 + (1 if reference else 0) + (1 if critic else 0)
            return trained + FP32_BYTES * r * extra, 0


class NemoRlCall(StrEnum):
    """The NeMo RL policy calls that send the step's batch (module docstring): ``get_logprobs`` and
    ``get_reference_policy_logprobs`` (LOGPROB), ``train`` (TRAIN)."""

    LOGPROB = "logprob"
    TRAIN = "train"


LOGPROB_BYTES_PER_TOKEN = 24.0
"""``input_ids`` and ``token_mask`` int64, ``advantages`` and ``generation_logprobs`` float32 (module docstring;
NVIDIA-NeMo/RL ``nemo_rl/algorithms/grpo.py`` l.611-644 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf: ``token_loss_mask``
is ``torch.ones_like`` of the int64 ``token_ids``)."""
TRAIN_BYTES_PER_TOKEN = 32.0
"""The log-prob calls' 24 plus ``prev_logprobs`` and ``reference_policy_logprobs`` float32 (NVIDIA-NeMo/RL
``nemo_rl/algorithms/grpo.py`` l.658-659 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf)."""


def nemo_rl_batch_bytes(*, call: NemoRlCall, sequences: int, longest_tokens: int) -> float:
    """Bytes of the whole step's batch one NeMo RL policy call sends: ``sequences`` x ``longest_tokens`` (every
    tensor right-padded to the batch's longest sequence) at the call's bytes a token (module docstring). Raises
    TypeError when ``call`` is not a ``NemoRlCall``."""
    if not isinstance(call, NemoRlCall):
        raise TypeError(f"call must be a NemoRlCall ({', '.join(c.value for c in NemoRlCall)}), not {call!r}")
    per_token = LOGPROB_BYTES_PER_TOKEN if call is NemoRlCall.LOGPROB else TRAIN_BYTES_PER_TOKEN
    return float(sequences) * longest_tokens * per_token
