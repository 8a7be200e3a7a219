"""PPO/GRPO step time: the phases of one RL step assembled, synchronous (their sum) or asynchronous (generation
beside the trainer, the weight sync alone).

The phases of one RL step, as verl, OpenRLHF, NeMo RL and TRL run them:

1. **generation** in the rollout engine (``compute.generation``): the step waits for its longest
   response; response lengths follow the card's distribution (mean and max).
2. **reward**: ``reward_seconds_per_sample`` per completion over ``reward_workers`` in parallel
   (sandboxed tests), or a reward model's forward.
3. **log-prob passes** (no-grad forwards of every sequence on the training GPUs): the old policy
   when ``num_iterations > 1`` or ``mini_batches > 1``, with PPO, always under verl, OpenRLHF and NeMo RL, under TRL
   (the trl preset or none) with a serving engine (``rollout.recompute_old_logprobs``
   overrides: ``methods.roles.old_logprob_pass``, the rule the memory phases use too); the reference
   unless the KL coefficient is 0; the critic's values (PPO).
4. **actor update** (and the critic's, PPO): the training step of ``compute.training`` over
   every sequence, ``num_iterations`` times. verl, OpenRLHF and NeMo RL pack sequences without
   padding (tokens = prompt + mean response); TRL pads each micro-batch to its longest
   (prompt + max response). A mini-batch splits into ``ceil(sequences / micro_batch_size)``
   balanced micro-batches (``rl_batches.balanced_micro_batches``): the last one is not padded to a whole one.
5. **weight sync** trainer -> engine (``compute.sync``), and sleep/wake when the engine sleeps.

Synchronous: the phases add up. Asynchronous (``async_step_seconds``): the generation side (the rollout
GPUs: generation, reward) of the next batch runs beside the trainer side (the training GPUs: log-prob
passes, updates, state moves) of this one, and the weight sync between the two groups runs alone, so

    step = weight sync (+ the engine's sleep/wake around it) + max(generation side, trainer side)

``max(G - T, 0)`` is the trainer's exposed wait on the batch, logged by both frameworks:

* verl one-step-off (``async_mode: one_step_off``; volcengine/verl
  ``verl/experimental/one_step_off_policy/ray_trainer.py`` @2bb42bae6078359c3fdc56ba6c7533e76fc05407,
  ``fit`` lines 502-521): each step awaits the previous ``_async_gen_next_batch`` ("gen", the wait),
  then ``sync_rollout_weights`` (actor and rollout workers in one NCCL group, ``_create_weight_sync_group``)
  and ``clear_kv_cache``, and only then launches the next generation and runs reward, old log-prob and
  ``update_actor``: the sync holds both groups.
* NeMo RL async GRPO (``grpo.async_grpo``; NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470
  ``nemo_rl/algorithms/grpo.py`` ``async_grpo_train`` lines 2340-2582, ``nemo_rl/algorithms/async_utils.py``
  ``AsyncTrajectoryCollector``): the step times ``exposed_generation`` (waiting for ``num_prompts_per_step``
  groups targeted at this weight version), the log-probs, training and ``weight_sync``. With
  ``max_trajectory_age_steps: 1`` the collector generates for one target version ahead and at most
  ``num_prompts_per_step`` groups are in flight (``_inflight_sema``), one step's batch; the performance
  recipes set ``in_flight_weight_updates: true`` (``prepare_for_refit`` does not wait for pending
  generations), but the refit is a ``collective_rpc`` into the vLLM engine (``vllm_worker_async.py``
  ``update_weights_from_collective_async``), which stops its decode loop while the broadcast is loaded:
  the refit holds both groups here too. With more age (``fully_async`` under the ``nemo-rl`` preset)
  the same loop applies, the engine streaming several batches.

Not modelled: NeMo RL's collector may start the next target's prompt groups as soon as the new weight version
exists, before the current batch is done (``_calculate_target_weights``), so in a generation-bound run groups of
two batches can share the engine; the semaphore caps them at one batch's groups and a group holds its slot until
its longest sample ends, so the gain is at most the batch's tail (and at most (G - T) / 2). The weight export
itself (Megatron-Bridge's ``stream_weights_megatron_to_hf`` gives every training rank every full tensor: PP
broadcast, TP and EP all-gathers) is ``compute.sync.megatron_export_gather``, in the weight sync phase.

verl's fully asynchronous trainer (``fully_async`` under other presets) is planned as the larger of the
generation side and the trainer side with the sync on the trainer side (its rollouter keeps generating
with partial rollouts while the trainer syncs; not read line by line here).

Known gap, NeMo RL colocated on-policy steps of the large MoE models (docs/about/performance-summary.md, v0.4-v0.6;
NVIDIA-NeMo/RL read at v0.6.0 5fb588932bf835506a8a5bac01de4f8c7ab0a065, v0.5.0, v0.4.0). After the first-touch
offload (``compute.offload.PAGEABLE_FIRST_TOUCH_BYTES_PER_S``) the published step exceeds the plan by a nearly
constant amount: DeepSeek-V3 on H100 37.0 s at 256 GPUs and 36.4 s at 512 (v0.6; v0.5 37.0, v0.4 55.8), on GB200
48.2 s at 128 and 50.2 s at 256; Qwen3-235B on H100 48.2 s at 128 and 48.9 s at 256; Qwen3-30B-A3B 2.3 s. What
shrinks with the GPU count (log-prob passes, the update, the state offload) cannot carry a gap that does not; what
is per GPU whatever the count is the refit (every training rank exports every full tensor: 14.5 s planned for
DeepSeek-V3, 11.4 s for Qwen3-235B), the engine's sleep/wake (vLLM ``sleep(level=1)``, 1.8-3.5 s) and the
generation. The paired 1-step-off run (512 H100s, the same 8 TP-32 engines, the same PP16/EP16 trainer on 256) is
max(generation, trainer side) + refit = 64.1 s, which bounds that trainer side by about 49 s and is planned within
2 %. Read and planned: ``refit_policy_generation`` (``offload_before_refit``, wake ``weights``, CUDA-IPC ping-pong
buckets of 30 % of the free memory with one stream sync and one ZMQ round trip each, ``offload_after_refit``, wake
``kv_cache``, vLLM's ``process_weights_after_loading`` once), ``prepare_for_lp_inference`` /
``prepare_for_training``, ``use_reference_model`` (pinned ``non_blocking`` copies), the engines' KV capacity at the
recipes' gpu_memory_utilization (0.6 on H100, 0.3 on GB200 at v0.6, 0.8 split: no recompute at the mean lengths).
Seen, not timed (no rate to cite): six ``gc.collect()`` per step (five in the Megatron worker, one in vLLM's sleep);
v0.6's ``MemoryTracker`` calls Ray's ``memory_summary`` at each stage of the loop (absent at v0.4 / v0.5, whose gap
is as large, so not the cause); validation and the checkpoint save of step 10 (val_period and save_period 10,
MAX_STEPS 10 in tests/test_suites/llm/performance/grpo-deepseek-v3-*.sh) run inside ``total_step_time`` in both
loops, so they would inflate the 1-step-off rows too. Divided over the routed-expert tensors the gap is 0.8 ms
(DeepSeek-V3, H100, 45,212 HF tensors), 1.1 ms (GB200) and 1.3 ms (Qwen3-235B, 36,945), but Qwen3-30B-A3B (18,867)
leaves 2.3 s, so no per-tensor refit cost is applied; a profiled colocated refit of either model would settle it.

Pure: no torch.
"""

from __future__ import annotations

from trainfit.catalog.gpus import GpuSpec
from trainfit.compute.rates import DeviceRates, group_rates
from trainfit.compute.training import PhaseTime
from trainfit.memory.sharding import Sharding
from trainfit.methods.roles import (
    group_sizes,
    train_nodes,
)
from trainfit.plan.rl_batches import rl_batch
from trainfit.plan.rl_common import generated_prompts, length_profile
from trainfit.plan.rl_controller import nemo_rl_dispatched, verl_controller_phases
from trainfit.plan.rl_generation import generation_calls, generation_phase, quantized_engine_inputs, reward_phase
from trainfit.plan.rl_offload import (
    nemo_rl_logprob_optimizer_trip,
    trainer_state_offload_phase,
    verl_offload_pin_note,
)
from trainfit.plan.rl_passes import frozen_pass_phases, update_phases
from trainfit.plan.rl_sync import sleep_wake_phase, sync_phase
from trainfit.plan.time import (
    StepTiming,
    nvlink_gpus_per_node,
)
from trainfit.spec.card import RunCard
from trainfit.spec.enums import (
    AsyncMode,
    LengthProfileName,
    RolloutEngine,
)
from trainfit.spec.model import ModelSpec


def training_group_rates(card: RunCard, r: DeviceRates) -> DeviceRates:
    """The rates of the training group's collectives: ``r`` (``plan.time.rates_of``: a ring over the node's
    ``hardware.gpus_per_node`` GPUs) restated for the training group's GPUs in a node (``methods.roles.train_nodes``).
    On a split node of a bridged PCIe card (``rollout.placement: split``, ``rollout.gpus``) a training group that fits
    one bridge group runs its rings on the bridge (``compute.rates.group_rates``: consecutive ranks share a bridge,
    NVIDIA/nccl-tests issue #178's pairing), as the engine's tensor-parallel group already does
    (``plan.rl_generation``); the transfers between the two groups (weight sync, ``rl_sync``) keep the node's rate.
    ``r`` unchanged where the training group has the whole node or more GPUs than one bridge group."""
    return group_rates(r, ranks=train_nodes(card)[1])


def rl_step_time(card: RunCard, spec: ModelSpec, gpu: GpuSpec, sharding: Sharding, rollout, r: DeviceRates) -> StepTiming:
    """One RL step of the card (module docstring): the generation side (``rl_generation``), the passes on the training
    GPUs (``rl_passes``), the single controller's transfers (``rl_controller``), the weight sync and sleep/wake
    (``rl_sync``) and the trainer's state moves (``rl_offload``), added up or overlapped as the card's
    ``rollout.async_mode`` runs them. ``rollout``: the engine's memory summary (``methods.rl.RolloutSummary``), None
    without an engine."""
    from trainfit.methods.rl import critic_spec_of

    ro = card.rollout
    train_gpus, _ = group_sizes(card)
    per_node = nvlink_gpus_per_node(gpu.id, train_nodes(card)[1], train_gpus)
    batch = rl_batch(card, spec, train_gpus=train_gpus)
    seqs, seqs_per_gpu, seq_len, packed = batch.sequences, batch.sequences_per_gpu, batch.seq_len, batch.packed
    mean, prompt = batch.response_mean_tokens, batch.prompt_mean_tokens

    notes = [f"RL sequences: {seqs} per step, {seqs_per_gpu} per training GPU at {seq_len} tokens"
             + (" (packed: mean prompt + mean response)" if packed else " (padded to max prompt + max response)")]
    if generated_prompts(card) != ro.prompts_per_step:
        notes.append(f"generation: {generated_prompts(card)} prompts x {ro.num_generations} generated per step"
                     f" (rollout.generated_prompts_per_step), {ro.prompts_per_step} of them trained")
    if generation_calls(card) > 1:
        calls = generation_calls(card)
        from trainfit.plan.rl_generation import hf_gathers_per_forward

        weights = ("the sharded layers are gathered in every forward of every call (FSDP's pre-forward all-gather)"
                   if ro.engine is RolloutEngine.HF and hf_gathers_per_forward(card) else
                   "the trainer gathers its weights for every call (unwrap_model_for_generation)"
                   if ro.engine is RolloutEngine.HF else "the weights reach the engine once")
        notes.append(f"generation: {calls} sequential calls of {-(-generated_prompts(card) // calls)} prompts x"
                     f" {ro.num_generations} per step (rollout.generation_calls), each ending with its longest"
                     f" completion; {weights}")
    if not ro.response_len_mean and ro.response_clip_ratio is not None:
        notes.append(f"mean response not given: {mean:.0f} tokens, the exponential shape whose share cut at"
                     f" {ro.response_len} is the card's {ro.response_clip_ratio:g} (rollout.response_clip_ratio)")
    elif not ro.response_len_mean:
        prof = length_profile(card, spec)
        how = ("rollout.length_profile auto: by the model name" if ro.length_profile == "auto"
               else f"rollout.length_profile {ro.length_profile.value}")
        notes.append(f"mean response not given: {mean:.0f} tokens, the '{prof.name}' length profile ({how}; natural "
                     f"mean {prof.natural_mean_tokens:.0f} tokens, truncated at {ro.response_len}; set "
                     "rollout.response_len_mean, or rollout.length_profile "
                     + " | ".join(p.value for p in LengthProfileName if p is not LengthProfileName.AUTO) + ")")
    phases: list[PhaseTime] = []

    gen = generation_phase(card, spec, gpu, rollout, r)
    quant = quantized_engine_inputs(card, spec, r) if ro.engine is RolloutEngine.VLLM else {}
    if quant:
        from trainfit.rollout.quantization import refit_cast_params

        cast = refit_cast_params(spec, quantization=ro.quantization, bf16_modules=tuple(ro.quantization_bf16_modules))
        notes.append(f"rollout engine in {ro.quantization.value}: {quant['rank_weight_bytes'] / 2**30:.2f} GiB of weights"
                     f" per rank read each decode step (128x128-block scales; KV cache bf16), per-token matmuls at"
                     f" {quant['linear_flops_per_s'] / 1e12:.0f} TFLOP/s per GPU (fp8 linears, bf16 head"
                     + (f" and {', '.join(ro.quantization_bf16_modules)}" if ro.quantization_bf16_modules else "")
                     + f"); each refit sends bf16 and every engine rank casts {cast / 1e9:.2f}B weights to fp8")
    gen_side = [gen] if gen is not None else []
    # the engine cannot start: no generation time, so no step time (a sum of the other phases is not the step)
    unavailable = (f"the rollout engine cannot start ({rollout.reason})" if gen is None and rollout is not None
                   and not rollout.engine_fits else None)
    reward = reward_phase(card)
    if reward is not None:
        gen_side.append(reward)

    # the passes on the training GPUs: the frozen forwards, then the updates, their collectives at the rate of a ring
    # over the training group's GPUs in a node (``training_group_rates``)
    cspec = critic_spec_of(card, spec)
    train_r = training_group_rates(card, r)
    frozen, frozen_notes = frozen_pass_phases(card, spec, train_r, sharding, batch, train_gpus=train_gpus,
                                              gpus_per_node=per_node, critic=cspec)
    phases.extend(frozen)
    notes.extend(frozen_notes)
    updates, update_notes, actor_assumptions = update_phases(card, spec, train_r, batch, train_gpus=train_gpus,
                                                             gpus_per_node=per_node, critic=cspec)
    phases.extend(updates)
    notes.extend(update_notes)

    if card.preset == "verl":
        gen_side, phases = verl_controller_phases(card, gen_side, phases, receivers=batch.data_parallel,
                                                  reference=any(p.name == "ref_logprob" for p in phases),
                                                  critic=cspec is not None, prompt_mean_tokens=prompt,
                                                  response_mean_tokens=mean)
        moved_s = sum(p.terms.get("controller_transfer", 0.0) for p in gen_side + phases)
        notes.append("verl single controller: the driver serialises each call's batch ("
                     + ("padded to the maxima" if ro.controller_padded_batches else
                        "generation padded to the maxima, the trainer's calls unpadded (rollout.controller_padded_batches"
                        " false)")
                     + f") and deserialises the results, {moved_s:.1f} s a step on the host (compute.controller_transfer)")

    if card.preset == "nemo-rl":
        # the batch is right-padded to its longest prompt + response (batched_message_log_to_flat_message,
        # NVIDIA-NeMo/RL nemo_rl/data/llm_message_utils.py l.277-288 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf):
        # at most the card's longest prompt + longest response, the bound taken
        phases, note = nemo_rl_dispatched(card, phases, sequences=seqs, longest_tokens=ro.prompt_len + ro.response_len,
                                          train_gpus=train_gpus)
        notes.append(note)
    sync = sync_phase(card, spec, gpu, sharding, rollout, r)
    if sync is not None:
        phases.append(sync)
    sw = sleep_wake_phase(card, spec, rollout, r)
    if sw is not None:
        phases.append(sw)
    moved = trainer_state_offload_phase(card, spec, r, train_gpus=train_gpus)
    if moved is not None:
        phases.append(moved)
        if (pin_note := verl_offload_pin_note(card)) is not None:
            notes.append(pin_note)
        if nemo_rl_logprob_optimizer_trip(card):
            notes.append(f"NeMo RL before 0.5, not colocated: the log-prob call's offload_before_refit moves the"
                         f" optimizer state to the host and prepare_for_training brings it back, {moved.seconds:.1f} s"
                         " a step on the training GPUs (plan.rl_offload.NEMO_RL_LOGPROB_OPTIMIZER_KEPT_SINCE)")

    gen_total = sum(p.seconds for p in gen_side)
    if ro.async_mode is AsyncMode.NONE:
        total = gen_total + sum(p.seconds for p in phases)
    elif serial_sync(card):
        serial = sum(p.seconds for p in phases if p.name in SERIAL_PHASES)
        trainer = sum(p.seconds for p in phases if p.name not in SERIAL_PHASES)
        total = async_step_seconds(generation_s=gen_total, trainer_s=trainer, serial_s=serial)
        notes.append(f"{ro.async_mode.value.replace('_', ' ')}: generation ({gen_total:.1f} s on {group_sizes(card)[1]}"
                     f" GPUs) overlaps the trainer side ({trainer:.1f} s on {train_gpus} GPUs); the weight sync"
                     f" ({serial:.1f} s) holds both groups: step = sync + the larger"
                     f" (trainer waits {max(0.0, gen_total - trainer):.1f} s for the batch)")
        notes.append(f"steady state: the run's first step also waits for its first batch (the whole {gen_total:.1f} s"
                     " generation, once per run), not counted in the step")
    else:
        train_side = sum(p.seconds for p in phases)
        total = max(gen_total, train_side)
        notes.append(f"{ro.async_mode.value.replace('_', ' ')}: generation ({gen_total:.1f} s) overlaps the training"
                     f" side with its weight sync ({train_side:.1f} s); the step is the larger")
    tokens = float(seqs * (prompt + mean))
    return StepTiming(total, tokens, tuple(gen_side + phases), tuple(notes) + actor_assumptions,
                      unavailable=unavailable)


SERIAL_PHASES = ("weight_sync", "sleep_wake")
"""Phases of an asynchronous step that hold both groups (module docstring): the trainer -> engine weight
sync, and the engine's own sleep/wake around it."""


def serial_sync(card: RunCard) -> bool:
    """The card's asynchronous schedule runs the weight sync alone (``async_step_seconds``): one step off
    (verl one-step-off, NeMo RL async GRPO), or fully asynchronous under the ``nemo-rl`` preset (the same
    ``async_grpo_train`` loop with a larger ``max_trajectory_age_steps``)."""
    mode = card.rollout.async_mode
    return mode is AsyncMode.ONE_STEP_OFF or (mode is AsyncMode.FULLY_ASYNC and card.preset == "nemo-rl")


def async_step_seconds(*, generation_s: float, trainer_s: float, serial_s: float) -> float:
    """Seconds per step of an asynchronous RL schedule in steady state: the next batch's generation on the
    rollout GPUs (``generation_s``: generation + reward) runs beside this batch's trainer work on the training
    GPUs (``trainer_s``: log-prob passes, updates, state moves); the weight sync between the groups
    (``serial_s``) runs while neither works. ``serial_s + max(generation_s, trainer_s)``: never more than the
    synchronous sum of the same phases, and non-decreasing in each (module docstring for the sources)."""
    if min(generation_s, trainer_s, serial_s) < 0:
        raise ValueError("async_step_seconds: phase seconds must be >= 0")
    return serial_s + max(generation_s, trainer_s)
