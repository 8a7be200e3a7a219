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
-0.5 / -0.6 / +0.2 / +0.2 % when those counted only what the saved sets add (leaving out o_proj's input, a view of
SDPA's saved output), +1.9 / +1.9 / +2.6 / +2.6 % with every distinct input the held graph keeps. Their adapters run LoRA dropout 0.05 (benchmarks/published.py ``_LITGPT_LORA``), so
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
    the same input through ``save_for_backward`` is freed by the backward). What the graph holds then is every
    distinct MatMul4Bit input (``kept_input_bytes_per_layer``), also those another op saved too (lora_A's input
    without dropout, o_proj's input viewing SDPA's output): that op's ``save_for_backward`` copy is released by the
    backward, the attribute is not.

Checkpointed layers
    Under torch's non-reentrant checkpoint (``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``,
    ``checkpoint_wrapper``'s ``NO_REENTRANT``) the layer's first forward runs with grad and records the graph; the
    checkpoint's ``saved_tensors_hooks`` replace what ``save_for_backward`` stores with holders, but
    ``ctx.tensors = (A, B)`` is an attribute the hooks never see, so every MatMul4Bit input of every checkpointed layer
    stays alive beside the checkpointed inputs from that layer's forward until the graph is dropped, after the
    backward (``ctx_held_input_bytes``; torch 2.13.0 wheel torch/utils/checkpoint.py l.1558-1704
    ``_checkpoint_without_reentrant_generator``: ``with _checkpoint_hook(new_frame)`` around the forward, whose
    ``pack_hook`` returns a ``_Holder``, l.1153-1163), and into the next forward when the loop holds it
    (``graph_held_input_bytes``). The recompute in backward runs the layer again under ``_recomputation_hook``
    (l.1088), keeps only the holders' tensors and drops its own output and graph (``recompute_fn``, l.1657-1688),
    MatMul4Bit's new inputs with it: the recompute's saved set is the layer's without them. Under a reentrant
    checkpoint (``use_reentrant=True``, ``CheckpointFunction``, l.234-273) the first forward runs under
    ``torch.no_grad``: no
    node is recorded and nothing is kept; the recompute inside ``CheckpointFunction.backward`` keeps them in its
    layer's saved set while that layer's backward runs. ``plan.checkpointing.checkpoint_reentrant`` says which one
    a card runs. CPU check of both (torch 2.13): ``benchmarks/bnb_ctx_attribute_lifetime.py``.

Not modelled: without checkpointing, the backward walk frees each layer's kept inputs with its saved set, where the
attributes keep them until the graph is dropped (at the end of backward, or later under the loop above); the walk's
first point, the start of backward, holds them all either way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

FIXED_IN = (0, 43, 2)
"""The first bitsandbytes release whose MatMul4Bit drops the input (9e75374104cec965d9a4a630a68ce4e2b77b066f, "fix QLoRA
mem bug: delete useless buffered activation (#1270)", 2024-07-16: ``ctx.tensors = (None, B)``,
https://github.com/bitsandbytes-foundation/bitsandbytes/commit/9e75374104cec965d9a4a630a68ce4e2b77b066f; the oldest
release tag that contains it is 0.43.2)."""


_CLAUSE = re.compile(r"(==|<=|<|~=)?\s*v?(\d+)(?:\.(\d+|\*))?(?:\.(\d+|\*))?"
                     r"(?:\.?(?:post|dev|a|b|rc)\d*)*(?:\+[0-9A-Za-z.]+)?")
"""One clause of a version pin: an operator (none, ``==``, ``<``, ``<=``, ``~=``), one to three release numbers (a
``*`` wildcard after ``==``), any pre-, post- or dev-release suffix (``0.43.1.post1``) and a local label."""


def _admitted_below(clause: str) -> tuple[int, int, int] | None:
    """An exclusive upper bound on the releases one pin clause admits (a release before it, or one of its post
    releases), ignoring pre-releases; None when the clause admits releases without end (``>=``, ``>``, ``!=``) or is
    no version (a branch, a commit). A bare ``0.41`` reads as that major.minor series, as ``spec.card.pin_before``
    reads it; ``~=0.41.1`` is ``>=0.41.1, ==0.41.*`` (PEP 440 compatible release), ``~=0.41`` is ``>=0.41, ==0.*``."""
    m = _CLAUSE.fullmatch(clause.strip())
    if m is None:
        return None
    op, major, minor, patch = m.group(1) or "==", int(m.group(2)), m.group(3), m.group(4)
    if minor in (None, "*"):
        return (major + 1, 0, 0) if op in ("==", "~=") or minor == "*" else (
            (major, 0, 0) if op == "<" else (major, 0, 1))
    if patch == "*" or (patch is None and op == "=="):
        return major, int(minor) + 1, 0  # 0.41.* or the series 0.41
    if op == "~=":
        return (major + 1, 0, 0) if patch is None else (major, int(minor) + 1, 0)
    release = (major, int(minor), int(patch or 0))
    return release if op == "<" else release[:2] + (release[2] + 1,)


def saves_input(bitsandbytes_version: str | None) -> bool:
    """True for a ``software.bitsandbytes`` pin whose every admitted release keeps the input, before 0.43.2
    (``FIXED_IN``): an exact release (``0.41.1``, ``==0.43.1``, ``0.43.1.post1``), a series before 0.43 (``0.41``,
    ``0.41.*``), an upper bound that admits nothing from 0.43.2 on (``<0.43.2``, ``<=0.43.1``, ``<0.43``), a
    compatible release inside an old series (``~=0.41.1``); with several comma-separated clauses, any one of them
    so bounded. None, a lower bound alone (``>=0.41``), a wider range (``~=0.41``, ``<0.44``) or anything unparsable:
    False (today's releases drop it)."""
    if not bitsandbytes_version:
        return False
    bounds = (_admitted_below(c) for c in str(bitsandbytes_version).split(","))
    return any(b is not None and b <= FIXED_IN for b in bounds)


def kept_input_bytes_per_layer(*, layers: int, linears: dict[str, int], adapted: frozenset[str], tokens: int,
                               dtype_bytes: int) -> tuple[float, ...]:
    """Bytes of the distinct MatMul4Bit inputs each decoder layer keeps as ``ctx.tensors`` attributes (every frozen
    4-bit linear whose input needs a gradient), whatever else saves the same storage: what a graph holds once its
    ``save_for_backward`` tensors are gone (after its backward, or under a non-reentrant checkpoint, whose hooks
    see only those). ``linears``: in_features by name of the layer's linears (``memory.params.linear_groups``: q/k/v
    or qkv_proj read the attention norm's output, o_proj attention's output, gate/up or gate_up_proj the MLP norm's
    output, down_proj the gated product); ``adapted``: the names with a LoRA adapter. Layer 0's attention input is the
    frozen embedding's output and needs no gradient (as ``memory.activations`` reads it); each later input needs one
    once an adapter precedes it. ``tokens``: one micro-batch's tokens; ``dtype_bytes``: the compute dtype's."""
    stages = (("q_proj", "k_proj", "v_proj", "qkv_proj"), ("o_proj",), ("gate_proj", "up_proj", "gate_up_proj"),
              ("down_proj",))
    out, needs_grad = [], False
    for _ in range(layers):
        width = 0
        for names in stages:
            present = [n for n in names if n in linears]
            if needs_grad and present:
                width += linears[present[0]]  # one storage per distinct input
            needs_grad = needs_grad or any(n in adapted for n in present)
        out.append(float(tokens * dtype_bytes * width))
    return tuple(out)


def inputs_outlive_backward(*, checkpointed: bool, reentrant: bool) -> bool:
    """Whether a layer's first forward records the MatMul4Bit nodes that keep its inputs: without checkpointing, and
    under a non-reentrant checkpoint, whose first forward runs with grad and records the graph (its saved-tensor hooks
    replace only what ``save_for_backward`` stores; an attribute stays on the node); not under a reentrant one, whose
    first forward runs under ``torch.no_grad`` and records no node (module docstring, "Checkpointed layers")."""
    return not (checkpointed and reentrant)


def ctx_held_input_bytes(*, kept_per_layer: Sequence[float], checkpointed: Sequence[bool], reentrant: bool) -> float:
    """Bytes of the current micro-batch's kept inputs its first forward's graph holds beside the layers' checkpointed
    inputs, from each layer's forward to the end of backward: those of the layers under a non-reentrant checkpoint
    (``checkpointed``, per layer; ``reentrant`` false). 0 for the others: a layer run without checkpoint has them in
    its saved set (``memory.activations``), a reentrant checkpoint's first forward keeps nothing and its recompute's
    are in the layer's saved set while its backward runs."""
    return 0.0 if reentrant else float(sum(k for k, c in zip(kept_per_layer, checkpointed, strict=True) if c))


def graph_held_input_bytes(*, kept_per_layer: Sequence[float], checkpointed: Sequence[bool], reentrant: bool,
                           loop_keeps_graph: bool) -> float:
    """Bytes of the previous micro-batch's MatMul4Bit inputs still alive through the optimizer step and the next
    forward up to its loss: the kept inputs (``kept_per_layer``) of every layer whose first forward recorded them
    (``inputs_outlive_backward``), when the loop keeps its output and loss bound until the next forward returns
    (``loop_keeps_graph``); else 0 (module docstring, "Held across micro-batches")."""
    if not loop_keeps_graph:
        return 0.0
    return float(sum(k for k, c in zip(kept_per_layer, checkpointed, strict=True)
                     if inputs_outlive_backward(checkpointed=c, reentrant=reentrant)))
