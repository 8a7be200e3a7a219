"""Megatron-Core's distributed optimizer (planned as ZeRO-1): the parameter all-gather after the optimizer step,
exposed or overlapped with the next forward (``overlap_param_gather``).

Source: NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553.

* Buckets. ``megatron/core/distributed/distributed_data_parallel.py`` ``__init__``: "If bucket_size is not provided
  as an input, use sane default based on dp_group size": ``bucket_size = max(40000000, 1000000 * dp_group.size())``
  parameters (``distributed_data_parallel_config.py``: "Maximum number of parameters in each bucket"), one bucket
  chain for the dense parameters and one for the expert-parallel ones (``bucket_groups`` /
  ``expert_parallel_bucket_groups``). ``megatron_bucket_params``.
* Without ``overlap_param_gather`` (the config's default, False): ``optimizer/distrib_optimizer.py``
  ``step_with_ready_grads`` "launch[es] synchronous param all-gathers" right after the step
  (``start_param_sync_for_bucket_group_subset``): the whole all-gather is exposed (``collectives.exposed_data_parallel``,
  as trainfit planned every ZeRO-1 step before).
* With it: no all-gather at the step; the DDP wrapper registers a forward pre-hook on every module
  (``enable_forward_pre_hook``, ``_make_forward_pre_hook``) that waits for the module's bucket
  (``param_and_grad_buffer.py`` ``finish_param_sync``). The first bucket's all-gather is dispatched there when nothing
  dispatched it ("e.g., first AG bucket in first model chunk if ddp_config.align_param_gather is False"), so it is
  waited for with no compute beside it; each wait then dispatches the next bucket's all-gather
  (``next_param_gather_bucket_group``, chained in forward order: "all-gathers happen in reverse order of buckets"),
  which runs while the current bucket's layers compute. Only the step's first micro-batch gathers: the flag
  ``param_gather_dispatched`` is reset in ``finish_grad_sync`` at the end of the step. So, with ``n`` buckets of
  all-gather time ``a`` each behind a forward of ``f`` per micro-batch (``f / n`` per bucket)::

      exposed = a + (n − 1) · max(0, a − f / n)

  ``param_gather_exposed`` takes the chain's total ``A = n·a`` (the expert chain's buckets added to the dense
  chain's, sharing the same forward) as ``a_1 + max(0, (A − a_1) − f·(n − 1)/n)``, the same for equal buckets.

The gradient reduce-scatter (``overlap_grad_reduce``) is as trainfit already plans every ZeRO-1/2 and DDP step
(``collectives.exposed_data_parallel``): Megatron-Core's ``register_grad_ready`` dispatches a bucket's
reduce-scatter "only when processing the last microbatch" (``no_sync`` around the others, ``schedules.py``
``forward_backward_no_pipelining``), so it hides behind the last micro-batch's backward and its last bucket is
exposed.

Not modelled: ``align_param_gather`` (pipeline stages launching their all-gathers together), the
``overlap_param_gather_with_optimizer_step`` variant (the first chunk's all-gather launched inside the step), one
exposed first bucket per interleaved model chunk (one per rank is counted), and Megatron's larger buckets for the
gradient reduce-scatter's exposed last bucket (torch DDP's 25 MiB, ``collectives.DDP_BUCKET_BYTES``, is kept there).

Pure Python: no torch import.
"""

from __future__ import annotations

from math import ceil

MEGATRON_MIN_BUCKET_PARAMS = 40_000_000
"""``max(40000000, 1000000 * dp_group.size())``: the floor of Megatron-Core's default bucket (parameters),
NVIDIA/Megatron-LM ``megatron/core/distributed/distributed_data_parallel.py`` ``__init__``
@d98e8a64ddf34856e74b24714e3bedb2f5a39553 (module docstring). At the older
@293e10419fd1b79c8680a0f4a206fc0a373729b5 the default was a flat ``bucket_size: int = 40000000``, with no growth per
rank."""
MEGATRON_BUCKET_PARAMS_PER_DP_RANK = 1_000_000
"""... and its growth per data-parallel rank (larger groups need larger buckets to stay bandwidth-bound), the same
line of ``megatron/core/distributed/distributed_data_parallel.py`` @d98e8a64ddf34856e74b24714e3bedb2f5a39553."""


def megatron_bucket_params(*, data_parallel: int) -> int:
    """Parameters per bucket in Megatron-Core's DDP wrapper when the config leaves ``bucket_size`` unset."""
    return max(MEGATRON_MIN_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_DP_RANK * max(1, data_parallel))


def bucket_count(*, total_bytes: float, bucket_bytes: float) -> int:
    """Buckets one rank's ``total_bytes`` of one chain fill, ``bucket_bytes`` each (the last one partly); 0 for
    none (``collectives.exposed_data_parallel`` counts the dense and the expert chain's buckets with it)."""
    if total_bytes <= 0:
        return 0
    return ceil(total_bytes / bucket_bytes)


def param_gather_exposed(*, gather_s: float, first_bucket_s: float, buckets: int, forward_s: float) -> float:
    """Exposed seconds of the distributed optimizer's parameter all-gather under ``overlap_param_gather``: the
    chain's whole all-gather ``gather_s`` over ``buckets`` buckets, the first of which (``first_bucket_s``) has no
    compute beside it, the rest behind the step's first forward (``forward_s``, one micro-batch through this rank's
    layers) bucket by bucket (module docstring). Never more than ``gather_s``."""
    if gather_s <= 0 or buckets <= 0:
        return 0.0
    first = min(first_bucket_s, gather_s)
    hidden = max(0.0, forward_s) * (buckets - 1) / buckets
    return first + max(0.0, gather_s - first - hidden)
