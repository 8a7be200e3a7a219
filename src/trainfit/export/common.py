"""What every exporter shares: the result type and the card facts the targets need."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from trainfit.errors import TrainfitError
from trainfit.methods.roles import trl_old_logprob_pass
from trainfit.spec.card import RunCard, megatron_core_pin
from trainfit.spec.enums import (
    KbitPrepare,
    FSDP_STRATEGIES,
    ZERO_STAGES,
    Attention,
    ComputeDtype,
    ExpertAdapters,
    FsdpVersion,
    Method,
    Nf4ComputeDtype,
    Padding,
    Placement,
    RolloutEngine,
    Scope,
    Strategy,
    WeightSync,
)

TARGETS = ("accelerate", "deepspeed", "trl", "verl", "openrlhf", "torchtitan", "nemo-rl")


class ExportError(TrainfitError):
    """An unknown export target, or a card the target cannot run at all (one line, why)."""


@dataclass(frozen=True, slots=True)
class Export:
    """One exported launch config.

    ``text`` is what a user saves to a file (YAML, JSON, a Python snippet, or a command line);
    ``data`` is the same config as Python values; ``notes`` says every card setting the target
    cannot express, or expresses another way, in one line each.
    """

    target: str
    text: str
    data: Any
    notes: list[str] = field(default_factory=list)
    filename: str = ""
    """The file name the other exports refer to (e.g. ``accelerate.yaml`` in the TRL launch line)."""
    lost: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Card keys the exported file cannot carry: ``{key: {"card": value, "file": value read back}}``.
    Found by reading the file back (``trainfit.export.importers``) and comparing every fact the plan
    reads (``plan_facts``); restoring these keys gives the card's own plan."""

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "filename": self.filename, "data": self.data, "notes": list(self.notes),
                "lost": {k: dict(v) for k, v in self.lost.items()}, "text": self.text}


def model_name(card: RunCard) -> str:
    """The model id or path a framework loads."""
    m = card.model
    if isinstance(m, str):
        return m
    return m.path or m.id or (card.name or "MODEL_PATH")


def is_rl(card: RunCard) -> bool:
    return card.method in (Method.PPO, Method.GRPO)


def non_default(card: RunCard, dotted: str) -> bool:
    """True when the card's value differs from the field's default (so a missing knob is worth saying)."""
    section, _, key = dotted.partition(".")
    if not key:
        return getattr(card, section) != RunCard.model_fields[section].get_default(call_default_factory=True)
    sec = getattr(card, section)
    return getattr(sec, key) != type(sec).model_fields[key].get_default(call_default_factory=True)


def train_gpus_per_node(card: RunCard) -> int:
    """GPUs per node that train: all of them, less the rollout engine's under a split placement."""
    if is_rl(card) and card.rollout.placement is Placement.SPLIT:
        return card.hardware.gpus_per_node - (card.rollout.gpus or 0)
    return card.hardware.gpus_per_node


def train_world(card: RunCard) -> int:
    return train_gpus_per_node(card) * card.hardware.nodes


def is_fsdp(card: RunCard) -> bool:
    return card.parallel.strategy in FSDP_STRATEGIES


def zero_stage(card: RunCard) -> int | None:
    return ZERO_STAGES.get(card.parallel.strategy)


def mixed_precision(card: RunCard) -> str:
    # fp8: accelerate's mixed_precision "fp8" needs a backend config (TE / torchao) this export does not write;
    # the non-GEMM ops run in bf16 and the round trip lists precision.compute as lost
    return {ComputeDtype.BF16: "bf16", ComputeDtype.FP16: "fp16", ComputeDtype.FP32: "no",
            ComputeDtype.FP8: "bf16", ComputeDtype.FP4: "bf16"}[card.precision.compute]


def torch_dtype_name(card: RunCard) -> str:
    """The dtype the trainable model is loaded in (transformers ``dtype=``)."""
    w = card.weights_dtype.value
    return {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(w, "bfloat16")


HF_ATTENTION = {Attention.SDPA: "sdpa", Attention.FLASH: "flash_attention_2", Attention.EAGER: "eager"}


def lora_targets(card: RunCard) -> str | list[str]:
    t = card.lora.targets
    return t if isinstance(t, str) else list(t)


def is_adapter(card: RunCard) -> bool:
    return card.scope is not Scope.FULL


def global_batch(card: RunCard) -> int:
    """Sequences per optimizer step: micro-batch x accumulation x training GPUs."""
    return card.batch.micro_batch_size * card.batch.grad_accum * train_world(card)


def verl_flash_attn_logprobs(card: RunCard, target: str) -> bool:
    """verl's FSDP actor (PPO/GRPO) computes its log-probs with flash-attn's Triton ``cross_entropy_loss`` whenever
    flash-attn imports (volcengine/verl verl/utils/torch_functional.py l.30-36, l.53-72
    @e0d035cd4a6a5c29835516a58d78710a28e73b18), ``inplace_backward=True`` unless the update computes the entropy
    (verl/workers/actor/dp_actor.py l.117-120, l.308-311, ``entropy_coeff`` 0 by default, ppo_trainer.yaml l.46):
    no key switches it; the chunked loss (``use_fused_kernels``) and the Megatron actor run their own."""
    if target != "verl" or card.method.value not in ("ppo", "grpo") or card.loss.chunked:
        return False
    from trainfit.export.verl import uses_megatron

    return not uses_megatron(card)


def shared_notes(card: RunCard, target: str, *, megatron_has: set[str] | None = None) -> list[str]:
    """Card settings no launch config of any target expresses, and the Megatron-Core-only ``parallel`` settings
    the target does not write (``megatron_has``: those it writes; ``trainfit.export.parallel.megatron_keys_notes``)."""
    from trainfit.export.parallel import megatron_keys_notes

    notes: list[str] = []
    p = card.precision
    if p.optimizer_in_backward:
        notes.append(f"precision.optimizer_in_backward: {target} has no optimizer-in-backward; the step runs after backward")
    m = card.model
    if not isinstance(m, str) and (m.config is not None or m.params is not None or m.revision is not None or m.mtp):
        notes.append(
            f"model: {target} loads a model id or path ({model_name(card)!r}); the card's inline config, parameter "
            "count, revision or model.mtp (training the multi-token-prediction modules) is not written"
        )
    if card.hardware.allocator.value != "default":
        notes.append(f"hardware.allocator {card.hardware.allocator.value}: an environment setting"
                     " (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), not a key of the {target} file; set it where"
                     " the run is launched".replace("{target}", target))
    if card.loss.kernel.value == "flash_attn" and not verl_flash_attn_logprobs(card, target):
        inplace = " (loss.inplace_backward true)" if card.loss.inplace_backward else ""
        notes.append(f"loss.kernel flash_attn{inplace}: {target} has no switch to flash-attn's CrossEntropyLoss"
                     " (llm-foundry's model.loss_fn: fused_crossentropy); not written, the target's own loss runs")
    if card.loss.chunked and card.loss.kernel.value != "liger":
        notes.append(f"loss.kernel {card.loss.kernel.value}: no {target} setting picks this chunked loss; not written"
                     " (where the file writes a chunked loss it is the target's own, read back as liger)")
    ro = card.rollout
    if target != "verl" and (ro.max_tokens_per_micro_batch is not None
                             or ro.logprob_max_tokens_per_micro_batch is not None
                             or ro.critic_max_tokens_per_micro_batch is not None):
        from trainfit.methods.rl import logprob_token_budget

        lp = ("" if logprob_token_budget(card) is None else
              "; rollout.logprob_micro_batch_size is written as the sequence count (the micro-batch's)")
        notes.append("rollout.max_tokens_per_micro_batch / logprob_max_tokens_per_micro_batch /"
                     " critic_max_tokens_per_micro_batch: verl's dynamic batching"
                     f" (use_dynamic_bsz); {target} is not given a per-GPU token budget, its micro-batches are counts of"
                     f" sequences{lp}")
    b = card.batch
    said = (target in ("trl", "nemo-rl") and card.method is Method.SFT) or target == "openrlhf"  # write it, say so
    if b.packed_sample_tokens is not None and not said:
        cv = (f", batch.packed_sample_length_cv {b.packed_sample_length_cv:g}"
              if b.packed_sample_length_cv is not None else "")
        notes.append(f"batch.packed_sample_tokens {b.packed_sample_tokens}{cv}: the mean length of the samples packed"
                     f" into a row is a property of the data, and the {target} file does not write packing with"
                     " attention per sample; not written (rows are planned back as one causal sequence each)")
    if card.precision.nf4_compute_dtype is not Nf4ComputeDtype.BF16:
        notes.append(f"precision.nf4_compute_dtype {card.precision.nf4_compute_dtype.value}: the 4-bit base's GEMMs"
                     " take the dtype of the activations bitsandbytes is handed (a float32 model load without autocast"
                     f" gives fp32); the {target} file loads the model in its 16-bit compute dtype; not written (read"
                     " back as bf16)")
    if card.lora.prepare_kbit is not KbitPrepare.NONE and card.scope is Scope.QLORA:
        cast = ("fp32 embeddings, norms and head" if card.lora.prepare_kbit is KbitPrepare.PEFT else
                "then TRL's peft_module_casting_to_bf16: fp32 norms, bf16 embeddings and head")
        notes.append(f"lora.prepare_kbit {card.lora.prepare_kbit.value}: the run calls peft's"
                     f" prepare_model_for_kbit_training ({cast} under bf16 autocast; TRL's SFTTrainer did on a"
                     f" non-sharded 4-bit model before v0.27); the {target} file does not call it; not written (read"
                     " back as none)")
    if card.scope is not Scope.FULL and card.lora.expert_adapters is not ExpertAdapters.MERGED:
        notes.append(f"lora.expert_adapters {card.lora.expert_adapters.value}: the routed experts' unmerged grouped"
                     f" adapters are prime-rl's MultiLoRAGroupedExperts code, not a setting of the {target} file; not"
                     " written (read back as merged)")
    if b.padding is not Padding.NONE:
        notes.append(f"batch.padding {b.padding.value}: samples padded to batch.seq_len with an attention mask of zeros"
                     f" after each sample are a property of the data and its collator; the {target} file has no setting"
                     " for it; not written (read back as padding none: causal attention with the causal skip)")
    ro = card.rollout
    if is_rl(card) and ro.prompt_len_mean is not None and target in ("trl", "verl", "openrlhf", "nemo-rl"):
        notes.append(f"rollout.prompt_len_mean {ro.prompt_len_mean}: the mean prompt length is a property of the data"
                     f" (its prompts, instruction and chat template), not a setting of the {target} file; not written"
                     f" (the file bounds prompts at rollout.prompt_len {ro.prompt_len}, which the import plans every"
                     " prompt at until the mean is set again)")
    if is_rl(card) and ro.recompute_old_logprobs is not None and target in ("trl", "verl", "openrlhf", "nemo-rl"):
        notes.append(_old_logprob_note(card, target))
    if is_rl(card) and ro.quantization.value != "none" and target in ("trl", "openrlhf"):
        kept = (f" (rollout.quantization_bf16_modules {list(ro.quantization_bf16_modules)})"
                if ro.quantization_bf16_modules else "")
        notes.append(f"rollout.quantization {ro.quantization.value}{kept}: {target} has no setting for fp8 weights in its"
                     " vLLM engine (TRL 1.16 GRPOConfig, OpenRLHF 0.11 flags); not written, the engine runs bf16 (use"
                     " --to verl or nemo-rl)")
    notes.extend(megatron_keys_notes(card, target, has=megatron_has or set()))
    units = adapter_units_note(card, target)
    notes.extend([units] if units else [])
    if p.fp8_params and target not in ("verl", "nemo-rl"):
        notes.append(f"precision.fp8_params: {target} has no setting for fp8 primary weights (Transformer Engine"
                     " fp8_model_init, Megatron fp8_param / fp8_param_gather); not written, the file keeps bf16 weights"
                     " beside their fp8 copies (use --to verl or nemo-rl)")
    if p.fp8_activation_input_store:
        notes.append(f"precision.fp8_activation_input_store: {target}'s file gets no activation_func_fp8_input_store"
                     " from trainfit; not written, the SwiGLU keeps its bf16 input (set it in the Megatron-Core"
                     " transformer config by hand)")
    if not p.fp8_param_transpose_cache:
        notes.append(f"precision.fp8_param_transpose_cache: false: {target}'s file gets no"
                     " disable_parameter_transpose_cache from trainfit; not written (set it in the Megatron-Core"
                     " transformer config by hand; it frees the fp8 weights' transposes only on Transformer Engine 1.x)")
    if p.fp8_attention and target != "verl":
        notes.append(f"precision.fp8_attention: {target} has no setting for Transformer Engine's fp8 attention"
                     " (Megatron-Core fp8_dot_product_attention); not written, attention runs bf16 (use --to verl)")
    if not card.parallel.sac_saves_attention:
        notes.append("parallel.sac_saves_attention false: a description of torchtitan's per-op policy before b39377f9"
                     f" (cuDNN attention missing from its save list), not a setting; {target} has no switch for it;"
                     " not written")
    if non_default(card, "parallel.compile") and card.parallel.compile and target in ("verl", "openrlhf"):
        notes.append(f"parallel.compile: {target} has no torch.compile switch for the trained model here")
    if target in ("accelerate", "trl", "deepspeed"):  # the model-parallel targets say their own
        from trainfit.export.parallel import missing_parallel_notes

        if p.compute.quantized_gemms:
            c, r = p.compute.value, p.gemm_recipe.value if p.gemm_recipe else "?"
            notes.append(f"precision.compute {c} ({r}): the {target} export writes bf16 mixed precision; {c} GEMMs"
                         " need a Transformer Engine or torchao recipe it does not write (use --to verl, nemo-rl or"
                         " torchtitan)")
        notes.extend(missing_parallel_notes(card, target, has={"tensor_parallel"} if target == "deepspeed" else set()))
        if card.parallel.selective_checkpointing.value != "none":
            notes.append(f"parallel.selective_checkpointing {card.parallel.selective_checkpointing.value}: {target} has no"
                         " selective checkpointing setting; not written")
    return notes


_HF_TRAINER_WRAPS = ("the HF Trainer replaces the file's wrap policy with PEFT's fsdp_auto_wrap_policy for a PEFT"
                     " model on FSDP (transformers 5.24.0 trainer.py l.1761-1762, distributed/fsdp.py l.267-279;"
                     " 4.x: Trainer._fsdp_qlora_plugin_updates), which makes each lora_A / lora_B an FSDP1 unit of its"
                     " own")
ADAPTER_UNITS_BY_TARGET = {
    "accelerate": "the accelerate file writes fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP (decoder layers, the"
    " adapters inside their layer's unit) for a script that calls accelerator.prepare itself; " + _HF_TRAINER_WRAPS
    + "; the file cannot say which script runs, so it reads back as null (no preset: false)",
    "trl": "TRL's trainers are the HF Trainer: " + _HF_TRAINER_WRAPS + ", whatever the accelerate file's"
    " fsdp_auto_wrap_policy; no TRL or accelerate key turns it off, so the file reads back as true",
    "verl": "verl's FSDP engine wraps with get_fsdp_wrap_policy(is_lora=lora_rank > 0), whose leaf-module policy"
    " makes each lora_A / lora_B an FSDP1 unit of its own while actor.fsdp_config.wrap_policy.min_num_params is 0,"
    " its default (verl-project/verl @1dda039b verl/utils/fsdp_utils.py l.113-125); a min_num_params above 0 would"
    " also swap the decoder-layer policy for size-based wrapping, so it is not written and the file reads back as"
    " true",
    "torchtitan": "torchtitan shards with FSDP2 (fully_shard per decoder layer, the adapters inside it); no"
    " adapter units, read back as null (false)",
    "nemo-rl": "NeMo RL's DTensor policy shards with FSDP2 (fully_shard per decoder layer, the adapters inside it);"
    " no adapter units, read back as null (false)",
    "deepspeed": "DeepSpeed ZeRO partitions parameters with no FSDP units; not written, read back as null (false)",
    "openrlhf": "OpenRLHF trains on DeepSpeed ZeRO, with no FSDP units; not written, read back as null (false)",
}
"""What each export target's framework does with PEFT's adapter linears under FSDP1
(``parallel.fsdp_adapter_units``; ``spec.card.ADAPTER_UNIT_PRESETS`` cites the HF Trainer's and verl's wrapping)."""


def adapter_units_note(card: RunCard, target: str) -> str | None:
    """The note on ``parallel.fsdp_adapter_units`` for a LoRA / QLoRA card on FSDP1, where the field is read: the card's
    resolved value and what the ``target``'s framework does with the adapter units; None elsewhere."""
    if not (card.scope in (Scope.LORA, Scope.QLORA) and card.parallel.strategy in (Strategy.FSDP, Strategy.HSDP)
            and card.parallel.fsdp_version is FsdpVersion.FSDP1):
        return None
    value = "true" if card.resolved_fsdp_adapter_units else "false"
    how = "" if card.parallel.fsdp_adapter_units is not None else " (null: the preset's framework)"
    return f"parallel.fsdp_adapter_units {value}{how}: {ADAPTER_UNITS_BY_TARGET[target]}"


def _old_logprob_note(card: RunCard, target: str) -> str:
    """What ``target`` does about the old policy's log-prob pass that ``rollout.recompute_old_logprobs`` sets: verl
    (``compute_log_prob`` every step), OpenRLHF (the experience maker) and NeMo RL (``prev_logprobs``) always run it;
    TRL's GRPOTrainer by ``methods.roles.trl_old_logprob_pass`` (vLLM's importance-sampling correction, on by default
    since TRL 0.23, more than one iteration or mini-batch). No file has a setting for it."""
    ro = card.rollout
    want = "true" if ro.recompute_old_logprobs else "false"
    if target == "trl":
        runs = trl_old_logprob_pass(card) or card.method is Method.PPO
        what = ("TRL computes them with vLLM's importance-sampling correction (on by default since 0.23), num_iterations"
                " > 1 or several optimizer steps per generation batch" + (" (here: it does)" if runs
                                                                          else " (here: it does not)"))
    else:
        what = f"{target} recomputes them every step"
    return (f"rollout.recompute_old_logprobs {want}: the {target} file has no setting for the old policy's log-prob"
            f" pass; {what}; not written (the import plans the framework's default)")


# -- what the plan reads --------------------------------------------------------------------------

_IMPLICIT_FULL_GATHER = (Strategy.FSDP, Strategy.HSDP)
"""Strategies whose actor terms carry FSDP layer units (``trainfit.methods.rl.effective_weight_sync``:
an unset weight sync under PEFT is a full gather there; ZeRO-3's terms carry none, so it stays per parameter)."""


def effective_weight_sync(card: RunCard) -> WeightSync:
    """The weight sync the plan holds memory for (mirrors ``trainfit.methods.rl.effective_weight_sync``
    without planning): the card's when given; else a full gather for an adapter under FSDP/HSDP sharded
    over more than one rank, else per parameter. The round-trip property test checks the two agree."""
    if "weight_sync" in card.rollout.model_fields_set:
        return card.rollout.weight_sync
    s = card.parallel.strategy
    # under context parallel the plan takes the model-parallel path, whose ZeRO-3 terms carry FSDP-style layer
    # units too (trainfit.plan.stages / ranks)
    if card.scope is not Scope.FULL and _shard_group(card) > 1 and (
            s in _IMPLICIT_FULL_GATHER or (s is Strategy.ZERO3 and card.parallel.context_parallel > 1)):
        return WeightSync.FULL_GATHER
    return WeightSync.PER_PARAMETER


def fsdp2_only_note(card: RunCard, who: str) -> str | None:
    """The note of a target that shards with FSDP2 only (``who``: its backend) for an fsdp1 card, else None."""
    if is_fsdp(card) and card.parallel.fsdp_version is FsdpVersion.FSDP1:
        return f"parallel.fsdp_version fsdp1: {who} shards with FSDP2 (fully_shard) only; exported as fsdp2"
    return None


def _shard_group(card: RunCard) -> int:
    """Ranks the parameters are sharded over (``trainfit.plan.stages.parallel_sharding``): the data x context
    ranks of the training GPUs; for HSDP its shard group (``hsdp_shard_group``)."""
    return hsdp_shard_group(card) if card.parallel.strategy is Strategy.HSDP else _data_ranks(card)


def _data_ranks(card: RunCard) -> int:
    """The training GPUs' data x context ranks (tensor and pipeline parallel divided out)."""
    return train_world(card) // (card.parallel.tensor_parallel * card.parallel.pipeline_parallel)


def hsdp_shard_group(card: RunCard) -> int:
    """HSDP's shard group over the training GPUs' data x context ranks: ``parallel.hsdp_shard_size``, else a node's
    training GPUs (at most the data x context ranks), as ``trainfit.memory.sharding.make_sharding`` plans it. The
    frameworks' keys: verl ``fsdp_config.fsdp_size``, torchtitan ``data_parallel_shard_degree`` (x context
    parallel), accelerate ``parallelism_config_dp_shard_size``."""
    return card.parallel.hsdp_shard_size or min(train_gpus_per_node(card), _data_ranks(card))


def _model_fact(card: RunCard) -> Any:
    m = card.model
    if isinstance(m, str):
        return m
    if m.config is not None or m.params is not None or m.revision is not None or m.mtp:
        return m.model_dump(mode="json", exclude_none=True)
    return m.path or m.id


# vLLM settings the plan does not read when the engine is hf (placement, tensor_parallel, sleep_level, cuda_graphs, weight_sync
# still change its generation time, so they stay facts)
_VLLM_ONLY = ("gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens")


DS_STAGE12_KEYS = ("reduce_bucket_size", "contiguous_gradients", "overlap_comm")
"""``deepspeed`` section keys the ZeRO-1/2 plan reads (``trainfit.plan.terms.zero_config_of``);
``allgather_bucket_size`` allocates nothing (``trainfit.memory.deepspeed``), so it is no fact."""
DS_STAGE3_KEYS = ("stage3_prefetch_bucket_size", "stage3_max_live_parameters", "stage3_max_reuse_distance",
                  "stage3_param_persistence_threshold", "sub_group_size")
"""Keys the ZeRO-3 plan reads besides those."""


def overlap_comm(card: RunCard) -> bool:
    """``deepspeed.overlap_comm`` as DeepSpeed resolves it: unset is true at stage 3 only
    (runtime/zero/config.py, ``trainfit.memory.deepspeed.DEFAULTS``)."""
    v = card.deepspeed.overlap_comm
    return zero_stage(card) == 3 if v is None else v


def deepspeed_facts(card: RunCard) -> dict[str, Any]:
    """The ``deepspeed`` section as the plan reads it: only under a ZeRO strategy, the stage-3 keys
    only at stage 3, ``overlap_comm`` resolved; ``auto`` stays ``auto`` (the HF Trainer fills it)."""
    stage = zero_stage(card)
    if stage is None:
        return {}
    ds = card.deepspeed
    keys = DS_STAGE12_KEYS + (DS_STAGE3_KEYS if stage == 3 else ())
    f = {f"deepspeed.{k}": getattr(ds, k) for k in keys}
    f["deepspeed.overlap_comm"] = overlap_comm(card)
    return f


def plan_facts(card: RunCard) -> dict[str, Any]:
    """Every card value the planner reads, resolved (method defaults applied), as JSON values by
    dotted key. Two cards with equal facts plan the same peak and time."""
    from trainfit.methods.roles import kl_coef, reference_placement

    rl = is_rl(card)
    f: dict[str, Any] = {"model": _model_fact(card), "method": card.method.value, "scope": card.scope.value}
    if card.scope is not Scope.FULL:
        lo = card.lora
        f.update({"lora.rank": lo.rank, "lora.alpha": float(lo.alpha), "lora.targets": list(card.lora_targets),
                  "lora.dropout": float(lo.dropout), "lora.adapter_dtype": lo.adapter_dtype.value})
        if lo.expert_adapters is not ExpertAdapters.MERGED:  # time: the routed adapters' GEMMs (inventory)
            f["lora.expert_adapters"] = lo.expert_adapters.value
        if lo.call_syncs:  # time: host syncs in every adapted linear's forward call (inventory.Adapter.call_syncs)
            f["lora.call_syncs"] = float(lo.call_syncs)
        if card.scope is Scope.QLORA:
            f["lora.double_quant"] = lo.double_quant
            torchao = (card.software.model_extra or {}).get("torchao")
            if torchao is not None:  # torchao < 0.2 NF4 sets the load phase (trainfit.memory.nf4_load)
                f["software.torchao"] = str(torchao)
    foundry = (card.software.model_extra or {}).get("llm-foundry")
    if foundry is not None:  # a pin before v0.5.0 adds per-call unpad syncs (plan.time.llm_foundry_unpad_syncs)
        f["software.llm-foundry"] = str(foundry)
    verl = (card.software.model_extra or {}).get("verl")
    if verl is not None:  # a 0.9 pin sends an fp32 trainer's weights uncast (plan.rl_sync, VERL_UNCAST_EXPORT_SINCE)
        f["software.verl"] = str(verl)
    vllm = card.software.vllm
    if vllm is not None and rl:  # a pin before 0.8.5 pads FA3 decode to 128 rows (plan.rl_generation)
        f["software.vllm"] = str(vllm)
    p = card.precision
    f.update({
        "precision.weights": card.weights_dtype.value, "precision.compute": p.compute.value,
        "precision.master_weights": p.master_weights.value, "precision.grads": p.grads.value if p.grads else None,
        "precision.optimizer": p.optimizer.value, "precision.optimizer_states": p.optimizer_states.value,
        "precision.optimizer_impl": p.optimizer_impl.value, "precision.optimizer_in_backward": p.optimizer_in_backward,
        "precision.fp8_recipe": p.fp8_recipe.value if p.fp8_recipe else None, "precision.fp8_params": p.fp8_params,
        "precision.fp8_attention": p.fp8_attention,
        "precision.fp4_recipe": p.fp4_recipe.value if p.fp4_recipe else None, "precision.fp4_params": p.fp4_params,
        "precision.nf4_compute_dtype": p.nf4_compute_dtype.value,  # time: the 4-bit base's GEMM rate
        "precision.autocast": p.autocast,  # time: an fp32 reward model's GEMM rate (methods.roles)
        "precision.tf32": p.tf32,  # time: fp32 GEMMs on the TF32 tensor cores
    })
    hw = card.hardware
    for k in ("gpu", "gpu_memory_gib", "gpus_per_node", "nodes", "host_ram_gib", "nic_gbps_per_gpu",
              "nic_gbps_per_node", "host_memory_gbps", "host_numa_nodes"):
        f[f"hardware.{k}"] = getattr(hw, k)
    # time: the node link's bus bandwidth (plan.time.rates_of); null, the GPU catalog's link
    f["hardware.interconnect"] = hw.interconnect.value if hw.interconnect else None
    f["hardware.allocator"] = hw.allocator.value  # the reserved bytes (plan.overheads)
    for k, v in card.parallel.model_dump(mode="json").items():
        f[f"parallel.{k}"] = v
    f["parallel.fsdp_adapter_units"] = card.resolved_fsdp_adapter_units  # null: the preset's framework decides
    f.update(deepspeed_facts(card))
    f["batch.micro_batch_size"] = card.batch.micro_batch_size
    f["batch.grad_accum"] = card.batch.grad_accum
    if not rl:
        f["batch.seq_len"] = card.batch.seq_len
    if not rl:  # packing is read for sft, rm and dpo (the card refuses it for ppo / grpo)
        f["batch.packed_sample_tokens"] = card.batch.packed_sample_tokens
        f["batch.packed_sample_length_cv"] = card.batch.packed_sample_length_cv
        f["batch.padding"] = card.batch.padding.value  # time: SDPA with the padding mask runs every key block
    if card.batch.packed_rope_loop:  # time: the per-sample thd RoPE loop's kernels and host syncs (inventory)
        f["batch.packed_rope_loop"] = True
        pin = megatron_core_pin(card)
        if pin is not None:  # which loop, cat or copy (spec.card.thd_rope_loop_of); read only with the loop
            f["software.megatron-core"] = str(pin)
    f["attention"] = card.attention.value
    f["attention_kernel"] = card.attention_kernel.value  # the fused kernel's rates (compute.attention_time)
    f["loop.keeps_output_through_backward"] = card.loop.keeps_output_through_backward  # memory: the kept logits
    f["loop.kept_output_dtype"] = card.loop.kept_output_dtype.value
    if card.loop.returns_kv_cache:  # memory: the checkpointed model's returned key/value cache
        f["loop.returns_kv_cache"] = True
    if card.loop.loss_input_copy:  # memory: the compiled loss saves a copy beside the kept logits
        f["loop.loss_input_copy"] = True
    f["loop.token_scan_syncs"] = card.loop.token_scan_syncs  # time: the loop's per-token host syncs
    if card.loop.attention_call_syncs:  # time: host syncs in every attention layer's forward
        f["loop.attention_call_syncs"] = float(card.loop.attention_call_syncs)
    f["loop.launch_blocking"] = card.loop.launch_blocking  # time: CUDA_LAUNCH_BLOCKING=1, every launch waits
    from trainfit.plan.time import launcher_of
    f["loop.launcher"] = launcher_of(card).value  # time: the host ops' thread count (plan.time.host_one_thread_per_rank)
    f["loss.chunked"] = card.loss.chunked
    f["loss.upcast"] = card.loss.upcast  # memory: false, the model's own loss on the compute-dtype logits
    f["loss.compiled"] = card.loss.compiled  # memory and time: the eager loss under torch.compile
    lo = card.loss  # the kernel is read with chunked, or as flash_attn (the full-logits flash-attn loss)
    f["loss.kernel"] = lo.kernel.value if lo.chunked or lo.kernel.value == "flash_attn" else None
    f["loss.inplace_backward"] = lo.inplace_backward
    f["loss.temperature_copy"] = lo.temperature_copy
    if not lo.triton:  # memory and time: TRL's fused head off a Triton device scores every position (roles.logit_positions)
        f["loss.triton"] = False
    f["loss.logprob_entropy"] = lo.logprob_entropy.value  # verl's log-prob entropy: time and memory
    if rl:
        ro = card.rollout
        for k, v in ro.model_dump(mode="json").items():
            f[f"rollout.{k}"] = v
        f["rollout.weight_sync"] = effective_weight_sync(card).value
        # the log-prob passes' micro-batching as the plan reads it: verl's token budget (the update's by default,
        # methods.rl.logprob_token_budget), else a count of sequences (the micro-batch by default)
        from trainfit.methods.rl import logprob_token_budget

        lp_budget = logprob_token_budget(card)
        f["rollout.logprob_max_tokens_per_micro_batch"] = lp_budget
        f["rollout.logprob_micro_batch_size"] = (None if lp_budget is not None
                                                 else ro.logprob_micro_batch_size or card.batch.micro_batch_size)
        # the critic's budget as the plan reads it: null where it is the actor's for both critic passes
        # (methods.rl.critic_token_budget), whether the card says so or leaves it null
        c_budget = ro.critic_max_tokens_per_micro_batch
        f["rollout.critic_max_tokens_per_micro_batch"] = (
            None if c_budget is None or (c_budget == ro.max_tokens_per_micro_batch and c_budget == lp_budget)
            else c_budget)
        if ro.placement is not Placement.SPLIT:
            f["rollout.gpus"] = None
        if ro.engine is RolloutEngine.HF:  # generate() on the trained model: no engine, nothing to sync
            for k in _VLLM_ONLY:
                f.pop(f"rollout.{k}")
        f["task.kind"] = card.task.kind.value
        f["roles.reward_model"] = card.roles.reward_model
        rm_dtype = card.roles.reward_model_dtype  # memory and time: the reward model's weights and GEMMs
        f["roles.reward_model_dtype"] = rm_dtype.value if rm_dtype is not None else None
        if card.method is Method.PPO:
            c = card.roles.critic
            f["roles.critic"] = "same_as_actor" if c in (None, "same_as_actor", model_name(card)) else c
    if card.method in (Method.DPO, Method.PPO, Method.GRPO):
        f["roles.reference"] = reference_placement(card).value
        f["roles.kl_coef"] = float(kl_coef(card))
    # the framework the planner plans where the card leaves a value to it (RL sync path, packing, accumulation,
    # the single controller): a verl / OpenRLHF / NeMo RL file reads back with its framework's preset
    f["preset"] = card.preset
    return f


def card_from_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """Card data (a dict for ``load_card_dict``) that holds exactly these facts."""
    from trainfit.spec.dotted import set_dotted

    data: dict[str, Any] = {}
    for k, v in facts.items():
        if v is None:
            continue
        set_dotted(data, k, v)
    return data


# -- quoting for the target languages -------------------------------------------------------------


def finite(key: str, v: Any) -> Any:
    """``v`` unchanged, or ExportError for a non-finite number (no target language spells it)."""
    if isinstance(v, float) and not math.isfinite(v):
        raise ExportError(f"{key}: {v} is not a finite number; allowed: finite numbers")
    return v


_HYDRA_PLAIN = re.compile(r"[A-Za-z0-9_./:@+-]+")


_NUMBERISH = re.compile(r"[+-]?([0-9][0-9_]*\.?[0-9_]*|\.[0-9_]+)([eE][+-]?[0-9_]+)?|[+-]?(inf|nan)", re.IGNORECASE)


def _hydra_plain_ok(s: str) -> bool:
    """A word Hydra reads back as this same string (not a number, bool or null)."""
    return bool(_HYDRA_PLAIN.fullmatch(s)) and s[0] not in "+-" and not _NUMBERISH.fullmatch(s) and s.lower() not in (
        "true", "false", "null", "none", "yes", "no", "on", "off", "~")


def hydra_string(s: str) -> str:
    """A Hydra override value that Hydra reads back as exactly ``s``: plain when it is a plain word,
    else single-quoted with ``'`` and ``${`` escaped and backslashes before them doubled (Hydra
    override grammar, quoted values; OmegaConf ``\\${`` escape)."""
    if _hydra_plain_ok(s):
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        if s[i] == "\\":
            j = i
            while j < len(s) and s[j] == "\\":
                j += 1
            run = j - i
            special = j == len(s) or s[j] == "'" or s.startswith("${", j)
            out.append("\\" * (2 * run if special else run))
            i = j
            continue
        if s[i] == "'":
            out.append("\\'")
        elif s.startswith("${", i):
            out.append("\\$")
        else:
            out.append(s[i])
        i += 1
    return "'" + "".join(out) + "'"


def hydra_unquote(v: str) -> str | None:
    """The string a quoted Hydra value written by ``hydra_string`` stands for (None if not quoted); a
    double-quoted value (Hydra's other quoting, as hand-written recipes use it) is read the same way with ``"``."""
    if len(v) < 2 or v[0] not in "'\"" or v[-1] != v[0]:
        return None
    q = v[0]
    s = v[1:-1]
    out: list[str] = []
    i = 0
    while i < len(s):
        if s[i] == "\\":
            j = i
            while j < len(s) and s[j] == "\\":
                j += 1
            run = j - i
            if j == len(s):
                out.append("\\" * (run // 2))
            elif s[j] == q or s.startswith("${", j):
                out.append("\\" * (run // 2))
                if run % 2:
                    out.append(s[j])
                    j += 1
            else:
                out.append("\\" * run)
            i = j
            continue
        out.append(s[i])
        i += 1
    return "".join(out)


def hydra_value(key: str, v: Any) -> str:
    """A card value as a Hydra override value."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (int, float)):
        return str(finite(key, v))
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(hydra_value(key, x) for x in v) + "]"
    if v is None:
        return "null"
    return hydra_string(str(v))


def comment_text(s: str) -> str:
    """``s`` for a one-line comment in any target language: non-ASCII and control characters escaped."""
    return ascii(s)[1:-1]


def _backslashes_before(out: list[str]) -> int:
    """How many backslash characters end ``out`` (the run an OmegaConf ``${`` escape doubles or halves)."""
    j = len(out)
    while j > 0 and out[j - 1] == "\\":
        j -= 1
    return len(out) - j


def omegaconf_escape(s: str) -> str:
    """A string an OmegaConf-loaded YAML value (NeMo RL, verl files) reads back as exactly ``s``: every ``${`` escaped
    as ``\\${``, the backslashes right before it doubled (OmegaConf's grammar treats them as escapes only there)."""
    out: list[str] = []
    i = 0
    while i < len(s):
        if s.startswith("${", i):
            out.extend("\\" * _backslashes_before(out))
            out.append("\\${")
            i += 2
            continue
        out.append(s[i])
        i += 1
    return "".join(out)


def omegaconf_unescape(s: str) -> str | None:
    """The inverse of ``omegaconf_escape``; None when ``s`` holds an interpolation (an unescaped ``${``)."""
    out: list[str] = []
    i = 0
    while i < len(s):
        if s.startswith("${", i):
            run = _backslashes_before(out)
            if run % 2 == 0:
                return None
            del out[len(out) - run:]
            out.extend("\\" * (run // 2))
            out.append("${")
            i += 2
            continue
        out.append(s[i])
        i += 1
    return "".join(out)
