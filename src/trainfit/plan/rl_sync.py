"""Trainer -> engine in an RL step: the weight sync as the card's framework or transport runs it (``compute.sync``)
and the engine's sleep/wake around it.

Pure: no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainfit.catalog.gpus import GpuSpec
from trainfit.compute.rates import DeviceRates
from trainfit.compute.training import PhaseTime
from trainfit.memory.sharding import Sharding
from trainfit.memory.weights import weight_bytes
from trainfit.methods.roles import (
    group_sizes,
    rollout_nodes,
    train_nodes,
)
from trainfit.plan.rl_common import bf16_engine_weight_bytes, hsdp_shard_of, rl_phase
from trainfit.plan.rl_offload import host_copy_rates, verl_export_stages_shard
from trainfit.plan.time import (
    gathered_weight_bytes_of,
    nic_bytes_per_s,
    nvlink_gpus_per_node,
)
from trainfit.spec.card import RunCard, pin_at_least, pin_before, verl_multi_sender_default
from trainfit.spec.enums import (
    FSDP_STRATEGIES,
    ComputeDtype,
    Dtype,
    FsdpVersion,
    Placement,
    RolloutEngine,
    WeightTransport,
)
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import TrainableSpec

if TYPE_CHECKING:
    from trainfit.compute.sync import SyncTime


TRANSFORMERS_FUSED_EXPERTS_SINCE = (5, 0)
"""The transformers release whose MoE modules hold the routed experts as two stacked parameters
(``compute.sync.trainer_tensor_count``: ``Qwen3MoeExperts``, transformers 5.10.1 models/qwen3_moe/modeling_qwen3_moe.py
l.214-224); before it, one ``nn.Module`` of three linears per expert."""


def trainer_fuses_experts(card: RunCard) -> bool:
    """A transformers trainer's MoE experts are stacked (``TRANSFORMERS_FUSED_EXPERTS_SINCE``) unless the card states
    otherwise: ``parallel.moe_experts`` loop / loop_all (transformers < 5's per-expert modules) or a
    ``software.transformers`` pin before 5.0 (``pin_before``)."""
    return not (card.parallel.moe_experts.is_loop
                or pin_before(card.software.transformers, TRANSFORMERS_FUSED_EXPERTS_SINCE))


def sync_phase(card: RunCard, spec: ModelSpec, gpu: GpuSpec, sharding: Sharding, rollout, r: DeviceRates) -> PhaseTime | None:
    """Trainer -> engine weights as the card's framework does it (``compute.sync``); none for DeepSpeed's Hybrid
    Engine, which generates on the trainer's own (gathered) weights (its gather is in the generation phase)."""
    if rollout is None or card.rollout.engine is RolloutEngine.DEEPSPEED_HYBRID:
        return None
    from trainfit.compute.sync import (
        DTENSOR_STRIDED_GRAPH_PLAN_SINCE,
        NEMO_RL_BRIDGE_SINCE,
        SKYRL_FSDP_PACKED_IPC_SINCE,
        SKYRL_MEGATRON_PACKED_IPC_SINCE,
        VERL_UNCAST_EXPORT_SINCE,
        SyncMechanism,
        export_staging_seconds,
        framework_sync_mechanism,
        fsdp1_state_dict_units,
        hf_tensor_bytes,
        hf_tensor_count,
        megatron_export_gather,
        sglang_tensor_request_seconds,
        trainer_tensor_count,
        verl_broadcast_senders,
        weight_sync_seconds,
    )
    from trainfit.rollout.quantization import FP8_CAST_BYTES_PER_PARAM, refit_cast_params

    ro = card.rollout
    if ro.weight_transport is not WeightTransport.FRAMEWORK:
        return _transport_sync_phase(card, spec, gpu, sharding, rollout, r)
    from trainfit.plan.rl_generation import engine_serves_adapter

    if engine_serves_adapter(card):
        return _adapter_sync_phase(card, spec, sharding, rollout, r, gpu)
    chosen = ro.weight_sync if "weight_sync" in ro.model_fields_set else None
    sharded = card.parallel.strategy.value in ("zero3", "fsdp", "hsdp", "fsdp_grad_op")
    fs = framework_sync_mechanism(card.preset or "trl", ro.placement.value, chosen, engine=ro.engine)
    # a card pinned to a SkyRL release before its packed CUDA-IPC buffer (``software.skyrl-train``: Megatron before
    # 0.3, FSDP before 0.4) makes one handle per tensor in its colocated buckets (compute.sync.SKYRL_IPC_PER_TENSOR)
    if fs.framework == "skyrl" and fs.placement is Placement.COLOCATE and pin_before(
            (card.software.model_extra or {}).get("skyrl-train"),
            SKYRL_FSDP_PACKED_IPC_SINCE if sharded else SKYRL_MEGATRON_PACKED_IPC_SINCE):
        fs = framework_sync_mechanism(card.preset or "trl", ro.placement.value, chosen, engine=ro.engine,
                                      ipc_handle_per_tensor=True)
    train_gpus, _ = group_sizes(card)
    p = card.parallel
    # the ranks a parameter is sharded over: HSDP's shard group, else every training GPU
    shard_ranks = hsdp_shard_of(card, sharding) or train_gpus
    # NeMo RL's Megatron backend exports through Megatron-Bridge: every training rank receives every tensor over its
    # PP/TP/EP groups, whose "node" is the NVLink domain (GB200 NVL72); its DTensor backend is the sharded gather
    # a card pinned to NeMo RL before v0.4 (``software.nemo-rl``) runs v0.3's own gather_params on the colocated
    # CUDA-IPC refit, the path read (compute.sync.NEMO_RL_V03_GATHER); its NCCL path is not read here, so any other
    # mechanism keeps Megatron-Bridge's export
    # SkyRL's Megatron worker exports through Megatron-Bridge on every rank too (compute.sync SKYRL_COLOCATED)
    v03 = (fs.framework == "nemo-rl" and ro.placement is Placement.COLOCATE
           and fs.mechanism is SyncMechanism.COLOCATED_CUDA_IPC
           and pin_before((card.software.model_extra or {}).get("nemo-rl"), NEMO_RL_BRIDGE_SINCE))
    export = None if fs.framework not in ("nemo-rl", "skyrl") or sharded else megatron_export_gather(
        spec=spec, tp=p.tensor_parallel, pp=p.pipeline_parallel, ep=p.expert_parallel, etp=p.expert_tensor_parallel,
        world=train_gpus, gpus_per_node=nvlink_gpus_per_node(gpu.id, train_nodes(card)[1], train_gpus), rates=r,
        nic_bytes_per_s=nic_bytes_per_s(card), v03_gather=v03)
    # verl's FSDP engines all-gather each fp32 shard and cast it to bf16 after (compute.sync: gathers_trainer_dtype)
    from trainfit.plan.resolve import trainable_spec
    from trainfit.plan.terms import trained_dtype_bytes
    fp32 = card.weights_dtype is Dtype.FP32 or trained_dtype_bytes(card)[2]
    gather_fp32 = fs.gathers_trainer_dtype and sharded and fp32 and trainable_spec(card).lora is None
    trainer_dtype_bytes = weight_bytes(spec, weights=Dtype.FP32 if fp32 else Dtype.BF16, compute=ComputeDtype.BF16,
                                       trainable=TrainableSpec()).base
    # verl's FSDP1 export: state_dict() all-gathers every FSDP unit before the per-tensor gathers (compute.sync)
    unshard_units = fsdp1_state_dict_units(spec) if (
        fs.unshards_fsdp1_state_dict and sharded and card.parallel.strategy in FSDP_STRATEGIES
        and card.parallel.fsdp_version is FsdpVersion.FSDP1 and trainable_spec(card).lora is None) else 0
    # verl's checkpoint engine on a split placement: a trainer with its parameters offloaded streams each rank's shard
    # back from host memory for the export (compute.sync.export_staging_seconds); colocated, the state_offload phase
    # already brings the weights back for the sync. FSDP2's shard lies in pageable memory (``model.cpu()``), FSDP1's
    # pinned (``flat_param_to(cpu, non_blocking=True)``): compute.offload, "Pinned or pageable host memory"
    staging = export_staging_seconds(
        shard_bytes_per_rank=trainer_dtype_bytes / shard_ranks,
        host_copy_bytes_per_s=host_copy_rates(card, r, gpu)[1 if p.fsdp2 else 0],
    ) if verl_export_stages_shard(card) else 0.0
    # verl from 0.9 exports the trainer's dtype uncast, so an fp32 trainer sends and its receivers copy fp32
    # (compute.sync.VERL_UNCAST_EXPORT_SINCE); a card pinned to an earlier verl, or none, sends bf16, and so does a
    # pin that names no release: a branch, a commit hash, an upper bound (spec.card.pin_at_least)
    uncast = (gather_fp32 and fs.framework == "verl"
              and pin_at_least((card.software.model_extra or {}).get("verl"), VERL_UNCAST_EXPORT_SINCE))
    sent_bytes = trainer_dtype_bytes if uncast else bf16_engine_weight_bytes(spec)
    # verl's checkpoint engine with multi_sender: actor rank 0's node-local actor workers relay its broadcast
    # (compute.sync.verl_broadcast_senders); else rank 0 alone. Unset: the pinned verl's default
    # (spec.card.verl_multi_sender_default: relays from a 0.10 pin; one sender for every release, a 0.9 dev pin, none)
    relays = ro.weight_sync_relays
    if relays is None:
        relays = verl_multi_sender_default((card.software.model_extra or {}).get("verl")) is True
    senders = verl_broadcast_senders(relays=relays and fs.broadcasts_whole_bucket, train_gpus=train_gpus,
                                     gpus_per_node=train_nodes(card)[1])
    # MarinSkyRL's per-tensor loop sends the trainer module's state_dict() entries (compute.sync:
    # FrameworkSync.sends_trainer_state_dict): transformers 5 stacks a MoE layer's experts in two tensors
    tensors = (trainer_tensor_count(spec, fused_experts=trainer_fuses_experts(card)) if fs.sends_trainer_state_dict
               and sharded else hf_tensor_count(spec))
    t = weight_sync_seconds(
        gather_bytes=trainer_dtype_bytes if gather_fp32 else quantized_actor_gather_bytes(
            card, spec, framework=fs.framework, sharded=sharded),
        mechanism=fs.mechanism, weight_bytes=sent_bytes, num_tensors=tensors,
        # HSDP gathers a tensor over its shard group only: ``full_tensor()`` (verl get_per_tensor_param, compute.sync)
        # is ``redistribute([Replicate()] * ndim)``, and on the (Replicate(), Shard(0)) mesh the replicate dim is
        # skipped (``current == target``) and the shard dim all-gathered (pytorch/pytorch
        # @cf30153c4c131c8164ee7798e5022d810682e2cb torch/distributed/tensor/_api.py l. 748-776, _redistribute.py
        # l. 1625-1628; volcengine/verl @b178a3cd56f58b2d502255daba591e92833930a7
        # verl/workers/engine/fsdp/transformer_impl.py l. 666-669)
        train_shards=shard_ranks if sharded else 1, tp=ro.tensor_parallel, rates=r,
        # an FSDP2 x TP parameter is a 2-D DTensor: ``full_tensor()`` gathers the TP dimension, then the FSDP one over
        # the whole tensor (compute.sync.dtensor_full_tensor_gather_seconds)
        # (torch before 2.10, or no torch pin: compute.sync.DTENSOR_STRIDED_GRAPH_PLAN_SINCE)
        inner_shards=p.tensor_parallel if (sharded and p.fsdp2 and p.tensor_parallel > 1
                                           and shard_ranks % p.tensor_parallel == 0
                                           and not pin_at_least(card.software.torch,
                                                                DTENSOR_STRIDED_GRAPH_PLAN_SINCE)) else 1,
        engines=max(1, rollout.engine_instances), inter_node=card.hardware.nodes > 1,
        gpus_per_node=card.hardware.gpus_per_node, nic_bytes_per_s=nic_bytes_per_s(card),
        # the bucket the run set (rollout.weight_sync_bucket_mib: miles' --update-weight-buffer-size), else the preset's
        bucket_bytes=fs.bucket_bytes if ro.weight_sync_bucket_mib is None else ro.weight_sync_bucket_mib * 2**20,
        s_per_tensor=fs.s_per_tensor,
        sender_node_ranks=train_nodes(card)[1] if fs.trainer_ranks_in_group else senders,
        trainer_group_ranks=train_gpus if fs.trainer_ranks_in_group else senders,
        # an fp8 engine receives bf16 and casts every fp8 weight whole on each rank (rollout.quantization)
        receiver_cast_params=refit_cast_params(spec, quantization=ro.quantization,
                                               bf16_modules=tuple(ro.quantization_bf16_modules)),
        receiver_cast_bytes_per_param=FP8_CAST_BYTES_PER_PARAM, trainer_gather=export,
        # verl's checkpoint engine fills its buckets in state_dict order and broadcasts each whole (compute.sync)
        tensor_bytes=hf_tensor_bytes(spec, bytes_per_param=4.0 if uncast else 2.0) if fs.broadcasts_whole_bucket
        else None,
        whole_bucket=fs.broadcasts_whole_bucket, export_staging_s=staging, unshard_units=unshard_units,
        # verl into SGLang: each bucket's request carries tp copies of tp CUDA-IPC handles per tensor (compute.sync)
        request_s=sglang_tensor_request_seconds(num_tensors=hf_tensor_count(spec), tp=ro.tensor_parallel)
        if fs.sglang_tensor_requests else 0.0,
    )
    if ro.engine is RolloutEngine.HF:
        from trainfit.plan.rl_generation import hf_gathers_per_forward

        return _weight_sync_phase(hf_gather_per_call(
            hf_shared_weights(t, gathered_per_forward=hf_gathers_per_forward(card)), calls=ro.generation_calls))
    return _weight_sync_phase(with_peft_merge(t, card, spec, r))


PEFT_MERGE_ASSUMPTION = (
    "weight sync: TRL sends the LoRA actor merged: PEFT merge_adapter before the per-parameter load and"
    " unmerge_adapter after it (trl grpo_trainer.py _move_model_to_vllm l.897-945 @6adfd138, v0.23.0), per adapted"
    " module a rank-r GEMM and a scaling multiply in the adapter dtype, the in-place add, the cast and the subtract"
    " (peft v0.17.1 lora/layer.py l.677-702, l.733), timed as the weight_sync phase's merge term, the longer of the"
    " kernels and their host launches (compute.lora_merge); the transient delta's memory is not planned")
"""The plan's assumption line where ``peft_merges_for_sync`` holds (``plan.assumptions``)."""


def peft_merges_for_sync(card: RunCard) -> bool:
    """Whether the sync sends merged LoRA weights that PEFT merges and unmerges on the trainer (``compute.lora_merge``):
    TRL is the planned framework (the trl preset or none, ``methods.roles.trl_planned``), the actor is LoRA on a 16-bit
    or fp32 base (``scope: lora``) and the engine serves (vLLM, SGLang), so TRL's ``_move_model_to_vllm`` runs
    ``merge_adapter`` before the per-parameter load and ``unmerge_adapter`` after it, in colocate and server mode alike
    (huggingface/trl trl/trainer/grpo_trainer.py l.897-945 @6adfd138d895b7ac257c4079eab7d519a0472aaa, v0.23.0;
    ``_iter_named_params`` in trl/generation/vllm_generation.py l.385-406 @f2cd57710ae345ea6428ae95363267fcf38a3dc8).
    Not for QLoRA: PEFT's 4-bit merge dequantizes and re-quantizes each weight (peft tuners/lora/bnb.py), not read
    here; not where the engine serves the adapter unmerged (``plan.rl_generation.engine_serves_adapter``)."""
    from trainfit.methods.roles import trl_planned
    from trainfit.plan.rl_generation import engine_serves_adapter
    from trainfit.spec.enums import SERVING_ENGINES, Scope

    return (trl_planned(card) and card.scope is Scope.LORA and card.rollout.engine in SERVING_ENGINES
            and not engine_serves_adapter(card))


def with_peft_merge(t: SyncTime, card: RunCard, spec: ModelSpec, r: DeviceRates) -> SyncTime:
    """``t`` plus PEFT's merge and unmerge of every adapted module where the sync sends merged weights
    (``peft_merges_for_sync``): one rank-r GEMM, a scaling multiply and the in-place update per module and call in the
    adapter's dtype (``lora.adapter_dtype``) over the base's (``card.weights_dtype``), the longer of the device's kernels
    and the host's launches at ``rates.host_s_per_forward_kernel`` each (``compute.lora_merge``). Every adapted module
    is merged whole on the rank that sends (ZeRO-3 gathers the whole model first, l.910-912 there); fused MoE experts
    are planned as ``experts`` separate linears."""
    if not peft_merges_for_sync(card):
        return t
    from dataclasses import replace

    from trainfit.compute.lora_merge import AdaptedLinear, merge_unmerge_seconds
    from trainfit.memory.lora import targeted_groups
    from trainfit.plan.resolve import trainable_spec
    from trainfit.units import BYTES_PER_DTYPE

    lora = trainable_spec(card).lora
    modules = tuple(AdaptedLinear(out_features=g.out_features, in_features=g.in_features,
                                  rank=lora.rank * g.lora_rank_multiplier, count=g.count * g.experts)
                    for g in targeted_groups(spec, lora))
    m = merge_unmerge_seconds(modules=modules, adapter_dtype_bytes=lora.adapter_dtype_bytes,
                              base_dtype_bytes=BYTES_PER_DTYPE[card.weights_dtype.value], rates=r,
                              host_s_per_kernel=r.host_s_per_forward_kernel)
    note = (f"PEFT merge_adapter / unmerge_adapter around the sync: {m.kernels} kernels over"
            f" {sum(x.count for x in modules)} adapted modules, device {m.device_s:.3g} s, host launches"
            f" {m.host_s:.3g} s (compute.lora_merge)")
    return replace(t, merge_s=m.total_s, total_s=t.total_s + m.total_s, assumptions=t.assumptions + (note,))


def _adapter_sync_phase(card: RunCard, spec: ModelSpec, sharding: Sharding, rollout, r: DeviceRates,
                        gpu: GpuSpec) -> PhaseTime:
    """The sync of an engine that serves the actor's LoRA adapter unmerged (``plan.rl_generation.
    engine_serves_adapter``): only the adapter reaches the engine (``compute.adapter_sync``), collected from every
    decoder layer's FSDP1 unit gathered in the trainer's dtype (``card.weights_dtype``), or from the adapter's FSDP2
    shards alone (``plan.rl_generation.adapter_collect_gathers``, as the memory plans it), copied to host memory
    (pageable) and loaded into each engine rank's slot (``memory.engine_lora.engine_lora_slot_bytes`` at one slot)."""
    from trainfit.compute.adapter_sync import adapter_sync_seconds
    from trainfit.memory.engine_lora import engine_lora_slot_bytes
    from trainfit.memory.lora import lora_trainable_params, targeted_groups
    from trainfit.memory.params import param_breakdown
    from trainfit.memory.weights import count_scale
    from trainfit.plan.resolve import trainable_spec
    from trainfit.units import BYTES_PER_DTYPE

    from trainfit.plan.rl_generation import adapter_collect_gathers

    ro = card.rollout
    train_gpus, _ = group_sizes(card)
    base_units, sharded = adapter_collect_gathers(card)
    shard_ranks = (hsdp_shard_of(card, sharding) or train_gpus) if sharded else 1
    lora = trainable_spec(card).lora
    adapter_params = lora_trainable_params(spec, lora)
    per_param = BYTES_PER_DTYPE[card.weights_dtype.value]
    # FSDP1 unshards every decoder unit with the adapter; FSDP2 gathers the adapter's DTensors alone (as the memory)
    decoder_params = sum(param_breakdown(spec).per_layer) * count_scale(spec) if base_units else 0.0
    adapter_tensors = 2 * sum(g.count * g.experts for g in targeted_groups(spec, lora))
    pageable = host_copy_rates(card, r, gpu)[1]
    engine_pinned = host_copy_rates(card, r, gpu, gpus_per_node=rollout_nodes(card)[1])[0]
    t = adapter_sync_seconds(
        summoned_bytes=(decoder_params + adapter_params) * per_param,
        # one unit per adapter tensor (A and B of every wrapped linear), and one per decoder layer under FSDP1
        summon_units=(spec.num_layers if base_units else 0) + adapter_tensors,
        adapter_bytes=adapter_params * per_param,
        engine_rank_adapter_bytes=engine_lora_slot_bytes(spec, max_lora_rank=lora.rank, max_loras=1,
                                                         tp=ro.tensor_parallel),
        train_shards=shard_ranks, rates=r, gpus_per_node=train_nodes(card)[1],
        nic_bytes_per_s=nic_bytes_per_s(card), d2h_bytes_per_s=pageable, h2d_bytes_per_s=engine_pinned)
    return _weight_sync_phase(t)


def quantized_actor_gather_bytes(card: RunCard, spec: ModelSpec, *, framework: str, sharded: bool) -> float | None:
    """Bytes the weight sync all-gathers from a sharded actor whose stored weights are quantized (QLoRA's nf4, int8):
    the stored flat parameters, not a bf16 copy; None where the gather moves what the engine receives (the caller's
    ``sent_bytes``).

    TRL gathers the PEFT model's own parameters and merges the adapters into them: ``_iter_named_params`` runs
    ``model.merge_adapter()`` and, under FSDP1, ``FSDP.summon_full_params(module, recurse=False)`` on each unit, which
    all-gathers the unit's flat parameter as it is stored (the packed 4-bit ``Params4bit`` data), and yields
    ``param.data``; under FSDP2 ``param.full_tensor()`` per parameter, the same stored shards (trl 1.16.0 from PyPI,
    read 2026-12-05: trl/generation/vllm_generation.py l.385-406, l.408-426, l.443-469). What crosses the training
    links is thus the nf4 base plus the adapters (``plan.time.gathered_weight_bytes_of``, as the training pass
    gathers them). Other frameworks: not read for a quantized actor, the bf16 gather kept."""
    if framework != "trl" or not sharded or card.weights_dtype in (Dtype.BF16, Dtype.FP16, Dtype.FP32):
        return None
    w = gathered_weight_bytes_of(card, spec)
    return w.base + w.adapter


def hf_shared_weights(t: SyncTime, *, gathered_per_forward: bool = False) -> SyncTime:
    """``rollout.engine: hf``: ``generate`` runs on the training model itself, so nothing is copied into an engine:
    no bucket fill, broadcast or ``load_weights`` per tensor (``transfer_s``, ``per_tensor_s`` 0); what is left is the
    sharded trainer's whole-model gather for the call (``gather_s``, ``hf_gather_per_call``) where one happens: ZeRO-3
    with TRL's ``ds3_gather_for_generation`` (``deepspeed.zero.GatheredParameters(model.parameters())``,
    trl/models/utils.py l.141-150) and SHARD_GRAD_OP (every unit gathered at its first forward and kept). TRL's
    non-vLLM branch of ``_generate_single_turn`` calls ``unwrapped_model.generate`` under
    ``unwrap_model_for_generation`` and ``summon_full_params(self.model_wrapped, recurse=False)`` and never calls
    ``sync_weights`` (trl 1.16.0 from PyPI, read 2026-12-05: trl/trainer/grpo_trainer.py l.1763-1775, the vLLM
    branch's ``sync_weights``, against l.1861-1875). ``gathered_per_forward`` (``plan.rl_generation.
    hf_gathers_per_forward``: FULL_SHARD / HYBRID_SHARD): no whole-model gather at all, ``gather_s`` 0; the units are
    gathered in every forward of ``generate`` and the root unit once per call, both timed in the generation phase
    (``plan.rl_generation.hf_sharded_forward_terms``). An unsharded trainer's ``gather_s`` is 0 already."""
    from dataclasses import replace

    gather_s = 0.0 if gathered_per_forward else t.gather_s
    return replace(t, transfer_s=0.0, per_tensor_s=0.0, staging_s=0.0, gather_s=gather_s, total_s=gather_s)


def hf_gather_per_call(t: SyncTime, *, calls: int) -> SyncTime:
    """The trainer-side whole-model gather once per generate call (``hf_shared_weights``): with engine hf, TRL generates
    on the training model inside ``unwrap_model_for_generation``, which gathers the whole ZeRO-3 model for that call
    and re-partitions it after
    (huggingface/trl trl/trainer/grpo_trainer.py compute_loss l.419-424 @29de6eec7ba9b3923e41012e4984e9e352c9ea54,
    v0.14.0; trl/models/utils.py ``unwrap_model_for_generation`` l.187-193, ``deepspeed.zero.GatheredParameters``), so
    ``rollout.generation_calls`` sequential calls gather ``calls`` times. ``calls`` 1: ``t`` unchanged."""
    if calls <= 1:
        return t
    from dataclasses import replace

    extra_s = (calls - 1) * t.gather_s
    return replace(t, gather_s=t.gather_s + extra_s, total_s=t.total_s + extra_s)


def _transport_sync_phase(card: RunCard, spec: ModelSpec, gpu: GpuSpec, sharding: Sharding, rollout,
                          r: DeviceRates) -> PhaseTime:
    """The weight sync of a ``rollout.weight_transport`` other than the framework's own path (``compute.sync``):
    NeMo RL's NCCL reshard refit (``nccl_reshard_seconds``) or checkpoint-engine's Broadcast update
    (``checkpoint_engine_seconds``). What the transports refuse, the card refuses (``spec.card._check_weight_transport``)."""
    from trainfit.compute.sync import (
        checkpoint_engine_bucket_bytes,
        checkpoint_engine_seconds,
        fp8_scale_tensor_count,
        hf_tensor_bytes,
        hf_tensor_count,
        nccl_reshard_seconds,
    )
    from trainfit.rollout.quantization import FP8_CAST_BYTES_PER_PARAM, engine_weight_bytes, is_quantized

    ro, p = card.rollout, card.parallel
    fp8 = is_quantized(ro.quantization)
    kept = tuple(ro.quantization_bf16_modules)
    wbytes = engine_weight_bytes(spec, quantization=ro.quantization, bf16_modules=kept) if fp8 else \
        bf16_engine_weight_bytes(spec)
    engines = max(1, rollout.engine_instances)
    if ro.weight_transport is WeightTransport.NCCL_RESHARD:
        train_gpus, _ = group_sizes(card)
        t = nccl_reshard_seconds(
            spec=spec, weight_bytes=wbytes, train_tp=p.tensor_parallel, train_pp=p.pipeline_parallel,
            train_ep=p.expert_parallel, train_etp=p.expert_tensor_parallel, train_world=train_gpus,
            gen_tp=ro.tensor_parallel, gen_engines=engines, rates=r,
            gpus_per_node=nvlink_gpus_per_node(gpu.id, train_nodes(card)[1], train_gpus),
            inter_node=card.hardware.nodes > 1, nic_bytes_per_s=nic_bytes_per_s(card), fp8=fp8, fp8_kept=kept,
            sender_node_ranks=train_nodes(card)[1], fp8_cast_bytes_per_param=FP8_CAST_BYTES_PER_PARAM)
    else:
        ranks = engines * ro.tensor_parallel
        tensors = hf_tensor_count(spec) + (fp8_scale_tensor_count(spec, kept) if fp8 else 0)
        # the engine's GPUs copy the buckets and take the broadcast: split placement gives a node rollout.gpus of them
        engine_per_node = rollout_nodes(card)[1]
        # the largest tensor as the checkpoint holds it in bf16 (an fp8 checkpoint keeps its embedding and head bf16)
        largest = max(hf_tensor_bytes(spec) or (0.0,))
        t = checkpoint_engine_seconds(
            weight_bytes=wbytes, num_tensors=tensors, ranks=ranks, tp=ro.tensor_parallel,
            gpus_per_node=engine_per_node, rates=r,
            # the free memory beside vLLM's budget (gpu_memory_utilization) sizes the buckets, never below the
            # largest tensor (_detect_bucket_size)
            bucket_bytes=checkpoint_engine_bucket_bytes(free_bytes=gpu.memory_bytes * (1 - ro.gpu_memory_utilization),
                                                        max_tensor_bytes=largest),
            h2d_bytes_per_s=host_copy_rates(card, r, gpu, gpus_per_node=engine_per_node)[0],
            nic_bytes_per_s=nic_bytes_per_s(card), finalize=fp8)
    return _weight_sync_phase(t)


def _weight_sync_phase(t: SyncTime) -> PhaseTime:
    """The ``weight_sync`` phase of a sync's seconds (``compute.sync.SyncTime``), its parts named as the plan shows
    them, for the framework path and the transports alike."""
    return rl_phase("weight_sync", t.total_s, "communication", gather=t.gather_s, transfer=t.transfer_s,
                    per_tensor=t.per_tensor_s, staging=t.staging_s, **({"merge": t.merge_s} if t.merge_s else {}))


def sleep_wake_phase(card: RunCard, spec: ModelSpec, rollout, r: DeviceRates) -> PhaseTime | None:
    """vLLM sleep mode between rollouts (level 1: weights to pinned host memory; level 2: dropped); SGLang's
    release_memory_occupation (level 1: the KV cache only; level 2: also the weights, freed)."""
    ro = card.rollout
    if rollout is None or ro.sleep_level == 0:
        return None
    from trainfit.compute.generation import sleep_wake_seconds
    from trainfit.rollout.quantization import card_engine_rank_bytes

    rank = card_engine_rank_bytes(card, spec)  # an fp8 engine sleeps and wakes its 1-byte weights
    t = sleep_wake_seconds(level=ro.sleep_level,
                           weight_bytes_per_gpu=bf16_engine_weight_bytes(spec) / ro.tensor_parallel if rank is None else rank,
                           kv_cache_bytes_per_gpu=rollout.kv_cache_bytes, rates=r,
                           host_backup=ro.engine is not RolloutEngine.SGLANG, gpus_per_node=rollout_nodes(card)[1])
    return rl_phase("sleep_wake", t.total_s, "offload", sleep=t.sleep_s, wake=t.wake_s)
