"""Memory-bound work of FSDP2 modules whose outputs are cast to fp32 (``MixedPrecisionPolicy(output_dtype=float32)``),
per micro-batch and pass.

NeMo RL's DTensor policy shards every decoder layer and then the whole model with
``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32, output_dtype=float32)`` (NVIDIA-NeMo/RL
nemo_rl/models/dtensor/parallelize.py l.464-468 and l.476-488 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf, v0.3.0;
l.467 @27d0af945b96c5bf9fa928bf45fd1a6ce016632d, v0.3.1; still at l.510 and l.748, and in the automodel path
nemo_rl/models/automodel/setup.py l.487, @7ea279abf). FSDP2 casts each sharded module's floating-point forward inputs
to ``param_dtype`` (``cast_forward_inputs`` is True by default) and its outputs to ``output_dtype``
(``FSDPState._cast_forward_inputs`` / ``_cast_output_dtype``, torch/distributed/fsdp/_fully_shard/_fsdp_state.py
l.346-362 of the torch 2.13.0 wheel; ``_cast_fp_tensor`` in _fsdp_common.py l.181-188 returns a tensor already in the
dtype untouched). So, with ``b`` = 2 B (bf16) and ``f`` = 4 B (fp32), per micro-batch of ``T`` tokens, hidden size
``h``, ``L`` sharded decoder layers and ``V`` logits a token:

* every layer's hidden-state output, bf16, is cast to fp32 (``b + f`` per element read and written), and every layer
  but the first (whose input is the bf16 embedding) casts that fp32 input back to bf16 (``f + b``): ``2L − 1`` casts
  of ``T·h`` elements, ``(2L − 1)·(b + f)·T·h`` bytes and ``2L − 1`` kernels forward; their ``ToCopyBackward`` the
  same backward (each casts the gradient the other way);
* the root's output, the ``T × V`` logits, is cast to fp32 (``b + f`` per logit, one kernel), and its backward casts
  the gradient back (one kernel). The losses that cast the logits themselves (``logits.to(torch.float32)``:
  NeMo RL's ``ClippedPGLossFn`` on each packed sequence's slice, loss_functions.py l.140; ``get_logprobs``,
  dtensor_policy_worker.py l.991-1012, same commit) now find fp32 and cast nothing, so the root's cast stands in for
  theirs byte for byte: no bytes added, the kernel count one cast in place of ``cast_calls``;
* where the loss slices the packed logits per sequence (``SequencePackingLossWrapper``, loss_functions.py l.621,
  its loop l.658-684),
  each slice's ``SliceBackward`` writes a zero tensor of the whole micro-batch's logits and autograd adds them up
  (``compute.inventory.NEMO_RL_PG_LOSS``: ``b + 3b`` = 8 B per logit per sequence on bf16 logits); on fp32 logits
  that is ``f + 3f`` = 16 B: ``(f + 3f − b − 3b)`` = 8 B per logit per sequence more.

Not counted: the final norm reading its fp32 input (``T·h`` bytes once, under 1/60 of the layer casts at 32
layers). Nothing of this is re-run by v0.3's activation checkpointing, which wraps each layer's MLP only
(parallelize.py l.460-462 @b1c86a81), not a sharded module; a later path that wraps the whole layer (l.505
@7ea279abf) re-runs its casts in the recompute (FSDP2's ``_pre_forward`` / ``_post_forward`` cast in
``PRE_BACKWARD`` too), not counted here. Pure: no torch, no constant fitted (the dtype widths only)."""

from __future__ import annotations

BF16_BYTES = 2.0
FP32_BYTES = 4.0
CAST_BYTES_PER_ELEMENT = BF16_BYTES + FP32_BYTES
"""A bf16 <-> fp32 cast reads one width and writes the other, in either direction."""
SLICE_BACKWARD_WIDTHS = 1.0 + 3.0
"""``SliceBackward``'s zero tensor (one write) and autograd's sum of it into the gradient (two reads, one write), in
element widths per logit per sliced sequence (torch 2.13.0 ``tools/autograd/derivatives.yaml``, ``slice.Tensor``:
``slice_backward_wrapper`` allocates ``zeros(input_sizes)`` and copies the gradient into the slice; the accumulation
of the per-sequence gradients is autograd's ``InputBuffer::add``)."""


def layer_cast_count(*, sharded_layers: int) -> int:
    """Casts of the hidden states per pass: every sharded layer's output to fp32, every input but the first's back
    to bf16 (``2L − 1``; 0 without layers)."""
    return max(0, 2 * int(sharded_layers) - 1)


def fp32_output_cast_bytes(*, tokens: float, hidden_size: float, sharded_layers: int, logits_per_token: float,
                           sliced_sequences: float, backward: bool) -> float:
    """Bytes one pass adds under ``output_dtype=float32`` (module docstring): the layer casts (``(2L − 1)·6·T·h``)
    and, in the backward, the sliced loss's wider ``SliceBackward`` (``8·k·T·V`` for ``k`` sliced sequences; 0 where
    the loss does not slice). The root's logits cast replaces the loss's own, adding no bytes."""
    layers_b = layer_cast_count(sharded_layers=sharded_layers) * CAST_BYTES_PER_ELEMENT * tokens * hidden_size
    if not backward:
        return layers_b
    widths = SLICE_BACKWARD_WIDTHS * (FP32_BYTES - BF16_BYTES)
    slices_b = widths * max(0.0, sliced_sequences) * tokens * logits_per_token
    return layers_b + slices_b


def fp32_output_cast_kernels(*, sharded_layers: int, cast_calls: float) -> float:
    """Kernels one pass adds (forward and backward alike): the layer casts and the root's logits cast, less the
    ``cast_calls`` casts of the logits the loss no longer launches (one per sliced sequence, or one for a whole-row
    loss). May be negative."""
    return layer_cast_count(sharded_layers=sharded_layers) + 1.0 - max(0.0, cast_calls)
