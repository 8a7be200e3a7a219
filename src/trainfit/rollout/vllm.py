"""vLLM (V1 engine) memory on one GPU: budget, weights, profiled peak, KV cache, CUDA graphs, sleep.

Every number is per GPU of one tensor-parallel engine, in bytes. The model follows vLLM's own
start-up sequence (``vllm/v1/worker/gpu_worker.py``):

1. ``init_device``: after NCCL is initialised, a ``MemorySnapshot`` is taken and
   ``requested_memory = total_memory * gpu_memory_utilization``; start-up fails when the free
   memory is below that ("Free memory on device ... is less than desired GPU memory
   utilization"). ``total_memory`` is ``cudaMemGetInfo``'s total (what torch reports as
   ``total_memory``, a few hundred MiB under nvidia-smi's figure). The CUDA context and NCCL
   communicators exist before the snapshot, so they sit *outside* the budget
   (:data:`CUDA_CONTEXT_BYTES`).
2. ``determine_available_memory``: ``profile_run`` executes one dummy forward of
   ``max_num_batched_tokens`` tokens and one dummy sampler step over
   ``min(max_num_seqs, max_num_batched_tokens)`` rows; ``memory_profiling``
   (``vllm/utils/mem_utils.py``) returns ``non_kv_cache_memory = weights + torch_peak_increase
   + non_torch_increase`` and the KV cache gets ``requested_memory - non_kv_cache_memory``.
   ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1`` is the default already in the 0.20.0 wheel
   (vllm/envs.py l.1724-1726; PR #30515 added it, off; the log line reads "CUDA graph memory
   profiling is enabled (default since v0.21.0)"), so the CUDA-graph estimate is also taken out
   of the budget. Before that,
   graphs were captured in ``compile_or_warm_up_model`` *after* the KV cache was allocated and
   lived outside the budget (issue #17549). :attr:`EngineConfig.cuda_graphs_in_budget` picks.
3. KV cache pages (``vllm/v1/core/kv_cache_utils.py``): ``num_blocks = available //
   page_size // group_size``; block 0 is the block pool's null block. A request of
   ``max_model_len`` tokens must fit or start-up fails ("To serve at least one request with the
   model's max seq len ...").

Hybrid models (Qwen3-Next, Qwen3.5: Gated DeltaNet linear attention + full attention) use the
hybrid KV cache manager: each linear-attention layer keeps one fixed-size state per sequence
(``MambaSpec``: conv state + recurrent state), the attention block size is raised until one
attention page is at least one state page, the state page is padded up to the attention page
(``Platform`` ``_align_hybrid_block_size`` / ``HybridAttentionMambaModelConfig``), and layers are
split into groups of equal size that share one pool of blocks
(``_get_kv_cache_groups_uniform_page_size``).

Not modelled: sliding-window layers (counted as full attention, which over-states their KV),
prefix caching of linear-attention state (``mamba_cache_mode`` 'align'/'all' keep extra state
blocks; 'none' is modelled), speculative decoding, pipeline/data/expert parallelism, LoRA slots.

**Checked: the engine's memory fraction and its non-KV reservation (2026-12-05, null result, nothing changed).** Two
leads: NVIDIA-NeMo/RL PR #3278 (Qwen3-235B-A22B one-step-off on 256 H100, vLLM TP 8, 16 engines of 32 sequences; rows
``nemorl-pr3278-...-gmu080`` / ``-gmu088`` of ``benchmarks/data/published_rl_times_firstcontact_2612i.json``)
publishes the step falling 10.9 % (226.8 -> 202.0 s) from ``gpu_memory_utilization`` 0.80 to 0.88, and the plan gives
192.6 s for both; the verl Qwen3-235B H20 example card (``tests/unit/test_uneven_pipeline.py`` ``_q235``, 0.6 of the
H20's CUDA total) plans 0.26 GiB of KV, short of one 11,680-token request (0.52 GiB). What was read and found:

* *Why the plan does not move.* KV capacity does bind in the plan: the decode fluid admits and preempts against it
  (``compute.continuous_batching``). At 0.80 the engine keeps 6.61 GiB of KV (147,376 tokens: 63.35 GiB budget less
  the 54.91 GiB TP-8 weight shard, a 1.04 GiB profile peak, 0.50 GiB non-torch, 0.29 GiB CUDA graphs); the default
  length mix (truncated exponential of mean 5,721 at the 8,074-token cap: scale about 11,000, 48 % of responses at the
  cap) never holds more at once than 32 x P(L > t) x (118 + t), about 126,000 tokens just below the cap, so nothing is
  preempted and 0.88 adds KV the batch does not use. The shape decides it (``benchmarks/step_times.py`` cards, 0.80 /
  0.88): shifted exponential 188.2 / 188.2 s, uniform 182.8 / 182.8 s, every response at the mean 166.7 s (preempted,
  0.47 s recompute) / 159.0 s: the plan moves 4.6 % there against the run's 10.9 %. The 8,192-token cap's crowding is
  modelled as far as the mean allows; the share at the cap is not published for this run.
* *vLLM at that row.* NeMo RL @cc34bee3448a5ff60b84d29fa2d6ce44358e7012 pins vLLM 0.20.0 (pyproject.toml l.147-150).
  In the 0.20.0 wheel (PyPI, read 2026-12-05) the budget is this module's: ``request_memory`` takes ``total x
  gpu_memory_utilization`` (vllm/v1/worker/utils.py l.403-410) and ``determine_available_memory`` leaves the KV cache
  that less weights, torch peak increase, non-torch increase and the CUDA-graph estimate (vllm/v1/worker/gpu_worker.py
  l.364-425); ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` already defaults to 1 in that wheel (vllm/envs.py
  l.1724-1726), so ``cuda_graphs_in_budget`` holds for 0.20.0 too, not only from 0.21.
* *NeMo RL's asynchronous engine runs at vLLM's scheduler defaults.* ``AsyncLLM.from_engine_args(AsyncEngineArgs(
  **llm_kwargs))`` (nemo_rl/models/generation/vllm/vllm_worker_async.py l.294-302 @cc34bee3) passes neither
  ``max_num_seqs`` nor ``max_num_batched_tokens`` (vllm_worker.py ``llm_kwargs`` l.530-556; of the performance recipes
  only grpo-deepseek-v3-64n8g-fp8-async-1off.yaml sets ``max_num_seqs``), and ``from_engine_args`` builds the config
  under ``UsageContext.ENGINE_CONTEXT`` (vllm/v1/engine/async_llm.py l.232-242), which ``get_batch_defaults`` does not
  list (vllm/engine/arg_utils.py l.2179-2259), so the engine keeps ``SchedulerConfig``'s 128 sequences and 2,048
  batched tokens (arg_utils.py l.2354-2369, vllm/config/scheduler.py l.42-44); 128 likewise in vLLM 0.10.0
  (vllm/config.py ``SchedulerConfig.__post_init__`` l.2389) and 0.11.2 (config/scheduler.py l.32, 44). Its profile run
  is then 2,048 tokens and its sampler warm-up 128 rows, and for 8 rows or more 0.20.0 applies top-k/top-p with a
  Triton kernel (vllm/v1/sample/ops/topk_topp_sampler.py l.245-255), not the sort ``SAMPLER_BYTES_PER_LOGIT`` prices
  (the sort of 0.10.0 / 0.11.2): this engine's reservation is smaller than planned (at 128 / 2,048 the plan keeps 7.16
  GiB of KV, +0.55 GiB), the opposite of what the 0.80 row asks. Not applied: on the NeMo RL AsyncLLM step rows the
  128-sequence cap is a timing change too (25 rows move, 10 by more than a point), and stated on their cards
  (``benchmarks/step_times.py`` against the tree of 578413d8) it moves the RL step median 15.5 -> 16.7 % and all rows
  10.70 -> 10.87 %: Qwen3-30B-A3B on H100 -8..+5 % -> +13..+34 % (PR #1526 after -7.4 -> +24.0 %, v0.6 32 GPUs -4.3 ->
  +27.9 %; on GB200 -47.1 -> -24.4 %), Llama-3.1-8B -3..+3 % -> +7..+13 %; the 235B pair and every engine of 128
  sequences or fewer unchanged. Those engines ran 256-512 sequences each; capped at 128 the plan is 20-30 % slow where
  it was within 8 %, so something in its decode at 128 sequences, or in those rows' lengths, offsets the cap: an open
  lead, not a fix. On the Qwen3-30B-A3B v0.6 32-GPU row the planned generation goes 142.5 -> 191.5 s, memory-bound
  both ways (long tail 0 -> 26 s): at 128 sequences a decode step still reads nearly all 128 experts of each layer
  (128 x 8 routed picks), so the cap adds steps (+34 %) at almost the same step price; if the run did hold 128, that
  step price is about a fifth too high for this MoE engine (the row's step 152 s published, 194 s planned at 128).
* *What a 94-layer MoE at TP 8 may keep outside the KV that this module under-counts.* The CUDA-graph estimate vLLM
  takes out of the budget is measured, not derived: the first capture of each mode plus the second capture's increase
  times the remaining graphs, FULL and PIECEWISE overlaid (``profile_cudagraph_memory``, vllm/v1/worker/
  gpu_model_runner.py l.5949-6047); :data:`CUDA_GRAPH_BASE_BYTES` does not grow with depth or piecewise splits. NCCL
  buffers allocated lazily in the profile's first collectives land in ``non_torch_increase`` (:data:`NON_TORCH_BYTES`,
  :data:`NON_TORCH_TP_EXTRA_BYTES` are estimates). The 0.80 step needs about 3.2 GiB less KV than planned (3.7 GiB at
  vLLM 0.20's 128 / 2,048 defaults); no start-up log ("Estimated CUDA graph memory", "Available KV cache memory") of
  this engine or of another 94-layer MoE at TP 8 is published, so nothing is priced: a reservation read off this row
  would be a constant fitted to one row.
* *The H20 card.* Its 0.26 GiB rests on the same estimates (non-torch 0.50 GiB, graphs 0.29 GiB) and on the sampler
  warm-up at the card's 256 sequences (0.98 GiB at 27 bytes a logit); verl passes its own ``max_num_seqs`` (1,024 by
  default: volcengine/verl verl/trainer/config/rollout/rollout.yaml l.68 @cdd7d874f4dc4c40bac4a6a41bfbef771d0397b8,
  cited by the H20 weight-sync rows of ``published_rl_times.json``) and the script's vLLM release is not pinned, so
  whether that engine's reservation is over- or under-counted is not settled here (1,024 rows at the sort's 27 bytes
  would make it 3.9 GiB, at a Triton top-k/top-p less). Unchanged.
* *Every RL row that states the fraction or whose plan preempts* (``benchmarks/engine_kv_rows.py`` ->
  ``engine_kv_rows.md``, 164 rows, 161 stating it): the 9 with a generation figure whose plan preempts read a median
  generation error of -18.9 % (7 under; verl's H20 DAPO Qwen3-14B-Base -34..-44 %, Qwen2.5-32B -19..+5 %, verl #7412
  RTX 4090 -57 %, Marin's Qwen3-235B -16 %, NeMo RL v0.3's Qwen3-32B +38 %), the 68 it does not -9.8 % (median |error|
  19.6 %, 46 under). The preempting rows lean short, which fits the recompute charge being the fluid's lower bound
  (distinct sequences at their last preemption, not each event: ``compute.continuous_batching``) rather than a
  reservation error; no engine-memory term explains the set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from trainfit.memory.attention import mla_kv_bytes_per_token, mla_replicated_params
from trainfit.memory.params import param_breakdown
from trainfit.memory.weights import base_weight_bytes
from trainfit.spec.enums import ComputeDtype, Dtype
from trainfit.spec.model import ModelSpec
from trainfit.units import BYTES_PER_DTYPE, GIB, MIB

# --------------------------------------------------------------------------------------------
# Constants (each names where it comes from)
# --------------------------------------------------------------------------------------------

KERNEL_BLOCK_ALIGNMENT = 16
"""Smallest attention kernel block: ``FlashAttentionBackend.get_supported_kernel_block_sizes``
returns ``[MultipleOf(16)]``; vLLM's default ``--block-size`` on CUDA is 16 tokens."""

CUDA_CONTEXT_BYTES = 512 * MIB
"""CUDA context, cuBLAS/cuDNN handles and loaded kernels of one worker process: present before
vLLM's start-up snapshot, so outside ``gpu_memory_utilization``. Public nvidia-smi readings of
sleeping tp=1 engines (everything freed but this, graphs and NCCL) are 0.5-0.8 GiB
(NVIDIA-NeMo/RL#223: 774 MiB asleep at tp=1); estimate."""

NON_TORCH_BYTES = 256 * MIB
"""``non_torch_increase`` measured by ``memory_profiling`` during the profile run (attention
backend workspaces, cuBLAS workspaces): 0.13-0.39 GiB in public start-up logs ("non_torch_memory
takes 0.15GiB" vllm#17117, "0.39GiB" vllm#11251); estimate, inside the budget."""

NON_TORCH_TP_EXTRA_BYTES = 256 * MIB
"""Extra non-torch memory of a tensor-parallel worker (NCCL buffers, custom all-reduce IPC
buffers). vllm#32714: a 4x3090 tp=4 engine held 1.14 GB per GPU asleep, i.e. context + graphs +
communication buffers; estimate."""

CUDA_GRAPH_BASE_BYTES = 256 * MIB
"""Fixed part of the CUDA-graph memory pool (per-graph executables and small static buffers over
~67 capture sizes). vLLM logs "Estimated CUDA graph memory: 0.17 GiB / 0.26 GiB / 0.36 GiB total"
(club-3090#127, vllm PR #30515, gpustack/runner#251); the shared pool also holds the activations of
the largest captured batch, added on top (see :func:`cuda_graph_bytes`)."""

MAX_CUDAGRAPH_CAPTURE_SIZE = 512
"""vLLM caps the largest captured batch at ``min(2 * max_num_seqs, 512)`` tokens by default."""

SAMPLER_BYTES_PER_LOGIT = 27.0
"""Peak bytes per (request, vocab entry) of vLLM's dummy sampler step
(``_dummy_sampler_run``: temperature 0.5, top_p 0.9, top_k vocab-1, i.e. the top-k/top-p path):
the gathered bf16 logits (2) + the fp32 copy ``logits.to(torch.float32)`` (4) +
``apply_top_k_top_p``'s sort values (4) and int64 indices (8) + softmax/cumsum buffer (4) +
boolean mask (1) + the scatter output (4). The lm_head is vocab-parallel but
``LogitsProcessor._gather_logits`` all-gathers, so every TP rank holds the full vocabulary."""

GDN_CHUNK_SIZE = 64
"""Chunk length of the chunked Gated DeltaNet prefill kernel (FLA ``chunk_gated_delta_rule``):
it materialises one per-head state per 64-token chunk."""


# --------------------------------------------------------------------------------------------
# Closed-form per-token / per-sequence terms
# --------------------------------------------------------------------------------------------


def kv_heads_per_gpu(spec: ModelSpec, *, tp: int) -> int:
    """KV heads a TP rank stores: ``num_kv_heads / tp``, at least 1.

    When ``tp > num_kv_heads`` vLLM's ``QKVParallelLinear`` replicates each KV head over
    ``tp / num_kv_heads`` ranks (``num_kv_head_replicas``), so every rank still holds one head.
    """
    _check_tp(tp)
    return max(1, math.ceil(spec.num_kv_heads / tp))


def kv_bytes_per_token(spec: ModelSpec, *, tp: int, dtype_bytes: float) -> float:
    """KV cache bytes per token on one GPU: ``2 * full_attention_layers * ceil(kv_heads / tp)
    * head_dim * dtype_bytes``.

    K and V (the 2) for every full-attention layer; linear-attention layers store no per-token KV.
    Same as vLLM's ``AttentionSpec.real_page_size_bytes / block_size`` summed over layers.
    Qwen3-8B bf16 at tp=1: 2*36*8*128*2 = 147,456. Multi-head latent attention (DeepSeek-V3) caches the
    latent instead, whole on every rank (``trainfit.memory.attention.mla_kv_bytes_per_token``).
    """
    if spec.mla is not None:
        return mla_kv_bytes_per_token(spec, dtype_bytes=dtype_bytes)
    return 2.0 * spec.num_full_attention_layers * kv_heads_per_gpu(spec, tp=tp) * spec.head_dim * dtype_bytes


def _linear_state_per_layer(
    spec: ModelSpec, *, tp: int, state_dtype_bytes: float, conv_dtype_bytes: float
) -> float:
    la = spec.linear_attention
    if la is None:
        return 0.0
    # vllm/model_executor/layers/mamba/mamba_utils.py
    # MambaStateShapeCalculator.gated_delta_net_state_shape:
    #   conv_dim = head_k_dim * num_k_heads * 2 + head_v_dim * num_v_heads
    #   conv_state_shape     = (conv_dim // tp, conv_kernel_size - 1 + num_spec)   (model dtype)
    #   temporal_state_shape = (num_v_heads // tp, head_v_dim, head_k_dim)         (mamba_ssm_cache_dtype)
    conv = _shard(la.conv_dim, tp) * (la.conv_kernel_dim - 1) * conv_dtype_bytes
    recurrent = _shard(la.num_value_heads, tp) * la.value_head_dim * la.key_head_dim * state_dtype_bytes
    return float(conv + recurrent)


def linear_state_bytes_per_seq(
    spec: ModelSpec,
    *,
    tp: int,
    state_dtype_bytes: float | None = None,
    conv_dtype_bytes: float = 2.0,
) -> float:
    """Fixed per-sequence state of all linear-attention (Gated DeltaNet) layers on one GPU.

    Per layer (vLLM ``gated_delta_net_state_shape``, ``MambaSpec.page_size_bytes``):
    recurrent state ``num_value_heads/tp x value_head_dim x key_head_dim`` in
    ``state_dtype_bytes`` (fp32 by default: Qwen3.5/Qwen3-Next set ``mamba_ssm_dtype`` float32) +
    conv state ``conv_dim/tp x (conv_kernel_dim - 1)`` in the model dtype, where
    ``conv_dim = 2 * num_key_heads * key_head_dim + num_value_heads * value_head_dim``.
    This is the raw state; vLLM pads each layer's state to one attention page
    (:attr:`EngineMemory.seq_bytes` includes that padding). 0 for models without linear attention.
    """
    _check_tp(tp)
    la = spec.linear_attention
    if la is None or spec.num_linear_attention_layers == 0:
        return 0.0
    sdt = la.state_dtype_bytes if state_dtype_bytes is None else state_dtype_bytes
    return spec.num_linear_attention_layers * _linear_state_per_layer(
        spec, tp=tp, state_dtype_bytes=sdt, conv_dtype_bytes=conv_dtype_bytes
    )


def weights_per_gpu_params(spec: ModelSpec, *, tp: int) -> float:
    """Parameters one TP rank holds.

    vLLM shards every linear map (column/row parallel), the vocab-parallel embedding and lm_head,
    the DeltaNet conv1d and per-head scalars, and MoE experts (along their intermediate dim) by
    ``tp``. Replicated on every rank: RMSNorm weights, q/k norms, router gates, row-parallel biases,
    and K/V projections beyond one head per rank when ``tp > num_kv_heads``. Vocab padding to a
    multiple of 64 is ignored.
    """
    _check_tp(tp)
    b = param_breakdown(spec)
    h = spec.hidden_size
    full = spec.num_full_attention_layers
    replicated = spec.norms_per_layer * h * spec.num_layers + h
    if spec.qk_norm:  # OLMo 2's whole-width norms are whole on every rank: vLLM all-gathers q and k for them
        # (vllm-project/vllm vllm/model_executor/models/olmo2.py @028aedf62adee9d2a1e99d4cda7c1ce1c997c8cc,
        # Olmo2Attention.__init__ q_norm / k_norm and _apply_qk_norm)
        replicated += (spec.q_dim + spec.kv_dim if spec.qk_norm_full_width else 2 * spec.head_dim) * full
    if spec.o_proj_bias:
        replicated += h * full
    if spec.mlp_bias:
        replicated += h * spec.num_layers
    if spec.linear_attention is not None:
        replicated += spec.linear_attention.value_head_dim * spec.num_linear_attention_layers
    if spec.moe is not None:
        n_moe = sum(1 for i in range(spec.num_layers) if spec.moe.is_moe_layer(i))
        replicated += n_moe * spec.moe.num_experts * h
        if spec.moe.shared_expert_intermediate_size:
            replicated += n_moe * h  # shared_expert_gate (out 1)
    kv_per_head = (2 * h * spec.head_dim + (2 * spec.head_dim if spec.attention_bias else 0)) * full
    kv_total = kv_per_head * spec.num_kv_heads
    kv_rank = kv_per_head * kv_heads_per_gpu(spec, tp=tp)
    if spec.mla is not None:  # MLA: the down-projections are replicated, q_b / kv_b / o_proj split by heads
        kv_total = kv_rank = 0
        replicated += mla_replicated_params(spec)
    sharded = b.total - replicated - kv_total
    return sharded / tp + replicated + kv_rank


def weights_per_gpu_bytes(
    spec: ModelSpec,
    *,
    tp: int,
    weights: Dtype = Dtype.BF16,
    compute: ComputeDtype = ComputeDtype.BF16,
    weights_bytes: float | None = None,
) -> float:
    """Weight bytes on one TP rank: the whole model's weight bytes (``base_weight_bytes``, or
    ``weights_bytes`` when given, e.g. a checkpoint's size) times the rank's share of the
    parameters (:func:`weights_per_gpu_params`)."""
    if weights_bytes is None:
        total = base_weight_bytes(spec, weights=weights, compute=compute)
    else:
        total = weights_bytes
    return total * weights_per_gpu_params(spec, tp=tp) / param_breakdown(spec).total


def activation_bytes_per_token(spec: ModelSpec, *, tp: int, act_bytes: float = 2.0) -> float:
    """Peak live activation bytes per batched token of one inference forward on one TP rank.

    vLLM's forward keeps no per-layer activations (no autograd), so the peak is inside the widest
    layer: ``act_bytes x (2 x hidden [hidden_states + residual] + widest intermediate / tp)``.
    Widest intermediate, by layer kind:

    - dense SwiGLU MLP: ``gate_up`` output ``2I/tp`` + ``SiluAndMul`` output ``I/tp`` = ``3I/tp``;
    - full attention: fused qkv output (q, gate, k, v per rank) + attention output;
    - MoE (fused_moe): ``top_k x (2 I_e + I_e)/tp`` + ``top_k x hidden`` (intermediate caches 1-3)
      + shared expert ``3 I_s / tp`` + fp32 router logits;
    - Gated DeltaNet: ``in_proj_qkvz``/``ba`` outputs + conv output + core output, plus the chunked
      prefill kernel's per-chunk states ``num_v_heads/tp x d_k x d_v`` every
      :data:`GDN_CHUNK_SIZE` tokens.

    Qwen3-8B, tp=1: 2 x (2x4096 + 3x12288) = 90,112 B/token, i.e. 22 x hidden.
    """
    _check_tp(tp)
    h = spec.hidden_size
    cands: list[float] = []
    if spec.num_full_attention_layers:
        q_out = (2 if spec.attn_output_gate else 1) * spec.q_dim
        kv_rank = 2 * kv_heads_per_gpu(spec, tp=tp) * spec.head_dim
        cands.append(act_bytes * (q_out / tp + kv_rank + spec.q_dim / tp))
    moe = spec.moe
    n_moe = sum(1 for i in range(spec.num_layers) if moe.is_moe_layer(i)) if moe is not None else 0
    if n_moe < spec.num_layers:
        cands.append(act_bytes * 3 * spec.intermediate_size / tp)
    if moe is not None and n_moe:
        k = moe.experts_per_token
        moe_b = act_bytes * (k * 3 * moe.expert_intermediate_size / tp + k * h)
        moe_b += act_bytes * 3 * moe.shared_expert_intermediate_size / tp
        moe_b += 4.0 * moe.num_experts
        cands.append(moe_b)
    la = spec.linear_attention
    if la is not None and spec.num_linear_attention_layers:
        proj = (la.conv_dim + la.value_dim + 2 * la.num_value_heads) / tp
        gdn = act_bytes * (proj + la.conv_dim / tp + 2 * la.value_dim / tp)
        chunk_state = _shard(la.num_value_heads, tp) * la.key_head_dim * la.value_head_dim
        gdn += act_bytes * chunk_state / GDN_CHUNK_SIZE
        cands.append(gdn)
    return act_bytes * 2 * h + (max(cands) if cands else 0.0)


def cuda_graph_bytes(spec: ModelSpec, *, tp: int, max_num_seqs: int, act_bytes: float = 2.0) -> float:
    """Estimated CUDA-graph pool of one worker: :data:`CUDA_GRAPH_BASE_BYTES` + the activations of
    the largest captured batch (``min(2 x max_num_seqs, 512)`` tokens), which the graphs' shared
    private pool keeps. An estimate: public logs show 0.17-0.5 GiB per GPU for dense models."""
    size = min(2 * max_num_seqs, MAX_CUDAGRAPH_CAPTURE_SIZE)
    return CUDA_GRAPH_BASE_BYTES + size * activation_bytes_per_token(spec, tp=tp, act_bytes=act_bytes)


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineConfig:
    """The vLLM engine arguments that decide memory (names follow ``vllm.EngineArgs``)."""

    tp: int = 1
    """``tensor_parallel_size``."""
    max_model_len: int
    """``max_model_len``: one request of this length must fit in the KV cache at start-up."""
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    """V1 default with chunked prefill for online serving (``LLM`` offline uses 8192 too on most GPUs)."""
    kv_cache_dtype_bytes: float = 2.0
    """2 for auto (bf16/fp16), 1 for ``--kv-cache-dtype fp8``."""
    weights: Dtype = Dtype.BF16
    """Storage dtype of the weights (fp8/int8/nf4 approximate vLLM's quantized formats)."""
    dtype: ComputeDtype = ComputeDtype.BF16
    """Model dtype (activations, linear-attention conv state)."""
    enforce_eager: bool = False
    """True: no CUDA graphs."""
    cuda_graphs_in_budget: bool = True
    """vLLM >= 0.20 (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1`` default): the graph estimate
    comes out of the budget. False: older vLLM, or the env var set to 0: graphs are captured after
    the KV cache and sit on top of the budget."""
    sleep_level: int = 0
    """0 (no sleep mode), 1 (weights to host RAM, KV discarded) or 2 (both discarded)."""
    static_fraction: bool = False
    """SGLang (``rollout.engine: sglang``): ``gpu_memory_utilization`` is its ``mem_fraction_static``, the share of
    the memory free at start-up (before the model is loaded) for the weights and the KV pool only. The KV pool gets
    the free memory after the weights are loaded less ``(1 - fraction) x`` that start-up figure
    (``profile_max_num_token``: ``rest_memory = available_gpu_memory - total_gpu_memory * (1 -
    self.mem_fraction_static)``, sgl-project/sglang python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py
    @001ccef0072a4537d4ec6bdd50a73e6feb2c907d; the same in the 0.5.8 wheel (PyPI, read 2026-12-05) l.138-140, where
    ``total_gpu_memory`` is ``ModelRunner.__init__``'s ``min_per_gpu_memory = self.init_torch_distributed()``
    (model_runner.py l.365), the free memory ``get_available_gpu_memory`` reads after the process group exists
    (l.779-784, ``torch.cuda.mem_get_info`` free) and before ``load_model`` (l.460), handed to
    ``init_memory_pool(min_per_gpu_memory)`` (l.555; kv_cache_mixin.py l.252-255)). So what a colocated trainer
    holds when the engine starts (``engine_memory``'s ``other_used_bytes``) shrinks the pool by ``fraction x`` its
    bytes; verl's docs say the same ("For SGLang: ... the fraction of the free GPU memory", docs/examples/config.rst
    l.316 @72429f21b7e7d34993e8c447e46578123b27edb4). Activations, CUDA graphs and non-torch workspaces come out of
    the reserve, not out of the fraction. False: vLLM's budget, which holds them all."""
    remaining_fraction: bool = False
    """verl's patched vLLM 0.5.4 / 0.6.3 worker: ``gpu_memory_utilization`` is a share of the memory still free after
    the trainer, the engine's weights and its profile run, and all of that share is KV cache
    (``determine_num_available_blocks``: ``profile_run()``, ``torch.cuda.synchronize()``, ``free_gpu_memory,
    total_gpu_memory = torch.cuda.mem_get_info()`` with the profile's blocks still cached, then "NOTE(sgm) [VERL] use
    the remaining memory" ``num_gpu_blocks = int((free_gpu_memory * self.cache_config.gpu_memory_utilization) //
    cache_block_size)``, verl/third_party/vllm/vllm_v_0_6_3/worker.py l.187-205, volcengine/verl
    @72429f21b7e7d34993e8c447e46578123b27edb4, the last commit before "drop vllm v0.5.4 and v0.6.3 support" #2257;
    docs/examples/config.rst l.312-315 and docs/perf/perf_tuning.rst l.31-32 there: "For vLLM v0.5.4 and v0.6.3:
    The proportion of the **remaining** GPU memory ... For vLLM v0.7.0 and later: The fraction of **total** GPU
    memory"). The worker only records the free memory at start (l.161-162): no start-up refusal. CUDA graphs are
    captured after the KV cache (vLLM V0), outside the share. False: vLLM's own budget of the total."""
    block_size: int = 16
    """``--block-size`` in tokens; hybrid models raise it (see :class:`EngineMemory`)."""

    def __post_init__(self) -> None:
        _check_tp(self.tp)
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        for name in ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.sleep_level not in (0, 1, 2):
            raise ValueError(f"sleep_level must be 0, 1 or 2, got {self.sleep_level}")
        if self.kv_cache_dtype_bytes <= 0:
            raise ValueError(f"kv_cache_dtype_bytes must be > 0, got {self.kv_cache_dtype_bytes}")


@dataclass(frozen=True, kw_only=True, slots=True)
class RolloutDemand:
    """One rollout step: ``prompts_per_step x generations_per_prompt`` sequences of
    ``prompt_len + completion_len`` tokens at most (GRPO groups)."""

    prompts_per_step: int
    generations_per_prompt: int
    prompt_len: int
    completion_len: int

    def __post_init__(self) -> None:
        for name in ("prompts_per_step", "generations_per_prompt", "prompt_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.completion_len < 0:
            raise ValueError(f"completion_len must be >= 0, got {self.completion_len}")

    @property
    def sequences(self) -> int:
        return self.prompts_per_step * self.generations_per_prompt

    @property
    def seq_len(self) -> int:
        return self.prompt_len + self.completion_len


# --------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineMemory:
    """One GPU of a vLLM engine, in bytes. ``budget = gpu_memory_utilization x gpu_memory``."""

    gpu_memory: float
    """Device total as ``cudaMemGetInfo`` reports it."""
    budget: float
    weights: float
    activation_peak: float
    """Forward of ``max_num_batched_tokens`` tokens: tokens x :func:`activation_bytes_per_token`."""
    sampler_logits: float
    """Dummy sampler step: ``min(max_num_seqs, max_num_batched_tokens) x vocab x``
    :data:`SAMPLER_BYTES_PER_LOGIT` (full vocabulary on every TP rank)."""
    profiled_peak: float
    """What ``memory_profiling`` records as ``torch_peak_increase``: the forward and the sampler
    run one after the other, so ``max(activation_peak, sampler_logits + hidden states)``."""
    non_torch: float
    """Non-torch memory that grows during profiling (inside the budget)."""
    cuda_graphs: float
    """CUDA-graph pool (0 with ``enforce_eager``)."""
    cuda_graphs_in_budget: bool
    cuda_context: float
    """CUDA context and communicators, outside the budget."""
    other_used: float
    """Memory other processes hold on the GPU when the engine starts (e.g. a colocated trainer)."""
    kv_cache_available: float
    """``budget - weights - profiled_peak - non_torch (- cuda_graphs)``; may be negative."""
    kv_cache: float
    """Bytes vLLM allocates for KV pages: ``num_blocks x block_bytes`` (>= 0)."""
    num_blocks: int
    """Blocks in the pool (block 0 is the null block)."""
    block_size: int
    """Attention tokens per block after hybrid alignment."""
    page_bytes: float
    """Bytes of one block in one layer (linear-attention state pages padded to this)."""
    group_size: int
    """Layers per KV-cache group: a block's bytes are ``page_bytes x group_size``."""
    attention_groups: int
    linear_groups: int
    kv_bytes_per_token: float
    linear_state_bytes_per_seq: float
    """Raw (unpadded) linear-attention state per sequence."""
    max_model_len: int
    max_num_seqs: int
    sleep_level: int
    tp: int
    fits: bool
    reason: str
    """Why it does not fit (empty when it fits)."""
    notes: tuple[str, ...] = field(default=())

    # --- pool geometry ------------------------------------------------------------------------

    @property
    def block_bytes(self) -> float:
        return self.page_bytes * self.group_size

    @property
    def usable_blocks(self) -> int:
        """Blocks requests can use: the pool minus the null block."""
        return max(0, self.num_blocks - 1)

    @property
    def kv_tokens_capacity(self) -> int:
        """vLLM's logged "GPU KV cache size: N tokens": ``num_blocks // num_groups x block_size``
        (for a hybrid model: tokens if every group held attention for distinct tokens)."""
        groups = self.attention_groups + self.linear_groups
        return (self.num_blocks // groups) * self.block_size if groups else 0

    def blocks_per_seq(self, tokens: int) -> int:
        """Blocks one sequence of ``tokens`` tokens holds: ``cdiv(tokens, block_size)`` per
        attention group + one state block per linear-attention group."""
        return self.attention_groups * math.ceil(tokens / self.block_size) + self.linear_groups

    def seq_bytes(self, tokens: int) -> float:
        """Bytes one sequence holds, paging and state padding included."""
        return self.blocks_per_seq(tokens) * self.block_bytes

    @property
    def total_device_bytes(self) -> float:
        """Everything the engine holds on the GPU while generating (other processes excluded)."""
        return (
            self.cuda_context
            + self.weights
            + self.profiled_peak
            + self.non_torch
            + self.cuda_graphs
            + self.kv_cache
        )

    @property
    def max_concurrency_at_max_model_len(self) -> float:
        """vLLM's "Maximum concurrency for N tokens per request: X" figure."""
        per = self.blocks_per_seq(self.max_model_len)
        return self.num_blocks / per if per else 0.0

    # --- rollout demand -----------------------------------------------------------------------

    def needed_concurrency(self, demand: RolloutDemand) -> int:
        """Sequences one rollout step generates: prompts x generations."""
        return demand.sequences

    def needed_kv_tokens(self, demand: RolloutDemand) -> int:
        """Tokens all of a step's sequences hold at full length: prompts x generations x
        (prompt + completion)."""
        return demand.sequences * demand.seq_len

    def needed_kv_bytes(self, demand: RolloutDemand) -> float:
        """Bytes all sequences hold at full length, paging and linear-attention state included."""
        return demand.sequences * self.seq_bytes(demand.seq_len)

    def max_concurrent_seqs(self, demand: RolloutDemand) -> int:
        """Full-length sequences that can be resident at once: ``min(max_num_seqs,
        usable_blocks // blocks_per_seq(prompt + completion))`` (0 when the engine does not fit)."""
        if not self.fits:
            return 0
        by_kv = self.usable_blocks // self.blocks_per_seq(demand.seq_len)
        return min(self.max_num_seqs, by_kv)

    def waves(self, demand: RolloutDemand) -> int:
        """Rounds of full-length sequences a step needs without preemption (0 if none fit)."""
        c = self.max_concurrent_seqs(demand)
        return math.ceil(demand.sequences / c) if c else 0

    def admitted_seqs(self, demand: RolloutDemand) -> int:
        """Sequences the V1 scheduler starts at once: it admits a waiting request when blocks
        for its prompt are free (``allocate_slots``), up to ``max_num_seqs``."""
        if not self.fits:
            return 0
        by_prompt = self.usable_blocks // self.blocks_per_seq(demand.prompt_len + 1)
        return min(demand.sequences, self.max_num_seqs, by_prompt)

    def preempts(self, demand: RolloutDemand) -> bool:
        """True when the admitted sequences outgrow the KV cache as their completions reach
        ``completion_len`` (vLLM V1 then preempts by recomputation), or when the engine cannot
        serve the demand at all. Worst case: every completion runs to its limit."""
        return bool(self._preempt_verdict(demand)[0])

    def preempt_reason(self, demand: RolloutDemand) -> str:
        """Human-readable explanation of :meth:`preempts`."""
        return self._preempt_verdict(demand)[1]

    def _preempt_verdict(self, demand: RolloutDemand) -> tuple[bool, str]:
        if not self.fits:
            return True, f"engine does not start: {self.reason}"
        if demand.seq_len > self.max_model_len:
            return True, (
                f"prompt+completion = {demand.seq_len} tokens exceeds max_model_len {self.max_model_len}:"
                " vLLM rejects or truncates such requests"
            )
        full = self.blocks_per_seq(demand.seq_len)
        admitted = self.admitted_seqs(demand)
        need = admitted * full
        if admitted == 0:
            return True, "no free KV blocks for even one prompt"
        cap = self.max_concurrent_seqs(demand)
        if need > self.usable_blocks:
            return True, (
                f"vLLM admits {admitted} sequences at prompt length"
                f" ({self.blocks_per_seq(demand.prompt_len + 1)} blocks each) but at {demand.seq_len} tokens"
                f" each needs {full} blocks: {need} > "
                f"{self.usable_blocks} usable blocks ({_gib(self.kv_cache)} GiB KV cache holds {cap}"
                " full-length sequences); running sequences get preempted and recomputed"
            )
        if demand.sequences > admitted:
            limit = "max_num_seqs" if admitted == self.max_num_seqs else "KV cache"
            return False, (
                f"no preemption: {admitted} of {demand.sequences} sequences run at once (limited by {limit}),"
                f" the rest queue; {self.waves(demand)} wave(s)"
            )
        return False, (
            f"no preemption: all {demand.sequences} sequences fit at full length"
            f" ({need} of {self.usable_blocks} usable blocks)"
        )


# --------------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------------


def engine_memory(
    spec: ModelSpec,
    *,
    gpu_memory_bytes: float,
    engine: EngineConfig,
    weights_bytes: float | None = None,
    other_used_bytes: float = 0.0,
    rank_weights_bytes: float | None = None,
) -> EngineMemory:
    """Memory of one GPU of a vLLM engine serving ``spec`` with ``engine``.

    ``gpu_memory_bytes`` is the device total vLLM sees (``cudaMemGetInfo`` total; pass a GPU
    catalog entry's ``usable_memory_bytes`` for the torch figure). ``weights_bytes`` overrides the
    whole model's weight bytes (sharded by tp here). ``other_used_bytes`` is memory other processes
    hold when the engine starts (a colocated trainer that has not offloaded). ``rank_weights_bytes``: the weights
    one rank holds, sized by the caller (an fp8 engine, ``trainfit.rollout.quantization.engine_rank_weight_bytes``);
    it replaces the sharded whole-model figure.
    """
    tp = engine.tp
    act = BYTES_PER_DTYPE[engine.dtype.value]
    budget = engine.gpu_memory_utilization * gpu_memory_bytes
    weights = weights_per_gpu_bytes(
        spec, tp=tp, weights=engine.weights, compute=engine.dtype, weights_bytes=weights_bytes
    ) if rank_weights_bytes is None else rank_weights_bytes

    tokens = engine.max_num_batched_tokens
    activation_peak = tokens * activation_bytes_per_token(spec, tp=tp, act_bytes=act)
    sampler_rows = min(engine.max_num_seqs, engine.max_num_batched_tokens)
    sampler_logits = sampler_rows * spec.vocab_size * SAMPLER_BYTES_PER_LOGIT
    hidden_kept = tokens * spec.hidden_size * act  # profile_run keeps hidden_states during the sampler step
    profiled_peak = max(activation_peak, sampler_logits + hidden_kept)
    non_torch = NON_TORCH_BYTES + (NON_TORCH_TP_EXTRA_BYTES if tp > 1 else 0)
    graphs = 0.0
    if not engine.enforce_eager:
        graphs = cuda_graph_bytes(spec, tp=tp, max_num_seqs=engine.max_num_seqs, act_bytes=act)
    context = float(CUDA_CONTEXT_BYTES)

    graphs_in = graphs if engine.cuda_graphs_in_budget else 0.0
    free_at_start = gpu_memory_bytes - context - other_used_bytes
    available = budget - weights - profiled_peak - non_torch - graphs_in
    if engine.static_fraction:  # SGLang: free memory after the weights less the reserve, (1 - fraction) x the memory
        # free before the model was loaded (EngineConfig.static_fraction)
        available = free_at_start - weights - (1.0 - engine.gpu_memory_utilization) * free_at_start
    if engine.remaining_fraction:  # verl's vLLM <= 0.6.3: a share of what is free after the profile run
        graphs_in = 0.0
        available = engine.gpu_memory_utilization * (free_at_start - weights - profiled_peak - non_torch)
        budget = weights + profiled_peak + non_torch + max(0.0, available)

    # --- page geometry (hybrid alignment and grouping) -----------------------------------------
    kv_tok = kv_bytes_per_token(spec, tp=tp, dtype_bytes=engine.kv_cache_dtype_bytes)
    lin_state = linear_state_bytes_per_seq(spec, tp=tp, conv_dtype_bytes=act)
    n_attn = spec.num_full_attention_layers
    n_lin = spec.num_linear_attention_layers if spec.linear_attention is not None else 0
    attn_1tok = kv_tok / n_attn if n_attn else 0.0  # per layer per token
    state_page = lin_state / n_lin if n_lin else 0.0
    block_size = engine.block_size
    notes: list[str] = []
    if n_attn and n_lin:
        align = max(KERNEL_BLOCK_ALIGNMENT, engine.block_size)
        needed = align * math.ceil(state_page / (align * attn_1tok))
        if needed > block_size:
            notes.append(
                f"hybrid model: attention block size raised from {engine.block_size} to {needed} tokens"
                f" so that one attention page ({_mib(needed * attn_1tok)} MiB) >= one linear-attention"
                f" state page ({_mib(state_page)} MiB)"
            )
            block_size = needed
        page = block_size * attn_1tok
        group_size = _group_size(n_attn, n_lin)
        attention_groups = math.ceil(n_attn / group_size)
        linear_groups = math.ceil(n_lin / group_size)
    elif n_attn:
        page = block_size * attn_1tok
        group_size, attention_groups, linear_groups = n_attn, 1, 0
    elif n_lin:
        page = state_page
        group_size, attention_groups, linear_groups = n_lin, 0, 1
    else:
        page, group_size, attention_groups, linear_groups = 0.0, 0, 0, 0
    block_bytes = page * group_size
    num_blocks = int(available // block_bytes) if available > 0 and block_bytes > 0 else 0
    kv_cache = num_blocks * block_bytes

    # --- does it start? -----------------------------------------------------------------------
    reasons: list[str] = []
    if free_at_start < budget and not (engine.static_fraction or engine.remaining_fraction):
        reasons.append(
            f"free memory at start-up {_gib(free_at_start)} GiB < requested {_gib(budget)} GiB"
            f" (gpu_memory_utilization {engine.gpu_memory_utilization} x {_gib(gpu_memory_bytes)} GiB)"
        )
    if weights > budget and not engine.remaining_fraction:
        reasons.append(f"weights {_gib(weights)} GiB per GPU exceed the budget {_gib(budget)} GiB")
    if available <= 0 and engine.static_fraction:
        reasons.append(
            f"no memory for the KV cache: free after the weights {_gib(free_at_start - weights)} GiB - reserve"
            f" (1 - mem_fraction_static {engine.gpu_memory_utilization}) x {_gib(free_at_start)} GiB free at start-up"
            f" = {_gib(available)} GiB"
        )
    elif available <= 0 and engine.remaining_fraction:
        reasons.append(
            f"no memory for the KV cache: gpu_memory_utilization {engine.gpu_memory_utilization} x (free at start-up"
            f" {_gib(free_at_start)} GiB - weights {_gib(weights)} - peak {_gib(profiled_peak)} - non-torch"
            f" {_gib(non_torch)}) = {_gib(available)} GiB (verl's vLLM <= 0.6.3: a share of the remaining memory)"
        )
    elif available <= 0:
        reasons.append(
            f"no memory for the KV cache: budget {_gib(budget)} GiB - weights {_gib(weights)} - peak"
            f" {_gib(profiled_peak)} - non-torch {_gib(non_torch)}"
            + (f" - CUDA graphs {_gib(graphs)}" if engine.cuda_graphs_in_budget and graphs else "")
            + f" = {_gib(available)} GiB"
        )
    else:
        needed_one = (n_attn * math.ceil(engine.max_model_len / block_size) + n_lin) * page
        if needed_one > available:
            reasons.append(
                f"one request of max_model_len {engine.max_model_len} needs {_gib(needed_one)} GiB"
                f" of KV cache, only {_gib(available)} GiB available"
            )
    used = context + other_used_bytes + weights + profiled_peak + non_torch + kv_cache + graphs
    if engine.static_fraction:
        if used > gpu_memory_bytes:
            reasons.append(
                f"activations, CUDA graphs and workspaces ({_gib(profiled_peak + non_torch + graphs)} GiB) overflow"
                f" the reserve (1 - mem_fraction_static) x {_gib(free_at_start)} GiB left beside the KV pool"
            )
    elif (engine.remaining_fraction or not engine.cuda_graphs_in_budget) and graphs:
        if used > gpu_memory_bytes:
            reasons.append(
                f"CUDA graphs ({_gib(graphs)} GiB) are captured after the KV cache, outside the budget, and"
                f" overflow the device ({_gib(used)} > {_gib(gpu_memory_bytes)} GiB)"
            )
    fits = not reasons
    return EngineMemory(
        gpu_memory=float(gpu_memory_bytes),
        budget=budget,
        weights=weights,
        activation_peak=activation_peak,
        sampler_logits=sampler_logits,
        profiled_peak=profiled_peak,
        non_torch=float(non_torch),
        cuda_graphs=graphs,
        cuda_graphs_in_budget=engine.cuda_graphs_in_budget and not engine.remaining_fraction,
        cuda_context=context,
        other_used=float(other_used_bytes),
        kv_cache_available=available,
        kv_cache=kv_cache,
        num_blocks=num_blocks,
        block_size=block_size,
        page_bytes=page,
        group_size=group_size,
        attention_groups=attention_groups,
        linear_groups=linear_groups,
        kv_bytes_per_token=kv_tok,
        linear_state_bytes_per_seq=lin_state,
        max_model_len=engine.max_model_len,
        max_num_seqs=engine.max_num_seqs,
        sleep_level=engine.sleep_level,
        tp=tp,
        fits=fits,
        reason="; ".join(reasons),
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------------------------
# Sleep mode
# --------------------------------------------------------------------------------------------


def sleep_resident_bytes(mem: EngineMemory, level: int | None = None) -> float:
    """GPU bytes a sleeping engine still holds.

    ``Worker.sleep`` calls ``CuMemAllocator.sleep``: allocations tagged "weights" and "kv_cache"
    (made under ``use_memory_pool``) are unmapped - level 1 copies weights to pinned host memory
    first, level 2 discards them (keeping only model buffers on the host) - then ``gc.collect()``
    and ``torch.cuda.empty_cache()`` release the cached activation blocks. What stays: the CUDA
    context and communicators, the non-torch workspaces and the CUDA-graph pools (vLLM docs,
    features/sleep_mode; vllm#32714 reports ~1.1 GB per GPU left at tp=4). Level 0: awake.
    """
    lvl = mem.sleep_level if level is None else level
    if lvl not in (0, 1, 2):
        raise ValueError(f"sleep level must be 0, 1 or 2, got {lvl}")
    if lvl == 0:
        return mem.total_device_bytes
    return mem.cuda_context + mem.non_torch + mem.cuda_graphs


def wake_host_bytes(mem: EngineMemory, level: int | None = None) -> float:
    """Pinned host RAM one TP worker holds while asleep (multiply by tp for the engine).

    Level 1 backs the weights up in pinned CPU memory (docs: "make sure there's enough CPU memory to
    store the model weights"); level 2 keeps only the model's buffers (rope caches: negligible, 0
    here) and expects new weights from the trainer; level 0 holds nothing.
    """
    lvl = mem.sleep_level if level is None else level
    if lvl not in (0, 1, 2):
        raise ValueError(f"sleep level must be 0, 1 or 2, got {lvl}")
    return mem.weights if lvl == 1 else 0.0


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _check_tp(tp: int) -> None:
    if not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tp must be a positive integer, got {tp!r}")


def _shard(n: int, tp: int) -> float:
    """``n / tp`` as vLLM's ``divide`` (exact when divisible; rounded up otherwise, where vLLM
    itself would refuse the tp)."""
    return n // tp if n % tp == 0 else math.ceil(n / tp)


def _group_size(n_attn: int, n_lin: int) -> int:
    """``_get_kv_cache_groups_uniform_page_size``: the smaller layer count, unless the larger one
    is under 1.5x of it (then the larger, with padding layers)."""
    lo, hi = min(n_attn, n_lin), max(n_attn, n_lin)
    return hi if hi < 1.5 * lo else lo


def _gib(b: float) -> str:
    return f"{b / GIB:.2f}"


def _mib(b: float) -> str:
    return f"{b / MIB:.2f}"
