"""The work of a routed-expert (MoE) layer beyond its expert GEMMs, as Megatron-Core runs it, per rank.

``inventory.py`` counts the expert GEMMs (one grouped GEMM per projection, ``rows / local experts`` rows per
expert, at ``gemm.py``'s shape-dependent efficiency), the SwiGLU on the expert rows, one permute and one
unpermute of the routed rows and the router GEMM. This module adds what Megatron-Core's routed layer does
on top, read from NVIDIA/Megatron-LM ``megatron/core/transformer/moe/`` @d98e8a64ddf34856e74b24714e3bedb2f5a39553
(``router.py``, ``moe_utils.py``, ``token_dispatcher.py``, ``experts.py``); per MoE layer, per pass, one rank
routing ``T`` tokens to ``k`` of ``E`` experts (``E / ep`` of them local), hidden ``h``:

==========================  ====================================================  ==========================
mechanism                   what runs                                              counted here as
==========================  ====================================================  ==========================
tokens a rank routes        with tensor parallel the layer's input is the rank's   ``expert_token_shards``:
                            sequence-parallel shard (``T / tp``); an expert-       rows = T·k / (tp / etp)
                            tensor-parallel group all-gathers its ``etp`` shards
                            (``dispatch_postprocess``: gather over tp_group =
                            the expert-TP group)
router GEMM                 ``router_gating_linear(input, weight)``, weight        ``router_experts``: the
                            ``[num_experts, hidden]`` on every rank (replicated,   global ``E``, not the
                            ``router.py`` ``gating``)                              rank's ``E / ep``
routing scores              unfused ``topk_routing_with_score_function``:          ``routing_bytes``: T·E
                            top-k, softmax, ``zeros_like(logits).scatter`` (dense  scores x bytes per score
                            probs), ``zeros_like(logits).int().scatter().bool()``
                            (routing map); ``routing_map.sum(0)`` (dispatcher)
aux loss                    ``compute_routing_scores_for_aux_loss`` (softmax,      ``routing_bytes(aux_loss=
                            top-k, routing map again) and the load-balancing sum   True)``, ``aux_loss_kernels``
                            (the card's ``moe_load_balancing``, eager router)
chunk sort                  with ``ep > 1`` and several local experts, the         ``chunk_sort_bytes``: read
                            received rows are sorted by local expert after the     + write the rows twice
                            all-to-all and unsorted before the combine             (alltoall dispatcher only)
                            (``sort_chunks_by_idxs`` in ``dispatch_postprocess``
                            and ``combine_preprocess``); backward: the inverse.
                            The flex dispatcher (DeepEP / HybridEP,
                            ``MoEFlexTokenDispatcher``) has no such sort: the
                            dispatch hands its rows token by token and one
                            ``permute`` by local expert follows, one ``unpermute``
                            precedes the combine (``_DeepepManager.
                            get_permuted_hidden_states_by_experts``; HybridEP
                            permutes inside its dispatch), the inventory's permute
                            and unpermute; NeMo Automodel's DeepEP path is the
                            same (nemo_automodel/components/moe/megatron/
                            token_dispatcher.py @01926a5c443b7979463c73341bf64adf79de638e
                            ``_DeepepManager``)
dispatcher metadata         ``preprocess``: token counts summed, all-gathered      ``dispatcher_kernels``;
                            over the tp x ep group, sliced and summed; their D2H   ``count_exchange_seconds``
                            copies; the host waits on them before the all-to-all   (the all-gather, latency-
                            (``cuda_sync_point = "before_ep_alltoall"``)           bound; forward passes only);
                                                                                   ``DISPATCH_FORWARD_SYNCS``
                                                                                   (the host's wait)
expert GEMM launches        ``TEGroupedMLP``: one grouped GEMM per projection;     ``expert_gemm_kernels``
                            ``SequentialMLP`` (``moe_grouped_gemm`` off): a loop
                            over the local experts, each its own fc1, activation
                            and fc2 (``experts.py`` ``SequentialMLP.forward``)
==========================  ====================================================  ==========================

The EP all-to-all itself (dispatch and combine, forward, recompute and backward) is ``model_parallel.py``'s.

**TEGroupedMLP's grouped GEMM is a loop.** Transformer Engine's ``GroupedLinear`` launches one cuBLAS GEMM per local
expert over four compute streams (``gemm.multi_stream_grouped_gemm_seconds``): on a Megatron-Core card
(``inventory.step_inventory(megatron_experts=True)``) each routed GEMM, forward, dgrad and wgrad, costs its grouped
compute plus one kernel's fixed device time per local expert, which TE's published H100 grouped-GEMM rates bear out
(that function's docstring). Here only the device side is counted: ``expert_gemm_kernels`` keeps one host launch
per projection. The per-GEMM host cost (the Python loop over the local experts, and the per-expert ``torch.split`` /
``torch.empty`` TE's maintainer names as GroupedLinear's CPU overhead, NVIDIA/TransformerEngine issue #1499,
2025-02-24) is ``te_host.GROUPED_EXTRA_GEMM_HOST_S`` per GEMM beyond a call's first, measured on a CPU with the
compiled library stubbed and added by ``training.train_step_time`` on Megatron-Core cards (``te_host`` module
docstring).

**gpt-oss's experts in Megatron-Core** (``megatron_expert_elementwise``: a model with a clamped GLU or expert biases,
``MoeSpec.clamped_glu`` / ``expert_bias``, on a Megatron-Core card). ``TEGroupedMLP`` runs two eager steps that the
other MoE models do not, read from NVIDIA/Megatron-LM at every Megatron-Core the Megatron-Bridge containers ship
(25.11: 0.15, 26.02: 0.16, 26.04: 0.17; Megatron-Bridge ``docs/releases/software-versions.md``
@067f987df03b8355b03192d88d70f1709fedf51a), the same code at core_v0.15.0rc7 (53008b84), core_v0.16.0 (3bec9aa9),
core_v0.17.0 (9539a12e) and core_v0.18.0 (ba7b5ebc):

* the clamp of the GLU (``activation_func_clamp_value`` 7.0, set by Megatron-Bridge's gpt-oss provider) runs outside
  the fused quick-GEGLU: ``weighted_bias_quick_geglu_impl`` (``megatron/core/fusions/fused_bias_geglu.py``
  l.424-432) chunks the fc1 output, clamps each half (two kernels on strided halves) and concatenates them before
  the compiled ``WeightedQuickGeGLUFunction``; autograd then runs each clamp's backward (``where`` over a mask built
  by ``ge`` / ``le`` / ``logical_and_``) and the chunk's (a ``cat``);
* the expert output bias (``add_bias_linear``; fc2 built with ``skip_bias_add=True``) is added by
  ``TEGroupedMLP._apply_bias`` (``megatron/core/transformer/moe/experts.py`` l.609-626 @core_v0.16.0) as a Python
  loop over the local experts, ``t + b * p`` per expert on its rows, then ``torch.cat``; backward per expert the
  two products and their sums (the bias and the routing-probability gradients), and the split's ``cat``.

Bytes and kernels per element, from the ATen ops of those two functions traced forward and backward (PyTorch
2.13 ``TorchDispatchMode``, bf16 activations, 1-byte masks; views not counted): the clamp and cat 8 B forward and 15 B
backward per element of the fc1 output (3 and 9 kernels), the bias loop 12 B forward and 16 B backward per element
of the fc2 output (2 and 4 kernels per local expert, plus 1 and 2 ``cat``). Eager PyTorch, so the fused-kernel
(compile) memory factor the plan applies to Megatron-Core's other elementwise work does not apply: the inventory
counts the bytes as left unscaled (``inventory.PassInventory.fused_bytes``), at the streaming rate (a lower bound:
the clamps read strided halves); the launches are counted with Megatron-Core's other kernels (the same per-kernel
host cost; no measurement of this loop's host time on a GPU is cited, so none is modelled apart). The selective
``moe_act`` recompute re-runs the clamp too (``megatron_clamp_recompute_work``): ``TEGroupedMLP.forward`` wraps the
whole ``bias_act_func``, clamp included, in ``CheckpointWithoutOutput`` and re-runs it when fc2's gradient arrives
(NVIDIA/Megatron-LM megatron/core/transformer/moe/experts.py l.680-705 and l.738-750 @core_v0.16.0
3bec9aa97dda898d16ff5a89bac0ed2b6682b172; l.945-946 @core_v0.15.0 103851dcf4c380fe93463e2c128cbfba9bd84e37, l.382-383
@core_v0.17.0 9539a12e1b04a68423f57b3eb41d6125161dca24, l.772-773 @core_v0.18.0
ba7b5ebce12af60627a80985792a1449ce45f46c; the clamp in fused_bias_geglu.py l.424-432 at all four). The fc1 bias is TE's
(``GroupedLinear`` adds it in the GEMM and fuses its gradient into the wgrad GEMM, NVIDIA/TransformerEngine
``transformer_engine/pytorch/module/grouped_linear.py`` @v2.9), not counted here.

**Eager router and dispatcher launches** (``RunCard.parallel.moe_launch``, ``MoeLaunch``). The plan prices a
fused-kernel card's launches at ``plan.time.COMPILE_KERNEL_FACTOR`` of its kernels (a compiler, or Transformer
Engine's fused norm + linear, RoPE, SwiGLU and cross-entropy, leaves about a third). Megatron-Core's router and token
dispatcher are neither: ``router.py`` (``topk_routing_with_score_function`` unfused unless ``moe_router_fusion``),
``moe_utils.py`` and ``token_dispatcher.py`` issue their top-k, softmax, scatters, histogram, D2H copies, sorts and
permutations one PyTorch op at a time from Python, and gpt-oss's clamp and bias loop with them (above). Only a CUDA
graph over them (Megatron-Core ``cuda_graph_scope`` ``moe_router`` / ``moe_preprocess``) or the fused router removes
that host work, and Megatron-Bridge's performance recipes set both
(src/megatron/bridge/perf_recipes/qwen/b200/qwen3_moe.py l.43 ``moe_router_fusion = True`` and l.203
``cuda_graph_scope = ["attn", "moe_router", "moe_preprocess"]``, b300 l.39 and l.219,
@067f987df03b8355b03192d88d70f1709fedf51a; the Qwen3-30B-A3B 16-GPU H100 library recipe too,
src/megatron/bridge/recipes/qwen/h100/qwen3_moe.py l.160 and l.213-214 @6799f099712c961f15cf92d6bd88998f029d672d).
``MoeLaunch.FUSED`` keeps the factor on them, as for those recipes; ``MoeLaunch.EAGER`` (Megatron-Core's own
defaults, which an unset ``moe_launch`` resolves to on a Megatron-Core card, ``ParallelSection.resolved_moe_launch``: a recipe with
``cuda_graph_impl = "none"`` and ``moe_router_fusion = False``, as every gpt-oss H100 library recipe, same file family
src/megatron/bridge/recipes/gpt_oss/h100/gpt_oss.py l.99/105, 223/229, 366/372, 496/502, 652/658 at that commit)
counts each of them at the full per-kernel host rate (``inventory.step_inventory(moe_eager_launch=True)``: the
``MOE_DISPATCH_KERNELS`` and their backward, ``dispatcher_kernels`` and the eager expert work go to the unscaled
``PassInventory.fused_kernels``). No constant is set here: the kernel counts and the per-kernel host rates are the
inventory's and ``rates``'. Effect (``benchmarks/step_times.py``, 2026-12-03, the Megatron-Bridge gpt-oss verification
cards and the rows below, the only ones mapped eager): gpt-oss-20b pre-training -59.1% -> -45.0%, SFT -59.1% ->
-49.6%, LoRA (one GPU) -47.6% -> -18.9%, gpt-oss-120b pre-training -70.8% -> -64.1%, SFT -69.8% -> -56.3%; the
Qwen3-30B-A3B 32K SFT card (recipe qwen3_30b_a3b_sft_8gpu_h100_bf16_config l.405 and l.411
@f3ae2767b5e18aeb67b726cd8d5f1db58216dcc9) -6.1% -> -3.6%; NeMo RL v0.3's Qwen3-30B-A3B Megatron policy (no CUDA
graph, a Megatron-Core without router fusion) update -68.5% -> -62.0%, its log-prob passes not at all (16k-token
micro-batches: device-bound in the plan); NeMo RL v0.4-v0.6's performance-summary Megatron MoE rows (39, expert
parallel > 1; no training CUDA graph or router fusion in those releases, Megatron-Core's defaults off: the entries'
notes) move toward their published steps or not at all: Qwen3-30B-A3B v0.5 / v0.6 GB200 on-policy -16% -> -6% and -15%
-> -6%, v0.4 H100 on-policy -12% -> -5%, Qwen3-235B-A22B v0.6 GB200 64-GPU -5% -> -2%, v0.5 -21% -> -18%, the
DeepSeek-V3 rows by at most a point (RL step median 14.5% -> 14.2%); verl's fully-async Qwen3-30B-A3B Megatron rows
(their script verl/experimental/fully_async_policy/shell/grpo_30b_a3b_base_math_megatron_96_32.sh l.160-169
@df340d703292538fafc1439b4aa9f1f226ccadc5 overrides neither setting) and its DeepSeek-V3 671B row, tried eager (not
committed), do not move: 10k-token dynamic micro-batches, device-bound in the plan; ms-swift's Megatron-SWIFT
Qwen3-30B-A3B (A800, also mapped eager) not at all (host 0.19 -> 0.30 s a forward, under its 0.47 s of device work at
8,192 tokens a micro-batch: a null result for that row's -54%); nothing else moves. Set on every Megatron-Core MoE row
instead (an experiment, not committed), the force-balanced performance rows whose recipes graph the router move 8-28
points over (Megatron-Bridge 25.09 GB200 Qwen3-235B-A22B +10% -> +38%, B200 Qwen3-30B-A3B -1% -> +23%): those recipes'
CUDA graphs are why the factor stays their default.
Since 2026-12-03 the card's ``moe_launch`` is null unless stated, resolved to Megatron-Core's defaults (eager) on a
Megatron-Core card (``spec.card.ParallelSection.resolved_moe_launch``); ``benchmarks/step_times.py`` maps fused the
Megatron-Bridge MoE rows whose recipes set ``moe_router_fusion`` / the router CUDA graph (``MOE_LAUNCH_FUSED``), and
the entries whose notes cite ``--moe-router-fusion`` / router CUDA graphs / ``enable_cuda_graph`` state
``moe_launch: fused`` (MoE-Zoo's Qwen3-235B-A22B H100 rows, DGX Cloud 25.05 Grok-1 GB200, NeMo 25.02 B200 and 25.04
GB200 Mixtral-8x7B), so those rows keep their values; the Megatron-LM and NeMo 2.0 MoE rows that cite neither now
resolve eager: XTuner's Qwen3-235B-A22B H800 TP 4 / EP 8 / PP 8 / VPP 4 -30.3% -> -23.5%, the others (XTuner's other
layouts, DGX Cloud's DeepSeek-V3, Llama 4 Maverick and H100 Grok-1, NeMo's Mixtral-8x22B) within 0.2 points; no
subset median moved.

**Checked on the gpt-oss verification cards after the eager launches (2026-12-03), nothing set from it.** (1) Their
RoPE is unfused on unpacked rows too (Megatron-Core's default apply_rope_fusion False stands in the gpt-oss H100
recipes; src/megatron/bridge/perf_recipes/gpt_oss/common.py l.83 sets it False for the performance recipes as well,
@6799f099712c961f15cf92d6bd88998f029d672d), where the plan prices RoPE as fused except the packed thd loop: priced as
that loop with one sample a row (13 forward and 11 backward kernels a call, its per-call kernels and syncs included:
an upper bound, not committed), gpt-oss-20b pre-training goes 12.31 -> 12.99 s (-45.0% -> -42.0%) and gpt-oss-120b
pre-training 5.98 -> 6.24 s (-64.1% -> -62.5%). (2) Transformer Engine 2.16 drops its cuDNN fused attention for sink
softmax only under determinism (transformer_engine/pytorch/attention/dot_product_attention/utils.py l.1324-1332
@4220403e831d29e93868f7793693ea83f6b8b05b, 'requires NVTE_ALLOW_NONDETERMINISTIC_ALGO=1'); the recipes' environment
(src/megatron/bridge/recipes/utils/environment_utils.py COMMON_RECIPE_ENV_VARS @6799f099: NCCL_GRAPH_REGISTER,
NCCL_NVLS_ENABLE, PYTORCH_CUDA_ALLOC_CONF, TORCH_NCCL_AVOID_RECORD_STREAMS, TORCH_NCCL_HIGH_PRIORITY) does not set it
and Megatron-Bridge's deterministic mode refuses the recipes' cross-entropy fusion
(src/megatron/bridge/training/config.py l.1042-1062, same commit), so cuDNN stays; even the unfused fallback (scores
64 heads x 2,048^2 bf16 materialised, about 22 bytes a score forward and backward) would cost about 2 ms a layer and
micro-batch against the 20B SFT card's 10 ms gap. (3) The EP all-to-all overlap credit on the two H100 Qwen3-30B-A3B
performance rows that plan 65-66% short (25.11 PP 2 VP 24 EP 8, 26.02 PP 2 VP 12 EP 8 DeepEP, both moe_comm_overlap):
with the overlap removed from the plan (not committed) 8.71 -> 10.59 s (-65% -> -57%) and 17.53 -> 20.27 s (-66% ->
-60%) against 24.85 / 51.27 s; the overlap credit is at most 8 points of those misses, the rest the containers (their
entries' notes).

**prime-rl's Qwen3-30B-A3B rows after its expert code was mapped (2026-12-04; nothing set from it).** With the padded
wrapper (``MoeExperts.GROUPED_PADDED``, ``EXPERT_PADDING_*``) on the full-parameter rows and the unmerged grouped
expert adapters (``lora.expert_adapters: grouped``) on the LoRA rows, published minus planned is still +1.9 to +2.9 s a
step at 16k tokens a micro-batch (H200: LoRA +1.94, RL full +2.24, SFT full +2.88 s; H100: +2.26, +2.53 s) and +1.7
to +1.9 s at 64k (LoRA +1.67 / +1.75, full +1.94 s), against +0.15 to +0.82 s at 16k and -1.3 to -2.6 s at 64k for
the dense Qwen3-4B rows of the same benchmark (8 GPUs, FSDP2, 2 micro-batches, compiled layers, full recompute):
the MoE model misses about 2 s more a step, LoRA and full alike, so neither the optimizer nor the gradient
reduce-scatter (LoRA reduces almost nothing). Read at the benchmark's commit and too small to be it: the per
micro-batch ``get_load_balance_stats`` (one ``.item()`` per MoE layer, src/prime_rl/trainer/model.py l.61-82
@d8f290ef0358a804f1912bd29ea1b37cc56894b4), the LoRA experts' two ``.item()`` per MoE layer forward
(``MultiLoRAGroupedExperts.forward``, multi_moe.py l.312 and l.321), torchtitan's ``clip_grad_norm_`` (rl/train.py
l.409); FSDP2's all-gathers of the 61 GB bf16 model (four a step, about 0.6 s at NVLink rates) are planned and hidden
behind 2 s of compute a micro-batch. The benchmark's fake token ids are random in [0, 100) (rl/data.py), so the trained
router sees a narrow input at the first layer and routes unevenly; with EP 1 the grouped GEMM still runs every routed
row on one GPU, and no per-group-size rate of ``torch._grouped_mm`` is published to price skewed groups: not modelled.

**The same rows checked again (2026-12-05).** (a) The gap is about as large on the H100s as on the H200s (16k RL
full +2.33 / +2.10 s, LoRA +2.18 / +1.86 s, 8 GPUs, after the index_put term below), whose HBM differs by 1.43x
(3.35 against 4.8 TB/s) and whose NVLink does not: not streaming work the plan undercounts, nor FSDP traffic it
hides wrongly. (b) Read against the dense Qwen3-4B pair of the same benchmark, whose errors (H200 RL full: -6.0% at
16k, +8.8% at 64k) fit 0.73x the planned attention and 1.21x the rest, the Qwen3-30B-A3B RL full H200 pair leaves
1.97 s at 16k and 5.93 s at 64k (before that term): a per-token MoE cost rather than a per-step one, if the dense
pair's attention correction carries over (not established). (c) Likely not it: the combine's bf16 atomic
``scatter_add`` (moving Qwen3-30B-A3B on 16 H100s from ``index_put`` and a weighted sum to a multiply and
``scatter_add`` under ``torch.compile`` raised throughput 5.5%, mlc-ai/pith-train pull request #5,
https://github.com/mlc-ai/pith-train/pull/5, on a torch release the PR does not name, where Inductor may emit the
atomic itself; the ATen bf16 ``scatter_add`` that torch 2.9 falls back to is not measured there); the fp32
cast-multiply of the routed output by its scores (``score_before_experts`` False,
src/prime_rl/trainer/models/qwen3_moe/modeling_qwen3_moe.py l.65-75 @d8f290ef0358a804f1912bd29ea1b37cc56894b4): one
fused pass of 4 bytes an element under compile (8 backward), about 0.1 s a step at 16k over forward, recompute and
backward, not counted apart and too small to be it. (d) Planned since: the padded wrapper's gather gradient at
PyTorch's measured accumulating ``index_put`` rate (``INDEX_PUT_ACCUMULATE_SLOWDOWN``): +0.14 s a step at 16k and
+0.56 s at 64k on the H200 full-parameter rows, +0.20 s on the H100 one (the LoRA experts,
``MultiLoRAGroupedExperts``, skip the wrapper).

**The same rows' grouped GEMMs read in code (2026-12-05).** What ``torch._grouped_mm`` runs there, read at pytorch/pytorch
tools/autograd/derivatives.yaml @d327a787782618826890c323f8d7e51f3d28ec13 (``_grouped_mm``: ``self`` by
``_grouped_mm_mat1_backward``, ``mat2`` by ``_grouped_mm_mat2_backward``), torch/csrc/autograd/FunctionsManual.cpp
@002ca6715ba1ab4d2369262b487eeb30bf249911 (a row-major ``mat1``'s gradient is ``_grouped_mm(grad, mat2.transpose(-2,
-1), offs)``, a column-major ``mat2``'s ``_grouped_mm(grad.transpose(-2, -1), mat1, offs).transpose(-2, -1)``: views,
no copy), aten/src/ATen/native/GroupedMMUtils.h
@2295ac79eeea7cd69460598a018ea14eaef34f5c, aten/src/ATen/native/cuda/GroupedBlas.cpp
@00d4eaf9327928137f4cc437b17e5cf54623565f and aten/src/ATen/native/cuda/GroupMM.cu
@117b863359bf2941f50d404dc3172d1c46f92b41: on compute capability 9.x with bf16 operands and output
``_grouped_mm_cuda`` takes the CUTLASS ptr-array kernel for every product, 2-D x 3-D (forward, input gradient) and
2-D x 2-D with the offsets along K (the weight gradient, the group's rows as K), with no host sync and no fallback
loop; ``check_valid_strides_and_return_transposed`` accepts a row- or column-major operand as it is (16-byte
aligned strides, else an error, never a ``.contiguous()`` copy) and ``GroupMM.cu`` instantiates all four layout
pairs; the tile is chosen on the mean group shape (64x128x128 pingpong when M or N is at most 128, else 128x256x64
cooperative), the weight gradient's on the feature sizes. The experts' weights are ``(E, out, in)`` stacks used as
``w.transpose(-2, -1)`` views (torchtitan torchtitan/models/moe.py l.44-46 and l.110-135 @a1fdd7e4; prime-rl
layers/moe.py l.153-155 @d8f290ef), so the weight gradient comes back as ``_grouped_mm(grad.T, x, offs).T``: the
same kernel with column-major A, no copy. So the backward is the kernel ``gemm.grouped_mm_seconds`` prices; what
the code does differently from the plan is w1 and w3 run as two GEMMs (``SPLIT_GATE_UP_DX_SUM_BYTES``, +0.06 s a
step at 16k, +0.16 s at 64k on the H200 full-parameter rows). The LoRA experts add their own grouped products (two
per projection, rank-wide, ``inventory.GROUPED_EXPERT_LORA_*``), already planned. With that split, the plan's
grouped GEMMs (forward, the full recompute's second forward, input and weight gradients) cost 9.7 ms a layer and
micro-batch at 16k tokens (1,024 rows an expert) and 35.5 ms at 64k, 0.93 s and 3.40 s a step (48 layers, 2
micro-batches); published minus planned is then +2.04 s (RL full), +1.81 s (LoRA) and +2.67 s (SFT full) at 16k on
the H200s, +2.26 / +2.12 s on the H100s, and +1.23 s (full) / +1.52 s (LoRA) at 64k: about the same a step for
3.7x the GEMM work, so no single grouped-GEMM rate error explains it (it would need the GEMMs 3.2x slower at 16k
and 1.4x at 64k). No published bf16 ``torch._grouped_mm`` point at this shape (N 768, 1,024 rows an expert) was
found to check the rate at small groups against: pytorch/ao pull request #2490's H100 points are Llama-4 shapes,
and VeOmni pull request #460's 10.2 ms forward at 2,048 rows an expert includes its own scatter and gather. Not
read, and left open: Inductor's lowering of ``aten._grouped_mm`` in torch 2.9 under the layers' ``torch.compile``
(later trees offer a Triton template only under ``use_triton_template``, i.e. max-autotune, so by default the same
ATen kernel; the 2.9 tree was not read).

**Load imbalance is not modelled**: the expert rows are the balanced mean (``T·k / E`` per expert). Dropless
routing lets the busiest expert (and EP rank) receive more than that, and the slowest rank sets the pace;
no published per-micro-batch measurement of that excess for these models was found to cite, so the layer is
timed balanced (a lower bound on its expert time).

**Force-balanced routing is random, not exact (checked 2026-12-03; nothing set from it).** Megatron-Core's
``moe_router_force_load_balancing``, which every Megatron-Bridge performance recipe sets for dropless runs, replaces
the router's logits by standard-normal draws from a per-rank generator (``RandomSTE``, seed 42 + global rank,
megatron/core/transformer/moe/moe_utils.py l.899-936, applied in router.py ``TopKRouter.forward`` l.554-556
@core_v0.15.0 of NVIDIA/Megatron-LM), so each token's top-k is a uniform k-subset of the ``E`` experts and the loads
fluctuate. The rows an EP rank receives per layer are a sum over the group's ``T·ep`` tokens of hypergeometric counts
(variance ``k·p·(1−p)·(E−k)/(E−1)`` a token, ``p = 1/ep``); the all-to-all waits for the busiest of the ``ep`` ranks,
``E[max]`` of ``ep`` normals (1.425 for 8, 1.764 for 16) standard deviations above the mean. Qwen3-30B-A3B and
Qwen3-235B-A22B (E 128, top-8) at EP 8 and 4,096 tokens a rank: 32,768 rows a rank, sd 165 (0.50%), busiest rank
+0.72%; 8,192 tokens (the 25.11 H100 row's MBS 2) +0.51%; EP 16 +0.92%. Per expert (2,048 rows) the sd is 2.1%,
but a rank runs its local experts one after another, so only the rank's sum counts. Under 1% of the expert time:
not the cause of the Megatron-Bridge Qwen3 rows that plan 45-65% short, and too small to model apart.

**Published regressions behind the Megatron-Bridge Qwen3 rows that plan about half their step (2026-12-03; nothing set
from them).** The 25.11 and 26.02 H100 Qwen3-30B-A3B FP8 rows (-64%, -65%) and the 25.11 and 26.02 B200 ones (-47%,
-45%) are the releases NVIDIA itself files as a regression: "We have 2X slower performance in QWEN3 30B on H100 and B200
with the dropless schedule compared to the token-drop schedule. Basically, the perf in 25.11 is 2X slower than 25.09"
(NVIDIA-NeMo/Megatron-Bridge issue #1998, 2026-01-20, open without a root cause when read). The row pairs agree: the
same H100 layout and precision (FP8, PP 2, VP 24, EP 8, MBS 2) ran 10,494 tokens/s/GPU token-drop in 25.09 (plan -14%)
and 5,275 dropless in 25.11; B200 EP 8 MBS 1, 18,066 (25.09, plan -1%) and 9,299 (25.11). So the miss is not FP8: the
FP8 rows of 25.09 and 26.02.01 plan -14% and -23%, and a BF16 dropless all-to-all Qwen3-30B-A3B on 8 B200s at MBS 1
reported about 150 TFLOP/s per GPU (yanring/Megatron-MoE-ModelZoo issue #7, 2025-08-18), against the 25.09 token-drop
row's 416. What differs in code between the two schedules is this module's dispatcher metadata: ``apply_moe_token_drop``
(capacity factor 1, ``moe_pad_expert_input_to_capacity`` True; src/megatron/bridge/training/utils/moe_token_drop.py
l.18-21, applied to every Qwen3 run by scripts/performance/run_script.py l.101-114
@fa0315ae2684693a666be9d247adf9baf1e30028, the 25.09 scripts) takes the ``drop_and_pad`` branch of
``MoEAlltoAllTokenDispatcher.preprocess`` (fixed split sizes, no count all-gather, no D2H copy, no host wait), dropless
takes the other (megatron/core/transformer/moe/token_dispatcher.py l.445-533 @core_v0.15.0); the plan counts that
all-gather and the host wait (``count_exchange_seconds``, ``DISPATCH_FORWARD_SYNCS``), and serialising every pass fully
bounds what syncs can add at -55% on these rows (the dispatcher host-wait bullet below), so the rest of the regression
is not in the plan's terms and stays unpriced. Nor does the sync's place in the layer add anything: it splits each MoE
layer's forward into the work the host queues first after it (permute, dispatch, experts, combine) and the work before
the next one (norms, attention, router, preprocess), and a pass whose first part is host-heavy and second device-heavy
would take ``max(Da + Db, Ha + Db, Ha + Hb)`` (``training.sequenced``) instead of ``max(ΣH, ΣD)``; but the plan's two
parts have the same balance (forward per micro-batch, the ``moe`` part of ``StepInventory.layers_recompute_parts``
against the rest, host / device: 25.11 H100 19 / 23 ms and 33 / 37 ms, 25.11 B200 37 / 13 and 71 / 21, 26.02 B300
Qwen3-235B-A22B 9 / 7 and 16 / 10, the gpt-oss-120b verification card 11 / 7 and 24 / 5), so the ordered bound adds 0 s
on each (2026-12-03, not committed). The Qwen3-235B-A22B MXFP8 rows that run with the EP all-to-all overlap and virtual
pipeline stages on B200 / B300 (25.11 B200 64 GPUs -46%; 26.02 and 26.02.01 B300 256 GPUs, PP 8 VP 4 MBS 1, -56% and
-53%) are the recipes NVIDIA changed for speed: "Disable ``moe_a2a_overlap`` due to CPU overhead for BF16 and MXFP8.
Disable VP for mxfp8", 25.11 B200 MXFP8 step 20.1 s -> 16.9 s (NVIDIA-NeMo/Megatron-Bridge pull request #1760,
2025-12-17; issue #1705 classifies it "RECIPE/CONFIG"), and on B300 "moe_a2a_overlap and VP degraded perf, so we didn't
enable it" (issue #3399, comment of 2026-05-12); the 26.04 B300 row without VP at MBS 2 plans -7%. The plan prices the
overlap and the virtual stages only as savings (hidden all-to-all, smaller bubble): without the overlap credit the 26.02
B300 row goes -56% -> -49%, the 25.11 B200 row -46% -> -37% (``benchmarks/step_times.py``, not committed); the host cost
of the combined 1F1B schedule and of the interleaved schedule at MBS 1 is not published per layer or call, so it is not
priced. EP placement is not the cause either: Megatron-Core orders ranks ``tp-cp-ep-dp-pp``
(megatron/core/parallel_state.py l.527 @core_v0.15.0), so these rows' EP 8 groups (TP 1, CP 1) are one 8-GPU node and
their all-to-all never crosses the NIC.

**Expert GEMM rate, checked against measurements (2026-12-02).** At Qwen3-30B-A3B's expert shape on an H100 (E 128,
top-8, hidden 2048, expert width 768, 32,768 tokens, no EP: 2,048 rows per expert) ``gemm.py`` times the two grouped
GEMMs at 721 TFLOPS (3.43 ms; since 2026-12-03 a non-Megatron card's ``torch._grouped_mm`` is priced by
``gemm.grouped_mm_seconds`` at 550 TFLOPS, 4.50 ms, checked on published ``torch._grouped_mm`` points within 2 %) and
the routed layer's forward, with its permute, unpermute, SwiGLU and routing bytes,
at 5.63 ms (439 TFLOPS). Published for that shape: a fused-MoE forward built on ``torch._grouped_mm``, scatter and
gather included, 10.2 ms (242 TFLOPS), a Triton one 11.5 ms (github.com/ByteDance-Seed/VeOmni pull request #460,
2026-02-06); a tuned Triton fused MoE with SwiGLU fused, at best 501 TFLOPS forward and 413 forward plus backward
(github.com/linkedin/Liger-Kernel pull request #1294, 2026-07-08). The model sits between the two, so the grouped
GEMM rate is left as ``gemm.py`` gives it. The Qwen3-30B-A3B rows that plan far too fast (Megatron-Bridge 25.11 H100
fp8, ms-swift's A800 pair, NeMo RL GB200 1-step-off, verl fully-async) do not come from it: with every grouped GEMM
1.5x slower, 25.11 goes -56.7% -> -52.1%, ms-swift Megatron -54.5% -> -51.7%, verl's actor update -51.4% -> -43.0%
(its mean response is not published; the implied sequence is 1.7x the planned one), ms-swift ZeRO-3 and NeMo RL GB200
not at all, while Megatron-Bridge 26.02 / 26.06 go -1.2% / -4.3% -> +4.0% / +0.8% and NeMo Automodel's Qwen3-30B-A3B
+12% -> +24%. Doubling the EP all-to-all pulls in only ms-swift Megatron (-33.8%; its inter-node network is not
published) and sends Megatron-Bridge 26.02 / 26.06 to +16% / +19%; tripling this module's routing bytes moves none of
these rows by more than 3 points (``benchmarks/step_times.py`` with the term scaled, not committed).

**Qwen3-MoE rows, per-token evidence (2026-12-02; no number set from it).** Where the routing is force-balanced the
shape plans close: Megatron-Bridge's H100 fp8 16-GPU Qwen3-30B-A3B rows for 25.09, 26.02.01, 26.04, 26.04.01 and 26.06
at -4, -6, -10, -10 and -11%, its Qwen3-235B-A22B H100 rows for 25.11, 26.02, 26.04 and 26.04.01 at -10, -9, -6 and
-5% (all force-balanced and dropless, the performance page's footnote), NeMo Automodel's H100 Qwen3-30B-A3B
(``FakeBalancedGate``) at +11%. The two rows at -56 / -60% are the containers, not the shape: the same layout was
published at 10,494 tokens/s/GPU for 25.09 and 5,275 for 25.11 (PP 2, VP 24, EP 8, MBS 2, GBS 512), and at 5,113 for
26.02 and 9,058 for 26.02.01 (PP 2, VP 12, EP 8, GBS 1024; 26.02's known issue: DeepEP not supported in that
container, Megatron-Bridge ``docs/releases/known-issues.md`` @067f987df03b8355b03192d88d70f1709fedf51a);
Megatron-Bridge pull request #2499 (2026-02-23) records that the B200 Qwen3-30B-A3B performance config of that period
hard-coded ``moe_token_dispatcher_type = "alltoall"``, silently dropping the flex dispatcher (the page's B200 row
halved too), but no such note exists for H100. The Megatron-Core rows that plan far too fast run real routing: NeMo
RL's v0.3 release blog (https://nvidia-nemo.github.io/blog/2025/07/21/nemo-rl-v0.3/, 64 H100s, the same batch for
every model) publishes Qwen3-30B-A3B's policy training at 50 s and log-probs at 23 s against Qwen3-32B's 68 and 40 s:
per token, layer and pass (training counted as 3 passes, the log-prob timer as 2: policy and reference) 3.24 and 2.24
us for the MoE against 3.26 and 2.88 us for the dense 32B, planned 1.05 / 0.75 us and 2.98 / 2.45 us, i.e. a
Qwen3-30B-A3B layer cost as much as a Qwen3-32B layer with a tenth of its FLOPs (about 54 TFLOPS per GPU in the
log-prob forward). Its model config is not the cause as read: NeMo's ``Qwen3MoEConfig`` at the submodule NeMo RL
v0.3.0 pins (NVIDIA/NeMo ``nemo/collections/llm/gpt/model/qwen3.py`` @33259f2540af6eef375d43fc48bdcbd7ec490c29:
``moe_grouped_gemm`` True, ``alltoall``, ``moe_permute_fusion`` True), and NeMo RL's fp64 router
(``examples/configs/grpo_math_1B_megatron.yaml`` l.86-89 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf; ``router.py``
``gating`` casts input and weight to fp64, NVIDIA/Megatron-LM @2ff0f099ffc30ffd152e3e29e921a1609d00855c l.76-81) costs
under 0.1 us of the 2.2 us gap (1 MFLOP per token and layer forward and backward at the H100's 67 fp64 TFLOPS, about
76 KB of fp64 casts). Shared by the under-planned rows (NeMo RL v0.3 -66 / -68%, ms-swift's Megatron SFT -55%, verl's
GRPO update -52% with an unpublished mean response, NeMo RL's on-policy DeepSeek-V3 steps -26 to -55%) and absent from
the well-planned ones: routing by the trained router over real tokens (this module's "load imbalance is not modelled")
and, for the three Qwen3 rows, TP 2 with sequence parallel beside EP 8; neither is modelled. Routing imbalance is
unlikely to be the factor of three: PithTrain's Qwen3-30B-A3B on 8 B200s (EP 4, PP 2, FP8) ran 17.5k tokens/s/GPU with
a pretrained router's real routing (load-balancing loss 1.87) against 18.2k force-balanced in the maintainers' rerun
of the same layout (github.com/mlc-ai/pith-train issue #79, 2026-07-22), 4%; and a real-routing Megatron-Bridge
Qwen3-30B-A3B pretraining on 16 H100s (BF16, TP 1, PP 2, VP 2, EP 2, MBS 8, GBS 512, dropless, no load-balancing loss,
all-to-all) reported 14.4 s per step (NVIDIA-NeMo/Megatron-Bridge issue #947, 2025-10-14), which the plan puts at 12.2
s (-16%; a card built from the issue, not scored). Split into a per-layer part and a per-token part (about 16 log-prob
micro-batches of 13.4k tokens and 64 training micro-batches of 3.35k tokens per TP pair, training as 3 passes), the
v0.3 blog's Qwen3-30B-A3B costs about 2.2 ms per layer and pass plus 0.95 us per token, layer and pass, the plan 0.9
ms plus 0.25 us: the plan is short on both parts, so the missing cost is neither pure launch overhead nor pure GEMM
rate. NeMo RL v0.4-v0.6's 32-GPU H100 Qwen3-30B-A3B steps plan within 3% with generation 70% of the plan; the v0.3
blog's generation, the only published phase split, plans +42%, so those steps may match by the two errors cancelling.

**Where the under-planned Megatron-Core MoE rows lose their time (2026-12-03; nothing set from it).** Per decoder layer
and micro-batch (forward + backward, ``published / micro-batches / layers`` less the plan's same quotient): gpt-oss-20b
SFT (1 node, TP 1, EP 8, 4 local experts, 2,048 tokens) +10.2 ms; gpt-oss-20b LoRA (one GPU, EP 1, 32 local experts,
2,048 tokens) +8.8 ms; gpt-oss-20b pre-training (TP 2, EP 4, 4,096 tokens) +6.7 ms; gpt-oss-120b SFT (TP 2, EP 8 in a
node, 2,048 tokens) +20 ms; gpt-oss-120b pre-training (TP 2, EP 16 over two nodes, 4,096 tokens) +19 ms; the
Qwen3-30B-A3B verification-card SFT (TP 1, EP 16, 2,048 tokens) +5.3 ms and pre-training +2.6 ms; NeMo RL v0.3's
Qwen3-30B-A3B update (TP 2, EP 8, one 4,096-token sequence) +11.4 ms; the Qwen3-30B-A3B of NVIDIA-NeMo/Megatron-Bridge
issue #947 (MBS 8, 32,768 tokens a micro-batch) +11.5 ms on a 75 ms layer (-16%). The 20B SFT and LoRA cards cost the
same per micro-batch (about 400 ms) with 4 and with 32 local experts, with and without the expert all-to-all and weight
gradients, so most of their missing time is neither the all-to-all, nor routing imbalance across EP ranks (EP 1 has
none), nor a per-local-expert loop: it looks like a per-layer cost of the eager Megatron-Core + Transformer Engine path
that does not grow with the tokens, and it shrinks relative to the layer as the micro-batch grows (issue #947). Read
in code, not priced
(no per-call figure published or measurable without Transformer Engine):

* gpt-oss alternates sliding-window and full-attention layers (Megatron-Bridge ``GPTOSSBridge.provider_bridge``:
  ``window_attn_skip_freq = 2``, src/megatron/bridge/models/gpt_oss/gpt_oss_bridge.py l.86-88
  @6799f099712c961f15cf92d6bd88998f029d672d; Megatron-Core passes ``window_size`` to every other
  ``TEDotProductAttention``, megatron/core/extensions/transformer_engine.py l.2117-2125
  @d12f6c8c9aff51e166d872fd70151687a8e3f375), and Transformer Engine caches the attention-backend choice for one
  ``AttentionParams`` only (a global ``_attention_backends``; ``DotProductAttention.forward`` reruns
  ``get_attention_backend`` whenever the parameters differ from the previous call's, transformer_engine/pytorch/
  attention/dot_product_attention/dot_product_attention.py l.71-78, l.1575-1597 @v2.16
  4220403e831d29e93868f7793693ea83f6b8b05b, the same at v2.17.1 4329ff84bfbdaa778a33cba02a15fb0807c64689 l.1657-1660 and
  on main @d0067d0da6cb01811b8072a7d304f0e00344ce2b l.2111-2114): every gpt-oss layer's forward reruns the selection,
  which its maintainers call "CPU intensive" (NVIDIA/TransformerEngine pull request #1381 "Add caching for attention
  backend selection results", open since 2024-12-19; issue #1349). Qwen3 layers share one configuration and keep the
  cache. Measured on this CPU with the transformer-engine 2.16.0 sources
  (``benchmarks/te_attention_backend_select.py``): 73-79 us a selection (135-154 us with 2,000 more loggers in the
  process), i.e. 2-4 ms a 24-layer gpt-oss-20b micro-batch, about 1% of those rows: real, too small to be the gap;
  priced since 2026-12-04 as forward host time (``te_host.te_attention_select_host_seconds``: the verification cards
  +0.2 to +0.5 points);
* NVIDIA's fused MoE MLP kernels (GroupGemm with the GLU, clamp and bias in the epilogue, sync-free routing) are
  published at "a 93% end-to-end performance improvement" for "the GPT-OSS pre-training setup" against 8% for
  DeepSeek-V3 ("Boosting MoE Training Throughput with Advanced Fusion Kernels",
  https://developer.nvidia.com/blog/boosting-moe-training-throughput-with-advanced-fusion-kernels/, 2026-06-15, read
  2026-12-03): in NVIDIA's own setup the unfused gpt-oss expert path cost about half the step. The blog names neither
  that setup's GPU nor its precision (its kernels take MXFP8 / NVFP4 and allow full-iteration CUDA graphs) and gives no
  per-part figure; this module prices that path's eager clamp and bias loop at under 1 ms per layer and micro-batch
  on an H100;
* the dispatcher's host wait (``DISPATCH_FORWARD_SYNCS``, one per MoE layer forward, counted since 2026-12-03) cannot be
  the gap either: with every pass fully serialised (host time plus device time, no overlap at all: an upper bound on
  what any host sync can expose; ``training.synced_seconds`` replaced by ``host_s + device_s``, not committed) the
  rows stay far short: gpt-oss-20b SFT -59% -> -41%, LoRA -54% -> -33%, pre-training -46% -> -32%; gpt-oss-120b
  SFT -71% -> -62%, pre-training -66% -> -59%; NeMo RL v0.3's Qwen3-30B-A3B actor update -70% -> -63% and log-probs
  -65% -> -53%; ms-swift Megatron -55% -> -50%; Megatron-Bridge 25.11 / 26.02 Qwen3-30B-A3B -65% -> -55 / -53%, while
  rows that plan close now overshoot (Megatron-Bridge 25.09 B200 Qwen3-30B-A3B +2.5% -> +32%). The gpt-oss
  verification-card passes are already host-bound in the plan (their forward's host time is 2-4x its device time),
  so the missing ~10 ms a layer and micro-batch is host (or device) work the inventory does not count, not overlap
  lost to syncs;
* Megatron-Bridge's LoRA wraps the grouped expert ``linear_fc1`` / ``linear_fc2`` with one adapter shared by the local
  experts (``LoRA.share_expert_adapters = True``, src/megatron/bridge/peft/lora.py l.114
  @a8038f6d99d8ade33e1b715ba79bc9185b073e59) and ``linear_qkv`` with one fused adapter, where the plan follows PEFT (no
  gpt-oss expert adapters, three attention ones): on the host-bound gpt-oss LoRA card the two differences cancel
  (about two adapters each way per layer).

**Grouped-GEMM rate, routing imbalance, the EP exchange, gpt-oss attention: checked (2026-12-03), nothing set from
it.**

* Expert GEMM rate at these rows' per-expert shapes (``gemm.multi_stream_grouped_gemm_seconds``, H100 SXM, bf16):
  gpt-oss-20b SFT (EP 8: 4 local experts x 2,048 rows, K 2,880, N 5,760 / 2,880) 734 / 658 TFLOPS, its one-GPU LoRA
  card (32 x 256 rows) 567 / 473, the Qwen3-30B-A3B cards at EP 16 (8 x 4,096 rows, N 1,536, K 2,048) 677;
  Transformer Engine's own H100 grouped-GEMM points (pull request #2045, in that function's docstring) are 554-628
  TFLOPS at 2,048-4,096 rows per expert. For the expert GEMMs alone to close the gpt-oss-20b SFT card's gap they
  would have to run about 7x slower (near 100 TFLOPS): not the cause.
* Routing imbalance. The gpt-oss rows and NeMo RL v0.3's route with no load-balancing term: Megatron-Bridge's
  ``GPTOSSBridge.provider_bridge`` sets ``moe_router_load_balancing_type = "none"`` (src/megatron/bridge/models/gpt_oss/
  gpt_oss_bridge.py l.71 @6799f099712c961f15cf92d6bd88998f029d672d) and its H100 gpt-oss recipes only set
  ``moe_router_force_load_balancing = False`` (recipes/gpt_oss/h100/gpt_oss.py l.153, 268, 412, 542, 698 at the
  same commit); NeMo RL v0.3 ``moe_router_load_balancing_type: "none"`` with ``freeze_moe_router: true``
  (examples/configs/grpo_math_1B_megatron.yaml @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf). The one published pair
  that isolates routing on one layout is Megatron-Bridge's Qwen3-30B-A3B H100 verification card (16 GPUs, TP 1,
  EP 16, HybridEP, 1 x 4,096 x 64, container 26.06): natural routing on RedPajama-2, 30.29 s a step, against the
  force-balanced mock-data performance item, 20.15 s (examples/model_verification_cards/qwen3-30b-a3b/card.yaml
  @067f987df03b8355b03192d88d70f1709fedf51a, items pretrain and pretrain_performance). The plan's only difference
  between the two is the performance item's EP all-to-all overlap (5.77 s of exchange, 0.09 s left exposed), which
  leaves 4.5 s, 22% of the balanced step, for routing, data and the performance item's other settings (fused
  HybridEP permute, ``CUDA_DEVICE_MAX_CONNECTIONS`` 32): an upper bound on the imbalance cost there. A sensitivity
  read (every expert GEMM and EP all-to-all 1.5x slower, not committed) moves the under-planned rows by 0-13
  points (gpt-oss-20b SFT -59% -> -54%, gpt-oss-120b pre-training -66% -> -57%, the LoRA card and gpt-oss-120b SFT
  by under a point, NeMo RL v0.3's update -68% -> -65%) and sends force-balanced rows 20-40 points over (Megatron-Bridge
  Qwen3-235B-A22B H100 -15% -> +26%, DeepSeek-V3 H100 +1% -> +33%). The one-GPU gpt-oss LoRA card, with no EP rank
  to wait for, misses about as much per micro-batch as the EP 8 SFT card. The one published per-rank load for
  gpt-oss: Nguyen et al., "Least-Loaded Expert Parallelism" (arXiv:2601.17111, §3.1 and Fig. 3, the paper as
  SalesforceAIResearch/LeastLoadedEP llep_paper.pdf @034974620fc7fbeac98e01b71f1167930761c849), gpt-oss-20b at EP 8 on
  in-domain math chat data: the busiest GPU takes 30-35% of a layer's routed tokens against 12.5% balanced (2.4-2.8x
  the mean), the busiest expert up to 20% against about 3%, both maxima over the 24 layers, varying batch to batch.
  Applied as 2.4x to every expert GEMM and EP all-to-all (an upper bound: the maximum over layers taken for every
  layer; not committed), the gpt-oss cards go: 20B pre-training -45% -> -20%, 20B SFT -59% -> -45%, 120B
  pre-training -66% -> -42%, LoRA and 120B SFT within 1.3 points (host-bound in the plan); NeMo RL v0.3's Qwen3-30B-A3B update
  -68% -> -59%. The force-balanced Megatron-Bridge gpt-oss-120b H100 rows, which a natural-routing condition would
  leave out, would go from about -25% to +13 to +32% under the same factor. No per-layer mean of that maximum, nor
  any figure for these runs' data (Tulu-3 for the SFT cards, a Megatron indexed corpus for pre-training), is
  published, so the layer stays timed balanced.
* The EP exchange: doubling every EP all-to-all (not committed) moves gpt-oss-120b pre-training (EP 16 over two
  nodes) -66% -> -57%, gpt-oss-20b SFT -59% -> -56%, ms-swift's Megatron row -55% -> -34% (its inter-node network is
  not published), the NeMo RL v0.3 update -68% -> -65%. Between the gpt-oss pre-training cards (both TP 2, PP 4, 8
  local experts, 2,048 tokens per rank after sequence parallel) the 120B one, whose EP 16 crosses nodes, misses
  about 12 ms more per layer and micro-batch than the 20B one (EP 4 in a node), where the plan puts 2.2 ms more
  exchange; but gpt-oss-120b SFT, EP 8 inside a node, misses as much as the 120B pre-training card.
* gpt-oss attention runs Transformer Engine's cuDNN fused kernel in the 26.06 container (Transformer Engine 2.16,
  cuDNN 9.21.1, Megatron-Bridge docs/releases/software-versions.md @067f987df03b8355b03192d88d70f1709fedf51a):
  ``nvte_get_fused_attn_backend`` admits learnable-sink softmax from cuDNN 9.13.1 and sliding windows on bshd / sbhd /
  thd from 9.6 (NVIDIA/TransformerEngine transformer_engine/common/fused_attn/fused_attn.cpp l.429-456 @v2.16
  4220403e831d29e93868f7793693ea83f6b8b05b), and the Python filter disables it for thd with sinks only below cuDNN
  9.18 (attention/dot_product_attention/utils.py l.950-956, same commit). The plan times it at 0.1 ms a layer and
  micro-batch on the 2,048-token SFT cards and 0.4 ms on the 4,096-token pre-training cards. The regression the
  Megatron-Bridge performance page footnotes for its 26.06.01 gpt-oss-120b rows (NVIDIA/cudnn-frontend issue #256) is
  ``grouped_gemm_dglu_wrapper_sm100``, a Blackwell kernel (10x slower from cudnn-frontend 1.24.0): not these H100
  rows. The kernel's windowed rate, checked against cuDNN's own gpt-oss measurements, is priced right or slow
  (``attention_time`` module docstring, 2026-12-04). Priced since 2026-12-04 around it: Megatron-Core's unfused RoPE,
  which YaRN's concentration factor forces (``inventory.megatron_rope_work``), the clamp's re-run under the ``moe_act``
  recompute (``megatron_clamp_recompute_work``) and, with fp8 attention, cuDNN's fp8 windowed backward
  (``attention_time.fp8_window_attention_ratio``).

**Twins in the published data (2026-12-03; nothing set from them).** Every Megatron-Core MoE row that plans within
about 25% routes balanced by construction: Megatron-Bridge's performance tables (``moe_router_force_load_balancing``,
the page's footnote), DGX Cloud's and NeMo 25.02/25.04's (token drop, capacity factor 1, padded to capacity), NeMo
Automodel's ``FakeBalancedGate``. The rows that plan 40-70% short route with the trained router on real tokens (the
verification cards, NeMo RL, ms-swift, verl) or are the two Megatron-Bridge containers the same page shows at half
the throughput of their neighbours (25.11 and 26.02 on H100). One layout pair isolates the recipe: gpt-oss-120b on
64 H100s, TP 1 / PP 4 / EP 8 / 4,096 tokens a rank, balanced (performance table) costs 18.3 ms per decoder layer and
micro-batch, 4.4 ms over the plan, while the verification card's TP 2 / PP 4 / EP 16 / 2,048 tokens a rank, natural
routing, costs 27.6 ms (19.5 ms over); gpt-oss-20b's cards cost 14-17 ms a layer and micro-batch at 2,048 tokens with
TP 1 or 2, EP 1, 4 or 8 (7.9-10.2 ms over). Qwen3-30B-A3B's balanced cards miss 1-2.5 ms a layer, its natural-routing
card 2.6 ms (4,096 tokens) and 5.2 ms (2,048). The model FLOPs agree with Megatron's own count where it is exact:
the published TFLOP/s over tokens/s equals the plan's FLOPs per token within 0.5% for Qwen3-30B-A3B, Qwen3-235B-A22B
and DeepSeek-V3; NeMo 25.02's Mixtral is 4% over (that formula's attention takes no causal half); Megatron-Bridge up
to 26.04 counts gpt-oss's experts as two projections, not three (``gated_linear_multiplier`` 3/2 only when
``activation_func == F.silu``, src/megatron/bridge/training/utils/flop_utils.py l.231-232
@df0289c180dd20ff26933455c7a0a11084f6a36f), so its gpt-oss TFLOP/s is 21% low; the 26.06 count (gated, windowed) on
the verification cards' pretraining items matches their run only with a 32,000-entry vocabulary, which their
recipe's tokenizer sets (the entries' note). No published per-layer load of these runs' routers exists, so the layer
stays timed balanced.

**MoE rows as a set (2026-12-04; nothing set from it).** ``benchmarks/moe_layer_gaps.py`` prints, for the 185 planned
MoE training rows, published minus planned per MoE layer and micro-batch with the tokens a rank routes, the local
experts, EP, TP, PP, top-k, framework, precision, ``moe_launch`` and GPU. What the miss does not scale with:

* the routed rows: on one layout and GPU it shrinks as a rank's tokens grow (Megatron-Bridge's Qwen3-30B-A3B H100
  verification cards, EP 16: 5.2 ms at 2,048 tokens a rank, 2.6 ms at 4,096; gpt-oss-120b SFT 15.9 ms at 1,024 tokens
  against its balanced H100 performance rows' 4.5-5.1 ms at 4,096), and prime-rl's EP 1 rows miss 20-30 ms at 16,384
  tokens and 17-20 ms at 65,536: so not imbalance, the grouped-GEMM rate nor the permutes, which all grow with rows;
* the local experts: gpt-oss-20b SFT (4 local) 8.5 ms, gpt-oss-120b SFT (16 local, half the tokens) 15.9 ms, prime-rl
  (128 local) the largest;
* the GPU, once the container is fixed: Megatron-Bridge's signed medians by GPU, dense / MoE, are GB300 +17.3% /
  +13.0%, GB200 +3.4% / +3.5%, B200 +0.1% / -20.6%, H100 +2.8% / -23.9%, but for one container and model B200 and
  GB200 agree within 5 points (Qwen3-30B-A3B 26.02.01 -10.2 / -13.0%, 26.04 -9.6 / -14.1%, 26.04.01 -8.7 / -13.9%;
  gpt-oss-120b BF16 26.04 -29.5 / -34.3%): the B200 / H100 MoE medians carry the 25.11 / 26.02 containers NVIDIA files
  as regressions (above) and gpt-oss-120b, and GB300's over-prediction is dense too.

Busiest-rank load tried as one factor ``f`` on every EP > 1 rank's routed rows (expert GEMMs, SwiGLU and permute bytes)
and its EP all-to-all (not committed): at ``f`` = 1.3 / 1.6 the 38 points of the natural-routing rows (verification
cards, NeMo RL, ms-swift, verl; prime-rl's EP 1 does not move) go from a signed median of -27.8% to -23.7% / -22.1%,
the 166 other moved points from -7.2% to +5.8% / +17.9% (GB300 rows to +30-55%). The natural rows barely move because
their plans are host-bound or generation-bound (gpt-oss-120b SFT -56.8% -> -56.1% at 1.6, NeMo RL's DeepSeek-V3 steps
under 1.5 points, the v0.3 Qwen3-30B-A3B update -62.3% -> -58.7%): a factor fitted on the fit half of those rows would
exceed 2 and still leave most of them past -40%, so none is fitted. Two unpriced pieces of the routed layer, read in
code and bounded: (1) the aux-loss scores (``routing_bytes(aux_loss=True)``; counted since 2026-12-04 where the card
states ``moe_load_balancing``, "Router aux-loss ops" below): at Qwen3-30B-A3B's shape (4,096 tokens, 128 experts,
fp32 scores) about 16 MB forward and 4 MB backward a layer (6 us at H100 bandwidth) and some 13 eager kernels
forward (softmax, top-k, the map's zeros / int / scatter / bool, its sum, the mean, product and sum of the loss, the
tracker's add; 14 counted since, ``AUX_LOSS_KERNELS``), about 0.9 ms a layer and micro-batch forward at the eager
per-op rate (14 x 65 us) against 2.5-16 ms misses, and absent where the type is ``none`` (gpt-oss, NeMo RL); (2) the unfused permute
(``moe_permute_fusion`` False, Megatron-Core's default, megatron/core/transformer/transformer_config.py l.912
@d12f6c8c9aff51e166d872fd70151687a8e3f375) calls ``masked_select`` on the tokens and the probabilities in ``permute``
and on the probabilities in ``unpermute`` (megatron/core/transformer/moe/moe_utils.py l.296, 302 and 371 at
core_r0.12.0, 5cb6dbb3ed04e6fa11a862d90fe898ac2d3ddfad, ms-swift's Megatron), each a host sync beyond
``DISPATCH_FORWARD_SYNCS``; the newer argsort permute keeps only the last (l.471-478 and 593 @d12f6c8c); fully
serialised passes bound every sync's cost at ms-swift's Megatron row -55% -> -50% (above), so not its gap.

**Busiest-rank load of a trained router (2026-12-05): priced for Qwen3-MoE.** With dropless routing the EP
all-to-all is a collective, so at every MoE layer each rank waits for the rank whose local experts drew the most
tokens: its expert GEMMs and its larger receive. The card's ``parallel.moe_router_load`` (``trained``, the default, or
``balanced``) scales the routed rows of the expert GEMMs and the expert-side elementwise work on the received rows
(``inventory.step_inventory``'s ``expert_load_factor``) and the bytes of each all-to-all or DeepEP dispatch and
combine, not their fixed latency, nor the all-gather dispatcher's collectives, which move every rank's rows whatever
the routing (``model_parallel.model_parallel_comm``'s ``ep_load_factor``), by
``busiest_rank_load_factor``: ``1 + CV·√(ep/E)·z(ep)``, the expected busiest of ``ep`` ranks each summing ``E / ep``
experts whose loads spread with coefficient of variation CV (independent experts, normal approximation, ``z`` by
Blom). The only published per-expert spread of a trained router on real tokens found is Qwen3-30B-A3B's
(``TRAINED_ROUTER_EXPERT_LOAD_CV``: load-balancing loss 1.87 on DCLM, CV ≈ 0.93), so the factor applies to the
``qwen3_moe`` family (1.17 at EP 4, 1.33 at EP 8, 1.58 at EP 16 of 128 experts); other families stay timed balanced
under either value. EP 1 has no factor, nor ``parallel.moe_routing`` consecutive (NeMo Automodel's
``FakeBalancedGate``, balanced by construction: ``plan.time.ep_load_factor_of``). The plan says when the factor
applies and whether the EP is beyond the checks below (``TRAINED_ROUTER_CHECKED_EP``), and notes that memory is
planned at the mean rank's rows (``plan.stages.model_parallel_notes``). Memory is unchanged: the busiest rank's larger activations are a memory
question not taken here. Benchmark rows whose source routes balanced by construction are planned ``balanced``
(``benchmarks/step_times.py`` ``FORCED_BALANCE_SOURCES``: Megatron-Bridge's performance tables and the verification
card's performance item, DGX Cloud 25.05 and NeMo 25.02 / 25.04 token drop at capacity factor 1, NeMo Automodel's
``FakeBalancedGate``, xtuner's and Megatron-MoE-ModelZoo's ``--moe-router-force-load-balancing``), each with the
reason in its notes. This supersedes "nothing set" in the sections above for Qwen3-MoE.

Checks, none of them fitted. (1) Same model, same layout, published: mlc-ai/pith-train issue #79, Qwen3-30B-A3B,
sequence 8,192, EP 4 / PP 2, FP8, 8 x B200: 17.5k tokens/s/GPU from the checkpoint on DCLM against 18.20k
force-balanced (``benchmark=True``), about 4% (two machines); the factor at EP 4 is 1.17 on the expert GEMMs, a few
percent of that step. (2) Megatron-MoE-ModelZoo's Qwen3-235B-A22B long-context table (best_practice/qwen3/readme.md
@020b8136b3bc6f47e4143849f54e400cf0f71e8a, H100, 32 nodes, TP 4, PP 8, VPP 4, EP 8, DeepEP, GBS 256): forced
balance / dropless 295 / 237 TFLOPS at 16K (1.245x), 335 / 277 at 32K (1.209x), 368 / 320 at 64K (1.150x), 389 /
357 at 128K (1.090x); the plan with the factor (1.33 at EP 8) gives 1.088x / 1.064x / 1.041x / 1.023x on those
layouts (not scored rows; not committed): the same fall with the sequence, a third of the published excess. That run
pre-trains (its router state and data are not stated), so the factor reads as a lower estimate, as its derivation
says. (3) Megatron-MoE-ModelZoo's Mixtral-8x22B script (best_practice/Mixtral/run_mixtral_8x22B.sh
@0993e667ef2183563fdb238acba1df94b93744e5, from a checkpoint) gives dropless about 455 against token drop 470 TFLOPS
(3%): a top-2-of-8 router spreads far less than CV 0.93 would
make 8 experts on 8 ranks (2.3x), one reason the factor is kept to the family it was read from. Sources searched
without a usable layer-averaged figure: deepseek-ai/EPLB's README (an example matrix), NVIDIA/TensorRT-LLM's
"Scaling Expert Parallelism" blog (docs/source/blogs/tech_blog/blog4_Scaling_Expert_Parallelism_in_TensorRT-LLM.md
@1d263f15a979ef2902c60de3f6238bcc0952bb29: DeepSeek-R1 inference, per-rank counts of single hot layers in figures
only), LLEP (arXiv:2601.17111: §3.1 Fig. 3 maxima over layers; §5.2 / Fig. 1c forward-only "up to" 2.2x / 1.88x
for gpt-oss-20b / 120b), Ma et al. (arXiv:2605.20982, abstract: the per-expert max/mean ratio moves at most 5% over
EP 4-32 for Qwen3-30B and four other checkpoints; the per-model values were not read here), the loss-free
balancing paper's MaxVio (arXiv:2408.15664: per expert, its own 1B / 3B models).

Effect (``benchmarks/step_times.py``): 22 points move, all Qwen3-MoE rows of trained-router sources: the Qwen3-30B-A3B
H100 verification cards -25.9% -> -6.5% (pre-training) and -41.7% -> -23.3% (SFT), ms-swift's Megatron row -53.9% ->
-45.1%, verl's fully-async update -32.2% -> -26.7% and log-prob -14.7% -> -9.2%, NeMo RL's Qwen3 steps 1-4 points
toward published (v0.3's log-prob -56.7% -> -52.7%), verl's fully-async step +12.4% -> +13.9% the one away; their
signed median -14.9% -> -10.4%. All-rows median |error| 10.34% -> 10.22%, RL step 15.0% -> 14.7%, pretrain 8.2% ->
8.1%, beyond 50% 58 -> 57; no subset median worse; force-balanced rows unchanged. Applying the factor to every family
(not committed) would also move the gpt-oss verification cards 1-8 points and NeMo RL's DeepSeek-V3 steps under 1
point; without a published spread for them it is not applied.

**Router aux-loss ops and the layer's op count, measured (2026-12-04).** ``benchmarks/mcore_moe_layer_ops_cpu.py``
builds Megatron-Core's MoE layer (megatron-core 0.14.0 from PyPI, the source of NVIDIA/Megatron-LM core_v0.14.0
23e00ed0963c35382dfe8a5a94fb3cda4d21e133; torch 2.13.0+cpu, local spec without Transformer Engine, so
``SequentialMLP`` experts; gloo groups of EP 1 and EP 2; hidden 64, 256 tokens; ``moe_permute_fusion`` and
``moe_router_fusion`` False, i.e. the eager router) and counts its non-view ATen ops per region with a
``TorchDispatchMode``, backward ops by the region whose forward made the autograd node (data:
``benchmarks/results/mcore_moe_layer_ops_cpu.json``). Forward, the router (its GEMM included), the dispatcher's pre-
and post-processing, the permute, unpermute and chunk sorts, the split-size D2H copies (copied as on a GPU), the
all-to-alls and their output buffers apart: 34 ops at EP 2 with no load-balancing loss, 48 with ``aux_loss``
(Qwen3-MoE's router: 128 experts, top-8), 50 with ``moe_router_force_load_balancing`` too, 23 and 37 at EP 1;
backward 17 without the loss, 23 with it, at both EPs. The plan counts 28 forward at EP > 1 (``MOE_DISPATCH_KERNELS``
14, the router GEMM, ``DISPATCH_PREPROCESS_KERNELS`` 7, ``DISPATCH_DTOH_COPIES`` 4, ``CHUNK_SORT_KERNELS`` 2) and 15 at
EP 1; backward, eager, 1.9 x 14 + the router's two GEMMs (+ 2 sorts at EP > 1) = 28.6 / 30.6. Without a loss the
counts differ little and in both directions: forward Megatron-Core issues 6 more at EP > 1 (five D2H copies, not
four: ``num_global_tokens_per_local_expert`` goes to the host too with several local experts and the unfused
permute; the unfused permute is 7 ops and the unpermute 2) and 8 more at EP 1 (the chunk sort runs whenever a rank
holds several experts and the routing is dropless, at any EP: token_dispatcher.py l.666-699 and l.712-731 at that
commit, not only with ``ep > 1`` as ``chunk_sort_bytes`` has it, plus two D2H copies); backward the plan counts 12-14
more. At the plan's per-op host rates (65 us forward, 12 us backward, ``rates``; eager) that nets +0.23 ms (EP > 1)
and +0.38 ms (EP 1) per MoE layer and micro-batch, against misses of 8-20 ms a layer on the gpt-oss verification
cards (load balancing ``none``): not changed (``MOE_DISPATCH_KERNELS`` serves the other frameworks' MoE layers too).
What the plan did not count is the load-balancing loss (+14 forward, +6 backward with ``aux_loss``; +18 / +14 with
``seq_aux_loss`` on DeepSeek-V3's router) and DeepSeek-V3's sigmoid, group-limited router with its expert bias (27
forward and 15 backward ops against a softmax router's 9 and 7): ``AUX_LOSS_KERNELS`` (the card's
``parallel.moe_load_balancing``) and ``GROUP_SIGMOID_ROUTER_KERNELS`` (a model with ``n_group > 1`` and the sigmoid
router), both only under ``MoeLaunch.EAGER`` (``moe_router_fusion`` computes the scores, the map and the loss in
Transformer Engine's fused router kernels, and a router CUDA graph replays them: neither is measured here). Mapped
``aux_loss`` where a source states it: the Megatron-Bridge Qwen3-30B-A3B verification cards (Qwen3-MoE provider) and
ms-swift's Megatron SFT (``--moe_aux_loss_coeff 0.01``); the entries' notes. Effect (``benchmarks/step_times.py``):
the Qwen3-30B-A3B 32K SFT card -7.2% -> -5.7%, ms-swift's Megatron row -54.0% -> -53.9% (device-bound in the plan),
NeMo RL's DeepSeek-V3 steps (eager, load balancing ``none`` in NeMo RL's configs) -48.8 -> -48.0% (v0.5 H100 DAPO),
-46.4 -> -45.8% (v0.5 GB200), -43.9 -> -43.4% and -49.7 -> -49.4% (v0.6 GB200), DGX Cloud 25.05's GB200 DeepSeek-V3
pre-training -33.8 -> -34.4% and -35.1 -> -35.7% (the plan then spent the same idle GPU time on the tensor-parallel
exchange and again on the slowest rank's wait, so more host time shortened the step: an error, not a mechanism; one
GPU-timeline budget per micro-step has since replaced it, ``training.gpu_timeline_exposed_s``); no subset median
moves. Host seconds on this CPU (a shared 2-core AMD EPYC VM, one thread, best of 7
rounds of 3 calls, noisy): the router region 35-85 us per op (0.3-0.8 ms a layer forward without a loss, 1.3-1.7 ms
with ``aux_loss``, 2.1-3.1 ms for DeepSeek-V3's), the chunk sorts' ``cat`` 41-484 us per op (``sort_chunks_by_idxs``
splits the rows into local experts x EP views and indexes them from Python, moe_utils.py l.383-412), against the
9.7-10.1 us per op of a transformers Qwen2 layer on a similar VM (``rates.HOST_S_PER_FORWARD_KERNEL``'s docstring,
not re-measured side by side): Megatron-Core's router and dispatcher cost several transformers ops' host time per
op. That is a per-op rate, which this module does not set (``rates`` fits them); the per-op counts are not the 3-5x
per-micro-batch host gap of the worst rows (Megatron-Bridge's B300 Qwen3-235B-A22B MXFP8 rows graph and fuse their
router, so nothing here reaches them; the gpt-oss cards route with no loss). Not measured: ``TEGroupedMLP``'s own
ops (no Transformer Engine on this CPU; ``te_host`` prices its Python).

**The grouped experts' per-split quantisation (2026-12-05).** Under fp8 current scaling, MXFP8 or block scaling,
``TEGroupedMLP``'s ``GroupedLinear`` quantises its input (forward) and its output gradient (backward) one local expert's
split at a time: ``tex.split_quantize`` fuses the splits only for delayed scaling, and otherwise calls each split's
quantizer, three kernels a split under current scaling (amax, scale, cast) and one under MXFP8
(``float8_casts.grouped_split_quantize_extra_kernels``, read in NVIDIA/TransformerEngine v2.16
@4220403e831d29e93868f7793693ea83f6b8b05b; the opt-in grouped-tensor path of 2.17-2.18 is off by default). The plan
had counted one linear's casts per grouped call; it now adds the (local experts - 1) splits' kernels, forward and
backward, on Megatron-Core cards (``inventory.step_inventory``), launched from C++ with no Python around each: bare
kernels, at the backward's per-kernel host rate and unscaled by the compile factor. No constant: the kernel counts are
TE's, their costs the plan's existing per-kernel rates. Priced first at the forward's per-op rate (compile-scaled for
current scaling, the full 65 us for MXFP8's unscaled casts: not committed) they moved 50 rows, most toward their
published steps (all rows 10.20 -> 9.97%), but that rate is Python dispatch through modules, which these launches do
not pay. As committed (``benchmarks/step_times.py``, 74 rows move, all Megatron-Bridge fp8 / MXFP8 MoE): the H100
FP8-CS Qwen3-30B-A3B rows 26.02 -65.3 -> -59.0%, 26.02.01 -23.1 -> -11.9%, 26.04 / 26.04.01 / 26.06 -27.0 / -26.6 /
-27.7 -> -22.0 / -21.5 / -22.7%, 25.09 -14.0 -> -14.2%, 25.11 -64.3 -> -64.4% (MBS 2, 32 micro-batches); B200
Qwen3-30B-A3B MXFP8 25.11 -47.4 -> -43.2%, 26.02 -45.2 -> -40.8%; 25.09 B200 Qwen3-235B-A22B FP8 -21.6 -> -15.8%,
GB200 Qwen3-30B-A3B FP8 -18.3 -> -16.3% and Qwen3-235B-A22B FP8 +5.9 -> +8.7%, its MXFP8 row +10.1 -> +11.1%; the
other MXFP8 rows by 0.3 points or less (one kernel a split at the C++ rate is small beside their device time: the
B300 Qwen3-235B-A22B MBS 1 rows stay -56.2% / -53.0%), many of them 0.1-0.2 points faster, not slower: more short kernels lower the mean kernel
time ``training.synced_seconds`` charges each host sync's refill (an approximation of that function, left as is). One
row moves away far: Megatron-Bridge 25.09 B200 Qwen3-30B-A3B FP8 -0.8 -> +37.5%; its preset sets ``cuda_graphs:
true`` (Megatron-Core's per-layer CUDA graphs, which token drop's static shapes allow), which replays the layer's
launches with no host cost, and no card field states it (the entry's ``checked``). All rows' median 10.20 -> 10.29%,
pretrain 8.19 -> 8.22%, fit half 10.51 -> 10.59%, held-out half 10.02 -> 10.02%, beyond 50% 65 -> 65; no H200 row
moves. Still short: the 25.11 / 26.02 H100 and 26.02 / 26.02.01 B300 rows (the EP-overlap recipes, their entries'
``checked``), the gpt-oss verification cards (bf16: nothing quantised) and ms-swift's ZeRO-3 row (bf16, transformers'
expert loop). Not counted: ``GroupedLinear``'s backward re-quantisation of a saved original input
(``save_original_input``, grouped_linear.py l.507-522 @v2.16), and Megatron-Core's ``SequentialMLP`` experts (one TE
linear each, ``moe_grouped_gemm`` off), whose casts stay one budget per projection.

**The MoE rows beyond -50%, read as a set once more (2026-12-05); nothing set.** Every MoE training point of
``benchmarks/step_times.json`` listed by framework, GPU, precision, EP and routing: the rows beyond -50% are not
separated by precision or GPU generation but by recipe and software path. Same model, system and layout, one switch
apart: Megatron-Bridge's H100 FP8-CS Qwen3-30B-A3B (PP 2, EP 8) plans -14.2% (25.09) and -11.9% (26.02.01) without the
EP-overlap recipe and -64.4% (25.11) / -59.0% (26.02) with it; its B300 Qwen3-235B-A22B MXFP8 plans -56.2% / -53.0%
with VP 4 (26.02 / 26.02.01) and -6.8% / +5.6% without VP at MBS 2 (26.04 / 26.04.01), the B200 rows of 26.02 without
VP -25.0%; gpt-oss-120b on 64 H100s plans -19.4 to -22.3% in the tuned performance tables (TP 1, fused router,
force-balanced) and -55.6% (SFT) / -63.9% (pre-training) as the functional verification cards (TP 2 with sequence
parallel, eager router and dispatcher, natural routing). Force-balanced Megatron-Bridge MoE pre-training rows plan
with a median of -16.2% on Hopper FP8 / FP8-CS (13 rows) and -19.5% on Hopper BF16 (7), -0.3% on Blackwell MXFP8 / FP8
(87) and -18.2% on Blackwell BF16 (24); their natural-routing Hopper BF16 rows (the verification cards, 8) -33.4%. FP8
rows plan closer than BF16 ones on both generations, so low precision is not what the short rows share, nor Hopper
against Blackwell (the B300 VP rows sit in the Blackwell MXFP8 set). The short rows are the recipes NVIDIA
itself reverted for host overhead (the entries' ``checked``, and "Published regressions" above), the eager
natural-routing verification cards and NeMo RL v0.3 policy (above), and ms-swift's ZeRO-3 row with transformers < 5's
expert loop (its entry; ``compute.expert_loop``, ``compute.zero3_trace``). Three more candidates read in code, each too
small or not present on these rows:

* Python's automatic garbage collection (a full collection on one rank stalls the others at the next collective).
  Megatron-Bridge's gpt-oss H100 pre-training recipes set ``cfg.train.manual_gc = True`` with interval 100
  (src/megatron/bridge/recipes/gpt_oss/h100/gpt_oss.py l.89-90 and l.213-214
  @6799f099712c961f15cf92d6bd88998f029d672d); its SFT recipes build on ``_sft_common`` (src/megatron/bridge/recipes/
  common.py l.136 and l.181-185, same commit: ``TrainingConfig`` without ``manual_gc``), whose default is off
  (NVIDIA/Megatron-LM megatron/training/config/training_config.py l.91 ``manual_gc: bool = False``
  @d12f6c8c9aff51e166d872fd70151687a8e3f375), so the SFT cards run Python's automatic GC and the pre-training cards do
  not. It does not separate them: gpt-oss-120b pre-training (manual GC) plans -63.9% against SFT (automatic) -55.6%,
  gpt-oss-20b -44.6% against -48.8%. The one published size of aligning the collections is about 1.5% a step
  ("on 512 GPU FSDP, adding this (gc_schedule=1) gave a perf boost of ~1.5% per iter", pytorch/torchtitan pull request
  #148, https://github.com/pytorch/torchtitan/pull/148, read 2026-12-05). Not priced.
* FP8 current scaling's per-tensor amax all-reduce. Transformer Engine reduces the amax over the tensor-parallel group
  only under sequence parallelism, for a column-parallel layer's input and a row-parallel layer's output gradient
  (transformer_engine/pytorch/module/layernorm_linear.py l.1872-1879 and l.1889-1896, the same in linear.py l.2065 and
  layernorm_mlp.py l.2621-2669, @4220403e831d29e93868f7793693ea83f6b8b05b); ``GroupedLinear`` (the experts) sets no
  amax reduction (grouped_linear.py, same commit). The H100 FP8-CS Qwen3-30B-A3B rows run TP 1 without sequence
  parallelism: none there. The TP 2 Qwen3-235B-A22B FP8-CS rows (-12 to -16%) take about two 4-byte all-reduces over
  two NVLink ranks per layer and micro-batch, about 15 us each (``collectives.nccl_collective_seconds``, one node):
  12 layers a stage x 512 micro-batches x 2 x 15 us = 0.18 s of a 77 s step (0.2%). Not priced.
* Grouped-GEMM tile quantisation at few rows per expert (``gemm.wave_efficiency`` / ``tile_fill`` already price it):
  the short FP8 / MXFP8 rows route 2,048 (MBS 1) to 4,096 (MBS 2) rows to each local expert, balanced, so the last
  128-row tile of a group is at most 6% empty; the short shapes are the gpt-oss-120b SFT card's 256 rows an expert (BF16,
  EP 8, 16 local experts), whose GEMMs are a small part of a host-bound plan (the "Expert GEMM rate" bullet above).
* One hardware queue for the EP-overlap streams (``CUDA_DEVICE_MAX_CONNECTIONS=1`` would put the communication and
  compute streams' kernels in issue order, an all-to-all blocking the GEMMs queued behind it). Megatron-Bridge's
  performance launcher sets 1 only on Hopper with TP or CP > 1 and no ``moe_a2a_overlap``; 8 otherwise, 32 with the
  DeepEP / HybridEP backends or on sm100 and newer (scripts/performance/perf_plugins.py
  ``_set_num_cuda_device_max_connections`` l.206-237 @7af9601c9da746d21481194356295bfe23df3737, v0.2.0, the 25.11
  presets; l.218-249 @21b02e0cfb2f8ff907e0d8baee0c5205876c6812, v0.3.0, the 26.02 ones). The 25.11 H100 row (TP 1,
  all-to-all) ran with 8, the 26.02 H100 row (DeepEP asked) and the B300 rows with 32: no such serialisation there.

What stays unpriced for want of a per-layer or per-call figure: the host cost of Megatron-Core's combined 1F1B
schedule (EP overlap) and of the interleaved schedule at MBS 1, the eager Megatron-Core / Transformer Engine MoE
layer's per-layer cost on the verification cards, and DeepSpeed ZeRO-3's per-module work on a GPU beyond the CPU
measurement (``rates.ZERO3_MODULE_FORWARD_HOST_S``: stream events and NCCL launches are not in it).

Pure Python: no torch import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from trainfit.compute import collectives as coll
from trainfit.spec.enums import MoeDispatcher, MoeLoadBalancing

INT32_BYTES = 4.0
TRAINED_ROUTER_EXPERT_LOAD_CV = {"qwen3_moe": 0.93}
"""Coefficient of variation of the per-expert token loads of a trained router on real tokens, per micro-batch and
layer, by model family. Qwen3-MoE: Qwen3-30B-A3B from its released checkpoint on DCLM tokens reports a
load-balancing loss of 1.87, scaled so that 1.0 is balance as Megatron-LM reports it
(https://github.com/mlc-ai/pith-train/issues/79, the maintainers' reply of 2026-07-29; the scaling:
https://github.com/mlc-ai/pith-train/pull/14). The switch loss is ``E·Σ f_i·P_i``; with the mean probabilities
following the loads (``P_i ≈ f_i``) it is ``E·Σ f_i² = 1 + CV²``, so CV = √0.87 ≈ 0.93. Softer probabilities than
loads make the loss understate the spread, which pushes the true CV above 0.93. Two readings push it the other way.
(a) The same reply says "enforced balancing usually sits around 1.0 to 1.2": if a forced-balance run itself reads
up to 1.2 (finite batches: sampling noise on top of the even routing), the spread a trained router adds over it is
√(1.87 − 1.2) ≈ 0.82 to √(1.87 − 1.0) ≈ 0.93, so 0.93 is the top of that range. (b) The figure is one checkpoint's,
Qwen3-30B-A3B on DCLM, applied to the whole ``qwen3_moe`` family (Qwen3-235B-A22B has the same 128 experts, top 8,
but its own router); no other Qwen3-MoE size's figure is published, so the direction of that error is unknown
(Megatron-MoE-ModelZoo's 235B forced-balance gain is about three times what the factor gives, module docstring
check (2), which points upward there). Neither reading is applied: the value stays the one the loss gives. No other
family's spread is published: those are timed balanced (module docstring, "Busiest-rank load of a trained
router")."""
TRAINED_ROUTER_CHECKED_EP = (4, 8)
"""The expert-parallel sizes the busiest-rank factor's published checks cover: EP 4 (mlc-ai/pith-train issue #79,
https://github.com/mlc-ai/pith-train/issues/79, Qwen3-30B-A3B PP2-EP4, trained 17.5k vs force-balanced 18.20k
tokens/s/GPU) and EP 8 (NVIDIA/Megatron-MoE-ModelZoo best_practice/qwen3/readme.md
@020b8136b3bc6f47e4143849f54e400cf0f71e8a, Qwen3-235B-A22B EP 8, forced balance vs dropless). Beyond EP 8 the factor
(1.58 at EP 16, 1.96 at EP 32, 2.54 at EP 64 of 128 experts) is the order-statistics form extrapolated; the plan says
so in its note (``plan.time.router_load_note``)."""
EXPERT_PROJECTIONS = 2
"""fc1 (gate and up fused) and fc2 per expert."""
DISPATCH_PREPROCESS_KERNELS = 7
"""``MoEAlltoAllTokenDispatcher.preprocess`` on the device with ``ep > 1`` (or expert TP): the per-expert count
(``routing_map.sum(dim=0)``), the per-rank split (``reshape(...).sum(axis=1)``), the all-gather over the tp x ep
group, the local-expert slice (``contiguous``), its per-rank sum, the per-TP sum and the per-local-expert sum."""
DISPATCH_DTOH_COPIES = 4
"""``_maybe_dtoh_and_synchronize`` moves ``tokens_per_expert``, ``input_splits``, ``output_splits`` and
``output_splits_tp`` to the host (``num_out_tokens`` is a host integer when dropless)."""
CHUNK_SORT_KERNELS = 2
"""``sort_chunks_by_idxs`` after the dispatch and before the combine."""
DISPATCH_FORWARD_SYNCS = 1
"""Host-device synchronisations of Megatron-Core's token dispatcher per MoE layer forward (dropless routing; every
forward: training, its full or ``moe`` recompute, no-grad log-probs), whichever dispatcher runs:

* ``alltoall`` (``MoEAlltoAllTokenDispatcher``): ``preprocess`` picks one ``cuda_sync_point`` ("before_ep_alltoall"
  with EP or TP > 1, else "before_finish"; "before_permutation_1" under a capacity factor or padding for
  quantization) and ``_maybe_dtoh_and_synchronize`` copies the split sizes to the host on a side stream, then
  blocks the host there on ``self.d2h_event.synchronize()``: the host cannot queue the all-to-all (or the grouped
  GEMM's ``m_splits``) before the GPU has run the router (NVIDIA/Megatron-LM megatron/core/transformer/moe/
  token_dispatcher.py l.449-461, 547-613, 918-957 @d12f6c8c9aff51e166d872fd70151687a8e3f375, the Megatron-LM of
  Megatron-Bridge @6799f099712c961f15cf92d6bd88998f029d672d; ``self.cuda_dtoh_stream.synchronize()`` l.709
  @2ff0f099ffc30ffd152e3e29e921a1609d00855c, NeMo RL v0.3's; l.705 @64cb6bd7a155c4e742514ed1024407fb97d0a367).
  None with ``moe_pad_expert_input_to_capacity`` (drop and pad: ``_maybe_dtoh_and_synchronize`` skips) or with the
  preprocess in a CUDA graph, neither of which a card states, so not modelled;
* ``allgather``: ``dispatch_postprocess``'s ``self.local_map.sum(dim=0).long().cpu()`` (l.317 @d12f6c8c; its
  ``.sum().item()`` is then on the host tensor);
* ``flex`` (DeepEP): its dispatch busy-waits on the host for the received counts ("Synchronize total received tokens
  and tokens per expert", deepseek-ai/DeepEP csrc/legacy/buffer.hpp l.579-600 and l.1084 @dd758caf451848bd150e1046af3d0a73e5fff38d;
  "No CPU sync" only with ``num_worst_tokens``, which Megatron-Core's ``fused_dispatch`` does not pass,
  megatron/core/transformer/moe/fused_a2a.py l.106-137 @d12f6c8c: "the CPU will wait for GPU's signal to arrive"); HybridEP without a capacity budget sizes its
  buffers "dynamically (CPU sync in dispatch)" (token_dispatcher.py l.1108 @d12f6c8c). The unfused
  ``_indices_to_multihot`` after a DeepEP dispatch (``indices[mask]``, ``repeat_interleave`` without an output size,
  l.1333-1361) adds two more unless Megatron-Core's experimental fused path runs; the card does not tell DeepEP from
  HybridEP, so only the one both share is counted.

No backward sync: the split sizes are host values by then. The router's aux-loss trackers and the z-loss
synchronise nothing per layer (their reduction runs at logging). The sync is timed by ``training.synced_seconds``
(``inventory.PassInventory.host_syncs``)."""


AUX_LOSS_KERNELS = {MoeLoadBalancing.AUX_LOSS: (14.0, 6.0), MoeLoadBalancing.SEQ_AUX_LOSS: (18.0, 14.0)}
"""Non-view ATen ops (forward, backward) that the router's load-balancing loss adds per MoE layer and training
forward, counted by ``benchmarks/mcore_moe_layer_ops_cpu.py`` (megatron-core 0.14.0, data in
``benchmarks/results/mcore_moe_layer_ops_cpu.json``) as the router's ops with the loss on less those without it, the
same EP 1 and EP 2 layers: ``aux_loss`` on a Qwen3-MoE-shaped router (128 experts, top-8, softmax) 23 against 9
forward and 13 against 7 backward; ``seq_aux_loss`` on a DeepSeek-V3-shaped one (256 experts, top-8, sigmoid,
group-limited, expert bias) 45 against 27 and 29 against 15 (module docstring, "Router aux-loss ops"). Read in
NVIDIA/Megatron-LM megatron/core/transformer/moe/router.py @core_v0.14.0 23e00ed0963c35382dfe8a5a94fb3cda4d21e133
(``TopKRouter.routing`` l.433-441, ``_apply_aux_loss`` l.225-251, ``_apply_seq_aux_loss`` l.253-295,
``attach_and_log_load_balancing_loss`` l.297-331) and moe_utils.py (``switch_load_balancing_loss_func`` l.35,
``MoEAuxLossAutoScaler`` l.165, ``compute_routing_scores_for_aux_loss`` l.598, ``save_to_aux_losses_tracker``
l.690) at that commit. Each delta was measured on one router only and is applied to every router that states the
loss: ``aux_loss``'s 14 / 6 on the softmax top-k router, ``seq_aux_loss``'s 18 / 14 on DeepSeek-V3's sigmoid,
group-limited router with an expert bias. The loss recomputes its scores with the router's score function
(``compute_routing_scores_for_aux_loss``: sigmoid adds a normalisation softmax does not), so ``seq_aux_loss`` on
a softmax router, or ``aux_loss`` on a sigmoid one, may count a few ops differently (no such pair was counted)."""


GROUP_SIGMOID_ROUTER_KERNELS = (18.0, 8.0)
"""Non-view ATen ops (forward, backward) that Megatron-Core's unfused sigmoid, group-limited router with an expert
bias (DeepSeek-V3's: ``moe_router_score_function`` sigmoid, ``moe_router_num_groups`` 8, ``moe_router_group_topk`` 4,
``moe_router_enable_expert_bias``) adds per MoE layer over the softmax top-k router the inventory's
``MOE_DISPATCH_KERNELS`` prices: counted by ``benchmarks/mcore_moe_layer_ops_cpu.py`` (megatron-core 0.14.0,
``benchmarks/results/mcore_moe_layer_ops_cpu.json``), the router's ops with no load-balancing loss 27 forward and 15
backward against a softmax router's 9 and 7, at EP 1 and EP 2. Read in NVIDIA/Megatron-LM
megatron/core/transformer/moe/moe_utils.py @core_v0.14.0 23e00ed0963c35382dfe8a5a94fb3cda4d21e133
(``group_limited_topk`` l.416, ``topk_routing_with_score_function`` l.509: sigmoid, the bias added for the
selection, the group scores' top-k, the group mask and its scatter, the masked top-k, the gather of the unbiased
scores, their renormalisation and scaling) and router.py (l.446-448: the expert-bias token count,
``local_tokens_per_expert += routing_map.sum(dim=0)``)."""


def aux_loss_kernels(load_balancing: MoeLoadBalancing | None) -> tuple[float, float]:
    """Forward and backward kernels the router's load-balancing loss adds per MoE layer (``AUX_LOSS_KERNELS``);
    (0, 0) with none or unstated."""
    return AUX_LOSS_KERNELS.get(load_balancing, (0.0, 0.0)) if load_balancing is not None else (0.0, 0.0)


def expert_token_shards(*, tp: int, etp: int, ep: int, sequence_parallel: bool) -> float:
    """How many ways the tokens of a tensor-parallel group are split before routing: ``tp / etp``.

    Under sequence parallel (Megatron-Core requires it for MoE with ``tp > 1`` and ``ep > 1``:
    ``model_parallel_config.py`` "When using expert parallelism and tensor parallelism, sequence parallelism must
    be used") each rank routes its ``T / tp`` shard; an expert-tensor-parallel group of ``etp`` ranks all-gathers
    its shards, so an expert sees ``etp`` of them. Without sequence parallel (and ``ep == 1``) every TP rank holds
    the whole sequence: 1."""
    if tp <= 1 or not (sequence_parallel or ep > 1):
        return 1.0
    return tp / max(1, min(etp, tp))


def router_experts(*, local_experts: int, ep: int) -> int:
    """Columns of the router GEMM: every expert (the router is replicated on the EP ranks)."""
    return local_experts * max(1, ep)


def busiest_rank_load_factor(*, ep: int, experts: int, expert_load_cv: float) -> float:
    """The busiest expert-parallel rank's routed rows over the mean rank's, per MoE layer and micro-batch, for a
    trained router (dropless): each rank holds ``E / ep`` contiguous experts whose loads spread with coefficient of
    variation ``expert_load_cv`` (independent experts: the rank's load spreads ``cv·√(ep / E)``), and the busiest of
    ``ep`` ranks expects ``z(ep)`` standard deviations over the mean, ``z`` by Blom's approximation of the expected
    maximum of ``ep`` standard normals, ``Φ⁻¹((ep − 0.375) / (ep + 0.25))``:
    ``1 + cv·√(ep / E)·z(ep)``. 1 at ``ep`` 1 (one rank runs every token whatever the routing). The all-to-all is a
    collective, so every rank waits for that rank's expert GEMMs and its larger receive at every layer
    (module docstring, "Busiest-rank load of a trained router")."""
    if ep <= 1 or experts <= 0 or expert_load_cv <= 0:
        return 1.0
    z = NormalDist().inv_cdf((ep - 0.375) / (ep + 0.25))
    return 1.0 + expert_load_cv * math.sqrt(min(1.0, ep / experts)) * z


def trained_router_load_factor(*, family: str, ep: int, experts: int) -> float:
    """``busiest_rank_load_factor`` at the family's published per-expert load spread
    (``TRAINED_ROUTER_EXPERT_LOAD_CV``); 1 for a family with none (timed balanced)."""
    cv = TRAINED_ROUTER_EXPERT_LOAD_CV.get(family, 0.0)
    return busiest_rank_load_factor(ep=ep, experts=experts, expert_load_cv=cv)


def routing_bytes(*, tokens: float, experts: int, top_k: int, score_dtype_bytes: float = 4.0,
                  backward: bool = False, aux_loss: bool = False) -> float:
    """Memory traffic of the routing scores of one MoE layer (``tokens`` x ``experts`` of them).

    Forward, unfused (``moe_utils.topk_routing_with_score_function``), per score (``s`` bytes each): top-k reads
    the logits (s); the dense probabilities are a zero tensor (write s) scattered out of place (read s, write s);
    the routing map a zero tensor (write s) cast to int32 (read s, write 4), scattered (read 4, write 4) and cast
    to bool (read 4, write 1); the dispatcher sums the map (read 1): ``6·s + 18``; per token the ``k`` top-k
    values and int64 indices (``k·(s + 8)``). Backward: the dense probability gradient is materialised and
    gathered (write s, read s). ``aux_loss``: the aux-loss scores again (``compute_routing_scores_for_aux_loss``:
    softmax read s, write 4; top-k read 4; the map: write 4, scatter read 4 write 4, bool read 4 write 1; the
    per-expert sum read 1: ``s + 26``) and their gradient (write 4, read 4)."""
    if tokens <= 0 or experts <= 0:
        return 0.0
    s = score_dtype_bytes
    if backward:
        return tokens * experts * (2 * s + (2 * INT32_BYTES if aux_loss else 0.0))
    per_score = 6 * s + 18.0 + ((s + 26.0) if aux_loss else 0.0)
    return tokens * (experts * per_score + top_k * (s + 8.0))


def chunk_sort_bytes(*, rows: float, hidden: int, local_experts: int, ep: int, dtype_bytes: float = 2.0,
                     dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL) -> float:
    """Bytes of the sort by local expert after the dispatch and the unsort before the combine (each reads and
    writes the ``rows`` received rows of ``hidden``); zero unless ``ep > 1``, several experts are local and the
    dispatcher is the all-to-all one (``token_dispatcher.py`` ``MoEAlltoAllTokenDispatcher.dispatch_postprocess`` /
    ``combine_preprocess``; the flex dispatcher's one permute is the inventory's, module docstring). One pass: the
    backward runs the inverse sorts over the gradients, the same bytes."""
    if ep <= 1 or local_experts <= 1 or rows <= 0 or dispatcher is not MoeDispatcher.ALLTOALL:
        return 0.0
    return 2 * 2 * rows * hidden * dtype_bytes


def dispatcher_kernels(*, ep: int, expert_tp: int = 1, local_experts: int) -> float:
    """Kernels the all-to-all dispatcher adds per MoE layer per forward (``token_dispatcher.py``): the count
    preprocessing and its D2H copies with ``ep > 1`` or expert TP, and the two chunk sorts with ``ep > 1`` and
    several local experts. Backward reruns only the sorts' inverses (the split sizes are already on the host)."""
    k = 0.0
    if ep > 1 or expert_tp > 1:
        k += DISPATCH_PREPROCESS_KERNELS + DISPATCH_DTOH_COPIES
    if ep > 1 and local_experts > 1:
        k += CHUNK_SORT_KERNELS
    return k


def expert_gemm_kernels(*, local_experts: int, grouped_gemm: bool = True, backward: bool = False,
                        trained: bool = True) -> float:
    """Kernel launches of the expert MLP of one MoE layer on one rank.

    Grouped (``TEGroupedMLP``): one GEMM per projection forward (2), and per projection dX (+ dW when trained)
    backward. ``SequentialMLP`` (``moe_grouped_gemm`` off) loops over the local experts: fc1, activation, fc2
    each (3 per expert forward); backward the two GEMMs' dX (+ dW) and the activation's backward per expert."""
    per_projection = (2 if trained else 1) if backward else 1
    if grouped_gemm:
        return float(EXPERT_PROJECTIONS * per_projection)
    per_expert = EXPERT_PROJECTIONS * per_projection + 1  # + the activation (or its backward)
    return float(local_experts * per_expert)


def count_exchange_seconds(*, ep: int, expert_tp: int = 1, experts: int, latency_s: float | None = None,
                           bus_bytes_per_s: float, nodes: int = 1) -> float:
    """The token-count all-gather of one MoE layer's forward (``preprocess``: ``gather_from_sequence_parallel_region
    (num_local_tokens_per_expert, group=tp_ep_group)``, int64 per expert per rank): latency-bound, and the host
    waits on its result (the D2H sync before the all-to-all), so nothing hides it. Zero without EP or expert TP.
    ``latency_s`` None: NCCL's tuner over ``nodes`` nodes (``collectives.all_gather_seconds``)."""
    ranks = max(1, ep) * max(1, expert_tp)
    if ranks <= 1:
        return 0.0
    return coll.all_gather_seconds(total_bytes=8.0 * experts * ranks, ranks=ranks, bus_bytes_per_s=bus_bytes_per_s,
                                   latency_s=latency_s, nodes=nodes)


CLAMPED_GLU_FORWARD_BYTES = 8.0
"""Per element of the fc1 output (gate and up): two ``clamp`` on the strided halves (read 2, write 2) and the
``cat`` (read 2, write 2), Megatron-Core ``weighted_bias_quick_geglu_impl`` (module docstring), traced."""
CLAMPED_GLU_BACKWARD_BYTES = 15.0
"""Per element of the fc1 output: the clamps' backward (up, both bounds: ``ge``, ``le``, ``logical_and_`` on 1-byte
masks and ``where``; gate, max only: ``le`` and ``where``) and the chunk's ``cat`` (read 2, write 2), traced."""
CLAMPED_GLU_FORWARD_KERNELS = 3
CLAMPED_GLU_BACKWARD_KERNELS = 9
"""``scalar_tensor`` (twice), ``ge``, ``le`` (twice), ``logical_and_``, ``where`` (twice), ``cat``, traced."""
EXPERT_BIAS_FORWARD_BYTES = 12.0
"""Per element of the fc2 output: ``b * p`` (write 2, a broadcast), ``t + b·p`` (read 4, write 2), ``torch.cat``
(read 2, write 2), Megatron-Core ``TEGroupedMLP._apply_bias`` (module docstring), traced."""
EXPERT_BIAS_BACKWARD_BYTES = 16.0
"""Per element of the fc2 output: ``grad * b`` and ``grad * p`` (read 2, write 2 each), their sums (read 2 each) and
the split's ``cat`` (read 2, write 2), traced (16.25 with the per-row probability gradients)."""
EXPERT_BIAS_FORWARD_KERNELS_PER_EXPERT = 2
EXPERT_BIAS_BACKWARD_KERNELS_PER_EXPERT = 4
EXPERT_BIAS_CAT_KERNELS = (1, 2)
"""The ``cat`` of the per-expert sums forward; backward the probability gradients' and the output gradient's."""

AUTOMODEL_FC1_BIAS_BYTES = (8.0, 6.0)
"""(forward, backward) bytes per element of the fc1 output (``rows x 2·expert_width``) of NeMo Automodel's
``_apply_bias`` without routing probabilities: forward ``t + b`` per expert (read 2, write 2) and the ``cat``
(read 2, write 2); backward the bias gradient's row sum (read 2) and the split's ``cat`` (read 2, write 2).
Traced, ``tools/measure_automodel_expert_bias.py`` (module docstring)."""
AUTOMODEL_FC1_BIAS_KERNELS = ((1.0, 1.0), (1.0, 2.0))
"""((forward per local expert, forward fixed), (backward per local expert, backward fixed)), traced."""
AUTOMODEL_FC2_BIAS_BYTES = (28.0, 40.0)
"""(forward, backward) bytes per element of the fc2 output (``rows x hidden``) of ``_apply_bias`` with the
DeepEP dispatcher's float32 routing probabilities: forward ``b * p`` (write 4: the float32 product), ``t + b·p``
(read 2 + 4, write 4), the float32 ``cat`` (read 4, write 4) and ``.to(bf16)`` (read 4, write 2); backward, with
a gradient for the probabilities (a trained router), the cast of the output gradient to float32, ``grad * b`` and
``grad * p`` and their row sums, the casts back and the split's ``cat``. Traced."""
AUTOMODEL_FC2_BIAS_BACKWARD_BYTES_NO_PROBS_GRAD = 28.0
"""The fc2 loop's backward bytes when the routing probabilities take no gradient (Automodel's ``FakeBalancedGate``
returns constant weights, ``torch.ones(n_tokens, k) / k``, nemo_automodel/components/moe/layers.py l.269-275
@2861c4143cd335539213b1b6d0c890cb17682444): no ``grad * b`` and no row sum for them. Traced."""
AUTOMODEL_FC2_BIAS_KERNELS = ((2.0, 2.0), (6.0, 4.0))
AUTOMODEL_FC2_BIAS_KERNELS_NO_PROBS_GRAD = ((2.0, 2.0), (4.0, 3.0))
"""((forward per local expert, forward fixed), (backward per local expert, backward fixed)), traced, with and
without the probabilities' gradient."""


@dataclass(frozen=True, slots=True)
class MoeLayerWork:
    """Memory-bound bytes and kernels one MoE layer adds on one rank, forward and backward (Megatron-Core's
    routing and dispatch beyond the generic inventory)."""

    forward_bytes: float
    backward_bytes: float
    forward_kernels: float
    backward_kernels: float


HF_FP32_COMBINE_ROW_BYTES = ((8.0, 8.0), (26.0, 8.0))
"""((forward per expert row, forward per token), (backward per expert row, backward per token)) bytes per hidden
value that transformers' grouped_mm combine moves beyond its bf16 form when the routing weights arrive in fp32
(Mixtral: ``MixtralTopKRouter`` never casts them back, transformers v5.24.0 models/mixtral/modeling_mixtral.py
l.105-110; ``integrations/moe.py`` ``grouped_mm_experts_forward`` l.524-537). Forward, by op: ``proj_out *
sample_weights_g`` writes fp32 (+2 per row), ``weighted_out[inv_perm]`` reads and writes fp32 (+4), the ``sum`` over
top-k reads fp32 (+2) and writes fp32 per token (+2), and ``.to(hidden_states.dtype)`` is a cast of its own (read 4,
write 2: +6 per token). Backward: the cast's gradient to fp32, the index's scatter, the mul's fp32 gradients and
their casts back. Counted by the op tracer (``trainfit.trace.ops``, torch 2.13 CPU) on a Mixtral layer against the
same layer with the weights cast to bf16: forward 24 / 40 and backward 60 / 112 bytes per token and hidden value at
top-2 / top-4, one more backward kernel."""


def hf_fp32_combine_work(*, tokens: float, hidden: int, top_k: int) -> MoeLayerWork:
    """One MoE layer's extra memory-bound work in transformers' combine under fp32 routing weights
    (``HF_FP32_COMBINE_ROW_BYTES``) on ``tokens`` tokens: forward, backward bytes and kernels."""
    (f_row, f_tok), (b_row, b_tok) = HF_FP32_COMBINE_ROW_BYTES
    rows = tokens * top_k
    return MoeLayerWork(forward_bytes=(f_row * rows + f_tok * tokens) * hidden,
                        backward_bytes=(b_row * rows + b_tok * tokens) * hidden, forward_kernels=0.0,
                        backward_kernels=1.0)


SPLIT_GATE_UP_DX_SUM_BYTES = 6.0
"""Bytes per element of the ``rows x hidden`` routed input that summing w1's and w3's input gradients moves in backward
(read 2 + 2, write 2, bf16). torchtitan's ``GroupedExperts`` keeps the gate and up weights as two stacks (``w1``,
``w3``, each ``(E, expert width, hidden)``) and runs ``torch._grouped_mm(x, w1.transpose(-2, -1), offs)`` and
``torch._grouped_mm(x, w3.transpose(-2, -1), offs)`` on the same rows (pytorch/torchtitan torchtitan/models/moe.py
l.44-46 and l.110-135 @a1fdd7e43694bbfeff5d6ad8ac738c067bb90d41, the rev PrimeIntellect-ai/prime-rl pins, whose own
``GroupedExperts`` does the same, src/prime_rl/trainer/models/layers/moe.py l.124-140 and l.153-155
@d8f290ef0358a804f1912bd29ea1b37cc56894b4): two grouped GEMMs of the expert width each, not one of twice it, and in
backward two input gradients (``_grouped_mm_mat1_backward``: ``_grouped_mm(grad, mat2.transpose(-2, -1), offs)``,
pytorch/pytorch tools/autograd/derivatives.yaml ``_grouped_mm`` entry @d327a787782618826890c323f8d7e51f3d28ec13,
torch/csrc/autograd/FunctionsManual.cpp @002ca6715ba1ab4d2369262b487eeb30bf249911) that autograd adds into ``x``'s
gradient. Each GEMM runs PyTorch's CUTLASS grouped kernel on the strided views as they
are (``check_valid_strides_and_return_transposed`` accepts row- or column-major operands and raises otherwise; no
``.contiguous()`` copy; ``GroupMM.cu`` instantiates all four row / column-major pairs, pytorch/pytorch
aten/src/ATen/native/GroupedMMUtils.h and aten/src/ATen/native/cuda/GroupMM.cu
@117b863359bf2941f50d404dc3172d1c46f92b41), so the split's cost is the tile and depth efficiency of the narrower
GEMMs (``gemm.grouped_mm_seconds``), one more launch a pass, and this sum."""


def split_gate_up_grouped(*, expert_padding: bool, grouped_expert_adapters: bool = False, expert_loop: bool,
                          grouped_gemm: bool) -> bool:
    """Whether the routed gate and up projections run as two grouped GEMMs on the same rows (torchtitan's and prime-rl's
    ``GroupedExperts``, ``SPLIT_GATE_UP_DX_SUM_BYTES``), when the experts run as grouped GEMMs, not a loop: the
    padded-wrapper experts (``MoeExperts.GROUPED_PADDED``), and prime-rl's LoRA experts (``ExpertAdapters.GROUPED``,
    ``MultiLoRAGroupedExperts``), whose frozen base runs ``h1_base`` and ``h3_base`` as two ``torch._grouped_mm`` on
    ``base_w1`` and ``base_w3`` (PrimeIntellect-ai/prime-rl src/prime_rl/trainer/models/layers/lora/multi_moe.py
    l.333-341 @d8f290ef0358a804f1912bd29ea1b37cc56894b4, unchanged from the class's first version f870bc91d to
    8457b601d l.382-387 for this model family)."""
    return (expert_padding or grouped_expert_adapters) and grouped_gemm and not expert_loop


def split_gate_up_dx_sum_bytes(*, rows: float, hidden: int) -> float:
    """Backward bytes of one MoE layer's sum of the two input gradients over ``rows`` routed rows of ``hidden``."""
    return SPLIT_GATE_UP_DX_SUM_BYTES * rows * hidden


EXPERT_PADDING_BYTES = (12.0, 18.0)
"""(forward, backward) bytes per element of the ``rows x hidden`` routed input that torchtitan's ``expert_parallel``
wrapper moves around the grouped GEMMs (``MoeExperts.GROUPED_PADDED``; pytorch/torchtitan
torchtitan/distributed/expert_parallel.py l.318-363 @a1fdd7e43694bbfeff5d6ad8ac738c067bb90d41, the rev
PrimeIntellect-ai/prime-rl pins, pyproject.toml l.84 @d8f290ef0358a804f1912bd29ea1b37cc56894b4, whose
``GroupedExperts`` runs ``_run_experts_grouped_mm`` through it, src/prime_rl/trainer/models/layers/moe.py l.124-140).
Forward: ``torch.vstack((x, x.new_zeros(h)))`` copies the rows with a zero row appended (read 2, write 2),
``x[permuted_indices, :]`` gathers them in expert order into ``rows + E·8`` slots, each expert's count rounded up
to ``TOKEN_GROUP_ALIGN_SIZE_M`` = 8 and the slack pointing at the zero row (read 2, write 2), and after the GEMMs
``out_unpermuted[permuted_indices, :] = out`` scatters the output into a new buffer (read 2, write 2); the
``[:-1]`` is a view. Backward: the slice's gradient (``slice_backward``: zeros, write 2, and a copy, read 2 and
write 2), the scatter's gradient for ``out`` (a gather, read 2, write 2), and the gather's gradient
(``index_backward``: zeros, write 2, and an accumulating ``index_put``, read 2 and read and write 2 each); the
``vstack``'s gradient is a view. Counted op by op with ``tools/measure_torchtitan_expert_padding.py`` (torch 2.13
CPU, the wrapper copied, the GEMMs replaced by the identity; creation ops counted as writes only): 12.14 / 18.14
bytes per element at 256 rows an expert and hidden 512, the 8 padding slots an expert and the int32 indices
included; 12 / 18 without them. The padding rows themselves (at most 7 an expert, none at
the balanced mean when ``rows / E`` is a multiple of 8) add under 1% to the GEMMs and are not counted."""
EXPERT_PADDING_KERNELS = (18.0, 5.0)
"""(forward, backward) kernels per MoE layer: the index preparation (``generate_permute_indices``, pytorch/torchtitan
torchtitan/experiments/kernels/moe/indices.py l.140-206 @a1fdd7e43694bbfeff5d6ad8ac738c067bb90d41: twelve small ops
on the per-expert counts, ``torch.full`` and the Triton fill, 14), the zero row, ``cat``, gather and scatter (4);
backward ``slice_backward`` (2), the gather, the zeros and the accumulating ``index_put`` (the sort inside
``index_put_with_sort_kernel`` not counted apart). Traced as ``EXPERT_PADDING_BYTES``."""


EXPERT_PADDING_INDEX_BACKWARD_BYTES = 8.0
"""Of ``EXPERT_PADDING_BYTES``' backward, the bytes per element of the gradient of the gather
``x[permuted_indices, :]`` (pytorch/torchtitan torchtitan/distributed/expert_parallel.py l.352-354
@a1fdd7e43694bbfeff5d6ad8ac738c067bb90d41): ``index_backward``'s zeros, write 2, and its accumulating ``index_put``,
read 2 and read and write 2 each, the same trace; the part ``expert_padding_index_backward_bytes`` prices at the
measured rate of PyTorch's kernel for it."""
INDEX_PUT_ACCUMULATE_SLOWDOWN = 1.848 / 0.593
"""How much longer PyTorch's accumulating ``index_put`` (the backward of ``x[permuted_indices, :]``: ``zeros`` and
``index_put_with_sort_kernel`` / ``indexing_backward_kernel``, which sorts the indices and walks each run of equal
ones serially) runs than the wrapper's forward gather of the same rows, whose counted bytes are the same (8 per
element: ``vstack``, read 2 write 2, and the gather, read 2 write 2). Measured on a B200 in pytorch/ao pull request
#4623 (https://github.com/pytorch/ao/pull/4623, 'Drop the zero-row copy in permute_and_pad', description, read
2026-12-05): torchtitan's ``vstack`` + ``x[permuted_indices, :]`` on 196,608 rows x 2,048 bf16 columns (DeepSeek-V3
16B, EP 8), median of 11: forward 0.593 ms, backward 1.848 ms (MI350: 0.860 and 1.804 ms, a ratio of 2.10; the
NVIDIA figure is the one used). The forward runs at the streaming rate (805 MB read and written twice in 0.593 ms,
5.4 TB/s on an 8 TB/s card), so the ratio is the backward's time over its bytes' streaming time. Under
``torch.compile`` the kernel is the same: Inductor lowers a bf16 ``index_put_(accumulate=True)`` to the ATen
fallback wherever Triton's bf16 atomic add is off (``needs_fallback_due_to_atomic_add_limitations`` in
``torch/_inductor/utils.py``: bf16 falls back unless ``config.is_fbcode()``, the code pytorch/pytorch pull request
#167380, https://github.com/pytorch/pytorch/pull/167380, opened 2025-11-07 to remove it, shows; prime-rl's lock pins
torch 2.9.0, uv.lock l.3545-3547 @d8f290ef0358a804f1912bd29ea1b37cc56894b4, released before it; only later releases
let compute capability 9.x use the atomic, as the torch 2.13.0 wheel, pytorch/pytorch
@cf30153c4c131c8164ee7798e5022d810682e2cb, ``torch/_inductor/utils.py`` l.3649-3655, reads), so its bytes are priced
outside the compile memory factor. Where the padding sentinel repeats more often than in the measured case (EP 8
there: 8 local experts' padding slots; 128 experts x 8 slots on one rank here) the serial run is longer, so this is
a lower bound there."""


def expert_padding_work(*, rows: float, hidden: int) -> MoeLayerWork:
    """What torchtitan's padded ``torch._grouped_mm`` wrapper (``EXPERT_PADDING_BYTES``) adds per MoE layer on a rank
    whose local experts receive ``rows`` routed rows of ``hidden`` values: forward and backward bytes and kernels.
    The backward bytes leave out the gather's gradient, ``expert_padding_index_backward_bytes``."""
    if rows <= 0:
        return MoeLayerWork(0.0, 0.0, 0.0, 0.0)
    e = rows * hidden
    backward = (EXPERT_PADDING_BYTES[1] - EXPERT_PADDING_INDEX_BACKWARD_BYTES) * e
    return MoeLayerWork(EXPERT_PADDING_BYTES[0] * e, backward, *EXPERT_PADDING_KERNELS)


def expert_padding_index_backward_bytes(*, rows: float, hidden: int) -> float:
    """Stream-equivalent bytes per MoE layer of the padded wrapper's gather gradient (``index_backward``) on ``rows``
    routed rows of ``hidden`` values: its counted bytes (``EXPERT_PADDING_INDEX_BACKWARD_BYTES``) times the measured
    slowdown of PyTorch's accumulating ``index_put`` (``INDEX_PUT_ACCUMULATE_SLOWDOWN``). An eager ATen kernel under
    ``torch.compile`` too, so the caller prices them outside the compile memory factor."""
    if rows <= 0:
        return 0.0
    return INDEX_PUT_ACCUMULATE_SLOWDOWN * EXPERT_PADDING_INDEX_BACKWARD_BYTES * rows * hidden


SIGMOID_ROUTER_FORWARD_KERNELS = 11
"""Kernels transformers' DeepSeek-V3 / GLM-4.5 router (``DeepseekV3TopkRouter.forward``, transformers v5.24.0
models/deepseek_v3/modeling_deepseek_v3.py l.133-158; ``Glm4MoeTopkRouter`` the same, models/glm4_moe/
modeling_glm4_moe.py) launches per forward beyond the softmax router the inventory's ``MOE_DISPATCH_KERNELS``
holds (Qwen3-MoE's: logits cast, softmax, top-k, sum, clone, divide, cast back: 7). Traced op by op (fake-tensor
trace of a glm4_moe layer, bf16): the input's fp32 cast (``hidden_states.type(torch.float32)``), ``sigmoid``, the
``+ e_score_correction_bias``, the per-group top-2 and its sum, the group top-k, ``zeros_like``, ``scatter_``, the
expanded mask's copy, its bool cast, ``~``, ``masked_fill``, the top-k, ``gather``, the renormalising sum, clone and
divide, and the ``routed_scaling_factor`` multiply: 18, whatever ``n_group`` (the group path runs with one group
too). Backward launches as many as the softmax router's (12 each: the scale's and division's gradients, the gather's
``scatter_add`` in place of the top-k's ``scatter``, ``sigmoid_backward`` for ``_softmax_backward_data``, the input
gradient's cast back in place of the logits' cast)."""
SIGMOID_ROUTER_INPUT_CAST_BYTES = 6.0
"""Per element of the ``T x h`` router input: its fp32 copy (read 2, write 4) forward and the fp32 input gradient's
cast back to bf16 (read 4, write 2) backward, the same trace; the softmax router casts its ``T x E`` logits instead
(the score traffic, ``routing_bytes``)."""


def sigmoid_router_work(*, tokens: float, hidden: int) -> MoeLayerWork:
    """What the sigmoid, group-limited router (``SIGMOID_ROUTER_*``) adds per MoE layer on ``tokens`` tokens beyond
    the shared softmax-router charge: forward and backward bytes and kernels."""
    cast = SIGMOID_ROUTER_INPUT_CAST_BYTES * tokens * hidden
    return MoeLayerWork(forward_bytes=cast, backward_bytes=cast, forward_kernels=float(SIGMOID_ROUTER_FORWARD_KERNELS),
                        backward_kernels=0.0)


def moe_layer_work(*, tokens: float, hidden: int, experts: int, local_experts: int, top_k: int, ep: int,
                   expert_tp: int = 1, score_dtype_bytes: float = 4.0, act_dtype_bytes: float = 2.0,
                   load_balancing: MoeLoadBalancing | None = None, group_sigmoid_router: bool = False,
                   dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL,
                   expert_load_factor: float = 1.0) -> MoeLayerWork:
    """What one MoE layer adds per pass on a rank routing ``tokens`` (its shard: ``expert_token_shards``) to
    ``top_k`` of ``experts`` (``local_experts`` of them on this rank): the routing-score traffic, the chunk
    sorts (all-to-all dispatcher only), the dispatcher's kernels and, with a load-balancing loss
    (``load_balancing`` aux_loss / seq_aux_loss), its scores' traffic and its kernels (``aux_loss_kernels``);
    ``group_sigmoid_router``: the unfused sigmoid, group-limited router's extra kernels
    (``GROUP_SIGMOID_ROUTER_KERNELS``); ``expert_load_factor``: the chunk sorts run over the rows this rank receives,
    the busiest rank's under a trained router (``busiest_rank_load_factor``; the routing scores stay the rank's own
    tokens') (module docstring)."""
    aux_loss = load_balancing not in (None, MoeLoadBalancing.NONE)
    aux_fk, aux_bk = aux_loss_kernels(load_balancing)
    if group_sigmoid_router:
        aux_fk, aux_bk = aux_fk + GROUP_SIGMOID_ROUTER_KERNELS[0], aux_bk + GROUP_SIGMOID_ROUTER_KERNELS[1]
    rows = tokens * top_k
    sort = chunk_sort_bytes(rows=rows * expert_load_factor, hidden=hidden, local_experts=local_experts, ep=ep, dtype_bytes=act_dtype_bytes,
                            dispatcher=dispatcher)
    fwd = routing_bytes(tokens=tokens, experts=experts, top_k=top_k, score_dtype_bytes=score_dtype_bytes,
                        aux_loss=aux_loss) + sort
    bwd = routing_bytes(tokens=tokens, experts=experts, top_k=top_k, score_dtype_bytes=score_dtype_bytes,
                        backward=True, aux_loss=aux_loss) + sort
    k = dispatcher_kernels(ep=ep, expert_tp=expert_tp, local_experts=local_experts) - (
        0.0 if sort or ep <= 1 or local_experts <= 1 else CHUNK_SORT_KERNELS)
    sorts = CHUNK_SORT_KERNELS if sort else 0.0
    return MoeLayerWork(fwd, bwd, k + aux_fk, float(sorts) + aux_bk)


def megatron_expert_elementwise(*, rows: float, hidden: int, expert_width: int, local_experts: int,
                                clamped_glu: bool, expert_bias: bool) -> MoeLayerWork:
    """The eager elementwise work Megatron-Core's ``TEGroupedMLP`` adds per MoE layer on a rank whose local
    experts receive ``rows`` routed rows (``T·k``): the clamp of a clamped GLU outside the fused activation, over
    the ``rows x 2·expert_width`` fc1 output, and the per-expert loop adding the fc2 bias, over the ``rows x hidden``
    fc2 output (module docstring). Zero for a model with neither (every MoE model but gpt-oss)."""
    if rows <= 0:
        return MoeLayerWork(0.0, 0.0, 0.0, 0.0)
    fb = bb = fk = bk = 0.0
    if clamped_glu:
        e = rows * 2 * expert_width
        fb += CLAMPED_GLU_FORWARD_BYTES * e
        bb += CLAMPED_GLU_BACKWARD_BYTES * e
        fk += CLAMPED_GLU_FORWARD_KERNELS
        bk += CLAMPED_GLU_BACKWARD_KERNELS
    if expert_bias:
        e = rows * hidden
        n = max(1, local_experts)
        fb += EXPERT_BIAS_FORWARD_BYTES * e
        bb += EXPERT_BIAS_BACKWARD_BYTES * e
        fk += EXPERT_BIAS_FORWARD_KERNELS_PER_EXPERT * n + EXPERT_BIAS_CAT_KERNELS[0]
        bk += EXPERT_BIAS_BACKWARD_KERNELS_PER_EXPERT * n + EXPERT_BIAS_CAT_KERNELS[1]
    return MoeLayerWork(fb, bb, fk, bk)


def megatron_clamp_recompute_work(*, rows: float, expert_width: int) -> MoeLayerWork:
    """What Megatron-Core's selective ``moe_act`` recompute re-runs of a clamped GLU's eager clamp per MoE layer, on
    a rank whose local experts receive ``rows`` routed rows: the clamp's forward over the ``rows x 2·expert_width``
    fc1 output (the two ``clamp`` and the ``cat``, ``CLAMPED_GLU_FORWARD_*``), once more in backward (module
    docstring). Only forward fields are set; the backward of the clamp is the backward pass's, counted once."""
    if rows <= 0:
        return MoeLayerWork(0.0, 0.0, 0.0, 0.0)
    return MoeLayerWork(CLAMPED_GLU_FORWARD_BYTES * rows * 2 * expert_width, 0.0, float(CLAMPED_GLU_FORWARD_KERNELS),
                        0.0)


def automodel_expert_bias_elementwise(*, rows: float, hidden: int, expert_width: int, local_experts: int,
                                      probs_grad: bool = True) -> MoeLayerWork:
    """The eager per-expert bias loops NeMo Automodel's ``GroupedExpertsDeepEP`` runs per MoE layer on a rank whose
    local experts receive ``rows`` routed rows, for a model with expert biases (gpt-oss).

    Neither grouped GEMM takes a bias (grouped_gemm's ``ops.gmm`` has no bias argument; ``torch._grouped_mm``
    raises "Bias not supported yet"), so ``GroupedExpertsDeepEP.forward`` (NVIDIA-NeMo/Automodel
    nemo_automodel/components/moe/experts.py l.843-854 on the ``gmm`` path, l.807-822 on the ``torch_mm`` one,
    @2861c4143cd335539213b1b6d0c890cb17682444) calls ``_apply_bias`` (l.148-198) after each: a Python loop over
    the local experts, ``t + b`` on each expert's rows of the ``rows x 2·expert_width`` fc1 output, then
    ``t + b * p`` with the float32 routing probability on the ``rows x hidden`` fc2 output, each loop followed by a
    ``torch.cat``. Eager PyTorch (only the activation around them is compiled), so the bytes go unscaled.
    Bytes and kernels traced (``AUTOMODEL_FC1_BIAS_*``, ``AUTOMODEL_FC2_BIAS_*``); ``probs_grad`` False: the
    routing weights take no gradient (Automodel's ``FakeBalancedGate``). Zero for a model without expert biases
    is the caller's test (only gpt-oss has them)."""
    if rows <= 0:
        return MoeLayerWork(0.0, 0.0, 0.0, 0.0)
    n = max(1, local_experts)
    e1, e2 = rows * 2 * expert_width, rows * hidden
    fc2_bwd = AUTOMODEL_FC2_BIAS_BYTES[1] if probs_grad else AUTOMODEL_FC2_BIAS_BACKWARD_BYTES_NO_PROBS_GRAD
    k2 = AUTOMODEL_FC2_BIAS_KERNELS if probs_grad else AUTOMODEL_FC2_BIAS_KERNELS_NO_PROBS_GRAD
    (f1, f1c), (b1, b1c) = AUTOMODEL_FC1_BIAS_KERNELS
    (f2, f2c), (b2, b2c) = k2
    return MoeLayerWork(AUTOMODEL_FC1_BIAS_BYTES[0] * e1 + AUTOMODEL_FC2_BIAS_BYTES[0] * e2,
                        AUTOMODEL_FC1_BIAS_BYTES[1] * e1 + fc2_bwd * e2,
                        (f1 + f2) * n + f1c + f2c, (b1 + b2) * n + b1c + b2c)
