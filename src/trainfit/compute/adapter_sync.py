"""Trainer -> engine sync when the engine serves the actor's LoRA adapter unmerged: only the adapter travels.

Pure: no torch.

verl with a LoRA actor and vLLM (``plan.rl_generation.engine_serves_adapter``) loads the base weights into the engine
once (``rollout.load_format`` safetensors, or the first sync) and from then on hands vLLM only the adapter
(verl-project/verl verl/workers/sharding_manager/fsdp_vllm.py ``update_params`` l.253-265
@7dc3ee7476c9af1042636f44bca9e412d1de1a6d: ``add_lora`` of a ``TensorLoRARequest`` whose ``lora_tensors`` are the
collected adapter). Per sync, on every trainer rank (``__enter__`` l.101-189, same commit):

* collect (an FSDP1 actor; under FSDP2 only the adapter's DTensors are gathered, one ``full_tensor()`` each, and an
  unsharded actor gathers nothing: ``memory.engine_lora.adapter_summon_peak_bytes``): ``FSDP.summon_full_params``
  over each decoder layer's unit and its nested LoRA units
  (``layered_summon_lora_params``, verl/utils/fsdp_utils.py l.464-496; the LoRA wrap policy makes each trainable
  leaf linear a unit of its own, ``get_fsdp_wrap_policy`` l.97-104), or over the whole actor at once without
  ``rollout.layered_summon`` (fsdp_vllm.py l.117). Either way every decoder unit is all-gathered, base weights
  included, in full precision (an FSDP1 summon gathers the flat parameter unconverted, as ``state_dict()`` does:
  ``compute.sync.fsdp1_state_dict_units``): one all-gather per unit of the decoder layers' bytes in the trainer's
  dtype over the shard ranks. The bytes do not shrink with the adapter; the sends do.
* the adapter tensors, whole on every rank, are copied to host memory (``.detach().cpu()``, pageable, synchronous);
* vLLM's ``add_lora`` builds the adapter on the host and each engine rank copies its slice into its slots
  (``set_lora``: ``memory.engine_lora.engine_lora_slot_bytes`` at one slot are the bytes a rank fills).

Left out: the host cost per adapter tensor (dictionary work, peft key conversion, vLLM's per-module packing) and the
``empty_cache`` after each layer, so the figure is a lower bound; the actor's parameter offload and reload around the
sync (``param_offload``) are the plan's ``state_offload`` phase.
"""

from __future__ import annotations

from trainfit.compute import collectives
from trainfit.compute.rates import DeviceRates
from trainfit.compute.sync import SyncTime
from trainfit.errors import CardError


def adapter_sync_seconds(*, summoned_bytes: float, summon_units: int, adapter_bytes: float,
                         engine_rank_adapter_bytes: float, train_shards: int, rates: DeviceRates,
                         gpus_per_node: int, nic_bytes_per_s: float, d2h_bytes_per_s: float,
                         h2d_bytes_per_s: float) -> SyncTime:
    """Seconds of one adapter-only sync (module docstring)::

        gather   = summon_units x NCCL all-gather of summoned_bytes / summon_units over train_shards ranks
        transfer = adapter_bytes / d2h_bytes_per_s                 (each trainer rank's ``.cpu()`` of the adapter)
                   + engine_rank_adapter_bytes / h2d_bytes_per_s   (each engine rank fills its slot)

    ``summoned_bytes``: what is gathered in the trainer's dtype (FSDP1: the decoder layers and the adapter; FSDP2: the
    adapter); ``summon_units``: the gathers (one per adapter tensor, and one per decoder layer under FSDP1); ``adapter_bytes``: the adapter in the trainer's dtype;
    ``engine_rank_adapter_bytes``: one engine rank's slot (the model dtype). The gather crosses nodes when
    ``train_shards`` exceeds ``gpus_per_node``. Raises ``CardError`` for non-positive sizes or rates."""
    if min(summoned_bytes, adapter_bytes, d2h_bytes_per_s, h2d_bytes_per_s) <= 0 or engine_rank_adapter_bytes < 0:
        raise CardError("adapter sync: summoned_bytes, adapter_bytes and the copy rates must be > 0")
    if summon_units < 1 or train_shards < 1 or gpus_per_node < 1:
        raise CardError("adapter sync: summon_units, train_shards and gpus_per_node must be >= 1")
    gather = 0.0
    if train_shards > 1:
        crosses = train_shards > gpus_per_node
        local = min(train_shards, gpus_per_node)
        bus = collectives.ring_bus_bytes_per_s(rates=rates, crosses_nodes=crosses, nic_bytes_per_s=nic_bytes_per_s,
                                               local_ranks=local)
        nodes = collectives.group_nodes(ranks=train_shards, ranks_per_node=local) if crosses else 1
        gather = summon_units * collectives.all_gather_seconds(
            total_bytes=summoned_bytes / summon_units, ranks=train_shards, bus_bytes_per_s=bus, nodes=nodes,
            intra_link=collectives.IntraLink.of(nvlink=rates.nvlink))
    to_host = adapter_bytes / d2h_bytes_per_s
    to_slots = engine_rank_adapter_bytes / h2d_bytes_per_s
    notes = (
        f"adapter only: {adapter_bytes / 1e9:.3g} GB of LoRA tensors to host memory ({to_host:.2f} s), each engine"
        f" rank's {engine_rank_adapter_bytes / 1e9:.3g} GB slot filled ({to_slots:.2f} s)",
        f"collected by {summon_units} FSDP unit gathers of {summoned_bytes / 1e9:.3g} GB over {train_shards} shard(s)"
        f" ({gather:.2f} s)" + (": the base weights are gathered with the adapter" if summoned_bytes > adapter_bytes
                                else ": the adapter alone"),
        "host cost per adapter tensor not priced (a lower bound)",
    )
    transfer = to_host + to_slots
    return SyncTime(gather_s=gather, transfer_s=transfer, per_tensor_s=0.0, total_s=gather + transfer,
                    assumptions=notes)
