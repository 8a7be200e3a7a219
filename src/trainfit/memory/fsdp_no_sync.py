"""FSDP1 gradient accumulation under ``no_sync``: unsharded gradients held across micro-batches.

Inside ``FullyShardedDataParallel.no_sync()`` FSDP1 skips the reduce-scatter and accumulates each unit's gradient in
its *unsharded* flat parameter's ``.grad`` until the first backward outside the context ("This likely results in higher
memory usage because FSDP will accumulate the full model gradients (instead of gradient shards) until the eventual
sync": pytorch/pytorch torch/distributed/fsdp/fully_sharded_data_parallel.py l.1034-1045, the torch 2.13.0 wheel
@cf30153c4c131c8164ee7798e5022d810682e2cb; the same note since torch 1.12). A unit's flat parameter needs a gradient as
soon as one of its original parameters does, and with ``use_orig_params=True`` that gradient spans the whole flat
parameter, frozen parameters included (the same file l.208-213: mixing frozen and non-frozen parameters in one unit
gives "higher than expected gradient memory usage"; a LoRA adapter inside a decoder layer makes the whole layer's
gradient). Who runs it: Lightning Fabric's ``FSDPStrategy.no_backward_sync`` returns ``module.no_sync()``
(Lightning-AI/lightning src/lightning/fabric/strategies/fsdp.py l.761-773 @71aed751f7f0ca8422ddca256e602099070f490b,
with ``use_orig_params`` defaulted to True, l.175), which Lit-GPT's finetune scripts enter on every accumulating
micro-batch (Lightning-AI/litgpt finetune/lora.py l.214-215 @8641822b3249bb94f068c254aa5d13decbc9f0a0). It is the
default of accelerate and the HF Trainer (``sync_each_batch`` False), of verl's FSDP engine from 0.9 and of the
Lightning Trainer's accumulation: ``plan.fsdp_no_sync`` resolves a card's null from its preset and cites the lines.

The first backward outside ``no_sync`` (the last micro-batch) adds its gradient into each held unsharded ``.grad``;
``_reduce_grad`` then sets ``flat_param.grad = None``, reduce-scatters the unsharded gradient into a new shard and keeps
only that shard (``_saved_grad_shard``) (torch/distributed/fsdp/_runtime_utils.py l.831-886, l.906-927 of the same
wheel). The optimizer step therefore sees each unit's gradient shard: still the whole flat parameter's (frozen parts
included) but divided over the shard group.
"""

from __future__ import annotations


def no_sync_unit_grad_bytes(*, unit_params: float, unit_trainable_params: float, grad_dtype_bytes: float) -> float:
    """Bytes of one FSDP1 unit's unsharded gradient kept across ``no_sync`` micro-batches, on every rank.

    ``unit_params``: every parameter of the unit (frozen ones included, the flat parameter's numel before sharding);
    ``unit_trainable_params``: those that require a gradient; ``grad_dtype_bytes``: the flat parameter's dtype size
    (its gradient's). A unit without a trainable parameter has no gradient: 0.
    """
    if unit_params < 0 or unit_trainable_params < 0 or grad_dtype_bytes <= 0:
        raise ValueError("unit_params and unit_trainable_params must be >= 0 and grad_dtype_bytes > 0")
    if unit_trainable_params == 0:
        return 0.0
    return float(unit_params) * grad_dtype_bytes


def no_sync_step_grad_bytes(*, unsharded_grad_bytes: float, shards: int) -> float:
    """Gradient bytes per rank at the optimizer step after ``no_sync`` accumulation: the held unsharded unit
    gradients (``no_sync_unit_grad_bytes`` summed over the units) reduce-scattered over ``shards`` ranks."""
    if unsharded_grad_bytes < 0 or shards < 1:
        raise ValueError("unsharded_grad_bytes must be >= 0 and shards >= 1")
    return float(unsharded_grad_bytes) / shards
