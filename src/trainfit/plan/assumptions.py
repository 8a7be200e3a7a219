"""The assumptions every plan states, from the card, the model and the sharding."""

from __future__ import annotations

from trainfit.memory.sharding import Sharding
from trainfit.plan.terms import HOST_BYTES_PER_PROCESS
from trainfit.spec.card import RunCard
from trainfit.spec.enums import ComputeDtype, Method, Optimizer, RolloutEngine, Scope
from trainfit.spec.model import ModelSpec
from trainfit.units import BYTES_PER_DTYPE, GIB, MIB


def optimizer_line(card: RunCard) -> str:
    """The assumption naming the optimizer the plan prices (``precision.optimizer``; its state bytes are
    ``memory.optimizer.optimizer_state_bytes``): the AdamW implementation only for torch's AdamW, whose step
    temporaries depend on it (``memory.optimizer.step_temporary_bytes``)."""
    prec = card.precision
    states = f"states in {prec.optimizer_states.value}"
    if prec.optimizer is Optimizer.ADAMW:
        return f"torch AdamW impl '{prec.optimizer_impl.value}'; {states}"
    return {
        Optimizer.SGD: "torch SGD without momentum (optimizer sgd): no optimizer state",
        Optimizer.ADAFACTOR: "Adafactor (optimizer adafactor): factored second moment (one row and one column vector a"
                             f" matrix, full for vectors), no first moment; {states}",
        Optimizer.ADAMW_8BIT: "bitsandbytes 8-bit AdamW (optimizer adamw_8bit): two 8-bit states a parameter with"
                              " their block-wise fp32 scales",
        Optimizer.PAGED_ADAMW: "bitsandbytes paged 32-bit AdamW (optimizer paged_adamw): two fp32 states a parameter"
                               " in paged memory",
        Optimizer.PAGED_ADAMW_8BIT: "bitsandbytes paged 8-bit AdamW (optimizer paged_adamw_8bit): two 8-bit states a"
                                    " parameter with their block-wise fp32 scales, in paged memory",
    }[prec.optimizer]


def assumptions_of(card: RunCard, spec: ModelSpec, sharding: Sharding, *, replayed: bool = False) -> list[str]:
    from trainfit.memory import overhead as oh

    allocator = card.hardware.allocator.value
    if replayed:
        reserved = ("reserved = the step's highest allocated + what the caching allocator holds beyond it, from"
                    " replaying the step's allocation sequence (generated from these terms) through a model of"
                    f" PyTorch's CUDA caching allocator ({allocator}); every phase of the repeated step shows"
                    " the step's highest reserved")
    else:
        reserved = (f"reserved = allocated + allocator rounding (half a {oh.LARGE_SEGMENT_BYTES // MIB} MiB granule per"
                    f" large tensor) + {oh.FRAGMENTATION_OF_TRANSIENTS:.0%} of the step's largest transient"
                    " (fragmentation, fitted on H200 measurements with the default allocator; the step's allocation"
                    " sequence is not generated for this layout); every phase of the repeated step shows the step's"
                    " highest reserved")
    out = [
        "steady state after the first step: optimizer states exist; zero_grad(set_to_none=True) frees gradients",
        optimizer_line(card),
        "the training loop keeps only the loss (transformers Trainer/TRL), so full bf16 logits are freed after forward",
        "allocated includes the cuBLAS + cuBLASLt workspaces (64 MiB on compute capability >= 9.0, 16 MiB before)",
        reserved,
        f"device = reserved + CUDA context {oh.CUDA_CONTEXT_BYTES // MIB} MiB (measured, H200)"
        + (f" + NCCL communicator {oh.NCCL_COMMUNICATOR_BYTES // MIB} MiB and buffers" if sharding.world_size > 1 else ""),
        f"host RAM: {HOST_BYTES_PER_PROCESS / GIB:.0f} GiB per training process + rank 0 loading the checkpoint",
        "GiB = 2^30 bytes, GB = 10^9 bytes",
    ]
    if card.preset:
        from trainfit.methods.presets import preset_source

        out.append(f"preset {card.preset}: {preset_source(card.preset, rl=card.method in (Method.PPO, Method.GRPO))}")
    if card.method in (Method.PPO, Method.GRPO):
        out.append(
            "RL losses use per-token log-probs (selective log-softmax); their logits are modelled with the"
            " cross-entropy mechanism of the SFT step (same order: 10-12 B per logit at the loss)"
        )
        ro = card.rollout
        if ro.weight_transport.value != "framework" and ro.engine is not RolloutEngine.DEEPSPEED_HYBRID:
            from trainfit.compute.sync import CHECKPOINT_ENGINE_SOURCE, NRL_RESHARD_SOURCE

            out.append(
                "weight sync: rollout.weight_transport nccl_reshard, NeMo RL's NCCL reshard refit: the FFN weights"
                " shard to shard (each training rank sends its local shard, each vLLM rank receives its own), the"
                " rest by the packed broadcast after them (compute.sync.nccl_reshard_seconds; "
                f"{NRL_RESHARD_SOURCE})" if ro.weight_transport.value == "nccl_reshard" else
                "weight sync: rollout.weight_transport checkpoint_engine, MoonshotAI checkpoint-engine's Broadcast"
                " update: the checkpoint held in pinned host memory over the engine GPUs, copied to the GPU in"
                " buckets, broadcast to every engine rank, loaded by vLLM from a CUDA-IPC buffer beside the next"
                f" broadcast (compute.sync.checkpoint_engine_seconds; {CHECKPOINT_ENGINE_SOURCE})")
        elif not card.preset and ro.engine is not RolloutEngine.DEEPSPEED_HYBRID:
            # plan.rl_sync.sync_phase plans the sync of ``card.preset or "trl"``: say so rather than hide it
            out.append("weight sync: no preset names the RL framework, so TRL's is planned (colocated: vLLM in the"
                       " trainer's process, load_weights per parameter; split: one HTTP request per parameter to"
                       " trl vllm-serve, compute.sync); set preset to verl, openrlhf, nemo-rl, miles or slime for"
                       " that framework's sync")
        from trainfit.plan.rl_sync import PEFT_MERGE_ASSUMPTION, peft_merges_for_sync

        if ro.weight_transport.value == "framework" and peft_merges_for_sync(card):
            out.append(PEFT_MERGE_ASSUMPTION)
        if bnb_4bit_generates(card):
            from trainfit.plan.rl_generation import BNB_UNPINNED_ASSUMPTION

            out.append(BNB_UNPINNED_ASSUMPTION)
        if ro.prompt_len_mean is None:
            out.append(f"prompt tokens: every prompt at rollout.prompt_len ({ro.prompt_len}, the maximum) for time as"
                       " for memory, an upper bound where prompts are shorter; set rollout.prompt_len_mean (the mean"
                       " tokenized prompt with its template)")
        else:
            out.append(f"prompt tokens: time uses the mean, rollout.prompt_len_mean {ro.prompt_len_mean} (prefill,"
                       " decode context, the log-prob and update passes of frameworks that remove padding); memory,"
                       f" KV capacity and padded passes use the maximum, rollout.prompt_len {ro.prompt_len}")
    if card.precision.compute is ComputeDtype.FP4:
        from trainfit.compute.rates import FP4_MATMUL_ASSUMPTION

        out.append(FP4_MATMUL_ASSUMPTION)
    experts_line = unquantized_experts_line(card, spec)
    if experts_line:
        out.append(experts_line)
    if spec.num_linear_attention_layers:
        from trainfit.memory.activations import DELTANET_KERNELS

        out.append(DELTANET_KERNELS)
    if spec.assumed_shape:
        out.append(f"ASSUMED SHAPE: {spec.note}")
    if not spec.verified:
        out.append(f"UNVERIFIED MODEL CONFIG: {spec.name}: {spec.note}")
    return out


def bnb_4bit_generates(card: RunCard) -> bool:
    """True when an RL card generates through bitsandbytes 4-bit linears: a QLoRA base (``lora.dequant``
    bitsandbytes) run by transformers' ``generate`` (``rollout.engine: hf``) or by Unsloth's vLLM engine on the
    trainer's weights (``methods.unsloth.engine_shares_trainer_weights``); ``plan.rl_generation``'s
    ``BNB_UNPINNED_ASSUMPTION`` then applies."""
    from trainfit.methods.unsloth import engine_shares_trainer_weights
    from trainfit.spec.enums import QloraDequant, Scope

    return (card.scope is Scope.QLORA and card.lora.dequant is QloraDequant.BITSANDBYTES
            and (card.rollout.engine is RolloutEngine.HF or engine_shares_trainer_weights(card.preset)))


def unquantized_experts_line(card: RunCard, spec: ModelSpec) -> str | None:
    """The assumption a quantized-base MoE plan states: how many routed-expert parameters stay in the compute dtype
    and why (``plan.terms.unquantized_expert_params``), and, where transformers < 5's per-expert loop would quantize
    them (``plan.terms.loop_would_quantize_experts``), that ``parallel.moe_experts`` loop plans that release (its
    experts are per-expert ``nn.Linear`` modules: transformers 4.48.1 models/mixtral/modeling_mixtral.py l.73-75,
    turned into ``Linear4bit`` by integrations/bitsandbytes.py l.168, l.202). None otherwise."""
    from trainfit.memory.weights import base_weight_bytes
    from trainfit.plan.resolve import model_dtype
    from trainfit.plan.terms import loop_would_quantize_experts, unquantized_expert_params

    kept = unquantized_expert_params(card, spec)
    if not kept:
        return None
    dtype = model_dtype(card)
    line = (f"weights {card.weights_dtype.value}: the routed experts' {kept / 1e9:.2f} B parameters stay"
            f" {dtype.value} ({kept * BYTES_PER_DTYPE[dtype.value] / GIB:.2f} GiB before any upcast): transformers 5"
            " stores them as fused 3-D parameters, not nn.Linear, and its bitsandbytes loader replaces nn.Linear"
            " modules only (integrations/bitsandbytes.py replace_with_bnb_linear, transformers 5.24.0 l.184-228)")
    if loop_would_quantize_experts(card):
        dq = card.lora.double_quant
        kw = {"weights": card.weights_dtype, "compute": dtype, "double_quant": dq}
        looped = base_weight_bytes(spec, quantized_experts=True, **kw)
        line += (f"; on transformers < 5 (4.51-4.57: a loop of per-expert nn.Linear modules, which it quantizes)"
                 f" set parallel.moe_experts loop: base weights {looped / GIB:.2f} GiB instead of"
                 f" {base_weight_bytes(spec, quantized_experts=False, **kw) / GIB:.2f} GiB")
    if card.scope is Scope.QLORA:
        line += ("; axolotl quantizes the stacks to NF4 while loading when asked (lora.quantize_moe_experts true,"
                 " plan.terms.nf4_expert_stacks)")
    return line


def deepspeed_read(card: RunCard) -> bool:
    """Whether the plan reads the card's ``deepspeed`` section: a ZeRO strategy run by DeepSpeed. Without model
    parallelism zero1, zero2 and zero3 are DeepSpeed's (``plan.terms`` sizes their buffers from
    ``plan.terms.zero_config_of``); with it, as ``plan.ranks._deepspeed_zero`` reads the card (zero1 with tensor,
    pipeline or expert parallel, or ring context parallel, is Megatron-Core's distributed optimizer)."""
    from trainfit.plan.ranks import _deepspeed_zero  # the one place the card's ZeRO is read as DeepSpeed's
    from trainfit.spec.enums import ZERO_STAGES

    par = card.parallel
    if par.strategy not in ZERO_STAGES:
        return False
    if par.tensor_parallel == par.pipeline_parallel == par.context_parallel == par.expert_parallel == 1:
        return True
    return _deepspeed_zero(card)


def unread_seq_len_line(card: RunCard) -> str | None:
    """The plan's warning when a PPO / GRPO card states a ``batch.seq_len`` other than the rollout's: the RL step's
    sequences are ``rollout.prompt_len + rollout.response_len`` (``methods.rl``, the actor card of
    ``plan.walk.walk_rl`` replaces ``batch.seq_len`` with them, or with the packed row under
    ``rollout.max_tokens_per_micro_batch``), so the card's value is not read; None otherwise (a value equal to the
    rollout's length contradicts nothing). The embedded default card states 2048 (its SFT case), so ``plan --method
    grpo`` on it names that value too."""
    if card.method not in (Method.PPO, Method.GRPO) or "seq_len" not in card.batch.model_fields_set:
        return None
    ro = card.rollout
    if card.batch.seq_len == ro.prompt_len + ro.response_len:
        return None
    return (f"batch.seq_len: {card.batch.seq_len} is not read for method {card.method.value}; a sequence is"
            f" rollout.prompt_len + rollout.response_len = {ro.prompt_len} + {ro.response_len} ="
            f" {ro.prompt_len + ro.response_len} tokens (rollout.max_tokens_per_micro_batch packs the training rows"
            " when set); set those instead")


def unread_deepspeed_line(card: RunCard) -> str | None:
    """The plan's warning when the card sets ``deepspeed`` fields that no part of the plan reads (``deepspeed_read``
    false: ddp, fsdp, fsdp_grad_op, hsdp, single, or Megatron-Core's zero1); None otherwise. The same wording as the
    plan's ``rollout: read for methods ppo and grpo only`` warning. (``trainfit export --to deepspeed`` still writes
    the section into the config it exports for such a card: an export, not the plan.)"""
    given = sorted(card.deepspeed.model_fields_set)
    if not given or deepspeed_read(card):
        return None
    strategy = card.parallel.strategy.value
    who = (f"strategy {strategy} here (Megatron-Core's distributed optimizer, with tensor, pipeline, expert or ring"
           " context parallel)" if strategy == "zero1" else f"strategy {strategy}")
    fields = ", ".join(f"deepspeed.{k}" for k in given)
    if card.preset:
        from trainfit.methods.presets import preset

        if "deepspeed" in preset(card.preset).card:  # a DeepSpeed preset under a card that sets another strategy
            fields += f"; preset {card.preset} sets them, under the card's strategy"
    return f"deepspeed: read for strategies zero1, zero2 and zero3 on DeepSpeed only; {who} ignores it ({fields})"


def currency_line(card: RunCard, price_currency: str | None) -> str | None:
    """The plan's warning when ``hardware.currency`` converts nothing: it is the unit of ``price_per_gpu_hour``
    (the README's card reference: "required with a price"), and a plan never converts between currencies
    (``trainfit fit --fx`` does). Given with no price at all (no ``price_per_gpu_hour``, no ``price_preset``),
    or beside a ``price_preset`` priced in another currency (``price_currency``: the planned price's), it is
    named; None otherwise."""
    hw = card.hardware
    given = (hw.currency or "").strip()
    if not given:
        return None
    if hw.price_per_gpu_hour is None and not hw.price_preset:
        return (f"hardware.currency: {given} is the unit of hardware.price_per_gpu_hour, and the card gives no price"
                " (no price_per_gpu_hour, no price_preset): no cost is planned and nothing is converted (trainfit fit"
                " --fx converts between currencies)")
    if hw.price_preset and price_currency and given.upper() != price_currency.upper():
        return (f"hardware.currency: {given} is not converted to: price preset {hw.price_preset} is priced in"
                f" {price_currency}, and the plan's cost is in {price_currency} (trainfit fit --fx converts between"
                " currencies)")
    return None


def context_extension_line(card: RunCard, spec: ModelSpec) -> str | None:
    """The plan's assumption when an SFT-like card's ``batch.seq_len`` is longer than the model's context
    (``max_position_embeddings`` of its config): not refused (a longer context is trained with RoPE scaling, e.g.
    YaRN: Peng et al. 2023, arXiv:2309.00071, §3), planned at the length given, and said. PPO / GRPO cards are
    refused instead (``plan.walk.walk_rl``: the rollout engine's own limit)."""
    ctx = spec.max_position_embeddings
    if ctx is None or card.method in (Method.PPO, Method.GRPO) or card.batch.seq_len <= ctx:
        return None
    return (f"batch.seq_len {card.batch.seq_len:,} is longer than {spec.name}'s context of {ctx:,} tokens"
            " (max_position_embeddings): planned at the length given, assuming the run extends the context (RoPE"
            " scaling, e.g. YaRN), whose own cost is not planned")
