"""Driver dispatch: the host time a single-controller trainer spends handing a step's batch to its Ray workers.

What NVIDIA-NeMo/RL does (``nemo_rl/models/policy/lm_policy.py`` and ``nemo_rl/distributed/worker_groups.py``):
the policy's ``get_logprobs``, ``get_reference_policy_logprobs`` and ``train`` each shard the step's batch over the
data-parallel ranks (``BatchedDataDict.shard_by_batch_size``) and call ``run_all_workers_sharded_data`` with
``in_sharded_axes=["data_parallel"]`` and ``replicate_on_axes=["context_parallel", "tensor_parallel",
"pipeline_parallel"]`` (lm_policy.py l.224-230, l.286-292, l.353-359 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf,
v0.3.0; l.310-316, l.372-378, l.511-517 @6c7089300fded94abfa49bb9cbf9eb357d862461, v0.5.0; l.408-414, l.483-489,
l.636-642 @5fb588932bf835506a8a5bac01de4f8c7ab0a065, v0.6.0). The workers are laid out ``[pp, dp, cp, tp]``
(lm_policy.py l.94-108 @b1c86a81), so every data-parallel shard goes to ``tp x cp x pp`` workers. The worker group
loops over the workers and calls ``getattr(worker, method_name).remote(data=shard, ...)`` for each one
(worker_groups.py l.862 @b1c86a81, l.912 @6c708930, l.932 @5fb58893): Ray serializes a task's arguments in the
caller, once per call, so the driver pickles each shard once per replica, one after the other. Only from
NVIDIA-NeMo/RL ad0f56d06 (PR #1944 "use ray.put to reduce overhead of repeated arguments", 2026-05-07; first in
v0.7.0) does the worker group ``ray.put`` each shard once when it is replicated (worker_groups.py l.936-958
@7ea279abfbeb698b092856d0dab61e7cf39bc909).

Ray's default serializer pickles a CPU torch tensor through ``Tensor.__reduce_ex__``: its storage reduces with
``torch.save(..., BytesIO)`` and ``getvalue()`` (pytorch torch/storage.py ``TypedStorage.__reduce__``); Ray's
zero-copy tensor reducer is opt-in (``RAY_ENABLE_ZERO_COPY_TORCH_TENSORS``, "Default: False", ray-project/ray
python/ray/_private/ray_constants.py @56b106df62c5c53ae5954147ab57f192db8ae51c) and NeMo RL sets it nowhere (no match
at v0.3.0, v0.5.0, v0.6.0 or 7ea279abfbeb698b092856d0dab61e7cf39bc909; its pins are ray 2.46.0, 2.49.2 and 2.54.0). Each worker unpickles its own shard (``torch.load`` of those bytes) before it starts; the step's first
collective (the ``train`` all-reduce of the batch size, the log-prob passes' first forward) waits for the last
worker, so the driver's whole loop and one worker's unpickling are on the step's path.

What the batch holds (``nemo_rl/algorithms/grpo.py`` l.611-640 @b1c86a81, l.1276-1331 @6c708930): every tensor is
``[sequences, longest]``, right-padded to the batch's longest sequence (``batched_message_log_to_flat_message``):
``input_ids`` and ``token_mask`` (``torch.ones_like`` of the int64 token ids) 8 bytes a token each,
``advantages`` and ``generation_logprobs`` float32 (4 + 4): 24 bytes a token for the two log-prob calls;
``prev_logprobs`` and ``reference_policy_logprobs`` (float32) are added before ``train``: 32 bytes a token.

Rates measured on a CPU of the DGX H100 host's family (``benchmarks/ray_arg_pickle_cpu.py``, torch 2.13.0,
one thread, a dict of those tensors of 8-64 MiB): ``pickle.dumps`` 0.83-1.05 GB/s, ``pickle.loads``
1.58-2.55 GB/s. Ray's copy of the pickled bytes into its object store and the transfer to a worker on another node
are not counted (both add to it).

Pure: no torch, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

PICKLE_BYTES_PER_S = 1.0e9
"""``pickle.dumps`` of a NeMo RL batch shard (CPU torch tensors), one thread: measured 0.83-1.05 GB/s, median 0.97
(``benchmarks/ray_arg_pickle_cpu.py``)."""
UNPICKLE_BYTES_PER_S = 2.0e9
"""``pickle.loads`` of the same: measured 1.58-2.55 GB/s, median 2.07 (``benchmarks/ray_arg_pickle_cpu.py``)."""

LOGPROB_BYTES_PER_TOKEN = 24.0
"""``input_ids`` and ``token_mask`` int64, ``advantages`` and ``generation_logprobs`` float32 (module docstring)."""
TRAIN_BYTES_PER_TOKEN = 32.0
"""The log-prob calls' 24 plus ``prev_logprobs`` and ``reference_policy_logprobs`` float32."""

NEMO_RL_PUT_ONCE_SINCE = (0, 7)
"""The NeMo RL release whose worker group ``ray.put``s a replicated shard once (ad0f56d06, PR #1944; in v0.7.0,
not in v0.6.0 5fb588932bf835506a8a5bac01de4f8c7ab0a065)."""


@dataclass(frozen=True, slots=True)
class DispatchTime:
    driver_s: float
    """The driver pickling every shard it sends, one call after the other."""
    worker_s: float
    """One worker unpickling its shard."""

    @property
    def total_s(self) -> float:
        return self.driver_s + self.worker_s


def sharded_dispatch_seconds(*, batch_bytes: float, data_parallel: int, replicas: int, put_once: bool,
                             pickle_bytes_per_s: float = PICKLE_BYTES_PER_S,
                             unpickle_bytes_per_s: float = UNPICKLE_BYTES_PER_S) -> DispatchTime:
    """Seconds one ``run_all_workers_sharded_data`` call spends before its workers can all start: ``batch_bytes``
    split over ``data_parallel`` shards, each sent to ``replicas`` workers (tensor x context x pipeline parallel);
    pickled once per worker, or once per shard when ``put_once`` (module docstring)."""
    if batch_bytes < 0 or data_parallel < 1 or replicas < 1:
        raise ValueError("batch_bytes must be >= 0, data_parallel and replicas >= 1")
    pickled = batch_bytes * (1 if put_once else replicas)
    return DispatchTime(driver_s=pickled / pickle_bytes_per_s,
                        worker_s=batch_bytes / data_parallel / unpickle_bytes_per_s)
