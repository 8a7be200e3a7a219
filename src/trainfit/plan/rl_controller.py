"""The single controller's host cost inside the RL step's worker calls: verl's ``DataProto`` transfers and NeMo RL's
dispatched policy batches (``compute.controller_transfer``).

verl's single controller (every verl card): each worker call's timer also holds the driver's serialisation of the
batch and of its results: the generation call's padded to the maximum prompt + response, the trainer's calls padded
the same way under ``rollout.controller_padded_batches`` (the legacy workers), else at the mean prompt and response
(the engine workers' unpadded batches) (``compute.controller_transfer``,
``verl_controller_phases``): a host cost per step that does not shrink with the GPUs. NeMo RL's driver pays the same
mechanism on its policy calls' batches, at Ray's pickling rates (``nemo_rl_dispatched``).

Pure: no torch.
"""

from __future__ import annotations

from trainfit.compute.controller_transfer import (
    DATAPROTO_DESERIALIZE_BYTES_PER_S,
    DATAPROTO_SERIALIZE_BYTES_PER_S,
    NEMO_RL_PUT_ONCE_SINCE,
    RAY_PICKLE_BYTES_PER_S,
    RAY_UNPICKLE_BYTES_PER_S,
    NemoRlCall,
    VerlCall,
    controller_transfer_s,
    nemo_rl_batch_bytes,
    verl_call_row_bytes,
)
from trainfit.compute.training import PhaseTime
from trainfit.plan.rl_common import generated_prompts
from trainfit.plan.rl_passes import takes_entropy
from trainfit.spec.card import RunCard, pin_before

VERL_CONTROLLER_CALLS = {"generation": VerlCall.GENERATION, "old_logprob": VerlCall.OLD_LOGPROB,
                         "ref_logprob": VerlCall.REF_LOGPROB, "critic_values": VerlCall.CRITIC_VALUES,
                         "reward_model": VerlCall.REF_LOGPROB, "actor_update": VerlCall.ACTOR_UPDATE,
                         "critic_update": VerlCall.CRITIC_UPDATE}
"""The plan's phases that are one verl worker call each, and the call whose fields they ship
(``compute.controller_transfer.verl_call_row_bytes``; a reward model's ``compute_rm_score`` ships the batch and
returns one fp32 score row, as the reference pass does)."""


def verl_controller_phases(card: RunCard, gen_side: list[PhaseTime], phases: list[PhaseTime], *, receivers: int,
                           reference: bool, critic: bool, prompt_mean_tokens: float,
                           response_mean_tokens: float) -> tuple[list[PhaseTime], list[PhaseTime]]:
    """The phases with verl's single-controller transfer added inside each call's timer (term
    ``controller_transfer``, ``compute.controller_transfer`` at verl's ``DataProto`` rates): the generated sequences
    for the generation call (``generated_prompts``), padded to the card's maximum prompt and response, and the
    trained ones for the others, padded the same way under ``rollout.controller_padded_batches`` (verl's legacy
    workers), else at the mean prompt and response (the engine workers' unpadded batches)."""
    ro = card.rollout
    trained = ro.prompts_per_step * ro.num_generations
    generated = generated_prompts(card) * ro.num_generations

    def added(p: PhaseTime) -> PhaseTime:
        call = VERL_CONTROLLER_CALLS.get(p.name)
        if call is None:
            return p
        rows = generated if call is VerlCall.GENERATION or p.name == "reward_model" else trained
        padded = call is VerlCall.GENERATION or ro.controller_padded_batches
        sent, returned = verl_call_row_bytes(
            call=call, prompt_tokens=ro.prompt_len if padded else round(prompt_mean_tokens),
            response_tokens=ro.response_len if padded else round(response_mean_tokens),
            entropy=takes_entropy(card, "old_logprob"), reference=reference, critic=critic)
        s = controller_transfer_s(sent_bytes=rows * sent, returned_bytes=rows * returned, receivers=receivers,
                                  serialize_bytes_per_s=DATAPROTO_SERIALIZE_BYTES_PER_S,
                                  deserialize_bytes_per_s=DATAPROTO_DESERIALIZE_BYTES_PER_S)
        return PhaseTime(p.name, p.seconds + s, p.bound, {**p.terms, "controller_transfer": s})

    return [added(p) for p in gen_side], [added(p) for p in phases]


NEMO_RL_DISPATCHED_CALLS = {"old_logprob": NemoRlCall.LOGPROB, "ref_logprob": NemoRlCall.LOGPROB,
                            "actor_update": NemoRlCall.TRAIN}
"""Plan phases that are one NeMo RL policy call each (``get_logprobs``, ``get_reference_policy_logprobs``,
``train``), and the batch each sends (``compute.controller_transfer.nemo_rl_batch_bytes``: the log-prob calls' 24
bytes a token, ``train``'s 32)."""


def nemo_rl_dispatched(card: RunCard, phases: list[PhaseTime], *, sequences: int, longest_tokens: int,
                       train_gpus: int) -> tuple[list[PhaseTime], str]:
    """The phases with NeMo RL's single-controller transfer added to each policy call's phase
    (``NEMO_RL_DISPATCHED_CALLS``, term ``controller_transfer``, ``compute.controller_transfer`` at Ray's pickling
    rates): the step's ``sequences`` x ``longest_tokens`` batch pickled by the driver once per worker before NeMo RL
    0.7 (``tp x cp x pp`` replicas of each data-parallel shard), once per shard from 0.7 (the card's
    ``software.nemo-rl`` pin; none: the newest), and unpickled by one worker; the results are not priced."""
    replicas = max(1, card.parallel.model_parallel)
    dp = max(1, train_gpus // replicas)
    put_once = not pin_before((card.software.model_extra or {}).get("nemo-rl"), NEMO_RL_PUT_ONCE_SINCE)
    out, added = [], {}
    for ph in phases:
        call = NEMO_RL_DISPATCHED_CALLS.get(ph.name)
        if call is None:
            out.append(ph)
            continue
        s = controller_transfer_s(sent_bytes=nemo_rl_batch_bytes(call=call, sequences=sequences,
                                                                 longest_tokens=longest_tokens),
                                  returned_bytes=0.0, receivers=dp, replicas=1 if put_once else replicas,
                                  serialize_bytes_per_s=RAY_PICKLE_BYTES_PER_S,
                                  deserialize_bytes_per_s=RAY_UNPICKLE_BYTES_PER_S)
        added[ph.name] = s
        out.append(PhaseTime(ph.name, ph.seconds + s, ph.bound, {**ph.terms, "controller_transfer": s}))
    note = (f"NeMo RL single controller: each policy call sends the {sequences} x {longest_tokens}-token batch to"
            f" {dp} data-parallel shard(s) x {replicas} worker(s), pickled "
            + ("once per shard (0.7 and later)" if put_once else "once per worker (before 0.7)") + ": "
            + ", ".join(f"{k} +{v:.2f} s" for k, v in added.items()) + " (compute.controller_transfer)")
    return out, note
