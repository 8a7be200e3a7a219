"""bitsandbytes' 4-bit matmul before 0.43.2 keeps its input for the backward.

``MatMul4Bit.forward`` (bitsandbytes/autograd/_functions.py) multiplies the input ``A`` with the dequantised 4-bit weight
and, whenever the input or the weight needs a gradient, stores ``ctx.tensors = (A, B)``; its backward only needs ``B``
for the input's gradient (the weight is frozen). Up to 0.43.1 the input was kept (bitsandbytes-foundation/bitsandbytes
@a06a0f6a08cb23754b110359a109e069fa97ce9e, the 0.41.0 tag, l.522-523); commit
9e75374104cec965d9a4a630a68ce4e2b77b066f (2024-07-16, "fix QLoRA mem bug: delete useless buffered activation", #1270,
first released in 0.43.2) stores ``(None, B)``. A frozen 16-bit ``nn.Linear`` saves no input (``memory.activations``),
so with an older bitsandbytes every frozen 4-bit linear of a layer whose input needs a gradient saves that input,
unless another op already saves the same tensor.

The bytes are counted where the layer's other saved tensors are (``memory.activations._linear``,
``_Ctx.frozen_saves_input``): a frozen linear keeps its input when that input needs a gradient (``x_rg``: not in layer
0's attention without checkpointing, whose input is the frozen embedding's output, nor in its MLP when no adapter
precedes it), once per distinct input (q/k/v share the attention norm's output, gate/up the MLP norm's; down_proj
takes the gated product; o_proj's input is a view of SDPA's saved output unless attention copied it), and a LoRA
adapter in the compute dtype, whose lora_A saves the same tensor, adds nothing more.

Checked on the published LitGPT QLoRA rows on this pin (benchmarks/data/published_memory_points_litgpt.json, ids 812,
813, 817, 818): with the kept inputs in the layers' saved sets alone they were planned -10.6 / -10.8 / -9.8 / -10.1 %;
with the previous micro-batch's inputs the loop's graph still holds at the next loss (``graph_held_input_bytes``, below)
-0.5 / -0.6 / +0.2 / +0.2 %. Their adapters run LoRA dropout 0.05 (benchmarks/published.py ``_LITGPT_LORA``), so
lora_A saves its own dropout output and shares no input with the frozen base.

Held across micro-batches (``graph_held_input_bytes``)
    ``ctx.tensors = (A, B)`` is an attribute of the autograd node, not ``ctx.save_for_backward``: PyTorch frees a node's
    saved tensors once its backward has run (``retain_graph`` false), but an attribute lives as long as the node, that
    is as long as anything refers to the graph. A loop that keeps the model's output (or the loss) bound after
    ``backward()``, rebinding it only when the next micro-batch's forward returns (``loop.keeps_output_through_backward``:
    Lit-GPT's ``logits = model(input_ids, lm_head_chunk_size=128)`` ... ``loss = chunked_cross_entropy(...)``,
    Lightning-AI/litgpt litgpt/finetune/lora.py l.276-280 @5895df1004c3d05ef69f7aeffcfee757dbc42d58), keeps every
    MatMul4Bit input of the previous micro-batch alive through the optimizer step and the next forward, until the new
    loss is bound. A CPU check of the lifetime (torch 2.13): ``benchmarks/bnb_ctx_attribute_lifetime.py`` (an input
    stored as a ctx attribute is still alive after ``backward()`` while the loss is bound, freed when it is dropped;
    the same input through ``save_for_backward`` is freed by the backward). Under activation checkpointing the layers'
    inputs are what is saved, and the recompute's nodes are not the step's graph: not counted there.
"""

from __future__ import annotations

import re

from trainfit.spec.card import pin_before

FIXED_IN = (0, 43, 2)
"""The first bitsandbytes release whose MatMul4Bit drops the input (9e75374104cec965d9a4a630a68ce4e2b77b066f, "fix QLoRA
mem bug: delete useless buffered activation (#1270)", 2024-07-16: ``ctx.tensors = (None, B)``,
https://github.com/bitsandbytes-foundation/bitsandbytes/commit/9e75374104cec965d9a4a630a68ce4e2b77b066f; the oldest
release tag that contains it is 0.43.2)."""


def saves_input(bitsandbytes_version: str | None) -> bool:
    """True for a ``software.bitsandbytes`` pin whose every release keeps the input: before 0.43 (``pin_before``), or
    exactly 0.43.0 / 0.43.1. None, a range or anything unparsable: False (today's releases drop it)."""
    if not bitsandbytes_version:
        return False
    if pin_before(bitsandbytes_version, FIXED_IN[:2]):
        return True
    m = re.fullmatch(r"(?:==)?\s*v?(\d+)\.(\d+)\.(\d+)", str(bitsandbytes_version).strip())
    return m is not None and tuple(int(x) for x in m.groups()) < FIXED_IN


def graph_held_input_bytes(*, saved_per_layer: tuple[int, ...] | list[int], plain_per_layer: tuple[int, ...] | list[int],
                           loop_keeps_graph: bool, gradient_checkpointing: bool) -> float:
    """Bytes of the previous micro-batch's MatMul4Bit inputs still alive at the next forward's loss and through the
    optimizer step: the kept inputs of every layer (``saved_per_layer``, the layers' saved bytes counting them, less
    ``plain_per_layer``, the same layers without them), when the loop keeps the graph bound until the next forward
    returns (``loop_keeps_graph``) and the layers are not checkpointed (module docstring, "Held across micro-batches");
    else 0."""
    if not loop_keeps_graph or gradient_checkpointing:
        return 0.0
    return float(sum(max(0, a - b) for a, b in zip(saved_per_layer, plain_per_layer, strict=True)))
