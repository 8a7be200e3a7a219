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


_VERSION = re.compile(
    r"v?(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre_l>alpha|beta|preview|pre|rc|a|b|c)[-_.]?(?P<pre_n>\d+)?)?"
    r"(?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d+)?)?"
    r"(?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d+)?)?"
    r"(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?", re.IGNORECASE)
"""A PEP 440 version in any spelling it normalises: ``v0.43.1``, ``1!0.1``, ``0.43.1rc1``, ``0.43.1.post1``,
``0.43.1-1`` (a post release), ``0.43.1.dev0``, ``0.43.1+cu121`` (the local label plays no part here)."""

_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
"""Order of the pre-release phases, alpha before beta before release candidate, with the spellings PEP 440 normalises
to them (https://peps.python.org/pep-0440/#pre-releases and #pre-release-spelling)."""

_OPERATOR = re.compile(r"\s*(===|==|!=|<=|>=|~=|<|>)?\s*(.*?)\s*")


def _version_key(m: re.Match[str]) -> tuple:
    """The PEP 440 order of a parsed version (packaging.version's ``_cmpkey``): epoch, the release without trailing
    zeros (``0.43`` is ``0.43.0``), then a dev release before its pre-releases before the release before its posts."""
    release = tuple(int(x) for x in m.group("release").split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    post_n = m.group("post_n1") or m.group("post_n2")
    has_post = post_n is not None or m.group("post_l") is not None
    if m.group("pre_l") is not None:
        pre = (0, _PRE_RANK[m.group("pre_l").lower()], int(m.group("pre_n") or 0))
    else:
        pre = (-1,) if m.group("dev_l") is not None and not has_post else (1,)
    post = (0, int(post_n or 0)) if has_post else (-1,)
    dev = (0, int(m.group("dev_n") or 0)) if m.group("dev_l") is not None else (1,)
    return int(m.group("epoch") or 0), release, pre, post, dev


def _release_key(release: tuple[int, ...]) -> tuple:
    """``_version_key`` of a final release given as numbers."""
    return _version_key(_VERSION.fullmatch(".".join(str(x) for x in release)))


def _prefix_end_key(m: re.Match[str]) -> tuple | None:
    """The first version after every one the release prefix of ``m`` matches (``0.41`` as in ``==0.41.*``: 0.42),
    or None when ``m`` is more than a release (``==0.41rc1.*`` is no PEP 440 prefix)."""
    if any(m.group(g) for g in ("pre_l", "post_n1", "post_l", "dev_l")):
        return None
    release = tuple(int(x) for x in m.group("release").split("."))
    end = _release_key(release[:-1] + (release[-1] + 1,))
    return (int(m.group("epoch") or 0),) + end[1:]


def _clause_before(clause: str, fixed: tuple) -> bool:
    """Whether every final or post release one pin clause admits sorts before ``fixed`` (a ``_version_key``) under
    PEP 440: ``<V`` (V at or before it), ``<=V``, ``==V`` and ``===V`` (V before it; ``==0.43`` is 0.43.0),
    ``==P.*`` and ``~=P.N`` (``>=P.N, ==P.*``: the release after the prefix P at or before it). A bare pin without
    operator is a release, except one or two bare numbers (``0.41``), which read as that series (``0.41.*``), as
    ``spec.card.pin_before`` reads them. ``>``, ``>=``, ``!=`` and anything that is no version: False."""
    op, text = _OPERATOR.fullmatch(clause).groups()
    wildcard = text.endswith(".*")
    m = _VERSION.fullmatch(text[:-2] if wildcard else text)
    if m is None or op in (">", ">=", "!="):
        return False
    series = op is None and not wildcard and _prefix_end_key(m) is not None and m.group("release").count(".") <= 1
    if wildcard or series or op == "~=":
        if op not in (None, "==", "~=") or (op == "~=" and (wildcard or "." not in m.group("release"))):
            return False  # '<0.41.*' and '~=0.41.*' are no PEP 440 clause; '~=1' needs two release numbers
        if op == "~=":
            m = _VERSION.fullmatch(m.group("release").rsplit(".", 1)[0])
        end = _prefix_end_key(m)
        return end is not None and end <= fixed
    key = _version_key(m)
    return key <= fixed if op == "<" else key < fixed


def saves_input(bitsandbytes_version: str | None) -> bool:
    """True for a ``software.bitsandbytes`` pin whose every admitted release keeps the input, before 0.43.2
    (``FIXED_IN``), compared as PEP 440 orders versions (``_clause_before``; pre-releases are not counted): an exact
    release (``0.41.1``, ``==0.43``, ``==0.43.1``, ``0.43.1.post1``, ``0.43.1-1``), a series before 0.43 (``0.41``,
    ``0.41.*``), an upper bound that admits nothing from 0.43.2 on (``<0.43.2``, ``<=0.43.1``, ``<0.43``,
    ``<0.43.1.5``), a compatible release inside an old series (``~=0.41.1``); with several comma-separated clauses,
    any one of them so bounded. None, a lower bound alone (``>=0.41``), a wider range (``~=0.41``, ``<0.44``,
    ``<0.43.2.post1``, which admits 0.43.2) or anything unparsable: False (today's releases drop it)."""
    if not bitsandbytes_version:
        return False
    fixed = _release_key(FIXED_IN)
    return any(_clause_before(c, fixed) for c in str(bitsandbytes_version).split(","))


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
