"""One decode step of a vLLM-style engine: weights and KV read, FLOPs, tensor-parallel all-reduce, launch.

One decode step over ``B`` running sequences holding ``T`` context tokens (Pope et al. 2022,
"Efficiently Scaling Transformer Inference", §2; Kwon et al. 2023, PagedAttention, §2.2)::

    bandwidth = (weight_bytes/tp + T·kv_bytes_per_token/tp + B·kv_bytes_per_token/tp) / hbm_bytes_per_s
    compute   = (B·2·N + T·4·q_dim·full_attention_layers) / (matmul_flops_per_s · tp)
    comm      = 2·layers · (latency + 2(tp−1)/tp · B·hidden·2 bytes / bus)          (0 when tp = 1)
    launch    = eager: layers·(DECODE_KERNELS_PER_LAYER + 2 if tp>1)·host_s_per_forward_kernel
                CUDA graphs: one launch, host_s_per_forward_kernel
    step      = max(max(bandwidth, compute) + comm, launch) + engine_s_per_step          (GPU side, G)
    multi-process engine: step = max(G, B · FRONTEND_S_PER_SEQUENCE)
    in-process engine:    step = G + FRONTEND_S_PER_STEP + B · FRONTEND_S_PER_SEQUENCE

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

**The engine's frontend** (``engine_multiprocess``): vLLM V1 runs its scheduler and model runner in an
``EngineCore`` and the request bookkeeping around it (turning the core's outputs into request outputs:
per-sequence output processing, incremental detokenization, stop checks, building the next step's
request updates) in a frontend. By default the core runs in its own process and the two overlap: the
frontend works on step ``n`` while the GPU runs step ``n+1`` (vllm-project/vllm PR #9826, ``AsyncLLM``:
"``VLLM_ENABLE_V1_MULTIPROCESSING=1`` enables multiprocessing for ``EngineCore`` inside ``LLM`` [...] It is
faster"; Qwen2.5-1.5B ShareGPT offline throughput 27.81 vs 25.98 requests/s with it on / off, PR #10241).
With ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` the core runs in the caller's process and every step waits for
the frontend's work on the previous one: it adds to the GPU's time instead of hiding behind it. NeMo RL
sets it to 0 for its vLLM workers (NVIDIA-NeMo/RL ``nemo_rl/models/generation/vllm/vllm_worker.py`` line 112
@9dbd9adc95a10f5946cceb36e1d5b31e2429e470, still at @7ea279abfbeb698b092856d0dab61e7cf39bc909 line 243) and drives
``vllm.LLM`` in-process; verl serves through ``AsyncLLM`` (multi-process, verl-project/verl
``verl/workers/rollout/vllm_rollout/vllm_async_server.py`` @1dda039b9c6311889a9c9a26040677e1254814f9) and OpenRLHF
through ``vllm.AsyncLLMEngine`` (``openrlhf/trainer/ray/vllm_engine.py`` @3c3be6234e0cb353e76bb8019947db9dfe99fca7
sets the variable to 0 only for ``full_determinism``). The frontend's work is a constant per step plus a
part per running sequence (each sequence's new token is processed, detokenized and stop-checked in
Python). In a multi-process engine the per-sequence part runs beside the GPU step and only shows when it
is the longer of the two; what such an engine leaves serial per step is already in the batch-1 TPOT that
fixes ``ENGINE_S_PER_STEP``. In-process, the constant part (``FRONTEND_S_PER_STEP``: the step loop, the core's
output handed back and turned into request outputs) and the per-sequence part both add to every step.
Both were fitted on the fit half of ``benchmarks/step_times.py`` (rows with ``sha1(id) % 2 == 0``, NeMo RL's
on-policy and one-step-off GRPO steps on H100 and GB200; grid 0-10 ms x 0-60 us; the held-out half is
reported there): 8 ms and 10 us (a 64-sequence step: 8.6 ms of host work).

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.compute import collectives
from trainfit.compute.rates import COLLECTIVE_HOP_LATENCY_S, DeviceRates
from trainfit.spec.model import ModelSpec

ENGINE_S_PER_STEP = 1.0e-3
"""Engine seconds per decode step outside the kernels (module docstring: fitted on one published TPOT)."""
FRONTEND_S_PER_STEP = 8.0e-3
"""The in-process frontend's constant host seconds per step (module docstring; fitted, fit half of the benchmark)."""
FRONTEND_S_PER_SEQUENCE = 10e-6
"""The frontend's host seconds per running sequence per step (module docstring; fitted, fit half)."""
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
    """One decode step, its parts in seconds (``total_s``: module docstring)."""

    bandwidth_s: float
    compute_s: float
    comm_s: float
    launch_s: float
    engine_s: float
    frontend_s: float
    """The frontend's host work: part of ``total_s`` when the engine runs in-process, else overlapped."""
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
    frontend0: float = 0.0
    """Frontend host seconds per step (module docstring)."""
    frontend_seq: float = 0.0
    """Frontend host seconds per running sequence per step."""
    frontend_serial: bool = False
    """True: the engine runs in-process, the frontend's work adds to the step; False: it overlaps."""
    bw_experts: float = 0.0
    """Seconds to read all routed experts' weights (MoE); ``bw0`` then holds the dense part only."""
    expert_miss: float = 1.0
    """``1 − k/E``: the chance one token leaves a given routed expert untouched."""

    def parts(self, b: float, t: float) -> tuple[float, float, float, float]:
        experts = self.bw_experts * (1.0 - self.expert_miss ** max(b, 1.0)) if self.bw_experts else 0.0
        return (self.bw0 + experts + self.bw_ctx * t + self.bw_seq * b, self.fl_seq * b + self.fl_ctx * t,
                self.comm0 + self.comm_seq * b, self.launch)

    def frontend(self, b: float) -> float:
        """The frontend's host seconds for a step of ``b`` running sequences that the GPU step does not
        already hold: in-process, the constant and the per-sequence part; multi-process, the per-sequence
        part (which overlaps the GPU step)."""
        per_seq = self.frontend_seq * max(b, 1.0)
        return self.frontend0 + per_seq if self.frontend_serial else per_seq

    def seconds(self, b: float, t: float) -> float:
        bw, fl, cm, ln = self.parts(b, t)
        gpu = max((bw if bw > fl else fl) + cm, ln) + self.engine
        host = self.frontend(b)
        return gpu + host if self.frontend_serial else (gpu if gpu > host else host)


def tp_bus_and_latency(rates: DeviceRates, tp_all_reduce_latency_s: float | None,
                       link: TpLink | None) -> tuple[float, float]:
    """(bus bytes/s, latency s) of one engine all-reduce: inside a node, or over ``link``."""
    lat = rates.collective_latency_s if tp_all_reduce_latency_s is None else tp_all_reduce_latency_s
    if link is None:
        return rates.intra_node_bus_bytes_per_s, lat
    return link.bus_bytes_per_s, lat + link.extra_latency_s


def _step_model(*, spec, matmul_params, rates, tp, weight_bytes, kv_bytes_per_token, cuda_graphs,
                engine_s_per_step, tp_all_reduce_latency_s, link: TpLink | None = None,
                engine_multiprocess: bool = True, frontend_s_per_step: float = FRONTEND_S_PER_STEP,
                frontend_s_per_sequence: float = FRONTEND_S_PER_SEQUENCE) -> _StepModel:
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
        frontend0=frontend_s_per_step, frontend_seq=frontend_s_per_sequence, frontend_serial=not engine_multiprocess,
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
    link: TpLink | None = None, engine_multiprocess: bool = True,
) -> DecodeStep:
    """One decode step of ``batch`` sequences holding ``context_tokens`` tokens of KV in all (module docstring);
    ``link``: the tensor-parallel group's link when it spans nodes (``tp_link``); ``engine_multiprocess``:
    False when the engine core runs in the caller's process (the frontend's host work adds to the step)."""
    m = _step_model(spec=spec, matmul_params=matmul_params, rates=rates, tp=tp, weight_bytes=weight_bytes,
                    kv_bytes_per_token=kv_bytes_per_token, cuda_graphs=cuda_graphs,
                    engine_s_per_step=engine_s_per_step, tp_all_reduce_latency_s=tp_all_reduce_latency_s,
                    link=link, engine_multiprocess=engine_multiprocess)
    bw, fl, cm, ln = m.parts(batch, context_tokens)
    return DecodeStep(bandwidth_s=bw, compute_s=fl, comm_s=cm, launch_s=ln, engine_s=m.engine,
                      frontend_s=m.frontend(batch), total_s=m.seconds(batch, context_tokens))


def _bound(m: _StepModel, b: float, t: float) -> int:
    bw, fl, _, ln = m.parts(b, t)
    host = ln + m.engine + m.frontend(b) if m.frontend_serial else max(ln + m.engine, m.frontend(b))
    return 0 if bw >= fl and bw >= host else 1 if fl >= host else 2


_BOUNDS = ("bandwidth", "compute", "launch")
