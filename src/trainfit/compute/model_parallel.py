"""Communication of tensor, sequence, context, expert and pipeline parallelism, per micro-step.

Per decoder layer, for ``T`` tokens on a rank (its sequence shard), hidden ``h``, 2-byte activations:

=================  ===========================================================  ==================
kind               what moves (forward; backward the same again)                 hidden behind
=================  ===========================================================  ==================
TP (Megatron)      2 all-reduces of T·h (after attention's o_proj and the MLP's  nothing (exposed;
                   down_proj); with SP 2 all-gathers + 2 reduce-scatters, the     Megatron's default
                   same volume (Korthikanti et al. 2022, §4.2.2)                  without TE overlap)
CP ring            (cp−1) passes of the rank's K and V blocks (T·kv·2 each)       the attention kernel
                   around the ring; backward also passes dK, dV                    (Liu et al., Ring
                                                                                  Attention, 2023)
CP Ulysses         all-to-all of q, k, v into head shards and of the output back  nothing
                   (Jacobs et al. 2023, DeepSpeed-Ulysses, §3)
EP                 all-to-all dispatch and combine of (T/tp)·top_k·h per MoE      nothing
                   layer: with tp > 1 the MoE layer's input is the rank's
                   sequence-parallel shard (Megatron-Core refuses MoE with TP
                   and EP without sequence parallel: NVIDIA/Megatron-LM
                   megatron/core/model_parallel_config.py
                   @0486ed9246cef89af5750ccf4afb6e97816f5e48 "When using
                   expert parallelism and tensor parallelism, sequence
                   parallelism must be used"); the group's same-node share
                   moves over NVLink, the rest over each GPU's NIC
                   (``collectives.all_to_all_bus_bytes_per_s``); DeepEP /
                   HybridEP send one row per destination node and fan
                   it out over NVLink (``moe_dispatch``)
PP                 the stage's output activation T·h to the next stage, its       half (sends overlap
                   gradient back; under the interleaved schedule once per model   the next micro-batch)
                   chunk, v times per micro-batch (Narayanan et al. 2021, §2.2:
                   "the amount of communication also increases by v")
=================  ===========================================================  ==================

A recomputed forward (activation checkpointing) repeats the forward's TP, Ulysses and EP traffic; Megatron's
selective recompute (``--recompute-granularity selective``: core attention only, the QK^T / softmax / PV between the
QKV projection and the output projection) repeats none of it, only a ring context-parallel exchange, which runs inside
core attention (NVIDIA/Megatron-LM megatron/core/transformer/attention.py @00c2c0adeec16015f386548793c88ef08ff6acec
``Attention.forward``: with ``checkpoint_core_attention`` only ``_checkpointed_attention_forward`` around
``core_attention`` is checkpointed; the QKV and output projections and their collectives run once).

With sequence parallel the pipeline send is the rank's sequence shard, ``T·h / tp`` (NVIDIA/Megatron-LM
megatron/core/pipeline_parallel/schedules.py @00611e6eeb0b09b5ee074750956855215ddbd67f, ``get_forward_backward_func``:
"if using sequence parallelism, the sequence length component of the tensor shape is updated to
original_sequence_length / tensor_model_parallel_world_size").

Tensor-parallel communication overlap (``tp_comm_overlap``: Transformer Engine's userbuffers, Megatron-Core
``--tp-comm-overlap``) splits each sequence-parallel all-gather / reduce-scatter into chunks pipelined with the GEMM
that consumes or produces it (QKV and fc1 after the all-gathers, the output projection and fc2 before the
reduce-scatters: NVIDIA/TransformerEngine transformer_engine/pytorch/module/base.py ``initialize_ub``, the
``qkv_fprop`` / ``proj_fprop`` / ``fc1_fprop`` / ``fc2_fprop`` buffers and their dgrad/wgrad twins). A pass's
collectives are then exposed only where they outlast its GEMMs: ``max(0, comm − gemm)`` per pass.
Without userbuffers, a sequence-parallel run on Megatron-Core's layers (Transformer Engine's ``LayerNormLinear`` /
``Linear``, or Megatron-Core's own ``LinearWithGradAccumulationAndAsyncCommunication``) still hides part of the
backward's traffic (``te_sp_backward_pair_s``). Per column-parallel / row-parallel module pair (QKV and the output
projection; fc1 and fc2) and micro-step: the forward all-gathers the column module's input and reduce-scatters the row
module's output, both blocking; the backward all-gathers the row module's output gradient (blocking,
``base.py`` ``grad_output_preprocess``), re-gathers the column module's saved input shard for its wgrad GEMM on an
async handle behind its dgrad GEMM ("Tensor-parallel communication is overlapped with dgrad GEMM", waited before the
wgrad GEMM) and reduce-scatters its input gradient on an async handle behind its wgrad GEMM (waited at the end of the
module's backward): NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_linear.py
@e7c550c5f80636cf841a8204b1d6f85a5f3f28b7 l.270-300 (forward gather), l.745-768 and 962-964 (re-gather), l.877-888
and 1097-1101 (reduce-scatter); the same async re-gather and reduce-scatter at v1.8 l.436-448, 560-568, 660 and v2.2
l.607-611, 662-668, 690. The all-gathers move the QUANTISED input / gradient when the GEMMs are quantised (e7c550c5
l.277-300 quantise ``ln_out`` before ``gather_along_first_dim(..., quantizer=...)``, whose fp8 / MXFP8 / NVFP4
branches gather the quantised data and scales, ``transformer_engine/pytorch/distributed.py`` l.1699-1747; the output
gradient likewise, ``base.py`` l.1645-1649; TE 1.8 emits the fused norm's output in fp8 before its gather,
``layernorm_linear.py`` l.126-127 at v1.8); the reduce-scatters move the bf16 GEMM outputs. The SMs the async NCCL
kernels take from the overlapped GEMM are not modelled. An MoE layer's MLP pair keeps the older all-reduce pricing
(its experts are not these modules).
Expert-parallel all-to-all overlap (``ep_comm_overlap``: Megatron-Core ``overlap_moe_expert_parallel_comm``, the
combined 1F1B schedule) runs the forward of one micro-batch together with the backward of another, layer by layer,
their all-to-alls on a separate stream: "EP A2A in forward step is hidden by the attention/mlp computation in the
backward step, and vice versa" (NVIDIA/Megatron-LM megatron/core/pipeline_parallel/combined_1f1b.py
@d98e8a64ddf34856e74b24714e3bedb2f5a39553 ``combined_1f1b_schedule_for_no_pipelining``). A paired micro-step then
exposes ``max(0, a2a_fwd − backward) + max(0, a2a_bwd − forward)``; the micro-batches that run alone are not hidden:
the first forward and the last backward, and under the interleaved pipeline the warm-up forwards and cool-down
backwards, ``(p − r − 1)·2 + (v − 1)·p + 1`` virtual micro-batches on rank ``r`` (``schedules.py``
``get_pp_rank_microbatches``: "we schedule one extra micro-batch forward step before the 1f1b stages"; the last
stage, ``r = p − 1``, is the one timed). Megatron-Core refuses the overlap with full recompute and, with ``p > 1``,
without virtual pipeline stages (``transformer_config.py``); the SMs the all-to-all takes from the compute stream
are not modelled.

The overlap credit, checked against the framework's own measurements and the whole benchmark (2026-12-05; nothing
set). Megatron-Bridge's perf-technique card for this feature (NVIDIA-NeMo/Megatron-Bridge
skills/perf-techniques/expert-parallel-overlap/card.yaml @8af1ed3f2d661fffe4a1e8a3ba525863715dbd2c, validated_on
2026-03-22) reports no throughput win where it measured: Qwen3-30B-A3B, EP 4, ``alltoall``, 2 nodes, "flat at GBS=8
and ~13% slower at GBS=64"; Qwen3-Next-80B-A3B, EP 8, 8 nodes, ``delay_wgrad_compute`` "~4.8% slower than
overlap-only"; its stated cause "A2A cost is too small relative to added scheduling overhead", a benefit "expected
only when expert-parallel communication is a dominant bottleneck". So the credit could be suspected of flattering the
Megatron-Bridge rows that run the overlap and plan far too fast (25.11 / 26.02 H100 Qwen3-30B-A3B FP8, 26.02 B300
Qwen3-235B-A22B MXFP8). Tried as ``ep_comm_overlap`` off for every card (``benchmarks/step_times.py``, not committed):
40 rows move, all Megatron-Bridge or Megatron-MoE-ModelZoo pre-training rows that state ``moe_comm_overlap``; 12 come
closer, 28 go 9-52 points further from their published steps. The short ones come closer but stay far off (25.11
H100 Qwen3-30B-A3B -64.4 -> -56.9%, 26.02 -59.0 -> -53.6%, 26.02 B300 Qwen3-235B-A22B -56.2 -> -48.6%, 25.11 B200
Qwen3-235B-A22B -46.2 -> -37.0%, 26.02.01 H100 Qwen3-235B-A22B -43.8 -> -12.7%), as do the gpt-oss-120b GB200 / GB300
rows of 26.04-26.08 (-41.1 -> -34.4%, -36.7 -> -30.2%, -26.0 -> -19.8%, -25.7 -> -19.8%, -7.7 -> +2.8%, -6.9 ->
+3.8%) and the H100 Qwen3-30B-A3B verification performance item (-16.6 -> +11.5%); the rest, well planned with the
credit, move away: the H100 Qwen3-235B-A22B FP8 rows of 25.11-26.04.01 from -11.6..-16.2% to +25.5..+35.0% (EP 32
over four nodes: the exchange the overlap hides is large there), the ModelZoo DeepEP 1F1B-overlap row -12.1 ->
+25.1%, the 26.04.01 B200 DeepSeek-V3 MXFP8 row -0.3 -> +52.4%, the GB200 / GB300 / B300 Qwen3 and DeepSeek-V3 MXFP8
rows of 26.06-26.08 from +12..+30% to +30..+55%, and the GB300 gpt-oss-120b MXFP8 rows of 26.06 / 26.08 +3.6 / +3.1%
to +14.2 / +13.7%; the pretrain subset's median 8.38 -> 8.47%. The credit is what the larger-EP rows need, which is
where the card itself expects the benefit, and the card's measured shapes (EP 4 ``alltoall`` on two nodes; EP 8
on eight nodes, delayed weight gradients against overlap only) are none of the short rows' (EP 8 inside one node,
HybridEP / DeepEP on the H100 rows): a flag-wide
penalty of its 13% would be a figure from another layout and would close at most a fifth of the H100 rows' 2x gap
while pushing the GB200 / GB300 overlap rows, already over, further. So the scheduling overhead it names stays
unpriced, per layer or call no source gives it, and the short rows stay the containers' and recipes' (their entries'
``checked``).

The pipeline bubble is ``(p − 1) / v`` micro-batch times per step (Narayanan et al. 2021, §2.2:
bubble fraction (p−1)/m for 1F1B, divided by the v model chunks of the interleaved schedule).

All-to-all over ``n`` ranks moves ``(n−1)/n`` of its buffer per rank (nccl-tests PERFORMANCE.md).

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.compute import collectives as coll
from trainfit.compute.moe_dispatch import EpDispatchBytes, allgather_dispatch, ep_dispatch_bytes, ep_dispatch_seconds
from trainfit.compute.moe_time import count_exchange_seconds
from trainfit.spec.enums import MoeDispatcher, MoeRouting


@dataclass(frozen=True, slots=True)
class ModelParallelComm:
    """Exposed seconds per micro-step on one rank, by kind (forward + recompute + backward)."""

    tensor_s: float = 0.0
    context_s: float = 0.0
    expert_s: float = 0.0
    pipeline_p2p_s: float = 0.0
    tensor_forward_s: float = 0.0
    """Of ``tensor_s``, the first forward's (the rest: the recomputed forward's and the backward's)."""
    context_forward_s: float = 0.0
    """Of ``context_s``, the first forward's."""
    expert_forward_s: float = 0.0
    """A forward's dispatch and combine all-to-alls (and token-count exchange) exposed in full: what a forward-only
    pass, with no other micro-batch's backward to hide them behind, pays (``ep_comm_overlap`` hides ``expert_s``'s)."""
    pipeline_p2p_forward_s: float = 0.0
    """Of ``pipeline_p2p_s``, the forward's activation sends (the rest: the gradients sent back)."""

    @property
    def total_s(self) -> float:
        return self.tensor_s + self.context_s + self.expert_s + self.pipeline_p2p_s


def model_parallel_comm(
    *, tokens: float, hidden: int, q_dim: int, kv_dim: int, layers: int, attention_layers: int, moe_layers: int,
    top_k: int, tp: int, cp: int, ulysses: bool, ep: int, pp: int, recompute: bool, latency_s: float | None = None,
    tp_bus_bytes_per_s: float, cp_bus_bytes_per_s: float, ep_bus_bytes_per_s: float, pp_bytes_per_s: float,
    attention_forward_s_per_layer: float = 0.0, attention_backward_s_per_layer: float = 0.0,
    dtype_bytes: float = 2.0, virtual_stages: int = 1, experts: int = 0, sequence_parallel: bool = False,
    recompute_collectives: bool = True, tp_comm_overlap: bool = False, gemm_forward_s: float = 0.0,
    gemm_backward_s: float = 0.0, moe_dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL, ep_ranks_per_node: int = 1,
    ep_nic_bytes_per_s: float = 1.0, ep_nvlink_bytes_per_s: float = 1.0, moe_groups: int = 1,
    moe_groups_per_token: int = 1, ep_comm_overlap: bool = False, compute_forward_s: float = 0.0,
    compute_backward_s: float = 0.0, micro_steps: int = 1, moe_routing: MoeRouting = MoeRouting.UNIFORM,
    etp: int = 1, ep_ring_bus_bytes_per_s: float = 0.0, tp_nodes: int = 1, cp_nodes: int = 1, pp_nodes: int = 1,
    expert_recompute: bool = False,
    pp_scatter_gather: bool = False, launch_blocking: bool = False, sp_async_backward: bool = False,
    sp_gather_bytes_per_element: float = 0.0, attention_column_share: float = 0.0,
    mlp_column_share: float = 0.0, frozen_weights: bool = False, ep_load_factor: float = 1.0,
) -> ModelParallelComm:
    """Exposed communication of one micro-step on one rank of one pipeline stage (``layers`` = its layers).

    ``tokens``: tokens the rank holds (micro-batch x sequence / cp); ``q_dim``, ``kv_dim``: the full
    model's widths (a Ulysses all-to-all moves every head of its sequence shard); ``virtual_stages``: the
    interleaved schedule's model chunks per rank (each sends its output on and its gradient back); ``experts``:
    the model's routed experts (the dispatcher all-gathers a token count per expert before each forward's
    all-to-all: ``moe_time.count_exchange_seconds``); ``sequence_parallel``: the pipeline send is the rank's
    sequence shard; ``recompute_collectives``: the recomputed forward repeats the TP, Ulysses and EP collectives (full
    recompute; False for Megatron's selective core-attention recompute); ``tp_comm_overlap``: the TP collectives hide
    behind the pass's GEMMs, ``gemm_forward_s`` / ``gemm_backward_s`` (the stage's layers, one micro-step) (module
    docstring); ``moe_dispatcher`` DEEPEP: the dispatch and combine move ``moe_dispatch.ep_dispatch_bytes`` (one row
    per destination node over the NIC at ``ep_nic_bytes_per_s``, NVLink fan-out at ``ep_nvlink_bytes_per_s``;
    ``ep_ranks_per_node`` of the group per node; ``moe_groups`` / ``moe_groups_per_token``: group-limited routing);
    ``ep_comm_overlap``: the all-to-alls of a forward hide behind another micro-batch's backward and vice versa
    (``compute_forward_s`` / ``compute_backward_s``: the stage's passes, one micro-step; ``micro_steps`` per step:
    ``ep_overlap_exposed``; module docstring); ``moe_routing``: the router's pick, for DeepEP's per-node rows
    (``moe_dispatch.ep_dispatch_bytes``); ``ep_load_factor``: every EP rank waits at each all-to-all or DeepEP
    dispatch and combine for the busiest rank's rows, that factor times the mean rank's bytes (the fixed latency
    unscaled; ``moe_time.busiest_rank_load_factor``; 1: balanced routing); the all-gather dispatcher's collectives
    move every rank's rows whatever the routing and take no factor; ``moe_dispatcher`` ALLGATHER: a ring all-gather
    (dispatch) and reduce-scatter (combine) over the ``etp·ep`` ranks at ``ep_ring_bus_bytes_per_s`` (default the
    all-to-all's rate) (``moe_dispatch.allgather_dispatch``), no token-count exchange; ``tp_nodes``: the nodes one TP group spans. The TP
    all-reduce, the EP all-to-all, DeepEP's dispatch latency, the all-gather dispatcher and the count exchange take
    NCCL's tuner latencies over their group's nodes (``collectives.nccl_collective_seconds``,
    ``grouped_p2p_latency_s``); so do the Ulysses all-to-all (grouped p2p over the ``cp_nodes`` the CP group spans),
    each ring context-parallel step and each pipeline send (``p2p_send_latency_s``: one NCCL send / receive to one
    peer, across nodes when ``cp_nodes`` / ``pp_nodes`` > 1). ``latency_s``: a number prices those three with that
    fixed latency instead (taken whole, for callers that pass a measured one). ``pp_scatter_gather``: Megatron-LM's
    scatter/gather pipeline sends (``--scatter-gather-tensors-in-pipeline``, on by default; Narayanan et al. 2021,
    §4.1): without sequence parallel each of the ``tp`` ranks sends its ``1/tp`` slice of the activation, and the
    receiver all-gathers the slices over the tensor-parallel group (NVIDIA/Megatron-LM megatron/p2p_communication.py
    l.61-66, 88-94, 133-141 and megatron/arguments.py l.607-609 @6985e58938d40ad91ac07b0fddcfad8132e1447e, the SC21
    runs' commit; the argument is gone from Megatron-Core, which sends the whole activation). ``launch_blocking``
    (``CUDA_LAUNCH_BLOCKING=1``, ``training.launch_blocking_syncs``: every kernel launch, NCCL's included, returns
    only when the kernel has finished): nothing is launched beside a collective or a send, so the TP collectives
    do not hide behind the GEMMs, the EP all-to-alls not behind another micro-batch's pass, and the pipeline sends
    are exposed in full (CUDA C++ Programming Guide, asynchronous concurrent execution: the variable "globally
    disable[s] asynchronicity of kernel launches", as quoted in
    https://discuss.pytorch.org/t/cuda-launch-blocking-1-reduces-the-training-speed/160924, read 2026-12-03).
    ``sp_async_backward`` (sequence parallel on Megatron-Core / Transformer Engine layers, no userbuffers): the
    module pairs' backward hides the column module's input re-gather behind its dgrad GEMM and its gradient
    reduce-scatter behind its wgrad GEMM (``te_sp_backward_pair_s``, module docstring); the all-gathers move
    ``sp_gather_bytes_per_element`` per element (the quantised width with its scales; 0: ``dtype_bytes``);
    ``attention_column_share`` / ``mlp_column_share``: the QKV / fc1 module's share of a layer's backward GEMM time
    (its dgrad and wgrad GEMMs each half of it; ``mlp_column_share`` applies to the ``layers − moe_layers`` dense
    layers, whose MLP pair it prices; an MoE layer's MLP pair stays an exposed all-reduce per pass);
    ``frozen_weights``: LoRA's frozen base linears (``te_sp_backward_pair_s``); their column modules' forward gather
    moves the activation dtype: NeMo / Megatron-Bridge LoRA set ``return_layernorm_output_gathered`` on a sequence-
    parallel ``TELayerNormColumnParallelLinear`` (NVIDIA/NeMo nemo/collections/llm/peft/utils.py
    @0cdc2a0041ec2168a1c2009f7e96c49b7ab8af4e ``get_adapter_attributes_from_linear``), and TE then gathers the norm
    output in high precision and quantises the gathered copy (``layernorm_linear.py`` @e7c550c5 l.271-278).
    """
    if launch_blocking:  # no launch returns before its kernel ends: nothing runs beside a collective
        tp_comm_overlap = ep_comm_overlap = False
    passes = 3 if recompute else 2  # forward, (recompute), backward
    coll_passes = passes if recompute_collectives else 2
    act = tokens * hidden * dtype_bytes
    tensor = tensor_forward = 0.0
    if tp > 1:
        # NCCL's tuner prices the all-reduce over the ``tp_nodes`` the group spans (collectives.nccl_collective_seconds)
        one = coll.all_reduce_seconds(total_bytes=act, ranks=tp, bus_bytes_per_s=tp_bus_bytes_per_s, nodes=tp_nodes)
        per_pass = 2 * layers * one
        if sp_async_backward and sequence_parallel and not tp_comm_overlap and not launch_blocking:
            gather_bytes = tokens * hidden * (sp_gather_bytes_per_element or dtype_bytes)
            ag = coll.all_gather_seconds(total_bytes=gather_bytes, ranks=tp, bus_bytes_per_s=tp_bus_bytes_per_s,
                                         nodes=tp_nodes)
            rs = coll.reduce_scatter_seconds(total_bytes=act, ranks=tp, bus_bytes_per_s=tp_bus_bytes_per_s,
                                             nodes=tp_nodes)
            # LoRA: the column module returns its gathered norm output to the adapter, gathered in high precision
            fwd_ag = coll.all_gather_seconds(total_bytes=act, ranks=tp, bus_bytes_per_s=tp_bus_bytes_per_s,
                                             nodes=tp_nodes) if frozen_weights else ag
            dense = max(0, layers - moe_layers)
            layer_gemm_s = gemm_backward_s / max(1, layers)
            fwd_s = (layers + dense) * (fwd_ag + rs) + (layers - dense) * one
            bwd_s = (layers * te_sp_backward_pair_s(gather_s=ag, reduce_scatter_s=rs,
                                                    column_gemm_s=attention_column_share * layer_gemm_s,
                                                    frozen_weights=frozen_weights)
                     + dense * te_sp_backward_pair_s(gather_s=ag, reduce_scatter_s=rs,
                                                     column_gemm_s=mlp_column_share * layer_gemm_s,
                                                     frozen_weights=frozen_weights)
                     + (layers - dense) * one)
            tensor = (coll_passes - 1) * fwd_s + bwd_s
            tensor_forward = fwd_s
        elif tp_comm_overlap:
            # forward (and a repeated forward) behind the forward GEMMs, backward behind the backward's
            fwd_exposed = max(0.0, per_pass - gemm_forward_s)
            tensor = (coll_passes - 1) * fwd_exposed + max(0.0, per_pass - gemm_backward_s)
            tensor_forward = fwd_exposed
        else:
            tensor = coll_passes * per_pass
            tensor_forward = per_pass
    context = context_forward = 0.0
    if cp > 1 and attention_layers:
        if ulysses:
            qkv = tokens * (2 * q_dim + 2 * kv_dim) * dtype_bytes
            one = coll.all_to_all_seconds(total_bytes=qkv, ranks=cp, bus_bytes_per_s=cp_bus_bytes_per_s,
                                          latency_s=latency_s, nodes=cp_nodes)
            context = coll_passes * attention_layers * one
            context_forward = attention_layers * one
        else:
            block = 2 * tokens * kv_dim * dtype_bytes  # this rank's K and V
            step_s = p2p_send_latency_s(crosses_nodes=cp_nodes > 1) if latency_s is None else latency_s
            fwd = (cp - 1) * (block / cp_bus_bytes_per_s + step_s)
            bwd = 2 * fwd  # K, V and dK, dV circulate
            exposed_f = max(0.0, fwd - attention_forward_s_per_layer)
            exposed_b = max(0.0, bwd - attention_backward_s_per_layer)
            context = attention_layers * ((passes - 1) * exposed_f + exposed_b)
            context_forward = attention_layers * exposed_f
    expert = expert_forward = 0.0
    if ep > 1 and moe_layers:
        # MoE with tp > 1 runs sequence parallel (Megatron requires it: module docstring): each rank routes its
        # 1/tp sequence shard, so its all-to-all carries tokens / tp of them
        routed = tokens / tp if tp > 1 else tokens
        # the nodes the EP group spans, for NCCL's latencies (collectives.nccl_collective_seconds)
        ep_nodes = coll.group_nodes(ranks=ep, ranks_per_node=ep_ranks_per_node)
        if moe_dispatcher is MoeDispatcher.ALLGATHER:
            ag = allgather_dispatch(tokens=routed, hidden=hidden, experts=experts, group=ep * max(1, etp),
                                    bus_bytes_per_s=ep_ring_bus_bytes_per_s or ep_bus_bytes_per_s,
                                    dtype_bytes=dtype_bytes, nodes=ep_nodes)
            one = (ag.dispatch_s + ag.combine_s) / 2  # the mean of the pair: dispatch + combine = 2·one
        elif moe_dispatcher is MoeDispatcher.DEEPEP:
            traffic = ep_dispatch_bytes(
                dispatcher=moe_dispatcher, tokens=routed, hidden=hidden, top_k=top_k, experts=experts, ep=ep,
                ranks_per_node=ep_ranks_per_node, groups=moe_groups, groups_per_token=moe_groups_per_token,
                dtype_bytes=dtype_bytes, routing=moe_routing)
            # a trained router: the dispatch ends when the busiest rank's larger receive has arrived (its bytes,
            # not the fixed latency, grow with the factor)
            traffic = EpDispatchBytes(traffic.nic_bytes * ep_load_factor, traffic.nvlink_bytes * ep_load_factor)
            one = ep_dispatch_seconds(traffic=traffic, nic_bytes_per_s=ep_nic_bytes_per_s,
                                      nvlink_bytes_per_s=ep_nvlink_bytes_per_s,
                                      latency_s=coll.grouped_p2p_latency_s(ranks=ep, nodes=ep_nodes))
        else:
            # a trained router: the all-to-all ends when the busiest rank's larger receive has arrived: its bytes
            # scale, NCCL's fixed latency does not
            buf = routed * top_k * hidden * dtype_bytes * ep_load_factor
            one = coll.all_to_all_seconds(total_bytes=buf, ranks=ep, bus_bytes_per_s=ep_bus_bytes_per_s,
                                          nodes=ep_nodes)
        # the all-gather dispatcher gathers and reduce-scatters every rank's rows whatever the routing: no factor on
        # its collectives (the busiest rank's wait is in its scaled expert GEMMs, inventory.step_inventory)
        # the token-count all-gather before each forward (and recomputed forward) dispatch; backward reuses the counts
        counts = 0.0 if moe_dispatcher is MoeDispatcher.ALLGATHER else moe_layers * count_exchange_seconds(
            ep=ep, experts=experts, bus_bytes_per_s=ep_bus_bytes_per_s, nodes=ep_nodes)
        expert_forward = 2 * moe_layers * one + counts  # dispatch + combine, the counts before each dispatch
        if ep_comm_overlap:
            expert = ep_overlap_exposed(
                forward_a2a_s=2 * moe_layers * one + counts, backward_a2a_s=2 * moe_layers * one,
                forward_s=compute_forward_s, backward_s=compute_backward_s, micro_steps=micro_steps, pp=pp,
                virtual_stages=virtual_stages)
        else:
            # expert_recompute: Megatron-Core's ``moe`` recompute re-runs the dispatch and combine (training.py)
            ep_passes = max(coll_passes, 3 if expert_recompute else 2)
            expert = 2 * ep_passes * moe_layers * one + (ep_passes - 1) * counts  # dispatch + combine
    p2p = p2p_forward = 0.0
    if pp > 1:
        # activation forward, its gradient back, from each of the rank's v chunks; half hidden (launch_blocking:
        # the host waits for each send, none hidden)
        scatter = pp_scatter_gather and tp > 1 and not sequence_parallel
        send = act / tp if (sequence_parallel or scatter) and tp > 1 else act
        send_s = p2p_send_latency_s(crosses_nodes=pp_nodes > 1) if latency_s is None else latency_s
        # scatter/gather: the received slices all-gathered over the tensor-parallel group, one per send
        gather_s = coll.all_gather_seconds(total_bytes=act, ranks=tp, bus_bytes_per_s=tp_bus_bytes_per_s,
                                           nodes=tp_nodes) if scatter else 0.0
        p2p = (1.0 if launch_blocking else 0.5) * 2 * max(1, virtual_stages) * (send / pp_bytes_per_s + send_s
                                                                                 + gather_s)
        p2p_forward = p2p / 2  # the activations sent on; the other half, their gradients sent back
    return ModelParallelComm(tensor, context, expert, p2p, tensor_forward_s=tensor_forward,
                             context_forward_s=context_forward, expert_forward_s=expert_forward,
                             pipeline_p2p_forward_s=p2p_forward)


def host_slack_exposed_s(*, comm_s: float, device_s: float, paced_s: float) -> float:
    """Seconds that ``comm_s`` of collectives on the compute stream (exposed on the device's timeline: blocking, or
    outlasting the GEMM they overlap) add to passes whose GPU work takes ``device_s`` and whose host-paced time is
    ``paced_s`` (the larger of their host and device time, less the syncs' round trips):
    ``max(0, device_s + comm_s − paced_s)`` (``paced_s >= device_s``).

    An NCCL collective is a kernel the host enqueues and walks past (no host wait: ``torch.distributed`` returns once
    the work is enqueued, and ``Work.wait()`` only makes the compute stream wait on it: pytorch/pytorch
    torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp on main, read 2026-12-03, ``WorkNCCL::wait``: "synchronize()
    will block the current stream on the NCCL stream", the CPU thread blocked only under ``TORCH_NCCL_BLOCKING_WAIT``
    or a timeout; ``WorkNCCL::synchronizeStream``: "Block the current stream on the NCCL stream"); in a launch-bound
    pass the GPU idles behind the host's launches and runs the
    collective in that idle time, so only the part the slack does not absorb reaches the step. A device-bound pass
    (``paced_s == device_s``) pays ``comm_s`` in full. Slack is absorbed once: the slowest rank's excess and
    Megatron-Core's overlapped all-to-alls get only what the collectives left (``training.gpu_timeline_exposed_s``).

    This keeps the step consistent: the exposure ``comm_s`` shrinks where a GEMM the collective overlaps grows (a
    tile / wave boundary: ``te_sp_backward_pair_s`` hides the reduce-scatter behind the wgrad GEMM), by less than
    that GEMM grows the device time, so ``device_s + comm_s`` never falls as the work grows; priced against the
    device time alone, a launch-bound pass (whose time does not grow with the GEMM) would get faster with more work
    (Qwen3-8B on B200, TP 4 sequence parallel on Megatron-Core layers, compile: 4096 -> 4100 tokens crossed a
    128-row tile, the backward GEMMs +0.95 ms, the exposed reduce-scatter −0.11 ms, the host-paced backward flat)."""
    return min(comm_s, max(0.0, device_s + comm_s - max(paced_s, device_s)))


def te_sp_backward_pair_s(*, gather_s: float, reduce_scatter_s: float, column_gemm_s: float,
                          frozen_weights: bool = False) -> float:
    """Exposed seconds of one column-parallel / row-parallel module pair's sequence-parallel backward without
    userbuffers (module docstring): the row module's output-gradient all-gather (blocking, ``gather_s``), the column
    module's input re-gather past its dgrad GEMM and its input-gradient reduce-scatter past its wgrad GEMM, each GEMM
    half of ``column_gemm_s`` (the column module's backward GEMMs: dgrad and wgrad have the forward's FLOPs each).
    NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_linear.py
    @e7c550c5f80636cf841a8204b1d6f85a5f3f28b7 l.745-768, 877-888, 962-964, 1097-1101. ``frozen_weights`` (LoRA's
    frozen base linears): no wgrad GEMM, so no re-gather (``ctx.ln_out_needs_gather = weight.requires_grad and ...``,
    l.455-457) and nothing between the reduce-scatter's launch and its wait: the gather and the reduce-scatter."""
    if frozen_weights:
        return gather_s + reduce_scatter_s
    gemm_s = column_gemm_s / 2
    return gather_s + max(0.0, gather_s - gemm_s) + max(0.0, reduce_scatter_s - gemm_s)


def tied_embedding_grad_sync_s(*, vocab_rows: int, hidden: int, grad_bytes: float, pp: int, bytes_per_s: float,
                               crosses_nodes: bool) -> float:
    """Exposed seconds of the tied word embedding's gradient all-reduce between the first and the last pipeline stage,
    once per optimizer step. With tied input and output embeddings and ``pp > 1`` both end stages hold the
    ``vocab_rows x hidden`` matrix (the rank's vocabulary shard under tensor parallel) and accumulate its gradient
    apart; after the backward and the data-parallel reduction the two all-reduce it over a group of those two ranks,
    on the compute stream's critical path, before the optimizer step reads it:

    * nanotron: ``training_step`` calls ``sync_tied_weights_gradients`` after ``sync_gradients_across_dp`` ("TODO
      @nouamane: Put this in hooks so we can overlap communication with gradient computation on the last backward
      pass"), an ``all_reduce_coalesced`` of the fp32 accumulator's gradient buffer of each tied parameter over the
      ranks that hold it (huggingface/nanotron @c252843039cc167ff8d6894b87172af4637eb14b src/nanotron/trainer.py
      l.509-526, src/nanotron/parallel/tied_parameters.py ``sync_tied_weights_gradients`` l.119-165);
    * Megatron-Core: ``finalize_model_grads`` runs ``finish_grad_sync`` (the data-parallel reduction), then
      ``_allreduce_word_embedding_grads``: ``torch.distributed.all_reduce`` of the shared word embedding's
      ``main_grad`` over the embedding group, the first and last pipeline stages (NVIDIA/Megatron-LM
      @d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/distributed/finalize_model_grads.py l.164-258,
      l.638-676).

    ``grad_bytes``: the gradient element (the accumulation dtype: fp32 under both frameworks' defaults);
    ``bytes_per_s``: one GPU to one GPU (the pipeline's send rate: NVLink, or one NIC when the stages sit in different
    nodes, ``crosses_nodes``; NCCL's tuner prices the two-rank all-reduce over that many nodes). 0 without a pipeline."""
    if pp <= 1 or vocab_rows <= 0:
        return 0.0
    return coll.all_reduce_seconds(total_bytes=vocab_rows * hidden * grad_bytes, ranks=2, bus_bytes_per_s=bytes_per_s,
                                   nodes=2 if crosses_nodes else 1)


def p2p_send_latency_s(*, crosses_nodes: bool) -> float:
    """Fixed seconds of one NCCL send / receive between two ranks (a pipeline stage's activation or gradient, one
    ring context-parallel step's K/V block): NCCL's grouped p2p to one peer is one round
    (``collectives.grouped_p2p_latency_s`` for two ranks: tuning.cc's ring/Simple ``baseLatencies`` 8.4 us plus one
    step, NVLink's 3.4 us, or the network's 14 us plus the measured ``NCCL_NET_STEP_EXCESS_S``)."""
    return coll.grouped_p2p_latency_s(ranks=2, nodes=2 if crosses_nodes else 1)


def ep_overlap_exposed(*, forward_a2a_s: float, backward_a2a_s: float, forward_s: float, backward_s: float,
                       micro_steps: int, pp: int = 1, virtual_stages: int = 1) -> float:
    """Exposed expert-parallel all-to-all seconds per micro-step (the step's average) under Megatron-Core's combined
    1F1B overlap (module docstring): ``forward_a2a_s`` / ``backward_a2a_s``, the all-to-alls of one micro-step's
    forward / backward on the stage; ``forward_s`` / ``backward_s``, that micro-step's compute. A paired micro-step
    exposes what outlasts the other direction's compute; the unpaired warm-up forwards and cool-down backwards
    (virtual micro-batches of ``1 / virtual_stages`` micro-step each, on the last stage) expose all of theirs."""
    m = max(1, micro_steps)
    v = max(1, virtual_stages) if pp > 1 else 1
    warmup = (v - 1) * pp + 1 if pp > 1 else 1  # the last stage's warm-up (and cool-down) virtual micro-batches
    alone = min(float(m), warmup / v)
    paired = max(0.0, forward_a2a_s - backward_s) + max(0.0, backward_a2a_s - forward_s)
    return (alone * (forward_a2a_s + backward_a2a_s) + (m - alone) * paired) / m


def pipeline_bubble_micro_steps(*, pp: int, virtual_stages: int = 1) -> float:
    """Idle micro-batch slots per step: ``(p − 1) / v``."""
    return (pp - 1) / max(1, virtual_stages) if pp > 1 else 0.0
