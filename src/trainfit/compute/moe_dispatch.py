"""Bytes of one expert-parallel dispatch (or combine) per GPU: Megatron-Core's all-to-all versus DeepEP / HybridEP.

Per MoE layer, per pass, one GPU routes ``T`` tokens (its sequence shard: ``T / tp`` under tensor parallel) of ``h``
hidden values (``b`` bytes each) to ``k`` of ``E`` experts spread over an expert-parallel group of ``ep`` ranks,
``l`` of them per node (``ep / l`` nodes). A row is ``h·b`` bytes.

=============  ===========================================================  =======================================
dispatcher     what leaves the GPU per token                                 source
=============  ===========================================================  =======================================
alltoall       ``k`` rows, one per routed expert (duplicates to the same    NVIDIA/Megatron-LM megatron/core/
               rank included: the rows are permuted per (token, expert)     transformer/moe/token_dispatcher.py
               before the all-to-all); ``(l−1)/ep`` of them to the same     ``MoEAlltoAllTokenDispatcher``
               node over NVLink, ``(ep−l)/ep`` over the GPU's own NIC       @d98e8a64ddf34856e74b24714e3bedb2f5a39553
deepep         one row per distinct destination NODE over the network,      deepseek-ai/DeepEP deep_ep/buffers/
(DeepEP        to the GPU of the same local index there, which forwards it  legacy.py ``get_dispatch_layout``
normal         over NVLink once per distinct destination GPU of its node    (``num_tokens_per_rdma_rank``: "tokens
kernels,       (inside the source's own node the source sends it straight   to be sent to each RDMA rank (with the
HybridEP;      over NVLink, once per distinct GPU); the receiving GPU       same GPU index)"; ``is_token_in_rank``)
Megatron       expands it to its local experts                              @dd758caf451848bd150e1046af3d0a73e5fff38d;
``flex``)                                                                   HybridEP: DeepEP branch hybrid-ep
                                                                            docs/Hybrid-EP_Implementation.md
                                                                            @94a9f8f6b146c07d97ec58f67cd6d303296d6098
                                                                            (``rdma_token_buffer: max_tokens_per_rank
                                                                            × (num_nodes - 1) × hidden_dim``)
=============  ===========================================================  =======================================

Expected destinations of one token: experts sit in contiguous blocks (``E / ep`` per rank, ``E / nodes`` per node,
Megatron-Core's ``local_expert_indices``); the router picks ``k`` experts uniformly (the published MoE benchmarks
force-balance the routing: Megatron-Core ``moe_router_force_load_balancing``), and with group-limited routing
(DeepSeek-V3's ``n_group`` groups of contiguous experts, ``topk_group`` of them per token: Megatron-Core
``moe_router_num_groups`` / ``moe_router_group_topk``, "Node-limited routing: set moe_router_num_groups equal to
number of nodes in EP group", megatron/core/transformer/transformer_config.py @d98e8a64; DeepSeek-V3 technical
report, arXiv 2412.19437, §2.1.2 "each token will be sent to at most M nodes", §3.2.2: IB to the same in-node index
GPU of each target node, then NVLink forwarding; M = 4) first picks ``topk_group`` groups uniformly and then the ``k``
experts uniformly among theirs. A bin (node or GPU) holding ``m`` of the ``C`` candidate experts is missed with
probability ``C(C−m, k) / C(C, k)`` (hypergeometric), so the expected distinct bins are
``Σ_bins (1 − C(C−m, k) / C(C, k))``, averaged over the groups chosen.

Consecutive routing (NeMo Automodel's ``FakeBalancedGate``, ``MoeRouting.CONSECUTIVE``: token ``i`` takes experts
``i·k .. i·k + k − 1`` mod ``E``, nemo_automodel/components/moe/layers.py @01926a5c443b7979463c73341bf64adf79de638e)
touches only the bins its ``k`` neighbouring experts fall in: ``expected_consecutive_bins`` averages that count over
the starts ``i·k mod E``. Every destination is still equally likely over the tokens, so the own-node and own-GPU
shares below hold; the all-to-all dispatcher's ``k`` rows per token do not change.

Per token, with ``D_node`` the expected distinct destination nodes and ``D_gpu`` the expected distinct destination
GPUs: the network carries ``D_node·(nodes−1)/nodes`` rows (the own node is hit with probability ``D_node/nodes``);
NVLink carries ``D_gpu·(1 − 1/l)`` rows (every destination GPU but the source itself and, on each remote node, the
same-index GPU that received the row over the network: ``nodes`` GPUs each hit with probability ``D_gpu/ep``).
Combine moves the same rows back (DeepEP reduces inside the node before the network). The two links run at once.

The all-gather dispatcher (Megatron-Core ``moe_token_dispatcher_type: allgather``, the ``TransformerConfig`` default,
megatron/core/transformer/transformer_config.py l.891; ``MoEAllGatherTokenDispatcher``, megatron/core/transformer/moe/
token_dispatcher.py l.233-372 @d98e8a64ddf34856e74b24714e3bedb2f5a39553) moves no per-expert copies: ``token_dispatch``
all-gathers every rank's tokens over the expert tensor x expert parallel group of ``G = etp·ep`` ranks ("this
allgather spans the communication domain of TP*EP": ``[(S/TP)*B, H] -> [S*B*EP, H]``), together with the routing map
(``[tokens, E]`` bools) and the router probabilities (``[tokens, E]``, the router's dtype); each rank then picks and
permutes the rows of its local experts (``dispatch_postprocess``); ``token_combine`` reduce-scatters the whole
``[G·T, H]`` output back (``reduce_scatter_to_sequence_parallel_region``, in the probabilities' dtype:
``hidden_states.to(self.local_probs.dtype)``). Both are ring collectives over ``G`` ranks (``allgather_dispatch``):
each GPU sends ``(G−1)·T`` rows whatever ``k`` is, against ``k·T·(ep−1)/ep`` for the all-to-all. Backward runs the
transposes (the all-gather's gradient is a reduce-scatter and vice versa), the same bytes.

Not modelled: FP8 dispatch (DeepSeek-V3 dispatches FP8; the rows here are the activation dtype), the SMs the
kernels take from the GEMMs, and for the all-gather dispatcher a router dtype above the activations' (NeMo RL's
``moe_router_dtype: fp64``): the card does not state it, so the combine is planned in the activation dtype. The bytes
here are the mean rank's; a trained router's busiest rank scales the all-to-all's and DeepEP's bytes (not their fixed
latency) in ``model_parallel.model_parallel_comm`` (``moe_time.busiest_rank_load_factor``); the all-gather
dispatcher's collectives move every rank's rows whatever the routing and are not scaled.

Checked and not taken (issue #12, 2026-12-04): the cross-node dispatch as the reason why Megatron-Bridge's
Qwen3-30B-A3B on 16 H100 (2 nodes) is planned 17-28 % too fast on every release (e.g.
``mbridge-2604-h100-qwen3-30b-a3b-pt-fp8-16g`` 21.5 s against 29.5 s: forward 7.02 s, launch-bound, backward 8.66 s,
EP dispatch and combine 5.77 s, 0.42 ms a dispatch for 16.7 MB over the NIC at 0.80 x 50 GB/s) while the same model
on one 8-GPU NVLink domain of B200 / B300 / GB200 / GB300 is close. Nothing changed, for these reasons:

* DeepEP's published internode rates are not per-NIC rates: its test counts one row per token and distinct
  destination NODE, the source's own node included (deepseek-ai/DeepEP tests/test_internode.py
  @058d696b6a96f22826f12c98131944e80585fa82, ``num_rdma_token_sent = rdma_idx.ne(-1).sum()`` and
  ``dispatch_bf16_rdma_send_bytes``). Its table (README.md @0aaa6744c890c5af051f622252975c4393795000: H800, one CX7
  400 Gb/s NIC each, 4096 tokens, hidden 7168, 256 experts, top-8 of top-4 node groups) reads EP16 / 32 / 64 dispatch
  43 / 58 / 51 GB/s. With ``expected_distinct_bins`` for that routing (distinct nodes 1.99 / 3.61 / 3.63, distinct
  GPUs 6.52 / 7.27 / 7.36 per token) the NIC carries ``(nodes−1)/nodes`` of the counted rows: 21.5 / 43.5 / 44.6
  GB/s, and NVLink 141 / 117 / 103 GB/s. EP32 and EP64 are NIC-bound at 0.87-0.89 of the line rate; EP16 is bound by
  the H800's NVLink (141 of its ~160 GB/s), which an H100 has three times of; DeepEP's maintainers say the same
  ("when the RDMA bandwidth reaches 43 GB/s, the NVLink bandwidth will exceeds 140 GB/s, making NVLink the
  bottleneck. With GPUs that have higher NVLink bandwidth, you'd get better results", deepseek-ai/DeepEP issue #285,
  2025-07-10). On an H100 the EP16 dispatch is therefore NIC-bound at about 44 GB/s, faster than the 40 GB/s
  planned: pricing it at the published rate moves these rows the wrong way (EP term 5.77 -> about 5.2 s).
* The same error without any cross-node EP traffic: ``mbridge-260201-h100-qwen3-30b-a3b-pt-fp8-16g`` (PP2, VP12, EP8
  inside one node, all-to-all over NVLink) is -23.1 %, and publishes 2 x 28.9 s / 128 = 0.452 s per 48 layers of one
  4096-token micro-batch against 29.5 s / 64 = 0.461 s for the EP16 HybridEP run over two nodes: a mechanism that
  prices only what crosses nodes leaves that row where it is. Against it stands one pair of published rows: the
  fp8 EP16 recipe without the overlap (29.5 s) and the bf16 EP16 performance recipe with it (20.15 s, below) differ
  by 9.4 s where the plan's exposed EP traffic is 5.77 s, so the two-node dispatch may still be slower than planned;
  the two recipes differ in precision and CUDA-graph scope too, so the pair does not isolate it. Two-node rates
  reported by users sit near DeepEP's EP16 figure too (2 x 8 H100 with 8 NICs, 24-26 GB/s counted: DeepEP issue
  #155, 2025-05-12; HybridEP on 2 x 8 B300, 40.6 GB/s counted: issue #590), but both are open problem reports, not a
  reference rate to plan with.
* The NIC: ``h100-sxm`` already plans one 400 Gb/s NIC per GPU; a 200 Gb/s NIC would double the EP term (the 2604 row
  -27 % -> about -8 %), but no source states the cluster's NICs and it would not move the 260201 row.
* Overlap: the verification card's functional pretrain (30.29 s) and its performance recipe (20.15 s) differ in more
  than ``overlap_moe_expert_parallel_comm``: natural against force-balanced routing, a real against a mock dataset
  (NVIDIA-NeMo/Megatron-Bridge examples/model_verification_cards/qwen3-30b-a3b/card.yaml ``pretrain.H100`` and
  ``pretrain_performance.H100`` @067f987df03b8355b03192d88d70f1709fedf51a), so their 10.1 s gap does not measure the
  overlap. The 32 SMs that card states HybridEP's fused permute holds would slow the overlapped compute by about
  32/132 of the 5.7 s of hidden traffic (about +1.4 s, -16.7 % -> about -10 % on the performance row), but would also
  slow the Blackwell rows with the overlap that are already too slow
  (``mbridge-2608-gb300-qwen3-30b-a3b-pt-mxfp8-8g`` +21 %); not taken without a card field for the SM count.

Next candidate: every H100 Megatron-Core MoE row at micro-batch 1 is planned launch-bound in its forward (2604: host
6.59 s against 3.93 s on the device), the Blackwell rows at micro-batch 8 device-bound; the launch-bound H100
Megatron rows of other models are too fast as well (``mbvc-gpt-oss-*``). The host side of the flex / HybridEP
dispatcher and of the per-expert fp8 quantizers is where the missing time is more likely to be.

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

from trainfit.compute.collectives import all_gather_seconds, reduce_scatter_seconds
from trainfit.compute.float8_casts import BF16_BYTES
from trainfit.spec.enums import MoeDispatcher, MoeRouting


@dataclass(frozen=True, slots=True)
class EpDispatchBytes:
    """Bytes one GPU sends in one dispatch (or one combine) of one MoE layer, by link."""

    nic_bytes: float
    """Over the GPU's own NIC (rail-optimised node, one NIC per GPU)."""
    nvlink_bytes: float
    """Over NVLink inside the node."""


def expected_distinct_bins(*, experts: int, top_k: int, bins: int, groups: int = 1, groups_per_token: int = 1) -> float:
    """Expected distinct bins (nodes or GPUs: ``experts / bins`` contiguous experts each) among one token's ``top_k``
    experts, drawn uniformly without replacement from the ``groups_per_token`` of ``groups`` contiguous expert groups
    picked uniformly for it (``groups = 1``: from all ``experts``). Module docstring.

    Raises ``ValueError`` when ``bins`` or ``groups`` does not divide ``experts``, or the chosen groups hold fewer
    than ``top_k`` experts."""
    if experts <= 0 or top_k <= 0 or bins <= 0 or groups <= 0:
        raise ValueError("experts, top_k, bins and groups must be positive")
    if experts % bins or experts % groups:
        raise ValueError(f"{bins} bins and {groups} groups must divide {experts} experts")
    chosen = max(1, min(groups_per_token, groups))
    group_size = experts // groups
    candidates = chosen * group_size
    if top_k > candidates:
        raise ValueError(f"top_k {top_k} exceeds the {candidates} experts of {chosen} groups")
    per_bin = experts // bins
    subsets = comb(groups, chosen)
    all_draws = comb(candidates, top_k)
    total = 0.0
    for b in range(bins):
        lo, hi = b * per_bin, (b + 1) * per_bin
        overlaps = [min(hi, (g + 1) * group_size) - max(lo, g * group_size)
                    for g in range(lo // group_size, (hi - 1) // group_size + 1)]
        whole = sum(1 for o in overlaps if o == group_size)
        partial = [o for o in overlaps if o < group_size]  # at most the two end groups
        touched = len(overlaps)
        for mask in range(1 << len(partial)):
            picked_partial = [o for i, o in enumerate(partial) if mask >> i & 1]
            for j in range(whole + 1):
                picked = len(picked_partial) + j
                ways = comb(whole, j) * comb(groups - touched, chosen - picked) if chosen >= picked else 0
                if not ways:
                    continue
                m = j * group_size + sum(picked_partial)
                miss = comb(candidates - m, top_k) / all_draws
                total += ways / subsets * (1.0 - miss)
    return total


def expected_consecutive_bins(*, experts: int, top_k: int, bins: int) -> float:
    """Expected distinct bins (``experts / bins`` contiguous experts each) among a token's ``top_k`` consecutive
    experts ``s .. s + top_k − 1`` (mod ``experts``), over the starts ``s = i·top_k mod experts`` (module docstring).

    Raises ``ValueError`` when ``bins`` does not divide ``experts`` or ``top_k`` exceeds it."""
    if experts <= 0 or top_k <= 0 or bins <= 0:
        raise ValueError("experts, top_k and bins must be positive")
    if experts % bins or top_k > experts:
        raise ValueError(f"{bins} bins must divide {experts} experts and top_k {top_k} must not exceed them")
    per_bin = experts // bins
    starts = sorted({(i * top_k) % experts for i in range(experts)})
    return sum(len({((s + u) % experts) // per_bin for u in range(top_k)}) for s in starts) / len(starts)


def ep_dispatch_bytes(*, dispatcher: MoeDispatcher, tokens: float, hidden: int, top_k: int, experts: int, ep: int,
                      ranks_per_node: int, groups: int = 1, groups_per_token: int = 1,
                      dtype_bytes: float = 2.0, routing: MoeRouting = MoeRouting.UNIFORM) -> EpDispatchBytes:
    """What one GPU sends in one dispatch of one MoE layer: ``tokens`` it routes (its shard), ``experts`` the
    model's routed experts over ``ep`` ranks, ``ranks_per_node`` of the group's ranks per node, ``routing`` the
    router's pick (consecutive: ``expected_consecutive_bins``) (module docstring).

    Raises ``ValueError`` when the group spans nodes and ``ranks_per_node`` does not divide ``ep``."""
    if ep <= 1 or tokens <= 0 or top_k <= 0:
        return EpDispatchBytes(0.0, 0.0)
    local = max(1, min(ranks_per_node, ep))
    row = hidden * dtype_bytes
    if dispatcher is MoeDispatcher.ALLTOALL:
        copies = tokens * top_k
        return EpDispatchBytes(copies * (ep - local) / ep * row, copies * (local - 1) / ep * row)
    if ep % local:
        raise ValueError(f"{local} ranks per node must divide the expert-parallel group of {ep}")
    nodes = ep // local
    if routing is MoeRouting.CONSECUTIVE:
        d_gpu = expected_consecutive_bins(experts=experts, top_k=top_k, bins=ep)
        d_node = expected_consecutive_bins(experts=experts, top_k=top_k, bins=nodes) if nodes > 1 else 1.0
    else:
        d_gpu = expected_distinct_bins(experts=experts, top_k=top_k, bins=ep, groups=groups,
                                       groups_per_token=groups_per_token)
        d_node = expected_distinct_bins(experts=experts, top_k=top_k, bins=nodes, groups=groups,
                                        groups_per_token=groups_per_token) if nodes > 1 else 1.0
    nic_rows = d_node * (nodes - 1) / nodes
    nvlink_rows = d_gpu * (1.0 - 1.0 / local)
    return EpDispatchBytes(tokens * nic_rows * row, tokens * nvlink_rows * row)


def ep_dispatch_seconds(*, traffic: EpDispatchBytes, nic_bytes_per_s: float, nvlink_bytes_per_s: float,
                        latency_s: float) -> float:
    """One dispatch (or combine): the NIC and NVLink shares move at once; the slower sets the time."""
    if traffic.nic_bytes <= 0 and traffic.nvlink_bytes <= 0:
        return 0.0
    return latency_s + max(traffic.nic_bytes / nic_bytes_per_s, traffic.nvlink_bytes / nvlink_bytes_per_s)


@dataclass(frozen=True, slots=True)
class AllGatherDispatch:
    """One MoE layer's all-gather dispatch and reduce-scatter combine on one GPU (module docstring)."""

    dispatch_s: float
    combine_s: float
    dispatch_bytes: float
    """The gathered buffer: every rank's tokens' rows, routing map and probabilities."""
    combine_bytes: float
    """The reduce-scattered buffer: the ``G·T`` output rows."""


def allgather_dispatch(*, tokens: float, hidden: int, experts: int, group: int, bus_bytes_per_s: float,
                       latency_s: float | None = None, dtype_bytes: float = 2.0,
                       probs_dtype_bytes: float | None = None, map_bytes: float = 1.0,
                       nodes: int = 1) -> AllGatherDispatch:
    """Megatron-Core's ``MoEAllGatherTokenDispatcher`` for one MoE layer: ``tokens`` the rank routes (its sequence
    shard), ``group`` = expert tensor parallel x expert parallel ranks, ``experts`` the model's routed experts (the
    map and probabilities are ``[tokens, experts]``), rows of ``hidden`` in ``dtype_bytes``; the probabilities (and
    the combine) in ``probs_dtype_bytes`` (default: the rows' dtype), the map in ``map_bytes`` (torch.bool). Ring
    all-gather / reduce-scatter over ``group`` at ``bus_bytes_per_s`` on ``nodes`` nodes (``collectives``; ``latency_s``
    None: NCCL's tuner); zero for one rank."""
    if group <= 1 or tokens <= 0:
        return AllGatherDispatch(0.0, 0.0, 0.0, 0.0)
    probs = dtype_bytes if probs_dtype_bytes is None else probs_dtype_bytes
    gathered = group * tokens * (hidden * dtype_bytes + experts * (probs + map_bytes))
    combined = group * tokens * hidden * probs
    kw = dict(ranks=group, bus_bytes_per_s=bus_bytes_per_s, latency_s=latency_s, nodes=nodes)
    return AllGatherDispatch(all_gather_seconds(total_bytes=gathered, **kw),
                             reduce_scatter_seconds(total_bytes=combined, **kw), gathered, combined)


FLEX_PROBS_BYTES = 4.0
"""Bytes of one routing probability that Megatron-Core's ``flex`` dispatcher hands to the experts: DeepEP and HybridEP
take float32 probabilities only, so the dispatcher casts the router's (``token_probs.float()``, "DeepEP only supports
float32 probs" / "HybridEP only supports float32 probs") and the permuted probabilities stay float32 (``assert
self.dispatched_probs.dtype == torch.float32``): NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py
l.1033-1039, l.1178-1184 and l.1302 @9539a12e1b04a68423f57b3eb41d6125161dca24 (core_v0.17.0)."""

BIAS_LOOP_FP32_PROBS_EXTRA_BYTES = (
    5 * (FLEX_PROBS_BYTES - BF16_BYTES) + (FLEX_PROBS_BYTES + BF16_BYTES),  # 16: 28 against 12
    6 * (FLEX_PROBS_BYTES - BF16_BYTES) + 2 * (FLEX_PROBS_BYTES + BF16_BYTES),  # 24: 40 against 16
)
"""(forward, backward) bytes per element of the fc2 output that ``TEGroupedMLP._apply_bias`` moves beyond its
all-bf16 count (``moe_time.EXPERT_BIAS_FORWARD_BYTES`` 12, ``EXPERT_BIAS_BACKWARD_BYTES`` 16) when the routing
probabilities are float32 (``FLEX_PROBS_BYTES``): of the bf16 count's 2-byte accesses, those of probability-typed
tensors widen to ``FLEX_PROBS_BYTES`` (5 forward, 6 backward), and the casts between float32 and bf16 add one
access of ``FLEX_PROBS_BYTES`` and one of 2 each (1 forward, 2 backward), as counted below. The loop is
``torch.cat([t + b * p ...]).view(shape).to(dtype)`` (NVIDIA/Megatron-LM megatron/core/transformer/moe/experts.py
``_apply_bias`` l.251-268 @9539a12e1b04a68423f57b3eb41d6125161dca24, core_v0.17.0): with a float32 ``p`` PyTorch's type promotion makes ``b * p`` and
``t + b·p`` float32 and the ``cat`` copies float32 before the final cast. Forward: ``b * p`` writes 4, ``t + b·p``
reads 2 + 4 and writes 4, ``cat`` reads and writes 4, ``.to`` reads 4 and writes 2: 28 against 12. Backward: the
cast's gradient (read 2, write 4), per expert the add's gradient cast back to ``t``'s bf16 (read 4, write 2), the two
products (read 4, write 4 each) and their sums (read 4 each), and the split's ``cat`` of ``t``'s gradient (read 2,
write 2): 40 against 16. The same count with bf16 probabilities gives the traced 12 and 16 (no casts, 2 bytes each)."""

BIAS_LOOP_FP32_PROBS_EXTRA_KERNELS = (1, 1)
"""(forward, backward) kernels the float32 probabilities add to ``_apply_bias``: the final ``.to(dtype)`` forward and
its gradient's cast backward; plus, backward, ``BIAS_LOOP_FP32_PROBS_EXTRA_KERNELS_PER_EXPERT`` per local expert
(``bias_loop_fp32_probs_extra``; NVIDIA/Megatron-LM megatron/core/transformer/moe/experts.py ``_apply_bias``
@9539a12e1b04a68423f57b3eb41d6125161dca24)."""
BIAS_LOOP_FP32_PROBS_EXTRA_KERNELS_PER_EXPERT = 2
"""Backward casts per local expert with float32 probabilities: the add's gradient to ``t``'s bf16 and the bias
gradient (a ``hidden`` vector summed in float32) to the bias's bf16, which autograd's engine casts to each input's
dtype (NVIDIA/Megatron-LM megatron/core/transformer/moe/experts.py ``_apply_bias``
@9539a12e1b04a68423f57b3eb41d6125161dca24)."""


def bias_loop_fp32_probs_extra(*, dispatcher: MoeDispatcher, rows: float, hidden: int,
                               local_experts: int) -> tuple[float, float, float, float]:
    """(forward bytes, backward bytes, forward kernels, backward kernels) that Megatron-Core's expert-bias loop
    (``TEGroupedMLP._apply_bias``, a model with expert biases: gpt-oss) adds per MoE layer on a rank whose
    ``local_experts`` receive ``rows`` routed rows of ``hidden`` outputs when ``dispatcher`` hands the experts float32
    probabilities (the flex dispatcher, ``MoeDispatcher.DEEPEP``: ``FLEX_PROBS_BYTES``); zero for the others, whose
    probabilities keep the router's bf16 (``BIAS_LOOP_FP32_PROBS_EXTRA_BYTES``)."""
    if dispatcher is not MoeDispatcher.DEEPEP or rows <= 0:
        return 0.0, 0.0, 0.0, 0.0
    e = rows * hidden
    fk, bk = BIAS_LOOP_FP32_PROBS_EXTRA_KERNELS
    return (BIAS_LOOP_FP32_PROBS_EXTRA_BYTES[0] * e, BIAS_LOOP_FP32_PROBS_EXTRA_BYTES[1] * e, float(fk),
            float(bk + BIAS_LOOP_FP32_PROBS_EXTRA_KERNELS_PER_EXPERT * max(1, local_experts)))
