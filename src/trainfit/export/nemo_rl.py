"""NeMo RL config overrides (YAML with ``defaults:``): ``uv run examples/run_grpo.py --config nemo_rl.yaml``.

Keys and defaults: NVIDIA-NeMo/RL 7ea279abfbeb698b092856d0dab61e7cf39bc909, ``examples/configs/grpo_math_1B.yaml``
(GRPO; ``examples/run_grpo.py``) and ``examples/configs/sft.yaml`` (SFT; ``examples/run_sft.py``). The file holds
only what the card sets (strings with OmegaConf's ``${`` escaped, as NeMo RL resolves interpolations);
``defaults:`` names the example it overrides (resolved next to this file, as the
examples' own ``defaults:`` are, so save it in ``examples/configs/``).

* ``policy.dtensor_cfg`` (FSDP2 through NeMo Automodel; ``nemo_rl/models/automodel/setup.py``: the model is loaded
  in float32 for master weights, ``MixedPrecisionPolicy(param_dtype=policy.precision, reduce_dtype=float32)``,
  ``cpu_offload`` = FSDP2 ``CPUOffloadPolicy``): ``tensor_parallel_size``, ``sequence_parallel``,
  ``context_parallel_size`` (torch ring attention), ``activation_checkpointing`` (whole layers),
  ``lora_cfg``.
* ``policy.megatron_cfg`` (Megatron-Core through Megatron-Bridge): ``tensor_model_parallel_size``,
  ``pipeline_model_parallel_size``, ``context_parallel_size``, ``expert_model_parallel_size``,
  ``expert_tensor_parallel_size``, ``sequence_parallel``, ``activation_checkpointing`` with
  ``recompute_granularity`` (full | selective) and ``recompute_modules`` (null: [core_attn]),
  ``optimizer.use_distributed_optimizer`` / ``optimizer_cpu_offload`` / ``optimizer_offload_fraction``,
  ``distributed_data_parallel_config.use_custom_fsdp`` (Megatron FSDP, ``optim_grads_params``),
  ``fp8_cfg`` (``enabled``, ``fp8``: e4m3, ``fp8_recipe``: delayed | tensorwise | blockwise), ``peft``,
  ``moe_token_dispatcher_type`` (alltoall | allgather | flex) with ``moe_enable_deepep`` (the card's
  ``moe_dispatcher``), ``moe_router_load_balancing_type`` (the card's ``moe_load_balancing``; unset, the
  examples' 'none' for GRPO, 'aux_loss' for SFT), ``distributed_data_parallel_config.grad_reduce_in_fp32``
  (``precision.grads: fp32``) and
  ``overlap_param_gather`` (the card's, under the distributed optimizer; the examples default it to true), and
  ``model_overrides`` (Megatron Bridge provider fields merged before the parallel sizes,
  ``nemo_rl/models/megatron/setup.py`` ``setup_model_config``): ``pipeline_model_parallel_layout`` for the card's
  ``pipeline_layout`` (one stage per rank). Not written, each said: ``tp_comm_overlap`` (no userbuffers set-up) and
  ``overlap_moe_expert_parallel_comm`` (NeMo RL's step has no combined-1F1B path at this commit).
  A card with pipeline or expert parallelism, Megatron's core_attention recompute or fp8 compute uses it;
  otherwise DTensor. The examples have no virtual-pipeline key and neither backend has Ulysses.
* GRPO: ``grpo.num_prompts_per_step``, ``grpo.num_generations_per_prompt``,
  ``loss_fn.reference_policy_kl_penalty`` (0: no reference model, ``nemo_rl/algorithms/grpo.py``),
  ``policy.train_global_batch_size`` (the rollout's sequences / ``rollout.mini_batches``), ``train_micro_batch_size``,
  ``logprob_batch_size``, ``max_total_sequence_length`` (prompt + response), ``generation.max_new_tokens``,
  ``generation.vllm_cfg`` (``tensor_parallel_size``, ``gpu_memory_utilization``, ``enforce_eager``; ``precision: fp8``
  with ``use_deep_gemm: true`` for ``rollout.quantization: fp8``, as the fp8 performance recipes set them),
  ``generation.colocated`` (``enabled``; ``resources.gpus_per_node`` on one node). Weights reach vLLM
  through a refit buffer (``refit_buffer_size_gb``): read back as bucketed; vLLM's engine core runs in-process
  (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, ``nemo_rl/models/generation/vllm/vllm_worker.py``): read back as
  ``rollout.engine_multiprocess: false``.
* ``cluster.gpus_per_node``, ``cluster.num_nodes``.
"""

from __future__ import annotations

from typing import Any

import yaml

from trainfit.export.common import (
    Export,
    ExportError,
    effective_weight_sync,
    fsdp2_only_note,
    lora_targets,
    model_name,
    non_default,
    omegaconf_escape,
    shared_notes,
)
from trainfit.export.parallel import (
    MEGATRON_FP8_RECIPE,
    data_parallel,
    is_ulysses,
    megatron_grad_reduce_in_fp32,
    megatron_launch,
    megatron_layout,
    megatron_moe,
    megatron_precision_note,
    missing_parallel_notes,
    sequences_per_step,
)
from trainfit.methods.roles import kl_coef, reference_placement
from trainfit.spec.card import RunCard
from trainfit.spec.enums import (
    ComputeDtype,
    Dtype,
    Method,
    MoeDispatcher,
    Offload,
    Optimizer,
    Placement,
    RefPlacement,
    RolloutEngine,
    RolloutQuantization,
    Scope,
    SelectiveCheckpointing,
    Strategy,
    TensorParallelImpl,
    WeightSync,
)

COMMIT = "7ea279abfbeb698b092856d0dab61e7cf39bc909"
FILENAME = "nemo_rl.yaml"
DEFAULTS = {Method.GRPO: "grpo_math_1B.yaml", Method.SFT: "sft.yaml"}
SCRIPT = {Method.GRPO: "examples/run_grpo.py", Method.SFT: "examples/run_sft.py"}
PRECISION = {ComputeDtype.BF16: "bfloat16", ComputeDtype.FP16: "float16", ComputeDtype.FP32: "float32",
             ComputeDtype.FP8: "bfloat16", ComputeDtype.FP4: "bfloat16"}


def uses_megatron(card: RunCard) -> bool:
    """Pipeline or expert parallelism, Megatron's core_attention recompute, fp8, or a Megatron-Core-only setting
    (tensor_parallel_impl megatron, the DeepEP or all-gather dispatcher, the distributed optimizer's
    overlap_param_gather): NeMo RL's Megatron backend."""
    p = card.parallel
    return (p.pipeline_parallel > 1 or p.expert_parallel > 1 or p.expert_tensor_parallel > 1
            or p.selective_checkpointing is SelectiveCheckpointing.CORE_ATTENTION
            or card.precision.compute.quantized_gemms
            or p.tensor_parallel_impl is TensorParallelImpl.MEGATRON or p.moe_dispatcher is not MoeDispatcher.ALLTOALL
            or p.overlap_param_gather)


def _checkpointing(card: RunCard, notes: list[str]) -> bool:
    """Whether layers are checkpointed (per-op selective: as full, said)."""
    p = card.parallel
    if p.selective_checkpointing is SelectiveCheckpointing.OP:
        notes.append("parallel.selective_checkpointing op: NeMo RL has no per-op selective checkpointing; exported as"
                     " full (parallel.gradient_checkpointing true: less memory, more time than planned)")
    return p.checkpoints_layers


def _dtensor(card: RunCard, notes: list[str]) -> dict[str, Any]:
    p = card.parallel
    cfg: dict[str, Any] = {"enabled": True, "cpu_offload": p.offload is Offload.PARAMS_AND_OPTIMIZER,
                           "sequence_parallel": p.sequence_parallel,
                           "activation_checkpointing": _checkpointing(card, notes),
                           "tensor_parallel_size": p.tensor_parallel, "context_parallel_size": p.context_parallel}
    if p.offload is Offload.OPTIMIZER:
        notes.append("parallel.offload optimizer: NeMo RL's DTensor backend offloads parameters, gradients and optimizer"
                     " states together (cpu_offload) or nothing; exported as none")
    if p.strategy is not Strategy.FSDP:
        notes.append(f"parallel.strategy {p.strategy.value}: NeMo RL's DTensor backend shards with FSDP2; exported as fsdp")
    if note := fsdp2_only_note(card, "NeMo RL's DTensor backend"):
        notes.append(note)
    w = card.weights_dtype
    if w is not Dtype.FP32 or card.precision.master_weights.value != "none":
        notes.append(f"precision.weights {w.value}: NeMo RL's DTensor backend loads the model in float32 (master"
                     " weights; nemo_rl/models/automodel/setup.py) and computes in policy.precision")
    if card.scope is not Scope.FULL:
        t = lora_targets(card)
        cfg["lora_cfg"] = {"enabled": True, "dim": card.lora.rank, "alpha": card.lora.alpha,
                           "dropout": card.lora.dropout, "match_all_linear": t == "all-linear",
                           "target_modules": [] if t == "all-linear" else [omegaconf_escape(x) for x in t]}
    return cfg


def _megatron(card: RunCard, notes: list[str]) -> dict[str, Any]:
    p = card.parallel
    s = p.strategy
    dist_opt = s not in (Strategy.DDP, Strategy.SINGLE)
    custom_fsdp = s in (Strategy.FSDP, Strategy.FSDP_GRAD_OP, Strategy.HSDP, Strategy.ZERO3)
    if s not in (Strategy.FSDP, Strategy.ZERO1, Strategy.DDP, Strategy.SINGLE):
        notes.append(f"parallel.strategy {s.value}: NeMo RL's Megatron backend shards with its distributed optimizer"
                     f" (zero1) or Megatron FSDP (fsdp); exported as {'fsdp' if custom_fsdp else 'zero1'}")
    gc = _checkpointing(card, notes)
    cfg: dict[str, Any] = {
        "enabled": True,
        "activation_checkpointing": gc,
        "tensor_model_parallel_size": p.tensor_parallel,
        "expert_tensor_parallel_size": p.expert_tensor_parallel,
        "expert_model_parallel_size": p.expert_parallel,
        "pipeline_model_parallel_size": p.pipeline_parallel,
        # uneven end stages (Megatron-Core TransformerConfig; NeMo RL's recipes set them, e.g.
        # examples/configs/recipes/llm/performance/grpo-deepseek-v3-32n8g.yaml @7ea279a: 3 and 2 of 61 over PP16)
        **({"num_layers_in_first_pipeline_stage": p.pipeline_first_stage_layers}
           if p.pipeline_first_stage_layers is not None else {}),
        **({"num_layers_in_last_pipeline_stage": p.pipeline_last_stage_layers}
           if p.pipeline_last_stage_layers is not None else {}),
        "context_parallel_size": p.context_parallel,
        "sequence_parallel": p.sequence_parallel,
    }
    if gc:
        core = p.selective_checkpointing is SelectiveCheckpointing.CORE_ATTENTION
        cfg["recompute_granularity"] = "selective" if core else "full"
        if core:
            cfg["recompute_modules"] = ["core_attn"]
    off = p.offload
    cfg["optimizer"] = {"use_distributed_optimizer": dist_opt, "optimizer_cpu_offload": off is not Offload.NONE,
                        "optimizer_offload_fraction": 1.0 if off is not Offload.NONE else 0.0}
    if off is Offload.PARAMS_AND_OPTIMIZER:
        notes.append("parallel.offload params_and_optimizer: NeMo RL's Megatron backend offloads the optimizer only"
                     " (optimizer_cpu_offload); exported as optimizer")
    # Megatron-Core DistributedDataParallelConfig (nemo_rl/models/megatron/setup.py l.1380-1430: grad_reduce_in_fp32
    # and overlap_param_gather go to the DDP config, overlap_param_gather to the optimizer config too); both written,
    # as the example's defaults (grpo_math_1B.yaml l.301-304, sft.yaml l.226-229: false / true) are not the card's
    ddp: dict[str, Any] = {"use_custom_fsdp": custom_fsdp,
                           "grad_reduce_in_fp32": megatron_grad_reduce_in_fp32(card, "NeMo RL", notes)}
    if not custom_fsdp:
        # the distributed optimizer (zero1) takes the card's overlap_param_gather (default false, the example's true);
        # plain DDP has no parameter all-gather (false); Megatron FSDP keeps the example's prefetch
        ddp["overlap_param_gather"] = p.overlap_param_gather
    cfg["distributed_data_parallel_config"] = ddp
    if card.precision.compute is ComputeDtype.FP8 and card.precision.fp8_recipe is not None:
        cfg["fp8_cfg"] = {"enabled": True, "fp8": "e4m3", "fp8_recipe": MEGATRON_FP8_RECIPE[card.precision.fp8_recipe],
                          **({"fp8_param": True} if card.precision.fp8_params else {})}  # the recipes' fp8 weights key
    if card.precision.compute is ComputeDtype.FP4 or card.precision.bf16_first_layers or card.precision.bf16_last_layers:
        notes.append("precision.compute fp4 / bf16_first_layers / bf16_last_layers: NeMo RL's fp8_cfg has no fp4 or"
                     " per-layer keys; not written")
    prec = megatron_precision_note(card, "NeMo RL")
    if prec:
        notes.append(prec)
    if p.virtual_stages > 1:
        notes.append(f"parallel.virtual_stages {p.virtual_stages}: NeMo RL's megatron_cfg has no virtual-pipeline key;"
                     " not written (1F1B)")
    # MoE dispatcher: first-class megatron_cfg keys (grpo_math_1B.yaml moe_enable_deepep / moe_token_dispatcher_type,
    # nemo_rl/models/megatron/setup.py _apply_moe_config)
    cfg.update(megatron_moe(card))
    # the router's load-balancing loss: a first-class megatron_cfg key that NeMo RL writes onto the model config
    # (nemo_rl/models/megatron/setup.py _apply_moe_config l.908-910 @7ea279a; grpo_math_1B.yaml l.227 sets 'none',
    # sft.yaml l.159 'aux_loss'); written where the card states it, moe_aux_loss_coeff left to the model provider
    if p.moe_load_balancing is not None:
        cfg["moe_router_load_balancing_type"] = p.moe_load_balancing.value
    # deallocate_pipeline_outputs and moe_router_fusion have no first-class megatron_cfg key: model_overrides, merged
    # into the Megatron Bridge provider (nemo_rl/models/megatron/setup.py l.662-670 @7ea279a). NeMo RL builds that
    # provider with AutoBridge.from_hf_config(...).to_megatron_provider (l.608-609) and overrides neither, so it runs
    # the provider's deallocate_pipeline_outputs True (NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/models/
    # gpt_provider.py l.162 @067f987df03b8355b03192d88d70f1709fedf51a) and Megatron-Core's moe_router_fusion False;
    # both are written, as the card states them. use_transformer_engine_op_fuser (moe_expert_mlp te_ops) goes the same
    # way: a TransformerConfig field of the provider dataclass (_merge_model_overrides, setup.py l.779-) that the
    # provider's layer spec reads (Megatron-Bridge src/megatron/bridge/models/gpt_provider.py l.55
    # @8c46dc4259080c510b7455f43e836fdff222c5d3, NeMo RL 7ea279a's submodule) and no first-class megatron_cfg key
    overrides = dict(megatron_launch(card))
    if p.pipeline_layout is not None:
        if p.virtual_stages == 1:
            # no first-class key: megatron_cfg.model_overrides sets Megatron Bridge provider fields before the
            # parallel sizes are applied (nemo_rl/models/megatron/setup.py, model_overrides -> _merge_model_overrides)
            overrides["pipeline_model_parallel_layout"] = megatron_layout(p.pipeline_layout)
        else:
            notes.append("parallel.pipeline_layout: not written (a layout of virtual stages needs the virtual-pipeline"
                         " size, which NeMo RL's megatron_cfg does not take)")
    if overrides:
        cfg["model_overrides"] = overrides
    if p.tensor_parallel_impl is not TensorParallelImpl.MEGATRON:
        notes.append("parallel.tensor_parallel_impl dtensor: NeMo RL's Megatron backend is Megatron-Core (its"
                     " tensor-parallel linears and vocab_parallel_cross_entropy: tensor_parallel_impl megatron); read"
                     " back as megatron")
    if card.scope is not Scope.FULL:
        t = lora_targets(card)
        cfg["peft"] = {"enabled": True, "dim": card.lora.rank, "alpha": card.lora.alpha, "dropout": card.lora.dropout,
                       "target_modules": [] if t == "all-linear" else [omegaconf_escape(x) for x in t]}
    return cfg


def _global_batch(card: RunCard, notes: list[str]) -> int:
    """``policy.train_global_batch_size``: sequences per optimizer step. For GRPO, the rollout batch over the card's
    ``rollout.mini_batches``: NeMo RL's policy worker trains the step's num_prompts_per_step x
    num_generations_per_prompt sequences in ``num_global_batches = total_dataset_size // gbs`` optimizer steps
    (NVIDIA-NeMo/RL nemo_rl/models/policy/workers/dtensor_policy_worker.py l.624 and its optimizer step l.984,
    megatron_policy_worker.py l.793 @7ea279abfbeb698b092856d0dab61e7cf39bc909). (It was micro-batch x accumulation x
    data parallel, which trains a number of steps the plan does not.) SFT: micro-batch x accumulation x data parallel."""
    if card.method is not Method.GRPO:
        return sequences_per_step(card)
    ro = card.rollout
    rollout_seqs = ro.prompts_per_step * ro.num_generations
    gbs = max(1, rollout_seqs // ro.mini_batches)
    if rollout_seqs % ro.mini_batches:
        notes.append(f"rollout.mini_batches {ro.mini_batches} does not divide the rollout's {rollout_seqs} sequences:"
                     f" train_global_batch_size {gbs}, so NeMo RL takes {rollout_seqs // gbs} optimizer steps per"
                     " rollout batch (the rest dropped)")
    dp = data_parallel(card)
    if gbs % (dp * card.batch.micro_batch_size):
        notes.append(f"train_global_batch_size {gbs} is not a whole number of micro-batches of"
                     f" {card.batch.micro_batch_size} on each of {dp} data-parallel ranks; NeMo RL's micro-batch"
                     " iterator needs it (change rollout.prompts_per_step, mini_batches or batch.micro_batch_size)")
    elif gbs != sequences_per_step(card):
        notes.append(f"batch.grad_accum {card.batch.grad_accum}: a GRPO optimizer step is the rollout's {rollout_seqs}"
                     f" sequences / rollout.mini_batches {ro.mini_batches} = {gbs} (train_global_batch_size), so NeMo"
                     f" RL accumulates {gbs // (dp * card.batch.micro_batch_size)} micro-batches a step; the plan counts"
                     " the same (the RL update ignores batch.grad_accum)")
    return gbs


def _policy(card: RunCard, notes: list[str]) -> dict[str, Any]:
    mega = uses_megatron(card)
    c = card.precision.compute  # fp8 always takes the Megatron backend (uses_megatron)
    pol: dict[str, Any] = {"model_name": omegaconf_escape(model_name(card)), "precision": PRECISION[c],
                           "train_global_batch_size": _global_batch(card, notes),
                           "train_micro_batch_size": card.batch.micro_batch_size}
    if is_ulysses(card):
        notes.append("parallel.context_parallel_kind ulysses: NeMo RL's context parallel is ring attention (torch"
                     " context_parallel or Megatron CP); exported as ring")
    notes.extend(missing_parallel_notes(card, "NeMo RL", has={
        "tensor_parallel", "sequence_parallel", "context_parallel", "pipeline_parallel", "expert_parallel",
        "expert_tensor_parallel", "virtual_stages", "pipeline_schedule", "pipeline_first_stage_layers",
        "pipeline_last_stage_layers", "pipeline_layout"}))
    if card.parallel.pipeline_layout is not None and not mega:
        notes.append("parallel.pipeline_layout: NeMo RL's DTensor backend has no pipeline; not written")
    if card.parallel.pipeline_schedule.value == "interleaved":
        notes.append("parallel.pipeline_schedule interleaved: NeMo RL's megatron_cfg has no virtual-pipeline key;"
                     " exported as 1F1B")
    att = card.attention.value
    if mega and att != "flash":
        notes.append(f"attention {att}: NeMo RL's Megatron backend runs Transformer Engine attention (flash / fused);"
                     " exported as flash")
    elif not mega and att != "sdpa":
        notes.append(f"attention {att}: NeMo RL's DTensor backend takes the attention implementation from NeMo"
                     " Automodel (dtensor_cfg.automodel_kwargs); not written")
    if mega:
        pol["dtensor_cfg"] = {"enabled": False}
        pol["megatron_cfg"] = _megatron(card, notes)
    else:
        pol["dtensor_cfg"] = _dtensor(card, notes)
        pol["megatron_cfg"] = {"enabled": False}
    if card.parallel.activation_offload:
        notes.append("parallel.activation_offload: not written (NeMo RL's megatron_cfg.fine_grained_activation_offloading"
                     " offloads named modules, not the card's whole saved activations)")
    if card.precision.optimizer is not Optimizer.ADAMW:
        notes.append(f"precision.optimizer {card.precision.optimizer.value}: NeMo RL's examples use torch AdamW (DTensor)"
                     " or Megatron Adam; exported with the example's optimizer")
    if card.loss.chunked:
        notes.append("loss.chunked: megatron_cfg.use_fused_linear_logprobs is not written (it excludes context"
                     " parallelism and sequence packing)")
    return pol


def _grpo(card: RunCard, notes: list[str]) -> dict[str, Any]:
    ro = card.rollout
    hw = card.hardware
    kl = kl_coef(card)
    out: dict[str, Any] = {
        "defaults": DEFAULTS[Method.GRPO],
        "grpo": {"num_prompts_per_step": ro.prompts_per_step, "num_generations_per_prompt": ro.num_generations},
        "loss_fn": {"reference_policy_kl_penalty": kl},
    }
    pol = _policy(card, notes)
    pol["logprob_batch_size"] = ro.logprob_micro_batch_size or card.batch.micro_batch_size
    pol["max_total_sequence_length"] = ro.prompt_len + ro.response_len
    if ro.engine is not RolloutEngine.VLLM:
        notes.append(f"rollout.engine {ro.engine.value}: NeMo RL generates with vLLM (or Megatron inference); exported as vllm")
    colocated: dict[str, Any] = {"enabled": True}
    if ro.placement is Placement.SPLIT:
        if hw.nodes == 1:
            colocated = {"enabled": False, "resources": {"gpus_per_node": ro.gpus, "num_nodes": None}}
        else:
            notes.append(f"rollout.placement split ({ro.gpus} GPUs per node): NeMo RL gives generation whole nodes on"
                         " more than one node; exported colocated")
    pol["generation"] = {"backend": "vllm", "max_new_tokens": ro.response_len,
                         "vllm_cfg": {"tensor_parallel_size": ro.tensor_parallel,
                                      "gpu_memory_utilization": ro.gpu_memory_utilization,
                                      "enforce_eager": not ro.cuda_graphs},
                         "colocated": colocated}
    if ro.quantization is RolloutQuantization.FP8:
        # NeMo RL's fp8 generation (nemo_rl/models/generation/vllm/quantization/fp8.py init_fp8; the fp8 performance
        # recipes examples/configs/recipes/llm/performance/*-fp8-async-1off.yaml add use_deep_gemm)
        pol["generation"]["vllm_cfg"].update(precision="fp8", use_deep_gemm=True)
        if ro.quantization_bf16_modules:
            notes.append(f"rollout.quantization_bf16_modules {list(ro.quantization_bf16_modules)}: NeMo RL's"
                         " vllm_cfg.quantization_ignored_layer_kws (read by quantization/fp8.py, not a key of"
                         " grpo_math_1B.yaml): add it to generation.vllm_cfg by hand")
    out["policy"] = pol
    if ro.engine_multiprocess:
        notes.append("rollout.engine_multiprocess true: NeMo RL runs vLLM's engine core in its worker process"
                     " (VLLM_ENABLE_V1_MULTIPROCESSING=0, nemo_rl/models/generation/vllm/vllm_worker.py); planned as false")
    if ro.num_iterations > 1:
        notes.append(f"rollout.num_iterations {ro.num_iterations}: NeMo RL's GRPO takes one update per generated batch")
    if ro.sleep_level:
        notes.append(f"rollout.sleep_level {ro.sleep_level}: NeMo RL frees the colocated vLLM itself; not a setting here")
    if effective_weight_sync(card) is not WeightSync.BUCKETED:
        notes.append(f"rollout.weight_sync {effective_weight_sync(card).value}: NeMo RL refits vLLM through a buffer"
                     " (refit_buffer_size_gb); planned as bucketed")
    for key in ("max_num_seqs", "max_num_batched_tokens"):
        if non_default(card, f"rollout.{key}"):
            notes.append(f"rollout.{key}: not written (vllm_kwargs takes raw vLLM arguments)")
    if ro.async_mode.value != "none":
        notes.append(f"rollout.async_mode {ro.async_mode.value}: grpo.async_grpo is not written")
    if ro.generation_calls > 1:
        notes.append(f"rollout.generation_calls {ro.generation_calls}: NeMo RL generates the step's prompts in one"
                     " call; not written (the run is planned with one call, --set rollout.generation_calls=1)")
    if ro.response_len_mean is not None or non_default(card, "rollout.response_len_shape") \
            or non_default(card, "rollout.length_profile") or ro.response_clip_ratio is not None:
        notes.append("rollout.response_len_mean / rollout.response_clip_ratio / rollout.response_len_batch_max /"
                     " rollout.response_len_shape /"
                     " rollout.length_profile: a property of the task, not a NeMo RL setting")
    ref = reference_placement(card)
    if ref not in (RefPlacement.NONE, RefPlacement.HOST_SWAP):
        notes.append(f"roles.reference {ref.value}: NeMo RL keeps the reference's weights in pinned host memory and"
                     " copies them into the policy's parameters for the reference pass (use_reference_model);"
                     " plan it as roles.reference=host_swap")
    if card.roles.reward_model not in ("rule", "none"):
        notes.append(f"roles.reward_model {card.roles.reward_model}: NeMo RL's reward model runs as an environment"
                     " (examples/configs/grpo_rm_1B.yaml); not written")
    out["cluster"] = {"gpus_per_node": hw.gpus_per_node, "num_nodes": hw.nodes}
    return out


def _sft(card: RunCard, notes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"defaults": DEFAULTS[Method.SFT]}
    pol = _policy(card, notes)
    pol["max_total_sequence_length"] = card.batch.seq_len
    b = card.batch
    if b.packed_sample_tokens is not None:
        # sft.yaml policy.sequence_packing (enabled: False by default; train_mb_tokens = max_total_sequence_length x
        # train_micro_batch_size: the card's rows of seq_len): whole samples packed, attention per sample
        pol["sequence_packing"] = {"enabled": True}
        cv = (f", batch.packed_sample_length_cv {b.packed_sample_length_cv:g}"
              if b.packed_sample_length_cv is not None else "")
        notes.append(f"batch.packed_sample_tokens {b.packed_sample_tokens}{cv}: written as sequence_packing.enabled; the"
                     " mean sample length is the data's, not a NeMo RL setting (the import plans rows as one sequence"
                     " each until it is set again)")
    out["policy"] = pol
    out["cluster"] = {"gpus_per_node": card.hardware.gpus_per_node, "num_nodes": card.hardware.nodes}
    return out


def build(card: RunCard) -> Export:
    notes: list[str] = []
    if card.method not in DEFAULTS:
        raise ExportError(f"method: the nemo-rl export writes GRPO and SFT configs, not {card.method.value}; allowed for"
                          " --to nemo-rl: sft, grpo (use --to trl, verl or openrlhf)")
    if card.scope is Scope.QLORA:
        raise ExportError("scope: NeMo RL has no 4-bit (QLoRA) base; allowed for --to nemo-rl: full, lora")
    data = _grpo(card, notes) if card.method is Method.GRPO else _sft(card, notes)
    has = ({"tensor_parallel_impl", "moe_dispatcher", "overlap_param_gather", "pipeline_outputs_deallocated",
            "moe_launch", "moe_load_balancing", "moe_expert_mlp"} if uses_megatron(card) else set())
    notes.extend(shared_notes(card, "nemo-rl", megatron_has=has))
    script = SCRIPT[card.method]
    launch = f"uv run {script} --config {FILENAME}"
    header = (f"# NeMo RL config written by trainfit export (keys: NVIDIA-NeMo/RL {COMMIT[:7]} examples/configs/"
              f"{DEFAULTS[card.method]})\n# save it in examples/configs/ (defaults: resolves next to this file)\n"
              f"# launch: {launch}\n")
    text = header + yaml.safe_dump(data, sort_keys=False, allow_unicode=False, default_flow_style=False)
    return Export(target="nemo-rl", text=text, data={"launch": launch, "config": data}, notes=notes, filename=FILENAME)


def to_nemo_rl(card: RunCard) -> dict[str, Any]:
    """The NeMo RL override config for the card (``defaults:`` plus the keys it sets)."""
    return build(card).data["config"]
