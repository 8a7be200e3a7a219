"""TRL 1.16 trainer config arguments, the peft LoraConfig, and the launch command.

``data`` holds ``config_class`` (SFTConfig, RewardConfig, DPOConfig or GRPOConfig), ``args``
(keyword arguments that construct it), ``peft`` (LoraConfig keyword arguments or None),
``quantization`` (BitsAndBytesConfig keyword arguments for QLoRA, or None), ``launch`` (the
command line) and, for a split rollout, ``vllm_serve`` (the ``trl vllm-serve`` command).

TRL 1.16 has no PPOTrainer (it was removed from TRL); a PPO card gets the shared
TrainingArguments and a note.

The text is a Python module of literal assignments only (``model = ...``, ``args = GRPOConfig(...)``,
``peft_config = LoraConfig(...)``, ``launch = '...'``): every value is ``repr`` of a validated str,
int, float, bool, list or dict, and comments escape everything outside printable ASCII, so no card
value can add a statement. ``trainfit import --from trl`` reads it back with ``ast`` (nothing runs).

Weight sync (TRL 1.16 ``trl/generation/vllm_generation.py`` ``_iter_named_params``): a PEFT model
under DeepSpeed ZeRO-3 is gathered whole before the adapter is merged (full gather); everything
else is gathered and sent one parameter at a time. TRL has no setting for it.
"""

from __future__ import annotations

import math
import shlex
from typing import Any

from trainfit.export import accelerate as accelerate_export
from trainfit.export.common import (
    HF_ATTENTION,
    Export,
    comment_text,
    effective_weight_sync,
    finite,
    is_fsdp,
    lora_targets,
    model_name,
    non_default,
    shared_notes,
    torch_dtype_name,
    train_gpus_per_node,
    train_world,
)
from trainfit.methods.roles import kl_coef, reference_placement, reward_model
from trainfit.spec.card import RunCard
from trainfit.spec.enums import (
    AdapterDtype,
    Attention,
    ComputeDtype,
    Dtype,
    MasterWeights,
    Method,
    Optimizer,
    OptimizerImpl,
    Placement,
    RefPlacement,
    RolloutEngine,
    Scope,
    StatesDtype,
    Strategy,
    WeightSync,
)
from trainfit.spec.enums import SERVING_ENGINES

CONFIG_CLASS = {
    Method.SFT: "SFTConfig",
    Method.RM: "RewardConfig",
    Method.DPO: "DPOConfig",
    Method.GRPO: "GRPOConfig",
    Method.PPO: None,
}

TRL_SLEEP_LEVEL = 2
"""``vllm_enable_sleep_mode=True`` calls ``llm.sleep(level=2)`` (trl/generation/vllm_generation.py, TRL 1.16)."""

_HAS_ACTIVATION_OFFLOADING = {Method.SFT, Method.RM, Method.DPO}


def hf_optim(card: RunCard, notes: list[str]) -> str:
    """transformers ``optim`` name (OptimizerNames) for the card's optimizer."""
    p = card.precision
    o = p.optimizer
    if o is Optimizer.ADAMW:
        if p.optimizer_impl is OptimizerImpl.FUSED:
            return "adamw_torch_fused"
        if p.optimizer_impl is OptimizerImpl.APEX_DISTRIBUTED:
            notes.append("precision.optimizer_impl apex_distributed: transformers has no Apex DistributedFusedAdam;"
                         " exported as adamw_torch (not written)")
        if p.optimizer_impl is OptimizerImpl.FOR_LOOP:
            notes.append("precision.optimizer_impl for_loop: transformers' adamw_torch runs torch's default (foreach)")
        return "adamw_torch"
    return {
        Optimizer.ADAMW_8BIT: "adamw_8bit",
        Optimizer.PAGED_ADAMW: "paged_adamw_32bit",
        Optimizer.PAGED_ADAMW_8BIT: "paged_adamw_8bit",
        Optimizer.SGD: "sgd",
        Optimizer.ADAFACTOR: "adafactor",
    }[o]


def peft_kwargs(card: RunCard, notes: list[str]) -> dict[str, Any] | None:
    if card.scope is Scope.FULL:
        return None
    lo = card.lora
    if lo.adapter_dtype is AdapterDtype.BF16:
        notes.append(
            "lora.adapter_dtype bf16: not a LoraConfig field; call get_peft_model(..., autocast_adapter_dtype=False) "
            "on a bf16 model"
        )
    return {
        "r": lo.rank,
        "lora_alpha": lo.alpha,
        "lora_dropout": lo.dropout,
        "target_modules": lora_targets(card),
        "task_type": "SEQ_CLS" if card.method is Method.RM else "CAUSAL_LM",
    }


def quantization_kwargs(card: RunCard) -> dict[str, Any] | None:
    if card.scope is not Scope.QLORA:
        return None
    # bnb_4bit_quant_storage = the model's dtype: FSDP/ZeRO-3 shard the packed 4-bit weights only when
    # they are stored in the same dtype as every other parameter (transformers docs, "FSDP + QLoRA")
    return {
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": card.lora.double_quant,
        "bnb_4bit_compute_dtype": "bfloat16" if card.precision.compute is not ComputeDtype.FP16 else "float16",
        "bnb_4bit_quant_storage": torch_dtype_name(card),
    }


def trl_weight_sync(scope: Scope, strategy: Strategy) -> WeightSync:
    """How TRL 1.16 syncs weights to vLLM: a full gather for PEFT under ZeRO-3, else per parameter."""
    if scope is not Scope.FULL and strategy is Strategy.ZERO3:
        return WeightSync.FULL_GATHER
    return WeightSync.PER_PARAMETER


def _common_args(card: RunCard, notes: list[str]) -> dict[str, Any]:
    p = card.precision
    a: dict[str, Any] = {
        "output_dir": card.checkpoint.path or "./checkpoints",
        "per_device_train_batch_size": card.batch.micro_batch_size,
        "gradient_accumulation_steps": card.batch.grad_accum,
    }
    ckpt = card.parallel.gradient_checkpointing
    if ckpt and is_fsdp(card):
        a["gradient_checkpointing"] = False
        notes.append(
            "parallel.gradient_checkpointing: done by fsdp_activation_checkpointing in accelerate.yaml, so "
            "gradient_checkpointing=False here (transformers prefers FSDP's: no redundant all-gather in backward)"
        )
    else:
        a["gradient_checkpointing"] = ckpt
    a["bf16"] = p.compute in (ComputeDtype.BF16, ComputeDtype.FP8, ComputeDtype.FP4)  # fp8/fp4: the GEMMs only
    if p.compute is ComputeDtype.FP16:
        a["fp16"] = True
    a["optim"] = hf_optim(card, notes)
    a["save_steps"] = card.checkpoint.every_steps
    a["save_total_limit"] = card.checkpoint.keep
    if card.parallel.compile:
        a["torch_compile"] = True
    if card.loss.chunked:
        a["use_liger_kernel"] = True
        notes.append("loss.chunked: use_liger_kernel=True (Liger fused linear cross-entropy; needs the liger-kernel package)")
    if card.parallel.activation_offload:
        if card.preset == "unsloth":
            # the preset's offload is Unsloth's offloaded checkpointing, set in the model, not TRL's activation_offloading
            # (methods.presets.unsloth_activation_offload; methods.unsloth.UNSLOTH_OFFLOADED_CHECKPOINT_SOURCE)
            notes.append("parallel.activation_offload: Unsloth's offloaded checkpointing, set in the model:"
                         " FastLanguageModel.get_peft_model(..., use_gradient_checkpointing=\"unsloth\"), not TRL's"
                         " activation_offloading")
        elif card.method in _HAS_ACTIVATION_OFFLOADING:
            a["activation_offloading"] = True
        else:
            notes.append(f"parallel.activation_offload: TRL {CONFIG_CLASS[card.method] or 'TrainingArguments'} has no activation_offloading")
    if p.master_weights is MasterWeights.FP32 and card.weights_dtype is not Dtype.FP32:
        notes.append(
            "precision.master_weights fp32: the HF Trainer keeps no separate fp32 master copy; load the model in "
            "float32 with bf16=True (autocast) for fp32 master weights"
        )
    if p.optimizer_states is StatesDtype.BF16 and p.optimizer is Optimizer.ADAMW:
        notes.append("precision.optimizer_states bf16: torch AdamW keeps states in the parameters' dtype; not selectable")
    if p.grads is not None:
        notes.append(f"precision.grads {p.grads.value}: gradients follow the parameters' dtype in the HF Trainer")
    return a


def _model_init_kwargs(card: RunCard) -> dict[str, Any]:
    return {"dtype": torch_dtype_name(card), "attn_implementation": HF_ATTENTION[card.attention]}


def _grpo_args(card: RunCard, a: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    ro = card.rollout
    a["num_generations"] = ro.num_generations
    a["max_completion_length"] = ro.response_len
    gen_batch = ro.prompts_per_step * ro.num_generations
    per_step = card.batch.micro_batch_size * train_world(card)
    if gen_batch % per_step:
        unit = math.lcm(per_step, ro.num_generations)
        rounded = -(-gen_batch // unit) * unit
        notes.append(
            f"rollout.prompts_per_step: {ro.prompts_per_step} prompts x {ro.num_generations} = {gen_batch} completions "
            f"is not a multiple of micro_batch_size x training GPUs = {per_step}; generation_batch_size rounded up to "
            f"{rounded} ({rounded // ro.num_generations} prompts)"
        )
        gen_batch = rounded
    calls = ro.generation_calls
    micro_steps = gen_batch // per_step  # whole: gen_batch is a multiple of per_step here
    if calls > 1 and (micro_steps % calls or (gen_batch // calls) % ro.num_generations or ro.num_iterations > 1):
        notes.append(f"rollout.generation_calls {calls}: the step's {micro_steps} micro-batches of {per_step}"
                     f" completions do not split into {calls} calls of whole micro-batches and groups"
                     + (" (or num_iterations > 1 repeats each call's micro-batches)" if ro.num_iterations > 1 else "")
                     + f"; generation_batch_size kept at one call per step ({gen_batch})")
        calls = 1
    if calls > 1 and ro.mini_batches > 1:
        notes.append(f"rollout.generation_calls {calls} with rollout.mini_batches {ro.mini_batches}: one TRL optimizer"
                     f" step spans the calls; generation_batch_size kept at one call per step ({gen_batch})")
        calls = 1
    if calls > 1:
        # TRL >= 0.18 generates once every steps_per_generation micro-batches (generation_batch_size = micro-batch x
        # processes x steps_per_generation; the two are exclusive) and steps the optimizer every
        # gradient_accumulation_steps: one optimizer step spans the calls when the accumulation is the step's
        # micro-batches (huggingface/trl trl/trainer/grpo_config.py __post_init__ l.505-529, grpo_trainer.py
        # _prepare_inputs l.951-975 @ef4b0b225cf04600332a12a2c83f187623312098, v0.18.0)
        a["gradient_accumulation_steps"] = micro_steps
        a["steps_per_generation"] = micro_steps // calls
        notes.append(f"rollout.generation_calls {calls}: gradient_accumulation_steps {micro_steps} (the step's"
                     f" micro-batches, so one optimizer step spans the {calls} calls; batch.grad_accum"
                     f" {card.batch.grad_accum} not written) and steps_per_generation {micro_steps // calls}"
                     f" ({gen_batch // calls} completions a call)")
    else:
        a["generation_batch_size"] = gen_batch
        # one generation batch is steps_per_generation = generation_batch_size / (per_device_train_batch_size x
        # processes) micro-batches, and the Trainer steps the optimizer every gradient_accumulation_steps of them
        # (huggingface/trl trl/trainer/grpo_config.py l.1077-1091 @f2cd57710ae345ea6428ae95363267fcf38a3dc8): the
        # card's rollout.mini_batches optimizer steps per rollout batch are micro_steps / mini_batches micro-batches
        # each (the card's batch.grad_accum was written, e.g. 1: one optimizer step per micro-batch, 16 a rollout)
        mini = ro.mini_batches if micro_steps % ro.mini_batches == 0 else 1
        if mini != ro.mini_batches:
            notes.append(f"rollout.mini_batches {ro.mini_batches} does not divide the generation batch's {micro_steps}"
                         f" micro-batches of {per_step} completions: one optimizer step per generation batch written")
        a["gradient_accumulation_steps"] = micro_steps // mini
        if card.batch.grad_accum != micro_steps // mini:
            notes.append(f"batch.grad_accum {card.batch.grad_accum}: TRL's GRPOTrainer accumulates the generation"
                         f" batch's {micro_steps} micro-batches of {per_step} completions into {mini} optimizer"
                         f" step(s) (rollout.mini_batches): gradient_accumulation_steps {micro_steps // mini}")
    a["beta"] = kl_coef(card)
    if ro.num_iterations > 1:
        a["num_iterations"] = ro.num_iterations
    if non_default(card, "rollout.prompt_len") and ro.engine not in SERVING_ENGINES:
        notes.append(
            f"rollout.prompt_len {ro.prompt_len}: TRL 1.16 GRPOConfig has no max_prompt_length; filter or truncate "
            "prompts in the dataset (vllm_max_model_length bounds prompt + completion)"
        )
    if ro.engine is RolloutEngine.SGLANG:
        notes.append("rollout.engine sglang: TRL GRPOTrainer generates with vLLM or transformers; exported as vllm")
    if ro.engine in SERVING_ENGINES:
        a["use_vllm"] = True
        a["vllm_max_model_length"] = ro.prompt_len + ro.response_len
        if ro.placement is Placement.COLOCATE:
            a["vllm_mode"] = "colocate"
            a["vllm_gpu_memory_utilization"] = ro.gpu_memory_utilization
            a["vllm_tensor_parallel_size"] = ro.tensor_parallel
        else:
            a["vllm_mode"] = "server"
        if ro.sleep_level > 0 and ro.placement is Placement.COLOCATE:
            a["vllm_enable_sleep_mode"] = True
        if ro.sleep_level not in (0, TRL_SLEEP_LEVEL) and ro.placement is Placement.COLOCATE:
            notes.append(
                f"rollout.sleep_level {ro.sleep_level}: TRL's vllm_enable_sleep_mode sleeps vLLM at level {TRL_SLEEP_LEVEL} "
                "(trl/generation/vllm_generation.py); plan the TRL run with --set rollout.sleep_level=2"
            )
        if ro.sleep_level > 0 and ro.placement is Placement.SPLIT:
            notes.append(f"rollout.sleep_level {ro.sleep_level}: TRL sleeps vLLM only when colocated (vllm_mode colocate)")
        if not ro.cuda_graphs and ro.placement is Placement.COLOCATE:
            notes.append("rollout.cuda_graphs false: TRL 1.16 has no enforce_eager setting for its vLLM engine")
        elif not ro.cuda_graphs:
            # ScriptArguments.enforce_eager, passed to LLM (huggingface/trl trl/scripts/vllm_serve.py l.279, l.348
            # @f2cd57710ae345ea6428ae95363267fcf38a3dc8)
            notes.append("rollout.cuda_graphs false: start the server with trl vllm-serve --enforce_eager true")
        if non_default(card, "rollout.max_num_seqs"):
            notes.append(f"rollout.max_num_seqs {ro.max_num_seqs}: TRL 1.16 has no vLLM max_num_seqs setting")
        if non_default(card, "rollout.max_num_batched_tokens"):
            notes.append(f"rollout.max_num_batched_tokens {ro.max_num_batched_tokens}: TRL 1.16 has no such vLLM setting")
    else:
        a["use_vllm"] = False
    sync, trl_sync = effective_weight_sync(card), trl_weight_sync(card.scope, card.parallel.strategy)
    if sync is not trl_sync:
        notes.append(
            f"rollout.weight_sync {sync.value}: TRL 1.16 has no setting for it and syncs {trl_sync.value} for "
            f"{card.scope.value} under {card.parallel.strategy.value} (a PEFT model under ZeRO-3 is gathered whole; "
            f"otherwise one parameter at a time); plan the TRL run with --set rollout.weight_sync={trl_sync.value}"
        )
    ref = reference_placement(card)
    if ref in (RefPlacement.CPU, RefPlacement.HOST_SWAP):
        notes.append(f"roles.reference {ref.value}: TRL keeps the reference model on the GPU (no CPU reference)")
    rm = reward_model(card)
    if rm:
        notes.append(f"roles.reward_model {rm}: pass reward_funcs='{rm}' to GRPOTrainer (not a config field)")
    return a


def build(card: RunCard) -> Export:
    notes: list[str] = []
    cls = CONFIG_CLASS[card.method]
    a = _common_args(card, notes)
    if card.method is not Method.PPO:
        a["model_init_kwargs"] = _model_init_kwargs(card)
    if card.method in (Method.SFT, Method.RM, Method.DPO):
        a["max_length"] = card.batch.seq_len
    b = card.batch
    if card.method is Method.SFT and b.packed_sample_tokens is not None:
        # TRL 1.16 SFTConfig packing (packing_strategy "bfd": whole samples packed into max_length rows, kept apart
        # by position_ids, which only flash-attention kernels read as per-sample attention)
        a["packing"] = True
        cv = (f", batch.packed_sample_length_cv {b.packed_sample_length_cv:g}"
              if b.packed_sample_length_cv is not None else "")
        notes.append(f"batch.packed_sample_tokens {b.packed_sample_tokens}{cv}: written as packing=True; the mean"
                     " sample length is the data's, not a TRL setting (the import plans rows as one sequence each"
                     " until it is set again)")
        if card.attention is not Attention.FLASH:
            notes.append(f"attention {card.attention.value} with packing: TRL keeps packed samples apart only under"
                         " flash attention (attn_implementation flash_attention_2); with this attention the samples of"
                         " a row attend to each other")
    if card.method is Method.DPO:
        a["beta"] = kl_coef(card)
        ref = reference_placement(card)
        if ref is RefPlacement.PRECOMPUTED:
            a["precompute_ref_log_probs"] = True
        elif ref in (RefPlacement.CPU, RefPlacement.HOST_SWAP):
            notes.append(f"roles.reference {ref.value}: TRL DPO keeps the reference on the GPU; use precomputed to free it")
    if card.method is Method.GRPO:
        a = _grpo_args(card, a, notes)
    if card.method is Method.PPO:
        notes.append(
            "method ppo: TRL 1.16 has no PPOTrainer (removed); only the shared TrainingArguments are exported — "
            "use --to verl or --to openrlhf for PPO"
        )
    peft = peft_kwargs(card, notes)
    quant = quantization_kwargs(card)
    # launch
    acc = accelerate_export.FILENAME
    launch = f"accelerate launch --config_file {acc}"
    hw = card.hardware
    if hw.nodes > 1:
        launch += " --machine_rank $NODE_RANK --main_process_ip $MASTER_ADDR --main_process_port 29500"
    launch += " train.py"
    data: dict[str, Any] = {"config_class": cls or "TrainingArguments", "model": model_name(card), "args": a, "peft": peft,
                            "quantization": quant, "launch": launch}
    if card.method is Method.GRPO and card.rollout.engine in SERVING_ENGINES and card.rollout.placement is Placement.SPLIT:
        ro = card.rollout
        gpus = ro.gpus or 1
        serve_devices = ",".join(str(i) for i in range(gpus))
        train_devices = ",".join(str(i) for i in range(gpus, hw.gpus_per_node))
        dp = max(1, gpus // ro.tensor_parallel)
        data["vllm_serve"] = (
            f"CUDA_VISIBLE_DEVICES={serve_devices} trl vllm-serve --model {shlex.quote(model_name(card))}"
            f" --tensor_parallel_size {ro.tensor_parallel} --data_parallel_size {dp}"
            f" --gpu_memory_utilization {ro.gpu_memory_utilization} --max_model_len {ro.prompt_len + ro.response_len}"
        )
        data["launch"] = f"CUDA_VISIBLE_DEVICES={train_devices} " + launch.replace(
            f"--config_file {acc}", f"--config_file {acc} --num_processes {train_gpus_per_node(card) * hw.nodes}"
        )
        if gpus % ro.tensor_parallel:
            notes.append(f"rollout.gpus {gpus} is not a multiple of tensor_parallel {ro.tensor_parallel}")
    notes.append(f"parallel.strategy {card.parallel.strategy.value}, offload and GPU counts: in {acc} (trainfit export --to accelerate)")
    notes.extend(shared_notes(card, "trl"))
    text = _render(card, data)
    return Export(target="trl", text=text, data=data, notes=notes, filename="train_config.py")


def _py(key: str, v: Any) -> str:
    """A Python literal for a card value (validated: only str, int, float, bool, None, lists and dicts)."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_py(key, k)}: {_py(key, x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_py(key, x) for x in v) + "]"
    if v is None or isinstance(v, (str, bool, int, float)):
        return repr(finite(key, v))
    raise TypeError(f"{key}: {type(v).__name__} is not a literal")


def _render(card: RunCard, data: dict[str, Any]) -> str:
    cls = data["config_class"]
    mod = "transformers" if cls == "TrainingArguments" else "trl"
    lines = [
        f"# TRL 1.16 arguments exported by trainfit for {comment_text(card.name or 'the card')} ({card.method.value})",
        f"from {mod} import {cls}",
    ]
    if data["peft"]:
        lines.append("from peft import LoraConfig")
    if data["quantization"]:
        lines.append("from transformers import BitsAndBytesConfig")
    lines.append("")
    lines.append(f"model = {_py('model', data['model'])}")
    if data["quantization"]:
        lines.append(f"quantization = {_py('quantization', data['quantization'])}")
    lines.append(f"args = {cls}(")
    for k, v in data["args"].items():
        if k == "model_init_kwargs" and data["quantization"]:
            inner = ", ".join(f"{_py(k, kk)}: {_py(k, vv)}" for kk, vv in v.items())
            lines.append(f"    {k}={{{inner}, 'quantization_config': BitsAndBytesConfig(**quantization)}},")
        else:
            lines.append(f"    {k}={_py(k, v)},")
    lines.append(")")
    if data["peft"]:
        lines.append("peft_config = LoraConfig(")
        for k, v in data["peft"].items():
            lines.append(f"    {k}={_py(k, v)},")
        lines.append(")")
    lines.append("")
    if "vllm_serve" in data:
        lines.append("# rollout server (run first):")
        lines.append(f"vllm_serve = {_py('vllm_serve', data['vllm_serve'])}")
    lines.append(f"launch = {_py('launch', data['launch'])}")
    return "\n".join(lines) + "\n"


def to_trl(card: RunCard) -> dict[str, Any]:
    """The TRL config keyword arguments, peft LoraConfig arguments and launch command for the card."""
    return build(card).data
