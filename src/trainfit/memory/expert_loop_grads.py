"""transformers v5's eager experts (``RunCard.parallel.moe_experts: loop_v5``): the stacked weights' gradients
inside one MoE layer's backward.

Each hit expert slices the stacked ``gate_up_proj`` (``E × 2·ffn × h``) and ``down_proj`` (``E × h × ffn``) by
``W[expert_idx]`` (transformers 5.24.0 wheel, ``transformers/models/mixtral/modeling_mixtral.py``
``MixtralExperts.forward`` l.69-93; ``models/qwen3_moe/modeling_qwen3_moe.py`` ``Qwen3MoeExperts.forward``
l.223-247). Wherever the stack gets a gradient, that ``select``'s backward is ``select_backward``: ``at::zeros`` of
the whole stack with the expert's slice copied in (pytorch/pytorch tools/autograd/derivatives.yaml, entry
``select.int``; aten/src/ATen/native/TensorShape.cpp ``select_backward_symint``). The ``H`` hit experts' full-size
gradients meet in the input buffer of the node that consumes the stack, which sums them one by one
(torch/csrc/autograd/input_buffer.cpp ``InputBuffer::add`` → ``accumulate``: in place, ``old_var.add_(var)``, when
the buffer holds the last reference, as it does here), and hands the sum on only when every expert's backward has
run, i.e. after the whole loop.

So during the layer's expert loop both stacks' running sums are alive, and each expert's ``select_backward`` makes
one more whole stack before the ``add_`` frees it. With PEFT's LoRA on the stacks (``ParamWrapper``: the stack used
is ``baddbmm(W, B, A)``, a non-leaf; peft 0.21.2 wheel ``peft/tuners/lora/layer.py`` ``_LoraFactorsProxy.forward``
l.2319-2323, ``ParamWrapper._activate_lora``) the sums are transient (the baddbmm's backward turns them into the
small LoRA gradients): the moment is every stack's sum plus the largest stack once more (from the second hit expert
on; the loop's backward visits ``down_proj`` before ``gate_up_proj`` per expert). Under full fine-tuning the
stack is a leaf: its sum becomes ``.grad`` (``AccumulateGrad`` steals a buffer it holds the last reference to),
which the layer's gradients already count, so only the newest zero stack is extra.

Checked on this project's CPU by ``benchmarks/expert_loop_v5_memory.py`` (torch 2.13.0+cpu, transformers 5.24.0,
peft 0.21.2, one Mixtral- and one Qwen3-MoE-layout block under LoRA all-linear): the backward's ``add_`` calls on
whole stacks allocate nothing (in place), and the live stack-sized tensors peak at
``gate_up + down + gate_up``. On the H200 (``benchmarks/results/gpu_raw/heldout4.json``, ``experts: eager``) the
two LoRA loop cases' allocated peaks stand 4.24 GiB (Mixtral-8x7B, 2.625 GiB of stacks a layer) and 1.88 GiB
(Qwen3-30B-A3B, 1.125 GiB) above the plan without this moment, against 4.38 and 1.88 GiB of moment.

**Not checked against the fake-tensor trace, and why.** The trace counts bytes under a ``TorchDispatchMode``
(``trainfit.trace.tracker``) on fake tensors, and with any dispatch mode active autograd's accumulation runs out of
place: ``can_accumulate_inplace`` asks ``at::isTensorSubclassLike``, which returns true whenever
``c10::impl::dispatch_mode_enabled()`` (torch 2.13.0 wheel, ``torch/include/ATen/TensorSubclassLikeUtils.h``
l.51-55). Run on real CPU tensors under such a mode, the same block's backward calls ``add`` (not ``add_``) on the
whole stacks and holds ``gate_up + down + 2·gate_up`` at once (3 of the larger stack and the smaller's sum), one
stack more than the allocator sees on the GPU or on the CPU without a mode. A trace grid case would therefore
disagree by a whole stack by construction; the trace does not build v5's eager experts either
(``TraceRequest`` has no experts implementation), so none is added.

Pure Python: no torch import.
"""

from __future__ import annotations


def loop_stack_grad_moment_bytes(*, stack_bytes: tuple[float, ...], stacks_are_leaves: bool) -> float:
    """Bytes the stacked expert weights' gradients hold at the largest moment of one MoE layer's ``loop_v5``
    backward, beyond the layer's parameter gradients (module docstring).

    ``stack_bytes``: the whole stacks of the layer that get a gradient (``E × out × in`` elements each, in the
    stack's dtype); ``stacks_are_leaves``: full fine-tuning (the sums become ``.grad``), else PEFT's merged stacks
    (the sums are transient)."""
    if not stack_bytes:
        return 0.0
    newest = max(stack_bytes)
    return newest if stacks_are_leaves else sum(stack_bytes) + newest
