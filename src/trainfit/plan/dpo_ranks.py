"""DPO on a model-parallel layout: the frozen reference's weights on each rank and its log-prob pass per
pipeline stage, placed where the framework runs it (``plan.walk.dpo_reference_phases``);
``plan.stages.walk_stages`` calls ``dpo_rank_peaks`` for every stage's rank, ``plan.walk.walk_sft_like``
``dpo_model_parallel_host``.

Pure: no torch.
"""

from __future__ import annotations

from dataclasses import replace

from trainfit.memory.phases import PhasePeak
from trainfit.plan.walk import dpo_logits_of, dpo_reference_phases, reference_placement_of
from trainfit.spec.card import RunCard
from trainfit.spec.enums import RefPlacement
from trainfit.spec.model import ModelSpec


def dpo_rank_reference(card: RunCard, spec: ModelSpec, terms, *, layout, stage, sharding) -> tuple[float, float]:
    """(reference weights resident, transient of the live reference pass) on one model-parallel rank of a DPO step
    (``card``: the step card, micro-batch already chosen+rejected), the rank of pipeline stage ``stage``.

    The frozen reference is laid out like the policy (the policy's tp/pp/ep shard and its data-parallel sharding,
    dense and expert parameters each by their own divisor: ``plan.ranks.rank_weight_share``): a ``gpu`` reference
    holds that share of the model's weights on the rank, in the frozen dtype (``methods.rl.frozen_weights``);
    ``lora_disabled`` (the policy with its adapters off) and ``host_swap`` (NeMo RL's reference swapped into the
    policy's own parameters) hold none of their own.

    Its no-grad forward on the rank runs the same per-op forward-only model as one GPU's
    (``methods.rl.forward_only_transient``) on the rank's shard spec cut to the stage's layers (heads, MLP and
    vocabulary divided by tp, experts by ep; ``seq / cp`` tokens), its decoder layer's transient at least the
    context/expert-parallel buffers the policy's forward holds (``comm_forward_transient``); the head and log-probs
    only on the last stage. Over a vocabulary shard (tensor parallel, and NeMo RL's workers at any tp) the token
    log-probs are taken with the vocabulary-parallel kernel the loss uses (``loss_parallel``'s cross-entropy;
    NeMo RL's ``DistributedLogprob`` over the local logits, NVIDIA-NeMo/RL nemo_rl/distributed/model_utils.py
    @7ea279abfbeb698b092856d0dab61e7cf39bc909), and the no-grad pass peaks as the rank's own loss region does in
    forward (``terms.logits.forward_peak``, 14 B per local logit under ``loss_parallel``: the fake-tensor trace of the
    step, ``trainfit.trace.dpo_tensor_parallel``, within 0.03%); over a whole head (tp 1) TRL's row-wise log-softmax
    as on one GPU. The gathered FSDP units are added as on one GPU."""
    from trainfit.memory.parallel import shard_spec
    from trainfit.methods.rl import _gathered, forward_only_transient, frozen_weights
    from trainfit.plan.ranks import rank_weight_share, stage_spec

    place = reference_placement_of(card)
    if place in (RefPlacement.NONE, RefPlacement.PRECOMPUTED):
        return 0.0, 0.0
    weights = 0.0
    if place is RefPlacement.GPU:
        weights = frozen_weights(spec, card, divisor=1) * rank_weight_share(card, spec, sharding, layout, stage)
    sspec = stage_spec(shard_spec(spec, layout.tp, layout.etp), stage)
    tokens = {"sequences": card.batch.micro_batch_size, "seq_len": card.batch.seq_len // layout.cp}
    if stage.last and layout.tp == 1 and place is not RefPlacement.HOST_SWAP:
        # a whole head: TRL's (OpenRLHF's) log-probs as on one GPU (methods.rl.dpo_reference_pass)
        own = forward_only_transient(sspec, **tokens, chunked=card.loss.chunked, gathered_units=0.0,
                                     divides_by_temperature=False, kernel=card.loss.kernel.value)
        head = 0.0
    else:  # the decoder layer's only; the vocabulary-parallel log-probs peak as the rank's loss region does
        own = forward_only_transient(sspec, **tokens, chunked=True, gathered_units=0.0, divides_by_temperature=False)
        head = terms.logits.forward_peak if stage.last else 0.0
    return weights, max(own, terms.comm_forward_transient, head) + _gathered(terms)


def dpo_rank_peaks(card: RunCard, spec: ModelSpec, terms, peaks: list[PhasePeak], *, layout, stage,
                   sharding) -> list[PhasePeak]:
    """A model-parallel rank's DPO phases: the policy's (``peaks``, from ``terms``) with the reference's weights in
    every phase and its pass (``dpo_rank_reference``) where the framework runs it.

    * ``host_swap`` (NeMo RL, its Megatron and DTensor workers): ``add_ref_logprobs_to_data`` computes the reference
      log-probs of the whole global batch (``policy.get_reference_policy_logprobs``, under ``use_reference_model``)
      before ``policy.train`` runs the step on it (NVIDIA-NeMo/RL nemo_rl/algorithms/dpo.py l.314-343, l.586-596;
      nemo_rl/models/policy/workers/megatron_policy_worker.py l.1145-1160, l.1971-1997
      @7ea279abfbeb698b092856d0dab61e7cf39bc909). So the pass runs before the forward, beside the persistent state
      only: weights (the reference's values in the policy's storage), optimizer states and a preallocated gradient
      buffer (Megatron-Core's), no saved activations, no logits.
    * ``gpu`` / ``lora_disabled`` (TRL; OpenRLHF's DPO trainer, whose ring attention and DeepSpeed tensor parallel
      split the sequence or the layers): the policy's concatenated forward first, then the no-grad reference forward
      in the same step (``chosen_logps, ... = self.concatenated_forward(self.model, ...)`` then ``with torch.no_grad():
      ... self.concatenated_forward(self.ref_model, ...)``, OpenRLHF/OpenRLHF openrlhf/trainer/dpo_trainer.py
      l.157-163 @3c3be6234e0cb353e76bb8019947db9dfe99fca7; TRL: ``dpo_held_after_forward``), so it holds what the
      policy's forward left (``dpo_held_after_forward``). Neither framework runs a pipeline schedule, and
      ``plan.stages.prepare`` refuses these placements under pipeline parallel."""
    ref_w, ref_tr = dpo_rank_reference(card, spec, terms, layout=layout, stage=stage, sharding=sharding)
    held_logits = dpo_rank_held_logits(card, spec, terms, layout=layout, stage=stage) if layout.tp > 1 else None
    return dpo_reference_phases(card, terms, peaks, ref_w=ref_w, ref_tr=ref_tr, held_logits=held_logits)


def dpo_rank_held_logits(card: RunCard, spec: ModelSpec, terms, *, layout, stage) -> float:
    """Logit bytes a tensor-parallel rank's policy holds while its reference pass runs (TRL's order): what the
    vocabulary-parallel log-probs saved for backward (``terms.logits.retained``: under ``loss_parallel`` the fp32
    log-softmax, 4 B per local logit) and the model output's own logits, which ``outputs`` keeps alive until the
    loss (one compute-dtype value per local logit: ``b x seq / cp`` tokens over the rank's ``V / tp`` vocabulary).
    Measured on the fake-tensor trace of the step (``trainfit.trace.dpo_tensor_parallel``): 6 B per local logit in
    bf16, where the loss's forward peak (14 B) had been counted. A chunked loss keeps only what it retains; a stage
    without the head holds none."""
    from trainfit.memory.parallel import shard_spec
    from trainfit.plan.resolve import model_dtype
    from trainfit.spec.enums import ComputeDtype

    if card.loss.chunked or not stage.last or spec.head_outputs is not None:
        return terms.logits.retained
    a = 4 if model_dtype(card) is ComputeDtype.FP32 else 2
    local_logits = card.batch.micro_batch_size * (card.batch.seq_len // layout.cp) * shard_spec(
        spec, layout.tp, layout.etp).vocab_size
    return terms.logits.retained + a * local_logits


def dpo_rank_terms(card: RunCard, spec: ModelSpec, terms, *, layout, stage):
    """A DPO rank's step terms: without tensor parallel the last stage's head is whole, and TRL's (and OpenRLHF's)
    sequence log-probs run on it as on one GPU (``dpo_logits``, over the rank's ``seq / cp`` tokens); under tensor
    parallel the vocabulary-parallel loss region of ``terms`` stands (the negative token cross-entropy, traced:
    ``trainfit.trace.dpo_tensor_parallel``), and so it does for NeMo RL's host swap, whose Megatron and DTensor
    workers take the token log-probs with their vocabulary-parallel kernel at any tp (``DistributedLogprob``,
    nemo_rl/distributed/model_utils.py @7ea279abfbeb698b092856d0dab61e7cf39bc909)."""
    if (layout.tp > 1 or not stage.last or card.loss.chunked or spec.head_outputs is not None
            or reference_placement_of(card) is RefPlacement.HOST_SWAP):
        return terms
    return replace(terms, logits=dpo_logits_of(card.batch.micro_batch_size, card.batch.seq_len // layout.cp,
                                                spec.vocab_size))


def dpo_model_parallel_host(card: RunCard, spec: ModelSpec, layout, sharding,
                            ranks) -> tuple[dict[str, float], list[str]]:
    """Host RAM and notes of a model-parallel DPO plan: NeMo RL's pinned reference and saved policy copy
    (``host_swap``, ``compute.reference_swap``) of the worst rank's share, as the one-GPU walk counts them."""
    from trainfit.memory.pipeline import stage_of
    from trainfit.plan.ranks import rank_weight_share

    place = reference_placement_of(card)
    host = dict(ranks.host)
    notes = [f"DPO reference: {place.value}"
             + {RefPlacement.HOST_SWAP: ", its log-probs computed for the whole batch before the step, on each rank's"
                                        " shard (NeMo RL)",
                RefPlacement.GPU: ", a frozen copy laid out like the policy (its tp/pp/ep shard on each rank), its"
                                  " pass after the policy's forward",
                RefPlacement.LORA_DISABLED: ", the policy with its adapters off, its pass after the policy's forward",
                }.get(place, "")]
    if place is RefPlacement.HOST_SWAP:
        from trainfit.compute.reference_swap import reference_swap_host_bytes
        from trainfit.methods.rl import reference_swap_state_bytes

        share = rank_weight_share(card, spec, sharding, layout, stage_of(layout, spec.num_layers, ranks.coords.pp))
        host["reference_weights"], host["reference_swap_policy_copy"] = reference_swap_host_bytes(
            state_bytes_per_gpu=reference_swap_state_bytes(spec, card, divisor=1 / share),
            gpus_per_node=card.hardware.gpus_per_node)
    return host, notes
