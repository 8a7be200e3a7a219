"""What the model-parallel exports share: the data-parallel size, Megatron-Core's recompute and fp8 settings.

Megatron-Core names (NVIDIA/Megatron-LM 002526d81b81f6ab534e93844f9a228709887494,
``megatron/core/transformer/transformer_config.py`` and ``megatron/core/enums.py``):

* ``recompute_granularity``: ``full`` (whole layers; with ``recompute_method: uniform`` and
  ``recompute_num_layers: 1`` every layer is checkpointed) or ``selective`` with ``recompute_modules``
  (default ``[core_attn]``: only the attention core, QK^T / softmax / dropout / PV, is recomputed).
* ``cp_comm_type``: ``p2p`` (ring attention, the default), ``all_gather``, ``a2a`` ("like DeepSpeed
  Ulysses, scatter attention heads across the CP group"), ``a2a+p2p``.
* ``fp8`` (``e4m3`` | ``hybrid``) and ``fp8_recipe`` (``Fp8Recipe``: ``delayed``, ``tensorwise``,
  ``mxfp8``, ``blockwise``). The card's ``current`` recipe is Megatron's ``tensorwise`` (TE
  ``Float8CurrentScaling``).
"""

from __future__ import annotations

from typing import Any

from trainfit.export.common import train_world
from trainfit.spec.card import RunCard
from trainfit.spec.enums import ComputeDtype, ContextParallelKind, Fp8Recipe, RecomputeModule, SelectiveCheckpointing

MEGATRON_FP8_RECIPE = {Fp8Recipe.DELAYED: "delayed", Fp8Recipe.CURRENT: "tensorwise", Fp8Recipe.BLOCKWISE: "blockwise",
                       Fp8Recipe.MXFP8: "mxfp8"}
"""card ``precision.fp8_recipe`` -> Megatron-Core ``fp8_recipe``."""
FP8_RECIPE_FROM_MEGATRON = {v: k for k, v in MEGATRON_FP8_RECIPE.items()}


def data_parallel(card: RunCard) -> int:
    """Data-parallel replicas: the training GPUs over tensor x context x pipeline."""
    return max(1, train_world(card) // card.parallel.model_parallel)


def sequences_per_step(card: RunCard) -> int:
    """Sequences per optimizer step: micro-batch x accumulation (micro-batches per step under PP) x data parallel."""
    return card.batch.micro_batch_size * card.batch.grad_accum * data_parallel(card)


def has_model_parallel(card: RunCard) -> bool:
    """Tensor, pipeline, expert or context parallelism (any kind) beyond one rank."""
    p = card.parallel
    return p.tensor_parallel > 1 or p.pipeline_parallel > 1 or p.expert_parallel > 1 or p.expert_tensor_parallel > 1 \
        or p.context_parallel > 1


def is_ulysses(card: RunCard) -> bool:
    return card.parallel.context_parallel > 1 and card.parallel.context_parallel_kind is ContextParallelKind.ULYSSES


def megatron_recompute(card: RunCard, notes: list[str], target: str) -> dict[str, Any]:
    """Megatron-Core recompute settings for the card's checkpointing ({} for none). torchtitan's per-op
    selective checkpointing has no Megatron form: exported as full recompute (less memory, more time), said."""
    p = card.parallel
    sel = p.selective_checkpointing
    if mods := p.megatron_recompute_modules:  # core_attention: [core_attn]; layernorm_moe_act, modules: their list
        return {"recompute_granularity": "selective",
                "recompute_modules": [m.value for m in RecomputeModule if m in mods]}
    if sel is SelectiveCheckpointing.OP:
        notes.append(f"parallel.selective_checkpointing op: {target}'s Megatron backend has no per-op selective"
                     " checkpointing (torchtitan's policy); exported as full recompute of every layer"
                     " (parallel.gradient_checkpointing true: less memory, more time than planned); core_attention is"
                     " Megatron's selective recompute")
    if p.gradient_checkpointing or sel is SelectiveCheckpointing.OP:
        return {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}
    return {}


def checkpointing_from_megatron(granularity: Any) -> dict[str, Any]:
    """Card ``parallel`` keys for Megatron's recompute settings (the inverse of ``megatron_recompute``; selective is
    read as core_attention, Megatron's default ``recompute_modules``)."""
    g = None if granularity in (None, "none", "null") else str(granularity)
    if g == "full":
        return {"gradient_checkpointing": True, "selective_checkpointing": "none"}
    if g == "selective":
        return {"gradient_checkpointing": False, "selective_checkpointing": "core_attention"}
    return {"gradient_checkpointing": False, "selective_checkpointing": "none"}


def megatron_fp8(card: RunCard) -> dict[str, str]:
    """``fp8`` / ``fp8_recipe`` / ``fp8_param`` (``fp4`` / ``fp4_recipe`` / ``fp4_param`` under compute fp4) for
    Megatron-Core, with ``first_last_layers_bf16`` and its layer counts where the card keeps bf16 layers
    (NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py l.673-692 @d98e8a64), or {} when the card
    does not compute in fp8 / fp4."""
    prec = card.precision
    layers = ({"first_last_layers_bf16": "True", "num_layers_at_start_in_bf16": str(prec.bf16_first_layers),
               "num_layers_at_end_in_bf16": str(prec.bf16_last_layers)}
              if prec.bf16_first_layers or prec.bf16_last_layers else {})
    if prec.compute is ComputeDtype.FP4 and prec.fp4_recipe is not None:
        # precision.fp4_params: TransformerConfig.fp4_param, "keep the parameters in fp4 precision to save memory"
        # (NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py l.683-688 @d98e8a64; --fp4-param-gather
        # sets it, megatron/training/argument_utils.py l.313)
        return {"fp4": "e2m1", "fp4_recipe": prec.fp4_recipe.value,
                **({"fp4_param": "True"} if prec.fp4_params else {}), **layers}
    if card.precision.compute is not ComputeDtype.FP8 or card.precision.fp8_recipe is None:
        return {}
    # precision.fp8_params: TransformerConfig.fp8_param, "keep the parameters in fp8 precision" (NVIDIA/Megatron-LM
    # megatron/core/transformer/transformer_config.py l.602 @d98e8a64; --fp8-param-gather sets it,
    # megatron/training/argument_utils.py l.312)
    # precision.fp8_attention: TransformerConfig.fp8_dot_product_attention, which Megatron-Core hands Transformer
    # Engine's recipe as fp8_dpa (megatron/core/fp8_utils.py l.787-790 @2a75ac12c54ba6a42b34024756820bf819a2e25f)
    return {"fp8": "e4m3", "fp8_recipe": MEGATRON_FP8_RECIPE[card.precision.fp8_recipe],
            **({"fp8_param": "True"} if card.precision.fp8_params else {}),
            **({"fp8_dot_product_attention": "True"} if card.precision.fp8_attention else {}), **layers}


def megatron_precision(compute: str, *, grad_reduce_in_fp32: bool = True) -> dict[str, str]:
    """The card ``precision`` a Megatron-Core run has: the model in its compute dtype (bf16; fp16 for fp16) with
    fp32 main parameters and fp32 Adam states (Megatron's mixed-precision optimizer; verl's ``McoreOptimizerConfig``
    ``exp_avg_dtype`` / ``exp_avg_sq_dtype``: fp32; NeMo RL ``megatron_cfg.optimizer.params_dtype: float32``), and
    the gradients of ``DistributedDataParallelConfig.grad_reduce_in_fp32``: true is the card's ``precision.grads:
    fp32`` (the fp32 main_grad buffer, reduced in fp32), false leaves ``grads`` unset (the parameters' dtype)."""
    out = {"weights": "fp16" if compute == "fp16" else "bf16", "master_weights": "fp32", "optimizer_states": "fp32"}
    if grad_reduce_in_fp32:
        out["grads"] = "fp32"
    return out


def megatron_precision_note(card: RunCard, target: str) -> str | None:
    """The note for a card whose weights, main parameters or Adam states differ from what Megatron keeps, else None
    (the gradients are written: ``megatron_grad_reduce_in_fp32``)."""
    want = megatron_precision(card.precision.compute.value, grad_reduce_in_fp32=False)
    p = card.precision
    have = {"weights": card.weights_dtype.value, "master_weights": p.master_weights.value,
            "optimizer_states": p.optimizer_states.value}
    diff = [k for k in want if have[k] != want[k]]
    if not diff:
        return None
    return (", ".join(f"precision.{k} {have[k]}" for k in diff) + f": {target}'s Megatron backend keeps the model in"
            f" {want['weights']} with fp32 main parameters and fp32 Adam states")


def megatron_grad_reduce_in_fp32(card: RunCard, target: str, notes: list[str]) -> bool:
    """Megatron-Core ``DistributedDataParallelConfig.grad_reduce_in_fp32`` for the card: ``precision.grads: fp32``
    (Megatron-LM forces it with --bf16: ``accumulate_allreduce_grads_in_fp32``, megatron/training/arguments.py
    @baf94af3). Unset or another dtype: false, the gradients in the parameters' dtype; a dtype that is not the
    parameters' is said (Megatron's buffer holds the parameters' dtype or fp32) and reads back unset."""
    g = card.precision.grads
    if g is not None and g.value != "fp32":
        notes.append(f"precision.grads {g.value}: written as grad_reduce_in_fp32 false ({target}'s Megatron backend"
                     " keeps the gradient buffer in the parameters' dtype, or fp32 with grad_reduce_in_fp32 true);"
                     " read back unset (the parameters' dtype)")
    return g is not None and g.value == "fp32"


def missing_parallel_notes(card: RunCard, target: str, *, has: set[str]) -> list[str]:
    """One note per model-parallel card setting (non-default) that ``target`` cannot write; ``has`` names the
    ``parallel`` keys it writes."""
    p = card.parallel
    present = {
        "tensor_parallel": p.tensor_parallel > 1,
        "sequence_parallel": p.sequence_parallel,
        "context_parallel": p.context_parallel > 1,
        "pipeline_parallel": p.pipeline_parallel > 1,
        "virtual_stages": p.virtual_stages > 1,
        "pipeline_schedule": p.pipeline_schedule.value != "1f1b",
        "expert_parallel": p.expert_parallel > 1,
        "expert_tensor_parallel": p.expert_tensor_parallel > 1,
        "pipeline_first_stage_layers": p.pipeline_first_stage_layers is not None,
        "pipeline_last_stage_layers": p.pipeline_last_stage_layers is not None,
        "pipeline_layout": p.pipeline_layout is not None,
    }
    out = []
    for key, on in present.items():
        if on and key not in has:
            v = getattr(p, key)
            out.append(f"parallel.{key} {getattr(v, 'value', v)}: {target} has no setting for it; not written")
    return out


# -- the layer layout and the MoE / overlap settings of Megatron-Core ------------------------------
#
# NVIDIA/Megatron-LM 00caa53af30912914981c86f39db123961678bbd
# megatron/core/transformer/pipeline_parallel_layer_layout.py: ``pipeline_model_parallel_layout`` is a list of
# pp x vpp stages in model order (stage i on pipeline rank i % pp) or a string of them joined by "|", each stage
# spelled with "E" (the embedding, once, first), "t" (a decoder layer), "m" (an MTP layer), "L" (the loss, once,
# last); "x*n" and "(...)*n" repeat, commas are cosmetic.

_LAYOUT_CHARS = {"E": "embedding", "L": "loss", "t": "decoder", "m": "mtp"}


def megatron_layout(layout: tuple[int, ...]) -> str:
    """The card's ``parallel.pipeline_layout`` (decoder layers per virtual stage, model order) as Megatron-Core's
    layout string: the embedding on the first stage, the loss on the last."""
    stages = []
    for i, n in enumerate(layout):
        s = "E" if i == 0 else ""
        s += "t" * n if n <= 2 else f"t*{n}"
        stages.append(s + ("L" if i == len(layout) - 1 else ""))
    return "|".join(stages)


def layout_from_megatron(value: Any, where: str) -> tuple[int, ...]:
    """Decoder layers per stage from a Megatron-Core ``pipeline_model_parallel_layout`` (string or list of lists);
    ValueError (one line naming ``where``) for a layout the card cannot hold: the embedding not first, the loss not
    last, MTP layers, or an unknown layer."""
    import re

    if isinstance(value, str):
        s = value.replace(",", "").replace(" ", "")
        if len(s) > 100_000:
            raise ValueError(f"{where}: longer than 100000 characters")
        budget = [10_000_000]  # characters the repeats may still add (bounded before any string is built)

        def unroll(m: re.Match[str]) -> str:
            n = len(m.group(1)) * int(m.group(2))
            budget[0] -= n
            if budget[0] < 0:
                raise ValueError(f"{where}: expands past 10000000 layers")
            return m.group(1) * int(m.group(2))

        for pattern in (r"\(([^)]+)\)\*(\d{1,7})", r"(.)\*(\d{1,7})"):
            s = re.sub(pattern, unroll, s)
        stages: list[list[str]] = [list(stage) for stage in s.split("|")]
    elif isinstance(value, (list, tuple)) and all(isinstance(r, (list, tuple)) for r in value):
        names = {v: k for k, v in _LAYOUT_CHARS.items()}
        stages = [[names.get(str(x).strip().lower(), str(x)) for x in r] for r in value]
    else:
        raise ValueError(f"{where}: {str(value)[:60]!r}; allowed: a layout string such as 'Ettt|ttttL' or a list of"
                         " per-stage layer lists")
    flat = [c for st in stages for c in st]
    bad = [c for c in flat if c not in _LAYOUT_CHARS]
    if bad:
        raise ValueError(f"{where}: layer {bad[0]!r} is not one of E (embedding), t (decoder), m (mtp), L (loss)")
    if "m" in flat:
        raise ValueError(f"{where}: MTP layers (m) in the layout are not a card setting; allowed: E, t, L")
    if not flat or flat[0] != "E" or flat.count("E") != 1 or flat[-1] != "L" or flat.count("L") != 1:
        raise ValueError(f"{where}: the embedding (E) must open the first stage and the loss (L) close the last, once"
                         " each (Megatron-Core validate_layer_layout)")
    return tuple(st.count("t") for st in stages)


def megatron_moe(card: RunCard) -> dict[str, Any]:
    """Megatron-Core MoE keys for the card (transformer_config.py): ``moe_token_dispatcher_type: flex`` with
    ``moe_enable_deepep: true`` for the DeepEP dispatcher (verl b178a3cd
    examples/grpo_trainer/run_deepseek671b_math_megatron_96gb.sh; NeMo RL 7ea279a grpo_math_1B.yaml
    megatron_cfg.moe_enable_deepep / moe_token_dispatcher_type), {} for alltoall (both default to it)."""
    from trainfit.spec.enums import MoeDispatcher

    if card.parallel.moe_dispatcher is MoeDispatcher.DEEPEP:
        return {"moe_token_dispatcher_type": "flex", "moe_enable_deepep": True}
    if card.parallel.moe_dispatcher is MoeDispatcher.ALLGATHER:
        # Megatron-Core MoEAllGatherTokenDispatcher (token_dispatcher.py @d98e8a64; TransformerConfig's own default,
        # but verl and NeMo RL set alltoall, so it is written)
        return {"moe_token_dispatcher_type": "allgather"}
    return {}


def megatron_launch(card: RunCard) -> dict[str, Any]:
    """Megatron-Core TransformerConfig keys for the card's ``pipeline_outputs_deallocated`` and ``moe_launch``:
    ``deallocate_pipeline_outputs`` where the card has a pipeline (the only place it is read), and
    ``moe_router_fusion`` (true for ``moe_launch: fused``, false for eager) where the card states a launch (unset,
    the target's own default stands: eager in both verl and NeMo RL);
    Megatron-Core's own defaults are false for both (NVIDIA/Megatron-LM megatron/core/transformer/
    transformer_config.py moe_router_fusion l.792 @d30c3ae5469fe3f6a64d4fd2e63b6e7f7844ea81). A fused launch is
    written as the fused router only, not a CUDA graph (its capture scope is not a card setting).
    ``use_transformer_engine_op_fuser`` true for ``moe_expert_mlp: te_ops`` (a TransformerConfig field from
    Megatron-Core core_v0.18.0, NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py l.465
    @ba7b5ebce12af60627a80985792a1449ce45f46c, read by TEGroupedMLP), false for an explicit unfused (the card's
    statement carried, as an eager launch is); unset writes nothing (Megatron-Core's default, false, and the only
    choice of a Megatron-Core older than the field)."""
    from trainfit.spec.enums import MoeExpertMlp, MoeLaunch

    p = card.parallel
    out: dict[str, Any] = {}
    if p.pipeline_parallel > 1:
        out["deallocate_pipeline_outputs"] = p.pipeline_outputs_deallocated
    if p.moe_launch is not None:
        out["moe_router_fusion"] = p.moe_launch is MoeLaunch.FUSED
    if p.moe_expert_mlp is not None:
        out["use_transformer_engine_op_fuser"] = p.moe_expert_mlp is MoeExpertMlp.TE_OPS
    return out


def launch_from_megatron(where: str, get: Any, *, pipeline_parallel: int, deallocated_default: bool,
                         par: dict[str, Any]) -> None:
    """The card's ``pipeline_outputs_deallocated`` (``deallocate_pipeline_outputs``, else ``deallocated_default``,
    read with a pipeline only) and ``moe_launch`` (fused where ``moe_router_fusion`` is true; otherwise left unset:
    Megatron-Core's defaults, eager) from a TransformerConfig-like mapping: ``moe_router_fusion`` true reads as
    fused, false as eager, unset leaves ``moe_launch`` null (Megatron-Core's defaults, eager); and
    ``moe_expert_mlp`` from ``use_transformer_engine_op_fuser`` (true: te_ops, false: unfused, unset: null, which
    plans unfused); a non-boolean is refused in one line."""
    for key in ("deallocate_pipeline_outputs", "moe_router_fusion", "use_transformer_engine_op_fuser"):
        if get(key) not in (None, True, False):
            raise ValueError(f"{where}.{key}: {get(key)!r}; allowed: true, false")
    dealloc = get("deallocate_pipeline_outputs")
    if pipeline_parallel > 1:
        # written either way: a false the file states must not be taken over by the nemo-rl preset's true
        # (methods.presets.apply_preset fills it where the card leaves it open)
        par["pipeline_outputs_deallocated"] = bool(deallocated_default if dealloc is None else dealloc)
    if get("moe_router_fusion") is not None:
        par["moe_launch"] = "fused" if get("moe_router_fusion") else "eager"
    if get("use_transformer_engine_op_fuser") is not None:
        par["moe_expert_mlp"] = "te_ops" if get("use_transformer_engine_op_fuser") else "unfused"


def dispatcher_from_megatron(kind: Any, deepep: Any, where: str) -> str:
    """The card's ``parallel.moe_dispatcher`` from ``moe_token_dispatcher_type`` (and ``moe_enable_deepep``):
    flex (DeepEP / HybridEP) -> deepep, alltoall -> alltoall, allgather -> allgather; others refused in one line."""
    k = "alltoall" if kind in (None, "null") else str(kind)
    if k == "flex":
        return "deepep"
    if k in ("alltoall", "allgather"):
        if deepep not in (None, False):
            raise ValueError(f"{where}: moe_enable_deepep true needs moe_token_dispatcher_type flex (Megatron-Core)")
        return k
    raise ValueError(f"{where}: {k!r} is not a card dispatcher; allowed: alltoall, allgather, flex (DeepEP)")


def megatron_keys_notes(card: RunCard, target: str, *, has: set[str]) -> list[str]:
    """One note per Megatron-only card setting (non-default) that ``target``'s file does not write; ``has`` names
    those it writes (tensor_parallel_impl, tp_comm_overlap, moe_dispatcher (every value), moe_comm_overlap,
    overlap_param_gather, moe_load_balancing)."""
    from trainfit.spec.enums import MoeDispatcher, MoeExperts, MoeRouterLoad, MoeRouting, TensorParallelImpl

    p = card.parallel
    out = []
    if p.tensor_parallel_impl is TensorParallelImpl.MEGATRON and "tensor_parallel_impl" not in has:
        out.append(f"parallel.tensor_parallel_impl megatron: {target} runs no Megatron-Core model here (its tensor"
                   " parallel, if any, is torch DTensor's); not written")
    if p.tp_comm_overlap and "tp_comm_overlap" not in has:
        out.append(f"parallel.tp_comm_overlap: {target} has no setting that sets up Transformer Engine's userbuffers"
                   " (Megatron-Core --tp-comm-overlap); not written, the tensor-parallel collectives run unhidden")
    if p.moe_dispatcher is MoeDispatcher.DEEPEP and "moe_dispatcher" not in has:
        out.append(f"parallel.moe_dispatcher deepep: {target} has no DeepEP dispatcher setting; not written (the"
                   " all-to-all dispatcher runs)")
    if p.moe_dispatcher is MoeDispatcher.ALLGATHER and "moe_dispatcher" not in has:
        out.append(f"parallel.moe_dispatcher allgather: {target} has no all-gather token dispatcher setting"
                   " (Megatron-Core moe_token_dispatcher_type allgather); not written (the all-to-all dispatcher runs)")
    if p.overlap_param_gather and "overlap_param_gather" not in has:
        out.append(f"parallel.overlap_param_gather: {target} has no Megatron-Core distributed optimizer setting that"
                   " overlaps the parameter all-gather with the next forward (overlap_param_gather); not written (the"
                   " all-gather after the step runs exposed)")
    if p.moe_comm_overlap and "moe_comm_overlap" not in has:
        out.append(f"parallel.moe_comm_overlap: {target} has no expert-parallel all-to-all overlap setting"
                   " (Megatron-Core overlap_moe_expert_parallel_comm); not written")
    if p.pipeline_outputs_deallocated and "pipeline_outputs_deallocated" not in has:
        out.append(f"parallel.pipeline_outputs_deallocated: {target} has no Megatron-Core deallocate_pipeline_outputs"
                   " setting; not written")
    if p.moe_launch is not None and "moe_launch" not in has:
        out.append(f"parallel.moe_launch {p.moe_launch.value}: {target} has no Megatron-Core router fusion or CUDA"
                   " graph setting (moe_router_fusion, cuda_graph_scope); not written")
    if p.moe_expert_mlp is not None and "moe_expert_mlp" not in has:
        out.append(f"parallel.moe_expert_mlp {p.moe_expert_mlp.value}: {target} has no setting for Megatron-Core's"
                   " fused expert MLP (use_transformer_engine_op_fuser); not written (its default, unfused, runs)")
    if p.moe_load_balancing is not None and "moe_load_balancing" not in has:
        out.append(f"parallel.moe_load_balancing {p.moe_load_balancing.value}: the router's load-balancing loss is"
                   " Megatron-Core's moe_router_load_balancing_type with a moe_aux_loss_coeff the card does not carry;"
                   f" not written to the {target} file (its model or provider default stands)")
    if p.moe_router_load is MoeRouterLoad.BALANCED:
        out.append(f"parallel.moe_router_load balanced: forced balance (Megatron-Core moe_router_force_load_balancing,"
                   " NeMo Automodel's FakeBalancedGate) replaces the router's choice, a benchmarking switch; not written"
                   f" to the {target} file (read back: trained, the model's own router)")
    if p.moe_routing is not MoeRouting.UNIFORM:
        out.append(f"parallel.moe_routing {p.moe_routing.value}: how the router spreads tokens is a property of the"
                   f" model and data, not a setting of the {target} file; not written")
    if p.moe_experts is MoeExperts.LOOP_V5:
        out.append(f"parallel.moe_experts loop_v5: transformers v5's eager experts are chosen in the model code"
                   f" (set_experts_implementation), not a key of the {target} file; not written (read back: grouped)")
    if p.moe_experts.is_loop:
        out.append(f"parallel.moe_experts {p.moe_experts.value}: the per-expert loop is what transformers < 5's MoE blocks run (the"
                   f" installed version decides, not a key of the {target} file); not written (read back: grouped)")
    if p.moe_experts is MoeExperts.GROUPED_STREAMS:
        out.append(f"parallel.moe_experts grouped_streams: grouped_gemm's gmm is chosen by the framework's expert backend"
                   f" (NeMo Automodel backend.experts gmm), not a key of the {target} file; not written (read back:"
                   " grouped)")
    if p.moe_experts is MoeExperts.GROUPED_PADDED:
        out.append(f"parallel.moe_experts grouped_padded: torchtitan's padded grouped_mm wrapper is the framework's"
                   f" expert code (torchtitan, prime-rl), not a key of the {target} file; not written (read back:"
                   " grouped)")
    if p.moe_zero3_leaf:
        out.append(f"parallel.moe_zero3_leaf: the {target} file has no key that marks the MoE block a ZeRO-3 leaf"
                   " module (deepspeed.utils.set_z3_leaf_modules is called in the training code); not written")
    return out
