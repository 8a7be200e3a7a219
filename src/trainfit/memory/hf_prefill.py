"""transformers' ``generate`` on the trained model: the prefill's activations next to the KV cache.

One generate call first runs the whole input of each of its sequences through the model (the prefill) with
``logits_to_keep = 1`` (transformers 5.24.0 generation/utils.py lines 2952-2956: only the last position's logits),
then decodes one token per sequence per step. The prefill's peak is inside the last decoder layer's MLP
(models/qwen3/modeling_qwen3.py line 82, ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``): per input token

* three intermediate-sized tensors: the activated gate, the up projection and their product (the gate
  projection itself is freed once the activation returns);
* four hidden-sized ones: the embedding output (``inputs_embeds``, referenced by the model's forward until it
  returns, line 375), the layer's input (the caller's ``hidden_states``), the attention residual (line 310) and
  the post-attention norm's output (line 64) — three in a one-layer model, whose layer input is the embedding
  output;
* the rotary ``cos`` and ``sin`` of the position (lines 126-127, head_dim each);
* every layer's keys and values (cache_utils.py lines 136-137, at the dtype the projections produce: the compute
  dtype, not a fixed bf16).

At the end of the decode the cache holds every sequence's prompt and response (plus the last-token logits,
copied to fp32 for the logits processors, generation/utils.py line 3248). The call's peak is the larger of the
two. Measured on the acceptance policy (hidden 64, intermediate 128, 2 layers, fp32) by PyTorch's MemTracker,
a 252-token prefill held 0.77 MiB of generation tensors; this term gives the same to within one tensor's 512-byte
rounding per tensor (``tests/memory/test_hf_prefill.py``). Pure: no torch.
"""

from __future__ import annotations

PREFILL_INTERMEDIATE_TENSORS = 3
"""Intermediate-sized tensors alive at the MLP's product (activated gate, up projection, product): the gated MLP's
``self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))`` (transformers/models/qwen3/modeling_qwen3.py,
transformers 5.24.0, ``Qwen3MLP.forward``) holds all three when the product is formed."""


def prefill_hidden_tensors(*, num_layers: int) -> int:
    """Hidden-sized tensors alive at the last layer's MLP: embedding output, layer input, attention residual, norm
    output; in a one-layer model the layer input is the embedding output."""
    return 4 if num_layers > 1 else 3


def hf_prefill_activation_bytes_per_token(*, num_layers: int, hidden_size: int, intermediate_size: int,
                                          head_dim: int, dtype_bytes: int) -> float:
    """Bytes per prefilled token of one decoder layer's activations at the prefill's peak (the KV cache apart)."""
    elems = (prefill_hidden_tensors(num_layers=num_layers) * hidden_size
             + PREFILL_INTERMEDIATE_TENSORS * intermediate_size + 2 * head_dim)
    return float(elems * dtype_bytes)


def hf_generate_peak_bytes(*, sequences: int, prefill_tokens: int, total_tokens: int, kv_bytes_per_token: float,
                           activation_bytes_per_token: float, vocab_size: int) -> float:
    """Peak bytes of one generate call of ``sequences`` sequences: the prefill of ``prefill_tokens`` input tokens
    each (the KV cache of those tokens plus one layer's activations) or the end of the decode (the KV cache of
    ``total_tokens`` each plus the last-token fp32 logits), whichever is larger. ``kv_bytes_per_token``: all
    layers' keys and values of one token at the compute dtype."""
    prefill = sequences * prefill_tokens * (kv_bytes_per_token + activation_bytes_per_token)
    decode_end = sequences * total_tokens * kv_bytes_per_token + sequences * vocab_size * 4.0
    return max(prefill, decode_end)
