"""One decode step of a vLLM-style engine: weights and KV read, FLOPs, tensor-parallel all-reduce, launch.

One decode step over ``B`` running sequences holding ``T`` context tokens (Pope et al. 2022,
"Efficiently Scaling Transformer Inference", §2; Kwon et al. 2023, PagedAttention, §2.2)::

    bandwidth = (weight_bytes/tp + T·kv_bytes_per_token/tp + B·kv_bytes_per_token/tp) / hbm_bytes_per_s
    compute   = (B·2·N + T·4·q_dim·full_attention_layers) / (matmul_flops_per_s · tp)
    comm      = 2·layers · (latency + 2(tp−1)/tp · B·hidden·2 bytes / bus)          (0 when tp = 1)
    launch    = eager: layers·(DECODE_KERNELS_PER_LAYER + 2 if tp>1)·host_s_per_forward_kernel
                CUDA graphs: one launch, host_s_per_forward_kernel
    step      = max(max(bandwidth, compute) + comm, launch) + engine_s_per_step

A mixture-of-experts model reads only the experts its ``B`` tokens are routed to: with top-``k`` of
``E`` routed experts and routing taken as independent and uniform, a layer touches the expected
share ``1 − (1 − k/E)^B`` of its experts, so ``weight_bytes`` above is the dense part plus that share
of the routed experts' bytes (bf16). One sequence of Qwen3-30B-A3B (8 of 128) reads 6 % of its
experts per step, 64 sequences 98 %: the long tail of an MoE rollout is cheaper per step than its
bulk. Real routing is skewed, so the uniform share is an upper bound on the experts read.

**An engine across nodes** (``TpLink``, ``tp_link``): a tensor-parallel group larger than the rollout GPUs
of one node (vLLM multi-node tensor parallel over Ray; NeMo RL runs DeepSeek-V3 at TP 32 on 8-GPU
nodes) all-reduces every layer over the NIC. vLLM's custom all-reduce works inside one NVLink
domain only, so the group falls back to NCCL: its ring runs at the NICs of the group's GPUs in one
node in parallel (``collectives.ring_bus_bytes_per_s``), and each of its ``2·(nodes − 1)`` ring
steps that leave a node costs NCCL's network hop instead of its NVLink hop: 9.6 µs against 3.4 µs
for the ring/Simple protocol (NVIDIA/nccl src/graph/tuning.cc ``hwLat`` table,
@01afd20a77b5804e0ecf1042509dd9d20ebf9e93), i.e. ``COLLECTIVE_HOP_LATENCY_S × (9.6/3.4 − 1)`` more per
such step. A GB200 NVL72 rack is one NVLink domain of 72 GPUs over its 4-GPU trays
(https://www.nvidia.com/en-us/data-center/gb200-nvl72/), so a group of up to 72 stays on NVLink.

``ENGINE_S_PER_STEP`` is what the engine spends per step outside the GPU's kernels (scheduler,
input preparation, sampling, output processing): the residual of a published batch-1 TPOT once
the weight read is taken out (H100 SXM, Llama-3.1-8B bf16, vLLM 0.21, concurrency 1: TPOT p50
6.48 ms, InferenceBench concurrency-sweep recipe, https://yobitelcomm.github.io/bench/recipes/
concurrency-sweep/; the weight read at 90 % of 3.35 TB/s is 5.33 ms, the graph launch and KV
read ~0.03 ms: 1.1 ms, rounded down to 1 ms). ``tests/compute/test_generation.py`` checks it on an
independent A100 point.

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.compute import collectives
from trainfit.compute.rates import COLLECTIVE_HOP_LATENCY_S, DeviceRates
from trainfit.spec.model import ModelSpec

ENGINE_S_PER_STEP = 1.0e-3
"""Engine seconds per decode step outside the kernels (module docstring: fitted on one published TPOT)."""
DECODE_KERNELS_PER_LAYER = 10
"""Kernels one eager decoder layer launches: input norm, QKV GEMM, rotary, KV-cache write, attention,
O GEMM, fused add+norm, gate/up GEMM, SiLU-and-mul, down GEMM (vLLM's Llama/Qwen layers)."""
ACTIVATION_BYTES = 2
"""bf16 hidden states in the tensor-parallel all-reduces."""
NCCL_NET_OVER_NVLINK_HOP = 9.6 / 3.4
"""NCCL's ring/Simple hop latency over the network over its NVLink hop (tuning.cc ``hwLat``, module docstring)."""
NVLINK_DOMAIN_GPUS = {"gb200": 72}
"""GPUs one NVLink domain spans where it is larger than a node (GB200 NVL72: 72 GPUs over 18 trays of 4)."""


@dataclass(frozen=True, slots=True)
class TpLink:
    """The link an engine's tensor-parallel all-reduces run on (None in the step model: inside one node)."""

    bus_bytes_per_s: float
    """NCCL ring bus bandwidth of the group."""
    extra_latency_s: float
    """Added to each all-reduce's latency: its ring steps that cross the network."""
    nodes: int
    """Nodes the group spans (1: one NVLink domain)."""


def tp_link(*, rates: DeviceRates, tp: int, engine_gpus_per_node: int, nic_bytes_per_s: float,
            gpu_id: str = "") -> TpLink | None:
    """The link of a ``tp``-GPU engine whose node gives the engine ``engine_gpus_per_node`` GPUs: None when
    the group fits in one node or one NVLink domain (``NVLINK_DOMAIN_GPUS``), else the NIC-bound ring
    (module docstring)."""
    per_node = max(1, engine_gpus_per_node)
    if tp <= per_node or tp <= NVLINK_DOMAIN_GPUS.get(gpu_id, 0):
        return None
    nodes = -(-tp // per_node)
    bus = collectives.ring_bus_bytes_per_s(rates=rates, crosses_nodes=True, nic_bytes_per_s=nic_bytes_per_s,
                                           local_ranks=per_node)
    extra = 2 * (nodes - 1) * COLLECTIVE_HOP_LATENCY_S * (NCCL_NET_OVER_NVLINK_HOP - 1)
    return TpLink(bus_bytes_per_s=bus, extra_latency_s=extra, nodes=nodes)


@dataclass(frozen=True, slots=True)
class DecodeStep:
    """One decode step, its parts in seconds (``total_s`` = max(max(bw, compute) + comm, launch) + engine)."""

    bandwidth_s: float
    compute_s: float
    comm_s: float
    launch_s: float
    engine_s: float
    total_s: float


@dataclass(frozen=True, slots=True)
class _StepModel:
    """Linear coefficients of the step parts in (B sequences, T context tokens)."""

    bw0: float
    bw_ctx: float
    bw_seq: float
    fl_seq: float
    fl_ctx: float
    comm0: float
    comm_seq: float
    launch: float
    engine: float
    bw_experts: float = 0.0
    """Seconds to read all routed experts' weights (MoE); ``bw0`` then holds the dense part only."""
    expert_miss: float = 1.0
    """``1 − k/E``: the chance one token leaves a given routed expert untouched."""

    def parts(self, b: float, t: float) -> tuple[float, float, float, float]:
        experts = self.bw_experts * (1.0 - self.expert_miss ** max(b, 1.0)) if self.bw_experts else 0.0
        return (self.bw0 + experts + self.bw_ctx * t + self.bw_seq * b, self.fl_seq * b + self.fl_ctx * t,
                self.comm0 + self.comm_seq * b, self.launch)

    def seconds(self, b: float, t: float) -> float:
        bw, fl, cm, ln = self.parts(b, t)
        return max((bw if bw > fl else fl) + cm, ln) + self.engine


def tp_bus_and_latency(rates: DeviceRates, tp_all_reduce_latency_s: float | None,
                       link: TpLink | None) -> tuple[float, float]:
    """(bus bytes/s, latency s) of one engine all-reduce: inside a node, or over ``link``."""
    lat = rates.collective_latency_s if tp_all_reduce_latency_s is None else tp_all_reduce_latency_s
    if link is None:
        return rates.intra_node_bus_bytes_per_s, lat
    return link.bus_bytes_per_s, lat + link.extra_latency_s


def _step_model(*, spec, matmul_params, rates, tp, weight_bytes, kv_bytes_per_token, cuda_graphs,
                engine_s_per_step, tp_all_reduce_latency_s, link: TpLink | None = None) -> _StepModel:
    hbm = rates.hbm_bytes_per_s
    flops = rates.matmul_flops_per_s * tp
    n_ar = 2 * spec.num_layers if tp > 1 else 0
    bus, lat = tp_bus_and_latency(rates, tp_all_reduce_latency_s, link)
    ring = collectives.all_reduce_seconds(total_bytes=1.0, ranks=tp, bus_bytes_per_s=bus,
                                          latency_s=lat) if tp > 1 else 0.0
    per_byte = 2 * (tp - 1) / tp / bus if tp > 1 else 0.0
    kernels = spec.num_layers * (DECODE_KERNELS_PER_LAYER + (2 if tp > 1 else 0))
    experts, miss = routed_expert_bytes(spec, weight_bytes=weight_bytes)
    return _StepModel(
        bw0=(weight_bytes - experts) / tp / hbm, bw_experts=experts / tp / hbm, expert_miss=miss, bw_ctx=kv_bytes_per_token / tp / hbm, bw_seq=kv_bytes_per_token / tp / hbm,
        fl_seq=2 * matmul_params / flops, fl_ctx=4.0 * spec.q_dim * spec.num_full_attention_layers / flops,
        comm0=n_ar * (ring - per_byte), comm_seq=n_ar * per_byte * spec.hidden_size * ACTIVATION_BYTES,
        launch=rates.host_s_per_forward_kernel * (1 if cuda_graphs else kernels), engine=engine_s_per_step,
    )


def routed_expert_bytes(spec: ModelSpec, *, weight_bytes: float) -> tuple[float, float]:
    """(bytes of all routed experts in bf16, at most ``weight_bytes``; ``1 − k/E``); (0, 1) for a dense model."""
    moe = spec.moe
    if moe is None or moe.num_experts <= moe.experts_per_token:
        return 0.0, 1.0
    layers = sum(1 for i in range(spec.num_layers) if moe.is_moe_layer(i))
    routed = layers * moe.num_experts * 3 * spec.hidden_size * moe.expert_intermediate_size * ACTIVATION_BYTES
    return min(routed, weight_bytes), 1.0 - moe.experts_per_token / moe.num_experts


def decode_step_seconds(
    *, spec: ModelSpec, matmul_params: float, rates: DeviceRates, tp: int, batch: float, context_tokens: float,
    weight_bytes: float, kv_bytes_per_token: float, cuda_graphs: bool = True,
    engine_s_per_step: float = ENGINE_S_PER_STEP, tp_all_reduce_latency_s: float | None = None,
    link: TpLink | None = None,
) -> DecodeStep:
    """One decode step of ``batch`` sequences holding ``context_tokens`` tokens of KV in all (module docstring);
    ``link``: the tensor-parallel group's link when it spans nodes (``tp_link``)."""
    m = _step_model(spec=spec, matmul_params=matmul_params, rates=rates, tp=tp, weight_bytes=weight_bytes,
                    kv_bytes_per_token=kv_bytes_per_token, cuda_graphs=cuda_graphs,
                    engine_s_per_step=engine_s_per_step, tp_all_reduce_latency_s=tp_all_reduce_latency_s,
                    link=link)
    bw, fl, cm, ln = m.parts(batch, context_tokens)
    return DecodeStep(bandwidth_s=bw, compute_s=fl, comm_s=cm, launch_s=ln, engine_s=m.engine,
                      total_s=m.seconds(batch, context_tokens))


def _bound(m: _StepModel, b: float, t: float) -> int:
    bw, fl, _, ln = m.parts(b, t)
    host = ln + m.engine
    return 0 if bw >= fl and bw >= host else 1 if fl >= host else 2


_BOUNDS = ("bandwidth", "compute", "launch")
