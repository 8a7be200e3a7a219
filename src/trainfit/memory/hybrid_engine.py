"""GPU memory of DeepSpeed's Hybrid Engine (DeepSpeed-Chat step 3, ``rollout.engine: deepspeed_hybrid``).

The actor generates on the training GPUs through DeepSpeed-Inference's fused layers; its time is in
``trainfit.compute.hybrid_engine``. What it adds to the memory of the colocated PPO models (actor, reference,
critic, reward, planned elsewhere), per rank, DeepSpeed 0.9.0 (deepspeedai/DeepSpeed
@47f9f13bd3236d426d558d61ef358b36191ef026, the "DeepSpeed Chat" commit of 2023-04-11):

* **The gathered actor** (ZeRO stage 3 with ``pin_parameters``, DeepSpeed-Chat's default; deepspeed/runtime/
  hybrid_engine.py ``generate``). ``inference_tp_size`` 1: ``GatheredParameters(non_active_layers)`` over every
  parameter of the actor, so the whole 16-bit model is allocated on every rank for the call, beside the rank's
  own ZeRO-3 partition (the gathered ``param.data`` is a new full-size buffer). ``inference_tp_size`` > 1: layers
  come in groups of ``tp_gather_partition_size``; while a group is gathered (whole), each layer's
  ``apply_tensor_parallelism`` allocates its rank's 1/tp slice of the four matrices and their biases as new
  tensors (deepspeed/module_inject/containers/base.py ``attention_q_k_v_mp``, ``attention_o_mp``,
  ``mlp_inter_mp``, ``mlp_output_mp`` with ``allocat_tensor=True``); the group is released and the next comes in.
  Then ``gc.collect(); empty_cache()`` and the non-tensor-parallel parameters (embeddings, learned positions,
  final norm, every layer's two norms: the ``_other_layers`` and ``layer_params[i][:4]``) are gathered whole for
  the call; the slices are deleted after it (``release_memory``). Peak of the gather: all slices plus one group
  whole; during the call: all slices plus the non-tensor-parallel parameters.
  Without ZeRO-3 the containers are views of the training weights (``set_params_wo_copy``): nothing is gathered.
* **The inference workspace** (csrc/transformer/inference/includes/inference_context.h ``GenWorkSpace``, called by
  the first layer's first forward, deepspeed/model_implementations/transformers/ds_transformer.py): one
  ``cudaMalloc`` outside PyTorch's caching allocator of ``(activation + temp + cache) x max_seq_len`` elements of
  the 16-bit dtype, with ``B`` the engine's batch (per-GPU prompts x ``inference_tp_size``: the tensor-parallel
  group all-gathers its prompts), ``H`` heads, ``d`` = the head size padded to 32/64/128 (kept above 128),
  ``L`` layers, ``tp`` = ``mp_size``:
  ``activation = 10·H·d·B``, ``temp = B·(H/tp)·max_out_tokens``, ``cache = L·B·(H·d/tp)·2`` (the key/value
  cache of every layer: the engine's KV cache lives here, not in transformers' ``past_key_values``).
  ``max_seq_len = min(max_out_tokens, (free - minimal) / 2 / (activation + temp + cache))`` with
  ``minimal = temp + 500 MiB`` (``MEGABYTE`` = 2^20; 100 MiB when less than 1 GiB is free), ``free`` read by
  ``cudaMemGetInfo`` at the first call; the hybrid engine passes ``min_out_tokens = max_out_tokens``
  (``HybridEngineConfig.max_out_tokens``, 512 by default, deepspeed/runtime/config.py), so the call fails
  ("Workspace can't be allocated, not enough memory") unless the whole ``max_out_tokens`` fits: the workspace is
  always ``(activation + temp + cache) x max_out_tokens x 2`` bytes, and needs ``minimal`` more free beside it.
  ``release_inference_cache`` is False by default (DeepSpeed-Chat's ``--release_inference_cache`` off): the
  workspace is never freed, so it stays through the training passes that follow.
* **The QKV merge buffer**: under ZeRO-3 the containers keep q, k and v apart, and every attention forward copies
  them into one class-level buffer of ``3 x hidden/tp x hidden`` 16-bit elements (plus the bias), allocated once
  when the first inference layer is built and never freed (deepspeed/ops/transformer/inference/ds_attention.py
  ``DeepSpeedSelfAttention._qkv_buffers``, ``_merge_qkv``).
* **The call's transients** in PyTorch's allocator: transformers' OPT forward returns the logits of every prompt
  position at the prefill (``lm_head(outputs[0])``, 16-bit, ``B x prompt x V``); a LoRA actor fuses each adapter
  into its gathered weight (``weight.data += scaling * matmul(left.t(), right.t())``: one product the size of
  the largest matrix at a time).

Coexisting at the generation peak: everything the training ranks keep between passes (actor, reference, critic
and reward partitions, optimizer states), the gathered weights, the workspace, the QKV buffer and the prefill logits.
The workspace and the QKV buffer then stay beside every later pass of the step.

Not modelled: ``pin_parameters`` False (layers gathered one at a time inside each forward), the workspace's
fallback when less than 1 GiB is free (100 MiB margin), ``release_inference_cache`` (freed per call and retaken).

Pure: no torch, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.units import MIB

HE_MAX_OUT_TOKENS = 512
"""``HybridEngineConfig.max_out_tokens`` default (deepspeed/runtime/config.py @47f9f13b); DeepSpeed-Chat's
release (microsoft/DeepSpeedExamples @e468799f19423d7a045c726ff89a53086bc379fa
applications/DeepSpeed-Chat/training/utils/ds_utils.py ``get_train_ds_config``) does not set it."""

HE_TP_GATHER_PARTITION_LAYERS = 8
"""``HybridEngineConfig.tp_gather_partition_size`` default (DeepSpeed-Chat ``--tp_gather_partition_size`` 8;
its multi_node/run_66b.sh passes 4)."""

WORKSPACE_MARGIN_BYTES = 500 * MIB
"""``GenWorkSpace``'s ``minimal_requirements`` margin when more than 1 GiB is free (inference_context.h)."""


def padded_head_size(head_dim: int) -> int:
    """``GenWorkSpace``'s effective head size: 32, 64 or 128 (flash-attention padding), the real one above 128."""
    if head_dim > 128:
        return head_dim
    return 32 if head_dim <= 32 else (64 if head_dim <= 64 else 128)


@dataclass(frozen=True, slots=True)
class WorkspaceBytes:
    """The inference workspace of one rank (module docstring)."""

    activation_elems_per_token: int
    temp_elems_per_token: int
    cache_elems_per_token: int
    workspace_bytes: float
    """The ``cudaMalloc`` of ``GenWorkSpace`` at ``max_out_tokens``."""
    kv_cache_bytes: float
    """Its key/value part (``cache x max_out_tokens x 2``)."""
    free_needed_bytes: float
    """Free device memory the first call needs (workspace + ``minimal_requirements``), else it raises."""


def inference_workspace_bytes(*, hidden_size: int, num_heads: int, head_dim: int, num_layers: int,
                              engine_batch_sequences: int, inference_tp: int,
                              max_out_tokens: int = HE_MAX_OUT_TOKENS, dtype_bytes: int = 2) -> WorkspaceBytes:
    """``GenWorkSpace`` of DeepSpeed 0.9.0 for ``engine_batch_sequences`` (per-GPU prompts x ``inference_tp``)."""
    if min(hidden_size, num_heads, head_dim, num_layers, engine_batch_sequences, inference_tp, max_out_tokens,
           dtype_bytes) < 1:
        raise ValueError("inference_workspace_bytes: every size >= 1")
    del hidden_size  # GenWorkSpace uses heads x padded head size, not the hidden size
    d = padded_head_size(head_dim)
    b = engine_batch_sequences
    activation = 10 * num_heads * d * b
    temp = b * (num_heads // inference_tp) * max_out_tokens
    cache = num_layers * b * ((num_heads * d) // inference_tp) * 2
    ws = float(activation + temp + cache) * max_out_tokens * dtype_bytes
    return WorkspaceBytes(
        activation_elems_per_token=activation, temp_elems_per_token=temp, cache_elems_per_token=cache,
        workspace_bytes=ws, kv_cache_bytes=float(cache) * max_out_tokens * dtype_bytes,
        free_needed_bytes=ws + temp + WORKSPACE_MARGIN_BYTES,
    )


@dataclass(frozen=True, slots=True)
class GatheredActorBytes:
    """The actor's 16-bit weights the hybrid engine holds on one rank beyond its ZeRO-3 partition."""

    gather_peak_bytes: float
    """While the layers are gathered (tp > 1: all slices + one group whole)."""
    generate_bytes: float
    """During the generate call (tp 1: the whole model; tp > 1: all slices + the non-tensor-parallel parameters)."""


def gathered_actor_bytes(*, layer_weight_bytes: float, other_weight_bytes: float, num_layers: int,
                         inference_tp: int, zero3: bool,
                         gather_partition_layers: int = HE_TP_GATHER_PARTITION_LAYERS) -> GatheredActorBytes:
    """``layer_weight_bytes``: the decoder layers' 16-bit weights (all layers, whole model); ``other_weight_bytes``:
    the rest (embeddings, learned positions, final norm), which every rank gathers whole."""
    if num_layers < 1 or inference_tp < 1 or gather_partition_layers < 1 or min(layer_weight_bytes,
                                                                                 other_weight_bytes) < 0:
        raise ValueError("gathered_actor_bytes: num_layers, inference_tp, gather_partition_layers >= 1; bytes >= 0")
    if not zero3:
        return GatheredActorBytes(0.0, 0.0)
    whole = layer_weight_bytes + other_weight_bytes
    if inference_tp == 1:
        return GatheredActorBytes(whole, whole)
    per_layer = layer_weight_bytes / num_layers
    slices = layer_weight_bytes / inference_tp
    group = min(gather_partition_layers, num_layers) * per_layer
    return GatheredActorBytes(slices + group, slices + other_weight_bytes)


def qkv_merge_buffer_bytes(*, hidden_size: int, inference_tp: int, dtype_bytes: int = 2) -> float:
    """``DeepSpeedSelfAttention._qkv_buffers``: the merged q/k/v weight and bias of one layer's rank slice, allocated
    when the first inference layer is built whatever the ZeRO stage (only ZeRO-3's split q/k/v fill it)."""
    per = hidden_size // inference_tp * 3
    return float(per * hidden_size + per) * dtype_bytes


def prefill_logits_bytes(*, engine_batch_sequences: int, prompt_len_tokens: int, vocab_size: int,
                         dtype_bytes: int = 2) -> float:
    """transformers' OPT forward at the prefill: the 16-bit logits of every prompt position."""
    return float(engine_batch_sequences) * prompt_len_tokens * vocab_size * dtype_bytes


def lora_fuse_bytes(*, largest_matrix_elems: int, lora: bool, dtype_bytes: int = 2) -> float:
    """``fuse_lora``: the adapter product ``matmul(left.t(), right.t())`` of one weight, alive while it is added."""
    return float(largest_matrix_elems) * dtype_bytes if lora else 0.0


@dataclass(frozen=True, slots=True)
class HybridEngineMemory:
    """One rank's hybrid-engine bytes beside the training state: ``generation`` in PyTorch's allocator (the
    gathered weights and the call's transients at its peak), ``workspace`` outside it (resident from the first
    call on)."""

    generation_bytes: float
    workspace_bytes: float
    qkv_buffer_bytes: float
    gathered: GatheredActorBytes
    workspace: WorkspaceBytes
    logits_bytes: float
    lora_fuse_bytes: float

    @property
    def resident_bytes(self) -> float:
        """What stays from the first call on: the workspace and the QKV merge buffer."""
        return self.workspace_bytes + self.qkv_buffer_bytes


def hybrid_engine_memory(*, hidden_size: int, num_heads: int, head_dim: int, num_layers: int, vocab_size: int,
                         layer_weight_bytes: float, other_weight_bytes: float, largest_matrix_elems: int,
                         per_gpu_prompts: int, prompt_len_tokens: int, inference_tp: int, zero3: bool, lora: bool,
                         max_out_tokens: int = HE_MAX_OUT_TOKENS,
                         gather_partition_layers: int = HE_TP_GATHER_PARTITION_LAYERS) -> HybridEngineMemory:
    """The hybrid engine's memory for one generate call of ``per_gpu_prompts`` prompts per GPU."""
    batch = per_gpu_prompts * inference_tp
    ws = inference_workspace_bytes(hidden_size=hidden_size, num_heads=num_heads, head_dim=head_dim,
                                   num_layers=num_layers, engine_batch_sequences=batch, inference_tp=inference_tp,
                                   max_out_tokens=max_out_tokens)
    g = gathered_actor_bytes(layer_weight_bytes=layer_weight_bytes, other_weight_bytes=other_weight_bytes,
                             num_layers=num_layers, inference_tp=inference_tp, zero3=zero3,
                             gather_partition_layers=gather_partition_layers)
    logits = prefill_logits_bytes(engine_batch_sequences=batch, prompt_len_tokens=prompt_len_tokens,
                                  vocab_size=vocab_size)
    fuse = lora_fuse_bytes(largest_matrix_elems=largest_matrix_elems, lora=lora)
    # tp 1: the adapters are fused into the gathered model before the call; tp > 1: inside each gathered group
    gen = max(g.gather_peak_bytes + fuse, g.generate_bytes + logits) if inference_tp > 1 else \
        g.generate_bytes + max(fuse, logits)
    qkv = qkv_merge_buffer_bytes(hidden_size=hidden_size, inference_tp=inference_tp)
    return HybridEngineMemory(generation_bytes=gen, workspace_bytes=ws.workspace_bytes, qkv_buffer_bytes=qkv,
                              gathered=g, workspace=ws,
                              logits_bytes=logits, lora_fuse_bytes=fuse)
