"""Collectives as NCCL runs them, and how much of them a framework's schedule leaves exposed.

Time of one collective over ``n`` ranks on a buffer of ``S`` bytes (nccl-tests ``PERFORMANCE.md``:
bus bandwidth; ring algorithm)::

    all-gather / reduce-scatter:  latency + (n−1)/n · S / bus_bytes_per_s
    all-to-all:                   p2p latency + (n−1)/n · S / bus_bytes_per_s   (each rank's share for the others)
    all-reduce:                   latency + 2·(n−1)/n · S / bus_bytes_per_s   (latency with 2 passes)
    broadcast:                    latency + S / bus_bytes_per_s   (pipelined: every byte crosses each link once)
    latency, bandwidth: NCCL's own tuner (``nccl_collective_seconds``): its cheapest (algorithm, protocol), each
                  ``base + steps · hop`` (src/graph/tuning.cc), the protocol's share of the bus (LL half of it)
    p2p latency = NCCL's Simple base + one step per ceil(n / p2p channels) round   (NCCL's grouped send / receive
                  to every peer at once, ``grouped_p2p_latency_s``)

Where the latency comes from. The first time model charged every ring collective ``30 us + 8 us · (n − 1)`` (per
pass): ``rates.COLLECTIVE_LATENCY_S`` / ``COLLECTIVE_HOP_LATENCY_S`` (since removed), set without a source when the time model was
written ("Latency per collective ~ 30 us + 8 us per hop", rates docstring). NCCL's tuner (NVIDIA/nccl
``src/graph/tuning.cc`` @5067397c2676d5aed50042fc39e5c8ee96eb0027, ``baseLatencies`` and ``hwLatencies``) prices a
ring step on NVLink at 0.6 us (LL), 1.9 (LL128) or 3.4 us (Simple) after a 6.6-14 us base, and a network step at 2.7 /
4 / 14 us; it runs the cheapest. Published small-message nccl-tests rows side with the tuner, not the old constants:
an all-reduce of 4-4096 B on 8 H20 of one NVSwitch node reads 12.5-16.7 us (deepseek-ai/DeepEP issue #303,
https://github.com/deepseek-ai/DeepEP/issues/303, read 2026-12-02; tuner 15.0 us, old form 142 us); a reduce-scatter of
128-512 B over 2 nodes x 4 GPUs reads 23-32 us (NVIDIA/nccl-tests issue #128,
https://github.com/NVIDIA/nccl-tests/issues/128, 2023-02-02; tuner with the measured network-step excess 33.5 us,
old form 86 us); an all-reduce of 128 B on 2 x 8 H100 over InfiniBand reads 61.6 us (NVIDIA/nccl issue #1453; tuner
25.2 us, with the excess 61.6, old form 270 us); 2 A100 on NVLink all-reduce 32 B in 10.1 us (NVIDIA/nccl issue
#583, https://github.com/NVIDIA/nccl/issues/583, 2021-10-18; tuner 7.8 us, old form 46 us). So the training step's
all-gathers, reduce-scatters and all-reduces (``all_gather_seconds`` / ``reduce_scatter_seconds`` /
``all_reduce_seconds`` without a ``latency_s``; the MoE token-count all-gather, the all-gather dispatcher, the EP
all-to-all and DeepEP's dispatch) take NCCL's tuner over the nodes each group spans, as the decode model's
all-reduce does (``nccl_all_reduce``), with ``NCCL_NET_STEP_EXCESS_S`` per network step. A caller that passes a
``latency_s`` (a measured figure) takes that latency whole. Since then the hybrid engine's ZeRO-3 gathers, the
weight-sync export gathers (``compute.sync``), Ulysses' all-to-all, ring context parallel and pipeline sends
(``compute.model_parallel``: one NCCL send / receive each) take the tuner too, and so do the weight sync's broadcasts
(the refit broadcast, the export's pipeline broadcast, checkpoint-engine's bucket broadcasts: ``nccl_broadcast``,
tuning.cc's base and per-step latencies over the ring's fill) and the NCCL reshard refit's per-call grouped
send / receive and replica all-gather. The old constants (``rates.COLLECTIVE_LATENCY_S`` 30 us,
``COLLECTIVE_HOP_LATENCY_S`` 8 us per step) are gone; ``decode_step.tp_all_reduce`` takes a measured ``latency_s``
where its callers pass one.

``bus_bytes_per_s``: NCCL's sustained bus bandwidth (``rates.intra_node_bus_bytes_per_s``);
a ring that crosses nodes runs at the slower of that and the NIC per GPU times ``NIC_EFFICIENCY``.

Overlap, as each framework schedules it (``exposed_*``): per decoder layer only the collective
time that the layer's compute does not cover is exposed.

* FSDP / ZeRO-3: forward all-gathers the next unit while the current one computes (prefetch);
  the first gather is exposed. Backward all-gathers (when resharded after forward) and
  reduce-scatters on the same NCCL stream while the previous layer's backward computes; the
  last reduce-scatter is exposed. The root unit (embedding, head) is gathered once, exposed.
  HSDP adds each unit's all-reduce of its gradient shard across the replicas of its shard group, on a stream of
  its own, behind the remaining backward (``exposed_sharded``; the shard group is a node's GPUs unless the card's
  ``parallel.hsdp_shard_size`` says otherwise: ``training.hsdp_links`` picks each group's link).
* DDP: gradient buckets (25 MB) all-reduce during backward; exposed = what exceeds backward,
  at least the last bucket.
* ZeRO-1/2 (DeepSpeed, ``overlap_comm``): gradient reduction overlapped like DDP (DeepSpeed all-reduces each
  bucket in full, ``deepspeed_bucket_all_reduce``; Megatron-Core's distributed optimizer reduce-scatters); the
  all-gather of the updated parameters after the step is exposed, unless (ZeRO-1 as Megatron-Core's distributed
  optimizer with ``overlap_param_gather``) it waits for the next forward and hides behind it bucket by bucket
  (``dist_optimizer`` module docstring).

Routed experts under expert parallel (Megatron-Core DDP and distributed optimizer, NVIDIA/Megatron-LM
@d98e8a64ddf34856e74b24714e3bedb2f5a39553): the experts' gradients are reduced over the expert-data-parallel
group, not the dense data-parallel one. ``distributed_data_parallel.py`` groups the parameters by
``(param_dtype, grad_dtype, is_expert_parallel)`` (l. 191) and gives an expert buffer the ``intra_expt_dp_group``,
a dense buffer the ``intra_dp_cp_group`` (l. 284-290); the expert buffers are bucketed apart
(``expert_parallel_buffers`` / ``expert_parallel_bucket_groups``, l. 282-355) and each bucket group reduces over its
own group (``param_and_grad_buffer.py`` ``start_grad_sync``: reduce-scatter under the distributed optimizer,
all-reduce without, l. 700-735); the distributed optimizer all-gathers the updated expert shards over the same group
(``start_param_sync``, l. 506-525; over a one-rank group a collective moves nothing between GPUs). The group has ``tp·cp·dp / (ep·etp)`` ranks
(``parallel_state.py`` l. 874-880: world / (etp·ep·pp); ``memory.parallel.ParallelLayout.expert_data_group``), laid
out ``etp·ep`` ranks apart (the expert rank generator's ``tp-cp-ep-dp-pp`` order with tp = etp, l. 886-895): often
one rank (DeepSeek-V3 at pp 16, ep 16 on 256 GPUs), so the experts, most of an MoE model's bytes, are not reduced at
all. ``exposed_data_parallel`` takes the two groups' bytes apart; the reductions share the step's backward
(both groups' buckets are issued as their gradients complete; timed one after the other).

Lockstep (``slowest_rank_excess``): ranks that synchronise every layer (FSDP / ZeRO gathers, tensor and pipeline
parallel exchanges) and every step (gradient reduction) wait for the slowest of them. GPUs of one model do not
sustain the same speed: their clocks settle differently under power management and manufacturing variability
(Sinha et al., "Not All GPUs Are Created Equal: Characterizing Variability in Large-Scale, Accelerator-Rich
Systems", SC'22, arXiv 2208.11035: 8 % (max 22 %) average performance variation across GPUs of one SKU in five
clusters, outliers up to 1.5x slower than the median GPU). With per-GPU speeds spread by ``σ`` (relative), the
pace of ``R`` ranks in lockstep is the expected maximum of ``R`` draws: ``σ · Φ⁻¹((R − 0.375) / (R + 0.25))``
(Blom's approximation of the normal order statistic; 0 for one GPU, 1.43σ for 8, 2.34σ for 64). ``σ``
(``SLOWEST_RANK_SIGMA``) is fitted on the fit half of ``benchmarks/step_times.py`` only; the fitted 8 % is Sinha et
al.'s average variation, so it may also stand for other losses that grow with the number of synchronised ranks
(per-step jitter, compute slowed by the collectives it overlaps). The spread is the GPUs' own: the slowest GPU's
*device* time sets the pace, and only beyond the host-paced time of the passes (``training.lockstep_wait_seconds``):
behind a launch-bound host the GPU idles between kernels and that slack absorbs its slower clock.

Unequal work (``lockstep_excess``, ``micro_batch_token_cv``): the training rows behind ``σ`` feed every rank the
same fixed-length sequences. An RL update feeds each data-parallel rank a random set of variable-length responses,
so in one micro-batch the ranks hold different token counts and, synchronised at every layer, all run at the pace
of the rank with the most. verl balances each rank's *total* tokens over the whole batch (``ray_trainer.py``
``_balance_batch``: ``get_seqlen_balanced_partitions(..., equal_size=True)``, each rank's indices then sorted back
into batch order), but its update splits that share into mini-batches in batch order (``dp_actor.py``
``update_policy``: ``batch.split(ppo_mini_batch_size)``; fixed micro-batches ``mini_batch.split(micro)``, dynamic
ones ``rearrange_micro_batches``, which balances the micro-batches inside one rank only): each optimizer step's
share is a random draw (volcengine/verl @2c8b2b995f36a7cd159b5a9beb5d5ed37cae0fc1 and v0.3.0.post0
@8e7780f5ee2021cc06c248b7cf87cf31200a38fd). A micro-batch of ``n`` sequences whose lengths spread by ``cv`` spreads by
``cv/√n``; the slowest rank's excess combines it with ``σ`` (``lockstep_excess``).

Pure Python: no torch import.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from math import ceil, gcd
from statistics import NormalDist
from typing import Any

from trainfit.compute.dist_optimizer import bucket_count, param_gather_exposed
from trainfit.compute.rates import DeviceRates

DEFAULT_INTER_NODE_BYTES_PER_S = 25e9
"""One 200 Gb/s InfiniBand / RoCE NIC per GPU = 25·10⁹ B/s per direction (the card's default): a DGX A100's eight
Mellanox 200 Gb/s HDR single-port adapters for its eight GPUs
(https://www.microway.com/hpc-tech-tips/dgx-a100-review-throughput-and-hardware-summary/, read 2026-12-04). H100
systems with 400 Gb/s NDR NICs state theirs on the card."""
NIC_EFFICIENCY = 0.80
"""Share of a NIC's line rate a ring crossing nodes is planned at: an assumption, 0.80, below the isolated peak, which is
0.96 as NCCL's maintainers state it: "We usually consider 24GB/s is the peak performance per 200G NIC (12 GB/s for
100G NICs)" (NVIDIA/nccl-tests issue #119, reply of 2022-11-17, https://github.com/NVIDIA/nccl-tests/issues/119, read
2026-12-03; the same 24 GB/s inter-node for one HDR card in NVIDIA/nccl issue #412, 2023-04-24). For NDR 400 Gb/s:
"46-48GB/s per NIC" (NVIDIA/nccl-tests issue #290, 2025-03-03) and "up to 48-49GB/s per NIC" (issue #267,
2025-01-23), 0.92-0.98. Measured: 3 nodes x 8 A100 on 4 HDR cards a node, all-reduce 128 MB busbw 95.7 GB/s of 100
(issue #119, 0.957); DeepEP's NVSHMEM kernels on one CX7 400G NIC per H800 43-47 GB/s (deepseek-ai/DeepEP README.md
@ebfe47e46fa86a5b41be96c326a92f62ed6721da, 0.86-0.94); nccl-tests alltoall with NVLink disabled between 2 DGX H100,
46 GB/s busbw a 400G NIC (deepseek-ai/DeepEP issue #3, 2025-02-25, 0.92); but 4 nodes x 8 H100 on 8 x 400G RoCE,
all-reduce 4-8 GB busbw 320 GB/s of 400 (NVIDIA/nccl issue #1221, 2024-03-13, 0.80), and the Ultra-Scale Playbook's
EFA cluster falls from 0.90 of its NICs at 2 nodes to 0.08 at 64 for a 256 MB all-reduce.
``benchmarks/data/nccl_collective_bandwidths.json`` holds these and ``benchmarks/collectives_vs_published.py`` scores
the model against them (at 0.80 the isolated per-NIC statements read about 20 % slow).

Evaluated and not taken: 0.96. On the step-time benchmark (903 rows) it moves 224 rows, every one faster: the
training rows get worse on both halves (fit 8.45 -> 8.69 %, held-out 8.01 -> 8.33 %; pretrain 8.1 -> 8.5 %, 113 rows
that were already too fast go further), the RL rows better (held-out 14.9 -> 14.8 %, weight sync 23.4 -> 22.7 %).
A training step's collectives run beside its GEMMs and at many nodes, where neither the isolated nccl-tests peak
nor the congestion of a large cluster is what the NIC delivers; neither effect is modelled. 0.80 stays an
assumption (it matches the one at-scale measurement above, issue #1221, and was not fitted), to be replaced by a
mechanism for concurrent compute and cluster congestion, not by another constant.

Evaluated and not taken, 2026-12-03: concurrent compute as a mechanism (compute and a collective started together,
each slowed while both run, each at its isolated rate once the other is done), with its one published factor
(compute beside a collective 18.9 % slower on average, at most 40 %: Lee et al., arXiv 2507.03114v1, 2025-07-03; A100
GEMM 1.18 -> 2.08 ms beside an all-gather, NVIDIA/nccl issue #1428; no published average for the collective's own
slowdown, so 1), in every overlapped span of ``exposed_sharded`` / ``exposed_data_parallel`` /
``dist_optimizer.param_gather_exposed``, with this constant at 0.96. On the step-time benchmark (1,121 rows) against
0.80 without it: fit half 10.85 -> 10.97 %, held-out half 10.22 -> 10.20 %; training rows fit 9.76 -> 9.94 %,
held-out 8.80 -> 8.92 %; RL rows fit 18.67 -> 19.43 %, held-out 17.02 -> 16.27 %. The mechanism alone at 0.80:
fit 10.81 %, held-out 10.23 % (training 9.66 / 8.95 %). 0.96 alone: fit 11.12 %, held-out 9.94 % (training
10.11 / 8.94 %). A compute slowdown cannot slow a collective-bound span, which is where 0.96 is too fast; an HBM
contention term (the collective's bus bytes passing HBM two to three times, issue #1428) is the next candidate.
Taken 2026-12-05, with the step's passes as one flow-shop timeline (``training.lockstep_flow_shop``): that term,
``hbm_contention_exposed``; this constant stays 0.80."""
DDP_BUCKET_BYTES = 25 * 2**20
"""torch DDP's default ``bucket_cap_mb=25`` (MiB): ``self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)``,
pytorch/pytorch ``torch/nn/parallel/distributed.py`` @0028a164b2c000670e756008243689d9233e1a05
(``DistributedDataParallel.__init__``)."""


def ring_bus_bytes_per_s(*, rates: DeviceRates, crosses_nodes: bool, nic_bytes_per_s: float,
                         local_ranks: int = 1) -> float:
    """Bus bandwidth of a ring: NCCL's intra-node rate, or, when it crosses nodes, the NICs of the
    group's ``local_ranks`` GPUs in one node working in parallel (capped by the intra-node rate).

    NCCL splits a collective over channels, one ring each, and a rail-optimised server gives every
    GPU its own NIC: each channel's ring leaves the node through a different NIC, so the channels
    together cross at ``local_ranks × NIC per GPU`` (nccl-tests ``PERFORMANCE.md``: the bus bandwidth
    is set by the slowest link of each ring; NCCL ``NCCL_MIN_NCHANNELS``/one channel per NIC). A
    group with one GPU per node (data parallel across tensor-parallel nodes) has one NIC. A node with fewer NICs
    than GPUs (``rates.node_nic_bytes_per_s``) shares them among the group's ranks (``gpu_nic_bytes_per_s``).
    """
    bus = rates.intra_node_bus_bytes_per_s
    if not crosses_nodes:
        return bus
    local = max(1, local_ranks)
    return min(bus, gpu_nic_bytes_per_s(rates=rates, nic_bytes_per_s=nic_bytes_per_s, local_ranks=local)
               * NIC_EFFICIENCY * local)


def gpu_nic_bytes_per_s(*, rates: DeviceRates, nic_bytes_per_s: float, local_ranks: int) -> float:
    """Inter-node bytes per second per direction each of a collective's ``local_ranks`` GPUs in one node gets: its
    own NIC (``nic_bytes_per_s``), or its share of the node's NICs when the node has fewer than its GPUs
    (``rates.node_nic_bytes_per_s``, ``hardware.nic_gbps_per_node``). NCCL gives every channel's ring a NIC of the
    node and runs several channels on one NIC when there are fewer NICs than GPUs (``ncclTopoGetNetDev``,
    NVIDIA/nccl src/graph/search.cc @5067397c2676d5aed50042fc39e5c8ee96eb0027), so the ranks crossing from one node
    share what the node has: 3 nodes of 8 A100s on 4 HDR cards a node reached an all-reduce bus bandwidth of 95.7
    GB/s, the four cards' 100 GB/s, not eight cards' (NVIDIA/nccl-tests issue #119, 2022-11-17). Only this
    collective's own ranks share the cap: collectives of other groups running at the same time on the node are not
    counted."""
    local = max(1, local_ranks)
    if rates.node_nic_bytes_per_s is None:
        return nic_bytes_per_s
    return min(nic_bytes_per_s, rates.node_nic_bytes_per_s / local)


def p2p_bytes_per_s(*, rates: DeviceRates, crosses_nodes: bool, nic_bytes_per_s: float, senders_per_node: int = 1
                    ) -> float:
    """Rate of one point-to-point send (a pipeline stage's activation or its gradient): NCCL's intra-node rate, or,
    across nodes, the sending GPU's NIC at ``NIC_EFFICIENCY`` (capped by the intra-node rate), one GPU to one GPU.
    ``senders_per_node``: the node's GPUs that send across at the same moment, which share the node's NICs when it
    has fewer than its GPUs (``gpu_nic_bytes_per_s``, ``hardware.nic_gbps_per_node``); with one NIC per GPU each
    keeps its own and the count changes nothing. A pipeline boundary's senders are the stage's ranks on the node
    whose next stage is off it (``plan.time.pipeline_senders_per_node``): its tensor (x context) parallel ranks run
    every layer in lockstep (their collectives), and its data-parallel replicas the same schedule, so they reach the
    send together, and under Megatron-LM's scatter/gather each sends its ``1/tp`` slice of one activation (Narayanan et al. 2021,
    arXiv:2104.04473 §4.1)."""
    bus = rates.intra_node_bus_bytes_per_s
    if not crosses_nodes:
        return bus
    return min(bus, gpu_nic_bytes_per_s(rates=rates, nic_bytes_per_s=nic_bytes_per_s,
                                        local_ranks=max(1, senders_per_node)) * NIC_EFFICIENCY)


def domain_ranks(*, ranks: int, stride: int = 1, domain_gpus: int) -> int:
    """How many of one collective group's ``ranks`` share an NVLink domain of ``domain_gpus`` GPUs: a host, or on a
    rack-scale NVLink system the job's share of one rack (``plan.time.nvlink_gpus_per_node``). ``ranks`` when every
    group of its kind lies in one domain, fewer when some group spans domains (its traffic between them then leaves
    through the NICs: ``ring_bus_bytes_per_s`` ``local_ranks``, ``all_to_all_bus_bytes_per_s`` ``ranks_in_node``).

    The rank layout decides it. Megatron-Core numbers the global ranks in the order tp-cp-ep-dp-pp, tp innermost
    (NVIDIA/Megatron-LM megatron/core/parallel_state.py ``generate_masked_orthogonal_rank_groups`` l. 269-300,
    ``RankGenerator`` l. 465, default order l. 617 @d98e8a64ddf34856e74b24714e3bedb2f5a39553; the expert groups
    the same order with tp = etp), and the hosts hold consecutive global ranks: a group of one dimension is
    ``ranks`` ranks ``stride`` apart (``stride`` = the product of the inner dimensions: 1 for tp, tp for cp and dp,
    etp for ep, world / pp for pp), and the groups of that dimension tile blocks of ``ranks · stride`` consecutive
    ranks. Domains are ``domain_gpus``
    consecutive ranks, so every group fits when its block fits a domain and divides it (``block <= D``,
    ``D % block == 0``). Otherwise a domain boundary cuts some group, at an offset in its block that is a multiple of
    ``gcd(block, D)``: its smallest share of one domain is ``gcd(block, D) / stride`` ranks (at least one), and the
    slowest share sets a collective's pace."""
    n, s, d = max(1, ranks), max(1, stride), max(1, domain_gpus)
    block = n * s
    if block <= d and d % block == 0:
        return n
    return max(1, min(n, gcd(block, d) // s))


def domain_span(*, ranks: int, domain_gpus: int) -> int:
    """NVLink domains the widest group spans when groups of ``ranks`` consecutive ranks tile the job from rank 0 and a
    domain holds ``domain_gpus`` consecutive ranks: the ``nNodes`` of that group's NCCL communicator, which counts the
    distinct nodes among its ranks (NVIDIA/nccl src/init.cc l. 1285-1300, one node per distinct first rank of the
    intra-node ring, @5067397c2676d5aed50042fc39e5c8ee96eb0027) and prices the latency with it (src/graph/tuning.cc
    l. 281 ``ppn = nRanks / nNodes``, l. 411 ``nInterSteps``). 1 when every group fits a domain (``domain_ranks``
    returns ``ranks``); else a domain boundary cuts groups at offsets that are multiples of ``g = domain_ranks(...)``
    (``gcd(ranks, domain_gpus)``), and the group at the last of them, ``domain_gpus − g``, keeps ``g`` ranks in its
    first domain and spans ``ceil((ranks − g) / domain_gpus)`` more: ``1 + ceil((ranks − g) / domain_gpus)`` (a group
    of 3 on 8-GPU hosts: ranks 6, 7 | 8, two nodes; ``group_nodes(ranks, g)`` would say three)."""
    n, d = max(1, ranks), max(1, domain_gpus)
    g = domain_ranks(ranks=n, domain_gpus=d)
    return 1 + ceil((n - g) / d)


def all_to_all_bus_bytes_per_s(*, rates: DeviceRates, ranks: int, ranks_in_node: int, nic_bytes_per_s: float) -> float:
    """The rate at which one rank's all-to-all share (``(n−1)/n`` of its buffer) leaves it, when ``ranks_in_node``
    of the group's ``ranks`` GPUs share its node: the ``(l−1)/n`` of the buffer bound for the same node moves over
    NVLink at the intra-node bus rate while the ``(n−l)/n`` bound for other nodes leaves through the GPU's own NIC
    (rail-optimised node, one NIC per GPU: every GPU of the node sends the same amount, so no NIC carries another
    GPU's share) at ``NIC_EFFICIENCY`` of its rate; the two run at once (NCCL's all-to-all is one grouped set of
    point-to-point sends and receives: nccl-tests ``alltoall_perf`` / ``ncclGroupStart``). Inside one node:
    the intra-node rate."""
    n = max(1, ranks)
    local = max(1, min(ranks_in_node, n))
    bus = rates.intra_node_bus_bytes_per_s
    if local >= n:
        return bus
    nic = gpu_nic_bytes_per_s(rates=rates, nic_bytes_per_s=nic_bytes_per_s, local_ranks=local) * NIC_EFFICIENCY
    seconds_per_byte = max((local - 1) / n / bus, (n - local) / n / nic)
    return (n - 1) / n / seconds_per_byte


def all_gather_wire_seconds(*, total_bytes: float, ranks: int, bus_bytes_per_s: float) -> float:
    """Bandwidth part of one ring all-gather / reduce-scatter of a ``total_bytes`` buffer: each rank receives
    (sends) the ``(ranks − 1)/ranks`` it does not hold, ``(n−1)/n · S / bus``."""
    return (ranks - 1) / ranks * total_bytes / bus_bytes_per_s


def all_reduce_wire_seconds(*, total_bytes: float, ranks: int, bus_bytes_per_s: float) -> float:
    """Bandwidth part of one ring all-reduce: ``2·(n−1)/n · S / bus`` (a reduce-scatter then an all-gather)."""
    return 2 * (ranks - 1) / ranks * total_bytes / bus_bytes_per_s


def all_gather_seconds(*, total_bytes: float, ranks: int, bus_bytes_per_s: float, latency_s: float | None = None,
                       nodes: int = 1, intra_link: "IntraLink | None" = None) -> float:
    """One ring all-gather of a ``total_bytes`` buffer over ``ranks`` GPUs on ``nodes`` nodes. ``latency_s`` None:
    NCCL's own tuner prices it (``nccl_collective_seconds``: its cheapest protocol, tuning.cc's latencies); a number:
    that whole fixed latency (a caller's measurement) plus the ring/Simple wire time."""
    if ranks <= 1 or total_bytes <= 0:
        return 0.0
    if latency_s is None:
        return nccl_collective_seconds(collective="all_gather", total_bytes=total_bytes, ranks=ranks, nodes=nodes,
                                       bus_bytes_per_s=bus_bytes_per_s, intra_link=intra_link)
    return (latency_s
            + all_gather_wire_seconds(total_bytes=total_bytes, ranks=ranks, bus_bytes_per_s=bus_bytes_per_s))


def reduce_scatter_seconds(*, total_bytes: float, ranks: int, bus_bytes_per_s: float, latency_s: float | None = None,
                           nodes: int = 1, intra_link: "IntraLink | None" = None) -> float:
    """A ring reduce-scatter costs what the all-gather does in NCCL's tuner (same ``nsteps = n − 1``, same bytes)."""
    return all_gather_seconds(total_bytes=total_bytes, ranks=ranks, bus_bytes_per_s=bus_bytes_per_s,
                              latency_s=latency_s, nodes=nodes, intra_link=intra_link)


# NCCL runs an all-to-all (torch ``all_to_all_single``, which Megatron-Core's alltoall token dispatcher and a Ulysses
# context-parallel exchange call) as one group of ncclSend / ncclRecv to every peer, not as a ring (NVIDIA/nccl
# @5067397c2676d5aed50042fc39e5c8ee96eb0027). ``src/enqueue.cc`` ``scheduleP2pTasksToPlan`` puts the whole group in one
# kernel plan: round ``r`` of ``comm->p2pSchedule`` (``src/init.cc`` l. 930-950, one send peer and one receive peer per
# round) goes to the channel ``ncclP2pChannelBaseForRound`` picks (``src/include/channel.h``: inside one NVLink domain
# the round number bit-reversed over ``p2pnChannels``, so consecutive rounds land on different channels; across nodes
# eight consecutive rounds share a channel); with more ranks than p2p channels each peer gets one channel
# (``nChannelsMin`` halved while ``nChannelsMin * nRanks > p2pnChannels``). Every channel is one thread block that
# runs its batches in order, a batch holding up to ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH`` = 8 p2p operations of one group
# of eight rounds (``src/include/device.h`` l. 391; ``src/enqueue.cc`` ``ncclAddWorkBatchToPlan`` l. 138-150), run at
# once by the block's warps. So all peers progress in parallel, and a channel's block meets its operations in
# ``ceil(ranks / p2pnChannels)`` sequential batches inside one NVLink domain (``enqueue.cc`` l. 1049-1057:
# ``maxConcurrent = p2pnChannels / nChannelsMax * NCCL_MAX_DEV_WORK_P2P_PER_BATCH``; across nodes NCCL lowers the
# channels per peer until every peer fits one round, ``src/graph/paths.cc`` ``ncclTopoComputeP2pChannels``), not
# ``ranks − 1`` ring steps. The latency is the collective's fixed cost plus one hop per such round; the bandwidth term
# is unchanged (each rank still sends ``(n−1)/n`` of its buffer). Check: an nccl-tests all-to-all table (redop
# ``none``, root -1, 4 floats per peer at 128 B) on 8 Hopper GPUs of one node (H20, NVSwitch; deepseek-ai/DeepEP issue
# #303, https://github.com/deepseek-ai/DeepEP/issues/303, read 2026-12-02) reads 10.6 us at 128 B and 11.1 us at
# 4 KiB: flat in the size, 7.5 us above its 3.1 us zero-byte rows, one round, where a ring's 7 steps would add
# 7 x 3.4 us at tuning.cc's NVLink Simple step. No published small-message all-to-all at 16-64 GPUs
# was found to check the growth with the rank count; it rests on the code above.
NCCL_P2P_CHANNELS = 32
"""``p2pnChannels``: ``min(nChannels, NCCL_MAX_P2P_NCHANNELS)`` rounded to a power of two (``src/graph/paths.cc``
``ncclTopoComputeP2pChannels`` @5067397c). NCCL's init log on 8 H100 of one node reads "24 coll channels, 16 nvls
channels, 32 p2p channels, 32 p2p channels per peer" (aws-samples/aws-do-eks
``Container-Root/eks/deployment/nccl-test/README.md`` @701c554a6f00012781e83e5a2ea020fe6bb8cd46, p5.48xlarge)."""


def grouped_p2p_rounds(*, ranks: int, p2p_channels: int = NCCL_P2P_CHANNELS) -> int:
    """Sequential p2p batches one channel runs for a grouped send / receive to every one of ``ranks − 1`` peers
    inside one NVLink domain: ``ceil(ranks / p2p_channels)`` (block comment above; 1 up to ``p2p_channels`` ranks).
    Across nodes NCCL packs eight peers per batch, so this is an upper bound there."""
    n = max(1, ranks)
    return max(1, ceil(n / max(1, p2p_channels)))


def grouped_p2p_latency_s(*, ranks: int, latency_s: float | None = None, nodes: int = 1) -> float:
    """Fixed seconds of one grouped send / receive to every peer (an NCCL all-to-all, or DeepEP's dispatch to every
    peer at once), one step per sequential round (``grouped_p2p_rounds``), against a ring's ``ranks − 1`` steps. ``latency_s`` None: NCCL's tuner constants (tuning.cc has no p2p row; its ring/Simple ones stand in, the
    protocol NCCL's p2p runs above ``NCCL_P2P_LL_THRESHOLD``): ``baseLat`` 8.4 us plus per round the NVLink Simple
    step 3.4 us, or across ``nodes`` the network Simple step 14 us plus ``NCCL_NET_STEP_EXCESS_S``. Check: 11.8 us for
    8 GPUs in one node against the 10.6 us nccl-tests all-to-all at 128 B on 8 H20 (block comment above), and against
    11.3-11.9 us for an all-to-all of 2 x RTX 4090 without P2P at small sizes (tinygrad/open-gpu-kernel-modules issue
    #17, https://github.com/tinygrad/open-gpu-kernel-modules/issues/17, read 2026-12-03; there the PCI row's Simple
    step, 5.7 us, would read 14.1 us: the NVLink row is kept for every link). A number: that whole latency."""
    if ranks <= 1:
        return 0.0
    rounds = grouped_p2p_rounds(ranks=ranks)
    if latency_s is not None:
        return latency_s
    key = ("ring", "simple")
    step_us = (_NCCL_NVLINK_HOP_US[key] if nodes <= 1
               else _NCCL_NET_HOP_US[key] + NCCL_NET_STEP_EXCESS_S * 1e6)
    return (_NCCL_BASE_LAT_US[key] + rounds * step_us) * 1e-6


def all_to_all_seconds(*, total_bytes: float, ranks: int, bus_bytes_per_s: float, latency_s: float | None = None,
                       nodes: int = 1) -> float:
    """Each rank sends ``(n−1)/n`` of its ``total_bytes`` buffer to the others (the all-gather's bandwidth term;
    ``all_to_all_bus_bytes_per_s`` for a group that spans nodes), all peers at once: the latency of grouped
    point-to-point (``grouped_p2p_latency_s``), not a ring's."""
    if ranks <= 1 or total_bytes <= 0:
        return 0.0
    return (grouped_p2p_latency_s(ranks=ranks, latency_s=latency_s, nodes=nodes)
            + all_gather_wire_seconds(total_bytes=total_bytes, ranks=ranks, bus_bytes_per_s=bus_bytes_per_s))


def all_reduce_seconds(*, total_bytes: float, ranks: int, bus_bytes_per_s: float, latency_s: float | None = None,
                       nodes: int = 1, intra_link: "IntraLink | None" = None) -> float:
    """One all-reduce; ``latency_s`` None: NCCL's tuner (ring or tree, cheapest protocol: ``nccl_collective_seconds``),
    a number: that whole fixed latency plus the ring/Simple wire time (``all_gather_seconds``)."""
    if ranks <= 1 or total_bytes <= 0:
        return 0.0
    if latency_s is None:
        return nccl_collective_seconds(collective="all_reduce", total_bytes=total_bytes, ranks=ranks, nodes=nodes,
                                       bus_bytes_per_s=bus_bytes_per_s, intra_link=intra_link)
    return (latency_s
            + all_reduce_wire_seconds(total_bytes=total_bytes, ranks=ranks, bus_bytes_per_s=bus_bytes_per_s))


def broadcast_seconds(*, total_bytes: float, ranks: int, bus_bytes_per_s: float, latency_s: float | None = None,
                      nodes: int = 1, intra_link: IntraLink | None = None) -> float:
    """One NCCL broadcast of ``total_bytes`` from one rank to the other ``ranks − 1`` (pipelined ring: every byte
    crosses each link once, so the bus bandwidth is the algorithm bandwidth, nccl-tests ``PERFORMANCE.md``); 0 for
    one rank or an empty buffer. ``latency_s`` None: NCCL's tuner over ``nodes`` nodes (``nccl_broadcast``, its
    cheapest protocol); a number: that latency plus ``bytes / bus``. The same cost as the refit broadcast in
    ``sync.weight_sync_seconds``."""
    if ranks <= 1 or total_bytes <= 0:
        return 0.0
    if latency_s is None:
        return nccl_broadcast(total_bytes=total_bytes, ranks=ranks, nodes=nodes, bus_bytes_per_s=bus_bytes_per_s,
                              intra_link=intra_link).seconds(total_bytes)
    return latency_s + total_bytes / bus_bytes_per_s


def zero1_param_sync_seconds(*, total_bytes: float, ranks: int, bus_bytes_per_s: float, nodes: int = 1,
                             intra_link: IntraLink | None = None, broadcast_per_rank: bool = False) -> float:
    """A ZeRO-1 step handing the updated parameters (``total_bytes`` in all, one equal shard per rank) back over its
    group of ``ranks`` GPUs on ``nodes`` nodes. ``broadcast_per_rank`` False: one ring all-gather
    (``all_gather_seconds``). True: one NCCL broadcast per rank, each of that rank's ``total_bytes / ranks`` shard to
    the others, run one after the other on the group's communicator, so each pays its own ring fill
    (``broadcast_seconds``) -- InternEvo's ``HybridZeroOptimizer.broadcast_params`` (a ``dist.broadcast(..., src=g_rank,
    group=ZERO1, async_op=True)`` per rank of the zero1 group, every handle waited before the step returns;
    InternLM/InternEvo internlm/solver/optimizer/hybrid_zero_optim.py l.622 and l.629-647
    @c18bec9361684189aadf6ffb724f9dfe48288eb0). The bytes are the all-gather's; the ``ranks`` fills are not.
    Check, not fitted: InternEvo's published zero1 -1 row (7B, 8-1024 A100, 4 x 100 Gb RoCE a node;
    ``benchmarks/data/published_train_times_internevo_peft.json``) loses 1.1 / 1.7 / 3.2 s a step over its 8-GPU pace
    (4.03 s) at 256 / 512 / 1024 GPUs; with these fills the step lands within +2 / +7 / +25 % (one all-gather: -4 /
    -13 / -30 %), so at 1024 ranks the fill priced with ``NCCL_NET_STEP_EXCESS_S`` (measured on H100 / InfiniBand) is
    about twice what that cluster shows. Those rows' group is the whole data group, whose gradients
    ``exposed_data_parallel`` reduce-scatters; InternEvo all-reduces them there too (``INTERNEVO_ZERO1_REDUCE``: every
    hook's ``reduce_rank`` is None whatever the group), which would put them at +4 / +9 / +27 %."""
    if ranks <= 1 or total_bytes <= 0:
        return 0.0
    if not broadcast_per_rank:
        return all_gather_seconds(total_bytes=total_bytes, ranks=ranks, bus_bytes_per_s=bus_bytes_per_s, nodes=nodes,
                                  intra_link=intra_link)
    return ranks * broadcast_seconds(total_bytes=total_bytes / ranks, ranks=ranks, bus_bytes_per_s=bus_bytes_per_s,
                                     nodes=nodes, intra_link=intra_link)


# NCCL's own cost model of an all-reduce (NVIDIA/nccl src/graph/tuning.cc, ``ncclTunerConstantsDefaults`` and
# ``ncclTopoTuneModel``, @5067397c2676d5aed50042fc39e5c8ee96eb0027, 2026-06-11:
# https://github.com/NVIDIA/nccl/blob/5067397c2676d5aed50042fc39e5c8ee96eb0027/src/graph/tuning.cc). NCCL times every (algorithm, protocol) pair
# as ``latency + bytes / algorithm bandwidth`` and runs the fastest; the ring/Simple formula above is one of the six.
_NCCL_BASE_LAT_US = {("tree", "ll"): 6.8, ("tree", "ll128"): 14.0, ("tree", "simple"): 8.4,
                     ("ring", "ll"): 6.6, ("ring", "ll128"): 14.0, ("ring", "simple"): 8.4}
"""``baseLatencies`` (us) of the tree and ring algorithms, LL / LL128 / Simple (https://github.com/NVIDIA/nccl/blob/5067397c2676d5aed50042fc39e5c8ee96eb0027/src/graph/tuning.cc#L149-L155)."""
_NCCL_NVLINK_HOP_US = {("tree", "ll"): 0.6, ("tree", "ll128"): 1.25, ("tree", "simple"): 4.0,
                       ("ring", "ll"): 0.6, ("ring", "ll128"): 1.9, ("ring", "simple"): 3.4}
"""``hwLatencies[NVLINK]`` (us per step inside a node; https://github.com/NVIDIA/nccl/blob/5067397c2676d5aed50042fc39e5c8ee96eb0027/src/graph/tuning.cc#L158-L162)."""
_NCCL_NET_HOP_US = {("tree", "ll"): 5.0, ("tree", "ll128"): 8.5, ("tree", "simple"): 14.0,
                    ("ring", "ll"): 2.7, ("ring", "ll128"): 4.0, ("ring", "simple"): 14.0}
"""``hwLatencies[NET]`` (us per step between nodes; https://github.com/NVIDIA/nccl/blob/5067397c2676d5aed50042fc39e5c8ee96eb0027/src/graph/tuning.cc#L170-L174)."""
_NCCL_PCI_HOP_US = {("tree", "ll"): 1.0, ("tree", "ll128"): 1.9, ("tree", "simple"): 28.0,
                    ("ring", "ll"): 1.0, ("ring", "ll128"): 2.5, ("ring", "simple"): 5.7}
"""``hwLat[NCCL_HW_PCI]`` (us per step inside a node over PCIe, or through host memory without P2P), the row as
stored at @01afd20a77b5804e0ecf1042509dd9d20ebf9e93 (2020-06-26, ``hwLat`` l.67:
https://github.com/NVIDIA/nccl/blob/01afd20a77b5804e0ecf1042509dd9d20ebf9e93/src/graph/tuning.cc#L67; the NVLink and
network rows above are the newer ones; at @5067397c the PCI row's tree / Simple entry reads 4.0 and l.279-280 copy the
ring's into it in one case)."""
_NCCL_NET_OVERHEAD_US = 1.0
"""``getNetOverhead``: 1 us per network post on x86 Intel hosts (2 on AMD); x3 for Simple; inter-node rings only
(NVIDIA/nccl ``src/graph/tuning.cc`` @5067397c2676d5aed50042fc39e5c8ee96eb0027, https://github.com/NVIDIA/nccl/blob/5067397c2676d5aed50042fc39e5c8ee96eb0027/src/graph/tuning.cc#L228-L233, the x3 at
l.405-408; module docstring)."""
_NCCL_BUS_FACTOR = {("tree", "ll"): 0.92 / 3.8, ("tree", "ll128"): 0.92 * 120 / 128, ("tree", "simple"): 0.92,
                    ("ring", "ll"): 0.5, ("ring", "ll128"): 0.92, ("ring", "simple"): 1.0}
"""The protocol's share of the ring/Simple bus bandwidth (tuning.cc "model refinements"; a tree all-reduce
``min(busBw·.92, …)`` first, LL128 inside one node ``7/9`` instead of ``120/128``; https://github.com/NVIDIA/nccl/blob/5067397c2676d5aed50042fc39e5c8ee96eb0027/src/graph/tuning.cc#L326-L335)."""
NCCL_LL_MAX_BUS_BYTES_PER_S = {1: 141.0e9, 2: 39.0e9, 4: 20.4e9}
"""``llMaxBws``: the LL protocol's bus-bandwidth cap (GB/s) by nodes (1: Hopper inside one node; 2 and 4+: x86
Intel hosts across nodes): rows "Hopper-N1" 141.0 and "Intel-N2/Intel-N4" 39.0, 20.4 of https://github.com/NVIDIA/nccl/blob/5067397c2676d5aed50042fc39e5c8ee96eb0027/src/graph/tuning.cc#L177-L183."""


NCCL_NET_STEP_EXCESS_S = 18.2e-6
"""Seconds a measured inter-node all-reduce spends per network step beyond ``tuning.cc``'s model of it (the NIC
post, the proxy thread's progress of the send and receive, the completion poll, which ``hwLat[NET]`` prices low for
small buffers). From one measured set: NVIDIA/nccl issue #1453 (https://github.com/NVIDIA/nccl/issues/1453, 2024-09;
2 nodes x 8 H100 over InfiniBand with GPUDirect RDMA, rank 0 -> 8 via ``NET/IBext_v8/7/GDRDMA``): NCCL's own tuner log
prices a 128 B all-reduce at 25.21 us (tree / LL, the same figure ``nccl_all_reduce_choices`` gives for 16 ranks on
2 nodes), ``all_reduce_perf`` measures 61.58 us; the 36.4 us excess over the tree's 2 network steps (up and down
its one inter-node edge) is 18.2 us a step. In the same set 4 KiB measures 75.38 us against 25.87 us tuned (model
with the excess: 61.8 us, 18 % low). Checked on an independent set: a 2 x 8 H100 InfiniBand cluster on Nebius
(drmysore/nebius-h100-16gpu-benchmark ``README.md`` @21b486574ab73a72f91524d20f19e7c234ac6b9c, NCCL 2.20.5,
2025-12-15: 1 MB all-reduce over 16 GPUs 0.088 ms): the tuner alone 56 us (-36 %), with the excess 92.5 us (+5 %).
Both are eager measurements (no CUDA graph): part of the excess may be the host's launch, which a graph replay
hides; not separated here. Applied per network step of each (algorithm, protocol): ring ``2(N−1)``, tree
``2·log2 N``; 0 inside one node. Passed by the decode model's engine all-reduce (``decode_step.tp_all_reduce``);
``nccl_all_reduce_choices`` alone stays tuning.cc's figure."""


class IntraLink(str, Enum):
    """The link NCCL's ring runs on inside a node: it picks the hop latency (``hwLat`` NVLINK or PCI row) and
    whether LL128 runs (tuning.cc enables it by default only when the graph's ``typeIntra`` is NVLink)."""

    NVLINK = "nvlink"
    PCIE = "pcie"

    @classmethod
    def of(cls, *, nvlink: bool) -> "IntraLink":
        """The link of a node whose GPUs have NVLink (``DeviceRates.nvlink``), else PCIe."""
        return cls.NVLINK if nvlink else cls.PCIE


@dataclass(frozen=True, slots=True)
class AllReduceChoice:
    """The (algorithm, protocol) NCCL's tuner runs for one all-reduce, and its linear cost."""

    algorithm: str
    protocol: str
    latency_s: float
    alg_bytes_per_s: float
    """Buffer bytes per second (bus bandwidth converted: ring ``n / 2(n−1)``, tree ½)."""

    def seconds(self, total_bytes: float) -> float:
        return self.latency_s + total_bytes / self.alg_bytes_per_s


def nccl_ring_choices(*, ranks: int, nodes: int, bus_bytes_per_s: float, intra_link: IntraLink = IntraLink.NVLINK,
                      net_step_excess_s: float = 0.0, passes: int = 1) -> list[AllReduceChoice]:
    """NCCL's ring costs, one per protocol (LL, LL128 on NVLink, Simple), for ``ranks`` GPUs over ``nodes`` nodes
    (tuning.cc ``ncclTopoTuneModel`` @5067397c): ``passes`` 1 for an all-gather / reduce-scatter (``nsteps = nRanks −
    1``, ``nInterSteps = nNodes − 1``), 2 for an all-reduce (a reduce-scatter then an all-gather around the ring:
    ``nsteps = 2(nRanks − 1)``, ``nInterSteps = 2(nNodes − 1)``). Latency ``base + (nsteps − nInterSteps)·max(intra
    hop, net overhead) + nInterSteps·net hop`` (the overhead only across nodes; a group with one GPU per node takes
    the tree's network hop), each network step plus ``net_step_excess_s``; buffer bytes per second
    ``bus·factor·n/nsteps`` (LL half the bus, capped at ``llMaxBw``; LL128 0.92), so ``seconds(S) = latency +
    passes·(n−1)/n·S / (bus·factor)``. Left out as for the all-reduce: per-channel caps, NVLS / CollNet, and PAT (only
    one GPU per node, Simple). The one ring formula: ``nccl_all_reduce_choices`` takes its ring rows from here."""
    n, big_n = max(1, ranks), max(1, min(nodes, ranks))
    ppn = n / big_n
    nsteps, inter_steps = passes * (n - 1), passes * (big_n - 1)
    ll_cap = NCCL_LL_MAX_BUS_BYTES_PER_S[1 if big_n == 1 else 2 if big_n == 2 else 4]
    hops = _NCCL_NVLINK_HOP_US if intra_link is IntraLink.NVLINK else _NCCL_PCI_HOP_US
    out = []
    for proto in ("ll", "ll128", "simple"):
        if proto == "ll128" and intra_link is not IntraLink.NVLINK:
            continue
        key = ("ring", proto)
        intra = hops[key]
        inter = _NCCL_NET_HOP_US[("tree", proto) if ppn == 1 else key] + net_step_excess_s * 1e6
        if big_n > 1:
            intra = max(intra, _NCCL_NET_OVERHEAD_US * (3 if proto == "simple" else 1))
        lat_us = _NCCL_BASE_LAT_US[key] + (nsteps - inter_steps) * intra + inter_steps * inter
        bus = bus_bytes_per_s * _NCCL_BUS_FACTOR[key]
        if proto == "ll":
            bus = min(bus, ll_cap)
        out.append(AllReduceChoice("ring", proto, lat_us * 1e-6, bus * n / max(1, nsteps)))
    return out


def nccl_all_reduce_choices(*, ranks: int, nodes: int, bus_bytes_per_s: float,
                            intra_link: IntraLink = IntraLink.NVLINK,
                            net_step_excess_s: float = 0.0) -> list[AllReduceChoice]:
    """NCCL's six (tree, ring) x (LL, LL128, Simple) all-reduce costs for ``ranks`` GPUs over ``nodes`` nodes
    (block comment above: tuning.cc @5067397c). ``bus_bytes_per_s``: the ring/Simple bus bandwidth
    (``ring_bus_bytes_per_s``). The ring rows are ``nccl_ring_choices`` with ``passes=2``; the tree rows, per
    tuning.cc: latency ``base + 2·((n/N − 1)·intra hop + log2 N·net hop)`` (a group with one GPU per node takes the
    tree's network hop, as the ring does), buffer bytes per second half the bus bandwidth times the protocol factor.
    Left out: per-channel bandwidth caps (no channel count here), NVLS / CollNet (need NVSwitch SHARP / a SHARP
    fabric) and the ``latencyInter`` of the topology. ``intra_link`` PCIE: the PCI hop row (``_NCCL_PCI_HOP_US``) and
    no LL128 (four choices). Across nodes every network step also pays ``net_step_excess_s`` (0: the tuner's own
    figure; ``NCCL_NET_STEP_EXCESS_S``: the measured excess, which the decode model passes)."""
    n, big_n = max(1, ranks), max(1, min(nodes, ranks))
    ppn = n / big_n
    log2_nodes = big_n.bit_length() - 1
    ll_cap = NCCL_LL_MAX_BUS_BYTES_PER_S[1 if big_n == 1 else 2 if big_n == 2 else 4]
    hops = _NCCL_NVLINK_HOP_US if intra_link is IntraLink.NVLINK else _NCCL_PCI_HOP_US
    out = []
    for proto in ("ll", "ll128", "simple"):
        if proto == "ll128" and intra_link is not IntraLink.NVLINK:
            continue
        key = ("tree", proto)
        net_steps = 2 * log2_nodes
        lat_us = (_NCCL_BASE_LAT_US[key] + 2 * ((ppn - 1) * hops[key] + log2_nodes * _NCCL_NET_HOP_US[key])
                  + net_steps * net_step_excess_s * 1e6)
        factor = 0.92 * 7 / 9 if proto == "ll128" and big_n == 1 else _NCCL_BUS_FACTOR[key]
        bus = bus_bytes_per_s * factor
        if proto == "ll":
            bus = min(bus, ll_cap)
        out.append(AllReduceChoice("tree", proto, lat_us * 1e-6, bus * 0.5))
    return out + nccl_ring_choices(ranks=ranks, nodes=nodes, bus_bytes_per_s=bus_bytes_per_s, intra_link=intra_link,
                                   net_step_excess_s=net_step_excess_s, passes=2)


def nccl_all_reduce(*, total_bytes: float, ranks: int, nodes: int, bus_bytes_per_s: float,
                    intra_link: IntraLink = IntraLink.NVLINK,
                    net_step_excess_s: float = 0.0) -> AllReduceChoice | None:
    """The cheapest of ``nccl_all_reduce_choices`` for a ``total_bytes`` buffer (NCCL's ``topoGetAlgoInfo``
    picks the minimum time); None for one rank."""
    if ranks <= 1:
        return None
    return min(nccl_all_reduce_choices(ranks=ranks, nodes=nodes, bus_bytes_per_s=bus_bytes_per_s,
                                       intra_link=intra_link, net_step_excess_s=net_step_excess_s),
               key=lambda c: c.seconds(max(0.0, total_bytes)))


def nccl_all_reduce_seconds(*, total_bytes: float, ranks: int, nodes: int, bus_bytes_per_s: float,
                            intra_link: IntraLink = IntraLink.NVLINK,
                            net_step_excess_s: float = 0.0) -> float:
    """Seconds of one all-reduce as NCCL's tuner times its fastest (algorithm, protocol); 0 for one rank or
    an empty buffer."""
    if ranks <= 1 or total_bytes <= 0:
        return 0.0
    c = nccl_all_reduce(total_bytes=total_bytes, ranks=ranks, nodes=nodes, bus_bytes_per_s=bus_bytes_per_s,
                        intra_link=intra_link, net_step_excess_s=net_step_excess_s)
    return c.seconds(total_bytes)


def nccl_collective_seconds(*, collective: str, total_bytes: float, ranks: int, nodes: int, bus_bytes_per_s: float,
                            intra_link: IntraLink | None = None) -> float:
    """Seconds of one ``collective`` ("all_gather", "reduce_scatter" or "all_reduce") of ``total_bytes`` over ``ranks``
    GPUs on ``nodes`` nodes as NCCL's tuner times its cheapest (algorithm, protocol) (``nccl_ring_choices``,
    ``nccl_all_reduce_choices``): the training step's collectives priced as the decode model prices its all-reduce.
    A group spanning nodes also pays the measured excess per network step (``NCCL_NET_STEP_EXCESS_S``), as the decode
    model's engines across nodes do. 0 for one rank or an empty buffer."""
    if ranks <= 1 or total_bytes <= 0:
        return 0.0
    return min(c.seconds(total_bytes) for c in nccl_collective_choices(
        collective=collective, ranks=ranks, nodes=nodes, bus_bytes_per_s=bus_bytes_per_s, intra_link=intra_link))


def nccl_collective_choices(*, collective: str, ranks: int, nodes: int, bus_bytes_per_s: float,
                            intra_link: IntraLink | None = None) -> list[AllReduceChoice]:
    """The (algorithm, protocol) costs ``nccl_collective_seconds`` takes the cheapest of: ``nccl_all_reduce_choices``
    for "all_reduce", else ``nccl_ring_choices``, over ``nodes`` clamped to ``1..ranks``, each network step with
    ``NCCL_NET_STEP_EXCESS_S`` when the group spans nodes."""
    nodes = max(1, min(nodes, ranks))
    kw = dict(ranks=ranks, nodes=nodes, bus_bytes_per_s=bus_bytes_per_s, intra_link=intra_link or IntraLink.NVLINK,
              net_step_excess_s=NCCL_NET_STEP_EXCESS_S if nodes > 1 else 0.0)
    return nccl_all_reduce_choices(**kw) if collective == "all_reduce" else nccl_ring_choices(**kw)


def nccl_broadcast_choices(*, ranks: int, nodes: int, bus_bytes_per_s: float,
                           intra_link: IntraLink | None = None) -> list[AllReduceChoice]:
    """NCCL's ring broadcast of ``ranks`` GPUs over ``nodes`` nodes, one cost per protocol (LL, LL128 on NVLink,
    Simple), NVIDIA/nccl @5067397c2676d5aed50042fc39e5c8ee96eb0027.

    Bandwidth, as tuning.cc prices it (``ncclTopoTuneModel``): broadcast runs the ring only (l. 294) with
    ``nsteps = nRanks`` (l. 289-291), so its algorithm bandwidth is the bus bandwidth times the protocol's factor
    (l. 379 ``ratio *= nRanks / nsteps``: LL half of it, capped at ``llMaxBw``; LL128 0.92, on NVLink only).

    Latency: ``baseLatencies[RING][p]`` plus the pipeline's fill. The ring kernel (``src/device/broadcast.h``
    ``runRing`` l. 40-55) has the root send each chunk to the next rank, every other rank receive it, copy it and send
    it on (``directRecvCopyDirectSend``), the rank before the root only receive: a chunk crosses the ``ranks − 1``
    links one after the other, so even a one-chunk buffer waits ``ranks − 1`` steps, of which ``nodes − 1`` cross
    nodes. Each step costs what tuning.cc charges a ring step of the all-gather (``nccl_ring_choices`` ``passes=1``:
    the NVLink or PCI ``hwLatencies`` row inside a node, at least the network overhead when the ring spans nodes,
    the network row across them, plus ``NCCL_NET_STEP_EXCESS_S``): the latency is the ring all-gather's. NCCL's
    own tuner charges a broadcast one step whatever the ranks when the ring graph's channels are all the same ring
    (l. 395-397, ``sameChannels``, the graph search's first try, search.cc l. 1106) and ``nsteps`` steps otherwise,
    "waiting for proper chunk modeling" (l. 399): the two agree at 2 ranks; the tuner's figure only ranks the
    protocols against each other. Checks (small-message nccl-tests rows, eager launch; data for checking, not
    fitted): 2 x RTX 2080 Ti without P2P (SHM, the PCI row) broadcast 11.3-12 us and reduce (priced as the
    broadcast) 9.8-10.4 us against 7.6 us here (LL: 6.6 + 1.0), all-reduce 11.6-13 us against 8.6 us
    (``nccl_all_reduce_choices``) (Anthony-Hoo/Anthony-Hoo.github.io ``posts/AutoDL_Multi-GPU_Interconnection_Test.md``
    @37e805e8e56f839f6557756d76503d45af6ab47e): the model is 2-4 us under a host-staged pair, about one kernel
    launch (the tuner's constants leave the launch out). No published small-message broadcast over more than 2 GPUs
    was found to check the growth with the ranks; it rests on the code above."""
    out = []
    for c in nccl_ring_choices(ranks=ranks, nodes=nodes, bus_bytes_per_s=bus_bytes_per_s,
                               intra_link=intra_link or IntraLink.NVLINK,
                               net_step_excess_s=NCCL_NET_STEP_EXCESS_S if min(nodes, ranks) > 1 else 0.0, passes=1):
        n = max(1, ranks)
        # nccl_ring_choices' buffer rate is bus·factor·n/(n−1); the broadcast's is bus·factor
        out.append(AllReduceChoice(c.algorithm, c.protocol, c.latency_s, c.alg_bytes_per_s * max(1, n - 1) / n))
    return out


def nccl_broadcast(*, total_bytes: float, ranks: int, nodes: int, bus_bytes_per_s: float,
                   intra_link: IntraLink | None = None) -> AllReduceChoice | None:
    """The cheapest of ``nccl_broadcast_choices`` for a ``total_bytes`` buffer; None for one rank."""
    if ranks <= 1:
        return None
    return min(nccl_broadcast_choices(ranks=ranks, nodes=nodes, bus_bytes_per_s=bus_bytes_per_s,
                                      intra_link=intra_link), key=lambda c: c.seconds(max(0.0, total_bytes)))


def group_nodes(*, ranks: int, ranks_per_node: int) -> int:
    """Nodes a collective group of ``ranks`` spans when ``ranks_per_node`` of them share one (NVLink domain)."""
    return max(1, ceil(max(1, ranks) / max(1, min(ranks_per_node, ranks))))


# vLLM's custom all-reduce (vllm-project/vllm ``csrc/custom_all_reduce.cuh`` @036bb685581dbedcd6cf7fc845fe87268c7d1191,
# ``CustomAllreduce::allreduce``): every rank reads its peers' IPC-registered buffers directly over NVLink (or PCIe
# peer-to-peer for two GPUs) and sums them, in at most 36 blocks of 512 threads. One stage
# (``cross_device_reduce_1stage``: each rank reads all ``n−1`` peers' whole buffers) for two GPUs, and with full NVLink
# below 512 KiB for up to 4 GPUs, below 256 KiB for up to 8; above that two stages (``cross_device_reduce_2stage``:
# a reduce-scatter then an all-gather, each rank reading ``(n−1)/n`` of the buffer twice) behind two barriers.
# Time = stage latency + bytes each rank reads / read rate. Constants: least squares over the 18 points of the
# published H100 table of vLLM's kernel (sgl-project/sglang PR #2904, 2025-01-15, "unit test performance in H100",
# tp 2/4/8, eager, input copied into the IPC buffer). The table's "data size" is a count of float32 elements, not
# bytes: the script behind it, ``sgl-kernel/tests/test_trt_reduce.py`` @4fd490c1e43a607265f29626cba9342ca05e1c4e
# (``test_sizes = [512, 4096, 32768, 262144, 524288, 1048576, 2097152]``, world sizes 2, 4, 8: the table's rows),
# times ``torch.randint(1, 16, (sz,), dtype=torch.float32)``, so its buffers are 2 KiB-4 MiB. Which kernel each point
# ran follows from its bytes (one stage: every two-GPU point, and below 512 / 256 KiB at 4 / 8 GPUs; 12 points; two
# stages: 1-4 MiB at 4 and 8 GPUs; 6 points). One joint fit: one stage 8.8 us, two stages 14.9 us, reads at
# 244.5 GB/s (worst point 1.7 us off). The rate is the kernel's (36 blocks) and is taken for other NVLink cards too
# (capped at the card's bus); a PCIe pair runs at the smaller of it and the bus.
#
# The first fit read the sizes as bytes: the same latencies, but reads at 62 GB/s, 4x slow, which priced the custom
# kernel above NCCL's tuner from ~64 KiB on 2 and 4 GPUs and from ~512 KiB on 8 (a 4 MiB buffer: 117 us on 4 H100
# against NCCL's 44 us), the reverse of why vLLM ships it. Checked against vLLM's own in-graph benchmark
# (``benchmarks/kernels/benchmark_device_communicators.py``: ten all-reduces captured in a CUDA graph, replayed),
# H100, 6 GPUs, bf16 (vllm-project/vllm PR #24111, 2025-09-02, read 2026-12-05): 0.5 / 4 MiB two-stage 15 / 37 us,
# this fit 18.5 / 43.5 us (the eager figures hold the input copy and launches a graph replay does not: an upper
# bound; the first fit 30.1 / 128.8 us); 4 GPUs (vllm-project/vllm PR #24532, 2025-09-09, read 2026-12-05):
# two-stage 17 / 42 us, this fit 18.1 / 40.6 us (the first fit 28.7 / 117.5 us).
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)
"""``CustomAllreduce._SUPPORTED_WORLD_SIZES`` (vllm ``vllm/distributed/device_communicators/custom_all_reduce.py``
@00d618aab60448acdf3fac3e9c4e2e22d0c6c753)."""
CUSTOM_AR_MAX_BYTES = 8192 * 1024
"""``CustomAllreduce(max_size=8192 * 1024)``: ``should_custom_ar`` takes buffers strictly under 8 MiB (vllm
``vllm/distributed/device_communicators/custom_all_reduce.py`` @00d618aab60448acdf3fac3e9c4e2e22d0c6c753)."""
CUSTOM_AR_ONE_STAGE_LATENCY_S = 8.8e-6
"""One-stage latency: least squares over the published H100 table of vLLM's kernel, its sizes float32 elements
(https://github.com/sgl-project/sglang/pull/2904, 2025-01-15; sgl-project/sglang
sgl-kernel/tests/test_trt_reduce.py @4fd490c1e43a607265f29626cba9342ca05e1c4e; comment above)."""
CUSTOM_AR_TWO_STAGE_LATENCY_S = 14.9e-6
"""Two-stage latency, the same fit to https://github.com/sgl-project/sglang/pull/2904's H100 table (sizes float32
elements, sgl-project/sglang sgl-kernel/tests/test_trt_reduce.py @4fd490c1e43a607265f29626cba9342ca05e1c4e)."""
CUSTOM_AR_READ_BYTES_PER_S = 244.5e9
"""Bytes per second one rank of the custom kernel reads from its peers (the joint fit of both kernels to
https://github.com/sgl-project/sglang/pull/2904's H100 table, its sizes float32 elements: sgl-project/sglang
sgl-kernel/tests/test_trt_reduce.py @4fd490c1e43a607265f29626cba9342ca05e1c4e; read as bytes it gave 62 GB/s)."""


def custom_all_reduce_seconds(*, total_bytes: float, ranks: int, full_nvlink: bool = True,
                              bus_bytes_per_s: float | None = None) -> float:
    """Seconds of one vLLM custom all-reduce of ``total_bytes`` over ``ranks`` GPUs of one node (block comment
    above); 0 for one rank or an empty buffer. ``full_nvlink`` False (two PCIe GPUs): always one stage;
    ``bus_bytes_per_s`` caps the read rate."""
    if ranks <= 1 or total_bytes <= 0:
        return 0.0
    rate = CUSTOM_AR_READ_BYTES_PER_S if bus_bytes_per_s is None else min(CUSTOM_AR_READ_BYTES_PER_S, bus_bytes_per_s)
    one_stage_below = 512 * 1024 if ranks <= 4 else 256 * 1024
    if ranks == 2 or not full_nvlink or total_bytes < one_stage_below:
        return CUSTOM_AR_ONE_STAGE_LATENCY_S + (ranks - 1) * total_bytes / rate
    return CUSTOM_AR_TWO_STAGE_LATENCY_S + 2 * (ranks - 1) / ranks * total_bytes / rate


@dataclass(frozen=True, slots=True)
class CommTime:
    """Collective seconds of one optimizer step on one GPU: all of it, and what compute leaves exposed."""

    total_s: float
    exposed_s: float


NCCL_HBM_PASSES = 3.0
"""Passes through the GPU's HBM of each byte a collective moves at its bus bandwidth: NCCL stores what it receives in
its buffers and reads it back (2), and reads or writes the user's tensors besides (3): "300GB/s needs to be
multiplied by at least 2x for memory bandwidth, as we need to store to memory, then read back from it. If you add
reading from or writing to user data, it can be 3x" (NCCL's maintainer, NVIDIA/nccl issue #1428, comment of
2024-09-06, https://github.com/NVIDIA/nccl/issues/1428). The issue's own A100-SXM4-80GB trace agrees with the compute
running at the HBM the collective leaves it: 3 x 300 GB/s of 2,000 GB/s leaves 0.55, a kernel 1 / 0.55 = 1.82 x as
long, measured 2.08 / 1.18 ms = 1.76 x (GEMM) and 0.33 / 0.18 ms = 1.83 x (attention) beside an all-gather."""


def hbm_contention_exposed(*, comm: CommTime, compute_s: float, bus_bytes_per_s: float, hbm_bytes_per_s: float,
                           passes: float = NCCL_HBM_PASSES, hidden_wire_s: float | None = None) -> CommTime:
    """``comm`` with the compute that hides it slowed by the HBM bandwidth the collectives take while they run.

    A collective at ``bus_bytes_per_s`` moves ``passes`` times as many bytes through the GPU's HBM
    (``NCCL_HBM_PASSES``): a share ``f = passes · bus / hbm`` of it, which the compute beside it does not get; the
    compute runs at ``1 - f`` of its rate while the collective runs (the kernels of NVIDIA/nccl issue #1428 slow by
    about ``1 / (1 - f)``, GEMMs included) and at its own rate once it is done. A span of ``c`` seconds of
    collectives beside ``w`` seconds of compute, started together, ends at ``max(c, w + c · f)`` rather than
    ``max(c, w)``: a hidden collective (``c <= w``) adds ``c · f``, one that bounds its span
    (``c >= w (1 - f)``) adds nothing. ``comm`` holds the step's hidden seconds only as a total
    (``total_s - exposed_s``, each run beside compute) and ``compute_s`` is the compute they run beside (the
    passes' data-parallel windows over the step): the step adds ``f`` of the hidden seconds, at most the fluid
    bound ``compute_s - total_s (1 - f)`` of the whole step's overlap, to what is exposed. A collective's fixed
    latency moves no bytes: ``hidden_wire_s``, where given, is the hidden seconds of the same schedule priced without
    NCCL's latency (``latency_s=0``), the bytes the hidden collectives move over ``bus_bytes_per_s``; so a faster
    network, whose fixed latency hides in a larger share of HBM, does not charge that latency more.

    Evaluated with it, 2026-12-05 (1,466 rows, against the step timeline without it; all rows / fit half /
    held-out half median |error|): this, 3 passes: 10.16 -> 9.91 / 10.43 -> 10.04 / 9.75 -> 9.82 %. With the
    hidden seconds in full (latency included) and the dense group's rate only: 3 passes 9.91 / 10.04 / 9.85 %;
    2 passes (the statement's lower bound) 10.02 / 10.09 / 9.95 %. Not taken: the compute slowed by Lee et al.'s
    average instead (compute beside a collective 18.9 % slower, arXiv 2507.03114v1, abstract; measured on 4 GPUs
    of one node): 10.13 / 10.14 / 10.11 %, SFT full 8.35 -> 8.75 %; its factor does not grow with the bandwidth the
    collective takes, so it charges a slow collective across nodes and a fast one over NVLink alike."""
    hidden_s = max(0.0, comm.total_s - comm.exposed_s)
    moving_s = hidden_s if hidden_wire_s is None else hidden_wire_s
    return hbm_contention_exposed_by_group(comm=comm, compute_s=compute_s, hbm_bytes_per_s=hbm_bytes_per_s,
                                           passes=passes, groups=((moving_s, bus_bytes_per_s),))


def hbm_contention_exposed_by_group(*, comm: CommTime, compute_s: float, groups: Sequence[tuple[float, float]],
                                    hbm_bytes_per_s: float, passes: float = NCCL_HBM_PASSES) -> CommTime:
    """``hbm_contention_exposed`` for collectives of several process groups at their own bus rates (HSDP's shard
    group in a node and its replica all-reduce through the NICs; the routed experts' expert-data-parallel group).
    ``groups``: per group (its hidden wire seconds, its bus bytes per second), the hidden seconds of the step's
    schedule priced with that group's bytes alone and no NCCL latency (``compute.training``). Each group takes
    ``passes · bus_g / hbm`` of the HBM while it runs, so the compute beside it loses ``hidden_g · passes · bus_g /
    hbm`` seconds: the bytes it moves while hidden, ``passes`` times through HBM; the step adds their sum, at most the
    fluid bound ``compute_s - total_s (1 - f)`` with ``f`` the hidden-seconds-weighted share. Charged per group, a
    slower group added beside a fast one adds its own traffic and leaves the fast one's charge unchanged, where one
    rate for all (the slowest) would charge the fast group's bytes at the slow rate and shorten the step. A group's
    hidden seconds count at most the schedule's hidden seconds (``total_s - exposed_s``).

    Against the slowest rate for every group (step-time benchmark, 2026-12-05): 87 rows move, every one slower (HSDP
    and expert-parallel runs; the largest, the Llama-2-7B HSDP rows of foundation-model-stack/fms-fsdp README.md and
    pytorch/pytorch.github.io's 2024-03-13 post, -6.7 -> -3.0 % and -8.9 -> -5.9 % on 96 H100, +9.3 -> +12.3 % and
    +3.8 -> +6.2 % on 128 A100); medians: pretrain 8.38 -> 8.37 %,
    RL with the default length profile 21.20 -> 21.24 %, all rows 10.69 % unchanged, H200 rows unchanged."""
    hidden_s = max(0.0, comm.total_s - comm.exposed_s)
    if hidden_s <= 0.0 or hbm_bytes_per_s <= 0.0:
        return comm
    moving = [(min(hidden_s, max(0.0, w)), min(1.0, max(0.0, passes) * bus / hbm_bytes_per_s))
              for w, bus in groups if bus > 0.0]
    moving_s = sum(w for w, _ in moving)
    if moving_s <= 0.0:
        return comm
    extra_s = sum(w * share for w, share in moving)
    cap_s = max(0.0, compute_s - comm.total_s * (1.0 - extra_s / moving_s))
    return CommTime(comm.total_s, comm.exposed_s + min(extra_s, cap_s))


@dataclass(frozen=True, slots=True)
class ShardedUnitSeconds:
    """One FSDP unit's collectives, seconds each on its own: a layer's and the root unit's."""

    all_gather_s: float  # a layer's gather prep, dense all-gather and its experts' (``expert_layer_gathers`` pieces)
    reduce_scatter_s: float  # a layer's dense reduce-scatter and its experts'
    all_reduce_s: float  # a layer's HSDP replica all-reduce of its gradient shard
    root_all_gather_s: float
    root_reduce_scatter_s: float
    root_all_reduce_s: float


def sharded_unit_seconds(
    *, layer_weight_bytes: float = 0.0, layer_grad_bytes: float, root_weight_bytes: float = 0.0,
    root_grad_bytes: float, ranks: int, bus_bytes_per_s: float, latency_s: float | None = None,
    expert_layer_weight_bytes: float = 0.0, expert_layer_grad_bytes: float = 0.0, expert_ranks: int = 1,
    expert_bus_bytes_per_s: float | None = None, replica_layer_grad_bytes: float = 0.0,
    replica_root_grad_bytes: float = 0.0, replica_ranks: int = 1, replica_bus_bytes_per_s: float | None = None,
    expert_layer_gathers: float = 1.0, nodes: int = 1, expert_nodes: int = 1, replica_nodes: int = 1,
    intra_link: IntraLink | None = None, layer_gather_prep_s: float = 0.0,
) -> ShardedUnitSeconds:
    """A layer's and the root unit's all-gather, reduce-scatter and HSDP all-reduce seconds, the dense unit over
    ``ranks``, its routed experts over ``expert_ranks`` and the replica all-reduce over ``replica_ranks`` (the
    arguments as ``exposed_sharded`` documents them); ``exposed_sharded`` and ``sharded_reductions_seconds`` schedule
    them."""
    kw = dict(ranks=ranks, bus_bytes_per_s=bus_bytes_per_s, latency_s=latency_s, nodes=nodes, intra_link=intra_link)
    rkw = dict(ranks=replica_ranks, latency_s=latency_s, nodes=replica_nodes, intra_link=intra_link,
               bus_bytes_per_s=bus_bytes_per_s if replica_bus_bytes_per_s is None else replica_bus_bytes_per_s)
    ekw = dict(ranks=expert_ranks, latency_s=latency_s, nodes=expert_nodes, intra_link=intra_link,
               bus_bytes_per_s=bus_bytes_per_s if expert_bus_bytes_per_s is None else expert_bus_bytes_per_s)
    # the expert weights in ``expert_layer_gathers`` separate all-gathers of an equal share each
    gathers = expert_layer_gathers if expert_layer_gathers > 1 and expert_ranks > 1 else 1.0
    return ShardedUnitSeconds(
        all_gather_s=layer_gather_prep_s + all_gather_seconds(total_bytes=layer_weight_bytes, **kw)
        + gathers * all_gather_seconds(total_bytes=expert_layer_weight_bytes / gathers, **ekw),
        reduce_scatter_s=reduce_scatter_seconds(total_bytes=layer_grad_bytes, **kw) + reduce_scatter_seconds(
            total_bytes=expert_layer_grad_bytes, **ekw),
        all_reduce_s=all_reduce_seconds(total_bytes=replica_layer_grad_bytes, **rkw),
        root_all_gather_s=all_gather_seconds(total_bytes=root_weight_bytes, **kw),
        root_reduce_scatter_s=reduce_scatter_seconds(total_bytes=root_grad_bytes, **kw),
        root_all_reduce_s=all_reduce_seconds(total_bytes=replica_root_grad_bytes, **rkw),
    )


def exposed_sharded(
    *, layers: int, layer_weight_bytes: float, layer_grad_bytes: float, root_weight_bytes: float,
    root_grad_bytes: float, ranks: int, bus_bytes_per_s: float, latency_s: float | None = None,
    layer_forward_s: float, layer_backward_s: float, micro_steps: int, reshard_after_forward: bool = True,
    expert_layer_weight_bytes: float = 0.0, expert_layer_grad_bytes: float = 0.0, expert_ranks: int = 1,
    expert_bus_bytes_per_s: float | None = None, replica_layer_grad_bytes: float = 0.0,
    replica_root_grad_bytes: float = 0.0, replica_ranks: int = 1, replica_bus_bytes_per_s: float | None = None,
    expert_layer_gathers: float = 1.0, replica_shares_link: bool = False, nodes: int = 1, expert_nodes: int = 1,
    replica_nodes: int = 1, intra_link: IntraLink | None = None, layer_gather_prep_s: float = 0.0,
    held_to_last_backward: bool = False, layer_gathers_hidden: bool = True,
) -> CommTime:
    """FSDP / ZeRO-3 / HSDP: per-layer gathers and reduce-scatters behind per-layer compute.

    ``layer_gathers_hidden`` False: no layer compute hides a layer unit's all-gathers, forward or backward; each is
    exposed in full (``rate_limiter_exposes_layer_gathers``: FSDP1's rate limiter with adapter units nested in every
    layer). The reductions still run behind the backward as below.

    ``held_to_last_backward``: a pipeline stage under FSDP2 (``plan.fsdp_no_sync.pipeline_fsdp2_holds_unsharded``)
    gathers each unit once a step, behind its first micro-batch's forward, and keeps it (torchtitan's
    ``reshard_after_forward=False`` with pipeline parallel, ``set_reshard_after_backward(False)`` per micro-batch);
    no micro-batch's backward reduce-scatters (``set_requires_gradient_sync(False)``): the stage's
    ``perform_reduce_grad``, scheduled after all its micro-batches' backwards, runs every unit's post-backward and
    reduce-scatter then, with no backward left to hide them (pytorch/pytorch torch/distributed/pipelining/stage.py
    l.781-853, l.1164-1177, schedules.py l.960, l.1177, the torch 2.13.0 wheel
    @cf30153c4c131c8164ee7798e5022d810682e2cb). The stage that finishes its backwards last (the first, in 1F1B)
    carries them on the step's path, so all of them are exposed, once a step; ``micro_steps`` does not multiply.
    With ``reshard_after_forward`` (FSDP2's default, NeMo Automodel's blocks: NVIDIA-NeMo/Automodel
    nemo_automodel/components/distributed/parallelizer.py l.565-575 @c0e4fe1bc35a885b710599e12dbe7a27a8ae992d) each
    forward still reshards its units, so every micro-batch's backward gathers them again; its forward gathers them
    too unless it directly follows a backward that left them gathered, which the warm-up forwards of a 1F1B schedule
    (most of them under interleaving) do not: priced as without pipelining, both gathers every micro-batch. The root
    unit, never resharded after forward nor, here, after backward, is gathered once.

    ``layer_gather_prep_s``: seconds a layer's all-gather input takes to prepare on FSDP2's all-gather copy-in
    stream before the all-gather can start (torchao's float8 shard cast, ``compute.float8_all_gather``): it delays
    each of the layer's gathers the way a longer all-gather would, behind the compute like the all-gather itself.

    ``expert_layer_*``: a layer's routed experts under expert parallel (not in ``layer_*``), sharded over their own
    ``expert_ranks`` group (NeMo Automodel ``moe/parallelizer.py`` ``apply_fsdp`` @4a37629a9a5d200c009692787dafc5f88aa85326:
    the experts get their own ``fully_shard`` on the ``ep_shard`` mesh, data x context / ep ranks, and with one such
    rank are left out of FSDP, ``ignored_params``): gathered and reduce-scattered beside the layer's dense unit, on the
    same stream, so the layer's collective time is the sum. ``expert_layer_gathers``: the separate all-gathers the
    layer's expert weights take per pass (DeepSpeed ZeRO-3 fetches transformers < 5's expert linears one module at a
    time, ``expert_loop.zero3_expert_gathers``): each pays the ring latency, one after another on the gather stream.

    ``replica_*`` (HSDP, torch ``HYBRID_SHARD`` / ``fully_shard`` on a 2-D mesh): after a unit's reduce-scatter
    inside the node, its gradient shard (``replica_layer_grad_bytes``; the root unit's ``replica_root_grad_bytes``)
    is all-reduced across the ``replica_ranks`` node replicas at ``replica_bus_bytes_per_s`` (one NIC per GPU). Both
    torch implementations issue that all-reduce per unit on a stream of its own, right after the unit's
    reduce-scatter, and only the end of the backward waits for it (pytorch/pytorch
    @cf30153c4c131c8164ee7798e5022d810682e2cb, the torch 2.13.0 wheel's ``torch.version.git_version``: FSDP1
    ``torch/distributed/fsdp/_runtime_utils.py`` ``_init_streams`` l. 270-273 "Stream to run HSDP's all-reduce as
    async", ``_reduce_grad`` l. 858-876 ``reduce_scatter_single`` then ``_all_reduce_stream.wait_stream(
    _post_backward_stream)`` and ``dist.all_reduce(new_sharded_grad, group=state._inter_node_pg)`` on
    ``_all_reduce_stream``, ``_post_backward_final_callback`` l. 1104-1106 waits for that stream; FSDP2
    ``_fully_shard/_fsdp_param_group.py`` l. 99-102 "Run the HSDP all-reduces concurrently with
    all-gather/reduce-scatter since collectives use different network resources", ``_fsdp_collectives.py``
    ``foreach_reduce`` l. 652-672 ``all_reduce_stream.wait_stream(reduce_scatter_stream)`` then ``dist.all_reduce``,
    ``_fsdp_param_group.py`` ``finalize_backward`` l. 763-766 waits for the last event of each stream; older FSDP1,
    @3ade90a6aaa939cd6238e314c321b9f920db1471 ``_post_backward_hook``, issued it on the post-backward stream right
    after the reduce-scatter). The reduce-scatter stays inside the node (NVLink) and the all-reduce ring has one GPU
    per node (NIC), so the two links pipeline: a layer's backward costs the slower of its compute, its NVLink
    collectives and its all-reduce; the last unit's reduce-scatter then all-reduce, and the root's, are exposed.
    ``replica_shares_link``: the shard group's collectives and the replica all-reduce run over the same links (a shard
    group smaller than a node with its replicas in the same node, both on NVLink; a shard group spanning nodes, both
    through the NICs: ``training.hsdp_links``), so per layer they add up instead of overlapping each other; both still
    run behind the compute. ``nodes`` / ``expert_nodes`` / ``replica_nodes``: the nodes each group spans, for NCCL's
    latency (``latency_s`` None: ``nccl_collective_seconds``)."""
    unit = sharded_unit_seconds(
        layer_weight_bytes=layer_weight_bytes, layer_grad_bytes=layer_grad_bytes, root_weight_bytes=root_weight_bytes,
        root_grad_bytes=root_grad_bytes, ranks=ranks, bus_bytes_per_s=bus_bytes_per_s, latency_s=latency_s,
        expert_layer_weight_bytes=expert_layer_weight_bytes, expert_layer_grad_bytes=expert_layer_grad_bytes,
        expert_ranks=expert_ranks, expert_bus_bytes_per_s=expert_bus_bytes_per_s,
        replica_layer_grad_bytes=replica_layer_grad_bytes, replica_root_grad_bytes=replica_root_grad_bytes,
        replica_ranks=replica_ranks, replica_bus_bytes_per_s=replica_bus_bytes_per_s,
        expert_layer_gathers=expert_layer_gathers, nodes=nodes, expert_nodes=expert_nodes, replica_nodes=replica_nodes,
        intra_link=intra_link, layer_gather_prep_s=layer_gather_prep_s)
    ag, rs, ar = unit.all_gather_s, unit.reduce_scatter_s, unit.all_reduce_s
    root = unit.root_all_gather_s + unit.root_reduce_scatter_s
    root += unit.root_all_reduce_s
    if held_to_last_backward:
        root_ag = unit.root_all_gather_s
        root_red = root - root_ag
        reductions = layers * (rs + ar) + root_red
        fwd_gather = ag + (layers - 1) * max(0.0, ag - layer_forward_s)
        if not reshard_after_forward:
            return CommTime(layers * ag + root_ag + reductions, fwd_gather + root_ag + reductions)
        bwd_gather = (layers - 1) * max(0.0, ag - layer_backward_s)
        return CommTime(micro_steps * 2 * layers * ag + root_ag + reductions,
                        micro_steps * (fwd_gather + bwd_gather) + root_ag + reductions)
    bwd_comm = (ag if reshard_after_forward else 0.0) + rs
    if not layer_gathers_hidden:
        # each layer's gather waits for the compute before it to finish (rate_limiter_exposes_layer_gathers)
        red = rs + ar if replica_shares_link else max(rs, ar)
        fwd_exposed = layers * ag
        bwd_exposed = layers * (bwd_comm - rs) + (layers - 1) * max(0.0, red - layer_backward_s) + rs + ar
        total = micro_steps * (layers * (ag + bwd_comm + ar) + root)
        return CommTime(total, micro_steps * (fwd_exposed + bwd_exposed + root))
    fwd_exposed = ag + (layers - 1) * max(0.0, ag - layer_forward_s)
    busy = bwd_comm + ar if replica_shares_link else max(bwd_comm, ar)
    bwd_exposed = (layers - 1) * max(0.0, busy - layer_backward_s) + rs + ar
    per_micro = fwd_exposed + bwd_exposed + root
    total = micro_steps * (layers * (ag + bwd_comm + ar) + root)
    return CommTime(total, micro_steps * per_micro)


def exposed_forward_gathers(**sharded: Any) -> float:
    """Exposed seconds of one micro-batch's forward all-gathers of the sharded layer units, ``exposed_sharded``'s
    keyword arguments: the first unit's gather in full, each later one behind the layer before it (FSDP's forward
    prefetch), ``ag + (layers - 1) · max(0, ag - layer_forward_s)``, as ``exposed_sharded`` prices a forward's. The
    root unit, kept gathered after the forward, is not gathered again. What a second forward over the same units (or
    over a frozen copy sharded like them) pays: DPO's reference forward (``plan.time.reference_forward_of``). Units
    kept gathered after their forward (``reshard_after_forward`` False, or ``held_to_last_backward``) are not gathered
    again: none."""
    if not sharded.get("reshard_after_forward", True) or sharded.get("held_to_last_backward", False):
        return 0.0
    params = inspect.signature(sharded_unit_seconds).parameters
    unit = sharded_unit_seconds(**{k: v for k, v in sharded.items() if k in params})
    ag, layers = unit.all_gather_s, sharded["layers"]
    if not sharded.get("layer_gathers_hidden", True):  # rate_limiter_exposes_layer_gathers: none hidden
        return layers * ag
    return ag + (layers - 1) * max(0.0, ag - sharded["layer_forward_s"])


SHARDED_GRADIENT_KEYWORDS = ("layer_grad_bytes", "root_grad_bytes", "expert_layer_grad_bytes",
                             "replica_layer_grad_bytes", "replica_root_grad_bytes")
"""``exposed_sharded``'s gradient byte counts (dense, root, routed experts, HSDP replica shards)."""


def exposed_sharded_gathers(**sharded: Any) -> CommTime:
    """``exposed_sharded`` (same keyword arguments) with every gradient byte count zeroed
    (``SHARDED_GRADIENT_KEYWORDS``): the parameter all-gathers alone, on the same per-layer schedule. What a caller
    sets apart from the step's collectives: ZeRO-3 without ``overlap_comm`` (``reductions_on_compute_stream``), FSDP2's
    CPU-offload accumulation (its reductions priced one after another, ``sharded_reductions_seconds``)."""
    return exposed_sharded(**{**sharded, **dict.fromkeys(SHARDED_GRADIENT_KEYWORDS, 0.0)})


def sharded_reductions_seconds(
    *, layers: int, layer_grad_bytes: float, root_grad_bytes: float, ranks: int, bus_bytes_per_s: float,
    latency_s: float | None = None, expert_layer_grad_bytes: float = 0.0, expert_ranks: int = 1,
    expert_bus_bytes_per_s: float | None = None, replica_layer_grad_bytes: float = 0.0,
    replica_root_grad_bytes: float = 0.0, replica_ranks: int = 1, replica_bus_bytes_per_s: float | None = None,
    nodes: int = 1, expert_nodes: int = 1, replica_nodes: int = 1, intra_link: IntraLink | None = None,
) -> float:
    """Seconds of one micro-batch's gradient reductions of every FSDP unit, one after another, as ``exposed_sharded``
    prices each (``sharded_unit_seconds``): per layer the dense reduce-scatter over ``ranks``, the routed experts'
    over ``expert_ranks`` and HSDP's replica all-reduce over ``replica_ranks``, then the root unit's. What a
    micro-batch waits for when every unit's gradient must land before the next unit's backward is launched (FSDP2's
    CPU offload accumulating on the host: ``foreach_reduce`` runs the HSDP all-reduce on its stream after the
    reduce-scatter and the blocking copy waits for both, torch 2.13.0 ``_fsdp_collectives.py`` l.634-672,
    l.729-749; ``offload.fsdp2_offload_accumulation_seconds``). Its keyword arguments are ``exposed_sharded``'s
    reduction ones (``SHARDED_REDUCTION_KEYWORDS``)."""
    unit = sharded_unit_seconds(
        layer_grad_bytes=layer_grad_bytes, root_grad_bytes=root_grad_bytes, ranks=ranks,
        bus_bytes_per_s=bus_bytes_per_s, latency_s=latency_s, expert_layer_grad_bytes=expert_layer_grad_bytes,
        expert_ranks=expert_ranks, expert_bus_bytes_per_s=expert_bus_bytes_per_s,
        replica_layer_grad_bytes=replica_layer_grad_bytes, replica_root_grad_bytes=replica_root_grad_bytes,
        replica_ranks=replica_ranks, replica_bus_bytes_per_s=replica_bus_bytes_per_s, nodes=nodes,
        expert_nodes=expert_nodes, replica_nodes=replica_nodes, intra_link=intra_link)
    layer = unit.reduce_scatter_s + unit.all_reduce_s
    root = unit.root_reduce_scatter_s + unit.root_all_reduce_s
    return layers * layer + root


SHARDED_REDUCTION_KEYWORDS = (
    "layers", "layer_grad_bytes", "root_grad_bytes", "ranks", "bus_bytes_per_s", "latency_s",
    "expert_layer_grad_bytes", "expert_ranks", "expert_bus_bytes_per_s", "replica_layer_grad_bytes",
    "replica_root_grad_bytes", "replica_ranks", "replica_bus_bytes_per_s", "nodes", "expert_nodes", "replica_nodes",
    "intra_link",
)
"""The keyword arguments of ``sharded_reductions_seconds``: the subset of ``exposed_sharded``'s a caller holding
the latter's keywords passes on (tests/compute pin it to the signature)."""


def exposed_data_parallel(
    *, grad_bytes: float, weight_bytes: float, ranks: int, bus_bytes_per_s: float, latency_s: float | None = None,
    backward_s: float, micro_steps: int, zero_stage: int, expert_grad_bytes: float = 0.0,
    expert_weight_bytes: float = 0.0, expert_ranks: int = 1, expert_bus_bytes_per_s: float | None = None,
    overlap_param_gather: bool = False, forward_s: float = 0.0, gather_bucket_bytes: float = 0.0,
    reduce_after_backward: bool = False, nodes: int = 1, expert_nodes: int = 1, intra_link: IntraLink | None = None,
    bucket_all_reduce_bytes: float = 0.0, ddp_bucket_bytes: float = 0.0,
    gather_ranks: int | None = None, gather_bus_bytes_per_s: float | None = None, gather_nodes: int | None = None,
    gather_broadcast_per_rank: bool = False, grad_all_reduce: bool = False, ddp_last_tensor_bytes: float = 0.0,
) -> CommTime:
    """DDP (``zero_stage`` 0) and ZeRO-1/2: gradient reduction hidden behind backward as far as it goes.

    ``grad_bytes`` / ``weight_bytes``: the parameters reduced over the ``ranks`` data-parallel group;
    ``expert_grad_bytes`` / ``expert_weight_bytes``: the routed experts' (not in ``grad_bytes``), reduced and
    gathered over the ``expert_ranks`` expert-data-parallel group at ``expert_bus_bytes_per_s`` (default: the dense
    group's rate); module docstring. Both groups' reductions run behind the same backward; the last bucket of
    either is exposed. ``overlap_param_gather`` (ZeRO-1 as Megatron-Core's distributed optimizer): the parameter
    all-gather waits for the next step's first forward (``forward_s``, one micro-batch) and hides behind it bucket by
    bucket (``gather_bucket_bytes`` each), all but the first bucket (``dist_optimizer.param_gather_exposed``).
    ``reduce_after_backward``: no bucketed reduction during the backward; once the step's last backward is done the
    whole gradient buffer is all-reduced in one collective (a ZeRO-1 rank then keeps its shard), exposed: nanotron
    with ``accumulate_grad_in_fp32`` and ZeRO-1 (``NANOTRON_ZERO1_REDUCE``). ``nodes`` / ``expert_nodes``: the nodes
    each group spans (NCCL's latency when ``latency_s`` is None, ``exposed_sharded``). ``bucket_all_reduce_bytes``
    (ZeRO-1/2 as DeepSpeed runs it): each reduce bucket of that many bytes is all-reduced in full, not reduce-scattered
    (``deepspeed_bucket_all_reduce``); the last bucket is the one exposed. ``ddp_bucket_bytes`` (``zero_stage`` 0 as
    torch DDP runs it): one all-reduce per bucket (``ddp_bucketed_all_reduce``, whose last bucket holds the
    ``ddp_last_tensor_bytes`` of the dense gradient the backward finishes last); 0: the whole buffer in one
    collective. ``gather_ranks`` / ``gather_bus_bytes_per_s`` / ``gather_nodes`` (ZeRO-1 over groups smaller than the
    data-parallel ranks, the card's ``parallel.zero1_shard_size``): the dense parameters are handed back inside that
    group; ``gather_broadcast_per_rank``: handed back as one broadcast per group rank (``zero1_param_sync_seconds``).
    ``grad_all_reduce`` (ZeRO-1/2, set with such a group): the dense gradients are all-reduced over all ``ranks``, not
    reduce-scattered, the whole reduction and its exposed last bucket (``INTERNEVO_ZERO1_REDUCE``): a reduce-scatter
    over the ``ranks`` leaves each rank 1/``ranks`` of the summed gradient, while a rank of a smaller group steps the
    summed 1/group slice. Its last bucket is priced at ``DDP_BUCKET_BYTES`` as every ZeRO-1/2's; InternEvo's buckets
    hold up to its ``reduce_bucket_size`` (512M elements in its 7B config), not taken here."""
    kw = dict(ranks=ranks, bus_bytes_per_s=bus_bytes_per_s, latency_s=latency_s, nodes=nodes, intra_link=intra_link)
    ekw = dict(ranks=expert_ranks, latency_s=latency_s, nodes=expert_nodes, intra_link=intra_link,
               bus_bytes_per_s=bus_bytes_per_s if expert_bus_bytes_per_s is None else expert_bus_bytes_per_s)
    if zero_stage == 0 and ddp_bucket_bytes > 0:  # torch DDP: one all-reduce per bucket
        dense, expert = (ddp_bucketed_all_reduce(grad_bytes=g, bucketed_bytes=w, bucket_bytes=ddp_bucket_bytes,
                                                 last_tensor_bytes=t, **k)
                         for g, w, t, k in ((grad_bytes, weight_bytes, ddp_last_tensor_bytes, kw),
                                            (expert_grad_bytes, expert_weight_bytes, 0.0, ekw)))
        red, last, gather = dense.total_s + expert.total_s, max(dense.exposed_s, expert.exposed_s), 0.0
    elif zero_stage == 0:
        red = all_reduce_seconds(total_bytes=grad_bytes, **kw) + all_reduce_seconds(total_bytes=expert_grad_bytes,
                                                                                     **ekw)
        last = max(all_reduce_seconds(total_bytes=min(grad_bytes, DDP_BUCKET_BYTES), **kw),
                   all_reduce_seconds(total_bytes=min(expert_grad_bytes, DDP_BUCKET_BYTES), **ekw))
        gather = 0.0
    else:
        if bucket_all_reduce_bytes > 0:  # DeepSpeed ZeRO-1/2: each bucket all-reduced in full
            dense, expert = (deepspeed_bucket_all_reduce(total_bytes=b, bucket_bytes=bucket_all_reduce_bytes, **k)
                             for b, k in ((grad_bytes, kw), (expert_grad_bytes, ekw)))
            red, last = dense.total_s + expert.total_s, max(dense.exposed_s, expert.exposed_s)
        else:
            dense_reduce = all_reduce_seconds if grad_all_reduce else reduce_scatter_seconds
            red = dense_reduce(total_bytes=grad_bytes, **kw) + reduce_scatter_seconds(
                total_bytes=expert_grad_bytes, **ekw)
            last = max(dense_reduce(total_bytes=min(grad_bytes, DDP_BUCKET_BYTES), **kw),
                       reduce_scatter_seconds(total_bytes=min(expert_grad_bytes, DDP_BUCKET_BYTES), **ekw))
        dense_gather = all_gather_seconds(total_bytes=weight_bytes, **kw)
        if zero_stage == 1 and (gather_ranks is not None or gather_broadcast_per_rank):
            dense_gather = zero1_param_sync_seconds(
                total_bytes=weight_bytes, ranks=ranks if gather_ranks is None else gather_ranks,
                bus_bytes_per_s=bus_bytes_per_s if gather_bus_bytes_per_s is None else gather_bus_bytes_per_s,
                nodes=nodes if gather_nodes is None else gather_nodes, intra_link=intra_link,
                broadcast_per_rank=gather_broadcast_per_rank)
        gather = dense_gather + all_gather_seconds(total_bytes=expert_weight_bytes, **ekw)
    reductions = micro_steps if zero_stage == 2 else 1
    exposed_red = max(red - backward_s, last)
    if reduce_after_backward:
        red = all_reduce_seconds(total_bytes=grad_bytes, **kw) + all_reduce_seconds(total_bytes=expert_grad_bytes,
                                                                                     **ekw)
        reductions, exposed_red = 1, red
    exposed_gather = gather
    if overlap_param_gather and zero_stage == 1 and gather > 0:
        bucket = gather_bucket_bytes if gather_bucket_bytes > 0 else max(weight_bytes, expert_weight_bytes)
        first = max(all_gather_seconds(total_bytes=min(weight_bytes, bucket), **kw),
                    all_gather_seconds(total_bytes=min(expert_weight_bytes, bucket), **ekw))
        buckets = sum(bucket_count(total_bytes=b, bucket_bytes=bucket) for b in (weight_bytes, expert_weight_bytes))
        exposed_gather = param_gather_exposed(gather_s=gather, first_bucket_s=first, buckets=buckets,
                                              forward_s=forward_s)
    per_step = (reductions * exposed_red) + exposed_gather
    return CommTime(reductions * red + gather, per_step)


def ddp_bucketed_all_reduce(*, grad_bytes: float, bucketed_bytes: float, bucket_bytes: float = DDP_BUCKET_BYTES,
                            last_tensor_bytes: float = 0.0, **kw) -> CommTime:
    """torch DDP's gradient all-reduce as its reducer runs it: the parameters' ``.grad`` tensors (``bucketed_bytes`` in
    the parameters' dtype) fill buckets of ``bucket_bytes`` (``bucket_cap_mb``), and each full bucket is all-reduced
    on its own, ``ceil(bucketed_bytes / bucket_bytes)`` NCCL all-reduces, each paying its latency
    (``all_reduce_seconds``): pytorch/pytorch torch/csrc/distributed/c10d/reducer.cpp
    @00413201d3d38d5b5bb039180220d5a0d6c74052, ``initialize_buckets`` allocates each bucket's contents in its
    parameters' dtype, ``mark_bucket_ready`` ("Buckets are reduced in sequence") calls ``all_reduce_bucket`` ->
    ``run_comm_hook`` once per bucket. Together they move ``grad_bytes``, the reduced buffers' bytes (a communication
    hook may reduce other buffers: nanotron's ``fp32_accum_hook`` all-reduces each bucket's fp32 accumulators, one
    ``all_reduce_coalesced`` per bucket, huggingface/nanotron src/nanotron/optim/gradient_accumulator.py
    @c252843039cc167ff8d6894b87172af4637eb14b). ``total_s``: every bucket; ``exposed_s``: the last one, after the
    backward.

    ``last_tensor_bytes``: the reduced bytes of the gradient the backward finishes last, the input embedding's (its
    lookup is the forward's first op; a tied head's gradient is summed into the same leaf, whose AccumulateGrad runs
    once both uses are in). The reducer's buckets follow the gradients' ready order once rebuilt after the first
    iteration, and ``compute_bucket_assignment_by_size`` closes a bucket as soon as its bytes reach the cap, so a
    tensor larger than the cap ends a bucket with only what precedes it in that order (pytorch/pytorch
    torch/csrc/distributed/c10d/reducer.cpp @00413201d3d38d5b5bb039180220d5a0d6c74052, ``rebuild_buckets`` and
    ``compute_bucket_assignment_by_size``): the last bucket holds at least that whole tensor, and the backward is
    done before it can start, so ``exposed_s`` is the larger of the mean bucket and that tensor's all-reduce (the
    small tensors sharing its bucket are left out: a lower bound)."""
    if grad_bytes <= 0:
        return CommTime(0.0, 0.0)
    buckets = max(1, ceil(max(bucketed_bytes, 0.0) / bucket_bytes))
    one = all_reduce_seconds(total_bytes=grad_bytes / buckets, **kw)
    last = all_reduce_seconds(total_bytes=min(last_tensor_bytes, grad_bytes), **kw) if last_tensor_bytes > 0 else 0.0
    return CommTime(buckets * one, max(one, last))


INTERNEVO_ZERO1_REDUCE = (
    "InternEvo, HybridZeroOptimizer: with zero_overlap_communication (True in configs/7B_sft.py l.65) every"
    " parameter's AccumulateGrad hook gets reduce_rank = None (_attach_reduction_hook l.299-327) and, unless"
    " skip_grad_reduce (set on every micro-batch but the last, core/no_pipeline_scheduler.py l.259-262), stores the"
    " gradient in a bucket of reduce_bucket_size elements (512 * 1024 * 1024 in configs/7B_sft.py l.67), flushed when"
    " the next gradient would pass it (_store_and_try_reduce_grads_by_bucket l.329-352); _reduce_and_copy"
    " (l.402-418) runs torch.cuda.synchronize() and then reduce_tensor(dst_rank=None, parallel_mode=DATA) on its"
    " comm stream, which all-reduces the flat bucket over the whole data group (solver/optimizer/utils.py l.87-92),"
    " behind the rest of the backward; step() reduces the bucket left over after the backward (l.508-514) and waits"
    " for it (InternLM/InternEvo internlm/solver/optimizer/hybrid_zero_optim.py"
    " @c18bec9361684189aadf6ffb724f9dfe48288eb0)")
"""Where ``exposed_data_parallel``'s ``grad_all_reduce`` comes from."""


NANOTRON_ZERO1_REDUCE = (
    "nanotron, accumulate_grad_in_fp32 with ZeRO-1: no DDP wrapper (trainer.py init_model l.786-788 make_ddp = dp > 1"
    " and not (accumulate_grad_in_fp32 and zero_stage > 0)), so after the pipeline engine's last backward"
    " training_step calls sync_gradients_across_dp(reduce_scatter=False) (l.510-518, 'too memory hungry, instead we"
    " run all_reduce'): FP32GradientAccumulator all-reduces its whole contiguous fp32 buffer over the data-parallel"
    " group (optim/gradient_accumulator.py l.128-155); the optimizer step then all-gathers the updated bf16 shards"
    " (optim/zero.py step l.119, _all_gather_params l.217-251) (huggingface/nanotron"
    " @c252843039cc167ff8d6894b87172af4637eb14b, unchanged since c1df08ed)")
"""Where ``exposed_data_parallel``'s ``reduce_after_backward`` comes from."""


NANOTRON_ZERO1_GATHER_COPY_HOST_S = 3.6e-6
"""Host seconds per (data-parallel rank, parameter tensor) of nanotron's ZeRO-1 parameter all-gather
(``nanotron_zero1_gather_copies_seconds``). Measured, not fitted: ``ZeroDistributedOptimizer._all_gather_params`` and
``all_gather_coalesced`` replayed verbatim (huggingface/nanotron @c252843039cc167ff8d6894b87172af4637eb14b,
src/nanotron/optim/zero.py l.217-251, src/nanotron/distributed.py l.153-225) on torch's fake process group (collectives
are no-ops, so only the host's Python and dispatch are timed), bf16 tensors of 16 elements per rank, torch 2.13.0+cpu,
one thread of a shared Intel Xeon VM core, 2026-12-02, best of 15: 3.3-3.9 us per pair over 8 x 50, 128 x 50,
128 x 171 and 32 x 483 (ranks x tensors), linear in the pairs. A lower bound: on a GPU each copy_ also launches a
kernel.

Checked 2026-12-04, not changed: ``benchmarks/nanotron_zero1_gather_host.py`` replays the same path (flatten, unflatten,
one ``copy_`` a pair) on any device; on the CPU of a loaded shared VM it reads 3.9-5.3 us a pair at 128 x 50 and
128 x 171, this figure within the load's noise. What a GPU adds (CUDA dispatch and a launch per copy) is not measured
here. Sensitivity on the Ultra-Scale Playbook cells, planned on the code where the ``ups-*`` entries state the
cluster's 249 Gb/s network: at 6 / 9 / 12 us a pair the 3.57B x 64-node cell (128 x 170 copies; at host figures below
about 4 us a pair the host's issue time, less the gather it overlaps, is shorter than the copies' device kernels at
2.5 us each, so the device bounds them and a lower host figure changes nothing) reads -14.2 / -1.3 / +11.6 % against
-21.8 %, the 1.34B x 64-node cell (128 x 67) -48.6 / -42.7 / -36.9 % against -52.8 %, the
80B x 64-node cell (32 x 483, hidden behind its 10 GB gather) and the ZeRO-1 cells at 2-8 nodes (4-32 ranks) within
2 points. Only a measurement on a GPU (the script with ``--device cuda``) may move it."""


def nanotron_zero1_gather_copies_seconds(*, ranks: int, tensors: float, gather_s: float, device_s_per_copy: float,
                                         host_s_per_copy: float = NANOTRON_ZERO1_GATHER_COPY_HOST_S) -> float:
    """Seconds nanotron's ZeRO-1 optimizer step adds to its parameter all-gather (``gather_s``) by copying the gathered
    slices back one by one. ``_all_gather_params`` hands ``all_gather_coalesced`` one output slice per (rank, parameter
    tensor); it flattens each rank's slices into a buffer, runs torch's list ``all_gather``, then ``update_output``
    copies every slice back with its own ``copy_`` (zero.py l.233-251, distributed.py l.195-218
    @c252843039cc167ff8d6894b87172af4637eb14b):
    ``ranks x tensors`` copies of the rank's ``tensors`` parameter tensors. The host issues them while the all-gather
    runs; each is one kernel on the device, after it. Seconds beyond the gather: the larger of the copies' kernels
    (``device_s_per_copy`` each) and the host's issue time less the gather (``NANOTRON_ZERO1_GATHER_COPY_HOST_S``
    each); 0 for one rank."""
    if ranks <= 1 or tensors <= 0:
        return 0.0
    copies = ranks * tensors
    return max(copies * device_s_per_copy, copies * host_s_per_copy - gather_s)


def rate_limited_adapter_units_seconds(*, projections: tuple[tuple[float, float, float], ...]) -> float:
    """Seconds FSDP1's rate limiter adds to one pass whose adapted projections each carry two FSDP units of their own.

    PEFT's ``fsdp_auto_wrap_policy`` wraps every leaf module with a trainable weight, so each LoRA ``lora_A`` and
    ``lora_B`` linear becomes an FSDP unit beside the decoder layer (``lambda_policy_fn``: no children, a weight,
    ``weight.requires_grad``; huggingface/peft src/peft/utils/other.py l.510-525 @431c0e2d5ca56fa512dc4c96876c4145bb538f62,
    v0.13.2; l.440-455 @e6cd24c907565040ee1766a5735afe3d13a71164, v0.12.0). fms-hf-tuning sets it for every PEFT run on
    FSDP (``trainer.accelerator.state.fsdp_plugin.auto_wrap_policy = fsdp_auto_wrap_policy(model)``,
    foundation-model-stack/fms-hf-tuning tuning/sft_trainer.py l.387-390 @b33634c8ce5c85b6d10daa187fd1a069db969b67,
    l.390-393 at v2.5.0), and the HF Trainer does the same in ``_fsdp_qlora_plugin_updates``. accelerate turns FSDP1's
    ``limit_all_gathers`` on by default (``FullyShardedDataParallelPlugin.limit_all_gathers`` default True, passed to
    ``FSDP(...)``: huggingface/accelerate src/accelerate/utils/dataclasses.py l.1517-1518, accelerator.py l.1508
    @a427548f7341f23e80f71e7796b046484e593a7f, v1.0.1; l.1327-1328 and l.1481 at v0.34.2). Under it each unit's
    unshard first waits on the host (``event.synchronize()``) for the free event of the unit resharded two frees
    before, the queue shared by every unit of the model (torch/distributed/fsdp/_runtime_utils.py ``_unshard``
    l.297-303, ``_reshard`` l.320-326, ``_share_state_and_init_handle_attrs`` l.223; ``_limiter_utils.py`` l.15
    ``_max_num_inflight_all_gathers = 2``; the torch 2.13.0 wheel, pytorch/pytorch
    @cf30153c4c131c8164ee7798e5022d810682e2cb). A FULL_SHARD unit frees after its forward (the recompute's too) and
    after its backward. With two tiny units per adapted projection the host thus runs at most about one projection
    ahead of the GPU there: that stretch goes at ``max(host, device)`` per projection, not at the whole pass's
    ``max(sum host, sum device)``, and the host's hooks show wherever they outlast the projection's GEMMs.

    ``projections``: per adapted linear group, (calls in the pass, device seconds of one call: the frozen
    projection's GEMMs and its adapter's; host seconds of one call: its two units' hooks and its kernels' launches).
    Returns ``sum calls * max(0, host - device)``, the host time that no GPU work covers there (the pass's other host
    work is left to the pass's ``max``). 0 when every projection outlasts its host work: the stretch is device-bound
    and the limiter costs nothing."""
    return sum(calls * max(0.0, host_s - device_s) for calls, device_s, host_s in projections)


def rate_limiter_exposes_layer_gathers(*, adapter_units: bool, fsdp2: bool, reshard_after_forward: bool,
                                       ranks: int) -> bool:
    """Whether FSDP1's rate limiter leaves each decoder layer unit's all-gather without compute to hide behind: True
    when PEFT's adapter linears are FSDP1 units of their own nested in every layer (``adapter_units``, the card's
    ``parallel.fsdp_adapter_units``), the units reshard after forward (FULL_SHARD / HYBRID_SHARD) and more than one
    rank shards them; ``exposed_sharded(layer_gathers_hidden=False)`` then prices every layer gather in full.

    The code (pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb, the torch 2.13.0 wheel): every unit's unshard
    first pops the oldest free event once two are queued and waits for it on the host (``_unshard`` l.297-303,
    ``_limiter_utils.py`` l.15 ``_max_num_inflight_all_gathers = 2``, ``dequeue_if_needed`` l.21-25); every reshard
    that frees, the post-forward one of a non-root FULL_SHARD unit included, records and queues one
    (``_reshard`` l.320-326, ``_post_forward_reshard`` l.486-499). Forward: a layer's adapted projections queue two
    frees each (``lora_A``, ``lora_B``), so when the host reaches the next layer's pre-forward unshard it waits for the
    free event of the layer's last ``lora_A`` (``down_proj``'s, after that projection's frozen GEMM): the next
    layer's all-gather is issued only as the layer's compute ends, and nothing is left to hide it (no forward
    prefetch unless ``forward_prefetch``, ``_pre_forward_unshard`` l.411-434; off by default and in the runs this was
    checked on). Backward: BACKWARD_PRE prefetches the unit before the current one in post-forward order
    (``_get_handle_to_prefetch`` l.1239-1290, ``_exec_order_utils.py`` ``get_handle_to_backward_prefetch`` l.88-107),
    and with adapter units the unit before a layer's first adapter is the previous layer, so the previous layer's
    gather is issued from the pre-backward hook of that first adapter (``q_proj``'s ``lora_A``), the last of the
    layer's backward (``_pre_backward_hook`` l.630-693), behind the limiter again. Without adapter units the queue
    holds only layer frees and the unshard of layer ``i + 1`` waits for layer ``i - 1``'s: the gather overlaps layer
    ``i`` (``exposed_sharded``'s default). Simplification: the little compute left after the waited-on event
    (``down_proj``'s ``lora_B``, the residual add; ``q_proj``'s frozen input gradient and the norm's backward) is
    not counted as hiding anything.

    Which runs: Answer.AI's fsdp_qlora passes ``limit_all_gathers=True`` and no ``forward_prefetch``
    (AnswerDotAI/fsdp_qlora train.py l.724-737 @e877dda5026dfd964cccdb92a4532da587cbdae0) with the adapter-unit policy;
    accelerate's FSDP plugin turns the limiter on by default (``rate_limited_adapter_units_seconds``). Checked on the
    benchmark's published rows (``benchmarks/step_times.md``, 2026-12-05): fsdp_qlora's two RTX 3090s without NVLink
    publish LoRA (bf16 base) steps a nearly constant 2.9-3.0 s longer than QLoRA's at every batch size and length
    (context 512 and 2,048 at batch 1, 2,048 at batch 4 and 6 against 4 and 10): additive, as an unhidden gather of
    the extra 9-10 GB a rank receives per step is, where a hidden one would vanish behind batch 4's 7-8 s of compute.
    The two RTX 4090s of the same note (full PCIe 4.0 x16 lanes, the 3090s' 'slow PCI lanes') show a smaller
    LoRA-FSDP cost (about 0.5 s over the DDP rows) than the catalog's no-P2P bus rate gives the unhidden gathers
    (1.7 s): planned here they run slower than published."""
    return adapter_units and not fsdp2 and reshard_after_forward and ranks > 1


SLOWEST_RANK_SIGMA = 0.08
"""Relative spread of sustained per-GPU speed (module docstring); fitted on the fit half of the published
training steps (``benchmarks/step_times.py``: the SFT full, LoRA / QLoRA and pretrain rows with
``int(sha1(id).hexdigest(), 16) % 2 == 0``), the held-out half reported beside it. Scanned 0.05-0.13 in steps of
0.01 with the excess on the device time beyond the host-paced passes: median |error| of the fit half (206 rows)
10.7, 10.0, 8.8, **8.5**, 8.8, 8.8, 8.9, 9.3, 10.2 %; of the held-out half (237 rows) 9.4, 8.5, 8.3, **7.8**, 8.3,
8.9, 9.8, 10.6, 11.1 %."""


def slowest_rank_excess(*, ranks: int, sigma: float = SLOWEST_RANK_SIGMA) -> float:
    """Expected excess time of the slowest of ``ranks`` GPUs in lockstep, as a fraction of one GPU's compute
    time: ``sigma · Φ⁻¹((R − 0.375)/(R + 0.25))`` (Blom); 0 for a single GPU."""
    if ranks <= 1 or sigma <= 0:
        return 0.0
    return sigma * NormalDist().inv_cdf((ranks - 0.375) / (ranks + 0.25))


def lockstep_excess(*, ranks: int, data_ranks: int, work_cv: float, sigma: float = SLOWEST_RANK_SIGMA) -> float:
    """Expected excess of the slowest of ``ranks`` GPUs in lockstep when, besides the per-GPU speed spread
    ``sigma``, the ``data_ranks`` data-parallel ranks are given unequal work: each rank's micro-batch holds a
    random draw of variable-length sequences, so its tokens spread by ``work_cv`` (relative standard deviation of
    a micro-batch's tokens across ranks). The two spreads are independent; the slowest rank's excess is taken as
    their order-statistic excesses added in quadrature, ``sqrt((z_R·σ)² + (z_D·work_cv)²)`` (``z``: Blom's
    expected maximum of ``slowest_rank_excess``). With ``work_cv`` 0 it is ``slowest_rank_excess``."""
    speed = slowest_rank_excess(ranks=ranks, sigma=sigma)
    data = slowest_rank_excess(ranks=data_ranks, sigma=max(0.0, work_cv))
    return (speed * speed + data * data) ** 0.5


def micro_batch_token_cv(*, sequence_tokens_cv: float, sequences: float) -> float:
    """Relative spread of one micro-batch's tokens across data-parallel ranks when each rank's micro-batch is
    ``sequences`` independent draws of a sequence length with relative standard deviation ``sequence_tokens_cv``:
    ``cv / sqrt(sequences)`` (the sum of ``n`` independent draws spreads by ``sqrt(n)·σ`` around ``n·μ``)."""
    if sequences <= 0 or sequence_tokens_cv <= 0:
        return 0.0
    return sequence_tokens_cv / sequences ** 0.5


def reductions_on_compute_stream(*, overlapped: CommTime, gathers_only: CommTime | None = None) -> CommTime:
    """DeepSpeed ZeRO with ``overlap_comm`` false: the gradient reductions run on the compute stream, exposed.

    ``overlapped``: the step's collectives as the overlapped schedule prices them (``exposed_data_parallel`` for
    ZeRO-1/2, ``exposed_sharded`` for ZeRO-3); ``gathers_only``: ZeRO-3's, the same call with no gradient bytes (its
    parameter all-gathers alone). DeepSpeed picks the stream by ``overlap_comm`` (deepspeedai/DeepSpeed v0.17.1; the
    same lines from v0.9.0 to v0.19.5):

    * ZeRO-1/2 (``deepspeed/runtime/zero/stage_1_and_2.py``): each IPG bucket's reduction (``average_tensor`` l.1083-
      1090, ``reduce_ipg_grads`` l.1417-1426, ``allreduce_and_copy`` l.1572-1579) runs on ``reduction_stream`` with
      ``overlap_comm``, else on ``current_stream()``, so the backward's next kernels queue behind it. Without
      ``overlap_comm`` ZeRO-1 reduces nothing during the backward (``process_gradients`` l.1463) and reduces every
      gradient at the boundary (``reduce_gradients`` l.751-755, from ``engine.py`` ``allreduce_gradients`` l.2145-2148);
      ZeRO-2 reduces in its hooks each micro-step on the compute stream. The all-gather of the updated parameters is
      exposed either way. Everything is exposed: ``overlapped.total_s``.
    * ZeRO-3 (``stage3.py`` l.268-269): ``reduce_and_partition_stream`` is the default stream without ``overlap_comm``;
      the bucket's reduce-scatter (``__avg_scatter_grads`` l.1393: ``reduce_scatter_coalesced``, ``async_op=False``,
      ``runtime/comm/coalesced_collectives.py`` l.22-23, 205) and the partition copies that consume it
      (``__reduce_and_partition_ipg_grads`` l.1312-1323) sit on the compute stream, which waits for them: each
      reduce-scatter adds to the backward. The parameter all-gathers also take the default stream
      (``parameter_offload.py`` l.146-147), but the prefetch is issued before the current module's compute
      (``partitioned_param_coordinator.py`` ``fetch_sub_module`` l.285-419, the prefetch l.351-415) and NCCL runs it
      on its own stream (``async_op=True``, ``partition_parameters.py`` l.102-103; torch's
      ProcessGroupNCCL orders it after the issuing stream's earlier work and makes the stream wait only at
      ``handle.wait()``), so it still runs behind one module's compute: the gathers keep their overlap
      (``gathers_only.exposed_s``) and every reduce-scatter (the rest of ``overlapped.total_s``) is exposed.

    The default is ``overlap_comm`` true at stage 3 and false below (``zero/config.py`` ``overlap_comm_valid``
    l.351-354)."""
    if gathers_only is None:
        return CommTime(overlapped.total_s, overlapped.total_s)
    reductions = max(0.0, overlapped.total_s - gathers_only.total_s)
    return CommTime(overlapped.total_s, min(overlapped.total_s, gathers_only.exposed_s + reductions))


def deepspeed_bucket_all_reduce(*, total_bytes: float, bucket_bytes: float, ranks: int, bus_bytes_per_s: float,
                                latency_s: float | None = None, nodes: int = 1,
                                intra_link: IntraLink | None = None) -> CommTime:
    """DeepSpeed ZeRO-1/2's gradient reduction of ``total_bytes`` in reduce buckets of ``bucket_bytes``: one
    all-reduce per bucket. ``CommTime.total_s``: every bucket's all-reduce; ``CommTime.exposed_s``: the last
    bucket's, the one the backward cannot hide (``exposed_data_parallel``).

    The collective (deepspeedai/DeepSpeed ``deepspeed/runtime/zero/stage_1_and_2.py`` @v0.17.1): a full IPG bucket
    (``reduce_independent_p_g_buckets_and_remove_grads`` l.969-988: it is flushed when the next gradient would pass
    ``reduce_bucket_size`` elements; a parameter larger than that is reduced alone) goes to ``average_tensor``
    (l.1083-1181), which slices it by owning rank and, with ``use_multi_rank_bucket_allreduce`` (default True,
    ``zero/config.py`` l.115), hands every slice of one process group to ``allreduce_and_scatter`` (l.1055-1081):
    ``allreduce_bucket`` (l.1532-1561) flattens them and runs one ``dist.all_reduce`` over the whole bucket, and each
    rank copies back only the slices it owns (l.1043-1053). The bucket moves ``2·(n−1)/n`` of its bytes per rank, twice a
    reduce-scatter's. With ``reduce_scatter`` false the same bucket is all-reduced by ``gradient_reduction_w_predivide``
    (l.1014-1041). In the bucket's dtype: ``communication_data_type`` defaults to the model's fp16 / bf16
    (``engine.py`` l.979-990), the gradients' own (fp32 only under DeepSpeed's sequence parallel, l.1539-1540).
    Since DeepSpeed 0.12.4: commit 2afa1c7f2 (2023-11-21, "Communication Optimization for Large-Scale Training",
    #4695) replaced the per-owner ``dist.reduce`` of each slice (v0.12.3 l.1044, ``async_op=True``), which moved
    about a reduce-scatter's bytes; unchanged to v0.19.5 and the default branch (@edaa72212, l.1456). The
    benchmark entries that run DeepSpeed ZeRO-2 use later versions (ms-swift ``deepspeed>=0.14``, 0.16.9 / 0.17.5
    recommended, docs/source_en/GetStarted/SWIFT-installation.md @7208336 / @c4d9adaa; the ZenFlow blog's DeepSpeed
    @1d7b90adc, v0.17.4+), so the all-reduce is the one priced, for every version.

    Bucket sizes: every bucket is full but the last, which holds what is left, ``total − (k−1)·bucket`` for
    ``k = ceil(total / bucket)`` buckets (a parameter never splits, so real buckets hold a little less and the last
    a little more)."""
    if total_bytes <= 0 or ranks <= 1:
        return CommTime(0.0, 0.0)
    kw = dict(ranks=ranks, bus_bytes_per_s=bus_bytes_per_s, latency_s=latency_s, nodes=nodes, intra_link=intra_link)
    bucket = min(bucket_bytes, total_bytes) if bucket_bytes > 0 else total_bytes
    full = ceil(total_bytes / bucket) - 1
    last = all_reduce_seconds(total_bytes=total_bytes - full * bucket, **kw)
    return CommTime(full * all_reduce_seconds(total_bytes=bucket, **kw) + last, last)
