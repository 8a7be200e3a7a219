"""PPO/GRPO step time: generation, reward, the frozen passes, the updates, weight sync, sleep/wake.

The phases of one RL step, as verl, OpenRLHF, NeMo RL and TRL run them:

1. **generation** in the rollout engine (``compute.generation``): the step waits for its longest
   response; response lengths follow the card's distribution (mean and max).
2. **reward**: ``reward_seconds_per_sample`` per completion over ``reward_workers`` in parallel
   (sandboxed tests), or a reward model's forward.
3. **log-prob passes** (no-grad forwards of every sequence on the training GPUs): the old policy
   when ``num_iterations > 1``, with PPO, always under verl, OpenRLHF and NeMo RL, under TRL with a serving engine (``rollout.recompute_old_logprobs``
   overrides: ``methods.roles.old_logprob_pass``, the rule the memory phases use too); the reference
   unless the KL coefficient is 0; the critic's values (PPO).
4. **actor update** (and the critic's, PPO): the training step of ``compute.training`` over
   every sequence, ``num_iterations`` times. verl, OpenRLHF and NeMo RL pack sequences without
   padding (tokens = prompt + mean response); TRL pads each micro-batch to its longest
   (prompt + max response). A mini-batch splits into ``ceil(sequences / micro_batch_size)``
   balanced micro-batches (``balanced_micro_batches``): the last one is not padded to a whole one.
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

verl's single controller (every verl card): each worker call's timer also holds the driver's serialisation of the
batch and of its results: the generation call's padded to the maximum prompt + response, the trainer's calls padded
the same way under ``rollout.controller_padded_batches`` (the legacy workers), else at the mean prompt and response
(the engine workers' unpadded batches) (``compute.controller_transfer``,
``verl_controller_phases``): a host cost per step that does not shrink with the GPUs. NeMo RL's driver pays the same
mechanism on its policy calls' batches, at Ray's pickling rates (``nemo_rl_dispatched``).

verl's fully asynchronous trainer (``fully_async`` under other presets) is planned as the larger of the
generation side and the trainer side with the sync on the trainer side (its rollouter keeps generating
with partial rollouts while the trainer syncs; not read line by line here).

verl's FSDP actor update beyond a forward, backward and optimizer step, read at volcengine/verl
@e0d035cd4a6a5c29835516a58d78710a28e73b18 (the play-verl rows; the same at v0.3.0.post0
@8e7780f5ee2021cc06c248b7cf87cf31200a38fd) and priced at the catalog rates: each is planned or too small to plan
apart. ``update_policy`` (verl/workers/actor/dp_actor.py l.240-362) takes ``ppo_mini_batch_size`` mini-batches x
``ppo_epochs`` optimizer steps (as planned); it reads four or five losses per micro-batch and the norm per step with
``.item()`` (a queue drain each); the vocabulary work is ``compute.inventory``'s (the update's entropy only where
``entropy_coeff`` is not 0: 0 at e0d035cd, ppo_trainer.yaml l.46); FSDP1 ``clip_grad_norm_`` reads the gradient shard
once and all-reduces one scalar; AdamW runs on the fp32 shard (``optimizer_step``); FSDP1's fp32 reduction casts and
pre-divides each unit's unsharded gradient on its post-backward stream (14 B per parameter per micro-batch, 32 ms for
Qwen2-7B on an H100, behind the next unit's backward). The critic's update has its own timer, before the actor's
(verl/trainer/ppo/ray_trainer.py l.1033-1043); ``update_actor`` loads and offloads the actor's state inside its timer
(verl/workers/fsdp_workers.py l.512-552: the benchmark's offload share). What the published per-step lines hold beyond
the plan is none of these, and lies inside ``update_policy``: verl's own ``perf/mfu/actor`` times it alone
(fsdp_workers.py l.525-530, an H100 counted at 989 TFLOP/s, verl/utils/flops_counter.py l.37-38), which leaves outside
it 0.38 s of play-verl's Qwen2-7B 'recommended' 33.5 s update, 1.3 s of the offloading 'min' run's 10.6 s and 0.03 s
of the 0.5B GRPO run's 1.0 s. A least-squares fit of each timer on the step's tokens (yushengsu-thu/verl_training_log
gsm8k/{grpo,ppo}_run_deepseek7b_llm.log @deb1507ca0740580d2019e7150d08edf8dd6ca35, MI300X, 1007 steps each) leaves the
log-prob passes a fixed part of 0.0-0.4 s and the updates 1.9 +- 0.5 s (GRPO actor, 4 optimizer steps), 2.6 +- 0.4 s
(PPO actor, 4) and 2.0 +- 0.3 s (PPO critic, 4), with slopes 3.4-3.9 x the forward pass's (4 x: forward, recompute, a
backward twice as long); play-verl's Qwen2-7B PPO actor update (dingxianzhong/play-verl
logs/verl_qwen2_7b_recommended.log @7716a615fc4b68961f2bb7716c9aadcd65ca28d2, 55 steps, 16 optimizer steps each) grows
6.1 +- 2.1 s per million tokens, where 4 x its log-prob pass's 3.87 +- 0.15 would give 15.5. Not modelled: a fixed
part of about 0.5-0.7 s per optimizer step of a 7B model on 8 GPUs (the MI300X fits over 4 steps; 4 x the forward
slope leaves 11 s over play-verl's 16), whose mechanism these reads do not name (one profiled update on a device
would). The MI300X rows' token-proportional part is 1.35 x the plan's in the log-prob passes as well, as the torchao
MI300X pretrain rows are under: the MI300X bf16 rate is the MAMF table's TunableOp row (``compute.rates``), not a
default-heuristic one.

Dynamic batching (``rollout.max_tokens_per_micro_batch`` / ``logprob_max_tokens_per_micro_batch``, verl's
``use_dynamic_bsz``): verl takes the largest micro-batch count of the data-parallel ranks (``rearrange_micro_batches``:
``ceildiv(total_seqlen, max_token_len)`` all-reduced with ``ReduceOp.MAX``, verl/utils/seqlen_balancing.py
@e0d035cd4a6a5c29835516a58d78710a28e73b18), planned as the expected largest count (``dynamic_micro_batches``), each
micro-batch a packed row of the rank's tokens over that count. play-verl's 'recommended' run puts 40 sequences of 281
tokens (11.2k of its 12k budget) on a rank per optimizer step, its ranks spread by about 10 %, so most steps run 2
micro-batches where a fixed count of ``12000 // 281`` sequences runs 1. Without the budget the card's
``micro_batch_size`` is a fixed count, as before. NeMo RL's GRPO update runs its loss once per packed sequence
(``compute.inventory.NEMO_RL_PG_LOSS``), planned.

Seen in the offloading 'min' run, not modelled (dingxianzhong/play-verl logs/verl_qwen2_7b_min.log
@7716a615fc4b68961f2bb7716c9aadcd65ca28d2, the benchmark's 111 steps): ``timing_s/update_actor`` is two-valued. In 24
steps it is 8.39 s, in the other 87 11.22 s (-2.83 s); those 24 steps are 1.78 s shorter in all, their
``old_log_prob``, ``ref``, ``values`` and ``update_critic`` timers 0.66, 0.43, 0.21 and 0.73 s longer and ``gen`` 0.97
s shorter (update against old log-prob: r = -0.47). About 1.8 s of work that most steps pay inside the actor's update
is skipped in some, and about 1 s moves between the trainer's timers. The actor, critic and reference share one process
per GPU (one ``WorkerDict`` pid, 3095283, logs both the critic's and the actor's model build) and move their state with
``non_blocking`` copies (verl/utils/fsdp_utils.py l.113-168 @e0d035cd4a6a5c29835516a58d78710a28e73b18), so a timer can
close before its copies end and the next synchronising call pays them; what the skipped 1.8 s is, these lines do not
say. The 'recommended' run (no offload) is one-valued (update p5-p95 31.2-35.5 s, r = +0.30). Against the 24 short
steps the plan's 'min' update (5.19 s with its offload share) is -38 %, against the mean -51 %.

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

from dataclasses import replace
from math import ceil

from trainfit.catalog.gpus import GpuSpec
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
from trainfit.compute.inventory import VERL_ENTROPY_COMPILED_BYTES, VERL_ENTROPY_COMPILED_KERNELS
from trainfit.compute.model_parallel import pipeline_bubble_micro_steps
from trainfit.compute.moe_time import expert_token_shards
from trainfit.compute.offload import (
    first_touch_copy_bytes_per_s,
    host_copy_bytes_per_s,
    pageable_copy_bytes_per_s,
    staging_bytes_per_s_of,
)
from trainfit.compute.rates import DeviceRates
from trainfit.compute.response_lengths import LengthProfile, default_response_mean, profile_named
from trainfit.compute.training import (
    Parallel,
    PhaseTime,
    forward_only_time,
    fsdp_units,
    model_parallel_comm_of,
)
from trainfit.memory import attention as attn
from trainfit.memory.params import routed_expert_params
from trainfit.memory.sharding import Sharding
from trainfit.memory.weights import count_scale, total_params, weight_bytes
from trainfit.methods.roles import (
    group_sizes,
    kl_coef,
    old_logprob_pass,
    reference_placement,
    reward_model,
    rollout_nodes,
    train_nodes,
)
from trainfit.plan.time import (
    COMPILE_KERNEL_FACTOR,
    COMPILE_MEMORY_FACTOR,
    TE_ONLY_FP8_RECIPES,
    StepTiming,
    a2a_thd_sequences_of,
    adapter_of,
    attention_kernel_of,
    fused_kernels,
    model_parallel_of,
    nemo_rl_pg_loss_of,
    nic_bytes_per_s,
    nvlink_gpus_per_node,
    packed_flash_syncs,
    rank_spec,
    rope_loop_samples_of,
    timed_rank_holds_head,
    training_time,
    verl_fsdp_workers,
)
from trainfit.spec.card import RunCard, pin_before
from trainfit.spec.enums import (
    FSDP_STRATEGIES,
    AsyncMode,
    ComputeDtype,
    Dtype,
    EngineOutputs,
    FsdpVersion,
    LogprobEntropy,
    LossKernel,
    MoeExperts,
    Offload,
    Placement,
    RefPlacement,
    RolloutEngine,
    Strategy,
    TensorParallelImpl,
    WeightTransport,
)
from trainfit.spec.model import ModelSpec
from trainfit.spec.training import TrainableSpec
from trainfit.units import BYTES_PER_DTYPE

PACKING_PRESETS = ("verl", "openrlhf", "nemo-rl")
"""Frameworks that remove padding (pack sequences) in their log-prob and update passes."""


def balanced_micro_batches(sequences: int, micro_batch_size: int) -> tuple[int, int]:
    """(micro-batches, sequences per micro-batch) for ``sequences`` split into micro-batches of at most
    ``micro_batch_size``: ``ceil(sequences / micro_batch_size)`` micro-batches of equal size (rounded up),
    so the work is the sequences there are, not a whole last micro-batch of padding sequences. verl's
    dynamic batching balances its micro-batches this way (``rearrange_micro_batches``: the count from the
    token budget, the sequences spread evenly); a fixed micro-batch leaves the last one short."""
    sequences, micro_batch_size = max(1, int(sequences)), max(1, int(micro_batch_size))
    micro = ceil(sequences / micro_batch_size)
    return micro, ceil(sequences / micro)


DYNAMIC_COUNT_MIN_PROBABILITY = 1e-3
"""Micro-batch counts less likely than this are folded into the next larger count kept by ``dynamic_micro_batches``
(so the expected count never falls below the exact one): each count left is one more timed pass."""


def dynamic_micro_batches(*, sequences: int, token_mean: float, token_std: float, budget_tokens: float,
                          data_parallel: int) -> tuple[tuple[int, float], ...]:
    """``(micro-batches, probability)`` of verl's dynamic batching on a rank: ``sequences`` packed sequences per
    data-parallel rank, each ``token_mean`` tokens with spread ``token_std``, micro-batches of ``budget_tokens``.

    volcengine/verl verl/utils/seqlen_balancing.py ``rearrange_micro_batches`` (l.216-247
    @e0d035cd4a6a5c29835516a58d78710a28e73b18; l.346-420 @b178a3cd56f58b2d502255daba591e92833930a7): a rank's count is
    ``ceildiv(total_seqlen, max_token_len)`` (at most its sequence count at b178a3cd), all-reduced with
    ``ReduceOp.MAX`` so every rank runs the largest; Karmarkar-Karp then balances the rank's sequences over that many
    micro-batches (``get_seqlen_balanced_partitions``, ``equal_size=False``), so each holds ``total / count`` tokens.
    ``max_token_len`` is the per-GPU budget times the Ulysses size (verl/workers/actor/dp_actor.py l.211, l.274
    @e0d035cd4a6a5c29835516a58d78710a28e73b18): the caller passes ``budget_tokens`` so.

    A rank's tokens are the sum of ``sequences`` independent lengths: normal with mean ``n mu`` and spread
    ``sqrt(n) sigma``; the largest of ``data_parallel`` such sums has ``P(M <= x) = Phi((x - n mu) / (sqrt(n)
    sigma))^D``, and the count is ``ceil(M / budget)``: ``P(count <= k) = P(M <= k budget)``. Counts below
    ``DYNAMIC_COUNT_MIN_PROBABILITY`` are dropped. With no spread (or one rank and a fixed length) the count is
    ``ceil(n mu / budget)``."""
    from statistics import NormalDist

    n = max(1, int(sequences))
    budget = float(budget_tokens)
    if budget <= 0 or token_mean <= 0:
        raise ValueError("budget_tokens and token_mean must be > 0")
    mean = n * token_mean
    spread = n ** 0.5 * max(0.0, token_std)
    dp = max(1, int(data_parallel))
    if spread <= 0.0:
        return ((min(n, max(1, ceil(mean / budget - 1e-9))), 1.0),)
    phi = NormalDist().cdf

    def below(k: int) -> float:  # P(count <= k)
        return 1.0 if k >= n else phi((k * budget - mean) / spread) ** dp

    out: list[tuple[int, float]] = []
    k = max(1, int((mean - 10 * spread) // budget))
    prev = 0.0 if k == 1 else below(k - 1)
    pending = prev  # mass of counts below the first one examined, or dropped since the last kept one
    while True:
        cur = below(k)
        pending += cur - prev
        if pending >= DYNAMIC_COUNT_MIN_PROBABILITY or (cur >= 1.0 and not out):
            out.append((k, pending))  # a dropped count's mass goes to the next count kept: never fewer passes
            pending = 0.0
        if cur >= 1.0 - 1e-12 or k >= n:
            break
        prev, k = cur, k + 1
    if pending and out:
        out[-1] = (out[-1][0], out[-1][1] + pending)
    total = sum(p for _, p in out)
    return tuple((c, p / total) for c, p in out)


def sequence_token_spread(card: RunCard, spec: ModelSpec | None = None) -> float:
    """Standard deviation of one packed sequence's tokens: the card's response-length distribution
    (``compute.response_lengths``, as ``update_work_cv`` reads it); the prompt is taken at its mean (no spread
    published)."""
    from trainfit.compute.response_lengths import response_length_groups

    ro = card.rollout
    mean = response_mean(card, spec)
    groups = response_length_groups(shape=ro.response_len_shape, response_len_max=ro.response_len,
                                    response_len_mean=mean, sequences=4096)
    return sum(w * (length - mean) ** 2 for length, w in groups) ** 0.5


def first_fit_decreasing(lengths, *, capacity: float) -> tuple[int, float]:
    """(bins, fullest bin's tokens) of first-fit decreasing: the longest item first, each into the first bin it
    fits, a new bin when none. Items longer than the capacity take a bin of their own. NeMo RL's default packer is
    Johnson & Garey's modified first-fit decreasing (``ModifiedFirstFitDecreasingPacker``, NVIDIA-NeMo/RL v0.6.0
    ``nemo_rl/data/packing/algorithms.py`` l.476-560: one bin per item above half the capacity, then the medium and
    small items into them, first-fit decreasing for the rest); both open one bin per item above half the capacity
    and fill the rest first-fit, the count planned with the plain rule."""
    bins: list[float] = []
    for x in sorted((float(v) for v in lengths), reverse=True):
        for i, fill in enumerate(bins):
            if fill + x <= capacity:
                bins[i] = fill + x
                break
        else:
            bins.append(x)
    return len(bins), (max(bins) if bins else 0.0)


PACKING_SAMPLE_SEQUENCES = 1024
"""At most this many representative sequences are packed (``pipeline_packed_rows``); a larger batch's bin count
scales with its size (bins of many sequences fill alike)."""


def pipeline_packed_rows(*, sequence_tokens, sequences: int, row_tokens: int, data_parallel: int) -> tuple[int, float]:
    """(rows per data-parallel rank, tokens each row is padded to) when NeMo RL's Megatron worker packs a batch of
    ``sequences`` sequences, lengths as ``sequence_tokens`` (representative lengths, one per sequence or a sample
    of them), under pipeline parallel (``RunCard.rollout.packed_row_tokens``).

    NVIDIA-NeMo/RL v0.6.0 (5fb588932bf835506a8a5bac01de4f8c7ab0a065): ``BatchedDataDict.shard_by_batch_size`` packs
    the whole batch's sequences into bins of at most ``max_tokens_per_microbatch`` tokens (train_mb_tokens or
    logprob_mb_tokens, ``nemo_rl/models/policy/lm_policy.py`` l.603-612, l.381-390) with ``min_bin_count`` and
    ``bin_count_multiple`` both the data-parallel size, and deals the bins round-robin to the ranks
    (``nemo_rl/distributed/batched_data_dict.py`` l.430-435, l.485): every rank gets ``bins / dp`` rows
    (``first_fit_decreasing`` for the count).

    With ``pipeline_model_parallel_size > 1`` each row is then padded to the longest row of the batch
    (``pad_packed_seq_to = max_seq_len_in_batch``, ``nemo_rl/models/megatron/data.py`` l.170-179 and l.585-587; the
    last sequence of a row absorbs the padding, l.446): Megatron's pipeline sends fixed-shape activations. The
    same code since v0.4.0 (c751f811217db7df0d4c94abdeaada6626cfc150 ``nemo_rl/models/policy/megatron_policy_worker.py``
    l.1020-1023, the train pass, and l.1198-1204, the log-prob pass; v0.5.0
    6c7089300fded94abfa49bb9cbf9eb357d862461 ``nemo_rl/models/megatron/common.py`` l.278-279).

    So a pipeline-parallel rank runs fewer, longer micro-batches than one sequence each: the 1F1B bubble
    (``pp - 1`` micro-step times, ``compute.model_parallel.pipeline_bubble_micro_steps``) is then that many
    full-row micro-steps, and the padding is computed."""
    if row_tokens < 1 or data_parallel < 1:
        raise ValueError("row_tokens and data_parallel must be >= 1")
    lengths = list(sequence_tokens)
    bins, longest = first_fit_decreasing(lengths, capacity=row_tokens)
    bins = max(1, ceil(bins * max(1, int(sequences)) / max(1, len(lengths))))
    return ceil(bins / data_parallel), min(float(row_tokens), longest)


def nemo_rl_dtensor_padded_rows(card: RunCard) -> bool:
    """NeMo RL's DTensor policy pads every packed row of its update to the row capacity: ``train`` calls
    ``pack_sequences(..., min_seq_len=self.cfg["sequence_packing"]["train_mb_tokens"])`` ("a WAR for sequence
    packing ... Without this, backward will fail when TP is enabled"; NVIDIA-NeMo/RL
    nemo_rl/models/policy/dtensor_policy_worker.py l.602-613 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf, v0.3.0; l.610
    @27d0af94 v0.3.1, l.661 v0.4.0, workers/dtensor_policy_worker.py l.643 v0.5.0, l.695 v0.6.0), and
    ``group_and_cat_tensors`` pads each row to ``max(longest, min_seq_len)`` (nemo_rl/models/huggingface/common.py
    l.73-125, l.115 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf); the bins hold at most ``train_mb_tokens``, so every
    row is that long. Ranks with fewer bins
    run dummy micro-batches up to the most any rank has (``max_batch_ct`` all-reduced with MAX, ``dummy_iterator``,
    dtensor_policy_worker.py l.567-592 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf): the ceiling of
    ``pipeline_packed_rows``. Its ``get_logprobs``
    packs without ``min_seq_len`` (l.884-892): the log-prob passes keep their sequences."""
    return card.preset == "nemo-rl" and card.parallel.strategy in FSDP_STRATEGIES


def _pipeline_packing(card: RunCard, *, row_tokens: int | None, sequences: int, prompt_tokens: float,
                      response_mean_tokens: float, train_gpus: int, padded_rows: bool = False) -> tuple[int, int] | None:
    """(rows per data-parallel rank, tokens per row) of a pass whose card packs rows under pipeline parallel
    (``pipeline_packed_rows``), the sequences the mean prompt plus the card's response lengths
    (``compute.response_lengths``, one equal-share group per representative sequence); None without pipeline
    parallel or without the row capacity (the pass keeps its sequences of the mean length). ``padded_rows``: every row
    padded to the capacity whatever the pipeline (``nemo_rl_dtensor_padded_rows``)."""
    from trainfit.compute.response_lengths import response_length_groups

    p, ro = card.parallel, card.rollout
    if row_tokens is None or (p.pipeline_parallel <= 1 and not padded_rows):
        return None
    n = max(1, min(int(sequences), PACKING_SAMPLE_SEQUENCES))
    groups = response_length_groups(shape=ro.response_len_shape, response_len_max=ro.response_len,
                                     response_len_mean=response_mean_tokens, sequences=n, quantiles=n)
    lengths = [prompt_tokens + length for length, share in groups for _ in range(max(1, round(share * n)))]
    dp = max(1, train_gpus // max(1, p.tensor_parallel * p.pipeline_parallel * p.context_parallel))
    rows, longest = pipeline_packed_rows(sequence_tokens=lengths, sequences=sequences, row_tokens=int(row_tokens),
                                         data_parallel=dp)
    return rows, (int(row_tokens) if padded_rows else max(1, ceil(longest)))


def response_mean(card: RunCard, spec: ModelSpec | None = None) -> float:
    """The card's mean response tokens; without one, the default of the length profile
    (``length_profile``: the card's ``rollout.length_profile``, by the model name under ``auto``;
    ``compute.response_lengths.default_response_mean``: a truncated exponential of the profile's natural
    scale, clipped at ``response_len``), not a fixed share of the maximum."""
    ro = card.rollout
    if ro.response_len_mean:
        return float(ro.response_len_mean)
    return default_response_mean(response_len_max=ro.response_len, profile=length_profile(card, spec))


def length_profile(card: RunCard, spec: ModelSpec | None = None) -> LengthProfile:
    """The response-length profile a card without ``rollout.response_len_mean`` plans with
    (``compute.response_lengths.profile_named``)."""
    return profile_named(card.rollout.length_profile, model_name=spec.name if spec else None)


def prompt_mean(card: RunCard) -> float:
    """Mean prompt tokens one sequence carries through generation and the passes that drop padding:
    ``rollout.prompt_len_mean`` when the card gives it, else ``rollout.prompt_len`` (every prompt at the maximum, an
    upper bound). verl (``use_remove_padding``), OpenRLHF (``packing_samples``) and NeMo RL (sequence packing) run
    their log-prob and update passes on the real tokens, and vLLM prefills and attends to the prompt as tokenized;
    memory, KV capacity and padded passes keep the maximum (``RunCard.rollout`` field docs)."""
    ro = card.rollout
    return float(ro.prompt_len_mean or ro.prompt_len)


def _takes_entropy(card: RunCard, phase: str) -> bool:
    """Whether the log-prob pass ``phase`` also takes the entropy of the logits (``loss.logprob_entropy``): the old
    policy's under old_policy and every_pass, the reference's under every_pass."""
    e = card.loss.logprob_entropy
    return (phase == "old_logprob" and e is not LogprobEntropy.NONE) or (
        phase == "ref_logprob" and e is LogprobEntropy.EVERY_PASS)


def _phase(name: str, seconds: float, bound: str, **terms: float) -> PhaseTime:
    return PhaseTime(name, seconds, bound, dict(terms))


def _weighted(name: str, timed: list[tuple[float, PhaseTime]]) -> PhaseTime:
    """The expected phase over micro-batch counts drawn with the given probabilities (``dynamic_micro_batches``):
    seconds and terms averaged, the bound of the likeliest count."""
    terms: dict[str, float] = {}
    for p, t in timed:
        for k, v in t.terms.items():
            terms[k] = terms.get(k, 0.0) + p * v
    likeliest = max(timed, key=lambda pt: pt[0])[1]
    return PhaseTime(name, sum(p * t.seconds for p, t in timed), likeliest.bound, terms)


def _hsdp_shard_of(card: RunCard, sharding: Sharding) -> int:
    """Strategy hsdp: the ranks one parameter is sharded over, the memory's ``sharding.shard_group``
    (``parallel.hsdp_shard_size``, else the training GPUs of one host, ``hardware.gpus_per_node``, also on GB200
    NVL72 where the collectives' "node" is the 72-GPU NVLink domain: the frameworks build the group per host, FSDP1
    ``HYBRID_SHARD`` from ``device_count()``, pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb
    ``torch/distributed/fsdp/_init_utils.py`` l. 162, and verl / torchtitan pass ``init_device_mesh`` a
    ``(replicate, shard)`` shape, ``compute.training.hsdp_links``); 0 for every other strategy."""
    return sharding.shard_group if card.parallel.strategy is Strategy.HSDP else 0


def rl_step_time(card: RunCard, spec: ModelSpec, gpu: GpuSpec, sharding: Sharding, rollout, r: DeviceRates) -> StepTiming:
    from trainfit.methods.rl import critic_spec_of

    ro = card.rollout
    train_gpus, _ = group_sizes(card)
    per_node = nvlink_gpus_per_node(gpu.id, train_nodes(card)[1], train_gpus)
    seqs = ro.prompts_per_step * ro.num_generations
    seqs_per_gpu = ceil(seqs / train_gpus)
    # a card may say the run did not pack (NeMo RL with policy.sequence_packing.enabled false: the Megatron worker
    # slices the batch's right-padded [batch, longest] tensor into micro-batches and runs each at that length,
    # NVIDIA-NeMo/RL v0.5.0 6c7089300fded94abfa49bb9cbf9eb357d862461
    # nemo_rl/models/policy/workers/megatron_policy_worker.py l.1051, l.1129, l.1159-1161 (update) and
    # l.1303-1312, l.1457-1459 (log-probs))
    # a token budget (verl's dynamic batching) packs its micro-batches whatever the preset (spec.card refuses it with
    # packed_sequences false)
    budgeted = ro.max_tokens_per_micro_batch is not None or ro.logprob_max_tokens_per_micro_batch is not None
    packed = (card.preset in PACKING_PRESETS or budgeted) if ro.packed_sequences is None else ro.packed_sequences
    mean = response_mean(card, spec)
    prompt = prompt_mean(card)
    seq_len = int(prompt + mean) if packed else ro.prompt_len + ro.response_len
    notes = [f"RL sequences: {seqs} per step, {seqs_per_gpu} per training GPU at {seq_len} tokens"
             + (" (packed: mean prompt + mean response)" if packed else " (padded to max prompt + max response)")]
    if generated_prompts(card) != ro.prompts_per_step:
        notes.append(f"generation: {generated_prompts(card)} prompts x {ro.num_generations} generated per step"
                     f" (rollout.generated_prompts_per_step), {ro.prompts_per_step} of them trained")
    if not ro.response_len_mean:
        prof = length_profile(card, spec)
        how = ("rollout.length_profile auto: by the model name" if ro.length_profile == "auto"
               else f"rollout.length_profile {ro.length_profile.value}")
        notes.append(f"mean response not given: {mean:.0f} tokens, the '{prof.name}' length profile ({how}; natural "
                     f"mean {prof.natural_mean_tokens:.0f} tokens, truncated at {ro.response_len}; set "
                     "rollout.response_len_mean, or rollout.length_profile short_answer | cot | long_cot)")
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
    if gen is None and rollout is not None and not rollout.engine_fits:
        notes.append("the rollout engine does not fit (memory): the step time leaves generation out")
    if ro.reward_seconds_per_sample:
        s = generated_prompts(card) * ro.num_generations * ro.reward_seconds_per_sample / ro.reward_workers
        gen_side.append(_phase("reward", s, "host", per_sample=ro.reward_seconds_per_sample))

    # frozen passes on the training GPUs
    compile_ = fused_kernels(card)
    # HSDP: the memory's shard group (hsdp_shard_size, else a host's training GPUs), not the NVLink domain
    par = Parallel(strategy=card.parallel.strategy.value, ranks=train_gpus, gpus_per_node=per_node,
                   nic_bytes_per_s=nic_bytes_per_s(card), hsdp_shard=_hsdp_shard_of(card, sharding),
                   fsdp2=card.parallel.fsdp2)
    lp_mbs_max = ro.logprob_micro_batch_size or card.batch.micro_batch_size
    eager = attn.runs_eager(spec.family, card.attention) and spec.num_full_attention_layers > 0
    frozen_w = _engine_weight_bytes(spec)

    cp = card.parallel.context_parallel
    mp = model_parallel_of(card, spec, r, gpus_per_node=per_node)
    fp8 = card.precision.compute is ComputeDtype.FP8

    lp_rows = _pipeline_packing(card, row_tokens=ro.packed_logprob_row_tokens, sequences=seqs, prompt_tokens=prompt,
                                response_mean_tokens=mean, train_gpus=train_gpus) if packed else None
    if lp_rows is not None:
        notes.append(f"log-prob passes: packed rows of {lp_rows[1]} tokens under pipeline parallel, {lp_rows[0]} per"
                     " data-parallel rank, each padded to the longest (plan.rl_time.pipeline_packed_rows)")

    # verl dynamic batching (rollout.max_tokens_per_micro_batch / logprob_max_tokens_per_micro_batch): micro-batch
    # counts from the token budget, the largest of the data-parallel ranks (dynamic_micro_batches)
    from trainfit.methods.rl import critic_token_budget, logprob_token_budget

    lp_budget = logprob_token_budget(card)
    up_budget = ro.max_tokens_per_micro_batch
    spread = sequence_token_spread(card, spec) if (lp_budget or up_budget) else 0.0
    dp_ranks = max(1, train_gpus // max(1, card.parallel.model_parallel))
    if lp_budget is not None and packed:
        notes.append(f"log-prob passes: dynamic batching, packed micro-batches of at most {lp_budget} tokens per GPU;"
                     f" each rank runs the largest count of the {dp_ranks} data-parallel ranks"
                     " (plan.rl_time.dynamic_micro_batches)")

    def forward_pass(name: str, pspec: ModelSpec, adapter=None, sequences: int = seqs,
                     budget: int | None = lp_budget) -> PhaseTime:
        # ``sequences``: the step's sequences this pass runs (the reward model scores every generated one);
        # ``budget``: its token budget per GPU under dynamic batching (the critic's values pass has its own)
        p_ = card.parallel
        rows = lp_rows if sequences == seqs else _pipeline_packing(
            card, row_tokens=ro.packed_logprob_row_tokens, sequences=sequences, prompt_tokens=prompt,
            response_mean_tokens=mean, train_gpus=train_gpus) if packed else None
        shard = rank_spec(pspec, tp=p_.tensor_parallel, pp=p_.pipeline_parallel, ep=p_.expert_parallel,
                          etp=p_.expert_tensor_parallel, first=p_.pipeline_first_stage_layers,
                          last=p_.pipeline_last_stage_layers, layout=p_.pipeline_layout)

        def timed(micro_: int, mbs_: int, rank_seq_: int, context_: float | None) -> PhaseTime:
            return timed_pass(name, pspec, adapter, shard, micro_, mbs_, rank_seq_, context_)

        rank_seqs = ceil(sequences / train_gpus) * p_.tensor_parallel * p_.pipeline_parallel * cp
        micro, lp_mbs = balanced_micro_batches(rank_seqs, lp_mbs_max)
        rank_seq = max(1, seq_len // cp)
        context = seq_len if cp > 1 else None
        if rows is not None:  # NeMo RL packed rows under pipeline parallel (pipeline_packed_rows)
            micro, lp_mbs, rank_seq = rows[0], 1, max(1, rows[1] // cp)
            context = seq_len  # attention runs per sequence inside the row (THD), the mean sequence's span
        if budget is not None and packed:
            # verl dynamic batching: the largest rank's micro-batch count, each a packed row of total / count tokens
            counts = dynamic_micro_batches(sequences=rank_seqs, token_mean=seq_len, token_std=spread,
                                           budget_tokens=budget * cp, data_parallel=dp_ranks)
            return _weighted(name, [(pr, timed(k, 1, max(1, round(rank_seqs * seq_len / k) // cp), seq_len))
                                    for k, pr in counts])
        return timed(micro, lp_mbs, rank_seq, context)

    def timed_pass(name: str, pspec: ModelSpec, adapter, shard, micro: int, lp_mbs: int, rank_seq: int,
                   context: float | None) -> PhaseTime:
        p_ = card.parallel
        t = forward_only_time(
            shard, rates=r, micro_batch_size=lp_mbs, seq_len=rank_seq, micro_steps=micro,
            adapter=adapter, eager_attention=eager, parallel=par, gathered_weight_bytes=frozen_w,
            count_scale=count_scale(pspec), memory_factor=COMPILE_MEMORY_FACTOR if compile_ else 1.0,
            kernel_factor=COMPILE_KERNEL_FACTOR if compile_ else 1.0,
            attention_context=context,
            # the same expert-parallel routing and dispatch work as the training pass (compute.moe_time)
            expert_parallel=mp.ep, expert_token_shards=expert_token_shards(
                tp=mp.tp, etp=mp.etp, ep=mp.ep, sequence_parallel=mp.sequence_parallel),
            # a model trained in fp8 runs its log-prob forwards in fp8 as well (the same linears)
            fp8=fp8, fp8_weight_cache=fp8 and card.precision.fp8_recipe in TE_ONLY_FP8_RECIPES,
            fp8_params=fp8 and card.precision.fp8_params,  # fp8 primary weights: no weight casts
            packed_flash_syncs=packed_flash_syncs(card), expert_loop=p_.moe_experts.is_loop,
            expert_loop_every=p_.moe_experts is MoeExperts.LOOP_ALL,
            zero3_expert_leaf=p_.moe_zero3_leaf, hooked_units=_fsdp_hooked_units(card, pspec, ranks=train_gpus),
            # FSDP2's all-gather copy-out on the compute stream (no copy-in: no gradients), every micro-batch for the
            # resharded layers, NeMo RL's too (_fsdp_hooked_units)
            fsdp2_copies=p_.fsdp2,
            # the fused attention kernel the card states (compute.attention_time; its note is the actor's)
            attention_kernel=attention_kernel_of(card, r, eager=eager)[0],
            # NeMo RL Megatron's packed get_logprobs head (compute.inventory.NEMO_RL_PG_LOSS "megatron_logprob")
            nemo_rl_loss="megatron_logprob" if (nemo_rl_pg_loss_of(card) == "megatron" and packed
                                                and p_.strategy not in FSDP_STRATEGIES) else "",
            loss_sequences=(lp_mbs * (rank_seq * cp / context if context else 1.0)),
            # verl's log-probs from flash-attn's kernel (loss.kernel flash_attn): its bytes, as the update's head
            fused_cross_entropy=card.loss.kernel is LossKernel.FLASH_ATTN,
            # the layers the training pass prices (plan.time.training_time): Megatron-Core's TEGroupedMLP,
            # grouped_gemm's gmm, and no head on a timed pipeline rank that holds none
            megatron_experts=p_.tensor_parallel_impl is TensorParallelImpl.MEGATRON,
            # ... whose TE grouped linears loop over their GEMMs in Python (compute.te_host)
            te_layers=p_.tensor_parallel_impl is TensorParallelImpl.MEGATRON,
            expert_streams=p_.moe_experts is MoeExperts.GROUPED_STREAMS,
            head=timed_rank_holds_head(pspec, p_.pipeline_parallel, p_.pipeline_layout),
            # verl's old-policy pass (and before verl #1100 the reference's) also takes the entropy of the rank's
            # packed logits (loss.logprob_entropy, compute.inventory.VERL_ENTROPY_COMPILED_BYTES)
            **(dict(entropy_bytes_per_logit=VERL_ENTROPY_COMPILED_BYTES, entropy_kernels=VERL_ENTROPY_COMPILED_KERNELS)
               if _takes_entropy(card, name) else {}),
            # Megatron-Core's thd RoPE loop and Transformer Engine's a2a thd reorders run in a no-grad forward as in
            # the training pass (plan.time.training_time), counted over the whole row of rank_seq x cp tokens
            rope_loop_samples=rope_loop_samples_of(card, micro_batch_size=lp_mbs, seq_len=rank_seq * cp),
            rope_loop_context_parallel=cp,
            a2a_thd_sequences=a2a_thd_sequences_of(card, micro_batch_size=lp_mbs, seq_len=rank_seq * cp),
        )
        comm = 0.0
        if mp.active:
            c = model_parallel_comm_of(shard, mp, tokens=lp_mbs * rank_seq, rates=r, recompute=False)
            comm = micro * c.total_s / 2  # forward only: half of forward + backward
            comm += pipeline_bubble_micro_steps(pp=mp.pp, virtual_stages=mp.virtual_stages) * t.seconds / micro
        return _phase(name, t.seconds + comm, t.bound, gemm=t.gemm_s, attention=t.attention_s,
                      memory_bound=t.memory_s, host_launch=t.host_s, model_parallel=comm)

    adapter = adapter_of(card, spec)
    if old_logprob_pass(card):
        phases.append(forward_pass("old_logprob", spec, adapter))
    ref = reference_placement(card)
    if ref not in (RefPlacement.NONE, RefPlacement.PRECOMPUTED) and kl_coef(card) > 0:
        phases.append(forward_pass("ref_logprob", spec, adapter if ref is RefPlacement.LORA_DISABLED else None))
        if ref is RefPlacement.HOST_SWAP:
            phases.append(reference_swap_phase(card, spec, r, train_gpus=train_gpus,
                                               shard_ranks=_hsdp_shard_of(card, sharding) or train_gpus))
    cspec = critic_spec_of(card, spec)
    if cspec is not None:
        # the critic's values pass under its own budget when the card gives one (methods.rl.critic_token_budget:
        # verl's critic.forward_max_token_len_per_gpu, by default its ppo_max_token_len_per_gpu)
        c_values_budget = critic_token_budget(card, values=True)
        if ro.critic_max_tokens_per_micro_batch is not None and packed:
            notes.append(f"critic: dynamic batching under its own budget, packed micro-batches of at most"
                         f" {c_values_budget} tokens per GPU in the values pass and the update"
                         " (rollout.critic_max_tokens_per_micro_batch)")
        phases.append(forward_pass("critic_values", cspec, adapter, budget=c_values_budget))
    rm_id = reward_model(card)
    if rm_id not in (None, "rule", "none"):
        from trainfit.catalog.models import resolve_model

        # the reward model's own shape when the card names another model (DeepSpeed-Chat: OPT-350M)
        rm_spec = spec if rm_id == spec.name else resolve_model(rm_id)
        # every generated group is scored, the ones dynamic sampling then drops too (generated_prompts)
        phases.append(forward_pass("reward_model", replace(rm_spec, head_outputs=1),
                                   sequences=generated_prompts(card) * ro.num_generations))

    # updates: the rollout batch in ``mini_batches`` optimizer steps, each of micro-batches
    mbs = card.batch.micro_batch_size
    replica = card.parallel.model_parallel  # GPUs one model replica spans (tp x cp x pp)
    ga, mbs = balanced_micro_batches(ceil(seqs_per_gpu * replica / ro.mini_batches), mbs)
    opt_steps = ro.mini_batches * ro.num_iterations
    work_cv = update_work_cv(card, spec, micro_batch_sequences=mbs * ga)
    update_len, update_context = seq_len, None
    padded_rows = nemo_rl_dtensor_padded_rows(card)
    rows = _pipeline_packing(card, row_tokens=ro.packed_row_tokens, sequences=ceil(seqs / ro.mini_batches),
                             prompt_tokens=prompt, response_mean_tokens=mean, train_gpus=train_gpus,
                             padded_rows=padded_rows) if packed else None
    if rows is not None:  # NeMo RL packed rows under pipeline parallel (pipeline_packed_rows)
        ga, mbs, update_len, update_context = rows[0], 1, rows[1], seq_len
        notes.append(f"update: packed rows of {rows[1]} tokens, {rows[0]} per data-parallel rank, "
                     + ("each padded to the capacity (plan.rl_time.nemo_rl_dtensor_padded_rows)" if padded_rows else
                        "under pipeline parallel, each padded to the longest (plan.rl_time.pipeline_packed_rows)"))
    # the update's (count, probability, sequences, row tokens, attention span) shapes: one fixed shape, or verl's
    # dynamic batching (dynamic_micro_batches) over a packed row of the rank's tokens / count
    shapes = [(ga, 1.0, mbs, update_len, update_context)]
    dynamic = up_budget is not None and packed and rows is None
    rank_seqs = ceil(seqs_per_gpu * replica / ro.mini_batches)

    def budget_shapes(budget: int) -> list[tuple[int, float, int, int, int]]:
        counts_ = dynamic_micro_batches(sequences=rank_seqs, token_mean=seq_len, token_std=spread,
                                        budget_tokens=budget * card.parallel.context_parallel,
                                        data_parallel=dp_ranks)
        return [(k, pr, 1, max(1, round(rank_seqs * seq_len / k)), seq_len) for k, pr in counts_]

    critic_shapes = shapes
    if dynamic:
        shapes = budget_shapes(up_budget)
        counts = [(k, pr) for k, pr, *_ in shapes]
        critic_shapes = shapes
        if ro.critic_max_tokens_per_micro_batch is not None:  # the critic's own budget (critic_token_budget)
            critic_shapes = budget_shapes(critic_token_budget(card))
        expected = sum(k * pr for k, pr in counts)
        notes.append(f"update: dynamic batching, {rank_seqs} sequence(s) of {seq_len} tokens per data-parallel rank"
                     f" and optimizer step in packed micro-batches of at most {up_budget} tokens per GPU; the largest"
                     f" count of the {dp_ranks} ranks, {expected:.2f} expected ("
                     + ", ".join(f"{k}: {pr:.0%}" for k, pr in counts) + ")")

    def update(name: str, pspec: ModelSpec, shapes_=shapes):
        timed = [(pr, training_time(card, pspec, r, ranks=train_gpus, gpus_per_node=per_node, micro_batch_size=b,
                                    seq_len=length, micro_steps=k, work_cv=work_cv, attention_context=context))
                 for k, pr, b, length, context in shapes_]
        phase = _weighted(name, [(pr, _phase(name, t.total_s * opt_steps, t.bound,
                                             **{p.name: p.seconds * opt_steps for p in t.phases}))
                                 for pr, t in timed])
        return phase, max(timed, key=lambda pt: pt[0])[1]

    actor_phase, actor = update("actor_update", spec)
    phases.append(actor_phase)
    if cspec is not None:
        phases.append(update("critic_update", cspec, critic_shapes)[0])
    if not dynamic:
        notes.append(f"{opt_steps} optimizer step(s) per RL step (rollout.mini_batches x num_iterations),"
                     f" {ga} micro-batch(es) of {mbs} sequence(s) each")
    else:
        notes.append(f"{opt_steps} optimizer step(s) per RL step (rollout.mini_batches x num_iterations)")

    if card.preset == "verl":
        gen_side, phases = verl_controller_phases(card, gen_side, phases, receivers=dp_ranks,
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
    return StepTiming(total, tokens, tuple(gen_side + phases), tuple(notes) + actor.assumptions)


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
            entropy=_takes_entropy(card, "old_logprob"), reference=reference, critic=critic)
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


def update_work_cv(card: RunCard, spec: ModelSpec, *, micro_batch_sequences: int) -> float:
    """Relative spread of one update micro-batch's tokens across the data-parallel ranks of a verl FSDP trainer
    (``compute.collectives`` module docstring, "Unequal work": each optimizer step's share of a rank is a random
    draw of responses, and the FSDP ranks run every layer in lockstep): the card's response-length distribution
    (``compute.response_lengths``) gives a sequence's token spread, ``micro_batch_sequences`` draws make a
    micro-batch. 0 for other frameworks and strategies (not read), and for padded sequences (a fixed length).
    The caller passes the rank's whole optimizer-step share: with dynamic batching verl balances the micro-batches
    inside one rank (``rearrange_micro_batches``), so each spreads as that share does; fixed micro-batches spread
    more (``cv/sqrt(micro-batch)``), which the card cannot tell apart, so this is the lower of the two."""
    if not verl_fsdp_workers(card):
        return 0.0
    from trainfit.compute.collectives import micro_batch_token_cv
    from trainfit.compute.response_lengths import response_length_groups

    ro = card.rollout
    mean = response_mean(card, spec)
    groups = response_length_groups(shape=ro.response_len_shape, response_len_max=ro.response_len,
                                    response_len_mean=mean, sequences=4096)
    spread = sum(w * (length - mean) ** 2 for length, w in groups) ** 0.5
    return micro_batch_token_cv(sequence_tokens_cv=spread / (prompt_mean(card) + mean), sequences=micro_batch_sequences)


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


def _engine_weight_bytes(spec: ModelSpec) -> float:
    """The whole model in bf16, as the engine holds and the sync sends it."""
    return weight_bytes(spec, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base


def quantized_engine_inputs(card: RunCard, spec: ModelSpec, r: DeviceRates) -> dict[str, float]:
    """What ``rollout.quantization`` changes in the engine's generation time (``compute.generation``): the weight
    bytes one rank reads per decode step (1-byte fp8 linears and experts with their block scales,
    ``rollout.quantization``), the routed experts' bytes per weight, and the rate of the per-token matmuls: the fp8
    GEMMs at ``fp8_matmul_flops_per_s``, the head and the bf16 modules at the bf16 rate
    (``rollout.quantization.linear_flops_per_s``). Empty without quantization (bf16 defaults)."""
    from trainfit.rollout import quantization as q

    ro = card.rollout
    if not q.is_quantized(ro.quantization):
        return {}
    kept = tuple(ro.quantization_bf16_modules)
    share = q.fp8_matmul_share(spec, quantization=ro.quantization, bf16_modules=kept)
    return {
        "rank_weight_bytes": q.card_engine_rank_bytes(card, spec),
        "expert_bytes_per_param": q.routed_expert_bytes_per_param(spec, quantization=ro.quantization,
                                                                  bf16_modules=kept),
        "linear_flops_per_s": q.linear_flops_per_s(bf16_flops_per_s=r.matmul_flops_per_s,
                                                   fp8_flops_per_s=r.fp8_matmul_flops_per_s, fp8_share=share),
    }


def _kv_pool(rollout) -> dict[str, float | None]:
    """The engine's KV capacity as ``generation_time`` admits sequences into it: vLLM's logged token capacity, or
    for a hybrid model the attention tokens of its usable blocks with each sequence's state blocks on top
    (``methods.rl.RolloutSummary.state_tokens_per_seq``)."""
    if rollout.state_tokens_per_seq:
        return {"kv_capacity_tokens": rollout.attention_kv_capacity_tokens,
                "state_tokens_per_seq": rollout.state_tokens_per_seq}
    return {"kv_capacity_tokens": rollout.kv_capacity_tokens or None}


def generated_prompts(card: RunCard) -> int:
    """Prompts the engine generates per step: ``rollout.generated_prompts_per_step`` where the trainer keeps only
    ``prompts_per_step`` of them (DAPO dynamic sampling: NeMo RL's dataloader batch is ``num_prompts_per_step x
    batch_multiplier`` prompts, each generation batch is generated whole and the groups whose rewards all agree are
    dropped, NVIDIA-NeMo/RL nemo_rl/algorithms/grpo.py setup l.256-264 and dynamic_sampling l.766-892
    @9dbd9adc95a10f5946cceb36e1d5b31e2429e470), else ``prompts_per_step``."""
    ro = card.rollout
    return ro.generated_prompts_per_step or ro.prompts_per_step


def generation_phase(card: RunCard, spec: ModelSpec, gpu: GpuSpec, rollout, r: DeviceRates) -> PhaseTime | None:
    """The rollout engine's time for the step's prompts (None when the engine cannot start)."""
    if card.rollout.engine is RolloutEngine.DEEPSPEED_HYBRID:
        return hybrid_generation_phase(card, spec, gpu, r)
    if rollout is None or not rollout.engine_fits:
        return None
    from trainfit.compute.decode_step import tp_link
    from trainfit.compute.flops import matmul_params
    from trainfit.compute.generation import generation_time

    ro = card.rollout
    engine_per_node = rollout_nodes(card)[1]
    link = tp_link(rates=r, tp=ro.tensor_parallel, engine_gpus_per_node=engine_per_node,
                   nic_bytes_per_s=nic_bytes_per_s(card), gpu_id=gpu.id, framework=card.preset)
    g = generation_time(
        spec=spec, matmul_params=matmul_params(spec), rates=r, tp=ro.tensor_parallel, prompts=generated_prompts(card),
        samples_per_prompt=ro.num_generations, prompt_len=ro.prompt_len, prompt_len_mean=prompt_mean(card),
        response_len_max=ro.response_len, response_len_mean=response_mean(card, spec), response_len_shape=ro.response_len_shape,
        weight_bytes=_engine_weight_bytes(spec), kv_bytes_per_token=rollout.kv_bytes_per_token * ro.tensor_parallel,
        max_num_seqs=ro.max_num_seqs, **_kv_pool(rollout),
        cuda_graphs=ro.cuda_graphs, engines=max(1, rollout.engine_instances),
        streaming=ro.async_mode is AsyncMode.FULLY_ASYNC, tp_link=link, engine_multiprocess=ro.engine_multiprocess,
        engine_generation=str(ro.vllm_engine) if ro.engine is RolloutEngine.VLLM else "v1",  # v0 is vLLM's alone
        cumulative_outputs=None if ro.engine_outputs is None else ro.engine_outputs is EngineOutputs.CUMULATIVE,
        **quantized_engine_inputs(card, spec, r),
    )
    bound = {"bandwidth": "memory"}.get(g.bound, g.bound)
    return _phase("generation", g.total_s, bound, prefill=g.prefill_s, decode=g.decode_s, long_tail=g.tail_s,
                  tp_all_reduce=g.tp_comm_s, preemption_recompute=g.preemption_recompute_s)


def hybrid_generation_phase(card: RunCard, spec: ModelSpec, gpu: GpuSpec, r: DeviceRates) -> PhaseTime:
    """DeepSpeed-Chat's generation through DeepSpeed's Hybrid Engine (``compute.hybrid_engine``): every training GPU
    generates its share of the step's generated prompts (``generated_prompts``) in static batches of ``max_num_seqs / tensor_parallel`` prompts per GPU
    (``per_device_generation_batch_size``), the actor's ZeRO-3 partitions gathered before every call."""
    from trainfit.compute.flops import matmul_params
    from trainfit.compute.hybrid_engine import hybrid_engine_generation_time
    from trainfit.rollout.vllm import kv_bytes_per_token

    ro = card.rollout
    train_gpus, _ = group_sizes(card)
    tp = ro.tensor_parallel
    weights = _engine_weight_bytes(spec)
    # the embeddings every rank keeps whole (the hybrid engine's non-tensor-parallel parameters; the tied head
    # reads the token embedding each step) and the learned positions where the model has them
    embed = spec.vocab_size * spec.hidden_size * (1 if spec.tie_word_embeddings else 2)
    replicated = min(weights, 2.0 * (embed + spec.learned_positions * spec.hidden_size))
    multi_node = card.hardware.nodes > 1
    bus = min(r.intra_node_bus_bytes_per_s, nic_bytes_per_s(card)) if multi_node else r.intra_node_bus_bytes_per_s
    tp_bus = r.intra_node_bus_bytes_per_s if tp <= card.hardware.gpus_per_node else nic_bytes_per_s(card)
    g = hybrid_engine_generation_time(
        rates=r, sequences_per_gpu=ceil(generated_prompts(card) * ro.num_generations / train_gpus),
        generation_batch_per_gpu=max(1, ro.max_num_seqs // tp), prompt_len_tokens=ro.prompt_len,
        response_len_tokens=ro.response_len, num_layers=spec.num_layers, hidden_size=spec.hidden_size,
        matmul_params=matmul_params(spec), layer_weight_bytes=weights - replicated, replicated_weight_bytes=replicated,
        kv_bytes_per_token=kv_bytes_per_token(spec, tp=1, dtype_bytes=2), inference_tp=tp,
        zero3_ranks=train_gpus if card.parallel.strategy is Strategy.ZERO3 else 1, gather_bus_bytes_per_s=bus,
        tp_bus_bytes_per_s=tp_bus, tp_nodes=max(1, ceil(tp / card.hardware.gpus_per_node)),
        zero3_nodes=max(1, ceil(train_gpus / card.hardware.gpus_per_node)),
    )
    bound = {"bandwidth": "memory", "host": "launch"}.get(g.bound, g.bound)
    return _phase("generation", g.total_s, bound, zero3_gather=g.gather_s, prefill=g.prefill_s, decode=g.decode_s)


def sync_phase(card: RunCard, spec: ModelSpec, gpu: GpuSpec, sharding: Sharding, rollout, r: DeviceRates) -> PhaseTime | None:
    """Trainer -> engine weights as the card's framework does it (``compute.sync``); none for DeepSpeed's Hybrid
    Engine, which generates on the trainer's own (gathered) weights (its gather is in the generation phase)."""
    if rollout is None or card.rollout.engine is RolloutEngine.DEEPSPEED_HYBRID:
        return None
    from trainfit.compute.sync import (
        NEMO_RL_BRIDGE_SINCE,
        SyncMechanism,
        export_staging_seconds,
        framework_sync_mechanism,
        fsdp1_state_dict_units,
        hf_tensor_bytes,
        hf_tensor_count,
        megatron_export_gather,
        sglang_tensor_request_seconds,
        weight_sync_seconds,
    )
    from trainfit.rollout.quantization import FP8_CAST_BYTES_PER_PARAM, refit_cast_params

    ro = card.rollout
    if ro.weight_transport is not WeightTransport.FRAMEWORK:
        return _transport_sync_phase(card, spec, gpu, sharding, rollout, r)
    chosen = ro.weight_sync if "weight_sync" in ro.model_fields_set else None
    fs = framework_sync_mechanism(card.preset or "trl", ro.placement.value, chosen, engine=ro.engine)
    sharded = card.parallel.strategy.value in ("zero3", "fsdp", "hsdp", "fsdp_grad_op")
    train_gpus, _ = group_sizes(card)
    p = card.parallel
    # the ranks a parameter is sharded over: HSDP's shard group, else every training GPU
    shard_ranks = _hsdp_shard_of(card, sharding) or train_gpus
    # NeMo RL's Megatron backend exports through Megatron-Bridge: every training rank receives every tensor over its
    # PP/TP/EP groups, whose "node" is the NVLink domain (GB200 NVL72); its DTensor backend is the sharded gather
    # a card pinned to NeMo RL before v0.4 (``software.nemo-rl``) runs v0.3's own gather_params on the colocated
    # CUDA-IPC refit, the path read (compute.sync.NEMO_RL_V03_GATHER); its NCCL path is not read here, so any other
    # mechanism keeps Megatron-Bridge's export
    v03 = (ro.placement is Placement.COLOCATE and fs.mechanism is SyncMechanism.COLOCATED_CUDA_IPC
           and pin_before((card.software.model_extra or {}).get("nemo-rl"), NEMO_RL_BRIDGE_SINCE))
    export = None if fs.framework != "nemo-rl" or sharded else megatron_export_gather(
        spec=spec, tp=p.tensor_parallel, pp=p.pipeline_parallel, ep=p.expert_parallel, etp=p.expert_tensor_parallel,
        world=train_gpus, gpus_per_node=nvlink_gpus_per_node(gpu.id, train_nodes(card)[1], train_gpus), rates=r,
        nic_bytes_per_s=nic_bytes_per_s(card), v03_gather=v03)
    # verl's FSDP engines all-gather each fp32 shard and cast it to bf16 after (compute.sync: gathers_trainer_dtype)
    from trainfit.plan.resolve import trainable_spec
    from trainfit.plan.terms import trained_dtype_bytes
    fp32 = card.weights_dtype is Dtype.FP32 or trained_dtype_bytes(card)[2]
    gather_fp32 = fs.gathers_trainer_dtype and sharded and fp32 and trainable_spec(card).lora is None
    trainer_dtype_bytes = weight_bytes(spec, weights=Dtype.FP32 if fp32 else Dtype.BF16, compute=ComputeDtype.BF16,
                                       trainable=TrainableSpec()).base
    # verl's FSDP1 export: state_dict() all-gathers every FSDP unit before the per-tensor gathers (compute.sync)
    unshard_units = fsdp1_state_dict_units(spec) if (
        fs.unshards_fsdp1_state_dict and sharded and card.parallel.strategy in FSDP_STRATEGIES
        and card.parallel.fsdp_version is FsdpVersion.FSDP1 and trainable_spec(card).lora is None) else 0
    # verl's checkpoint engine on a split placement: a trainer with its parameters offloaded streams each rank's shard
    # back from host memory for the export (compute.sync.export_staging_seconds); colocated, the state_offload phase
    # already brings the weights back for the sync. FSDP2's shard lies in pageable memory (``model.cpu()``), FSDP1's
    # pinned (``flat_param_to(cpu, non_blocking=True)``): compute.offload, "Pinned or pageable host memory"
    staging = export_staging_seconds(
        shard_bytes_per_rank=trainer_dtype_bytes / shard_ranks,
        host_copy_bytes_per_s=_host_copy_rates(card, r, gpu)[1 if p.fsdp2 else 0],
    ) if (fs.framework == "verl" and fs.broadcasts_whole_bucket and card.parallel.strategy in FSDP_STRATEGIES
          and card.parallel.offload is Offload.PARAMS_AND_OPTIMIZER) else 0.0
    t = weight_sync_seconds(
        gather_bytes=trainer_dtype_bytes if gather_fp32 else None,
        mechanism=fs.mechanism, weight_bytes=_engine_weight_bytes(spec), num_tensors=hf_tensor_count(spec),
        # HSDP gathers a tensor over its shard group only: ``full_tensor()`` (verl get_per_tensor_param, compute.sync)
        # is ``redistribute([Replicate()] * ndim)``, and on the (Replicate(), Shard(0)) mesh the replicate dim is
        # skipped (``current == target``) and the shard dim all-gathered (pytorch/pytorch
        # @cf30153c4c131c8164ee7798e5022d810682e2cb torch/distributed/tensor/_api.py l. 748-776, _redistribute.py
        # l. 1625-1628; volcengine/verl @b178a3cd56f58b2d502255daba591e92833930a7
        # verl/workers/engine/fsdp/transformer_impl.py l. 666-669)
        train_shards=shard_ranks if sharded else 1, tp=ro.tensor_parallel, rates=r,
        engines=max(1, rollout.engine_instances), inter_node=card.hardware.nodes > 1,
        gpus_per_node=card.hardware.gpus_per_node, nic_bytes_per_s=nic_bytes_per_s(card),
        bucket_bytes=fs.bucket_bytes, s_per_tensor=fs.s_per_tensor,
        sender_node_ranks=train_nodes(card)[1] if fs.trainer_ranks_in_group else 1,
        trainer_group_ranks=train_gpus if fs.trainer_ranks_in_group else 1,
        # an fp8 engine receives bf16 and casts every fp8 weight whole on each rank (rollout.quantization)
        receiver_cast_params=refit_cast_params(spec, quantization=ro.quantization,
                                               bf16_modules=tuple(ro.quantization_bf16_modules)),
        receiver_cast_bytes_per_param=FP8_CAST_BYTES_PER_PARAM, trainer_gather=export,
        # verl's checkpoint engine fills its buckets in state_dict order and broadcasts each whole (compute.sync)
        tensor_bytes=hf_tensor_bytes(spec) if fs.broadcasts_whole_bucket else None,
        whole_bucket=fs.broadcasts_whole_bucket, export_staging_s=staging, unshard_units=unshard_units,
        # verl into SGLang: each bucket's request carries tp copies of tp CUDA-IPC handles per tensor (compute.sync)
        request_s=sglang_tensor_request_seconds(num_tensors=hf_tensor_count(spec), tp=ro.tensor_parallel)
        if fs.sglang_tensor_requests else 0.0,
    )
    return _phase("weight_sync", t.total_s, "communication", gather=t.gather_s, transfer=t.transfer_s,
                  per_tensor=t.per_tensor_s, staging=t.staging_s)


def _transport_sync_phase(card: RunCard, spec: ModelSpec, gpu: GpuSpec, sharding: Sharding, rollout,
                          r: DeviceRates) -> PhaseTime:
    """The weight sync of a ``rollout.weight_transport`` other than the framework's own path (``compute.sync``):
    NeMo RL's NCCL reshard refit (``nccl_reshard_seconds``) or checkpoint-engine's Broadcast update
    (``checkpoint_engine_seconds``). What the transports refuse, the card refuses (``spec.card._check_weight_transport``)."""
    from trainfit.compute.sync import (
        checkpoint_engine_bucket_bytes,
        checkpoint_engine_seconds,
        fp8_scale_tensor_count,
        hf_tensor_bytes,
        hf_tensor_count,
        nccl_reshard_seconds,
    )
    from trainfit.rollout.quantization import FP8_CAST_BYTES_PER_PARAM, engine_weight_bytes, is_quantized

    ro, p = card.rollout, card.parallel
    fp8 = is_quantized(ro.quantization)
    kept = tuple(ro.quantization_bf16_modules)
    wbytes = engine_weight_bytes(spec, quantization=ro.quantization, bf16_modules=kept) if fp8 else \
        _engine_weight_bytes(spec)
    engines = max(1, rollout.engine_instances)
    if ro.weight_transport is WeightTransport.NCCL_RESHARD:
        train_gpus, _ = group_sizes(card)
        t = nccl_reshard_seconds(
            spec=spec, weight_bytes=wbytes, train_tp=p.tensor_parallel, train_pp=p.pipeline_parallel,
            train_ep=p.expert_parallel, train_etp=p.expert_tensor_parallel, train_world=train_gpus,
            gen_tp=ro.tensor_parallel, gen_engines=engines, rates=r,
            gpus_per_node=nvlink_gpus_per_node(gpu.id, train_nodes(card)[1], train_gpus),
            inter_node=card.hardware.nodes > 1, nic_bytes_per_s=nic_bytes_per_s(card), fp8=fp8, fp8_kept=kept,
            sender_node_ranks=train_nodes(card)[1], fp8_cast_bytes_per_param=FP8_CAST_BYTES_PER_PARAM)
    else:
        ranks = engines * ro.tensor_parallel
        tensors = hf_tensor_count(spec) + (fp8_scale_tensor_count(spec, kept) if fp8 else 0)
        # the engine's GPUs copy the buckets and take the broadcast: split placement gives a node rollout.gpus of them
        engine_per_node = rollout_nodes(card)[1]
        # the largest tensor as the checkpoint holds it in bf16 (an fp8 checkpoint keeps its embedding and head bf16)
        largest = max(hf_tensor_bytes(spec) or (0.0,))
        t = checkpoint_engine_seconds(
            weight_bytes=wbytes, num_tensors=tensors, ranks=ranks, tp=ro.tensor_parallel,
            gpus_per_node=engine_per_node, rates=r,
            # the free memory beside vLLM's budget (gpu_memory_utilization) sizes the buckets, never below the
            # largest tensor (_detect_bucket_size)
            bucket_bytes=checkpoint_engine_bucket_bytes(free_bytes=gpu.memory_bytes * (1 - ro.gpu_memory_utilization),
                                                        max_tensor_bytes=largest),
            h2d_bytes_per_s=_host_copy_rates(card, r, gpu, gpus_per_node=engine_per_node)[0],
            nic_bytes_per_s=nic_bytes_per_s(card), finalize=fp8)
    return _phase("weight_sync", t.total_s, "communication", gather=t.gather_s, transfer=t.transfer_s,
                  per_tensor=t.per_tensor_s, staging=t.staging_s)


STATE_OFFLOAD_PRESETS = ("nemo-rl",)
"""Frameworks whose trainer moves its state to host memory and back every step when colocated with its engine
(NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470 ``nemo_rl/algorithms/grpo.py``
``refit_policy_generation`` lines 1004-1079: ``offload_before_refit`` and ``offload_after_refit`` around the
refit of a colocated engine only; ``prepare_for_lp_inference`` / ``prepare_for_training`` bring the state back)."""
STATE_OFFLOAD_OPTIMIZER_BYTES = 12
"""verl's Megatron offload per parameter of the rank's data-parallel shard: the distributed optimizer's fp32 main
parameter (``offload_megatron_copy_params``) and Adam's two fp32 moments (``offload_megatron_optimizer``:
``exp_avg``, ``exp_avg_sq``), verl-project/verl verl/utils/megatron_utils.py lines 663-776
@b9873ee98f5ee513a460a7a41623262ac4a831e9."""
NEMO_RL_MEGATRON_OPTIMIZER_BYTES = 10
"""NeMo RL's Megatron worker per parameter of the rank's data-parallel shard. ``move_optimizer`` moves the tensors
of the inner optimizer's ``state`` (megatron_policy_worker.py lines 1500-1515 @9dbd9adc); the defaults set
``use_precision_aware_optimizer: true`` (examples/configs/grpo_math_1B.yaml l.156, and the DeepSeek-V3
performance recipe), so that inner optimizer is Transformer Engine's FusedAdam with ``master_weights=True``
(NVIDIA/Megatron-LM megatron/core/optimizer/__init__.py lines 365-387 @e2e5a6a11bcc517ebd9490f0df32686aaee19d78,
the Megatron-LM of the same date) and its state holds ``exp_avg`` and ``exp_avg_sq`` in fp32 (4 + 4 B,
``optimizer_config.py`` ``exp_avg_dtype`` / ``exp_avg_sq_dtype`` defaults) and ``master_param`` as the int16
remainder of the fp32 master beside the bf16 parameter (2 B: ``store_param_remainders: bool = True``, same file;
NVIDIA/TransformerEngine transformer_engine/pytorch/optimizers/fused_adam.py ``_initialize_state`` l.374-375 @v2.8.0,
the version NeMo RL pins). Not verl's 12 B: there the fp32 main parameter is a separate tensor."""
NEMO_RL_DTENSOR_PARAM_BYTES = 4
"""NeMo RL's DTensor (FSDP2) worker keeps its parameter shards in fp32 whatever ``policy.precision`` says
("Always load in float32 for master weights", nemo_rl/models/automodel/setup.py l.126 @9dbd9adc; FSDP2 casts to
bf16 only for compute, ``param_dtype=dtype`` l.272)."""
NEMO_RL_DTENSOR_OPTIMIZER_BYTES = 8
"""``torch.optim.AdamW`` (grpo_math_1B.yaml ``policy.optimizer.name``) over those fp32 shards: ``exp_avg`` and
``exp_avg_sq``, 4 B each (``step`` is a host scalar)."""


def _fsdp_hooked_units(card: RunCard, spec: ModelSpec, *, ranks: int) -> int:
    """FSDP units whose forward hooks run in every log-prob micro-batch (``compute.training.forward_only_time``): one
    per decoder layer and the root (verl wraps the model's ``_no_split_modules``, FSDP1 with ``use_orig_params=False``:
    volcengine/verl verl/utils/fsdp_utils.py get_fsdp_wrap_policy l.64-85, verl/workers/fsdp_workers.py l.274
    @2c8b2b995f36a7cd159b5a9beb5d5ed37cae0fc1; l.73 and l.196 @b178a3cd56f58b2d502255daba591e92833930a7). None for an
    unsharded model.

    The nemo-rl preset's DTensor policy pays them too. Its ``get_logprobs`` runs the micro-batches inside
    ``unshard_fsdp2_model`` (NVIDIA-NeMo/RL nemo_rl/models/policy/dtensor_policy_worker.py l.77-88 and l.847
    @27d0af945b96c5bf9fa928bf45fd1a6ce016632d, v0.3.1; the same lines at v0.3.0), which calls ``unshard()`` on every
    FSDP module before the loop and ``reshard()`` after it. That does not keep the layers unsharded between
    micro-batches. ``_parallelize_model`` gives each decoder layer ``fully_shard`` with the default
    ``reshard_after_forward=True`` and only the root ``reshard_after_forward=False`` (nemo_rl/models/dtensor/
    parallelize.py l.476-489, same commit). FSDP2 runs every unit's pre-forward hook in every forward; ``unshard`` is a
    no-op only while the group is unsharded. Its post-forward hook calls ``reshard()``, which returns early in FORWARD
    only when ``_reshard_after_forward`` is False (pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb, the torch
    2.13.0 wheel, torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py ``unshard`` l.372-376, ``reshard``
    l.499-509, ``pre_forward`` l.540-555, ``post_forward`` l.557-566; ``_fsdp_state.py`` l.290-330 runs them for every
    forward). So the first micro-batch finds the layers gathered, every later one gathers them again, and every
    micro-batch pays the hooks. Keeping them requires ``reshard_after_forward=False``, whose runtime setter
    ``set_reshard_after_forward`` came in pytorch/pytorch pull request #149103, which answers issue #149029 (2025-03-12:
    "Since inference under no_grad consumes less memory, I want to set reshard_after_forward to False to save
    computation time"). NeMo RL v0.3.x does not call it."""
    if card.parallel.strategy not in FSDP_STRATEGIES or ranks <= 1:
        return 0
    return fsdp_units(spec)


def fsdp_offload_bytes(card: RunCard, spec: ModelSpec, *, shard_ranks: int) -> tuple[float, float, float]:
    """(weights, optimizer state, gradients) one FSDP rank moves to the host and back per offload round trip.

    verl's FSDP worker (volcengine/verl @2c8b2b99 verl/utils/fsdp_utils.py ``offload_fsdp_model_to_cpu``,
    ``offload_fsdp2_model_to_cpu``, ``offload_fsdp_optimizer``) moves each rank's *local shard* of the flat
    parameters, in the dtype the actor was built in (fsdp_workers.py l.178-180: fp32 for the actor unless
    ``model_dtype`` says otherwise: the card's master copy), and the optimizer's state tensors of that
    shard; gradients are not moved (``zero_grad`` has freed them). Not Megatron's layout (full bf16 weights
    of a model-parallel rank, a bf16 gradient buffer, the distributed optimizer's fp32 main copy)."""
    from trainfit.memory.lora import lora_trainable_params
    from trainfit.memory.optimizer import optimizer_state_bytes
    from trainfit.memory.params import param_tensors
    from trainfit.plan.resolve import trainable_spec
    from trainfit.plan.terms import lora_tensors, trained_dtype_bytes
    from trainfit.spec.enums import Optimizer

    train_bytes, _, use_master, state_bytes = trained_dtype_bytes(card)
    n = float(total_params(spec))
    lora = trainable_spec(card).lora
    opt = card.precision.optimizer
    if lora is None:
        weights = (4.0 if use_master else train_bytes) * n
        trained, tensors = n, param_tensors(spec)
    else:  # the frozen base in the weights' dtype, the adapter in its own
        weights = BYTES_PER_DTYPE[card.weights_dtype.value] * n
        trained, tensors = lora_trainable_params(spec, lora) * count_scale(spec), lora_tensors(spec, lora)
        weights += train_bytes * trained
    # the optimizer's own state bytes, as the memory terms count them (plan.terms.step_terms)
    optimizer = optimizer_state_bytes(optimizer=opt, params=trained, tensors=tensors, state_bytes=state_bytes)
    if lora is None and opt not in (Optimizer.ADAMW, Optimizer.PAGED_ADAMW):
        optimizer *= count_scale(spec)
    return weights / shard_ranks, optimizer / shard_ranks, 0.0


def nemo_rl_offload_bytes(card: RunCard, spec: ModelSpec, *, train_gpus: int) -> tuple[float, float]:
    """(pinned, pageable) bytes one training GPU of NeMo RL's colocated trainer copies to the host per step; the
    same bytes come back (NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470, ``nemo_rl/models/policy/workers/``).

    Megatron worker (``megatron_policy_worker.py`` lines 1360-1515): ``offload_before_refit`` frees the gradient
    buffers (``move_model(..., "cpu", move_params=False, move_grads=True)``) and moves the optimizer state with
    ``v.to("cpu")`` (pageable, ``NEMO_RL_MEGATRON_OPTIMIZER_BYTES`` per parameter of the rank's data-parallel
    shard, the experts' over the expert-data-parallel ranks); ``offload_after_refit`` moves the parameter buffers;
    ``prepare_for_lp_inference`` brings the parameters back, ``prepare_for_training`` the optimizer state.
    Megatron-Core's ``_ParamAndGradBuffer.offload_to_cpu`` copies ``param_data`` (the rank's bf16 parameters) into
    a pinned host buffer (``.cpu().pin_memory()`` once, then ``copy_``) and only frees ``grad_data``
    (``storage().resize_(0)``); ``reload_from_cpu`` re-allocates it and ``zero_()``s it on the device
    (NVIDIA/Megatron-LM megatron/core/distributed/param_and_grad_buffer.py @2ff0f099ffc30ffd152e3e29e921a1609d00855c
    l.780-805, the submodule of NeMo RL v0.3.1, unchanged @d98e8a64ddf34856e74b24714e3bedb2f5a39553): no gradient
    byte crosses the host link (the memset, 2 B per parameter at HBM speed, is not counted).

    DTensor (FSDP2) worker (``dtensor_policy_worker_v2.py`` lines 1399-1495): ``offload_after_refit`` runs
    ``model.to("cpu")``, the rank's shard of every parameter (fp32, ``NEMO_RL_DTENSOR_PARAM_BYTES``; FSDP shards over
    the data x context ranks and tensor parallel splits each shard again: 1 / world), and ``offload_before_refit``
    the AdamW states of that shard (``NEMO_RL_DTENSOR_OPTIMIZER_BYTES``), both pageable. ``model.to`` would also move
    each ``.grad``, but ``train`` ends with ``optimizer.zero_grad()`` ("release gradient memory before rollouts",
    l.596-597, since NVIDIA-NeMo/RL 43928aae, 2025-10-02): none are left. Earlier releases (v0.3.1) kept the fp32
    gradient shards, 4 B more per parameter of the shard each way; not modelled (the preset follows current code).

    Not colocated, nothing moves: ``prepare_for_lp_inference`` offloads the optimizer only with
    ``offload_optimizer_for_logprob`` (default false, grpo_math_1B.yaml l.83), and the Megatron worker's gradient
    buffers are freed, not copied (NeMo RL v0.4.0 still moved the optimizer state in every placement:
    ``prepare_for_lp_inference`` called ``offload_before_refit``, megatron_policy_worker.py l.2004-2007
    @c751f811217db7df0d4c94abdeaada6626cfc150; not modelled).

    v0.3.0 (@b1c86a816c5e2b4ca41ece193624a38dc62e6fdf) moves the same state at the same places:
    ``offload_before_refit`` / ``offload_after_refit`` (dtensor_policy_worker.py l.1274-1310, megatron_policy_worker.py
    l.1547-1607) inside ``refit_policy_generation`` (grpo.py l.396-455, timer ``prepare_for_generation`` l.542); its
    ``prepare_for_lp_inference`` calls ``offload_before_refit`` again, a no-op by then (the states are on the host:
    ``v.to("cpu")`` of a host tensor, or the Megatron loop's ``v.is_cuda`` test), and ``prepare_for_training`` brings
    them back before each update, so each refit copies them out afresh.

    v0.4.0, v0.5.0 and v0.6.0 (@c751f811217db7df0d4c94abdeaada6626cfc150, @6c7089300fded94abfa49bb9cbf9eb357d862461,
    @5fb588932bf835506a8a5bac01de4f8c7ab0a065) run the same colocated sequence each step, read in full: grpo.py
    ``refit_policy_generation`` (l.759-830 / 904-977 / 1097-1191: ``offload_before_refit``, vLLM wakes its weights,
    the CUDA-IPC stream, ``offload_after_refit``, vLLM wakes its KV cache), vLLM ``sleep(level=1)`` after generation
    (vllm_worker.py l.804 / 820 / 1009), ``prepare_for_lp_inference`` and ``prepare_for_training`` (Megatron worker
    l.2004-2033 / 2220-2261 / 1112-1153; ``move_optimizer`` ``v.to("cpu")`` / ``v.to("cuda")``). Each copy is priced
    here, in ``sleep_wake_phase`` or in the sync; the rest is ``gc.collect`` and ``torch.cuda.empty_cache`` calls.
    From v0.5.0 the colocated refit also ends with vLLM's ``process_weights_after_loading`` over the model
    (vllm_backend.py l.150 @6c708930, l.201 @5fb58893; the NCCL path does not call it), not priced. The 1-step-off
    rows of the same tables do not separate this from the trainer: their planned trainer (log-probs, update,
    reference swap) is hidden under generation with a margin of 1.6-2.4x (Qwen3-30B-A3B, H100), 3.5x (Qwen3-235B)
    and 5x (DeepSeek-V3), while the H100 on-policy MoE rows that plan short (-8 to -35 %) would be closed by a
    trainer 1.6-1.7x, 1.5-3.5x and 5-8x the plan; NeMo RL v0.3's published Qwen3-30B-A3B log-prob and update timers
    plan -61 / -69 % (``compute.moe_time``, per-token evidence).

    Known gap, the NeMo RL v0.3 blog's and NVIDIA-NeMo/RL issue #959's Llama-3.1-8B refit rows (one node, 8 GPUs):
    published 4 s (DTensor) and 5 s (Megatron), 6 s and 8 s in the reruns, while this phase's first-touch copies alone
    are 8.6 s (12 GB pageable per GPU) and 7.2 s (10 GB) at ``PAGEABLE_FIRST_TOUCH_BYTES_PER_S``. The 70B rows of the
    same code move about as much per GPU (11-13 GB) and are planned within 20 % of the blog. A copy into fresh pages
    measured on one core of a Sapphire Rapids-class CPU (``benchmarks/host_first_touch.py``: 2.4-2.5 GB/s for
    tensors of 28-256 MiB against 6-12 GB/s into pages already present) would put the blog's 8B rows at +12 / +48 %
    but its 70B rows at -24 / -43 % (the reruns' at -59 / -57 %) and NeMo RL's DeepSeek-V3 steps from -27 to -34 %,
    so the rate is not what separates them. It is not applied. Nothing read in v0.3.0 moves fewer bytes on one node
    than on eight."""
    from trainfit.memory.lora import lora_trainable_params
    from trainfit.plan.resolve import trainable_spec

    p = card.parallel
    if p.strategy in FSDP_STRATEGIES:  # the DTensor worker: no pipeline stages
        n = float(total_params(spec))
        lora = trainable_spec(card).lora
        trained = n if lora is None else lora_trainable_params(spec, lora) * count_scale(spec)
        shard = max(1, train_gpus)
        return 0.0, (NEMO_RL_DTENSOR_PARAM_BYTES * n + NEMO_RL_DTENSOR_OPTIMIZER_BYTES * trained) / shard
    weights, optimizer_params = _megatron_rank_state(card, spec, train_gpus=train_gpus)
    return weights, NEMO_RL_MEGATRON_OPTIMIZER_BYTES * optimizer_params


def _megatron_rank_state(card: RunCard, spec: ModelSpec, *, train_gpus: int) -> tuple[float, float]:
    """(bf16 weight bytes, parameters its optimizer shard holds) of one Megatron-Core rank: its TP/PP/EP shard
    (``rank_spec``), the dense parameters over the data-parallel ranks and the experts over the
    expert-data-parallel group, world / (etp x ep x pp) (Megatron-Core's distributed optimizer,
    ``ParallelLayout.expert_data_group``)."""
    p = card.parallel
    shard = rank_spec(spec, tp=p.tensor_parallel, pp=p.pipeline_parallel, ep=p.expert_parallel,
                      etp=p.expert_tensor_parallel, first=p.pipeline_first_stage_layers,
                      last=p.pipeline_last_stage_layers, layout=p.pipeline_layout)
    params, expert = total_params(shard), routed_expert_params(shard)
    dp = max(1, train_gpus // max(1, p.tensor_parallel * p.pipeline_parallel))
    edp = max(1, train_gpus // max(1, p.expert_parallel * p.expert_tensor_parallel * p.pipeline_parallel))
    weights = weight_bytes(shard, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base
    return weights, (params - expert) / dp + expert / edp


def _host_copy_rates(card: RunCard, r: DeviceRates, gpu: GpuSpec, *,
                     gpus_per_node: int | None = None) -> tuple[float, float, float]:
    """(pinned, pageable, pageable into freshly allocated host memory) bytes/s of one GPU's copies to or from host
    memory while every copying GPU of its node copies (``compute.offload``: ``host_copy_bytes_per_s``,
    ``pageable_copy_bytes_per_s``, ``first_touch_copy_bytes_per_s``). ``gpus_per_node``: the GPUs of a node that
    copy together; default the training GPUs (the trainer's offloads), the engine's for checkpoint-engine's H2D."""
    rates = dict(pcie_bytes_per_s=r.pcie_bytes_per_s, host_memory_bytes_per_s=r.host_memory_bytes_per_s,
                 gpus_per_node=gpus_per_node or train_nodes(card)[1])
    coherent = gpu.host_link_bytes_per_s is not None
    pageable = pageable_copy_bytes_per_s(**rates,
                                         staging_bytes_per_s=staging_bytes_per_s_of(coherent_host_link=coherent))
    return (host_copy_bytes_per_s(**rates), pageable,
            first_touch_copy_bytes_per_s(pageable_bytes_per_s=pageable, coherent_host_link=coherent))


def trainer_state_offload_phase(card: RunCard, spec: ModelSpec, r: DeviceRates, *, train_gpus: int) -> PhaseTime | None:
    """The trainer's per-step state moves to host memory and back, per training GPU.

    NeMo RL (``STATE_OFFLOAD_PRESETS``), colocated with the engine (``rollout.trainer_offload`` not none, its
    default under the preset there): the weights and the optimizer state, once each way per step
    (``nemo_rl_offload_bytes``); not colocated, nothing.

    Other frameworks, colocated with ``rollout.trainer_offload`` set (verl actor ``param_offload`` /
    ``optimizer_offload``, volcengine/verl @b178a3cd56f58b2d502255daba591e92833930a7
    verl/workers/megatron_workers.py): the optimizer state goes to the host after the update and comes back
    before the next (``update_actor`` lines 747-748, 778-779); with parameters, the weights make a round trip
    for each pass that needs them, the old-policy log-probs (``compute_log_prob`` lines 866-867, 902-903), the
    update (lines 744-745, 775-776) and the weight sync (``rollout_mode`` lines 681-682, 731-732). The gradient
    buffer is not copied: ``offload_megatron_model_to_cpu`` frees ``grad_data`` (``storage().resize_(0)``) and
    ``load_megatron_model_to_gpu`` re-allocates and zeroes it (verl/utils/megatron_utils.py lines 582-585 and
    629-633 @b9873ee98f5ee513a460a7a41623262ac4a831e9, lines 432-435 and 454-456 @b178a3cd).

    FSDP trainers (verl's FSDP worker) move each rank's local shard instead (``fsdp_offload_bytes``).

    Every GPU of a node copies at once: a copy to or from pinned host memory runs at the smaller of the GPU's host
    link and its share of the node's host-memory bandwidth (``compute.offload.host_copy_bytes_per_s``), one to or
    from pageable memory at most at the driver's staging rate (``pageable_copy_bytes_per_s``); a pageable copy *to*
    the host lands in host tensors allocated anew each step (``v.to("cpu")``, ``model.cpu()``; freed when the state
    goes back), so it also takes the first-touch page faults (``first_touch_copy_bytes_per_s``,
    ``PAGEABLE_FIRST_TOUCH_BYTES_PER_S``: 1.4 GB/s behind PCIe). Pageable
    (``compute.offload``, "Pinned or pageable host memory"): verl's FSDP2 weights (``model.cpu()``), everything NeMo
    RL's DTensor worker moves, NeMo RL's Megatron optimizer states; the rest is pinned (verl's FSDP1 weights and FSDP
    optimizer states, both ``non_blocking=True``; verl's Megatron offload; Megatron-Core's DDP buffers). None when
    nothing moves."""
    from trainfit.methods.rl import trainer_offload_of
    from trainfit.spec.enums import Offload

    mode, _ = trainer_offload_of(card)
    if mode is Offload.NONE:
        return None
    p = card.parallel
    fsdp = p.strategy in FSDP_STRATEGIES
    if card.preset in STATE_OFFLOAD_PRESETS:  # (pinned, pageable) one-way bytes
        moved = nemo_rl_offload_bytes(card, spec, train_gpus=train_gpus)
    else:
        dp = max(1, train_gpus // max(1, p.tensor_parallel * p.pipeline_parallel))
        if fsdp:
            weights, optimizer, _ = fsdp_offload_bytes(card, spec, shard_ranks=dp)
        else:
            weights, optimizer_params = _megatron_rank_state(card, spec, train_gpus=train_gpus)
            optimizer = STATE_OFFLOAD_OPTIMIZER_BYTES * optimizer_params
        moved = (optimizer, 0.0)
        if mode is Offload.PARAMS_AND_OPTIMIZER:
            # the update and the sync, and the old-policy log-probs where the step has that pass
            w = weights * (3 if old_logprob_pass(card) else 2)
            pageable = p.fsdp2
            moved = (optimizer + (0.0 if pageable else w), w if pageable else 0.0)
    if moved == (0.0, 0.0):
        return None
    from trainfit.plan.resolve import gpu_of

    gpu = gpu_of(card)
    # the pageable copies go to host tensors allocated anew each step (compute.offload: first-touch page faults)
    pinned, pageable_rate, fresh_rate = _host_copy_rates(card, r, gpu)
    to_host_s = moved[0] / pinned + moved[1] / fresh_rate
    to_device_s = moved[0] / pinned + moved[1] / pageable_rate
    return _phase("state_offload", to_host_s + to_device_s, "offload", to_host=to_host_s, to_device=to_device_s)


def reference_swap_phase(card: RunCard, spec: ModelSpec, r: DeviceRates, *, train_gpus: int,
                         shard_ranks: int | None = None) -> PhaseTime:
    """``roles.reference: host_swap`` (NeMo RL's ``use_reference_model``, ``compute.reference_swap``): per reference
    pass each training GPU copies its policy state dict to pinned host memory, the reference's in and the policy's
    back, one tensor at a time. The rank's state dict: under Megatron the bf16 parameters of its TP/PP/EP shard
    (``Float16Module``), under FSDP (NeMo RL's DTensor worker) its local shard of every tensor, fp32 when the card's
    weights are (``methods.rl.reference_swap_state_bytes``), over ``shard_ranks`` ranks (HSDP: its shard group, each
    replica holding the whole model; None: ``train_gpus``). Tensors: the shard's Hugging Face tensor count
    (``compute.sync.hf_tensor_count``; Megatron fuses q/k/v and gate/up, so fewer: the per-tensor term is an upper
    bound)."""
    from trainfit.compute.reference_swap import reference_swap_seconds
    from trainfit.compute.sync import hf_tensor_count

    p = card.parallel
    if p.strategy in FSDP_STRATEGIES:
        dtype = Dtype.FP32 if card.weights_dtype is Dtype.FP32 else Dtype.BF16
        state_bytes = weight_bytes(spec, weights=dtype, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base / (
            shard_ranks or train_gpus)
        tensors = hf_tensor_count(spec)
    else:
        shard = rank_spec(spec, tp=p.tensor_parallel, pp=p.pipeline_parallel, ep=p.expert_parallel,
                          etp=p.expert_tensor_parallel, first=p.pipeline_first_stage_layers,
                          last=p.pipeline_last_stage_layers)
        state_bytes = weight_bytes(shard, weights=Dtype.BF16, compute=ComputeDtype.BF16, trainable=TrainableSpec()).base
        tensors = hf_tensor_count(shard)
    t = reference_swap_seconds(state_bytes_per_gpu=state_bytes, tensors_per_gpu=tensors, pcie_bytes_per_s=r.pcie_bytes_per_s,
                               host_memory_bytes_per_s=r.host_memory_bytes_per_s, gpus_per_node=train_nodes(card)[1])
    return _phase("reference_swap", t.total_s, "offload", to_host=t.to_host_s, to_device=t.to_device_s,
                  per_tensor=t.per_tensor_s)


def sleep_wake_phase(card: RunCard, spec: ModelSpec, rollout, r: DeviceRates) -> PhaseTime | None:
    """vLLM sleep mode between rollouts (level 1: weights to pinned host memory; level 2: dropped); SGLang's
    release_memory_occupation (level 1: the KV cache only; level 2: also the weights, freed)."""
    ro = card.rollout
    if rollout is None or ro.sleep_level == 0:
        return None
    from trainfit.compute.generation import sleep_wake_seconds
    from trainfit.rollout.quantization import card_engine_rank_bytes

    rank = card_engine_rank_bytes(card, spec)  # an fp8 engine sleeps and wakes its 1-byte weights
    t = sleep_wake_seconds(level=ro.sleep_level,
                           weight_bytes_per_gpu=_engine_weight_bytes(spec) / ro.tensor_parallel if rank is None else rank,
                           kv_cache_bytes_per_gpu=rollout.kv_cache_bytes, rates=r,
                           host_backup=ro.engine is not RolloutEngine.SGLANG, gpus_per_node=rollout_nodes(card)[1])
    return _phase("sleep_wake", t.total_s, "offload", sleep=t.sleep_s, wake=t.wake_s)
