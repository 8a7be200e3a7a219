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
  are never partitioned: ``zero3_partitioned_tensors``), each timed as ``collectives.all_gather_seconds`` (NCCL's
  tuner latency over the nodes the ranks span, then its bytes). Without ZeRO-3 nothing is gathered.
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
  protocol, as ``compute.decode_step`` times an engine's NCCL all-reduce). Under ZeRO-3 each layer of an OPT model
  (separate q, k, v projections) also copies its q, k, v weights and biases into one shared buffer before its QKV
  GEMM, in every forward (``DS_QKV_MERGE_KERNELS_PER_LAYER``): the q, k, v shard read and written once more per step
  (half the layer's weight bytes again) and six more kernels. Host time: transformers' greedy loop runs the layers
  eagerly, no CUDA graphs (DeepSpeed of 2023), and the host pays the rates' ``host_s_per_forward_kernel`` per
  Python-level call that reaches the GPU, not per kernel: five fused-op calls a layer
  (``DS_OPT_DECODE_OP_CALLS_PER_LAYER``, whose 14 kernels are launched from C++), the two all-reduces, the six q/k/v
  copies under ZeRO-3, and the generate loop's ``HF_GREEDY_STEP_KERNELS`` ops; each kernel launched inside a fused op
  beyond the Python call costs the launch latency (``decode_step_host_seconds``). The host reads
  ``unfinished_sequences.max() == 0`` every step (transformers' greedy loop; ``synced_gpus`` under ZeRO-3 adds an
  all-reduced flag), so it cannot queue steps ahead: a step is the larger of its host and device time. At the
  DeepSpeed-Chat release (@e468799f and @3a77097a) ``_generate_sequence`` passed ``min_length = max_length``, so every
  call generates the full answer length.

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

* DeepSpeed-Chat's own step-3 log (microsoft/DeepSpeedExamples @3a77097a7b6ce67b78ea7c05129b90915cfebbb0
  applications/DeepSpeed-Chat/training/step3_rlhf_finetuning/training_log_output/
  actor_opt-1.3b_critic_opt-350m_globalBatchSize64.log, 2023-04-18: OPT-1.3B actor, ZeRO-2, 4 prompts per GPU, 16
  GPUs of 31.7 GiB, hybrid engine, prompts padded to 256): ``Generate time`` median 2.52 s per call (p10 2.44, p90
  2.76, 476 calls). The ``ppo_trainer.py`` of that commit generates with ``min_length = max_length`` (prompt + 256),
  so every call ran exactly 256 tokens: 9.8 ms per step. This model on a V100-SXM2-32GB: 10.2 ms per step
  (host-bound: 148 Python-level calls issuing 364 kernels; the device needs 3.6 ms), 2.64 s per call, +5 %. Priced
  per kernel instead (364 x 65 us) it was 23.7 ms and 6.1 s, 2.4x the log.
* The blog's Figure 6 (deepspeedai/DeepSpeed @862edef46a04b1c4213591de30e8fa23f66cf512
  blogs/assets/images/Throughputs-OPT.png): generation 32.9 / 33.0 / 48.2 / 25.4 TFLOPs per GPU for OPT-6.7B, 13B
  (8 GPUs), 30B (32 GPUs) and 175B (64 GPUs). With DeepSpeed-Chat's FLOP count (dschat/utils/perf.py
  ``print_throughput_step3``, DeepSpeedExamples @83757d9c) that is 26.8 / 51.6 / 20.5 / 113 s per 1024 prompts. This
  model plans 79.4 s for OPT-13B at the release script's 16 prompts per GPU and inference TP 2 (1.5x; host-bound,
  36.5 ms per step against the device's 18 ms) and 15.5 s for OPT-30B at the batch cap of 32 per GPU (1024 / 32
  GPUs; inference TP 2, one call; -24 %). The figure's batch sizes are not published ("the largest that fits",
  BenckmarkSetting.md; DeepSpeedExamples issue #410: 32 per GPU runs out of memory for OPT-13B on 8 A100-80GB, the
  maintainers answer that 16 works), so it pins neither figure; the rates' per-call host cost is kept (as
  ``compute.decode_step`` keeps it for vLLM's eager decode).

Two cheaper host prices were tried and rejected on the published rows (2026-12-03; diagnostic runs, nothing kept):

* The no-grad forward's rate for every Python-level call (``rates.nograd_forward_host_s_per_kernel``, 27.7 us at the
  defaults, since ``generate`` runs under ``torch.no_grad``). This takes the OPT-1.3B step-3 log check above from
  2.64 s a call (+5 %) to 1.22 s (-52 %). The fused ops' 65 us a call stays.
* The six q/k/v copies of ``DS_QKV_MERGE_KERNELS_PER_LAYER`` at the bare-call rate (``host_s_per_backward_kernel``,
  the rate ``inventory.PassInventory.bare_kernels`` takes). They are slice assignments from Python, outside any
  module forward. On this CPU one costs 1.9-2.9 us against 1.2-1.4 us for a bare ``torch.add`` (torch 2.13.0+cpu,
  one thread, no grad, best of 15 rounds of 200, twice). That is two dispatched ops (the slice view and ``copy_``),
  far below a module op's cost. The rows move as follows: DeepSpeed-Chat OPT-30B on 8 A100-80GB +90 -> +40 %, OPT-6.7B
  80GB +35 -> -2 %, OPT-30B 80GB x64 +27 -> -1 %, OPT-66B 80GB x64 +15 -> -5 %, OPT-66B 80GB +9 -> -15 %, OPT-13B 80GB
  +2 -> -19 % (at its script's 16 prompts a GPU, which 8 A100-80GB are reported to fit), OPT-13B 80GB x64 +0 -> -18 %,
  OPT-6.7B 40GB -2 -> -25 %, OPT-13B 40GB -14 -> -32 %, OPT-30B 40GB -22 -> -43 %. The RL-step median goes from 14.5
  to 15.3 %. The 80-GB rows whose batch is not published want less host time. The OPT-13B row at its script's batch,
  and the 40-GB rows, want more. So the copies keep the per-call rate. The OPT-30B 80-GB row stays +90 %, for the
  reason its entry gives: the largest batch that fits, which is not published.

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

DS_OPT_DECODE_OP_CALLS_PER_LAYER = 5
"""Python-level calls that issue a layer's ``DS_OPT_DECODE_KERNELS_PER_LAYER`` kernels: ``QKVGemmOp``,
``SoftmaxContextOp``, ``VectorMatMulOp``, ``MLPGemmOp`` and ``ResidualAddOp`` (deepspeed/ops/transformer/inference/
op_binding/, @47f9f13b), each one pybind call into csrc/transformer/inference/csrc/pt_binding.cpp, whose C++
(``ds_qkv_gemm``, ``ds_softmax_context``, ``ds_vector_matmul``, ``ds_mlp_gemm``, ``residual_add_bias``) launches the
op's 3, 5, 1, 4 and 1 kernels itself: no Python, no dispatcher between them."""

DS_QKV_MERGE_KERNELS_PER_LAYER = 6
"""Copies ``DeepSpeedSelfAttention._merge_qkv`` makes in every forward when the layer has no merged q/k/v weight
(``attn_qkvw`` None): the q, k and v weights, then their biases, each slice-assigned into the one shared
``_qkv_buffers`` (deepspeed/ops/transformer/inference/ds_attention.py ``forward``: ``if self.attn_qkvw is None:
self._attn_qkvw, self._attn_qkvb = self._merge_qkv()``, deepspeedai/DeepSpeed @47f9f13b). The hybrid engine builds
its layers with ``set_empty_params=True`` (``attn_qkvw = None``) and, under ZeRO-3, for a model with separate q, k, v
projections (OPT: ``HFOPTLayerPolicy.get_q_k_v``, containers/opt.py), ``set_params_wo_copy(Z3_enabled=True)`` hands
the layer the three ZeRO-3 parameters and never a merged one (deepspeed/module_inject/containers/base.py); with
``inference_tp_size`` > 1 ``apply_tensor_parallelism`` slices the same three (``attention_q_k_v_mp``). So each decode
step of each layer reads the q, k, v shards and writes them to the buffer before the QKV GEMM reads it."""

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


def zero3_gather_seconds(*, weight_bytes: float, ranks: int, bus_bytes_per_s: float, collectives: int,
                         nodes: int = 1, intra_link: coll.IntraLink = coll.IntraLink.NVLINK) -> float:
    """One full-model ZeRO-3 gather (``GatheredParameters`` over the actor's partitioned parameters): one NCCL
    all-gather per partitioned tensor (``_allgather_params_coalesced``: ``dist.all_gather_into_tensor`` for each,
    queued on one stream), each a ring all-gather of its share (``collectives.all_gather_seconds``: NCCL's tuner
    latency over the ``nodes`` the ``ranks`` span, ``(ranks - 1) / ranks`` of its bytes over the bus); ``collectives``
    tensors of ``weight_bytes`` in all (``zero3_partitioned_tensors``)."""
    if ranks < 1 or bus_bytes_per_s <= 0 or weight_bytes < 0 or collectives < 1:
        raise ValueError("zero3_gather_seconds: ranks >= 1, bus_bytes_per_s > 0, weight_bytes >= 0, collectives >= 1")
    if ranks == 1:
        return 0.0
    return collectives * coll.all_gather_seconds(total_bytes=weight_bytes / collectives, ranks=ranks,
                                                 bus_bytes_per_s=bus_bytes_per_s, nodes=nodes, intra_link=intra_link)


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


def decode_step_kernels(*, num_layers: int, inference_tp: int, qkv_merge: bool = False) -> int:
    """Kernels one eager hybrid-engine decode step launches (layers, their all-reduces, the generate loop);
    ``qkv_merge``: each layer first copies its q, k, v weights and biases into the shared buffer (ZeRO-3)."""
    per_layer = (DS_OPT_DECODE_KERNELS_PER_LAYER + (DS_TP_ALL_REDUCES_PER_LAYER if inference_tp > 1 else 0)
                 + (DS_QKV_MERGE_KERNELS_PER_LAYER if qkv_merge else 0))
    return num_layers * per_layer + HF_GREEDY_STEP_KERNELS


def decode_step_host_seconds(*, num_layers: int, inference_tp: int, qkv_merge: bool, rates: DeviceRates) -> float:
    """Host seconds to issue one eager decode step. The rates' ``host_s_per_forward_kernel`` is the cost of one
    kernel issued from Python (an eager transformers op: module call, dispatch, launch), so it is charged per
    Python-level call that reaches the GPU: the layer's fused ops (``DS_OPT_DECODE_OP_CALLS_PER_LAYER``), its
    all-reduces, the q/k/v copies, and the generate loop's ops (``HF_GREEDY_STEP_KERNELS``). The other kernels a fused
    op launches from C++ pay only the launch itself, charged at the rates' launch latency
    (``device_s_per_kernel_min``)."""
    calls = num_layers * (DS_OPT_DECODE_OP_CALLS_PER_LAYER
                          + (DS_TP_ALL_REDUCES_PER_LAYER if inference_tp > 1 else 0)
                          + (DS_QKV_MERGE_KERNELS_PER_LAYER if qkv_merge else 0)) + HF_GREEDY_STEP_KERNELS
    in_cxx = decode_step_kernels(num_layers=num_layers, inference_tp=inference_tp, qkv_merge=qkv_merge) - calls
    return calls * rates.host_s_per_forward_kernel + in_cxx * rates.device_s_per_kernel_min


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
    qkv_merged_per_forward: bool | None = None,
    gather_bus_bytes_per_s: float | None = None,
    tp_bus_bytes_per_s: float | None = None,
    tp_nodes: int = 1,
    activation_bytes: int = 2,
    zero3_nodes: int = 1,
) -> HybridEngineTime:
    """One rank's generation time for ``sequences_per_gpu`` prompts (module docstring).

    ``generation_batch_per_gpu``: DeepSpeed-Chat's ``per_device_generation_batch_size``; ``layer_weight_bytes``: the
    decoder layers in 16-bit (sliced over ``inference_tp``); ``replicated_weight_bytes``: the embeddings / final norm
    / head every rank holds whole (read once per step through the tied head); ``kv_bytes_per_token``: the whole
    model's K and V per token (all layers, all heads); ``zero3_ranks``: ranks the actor's ZeRO-3 partitions span (1:
    not ZeRO-3, nothing gathered); ``qkv_merged_per_forward``: every forward copies the layer's q, k, v weights into
    one buffer (``DS_QKV_MERGE_KERNELS_PER_LAYER``; default: under ZeRO-3, for OPT's separate q, k, v projections of
    ``hidden_size`` each); ``gather_bus_bytes_per_s`` / ``tp_bus_bytes_per_s``: the all-gather's and the
    tensor-parallel all-reduce's bus bandwidth (default: the node's NCCL bus); ``tp_nodes``: nodes one
    inference tensor-parallel group spans; ``zero3_nodes``: nodes the ``zero3_ranks`` span (NCCL's tuner latency of
    the gathers)."""
    for name, v in (("sequences_per_gpu", sequences_per_gpu), ("generation_batch_per_gpu", generation_batch_per_gpu),
                    ("prompt_len_tokens", prompt_len_tokens), ("response_len_tokens", response_len_tokens),
                    ("num_layers", num_layers), ("hidden_size", hidden_size), ("inference_tp", inference_tp),
                    ("zero3_ranks", zero3_ranks), ("tp_nodes", tp_nodes),
                    ("zero3_nodes", zero3_nodes)):
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
        link = coll.IntraLink.of(nvlink=rates.nvlink)
        gather = zero3_gather_seconds(
            weight_bytes=weights, ranks=zero3_ranks, bus_bytes_per_s=gather_bus, nodes=zero3_nodes, intra_link=link,
            collectives=zero3_partitioned_tensors(num_layers=num_layers, hidden_size=hidden_size))
        if tp > 1:  # the layer groups' shards copied out (apply_tensor_parallelism), then the gathered copy released:
            # one more collective's fixed cost per group, NCCL's tuner latency of an all-gather over the ZeRO-3 ranks
            # (its cheapest protocol's latency, collectives.nccl_collective_choices)
            group_s = min(c.latency_s for c in coll.nccl_collective_choices(
                collective="all_gather", ranks=zero3_ranks, nodes=zero3_nodes, bus_bytes_per_s=gather_bus,
                intra_link=link))
            gather += layer_weight_bytes / tp / rates.hbm_bytes_per_s + groups * group_s

    merge = zero3_ranks > 1 if qkv_merged_per_forward is None else qkv_merged_per_forward
    # the q, k, v shards read and written to the shared buffer in every forward (DS_QKV_MERGE_KERNELS_PER_LAYER)
    merge_bytes = 2.0 * num_layers * 3 * hidden_size ** 2 * activation_bytes / tp if merge else 0.0

    # prefill: one forward over every prompt of the engine's batch
    prefill_tokens = batch * prompt_len_tokens
    prefill_flops = (2.0 * matmul_params * prefill_tokens
                     + 4.0 * batch * prompt_len_tokens ** 2 * hidden_size * num_layers) / tp
    prefill_bytes = (layer_weight_bytes / tp + replicated_weight_bytes + merge_bytes
                     + prefill_tokens * kv_bytes_per_token / tp)
    prefill = max(prefill_flops / rates.matmul_flops_per_s, prefill_bytes / rates.hbm_bytes_per_s)
    kernels = decode_step_kernels(num_layers=num_layers, inference_tp=tp, qkv_merge=merge)
    host_s = decode_step_host_seconds(num_layers=num_layers, inference_tp=tp, qkv_merge=merge, rates=rates)
    prefill += host_s  # the prompt's forward is launched like a step
    tp_comm = 0.0
    if tp > 1:
        # DeepSpeed-Inference's dist.all_reduce (torch.distributed on NCCL) of the step's activations, twice a layer:
        # NCCL's tuner picks the algorithm and protocol (collectives.nccl_all_reduce_seconds, as compute.decode_step
        # times an engine's NCCL all-reduce)
        def all_reduce(nbytes: float) -> float:
            return coll.nccl_all_reduce_seconds(
                total_bytes=nbytes, ranks=tp, nodes=tp_nodes, bus_bytes_per_s=tp_bus,
                intra_link=coll.IntraLink.of(nvlink=rates.nvlink),
                net_step_excess_s=coll.NCCL_NET_STEP_EXCESS_S)

        msg = batch * hidden_size * activation_bytes
        tp_comm = num_layers * DS_TP_ALL_REDUCES_PER_LAYER * all_reduce(msg)
        prefill += num_layers * DS_TP_ALL_REDUCES_PER_LAYER * all_reduce(msg * prompt_len_tokens)

    # decode: response_len steps of the whole static batch; the KV read grows linearly with the context, so the
    # mean step is the step at the mean context
    mean_context = prompt_len_tokens + (response_len_tokens - 1) / 2.0
    step_bytes = (layer_weight_bytes / tp + replicated_weight_bytes + merge_bytes
                  + batch * mean_context * kv_bytes_per_token / tp)
    bandwidth_s = step_bytes / rates.hbm_bytes_per_s
    compute_s = 2.0 * matmul_params * batch / tp / rates.matmul_flops_per_s
    device_s = max(bandwidth_s, compute_s, kernels * rates.device_s_per_kernel_min) + tp_comm
    step = max(host_s, device_s)
    bound = "host" if host_s >= device_s else ("bandwidth" if bandwidth_s >= compute_s else "compute")
    decode = response_len_tokens * step

    per_call = prefill + decode
    total = calls * (gather + per_call)
    notes = (
        f"DeepSpeed Hybrid Engine: {calls} generate call(s) per rank of {b} prompt(s) per GPU"
        + (f" (x{tp} inference TP: {batch} sequences per engine)" if tp > 1 else "")
        + f", static batch to {response_len_tokens} tokens",
        f"decode step {step * 1e3:.1f} ms ({bound}: host {host_s * 1e3:.1f} ms to issue {kernels} eager kernels,"
        f" device {device_s * 1e3:.1f} ms)",
    ) + ((f"ZeRO-3 gather of the actor over {zero3_ranks} ranks: {gather:.2f} s per call",) if gather else ())
    return HybridEngineTime(total_s=total, gather_s=calls * gather, prefill_s=calls * prefill,
                            decode_s=calls * decode, calls=calls, batch_per_engine=batch, decode_step_s=step,
                            bound=bound, notes=notes)
