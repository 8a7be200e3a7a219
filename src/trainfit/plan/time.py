"""The step-time hook of a plan: ``step_time_of`` turns a resolved card into seconds per optimizer
step and their parts, using the roofline models of ``trainfit.compute``.

Self-contained: the rest of ``trainfit.plan`` calls only ``step_time_of``. Pure: no torch.
"""

from __future__ import annotations

from trainfit.catalog.gpus import GpuSpec
from trainfit.memory.lora import lora_trainable_params
from trainfit.memory.sharding import Sharding
from trainfit.memory.weights import count_scale, weight_bytes
from trainfit.plan.resolve import trainable_spec
from trainfit.spec.card import RunCard
from trainfit.spec.enums import ComputeDtype, Dtype, Method, RefPlacement
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import TrainableSpec


def step_time_of(card: RunCard, spec: ModelSpec, gpu: GpuSpec, sharding: Sharding, rollout) -> tuple[float | None, dict]:
    """Roofline step time (``trainfit.compute``); None when the GPU catalog lacks FLOP/s or bandwidth."""
    from trainfit.compute.step_time import generation_time, sft_step_time, weight_sync_seconds
    from trainfit.errors import TrainfitError

    if not gpu.bf16_dense_flops_per_s or not gpu.hbm_bytes_per_s:
        return None, {}
    trainable = trainable_spec(card)
    lora_params = lora_trainable_params(spec, trainable.lora) * count_scale(spec) if trainable.lora else 0.0
    rl = card.method in (Method.PPO, Method.GRPO)
    ro = card.rollout
    seq = ro.prompt_len + ro.response_len if rl else card.batch.seq_len
    world = sharding.world_size
    if rl:
        tokens = ro.prompts_per_step * ro.num_generations * seq
    else:
        pairs = 2 if card.method in (Method.RM, Method.DPO) else 1
        tokens = card.batch.micro_batch_size * pairs * seq * card.batch.grad_accum * world
    try:
        train = sft_step_time(
            spec, gpu=gpu, gpus=world, tokens_per_step=tokens, scope=card.scope, lora_params=lora_params,
            gradient_checkpointing=card.parallel.gradient_checkpointing, strategy=card.parallel.strategy,
            offload=card.parallel.offload, inter_node=card.hardware.nodes > 1, seq_len=seq,
            micro_steps=card.batch.grad_accum, gpus_per_node=min(card.hardware.gpus_per_node, world),
        )
    except TrainfitError:
        return None, {}
    parts = {"train_compute": train.compute_s, "train_communication": train.comm_s, "offload": train.offload_s}
    if card.method is Method.PPO:
        parts["critic_train"] = train.total_s
    if card.method is Method.DPO:
        parts["reference_forward"] = train.compute_s / 3  # a forward is a third of forward+backward
    if rl and rollout is not None and rollout.engine_fits:
        w = weight_bytes(spec, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base
        gen = generation_time(
            spec, gpu=gpu, tp=ro.tensor_parallel, prompts=ro.prompts_per_step, generations=ro.num_generations,
            prompt_len=ro.prompt_len, completion_len=ro.response_len, weight_bytes=w,
            kv_bytes_per_token=rollout.kv_bytes_per_token * ro.tensor_parallel, engines=rollout.engine_instances,
            max_batch=max(1, rollout.max_concurrency),
        )
        parts["generation"] = gen.total_s
        from trainfit.methods.roles import reference_placement, reward_model

        passes = (
            (card.method is Method.PPO)  # critic values
            + (card.method is Method.PPO or ro.num_iterations > 1)  # old-policy log-probs
            + (reference_placement(card) is not RefPlacement.NONE)
            + (reward_model(card) is not None)
        )
        parts["frozen_forward_passes"] = passes * train.compute_s / 3  # a forward is a third of a training step
        parts["weight_sync"] = weight_sync_seconds(weight_bytes=w / max(1, world), gpu=gpu,
                                                   colocated=ro.placement.value == "colocate")
    parts["tokens_per_step"] = float(tokens)
    return sum(v for k, v in parts.items() if k != "tokens_per_step"), parts
