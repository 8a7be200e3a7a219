"""The phase walk: SFT, reward-model and DPO steps on one GPU group; PPO and GRPO over the training
and rollout groups. Each turns the step's byte terms into per-phase peaks with their overheads.

Pure: no torch.
"""

from __future__ import annotations

from dataclasses import replace

from trainfit.catalog.gpus import GpuSpec
from trainfit.errors import CardError
from trainfit.memory.parallel import ParallelLayout, expert_split_refusal, tensor_split_refusal
from trainfit.memory.phases import PhasePeak, step_max_transient, step_peaks
from trainfit.memory.sharding import make_sharding
from trainfit.plan.overheads import PERSISTENT, phase_results
from trainfit.plan.resolve import card_with, method_model_spec
from trainfit.plan.result import GroupPlan
from trainfit.plan.terms import step_terms
from trainfit.spec.card import RunCard
from trainfit.spec.enums import Method, Offload, Phase, RefPlacement
from trainfit.spec.model import ModelSpec


def dpo_logits(step_card: RunCard, spec: ModelSpec):
    """DPO's sequence log-probs (TRL's concatenated forward, selective log-softmax row by row on
    bf16 logits): E = (chosen+rejected) x s x V bf16 logits and E' = the same over s-1 positions,
    whose per-row log-softmax outputs are saved for backward. Measured against the fake-tensor
    trace (tests/trace/test_grid_rl.py): forward and backward peak at 2E + 2E' bytes."""
    return dpo_logits_of(step_card.batch.micro_batch_size, step_card.batch.seq_len, spec.vocab_size)


def dpo_logits_of(b: int, s: int, v: int):
    """``dpo_logits`` for ``b`` sequences (chosen+rejected) of ``s`` tokens over a ``v``-wide vocabulary: the bf16
    logits E = b x s x v and the per-row log-softmax outputs over the s-1 scored positions E', forward and backward
    peaking at 2E + 2E' bytes, 2E' retained for backward. A model-parallel rank with the whole vocabulary's logits
    (``plan.dpo_ranks.dpo_rank_terms``) passes its own ``seq / cp`` tokens."""
    from trainfit.memory.logits import LogitsBytes

    e, e_shift = b * s * v, b * (s - 1) * v
    return LogitsBytes(forward_peak=2.0 * e + 2.0 * e_shift, retained=2.0 * e_shift,
                       backward_peak=2.0 * e + 2.0 * e_shift)


def dpo_held_after_forward(terms, forward: PhasePeak, *, chunked: bool) -> dict[str, float]:
    """What the DPO policy step holds when its live reference pass runs: TRL runs the policy's concatenated forward
    and its log-softmax first and the no-grad reference forward after it, inside the same ``_compute_loss``
    (``outputs = model(**model_kwargs)``, ``per_token_logps = selective_log_softmax(shift_logits, ...)``, then
    ``with torch.no_grad(): ... ref_outputs = self.ref_model(...)``; huggingface/trl trl/trainer/dpo_trainer.py
    l.1340-1382 @f2cd57710ae345ea6428ae95363267fcf38a3dc8; the same order in v0.12.0's ``get_batch_loss_metrics``,
    ``self.concatenated_forward(model, batch)`` before ``self.compute_ref_log_probs(batch)``, l.1323-1330
    @14ef1aba152fddbc5a58f3a8a712b6e509e7e69d). So the policy's persistent state, its held gradients, its saved
    activations and, on the full logits, ``outputs.logits`` with the log-softmax rows saved for backward
    (``dpo_logits``: its forward peak, the row transients being one row) are all alive under the reference's
    transient; a chunked loss keeps only what it retains. The layer transients of the policy's last layer and the
    gathered unit of the last FSDP unit are gone by then (the root unit stays). Under ZeRO-3 the policy's engine
    keeps what its coordinator holds at the end of its forward (``gathered_forward``: the head and the last modules,
    kept for reuse in backward within ``stage3_max_reuse_distance``; ``memory.deepspeed.gathered_params``): the
    reference is another engine (TRL's ``prepare_deepspeed``), whose forward does not release the policy's."""
    comps = {k: v for k, v in forward.components.items() if k in PERSISTENT}
    for k in ("gradients", "activations", "pipeline_buffers"):
        if k in forward.components:
            comps[k] = forward.components[k]
    comps["logits"] = terms.logits.retained if chunked else terms.logits.forward_peak
    if terms.fsdp_root_unit + terms.fsdp_all_gathered + terms.gathered_forward:
        comps["fsdp_buffers"] = terms.fsdp_root_unit + terms.fsdp_all_gathered + terms.gathered_forward
    return comps


def dpo_reference_note(card: RunCard, layout=None) -> str:  # noqa: ANN001
    """The plan's note on a DPO card's reference: its placement and where the step runs its pass, said the same way
    for one GPU group and a model-parallel layout (``layout``: its tp/pp/ep shard on each rank). Under expert parallel
    no framework runs the reference after the policy's forward (TRL and OpenRLHF have no expert parallel); the plan
    then says that it plans TRL's order."""
    from trainfit.methods.roles import reference_placement

    place = reference_placement(card)
    split = layout is not None and not layout.trivial
    order = {
        RefPlacement.HOST_SWAP: ", its log-probs computed for the whole batch before the step"
                                + (", on each rank's shard" if split else "") + " (NeMo RL)",
        RefPlacement.GPU: ", a frozen copy" + (" laid out like the policy (its tp/pp/ep shard on each rank)" if split
                                               else "") + ", its pass after the policy's forward (TRL, OpenRLHF)",
        RefPlacement.LORA_DISABLED: ", the policy with its adapters off, its pass after the policy's forward (TRL,"
                                    " OpenRLHF)",
        RefPlacement.PRECOMPUTED: ", its log-probs computed once over the dataset before training (TRL's"
                                  " precompute_ref_log_probs)",
    }
    note = f"DPO reference: {place.value}" + order.get(place, "")
    if split and layout.ep > 1 and place in (RefPlacement.GPU, RefPlacement.LORA_DISABLED):
        note += ("; no framework runs this order under expert parallel (TRL and OpenRLHF have none): planned as TRL's,"
                 " the whole vocabulary's logits on each rank")
    return note


def dpo_reference_phases(card: RunCard, terms, peaks: list[PhasePeak], *, ref_w: float, ref_tr: float,
                         held_logits: float | None = None) -> list[PhasePeak]:
    """The policy's phases (``peaks``: load, forward, backward, optimizer step) with the reference's weights in every
    phase after load and its pass (``ref_tr``, none: no phase) where the framework runs it: before the forward, beside
    the persistent state only, for NeMo RL's host swap (its whole-batch reference log-probs before ``policy.train``;
    ``dpo_rank_peaks``), after the forward, beside what it left (``dpo_held_after_forward``; ``held_logits``: the logit
    bytes held there where the forward's own peak had more, a tensor-parallel rank's head gather), for TRL and
    OpenRLHF."""
    from trainfit.methods.roles import reference_placement

    rest = [PhasePeak(p.phase, dict(p.components) | {"reference_weights": ref_w}, p.at) for p in peaks[1:]]
    if not ref_tr:
        return [peaks[0]] + rest
    pass_ = {"reference_weights": ref_w, "logprob_pass": ref_tr}
    if reference_placement(card) is RefPlacement.HOST_SWAP:
        held = {k: v for k, v in peaks[1].components.items() if k in PERSISTENT and k != "gradients"}
        buffer = (terms.grads_total if terms.grads_preallocated and not terms.grad_buffer else 0.0) + terms.grad_buffer
        if buffer:
            held["gradients"] = buffer
        ref = PhasePeak(Phase.REF_LOGPROB, held | pass_, "reference log-probs (the whole batch, before the step)")
        return [peaks[0], ref] + rest
    held = dpo_held_after_forward(terms, peaks[1], chunked=card.loss.chunked)
    if "logits" in held and held_logits is not None:
        held["logits"] = held_logits
    ref = PhasePeak(Phase.REF_LOGPROB, held | pass_, "reference log-probs (after the policy's forward)")
    return [peaks[0], rest[0], ref] + rest[1:]


def sft_like_sharding(card: RunCard, spec: ModelSpec):
    """(layout, its notes, sharding) of an SFT-like step: the model-parallel layout ``prepare`` gives and how the
    parameters are sharded over it; ``walk_sft_like`` walks them, ``fit_search.screen_time_row`` times them."""
    from trainfit.plan.stages import parallel_sharding, prepare

    layout, par_notes = prepare(card, spec, card.world_size, card.batch.seq_len)
    if layout.trivial:
        sharding = make_sharding(
            strategy=card.parallel.strategy, gpus_per_node=card.hardware.gpus_per_node, nodes=card.hardware.nodes,
            separate_embeddings=card.parallel.fsdp_shard_embeddings, hsdp_shard_size=card.parallel.hsdp_shard_size,
            zero1_shard_size=card.parallel.zero1_shard_size, fsdp_one_rank=card.parallel.fsdp_one_rank,
            fsdp_version=card.parallel.fsdp_version,
        )
    else:
        sharding = parallel_sharding(card, layout, train_gpus_per_node=card.hardware.gpus_per_node)
    return layout, par_notes, sharding


def walk_sft_like(card: RunCard, spec: ModelSpec, gpu: GpuSpec):
    """SFT, reward-model and DPO steps: one GPU group. With model parallelism, the worst rank's."""
    from trainfit.plan.stages import walk_stages

    layout, par_notes, sharding = sft_like_sharding(card, spec)
    step_card, step_spec, notes = card, spec, []
    if card.method is Method.RM:
        # pairwise: chosen and rejected run as one batch; a scalar score head replaces lm_head
        step_spec = method_model_spec(card, spec)
        step_card = card_with(card, batch__micro_batch_size=2 * card.batch.micro_batch_size)
        notes.append("reward model: chosen+rejected pairs (2x micro-batch), scalar score head, no vocabulary logits")
    elif card.method is Method.DPO:
        step_card = card_with(card, batch__micro_batch_size=2 * card.batch.micro_batch_size)
        notes.append("DPO: chosen+rejected concatenated (2x micro-batch) through the policy")
    if not layout.trivial:
        ranks = walk_stages(step_card, step_spec, gpu, sharding, layout)
        groups = (GroupPlan("all", sharding.world_size, ranks.phases),)
        host = ranks.host
        if card.method is Method.DPO:
            from trainfit.plan.dpo_ranks import dpo_model_parallel_host

            host, more = dpo_model_parallel_host(card, spec, layout, sharding, ranks)
            notes += more
        return sharding, groups, host, par_notes + notes, None, ranks
    terms, host, more = step_terms(step_card, step_spec, sharding)
    if card.method is Method.DPO and not card.loss.chunked:
        terms = replace(terms, logits=dpo_logits(step_card, spec))
    peaks = step_peaks(terms)
    if card.method is Method.DPO:
        from trainfit.methods.rl import dpo_reference_pass  # RL-side module: not imported by an SFT plan

        ref_w, ref_tr = dpo_reference_pass(spec, step_card, terms, weights_divisor=sharding.weights_divisor,
                                          sharding=sharding)
        from trainfit.methods.roles import reference_placement

        place = reference_placement(card)
        notes.append(dpo_reference_note(card))
        if place is RefPlacement.HOST_SWAP:  # NeMo RL DPO: pinned reference + saved policy (compute.reference_swap)
            from trainfit.compute.reference_swap import reference_swap_host_bytes
            from trainfit.methods.rl import reference_swap_state_bytes

            host = dict(host)
            host["reference_weights"], host["reference_swap_policy_copy"] = reference_swap_host_bytes(
                state_bytes_per_gpu=reference_swap_state_bytes(spec, card, divisor=sharding.weights_divisor),
                gpus_per_node=card.hardware.gpus_per_node)
        peaks = dpo_reference_phases(card, terms, peaks, ref_w=ref_w, ref_tr=ref_tr)
    phases = phase_results(peaks, spec=step_spec, sharding=sharding, card=card, capacity=gpu.usable_memory_bytes,
                           at_least=step_max_transient(terms), compute_capability=gpu.compute_capability,
                           terms=terms if card.method is Method.SFT else None)
    groups = (GroupPlan("all", sharding.world_size, tuple(phases)),)
    return sharding, groups, host, more + notes, None, None


def rl_sequence_align(card: RunCard) -> int:
    """The multiple the RL trainers pad a sequence (or a packed row) to for Megatron's sequence / context parallel:
    ``tp · cp · 2`` under context parallel, ``tp`` under sequence parallel, else 1 (``rl_sequence_padding``'s
    sources)."""
    p = card.parallel
    if p.context_parallel > 1:
        return p.tensor_parallel * p.context_parallel * 2
    if p.sequence_parallel and p.tensor_parallel > 1:
        return p.tensor_parallel
    return 1


def rl_sequence_padding(card: RunCard) -> tuple[int, str | None]:
    """The actor's longest training sequence, ``prompt_len + response_len`` padded as the RL trainers pad each
    sequence for Megatron's sequence / context parallel: to a multiple of ``tp · cp · 2`` under context parallel,
    else of ``tp`` under sequence parallel (volcengine/verl ``verl/models/mcore/util.py`` ``preprocess_packed_seqs``
    l.40 ``align_size = tp_size * cp_size * 2 if cp_size > 1 else tp_size``
    @b178a3cd56f58b2d502255daba591e92833930a7; NeMo RL pads its packed sequences likewise, ``plan.rl_batches``), where
    an SFT card must state a divisible ``batch.seq_len``. The note says so when padding adds tokens."""
    seq = card.rollout.prompt_len + card.rollout.response_len
    align = rl_sequence_align(card)
    padded = -(-seq // align) * align
    if padded == seq:
        return seq, None
    return padded, (f"rollout: prompt_len + response_len = {seq} tokens padded to {padded}, a multiple of {align}"
                    " (the RL trainers pad each sequence for sequence / context parallel)")


def rl_rank_sequences(card: RunCard, *, update: bool) -> int:
    """Sequences one data-parallel rank holds: of one mini-batch for the update (``update``), of the whole step for
    the log-prob passes; the time model's ``rank_seqs`` (``plan.rl_passes.update_phases``: the update's
    ``ceil(ceil(sequences / train_gpus) x model_parallel / mini_batches)``, the log-prob passes'
    ``ceil(sequences / train_gpus) x tp x pp x cp``). verl splits the step's batch over the data-parallel ranks
    and each mini-batch of ``ppo_mini_batch_size`` sequences likewise (volcengine/verl
    verl/workers/fsdp_workers.py ``ppo_mini_batch_size //= device_mesh.size() // ulysses_sequence_parallel_size``,
    verl/workers/actor/dp_actor.py ``update_policy`` ``data.split(self.config.ppo_mini_batch_size)``
    @e0d035cd4a6a5c29835516a58d78710a28e73b18), so a dynamic micro-batch never holds more than these."""
    from math import ceil

    from trainfit.methods.roles import group_sizes

    ro = card.rollout
    train_gpus, _ = group_sizes(card)
    per_gpu = ceil(ro.prompts_per_step * ro.num_generations / train_gpus)
    if update:
        return ceil(per_gpu * card.parallel.model_parallel / ro.mini_batches)
    return per_gpu * card.parallel.model_parallel


def rl_budget_row(card: RunCard, *, critic: bool = False) -> tuple[int, int, str] | None:
    """(row tokens, sequences per row, note) of the actor's update micro-batch under a token budget
    (``rollout.max_tokens_per_micro_batch``, verl's ``use_dynamic_bsz``); None without one. ``critic``: the
    critic's update under its own budget (``methods.rl.critic_token_budget``: ``rollout.critic_max_tokens_per_micro_batch``,
    verl's ``critic.ppo_max_token_len_per_gpu``, else the actor's), formed the same way (verl's critic calls
    ``rearrange_micro_batches`` with its budget x Ulysses size, verl/workers/critic/dp_critic.py
    @e0d035cd4a6a5c29835516a58d78710a28e73b18).

    verl packs a micro-batch's sequences without padding into one row (``use_remove_padding``: flash-attn's
    ``unpad_input`` and ``cu_seqlens``, volcengine/verl verl/workers/actor/dp_actor.py l.80-97
    @e0d035cd4a6a5c29835516a58d78710a28e73b18) and ``rearrange_micro_batches`` fills micro-batches to at most
    ``ppo_max_token_len_per_gpu x ulysses size`` tokens (verl/utils/seqlen_balancing.py l.216-247, the count
    ``ceildiv(total_seqlen, max_token_len)`` balanced by Karmarkar-Karp); Ulysses then gives each GPU its slice. So
    memory plans one row of ``budget x context_parallel`` tokens (the context-parallel split then leaves the budget on
    each GPU), aligned as ``rl_sequence_padding`` aligns a sequence. A micro-batch is cut from the rank's share of
    one mini-batch (``rl_rank_sequences``), so the row is at most that share at the longest sequence
    (``prompt_len + response_len`` each): a budget above it plans the share. verl asserts that no sequence exceeds
    the budget (the card refuses one, ``spec.card._check_token_budget``), so a micro-batch never holds more than
    that. The balancing may put a few tokens over the budget in one micro-batch (balanced partitions, not a
    capacity constraint); not planned."""
    if critic:
        from trainfit.methods.rl import critic_token_budget

        budget, key = critic_token_budget(card), ("critic_max_tokens_per_micro_batch"
                                                 if card.rollout.critic_max_tokens_per_micro_batch is not None
                                                 else "max_tokens_per_micro_batch")
    else:
        budget, key = card.rollout.max_tokens_per_micro_batch, "max_tokens_per_micro_batch"
    if budget is None:
        return None
    p = card.parallel
    share = rl_rank_sequences(card, update=True) * (card.rollout.prompt_len + card.rollout.response_len)
    row = min(budget * p.context_parallel, share)
    align = rl_sequence_align(card)
    row = -(-row // align) * align
    capped = share < budget * p.context_parallel
    return row, 1, (f"rollout.{key} {budget}: the {'critic' if critic else 'update'}'s micro-batch planned as one"
                    " packed row"
                    f" of {row} tokens" + (f" over {p.context_parallel} context-parallel ranks" if p.context_parallel > 1
                                           else "")
                    + (f", the rank's whole share of a mini-batch ({rl_rank_sequences(card, update=True)} sequence(s)"
                       " at the longest), under the budget" if capped else "")
                    + " (verl dynamic batching, plan.walk.rl_budget_row)")


def rl_packed_row(card: RunCard) -> tuple[int, int, str] | None:
    """(row tokens, sequences per row, note) of the actor's update micro-batch when the card gives the packed row
    capacity (``rollout.packed_row_tokens``: NeMo RL's ``sequence_packing.train_mb_tokens``) and the passes pack;
    None otherwise (or under a token budget, ``rl_budget_row``).

    NeMo RL's policy packs the batch's whole sequences into bins of at most ``train_mb_tokens`` tokens
    (``lm_policy.py`` ``train``: ``sequence_packing_args["max_tokens_per_microbatch"] = train_mb_tokens`` then
    ``shard_by_batch_size``, l.337-345; ``batched_data_dict.py`` l.379 ``bin_capacity=max_tokens_per_microbatch``,
    NVIDIA-NeMo/RL @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf, v0.3.0), and its Megatron worker runs each bin as
    one micro-batch of one packed row (``mbs = 1``, ``megatron_policy_worker.py`` l.815-831, padded to the longest
    row only under pipeline parallel); the DTensor worker pads each row to the capacity
    (``plan.rl_batches.nemo_rl_dtensor_padded_rows``). So a micro-batch holds at most the capacity's tokens, not
    ``micro_batch_size`` sequences at the longest: memory plans one row of the capacity (at most the rank's share
    of a mini-batch at the longest, ``rl_rank_sequences``), aligned as ``rl_sequence_padding`` aligns a sequence.
    A sequence longer than the capacity does not fit a bin; the capacity then is the longest sequence."""
    from trainfit.plan.rl_batches import passes_pack

    ro = card.rollout
    if ro.packed_row_tokens is None or rl_budget_row(card) is not None or not passes_pack(card):
        return None
    longest = ro.prompt_len + ro.response_len
    share = rl_rank_sequences(card, update=True) * longest
    row = min(max(int(ro.packed_row_tokens), longest), share)
    align = rl_sequence_align(card)
    row = -(-row // align) * align
    return row, 1, (f"rollout.packed_row_tokens {ro.packed_row_tokens}: the update's micro-batch planned as one packed"
                    f" row of {row} tokens (NeMo RL sequence packing, plan.walk.rl_packed_row)")


def check_grid_split(field: str, spec: ModelSpec, layout: ParallelLayout) -> None:
    """Refuse, in one line naming ``field`` (``roles.reward_model``, ``roles.critic``), a model of its own laid out on
    the actor's tensor- and expert-parallel grid that the grid cannot split evenly: the divisibility the actor gets
    (``memory.parallel.tensor_split_refusal``, ``expert_split_refusal``; Megatron-Core refuses the same). Before, a
    14-head reward model at tensor parallel 4 was planned with fractional head shards. A dense model on an
    expert-parallel grid holds no experts to split and passes."""
    if (why := tensor_split_refusal(spec, tp=layout.tp)) is not None:
        raise CardError(f"{field}: the actor's parallel.tensor_parallel {why}")
    if (ep := expert_split_refusal(spec, ep=layout.ep, etp=layout.etp)) is not None:
        raise CardError(f"{field}: the actor's parallel.{ep[0]} {ep[1]}")


def verl_fsdp_memory_card(card: RunCard) -> RunCard:
    """The card the RL memory walk reads. verl's FSDP workers never wrap the actor (or critic) with torch FSDP's CPU
    offload: under ``param_offload`` / ``optimizer_offload`` ``update_actor`` loads the shard and the optimizer state
    to the GPU before the update and ``compute_log_prob`` the shard before the log-prob pass, offloading them after
    (volcengine/verl verl/workers/fsdp_workers.py l.893-898, l.928-932, l.993-994 @b178a3cd56f58b2d502255daba591e92833930a7;
    the engine workers the same through ``BaseEngineCtx._context_switch``, verl-project/verl
    verl/workers/engine/base.py l.314-336 @040a28659773fd58eac91cc006d255826c6da03a). So their update and log-prob
    phases hold the state as without offload (``plan.time.step_offload_of``: none), and only around a colocated engine
    does it leave the GPU, which is what ``rollout.trainer_offload`` plans (``methods.rl.trainer_offload_of``; the
    log-prob pass keeps the optimizer state away, ``methods.rl.frozen_pass_offloaded``): such a card is walked with
    ``parallel.offload`` none and, colocated without ``rollout.trainer_offload``, that field set to the actor's
    offload (``plan.rl_offload.verl_fsdp_actor_offload``). A PPO critic keeps ``parallel.offload`` (``walk_rl``): its
    state counted on the host in every phase, its own passes included, where verl loads it (not modelled: the
    trainer-offload phases move the actor's state only). A split card's log-prob pass counts the optimizer state
    on the GPU (verl leaves it on the host there; below the update's peak, which holds it). Any other card: itself."""
    from trainfit.plan.rl_offload import verl_fsdp_actor_offload
    from trainfit.plan.time import step_offload_of
    from trainfit.spec.enums import Offload, Placement

    if step_offload_of(card) is card.parallel.offload:
        return card
    moved = verl_fsdp_actor_offload(card)
    extra = ({"rollout__trainer_offload": moved.value}
             if card.rollout.placement is Placement.COLOCATE and moved is not Offload.NONE else {})
    return card_with(card, parallel__offload=Offload.NONE.value, **extra)


def walk_rl(card: RunCard, spec: ModelSpec, gpu: GpuSpec):
    """PPO and GRPO: the actor's (and critic's) step on the training group, the rollout engine and
    the frozen passes where the roles live."""
    from trainfit.methods.rl import critic_spec_of, rl_groups
    from trainfit.methods.roles import group_sizes, train_nodes

    critic_offload = card.parallel.offload  # the critic keeps the card's offload (verl_fsdp_memory_card)
    card = verl_fsdp_memory_card(card)
    ro = card.rollout
    ctx = spec.max_position_embeddings
    if ctx is not None and ro.prompt_len + ro.response_len > ctx:
        raise CardError(
            f"rollout.response_len: prompt_len + response_len = {ro.prompt_len + ro.response_len} exceeds"
            f" {spec.name}'s context of {ctx} tokens"
        )
    train_gpus, _ = group_sizes(card)
    # the training group's own nodes: under rollout.nodes the engine has whole nodes and the rest train
    t_nodes, per_node = train_nodes(card)
    # the actor's own step: its GPU group only (the rollout group is planned from the full card), over the longest
    # sequence padded as the RL trainers pad it under sequence / context parallel (rl_sequence_padding)
    seq_len, pad_note = rl_sequence_padding(card)
    mbs = card.batch.micro_batch_size
    budget_row = rl_budget_row(card)
    if budget_row is not None:  # dynamic batching: one packed micro-batch of the token budget (rl_budget_row)
        seq_len, mbs, pad_note = budget_row
    packed_row = rl_packed_row(card)
    if packed_row is not None:  # sequence packing: one row of the packed capacity (rl_packed_row)
        seq_len, mbs, pad_note = packed_row
    actor_card = card_with(
        card, batch__seq_len=seq_len, batch__micro_batch_size=mbs, hardware__gpus_per_node=per_node,
        hardware__nodes=t_nodes, rollout__placement="colocate", rollout__gpus=None, rollout__nodes=None,
        # the trainer's memory alone: the weight transport and its relays (time only) are not its, and a split-only one
        # would be refused; so would an asynchronous schedule (time only, split placement only)
        rollout__weight_transport="framework", rollout__weight_sync_relays=False, rollout__async_mode="none",
    )
    from trainfit.plan.stages import parallel_sharding, prepare, walk_stages

    layout, par_notes = prepare(actor_card, spec, train_gpus, actor_card.batch.seq_len)
    par_notes = par_notes + ([pad_note] if pad_note else [])
    cspec = critic_spec_of(card, spec)
    # the critic's update micro-batch: its own budget when the card gives one (rl_budget_row(critic=True)), else
    # the actor's card
    critic_card, critic_note = actor_card, None
    if cspec is not None and card.rollout.critic_max_tokens_per_micro_batch is not None:
        c_seq, c_mbs, critic_note = rl_budget_row(card, critic=True)
        critic_card = card_with(actor_card, batch__seq_len=c_seq, batch__micro_batch_size=c_mbs)
    if cspec is not None and critic_offload is not card.parallel.offload:
        critic_card = card_with(critic_card, parallel__offload=critic_offload.value)
    ranks = None
    if layout.trivial:
        sharding = make_sharding(strategy=card.parallel.strategy, gpus_per_node=per_node, nodes=t_nodes,
                                 separate_embeddings=card.parallel.fsdp_shard_embeddings,
                                 hsdp_shard_size=card.parallel.hsdp_shard_size,
                                 zero1_shard_size=card.parallel.zero1_shard_size,
                                 fsdp_one_rank=card.parallel.fsdp_one_rank,
                                 fsdp_version=card.parallel.fsdp_version)
        actor, host, notes = step_terms(actor_card, spec, sharding)
        if budget_row is not None:  # the update's micro-batch under the budget, said as the split layouts say it
            notes = [*notes, budget_row[2]]
        if packed_row is not None:
            notes = [*notes, packed_row[2]]
        critic = step_terms(critic_card, cspec, sharding)[0] if cspec is not None else None
    else:
        # the actor's (and critic's) worst rank stands for the training group's GPUs
        if cspec is not None:
            # the critic is split like the actor (the card's one layout): it must fit its own depth
            from trainfit.memory.parallel import check_layout

            check_grid_split("roles.critic", cspec, layout)
            check_layout(critic_card, cspec, layout, critic_card.batch.seq_len)
        sharding = parallel_sharding(actor_card, layout, train_gpus_per_node=per_node)
        ranks = walk_stages(actor_card, spec, gpu, sharding, layout)
        actor, host, notes = ranks.terms, dict(ranks.host), list(par_notes)
        critic = walk_stages(critic_card, cspec, gpu, sharding, layout).terms if cspec is not None else None
        notes.append(f"RL with model parallelism: the training group's phases are those of the actor's worst rank"
                     f" {ranks.coords}; frozen passes reuse its shard")
    frozen_divisor: float = sharding.weights_divisor
    reward_divisor: float | None = None
    if ranks is not None:
        # frozen copies (reference, reward model) are laid out like the actor: the worst rank's resident share of
        # each, dense and expert parameters by their own divisors (plan.stages.frozen_share)
        from trainfit.plan.stages import frozen_share

        frozen_divisor = 1.0 / frozen_share(actor_card, spec, sharding, layout, ranks.coords.pp)
        from trainfit.methods.rl import reward_spec_of

        rm_spec = reward_spec_of(card)
        if rm_spec is not None:  # its own architecture on the actor's grid (a dense one holds no experts to split)
            check_grid_split("roles.reward_model", rm_spec, layout)
            rm_layout = layout
            if rm_spec.num_layers != spec.num_layers:  # the card's per-stage split counts the actor's layers: the
                # reward model's own layers evenly over the pipeline ranks
                rm_layout = replace(layout, stage_layout=None, first_stage_layers=None, last_stage_layers=None,
                                    virtual_stages=1)
            reward_divisor = 1.0 / frozen_share(actor_card, rm_spec, sharding, rm_layout, ranks.coords.pp)
    groups, summary, host2, notes2 = rl_groups(
        card, spec, actor, critic, critic_spec=cspec, gpu_memory=gpu.usable_memory_bytes,
        weights_divisor=frozen_divisor, reward_divisor=reward_divisor, sharding=sharding if ranks is None else None,
    )
    host.update(host2)
    if critic_offload is not card.parallel.offload and card.rollout.placement.value != "colocate":
        # verl's split FSDP actor under offload: its shard and optimizer state live in host RAM between the passes
        # (verl_fsdp_memory_card; the bytes plan.rl_offload moves, per rank of the node)
        from trainfit.plan.rl_offload import fsdp_offload_bytes, trainer_shard_ranks

        w, opt, _ = fsdp_offload_bytes(card, spec, shard_ranks=trainer_shard_ranks(card, train_gpus=train_gpus))
        kept = opt + (w if critic_offload is Offload.PARAMS_AND_OPTIMIZER else 0.0)
        host["trainer_offloaded"] = kept * min(per_node, train_gpus)
    if critic_note is not None:
        notes = [*notes, critic_note]
    out = []
    for g in groups:
        phases = phase_results(g.peaks, spec=spec, sharding=sharding, card=card, capacity=gpu.usable_memory_bytes,
                               at_least=step_max_transient(actor) if g.name != "rollout" else 0.0,
                               compute_capability=gpu.compute_capability)
        out.append(GroupPlan(g.name, g.gpus, tuple(phases)))
    if not summary.engine_fits:
        notes2.append(f"ROLLOUT ENGINE CANNOT START: {summary.reason}")
    return sharding, tuple(out), host, notes + notes2, summary, ranks
