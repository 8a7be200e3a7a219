"""Kernels of one Unsloth decoder layer, counted from its code, against the planner's eager inventory of the same layer.

Unsloth's ``FastLanguageModel`` runs a Qwen3 (or Llama-layout) model through ``FastQwen3Model``
(unsloth/models/loader.py l.500-510): the decoder layers are eager Python (``LlamaDecoderLayer_fast_forward``,
unsloth/models/llama.py l.686-767; ``Qwen3Attention_fast_forward``, unsloth/models/qwen3.py l.65-172) calling Triton
kernels and Unsloth's own autograd Functions. Nothing in that path is ``torch.compile``'d: the only ``torch.compile``
in llama.py is ``fast_layernorm_compiled`` (l.577, LayerNorm models) and the chunked loss
(``unsloth_fused_ce_loss(..., torch_compile=True)``, l.1421-1432, the head, not the layers). So the planner's compile
factor (``plan.time.COMPILE_KERNEL_FACTOR``, about a third of the eager kernels left) is not what the layers launch;
the count below is. Read at unslothai/unsloth @c80faef72223fb12e84fb8ac84d8ab2e18ef5a4a (2026.1.3, the release of the
Surogate benchmark's Unsloth runs) and unslothai/unsloth-zoo @fd50fb1c950594249e54d46066bcae46c888e62f (2026.1.3,
unsloth_zoo/__init__.py l.17), with LoRA on q/k/v/o/gate/up/down, ``lora_dropout`` 0, no bias (the fused LoRA path),
adapters kept in fp32 (unsloth_zoo/training_utils.py l.100, l.124-126, l.139-142: ``float32_mixed_precision`` True
upcasts every ``lora_A`` / ``lora_B``), ``use_gradient_checkpointing='unsloth'`` and packed rows on the xFormers
backend (the ``unsloth`` 2026.1.3 wheel requires ``xformers>=0.0.27.post2`` on Linux x86_64, its METADATA; no
flash-attn: ``select_attention_backend`` picks xFormers, unsloth/utils/attention_dispatch.py l.85-95).

Forward, per layer (``UNSLOTH_FORWARD_KERNELS`` = 53, the first forward 54 with the offload copy):

=================================================  ======  ==================================================
op                                                 kernels  where
=================================================  ======  ==================================================
input RMSNorm (Triton)                               1      llama.py l.741; kernels/rms_layernorm.py l.177
q/k/v: ``LoRA_QKV``, 3 x ``matmul_lora``            15      kernels/fast_lora.py l.389-391; kernels/utils.py
  (base GEMM, ``A.to(bf16)``, ``B.to(bf16)``,               l.1022-1031 (fp32 adapters: two casts a call)
  ``X @ A``, ``out.addmm_(XA, B)``)
q / k RMSNorm (Triton)                               2      qwen3.py l.111-112
packed lengths: ``cu_seqlens[0] = 0``, cumsum,       3      utils/packing.py l.213-222 (``get_packed_info_from_
  ``max`` (then ``.item()``: a host sync)                   kwargs``, called in every attention forward, qwen3.py
                                                            l.105)
RoPE: ``Q.clone()``, ``K.clone()`` (transposed       4      kernels/rope_embedding.py l.315-320, l.338 (the
  views), position ids ``.to(int32)``, one Triton           ``Fast_RoPE_Embedding_QK`` path with position ids)
xFormers block mask: lengths ``.to("cpu")``          1      utils/packing.py ``build_xformers_block_causal_mask``
  (a host sync)                                             (``seq_lengths.to("cpu", torch.int32)``, l.236)
GQA: K and V ``expand(...).reshape(...)`` copies     2      utils/attention_dispatch.py l.172-184 (requires_grad)
attention (xFormers memory-efficient)                1      attention_dispatch.py l.210-215
o: ``LoRA_W`` (one ``matmul_lora``)                  5      fast_lora.py l.592-594
residual adds                                        2      llama.py l.754, l.760
post-attention RMSNorm (Triton)                      1      llama.py l.758
MLP: ``LoRA_MLP``, 3 x ``matmul_lora`` + the        16      fast_lora.py l.93-96 (``swiglu_fg_kernel``, l.95)
  SwiGLU Triton kernel
=================================================  ======  ==================================================

Backward, per layer (``UNSLOTH_BACKWARD_KERNELS`` = 91): ``LoRA_MLP.backward`` 28 (six adapter casts l.138-145; the
down projection's ``matmul_lora`` 3; ``swiglu_DWf_DW_dfg_kernel`` 1; six ``addmm_`` adapter gradients, each behind one
matmul, 12, l.172-189; dX: a matmul and five products, 6, l.194-204), ``LoRA_W.backward`` 9 (l.605-636),
``LoRA_QKV.backward`` 27 (six casts l.443-450, 12 adapter-gradient kernels l.468-485, dX 9 l.489-509), four RMSNorm
backwards 4 (rms_layernorm.py l.211), the RoPE backward 3 (two clones of the transposed gradients and the kernel,
rope_embedding.py l.387-388, l.402), the attention backward 1, GQA's expand backward (a sum over the groups) for K and V 2,
the residual stream's two gradient sums 2, the fp32 adapters' gradients cast from the Functions' bf16 outputs
(autograd casts each to its input's dtype) 14, and the offloaded checkpoint's host-to-device copy of the layer
input 1 (unsloth_zoo/gradient_checkpointing.py l.530-532). The recompute is a re-entrant checkpoint:
``UnslothCheckpointFunction.forward`` runs the layer under ``torch.no_grad()`` (l.497) and its backward re-runs the
whole layer under ``enable_grad`` before ``torch.autograd.backward`` (l.589, l.612): ``loop.checkpoint_reentrant``, the
recompute the forward's 53 kernels (the offload copy is the forward's only).

Against the planner's eager inventory of the same card (``compute.inventory.step_inventory`` for Qwen3 with LoRA on
the seven linears, bf16 adapters, SDPA: ``EAGER_FORWARD_KERNELS`` 82, recompute 81, ``EAGER_BACKWARD_KERNELS``
138.4 per layer; ``tests/compute/test_unsloth_layers.py`` pins these): forward 54 / 82 = 0.66, recompute 53 / 81 =
0.65, backward 91 / 138.4 = 0.66. ``UNSLOTH_KERNEL_FACTOR`` is their pooled ratio (198 / 301.4 = 0.657), applied to
the card's kernels in place of the compile factor; the three passes agree within 0.01, so one factor serves them all.
Counted, not fitted.

Host syncs: the packed path reads the lengths back twice in every attention forward (the ``.item()`` and the
``.to("cpu")`` above: ``UNSLOTH_PACKED_ATTENTION_SYNCS`` = 2, ``loop.attention_call_syncs``), the recompute's
included. Unsloth's SDPA fallback (no xFormers) syncs three times a layer instead (``lengths.max().item()``,
``seq_lengths.sum().item()`` and ``seq_lengths.tolist()``, packing.py l.222, l.262, l.270) and builds a dense
block-diagonal mask per layer (a ``torch.full`` of tokens^2 and six kernels a packed sample): not the rows' path,
not planned.

Not counted, and why: the offloaded checkpoint's copies run on a side stream (``EXTRA_STREAM``,
gradient_checkpointing.py l.470-472) and the main stream waits for them on the device (l.500, l.582), not the host;
at 4,096 tokens x 1,024 x 2 B = 8 MB a layer they take about 0.2-0.3 ms over PCIe, under the layer's own device time
on every row planned; the per-micro-step gradient accumulation adds into the fp32 adapter gradients (14 a layer from
the second micro-step) are left out, as the eager inventory leaves PEFT's; the memory-bound traffic keeps the compile
memory factor (Unsloth's Triton norm, RoPE and SwiGLU each read and write their tensors once, as a fused chain would;
not recounted here). Host-side per-step work of Unsloth's patched trainer, looked for and not
found per step: the ``torch.cuda.empty_cache()`` calls run once, in the banner Unsloth patches in before the
training loop (unsloth/models/llama.py l.2490-2496), at model load (unsloth_zoo/patching_utils.py l.345, l.524
@fd50fb1c950594249e54d46066bcae46c888e62f) and when the checkpointing buffers are (re)initialised
(gradient_checkpointing.py l.827, l.902); unsloth/trainer.py, unsloth/models/_utils.py and unsloth/models/llama.py
hold no ``torch.cuda.synchronize()``. The gradient-accumulation normalisation hands the trainer's
``num_items_in_batch`` to the loss (llama.py l.1405-1407, l.1421-1428); its host cost was not read further.

Effect on the 38 Surogate Unsloth rows (benchmarks/step_times.md, 2026-12-05; each entry's ``checked`` gives its
own): median |error| 27.1 -> 14.8 %. H100: 0.6B / 1.7B -20 to -36 % -> -9 to -14 %, 4B-32B -14 to +2 % -> -13 to
+3 %; H200: 0.6B / 1.7B -24 to -35 % -> -7 to -13 %, 4B / 8B -11 to -17 % -> -10 to -18 %; B200: 0.6B-4B -38 to
-43 % -> -14 to -21 %, 8B-32B -25 to -37 % -> -24 to -31 %. The host floor the small rows publish (0.75-0.98 s a step
whatever the GPU) is now most of the plan's step on the three fast cards.

Still open, and where to look next: (1) every B200 row stays -14 to -31 % while the same runs on the H100 plan -14 to
+3 %. The published B200 steps are slower than the H100's where the host sets the pace (0.6B bf16: 0.858 against
0.769 s), so the B200 machine's host looks slower per launch; the plan prices one per-kernel host rate on every card
(``compute.rates``) and its 8B / 14B B200 steps are launch-bound (the recompute's host seconds lead). No published host
figure of that machine was found. (2) The RTX 5090 rows stay +23 to
+45 % (+25 to +43 % before): the count moves them by at most 2.4 points; what separates that card from the H100 /
H200 / B200 rows is not in Unsloth's code. (3) The per-kernel host rates are the eager transformers layer's
(``compute.rates``), applied to Unsloth's Python (Triton launches, autograd Functions): no published per-launch cost
of either was found to replace them.
Scope (``spec.card`` refuses ``parallel.unsloth_layers`` outside it, ``UNSLOTH_LAYERS_REFUSAL``): the count is of a
LoRA layer (scope lora or qlora) with ``lora_dropout`` 0 (a dropout keeps PEFT's own forward, not the fused
functions: unsloth/models/llama.py l.3248) on one GPU (Unsloth's loader is one process on one device,
``methods.unsloth.UNSLOTH_MULTI_GPU_REFUSAL``). A QLoRA card takes the same LoRA count: Unsloth's 4-bit path
(``fast_dequantize`` of each base weight inside ``matmul_lora``, unsloth/kernels/utils.py) was not counted, so the
factor scales the card's own bitsandbytes dequantisation kernels as it scales the rest (``unsloth_layers_note``).
Pure: no torch.
"""

from __future__ import annotations

UNSLOTH_FORWARD_KERNELS = 53
"""Kernels of one Unsloth decoder layer forward, the recompute's too (module docstring table; unslothai/unsloth
unsloth/models/llama.py l.741-760, unsloth/models/qwen3.py l.97-169, unsloth/kernels/utils.py l.1022-1031 @c80faef72223fb12e84fb8ac84d8ab2e18ef5a4a)."""
UNSLOTH_OFFLOAD_COPY_KERNELS = 1
"""The offloaded checkpoint's device-to-host copy of the layer input, in the first forward only
(unsloth_zoo/gradient_checkpointing.py l.470-472 @fd50fb1c950594249e54d46066bcae46c888e62f)."""
UNSLOTH_BACKWARD_KERNELS = 91
"""Kernels of one Unsloth decoder layer backward (module docstring; unslothai/unsloth unsloth/kernels/fast_lora.py
l.128-225, l.424-530, l.605-640 @c80faef72223fb12e84fb8ac84d8ab2e18ef5a4a)."""
EAGER_FORWARD_KERNELS, EAGER_RECOMPUTE_KERNELS, EAGER_BACKWARD_KERNELS = 82.0, 81.0, 138.4
"""The planner's eager inventory of the same layer (``compute.inventory.step_inventory``, Qwen3 with LoRA on the seven
linears, bf16 adapters, SDPA), per layer: forward, recompute, backward, as benchmarks/unsloth_layer_counts.py prints
them (tests/compute/test_unsloth_layers.py holds them to the inventory)."""
UNSLOTH_PACKED_ATTENTION_SYNCS = 2
"""Host syncs in every attention forward of Unsloth's packed rows on xFormers: ``int(lengths.max().item())`` and
``seq_lengths.to("cpu", torch.int32)`` (unslothai/unsloth unsloth/utils/packing.py l.222, l.236 @c80faef72223fb12e84fb8ac84d8ab2e18ef5a4a)."""


def unsloth_kernel_factor() -> float:
    """Unsloth's counted kernels of one layer (forward with its offload copy, recompute, backward) over the planner's
    eager inventory of the same layer: the factor the card's kernels are scaled by (module docstring)."""
    unsloth = (UNSLOTH_FORWARD_KERNELS + UNSLOTH_OFFLOAD_COPY_KERNELS) + UNSLOTH_FORWARD_KERNELS + UNSLOTH_BACKWARD_KERNELS
    eager = EAGER_FORWARD_KERNELS + EAGER_RECOMPUTE_KERNELS + EAGER_BACKWARD_KERNELS
    return unsloth / eager


UNSLOTH_KERNEL_FACTOR = unsloth_kernel_factor()
"""198 / 301.4 = 0.657 (``unsloth_kernel_factor``)."""

UNSLOTH_LAYERS_SOURCE = "unslothai/unsloth @c80faef72223fb12e84fb8ac84d8ab2e18ef5a4a (2026.1.3)"
"""Where the layer was counted (module docstring)."""


def unsloth_layers_note(*, qlora: bool) -> str:
    """The plan's assumption line of a ``parallel.unsloth_layers`` card: the factor, what it was counted for and where;
    on a QLoRA card, that the LoRA count stands (the 4-bit dequantisation path was not counted)."""
    line = (f"parallel.unsloth_layers: the layers' kernels x{UNSLOTH_KERNEL_FACTOR:.3f} (Unsloth's counted layer over"
            f" the eager one, {UNSLOTH_KERNEL_FACTOR * 301.4:.0f} / 301.4 kernels; Qwen3, LoRA on the seven linears,"
            f" lora_dropout 0, one GPU; {UNSLOTH_LAYERS_SOURCE}, trainfit.compute.unsloth_layers)")
    if qlora:
        line += ("; scope qlora takes the LoRA count: Unsloth's 4-bit dequantisation path (fast_dequantize in"
                 " matmul_lora) was not counted, the card's own dequantisation kernels are scaled by the same factor")
    return line
