"""The worst rank of a model-parallel step: every pipeline stage walked, the largest named.

Ranks of one stage are alike (``trainfit.memory.parallel``), so a plan walks each stage's rank
``(tp 0, pp s, cp 0, ep 0, dp 0)``: its first backward (the schedule's forwards in flight, no
gradient yet) and, with more than one micro-batch, its later backwards (gradients held, one forward
fewer in flight), per phase the larger. The stage with the highest device peak is the plan's.

Pure: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.catalog.gpus import GpuSpec
from trainfit.errors import CardError
from trainfit.memory.attention import runs_eager
from trainfit.memory.parallel import ParallelLayout, RankCoords, check_layout, layout_of, shard_spec
from trainfit.memory.phases import PhasePeak, StepTerms, step_max_transient, step_peaks
from trainfit.memory.sharding import Sharding, make_sharding
from trainfit.plan.overheads import phase_results
from trainfit.plan.result import PhaseResult
from trainfit.spec.card import RunCard
from trainfit.spec.enums import Method, Strategy, TensorParallelImpl
from trainfit.spec.model import ModelSpec


@dataclass(frozen=True, slots=True)
class RankPlan:
    """The worst rank's phases and step terms, and every stage's device peak."""

    coords: RankCoords
    phases: tuple[PhaseResult, ...]
    terms: StepTerms
    """The terms of the worst rank's heavier scenario (what RL's frozen passes reuse)."""
    host: dict[str, float]
    stage_phases: tuple[tuple[PhaseResult, ...], ...]
    """Every pipeline stage's rank: its phases (the worst one's are ``phases``)."""

    @property
    def stage_peaks(self) -> tuple[float, ...]:
        """Device peak of each pipeline stage's rank, bytes."""
        return tuple(max(p.device for p in phases) for phases in self.stage_phases)


def parallel_sharding(card: RunCard, layout: ParallelLayout, *, train_gpus_per_node: int) -> Sharding:
    """The data-parallel strategy over the data x context ranks (HSDP: its shard group, ``parallel.hsdp_shard_size``,
    else the GPUs of a node, at most the data x context ranks)."""
    base = make_sharding(strategy=card.parallel.strategy, gpus_per_node=train_gpus_per_node, nodes=card.hardware.nodes,
                         hsdp_shard_size=card.parallel.hsdp_shard_size)
    world = train_gpus_per_node * card.hardware.nodes
    if card.parallel.strategy is Strategy.HSDP:
        return Sharding(strategy=base.strategy, world_size=world, shard_group=min(base.shard_group, layout.data_group))
    group = 1 if card.parallel.strategy is Strategy.SINGLE else layout.data_group
    if card.parallel.strategy is Strategy.ZERO1 and card.parallel.zero1_shard_size:
        group = min(group, card.parallel.zero1_shard_size)  # InternEvo's zero1 groups (parallel.zero1_shard_size)
    return Sharding(strategy=base.strategy, world_size=world, shard_group=group)


def model_parallel_notes(card: RunCard, spec: ModelSpec, layout: ParallelLayout) -> list[str]:
    """What a model-parallel plan assumes, one line each."""
    notes = [f"model parallel: tp {layout.tp}{' + sequence parallel' if layout.sp else ''}, cp {layout.cp}"
             f"{' (' + layout.cp_kind.value + ')' if layout.cp > 1 else ''}, pp {layout.pp}, ep {layout.ep}"
             f" (expert tp {layout.etp}), dp {layout.dp}; {card.parallel.strategy.value} shards over the"
             f" {layout.data_group} data x context ranks (experts over {layout.expert_data_group})"]
    if layout.tp > 1 and card.parallel.tensor_parallel_impl is TensorParallelImpl.MEGATRON:
        notes.append(
            "tensor parallel as Megatron-Core's layers (parallel.tensor_parallel_impl megatron): heads, MLP and"
            " vocabulary split; under sequence parallel the column-parallel linears save their input's sequence shard;"
            " the vocab-parallel embedding keeps its rows' gradient; vocab_parallel_cross_entropy holds one fp32 copy"
            " of the local logits (6 B per local logit at its peak, 4 B saved); the decoder layers' other saved tensors"
            " are the per-op model's (not Transformer Engine's fused kernels)")
    elif layout.tp > 1 and card.parallel.tensor_parallel_impl is TensorParallelImpl.NANOTRON:
        notes.append(
            "tensor parallel as nanotron's layers (parallel.tensor_parallel_impl nanotron): heads, MLP and vocabulary"
            " split; under sequence parallel the column-parallel linears save their input's sequence shard; the"
            " vocab-parallel embedding keeps its rows' gradient; _ShardedCrossEntropy holds the fp32 local logits and"
            " their max-subtracted copy (8 B per local logit at its peak, 4 B saved); the MLP is per-op")
    elif layout.tp > 1:
        notes.append(
            "tensor parallel as torch's DTensor plan (ColwiseParallel q/k/v/gate/up, RowwiseParallel o/down,"
            " vocabulary-parallel embedding and head with loss_parallel; traced exactly): heads, MLP and vocabulary"
            " split, norms replicated; Megatron-LM differs in the SP linear inputs (saves the sequence shard),"
            " the embedding gradient (its rows only) and the fused cross-entropy")
    if card.precision.compute.quantized_gemms:
        from trainfit.plan.terms import fp8_activation_note, fp8_params_note

        notes.append(fp8_activation_note(card))
        if card.precision.quantized_params:
            notes.append(fp8_params_note(card))
    if card.precision.fp8_activation_input_store:
        from trainfit.plan.terms import GLU_INPUT_STORE_NOTE

        notes.append(GLU_INPUT_STORE_NOTE)
    if layout.pp > 1:
        from trainfit.memory.pipeline import schedule_note

        notes.append(schedule_note(layout))
    if layout.cp > 1:
        notes.append(f"context parallel {layout.cp}: each rank holds seq/{layout.cp} tokens; "
                     + ("ring attention adds 2 x the rank's K and V blocks while a layer attends"
                        if layout.cp_kind.value == "ring" else
                        "Ulysses all-to-alls hold q, k, v and the output at the full sequence over a head shard"))
    if layout.ep > 1:
        notes.append(f"expert parallel {layout.ep}: experts/{layout.ep} per rank, dropless routing with balanced load"
                     " (T x top_k token rows per rank), dispatch/combine all-to-all buffers T x top_k x hidden in and out")
        from trainfit.plan.time import ep_load_factor_of

        factor = ep_load_factor_of(card, spec)
        if factor > 1.0:  # the time prices the busiest rank's rows (plan.time.router_load_note); memory does not
            notes.append(f"expert parallel {layout.ep} under a trained router (parallel.moe_router_load trained): the"
                         f" busiest rank receives about x{factor:.2f} the mean's routed rows, and holds that much more"
                         " of the routed experts' activations and all-to-all buffers; memory is planned at the mean")
    return notes


def _merge(a: list[PhasePeak], b: list[PhasePeak]) -> list[PhasePeak]:
    return [x if x.allocated >= y.allocated else y for x, y in zip(a, b)]


def walk_stages(card: RunCard, spec: ModelSpec, gpu: GpuSpec, sharding: Sharding, layout: ParallelLayout) -> RankPlan:
    """Every stage's rank walked; the one with the highest device peak."""
    from trainfit.memory.pipeline import stage_of  # model-parallel modules: not imported by a one-group plan
    from trainfit.plan.ranks import rank_terms, stage_spec

    best: RankPlan | None = None
    by_stage = []
    ss = shard_spec(spec, layout.tp, layout.etp)
    scenarios = (False, True) if layout.pp > 1 and layout.micro_batches > 1 else (layout.micro_batches > 1,)
    for s in range(layout.pp):
        stage = stage_of(layout, spec.num_layers, s)
        runs = [rank_terms(card, spec, sharding, layout, stage, later=later) for later in scenarios]

        def peaks_of(terms: StepTerms, stage=stage) -> list[PhasePeak]:  # noqa: ANN001
            if card.method is not Method.DPO:
                return step_peaks(terms)
            from trainfit.plan.dpo_ranks import dpo_rank_peaks, dpo_rank_terms  # the reference's weights and pass

            terms = dpo_rank_terms(card, spec, terms, layout=layout, stage=stage)
            return dpo_rank_peaks(card, spec, terms, step_peaks(terms), layout=layout, stage=stage, sharding=sharding)

        peaks = peaks_of(runs[0][0])
        for terms, _ in runs[1:]:
            peaks = _merge(peaks, peaks_of(terms))
        heavier = max(runs, key=lambda r: max(p.allocated for p in peaks_of(r[0])))
        phases = phase_results(peaks, spec=stage_spec(ss, stage), sharding=sharding, card=card,
                               capacity=gpu.usable_memory_bytes, at_least=max(step_max_transient(t) for t, _ in runs),
                               compute_capability=gpu.compute_capability)
        device = max(p.device for p in phases)
        by_stage.append(tuple(phases))
        if best is None or device > max(p.device for p in best.phases):
            best = RankPlan(RankCoords(pp=s), tuple(phases), heavier[0], heavier[1], ())
    assert best is not None
    return RankPlan(best.coords, best.phases, best.terms, best.host, tuple(by_stage))


def frozen_share(card: RunCard, spec: ModelSpec, sharding: Sharding, layout: ParallelLayout, stage: int) -> float:
    """Fraction of ``spec``'s parameters that one rank of pipeline rank ``stage`` keeps resident in a frozen copy
    laid out like the actor: its tp/pp/ep shard under the actor's data-parallel sharding of the weights, dense and
    routed-expert parameters each by their own divisor (``plan.ranks.rank_weight_share``, as ``rank_terms`` counts
    the policy's ``weights``; under FSDP with expert parallel the experts shard over the expert-data ranks only).

    The frameworks that run a frozen copy under model parallel build it on the actor's process grid:
    * verl's Megatron workers initialise one ``mpu`` grid from ``actor.megatron`` (tensor, pipeline, context, expert
      and expert-tensor sizes) for the actor and the reference alike, and build the reference as a Megatron model
      with ``wrap_with_ddp=False`` (no gradient buffer, weights whole over the data-parallel ranks), volcengine/verl
      verl/workers/megatron_workers.py l.283-294, l.445-458 @b178a3cd56f58b2d502255daba591e92833930a7; a colocated
      ``RewardModelWorker`` shares that process and its grid ("Workers for different model share the same process.
      Therefore, we only require one distribute initialization", l.1306-1330), so a reward model is its own
      architecture's shard on the actor's grid (``spec`` the reward model's: its own layers and experts);
    * NeMo RL's Megatron worker keeps the reference as a state dict of the policy's own model
      (``setup_reference_model_state``) and swaps it into the policy's parameters (``use_reference_model``),
      NVIDIA-NeMo/RL nemo_rl/models/policy/workers/megatron_policy_worker.py l.570-580, l.1971-1997
      @7ea279abfbeb698b092856d0dab61e7cf39bc909: the policy's shard, byte for byte.
    The dense data-parallel divisor applied to the experts too (as this function did before) planned Qwen3-30B-A3B's
    reference under FSDP with EP 4 on 8 GPUs at 2.05 GiB per rank beside the policy's 7.11 GiB shard."""
    if layout.trivial:
        return 1.0 / max(1, sharding.weights_divisor)
    from trainfit.memory.pipeline import stage_of
    from trainfit.plan.ranks import rank_weight_share

    share = rank_weight_share(card, spec, sharding, layout, stage_of(layout, spec.num_layers, stage))
    return share or 1.0  # a model without parameters: nothing to divide


def dpo_order_check(card: RunCard, layout: ParallelLayout) -> None:
    """Refuse a DPO reference run after the policy's forward (``gpu``, ``lora_disabled``: TRL's and OpenRLHF's order,
    ``plan.dpo_ranks.dpo_rank_peaks``) where neither framework runs: a pipeline schedule (neither has one), or
    Megatron-Core's or nanotron's tensor-parallel layers (TRL runs transformers' ``tp_plan`` on torch's DTensor,
    OpenRLHF DeepSpeed's AutoTP; the Megatron-Core DPO of NeMo RL scores the reference before the step, ``host_swap``).
    ``trainfit fit`` drops what this refuses (``fit_search.parallel_layouts`` calls ``prepare``)."""
    from trainfit.methods.roles import reference_placement
    from trainfit.spec.enums import RefPlacement, TensorParallelImpl

    place = reference_placement(card)
    if place not in (RefPlacement.GPU, RefPlacement.LORA_DISABLED):
        return
    if layout.pp > 1:
        raise CardError(f"roles.reference: {place.value} with method dpo and pipeline_parallel {layout.pp} is not"
                        " planned (TRL and OpenRLHF, which run it after the policy's forward, have no pipeline"
                        " schedule); allowed with pipeline parallel: host_swap (NeMo RL), precomputed, none")
    impl = card.parallel.tensor_parallel_impl
    if impl is not TensorParallelImpl.DTENSOR:
        raise CardError(f"roles.reference: {place.value} with method dpo and parallel.tensor_parallel_impl {impl.value}"
                        " is not planned (TRL and OpenRLHF, which run it after the policy's forward, use torch's or"
                        " DeepSpeed's tensor parallel); allowed with it: host_swap (NeMo RL), precomputed, none; or"
                        " parallel.tensor_parallel_impl dtensor")


def prepare(card: RunCard, spec: ModelSpec, train_gpus: int, seq_len: int) -> tuple[ParallelLayout, list[str]]:
    """The card's layout, checked against the model (``CardError`` on what cannot be split)."""
    layout = layout_of(card, train_gpus)
    if layout.trivial:
        return layout, []
    if card.method is Method.DPO:
        dpo_order_check(card, layout)
    if layout.cp > 1 and runs_eager(spec.family, card.attention):
        raise CardError("attention: context parallel needs a fused attention kernel; allowed with it: sdpa, flash")
    notes = check_layout(card, spec, layout, seq_len)
    return layout, notes + model_parallel_notes(card, spec, layout)
