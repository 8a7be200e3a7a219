"""The key/value cache a causal-LM forward returns in training (``loop.returns_kv_cache``).

transformers' Llama forward builds ``past_key_values`` whenever ``use_cache`` is on, and ``use_cache`` falls back to
``config.use_cache`` (LlamaConfig default True): only the model's own ``gradient_checkpointing`` flag turns it off
in training (transformers 4.31.0, transformers/models/llama/modeling_llama.py of its PyPI wheel,
https://pypi.org/project/transformers/4.31.0/ read 2026-12-05, l.615, l.658-663).
Each decoder layer returns ``past_key_value = (key_states, value_states)`` (l.324: the rotated keys and the values,
``num_key_value_heads x head_dim`` wide, before ``repeat_kv``) and the model collects them layer by layer
(``next_decoder_cache += ...``, l.704-705) into the output (l.716, ``CausalLMOutputWithPast.past_key_values``).

Without a checkpoint these are the tensors the attention saves for backward anyway (nothing extra). With the decoder
layers checkpointed by a wrapper outside the model (torch's ``apply_activation_checkpointing``, as llama-recipes'
``policies/apply_fsdp_checkpointing`` does, meta-llama/llama-cookbook policies/activation_checkpointing_functions.py
l.17-32 @e5970e2e1f59eb2af513ea269823a3b9bb8f3cc8) the model's flag stays off, the saved tensors are dropped, and the
returned cache is what keeps every layer's keys and values alive: to the end of the forward, and through backward and
the optimizer step when the loop keeps the output bound (``outputs = model(**batch); loss = outputs.loss``, the loop
before llama-recipes PR #41, utils/train_utils.py l.88-89
@1e0f8a1fb77b9ddccf649970f632dd606a22bd06).
"""

from __future__ import annotations


def returned_kv_cache_bytes(*, num_layers: int, micro_batch_size: int, seq_len: int, kv_dim: int,
                            act_bytes: int) -> float:
    """Bytes of one micro-batch's returned cache: a key and a value tensor of ``micro_batch_size x seq_len x
    kv_dim`` in the activation dtype for each of ``num_layers`` attention layers."""
    return float(num_layers * 2 * micro_batch_size * seq_len * kv_dim * act_bytes)
