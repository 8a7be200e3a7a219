"""DeepSpeed JSON config (the ``--deepspeed ds.json`` of HF Trainer / TRL, or ``deepspeed.initialize``).

Keys follow DeepSpeed 0.19 (deepspeed/runtime/config.py and runtime/zero/config.py
``DeepSpeedZeroConfig``). FSDP strategies map to their ZeRO equivalents: FULL_SHARD is ZeRO-3,
SHARD_GRAD_OP is ZeRO-2, HSDP is ZeRO-3 with ZeRO++ hierarchical partitioning
(``zero_hpz_partition_size`` = GPUs per node). Tensor parallelism is DeepSpeed's AutoTP training
(``tensor_parallel.autotp_size``, DeepSpeed 0.19.8 ``runtime/tensor_parallel/config.py``); no other
model-parallel setting is a DeepSpeed JSON key for Hugging Face models (said in notes).
"""

from __future__ import annotations

import json
from typing import Any

from trainfit.export.common import (
    DS_STAGE3_KEYS,
    DS_STAGE12_KEYS,
    Export,
    global_batch,
    non_default,
    shared_notes,
    train_gpus_per_node,
    zero_stage,
)
from trainfit.memory.deepspeed import AUTO
from trainfit.spec.card import RunCard
from trainfit.spec.enums import ComputeDtype, Dtype, MasterWeights, Offload, Optimizer, StatesDtype, Strategy

FILENAME = "ds_config.json"

_FROM_FSDP = {Strategy.FSDP: 3, Strategy.FSDP_GRAD_OP: 2, Strategy.HSDP: 3, Strategy.DDP: 0, Strategy.SINGLE: 0}


_HF_FILLS = {"reduce_bucket_size": "hidden^2", "stage3_prefetch_bucket_size": "0.9 hidden^2",
             "stage3_param_persistence_threshold": "10 hidden"}
"""The "auto" keys transformers' HfTrainerDeepSpeedConfig fills; DeepSpeed drops any other "auto"."""


def zero_settings(card: RunCard, stage: int) -> dict[str, Any]:
    """The card's ``deepspeed`` section as ``zero_optimization`` keys (runtime/zero/config.py at 0.19.8):
    the bucket sizes and switches at every stage, the ``stage3_*`` limits and ``sub_group_size`` at
    stage 3; "auto" passed through for the HF Trainer; ``overlap_comm`` as DeepSpeed resolves an unset one."""
    ds = card.deepspeed
    keys = ("reduce_bucket_size", "allgather_bucket_size") + (DS_STAGE3_KEYS if stage == 3 else ())
    out: dict[str, Any] = {k: getattr(ds, k) for k in keys}
    out["overlap_comm"] = stage == 3 if ds.overlap_comm is None else ds.overlap_comm
    out["contiguous_gradients"] = ds.contiguous_gradients
    return out


def build(card: RunCard) -> Export:
    notes: list[str] = []
    s = card.parallel.strategy
    stage = zero_stage(card)
    if stage is None:
        stage = _FROM_FSDP[s]
        what = {3: "ZeRO-3", 2: "ZeRO-2", 0: "ZeRO stage 0 (plain data parallel)"}[stage]
        note = f"parallel.strategy {s.value}: DeepSpeed has no {s.value}; exported as {what}"
        if stage:
            keys = DS_STAGE12_KEYS + (DS_STAGE3_KEYS if stage == 3 else ())
            note += (f"; its ZeRO settings are the card's deepspeed section ({', '.join('deepspeed.' + k for k in keys)}),"
                     f" which the card's {s.value} plan does not read")
        notes.append(note)
    zero: dict[str, Any] = {"stage": stage}
    off = card.parallel.offload
    if off is not Offload.NONE:
        if stage == 0:
            notes.append(f"parallel.offload {off.value}: ZeRO stage 0 cannot offload; dropped")
        else:
            zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if off is Offload.PARAMS_AND_OPTIMIZER and stage:
        if stage == 3:
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
        else:
            notes.append(f"parallel.offload params_and_optimizer: ZeRO-{stage} offloads only the optimizer (parameters need stage 3)")
    if stage >= 1:
        zero.update(zero_settings(card, stage))
        autos = [k for k, v in zero.items() if v == AUTO]
        if autos:
            filled = ", ".join(f"{k} = {_HF_FILLS.get(k, 'DeepSpeed default')}" for k in autos)
            notes.append(
                f"deepspeed {', '.join(autos)} auto: written as \"auto\", which the HF Trainer (--deepspeed ds.json) "
                f"resolves ({filled}); deepspeed.initialize on its own drops \"auto\" and uses DeepSpeed's defaults"
            )
    if stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    if s is Strategy.HSDP:
        zero["zero_hpz_partition_size"] = train_gpus_per_node(card)
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": card.batch.micro_batch_size,
        "gradient_accumulation_steps": card.batch.grad_accum,
        "train_batch_size": global_batch(card),
        "gradient_clipping": 1.0,
    }
    c = card.precision.compute
    if c in (ComputeDtype.BF16, ComputeDtype.FP8, ComputeDtype.FP4):  # fp8/fp4: bf16 around the GEMMs (said in a note)
        cfg["bf16"] = {"enabled": True}
    elif c is ComputeDtype.FP16:
        cfg["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    cfg["zero_optimization"] = zero
    if card.parallel.tensor_parallel > 1:
        # AutoTP training (runtime/tensor_parallel/config.py TPTrainingConfig.autotp_size); train_batch_size still
        # counts every rank, as DeepSpeed's world size does without an mpu (OpenRLHF multiplies its batch by the TP size)
        cfg["tensor_parallel"] = {"autotp_size": card.parallel.tensor_parallel}
    p = card.precision
    if (
        c is not ComputeDtype.FP32
        and p.master_weights is MasterWeights.NONE
        and card.weights_dtype is not Dtype.FP32
        and stage >= 1
    ):
        notes.append(
            "precision.master_weights none: DeepSpeed's bf16/fp16 optimizer always keeps fp32 master weights and "
            "fp32 optimizer states for its ZeRO partition (more memory than the card's pure-bf16 plan)"
        )
    if p.optimizer_states is StatesDtype.BF16:
        notes.append("precision.optimizer_states bf16: DeepSpeed keeps optimizer states in fp32")
    if p.grads is not None:
        cfg.setdefault("data_types", {})["grad_accum_dtype"] = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16"}[p.grads.value]
    if p.optimizer is not Optimizer.ADAMW:
        notes.append(
            f"precision.optimizer {p.optimizer.value}: no DeepSpeed optimizer block is written; the trainer's optimizer "
            "is used (HF optim=...)" + ("; with CPU offload DeepSpeed wants its own CPU Adam (set zero_force_ds_cpu_optimizer: false to override)" if off is not Offload.NONE else "")
        )
    if card.parallel.gradient_checkpointing:
        notes.append(
            "parallel.gradient_checkpointing: turned on in the model/trainer (gradient_checkpointing=True), "
            "not in the DeepSpeed JSON (its activation_checkpointing section is for Megatron-style models)"
        )
    if card.parallel.activation_offload:
        notes.append("parallel.activation_offload: not a DeepSpeed JSON setting for HF models; set it in the trainer")
    if card.hardware.nodes > 1 and non_default(card, "hardware.nodes"):
        notes.append(f"hardware.nodes {card.hardware.nodes}: the world size comes from the launcher (deepspeed --num_nodes)")
    notes.extend(shared_notes(card, "deepspeed"))
    text = json.dumps(cfg, indent=2) + "\n"
    return Export(target="deepspeed", text=text, data=cfg, notes=notes, filename=FILENAME)


def to_deepspeed(card: RunCard) -> dict[str, Any]:
    """The DeepSpeed config dict for the card."""
    return build(card).data
