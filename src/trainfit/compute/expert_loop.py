"""transformers' per-expert Python loops: the routed experts of < 5's sparse MoE block
(``RunCard.parallel.moe_experts: loop``, ``loop_all``) and of v5's eager experts (``loop_v5``, below).

The block's forward (huggingface/transformers src/transformers/models/qwen3_moe/modeling_qwen3_moe.py
@00d4b3d2142cb4ced2f51b90614b5d26bc045015, a 4.57-era commit whose deprecations target 4.58 / 4.60,
``Qwen3MoeSparseMoeBlock.forward``; ``MixtralSparseMoeBlock.forward`` in models/mixtral/modeling_mixtral.py at the same
commit is the same loop over ``w1``, ``w3``, ``w2``; other 4.x MoE blocks were not read here)::

    expert_mask = one_hot(selected_experts, num_experts).permute(2, 1, 0)
    expert_hit = greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()   # nonzero: the host waits for the GPU
    for expert_idx in expert_hit:
        expert_layer = self.experts[expert_idx]      # ModuleList index by a 1-element CUDA tensor: .item(), a sync
        idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))   # nonzero again: a sync
        current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
        current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]
        final_hidden_states.index_add_(0, top_x, current_hidden_states)

with ``expert_layer`` a ``Qwen3MoeMLP`` of three ``nn.Linear`` (``down(act(gate(x)) * up(x))``). So per MoE layer and
forward: the router (softmax, top-k, normalise, cast), ``LOOP_LAYER_KERNELS`` for the mask, the hit test and the
output buffer, one host sync for ``expert_hit``; then per expert that gets tokens (all of them at ``T·top_k / E`` rows
each of hundreds, the regime of published runs) three GEMMs of ``m = T·top_k / E`` rows and
``LOOP_EXPERT_KERNELS`` other kernels, and ``LOOP_EXPERT_SYNCS`` host syncs. The recompute re-runs the loop; the
backward replays autograd's graph without Python control flow, so no syncs, but each expert's row gather
``hidden_states[None, top_x]`` has the backward ``index_backward(grad.new_zeros(self.sizes()), indices, grad)``
(pytorch/pytorch tools/autograd/derivatives.yaml, entry ``index.Tensor``): a zero gradient of the whole
``T × h`` input per expert, filled at its rows and added into the input's gradient (``LOOP_EXPERT_BACKWARD_BYTES``).

Qwen3-MoE's first releases, transformers 4.51 and 4.52 (the 4.51.0 and 4.52.4 wheels from PyPI,
``transformers/models/qwen3_moe/modeling_qwen3_moe.py`` ``Qwen3MoeSparseMoeBlock.forward``, l.275 and l.269-281), loop
over every expert by its Python index instead (``RunCard.parallel.moe_experts: loop_all``); the hit test and the
``ModuleList`` index by a CUDA tensor arrive in 4.53.0 (``expert_hitted``, same file l.251-254)::

    expert_mask = one_hot(selected_experts, num_experts).permute(2, 1, 0)
    for expert_idx in range(self.num_experts):
        expert_layer = self.experts[expert_idx]      # a Python int: no sync
        idx, top_x = torch.where(expert_mask[expert_idx])   # the mask row a view; nonzero: a sync
        ... (the same row gather, expert MLP, weighting and index_add_)

so no hit test per layer (no sum, ``greater`` or ``nonzero``, no sync) and per expert one sync and one kernel fewer
(``LOOP_ALL_*``). The backward is the same graph; the inventory still derives the backward's kernel count from the
forward's (``inventory.BACKWARD_KERNEL_FACTOR``), so it shrinks with the forward's.

Under DeepSpeed ZeRO-3 every ``nn.Module`` that is not inside a leaf module gets its own fetch hooks
(deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py ``_register_deepspeed_module`` @v0.17.1,
2ce55057999bdf1c9bf26cb5f000a8a9fb97e2d9: children are registered unless ``z3_leaf_module(module)``), and
``fetch_sub_module`` gathers the module's own parameters (``iter_params(current_submodule, recurse=False)`` for a
non-leaf) with one ``all_gather_coalesced`` call (partitioned_param_coordinator.py ``__all_gather_params_``, same
commit). The experts' linears are therefore ``LOOP_EXPERT_LINEARS`` all-gathers per expert and pass, each paying a
collective's latency; prefetch (from the second step, when the module trace is complete and in the traced order)
overlaps them with compute but they still run one after another on the all-gather stream. ``set_z3_leaf_modules``
("ZeRO3 will prefetch parameters for all child modules upon entering the module", deepspeed/utils/z3_leaf_module.py
same commit, written for MoE models whose "computation order of experts varies across forward passes") makes the
block one fetch (``RunCard.parallel.moe_zero3_leaf``).

The Python time of DeepSpeed's per-module hooks themselves, each expert's MLP and linears included: measured on CPU
(``rates.ZERO3_MODULE_FORWARD_HOST_S``), charged per hooked module (``training.zero3_hooked_modules``).
**DeepSpeed's fetch throttle, checked on ms-swift's ZeRO-3 Qwen3-30B-A3B row (2026-12-03, nothing set).**
``fetch_sub_module`` lets at most ``__max_ongoing_fetch_events`` = 2 fetch events queue and otherwise
``synchronize()``s the oldest (deepspeed/runtime/zero/partitioned_param_coordinator.py l.130-132 and l.330-343
@2ce55057999bdf1c9bf26cb5f000a8a9fb97e2d9), so the host cannot run more than a few module fetches ahead of the
all-gather stream. The row plans host-bound (forward 10.05 s of host against 0.82 s of device work, recompute 9.65
against 0.71, backward 7.50 against 1.90; 28.44 s a step against 91.2 s published): serialising host and device
completely adds at most the device time (3.43 s) and exposing every ZeRO-3 gather the plan hides at most 3.06 s more
(3.46 s of gathers, 0.40 exposed), 34.9 s together (-69% -> -62%): neither the throttle nor the lost overlap is the
gap. The 55,000 per-expert-linear all-gathers a step (48 layers x 128 experts x 3 linears x forward, recompute,
backward) would have to cost about 1 ms each to fill the gap, far above the plan's (3.46 s for all of them and the
gradient reductions together); the run's inter-node network is not published.

**QLoRA: every expert's dequantisation.** Under bitsandbytes 4-bit loading every ``nn.Linear`` outside
``modules_to_not_convert`` (``lm_head``) becomes a ``bnb.nn.Linear4bit`` (transformers 4.48.1 wheel,
``transformers/integrations/bitsandbytes.py`` ``_replace_with_bnb_linear`` l.168 and l.202, default l.259), so each
expert's ``w1`` / ``w3`` / ``w2`` (``MixtralBlockSparseTop2MLP``, ``models/mixtral/modeling_mixtral.py`` l.67-81 in the
same wheel) is one. ``matmul_4bit`` sends any input of more than one row to ``MatMul4Bit``, which dequantises the
whole weight per call, ``F.dequantize_4bit(B, quant_state)`` in ``forward`` and again in ``backward`` for the input
gradient (bitsandbytes 0.43.3 wheel, ``bitsandbytes/autograd/_functions.py`` l.509, l.540, l.567-579). The loop calls
every expert on every pass, so all ``E`` experts' weights are dequantised in the forward, in the recompute and in the
backward, the same per-use rule as the dense linears (``bnb_nf4_experts``).

**Checked on fms-acceleration's A100 Mixtral-8x7B rows (transformers 4.48.1, loop_all; 2026-12-04), null results.**
(1) The loop's host time, measured on this project's CPU with ``MixtralSparseMoeBlock`` copied from the 4.48.1 wheel
(8 experts, top-2, hidden 64, ffn 128, 256 tokens, bf16, torch 2.13.0+cpu, one thread): 2.49 ms a block forward
without grad, 2.58 ms with grad, 6.39 ms forward and backward; the plan's Mixtral LoRA 2-GPU b4 forward launches
0.154 s against Mistral-7B's 0.074 s, the same 2.5 ms a layer, while the device works about 35 ms a layer and pass:
not host-bound. The path from each expert's sync to its first GEMM launch (``torch.where``, the row gather, the
reshape, ``w1``), measured the same way: 128 us; 512 such syncs a step (forward and recompute) give 0.066 s against
the 0.027 s the plan charges (``host_sync``): at most 0.04 s of a 1.25 s gap. (2) GEMM shape: at 2,048 rows per
expert (2 GPUs, b4) ``gemm.wave_efficiency`` gives 97.6 % for w1 / w3 and 94.8 % for w2, against 99 % or more for the
dense MLP at 8,192 rows: about 3 % more expert GEMM time, already planned. (3) FSDP1's unit all-gather, issued when
the host reaches the next layer, which the per-expert syncs delay until only the last expert's work is queued: 4.4 ms
of device work a segment (1.135 s forward / 257 segments) against at most 3.9 ms a layer's gather (the plan's whole
0.379 s of communication over 96 layer gathers): hidden, and four times smaller under QLoRA. (4) What is left: published minus planned on the 2-GPU
rows barely moves with the batch, LoRA 1.25 s (b4) / 1.05 s (b8), fused-kernel LoRA 1.52 / 1.55 s, QLoRA 1.22 /
0.82 s before the experts' dequantisation (1.02 / 0.62 s after), while the Mistral-7B twins score -7 % / 0 %: a per-step
cost of about 1 s that grows neither with the tokens nor with the weight bytes (bf16 and NF4 alike), about 2 ms per
expert call of the forward and the recompute. No mechanism read here gives it; not checkable without a GPU.

**transformers v5's eager experts (``RunCard.parallel.moe_experts: loop_v5``).** From 5.0 the routed experts of a MoE
block are one module holding two stacked parameters, ``gate_up_proj`` (``E × 2·ffn × h``) and ``down_proj``
(``E × h × ffn``), and ``set_experts_implementation("eager")`` runs them in a Python loop over the hit experts
(transformers 5.24.0 wheel, ``transformers/models/mixtral/modeling_mixtral.py`` ``MixtralExperts.forward`` l.69-93;
``models/qwen3_moe/modeling_qwen3_moe.py`` ``Qwen3MoeExperts.forward`` l.223-247, the same loop)::

    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()     # nonzero: a sync
    for expert_idx in expert_hit:
        expert_idx = expert_idx[0]
        if expert_idx == self.num_experts: continue                  # eq, then bool(): .item(), a sync
        top_k_pos, token_idx = torch.where(expert_mask[expert_idx])    # index by a 0-d CUDA tensor: .item(); nonzero
        current_state = hidden_states[token_idx]
        gate, up = linear(current_state, self.gate_up_proj[expert_idx]).chunk(2, dim=-1)   # .item() again
        current_hidden_states = self.act_fn(gate) * up
        current_hidden_states = linear(current_hidden_states, self.down_proj[expert_idx])  # .item() again
        current_hidden_states = current_hidden_states * top_k_weights[token_idx, top_k_pos, None]
        final_hidden_states.index_add_(0, token_idx, current_hidden_states.to(final_hidden_states.dtype))

Indexing a tensor by a 0-d integer tensor is a ``select`` at ``tensor.item<int64_t>()`` (torch 2.13.0 wheel,
``torch/include/ATen/TensorIndexing.h`` ``handleDimInMultiDimIndexing`` l.516-525): a host read of a device value. So
per hit expert ``LOOP_V5_EXPERT_SYNCS`` syncs, two GEMMs (``gate_up_proj`` is one) and the v4 loop's other kernels
(``LOOP_EXPERT_KERNELS``: ``eq`` in place of the mask row index), plus the cast of the weighted output where the
router's weights stay fp32 (Mixtral's ``MixtralTopKRouter``, l.104-111: softmax in fp32, never cast back). Two of the
syncs fall between the GEMMs (``down_proj[expert_idx]`` after the ``gate_up`` GEMM is queued, the next expert's
``bool()`` after the ``down`` GEMM), so the host waits for each expert's GEMMs before it queues more.

**The stacked weights' gradient, once per hit expert.** Wherever the stacked parameter gets a gradient (full
fine-tuning, or PEFT's LoRA on it: ``target_parameters``, which "all-linear" picks for these parameters, makes it
``baddbmm(W, B, A)``, a non-leaf that requires grad: peft 0.21.2 wheel ``peft/tuners/lora/layer.py``
``_LoraFactorsProxy.forward`` l.2319-2323, ``ParamWrapper._activate_lora``), each ``W[expert_idx]``'s backward is
``select_backward``: ``at::zeros`` of the whole ``E × out × in`` stack, the expert's slice copied in
(pytorch/pytorch tools/autograd/derivatives.yaml, entry ``select.int``; aten/src/ATen/native/TensorShape.cpp
``select_backward_symint``), and autograd adds the ``H`` full-size gradients of the hit experts one by one before
handing the sum on (torch/csrc/autograd/input_buffer.cpp ``InputBuffer::add``). Per stacked weight and backward:
``H`` fills and ``H - 1`` adds of the whole stack and ``H`` slice copies (``LOOP_V5_STACK_*``; counted op by op on
this project's CPU by ``benchmarks/expert_loop_v5_ops.py``: per expert and weight one ``select_backward`` of the
whole stack and one ``add`` of it). And the GEMM of each expert's weight gradient runs as in full fine-tuning,
since ``W[expert_idx]`` requires grad (``weight_grad_gemm``). Measured on the H200 (``benchmarks/results/gpu_raw/
heldout4.json``, Mixtral-8x7B LoRA b1x2048 ``experts: eager``, one profiled step): 960 bf16 fill kernels 0.215 s,
1,248 bf16 adds 0.438 s, against 2.8 TB of this traffic (0.72 TB of fills, 1.90 TB of adds) in 32 layers x 2 stacks
x 8 experts.

**Checked on the Qwen3-30B-A3B twin (2026-12-04): the measured run hit about 33 of 128 experts a layer.** Its profile
counts 15,877 device-to-host copies, 6,600 bf16 fills and 6,984 bf16 adds a step; at 5 syncs a hit expert in the
forward and the recompute (96 layer passes, one more per layer) the copies give 32.9 hit experts a layer, and the
fills (4 a hit expert: the two stacks' zero gradients, the rows' and the routing weights' ones) 34, the adds about 33:
the randomly initialised model of the measurement (every matrix normal(0, 0.02)) routes the tokens of deeper layers to
ever fewer experts (built so on this project's CPU, ``benchmarks/random_init_routing.py``: 128, 78, 69 and 46 experts
hit in its first four layers at 2,048 tokens, 22 to 37 past the fifth, 33.6 a layer over all 48), where a trained router under load balance spreads 16,384 picks over
all 128 (the plan's assumption). With 33 hit experts this mechanism predicts 0.57 s of fills and 1.29 s of adds at
the rates the Mixtral twin ran them (measured 0.57 s and 1.28 s); the plan, pricing all 128, overshoots that row's
loop work about four times (+104% before this mechanism, +114% with it). The card now states it
(``parallel.moe_experts_hit``, "Random-weight routers" below), set on that row from the routing built on CPU for its
config, tokens and initialisation (``benchmarks/step_times.py`` ``random_router_hits``), not from this profile.

**What is left on the Mixtral twin (2026-12-04).** Planned 1.73 s against 2.23 s measured: the device 1.55 s against
1.70 s busy (899 device-to-device copies took 0.21 s where the 512 slice copies are 0.18 TB, about 0.05 s; the grouped
Mixtral case shows 451 such copies in 0.17 s with no loop, so they come from the stacks' LoRA path, not from the loop),
and the host: 0.53 s of the measured step has the device idle against 0.18 s planned. Over the 512 expert iterations
of the forward and the recompute that is about 0.7 ms an iteration more than the plan's per-kernel launches and sync
round trips (about 0.8 ms); the GEMMs the syncs wait for (``down_proj[expert_idx]`` right after the gate_up GEMM)
expose about 0.14 s of it (46 TFLOP of expert GEMMs a pass), the rest would be the syncs' own cost beyond
``training.SYNC_ROUND_TRIP_S``. The Qwen3 twin, at its 33 hit experts, shows the same surplus (about 1.1 ms an
iteration against 0.75 ms); not fitted, as both rows are held out.

**Random-weight routers: only the hit experts run (``RunCard.parallel.moe_experts_hit``).** Both loops iterate over
``expert_hit``, the experts whose mask column is not empty (the 4.57-era ``Qwen3MoeSparseMoeBlock.forward`` above;
v5's ``Qwen3MoeExperts.forward``, transformers 5.24.0 wheel l.223-247), so an expert no token picks launches nothing,
syncs nothing and, where the stack gets a gradient, adds no zero stack. The plan's default is a trained router under
load balance, which gives every expert its share of the ``T · top_k`` picks; a randomly initialised router does not:
built as the H200 harnesses build their MoE models (every matrix normal(0, 0.02)), Qwen3-30B-A3B's layers past the
first send 2,048 tokens' picks to 30 to 70 of the 128 experts (``benchmarks/random_init_routing.py``, its output
``benchmarks/results/random_init_routing.json``). With ``H = share · E_local`` hit experts (``hit_experts``; the card's
share is the mean over the MoE layers, and every count here is linear in ``H``), each of the ``H`` experts gets
``T · top_k / H`` rows: per MoE layer ``H`` experts' GEMMs, kernels and syncs, and their backward's input-gradient
fills (``loop_backward_bytes``) and stacked-weight gradients (``stacked_weight_grad_bytes``); PEFT's per-expert
adapters on the 4.x loop run ``H`` calls. The router, the mask and the routed rows' own bytes are unchanged (all
``T · top_k`` rows still run). Not applied to the grouped GEMMs: ``grouped_mm`` / ``TEGroupedMLP`` run every local
expert's group whatever its rows, so a skewed routing moves only their tile quantisation (not modelled); nor to
``loop_all`` (4.51-4.52 call every expert by index, the empty ones included) nor DeepSpeed ZeRO-3's per-expert hooks.

Pure Python: no torch import.
"""

from __future__ import annotations

# Counted in huggingface/transformers src/transformers/models/qwen3_moe/modeling_qwen3_moe.py
# @00d4b3d2142cb4ced2f51b90614b5d26bc045015 (``Qwen3MoeSparseMoeBlock.forward``; module docstring); the ``LOOP_ALL_*``
# counts in the 4.51.0 / 4.52.4 wheels' transformers/models/qwen3_moe/modeling_qwen3_moe.py (l.269-281).
LOOP_EXPERT_LINEARS = 3
"""gate_proj, up_proj, down_proj: separate ``nn.Linear`` modules, one GEMM each (``Qwen3MoeMLP``)."""
LOOP_LAYER_KERNELS = 12  # qwen3_moe/modeling_qwen3_moe.py @00d4b3d2
"""Per MoE layer forward besides the router GEMM and the experts: softmax, top-k, the top-k sum and divide, the cast
(5); ``one_hot`` (zeros + scatter), the mask sum, ``greater``, ``nonzero`` (2: count, select), the output zeros (7)."""
LOOP_EXPERT_KERNELS = 9  # qwen3_moe/modeling_qwen3_moe.py @00d4b3d2
"""Per expert forward besides its three GEMMs: the mask row index, ``torch.where``'s ``nonzero`` (2), the row gather,
SiLU, the gate·up multiply, the routing-weight gather, the weighting multiply, ``index_add_``. Backward is charged by
the inventory's elementwise factor (``inventory.BACKWARD_KERNEL_FACTOR``)."""
LOOP_LAYER_SYNCS = 1  # qwen3_moe/modeling_qwen3_moe.py @00d4b3d2
"""``expert_hit``'s ``nonzero`` per MoE layer forward."""
LOOP_EXPERT_SYNCS = 2  # qwen3_moe/modeling_qwen3_moe.py @00d4b3d2
"""Per expert forward: the ``ModuleList`` index by a CUDA tensor (``operator.index`` → ``.item()``) and
``torch.where``'s ``nonzero``."""
LOOP_ALL_LAYER_KERNELS = 8  # 4.52.4 wheel: transformers/models/qwen3_moe/modeling_qwen3_moe.py l.269-281
"""transformers <= 4.52 (``loop_all``): ``LOOP_LAYER_KERNELS`` without the hit test (the mask sum, ``greater`` and
``nonzero``'s two kernels)."""
LOOP_ALL_EXPERT_KERNELS = 8  # 4.52.4 wheel: transformers/models/qwen3_moe/modeling_qwen3_moe.py
"""transformers <= 4.52: ``LOOP_EXPERT_KERNELS`` less the mask row's index kernel (``expert_mask[expert_idx]`` with a
Python int is a view)."""
LOOP_ALL_LAYER_SYNCS = 0  # 4.52.4 wheel: transformers/models/qwen3_moe/modeling_qwen3_moe.py
"""transformers <= 4.52: no hit test, no sync per layer."""
LOOP_ALL_EXPERT_SYNCS = 1  # 4.52.4 wheel: transformers/models/qwen3_moe/modeling_qwen3_moe.py
"""transformers <= 4.52: ``torch.where``'s ``nonzero`` only (the ``ModuleList`` index is a Python int)."""
LOOP_EXPERT_BACKWARD_BYTES = 8.0
"""Bytes per element of the ``T × h`` input, per expert, in backward (bf16): the zero gradient written (2), then added
into the input's accumulated gradient (read 2 + 2, write 2). The scatter of the expert's own rows is in the rows'
bytes already."""


# Counted in the transformers 5.24.0 wheel's models/mixtral/modeling_mixtral.py l.69-93 and
# models/qwen3_moe/modeling_qwen3_moe.py l.223-247 (``MixtralExperts`` / ``Qwen3MoeExperts.forward``) and, op by op,
# by benchmarks/expert_loop_v5_ops.py (module docstring, "transformers v5's eager experts").
LOOP_V5_EXPERT_LINEARS = 2
"""gate_up_proj (one GEMM for gate and up) and down_proj, each ``linear`` on the stacked weight's slice."""
LOOP_V5_EXPERT_SYNCS = 5  # transformers 5.24.0 wheel: models/mixtral/modeling_mixtral.py l.83-89
"""Per hit expert forward: ``bool(expert_idx == num_experts)``, ``expert_mask[expert_idx]``, ``torch.where``'s
``nonzero``, ``gate_up_proj[expert_idx]``, ``down_proj[expert_idx]`` (a 0-d CUDA index is ``.item()``,
torch/include/ATen/TensorIndexing.h l.516-525 of the torch 2.13.0 wheel); benchmarks/expert_loop_v5_ops.py counts
four ``_local_scalar_dense`` and one ``nonzero`` per expert."""
LOOP_V5_FP32_WEIGHT_CAST_KERNELS = 1  # transformers 5.24.0 wheel: models/mixtral/modeling_mixtral.py l.91, l.107-110
"""Per hit expert forward, where the router's top-k weights are fp32 (``ModelSpec.moe.routing_weights_fp32``): the
weighted output's ``.to(final_hidden_states.dtype)``."""
LOOP_V5_STACK_FILL_BYTES = 2.0  # select_backward of a whole stack per expert: benchmarks/expert_loop_v5_ops.py
"""Bytes per element of a stacked expert weight (bf16), per hit expert and backward: ``select_backward``'s zero
gradient of the whole stack (write 2)."""
LOOP_V5_STACK_ADD_BYTES = 6.0  # torch/csrc/autograd/input_buffer.cpp InputBuffer::add; benchmarks/expert_loop_v5_ops.py
"""Bytes per element of the stack, per hit expert but the first: the full-size gradients added up (read 2 + 2,
write 2)."""
LOOP_V5_SLICE_COPY_BYTES = 4.0  # select_backward (zeros, slice copy_): benchmarks/expert_loop_v5_ops.py
"""Bytes per element of one expert's slice, per hit expert: its gradient copied into the zero stack (read 2,
write 2)."""
LOOP_V5_STACK_KERNELS = 3  # benchmarks/expert_loop_v5_ops.py
"""Kernels per stacked weight and hit expert in backward: the fill, the slice copy, the add (one fewer add a
backward)."""


def hit_experts(*, local_experts: int, hit_share: float | None) -> float:
    """Experts of one MoE layer the per-expert loop runs: the card's share of the ``local_experts`` that get tokens
    (``RunCard.parallel.moe_experts_hit``; module docstring, "Random-weight routers"), at least one; None: every
    expert, as under a trained, load-balanced router. A float: the share is a mean over layers."""
    if hit_share is None:
        return float(local_experts)
    return max(1.0, hit_share * local_experts)


def loop_forward_kernels(*, local_experts: float, every_expert: bool = False) -> float:
    """Kernels of one MoE layer's forward besides its GEMMs (router and loop); ``every_expert``: transformers <= 4.52's
    loop over every expert by index (module docstring)."""
    if every_expert:
        return float(LOOP_ALL_LAYER_KERNELS + LOOP_ALL_EXPERT_KERNELS * local_experts)
    return float(LOOP_LAYER_KERNELS + LOOP_EXPERT_KERNELS * local_experts)


def loop_forward_syncs(*, local_experts: float, every_expert: bool = False) -> float:
    """Host-device synchronisations of one MoE layer's forward (every expert hit); ``every_expert``: transformers
    <= 4.52's loop, one per expert and none for the layer."""
    if every_expert:
        return float(LOOP_ALL_LAYER_SYNCS + LOOP_ALL_EXPERT_SYNCS * local_experts)
    return float(LOOP_LAYER_SYNCS + LOOP_EXPERT_SYNCS * local_experts)


def loop_v5_forward_kernels(*, local_experts: float, fp32_routing_weights: bool) -> float:
    """Kernels of one MoE layer's forward besides its GEMMs under transformers v5's eager experts (``loop_v5``): the
    router and mask work of the v4 loop, per expert the v4 loop's other kernels and, with fp32 routing weights, the
    output's cast (module docstring)."""
    per = LOOP_EXPERT_KERNELS + (LOOP_V5_FP32_WEIGHT_CAST_KERNELS if fp32_routing_weights else 0)
    return float(LOOP_LAYER_KERNELS + per * local_experts)


def loop_v5_forward_syncs(*, local_experts: float) -> float:
    """Host syncs of one MoE layer's forward under ``loop_v5``: the hit test and ``LOOP_V5_EXPERT_SYNCS`` per expert."""
    return float(LOOP_LAYER_SYNCS + LOOP_V5_EXPERT_SYNCS * local_experts)


def stacked_weight_grad_bytes(*, weight_elements: float, local_experts: float) -> float:
    """Backward bytes ``loop_v5`` adds for one stacked expert weight of ``weight_elements`` (all experts) that gets a
    gradient: per hit expert the zero stack and the slice copy, and the full-size adds (module docstring, "The stacked
    weights' gradient")."""
    e = max(1, local_experts)
    return weight_elements * (LOOP_V5_STACK_FILL_BYTES * e + LOOP_V5_SLICE_COPY_BYTES
                              + LOOP_V5_STACK_ADD_BYTES * (e - 1))


def stacked_weight_grad_kernels(*, local_experts: float) -> float:
    """Backward kernels of ``stacked_weight_grad_bytes``: fill, copy and add per hit expert, one add fewer."""
    return float(LOOP_V5_STACK_KERNELS * max(1, local_experts) - 1)


def loop_backward_bytes(*, tokens: float, hidden: int, local_experts: float) -> float:
    """Bytes of one MoE layer's backward the loop adds: a full-size input gradient per expert."""
    return LOOP_EXPERT_BACKWARD_BYTES * tokens * hidden * local_experts


def zero3_expert_gathers(*, local_experts: int, leaf: bool) -> float:
    """All-gathers of one MoE layer's routed-expert weights per pass under ZeRO-3: one per expert linear, or one for
    the block when it is a leaf module."""
    return 1.0 if leaf else float(LOOP_EXPERT_LINEARS * local_experts)


def bnb_nf4_experts(*, nf4_base: bool, gptq: bool, torch_ops: bool, stacked: bool) -> bool:
    """Whether the loop's expert linears are bitsandbytes ``Linear4bit`` modules that dequantise their whole weight on
    every call (module docstring, "QLoRA: every expert's dequantisation"): a QLoRA base (``nf4_base``) quantised by
    bitsandbytes, not AutoGPTQ (``gptq``) nor torchao's ``NF4Tensor`` (``torch_ops``), on transformers < 5's loop
    of per-expert ``nn.Linear`` modules, not v5's eager loop over the stacked 3-D parameters (``stacked``), which
    bitsandbytes' loader leaves in the compute dtype (it replaces ``nn.Linear`` modules only: transformers 5.24.0
    wheel, integrations/bitsandbytes.py ``replace_with_bnb_linear`` l.184-228; benchmarks/qlora_moe_experts_cpu.py).
    The inventory then charges each expert linear ``inventory.NF4_DEQUANT_BYTES_PER_WEIGHT`` and one kernel per
    forward, recompute and backward, as it does a dense linear; memory stores them in NF4
    (``plan.terms.bnb_loop_experts``, the same condition)."""
    return nf4_base and not gptq and not torch_ops and not stacked
