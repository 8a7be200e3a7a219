"""Memory of PEFT's ``prepare_model_for_kbit_training`` on a 4-bit base (``lora.prepare_kbit``; the time twin is
``compute.kbit_upcast``, whose docstring reads the code).

The recipe casts every bf16 / fp16 parameter that is not a bitsandbytes ``Params4bit`` to float32 (peft 0.21.2
wheel peft/utils/other.py l.204-209; peft 0.13.2 l.126-132): the embeddings, every norm weight and the LM head
hold 4 bytes a parameter instead of 2. They are frozen (l.193-195 sets ``requires_grad = False`` on every
parameter before the adapters are added): no gradients and no optimizer states come with them.

The embedding's fp32 output and the fp32 norms make the residual stream fp32 (transformers' RMSNorm returns
``self.weight * hidden.to(input_dtype)``, fp32 with an fp32 weight and input): a checkpointed layer's saved input,
its hidden states, is 4 bytes an element instead of 2.

The fp32 head is frozen but its input needs a gradient, so autocast's bf16 copy of its weight (not cached: not a
leaf that requires grad) is what ``F.linear`` saves for the head's input gradient: ``vocab x hidden x 2`` bytes live
from the head's forward to its backward, beside the fp32 weight (``head_cast_copy_bytes``).

Checked on CPU (torch 2.13.0, transformers 5.24.0, peft 0.21.2; tests/memory/test_kbit_upcast_memory.py): a 2-layer
Mistral with fp32 embeddings, norms and head, bf16 linears, LoRA on q / v, re-entrant checkpointing under bf16
autocast saves each checkpointed layer's input as fp32 and the head's weight as a bf16 (vocab, hidden) copy.

Not modelled here: the tensors a layer saves inside its recompute (or without checkpointing), where the norms'
inputs, the SwiGLU's inputs and the LoRA dropout's input become fp32 while the fused attention kernel's q / k / v /
output and autocast's casts stay bf16; the final norm's fp32 input; the parallel layouts of ``plan.ranks``. No
fake-tensor trace check (the trace builds no bitsandbytes model with fp32 norms).
"""

from __future__ import annotations

KBIT_UPCAST_PARAM_BYTES = 4
"""Bytes of a non-4-bit parameter after the recipe's ``param.data.to(torch.float32)`` (peft other.py l.209)."""
KBIT_STREAM_BYTES = 4
"""Bytes of a residual-stream element once the embedding and norms are fp32."""


def checkpoint_input_extra_bytes(*, tokens: float, hidden_size: int, stream_bytes: float = 2.0) -> float:
    """Bytes one checkpointed layer's saved input adds when the stream is fp32 over a ``stream_bytes`` stream:
    ``tokens x hidden_size x (4 - stream_bytes)``."""
    return float(tokens) * hidden_size * (KBIT_STREAM_BYTES - stream_bytes)


def head_cast_copy_bytes(*, vocab_size: int, hidden_size: int, copy_bytes: float = 2.0) -> float:
    """Bytes of autocast's 16-bit copy of the fp32 head weight that ``F.linear`` saves for the head's input
    gradient: ``vocab_size x hidden_size x copy_bytes``."""
    return float(vocab_size) * hidden_size * copy_bytes
