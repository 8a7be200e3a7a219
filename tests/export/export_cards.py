from __future__ import annotations

from trainfit.cli.common import default_card_dict
from trainfit.export import ExportError, export
from trainfit.spec.card import load_card_dict

GRPO_LORA = {
    "name": "qwen3-8b-grpo-lora",
    "model": "Qwen/Qwen3-8B",
    "method": "grpo",
    "scope": "lora",
    "lora": {"rank": 32, "alpha": 64, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]},
    "hardware": {"gpu": "a100-40gb", "gpus_per_node": 8, "nodes": 1},
    "parallel": {"strategy": "fsdp", "offload": "optimizer", "gradient_checkpointing": True},
    "rollout": {"gpu_memory_utilization": 0.4, "tensor_parallel": 2, "num_generations": 8, "prompts_per_step": 16,
                "prompt_len": 512, "response_len": 1024, "sleep_level": 1},
    "roles": {"kl_coef": 0.04},
}


LLAMA70B_TP8_PP2 = {
    "name": "llama-3.1-70b-sft-tp8-pp2", "model": "meta-llama/Llama-3.1-70B", "method": "sft",
    "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
    "parallel": {"strategy": "zero1", "tensor_parallel": 8, "sequence_parallel": True, "pipeline_parallel": 2},
    "precision": {"weights": "bf16", "master_weights": "fp32", "optimizer_states": "fp32", "grads": "fp32"},
    "batch": {"micro_batch_size": 1, "grad_accum": 16, "seq_len": 8192}, "attention": "flash",
}
QWEN8B_ULYSSES = {
    "name": "qwen3-8b-sft-64k-ulysses4", "model": "Qwen/Qwen3-8B", "method": "sft",
    "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
    "parallel": {"strategy": "fsdp", "context_parallel": 4, "context_parallel_kind": "ulysses"},
    "batch": {"micro_batch_size": 1, "grad_accum": 2, "seq_len": 65536}, "attention": "flash",
}
QWEN_MOE_GRPO = {
    "name": "qwen3-30b-a3b-grpo-megatron", "model": "Qwen/Qwen3-30B-A3B", "method": "grpo",
    "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
    "parallel": {"strategy": "zero1", "expert_parallel": 8, "offload": "optimizer"},
    "precision": {"weights": "bf16", "master_weights": "fp32", "optimizer_states": "fp32", "grads": "fp32"},
    "batch": {"micro_batch_size": 1, "grad_accum": 4},
    "rollout": {"tensor_parallel": 4, "num_generations": 8, "prompts_per_step": 32, "prompt_len": 1024,
                "response_len": 4096, "sleep_level": 2, "weight_sync": "bucketed", "gpu_memory_utilization": 0.5,
                "mini_batches": 8},
    "roles": {"kl_coef": 0.0}, "attention": "flash",
}


def _card(base: dict, **changes):
    import copy

    d = copy.deepcopy(base)
    for k, v in changes.items():
        node = d
        parts = k.split("__")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        if v is None:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = v
    return load_card_dict(d)


def _default(**changes):
    return _card(default_card_dict(), **changes)


CARDS = {
    "default-sft-fsdp": lambda: _default(),
    "sft-fsdp-grad-op-offload": lambda: _default(parallel__strategy="fsdp_grad_op", parallel__offload="params_and_optimizer"),
    "sft-hsdp-2nodes": lambda: _default(parallel__strategy="hsdp", hardware__nodes=2),
    "sft-zero3-offload": lambda: _default(parallel__strategy="zero3", parallel__offload="params_and_optimizer", batch__grad_accum=4),
    "sft-zero2-8bit": lambda: _default(parallel__strategy="zero2", parallel__offload="optimizer", precision__optimizer="adamw_8bit"),
    "sft-zero3-buckets": lambda: _default(parallel__strategy="zero3", parallel__offload="optimizer", deepspeed={
        "reduce_bucket_size": "auto", "allgather_bucket_size": 2e8, "stage3_prefetch_bucket_size": 1e7,
        "stage3_max_live_parameters": 3e8, "stage3_max_reuse_distance": 0, "stage3_param_persistence_threshold": "auto",
        "sub_group_size": 1e8, "overlap_comm": False, "contiguous_gradients": False}),
    "sft-zero2-buckets": lambda: _default(parallel__strategy="zero2", deepspeed={
        "reduce_bucket_size": 2e8, "allgather_bucket_size": 1e8, "overlap_comm": True}),
    "sft-zero1": lambda: _default(parallel__strategy="zero1", batch__micro_batch_size=2),
    "sft-ddp-qlora": lambda: _default(parallel__strategy="ddp", scope="qlora", precision__optimizer="paged_adamw_8bit"),
    "sft-single": lambda: _default(parallel__strategy="single", hardware__gpus_per_node=1, attention="flash", loss__chunked=True),
    "rm-lora-zero2": lambda: _default(method="rm", scope="lora", parallel__strategy="zero2"),
    "dpo-full-precomputed": lambda: _default(method="dpo", roles={"reference": "precomputed", "kl_coef": 0.1}),
    "dpo-qlora-ddp": lambda: _default(method="dpo", scope="qlora", parallel__strategy="ddp"),
    "grpo-lora": lambda: _card(GRPO_LORA),
    "grpo-split-zero3": lambda: _card(GRPO_LORA, scope="full", lora=None, parallel__strategy="zero3", rollout__placement="split",
                                      rollout__gpus=2, rollout__tensor_parallel=2, roles__reward_model="Skywork/Skywork-Reward-V2"),
    "grpo-hf-beta0": lambda: _card(GRPO_LORA, rollout__engine="hf", roles__kl_coef=0.0, parallel__activation_offload=True),
    "ppo-full-zero3-2nodes": lambda: _default(method="ppo", parallel__strategy="zero3", parallel__offload="optimizer",
                                              hardware__nodes=2, roles={"reference": "cpu"}, rollout={"tensor_parallel": 4}),
    # model parallelism (#13 item 5)
    "sft-70b-tp8-pp2": lambda: _card(LLAMA70B_TP8_PP2),
    "sft-8b-ulysses4-64k": lambda: _card(QWEN8B_ULYSSES),
    "grpo-30b-a3b-megatron-ep8": lambda: _card(QWEN_MOE_GRPO),
    "sft-tp2-pp2-vpp2-cp2-fp8-selective": lambda: _default(
        model="Qwen/Qwen3-0.6B", hardware={"gpu": "h100-sxm", "gpus_per_node": 8},
        parallel={"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True, "pipeline_parallel": 2,
                  "pipeline_schedule": "interleaved", "virtual_stages": 2, "context_parallel": 2,
                  "gradient_checkpointing": "selective", "selective_checkpointing": "core_attention"},
        precision={"compute": "fp8", "fp8_recipe": "current"}, batch={"micro_batch_size": 1, "grad_accum": 4, "seq_len": 4096}),
    "grpo-lora-tp2-megatron": lambda: _card(GRPO_LORA, parallel__strategy="zero1", parallel__tensor_parallel=2,
                                            parallel__sequence_parallel=True, lora__dropout=0.05, attention="flash",
                                            lora__targets=["q_proj", "k_proj", "v_proj", "o_proj"]),
    "sft-op-selective-fsdp": lambda: _default(model="Qwen/Qwen3-0.6B", parallel={"strategy": "fsdp", "gradient_checkpointing": "selective"}),
    "ppo-tp2-megatron-critic": lambda: _default(method="ppo", model="Qwen/Qwen3-0.6B", parallel={"strategy": "zero1", "tensor_parallel": 2,
                                                                                            "sequence_parallel": True},
                                                roles={"reference": "cpu"}, rollout={"tensor_parallel": 2}),
    # Megatron-Core settings: tensor_parallel_impl, tp_comm_overlap, the DeepEP dispatcher, the EP
    # all-to-all overlap, a pipeline layer layout (one stage per rank, and interleaved), the routing assumption, the
    # router's load-balancing loss
    "sft-moe-megatron-deepep-overlap": lambda: _default(
        model="Qwen/Qwen3-30B-A3B", hardware={"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        parallel={"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True, "tp_comm_overlap": True,
                  "tensor_parallel_impl": "megatron", "expert_parallel": 8, "moe_dispatcher": "deepep",
                  "moe_comm_overlap": True, "moe_routing": "consecutive", "gradient_checkpointing": False,
                  "moe_load_balancing": "aux_loss"},
        batch={"micro_batch_size": 1, "grad_accum": 4, "seq_len": 4096}, attention="flash"),
    "sft-8b-pp2-layout-megatron": lambda: _default(
        model="Qwen/Qwen3-8B", hardware={"gpu": "h100-sxm", "gpus_per_node": 8},
        parallel={"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True, "tensor_parallel_impl": "megatron",
                  "pipeline_parallel": 2, "pipeline_layout": [16, 20]},
        batch={"micro_batch_size": 1, "grad_accum": 8, "seq_len": 4096}, attention="flash"),
    "sft-8b-pp2-vpp2-layout": lambda: _default(
        model="Qwen/Qwen3-8B", hardware={"gpu": "h100-sxm", "gpus_per_node": 8},
        parallel={"strategy": "fsdp", "tensor_parallel": 2, "sequence_parallel": True, "pipeline_parallel": 2,
                  "pipeline_schedule": "interleaved", "virtual_stages": 2, "pipeline_layout": [8, 10, 10, 8]},
        batch={"micro_batch_size": 1, "grad_accum": 8, "seq_len": 4096}),
    "grpo-fp8-rollout-host-swap": lambda: _card(GRPO_LORA, scope="full", lora=None, hardware__gpu="h100-sxm",
                                                rollout__quantization="fp8", rollout__quantization_bf16_modules=["o_proj"],
                                                roles={"reference": "host_swap", "kl_coef": 0.01}),
    "sft-packed-flash-attn-loss": lambda: _default(model="Qwen/Qwen3-0.6B", batch={"seq_len": 4096,
                                                                                   "packed_sample_tokens": 512,
                                                                                   "packed_sample_length_cv": 0.8},
                                                   loss={"kernel": "flash_attn", "inplace_backward": True}),
    "sft-padding-mask-sdpa": lambda: _default(model="Qwen/Qwen3-0.6B", batch={"seq_len": 4096, "padding": "mask"},
                                              attention="sdpa"),
    "sft-qlora-fp32-base-gemms": lambda: _default(model="Qwen/Qwen3-0.6B", scope="qlora",
                                                  precision__nf4_compute_dtype="fp32"),
    "sft-chunked-torchtune-loss": lambda: _default(model="Qwen/Qwen3-0.6B", loss={"chunked": True, "kernel": "torchtune"}),
    "sft-expandable-segments": lambda: _default(model="Qwen/Qwen3-0.6B", hardware__allocator="expandable_segments"),
    # further Megatron-Core fields: the distributed optimizer's overlap_param_gather, the all-gather MoE dispatcher, fp32
    # gradient reduction on a Megatron backend (grad_reduce_in_fp32), the mean prompt length
    "grpo-moe-allgather-overlap-gather": lambda: _card(
        QWEN_MOE_GRPO, parallel={"strategy": "zero1", "expert_parallel": 8, "tensor_parallel_impl": "megatron",
                                 "moe_dispatcher": "allgather", "overlap_param_gather": True},
        rollout__prompt_len_mean=173),
    "sft-8b-overlap-gather-bf16-grads": lambda: _default(
        model="Qwen/Qwen3-8B", hardware={"gpu": "h100-sxm", "gpus_per_node": 8},
        parallel={"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True, "tensor_parallel_impl": "megatron",
                  "overlap_param_gather": True},
        precision={"master_weights": "fp32", "optimizer_states": "fp32", "grads": "bf16"},
        batch={"micro_batch_size": 1, "grad_accum": 8, "seq_len": 4096}, attention="flash"),
    "grpo-lora-prompt-mean": lambda: _card(GRPO_LORA, rollout__prompt_len_mean=120),
}




def assert_lost_fields_named(card, target: str, fields: tuple[str, ...]) -> None:
    """Export ``card`` to ``target``: every field of ``fields`` the file does not carry is lost with a note naming it
    (not only the generic 'reads back as' line). A target that refuses the card's method or scope outright, and an RL
    card on a plain trainer (its whole rollout said in one grouped note), have nothing to check."""
    try:
        e = export(card, target)
    except ExportError as exc:
        assert "allowed for --to" in str(exc)
        return
    if "method" in e.lost:
        return
    for k in e.lost:
        if k in fields:
            assert any(n.startswith(k) or f" {k}" in n or f"({k}" in n for n in e.notes), (k, e.notes)
