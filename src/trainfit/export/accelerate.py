"""accelerate launch config (``accelerate launch --config_file accelerate.yaml``), accelerate 1.15.

Keys are those ``accelerate config`` writes and ``accelerate launch`` reads
(accelerate/commands/config/config_args.py ClusterConfig; FSDP keys are the ``--fsdp_*``
launch flags of accelerate/commands/launch.py). ``parallel.fsdp_version`` picks the FSDP API:
fsdp2 writes ``fsdp_version: 2`` (sharding is ``fsdp_reshard_after_forward``: true is FULL_SHARD,
false is SHARD_GRAD_OP; HSDP is ``parallelism_config`` with ``dp_replicate_size`` = nodes and
``dp_shard_size`` = GPUs per node, accelerate/parallelism_config.py "dp_replicate_size > 1 and
dp_shard_size > 1, we obtain Hybrid Sharded Data Parallel"); fsdp1 writes ``fsdp_version: 1`` with
``fsdp_sharding_strategy`` FULL_SHARD, SHARD_GRAD_OP or HYBRID_SHARD (shard within a node,
replicate across nodes).
"""

from __future__ import annotations

from typing import Any

import yaml

from trainfit.export.common import (
    Export,
    comment_text,
    deepspeed_facts,
    hsdp_shard_group,
    is_rl,
    mixed_precision,
    non_default,
    shared_notes,
    train_gpus_per_node,
    zero_stage,
)
from trainfit.plan.fsdp_no_sync import fsdp_no_sync
from trainfit.spec.card import RunCard
from trainfit.spec.enums import (
    FSDP_STRATEGIES,
    ComputeDtype,
    Dtype,
    FsdpVersion,
    Offload,
    Placement,
    Scope,
    Strategy,
)

FILENAME = "accelerate.yaml"


def deepspeed_plugin_config(card: RunCard, notes: list[str]) -> dict[str, Any]:
    """accelerate's ``deepspeed_config`` section (the DeepSpeedPlugin fields)."""
    stage = zero_stage(card) or 0
    off = card.parallel.offload
    cfg: dict[str, Any] = {
        "zero_stage": stage,
        "gradient_accumulation_steps": card.batch.grad_accum,
        "gradient_clipping": 1.0,
        "offload_optimizer_device": "cpu" if off is not Offload.NONE else "none",
        "offload_param_device": "none",
    }
    if off is Offload.PARAMS_AND_OPTIMIZER:
        if stage == 3:
            cfg["offload_param_device"] = "cpu"
        else:
            notes.append(
                f"parallel.offload params_and_optimizer: ZeRO-{stage} cannot offload parameters (stage 3 only); "
                "only the optimizer is offloaded"
            )
    if stage == 3:
        cfg["zero3_init_flag"] = True
        cfg["zero3_save_16bit_model"] = True
    # accelerate's DeepSpeedPlugin (no config file) writes no bucket sizes: DeepSpeed's defaults
    facts = deepspeed_facts(card)
    unset = deepspeed_facts(card.model_copy(update={"deepspeed": type(card.deepspeed)()}))
    changed = [k for k in facts if facts[k] != unset[k]]
    if changed:
        notes.append(
            f"{', '.join(changed)}: accelerate's deepspeed_config has no ZeRO bucket settings (DeepSpeed's defaults); "
            "export them with --to deepspeed and launch with that file as deepspeed_config_file in place of these keys"
        )
    return cfg


def fsdp_plugin_config(card: RunCard, notes: list[str]) -> dict[str, Any]:
    s = card.parallel.strategy
    off = card.parallel.offload
    cfg: dict[str, Any] = {"fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP"}
    if card.parallel.fsdp_version is FsdpVersion.FSDP1:
        cfg.update(
            fsdp_version=1,
            fsdp_sharding_strategy=_fsdp1_sharding(s),
            fsdp_backward_prefetch="BACKWARD_PRE",
            fsdp_use_orig_params=True,
            fsdp_state_dict_type="SHARDED_STATE_DICT",
        )
    else:
        cfg.update(
            fsdp_version=2,
            fsdp_reshard_after_forward=s is not Strategy.FSDP_GRAD_OP,
            fsdp_state_dict_type="SHARDED_STATE_DICT",
        )
    cfg["fsdp_offload_params"] = off is Offload.PARAMS_AND_OPTIMIZER
    if s is Strategy.FSDP and card.parallel.fsdp_version is FsdpVersion.FSDP1 and card.batch.grad_accum > 1:
        notes.append(_no_sync_note(card))
    if off is Offload.OPTIMIZER:
        notes.append(
            "parallel.offload optimizer: FSDP offloads parameters, gradients and optimizer together "
            "(fsdp_offload_params) or nothing; optimizer-only offload needs ZeRO (strategy zero1/zero2/zero3)"
        )
    cfg["fsdp_activation_checkpointing"] = card.parallel.gradient_checkpointing
    if card.parallel.activation_offload:
        if card.parallel.gradient_checkpointing:
            cfg["fsdp_activation_checkpointing_offload"] = True
        else:
            notes.append("parallel.activation_offload: accelerate offloads only checkpointed activations; turn on gradient_checkpointing")
    if card.scope is Scope.QLORA:
        notes.append(
            "scope qlora under FSDP: load the 4-bit base with bnb_4bit_quant_storage=bfloat16 so FSDP can shard it "
            "(set in the training script)"
        )
    return cfg


def build(card: RunCard) -> Export:
    notes: list[str] = []
    hw = card.hardware
    per_node = train_gpus_per_node(card)
    procs = per_node * hw.nodes
    s = card.parallel.strategy
    cfg: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "debug": False}
    if s is Strategy.SINGLE:
        dist = "NO"
        procs = 1
        if card.world_size > 1:
            notes.append(f"parallel.strategy single: one process on one GPU; the card's other {card.world_size - 1} GPUs idle")
    elif s is Strategy.DDP:
        dist = "MULTI_GPU" if procs > 1 else "NO"
        if procs == 1:
            notes.append("parallel.strategy ddp on one GPU: accelerate runs one plain process (distributed_type NO, read back as single)")
    elif zero_stage(card) is not None:
        dist = "DEEPSPEED"
        cfg["deepspeed_config"] = deepspeed_plugin_config(card, notes)
    else:
        dist = "FSDP"
        cfg["fsdp_config"] = fsdp_plugin_config(card, notes)
        group = hsdp_shard_group(card)
        if s is Strategy.HSDP and card.parallel.fsdp_version is FsdpVersion.FSDP2:
            # accelerate launch reads a non-empty parallelism_config as --use_parallelism_config (commands/launch.py);
            # its dp_shard_size is the HSDP shard group, dp_replicate_size the replicas (parallel.hsdp_shard_size)
            cfg["parallelism_config"] = {"parallelism_config_dp_replicate_size": max(1, procs // group),
                                         "parallelism_config_dp_shard_size": group}
            if procs <= group:
                notes.append("parallel.strategy hsdp with one shard group: accelerate's FSDP2 HSDP with"
                             " dp_replicate_size 1 is plain FSDP (read back as fsdp)")
        elif s is Strategy.HSDP and group != per_node:
            notes.append(f"parallel.hsdp_shard_size {group}: accelerate's FSDP1 HYBRID_SHARD shards within a node"
                         f" ({per_node} GPUs) and takes no shard size; use fsdp_version 2 (parallelism_config)")
    if dist != "FSDP" and card.parallel.activation_offload:
        notes.append(
            "parallel.activation_offload: not an accelerate launch setting outside FSDP; set it in the trainer "
            "(TRL activation_offloading=True)"
        )
    if s in (Strategy.SINGLE, Strategy.DDP) and card.parallel.offload is not Offload.NONE:
        notes.append(f"parallel.offload {card.parallel.offload.value}: {s.value} cannot offload; use zero2/zero3 or fsdp")
    cfg["distributed_type"] = dist
    mp = mixed_precision(card)
    cfg["mixed_precision"] = mp
    if card.precision.compute is ComputeDtype.FP32 and card.weights_dtype is not Dtype.FP32:
        notes.append("precision.compute fp32 with non-fp32 weights: accelerate runs the weights' dtype without autocast")
    cfg["num_machines"] = 1 if dist == "NO" else hw.nodes
    cfg["num_processes"] = procs
    cfg["machine_rank"] = 0
    cfg["gpu_ids"] = "all"
    cfg["rdzv_backend"] = "static"
    cfg["same_network"] = True
    cfg["main_training_function"] = "main"
    cfg["use_cpu"] = False
    if dist == "NO" and hw.nodes > 1:
        notes.append(f"hardware.nodes {hw.nodes}: a single process runs on one machine (num_machines 1)")
    if hw.nodes > 1 and dist != "NO":
        cfg["main_process_ip"] = "MASTER_ADDR"
        cfg["main_process_port"] = 29500
        notes.append("hardware.nodes > 1: set main_process_ip to node 0's address and machine_rank per node")
    if card.parallel.compile:
        cfg["dynamo_config"] = {"dynamo_backend": "INDUCTOR"}
    if is_rl(card):
        if card.rollout.placement is Placement.SPLIT:
            notes.append(
                f"rollout.placement split: num_processes counts the {per_node} training GPUs per node; "
                f"the rollout engine's {card.rollout.gpus} per node are launched separately (see --to trl)"
            )
        notes.append("rollout.*: accelerate launches the trainer only; the rollout engine is configured by the trainer (see --to trl)")
    if card.scope is not Scope.FULL:
        notes.append(f"scope {card.scope.value}: the adapter is set in the training script (see --to trl for the peft LoraConfig)")
    if non_default(card, "precision.optimizer") or card.precision.optimizer_impl.value != "fused":
        notes.append("precision.optimizer: chosen in the training script, not the launch config (see --to trl optim)")
    if card.loss.chunked:
        notes.append("loss.chunked: a training-script setting (TRL use_liger_kernel=True)")
    notes.extend(shared_notes(card, "accelerate"))
    header = (
        f"# accelerate launch config exported by trainfit for {comment_text(card.name or 'the card')}\n"
        f"# strategy {s.value}" + _fsdp_header(card) + "\n"
    )
    text = header + yaml.safe_dump(cfg, sort_keys=False)
    return Export(target="accelerate", text=text, data=cfg, notes=notes, filename=FILENAME)


def _no_sync_note(card: RunCard) -> str:
    """What accelerate does with the card's accumulating FSDP1 micro-batches (plan.fsdp_no_sync cites the lines):
    ``no_sync`` unless ``GradientAccumulationPlugin.sync_each_batch`` (default False), which no launch-config key
    sets."""
    if fsdp_no_sync(card):
        return ("parallel.fsdp_no_sync: accelerate runs the accumulating FSDP1 micro-batches under no_sync (its"
                " default, as planned): each unit's unsharded gradient is held until the last micro-batch")
    return ("parallel.fsdp_no_sync false: accelerate's default is no_sync on accumulating FSDP1 micro-batches (unsharded"
            " gradients held); to reduce-scatter each one as planned, pass GradientAccumulationPlugin(sync_each_batch="
            "True) (HF Trainer: accelerator_config={'gradient_accumulation_kwargs': {'sync_each_batch': True}}), or"
            " plan with parallel.fsdp_no_sync true")


def _fsdp1_sharding(s: Strategy) -> str:
    """accelerate's ``fsdp_sharding_strategy`` for FSDP1 (``FullyShardedDataParallel``'s ShardingStrategy names)."""
    return {Strategy.HSDP: "HYBRID_SHARD", Strategy.FSDP_GRAD_OP: "SHARD_GRAD_OP"}.get(s, "FULL_SHARD")


def _fsdp_header(card: RunCard) -> str:
    """The header's FSDP API and sharding for an FSDP strategy (empty otherwise)."""
    s = card.parallel.strategy
    if s not in FSDP_STRATEGIES:
        return ""
    if card.parallel.fsdp_version is FsdpVersion.FSDP1:
        return " = FSDP1 " + _fsdp1_sharding(s)
    if s is Strategy.HSDP:
        return " = FSDP2 HSDP (parallelism_config dp_replicate_size x dp_shard_size)"
    return (" = FSDP2 FULL_SHARD (fsdp_reshard_after_forward: true)" if s is Strategy.FSDP
            else " = FSDP2 SHARD_GRAD_OP (fsdp_reshard_after_forward: false)")


def to_accelerate(card: RunCard) -> str:
    """The accelerate config YAML for the card."""
    return build(card).text
