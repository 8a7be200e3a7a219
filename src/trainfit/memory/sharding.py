"""Data-parallel sharding: which terms each strategy divides, and the buffers it adds.

Divisors are applied once, here, to whole terms:

=================  =======  =====  =========  =============================================
strategy           weights  grads  optimizer  extra buffers
=================  =======  =====  =========  =============================================
single, ddp        1        1      1          DDP: a flat bucket copy of the gradients
zero1              1        1      N          - (N: ``parallel.zero1_shard_size`` when set, InternEvo's zero1)
zero2              1        N      N          gradient reduce bucket
zero3, fsdp        N        N      N          gathered units (current + prefetched), root unit
fsdp_grad_op       1*       N      N          *sharded at rest, all units gathered from forward
                                              to backward (reshard_after_forward=False)
hsdp               n        n      n          as fsdp, sharded over n = ``parallel.hsdp_shard_size``
                                              (default: GPUs per node), replicated over the rest
=================  =======  =====  =========  =============================================

HSDP is torch's 2-D (replicate, shard) data-parallel mesh: pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb
(the torch 2.13.0 wheel) ``torch/distributed/fsdp/_fully_shard/_fully_shard.py`` l. 172-177 ("If 2D, then parameters
are sharded across the 1st dim and replicated across the 0th dim (HSDP) with ``(Replicate(), Shard(0))``"); FSDP1
``HYBRID_SHARD`` ``torch/distributed/fsdp/_init_utils.py`` l. 143-167 (a 2-D mesh: ``process_group`` = dim 1, the shard
group, ``_inter_node_pg`` = dim 0; without one, the intra-node group of ``device_count()`` GPUs). Each rank holds
1/n of every sharded term, n the shard dimension, whatever the replicate dimension.

Sources: ZeRO (Rajbhandari et al. 2020, §5), PyTorch FSDP2 ``fully_shard`` docs
(``reshard_after_forward``; the root module's parameters stay unsharded between forward and
backward), DDP ``gradient_as_bucket_view=False`` default (buckets hold a second copy of the
gradients), DeepSpeed ``reduce_bucket_size`` ("auto" in HF/accelerate = hidden²).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.spec.enums import FSDP_STRATEGIES, ZERO_STAGES, FsdpVersion, Strategy

# the table above: every torch FSDP strategy shards all three terms; a ZeRO stage k shards the first k of
# (optimizer states, gradients, parameters)
_SHARDED_PARAMS = FSDP_STRATEGIES | {s for s, stage in ZERO_STAGES.items() if stage >= 3}
_SHARDED_GRADS = FSDP_STRATEGIES | {s for s, stage in ZERO_STAGES.items() if stage >= 2}
_SHARDED_OPT = FSDP_STRATEGIES | set(ZERO_STAGES)


@dataclass(frozen=True, slots=True)
class Sharding:
    strategy: Strategy
    world_size: int
    shard_group: int
    """Ranks a sharded term is split over (hsdp: the shard group, ``parallel.hsdp_shard_size`` or GPUs per node)."""
    separate_embedding_units: bool = False
    """FSDP: embedding and lm_head wrapped as their own units (torchtune ``custom_sharded_layers``), so
    the root unit holds no large parameters and each is gathered only around its own use."""

    one_rank_fsdp2: bool = False
    """FSDP2 ``fully_shard`` on a one-rank mesh (``parallel.fsdp_one_rank``): nothing is sharded, but each unit is
    still unsharded into ``param_dtype`` storage around its use and its gradients go through the fp32 reduce buffers
    (``gathers_params``; the units in ``plan.terms._fsdp_terms``)."""

    @property
    def weights_divisor(self) -> int:
        return self.shard_group if self.strategy in _SHARDED_PARAMS else 1

    @property
    def grads_divisor(self) -> int:
        return self.shard_group if self.strategy in _SHARDED_GRADS else 1

    @property
    def optimizer_divisor(self) -> int:
        return self.shard_group if self.strategy in _SHARDED_OPT else 1

    @property
    def gathers_params(self) -> bool:
        """Parameters are all-gathered unit by unit around compute (ZeRO-3 / FSDP), or, on FSDP2's one-rank mesh,
        copied unit by unit into their unsharded ``param_dtype`` storage (``one_rank_fsdp2``)."""
        return self.strategy in _SHARDED_PARAMS and (self.shard_group > 1 or self.one_rank_fsdp2)

    @property
    def reshards_after_forward(self) -> bool:
        return self.strategy is not Strategy.FSDP_GRAD_OP

    @property
    def has_root_unit(self) -> bool:
        """FSDP wraps embedding, final norm and lm_head in the root unit, kept gathered from
        the root's forward to the end of backward (FSDP2: root never reshards after forward)."""
        return self.gathers_params and self.strategy is not Strategy.ZERO3 and not self.separate_embedding_units

    @property
    def ddp_bucket_copy(self) -> bool:
        return self.strategy is Strategy.DDP and self.world_size > 1

    @property
    def zero2_bucket(self) -> bool:
        return self.strategy is Strategy.ZERO2 and self.world_size > 1


def make_sharding(*, strategy: Strategy, gpus_per_node: int, nodes: int, separate_embeddings: bool = False,
                  hsdp_shard_size: int | None = None, zero1_shard_size: int | None = None,
                  fsdp_one_rank: bool = False, fsdp_version: FsdpVersion = FsdpVersion.FSDP2) -> Sharding:
    """``hsdp_shard_size``: the card's ``parallel.hsdp_shard_size`` (None: GPUs per node); read for hsdp only.
    ``zero1_shard_size``: the card's ``parallel.zero1_shard_size`` (None: every rank); read for zero1 only.
    ``fsdp_one_rank``: the card's ``parallel.fsdp_one_rank`` (FSDP2 on a one-rank mesh); read at one rank and with
    ``fsdp_version`` FSDP2 only (FSDP1's one-rank path is not this one; the card refuses the pair, this guards
    direct callers)."""
    world = gpus_per_node * nodes
    if strategy is Strategy.SINGLE:
        world = 1
    group = (hsdp_shard_size or gpus_per_node) if strategy is Strategy.HSDP else world
    if strategy is Strategy.ZERO1 and zero1_shard_size:
        group = min(world, zero1_shard_size)
    return Sharding(strategy=strategy, world_size=world, shard_group=max(1, group),
                    separate_embedding_units=separate_embeddings and strategy in _SHARDED_PARAMS,
                    one_rank_fsdp2=(fsdp_one_rank and fsdp_version is FsdpVersion.FSDP2
                                    and strategy in FSDP_STRATEGIES and max(1, group) == 1))
