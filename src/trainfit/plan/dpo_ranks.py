"""DPO on a model-parallel layout: the frozen reference's weights on each rank and its log-prob pass per
pipeline stage, placed where the framework runs it (``plan.walk.dpo_reference_phases``);
``plan.stages.walk_stages`` calls ``dpo_rank_peaks`` for every stage's rank, ``plan.walk.walk_sft_like``
``dpo_model_parallel_host``.

Pure: no torch.
"""

from __future__ import annotations

from dataclasses import replace

from trainfit.memory.phases import PhasePeak
from trainfit.methods.roles import reference_placement
from trainfit.plan.walk import dpo_logits_of, dpo_reference_note, dpo_reference_phases
from trainfit.spec.card import RunCard
from trainfit.spec.enums import RefPlacement, TensorParallelImpl
from trainfit.spec.model import ModelSpec


TRL_HEAD_PLACEMENTS = (RefPlacement.GPU, RefPlacement.LORA_DISABLED, RefPlacement.PRECOMPUTED)
"""The reference placements a DPO card runs the way TRL (and OpenRLHF) do: a frozen copy or the policy with its
adapters off scored after the policy's forward, or TRL's ``precompute_ref_log_probs``. Under tensor parallel neither
framework shards the head's output on the vocabulary (``gathered_head``)."""


def gathered_head(card: RunCard) -> bool:
    """Whether a tensor-parallel DPO rank computes the whole vocabulary's logits (the policy's and the reference's).

    TRL runs tensor parallel through transformers' ``tp_plan``, whose causal-LM heads are ``colwise_gather_output``
    (``_tp_plan = {"lm_head": "colwise_gather_output"}``, transformers 5.24.0 src/transformers/models/qwen3/
    modeling_qwen3.py l.427, models/llama/modeling_llama.py l.414; the style is ``ColwiseParallel(input_layouts=
    Replicate(), output_layouts=Replicate())``, src/transformers/distributed/tensor_parallel.py l.603): every rank gets
    the full-vocabulary logits and TRL's row-wise log-softmax runs on them as on one GPU. OpenRLHF's DeepSpeed tensor
    parallel (``deepspeed.tp_model_init`` in OpenRLHF/OpenRLHF openrlhf/utils/deepspeed/deepspeed.py l.390, l.467
    @3c3be6234e0cb353e76bb8019947db9dfe99fca7) is DeepSpeed's AutoTP, whose training mode replaces the head with a
    column-parallel ``LinearLayer(..., gather_output=True)`` (``training_column_lm_head``, deepspeed 0.19.8
    deepspeed/module_inject/auto_tp.py l.450-467): the same gathered logits. So the placements TRL runs
    (``TRL_HEAD_PLACEMENTS``) plan a gathered head on torch's DTensor stack. NeMo RL's host swap keeps its
    vocabulary-parallel log-probs (``DistributedLogprob`` over the local logits, NVIDIA-NeMo/RL
    nemo_rl/distributed/model_utils.py @7ea279abfbeb698b092856d0dab61e7cf39bc909), Megatron-Core and nanotron their
    vocabulary-parallel cross-entropy, and a card without a reference (``none``) keeps the loss region of ``terms``."""
    return (reference_placement(card) in TRL_HEAD_PLACEMENTS
            and card.parallel.tensor_parallel_impl is TensorParallelImpl.DTENSOR)


def gathered_head_bytes(*, sequences: int, seq_len: int, vocab_size: int, hidden_size: int, tp: int,
                        sequence_parallel: bool, no_grad: bool) -> float:
    """Peak bytes of a tensor-parallel rank's head gather (``gathered_head``) over ``sequences`` x ``seq_len`` tokens.

    The column-parallel head writes the rank's bf16 logits over its vocabulary shard, and DTensor's ``Shard(-1)`` to
    ``Replicate`` redistribution all-gathers them along dim 0 into a new buffer, then concatenates the chunks along the
    vocabulary (``funcol.all_gather_single`` with ``gather_dim != 0``: ``all_gather_into_tensor`` then
    ``_maybe_view_chunk_cat``, a ``torch.cat`` unless the leading size is the group's, torch 2.13.0
    torch/distributed/_functional_collectives.py l.207-224; ``Shard._to_replicate_tensor``,
    torch/distributed/tensor/placement_types.py l.594-617; transformers' ``ColwiseParallel`` redistributes its output
    so, transformers 5.24.0 src/transformers/distributed/tensor_parallel.py l.212; DeepSpeed AutoTP's
    ``GatherFromTensorParallelRegion`` likewise gathers into a dim-0 buffer, then joins the shards along the last dim
    with ``torch.cat``, deepspeed 0.19.8 deepspeed/module_inject/layers.py l.318-356). So the shard, the gathered
    buffer and the whole logits are alive together: ``L / tp + 2 L``, ``L = 2·T·V`` (the shard rounded up to whole
    vocabulary rows). Beside them the head's input: under sequence parallel the final norm's sequence shard
    (``2·T/tp·h``), gathered for the head, and, in a no-grad pass (``no_grad``: the reference's), the gathered input
    itself (``2·T·h``), which a training forward saves for the head's weight gradient (its activations). Measured on
    the fake-tensor trace of the step (``trainfit.trace.dpo_tensor_parallel``,
    tests/trace/test_dpo_model_parallel_trace.py: four layouts, tp 2 and 4, with and without sequence parallel): the
    policy's forward and the reference's pass both peak here, above the row-wise log-softmax (``dpo_logits``)."""
    tokens = sequences * seq_len
    logits = 2 * tokens * vocab_size
    shard = 2 * tokens * (-(-vocab_size // tp))
    head_input = (2 * tokens * hidden_size if no_grad else 0) + (
        2 * (-(-tokens // tp)) * hidden_size if sequence_parallel else 0)
    return shard + 2 * logits + head_input


def gathers(card: RunCard, layout) -> bool:  # noqa: ANN001
    """A tensor-parallel rank whose head's output is gathered (``gathered_head``)."""
    return layout.tp > 1 and gathered_head(card)


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
    only on the last stage. With a gathered head (TRL, OpenRLHF: ``gathered_head``) the last stage's log-probs run
    on the whole vocabulary's logits as on one GPU (TRL's row-wise log-softmax), the pass at least the head's gather
    (``gathered_head_bytes``). Over a vocabulary shard (NeMo RL's
    host swap, whose workers take ``DistributedLogprob`` over the local logits at any tp,
    NVIDIA-NeMo/RL nemo_rl/distributed/model_utils.py @7ea279abfbeb698b092856d0dab61e7cf39bc909) the no-grad pass
    peaks as the rank's own loss region does in forward (``terms.logits.forward_peak``). The gathered FSDP units are
    added as on one GPU."""
    from trainfit.memory.parallel import shard_spec
    from trainfit.methods.rl import _gathered, forward_only_transient, frozen_weights
    from trainfit.plan.ranks import rank_weight_share, stage_spec

    place = reference_placement(card)
    if place in (RefPlacement.NONE, RefPlacement.PRECOMPUTED):
        return 0.0, 0.0
    weights = 0.0
    if place is RefPlacement.GPU:
        weights = frozen_weights(spec, card, divisor=1) * rank_weight_share(card, spec, sharding, layout, stage)
    sspec = stage_spec(shard_spec(spec, layout.tp, layout.etp), stage)
    tokens = {"sequences": card.batch.micro_batch_size, "seq_len": card.batch.seq_len // layout.cp}
    if stage.last and (layout.tp == 1 or gathered_head(card)) and place is not RefPlacement.HOST_SWAP:
        # a whole head's logits: TRL's (OpenRLHF's) log-probs as on one GPU (methods.rl.dpo_reference_pass)
        own = forward_only_transient(replace(sspec, vocab_size=spec.vocab_size), **tokens, chunked=card.loss.chunked,
                                     gathered_units=0.0, divides_by_temperature=False, kernel=card.loss.kernel.value)
        head = gathered_head_bytes(**tokens, vocab_size=spec.vocab_size, hidden_size=spec.hidden_size, tp=layout.tp,
                                   sequence_parallel=card.parallel.sequence_parallel,
                                   no_grad=True) if gathers(card, layout) else 0.0
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
      policy's forward left (``dpo_held_after_forward``: the whole vocabulary's logits, ``gathered_head``). Neither
      framework runs a pipeline schedule or Megatron-Core's tensor parallel, and ``plan.stages.prepare`` refuses
      these placements there."""
    ref_w, ref_tr = dpo_rank_reference(card, spec, terms, layout=layout, stage=stage, sharding=sharding)
    held = None
    if stage.last and gathers(card, layout) and not card.loss.chunked and spec.head_outputs is None:
        # the gather's peak (terms.logits.forward_peak) is over by then: the logits and TRL's log-softmax rows remain
        held = dpo_logits_of(card.batch.micro_batch_size, card.batch.seq_len // layout.cp, spec.vocab_size).forward_peak
    return dpo_reference_phases(card, terms, peaks, ref_w=ref_w, ref_tr=ref_tr, held_logits=held)


def dpo_rank_terms(card: RunCard, spec: ModelSpec, terms, *, layout, stage):
    """A DPO rank's step terms: where the last stage's logits cover the whole vocabulary (tp 1, or a gathered head
    under tensor parallel: ``gathered_head``) TRL's (and OpenRLHF's) sequence log-probs run on them as on one GPU
    (``dpo_logits``, over the rank's ``seq / cp`` tokens; under tensor parallel the forward peaking at the head's
    gather, ``gathered_head_bytes``); otherwise the vocabulary-parallel loss region of ``terms``
    stands (NeMo RL's host swap, whose Megatron and DTensor workers take the token log-probs with their
    vocabulary-parallel kernel at any tp: ``DistributedLogprob``, nemo_rl/distributed/model_utils.py
    @7ea279abfbeb698b092856d0dab61e7cf39bc909)."""
    whole = layout.tp == 1 and reference_placement(card) is not RefPlacement.HOST_SWAP
    if not stage.last or card.loss.chunked or spec.head_outputs is not None or not (whole or gathered_head(card)):
        return terms
    b, s = card.batch.micro_batch_size, card.batch.seq_len // layout.cp
    logits = dpo_logits_of(b, s, spec.vocab_size)
    if gathers(card, layout):  # the forward's logits peak at the head's gather (gathered_head_bytes)
        logits = replace(logits, forward_peak=max(logits.forward_peak, gathered_head_bytes(
            sequences=b, seq_len=s, vocab_size=spec.vocab_size, hidden_size=spec.hidden_size, tp=layout.tp,
            sequence_parallel=card.parallel.sequence_parallel, no_grad=False)))
    return replace(terms, logits=logits)


def dpo_model_parallel_host(card: RunCard, spec: ModelSpec, layout, sharding,
                            ranks) -> tuple[dict[str, float], list[str]]:
    """Host RAM and notes of a model-parallel DPO plan: NeMo RL's pinned reference and saved policy copy
    (``host_swap``, ``compute.reference_swap``) of the worst rank's share, as the one-GPU walk counts them."""
    from trainfit.memory.pipeline import stage_of
    from trainfit.plan.ranks import rank_weight_share

    place = reference_placement(card)
    host = dict(ranks.host)
    notes = [dpo_reference_note(card, layout)]
    if place is RefPlacement.HOST_SWAP:
        from trainfit.compute.reference_swap import reference_swap_host_bytes
        from trainfit.methods.rl import reference_swap_state_bytes

        share = rank_weight_share(card, spec, sharding, layout, stage_of(layout, spec.num_layers, ranks.coords.pp))
        host["reference_weights"], host["reference_swap_policy_copy"] = reference_swap_host_bytes(
            state_bytes_per_gpu=reference_swap_state_bytes(spec, card, divisor=1 / share),
            gpus_per_node=card.hardware.gpus_per_node)
    return host, notes
