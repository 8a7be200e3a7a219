"""Assemble a plan from a run card: resolve the model and GPU, compute every term, walk the phases.

Pure: no torch, no I/O beyond reading catalog data files. The modules, each used only through its
public names:

- ``result``: the typed results (``PhaseResult``, ``GroupPlan``, ``Plan``);
- ``resolve``: a card into specs (model, GPU, what is trained, price);
- ``terms``: the per-GPU byte terms of one step (``step_terms``);
- ``overheads``: allocator and device overheads, the reserved high-water mark (``phase_results``);
- ``walk``: the phases of SFT/RM/DPO and of PPO/GRPO;
- ``time``: the step-time hook (``step_time_of``);
- ``rl_time``: one PPO/GRPO step assembled from its phases (``rl_step_time``), each phase in its own module:
  ``rl_common`` (the step's lengths, the prompts generated per step, the engine's bf16 weights, the phase
  record), ``rl_batches`` (packing and micro-batches), ``rl_generation`` (generation, reward), ``rl_passes``
  (log-prob passes, updates), ``rl_controller`` (verl's and NeMo RL's single-controller transfers),
  ``rl_sync`` (weight sync, sleep/wake) and ``rl_offload`` (the trainer's state moves to the host, the
  reference swap);
- ``assumptions``: what every plan states it assumed.
"""

from __future__ import annotations

from trainfit.memory.lora import lora_trainable_params
from trainfit.memory.params import param_breakdown
from trainfit.memory.weights import count_scale, total_params
from trainfit.plan.assumptions import assumptions_of
from trainfit.plan.overheads import OUTSIDE_ALLOCATOR, PAGEABLE, phase_results
from trainfit.plan.resolve import (card_with, gpu_of, method_model_spec, model_spec_of, price_of, trainable_spec,
                                  transformers_v4_experts)
from trainfit.plan.result import GroupPlan, PhaseResult, Plan
from trainfit.plan.terms import HOST_BYTES_PER_PROCESS, lora_tensors, step_terms
from trainfit.plan.time import step_time_of
from trainfit.plan.walk import dpo_logits, walk_rl, walk_sft_like
from trainfit.spec.card import RunCard
from trainfit.spec.enums import (
    Attention, ExpertAdapters, KbitPrepare, Method, MoeExpertMlp, MoeExperts, MoeRouterLoad, Scope, Strategy,
)

__all__ = [
    "HOST_BYTES_PER_PROCESS", "OUTSIDE_ALLOCATOR", "PAGEABLE", "GroupPlan", "PhaseResult", "Plan",
    "assumptions_of", "card_with", "check_model_options", "dense_model_refusal", "dpo_logits", "gpu_of",
    "lora_tensors", "make_plan", "model_spec_of",
    "phase_results", "price_of", "step_terms", "step_time_of", "trainable_spec",
]


SLIDING_WINDOW_FAMILIES = frozenset({"phi3", "gemma3_text", "mistral", "mixtral"})
"""Families whose windowed layers (``ModelSpec.sliding_layers``) take transformers' sliding-window mask
(``memory.attention.WINDOW_MASK_FAMILIES``): Phi-3, Mistral and Mixtral on every layer, Gemma-3 on its local ones.
Below the window every layer runs plain causal attention (transformers v5.24.0 masking_utils.py
``_ignore_causal_mask_sdpa`` l.286-287 lets the mask go while ``kv_length < local_attention_size``). From the window
on they are planned by kernel: SDPA saves a float mask and repeated k/v per windowed layer
(``memory.attention.sdpa_window_masked``) and runs every key block (``compute.attention_time``); eager builds its
masks at any length (``memory.attention.eager_mask_bytes``); flash passes ``window_size`` and skips the key tiles
before the window (``compute.attention_time.windowed_attention_keys``)."""


def sliding_window_refusal(card: RunCard, spec: ModelSpec) -> str | None:
    """Why a plan of a model with sliding-window layers (``SLIDING_WINDOW_FAMILIES``) is refused, or None, naming the
    field that set the length. What remains refused: context parallelism once the sequence reaches the window. torch's
    ring attention runs ``is_causal`` blocks only and takes no mask (torch/distributed/tensor/experimental/_attention.py
    ``_templated_ring_attention``), and Ulysses splits heads around a kernel call whose windowed mask over the gathered
    sequence trainfit does not model."""
    if spec.sliding_window is None or spec.family not in SLIDING_WINDOW_FAMILIES or not spec.sliding_layers:
        return None
    if card.parallel.context_parallel <= 1:
        return None
    window = spec.sliding_window
    virtual = (card.prompt_tuning.num_virtual_tokens or 0) if card.scope is Scope.PROMPT_TUNING else 0
    if card.method in (Method.PPO, Method.GRPO):
        rollout = card.rollout.prompt_len + card.rollout.response_len
        if rollout >= window:
            return (f"rollout.prompt_len + rollout.response_len: {rollout} tokens reach {spec.name}'s sliding_window"
                    f" {window} with parallel.context_parallel {card.parallel.context_parallel}: a windowed mask"
                    f" split over context-parallel ranks is not modelled; allowed: a sum up to {window - 1}, or"
                    " context_parallel 1")
    if card.batch.seq_len + virtual >= window:
        extra = f" with {virtual} virtual tokens (prompt_tuning.num_virtual_tokens)" if virtual else ""
        return (f"batch.seq_len: {card.batch.seq_len} tokens{extra} reach {spec.name}'s sliding_window {window} with"
                f" parallel.context_parallel {card.parallel.context_parallel}: a windowed mask split over"
                f" context-parallel ranks is not modelled; allowed: up to {window - 1 - virtual}, or"
                " context_parallel 1")
    return None


def sliding_window_note(card: RunCard, spec: ModelSpec) -> str | None:
    """The plan's line for a card whose rows reach the sliding window (``SLIDING_WINDOW_FAMILIES``), or None: what
    the card's attention does there, and the transformers releases that path was read at."""
    if spec.sliding_window is None or spec.family not in SLIDING_WINDOW_FAMILIES or not spec.sliding_layers:
        return None
    from trainfit.memory.attention import runs_eager
    from trainfit.plan.time import _model_seq_len

    seq = _model_seq_len(card)
    if card.method in (Method.PPO, Method.GRPO):
        seq = card.rollout.prompt_len + card.rollout.response_len
    window = spec.sliding_window
    if seq < window:
        return None
    n = len(spec.sliding_layers)
    if runs_eager(spec.family, card.attention):
        how = "eager attention masks every score, as below the window"
    elif card.attention is Attention.FLASH:
        how = (f"flash attention runs window_size ({window - 1}, {window - 1}) on them, skipping the key tiles before"
               " the window")
    else:
        how = ("SDPA takes transformers' materialised window mask (masking_utils, transformers 4.53 on): each such"
               " layer saves a float (b, 1, s, s) copy of it (and, with grouped-query heads, k/v repeated to every"
               " head), and its kernel runs every key block")
    return f"sliding window: {seq} tokens reach {spec.name}'s sliding_window {window} on {n} layers; {how}"


def _arch_refusals(card: RunCard, spec: ModelSpec) -> None:
    """CardError where the family's layer model covers full training only, or fused attention kernels only
    (``memory.arch_activations``; imported only for a card that could be refused: it is a large module)."""
    from trainfit.errors import CardError
    from trainfit.memory.arch_activations import FULL_ONLY_FAMILIES, SDPA_ONLY_FAMILIES

    if spec.family in FULL_ONLY_FAMILIES and card.scope.value != "full":
        raise CardError(f"scope: {card.scope.value} is not planned for {spec.family} models (their fused projections"
                        " have no LoRA/PEFT target names in trainfit yet); allowed: full")
    if spec.family in SDPA_ONLY_FAMILIES and card.attention.value == "eager":
        raise CardError(f"attention: eager is not planned for {spec.family} models (no measured eager layer model);"
                        " allowed: sdpa, flash")


def bf16_layers_refusal(card: RunCard, spec: ModelSpec) -> str | None:
    """One line when ``precision.bf16_first_layers`` + ``bf16_last_layers`` exceed the model's decoder layers (the
    quantised recipe would run no layer quantised and the bf16 counts name layers the model lacks); else None."""
    first, last = card.precision.bf16_first_layers, card.precision.bf16_last_layers
    if first + last <= spec.num_layers:
        return None
    return (f"precision.bf16_first_layers ({first}) + precision.bf16_last_layers ({last}) exceed {spec.name}'s"
            f" {spec.num_layers} decoder layers")


def dense_model_refusal(card: RunCard, spec: ModelSpec) -> str | None:
    """One line when the card sets an MoE-only option (``parallel.moe_launch``, ``parallel.moe_load_balancing``,
    ``parallel.moe_router_load`` balanced, ``lora.expert_adapters`` other than merged, ``parallel.moe_experts: loop_v5``, ``parallel.moe_experts_hit``) and
    ``spec`` is dense, or ``loop_v5`` on gpt-oss, or ``parallel.moe_expert_mlp: te_ops`` on experts whose activation
    Transformer Engine's op fuser does not fuse; else None. It depends on the model alone, so no searched knob can
    lift it."""
    if spec.moe is not None and spec.family == "gpt_oss" and card.parallel.moe_experts is MoeExperts.LOOP_V5:
        # transformers 5.24.0 models/gpt_oss/modeling_gpt_oss.py GptOssExperts.forward (l.90-116): its own eager loop,
        # with the transposed weights, each expert's bias adds and the clamped gate (_apply_gate) per hit expert,
        # not the loop expert_loop.LOOP_V5_* counts
        return ("parallel.moe_experts: loop_v5 is transformers v5's eager loop of the stacked Qwen / Mixtral-style"
                f" experts; {spec.name}'s gpt-oss experts run their own loop, not modelled; allowed for it: grouped,"
                " grouped_streams, grouped_padded")
    if (spec.moe is not None and card.parallel.moe_expert_mlp is MoeExpertMlp.TE_OPS
            and (spec.hidden_act, spec.mlp_gated) not in (("silu", True), ("relu2", False))):
        # TEGroupedMLP._is_fused_impl_supported fuses SwiGLU, quick GEGLU (gpt-oss's clamped GLU) or weighted squared
        # ReLU experts only, and the constructor asserts it (NVIDIA/Megatron-LM megatron/core/transformer/moe/experts.py
        # l.269-272, l.340-372 @ba7b5ebce12af60627a80985792a1449ce45f46c, core_v0.18.0)
        act = f"{'gated ' if spec.mlp_gated else ''}{spec.hidden_act}"
        return (f"parallel.moe_expert_mlp: 'te_ops' fuses SwiGLU, gpt-oss's quick GEGLU or squared-ReLU experts;"
                f" {spec.name}'s are {act}; allowed for it: unfused")
    if spec.moe is not None:
        return None
    if card.parallel.moe_experts is MoeExperts.LOOP_V5:
        return (f"parallel.moe_experts: loop_v5 prices transformers v5's eager loop of routed experts; {spec.name} is"
                " dense; allowed for it: grouped")
    if card.parallel.moe_experts_hit is not None:
        return (f"parallel.moe_experts_hit: {card.parallel.moe_experts_hit:g} is a share of routed experts;"
                f" {spec.name} is dense; allowed for it: null")
    if card.parallel.moe_launch is not None:
        return (f"parallel.moe_launch: '{card.parallel.moe_launch.value}' describes an MoE router and dispatcher;"
                f" {spec.name} is dense; allowed for it: null")
    if card.parallel.moe_load_balancing is not None:
        return (f"parallel.moe_load_balancing: '{card.parallel.moe_load_balancing.value}' describes an MoE router;"
                f" {spec.name} is dense; allowed for it: null")
    if card.parallel.moe_expert_mlp is not None:
        return (f"parallel.moe_expert_mlp: '{card.parallel.moe_expert_mlp.value}' describes Megatron-Core's routed"
                f" experts; {spec.name} is dense; allowed for it: null")
    if card.lora.expert_adapters is not ExpertAdapters.MERGED:
        return (f"lora.expert_adapters: '{card.lora.expert_adapters.value}' prices the adapters of routed experts;"
                f" {spec.name} is dense; allowed for it: merged")
    if card.parallel.moe_router_load is not MoeRouterLoad.TRAINED:
        return (f"parallel.moe_router_load: '{card.parallel.moe_router_load.value}' forces an MoE router's balance;"
                f" {spec.name} is dense; allowed for it: trained")
    return None


def kbit_fused_experts_refusal(card: RunCard, spec: ModelSpec) -> str | None:
    """One line when a QLoRA card runs the kbit recipe (``lora.prepare_kbit`` peft / trl) on transformers 5's fused
    experts (``parallel.moe_experts`` any layout but transformers < 5's loops, ``MoeExperts.is_loop``: grouped,
    grouped_streams, grouped_padded, loop_v5, every one a 3-D stack) of a MoE model; else None. The recipe casts every
    parameter that is not ``Params4bit`` to fp32, the 3-D expert stacks included (built on CPU by
    benchmarks/qlora_moe_experts_cpu.py), and transformers feeds ``grouped_mm`` the weight's dtype (transformers
    5.24.0 wheel, integrations/moe.py ``_grouped_mm`` l.374-383: not autocast-enabled, the input cast to
    ``weight.dtype``), so the experts take torch's per-group fallback, one fp32 ``mm`` per expert after a device to
    host copy of the offsets, not the bf16 grouped kernel (pytorch/pytorch aten/src/ATen/native/cuda/GroupedBlas.cpp
    ``_grouped_mm_cuda`` @00d4eaf9327928137f4cc437b17e5cf54623565f: the fast path only for bf16 operands and
    output); under ``loop_v5`` each expert's ``linear`` on an fp32 slice is cast to bf16 by autocast on every call.
    grouped_streams (``grouped_gemm.ops.gmm``) and grouped_padded (torchtitan's padded ``torch._grouped_mm``) hold the
    same 3-D stacks, which the recipe casts alike, while memory plans them fp32 and the step time prices bf16 grouped
    GEMMs. The step time prices none of it. transformers < 5's loops (their experts ``Linear4bit``) are not concerned."""
    if (spec.moe is None or card.scope is not Scope.QLORA or card.lora.prepare_kbit is KbitPrepare.NONE
            or card.parallel.moe_experts.is_loop):
        return None
    return (f"lora.prepare_kbit: {card.lora.prepare_kbit.value} casts {spec.name}'s fused 3-D expert stacks to fp32,"
            f" whose expert GEMMs are not modelled; allowed with parallel.moe_experts"
            f" {card.parallel.moe_experts.value}: none")


def check_model_options(card: RunCard) -> None:
    """CardError (``dense_model_refusal``'s line) for a card whose MoE-only options meet a dense model, for the
    commands that do not plan the card itself (``fit`` before its search, ``export``). The model is resolved only
    when the card sets such an option."""
    if (card.parallel.moe_launch is None and card.parallel.moe_load_balancing is None
            and card.parallel.moe_expert_mlp is None
            and card.lora.expert_adapters is ExpertAdapters.MERGED
            and card.parallel.moe_experts is not MoeExperts.LOOP_V5 and card.parallel.moe_experts_hit is None
            and card.parallel.moe_router_load is MoeRouterLoad.TRAINED):
        return
    if (why := dense_model_refusal(card, model_spec_of(card))) is not None:
        from trainfit.errors import CardError

        raise CardError(why)


def plan_refusals(card: RunCard, spec: ModelSpec) -> None:
    """Raises the ``CardError`` ``make_plan`` refuses ``card`` with before it walks the memory (a model
    it cannot plan, MoE-only settings on a dense model, layers or recompute settings it does not
    model, a trainer offload the pinned framework does not run); returns None otherwise."""
    if spec.unplanned:
        from trainfit.errors import CardError

        raise CardError(f"model: {spec.name} cannot be planned: {spec.unplanned}")
    if (why := dense_model_refusal(card, spec)) is not None:
        from trainfit.errors import CardError

        raise CardError(why)
    if (why := sliding_window_refusal(card, spec)) is not None:
        from trainfit.errors import CardError

        raise CardError(why)
    if (why := kbit_fused_experts_refusal(card, spec)) is not None:
        from trainfit.errors import CardError

        raise CardError(why)
    if card.scope is not Scope.FULL or card.attention is Attention.EAGER:  # else neither refusal applies
        _arch_refusals(card, spec)
    if (why := bf16_layers_refusal(card, spec)) is not None:
        from trainfit.errors import CardError

        raise CardError(why)
    from trainfit.plan.ranks import megatron_recompute_refusal

    if (why := megatron_recompute_refusal(card, spec)) is not None:
        from trainfit.errors import CardError

        raise CardError(why)
    from trainfit.plan.time import fsdp_optimizer_offload_refusal

    if (why := fsdp_optimizer_offload_refusal(card)) is not None:
        from trainfit.errors import CardError

        raise CardError(why)
    if card.preset != "verl":  # the refusal below is verl's only: the RL offload modules stay unimported
        return
    from trainfit.plan.rl_offload import verl_megatron_offload_refusal

    if (why := verl_megatron_offload_refusal(card)) is not None:
        from trainfit.errors import CardError

        raise CardError(why)


def make_plan(card: RunCard, *, calibration=None) -> Plan:
    """The plan for a validated card. ``calibration``: a ``trainfit.calibration.Calibration`` whose
    measured rates replace the published defaults of the time model for its GPU kinds."""
    spec = model_spec_of(card)
    plan_refusals(card, spec)
    card, v4_note = transformers_v4_experts(card, spec)
    # the model the method trains (a reward model's score head for lm_head): memory, time, parameter counts,
    # checkpoint sizes and host RAM all read this one spec (resolve.method_model_spec)
    spec = method_model_spec(card, spec)
    gpu = gpu_of(card)
    if card.method in (Method.PPO, Method.GRPO):
        sharding, groups, host, notes, rollout, ranks = walk_rl(card, spec, gpu)
    else:
        sharding, groups, host, notes, rollout, ranks = walk_sft_like(card, spec, gpu)
        from trainfit.plan.terms import torchao_nf4_load

        groups, notes = torchao_nf4_load(card, spec, groups, notes)
    if (line := sliding_window_note(card, spec)) is not None:
        notes = [*notes, line]
    if v4_note is not None:
        notes = [*notes, v4_note]
    worst = max(groups, key=lambda g: max(p.device for p in g.phases))
    phases = worst.phases
    spill = max((p.components.get("paged_optimizer_states", 0.0) - p.paged_resident for p in phases), default=0.0)
    if spill > 0:
        host["paged_optimizer_spill"] = spill * min(card.hardware.gpus_per_node, sharding.world_size)
    pb = param_breakdown(spec)
    trainable = trainable_spec(card)
    n_train = (
        round(lora_trainable_params(spec, trainable.lora) * count_scale(spec)) if trainable.lora else total_params(spec)
    )
    from trainfit.plan.terms import variant_trained

    if (variant := variant_trained(card, spec)) is not None:  # DoRA, (IA)^3, prompt tuning
        n_train = round(variant[0])
    if trainable.lora and card.lora.modules_to_save:  # trained in full beside the adapter
        from trainfit.memory.lora import saved_module_params

        n_train += round(sum(saved_module_params(spec, tuple(card.lora.modules_to_save))) * count_scale(spec))
    warnings = []
    if (card.parallel.strategy is Strategy.SINGLE and card.world_size > card.parallel.model_parallel
            and card.method not in (Method.PPO, Method.GRPO)):
        used = card.parallel.model_parallel
        warnings.append(f"strategy 'single' uses {'one GPU' if used == 1 else f'{used} GPUs (one model replica)'};"
                        f" the other {card.world_size - used} are idle")
    if rollout is not None and rollout.preempts:
        warnings.append(f"rollout engine will preempt: {rollout.reason}")
    if card.method not in (Method.PPO, Method.GRPO) and "rollout" in card.model_fields_set and not card.preset:
        # a preset fills rollout for every method; a card's own rollout section on sft/rm/dpo is a mistake to name
        warnings.append(f"rollout: read for methods ppo and grpo only; method {card.method.value} ignores it")
    if card.method in (Method.SFT, Method.RM) and "roles" in card.model_fields_set and not card.preset:
        # roles (reference, reward model, critic, KL) are read for dpo, ppo and grpo only (methods.roles.roles_of)
        warnings.append(f"roles: read for methods dpo, ppo and grpo only; method {card.method.value} ignores it")
    if card.method in (Method.PPO, Method.GRPO):
        from trainfit.methods.roles import unloaded_reference_warning

        if (line := unloaded_reference_warning(card)) is not None:  # a reference the user set, skipped at kl 0
            warnings.append(line)
    from trainfit.plan.assumptions import context_extension_line, currency_line, unread_deepspeed_line, unread_seq_len_line

    price = price_of(card)
    for line in (unread_seq_len_line(card), unread_deepspeed_line(card),
                 currency_line(card, None if price is None else price.currency)):
        if line is not None:
            warnings.append(line)
    if (line := context_extension_line(card, spec)) is not None:
        notes = [*notes, line]
    from trainfit.methods.roles import roles_of

    rates = None
    time_notes: list[str] = []
    if calibration is not None:
        from trainfit.calibration import rates_for

        rates = rates_for(gpu, calibration)
    timing = step_time_of(card, spec, gpu, sharding, rollout, rates=rates, paged_spill_bytes=max(0.0, spill))
    if timing is not None and timing.total_s != timing.total_s:  # NaN: the time model refused, say why
        time_notes += [f"time: {a}" for a in timing.assumptions]
        timing = None
    elif timing is not None:
        time_notes += [f"time: {a}" for a in timing.assumptions]
    else:
        if not any(n.startswith("time: not estimated") for n in time_notes):
            time_notes.append(f"time: not estimated: the catalog has no bf16 dense rate or memory bandwidth for {gpu.id}")
    use = None
    if calibration is not None:  # what of the file this plan applies, said first among the time notes
        from trainfit.calibration.apply import applied_values, assumption_line, calibration_use

        applied = applied_values(calibration, gpu_id=gpu.id, card=card, phases=phases, timing=timing)
        time_notes.insert(0, assumption_line(calibration, gpu.id, applied=applied,
                                                 engine=card.rollout.engine if card.rollout else None))
        use = calibration_use(calibration, applied)
    plan = Plan(
        card=card,
        spec=spec,
        gpu=gpu,
        sharding=sharding,
        params_total=total_params(spec),
        params_trainable=n_train,
        params_without_embedding=round(pb.without_embeddings * count_scale(spec)),
        phases=tuple(phases),
        host_ram=host,
        assumptions=tuple(assumptions_of(card, spec, sharding, replayed=any(p.overhead.replayed for p in phases))
                          + notes + time_notes),
        warnings=tuple(warnings),
        groups=groups,
        worst_group=worst.name,
        roles=tuple(roles_of(card, spec.name)) if card.method is not Method.SFT else (),
        rollout=rollout,
        step_seconds=None if timing is None or timing.unavailable else timing.total_s,
        step_unavailable=None if timing is None else timing.unavailable,
        tokens_per_step=None if timing is None else timing.tokens_per_step,
        time_parts={} if timing is None else timing.parts,
        time=timing,
        price=price,
        worst_rank=None if ranks is None else ranks.coords,
        stage_phases=() if ranks is None else ranks.stage_phases,
        calibration=use,
    )
    if calibration is None:
        return plan
    from trainfit.calibration import apply_memory_calibration  # the calibration's memory constants

    return apply_memory_calibration(plan, calibration)
