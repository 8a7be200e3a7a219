"""Data-parallel sharding: which terms each strategy divides, and the buffers it adds.

Divisors are applied once, here, to whole terms:

=================  =======  =====  =========  =============================================
strategy           weights  grads  optimizer  extra buffers
=================  =======  =====  =========  =============================================
single, ddp        1        1      1          DDP: a flat bucket copy of the gradients
zero1              1        1      N          -
zero2              1        N      N          gradient reduce bucket
zero3, fsdp        N        N      N          gathered units (current + prefetched), root unit
fsdp_grad_op       1*       N      N          *sharded at rest, all units gathered from forward
                                              to backward (reshard_after_forward=False)
hsdp               n        n      n          as fsdp, sharded over n = GPUs per node
=================  =======  =====  =========  =============================================

Sources: ZeRO (Rajbhandari et al. 2020, §5), PyTorch FSDP2 ``fully_shard`` docs
(``reshard_after_forward``; the root module's parameters stay unsharded between forward and
backward), DDP ``gradient_as_bucket_view=False`` default (buckets hold a second copy of the
gradients), DeepSpeed ``reduce_bucket_size`` ("auto" in HF/accelerate = hidden²).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.spec.enums import Strategy

_SHARDED_PARAMS = {Strategy.ZERO3, Strategy.FSDP, Strategy.HSDP, Strategy.FSDP_GRAD_OP}
_SHARDED_GRADS = _SHARDED_PARAMS | {Strategy.ZERO2}
_SHARDED_OPT = _SHARDED_GRADS | {Strategy.ZERO1}


@dataclass(frozen=True, slots=True)
class Sharding:
    strategy: Strategy
    world_size: int
    shard_group: int
    """Ranks a sharded term is split over (GPUs per node for hsdp)."""
    separate_embedding_units: bool = False
    """FSDP: embedding and lm_head wrapped as their own units (torchtune ``custom_sharded_layers``), so
    the root unit holds no large parameters and each is gathered only around its own use."""

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
        """Parameters are all-gathered unit by unit around compute (ZeRO-3 / FSDP)."""
        return self.strategy in _SHARDED_PARAMS and self.shard_group > 1

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


def make_sharding(*, strategy: Strategy, gpus_per_node: int, nodes: int, separate_embeddings: bool = False) -> Sharding:
    world = gpus_per_node * nodes
    if strategy is Strategy.SINGLE:
        world = 1
    group = gpus_per_node if strategy is Strategy.HSDP else world
    return Sharding(strategy=strategy, world_size=world, shard_group=max(1, group),
                    separate_embedding_units=separate_embeddings and strategy in _SHARDED_PARAMS)
