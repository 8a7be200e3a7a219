"""Rollout time in a vLLM-style engine: prefill, continuous-batching decode with its long tail, preemption.

One engine (``tp`` GPUs) serves its share of ``prompts × samples_per_prompt`` sequences; ``engines``
run side by side and the phase ends with the slowest. Every rate comes from ``DeviceRates``.

Prefill is compute-bound: ``tokens · (2·N + causal attention) / (matmul_flops_per_s · tp)`` plus two
tensor-parallel all-reduces per layer per forward pass of ``PREFILL_TOKENS_PER_PASS`` tokens. It is
added to the decode time (vLLM's chunked prefill can hide some of it in bandwidth-bound decode
steps, so the sum is an upper bound).

One decode step over ``B`` running sequences holding ``T`` context tokens (Pope et al. 2022,
"Efficiently Scaling Transformer Inference", §2; Kwon et al. 2023, PagedAttention, §2.2)::

    bandwidth = (weight_bytes/tp + T·kv_bytes_per_token/tp + B·kv_bytes_per_token/tp) / hbm_bytes_per_s
    compute   = (B·2·N + T·4·q_dim·full_attention_layers) / (matmul_flops_per_s · tp)
    comm      = 2·layers · (latency + 2(tp−1)/tp · B·hidden·2 bytes / bus)          (0 when tp = 1)
    launch    = eager: layers·(DECODE_KERNELS_PER_LAYER + 2 if tp>1)·host_s_per_forward_kernel
                CUDA graphs: one launch, host_s_per_forward_kernel
    step      = max(max(bandwidth, compute) + comm, launch) + engine_s_per_step

``ENGINE_S_PER_STEP`` is what the engine spends per step outside the GPU's kernels (scheduler,
input preparation, sampling, output processing): the residual of a published batch-1 TPOT once
the weight read is taken out (H100 SXM, Llama-3.1-8B bf16, vLLM 0.21, concurrency 1: TPOT p50
6.48 ms, InferenceBench concurrency-sweep recipe, https://yobitelcomm.github.io/bench/recipes/
concurrency-sweep/; the weight read at 90 % of 3.35 TB/s is 5.33 ms, the graph launch and KV
read ~0.03 ms: 1.1 ms, rounded down to 1 ms). ``tests/compute/test_generation.py`` checks it on an
independent A100 point.

Continuous batching (Yu et al. 2022, Orca; vLLM's scheduler): an engine runs up to ``max_num_seqs``
sequences and admits a waiting one as soon as a slot and KV blocks for its prompt are free; every
request of the RL batch arrives at once, in an order unrelated to its length. The phase ends
when the LONGEST sequence ends, so its last steps run at a tiny batch and pay the whole weight
read each (``tail_s``: the time after the running batch falls below half its peak).

How it is computed (fast, < 5 ms): response lengths are represented by ``quantiles`` groups (the
conditional mean length of each probability bin; the top bin is split down to one sequence, so the
longest of ``S`` sequences is modelled) and the engine is advanced in chunks of
``max(response_len_max / 40, min(32, mean / 4))`` decode steps as a fluid: the sequences admitted
in a chunk are a proportional mix of the groups (random order), a group's members finish
``length`` steps after admission, freed slots are refilled in the same chunk. Below one running
sequence the fluid count ``b`` is the chance that the last straggler still runs: a step costs
``b`` times a one-sequence step (which reads the weights whole). Once a stretch of chunks repeats
the ones before it (a whole period for fixed lengths), it is repeated without recomputation until
the queue is nearly empty. ``tests/compute/test_generation.py`` holds the result against a
step-by-step simulation of individual sequences: within 1 % for one wave and for fixed lengths,
within 3 % of the mean over shuffled orders when slots are refilled, with or without preemption.

KV capacity (``kv_capacity_tokens`` per engine): admission needs room for the prompt (a shared
prompt's blocks count once with ``prefix_sharing``); when the running sequences' growth exceeds the
capacity, the most recently admitted are preempted (vLLM V1 recomputes): they go back to the front
of the queue and, when readmitted, bring their context (prompt + generated tokens) back, prefilled
again (``preemption_recompute_s``). A sequence preempted after ``a`` tokens still owes
``E[L − a | L > a]`` tokens and is re-queued as that many tokens' worth of fresh sequences, so the
decode work stays that of the batch. Repeated preempt/readmit cycles of the same sequence (vLLM
re-admits into the first free blocks) are charged once: their recompute mostly hits the prefix cache.

Response lengths (``ResponseShape``): ``exponential`` (truncated at ``response_len_max``) is the
default when a mean is given. RL response lengths are right-skewed, with a clipped tail: many
responses are short, a few run long, and the ones that would run past the limit are cut at it
(verl logs ``response_length/clip_ratio``, the share cut at the maximum; DAPO, Yu et al. 2025, §3.4,
discusses these truncated samples). A truncated exponential has exactly that shape: its mass at the
maximum is ``exp(−(max−1)/θ)``, with ``θ`` solved so the mean is ``response_len_mean`` (a response
has at least one token: ``1 + min(Exp(θ), max − 1)``). ``uniform`` is uniform on
``[2·mean − max, max]`` (mean >= (max+1)/2); ``fixed`` gives every response ``response_len_mean``
tokens (``response_len_max`` when no mean is given, the default then).

Sleep mode (``sleep_wake_seconds``) follows vLLM ``docs/features/sleep_mode.md``
(vllm-project/vllm, commit 01181ddf28bd580c33348055f9cd45ddfe9cdcec): level 1 offloads the weights to
CPU memory and discards the KV cache; level 2 discards both ("good for ... RLHF weight update").

Pure Python: no torch import.
"""

from __future__ import annotations

from functools import lru_cache

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from math import ceil, exp, expm1, log
from operator import mul

from trainfit.compute import collectives
from trainfit.compute.rates import DeviceRates
from trainfit.errors import CardError
from trainfit.spec.enums import ResponseShape
from trainfit.spec.model import ModelSpec

ENGINE_S_PER_STEP = 1.0e-3
"""Engine seconds per decode step outside the kernels (module docstring: fitted on one published TPOT)."""
DECODE_KERNELS_PER_LAYER = 10
"""Kernels one eager decoder layer launches: input norm, QKV GEMM, rotary, KV-cache write, attention,
O GEMM, fused add+norm, gate/up GEMM, SiLU-and-mul, down GEMM (vLLM's Llama/Qwen layers)."""
PREFILL_TOKENS_PER_PASS = 8192
"""Tokens per prefill forward pass: vLLM's ``max_num_batched_tokens`` default for the LLM class."""
ACTIVATION_BYTES = 2
"""bf16 hidden states in the tensor-parallel all-reduces."""
DEFAULT_QUANTILES = 64
MIN_CHUNK_TOKENS = 32
MAX_CHUNKS_PER_LENGTH = 40
MIN_CHUNKS_PER_MEAN = 4
"""Chunk = max(response_len_max / 40, min(32, mean / 4)) decode steps: at most 40 chunks per longest
length (the cost), at least 4 per mean length unless that would mean more than 40 per longest."""
JUMP_TOLERANCE = 0.02
"""A stretch of chunks is jumped over once it repeats the ones before within 2 % (time and tokens)."""
JUMP_FORCE_PERIODS = 3
"""After this many longest lengths a still-oscillating batch is jumped over by whole periods."""
KV_REMAP_S_PER_BYTE = 3e-3 / 1e9
"""Wake-up: re-creating and mapping discarded memory (vLLM's CuMemAllocator, cuMemCreate + cuMemMap),
3 ms per GB. Fitted on vLLM's sleep-mode blog (blog.vllm.ai 2025-10-26, A100, vLLM 0.11): level-1
wake of Qwen3-0.6B 0.26 s, of which the weight copy over PCIe is 0.05 s and the rest re-maps ~68 GB
of KV cache (gpu_memory_utilization 0.9 of 80 GB); the same constant gives Phi-3-vision 0.51 s
against the published 0.82 s."""

_EPS = 1e-9
_NONE = (0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True, slots=True)
class GenerationTime:
    """One rollout phase. ``decode_s`` includes ``tail_s``; ``prefill_s`` and ``decode_s`` include their
    share of ``tp_comm_s``; ``total_s = prefill_s + decode_s + preemption_recompute_s``."""

    prefill_s: float
    decode_s: float
    tail_s: float
    """Decode time after the running batch fell below half its peak (the long tail)."""
    tp_comm_s: float
    preemption_recompute_s: float
    total_s: float
    generated_tokens: int
    """All engines together: sequences × the mean length used."""
    response_len_mean_used: float
    response_len_max_used: float
    """Length of the longest modelled sequence (the top bin of ``S`` sequences)."""
    peak_concurrency: float
    """Most sequences one engine ran at once."""
    preempted_sequences: float
    """Per engine."""
    bound: str
    """What paced most of the decode time: 'bandwidth', 'compute' or 'launch' (host)."""
    assumptions: tuple[str, ...]


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
class SleepWakeTime:
    """vLLM sleep mode around a training phase, per GPU (all GPUs do theirs in parallel)."""

    sleep_s: float
    wake_s: float
    total_s: float
    assumptions: tuple[str, ...]


# ------------------------------------------------------------------------------------------------
# response lengths
# ------------------------------------------------------------------------------------------------


def response_length_groups(
    *, shape: ResponseShape | str | None, response_len_max: float, response_len_mean: float | None,
    sequences: int, quantiles: int = DEFAULT_QUANTILES,
) -> tuple[tuple[float, float], ...]:
    """``(length, share)`` groups standing for ``sequences`` draws, shares summing to 1.

    Bins of equal probability, the top one split into 1, 1, 2, 4, ... sequences (from the top) so
    the longest of ``sequences`` is its own group; each group's length is the conditional mean of
    its bin, so the shares average exactly to the distribution's mean.
    """
    kind, mean, theta = _shape(shape, response_len_max, response_len_mean)
    if kind is ResponseShape.FIXED:
        return ((mean, 1.0),)
    edges = _bin_edges(sequences, quantiles)
    groups = []
    top = response_len_max - 1  # lengths are 1 (the first token) + a draw on [0, max − 1]
    for p0, p1 in zip(edges, edges[1:]):
        if kind is ResponseShape.UNIFORM:
            lo = 2 * mean - response_len_max
            length = lo + (response_len_max - lo) * (p0 + p1) / 2
        else:
            length = 1 + (_exp_integral(p1, theta, top) - _exp_integral(p0, theta, top)) / (p1 - p0)
        groups.append((min(length, response_len_max), p1 - p0))
    return tuple(groups)


def _shape(shape, response_len_max, response_len_mean) -> tuple[ResponseShape, float, float]:
    if response_len_max < 1:
        raise CardError(f"response_len_max: must be >= 1, got {response_len_max}")
    if response_len_mean is not None and not 1 <= response_len_mean <= response_len_max:
        raise CardError(f"response_len_mean: must be within [1, response_len_max={response_len_max}], "
                        f"got {response_len_mean}")
    if shape == "exponential-truncated":
        shape = ResponseShape.EXPONENTIAL
    try:
        kind = ResponseShape(shape) if shape is not None else (
            ResponseShape.FIXED if response_len_mean is None else ResponseShape.EXPONENTIAL)
    except ValueError:
        raise CardError(f"response length shape: one of exponential-truncated, uniform, fixed; "
                        f"got {shape!r}") from None
    if kind is ResponseShape.FIXED:
        return kind, float(response_len_mean or response_len_max), 0.0
    mean = (response_len_max + 1) / 2 if response_len_mean is None else float(response_len_mean)
    if kind is ResponseShape.UNIFORM:
        if mean < (response_len_max + 1) / 2:
            raise CardError(f"uniform response lengths up to {response_len_max} cannot have mean {mean} < (max+1)/2; "
                            "use exponential-truncated")
        return kind, mean, 0.0
    if mean >= response_len_max - 1e-6 * response_len_max or mean <= 1 + 1e-9:
        return ResponseShape.FIXED, mean, 0.0
    return kind, mean, _solve_theta(mean - 1, response_len_max - 1)


def _solve_theta(mean: float, cap: float) -> float:
    """θ with θ·(1 − exp(−cap/θ)) = mean (increasing in θ), by bisection on log θ."""
    lo, hi = log(mean), log(mean) + 40.0
    for _ in range(80):
        mid = (lo + hi) / 2
        t = exp(mid)
        if t * -expm1(-cap / t) < mean:
            lo = mid
        else:
            hi = mid
    return exp((lo + hi) / 2)


def _exp_integral(p: float, theta: float, cap: float) -> float:
    """∫₀ᵖ min(−θ·ln(1−q), cap) dq."""
    p_cap = -expm1(-cap / theta)
    q = min(p, p_cap)
    below = theta * (q + (1 - q) * log(1 - q)) if q < 1 else theta * q
    return below + cap * max(0.0, p - p_cap)


def _bin_edges(sequences: int, quantiles: int) -> list[float]:
    if sequences <= quantiles:
        return [i / sequences for i in range(sequences + 1)]
    edges = [i / quantiles for i in range(quantiles)]
    top = []  # ranks from the top: 1, 2, 4, ... sequences, stopping at one bin
    k = 1
    while k < sequences / quantiles:
        top.append(1 - k / sequences)
        k *= 2
    return edges + sorted(top) + [1.0]


# ------------------------------------------------------------------------------------------------
# one decode step
# ------------------------------------------------------------------------------------------------


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

    def parts(self, b: float, t: float) -> tuple[float, float, float, float]:
        return (self.bw0 + self.bw_ctx * t + self.bw_seq * b, self.fl_seq * b + self.fl_ctx * t,
                self.comm0 + self.comm_seq * b, self.launch)

    def seconds(self, b: float, t: float) -> float:
        bw, fl, cm, ln = self.parts(b, t)
        return max((bw if bw > fl else fl) + cm, ln) + self.engine


def _step_model(*, spec, matmul_params, rates, tp, weight_bytes, kv_bytes_per_token, cuda_graphs,
                engine_s_per_step, tp_all_reduce_latency_s) -> _StepModel:
    hbm = rates.hbm_bytes_per_s
    flops = rates.matmul_flops_per_s * tp
    n_ar = 2 * spec.num_layers if tp > 1 else 0
    lat = rates.collective_latency_s if tp_all_reduce_latency_s is None else tp_all_reduce_latency_s
    ring = collectives.all_reduce_seconds(total_bytes=1.0, ranks=tp, bus_bytes_per_s=rates.intra_node_bus_bytes_per_s,
                                          latency_s=lat) if tp > 1 else 0.0
    per_byte = 2 * (tp - 1) / tp / rates.intra_node_bus_bytes_per_s if tp > 1 else 0.0
    kernels = spec.num_layers * (DECODE_KERNELS_PER_LAYER + (2 if tp > 1 else 0))
    return _StepModel(
        bw0=weight_bytes / tp / hbm, bw_ctx=kv_bytes_per_token / tp / hbm, bw_seq=kv_bytes_per_token / tp / hbm,
        fl_seq=2 * matmul_params / flops, fl_ctx=4.0 * spec.q_dim * spec.num_full_attention_layers / flops,
        comm0=n_ar * (ring - per_byte), comm_seq=n_ar * per_byte * spec.hidden_size * ACTIVATION_BYTES,
        launch=rates.host_s_per_forward_kernel * (1 if cuda_graphs else kernels), engine=engine_s_per_step,
    )


def decode_step_seconds(
    *, spec: ModelSpec, matmul_params: float, rates: DeviceRates, tp: int, batch: float, context_tokens: float,
    weight_bytes: float, kv_bytes_per_token: float, cuda_graphs: bool = True,
    engine_s_per_step: float = ENGINE_S_PER_STEP, tp_all_reduce_latency_s: float | None = None,
) -> DecodeStep:
    """One decode step of ``batch`` sequences holding ``context_tokens`` tokens of KV in all (module docstring)."""
    m = _step_model(spec=spec, matmul_params=matmul_params, rates=rates, tp=tp, weight_bytes=weight_bytes,
                    kv_bytes_per_token=kv_bytes_per_token, cuda_graphs=cuda_graphs,
                    engine_s_per_step=engine_s_per_step, tp_all_reduce_latency_s=tp_all_reduce_latency_s)
    bw, fl, cm, ln = m.parts(batch, context_tokens)
    return DecodeStep(bandwidth_s=bw, compute_s=fl, comm_s=cm, launch_s=ln, engine_s=m.engine,
                      total_s=m.seconds(batch, context_tokens))


def _bound(m: _StepModel, b: float, t: float) -> int:
    bw, fl, _, ln = m.parts(b, t)
    host = ln + m.engine
    return 0 if bw >= fl and bw >= host else 1 if fl >= host else 2


_BOUNDS = ("bandwidth", "compute", "launch")


# ------------------------------------------------------------------------------------------------
# the decode phase: a fluid over chunks of steps
# ------------------------------------------------------------------------------------------------


class _Kernels:
    """Per lag (chunks after the admission chunk), for each group mix: the share of the admitted
    that finish, their summed length, and (mid-chunk finishers) the share of the chunk they no
    longer run. ``pt``: admitted at a chunk's start, so a member finishes at its exact offset
    (``pt0``: exactly on a chunk boundary, i.e. before the chunk starts); ``sp``: admitted evenly
    over the chunk, so a member of length ``(lag + f)·chunk`` finishes in chunk ``lag`` (share 1−f,
    mean offset (1+f)/2) or ``lag+1`` (share f, mean offset f/2)."""

    NAMES = ("pt0", "pt0_len", "ptm", "ptm_len", "ptm_loss", "sp", "sp_len", "sp_loss")

    def __init__(self, groups, chunk: float):
        self.size = 2 + max(int(length / chunk + _EPS) for length, _ in groups)
        for name in self.NAMES:
            setattr(self, name, [0.0] * self.size)
        for length, share in groups:
            q = length / chunk
            lag = int(q + _EPS)
            f = max(0.0, q - lag)
            if f < 1e-6:
                self.pt0[lag] += share
                self.pt0_len[lag] += share * length
            else:
                self.ptm[lag] += share
                self.ptm_len[lag] += share * length
                self.ptm_loss[lag] += share * (1 - f)
            for lg, part, loss in ((lag, 1 - f, (1 - f) / 2), (lag + 1, f, 1 - f / 2)):
                if part > 0:
                    self.sp[lg] += share * part
                    self.sp_len[lg] += share * part * length
                    self.sp_loss[lg] += share * part * loss
        for name in self.NAMES:  # lags size-1 .. 1, aligned with the last size-1 history entries
            setattr(self, name + "_rev", getattr(self, name)[:0:-1])
        self.pt_kernels = (self.pt0_rev, self.pt0_len_rev, self.ptm_rev, self.ptm_len_rev, self.ptm_loss_rev)
        self.sp_kernels = (self.sp_rev, self.sp_len_rev, self.sp_loss_rev)
        self.x_pt_kernels = (self.pt0_rev, self.ptm_rev)
        self.x_sp_kernels = (self.sp_rev,)
        self.cum_pt = _cumsum([a + b for a, b in zip(self.pt0, self.ptm)])
        self.cum_sp = _cumsum(self.sp)


def _conv(kernels, window: list[float]) -> list[float]:
    """Each kernel dotted with the admissions window; only the nonzero entries when they are few
    (point admissions and carried context are sparse)."""
    zeros = window.count(0.0)
    if zeros == len(window):
        return [0.0] * len(kernels)
    if 3 * zeros > 2 * len(window):
        nz = [(i, v) for i, v in enumerate(window) if v]
        return [sum(kern[i] * v for i, v in nz) for kern in kernels]
    return [sum(map(mul, kern, window)) for kern in kernels]


def _cumsum(xs: list[float]) -> list[float]:
    out, acc = [], 0.0
    for x in xs:
        acc += x
        out.append(acc)
    return out


@dataclass(slots=True)
class _Decode:
    """What one engine's decode phase adds up to (seconds, by bound; preemptions; diagnostics)."""

    seconds: float = 0.0
    tail_s: float = 0.0
    comm_s: float = 0.0
    peak: float = 0.0
    preempted: float = 0.0
    recompute_ctx: float = 0.0
    recompute_ctx2: float = 0.0
    bandwidth_s: float = 0.0
    compute_s: float = 0.0
    launch_s: float = 0.0
    chunks: int = 0
    tokens: float = 0.0

    def charge(self, step: _StepModel, steps: float, b: float, t: float) -> tuple[float, float, int]:
        """Add ``steps`` steps at ``b`` sequences and ``t`` context tokens; returns (seconds, of which
        all-reduce, bound). Below one sequence the fluid count is the chance that the last one is
        still running; a step that runs reads the weights whole."""
        p_any = 1.0
        if 0 < b < 1:
            p_any, t, b = b, t / b, 1.0
        sec = steps * p_any * step.seconds(b, t)
        comm = steps * p_any * (step.comm0 + step.comm_seq * b)
        kind = _bound(step, b, t)
        self.add(sec, comm, kind)
        return sec, comm, kind

    def add(self, sec: float, comm: float, kind: int) -> None:
        self.seconds += sec
        self.comm_s += comm
        if kind == 0:
            self.bandwidth_s += sec
        elif kind == 1:
            self.compute_s += sec
        else:
            self.launch_s += sec


class _Engine:
    """The fluid state of one engine between chunks: the waiting queue, the running sequences and
    their context tokens, and the admissions of the last chunks (``pt`` at a chunk's start, ``sp``
    spread over it) with the extra context (``x*``: generated tokens) that readmitted preempted
    sequences carry back in."""

    def __init__(self, *, groups, sequences, slots, prompt_len, kv_prompt, kv_capacity, chunk):
        self.k = _Kernels(groups, chunk)
        self.groups, self.slots, self.prompt, self.kv_prompt, self.chunk = groups, slots, prompt_len, kv_prompt, chunk
        self.mean = sum(length * share for length, share in groups)
        self.remaining = _Remaining(groups)
        self.cap = float("inf") if kv_capacity is None else kv_capacity
        self.shared = prompt_len - kv_prompt  # prompt tokens read by every sequence, stored once
        self.queue, self.active, self.ctx = float(sequences), 0.0, 0.0
        self.resume = self.queue_extra = 0.0  # preempted, waiting at the queue's front, and their context
        pad = [0.0] * (self.k.size - 1)
        self.pt, self.sp, self.xpt, self.xsp = pad[:], pad[:], pad[:], pad[:]

    def kv_used(self) -> float:
        return self.ctx - self.shared * self.active

    def _take(self, n: float) -> float:
        """Take ``n`` from the queue, preempted ones first (vLLM puts them at its front); returns the
        extra context (generated tokens) they bring."""
        r = min(n, self.resume)
        extra = self.queue_extra * r / self.resume if self.resume > _EPS else 0.0
        self.queue -= n
        self.resume -= r
        self.queue_extra -= extra
        return extra

    def advance(self) -> tuple[float, float, float, float]:
        """One chunk: returns (tokens generated, running after point admissions, mean context over the
        chunk, sequences admitted)."""
        k, size = self.k, self.k.size
        fin0, fin0_len, pt_m, pt_m_len, pt_loss = _conv(k.pt_kernels, self.pt[1 - size:])
        sp_m, sp_m_len, sp_loss = _conv(k.sp_kernels, self.sp[1 - size:])
        x0, x_m = _conv(k.x_pt_kernels, self.xpt[1 - size:])
        (x_sp_m,) = _conv(k.x_sp_kernels, self.xsp[1 - size:])
        self.active = max(0.0, self.active - fin0)  # finishers on the boundary leave before the chunk starts
        self.ctx -= self.prompt * fin0 + fin0_len + x0
        room = (self.cap - self.kv_used()) / self.kv_prompt
        a_pt = max(0.0, min(self.queue, self.slots - self.active, room))
        x_pt = self._take(a_pt)
        self.active += a_pt
        self.ctx += self.prompt * a_pt + x_pt
        running = self.active
        finm = pt_m + sp_m + k.ptm[0] * a_pt
        finm_len = pt_m_len + sp_m_len + k.ptm_len[0] * a_pt
        finm_x = x_m + x_sp_m + k.ptm[0] * x_pt
        loss = pt_loss + sp_loss + k.ptm_loss[0] * a_pt
        room += (self.kv_prompt * finm + finm_len) / self.kv_prompt - a_pt
        want = finm / (1 - k.sp[0]) if k.sp[0] < 1 else self.queue  # in-chunk finishers are refilled too
        a_sp = max(0.0, min(self.queue, want, room))
        x_sp = self._take(a_sp)
        fin = finm + k.sp[0] * a_sp
        unreplaced = max(0.0, fin - a_sp)
        mean_loss = (loss + k.sp_loss[0] * a_sp) / fin if fin > _EPS else 0.0
        tokens = self.chunk * max(0.0, self.active - unreplaced * mean_loss)
        leaving = self.prompt * fin + finm_len + k.sp_len[0] * a_sp + finm_x + k.sp[0] * x_sp  # context at finish
        arriving = self.prompt * a_sp + x_sp
        # mean over the chunk: half the growth; finishers gone and arrivals present for mean_loss of it
        ctx_mean = self.ctx + tokens / 2 + mean_loss * (arriving - leaving)
        self.ctx += tokens + arriving - leaving
        self.active = max(0.0, self.active - unreplaced)
        for hist, x in ((self.pt, a_pt), (self.sp, a_sp), (self.xpt, x_pt), (self.xsp, x_sp)):
            hist.append(x)
        if len(self.pt) > 4 * size:
            for hist in (self.pt, self.sp, self.xpt, self.xsp):
                del hist[:-size]
        return tokens, running, ctx_mean, a_pt + a_sp

    def preempt(self) -> tuple[float, float, float, float]:
        """Free the KV beyond the capacity by preempting the most recently admitted (vLLM's recompute
        policy). Returns (sequences, Σ context, Σ context², fresh-sequence equivalents re-queued): a
        sequence preempted after ``a`` generated tokens still owes ``E[L − a | L > a]``."""
        over = self.kv_used() - self.cap
        n_all = ctx_all = ctx2_all = back = 0.0
        age_chunks = 0
        while over > 1e-6 and age_chunks < len(self.pt):
            for hist, xhist, cum, age in ((self.sp, self.xsp, self.k.cum_sp, (age_chunks + 0.5) * self.chunk),
                                          (self.pt, self.xpt, self.k.cum_pt, (age_chunks + 1) * self.chunk)):
                left = 1 - cum[age_chunks] if age_chunks < len(cum) else 0.0
                idx = len(hist) - 1 - age_chunks
                if hist[idx] * left <= _EPS or over <= 1e-6:
                    continue
                extra = xhist[idx] / hist[idx]
                held = self.kv_prompt + age + extra
                n = min(hist[idx] * left, over / held)
                hist[idx] -= n / left
                xhist[idx] -= n / left * extra
                over -= n * held
                ctx = self.prompt + age + extra
                self.active -= n
                self.ctx -= n * ctx
                self.queue_extra += n * (age + extra)
                n_all, ctx_all, ctx2_all = n_all + n, ctx_all + n * ctx, ctx2_all + n * ctx * ctx
                back += n * self.remaining(age + extra) / self.mean
            age_chunks += 1
        self.queue += back
        self.resume += back
        return n_all, ctx_all, ctx2_all, back


def _simulate_decode(*, groups, sequences: int, slots: int, prompt_len: float, kv_prompt: float,
                     kv_capacity: float | None, chunk: float, step: _StepModel) -> _Decode:
    """Decode of ``sequences`` on one engine of ``slots`` (max_num_seqs) sequences (module docstring)."""
    eng = _Engine(groups=groups, sequences=sequences, slots=slots, prompt_len=prompt_len, kv_prompt=kv_prompt,
                  kv_capacity=kv_capacity, chunk=chunk)
    l_top = max(length for length, _ in groups)
    out = _Decode()
    end, tail_from, c = l_top, None, 0
    period = max(1, int(l_top / chunk + _EPS))
    span = period if len(groups) == 1 else max(1, period // 4)  # fixed lengths: one whole period
    window = deque(maxlen=span + max(span, period))
    while eng.queue > _EPS or c * chunk < end - 1e-6:
        out.chunks += 1
        tokens, running, ctx_mean, admitted = eng.advance()
        if admitted > _EPS:  # the last of them may be the longest; spread ones come in up to the chunk's end
            end = max(end, (c + (1 if eng.pt[-1] < admitted else 0)) * chunk + l_top)
        pre = eng.preempt() if eng.kv_used() > eng.cap + 1e-6 else _NONE
        out.preempted += pre[0]
        out.recompute_ctx += pre[1]
        out.recompute_ctx2 += pre[2]
        out.tokens += tokens
        steps = min(chunk, end - c * chunk)
        sec, comm, kind = out.charge(step, steps, tokens / steps, max(0.0, ctx_mean) * chunk / steps)
        out.peak = max(out.peak, running)
        if tail_from is None and eng.queue <= _EPS and eng.active < out.peak / 2:
            tail_from = out.seconds - sec * (1 - _share_above(running, eng.active, out.peak / 2))
        c += 1
        window.append((sec, comm, kind, tokens) + pre)
        if eng.queue > _EPS and c >= eng.k.size + window.maxlen and len(window) == window.maxlen:
            n = _jump(out, eng, window, span, period, force=c >= eng.k.size + JUMP_FORCE_PERIODS * period)
            c += n
            end += n * chunk
    out.tail_s = 0.0 if tail_from is None else max(0.0, out.seconds - tail_from)
    return out


def _stream_decode(*, groups, sequences: int, slots: int, prompt_len: float, kv_prompt: float,
                   kv_capacity: float | None, step: _StepModel) -> _Decode:
    """Decode of ``sequences`` in a stream that never drains (fully asynchronous rollout).

    In steady state the engine runs ``B`` sequences whose ages are length-biased: a running
    sequence has generated ``E[L²] / (2·E[L])`` tokens on average (renewal theory: a slot holds a
    sequence of length ``L`` for ``L`` steps). ``B = min(max_num_seqs, KV capacity / (prompt KV +
    that age))``; each step makes ``B`` tokens over ``B·(prompt + age)`` context tokens, so the
    step's ``sequences·E[L]`` tokens take ``sequences·E[L] / B`` steps.
    """
    mean = sum(length * share for length, share in groups)
    age = sum(length * length * share for length, share in groups) / (2 * mean)
    b = float(slots)
    if kv_capacity is not None:
        b = max(1.0, min(b, kv_capacity / (kv_prompt + age)))
    t = b * (prompt_len + age)
    out = _Decode(peak=b)
    out.charge(step, sequences * mean / b, b, t)
    out.tokens = sequences * mean
    return out


class _Remaining:
    """``E[L − a | L > a]``: the mean tokens still owed by a sequence that has generated ``a``."""

    def __init__(self, groups):
        pairs = sorted(groups)
        self.lengths = [length for length, _ in pairs]
        self.share, self.weighted = [0.0] * (len(pairs) + 1), [0.0] * (len(pairs) + 1)
        for i in range(len(pairs) - 1, -1, -1):  # suffix sums
            self.share[i] = self.share[i + 1] + pairs[i][1]
            self.weighted[i] = self.weighted[i + 1] + pairs[i][0] * pairs[i][1]

    def __call__(self, age: float) -> float:
        i = bisect_right(self.lengths, age)
        return self.weighted[i] / self.share[i] - age if self.share[i] > 0 else 0.0


def _jump(out: _Decode, eng: _Engine, window, span: int, period: int, force: bool = False) -> int:
    """When the last ``span`` chunks repeat both the ``span`` before them and the ``span`` one longest
    length earlier (time and tokens within ``JUMP_TOLERANCE``: a whole period when lengths are fixed,
    a settled batch otherwise), repeat them while more than three times their work waits: a window
    generates ``tokens``, i.e. ``tokens / mean`` sequences leave the queue. ``force`` (a slowly damped
    wave, e.g. most responses cut at the maximum): repeat the last whole period. Returns the chunks
    skipped."""
    w = list(window)
    if force:
        span = min(period, len(w))
    recent, before, earlier = w[-span:], w[-2 * span:-span], w[:span]
    tokens, sec = sum(x[3] for x in recent), sum(x[0] for x in recent)
    for other in (() if force else (before, earlier)):
        if tokens <= _EPS or abs(tokens - sum(x[3] for x in other)) > JUMP_TOLERANCE * tokens \
                or abs(sec - sum(x[0] for x in other)) > JUMP_TOLERANCE * sec:
            return 0
    if tokens <= _EPS:
        return 0
    net = tokens / eng.mean
    m = int(eng.queue / net) - 1
    if m < 2:
        return 0
    for sec, comm, kind, _, n, ctx, ctx2, _back in recent:
        out.add(m * sec, m * comm, kind)
        out.preempted += m * n
        out.recompute_ctx += m * ctx
        out.recompute_ctx2 += m * ctx2
    eng.queue -= m * net
    window.clear()
    return m * span


def _share_above(b0: float, b1: float, level: float) -> float:
    """Share of a chunk, with the batch falling linearly from ``b0`` to ``b1``, spent at or above ``level``."""
    if b0 < level:
        return 0.0
    return min(1.0, (b0 - level) / (b0 - b1)) if b0 > b1 else 1.0


# ------------------------------------------------------------------------------------------------
# prefill and the whole phase
# ------------------------------------------------------------------------------------------------


def prefill_seconds(*, spec: ModelSpec, matmul_params: float, rates: DeviceRates, tp: int, sequences: float,
                    context_tokens: float, context_tokens_sq: float | None = None,
                    tp_all_reduce_latency_s: float | None = None) -> tuple[float, float]:
    """(seconds, of which tensor-parallel all-reduce) to prefill ``sequences`` prompts holding
    ``context_tokens`` tokens in all; causal attention costs ``2·c²·q_dim`` per layer for a context
    of ``c`` (``context_tokens_sq`` = Σ c², default every sequence the same length)."""
    if sequences <= 0 or context_tokens <= 0:
        return 0.0, 0.0
    sq = context_tokens ** 2 / sequences if context_tokens_sq is None else context_tokens_sq
    flops = 2 * matmul_params * context_tokens + 2.0 * spec.q_dim * spec.num_full_attention_layers * sq
    compute = flops / (rates.matmul_flops_per_s * tp)
    if tp == 1:
        return compute, 0.0
    passes = ceil(context_tokens / PREFILL_TOKENS_PER_PASS)
    lat = rates.collective_latency_s if tp_all_reduce_latency_s is None else tp_all_reduce_latency_s
    per_pass = collectives.all_reduce_seconds(
        total_bytes=context_tokens / passes * spec.hidden_size * ACTIVATION_BYTES, ranks=tp,
        bus_bytes_per_s=rates.intra_node_bus_bytes_per_s, latency_s=lat)
    comm = 2 * spec.num_layers * passes * per_pass
    return compute + comm, comm


@lru_cache(maxsize=4096)
def generation_time(
    *,
    spec: ModelSpec,
    matmul_params: float,
    rates: DeviceRates,
    tp: int,
    prompts: int,
    samples_per_prompt: int,
    prompt_len: int,
    response_len_max: int,
    weight_bytes: float,
    kv_bytes_per_token: float,
    max_num_seqs: int,
    engines: int = 1,
    response_len_mean: float | None = None,
    response_len_shape: ResponseShape | str | None = None,
    kv_capacity_tokens: float | None = None,
    cuda_graphs: bool = True,
    prefix_sharing: bool = True,
    quantiles: int = DEFAULT_QUANTILES,
    chunk_tokens: float | None = None,
    engine_s_per_step: float = ENGINE_S_PER_STEP,
    tp_all_reduce_latency_s: float | None = None,
    streaming: bool = False,
) -> GenerationTime:
    """Seconds of one rollout phase (module docstring).

    ``matmul_params``: ``trainfit.compute.flops.matmul_params(spec)`` (active experts only).
    ``weight_bytes``: the whole model as the engine holds it (split over ``tp``).
    ``kv_bytes_per_token``: KV of one token over all layers, whole model (split over ``tp``).
    ``kv_capacity_tokens``: KV tokens one engine holds (None: unlimited, no preemption).
    ``prefix_sharing``: the samples of a prompt share its prefill and its KV blocks (vLLM prefix
    caching); attention still reads the prompt once per sequence.
    ``streaming``: a fully asynchronous rollout (``_stream_decode``): the engine is kept full from
    later steps' prompts, so the step's tokens are generated at the steady-state rate, with no long tail.
    Raises ``CardError`` on a non-positive count or a sequence longer than the KV capacity.
    """
    if min(tp, engines, prompts, samples_per_prompt, prompt_len, max_num_seqs, quantiles) < 1:
        raise CardError("generation: tp, engines, prompts, samples_per_prompt, prompt_len, max_num_seqs, "
                        "quantiles must be >= 1")
    if weight_bytes <= 0 or kv_bytes_per_token < 0:
        raise CardError(f"generation: weight_bytes must be > 0 and kv_bytes_per_token >= 0, "
                        f"got {weight_bytes}, {kv_bytes_per_token}")
    seqs = ceil(prompts * samples_per_prompt / engines)
    groups = response_length_groups(shape=response_len_shape, response_len_max=response_len_max,
                                    response_len_mean=response_len_mean, sequences=seqs, quantiles=quantiles)
    mean = sum(length * share for length, share in groups)
    l_top = max(length for length, _ in groups)
    if kv_capacity_tokens is not None and prompt_len + l_top > kv_capacity_tokens:
        raise CardError(f"generation: one sequence needs {prompt_len + l_top:.0f} KV tokens, the engine holds "
                        f"{kv_capacity_tokens:.0f}; raise gpu_memory_utilization or tensor_parallel, or shorten it")
    base = chunk_tokens or max(response_len_max / MAX_CHUNKS_PER_LENGTH,
                               min(MIN_CHUNK_TOKENS, mean / MIN_CHUNKS_PER_MEAN))
    chunk = l_top / ceil(l_top / base) if len(groups) == 1 else float(base)
    kv_prompt = prompt_len / samples_per_prompt if prefix_sharing else float(prompt_len)
    step = _step_model(spec=spec, matmul_params=matmul_params, rates=rates, tp=tp, weight_bytes=weight_bytes,
                       kv_bytes_per_token=kv_bytes_per_token, cuda_graphs=cuda_graphs,
                       engine_s_per_step=engine_s_per_step, tp_all_reduce_latency_s=tp_all_reduce_latency_s)
    if streaming:
        dec = _stream_decode(groups=groups, sequences=seqs, slots=max_num_seqs, prompt_len=prompt_len,
                             kv_prompt=kv_prompt, kv_capacity=kv_capacity_tokens, step=step)
    else:
        dec = _simulate_decode(groups=groups, sequences=seqs, slots=max_num_seqs, prompt_len=prompt_len,
                               kv_prompt=kv_prompt, kv_capacity=kv_capacity_tokens, chunk=chunk, step=step)
    prefilled = ceil(seqs / samples_per_prompt) if prefix_sharing else seqs
    common = dict(spec=spec, matmul_params=matmul_params, rates=rates, tp=tp,
                  tp_all_reduce_latency_s=tp_all_reduce_latency_s)
    prefill, prefill_comm = prefill_seconds(sequences=prefilled, context_tokens=prefilled * prompt_len, **common)
    # a preempted sequence re-prefills at most its whole context (prompt + longest response): the fluid
    # bookkeeping of readmitted sequences can overstate the context it carries, so bound it here
    longest = prompt_len + l_top
    re_ctx = min(dec.recompute_ctx, dec.preempted * longest)
    re_ctx2 = min(dec.recompute_ctx2, dec.preempted * longest * longest, re_ctx * longest)
    recompute, recompute_comm = prefill_seconds(sequences=dec.preempted, context_tokens=re_ctx,
                                                context_tokens_sq=re_ctx2, **common)
    parts = (dec.bandwidth_s, dec.compute_s, dec.launch_s)
    notes = _assumptions(engines=engines, tp=tp, seqs=seqs, max_num_seqs=max_num_seqs, kv=kv_capacity_tokens,
                         kind=_shape(response_len_shape, response_len_max, response_len_mean)[0], mean=mean,
                         l_top=l_top, response_len_max=response_len_max, groups=len(groups), chunk=chunk,
                         engine_s=engine_s_per_step, cuda_graphs=cuda_graphs, prefix_sharing=prefix_sharing,
                         streaming=streaming, peak=dec.peak)
    return GenerationTime(
        prefill_s=prefill, decode_s=dec.seconds, tail_s=dec.tail_s,
        tp_comm_s=prefill_comm + dec.comm_s + recompute_comm,
        preemption_recompute_s=recompute, total_s=prefill + dec.seconds + recompute,
        generated_tokens=round(prompts * samples_per_prompt * mean), response_len_mean_used=mean,
        response_len_max_used=l_top, peak_concurrency=dec.peak, preempted_sequences=dec.preempted,
        bound=_BOUNDS[parts.index(max(parts))], assumptions=notes,
    )


def _assumptions(*, engines, tp, seqs, max_num_seqs, kv, kind, mean, l_top, response_len_max, groups, chunk,
                 engine_s, cuda_graphs, prefix_sharing, streaming=False, peak=0.0) -> tuple[str, ...]:
    order = (f"fully asynchronous: the engine streams, its slots refilled from later steps' prompts; the step's "
             f"tokens at the steady state of {peak:.0f} running sequences (max_num_seqs and KV capacity), no long "
             "tail (partial rollouts carry unfinished sequences over)") if streaming else (
        "random admission order as a fluid: the phase ends with the longest sequence; below one running "
        "sequence a step is weighted by the chance a straggler still runs")
    return (
        f"{engines} engine(s) of tp={tp}, {seqs} sequences each, up to {max_num_seqs} at once"
        + ("" if kv is None else f", {kv:.0f} KV tokens"),
        f"response lengths: {kind.value}, mean {mean:.0f}, longest {l_top:.0f} of max {response_len_max}; "
        f"{groups} length groups" + ("" if streaming else f", chunks of {chunk:.3g} steps"),
        order,
        f"decode step = max(max(weights+KV read, FLOPs) + TP all-reduce, launch) + {engine_s * 1e3:.1f} ms engine",
        "CUDA graphs: one launch per step" if cuda_graphs
        else f"eager: {DECODE_KERNELS_PER_LAYER} kernels per layer launched per step",
        "prefill added to decode (chunked prefill could hide part of it)"
        + ("; shared by the samples of a prompt" if prefix_sharing else ""),
        "preemption: recompute (prefill of prompt + generated tokens again), once per preempted sequence",
    )


def sleep_wake_seconds(*, level: int, weight_bytes_per_gpu: float, kv_cache_bytes_per_gpu: float,
                       rates: DeviceRates, remap_s_per_byte: float = KV_REMAP_S_PER_BYTE) -> SleepWakeTime:
    """vLLM sleep before a training phase and wake-up after it, per GPU.

    Level 1 (vLLM ``docs/features/sleep_mode.md``: "offload the model weights and discard the KV
    cache"): sleep copies the weights to pinned CPU memory over PCIe; wake copies them back and
    re-maps the released memory (weights + KV pool, ``remap_s_per_byte``). Level 2 ("discard both
    the model weights and the KV cache", the RLHF weight-update case): sleep only releases; wake
    re-maps the memory, and the weights' content arrives with the trainer's sync (``sync.py``), not
    here. The first level-1 sleep also pins the host buffer (not timed: once per run).
    """
    if level not in (0, 1, 2):
        raise CardError(f"sleep level: 0, 1 or 2, got {level}")
    if level == 0:
        return SleepWakeTime(sleep_s=0.0, wake_s=0.0, total_s=0.0, assumptions=("no sleep mode",))
    remap = (weight_bytes_per_gpu + kv_cache_bytes_per_gpu) * remap_s_per_byte
    copy = weight_bytes_per_gpu / rates.pcie_bytes_per_s if level == 1 else 0.0
    notes = (
        f"sleep level {level}: " + ("weights to CPU and back over PCIe" if level == 1
                                    else "weights discarded, reloaded by the weight sync"),
        f"wake re-maps weights + KV at {remap_s_per_byte * 1e12:.1f} ms per GB (vLLM sleep-mode blog, A100)",
    )
    return SleepWakeTime(sleep_s=copy, wake_s=copy + remap, total_s=2 * copy + remap, assumptions=notes)
