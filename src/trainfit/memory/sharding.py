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

FSDP1 against FSDP2, full sharding (checked 2026-12-05; no term changed, numbers unchanged). torchtitan's
per-parameter FSDP commit (pytorch/torchtitan@83c879f18763611bda68586c45f0082fd568d646, PR #165) measured
FSDP1 0.85 GiB active (1.12 GiB reserved) above FSDP2 on the same Llama-2-7B run with full AC (benchmark
points 2807 / 2811; per-op SAC: 0.81 GiB active, 4.49 GiB reserved, 2809 / 2813), and plans both alike. Its
FSDP1 is FULL_SHARD, MixedPrecision(bf16 params, fp32 reduce), BACKWARD_PRE, use_orig_params, one unit per
block plus the root (torchtrain/parallelisms/parallelize_llama.py l.222-250
@ab5d91823f835e8688f381e3ff24706d7ae50cff), on a torch nightly of March 2024 (requirements.txt ``torch >=
2.2.0.dev``, CI ``pip3 install --pre torch ... nightly/cu121``; the exact nightly is not stated). The FSDP1
code read is torch 2.13.0's (pytorch/pytorch@cf30153c4c131c8164ee7798e5022d810682e2cb); the March-2024
nightly's text was not read. What FSDP1 does there, and what it would change here:
* The flat-parameter gradient path: the per-parameter views' gradients are concatenated into the unit's flat
  bf16 gradient (``split_with_sizes`` backward), the post-backward hook copies it to fp32 for the
  reduce-scatter, ``flat_param.grad.to(handle._reduce_dtype)`` (``torch/distributed/fsdp/_runtime_utils.py``
  l.756-764), keeps the bf16 one ``record_stream``-ed on the post-backward stream (l.772), and allocates the
  padded output ``new_sharded_grad = torch.empty_like(chunks[0])`` (l.890-901; no ``F.pad`` copy:
  use_orig_params pads the flat parameter to a multiple of the world size, ``_flat_param.py`` l.566,
  l.759-762). One layer unit of Llama-2-7B (202.4 M parameters, 8 ranks): 0.38 GiB bf16 + 0.75 GiB fp32 + 0.09
  GiB = 1.22 GiB against the 0.75 GiB ``_fsdp_terms`` plans (FSDP2's bf16 gradients and fp32 reduce-scatter
  input are 1.13 GiB). Planned with 1.22 GiB, the worst layer moment of those runs rises from 21.73 to at most
  22.21 GiB (no recomputed activation freed), still below their planned peak, the loss moment (22.59 GiB): the
  step's peak does not move. Not planned apart; it would change no number of table (b).
* After forward FSDP1 reshards every non-root unit (``_post_forward_reshard``: ``free_unsharded_flat_param =
  not state._is_root and ...``, l.486-500); torchtitan's FSDP2 keeps the last block gathered. In allocated
  bytes FSDP1's loss moment is one unit (0.38 GiB) below FSDP2's, the opposite of the measured direction,
  because the published figure is ``active_bytes``: FSDP1 frees an unsharded flat parameter with
  ``record_stream`` on the compute stream (``_flat_param.py`` ``_free_unsharded_flat_param``, l.1805-1821),
  and the caching allocator's ``free`` drops ``allocated_bytes`` at once but a block with stream uses stays
  active until its events complete (``insert_events`` instead of ``free_block``: pytorch/pytorch
  ``c10/cuda/CUDACachingAllocator.cpp`` ``DeviceCachingAllocator::free``
  @eb42ad6eca0ce61e7c581212b4bf32f991425571). ``limit_all_gathers`` (FSDP1's default, left unset there) lets
  the CPU run at most two freed units ahead of the GPU (``_limiter_utils.py`` l.15
  ``_max_num_inflight_all_gathers = 2``; ``_runtime_utils.py`` l.297-303, l.320-326), so at the loss moment up
  to two freed block units (0.75 GiB) may still count as active: FSDP1 = FSDP2 + 0.38 GiB at most, 0.47 GiB of
  the measured 0.85 left unexplained. FSDP2 avoids ``recordStream`` by design ("lower and deterministic GPU
  memory by avoiding `recordStream`": torchtitan docs/fsdp.md l.10 @b5bcd76c66d0acb1a08b176d9639425bc55e0b2a).
  How far the CPU runs ahead is a timing, not a byte count of the program, so neither the reshard (-0.38 GiB,
  allocated) nor the pending frees (+0.75 GiB, active) is planned: dropping the last unit alone would move
  point 2807 from -3.9 % to -5.5 % (2809: -1.8 % to -2.5 %).
* The other FSDP1 points of table (b) do not test it: LoRA / QLoRA adapters (2616, 2619; 2618, 2620, 2703 with
  parameter offload; accumulation under ``no_sync``) have no full-size unit gradient, and their misses
  (+7.8 %, -15.5 %, -29 % ...) do not share a direction.
Left open: the FSDP1 reserved excess (1.12 GiB full AC, 4.49 GiB per-op SAC) is the stream pools' and the
record_stream stacking's; ``memory.stream_pools`` replays FSDP2 only.
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
