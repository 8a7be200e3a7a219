"""How an RL step's sequences are cut for the passes on the training GPUs: packed or padded, balanced
micro-batches, verl's dynamic batching, NeMo RL's packed rows, and the update's uneven work across ranks.

Dynamic batching (``rollout.max_tokens_per_micro_batch`` / ``logprob_max_tokens_per_micro_batch``, verl's
``use_dynamic_bsz``): verl takes the largest micro-batch count of the data-parallel ranks (``rearrange_micro_batches``:
``ceildiv(total_seqlen, max_token_len)`` all-reduced with ``ReduceOp.MAX``, verl/utils/seqlen_balancing.py
@e0d035cd4a6a5c29835516a58d78710a28e73b18), planned as the expected largest count (``dynamic_micro_batches``), each
micro-batch a packed row of the rank's tokens over that count. play-verl's 'recommended' run puts 40 sequences of 281
tokens (11.2k of its 12k budget) on a rank per optimizer step, its ranks spread by about 10 %, so most steps run 2
micro-batches where a fixed count of ``12000 // 281`` sequences runs 1. Without the budget the card's
``micro_batch_size`` is a fixed count, as before. NeMo RL's GRPO update runs its loss once per packed sequence
(``compute.inventory.NEMO_RL_PG_LOSS``), planned.

Pure: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from trainfit.plan.rl_common import prompt_mean, published_lengths, response_mean
from trainfit.plan.time import verl_fsdp_workers
from trainfit.spec.card import PACKING_PRESETS, RunCard, rl_passes_pack
from trainfit.spec.enums import FSDP_STRATEGIES
from trainfit.spec.model import ModelSpec


@dataclass(frozen=True)
class RlBatch:
    """The sequences one RL step trains, as the passes on the training GPUs see them (``rl_batch``)."""

    sequences: int
    """Trained sequences per step: ``prompts_per_step x num_generations``."""
    sequences_per_gpu: int
    """``ceil(sequences / training GPUs)``."""
    packed: bool
    """The passes drop padding (pack sequences): ``PACKING_PRESETS``, a token budget, or the card's
    ``rollout.packed_sequences``."""
    seq_len: int
    """Tokens per sequence: packed, the mean prompt + the mean response; padded, the maximum prompt + response."""
    prompt_mean_tokens: float
    """``rl_common.prompt_mean``."""
    response_mean_tokens: float
    """``rl_common.response_mean``."""
    token_spread: float
    """Standard deviation of one sequence's tokens where a token budget needs it (``sequence_token_spread``), else 0."""
    data_parallel: int
    """Data-parallel ranks of the trainer: training GPUs over ``parallel.model_parallel``."""


def rl_batch(card: RunCard, spec: ModelSpec, *, train_gpus: int) -> RlBatch:
    """The step's trained sequences on ``train_gpus`` training GPUs (``RlBatch``)."""
    from trainfit.methods.rl import logprob_token_budget

    ro = card.rollout
    seqs = ro.prompts_per_step * ro.num_generations
    # a card may say the run did not pack (NeMo RL with policy.sequence_packing.enabled false: the Megatron worker
    # slices the batch's right-padded [batch, longest] tensor into micro-batches and runs each at that length,
    # NVIDIA-NeMo/RL v0.5.0 6c7089300fded94abfa49bb9cbf9eb357d862461
    # nemo_rl/models/policy/workers/megatron_policy_worker.py l.1051, l.1129, l.1159-1161 (update) and
    # l.1303-1312, l.1457-1459 (log-probs))
    # a token budget (verl's dynamic batching) packs its micro-batches whatever the preset (spec.card refuses it with
    # packed_sequences false)
    packed = rl_passes_pack(card)
    mean = response_mean(card, spec)
    prompt = prompt_mean(card)
    lp_budget = logprob_token_budget(card)
    up_budget = ro.max_tokens_per_micro_batch
    return RlBatch(
        sequences=seqs, sequences_per_gpu=ceil(seqs / train_gpus), packed=packed,
        seq_len=int(prompt + mean) if packed else ro.prompt_len + ro.response_len,
        prompt_mean_tokens=prompt, response_mean_tokens=mean,
        token_spread=sequence_token_spread(card, spec) if (lp_budget or up_budget) else 0.0,
        data_parallel=max(1, train_gpus // max(1, card.parallel.model_parallel)),
    )


def passes_pack(card: RunCard) -> bool:
    """The log-prob and update passes pack sequences: the card's ``rollout.packed_sequences`` where it says, else
    the preset's habit (``PACKING_PRESETS``); a token budget packs too (``rl_batch``)."""
    ro = card.rollout
    return card.preset in PACKING_PRESETS if ro.packed_sequences is None else ro.packed_sequences


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
                                    response_len_mean=mean, sequences=4096, **published_lengths(card))
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


def pipeline_packing(card: RunCard, *, row_tokens: int | None, sequences: int, prompt_tokens: float,
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
                                     response_len_mean=response_mean_tokens, sequences=n, quantiles=n,
                                     **published_lengths(card))
    lengths = [prompt_tokens + length for length, share in groups for _ in range(max(1, round(share * n)))]
    dp = max(1, train_gpus // max(1, p.tensor_parallel * p.pipeline_parallel * p.context_parallel))
    rows, longest = pipeline_packed_rows(sequence_tokens=lengths, sequences=sequences, row_tokens=int(row_tokens),
                                         data_parallel=dp)
    return rows, (int(row_tokens) if padded_rows else max(1, ceil(longest)))


def update_work_cv(card: RunCard, spec: ModelSpec, *, micro_batch_sequences: int) -> float:
    """Relative spread of one update micro-batch's tokens across the data-parallel ranks of a verl FSDP trainer
    (``compute.collectives`` module docstring, "Unequal work": each optimizer step's share of a rank is a random
    draw of responses, and the FSDP ranks run every layer in lockstep): the card's response-length distribution
    (``compute.response_lengths``) gives a sequence's token spread, ``micro_batch_sequences`` draws make a
    micro-batch. 0 for other frameworks and strategies (not read), and for padded sequences (a fixed length).
    The caller passes the rank's whole optimizer-step share: with dynamic batching verl balances the micro-batches
    inside one rank (``rearrange_micro_batches``), so each spreads as that share does; fixed micro-batches spread
    more (``cv/sqrt(micro-batch)``), which a ``batch.micro_batch_size`` alone cannot tell apart, so this is the lower
    of the two there. Where the card states verl's fixed log-prob count (``rollout.logprob_micro_batch_size``) the
    log-prob passes (``plan.rl_passes`` ``forward_pass``) and, without an update token budget, the update
    (``plan.rl_passes.fixed_update_micro_batches``) take it per micro-batch.

    Checked 2026-12-04, not modelled: verl from volcengine/verl 62221fa13ee922727e0da61771c33590c5f17560 (#3605,
    2025-10-23; first in v0.6.1) orders each rank's balanced share by workload before dispatch
    (``verl/trainer/ppo/ray_trainer.py`` ``_balance_batch``: ``partition.sort(key=workload)``, then
    ``partition[::2] + partition[1::2][::-1]``, l.943-947 @ea56e9ac47c3dfed65c028899012bb67f41f4c83), and
    ``update_policy`` still splits that share in order (``data.split(ppo_mini_batch_size)``,
    ``verl/workers/actor/dp_actor.py`` l.404, same commit): every rank's k-th mini-batch then holds the same
    quantiles of its lengths, no random draw, so much of this spread would go (not all: the longest sequences'
    order statistics still differ between ranks). The benchmark's runs with a large uneven-work term mostly predate
    it: the one-step-off DAPO runs are no later than verl 503ea75f (2025-07-17), the fully-async DAPO scripts sit on
    PR #2981's branch at 94d681dce4911c3ad6abb011a2d03c62d318868d (2025-09-17), play-verl at e0d035cd; only the
    ReTool run's range (beb62461 .. e9405d70) straddles #3605, and no card states a verl release for it
    (``software.verl``). As a bound, the spread dropped from every verl FSDP update moves the ReTool update +95 ->
    +76 %, the fully-async DAPO ones +22 -> +8, -4 -> -19 and -15 -> -22 %, the one-step-off ones +21 -> +14 and +34
    -> +28 %, play-verl's Qwen2-7B -27 -> -31 %; ALL 10.0 -> 10.1 %: not taken."""
    if not verl_fsdp_workers(card):
        return 0.0
    from trainfit.compute.collectives import micro_batch_token_cv
    from trainfit.compute.response_lengths import response_length_groups

    ro = card.rollout
    mean = response_mean(card, spec)
    groups = response_length_groups(shape=ro.response_len_shape, response_len_max=ro.response_len,
                                    response_len_mean=mean, sequences=4096, **published_lengths(card))
    spread = sum(w * (length - mean) ** 2 for length, w in groups) ** 0.5
    return micro_batch_token_cv(sequence_tokens_cv=spread / (prompt_mean(card) + mean), sequences=micro_batch_sequences)


NEMO_RL_SEQUENCE_LENGTH_ROUND = 64
"""NeMo RL's ``policy.dynamic_batching.sequence_length_round`` default: each micro-batch's length is rounded up to a
multiple of 64 tokens (NVIDIA-NeMo/RL examples/configs/grpo_math_1B.yaml l.60-64
@b1c86a816c5e2b4ca41ece193624a38dc62e6fdf, the base of grpo_math_8B.yaml)."""


def nemo_rl_dynamic_micro_batches(*, sequence_tokens: list[float], data_parallel: int, budget_tokens: int,
                                  sequence_max: int | None = None,
                                  round_tokens: int = NEMO_RL_SEQUENCE_LENGTH_ROUND) -> tuple[int, float]:
    """(micro-batches per data-parallel rank, padded tokens per micro-batch) of NeMo RL's dynamic batching over one
    chunk of sequences (``sequence_tokens``: each sequence's tokens, the chunk's representative draw).

    NVIDIA-NeMo/RL nemo_rl/distributed/batched_data_dict.py ``shard_by_batch_size`` (l.340-372, l.520-595
    @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf): the chunk is sorted by length and dealt to the ``data_parallel``
    shards in turn (``sorted[i::shards]``); walking the shards' positions in that ascending order, a micro-batch takes
    the next position while ``(sequences in it) x (its longest, over every shard, rounded up to round_tokens and at
    most the batch's padded width)`` stays within ``budget_tokens``, else a new one starts; every shard gets the same
    boundaries (the count is the same on every rank: FSDP2 and Megatron need it). A micro-batch is padded to its
    longest: ``[sequences, longest]`` tokens computed (the DTensor worker's dynamic path builds an all-ones attention
    mask, dtensor_policy_worker.py l.622-631, same commit). Unlike a packed token budget, a micro-batch of long
    sequences stays part empty: a sequence longer than half the budget has one to itself."""
    budget = int(budget_tokens)
    if budget <= 0 or not sequence_tokens:
        raise ValueError("budget_tokens must be > 0 and sequence_tokens not empty")
    shards = max(1, int(data_parallel))
    ordered = sorted(float(t) for t in sequence_tokens)
    per_shard = [ordered[i::shards] for i in range(shards)]
    positions = min(len(s) for s in per_shard)
    if positions == 0:
        return 1, float(ordered[-1])
    width = max(ordered) if sequence_max is None else min(float(sequence_max), max(ordered))
    rnd = max(1, int(round_tokens))
    count, in_mb, longest, padded = 1, 0, 0.0, 0.0
    for i in range(positions):
        need = min(width, ceil(max(s[i] for s in per_shard) / rnd) * rnd)
        grown = max(longest, need)
        if (in_mb + 1) * grown <= budget or in_mb == 0:
            in_mb, longest = in_mb + 1, grown
        else:
            padded += in_mb * longest
            count, in_mb, longest = count + 1, 1, need
    padded += in_mb * longest
    return count, padded / count


def nemo_rl_dynamic_shape(card: RunCard, *, sequences: int, prompt_tokens: float, response_mean_tokens: float,
                          data_parallel: int, budget_tokens: int) -> tuple[int, float] | None:
    """``nemo_rl_dynamic_micro_batches`` for a NeMo RL card's dynamically batched pass over a chunk of ``sequences``
    (the mean prompt plus the card's response lengths, ``compute.response_lengths``, one equal-share group per
    representative sequence, as ``pipeline_packing``); None for other presets."""
    from trainfit.compute.response_lengths import response_length_groups

    if card.preset != "nemo-rl":
        return None
    ro = card.rollout
    total = max(1, int(sequences))
    n = min(total, PACKING_SAMPLE_SEQUENCES)  # representative lengths, each standing for total / n sequences
    groups = response_length_groups(shape=ro.response_len_shape, response_len_max=ro.response_len,
                                     response_len_mean=response_mean_tokens, sequences=n, quantiles=n,
                                     **published_lengths(card))
    lengths = [prompt_tokens + length for length, share in groups for _ in range(max(1, round(share * total)))]
    return nemo_rl_dynamic_micro_batches(sequence_tokens=lengths, data_parallel=data_parallel,
                                         budget_tokens=budget_tokens)
