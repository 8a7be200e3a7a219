"""Generation time of DeepSpeed's Hybrid Engine (DeepSpeed-Chat step 3): a static batch through transformers'
``generate`` on DeepSpeed-Inference's fused layers.

What the engine does, per generation call (sources below):

* **ZeRO-3 gather** (actor under ZeRO stage 3 with ``pin_parameters``, DeepSpeed-Chat's default: its ``--unpinned``
  flag is off). ``DeepSpeedHybridEngine.generate`` gathers the actor's partitioned parameters before it generates:
  with ``inference_tp_size`` 1 all layers at once (``GatheredParameters(non_active_layers)``); with more, groups of
  ``tp_gather_partition_size`` layers, each sliced to the rank's tensor-parallel shard
  (``apply_tensor_parallelism``) and released, then the embeddings / final norm / head for the call. Either way every
  rank receives the whole bf16/fp16 model once per call: ``(ranks - 1) / ranks`` of the weight bytes over the
  gather's bus, as one NCCL all-gather per partitioned tensor (``_allgather_params_coalesced`` issues a
  ``dist.all_gather_into_tensor`` for each; tensors of at most DeepSpeed-Chat's persistence threshold, 1e4 elements,
  are never partitioned: ``zero3_partitioned_tensors``), each timed as ``collectives.all_gather_seconds`` (launch and
  per-hop ring latency, then its bytes). Without ZeRO-3 nothing is gathered.
* **The batch**: every rank brings ``per_device_generation_batch_size`` prompts; with ``inference_tp_size`` > 1 the
  tensor-parallel group all-gathers its prompts (``dist.all_gather_into_tensor(output, input_cont,
  group=self.mp_group)``) and each rank runs the whole ``tp x per-device`` batch on its 1/tp weight shard, then keeps
  its own rows. No continuous batching: the batch is one tensor until ``max_length`` (DeepSpeed-Chat
  ``_generate_sequence``: ``max_length = max_answer_seq_len + prompt length``, ``synced_gpus`` under ZeRO-3, so every
  rank keeps stepping until all ranks are done; the published benchmark generates a fixed 256 tokens).
* **Prefill**: the prompts in one forward (compute: ``2 x matmul params x tokens / tp`` plus the unfused
  attention's ``QK^T`` and ``PV`` over the whole prompt, ``4 x batch x prompt^2 x hidden x layers / tp``).
* **Decode**, one token of every sequence per step: device time is the weight shard (layers / tp, plus the embedding /
  head that every rank holds whole: the non-tensor-parallel parameters) and the KV cache read once from HBM (the
  step's matmuls at batch <= a few hundred are bandwidth-bound; the compute floor is kept), plus two all-reduces per
  layer when tp > 1 (torch.distributed on NCCL: ``collectives.nccl_all_reduce_seconds``, NCCL's tuned algorithm and
  protocol, as ``compute.decode_step`` times an engine's NCCL all-reduce). Host time: transformers' greedy loop
  launches every kernel eagerly, no CUDA graphs (DeepSpeed of 2023); per step ``layers x
  DS_OPT_DECODE_KERNELS_PER_LAYER (+ 2 all-reduces) + HF_GREEDY_STEP_KERNELS`` kernels at the rates'
  ``host_s_per_forward_kernel``. ``synced_gpus`` makes every step wait for an all-reduced flag
  (``this_peer_finished``, read on the host), so the host cannot queue steps ahead: a step is the larger of its host
  and device time.

Kernel counts, DeepSpeed 0.9.0 (deepspeedai/DeepSpeed @47f9f13bd3236d426d558d61ef358b36191ef026, the "DeepSpeed Chat"
commit of 2023-04-11; fp16 OPT, pre-LayerNorm, one token): ``ds_qkv_gemm`` (layer norm, GEMM, bias add: 3),
``ds_softmax_context`` (``launch_bias_add_transform_0213``, ``attention_unfused``: score batched GEMM, softmax,
context batched GEMM, ``launch_transform4d_0213``: 5), ``ds_vector_matmul`` (output projection: 1), ``ds_mlp_gemm``
(``launch_fused_residual_ln``, GEMM, ``launch_bias_relu``, GEMM: 4), ``residual_add_bias`` (``launch_bias_residual``:
1): 14 (csrc/transformer/inference/csrc/pt_binding.cpp, deepspeed/ops/transformer/inference/ds_attention.py,
ds_mlp.py, deepspeed/model_implementations/transformers/ds_transformer.py). transformers passes OPT's float 4-D
mask, so ``compute_attention`` adds no mask kernels. The hybrid engine's control flow: deepspeed/runtime/hybrid_engine.py
``generate`` and ``_zero3_forward`` at the same commit; its defaults (``pin_parameters`` True,
``tp_gather_partition_size`` 8, ``release_inference_cache`` False): deepspeed/runtime/config.py ``HybridEngineConfig``.
DeepSpeed-Chat: microsoft/DeepSpeedExamples @83757d9c937daabd1089a08051061706cb73900d
applications/DeepSpeed-Chat/dschat/rlhf/ppo_trainer.py ``_generate_sequence`` / ``generate_experience``,
training/step3_rlhf_finetuning/main.py (``--per_device_generation_batch_size`` 16, ``--inference_tp_size`` 1,
``--tp_gather_partition_size`` 8, ``--actor_zero_stage``), dschat/utils/ds_utils.py ``get_train_ds_config``.

Checks (nothing here is fitted to them):

* DeepSpeed-Chat's own step-3 log (microsoft/DeepSpeedExamples @83757d9c applications/DeepSpeed-Chat/training/
  step3_rlhf_finetuning/training_log_output/actor_opt-1.3b_critic_opt-350m_globalBatchSize64.log, 2023-04-18: OPT-1.3B
  actor, ZeRO-2, 4 prompts per GPU, 16 GPUs of 31.7 GiB, hybrid engine): ``Generate time`` median 2.52 s per call
  (p10 2.44, p90 2.76, 476 calls). This model on a V100-SXM2-32GB: 23.7 ms per step (host-bound, 364 kernels), 6.1 s for
  256 tokens, 2.5 s for 104: equal if the longest of a rank's 4 greedy answers averages ~104 tokens (the log prints no
  lengths; without ZeRO-3 ``synced_gpus`` is off and a rank stops at its own longest answer). So the log bounds the
  per-kernel host cost from below (>= 27 us if every call ran 256 tokens), not from above.
* The blog's Figure 6 (deepspeedai/DeepSpeed @862edef46a04b1c4213591de30e8fa23f66cf512
  blogs/assets/images/Throughputs-OPT.png): generation 32.9 / 33.0 / 25.4 TFLOPs per GPU for OPT-6.7B, 13B (8 GPUs)
  and 175B (64 GPUs). With DeepSpeed-Chat's FLOP count (dschat/utils/perf.py ``print_throughput_step3``,
  DeepSpeedExamples @83757d9c) that is 26.8 / 51.6 / 113 s per 1024 prompts. This model with the release scripts'
  settings (13B: 16 per GPU, inference TP 2) plans 93.6 s for OPT-13B: 1.8x slower, all of it the host's 43 ms per
  step at 65 us per kernel (the device needs 12-16 ms); ~35 us per kernel would match. The figure's batch sizes are not
  published ("the largest that fits", BenckmarkSetting.md), so it does not pin the per-kernel cost either; the
  rates' transformers figure is kept (as ``compute.decode_step`` keeps it for vLLM's eager decode).

Not modelled: the unpinned path (``pin_parameters`` False: every layer re-gathered inside every forward, so once per
decode step), ``release_inference_cache`` (workspace freed and rebuilt per call), LoRA fuse/unfuse (a few element-wise
passes over the weights per call), the LoRA adapters' own gathers (two more partitioned tensors per adapted linear:
their launch latencies only), and sequences that all end early (greedy decoding stops when every rank's batch
has hit EOS; the published benchmark forces the full length).

Pure: no torch, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from trainfit.compute import collectives as coll
from trainfit.compute.rates import DeviceRates

DS_OPT_DECODE_KERNELS_PER_LAYER = 14
"""Kernels one DeepSpeed-Inference OPT layer launches per decode step (module docstring); two more all-reduces at
``inference_tp_size`` > 1 (``ds_attention.py`` and ``ds_mlp.py``: ``dist.all_reduce(..., group=self.mp_group)``)."""

DS_TP_ALL_REDUCES_PER_LAYER = 2

DSCHAT_PARAM_PERSISTENCE_THRESHOLD = 1e4
"""``stage3_param_persistence_threshold`` of DeepSpeed-Chat's training config (microsoft/DeepSpeedExamples
@e468799f19423d7a045c726ff89a53086bc379fa applications/DeepSpeed-Chat/training/utils/ds_utils.py
``get_train_ds_config``): ZeRO-3 keeps a parameter of at most this many elements whole on every rank
(deepspeed/runtime/zero/partition_parameters.py ``param.ds_numel <= Init.param_persistence_threshold``,
deepspeedai/DeepSpeed @47f9f13bd3236d426d558d61ef358b36191ef026), so it is never gathered."""

HF_GREEDY_STEP_KERNELS = 28
"""Kernels of one step of transformers' ``greedy_search`` around the layers (transformers 4.28, April 2023, counted
approximately): with ``synced_gpus`` the peer-finished flag's host-to-device copy, all-reduce and host read (3); the
OPT decoder's prologue: token embedding, learned positions from the mask (cumsum, type cast, multiply, subtract,
embedding: 5), the expanded causal + padding mask (about 6), the embedding add (1); epilogue: final layer norm, tied
head GEMM, last-position slice copy (3); the greedy step: argmax, the finished-sequence blend (3), appending the token
and the mask (2), the EOS check and its reduction (2). A model-independent count; the layers dominate (OPT-13B: 560
layer kernels)."""


@dataclass(frozen=True)
class HybridEngineTime:
    """Seconds of one rank's generation for its share of an RL step (every rank runs the same calls in lockstep)."""

    total_s: float
    gather_s: float
    prefill_s: float
    decode_s: float
    calls: int
    batch_per_engine: int
    decode_step_s: float
    """Mean decode step (over the growing context)."""
    bound: str
    """What bounds the mean decode step: ``host`` (eager launches), ``bandwidth`` or ``compute``."""
    notes: tuple[str, ...]


def zero3_gather_seconds(*, weight_bytes: float, ranks: int, bus_bytes_per_s: float, collective_latency_s: float,
                         collectives: int) -> float:
    """One full-model ZeRO-3 gather (``GatheredParameters`` over the actor's partitioned parameters): one NCCL
    all-gather per partitioned tensor (``_allgather_params_coalesced``: ``dist.all_gather_into_tensor`` for each,
    queued on one stream), each a ring all-gather of its share (``collectives.all_gather_seconds``: launch latency,
    the ring's per-hop latency, ``(ranks - 1) / ranks`` of its bytes over the bus); ``collectives`` tensors of
    ``weight_bytes`` in all (``zero3_partitioned_tensors``)."""
    if ranks < 1 or bus_bytes_per_s <= 0 or weight_bytes < 0 or collectives < 1:
        raise ValueError("zero3_gather_seconds: ranks >= 1, bus_bytes_per_s > 0, weight_bytes >= 0, collectives >= 1")
    if ranks == 1:
        return 0.0
    return collectives * coll.all_gather_seconds(total_bytes=weight_bytes / collectives, ranks=ranks,
                                                 bus_bytes_per_s=bus_bytes_per_s, latency_s=collective_latency_s)


def zero3_partitioned_tensors(*, num_layers: int, hidden_size: int,
                              persistence_threshold: float = DSCHAT_PARAM_PERSISTENCE_THRESHOLD) -> int:
    """Tensors of an OPT decoder that ZeRO-3 partitions, so one all-gather each per gather: those of more than
    ``persistence_threshold`` elements (smaller ones stay whole on every rank, ``ds_persist``). Per layer the four
    attention and two MLP matrices, the fc1 bias (4 x hidden) and, above the threshold, the nine hidden-sized
    vectors (q, k, v, out and fc2 biases, two layer norms' weight and bias); then the token and position
    embeddings and the final layer norm's two vectors. LoRA adapters (two more tensors per adapted linear) are not
    counted."""
    h = hidden_size
    per_layer = 6 + (4 * h > persistence_threshold) + 9 * (h > persistence_threshold)
    return num_layers * per_layer + 2 + 2 * (h > persistence_threshold)


def decode_step_kernels(*, num_layers: int, inference_tp: int) -> int:
    """Kernels one eager hybrid-engine decode step launches (layers, their all-reduces, the generate loop)."""
    per_layer = DS_OPT_DECODE_KERNELS_PER_LAYER + (DS_TP_ALL_REDUCES_PER_LAYER if inference_tp > 1 else 0)
    return num_layers * per_layer + HF_GREEDY_STEP_KERNELS


def hybrid_engine_generation_time(
    *,
    rates: DeviceRates,
    sequences_per_gpu: int,
    generation_batch_per_gpu: int,
    prompt_len_tokens: int,
    response_len_tokens: int,
    num_layers: int,
    hidden_size: int,
    matmul_params: float,
    layer_weight_bytes: float,
    replicated_weight_bytes: float,
    kv_bytes_per_token: float,
    inference_tp: int = 1,
    zero3_ranks: int = 1,
    gather_bus_bytes_per_s: float | None = None,
    tp_bus_bytes_per_s: float | None = None,
    tp_nodes: int = 1,
    activation_bytes: int = 2,
) -> HybridEngineTime:
    """One rank's generation time for ``sequences_per_gpu`` prompts (module docstring).

    ``generation_batch_per_gpu``: DeepSpeed-Chat's ``per_device_generation_batch_size``; ``layer_weight_bytes``: the
    decoder layers in 16-bit (sliced over ``inference_tp``); ``replicated_weight_bytes``: the embeddings / final norm
    / head every rank holds whole (read once per step through the tied head); ``kv_bytes_per_token``: the whole
    model's K and V per token (all layers, all heads); ``zero3_ranks``: ranks the actor's ZeRO-3 partitions span (1:
    not ZeRO-3, nothing gathered); ``gather_bus_bytes_per_s`` / ``tp_bus_bytes_per_s``: the all-gather's and the
    tensor-parallel all-reduce's bus bandwidth (default: the node's NCCL bus); ``tp_nodes``: nodes one
    inference tensor-parallel group spans."""
    for name, v in (("sequences_per_gpu", sequences_per_gpu), ("generation_batch_per_gpu", generation_batch_per_gpu),
                    ("prompt_len_tokens", prompt_len_tokens), ("response_len_tokens", response_len_tokens),
                    ("num_layers", num_layers), ("hidden_size", hidden_size), ("inference_tp", inference_tp),
                    ("zero3_ranks", zero3_ranks), ("tp_nodes", tp_nodes)):
        if v < 1:
            raise ValueError(f"hybrid_engine_generation_time: {name} must be >= 1, got {v}")
    for name, f in (("matmul_params", matmul_params), ("layer_weight_bytes", layer_weight_bytes),
                    ("replicated_weight_bytes", replicated_weight_bytes), ("kv_bytes_per_token", kv_bytes_per_token)):
        if f < 0:
            raise ValueError(f"hybrid_engine_generation_time: {name} must be >= 0, got {f}")
    tp = inference_tp
    bus = rates.intra_node_bus_bytes_per_s
    gather_bus = gather_bus_bytes_per_s or bus
    tp_bus = tp_bus_bytes_per_s or bus
    b = min(generation_batch_per_gpu, sequences_per_gpu)
    calls = ceil(sequences_per_gpu / b)
    batch = b * tp  # the tensor-parallel group's prompts, all-gathered
    weights = layer_weight_bytes + replicated_weight_bytes

    gather = 0.0
    if zero3_ranks > 1:
        groups = ceil(num_layers / 8) if tp > 1 else 1  # tp_gather_partition_size 8 (HybridEngineConfig default)
        gather = zero3_gather_seconds(
            weight_bytes=weights, ranks=zero3_ranks, bus_bytes_per_s=gather_bus,
            collective_latency_s=rates.collective_latency_s,
            collectives=zero3_partitioned_tensors(num_layers=num_layers, hidden_size=hidden_size))
        if tp > 1:  # the layer groups' shards copied out (apply_tensor_parallelism), then the gathered copy released
            gather += layer_weight_bytes / tp / rates.hbm_bytes_per_s + groups * rates.collective_latency_s

    # prefill: one forward over every prompt of the engine's batch
    prefill_tokens = batch * prompt_len_tokens
    prefill_flops = (2.0 * matmul_params * prefill_tokens
                     + 4.0 * batch * prompt_len_tokens ** 2 * hidden_size * num_layers) / tp
    prefill_bytes = layer_weight_bytes / tp + replicated_weight_bytes + prefill_tokens * kv_bytes_per_token / tp
    prefill = max(prefill_flops / rates.matmul_flops_per_s, prefill_bytes / rates.hbm_bytes_per_s)
    kernels = decode_step_kernels(num_layers=num_layers, inference_tp=tp)
    prefill += kernels * rates.host_s_per_forward_kernel  # the prompt's forward is launched like a step
    tp_comm = 0.0
    if tp > 1:
        # DeepSpeed-Inference's dist.all_reduce (torch.distributed on NCCL) of the step's activations, twice a layer:
        # NCCL's tuner picks the algorithm and protocol (collectives.nccl_all_reduce_seconds, as compute.decode_step
        # times an engine's NCCL all-reduce)
        def all_reduce(nbytes: float) -> float:
            return coll.nccl_all_reduce_seconds(
                total_bytes=nbytes, ranks=tp, nodes=tp_nodes, bus_bytes_per_s=tp_bus,
                intra_link=coll.IntraLink.NVLINK if rates.nvlink else coll.IntraLink.PCIE,
                net_step_excess_s=coll.NCCL_NET_STEP_EXCESS_S)

        msg = batch * hidden_size * activation_bytes
        tp_comm = num_layers * DS_TP_ALL_REDUCES_PER_LAYER * all_reduce(msg)
        prefill += num_layers * DS_TP_ALL_REDUCES_PER_LAYER * all_reduce(msg * prompt_len_tokens)

    # decode: response_len steps of the whole static batch; the KV read grows linearly with the context, so the
    # mean step is the step at the mean context
    mean_context = prompt_len_tokens + (response_len_tokens - 1) / 2.0
    step_bytes = layer_weight_bytes / tp + replicated_weight_bytes + batch * mean_context * kv_bytes_per_token / tp
    bandwidth_s = step_bytes / rates.hbm_bytes_per_s
    compute_s = 2.0 * matmul_params * batch / tp / rates.matmul_flops_per_s
    device_s = max(bandwidth_s, compute_s, kernels * rates.device_s_per_kernel_min) + tp_comm
    host_s = kernels * rates.host_s_per_forward_kernel
    step = max(host_s, device_s)
    bound = "host" if host_s >= device_s else ("bandwidth" if bandwidth_s >= compute_s else "compute")
    decode = response_len_tokens * step

    per_call = prefill + decode
    total = calls * (gather + per_call)
    notes = (
        f"DeepSpeed Hybrid Engine: {calls} generate call(s) per rank of {b} prompt(s) per GPU"
        + (f" (x{tp} inference TP: {batch} sequences per engine)" if tp > 1 else "")
        + f", static batch to {response_len_tokens} tokens",
        f"decode step {step * 1e3:.1f} ms ({bound}: host {host_s * 1e3:.1f} ms for {kernels} eager kernels,"
        f" device {device_s * 1e3:.1f} ms)",
    ) + ((f"ZeRO-3 gather of the actor over {zero3_ranks} ranks: {gather:.2f} s per call",) if gather else ())
    return HybridEngineTime(total_s=total, gather_s=calls * gather, prefill_s=calls * prefill,
                            decode_s=calls * decode, calls=calls, batch_per_engine=batch, decode_step_s=step,
                            bound=bound, notes=notes)
