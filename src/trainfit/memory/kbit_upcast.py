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

Under TRL's SFTTrainer (``lora.prepare_kbit`` trl) ``peft_module_casting_to_bf16`` then casts the embeddings and the
head back to bf16 and leaves the norms fp32 (``trl_bf16_cast_saving_bytes``): the embedding and head weights are
2 B, the head saves its own bf16 weight (no copy), and the first layer's checkpointed input is the bf16 embedding
output (the stream turns fp32 at the first MLP's residual add). Mistral-7B 1-GPU QLoRA, fms-acceleration
(published mem_peak_torch_mem_alloc 19.25 / 34.46 GiB): peft 18.85 / 32.96 GiB, trl 18.00 / 31.98 GiB (-6.5 %,
-7.2 %); what the rest is, is open.

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


def head_cast_copy_bytes(*, head_params: float, copy_bytes: float = 2.0) -> float:
    """Bytes of autocast's 16-bit copy of a frozen fp32 head weight that ``F.linear`` saves for the head's input
    gradient (autocast caches only the casts of leaves that require a gradient): ``head_params x copy_bytes``.
    ``head_params``: the head's weights as the plan counts them (``lm_head``, or the tied embedding, times the
    card's count scale). The one term for every frozen fp32 head under 16-bit autocast: this recipe's (``peft``) and
    an adapter on an fp32 base (``plan.terms._autocast_frozen_copies``)."""
    return float(head_params) * copy_bytes


def trl_bf16_cast_saving_bytes(*, embedding_params: float, head_params: float) -> float:
    """Bytes TRL's ``peft_module_casting_to_bf16`` gives back after the recipe: the fp32 embedding and head
    (modules named embed_tokens / wte / wpe / lm_head whose weight is fp32) go back to bf16, ``(embedding_params +
    head_params) x (4 - 2)``; the norms stay fp32 (trl 0.13.0 wheel trl/trainer/utils.py l.872-879, called at
    sft_trainer.py l.227-233; trl 0.12.1 utils.py l.842-849, sft_trainer.py l.286-292). The bf16 head then saves its
    own weight for its input gradient: no ``head_cast_copy_bytes``. PEFT's modules_to_save copies are cast too (their
    names hold those strings); ``plan.terms`` counts them at 2 B already."""
    return (float(embedding_params) + float(head_params)) * (KBIT_UPCAST_PARAM_BYTES - 2)
