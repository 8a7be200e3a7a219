"""Whether a card's FSDP1 accumulation runs under ``no_sync`` (``memory.fsdp_no_sync``): the card says so itself
(``parallel.fsdp_no_sync`` true or false), or its framework's default decides (null).

Only FSDP1 (strategy fsdp, fsdp_version fsdp1) with ``batch.grad_accum > 1`` can: a single micro-batch syncs on its
only backward. Frameworks that enter FSDP1's ``no_sync()`` on every micro-batch but the last by default:

* accelerate (and the HF Trainer on it): ``Accelerator.no_sync(model)`` enters ``getattr(model, "no_sync", ...)``
  for any distributed FSDP1 model (huggingface/accelerate 1.0.1 wheel accelerate/accelerator.py l.990-992; 1.15.0
  wheel l.1172-1176, FSDP2 takes ``set_requires_gradient_sync(False)`` instead, l.1166-1171), and
  ``Accelerator.accumulate`` enters it unless ``sync_gradients`` (``_do_sync``: every ``num_steps``-th batch) or
  ``GradientAccumulationPlugin.sync_each_batch`` (1.0.1 l.1101-1113; 1.15.0 l.1285-1297), whose default is False
  (1.0.1 accelerate/utils/dataclasses.py l.905-906; 1.15.0 l.1024-1025; the field is in 0.28.0 already, l.615, also
  False). The HF Trainer runs each micro-batch in ``self.accelerator.accumulate(model)`` (transformers 4.46.0 wheel
  trainer.py l.2473) and from later 4.x on enters ``accelerator.no_sync`` itself on every micro-batch but the last,
  unless ``sync_each_batch`` or DeepSpeed (5.24.0 wheel trainer.py l.1904-1915). Wheels from PyPI, read 2026-12-04.
  TRL, LLaMA-Factory and ms-swift train through the HF Trainer: ``NO_SYNC_PRESETS``.
* verl's FSDP engine from v0.9.0: ``_gradient_sync_context`` enters ``self.module.no_sync()`` on FSDP1 for every
  micro-batch but the last of a training pass ("at the cost of temporarily retaining unsharded gradients until the
  final backward"; verl-project/verl @483b8a009ba3a97563edee3a19887e4862b8094a, the v0.9.0 tag,
  verl/workers/engine/fsdp/transformer_impl.py l.672-698, called l.725-730; added by 2423f801, PR #7095,
  2026-07-22, which v0.8.0 does not hold): ``VERL_NO_SYNC_SINCE``; a ``software.verl`` pin before 0.9 syncs
  each micro-batch.
* Lightning Fabric's ``FSDPStrategy.no_backward_sync`` is ``module.no_sync()`` (``memory.fsdp_no_sync``), but Fabric
  enters it only where the script asks (Lit-GPT's finetune scripts do). The Lightning Trainer's automatic loop runs
  every accumulating batch's closure in ``_block_parallel_sync_behavior`` (Lightning-AI/pytorch-lightning
  @7f0c3436cd3f6ad3753125672024fc415cbcb414 src/lightning/pytorch/loops/optimization/automatic.py l.174-185, unless
  the strategy ``handles_gradient_accumulation``, DeepSpeed only), whose ``block_backward_sync`` enters
  ``self.model.no_sync()`` for a model that passes the runtime-checkable ``DistributedDataParallel`` Protocol
  (strategies/parallel.py l.116-128; utilities/types.py l.52-70, whose only protocol member is ``no_sync``): the
  ``FullyShardedDataParallel`` that ``FSDPStrategy._setup_model`` wraps (strategies/fsdp.py l.302-326) passes it
  (checked here with torch 2.13 and Python 3.11: ``isinstance`` is True). No preset is Lightning's, so such a card
  says ``parallel.fsdp_no_sync: true`` itself.

Not a default elsewhere: FSDP2 has no ``no_sync`` (torchtune, torchtitan: a card with fsdp_version fsdp2 never
resolves true), and a card without a preset names no framework (false, each backward reduce-scatters). One FSDP2
case holds unsharded gradients all the same: a pipeline stage under torch.distributed.pipelining, which turns
FSDP2's gradient sync off for every micro-batch's backward (``pipeline_fsdp2_holds_unsharded``, planned on the
model-parallel rank walk, ``plan.ranks.rank_terms``).
"""

from __future__ import annotations

from trainfit.spec.card import RunCard, pin_before
from trainfit.spec.enums import FsdpVersion, Strategy, TensorParallelImpl

NO_SYNC_PRESETS = ("trl", "llamafactory-z2", "llamafactory-z3", "ms-swift-zero2", "ms-swift-zero3")
"""Presets whose trainer is the HF Trainer on accelerate, which runs accumulating FSDP1 micro-batches under
``no_sync`` by default (the module docstring cites the lines)."""

VERL_NO_SYNC_SINCE = (0, 9)
"""The first verl release whose FSDP engine defers FSDP1 gradient sync to the last micro-batch (v0.9.0; the module
docstring cites the lines): "[fsdp, perf] feat: defer gradient sync during accumulation (#7095)", 2026-07-22,
https://github.com/verl-project/verl/commit/2423f801b3621e5cf8f1c46d90b2444302496d72 (in tag v0.9.0, @483b8a009ba3a97563edee3a19887e4862b8094a
``verl/workers/engine/fsdp/transformer_impl.py`` l.672-698; not in v0.8.0)."""


def fsdp_no_sync(card: RunCard) -> bool:
    """Whether the card's accumulating micro-batches run inside FSDP1's ``no_sync()`` (unsharded gradients held to
    the last micro-batch): ``parallel.fsdp_no_sync`` as set, else the card's framework default (the module
    docstring). False without FSDP1 full sharding or without accumulation."""
    p = card.parallel
    if not (p.strategy is Strategy.FSDP and p.fsdp_version is FsdpVersion.FSDP1 and card.batch.grad_accum > 1):
        return False
    if p.fsdp_no_sync is not None:
        return p.fsdp_no_sync
    if card.preset in NO_SYNC_PRESETS:
        return True
    return card.preset == "verl" and not pin_before(getattr(card.software, "verl", None), VERL_NO_SYNC_SINCE)


def pipeline_fsdp2_holds_unsharded(card: RunCard) -> bool:
    """Whether a pipeline stage under FSDP2 keeps its whole unsharded parameters and gradients through the step.

    torch.distributed.pipelining's ``PipelineStage.backward_maybe_with_nosync`` runs every micro-batch's backward
    of an ``FSDPModule`` stage with ``set_reshard_after_backward(False)`` and ``set_requires_gradient_sync(False)``;
    only ``perform_reduce_grad``, after the stage's last backward, turns both back on and runs FSDP's post-backward
    (pytorch/pytorch torch/distributed/pipelining/stage.py l.781-853, l.1166-1177, the torch 2.13.0 wheel
    @cf30153c4c131c8164ee7798e5022d810682e2cb; earlier releases ran that post-backward at the end of the last
    ``backward_maybe_with_nosync`` instead, the same holding). Without gradient sync ``FSDPParamGroup.post_backward``
    skips the reduce-scatter and keeps each parameter's unsharded gradient, upcast to ``reduce_dtype`` when it
    differs from ``param_dtype`` (``to_accumulated_grad_if_needed``) and summed into from the next micro-batch on
    (``accumulate_unsharded_grad_if_needed``; torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py l.603-612,
    _fsdp_param.py l.802-821 of the same wheel). torchtitan builds its stages as ``PipelineStage`` (pytorch/torchtitan
    torchtitan/parallelisms/pipeline_llama.py l.15, l.94 @9dec370ad26b5f8e9a7333a0e36165018262644b) and, with
    pipeline parallel, shards every block with ``reshard_after_forward=False`` ("to avoid per-microbatch
    all-gathers", parallelize_llama.py l.325-339 of the same commit), so the stage's parameters stay gathered from
    its first forward too. Strategy fsdp on torch's ``fully_shard`` (fsdp_version fsdp2, not Megatron-Core layers)
    with ``parallel.pipeline_parallel > 1`` (a card refuses hsdp with pipeline parallel, ``spec.card``).

    Whatever ``parallel.offload``: FSDP2's ``CPUOffloadPolicy`` keeps the sharded parameters and the reduce-scattered
    gradient shards on the host (``FSDPParam`` moves the shard to the CPU at init and copies it to the device for
    each all-gather, _fsdp_param.py l.312-316, l.896-901; ``foreach_reduce`` copies each new sharded gradient to the
    CPU, _fsdp_collectives.py l.710-743), but the post-backward's no-sync arm keeps the unsharded gradient on the
    device without looking at the policy (``to_accumulated_grad_if_needed`` casts it on the device it is on,
    _fsdp_param_group.py l.607-612), and the gathered parameters are device tensors that
    ``set_reshard_after_backward(False)`` leaves in place: the held terms are the same, only the shards move."""
    p = card.parallel
    return (p.strategy is Strategy.FSDP and p.fsdp_version is FsdpVersion.FSDP2
            and p.pipeline_parallel > 1 and p.tensor_parallel_impl is not TensorParallelImpl.MEGATRON)


def pipeline_fsdp2_held_accumulation_bytes(*, unit_grad_bytes: float, largest_tensor_grad_bytes: float,
                                           grad_dtype_bytes: float, gathered_dtype_bytes: float) -> float:
    """The transient a held (``pipeline_fsdp2_holds_unsharded``) stage's later micro-batch adds at its last unit's
    backward: the new unsharded gradient beside the held one it is summed into. Both inputs are unsharded (the held
    gradients' divisor): ``unit_grad_bytes`` the last FSDP unit's gradients in the reduce dtype
    (``grad_dtype_bytes`` per element), ``largest_tensor_grad_bytes`` its largest tensor's.

    When the gathered parameters' dtype differs from the reduce dtype, FSDP2 keeps the held gradient apart
    (``FSDPParam.unsharded_accumulated_grad``, made by ``to_accumulated_grad_if_needed``) and autograd writes each
    micro-batch's gradient into the unsharded parameter's ``.grad`` in the gathered dtype; only the unit's
    post-backward adds it in and frees it (``accumulate_unsharded_grad_if_needed``: ``unsharded_accumulated_grad +=
    unsharded_param.grad``, ``unsharded_param.grad = None``), so the whole unit's new gradient, in the gathered dtype,
    is alive at once (pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param.py l.802-821,
    _fsdp_param_group.py l.603-612, the torch 2.13.0 wheel @cf30153c4c131c8164ee7798e5022d810682e2cb). When they
    match, ``to_accumulated_grad_if_needed`` returns early, the held gradient is ``.grad`` itself and autograd's
    ``AccumulateGrad`` adds each new tensor gradient as it is made: the largest tensor's."""
    if gathered_dtype_bytes != grad_dtype_bytes and grad_dtype_bytes:
        return unit_grad_bytes * gathered_dtype_bytes / grad_dtype_bytes
    return largest_tensor_grad_bytes
